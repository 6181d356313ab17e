"""The live service: requests in, the scheduler's decisions carried out on a real Swarm.

Everything that changes the books runs on the one scheduling loop. A decision is applied to
the registries first (by the Scheduler), then carried out (manager/effects.py); the periodic
reconciliation with the Swarm (manager/reconcile.py) brings nodes and services in line.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from domain.classes import CLASSES
from domain.errors import (
    AdmissionRefused,
    ConflictError,
    DeploymentRefused,
    GreenSwarmError,
    NotFoundError,
    UnavailableError,
)
from domain.events import Event, EventKind
from domain.lifecycle import FINAL, EndStatus, RequestStatus, TaskEnd
from domain.model import HostSpec, HostView, Request, Task, TaskType, check_id
from domain.pending import PendingReason
from domain.service_history import service_level
from federation.deploy import Creation, Deployed, Member, Site, Undone, deploy, federation_for
from federation.offload import advertise
from federation.peers import (
    OffloadMode,
    PeerState,
    plan_offload,
    request_bounds,
    wants_offload,
)
from federation.placement import ClusterLink, Refusal
from host_registry.power import RedisPowerReadings
from host_registry.redis_store import RedisStore
from manager.agents import AgentClient
from manager.deployments import DeploymentRecords, DeploymentStatus
from manager.effects import Effects
from manager.loop import SchedulingLoop
from manager.metrics import ManagerMetrics, StateCollector
from manager.peering import Forward, Forwarded, Peering
from manager.power import PowerView
from manager.reconcile import SwarmSync
from manager.records import RequestRecord, RequestRecords
from manager.settings import ManagerSettings
from manager.spec import parse_deployment, parse_spec
from manager.swarm import SwarmBackend
from scheduler.plugin import PlacedBy
from scheduler.service import Outcome, Scheduler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submitted:
    """What POST /requests answers: the record, and the decision as JSON (None under the
    'swarm' policy): this cluster's, with the scheduler's own time ``decision_ms`` (Docker work
    excluded), or the peer's that placed an offloaded request, with its ``cluster``."""

    record: RequestRecord
    decision: dict[str, Any] | None


@dataclass(frozen=True)
class _Offer:
    """A new request recorded here and meant for a peer (the scheduling loop let go of it)."""

    request: Request
    spec: dict[str, Any]
    queue: bool | None


@dataclass
class _State:
    retry_queued: bool = False
    freed: set[str] = field(default_factory=set)  # hosts to give cuts back on at the retry


