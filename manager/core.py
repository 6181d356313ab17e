"""The live service: the scheduler's decisions carried out on a real Swarm.

Everything that changes the books runs on the one scheduling loop. A decision is applied to
the registries first (by the Scheduler), then carried out on the Swarm in order: victims'
services removed, cuts pushed live to the node agent, the new service created. The registries
are the desired state; agents and the periodic reconciliation bring the Swarm to it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.decision import Decision, TaskCut
from domain.errors import ConflictError, GreenSwarmError, NotFoundError, UnavailableError
from domain.events import Event, EventKind
from domain.labels import AGENT_URL_LABEL
from domain.lifecycle import FINAL, EndStatus, RequestStatus, TaskEnd
from domain.model import HostSpec, HostView, Request, Task, TaskType
from domain.pending import PendingReason
from host_registry.redis_store import RedisStore
from manager.agents import AgentClient
from manager.loop import SchedulingLoop
from manager.records import RequestRecord, RequestRecords
from manager.settings import ManagerSettings
from manager.spec import parse_spec
from manager.swarm import Placement, ServiceInfo, SwarmBackend, TaskState
from scheduler.plugin import PlacedBy
from scheduler.service import Outcome, Scheduler

log = logging.getLogger(__name__)
NODE_GRACE_S = 15.0  # a node must be gone this long before its tasks are rescheduled


@dataclass
class _State:
    agent_urls: dict[str, str] = field(default_factory=dict)
    missing_since: dict[str, float] = field(default_factory=dict)
    retry_queued: bool = False


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
        self.scheduler = Scheduler(store, plugin.make(settings.options, settings.seed))
        self.loop = SchedulingLoop()
        self._state = _State()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="manager-timer", daemon=True)

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop, reconcile with the Swarm once, then keep doing so on a timer."""
        self.loop.start()
        try:
            self.loop.call(self.sync)
        except GreenSwarmError as exc:
            log.warning("first reconciliation failed (%s); retrying on the timer", exc)
        self._timer.start()

    def stop(self) -> None:
        self._stop.set()
        self.loop.stop()

    def _tick(self) -> None:
        next_sync = time.monotonic() + self.settings.sync_interval_s  # start() just did one
        next_retry = 0.0
        while not self._stop.wait(0.5):
            now = time.monotonic()
            if now >= next_sync:
                next_sync = now + self.settings.sync_interval_s
                self.loop.post(self._sync_logged)
            if now >= next_retry:
                next_retry = now + self.settings.retry_interval_s
                self.queue_retry()

    def _sync_logged(self) -> None:
        try:
            self.sync()
        except GreenSwarmError as exc:
            log.warning("reconciliation with the Swarm failed: %s", exc)

    # -- requests (called from REST threads) ------------------------------------------------

    def submit(self, body: Any) -> tuple[RequestRecord, Decision | None, float]:
        """The record, the decision (None under the 'swarm' policy), and how long the
        scheduler took to decide and book it, in milliseconds (Docker work excluded)."""
        hosts = list(self.store.all_hosts())
        if not hosts:
            raise UnavailableError("no host is known yet: is any Swarm node Ready and Active?")
        request, spec, queue = parse_spec(
            body,
            max_cpu_shares=max(h.cpu_capacity for h in hosts),
            max_memory=max(h.memory_capacity for h in hosts),
        )
        return self.loop.call(lambda: self._submit(request, spec, queue))

    def _submit(
        self, request: Request, spec: dict[str, Any], queue: bool
    ) -> tuple[RequestRecord, Decision | None, float]:
        if self.records.exists(request.id):
            raise ConflictError(f"a request named {request.id!r} already exists")
        self.records.create(request.id, spec)
        if self.by_swarm:
            self._hand_to_swarm(request, spec)
            return self.records.get(request.id), None, 0.0
        started = time.perf_counter()
        outcome = self.scheduler.submit(request, self.clock(), queue=queue)
        decision_ms = (time.perf_counter() - started) * 1000
        self._carry_out(outcome)
        return self.records.get(request.id), outcome.decision_for(request.id), decision_ms

    def stop_request(self, request_id: str) -> RequestRecord:
        return self.loop.call(lambda: self._stop_request(request_id))

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
            self._carry_out(outcome)
        self.records.update(
            request_id, Event(EventKind.STOPPED, "stopped by the client"),
            status=RequestStatus.STOPPED,
        )
        return self.records.get(request_id)

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
        self._carry_out(outcome)
        return True

    def kill(self, task_id: str) -> None:
        self.loop.call(lambda: self._kill(task_id))

    def _kill(self, task_id: str) -> None:
        task = self.store.task(task_id)
        if task is None:
            raise NotFoundError(f"no running task {task_id!r}")
        # the service first: if Docker cannot remove it, the task stays booked and running
        self._mark_killed(
            task_id, Event(EventKind.KILLED, f"killed on {task.host} on request", host=task.host)
        )
        self.store.end_task(task_id)
        outcome = self.scheduler.reschedule([task], self.clock(), PendingReason.VICTIM)
        self._carry_out(outcome)

    def host_removed(self, host_id: str) -> None:
        self.loop.call(lambda: self._host_lost(host_id))

    def queue_retry(self) -> None:
        """Retry the pending queue soon (at most one retry waits on the loop)."""
        if not self._state.retry_queued:
            self._state.retry_queued = True
            self.loop.post(self._retry)

    def _retry(self) -> None:
        self._state.retry_queued = False
        self._carry_out(self.scheduler.retry_pending(self.clock()))

    # -- carrying out decisions -------------------------------------------------------------

    def _carry_out(self, outcome: Outcome) -> None:
        for decision in outcome.applied:
            for victim in decision.kills:
                self._mark_killed(
                    victim,
                    Event(EventKind.KILLED,
                          f"killed on {decision.host} to make room for {decision.request.id}",
                          host=decision.host, by=decision.request.id),
                )
            for cut in decision.cuts:
                self._cut(cut, decision.request.id)
            self._start(decision)
        for entry in outcome.queued:  # it will start again with its original resources
            self.records.update(
                entry.request.id,
                Event(EventKind.QUEUED, f"waiting in the pending queue ({entry.reason})",
                      queue_reason=entry.reason.value),
                status=RequestStatus.PENDING,
                host=None,
                service_id=None,
                cpu_shares=entry.request.cpu_shares,
                memory=entry.request.memory,
                cut_received="0",
            )
        for refused in outcome.refused:
            self.records.update(
                refused.request.id,
                Event(EventKind.REJECTED, refused.reason, policy=refused.policy or None),
                status=RequestStatus.REJECTED,
            )

    def _mark_killed(self, task_id: str, event: Event) -> None:
        """A task was taken off its host (kill, or its host left): its service goes now, so a
        later placement never meets the old one (and nothing runs unbooked meanwhile)."""
        self.backend.remove(task_id)
        self.records.update(task_id, event, kills=self.records.kills_of(task_id) + 1)

    def _start(self, decision: Decision) -> None:
        request_id, host = decision.request.id, decision.host or ""
        record = self.records.get(request_id)
        try:
            service_id = self.backend.create(
                Placement(request_id, record.spec, host, decision.cpu_shares, decision.memory)
            )
        except GreenSwarmError as exc:
            self.store.end_task(request_id)  # undo the booking: nothing runs
            self.records.update(
                request_id,
                Event(EventKind.START_FAILED, f"could not start on {host}: {exc}", host=host),
                status=RequestStatus.FAILED,
                host=None,
                service_id=None,
            )
            self.queue_retry()
            return
        killed_before = record.kills > 0  # taken off a host before: this is a reschedule
        status = RequestStatus.KILLED_AND_RESCHEDULED if killed_before else RequestStatus.RUNNING
        self.records.update(
            request_id,
            Event(EventKind.PLACED, f"placed: {decision.reason}", pass_=decision.pass_,
                  policy=decision.policy or None, victims=decision.kills,
                  cuts=tuple(cut.task for cut in decision.cuts)),
            status=status,
            host=host,
            service_id=service_id,
            cpu_shares=decision.cpu_shares,
            memory=decision.memory,
            cut_received=str(decision.cut_received),
        )

    def _cut(self, cut: TaskCut, beneficiary: str) -> None:
        url = self._agent_url(cut.host)
        what = (
            f"cut to {cut.cpu_shares} shares and {cut.memory} bytes (total cut {cut.cut_received})"
        )
        try:
            result = self.agents.cut(url, cut.task, cut.cpu_shares, cut.memory)
        except GreenSwarmError as exc:
            self.records.update(
                cut.task,
                Event(EventKind.CUT, f"{what}; booked, not yet applied ({exc})", host=cut.host,
                      by=beneficiary, applied=False),
                cpu_shares=cut.cpu_shares,
                memory=cut.memory,
                cut_received=str(cut.cut_received),
            )
            return
        if (result.cpu_shares, result.memory) != (cut.cpu_shares, cut.memory):
            self.store.resize_task(cut.task, result.cpu_shares, result.memory)
            what += f"; the node kept {result.memory} bytes (the task uses more than the target)"
        self.records.update(
            cut.task,
            Event(EventKind.CUT, what, host=cut.host, by=beneficiary, applied=True),
            cpu_shares=result.cpu_shares,
            memory=result.memory,
            cut_received=str(cut.cut_received),
        )

    def _agent_url(self, host_id: str) -> str:
        url = self._state.agent_urls.get(host_id)
        if url is None:
            raise UnavailableError(f"no agent address known for host {host_id}")
        return url

    # -- the 'swarm' baseline -----------------------------------------------------------------

    def _hand_to_swarm(self, request: Request, spec: dict[str, Any]) -> None:
        try:
            service_id = self.backend.create(
                Placement(
                    request.id,
                    spec,
                    None,
                    request.cpu_shares,
                    request.memory,
                    reserve=True,
                    constraints=self._swarm_constraints(),
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

    # -- reconciliation with the Swarm --------------------------------------------------------

    def sync(self) -> None:
        """Nodes in, lost nodes out, then every service checked against the books."""
        nodes = self.backend.nodes(
            self.settings.node_label, frozenset(filter(None, self.settings.nodes.split(",")))
        )
        now = self.clock()
        known = {host.id: host for host in self.store.all_hosts()}
        joined = False
        for node in nodes:
            self._state.agent_urls[node.id] = (
                node.labels.get(AGENT_URL_LABEL)
                or self.settings.agent_url
                or f"http://{node.address}:{self.settings.agent_port}"
            )
            self._state.missing_since.pop(node.id, None)
            host = known.get(node.id)
            wanted = (node.cpu_shares, node.memory_bytes, node.address)
            if host is None or (host.cpu_capacity, host.memory_capacity, host.address) != wanted:
                self.store.add_host(HostSpec(node.id, *wanted))
                joined = True
        present = {node.id for node in nodes}
        for host_id in set(known) - present:
            first = self._state.missing_since.setdefault(host_id, now)
            if now - first >= NODE_GRACE_S:
                self._host_lost(host_id)
        self._reconcile()
        if joined:
            self.queue_retry()

    def _host_lost(self, host_id: str) -> None:
        self._state.missing_since.pop(host_id, None)
        log.warning("host %s left the Swarm: rescheduling its tasks", host_id)
        tasks = {t.id for t in self.store.tasks_on(host_id)}
        for task_id in tasks:
            self._mark_killed(
                task_id,
                Event(EventKind.HOST_LOST, f"killed: its host {host_id} left the Swarm",
                      host=host_id),
            )
        self._carry_out(self.scheduler.host_lost(host_id, self.clock()))

    def _reconcile(self) -> None:
        services = {info.task_id: info for info in self.backend.services()}
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
        is_job = record.spec["type"] == TaskType.JOB.value
        done = info.state in (TaskState.COMPLETE, TaskState.FAILED)
        finished = info.state is TaskState.COMPLETE and not info.exit_code
        # Only jobs end on a task state: a service's newest task is briefly 'failed' between a
        # crash and the restart Swarm gives it; a service ends when stopped or when it vanishes.
        if done and is_job and task is not None:
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
        self._carry_out(outcome)

    def _vanished(self, task: Task) -> None:
        record_status = self.records.status_of(task.id)
        if record_status is None:
            return
        _, outcome = self.scheduler.task_ended(task.id, self.clock())
        self.records.update(
            task.id, Event(EventKind.VANISHED, "its service disappeared from the Swarm"),
            status=RequestStatus.FAILED,
        )
        self._carry_out(outcome)

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

    # -- views for the API --------------------------------------------------------------------

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


class ManagerEvents:
    """The registries' events (RegistryEvents), routed to the manager's loop."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def host_changed(self, host: HostView) -> None:
        self.manager.queue_retry()

    def host_removed(self, host_id: str) -> None:
        self.manager.host_removed(host_id)

    def task_ended(self, end: TaskEnd) -> bool:
        return self.manager.task_ended(end)

    def kill(self, task_id: str) -> None:
        self.manager.kill(task_id)
