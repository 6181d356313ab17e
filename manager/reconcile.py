"""The manager's reconciliation with the Swarm (DESIGN 4, 9): nodes in and out, and every
service checked against the books. Runs on the manager's scheduling loop only.

Only Swarm nodes are hosts, as Swarm defines their availability: an ``active`` node takes new
placements; a ``pause`` one keeps its tasks and takes none (the scheduler closes it); a
``drain`` one loses its tasks at once, like a node that left (those are rescheduled after
``NODE_GRACE_S``, so that a node that blinks keeps its tasks; a Down node takes no new task
meanwhile). What becomes of a node that is
Down, gone, or back under a new id: manager/nodes.py.

Every record is reconciled on its own (manager/faults.py): a node, a service or a booked task
that fails is skipped, logged once and counted, and the pass goes on with the others. A task
booked in the registry without a request record (nothing could start it) is such a record: it
is listed until someone removes it (``DELETE /registry/tasks/{id}``), and dropped with its host
if that host is lost. A service whose container Swarm refuses (task state ``rejected``: no such
image, memory below Docker's minimum) ends its request as failed, with Swarm's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from domain.constraints import constraint_texts
from domain.errors import ConflictError, GreenSwarmError, NotFoundError
from domain.events import (
    Ended,
    HostLost,
    Placed,
    Rejected,
    Started,
    Swarm,
    Vanished,
)
from domain.labels import AGENT_URL_LABEL
from domain.lifecycle import FINAL, EndStatus, RequestStatus
from domain.model import HostSpec, Request, Task, TaskType
from host_registry.redis_store import RedisStore
from manager.effects import Effects
from manager.faults import RecordFaults
from manager.nodes import DownNode, NodeNames, NodeSeen, NodeWatch
from manager.records import RequestRecord, RequestRecords
from manager.settings import ManagerSettings
from manager.swarm import (
    NodeAvailability,
    NodeInfo,
    Placement,
    ServiceInfo,
    SwarmBackend,
    TaskState,
)
from scheduler.service import Scheduler

log = logging.getLogger(__name__)
NODE_GRACE_S = 15.0  # a node must be gone this long before its tasks are rescheduled


@dataclass
class _Waits:
    """What the reconciliation waits out before it acts, each by when it first saw it."""

    # jobs whose Swarm task is done, not ended yet: ended from Swarm's state after the grace
    done_since: dict[str, float] = field(default_factory=dict)


class SwarmSync:
    def __init__(
        self,
        settings: ManagerSettings,
        store: RedisStore,
        records: RequestRecords,
        backend: SwarmBackend,
        scheduler: Scheduler,
        effects: Effects,
        clock: Callable[[], float],
        queue_retry: Callable[[], None],
        *,
        by_swarm: bool,
        faults: RecordFaults,
        names: NodeNames,
    ) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.backend = backend
        self.scheduler = scheduler
        self.effects = effects
        self.clock = clock
        self.queue_retry = queue_retry
        self.by_swarm = by_swarm
        self.faults = faults
        self.names = names
        self.watch = NodeWatch(NODE_GRACE_S, settings.node_gone_s)
        self._retired_loaded = False
        self._waits = _Waits()
        self.pass_error: str | None = None  # why the last pass failed as a whole, if it did
        # Hosts the power manager switched (shutting down, off, booting: DESIGN 3.15): closed
        # to every pass, and their nodes, drained or Down, are not lost nodes (set by the
        # manager when it switches hosts: manager/switching.py).
        self.power_exempt: Callable[[], frozenset[str]] = frozenset
        # consolidation (manager/moving.py): the tasks whose move runs (their services left
        # alone) and the host being emptied (closed to the passes)
        self.moving: Callable[[], frozenset[str]] = frozenset
        self.emptying: Callable[[], frozenset[str]] = frozenset
        self.paused: frozenset[str] = frozenset()  # as of the last pass
        # hosts whose node Swarm lists but not Ready (Down): their tasks wait out the grace of
        # a blink, but nothing new is placed there meanwhile
        self.down: frozenset[str] = frozenset()
        self.ready_ids: frozenset[str] = frozenset()  # Ready and active, as of the last pass
        self.passes = 0  # passes done (a host switched on counts Ready from a later pass)

    # -- nodes ----------------------------------------------------------------------------

    def nodes(self, include_down: bool = False) -> list[NodeInfo]:
        """Our Swarm's Ready nodes (those with the configured label, or the named ones); with
        ``include_down``, those that are not Ready too."""
        return self.backend.nodes(
            self.settings.node_label, frozenset(filter(None, self.settings.nodes.split(","))),
            include_down=include_down,
        )

    def nodes_down(self) -> tuple[DownNode, ...]:
        """The nodes Down or missing as of the last pass, not retired (any thread)."""
        return self.watch.down_now

    def host_name(self, host_id: str) -> str:
        """The node's hostname, while it is in the Swarm and after it left; its id when the
        manager never knew it."""
        facts = self.scheduler.node_facts.get(host_id)
        return self.names.name_of(host_id, facts.hostname if facts is not None else None)

    def admit_host(self, spec: HostSpec) -> None:
        """A host registration (a monitor's) for a node that is not one of our Swarm's Ready
        nodes taking tasks is refused: nothing is ever placed on a host Swarm cannot run."""
        node = next((n for n in self.nodes() if n.id == spec.id), None)
        if node is None:
            raise ConflictError(
                f"host {spec.id!r} is not a Ready node of the Swarm (of those this manager "
                "uses): only Swarm nodes are hosts")
        if node.availability is NodeAvailability.DRAIN:
            raise ConflictError(f"host {spec.id!r} is a drained Swarm node: it takes no tasks")

    def sync(self) -> None:
        """Nodes in, drained and lost nodes out, paused nodes closed, gone nodes retired, then
        every service checked against the books; each record on its own."""
        listed = self.nodes(include_down=True)
        self.faults.begin_pass()
        try:
            self._sync(listed)
        finally:
            self.faults.end_pass()

    def _sync(self, listed: list[NodeInfo]) -> None:
        nodes = [n for n in listed if n.ready]
        now = self.clock()
        if not self._retired_loaded:
            self.watch.retired |= self.names.retired()
            self._retired_loaded = True
        self.names.remember({n.id: n.hostname for n in nodes})
        known = {host.id: host for host in self.store.all_hosts()}
        joined = False
        exempt = self.power_exempt()
        for node in nodes:
            if node.availability is NodeAvailability.DRAIN or node.id in exempt:
                continue  # not present: its tasks go (below), without the grace of a blink
            self.effects.agent_urls[node.id] = (
                node.labels.get(AGENT_URL_LABEL)
                or self.settings.agent_url
                or f"http://{node.address}:{self.settings.agent_port}"
            )
            host = known.get(node.id)
            wanted = (node.cpu_shares, node.memory_bytes, node.address)
            if host is None or (host.cpu_capacity, host.memory_capacity, host.address) != wanted:
                spec = HostSpec(node.id, *wanted)
                joined |= self.faults.attempt("node", node.id, partial(self.store.add_host, spec))
        self._nodes_out(listed, set(known), now, exempt)
        self.paused = frozenset(n.id for n in nodes if n.availability is NodeAvailability.PAUSE)
        self.down = frozenset(n.id for n in listed if not n.ready and n.id not in exempt)
        self.ready_ids = frozenset(n.id for n in nodes
                                   if n.availability is NodeAvailability.ACTIVE)
        self.passes += 1
        reopened_or_closed = self.scheduler.set_closed_hosts(self._closed(exempt))
        relabelled = self.scheduler.set_node_facts({n.id: n.facts() for n in nodes})
        self._reconcile()
        if joined or reopened_or_closed or relabelled:
            self.queue_retry()

    def close_hosts(self) -> None:
        """The hosts switched by the power manager changed: paused and switched hosts closed,
        and what waits retried when one opened."""
        if self.scheduler.set_closed_hosts(self._closed(self.power_exempt())):
            self.queue_retry()

    def _closed(self, exempt: frozenset[str]) -> frozenset[str]:
        """The hosts no pass may use: paused and Down nodes (as of the last pass), the hosts
        the power manager switched (``exempt``) and the one being emptied."""
        return self.paused | self.down | exempt | self.emptying()

    def _nodes_out(self, listed: list[NodeInfo], hosts: set[str], now: float,
                   exempt: frozenset[str] = frozenset()) -> None:
        """Lost hosts' tasks moved (each host on its own), then gone nodes retired. A node the
        power manager switched (``exempt``: drained, Down, starting) counts as present."""
        seen = [NodeSeen(n.id, n.hostname, True, False) if n.id in exempt else
                NodeSeen(n.id, n.hostname, n.ready, n.availability is NodeAvailability.DRAIN)
                for n in listed]
        back = self.watch.retired & {n.id for n in seen if n.present}
        self.names.unretire(back)
        names = self.names.all()
        for host_id, why in self.watch.lost(now, seen, hosts, names):
            if self.faults.attempt("node", host_id, partial(self.host_lost, host_id, why)):
                hosts.discard(host_id)
        for node_id, why in self.watch.retire(now, seen, hosts, names):
            self.names.set_retired(node_id, now)
            self.effects.agent_urls.pop(node_id, None)
            log.warning("host %s (%s) retired: %s", node_id, names.get(node_id, node_id), why)

    def host_lost(self, host_id: str, why: str = "left the Swarm") -> None:
        """Its tasks rescheduled like kill victims, each on its own; a task without a request
        record is dropped with the host (nothing could start it elsewhere)."""
        name = self.host_name(host_id)
        log.warning("host %s (%s) %s: rescheduling its tasks", host_id, name, why)
        unknown: set[str] = set()
        for task in self.store.tasks_on(host_id):
            if not self.records.exists(task.id):
                unknown.add(task.id)
                self.faults.fail("task", task.id, f"booked on host {name} ({host_id}), which "
                                 f"{why}, without a request record: dropped with its host")
                continue
            event = HostLost(f"killed: its host {name} {why}", host=host_id, host_name=name)
            self.faults.attempt("task", task.id, partial(self.effects.mark_killed, task.id, event))
        self.effects.carry_out(self.scheduler.host_lost(host_id, self.clock(), skip=unknown))

    def drop_unrecorded(self, task_id: str) -> bool:
        """End a booking no request record stands for (none, or one already over): its room is
        freed, any service of it removed; False when no such task is booked."""
        if self.store.task(task_id) is None:
            return False
        _, outcome = self.scheduler.task_ended(task_id, self.clock())
        self.backend.remove(task_id)
        self.faults.forget(task_id)
        log.warning("task %s: its booking without a live request record was removed", task_id)
        self.effects.carry_out(outcome)
        return True

    def health_json(self) -> dict[str, Any]:
        """The records failing now and the nodes down, for the health check (any thread)."""
        failing = self.faults.failing()
        reconcile: dict[str, Any] = {"ok": not failing and self.pass_error is None,
                                     "errors_total": self.faults.errors_total,
                                     "failing": [f.to_json() for f in failing]}
        if self.pass_error is not None:
            reconcile["error"] = self.pass_error
        return {"reconcile": reconcile,
                "nodes_down": [node.to_json() for node in self.nodes_down()]}

    # -- services ---------------------------------------------------------------------------

    def _reconcile(self) -> None:
        services = {info.task_id: info for info in self.backend.services()}
        done_since = self._waits.done_since
        for task_id in [t for t in done_since if t not in services]:
            del done_since[task_id]  # its service is gone (ended by its agent's report)
        for info in services.values():
            self.faults.attempt("service", info.task_id, partial(self._reconcile_service, info))
        for task in self.store.tasks():
            if task.id not in services:
                self.faults.attempt("task", task.id, partial(self._vanished, task))

    def _reconcile_service(self, info: ServiceInfo) -> None:
        try:
            record = self.records.get(info.task_id)
        except NotFoundError:
            raise ConflictError(f"service {info.name} carries request {info.task_id}, which "
                                "has no record: left alone") from None
        if record.service_id and record.service_id != info.id:
            return
        if record.status in FINAL:
            self.backend.remove(info.task_id)  # left over from an earlier run
            return
        if info.task_id in self.moving():
            return  # its newest task is the move's, pending or refused: the move sees to it
        task = self.store.task(info.task_id)
        if info.state is TaskState.REJECTED:
            self._refused(info, task)
            return
        if info.state is TaskState.RUNNING and task is not None and not self.by_swarm:
            self._note_start(info, record, task)
        is_job = record.spec["type"] == TaskType.JOB.value
        done = info.state in (TaskState.COMPLETE, TaskState.FAILED)
        finished = info.state is TaskState.COMPLETE and not info.exit_code
        # Only jobs end on a task state: a service's newest task is briefly 'failed' between a
        # crash and the restart Swarm gives it; a service ends when stopped or when it vanishes.
        if done and is_job and task is not None:
            # The node's agent reports the exit with what Swarm's task does not say (whether
            # the kernel killed it out of memory): Swarm's state ends the job only when no
            # report came within the grace (the agent is down, or the node gone).
            now = self.clock()
            first = self._waits.done_since.setdefault(info.task_id, now)
            if now - first >= self.settings.exit_report_grace_s:
                del self._waits.done_since[info.task_id]
                self._end_from_swarm(info, EndStatus.FINISHED if finished else EndStatus.FAILED)
        elif done and is_job and self.by_swarm:  # finished before it was ever booked
            self.backend.remove(info.task_id)
            final = RequestStatus.COMPLETED if finished else RequestStatus.FAILED
            self.records.update(
                info.task_id,
                Ended(f"ended (exit code {info.exit_code})", exit_code=info.exit_code),
                status=final,
                host=info.node_id,
            )
        elif self.by_swarm:
            self._follow_swarm(info, record, task)

    def _note_start(self, info: ServiceInfo, record: RequestRecord, task: Task) -> None:
        """Record, once per placement, that its container runs: the measured end of its
        allocation time (DESIGN 3.10, 3.11), dated when Swarm saw it run, within the placement
        and now."""
        if info.node_id != task.host:
            return
        placed_t: float | None = None
        for event in record.history:
            if isinstance(event, Placed):
                placed_t = event.t
            elif isinstance(event, Started):
                placed_t = None  # this placement's start is already recorded
        if placed_t is None:
            return
        now = self.clock()
        started = min(now, info.running_since if info.running_since is not None else now)
        self.records.update(
            info.task_id,
            Started(f"its container runs on {task.host}", t=max(placed_t, started), host=task.host),
        )

    def _end_from_swarm(self, info: ServiceInfo, status: EndStatus) -> None:
        _, outcome = self.scheduler.task_ended(info.task_id, self.clock())
        self.backend.remove(info.task_id)
        final = RequestStatus.COMPLETED if status is EndStatus.FINISHED else RequestStatus.FAILED
        exit_code = info.exit_code
        if status is EndStatus.FAILED and not exit_code:
            # Swarm's 'failed' with no exit code (or 0): its container never ran
            message, exit_code = "ended: failed: its container never started", None
        else:
            message = f"ended: {status.value} (exit code {exit_code})"
        if info.message and status is EndStatus.FAILED:
            message += f": {info.message}"
        self.records.update(
            info.task_id, Ended(message, exit_code=exit_code), status=final
        )
        self.effects.carry_out(outcome)

    def _refused(self, info: ServiceInfo, task: Task | None) -> None:
        """Swarm refused the container (task state ``rejected``): the request fails now, with
        Swarm's reason, rather than staying running while Swarm tries again and again."""
        outcome = None
        if task is not None:
            _, outcome = self.scheduler.task_ended(info.task_id, self.clock())
        self.backend.remove(info.task_id)
        where = f" on {self.host_name(info.node_id)}" if info.node_id else ""
        self.records.update(
            info.task_id,
            Ended(f"ended: failed: Swarm refused its container{where}: "
                  f"{info.message or 'no reason given'}", host=info.node_id),
            status=RequestStatus.FAILED,
        )
        if outcome is not None:
            self.effects.carry_out(outcome)

    def _vanished(self, task: Task) -> None:
        record_status = self.records.status_of(task.id)
        if record_status is None:
            raise ConflictError(
                f"task {task.id} is booked on host {self.host_name(task.host)} without a "
                f"request record: nothing can run it (DELETE /registry/tasks/{task.id} "
                "removes it)")
        _, outcome = self.scheduler.task_ended(task.id, self.clock())
        self.records.update(
            task.id, Vanished("its service disappeared from the Swarm"),
            status=RequestStatus.FAILED,
        )
        self.effects.carry_out(outcome)

    # -- the 'swarm' baseline -----------------------------------------------------------------

    def hand_to_swarm(self, request: Request, spec: dict[str, Any]) -> None:
        try:
            service_id = self.backend.create(
                Placement(
                    request.id,
                    spec,
                    None,
                    request.cpu_shares,
                    request.memory,
                    reserve=True,
                    constraints=(*self._swarm_constraints(),
                                 *constraint_texts(request.constraints)),
                )
            )
        except GreenSwarmError as exc:
            self.records.update(
                request.id, Rejected(f"Swarm refused it: {exc}", policy="swarm"),
                status=RequestStatus.REJECTED,
            )
            return
        self.records.update(
            request.id, Swarm("handed to Swarm's own scheduler"),
            service_id=service_id,
        )

    def _swarm_constraints(self) -> tuple[str, ...]:
        """Keep Swarm's own choice among our hosts where a constraint can say so: one named
        node, or a node label given as key=value. (A bare label key or several nodes cannot be
        expressed; a task Swarm starts elsewhere then runs unbooked, and its history says so.)"""
        nodes = [n for n in self.settings.nodes.split(",") if n]
        if len(nodes) == 1:
            return (
                (f"node.id=={nodes[0]}",)
                if len(nodes[0]) == 25
                else (f"node.hostname=={nodes[0]}",)
            )
        key, sep, value = self.settings.node_label.partition("=")
        return (f"node.labels.{key}=={value}",) if sep else ()

    def _follow_swarm(self, info: ServiceInfo, record: RequestRecord, task: Task | None) -> None:
        """The 'swarm' policy: book what Swarm started; refuse what it cannot start."""
        if task is None and info.state is TaskState.RUNNING and info.node_id:
            spec = record.spec
            try:
                self.store.host(info.node_id)
            except NotFoundError:
                if record.status is not RequestStatus.RUNNING:
                    self.records.update(
                        info.task_id,
                        Swarm(f"Swarm started it on {info.node_id}, "
                              "which is not a managed host: not booked"),
                        status=RequestStatus.RUNNING,
                        host=info.node_id,
                    )
                return
            self.store.load_task(
                Task(
                    id=info.task_id,
                    host=info.node_id,
                    cls=int(spec["class"]),
                    type=TaskType(spec["type"]),
                    cpu_shares=int(spec["cpu_shares"]),
                    memory=int(spec["memory"]),
                    original_cpu_shares=int(spec["cpu_shares"]),
                    original_memory=int(spec["memory"]),
                    started_at=self.clock(),
                )
            )
            self.records.update(
                info.task_id, Swarm("Swarm started it", policy="swarm"),
                status=RequestStatus.RUNNING, host=info.node_id,
            )
        elif (
            task is None
            and self.clock() - record.created_at > self.settings.swarm_pending_timeout_s
        ):
            self.backend.remove(info.task_id)
            self.records.update(
                info.task_id,
                Rejected(f"Swarm could not start it: {info.message}", policy="swarm"),
                status=RequestStatus.REJECTED,
            )