class Manager:
    def __init__(
        self,
        settings: ManagerSettings,
        store: RedisStore,
        records: RequestRecords,
        backend: SwarmBackend,
        agents: AgentClient,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.backend = backend
        self.agents = agents
        self.clock = clock
        plugin = settings.plugin
        self.by_swarm = plugin.placed_by is PlacedBy.SWARM
        self.slo = settings.slo_table
        self.scheduler = Scheduler(store, plugin.make(settings.options, settings.seed),
                                   admits_to_queue=plugin.admits_to_queue,
                                   freshness=settings.cluster.freshness(),
                                   slo=self.slo, alpha_s=settings.allocation_s,
                                   admission=settings.admission)
        self.loop = SchedulingLoop()
        self.power = PowerView(settings.power_model, RedisPowerReadings(store.client,
                                                                        settings.redis_prefix),
                               clock(), stale_after_s=settings.cluster.stale_after_s)
        self.metrics = ManagerMetrics(StateCollector(
            store.all_hosts, self.host_name, store.pending, records.counts, clock, self.power))
        self.effects = Effects(store, records, backend, agents, self.room_freed,
                               observe=self.metrics.observe)
        self.swarm = SwarmSync(settings, store, records, backend, self.scheduler, self.effects,
                               clock, self.queue_retry, by_swarm=self.by_swarm)
        self.peering = Peering(settings.federation_name, settings.peers(),
                               refresh_s=settings.peer_refresh_s,
                               timeout_s=settings.peer_timeout_s, clock=clock)
        self.deployments = DeploymentRecords(store.client, settings.redis_prefix)
        self._state = _State()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="manager-timer", daemon=True)

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop, reconcile with the Swarm once, then keep doing so on a timer."""
        self.loop.start()
        try:
            self.loop.call(self.swarm.sync)
        except GreenSwarmError as exc:
            log.warning("first reconciliation failed (%s); retrying on the timer", exc)
        self._timer.start()
        self.peering.start()

    def stop(self) -> None:
        self._stop.set()
        self.peering.stop()
        self.loop.stop()

    def _tick(self) -> None:
        next_sync = time.monotonic() + self.settings.sync_interval_s  # start() just did one
        next_retry = 0.0
        while not self._stop.wait(0.5):
            now = time.monotonic()
            if now >= next_sync:
                next_sync = now + self.settings.sync_interval_s
                self.loop.post(self._sync_logged)
                self._meter_power()
            if now >= next_retry:
                next_retry = now + self.settings.retry_interval_s
                self.queue_retry()

    def _meter_power(self) -> None:
        """The cluster's power now, into its kWh so far (every sync interval)."""
        try:
            self.power.meter(self.clock(), self.store.all_hosts())
        except GreenSwarmError as exc:
            log.warning("power: cannot read the hosts: %s", exc)

    def _sync_logged(self) -> None:
        try:
            self.swarm.sync()
        except GreenSwarmError as exc:
            log.warning("reconciliation with the Swarm failed: %s", exc)

    # -- requests (called from REST threads) ------------------------------------------------

    def submit(self, body: Any) -> Submitted:
        """Decide a new request here, or offload it to a peer (DESIGN 12): the peer HTTP calls
        run on the caller's thread, never on the scheduling loop."""
        forwarded_from = None
        if isinstance(body, dict) and "forwarded_from" in body:
            body = dict(body)
            forwarded_from = check_id(body.pop("forwarded_from"), "forwarded_from")
        max_cpu, max_memory = self._request_bounds(
            with_peers=self.settings.offload is not OffloadMode.OFF and forwarded_from is None)
        request, spec, queue = parse_spec(body, max_cpu_shares=max_cpu, max_memory=max_memory)
        first = self.loop.call(lambda: self._submit(request, spec, queue, forwarded_from))
        return self._offload(first) if isinstance(first, _Offer) else first

    def _request_bounds(self, *, with_peers: bool) -> tuple[int, int]:
        """The largest CPU shares and memory a new request may ask for (with the peers' rooms
        when it may go to one); unavailable while no host is known."""
        hosts = [(h.cpu_capacity, h.memory_capacity) for h in self.store.all_hosts()]
        if not hosts:
            raise UnavailableError("no host is known yet: is any Swarm node Ready and Active?")
        return request_bounds(hosts, self.peering.views(), with_peers=with_peers)

    def _submit(
        self, request: Request, spec: dict[str, Any], queue: bool | None,
        forwarded_from: str | None,
    ) -> Submitted | _Offer:
        if self.records.exists(request.id):
            raise ConflictError(f"a request named {request.id!r} already exists")
        waits = self.scheduler.admits_to_queue if queue is None else queue
        if not self.by_swarm and waits:
            self._admit(request, queue)
        self.records.create(request.id, spec, forwarded_from=forwarded_from)
        if self.by_swarm:
            self.swarm.hand_to_swarm(request, spec)
            return Submitted(self.records.get(request.id), None)
        mode = self.settings.offload
        if mode is not OffloadMode.OFF and forwarded_from is None and not waits:
            decision = self.scheduler.preview(request, self.clock())
            if wants_offload(decision, mode, forwarded_from=forwarded_from, waits=waits):
                return _Offer(request, spec, queue)
        return self._place_here(request, queue)

    def _admit(self, request: Request, queue: bool | None) -> None:
        """Admission control (DESIGN 3.13) of a request that would wait, against the books as
        they are (other paths change them too: read again first). Refused: nothing is recorded
        but a typed event in the events stream, it is counted, and AdmissionRefused (503 with
        Retry-After) says why."""
        if self.scheduler.ledger is None:
            return
        self.scheduler.resync_admission(self.store.tasks())
        refusal = self.scheduler.admission_refusal(request, queue=queue)
        if refusal is None:
            return
        # no admitted request says when it ends: the queue's next retry is the next chance
        retry_after_s = self.scheduler.ledger.retry_after_s(
            refusal.cls, self.clock(), self.settings.retry_interval_s)
        self.records.note(request.id, Event(
            EventKind.REFUSED_AT_ADMISSION, refusal.reason, resource=refusal.resource.value,
            demand=refusal.demand, room=refusal.room, retry_after_s=retry_after_s))
        self.metrics.refused_at_admission(refusal.cls, refusal.resource.value)
        raise AdmissionRefused(refusal.reason, retry_after_s, request=request.id,
                               **refusal.to_dict())

    def _place_here(self, request: Request, queue: bool | None,
                    not_offloaded: str | None = None) -> Submitted:
        """This cluster's own decision, applied and carried out; a refusal's reason also says
        why no peer took it (``not_offloaded``)."""
        started = time.perf_counter()
        outcome = self.scheduler.submit(request, self.clock(), queue=queue)
        decision_ms = (time.perf_counter() - started) * 1000
        if not_offloaded is not None:
            _note_refusals(outcome, request.id, f"not offloaded: {not_offloaded}")
        self.effects.carry_out(outcome)
        decision = outcome.decision_for(request.id)
        return Submitted(self.records.get(request.id),
                         None if decision is None else
                         {**decision.to_dict(), "decision_ms": round(decision_ms, 3)})

    def _offload(self, offer: _Offer) -> Submitted:
        """Forward the request to the cheapest up peer that says it fits (then the next, while
        they refuse it outright); decided here as usual when none takes it."""
        name = self.settings.federation_name
        plan = plan_offload(offer.request, self.peering.views(fresh=True), home=name)
        body = {**offer.spec, "queue": False, "forwarded_from": name}
        notes: list[str] = []
        for peer in plan.peers:
            forwarded = self.peering.forward(peer, body)
            if forwarded.outcome is Forward.PLACED:
                return self.loop.call(functools.partial(self._offloaded, offer, peer, forwarded))
            notes.append(forwarded.reason)
            if forwarded.outcome is Forward.UNKNOWN:
                break  # it may run there: asking another peer could place it twice
        if notes:
            why = "; ".join([*notes, *(f"peer {p} is down: {e}" for p, e in plan.down)])
        else:
            why = plan.why_none()
        down = tuple(p for p, _ in plan.down)
        return self.loop.call(lambda: self._not_offloaded(offer, why, down))

    def _offloaded(self, offer: _Offer, peer: str, forwarded: Forwarded) -> Submitted:
        request_id = offer.request.id
        record = self.records.get(request_id)
        remote = forwarded.record or {}
        host = remote.get("host") if isinstance(remote.get("host"), str) else None
        if record.status in FINAL:  # stopped by the client while it was being forwarded
            self.loop.post(lambda: self._stop_late(peer, request_id))
            return Submitted(record, None)
        name = remote.get("host_name") if host and isinstance(remote.get("host_name"), str) \
            else None
        self.records.update(
            request_id,
            Event(EventKind.OFFLOADED, f"offloaded to cluster {peer}: {forwarded.status.value}"
                  + (f" on {name or host}" if host else ""), cluster=peer, host=host),
            status=forwarded.status, host=host, cluster=peer, host_name=name,
        )
        decision = forwarded.decision or {
            "placed": True, "host": host, "pass": None, "cuts": [], "kills": [],
            "reason": f"cluster {peer} holds it (forwarded before)",
        }
        return Submitted(self.records.get(request_id), {**decision, "cluster": peer})

    def _stop_late(self, peer: str, request_id: str) -> None:
        """Best effort, off the caller's way: the peer placed what the client stopped here."""
        threading.Thread(target=self._stop_remote_quietly, args=(peer, request_id),
                         name="peer-stop", daemon=True).start()

    def _stop_remote_quietly(self, peer: str, request_id: str) -> None:
        try:
            self.peering.stop_request(peer, request_id)
        except GreenSwarmError as exc:
            log.warning("could not stop %s at peer %s: %s", request_id, peer, exc)

    def _not_offloaded(self, offer: _Offer, why: str, down: tuple[str, ...]) -> Submitted:
        record = self.records.get(offer.request.id)
        if record.status in FINAL:  # stopped by the client meanwhile
            return Submitted(record, None)
        self.records.update(
            offer.request.id,
            Event(EventKind.NOT_OFFLOADED, f"not offloaded: {why}", peers_down=down),
        )
        return self._place_here(offer.request, offer.queue, not_offloaded=why)

    def stop_request(self, request_id: str) -> RequestRecord:
        record = self.records.get(request_id)
        if record.cluster is not None and record.status not in FINAL:
            return self._stop_offloaded(record)
        return self.loop.call(lambda: self._stop_request(request_id))

    def _stop_offloaded(self, record: RequestRecord) -> RequestRecord:
        """Stop an offloaded request at its peer, then here (a 503 naming the peer when it
        does not answer: nothing changes here then)."""
        peer = record.cluster or ""
        try:
            remote = self.peering.stop_request(peer, record.id)
        except NotFoundError:
            remote = {}
        try:
            status = RequestStatus(str(remote.get("status")))
        except ValueError:
            status = RequestStatus.STOPPED
        if status not in FINAL:
            status = RequestStatus.STOPPED
        why = (f"stopped by the client, in cluster {peer}" if remote else
               f"stopped by the client; cluster {peer} no longer knew it")

        def note() -> RequestRecord:
            if self.records.status_of(record.id) not in FINAL:
                self.records.update(record.id, Event(EventKind.STOPPED, why, cluster=peer),
                                    status=status)
            return self.records.get(record.id)

        return self.loop.call(note)

    def _stop_request(self, request_id: str) -> RequestRecord:
        record = self.records.get(request_id)
        if record.status in FINAL:
            return record
        if self.store.remove_pending(request_id):
            self.records.update(
                request_id,
                Event(EventKind.STOPPED, "stopped by the client while pending"),
                status=RequestStatus.STOPPED,
            )
            return self.records.get(request_id)
        self.backend.remove(request_id)
        if self.store.task(request_id) is not None:
            _, outcome = self.scheduler.task_ended(request_id, self.clock())
            self.effects.carry_out(outcome)
        self.records.update(
            request_id, Event(EventKind.STOPPED, "stopped by the client"),
            status=RequestStatus.STOPPED,
        )
        return self.records.get(request_id)

    # -- deployments (DESIGN 12) ------------------------------------------------------------

    def deploy(self, body: Any) -> dict[str, Any]:
        """Place a deployment across this cluster and its up peers, all or nothing, and create
        it (federation/deploy.py); DeploymentRefused (409) when it cannot be, with nothing of
        it left running."""
        max_cpu, max_memory = self._request_bounds(with_peers=True)
        spec = parse_deployment(body, max_cpu_shares=max_cpu, max_memory=max_memory)
        for member in spec.members:
            if self.records.exists(member.request.id):
                raise ConflictError(f"a request named {member.request.id!r} already exists")
        self.deployments.reserve(spec.name)
        try:
            home = self.settings.federation_name
            sites = [Site(view.advert, ClusterLink(view.peer.latency_ms,
                                                   view.peer.bandwidth_mbit))
                     for view in self.peering.views(fresh=True)
                     if view.state is PeerState.UP and view.advert is not None]
            federation = federation_for(
                spec, advertise(home, self.store, self.settings.power_model), sites)
            result = deploy(spec, federation, _DeploymentCreator(self, spec.name))
        except BaseException:
            self.deployments.release(spec.name)
            raise
        links = [{"a": link.a, "b": link.b, "max_latency_ms": link.max_latency_ms,
                  "min_bandwidth_mbit": link.min_bandwidth_mbit} for link in spec.links]
        if isinstance(result, Refusal):
            self.deployments.release(spec.name)
            raise DeploymentRefused(spec.name, result.job, result.reason, created=[])
        if isinstance(result, Undone):
            self.deployments.save(
                spec.name, status=DeploymentStatus.UNDONE.value, links=links,
                reason=f"{result.request} on {result.cluster}: {result.reason}",
                requests=[{"name": m.name, "id": m.request.id, "cluster": None}
                          for m in spec.members])
            raise DeploymentRefused(spec.name, result.request, result.reason,
                                    cluster=result.cluster,
                                    left=[{"request": r, "why": w} for r, w in result.left])
        assert isinstance(result, Deployed)
        self.deployments.save(
            spec.name, status=DeploymentStatus.DEPLOYED.value, links=links,
            cost=result.placement.cost,
            requests=[{"name": p.name, "id": p.request_id, "cluster": p.cluster}
                      for p in result.placed])
        return self.deployment_json(spec.name)

    def deployment_json(self, name: str) -> dict[str, Any]:
        """A deployment's record, each request with its status and host now (an offloaded one
        as its peer has it; with ``error`` when the peer does not answer)."""
        record = self.deployments.get(name)
        requests = []
        for item in record["requests"]:
            entry = dict(item)
            try:
                now = self.request_json(item["id"], history=False, remote=True)
                entry.update(status=now["status"], host=now["host"])
            except UnavailableError as exc:
                entry.update(status=None, host=None, error=str(exc))
            except NotFoundError:
                entry.update(status=None, host=None)
            requests.append(entry)
        return {**record, "requests": requests}

    def deployments_json(self, limit: int) -> list[dict[str, Any]]:
        out = []
        for name in self.deployments.names(limit):
            record = self.deployments.get(name)
            out.append({key: record[key] for key in ("name", "status", "created_at")}
                       | {"requests": len(record["requests"])})
        return out

    def undeploy(self, name: str) -> dict[str, Any]:
        """Stop every request of a deployment, here and at the peers; a 503 naming those that
        could not be stopped (the others are)."""
        record = self.deployments.get(name)
        failed = []
        for item in record["requests"]:
            try:
                self.stop_request(item["id"])
            except NotFoundError:
                continue
            except GreenSwarmError as exc:
                failed.append(f"{item['name']}: {exc}")
        if failed:
            raise UnavailableError(f"deployment {name!r}: not stopped: " + "; ".join(failed))
        if record["status"] != DeploymentStatus.UNDONE.value:
            self.deployments.save(name, status=DeploymentStatus.STOPPED.value)
        return self.deployment_json(name)

    def _create_here(self, member: Member, deployment: str) -> Creation:
        """On the loop: a deployment's request placed by this cluster's own policy, now."""
        request = member.request
        if self.records.exists(request.id):
            return Creation(False, reason=f"a request named {request.id!r} already exists")
        self.records.create(request.id, dict(member.spec))
        if self.by_swarm:
            self.swarm.hand_to_swarm(request, dict(member.spec))
            record = self.records.get(request.id)
            return Creation(True, record.status.value, record.host)
        submitted = self._place_here(request, False)
        record = submitted.record
        if record.status is RequestStatus.REJECTED or record.status in FINAL:
            why = (submitted.decision or {}).get("reason") or record.status.value
            return Creation(False, record.status.value, reason=f"{self.settings.federation_name}"
                            f" did not place it: {why}")
        return Creation(True, record.status.value, record.host)

    def _create_at_peer(self, member: Member, peer: str) -> Creation:
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
        offer = _Offer(request, dict(member.spec), False)
        if forwarded.outcome is Forward.PLACED:
            done = self.loop.call(functools.partial(self._offloaded, offer, peer, forwarded))
            return Creation(True, done.record.status.value, done.record.host)

        def refused() -> None:
            self.records.update(request.id, Event(EventKind.REJECTED, forwarded.reason,
                                                  cluster=peer),
                                status=RequestStatus.REJECTED)

        self.loop.call(refused)
        return Creation(False, reason=forwarded.reason,
                        maybe_held=forwarded.outcome is Forward.UNKNOWN)

    def _remove_created(self, member: Member, cluster: str) -> str | None:
        """Stop a request a deployment created (it is being undone); why not, if it fails."""
        request_id = member.request.id
        try:
            record = self.records.get(request_id)
            if cluster == self.settings.federation_name or (
                    record.cluster == cluster and record.status not in FINAL):
                self.stop_request(request_id)
                return None
            with contextlib.suppress(NotFoundError):  # its forward's answer was lost
                self.peering.stop_request(cluster, request_id)
        except GreenSwarmError as exc:
            return str(exc)
        return None

    # -- events from the registries and agents ----------------------------------------------

    def task_ended(self, end: TaskEnd) -> bool:
        return self.loop.call(lambda: self._task_ended(end))

    def _task_ended(self, end: TaskEnd) -> bool:
        """Free a task's room when its container is done; False when the report is stale."""
        task_id, status, exit_code, service_id, oom = (
            end.task_id, end.status, end.exit_code, end.service_id, end.oom
        )
        try:
            record = self.records.get(task_id)
        except NotFoundError:
            return False
        if service_id and record.service_id and service_id != record.service_id:
            return False  # an earlier placement of the same request (killed and moved)
        if self.store.task(task_id) is None:
            return False
        if record.spec["type"] == TaskType.SERVICE.value and status in (
            EndStatus.FINISHED,
            EndStatus.FAILED,
        ):
            why = ", out of memory" if oom else ""
            self.records.update(
                task_id,
                Event(EventKind.EXITED,
                      f"container exited (code {exit_code}{why}); Swarm restarts it",
                      exit_code=exit_code, oom=oom or None),
            )
            return False
        _, outcome = self.scheduler.task_ended(task_id, self.clock())
        self.backend.remove(task_id)
        final = {
            EndStatus.FINISHED: RequestStatus.COMPLETED,
            EndStatus.FAILED: RequestStatus.FAILED,
        }.get(status, RequestStatus.STOPPED)
        why = " (out of memory)" if oom else ""
        self.records.update(
            task_id,
            Event(EventKind.ENDED, f"ended: {status.value}{why}", exit_code=exit_code,
                  oom=oom or None),
            status=final,
        )
        self.effects.carry_out(outcome)
        return True

    def kill(self, task_id: str) -> None:
        self.loop.call(lambda: self._kill(task_id))

    def _kill(self, task_id: str) -> None:
        task = self.store.task(task_id)
        if task is None:
            raise NotFoundError(f"no running task {task_id!r}")
        # the service first: if Docker cannot remove it, the task stays booked and running
        self.effects.mark_killed(
            task_id, Event(EventKind.KILLED, f"killed on {task.host} on request", host=task.host)
        )
        self.store.end_task(task_id)
        outcome = self.scheduler.reschedule([task], self.clock(), PendingReason.VICTIM)
        self.effects.carry_out(outcome)

    def host_removed(self, host_id: str) -> None:
        self.loop.call(lambda: self.swarm.host_lost(host_id, "was removed from the registry"))

    def task_resized(self, task: Task) -> None:
        self.loop.call(lambda: self.effects.resized(task))

    def queue_retry(self) -> None:
        """Retry the pending queue soon (at most one retry waits on the loop)."""
        if not self._state.retry_queued:
            self._state.retry_queued = True
            self.loop.post(self._retry)

    def room_freed(self, host_id: str) -> None:
        """A booking was undone outside the scheduler (a service that could not start): the
        next retry also gives cuts back on its host (DESIGN 3.8)."""
        self._state.freed.add(host_id)
        self.queue_retry()

    def _retry(self) -> None:
        self._state.retry_queued = False
        freed, self._state.freed = self._state.freed, set()
        self.effects.carry_out(self.scheduler.retry_pending(self.clock(), freed=freed))

    # -- views for the API --------------------------------------------------------------------

    def request_json(
        self, request_id: str, *, history: bool = True, remote: bool = False
    ) -> dict[str, Any]:
        """A request's record as GET /requests/{id} answers it. While its task is booked, its
        current resources and cut are the registry's own, so the two never disagree. With
        ``remote``, an offloaded request still running is read from its peer (503 naming the
        peer when it does not answer)."""
        record = self.records.get(request_id)
        if remote and record.cluster is not None and record.status not in FINAL:
            return self._remote_json(record, history=history)
        out = self.record_json(record)
        out["service"] = self.service_json(record)
        task = self.store.task(request_id)
        if task is not None:
            out["current"] = {"cpu_shares": task.cpu_shares, "memory": task.memory}
            out["cut_received"] = str(task.cut_received)
        if not history:
            del out["history"], out["spec"]
        return out

    def _remote_json(self, record: RequestRecord, *, history: bool) -> dict[str, Any]:
        """An offloaded request as its peer has it now (status, host, resources, service
        level, its history there, each event with its ``cluster``), under this cluster's id
        and history; a final status there is recorded here too."""
        peer = record.cluster or ""
        try:
            there = self.peering.request(peer, record.id)
        except NotFoundError:
            raise UnavailableError(f"peer {peer} does not know request {record.id!r} "
                                   "(any more)") from None
        out = self.record_json(record)
        for key in ("status", "host", "host_name", "service_id", "current", "cut_received",
                    "kills", "service"):
            if key in there:
                out[key] = there[key]
        raw_history = there.get("history")
        history_there: list[Any] = raw_history if isinstance(raw_history, list) else []
        out["history"] = [*out["history"],
                          *({**e, "cluster": peer} for e in history_there if isinstance(e, dict))]
        try:
            status = RequestStatus(str(there.get("status")))
        except ValueError:
            raise UnavailableError(f"peer {peer} answered an unknown status") from None
        if status in FINAL and status is not record.status:
            last = history_there[-1] if history_there and isinstance(history_there[-1], dict) \
                else {}
            kind = Event.from_json(last).kind if last else EventKind.OTHER
            reason = str(last.get("reason") or status.value)
            self.loop.call(lambda: self._mirror_final(record.id, peer, kind, reason, status))
        if not history:
            del out["history"], out["spec"]
        return out

    def _mirror_final(self, request_id: str, peer: str, kind: EventKind, reason: str,
                      status: RequestStatus) -> None:
        if self.records.status_of(request_id) not in FINAL:
            self.records.update(request_id, Event(kind, f"in cluster {peer}: {reason}",
                                                  cluster=peer), status=status)

    def advert_json(self) -> dict[str, Any]:
        """This cluster's advert now (GET /federation/advert)."""
        if next(self.store.all_hosts(), None) is None:
            raise UnavailableError("no host is known yet: nothing to advertise")
        return advertise(self.settings.federation_name, self.store,
                         self.settings.power_model).to_json()

    def peers_json(self) -> dict[str, Any]:
        """GET /federation/peers: this cluster's name, its offload setting, each peer."""
        return {"cluster": self.settings.federation_name,
                "offload": self.settings.offload.value,
                "peers": [view.to_json() for view in self.peering.views()]}

    def service_json(self, record: RequestRecord) -> dict[str, Any] | None:
        """Its service level now (DESIGN 3.10), from its history; None for a record without
        a class or a dated submission."""
        cls = record.spec.get("class")
        if not isinstance(cls, int) or isinstance(cls, bool) or cls not in CLASSES:
            return None
        checkpoint_s = record.spec.get("checkpoint_interval_s")
        level = service_level(record.history, now=self.clock(), objective=self.slo.objective(cls),
                              alpha_s=self.settings.allocation_s,
                              is_job=record.spec.get("type") == TaskType.JOB.value,
                              checkpoint_interval_s=(float(checkpoint_s)
                                                     if isinstance(checkpoint_s, int | float)
                                                     else 0.0))
        return None if level is None else level.to_json()

    def record_json(self, record: RequestRecord) -> dict[str, Any]:
        """A record's JSON with ``host_name``: its host as `docker node ls` names it, this
        cluster's node, or for an offloaded request the peer's as the peer named it (its id
        when unknown); None without a host."""
        out = record.to_json()
        if record.host is None:
            out["host_name"] = None
        elif record.cluster is not None:
            out["host_name"] = record.host_name or record.host
        else:
            out["host_name"] = self.host_name(record.host)
        return out

    def host_name(self, host_id: str) -> str:
        """The node's hostname, as `docker node ls` prints it (its id until the Swarm said)."""
        facts = self.scheduler.node_facts.get(host_id)
        return facts.hostname if facts is not None and facts.hostname else host_id

    def hosts(self) -> list[tuple[HostView, list[Task]]]:
        return [(host, self.store.tasks_on(host.id)) for host in self.store.all_hosts()]

    def health(self) -> dict[str, Any]:
        checks: dict[str, Any] = {"policy": self.settings.policy}
        try:
            checks["redis"] = self.store.ping()
        except GreenSwarmError as exc:
            checks["redis"] = False
            checks["redis_error"] = str(exc)
        try:
            checks["docker"] = self.backend.ping()
        except GreenSwarmError as exc:
            checks["docker"] = False
            checks["docker_error"] = str(exc)
        if checks["redis"]:
            checks["hosts"] = sum(1 for _ in self.store.all_hosts())
            checks["pending"] = len(self.store.pending())
        checks["status"] = "ok" if checks["redis"] and checks["docker"] else "degraded"
        return checks


