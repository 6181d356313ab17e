"""Deployments (DESIGN 12): several requests with link constraints, placed all or nothing across
this cluster and its up peers (the heuristic is federation/deploy.py, pure; this is its I/O),
and their records: what a deployment placed where, kept in Redis.

A deployment's request is created here by this cluster's own policy at once (never offloaded,
manager/submit.py's ``place_here``), or at a peer by the offload's forward, with a record here
so that status and stop work through this cluster (manager/offload.py).

=================================  ==============================================================
 key                                holds
=================================  ==============================================================
 ``{p}:deployment:{name}``          string: the deployment as JSON {"name", "status", "created_at",
                                    "requests": [{"name", "id", "cluster"}], "links", "cost",
                                    "reason"}; written once with SET NX while it is placed, so
                                    two deployments never take one name
 ``{p}:deployments``                sorted set: every deployment name by creation time
=================================  ==============================================================
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis

from domain.errors import (
    ConflictError,
    DamagedRecordError,
    DeploymentRefused,
    GreenSwarmError,
    NotFoundError,
    UnavailableError,
)
from domain.events import Rejected
from domain.lifecycle import FINAL, RequestStatus
from federation.deploy import Creation, Deployed, Member, Site, Undone, deploy, federation_for
from federation.offload import advertise
from federation.peers import PeerState
from federation.placement import ClusterLink, Refusal
from host_registry.redis_store import RedisStore, redis_errors
from manager.endings import RAW_LOGGED, Endings, Removed
from manager.faults import RecordFaults
from manager.loop import SchedulingLoop
from manager.offload import Offer, Offloading
from manager.peering import Forward, Peering
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.spec import parse_deployment
from manager.submit import Submissions
from manager.views import Views

log = logging.getLogger(__name__)


class DeploymentStatus(StrEnum):
    PLACING = "placing"  # its requests are being created
    DEPLOYED = "deployed"  # every request was created
    UNDONE = "undone"  # a creation failed: what was created is stopped again
    STOPPED = "stopped"  # DELETE /deployments/{name}


class DeploymentRecords:
    def __init__(self, client: redis.Redis, prefix: str = "gs") -> None:
        self._redis: Any = client
        self.prefix = prefix

    def _key(self, name: str) -> str:
        return f"{self.prefix}:deployment:{name}"

    def reserve(self, name: str) -> None:
        """Take the name (ConflictError when a deployment has it)."""
        now = time.time()
        record = {"name": name, "status": DeploymentStatus.PLACING.value, "created_at": now,
                  "requests": [], "links": [], "cost": None, "reason": None}
        with redis_errors():
            if not self._redis.set(self._key(name), json.dumps(record), nx=True):
                raise ConflictError(f"a deployment named {name!r} already exists")
            self._redis.zadd(f"{self.prefix}:deployments", {name: now})

    def release(self, name: str) -> tuple[str | None, float | None]:
        """Give the name back: the record goes, whatever it holds (a deployment refused before
        anything was created, one stopped, or one that cannot be read: DESIGN 9). What it held
        and when it was created, as they were (None for what was not there)."""
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.get(self._key(name))
            pipe.zscore(f"{self.prefix}:deployments", name)
            pipe.delete(self._key(name))
            pipe.zrem(f"{self.prefix}:deployments", name)
            raw, created_at, *_ = pipe.execute()
        return raw, created_at

    def save(self, name: str, **fields: Any) -> dict[str, Any]:
        record = self.get(name)
        record.update(fields)
        with redis_errors():
            self._redis.set(self._key(name), json.dumps(record))
        return record

    def get(self, name: str) -> dict[str, Any]:
        with redis_errors():
            raw = self._redis.get(self._key(name))
        if raw is None:
            raise NotFoundError(f"no deployment named {name!r}")
        try:
            record = json.loads(raw)
            if (not isinstance(record, dict) or not isinstance(record.get("requests"), list)
                    or not {"name", "status", "created_at"} <= record.keys()):
                raise TypeError("not an object with a name, a status, a creation time and a "
                                "list of requests")
        except (ValueError, TypeError) as exc:
            raise DamagedRecordError(f"deployment {name!r}: its record cannot be read "
                                     f"({type(exc).__name__}: {exc})") from exc
        return record

    def names(self, limit: int = 1000) -> list[str]:
        with redis_errors():
            return list(self._redis.zrange(f"{self.prefix}:deployments", -limit, -1))


class Deployments:
    """POST, GET and DELETE /deployments."""

    def __init__(self, settings: ManagerSettings, store: RedisStore, records: RequestRecords,
                 loop: SchedulingLoop, peering: Peering, submissions: Submissions,
                 offloading: Offloading, endings: Endings, views: Views,
                 faults: RecordFaults) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.loop = loop
        self.peering = peering
        self.submissions = submissions
        self.offloading = offloading
        self.endings = endings
        self.views = views
        self.faults = faults  # told of a record the list cannot read (the health check lists it)
        self.deployment_records = store.sibling(DeploymentRecords)

    def deploy(self, body: Any) -> dict[str, Any]:
        """Place a deployment across this cluster and its up peers, all or nothing, and create
        it (federation/deploy.py); DeploymentRefused (409) when it cannot be, with nothing of
        it left running."""
        max_cpu, max_memory = self.submissions.request_bounds(with_peers=True)
        spec = parse_deployment(body, max_cpu_shares=max_cpu, max_memory=max_memory)
        for member in spec.members:
            if self.records.exists(member.request.id):
                raise ConflictError(f"a request named {member.request.id!r} already exists")
        self.deployment_records.reserve(spec.name)
        try:
            home = self.settings.federation_name
            sites = [Site(view.advert, ClusterLink(view.peer.latency_ms,
                                                   view.peer.bandwidth_mbit))
                     for view in self.peering.views(fresh=True)
                     if view.state is PeerState.UP and view.advert is not None]
            federation = federation_for(
                spec, advertise(home, self.store, self.settings.power_model), sites)
            result = deploy(spec, federation, _Creator(self, spec.name))
        except BaseException:
            self.deployment_records.release(spec.name)
            raise
        links = [{"a": link.a, "b": link.b, "max_latency_ms": link.max_latency_ms,
                  "min_bandwidth_mbit": link.min_bandwidth_mbit} for link in spec.links]
        if isinstance(result, Refusal):
            self.deployment_records.release(spec.name)
            raise DeploymentRefused(spec.name, result.job, result.reason, created=[])
        if isinstance(result, Undone):
            self.deployment_records.save(
                spec.name, status=DeploymentStatus.UNDONE.value, links=links,
                reason=f"{result.request} on {result.cluster}: {result.reason}",
                requests=[{"name": m.name, "id": m.request.id, "cluster": None}
                          for m in spec.members])
            raise DeploymentRefused(spec.name, result.request, result.reason,
                                    cluster=result.cluster,
                                    left=[{"request": r, "why": w} for r, w in result.left])
        assert isinstance(result, Deployed)
        self.deployment_records.save(
            spec.name, status=DeploymentStatus.DEPLOYED.value, links=links,
            cost=result.placement.cost,
            requests=[{"name": p.name, "id": p.request_id, "cluster": p.cluster}
                      for p in result.placed])
        return self.deployment_json(spec.name)

    def deployment_json(self, name: str) -> dict[str, Any]:
        """A deployment's record, each request with its status and host now (an offloaded one
        as its peer has it; with ``error`` when the peer does not answer)."""
        record = self.deployment_records.get(name)
        requests = []
        for item in record["requests"]:
            entry = dict(item)
            try:
                now = self.views.request_json(item["id"], history=False, remote=True)
                entry.update(status=now["status"], host=now["host"])
            except (UnavailableError, DamagedRecordError) as exc:
                entry.update(status=None, host=None, error=str(exc))
            except NotFoundError:
                entry.update(status=None, host=None)
            requests.append(entry)
        return {**record, "requests": requests}

    def deployments_json(self, limit: int) -> list[dict[str, Any]]:
        out = []
        for name in self.deployment_records.names(limit):
            try:
                record = self.deployment_records.get(name)
            except DamagedRecordError as exc:  # one bad record never hides the others
                self.faults.fail("deployment", name, str(exc))
                continue
            except NotFoundError:
                continue  # released between the two reads (a deployment refused)
            out.append({key: record[key] for key in ("name", "status", "created_at")}
                       | {"requests": len(record["requests"])})
        return out

    def undeploy(self, name: str) -> dict[str, Any]:
        """Stop every request of a deployment, here and at the peers; a 503 naming those that
        could not be stopped (the others are)."""
        try:
            record = self.deployment_records.get(name)
        except DamagedRecordError as exc:
            return self._remove_damaged(name, str(exc))
        failed = []
        removed: dict[str, str] = {}
        for item in record["requests"]:
            try:
                stopped = self.endings.stop_request(item["id"])
            except NotFoundError:
                continue
            except GreenSwarmError as exc:
                failed.append(f"{item['name']}: {exc}")
                continue
            if isinstance(stopped, Removed):  # its record could not be read (DESIGN 9)
                removed[item["id"]] = stopped.event.reason
        if failed:
            raise UnavailableError(f"deployment {name!r}: not stopped: " + "; ".join(failed))
        if record["status"] != DeploymentStatus.UNDONE.value:
            self.deployment_records.save(name, status=DeploymentStatus.STOPPED.value)
        final = self.deployment_json(name)
        for entry in final["requests"]:
            if entry["id"] in removed:
                entry.update(status=RequestStatus.STOPPED.value, error=removed[entry["id"]])
        self.deployment_records.release(name)  # gone: GET answers 404, and the name is free again
        return final

    def _remove_damaged(self, name: str, why: str) -> dict[str, Any]:
        """DELETE of a deployment whose record cannot be read (DESIGN 9): its requests are not
        known, so they run on (each can be stopped on its own); the record is removed, what it
        held written to the log. The answer has a deployment's form with no request and
        ``removed`` saying why."""
        raw, created_at = self.deployment_records.release(name)
        if raw is None:
            raise NotFoundError(f"no deployment named {name!r}")
        self.faults.forget(name, "deployment")
        log.warning("deployment %s: its record could not be read (%s); removed through the API;"
                    " it held: %s", name, why, raw[:RAW_LOGGED])
        return {"name": name, "status": DeploymentStatus.STOPPED.value,
                "created_at": created_at or 0.0, "requests": [], "links": [], "cost": None,
                "reason": None, "removed": f"its record could not be read and was removed "
                f"({why}); its requests, if any, run on"}

    # -- creating and removing a deployment's requests ------------------------------------------

    def create_here(self, member: Member) -> Creation:
        """On the loop: a deployment's request placed by this cluster's own policy, now."""
        request = member.request
        if self.records.exists(request.id):
            return Creation(False, reason=f"a request named {request.id!r} already exists")
        self.records.create(request.id, dict(member.spec))
        if self.submissions.by_swarm:
            self.submissions.swarm.hand_to_swarm(request, dict(member.spec))
            record = self.records.get(request.id)
            return Creation(True, record.status.value, record.host)
        submitted = self.submissions.place_here(request, False)
        record = submitted.record
        if record.status is RequestStatus.REJECTED or record.status in FINAL:
            why = (submitted.decision or {}).get("reason") or record.status.value
            return Creation(False, record.status.value, reason=f"{self.settings.federation_name}"
                            f" did not place it: {why}")
        return Creation(True, record.status.value, record.host)

    def create_at_peer(self, member: Member, peer: str) -> Creation:
        """A deployment's request forwarded to ``peer`` (its policy places it, now), with its
        record here (stop and status work through this cluster)."""
        request = member.request
        home = self.settings.federation_name

        def record() -> bool:
            if self.records.exists(request.id):
                return False
            self.records.create(request.id, dict(member.spec))
            return True

        if not self.loop.call(record):
            return Creation(False, reason=f"a request named {request.id!r} already exists")
        forwarded = self.peering.forward(
            peer, {**member.spec, "queue": False, "forwarded_from": home})
        offer = Offer(request, dict(member.spec), False)
        if forwarded.outcome is Forward.PLACED:
            done = self.loop.call(
                functools.partial(self.offloading.offloaded, offer, peer, forwarded))
            return Creation(True, done.record.status.value, done.record.host)

        def refused() -> None:
            self.records.update(request.id, Rejected(forwarded.reason, cluster=peer),
                                status=RequestStatus.REJECTED)

        self.loop.call(refused)
        return Creation(False, reason=forwarded.reason,
                        maybe_held=forwarded.outcome is Forward.UNKNOWN)

    def remove_created(self, member: Member, cluster: str) -> str | None:
        """Stop a request a deployment created (it is being undone); why not, if it fails."""
        request_id = member.request.id
        try:
            record = self.records.get(request_id)
            if cluster == self.settings.federation_name or (
                    record.cluster == cluster and record.status not in FINAL):
                self.endings.stop_request(request_id)
                return None
            with contextlib.suppress(NotFoundError):  # its forward's answer was lost
                self.peering.stop_request(cluster, request_id)
        except GreenSwarmError as exc:
            return str(exc)
        return None


@dataclass(frozen=True)
class _Creator:
    """federation.deploy's Creator: a deployment's requests created here and at the peers."""

    deployments: Deployments
    deployment: str

    def create(self, member: Member, cluster: str) -> Creation:
        deployments = self.deployments
        if cluster == deployments.settings.federation_name:
            return deployments.loop.call(lambda: deployments.create_here(member))
        return deployments.create_at_peer(member, cluster)

    def remove(self, member: Member, cluster: str) -> str | None:
        return self.deployments.remove_created(member, cluster)
