"""The manager's reconciliation with the Swarm (DESIGN 4, 9): nodes in and out, and every
service checked against the books. Runs on the manager's scheduling loop only.

Only Swarm nodes are hosts, as Swarm defines their availability: an ``active`` node takes new
placements; a ``pause`` one keeps its tasks and takes none (the scheduler closes it); a
``drain`` one loses its tasks at once, like a node that left (those are rescheduled after
``NODE_GRACE_S``, so that a node that blinks keeps its tasks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.constraints import constraint_texts
from domain.errors import ConflictError, GreenSwarmError, NotFoundError
from domain.events import Event, EventKind
from domain.labels import AGENT_URL_LABEL
from domain.lifecycle import FINAL, EndStatus, RequestStatus
from domain.model import HostSpec, Request, Task, TaskType
from host_registry.redis_store import RedisStore
from manager.effects import Effects
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

    # nodes gone from Swarm: their tasks are rescheduled after NODE_GRACE_S
    missing_since: dict[str, float] = field(default_factory=dict)
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
        self._waits = _Waits()

    # -- nodes ----------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Our Swarm's Ready nodes (those with the configured label, or the named ones)."""
        return self.backend.nodes(
            self.settings.node_label, frozenset(filter(None, self.settings.nodes.split(",")))
        )

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
        """Nodes in, drained and lost nodes out, paused nodes closed, then every service
        checked against the books."""
        nodes = self.nodes()
        now = self.clock()
        known = {host.id: host for host in self.store.all_hosts()}
        joined = False
        present: set[str] = set()
        for node in nodes:
            if node.availability is NodeAvailability.DRAIN:
                continue  # not present: its tasks go (below), without the grace of a blink
            present.add(node.id)
            self.effects.agent_urls[node.id] = (
                node.labels.get(AGENT_URL_LABEL)
                or self.settings.agent_url
                or f"http://{node.address}:{self.settings.agent_port}"
            )
            self._waits.missing_since.pop(node.id, None)
            host = known.get(node.id)
            wanted = (node.cpu_shares, node.memory_bytes, node.address)
            if host is None or (host.cpu_capacity, host.memory_capacity, host.address) != wanted:
                self.store.add_host(HostSpec(node.id, *wanted))
                joined = True
        drained = {n.id for n in nodes if n.availability is NodeAvailability.DRAIN}
        for host_id in set(known) - present:
            first = self._waits.missing_since.setdefault(host_id, now)
            if host_id in drained or now - first >= NODE_GRACE_S:
                self.host_lost(host_id, "drained" if host_id in drained else "left the Swarm")
        paused = frozenset(n.id for n in nodes if n.availability is NodeAvailability.PAUSE)
        reopened_or_closed = self.scheduler.set_closed_hosts(paused)
        relabelled = self.scheduler.set_node_facts({n.id: n.facts() for n in nodes})
        self._reconcile()
        if joined or reopened_or_closed or relabelled:
            self.queue_retry()

    def host_lost(self, host_id: str, why: str = "left the Swarm") -> None:
        self._waits.missing_since.pop(host_id, None)
        log.warning("host %s %s: rescheduling its tasks", host_id, why)
        tasks = {t.id for t in self.store.tasks_on(host_id)}
        for task_id in tasks:
            self.effects.mark_killed(
                task_id,
                Event(EventKind.HOST_LOST, f"killed: its host {host_id} {why}", host=host_id),
            )
        self.effects.carry_out(self.scheduler.host_lost(host_id, self.clock()))

    # -- services ---------------------------------------------------------------------------

    def _reconcile(self) -> None:
        services = {info.task_id: info for info in self.backend.services()}
        done_since = self._waits.done_since
        for task_id in [t for t in done_since if t not in services]:
            del done_since[task_id]  # its service is gone (ended by its agent's report)
        for info in services.values():
            self._reconcile_service(info)
        for task in self.store.tasks():
            if task.id not in services:
                self._vanished(task)

    def _reconcile_service(self, info: ServiceInfo) -> None:
        try:
            record = self.records.get(info.task_id)
        except NotFoundError:
            log.warning(
                "service %s carries unknown request %s; left alone", info.name, info.task_id
            )
            return
        if record.service_id and record.service_id != info.id:
            return
        if record.status in FINAL:
            self.backend.remove(info.task_id)  # left over from an earlier run
            return
        task = self.store.task(info.task_id)
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
                Event(EventKind.ENDED, f"ended (exit code {info.exit_code})",
                      exit_code=info.exit_code),
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
            if event.kind is EventKind.PLACED:
                placed_t = event.t
            elif event.kind is EventKind.STARTED:
                placed_t = None  # this placement's start is already recorded
        if placed_t is None:
            return
        now = self.clock()
        started = min(now, info.running_since if info.running_since is not None else now)
        self.records.update(
            info.task_id,
            Event(EventKind.STARTED, f"its container runs on {task.host}", t=max(placed_t, started),
                  host=task.host),
        )

    def _end_from_swarm(self, info: ServiceInfo, status: EndStatus) -> None:
        _, outcome = self.scheduler.task_ended(info.task_id, self.clock())
        self.backend.remove(info.task_id)
        final = RequestStatus.COMPLETED if status is EndStatus.FINISHED else RequestStatus.FAILED
        message = f"ended: {status.value} (exit code {info.exit_code})"
        if info.message and status is EndStatus.FAILED:
            message += f": {info.message}"
        self.records.update(
            info.task_id, Event(EventKind.ENDED, message, exit_code=info.exit_code), status=final
        )
        self.effects.carry_out(outcome)

    def _vanished(self, task: Task) -> None:
        record_status = self.records.status_of(task.id)
        if record_status is None:
            return
        _, outcome = self.scheduler.task_ended(task.id, self.clock())
        self.records.update(
            task.id, Event(EventKind.VANISHED, "its service disappeared from the Swarm"),
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
                request.id, Event(EventKind.REJECTED, f"Swarm refused it: {exc}", policy="swarm"),
                status=RequestStatus.REJECTED,
            )
            return
        self.records.update(
            request.id, Event(EventKind.SWARM, "handed to Swarm's own scheduler"),
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
                        Event(EventKind.SWARM, f"Swarm started it on {info.node_id}, "
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
                info.task_id, Event(EventKind.SWARM, "Swarm started it", policy="swarm"),
                status=RequestStatus.RUNNING, host=info.node_id,
            )
        elif (
            task is None
            and self.clock() - record.created_at > self.settings.swarm_pending_timeout_s
        ):
            self.backend.remove(info.task_id)
            self.records.update(
                info.task_id,
                Event(EventKind.REJECTED, f"Swarm could not start it: {info.message}",
                      policy="swarm"),
                status=RequestStatus.REJECTED,
            )