@dataclass(frozen=True)
class _DeploymentCreator:
    """federation.deploy's Creator: the manager's calls, here and at the peers."""

    manager: Manager
    deployment: str

    def create(self, member: Member, cluster: str) -> Creation:
        manager = self.manager
        if cluster == manager.settings.federation_name:
            return manager.loop.call(lambda: manager._create_here(member, self.deployment))
        return manager._create_at_peer(member, cluster)

    def remove(self, member: Member, cluster: str) -> str | None:
        return self.manager._remove_created(member, cluster)


def _note_refusals(outcome: Outcome, request_id: str, note: str) -> None:
    """Add ``note`` to the reason of the refusal of ``request_id`` in ``outcome``."""
    outcome.refused = [replace(d, reason=f"{d.reason}; {note}") if d.request.id == request_id
                       else d for d in outcome.refused]


class ManagerEvents:
    """The registries' events (RegistryEvents), routed to the manager's loop."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def admit_host(self, spec: HostSpec) -> None:
        self.manager.swarm.admit_host(spec)

    def host_changed(self, host: HostView) -> None:
        self.manager.queue_retry()

    def task_resized(self, task: Task) -> None:
        self.manager.task_resized(task)

    def host_removed(self, host_id: str) -> None:
        self.manager.host_removed(host_id)

    def task_ended(self, end: TaskEnd) -> bool:
        return self.manager.task_ended(end)

    def kill(self, task_id: str) -> None:
        self.manager.kill(task_id)
