"""What the manager's API answers about requests, hosts, peers and itself: the JSON views.

A request's JSON names its host as `docker node ls` does and carries its service level now; an
offloaded request still running is read from its peer (a final status there is recorded here
too). The health check answers its checks and counts to anyone, and which records fail and
which nodes are down, with the errors, only to a caller who showed the token or a dashboard
session (DESIGN 9: a request's id or a node's name is not for everyone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.classes import CLASSES
from domain.errors import GreenSwarmError, NotFoundError, UnavailableError
from domain.events import EventKind, event_from_json, in_cluster
from domain.lifecycle import FINAL, RequestStatus
from domain.model import HostView, Task, TaskType
from domain.service_history import checkpoint_interval_of, service_level
from federation.offload import advertise
from host_registry.redis_store import RedisStore
from manager.endings import Removed
from manager.leadership import LeaderView
from manager.loop import SchedulingLoop
from manager.nodes import NodeNames
from manager.peering import Peering
from manager.reconcile import SwarmSync
from manager.records import RequestRecord, RequestRecords
from manager.settings import ManagerSettings
from manager.swarm import SwarmBackend
from scheduler.service import Scheduler


class Views:
    def __init__(self, settings: ManagerSettings, store: RedisStore, records: RequestRecords,
                 scheduler: Scheduler, node_names: NodeNames, peering: Peering,
                 loop: SchedulingLoop, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.scheduler = scheduler
        self.node_names = node_names
        self.peering = peering
        self.loop = loop
        self.clock = clock

    # -- requests -----------------------------------------------------------------------------

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
            kind = event_from_json(last).kind if last else EventKind.OTHER
            reason = str(last.get("reason") or status.value)
            self.loop.call(lambda: self._mirror_final(record.id, peer, kind, reason, status))
        if not history:
            del out["history"], out["spec"]
        return out

    def _mirror_final(self, request_id: str, peer: str, kind: EventKind, reason: str,
                      status: RequestStatus) -> None:
        if self.records.status_of(request_id) not in FINAL:
            self.records.update(request_id, in_cluster(kind, f"in cluster {peer}: {reason}", peer),
                                status=status)

    def service_json(self, record: RequestRecord) -> dict[str, Any] | None:
        """Its service level now (DESIGN 3.10), from its history; None for a record without
        a class or a dated submission."""
        cls = record.spec.get("class")
        if not isinstance(cls, int) or isinstance(cls, bool) or cls not in CLASSES:
            return None
        level = service_level(record.history, now=self.clock(),
                              objective=self.scheduler.slo.objective(cls),
                              alpha_s=self.settings.allocation_s,
                              is_job=record.spec.get("type") == TaskType.JOB.value,
                              checkpoint_interval_s=checkpoint_interval_of(record.spec))
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

    @staticmethod
    def removed_json(removed: Removed) -> dict[str, Any]:
        """What DELETE /requests/{id} answers for a record that could not be read and was
        removed (DESIGN 9): a request's form with nothing of the record (its spec empty, no
        host, no kill counted), the event that removed it as its history, and ``removed``
        saying why."""
        return {"id": removed.request_id, "status": RequestStatus.STOPPED.value, "host": None,
                "host_name": None, "kills": 0, "spec": {}, "history": [removed.event.to_json()],
                "removed": removed.event.reason}

    # -- hosts and peers ----------------------------------------------------------------------

    def host_name(self, host_id: str) -> str:
        """The node's hostname, as `docker node ls` prints it, also after it left the Swarm
        (its id when the Swarm never said)."""
        facts = self.scheduler.node_facts.get(host_id)
        return self.node_names.name_of(host_id, facts.hostname if facts is not None else None)

    def hosts(self) -> list[tuple[HostView, list[Task]]]:
        return [(host, self.store.tasks_on(host.id)) for host in self.store.all_hosts()]

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


class Health:
    """GET /healthz: Redis and Docker answer (503 otherwise), the reconciliation, the nodes."""

    def __init__(self, settings: ManagerSettings, store: RedisStore, backend: SwarmBackend,
                 swarm: SwarmSync,
                 leader: Callable[[], LeaderView | None] = lambda: None) -> None:
        self.settings = settings
        self.store = store
        self.backend = backend
        self.swarm = swarm
        self.leader = leader

    def answer(self, *, details: bool) -> dict[str, Any]:
        """The checks and counts; with ``details`` (a caller with the token or a dashboard
        session), also the policy, the errors, the records failing and the nodes down by name
        (DESIGN 9: the answer without the token holds no id, name or error text)."""
        checks: dict[str, Any] = {"status": "degraded", "details": details}
        errors: dict[str, str] = {}
        try:
            checks["redis"] = self.store.ping()
        except GreenSwarmError as exc:
            checks["redis"] = False
            errors["redis_error"] = str(exc)
        try:
            checks["docker"] = self.backend.ping()
        except GreenSwarmError as exc:
            checks["docker"] = False
            errors["docker_error"] = str(exc)
        if checks["redis"]:
            checks["hosts"] = sum(1 for _ in self.store.all_hosts())
            checks["pending"] = len(self.store.pending())
        state = self.swarm.health_json()  # failing records, nodes down (DESIGN 9)
        reconcile, down = state["reconcile"], state["nodes_down"]
        checks["reconcile"] = {"ok": reconcile["ok"], "errors_total": reconcile["errors_total"],
                               "failing_count": len(reconcile["failing"])}
        checks["nodes_down_count"] = len(down)
        view = self.leader()
        if view is not None:  # DESIGN 13: leader or standby, and who leads
            checks["role"] = view.role.value
            checks["leader_known"] = view.leader_url is not None
            if details:
                checks["leader"] = view.leader_url
        if details:
            checks["policy"] = self.settings.policy
            checks.update(errors)
            checks["reconcile"] = {**checks["reconcile"], **reconcile}
            checks["nodes_down"] = down
        checks["status"] = "ok" if checks["redis"] and checks["docker"] else "degraded"
        return checks
