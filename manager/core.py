"""The live service: requests in, the scheduler's decisions carried out on a real Swarm.

Everything that changes the books runs on the one scheduling loop. A decision is applied to
the registries first (by the Scheduler), then carried out (manager/effects.py); the periodic
reconciliation with the Swarm (manager/reconcile.py) brings nodes and services in line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.classes import CLASSES
from domain.decision import Decision
from domain.errors import ConflictError, GreenSwarmError, NotFoundError, UnavailableError
from domain.events import Event, EventKind
from domain.lifecycle import FINAL, EndStatus, RequestStatus, TaskEnd
from domain.model import HostSpec, HostView, Request, Task, TaskType
from domain.pending import PendingReason
from domain.service_history import service_level
from host_registry.power import RedisPowerReadings
from host_registry.redis_store import RedisStore
from manager.agents import AgentClient
from manager.effects import Effects
from manager.loop import SchedulingLoop
from manager.metrics import ManagerMetrics, StateCollector
from manager.power import PowerView
from manager.reconcile import SwarmSync
from manager.records import RequestRecord, RequestRecords
from manager.settings import ManagerSettings
from manager.spec import parse_spec
from manager.swarm import SwarmBackend
from scheduler.plugin import PlacedBy
from scheduler.service import Scheduler

log = logging.getLogger(__name__)


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
                                   slo=self.slo, alpha_s=settings.allocation_s)
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
        self, request: Request, spec: dict[str, Any], queue: bool | None
    ) -> tuple[RequestRecord, Decision | None, float]:
        if self.records.exists(request.id):
            raise ConflictError(f"a request named {request.id!r} already exists")
        self.records.create(request.id, spec)
        if self.by_swarm:
            self.swarm.hand_to_swarm(request, spec)
            return self.records.get(request.id), None, 0.0
        started = time.perf_counter()
        outcome = self.scheduler.submit(request, self.clock(), queue=queue)
        decision_ms = (time.perf_counter() - started) * 1000
        self.effects.carry_out(outcome)
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
            self.effects.carry_out(outcome)
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

    def request_json(self, request_id: str, *, history: bool = True) -> dict[str, Any]:
        """A request's record as GET /requests/{id} answers it. While its task is booked, its
        current resources and cut are the registry's own, so the two never disagree."""
        record = self.records.get(request_id)
        out = record.to_json()
        out["service"] = self.service_json(record)
        task = self.store.task(request_id)
        if task is not None:
            out["current"] = {"cpu_shares": task.cpu_shares, "memory": task.memory}
            out["cut_received"] = str(task.cut_received)
        if not history:
            del out["history"], out["spec"]
        return out

    def service_json(self, record: RequestRecord) -> dict[str, Any] | None:
        """Its service level now (DESIGN 3.10), from its history; None for a record without
        a class or a dated submission."""
        cls = record.spec.get("class")
        if not isinstance(cls, int) or isinstance(cls, bool) or cls not in CLASSES:
            return None
        level = service_level(record.history, now=self.clock(), objective=self.slo.objective(cls),
                              alpha_s=self.settings.allocation_s,
                              is_job=record.spec.get("type") == TaskType.JOB.value)
        return None if level is None else level.to_json()

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
