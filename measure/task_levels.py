"""What the recorder knows of each request or task (:class:`TaskRecord`), and its service levels
as time passes (:class:`LevelBook`, DESIGN 3.10). Pure: no I/O.

The book keeps one :class:`domain.slo.ServiceClock` per admitted request; when a request is
over (or the run ends) its final figures go to a :class:`measure.service_levels.ServiceTally`,
and, when asked to, stay as its level (:class:`measure.request_levels.LevelSlots`). Every 10
minutes (GINI_INTERVAL_S) it closes a fairness interval over the requests active in it.
"""

from __future__ import annotations

from collections.abc import Mapping

from domain.classes import CLASSES
from domain.model import TaskType
from domain.slo import Phase, ServiceClock, SloTable
from measure.request_levels import LevelSlots, RequestLevels
from measure.service_levels import (
    GINI_INTERVAL_S,
    RequestStatus,
    ServiceSummary,
    ServiceTally,
)
from workloads.trace import Workload


class TaskRecord:
    """One request (or task): what it is and where it stands."""

    __slots__ = ("awaiting", "clock", "cores", "expected_s", "host_id", "placed", "probe",
                 "queued", "request_class", "run_start", "running", "seq",
                 "submit_t", "type", "workload")

    def __init__(self, request_class: int, task_type: TaskType) -> None:
        self.request_class = request_class
        self.type = task_type
        self.workload = Workload.GENERIC
        self.expected_s: float | None = None
        self.probe = False
        self.submit_t: float | None = None
        self.placed = False
        self.running = False
        self.run_start = 0.0
        self.awaiting = False  # a killed victim waiting to be placed again
        self.queued = False  # a new request waiting in the pending queue, never placed yet
        self.host_id: str | None = None
        # service levels (DESIGN 3.10): its clock from its admission, its order of submission,
        # its requested cores, and when its current placement's container runs (None: it runs,
        # or it is not placed)
        self.clock: ServiceClock | None = None
        self.seq = 0
        self.cores = 0.0


class LevelBook:
    """The service levels of the records in ``tasks`` (the recorder's own dict, shared)."""

    __slots__ = ("_interval_ended", "_levels", "_next_interval_s", "_seq", "_service",
                 "allocation_s", "keep_requests", "last_t", "slo", "tasks")

    def __init__(self, tasks: Mapping[str, TaskRecord], slo: SloTable, allocation_s: float,
                 keep_requests: bool, t_start_s: float) -> None:
        self.tasks = tasks
        self.slo = slo
        self.allocation_s = allocation_s
        self.keep_requests = keep_requests
        self._service = ServiceTally(slo, allocation_s)
        # the requests kept (keep_requests): a slot per admitted request, at index seq - 1,
        # filled when it is over (one never accounted, a probe's, stays empty). No (seq,
        # level) pair per request and no sort at the end: a day on 1,000 hosts keeps ten
        # million, as columns (measure/request_levels.py).
        self._levels = LevelSlots()
        self._seq = 0
        self.last_t = t_start_s  # the latest time told
        self._next_interval_s = t_start_s + GINI_INTERVAL_S
        self._interval_ended: dict[int, list[float]] = {c: [] for c in CLASSES}

    def tick(self, t: float) -> None:
        """Time reached ``t``: close every fairness interval that ended by then (before what
        happens at ``t`` counts)."""
        if t > self.last_t:
            self.last_t = t
        while t >= self._next_interval_s:
            self._close_interval(self._next_interval_s)
            self._next_interval_s += GINI_INTERVAL_S

    def _close_interval(self, t: float) -> None:
        """The availabilities of every class's requests active in the interval ending at ``t``:
        those still admitted at ``t``, and those that ended within it."""
        sample = self._interval_ended
        for task in self.tasks.values():
            if task.clock is None or task.probe:
                continue
            task.clock.settle(t)
            cls = task.request_class
            sample[cls].append(task.clock.at(t, self.slo.objective(cls)).availability)
        self._service.add_interval(sample)
        self._interval_ended = {c: [] for c in CLASSES}

    def admit(self, task: TaskRecord, t: float) -> None:
        task.clock = ServiceClock(admitted_s=t)
        self._seq += 1
        task.seq = self._seq
        if self.keep_requests:
            self._levels.reserve()

    def placed(self, task: TaskRecord, t: float, *, on_arrival: bool = False) -> None:
        """A placement: its container runs at once, or ``allocation_s`` later when it ran
        before (its first allocation is charged to no one, DESIGN 3.10), unless the driver
        says when it runs (:meth:`started`) before anything else happens to it. The clock
        applies the start when time passes it."""
        if task.clock is None:
            self.admit(task, t)
        clock = task.clock
        assert clock is not None
        clock.placed(t, on_arrival=on_arrival,
                     starts_after_s=self.allocation_s if clock.placements > 0 else 0.0)

    @staticmethod
    def started(task: TaskRecord, t: float) -> None:
        """Its container runs from ``t`` (if it was being allocated)."""
        if task.clock is None or task.clock.phase is not Phase.ALLOCATING:
            return
        task.clock.running(max(t, task.clock.since_s))

    @staticmethod
    def stopped(task: TaskRecord, t: float) -> bool:
        """Taken off its host (a kill, a preemption): it waits again; a job's run is lost but
        for what its last checkpoint kept. True when a checkpoint kept some (a checkpointed
        restart)."""
        clock = task.clock
        if clock is None:
            return False
        before = clock.checkpoint_restarts
        clock.stopped(t, work_lost=task.type is TaskType.JOB)
        return clock.checkpoint_restarts > before

    def over(self, request_id: str, task: TaskRecord, t: float, status: RequestStatus) -> None:
        """Its accounting ends at ``t``."""
        clock = task.clock
        if clock is None or task.probe:
            return
        clock.ended(t)
        self._account(request_id, task, t, status)

    def _account(
        self, request_id: str, task: TaskRecord, t: float, status: RequestStatus
    ) -> None:
        assert task.clock is not None
        cls = task.request_class
        level = task.clock.at(t, self.slo.objective(cls))
        # refused at once or at the door: it received nothing (e = p = 0 would read as
        # availability 1)
        refused = status in (RequestStatus.REFUSED, RequestStatus.REFUSED_AT_ADMISSION)
        availability = 0.0 if refused else level.availability
        met = self._service.add(cls, availability, level.preemptions)
        # delivered: every run, those a kill threw away included (their time is in p now)
        self._service.add_work((level.executed_s + level.lost_s) * task.cores,
                               level.lost_s * task.cores)
        if not refused:
            self._interval_ended[cls].append(availability)
        if self.keep_requests:
            self._levels.fill(task.seq - 1, request_id, cls, task.type, availability, met,
                              level.preemptions, status)

    def finish(self, t_end: float) -> ServiceSummary:
        """Every request still admitted is evaluated at ``t_end`` (DESIGN 3.10), and the last
        fairness interval, even a short one, is closed there."""
        self.tick(t_end)
        if t_end > self._next_interval_s - GINI_INTERVAL_S:
            self._close_interval(t_end)
        for request_id, task in self.tasks.items():
            if task.clock is None or task.probe:
                continue
            task.clock.settle(t_end)
            running = task.clock.phase in (Phase.RUNNING, Phase.ALLOCATING)
            self._account(request_id, task, t_end,
                          RequestStatus.RUNNING if running else RequestStatus.WAITING)
        return self._service.summary()

    def levels(self) -> RequestLevels:
        """The requests kept, in submission order (handed over: the book keeps none after)."""
        return self._levels.levels()
