"""The metrics recorder: what a simulator or a live replay tells it, and what it computes.

One :class:`MetricsRecorder` per policy run. The driver (simulator, live replay) calls the
``on_*`` methods as things happen, in time order, then :meth:`MetricsRecorder.finish` once,
which returns a :class:`measure.results.PolicyResult`
(:func:`measure.result_files.save_result` writes it as ``DIR/<policy>/result.json`` +
``host_series.csv``). The recorder does no I/O and never calls the scheduler.

Times ``t`` are seconds on the run's clock (trace time: 0 = start of the trace; the live replay
uses trace time too, i.e. wall time / compression). Ids: a placed request becomes a task with
the same id as the request; a rescheduled victim keeps its id.

Calls (all times in seconds, all sizes in shares and bytes)::

    rec = MetricsRecorder(policy, hosts, *, t_start_s=0.0, power_model=None,
                          region_bounds=None, delay_window_s=300.0, series_step_s=None,
                          duration_hint_s=None, trace_info=None)
        ``hosts``: the trace header's HostSpec tuple. ``power_model``: None (hp-ml110-g4 +
        0.392 W per GiB in use), a PowerModel for every host, or {host_id: PowerModel}.
        ``region_bounds``: domain.regions.RegionBounds (default 0.50 / 0.85).
        ``series_step_s``: width of the plot bins (default duration_hint_s / 360, >= 1 s).
    rec = MetricsRecorder.for_trace(policy, trace.header, **same_options)
        The same, with the hosts, duration hint and trace description from a trace header.

    rec.on_submit(t, request_id, request_class, task_type, *, workload=Workload.GENERIC,
                  expected_makespan_s=None, probe=False)
        A client submitted a request (optional but recommended: it starts the scheduling
        delay clock and carries the workload, the expected makespan and the probe flag;
        probes -- see workloads.thesis.iter_probe_requests -- are counted apart).
        ``rec.on_submit_request(request, t=None, probe=False)`` does it from a TraceRequest.

    rec.on_decision(t, request_id, request_class, task_type, placed, *, decision_ms,
                    pass_name=None, host_id=None, cuts=(), kills=(), delay_ms=None)
        The scheduler decided about a NEW request (placed or refused). ``decision_ms``: the
        scheduler's own compute time (wall clock). ``pass_name``: which pass placed it
        ("simple", "cut", "kill", or a baseline's name). ``cuts``: every task shrunk by this
        decision, as ``Cut(task_id, cpu_shares, memory_bytes)`` (or plain tuples) giving the
        amounts REMOVED -- include the placed request itself when it was placed cut.
        ``kills``: ids of the victims; each is counted as a kill and waits for a reschedule.
        Scheduling delay of the request, in ms: ``delay_ms`` if given, else
        ``max((t - submit time) x 1000, decision_ms)`` when on_submit was called for it, else
        ``decision_ms``. (So a simulator that charges no simulated time for a decision gets
        the compute time; a queueing simulator or a live replay gets what the client saw.)
        A refused request is a failed allocation.

    rec.on_reschedule(t, task_id, placed, *, decision_ms=None, pass_name=None, host_id=None,
                      cuts=(), kills=())
        A killed task was offered to the scheduler again (immediately after its kill, or a
        retry from the pending queue). Not counted as a new allocation; its decision time is
        counted in decision_ms statistics; its own cuts and kills are counted as usual.
        A victim that is not placed keeps waiting; it counts as "lost" if it is still waiting
        when ``finish`` is called, or when ``on_victim_lost`` says so.

    rec.on_victim_lost(task_id, t=None)
        The driver gives up on a victim (it will never be rescheduled).

    rec.on_queued(t, request_id, *, decision_ms=None)
        A NEW request that no pass placed waits in the pending queue, because its client
        asked to queue (DESIGN 3.7), after a decision that took ``decision_ms`` (None: a
        retry turned down without deciding). Call it when it is first queued and after every
        retry that fails. It is neither successful nor failed: ``on_decision`` places it
        later, and its wait is its scheduling delay. Still waiting at ``finish``, it is
        undecided (``queued_at_end``). Not a victim, and not a reschedule.

    rec.on_host_state(t, host_id, *, cpu_util, memory_util, task_count,
                      memory_in_use_bytes=None, cpu_allocated_shares=None,
                      memory_allocated_bytes=None)
        The host is in this state from ``t`` until its next call (piecewise constant; call it
        whenever anything changes, at least on every placement, end, cut and kill).
        ``cpu_util``/``memory_util``: true measured utilization in [0, 1] (values above 1 are
        clamped); ``task_count == 0`` means empty (may be switched off).
        ``memory_in_use_bytes`` defaults to ``memory_util x capacity``; allocations not given
        keep their last value. Before its first call a host is idle and empty.

    rec.on_task_end(t, task_id, status, *, makespan_s=None, expected_makespan_s=None)
        A running task ended; ``status`` is an :class:`EndStatus` (finished | failed | killed |
        oom | stopped). For a finished job, ``makespan_s`` is how long its last run took
        (default: ``t`` minus the time it was placed) and ``expected_makespan_s`` how long it
        should have taken (default: from on_submit); their ratio is the slowdown.
        Each run ends once: kills reported in on_decision/on_reschedule and OOM kills reported
        by on_oom_kill already end the run, so a later on_task_end for it is ignored (counted
        in ``ignored_events``). A ``killed`` end of a running task that no decision reported
        counts as a kill; an ``oom`` end counts as an OOM kill.

    rec.on_service_response(t, task_id, request_rate, response_ms)
        One round of client requests to a service (every 10 s in the thesis) took
        ``response_ms`` to be answered. Grouped by workload and rate ("redis-20").

    rec.on_oom_kill(t, host_id, task_id)
        The kernel killed a task for lack of memory (counted; ends the task's run).

    rec.on_restore(t, task_id, cpu_shares, memory)
        A cut task got resources back (DESIGN 3.8): ``cpu_shares`` and ``memory`` are what it
        has now. Counted (``restores``).

    rec.on_admission_refused(t, request_id)
        A submitted request was refused at admission (DESIGN 3.13): a failed allocation, an
        SLO miss (availability 0), counted apart per class (``refused_at_admission``).

    rec.on_suspended(t, task_id) / rec.on_resumed(t, task_id)
        A running task was paused on its host instead of killed, and runs again there (DESIGN
        3.14): its pause is p, it loses nothing; counted per class. A checkpointable job
        (``on_submit(..., checkpoint_interval_s=...)``) that is killed loses only its run since
        its last checkpoint; such kills are counted (``checkpoint_restarts``).

    rec.finish(t_end) -> PolicyResult
        Closes every host at ``t_end`` and computes everything. The recorder must not be used
        afterwards.

Errors: bad arguments (unknown host, time going backwards on one host, a class outside 1..4,
negative numbers) raise ``domain.errors.ValidationError``.

What the result holds (see :class:`PolicyMetrics` for every field): allocations and success
rate, cuts and kills, victims lost, OOM kills, decision time and scheduling delay percentiles
(overall and per 5-minute window), time-weighted CPU/memory utilization and booking, time share
of host-time in LEE / DEE / EED (U = max(cpu, memory), bounds of DESIGN 3.3) and empty, hosts
that could be switched off, energy with all hosts on and with empty hosts off (DESIGN 7.4),
successful allocations per kWh, job makespans and slowdowns, service response times, and
per-host binned time series (``HostSeries``) for plots.
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from domain.classes import CLASSES, MAX_CLASS, MIN_CLASS
from domain.energy import JOULES_PER_KWH, EnergyMeter, PowerModel
from domain.errors import ValidationError
from domain.lifecycle import EndStatus
from domain.model import HostSpec, TaskType
from domain.regions import RegionBounds
from domain.slo import Phase, ServiceClock, SloTable
from measure.host_time import HostTime, advance, host_series
from measure.results import (
    HostSummary,
    PolicyMetrics,
    PolicyResult,
    Stats,
    WindowStats,
)
from measure.service_levels import (
    GINI_INTERVAL_S,
    SHARES_PER_CORE,
    RequestLevel,
    RequestStatus,
    ServiceSummary,
    ServiceTally,
)
from workloads.trace import TraceHeader, TraceRequest, Workload

DEFAULT_DELAY_WINDOW_S = 300.0
DEFAULT_SERIES_BINS = 360
_PREALLOCATED_BINS = 10 * DEFAULT_SERIES_BINS
_RECENT_ENDS = 100_000


class Cut(NamedTuple):
    """Resources removed from one task by one decision."""

    task_id: str
    cpu_shares: int
    memory_bytes: int


# ------------------------------------------------------------------ internal state


class _Task:
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


_END_STATUS = {
    EndStatus.FINISHED: RequestStatus.FINISHED,
    EndStatus.STOPPED: RequestStatus.STOPPED,
    EndStatus.FAILED: RequestStatus.FAILED,
    EndStatus.OOM: RequestStatus.OOM,
}


def _check_t(t: float, field_name: str = "t") -> float:
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise ValidationError(field_name, f"must be a finite number, got {t!r}")
    return float(t)


def _check_nonneg(value: float, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(field_name, f"must be a finite number, got {value!r}")
    if value < 0:
        raise ValidationError(field_name, f"must be >= 0, got {value!r}")
    return float(value)


def _check_class(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (
        MIN_CLASS <= value <= MAX_CLASS
    ):
        raise ValidationError("request_class", f"must be {MIN_CLASS}..{MAX_CLASS}, got {value!r}")
    return value


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


class MetricsRecorder:
    """Collects one policy run; see the module docstring for the contract of every call."""

    def __init__(
        self,
        policy: str,
        hosts: Sequence[HostSpec],
        *,
        t_start_s: float = 0.0,
        power_model: PowerModel | Mapping[str, PowerModel] | None = None,
        region_bounds: RegionBounds | None = None,
        delay_window_s: float = DEFAULT_DELAY_WINDOW_S,
        series_step_s: float | None = None,
        duration_hint_s: float | None = None,
        trace_info: Mapping[str, Any] | None = None,
        slo: SloTable | None = None,
        allocation_s: float = 0.0,
        keep_requests: bool = True,
    ) -> None:
        if not isinstance(policy, str) or not policy.strip():
            raise ValidationError("policy", "must be a non-empty name")
        if not hosts:
            raise ValidationError("hosts", "need at least one host")
        self.policy = policy
        self.t_start_s = _check_t(t_start_s, "t_start_s")
        self.bounds = region_bounds or RegionBounds()
        if not delay_window_s > 0:
            raise ValidationError("delay_window_s", "must be > 0")
        self.delay_window_s = float(delay_window_s)
        if series_step_s is None:
            hint = duration_hint_s if duration_hint_s and duration_hint_s > 0 else 3600.0
            series_step_s = max(1.0, hint / DEFAULT_SERIES_BINS)
        if not series_step_s > 0:
            raise ValidationError("series_step_s", "must be > 0")
        self.series_step_s = float(series_step_s)
        self.trace_info = dict(trace_info or {})
        default_model = PowerModel.named()
        models: dict[str, PowerModel] = {}
        for spec in hosts:
            if power_model is None:
                models[spec.id] = default_model
            elif isinstance(power_model, PowerModel):
                models[spec.id] = power_model
            else:
                if spec.id not in power_model:
                    raise ValidationError("power_model", f"no power model for host {spec.id!r}")
                models[spec.id] = power_model[spec.id]
        self._hosts: dict[str, HostTime] = {}
        # the bins of the expected duration, made at once (+1: a float edge at the end; at
        # most _PREALLOCATED_BINS, the columns grow as needed beyond)
        bins = 0
        if duration_hint_s and 0 < duration_hint_s < math.inf:
            bins = min(_PREALLOCATED_BINS, math.ceil(duration_hint_s / self.series_step_s) + 1)
        for spec in hosts:
            if spec.id in self._hosts:
                raise ValidationError("hosts", f"host id {spec.id!r} appears twice")
            self._hosts[spec.id] = HostTime(spec, models[spec.id], self.t_start_s, bins)
        self._energy = EnergyMeter([h.id for h in hosts], models, t_start_s=self.t_start_s)
        self._models = models
        self._tasks: dict[str, _Task] = {}
        self._recent_ends: OrderedDict[str, EndStatus] = OrderedDict()
        self._lost: set[str] = set()
        self._queued = 0
        self._victims: set[str] = set()
        self._decision_ms = array("d")
        self._delays = array("d")
        self._delay_windows: dict[int, array[float]] = {}
        self._makespans: dict[str, array[float]] = {}
        self._slowdowns: dict[str, array[float]] = {}
        self._responses: dict[tuple[str, int], array[float]] = {}
        self._passes: dict[str, int] = {}
        self._by_class: dict[int, dict[str, int]] = {
            c: {"requests": 0, "successful": 0, "failed": 0, "cut": 0, "killed": 0,
                "refused_at_admission": 0, "suspended": 0, "resumed": 0,
                "checkpoint_restarts": 0}
            for c in range(MIN_CLASS, MAX_CLASS + 1)
        }
        self._submitted = 0
        self._probes = 0
        self._successful = 0
        self._failed = 0
        self._cuts = 0
        self._restores = 0
        self._refused_admission = 0
        self._suspensions = 0
        self._resumes = 0
        self._checkpoint_restarts = 0
        self._cut_cpu = 0
        self._cut_memory = 0
        self._kills = 0
        self._oom = 0
        self._reschedule_attempts = 0
        self._reschedules_placed = 0
        self._jobs_finished = 0
        self._services_stopped = 0
        self._tasks_failed = 0
        self._ignored = 0
        self._finished = False
        # service levels (DESIGN 3.10)
        self.slo = slo or SloTable()
        self.allocation_s = _check_nonneg(allocation_s, "allocation_s")
        self.keep_requests = keep_requests
        self._service = ServiceTally(self.slo, self.allocation_s)
        self._levels: list[tuple[int, RequestLevel]] = []
        self._seq = 0
        self._last_t = self.t_start_s
        self._next_interval_s = self.t_start_s + GINI_INTERVAL_S
        self._interval_ended: dict[int, list[float]] = {c: [] for c in CLASSES}

    @classmethod
    def for_trace(cls, policy: str, header: TraceHeader, **options: Any) -> MetricsRecorder:
        """A recorder for the cluster of ``header``; options as in the constructor."""
        info = {
            "source": header.source,
            "seed": header.seed,
            "duration_s": header.duration_s,
            "hosts": len(header.hosts),
            "notes": header.notes,
        }
        options.setdefault("duration_hint_s", header.duration_s)
        options.setdefault("trace_info", info)
        return cls(policy, header.hosts, **options)

    # ------------------------------------------------------------------ requests

    def _check_open(self) -> None:
        if self._finished:
            raise ValidationError("recorder", "finish() was already called")

    def on_submit(
        self,
        t: float,
        request_id: str,
        request_class: int,
        task_type: TaskType,
        *,
        workload: Workload = Workload.GENERIC,
        expected_makespan_s: float | None = None,
        probe: bool = False,
        cpu_shares: int | None = None,
        checkpoint_interval_s: float = 0.0,
    ) -> None:
        self._check_open()
        t = _check_t(t)
        task = _Task(_check_class(request_class), TaskType(task_type))
        task.workload = Workload(workload)
        task.expected_s = expected_makespan_s
        task.probe = probe
        task.submit_t = t
        if cpu_shares is not None:
            task.cores = _check_nonneg(cpu_shares, "cpu_shares") / SHARES_PER_CORE
        self._tick(t)
        self._admit(task, t)
        if checkpoint_interval_s > 0 and task.clock is not None:
            task.clock.checkpoint_interval_s = _check_nonneg(checkpoint_interval_s,
                                                             "checkpoint_interval_s")
        self._tasks[request_id] = task
        if probe:
            self._probes += 1

    def on_submit_request(
        self, request: TraceRequest, *, t: float | None = None, probe: bool = False
    ) -> None:
        """on_submit from a trace request (at its trace time unless ``t`` is given)."""
        self.on_submit(
            request.t_s if t is None else t,
            request.id,
            request.request_class,
            request.type,
            workload=request.workload,
            expected_makespan_s=request.makespan_s,
            probe=probe,
            cpu_shares=request.cpu_shares,
            checkpoint_interval_s=request.checkpoint_interval_s,
        )

    def _apply_cuts_and_kills(
        self, t: float, cuts: Iterable[tuple[str, int, int]], kills: Iterable[str]
    ) -> None:
        for cut in cuts:
            task_id, cpu, memory = cut
            cpu_cut = int(_check_nonneg(cpu, "cuts.cpu_shares"))
            memory_cut = int(_check_nonneg(memory, "cuts.memory_bytes"))
            self._cuts += 1
            self._cut_cpu += cpu_cut
            self._cut_memory += memory_cut
            task = self._tasks.get(task_id)
            if task is not None:
                self._by_class[task.request_class]["cut"] += 1
        for victim_id in kills:
            self._kills += 1
            self._victims.add(victim_id)
            task = self._tasks.get(victim_id)
            if task is None:  # never told about it: track it as a victim of unknown class
                task = _Task(MAX_CLASS, TaskType.JOB)
                task.placed = True
                self._tasks[victim_id] = task
            else:
                self._by_class[task.request_class]["killed"] += 1
                self._stopped(task, t)
            task.running = False
            task.awaiting = True
            self._remember_end(victim_id, EndStatus.KILLED)

    def on_decision(
        self,
        t: float,
        request_id: str,
        request_class: int,
        task_type: TaskType,
        placed: bool,
        *,
        decision_ms: float | None,
        pass_name: str | None = None,
        host_id: str | None = None,
        cuts: Iterable[tuple[str, int, int]] = (),
        kills: Iterable[str] = (),
        delay_ms: float | None = None,
    ) -> None:
        """The first decision on a request. ``decision_ms`` None: its time is not known (a
        live manager placed a queued request in a retry): not in the decision times, and the
        delay runs from the submission."""
        self._check_open()
        t = _check_t(t)
        if decision_ms is not None:
            decision_ms = _check_nonneg(decision_ms, "decision_ms")
        request_class = _check_class(request_class)
        self._tick(t)
        task = self._tasks.get(request_id)
        if task is None or task.placed:
            task = _Task(request_class, TaskType(task_type))
            self._admit(task, t)
            self._tasks[request_id] = task
        on_arrival = not task.queued  # placed, if at all, by the decision on its arrival
        task.queued = False
        if delay_ms is None:
            delay_ms = decision_ms or 0.0
            if task.submit_t is not None:
                delay_ms = max((t - task.submit_t) * 1000.0, delay_ms)
        delay_ms = _check_nonneg(delay_ms, "delay_ms")
        if decision_ms is not None:
            self._decision_ms.append(decision_ms)
        self._apply_cuts_and_kills(t, cuts, kills)
        if not task.probe:
            self._submitted += 1
            counts = self._by_class[request_class]
            counts["requests"] += 1
            self._delays.append(delay_ms)
            window = math.floor((t - self.t_start_s) / self.delay_window_s)
            self._delay_windows.setdefault(window, array("d")).append(delay_ms)
            if placed:
                self._successful += 1
                counts["successful"] += 1
            else:
                self._failed += 1
                counts["failed"] += 1
        if placed:
            task.placed = True
            task.running = True
            task.run_start = t
            task.host_id = host_id
            name = pass_name or "unknown"
            self._passes[name] = self._passes.get(name, 0) + 1
            self._placed(task, t, on_arrival=on_arrival)
        else:
            del self._tasks[request_id]
            self._over(request_id, task, t, RequestStatus.REFUSED)

    def on_reschedule(
        self,
        t: float,
        task_id: str,
        placed: bool,
        *,
        decision_ms: float | None = None,
        pass_name: str | None = None,
        host_id: str | None = None,
        cuts: Iterable[tuple[str, int, int]] = (),
        kills: Iterable[str] = (),
    ) -> None:
        self._check_open()
        t = _check_t(t)
        self._tick(t)
        if decision_ms is not None:
            self._decision_ms.append(_check_nonneg(decision_ms, "decision_ms"))
        self._reschedule_attempts += 1
        self._apply_cuts_and_kills(t, cuts, kills)
        task = self._tasks.get(task_id)
        if task is None:
            if task_id in self._lost:
                self._lost.discard(task_id)
            task = _Task(MAX_CLASS, TaskType.JOB)
            task.placed = True
            self._tasks[task_id] = task
        if placed:
            self._reschedules_placed += 1
            self._lost.discard(task_id)
            task.awaiting = False
            task.running = True
            task.run_start = t
            task.host_id = host_id
            name = pass_name or "unknown"
            self._passes[name] = self._passes.get(name, 0) + 1
            self._recent_ends.pop(task_id, None)
            self._placed(task, t)
        else:
            task.awaiting = True

    def on_queued(self, t: float, request_id: str, *, decision_ms: float | None = None) -> None:
        self._check_open()
        self._tick(_check_t(t))
        task = self._tasks.get(request_id)
        if task is None or task.placed:
            raise ValidationError("request_id", f"{request_id!r} is not a submitted request "
                                  "waiting for its first place")
        if decision_ms is not None:
            self._decision_ms.append(_check_nonneg(decision_ms, "decision_ms"))
        if not task.queued and not task.probe:
            self._queued += 1
        task.queued = True

    def on_victim_lost(self, task_id: str, t: float | None = None) -> None:
        self._check_open()
        when = self._last_t if t is None else _check_t(t)
        self._tick(when)
        task = self._tasks.pop(task_id, None)
        if task is not None and task.running:
            # It was running: it is not a waiting victim; put it back untouched.
            self._tasks[task_id] = task
            raise ValidationError("task_id", f"{task_id!r} is running, not a waiting victim")
        self._lost.add(task_id)
        if task is not None:
            self._over(task_id, task, when, RequestStatus.LOST)

    def on_started(self, t: float, request_id: str) -> None:
        """The container of a placed request runs (a driver that sees it: the live replay's
        ``started`` events). Its allocation time, from its placement to now, replaces the
        ``allocation_s`` charged otherwise; the first placement's is charged to no one."""
        self._check_open()
        t = _check_t(t)
        self._tick(t)
        task = self._tasks.get(request_id)
        if task is None or task.clock is None or task.clock.phase is not Phase.ALLOCATING:
            return
        task.clock.running(max(t, task.clock.since_s))

    # ------------------------------------------------------------------ service levels

    def _tick(self, t: float) -> None:
        """Time reached ``t``: close every fairness interval that ended by then (before what
        happens at ``t`` counts)."""
        if t > self._last_t:
            self._last_t = t
        while t >= self._next_interval_s:
            self._close_interval(self._next_interval_s)
            self._next_interval_s += GINI_INTERVAL_S

    def _close_interval(self, t: float) -> None:
        """The availabilities of every class's requests active in the interval ending at ``t``:
        those still admitted at ``t``, and those that ended within it."""
        sample = self._interval_ended
        for task in self._tasks.values():
            if task.clock is None or task.probe:
                continue
            task.clock.settle(t)
            cls = task.request_class
            sample[cls].append(task.clock.at(t, self.slo.objective(cls)).availability)
        self._service.add_interval(sample)
        self._interval_ended = {c: [] for c in CLASSES}

    def _admit(self, task: _Task, t: float) -> None:
        task.clock = ServiceClock(admitted_s=t)
        self._seq += 1
        task.seq = self._seq

    def _placed(self, task: _Task, t: float, *, on_arrival: bool = False) -> None:
        """A placement: its container runs at once, or ``allocation_s`` later when it ran
        before (its first allocation is charged to no one, DESIGN 3.10), unless the driver
        says when it runs (:meth:`on_started`) before anything else happens to it. The clock
        applies the start when time passes it."""
        if task.clock is None:
            self._admit(task, t)
        clock = task.clock
        assert clock is not None
        clock.placed(t, on_arrival=on_arrival,
                     starts_after_s=self.allocation_s if clock.placements > 0 else 0.0)

    def _stopped(self, task: _Task, t: float) -> None:
        """Taken off its host (a kill, a preemption): it waits again; a job's run is lost but
        for what its last checkpoint kept (then it counts as a checkpointed restart)."""
        clock = task.clock
        if clock is None:
            return
        before = clock.checkpoint_restarts
        clock.stopped(t, work_lost=task.type is TaskType.JOB)
        if clock.checkpoint_restarts > before and not task.probe:
            self._checkpoint_restarts += 1
            self._by_class[task.request_class]["checkpoint_restarts"] += 1

    def _over(self, request_id: str, task: _Task, t: float, status: RequestStatus) -> None:
        """Its accounting ends at ``t``."""
        clock = task.clock
        if clock is None or task.probe:
            return
        clock.ended(t)
        self._account(request_id, task, t, status)

    def _account(self, request_id: str, task: _Task, t: float, status: RequestStatus) -> None:
        assert task.clock is not None
        cls = task.request_class
        level = task.clock.at(t, self.slo.objective(cls))
        # refused at once: it received nothing (e = p = 0 would read as availability 1)
        refused = status in (RequestStatus.REFUSED, RequestStatus.REFUSED_AT_ADMISSION)
        availability = 0.0 if refused else level.availability
        met = self._service.add(cls, availability, level.preemptions)
        # delivered: every run, those a kill threw away included (their time is in p now)
        self._service.add_work((level.executed_s + level.lost_s) * task.cores,
                               level.lost_s * task.cores)
        if not refused:
            self._interval_ended[cls].append(availability)
        if self.keep_requests:
            self._levels.append((task.seq, RequestLevel(
                request_id, cls, task.type, availability, met, level.preemptions, status)))

    # ------------------------------------------------------------------ hosts

    def on_host_state(
        self,
        t: float,
        host_id: str,
        *,
        cpu_util: float,
        memory_util: float,
        task_count: int,
        memory_in_use_bytes: float | None = None,
        cpu_allocated_shares: float | None = None,
        memory_allocated_bytes: float | None = None,
    ) -> None:
        self._check_open()
        t = _check_t(t)
        host = self._hosts.get(host_id)
        if host is None:
            raise ValidationError("host_id", f"unknown host {host_id!r}")
        if t < host.last_t:
            raise ValidationError("t", f"{t} is before the last state of {host_id} at "
                                  f"{host.last_t}")
        cpu = min(1.0, _check_nonneg(cpu_util, "cpu_util"))
        mem = min(1.0, _check_nonneg(memory_util, "memory_util"))
        if isinstance(task_count, bool) or not isinstance(task_count, int) or task_count < 0:
            raise ValidationError("task_count", f"must be an integer >= 0, got {task_count!r}")
        mem_bytes = (
            mem * host.cap_mem if memory_in_use_bytes is None
            else _check_nonneg(memory_in_use_bytes, "memory_in_use_bytes")
        )
        cpu_alloc = (None if cpu_allocated_shares is None
                     else _check_nonneg(cpu_allocated_shares, "cpu_allocated_shares"))
        mem_alloc = (None if memory_allocated_bytes is None
                     else _check_nonneg(memory_allocated_bytes, "memory_allocated_bytes"))
        self._host_state(t, host_id, host, cpu, mem, mem_bytes, task_count, cpu_alloc, mem_alloc)

    def on_host_state_unchecked(
        self,
        t: float,
        host_id: str,
        cpu_util: float,
        memory_util: float,
        task_count: int,
        memory_in_use_bytes: float,
        cpu_allocated_shares: float,
        memory_allocated_bytes: float,
    ) -> None:
        """``on_host_state`` with every argument given, for a caller that guarantees them (the
        simulator's engine, which calls this on every change of a host): ``t`` finite, the
        numbers finite and >= 0, ``task_count`` an int >= 0, ``host_id`` known. It skips the
        type and finiteness checks only: a negative number or NaN, or a time before the host's
        last state, still raises; the state it records is the same."""
        self._check_open()
        host = self._hosts[host_id]
        t = float(t)
        if t < host.last_t:
            raise ValidationError("t", f"{t} is before the last state of {host_id} at "
                                  f"{host.last_t}")
        if not (cpu_util >= 0 and memory_util >= 0 and task_count >= 0
                and memory_in_use_bytes >= 0 and cpu_allocated_shares >= 0
                and memory_allocated_bytes >= 0):
            raise ValidationError("host_state", f"negative or NaN state of {host_id} at {t}")
        self._host_state(t, host_id, host, min(1.0, float(cpu_util)),
                         min(1.0, float(memory_util)), float(memory_in_use_bytes), task_count,
                         float(cpu_allocated_shares), float(memory_allocated_bytes))

    def _host_state(
        self,
        t: float,
        host_id: str,
        host: HostTime,
        cpu: float,
        mem: float,
        mem_bytes: float,
        task_count: int,
        cpu_alloc: float | None,
        mem_alloc: float | None,
    ) -> None:
        """Record the host's checked state from ``t`` on (allocations: None keeps them)."""
        advance(host, t, self.bounds, self.t_start_s, self.series_step_s)
        if cpu != host.cpu or mem_bytes != host.mem_bytes:  # else the same watts
            host.power = host.model.power_w_unchecked(cpu, mem_bytes)
        host.cpu = cpu
        host.mem = mem
        host.mem_bytes = mem_bytes
        host.tasks = task_count
        if task_count:
            host.used = True
        if cpu_alloc is not None:
            host.cpu_alloc = cpu_alloc / host.cap_cpu
        if mem_alloc is not None:
            host.mem_alloc = mem_alloc / host.cap_mem
        self._energy.update_unchecked(t, host_id, cpu, mem_bytes, task_count == 0, host.power)

    # ------------------------------------------------------------------ task ends

    def _remember_end(self, task_id: str, status: EndStatus) -> None:
        self._recent_ends[task_id] = status
        self._recent_ends.move_to_end(task_id)
        if len(self._recent_ends) > _RECENT_ENDS:
            self._recent_ends.popitem(last=False)

    def on_task_end(
        self,
        t: float,
        task_id: str,
        status: EndStatus,
        *,
        makespan_s: float | None = None,
        expected_makespan_s: float | None = None,
    ) -> None:
        self._check_open()
        t = _check_t(t)
        status = EndStatus(status)
        self._tick(t)
        task = self._tasks.get(task_id)
        if task is None or not task.running:
            self._ignored += 1
            return
        task.running = False
        self._remember_end(task_id, status)
        if status is EndStatus.KILLED:  # a kill no decision reported
            self._kills += 1
            self._victims.add(task_id)
            self._by_class[task.request_class]["killed"] += 1
            task.awaiting = True
            self._stopped(task, t)
            return
        del self._tasks[task_id]
        self._over(task_id, task, t, _END_STATUS[status])
        if status is EndStatus.OOM:
            self._count_oom(task.host_id)
        elif status is EndStatus.FAILED:
            self._tasks_failed += 1
        elif status is EndStatus.STOPPED:
            self._services_stopped += 1
        elif status is EndStatus.FINISHED and task.type is TaskType.JOB:
            self._jobs_finished += 1
            run_s = t - task.run_start if makespan_s is None else _check_nonneg(
                makespan_s, "makespan_s")
            expected = expected_makespan_s if expected_makespan_s is not None else task.expected_s
            keys = ["probes" if task.probe else "jobs", task.workload.value]
            for key in keys:
                self._makespans.setdefault(key, array("d")).append(run_s)
                if expected:
                    self._slowdowns.setdefault(key, array("d")).append(run_s / expected)
        elif status is EndStatus.FINISHED:  # a service that exited by itself
            self._services_stopped += 1

    def _count_oom(self, host_id: str | None) -> None:
        self._oom += 1
        host = self._hosts.get(host_id) if host_id is not None else None
        if host is not None:
            host.oom += 1

    def on_oom_kill(self, t: float, host_id: str, task_id: str) -> None:
        self._check_open()
        t = _check_t(t)
        if host_id not in self._hosts:
            raise ValidationError("host_id", f"unknown host {host_id!r}")
        self._tick(t)
        task = self._tasks.get(task_id)
        if task is not None and task.running:
            task.running = False
            task.host_id = host_id
            del self._tasks[task_id]
            self._remember_end(task_id, EndStatus.OOM)
            self._count_oom(host_id)
            self._over(task_id, task, t, RequestStatus.OOM)
            return
        if self._recent_ends.get(task_id) is EndStatus.OOM:  # already counted by on_task_end
            self._recent_ends.pop(task_id)
            self._ignored += 1
            return
        self._count_oom(host_id)

    def on_admission_refused(self, t: float, request_id: str) -> None:
        self._check_open()
        t = _check_t(t)
        self._tick(t)
        task = self._tasks.pop(request_id, None)
        if task is None or task.placed:
            if task is not None:
                self._tasks[request_id] = task
            raise ValidationError("request_id", f"{request_id!r} is not a new request")
        if task.probe:
            return
        self._submitted += 1
        self._failed += 1
        self._refused_admission += 1
        counts = self._by_class[task.request_class]
        counts["requests"] += 1
        counts["failed"] += 1
        counts["refused_at_admission"] += 1
        self._over(request_id, task, t, RequestStatus.REFUSED_AT_ADMISSION)

    def on_suspended(self, t: float, task_id: str) -> None:
        self._check_open()
        t = _check_t(t)
        self._tick(t)
        task = self._tasks.get(task_id)
        if task is None or not task.running or task.clock is None:
            self._ignored += 1
            return
        task.clock.suspended(t)
        if not task.probe:
            self._suspensions += 1
            self._by_class[task.request_class]["suspended"] += 1

    def on_resumed(self, t: float, task_id: str) -> None:
        self._check_open()
        t = _check_t(t)
        self._tick(t)
        task = self._tasks.get(task_id)
        if task is None or not task.running or task.clock is None:
            self._ignored += 1
            return
        task.clock.resumed(t)
        if not task.probe:
            self._resumes += 1
            self._by_class[task.request_class]["resumed"] += 1

    def on_restore(self, t: float, task_id: str, cpu_shares: int, memory: int) -> None:
        self._check_open()
        _check_t(t)
        _check_nonneg(cpu_shares, "cpu_shares")
        _check_nonneg(memory, "memory")
        self._restores += 1

    def on_service_response(
        self, t: float, task_id: str, request_rate: int, response_ms: float
    ) -> None:
        self._check_open()
        _check_t(t)
        if isinstance(request_rate, bool) or not isinstance(request_rate, int) or (
            request_rate < 0
        ):
            raise ValidationError("request_rate", f"must be an integer >= 0, got {request_rate!r}")
        response_ms = _check_nonneg(response_ms, "response_ms")
        task = self._tasks.get(task_id)
        workload = task.workload.value if task is not None else Workload.GENERIC.value
        self._responses.setdefault((workload, request_rate), array("d")).append(response_ms)

    # ------------------------------------------------------------------ the result

    def finish(self, t_end: float) -> PolicyResult:
        self._check_open()
        t_end = _check_t(t_end, "t_end")
        for host_id, host in self._hosts.items():
            if t_end < host.last_t:
                raise ValidationError(
                    "t_end", f"{t_end} is before the last state of {host_id} at {host.last_t}"
                )
            advance(host, t_end, self.bounds, self.t_start_s, self.series_step_s)
        service = self._finish_service(t_end)
        self._finished = True
        energy = self._energy.finish(t_end)
        duration = t_end - self.t_start_s
        n_hosts = len(self._hosts)
        host_time = duration * n_hosts

        host_summaries: list[HostSummary] = []
        for host_id, host in self._hosts.items():
            host_energy = energy.host(host_id)
            host_summaries.append(
                HostSummary(
                    host_id=host_id,
                    cpu_capacity_shares=host.cap_cpu,
                    memory_capacity_bytes=host.cap_mem,
                    avg_cpu_util=_ratio(host.cpu_s, duration) or 0.0,
                    avg_memory_util=_ratio(host.mem_s, duration) or 0.0,
                    lee_share=_ratio(host.region_s[0], duration) or 0.0,
                    dee_share=_ratio(host.region_s[1], duration) or 0.0,
                    eed_share=_ratio(host.region_s[2], duration) or 0.0,
                    empty_share=_ratio(host.empty_s, duration) or 0.0,
                    energy_kwh=host_energy.energy_kwh,
                    energy_kwh_switch_off=host_energy.energy_kwh_switch_off,
                    oom_kills=host.oom,
                )
            )
        hosts = list(self._hosts.values())

        def total(attr: str) -> float:
            return math.fsum(getattr(h, attr) for h in hosts)

        busy = total("busy_s")
        region = [math.fsum(h.region_s[i] for h in hosts) for i in range(3)]
        decision = Stats.of(self._decision_ms)
        delay = Stats.of(self._delays)
        windows = self._windows(t_end)
        makespan = {k: Stats.of(v) for k, v in sorted(self._makespans.items())}
        slowdown = {k: Stats.of(v) for k, v in sorted(self._slowdowns.items())}
        response = {
            f"{w}-{r}": Stats.of(v) for (w, r), v in sorted(self._responses.items())
        }
        by_rate_values: dict[int, list[float]] = {}
        for (_, r), v in self._responses.items():
            by_rate_values.setdefault(r, []).extend(v)
        response_by_rate = {str(r): Stats.of(v) for r, v in sorted(by_rate_values.items())}
        all_responses = Stats.of(x for v in self._responses.values() for x in v)
        jobs = makespan.get("jobs", Stats(0))
        job_slowdown = slowdown.get("jobs", Stats(0))
        probes = makespan.get("probes", Stats(0))
        probe_slowdown = slowdown.get("probes", Stats(0))
        waiting = {tid for tid, task in self._tasks.items() if task.awaiting}
        lost = len(self._lost | waiting)  # disjoint: a task given up leaves _tasks
        kwh = energy.energy_kwh
        kwh_off = energy.energy_kwh_switch_off
        decided = self._successful + self._failed
        undecided = sum(
            1 for task in self._tasks.values() if not task.placed and not task.probe
        )
        queued_at_end = sum(
            1 for task in self._tasks.values() if task.queued and not task.probe
        )

        metrics = PolicyMetrics(
            duration_s=duration,
            hosts=n_hosts,
            requests=decided + undecided,
            successful=self._successful,
            failed=self._failed,
            undecided=undecided,
            success_rate=_ratio(self._successful, decided),
            probes=self._probes,
            cuts=self._cuts,
            restores=self._restores,
            cut_cpu_shares=self._cut_cpu,
            cut_memory_bytes=self._cut_memory,
            kills=self._kills,
            kills_share=_ratio(self._kills, self._successful),
            victims=len(self._victims),
            victims_lost=lost,
            victims_lost_share=_ratio(lost, len(self._victims)),
            victims_waiting_at_end=len(waiting),
            queued_requests=self._queued,
            queued_at_end=queued_at_end,
            reschedule_attempts=self._reschedule_attempts,
            reschedules_placed=self._reschedules_placed,
            oom_kills=self._oom,
            jobs_finished=self._jobs_finished,
            services_stopped=self._services_stopped,
            tasks_failed=self._tasks_failed,
            ignored_events=self._ignored,
            decisions=decision.count,
            decision_ms_mean=decision.mean,
            decision_ms_p50=decision.p50,
            decision_ms_p90=decision.p90,
            decision_ms_p99=decision.p99,
            decision_ms_max=decision.max,
            scheduling_delay_ms_mean=delay.mean,
            scheduling_delay_ms_p50=delay.p50,
            scheduling_delay_ms_p90=delay.p90,
            scheduling_delay_ms_p99=delay.p99,
            avg_cpu_util=_ratio(total("cpu_s"), host_time) or 0.0,
            avg_memory_util=_ratio(total("mem_s"), host_time) or 0.0,
            avg_cpu_util_busy=_ratio(total("cpu_busy_s"), busy),
            avg_memory_util_busy=_ratio(total("mem_busy_s"), busy),
            avg_cpu_allocated=_ratio(total("cpu_alloc_s"), host_time) or 0.0,
            avg_memory_allocated=_ratio(total("mem_alloc_s"), host_time) or 0.0,
            avg_overbooking_busy=_ratio(total("of_busy_s"), busy),
            lee_share=_ratio(region[0], host_time) or 0.0,
            dee_share=_ratio(region[1], host_time) or 0.0,
            eed_share=_ratio(region[2], host_time) or 0.0,
            empty_share=_ratio(total("empty_s"), host_time) or 0.0,
            hosts_switchable_off_mean=_ratio(total("empty_s"), duration) or 0.0,
            hosts_never_used=sum(1 for h in hosts if not h.used),
            energy_kwh=kwh,
            energy_kwh_switch_off=kwh_off,
            avg_power_w=_ratio(kwh * JOULES_PER_KWH, duration) or 0.0,
            avg_power_w_switch_off=_ratio(kwh_off * JOULES_PER_KWH, duration) or 0.0,
            successful_per_kwh=_ratio(self._successful, kwh),
            successful_per_kwh_switch_off=_ratio(self._successful, kwh_off),
            job_makespan_s_mean=jobs.mean,
            job_makespan_s_p50=jobs.p50,
            job_makespan_s_p90=jobs.p90,
            job_makespan_s_p99=jobs.p99,
            job_slowdown_mean=job_slowdown.mean,
            job_slowdown_p50=job_slowdown.p50,
            job_slowdown_p90=job_slowdown.p90,
            job_slowdown_p99=job_slowdown.p99,
            probe_makespan_s_mean=probes.mean,
            probe_slowdown_mean=probe_slowdown.mean,
            responses=all_responses.count,
            response_ms_mean=all_responses.mean,
            response_ms_p50=all_responses.p50,
            response_ms_p75=all_responses.p75,
            response_ms_p90=all_responses.p90,
            response_ms_p99=all_responses.p99,
            slo_fulfilment=service.fulfilment,
            slo_met=service.met,
            slo_met_per_kwh=_ratio(service.met, kwh),
            slo_met_per_kwh_switch_off=_ratio(service.met, kwh_off),
            preemptions_mean=service.preemptions_mean,
            preemptions_max=service.preemptions_max,
            work_lost_cpu_s=service.work_lost_cpu_s,
            work_lost_share=service.work_lost_share,
            refused_at_admission=self._refused_admission,
            suspensions=self._suspensions,
            resumes=self._resumes,
            checkpoint_restarts=self._checkpoint_restarts,
        )
        first_model = next(iter(self._models.values()))
        energy_model: dict[str, Any] = first_model.describe()
        if len(set(self._models.values())) > 1:
            energy_model = {
                "per_host": {h: m.table.name for h, m in self._models.items()},
                "memory_w_per_gib": first_model.memory_w_per_gib,
            }
        return PolicyResult(
            policy=self.policy,
            t_start_s=self.t_start_s,
            t_end_s=t_end,
            trace=self.trace_info,
            energy_model=energy_model,
            region_bounds=(self.bounds.lee_below, self.bounds.eed_above),
            metrics=metrics,
            decision_ms=decision,
            scheduling_delay_ms=delay,
            delay_windows=windows,
            makespan_s=makespan,
            slowdown=slowdown,
            response_ms=response,
            response_ms_by_rate=response_by_rate,
            passes=dict(sorted(self._passes.items())),
            by_class={str(c): dict(v) for c, v in self._by_class.items()},
            hosts=tuple(host_summaries),
            series=host_series(self._hosts, self.t_start_s, self.series_step_s, t_end),
            service_levels=service,
            request_levels=tuple(level for _, level in sorted(self._levels,
                                                              key=lambda item: item[0])),
        )

    def _finish_service(self, t_end: float) -> ServiceSummary:
        """Every request still admitted is evaluated at ``t_end`` (DESIGN 3.10), and the last
        fairness interval, even a short one, is closed there."""
        self._tick(t_end)
        if t_end > self._next_interval_s - GINI_INTERVAL_S:
            self._close_interval(t_end)
        for request_id, task in self._tasks.items():
            if task.clock is None or task.probe:
                continue
            task.clock.settle(t_end)
            running = task.clock.phase in (Phase.RUNNING, Phase.ALLOCATING)
            self._account(request_id, task, t_end,
                          RequestStatus.RUNNING if running else RequestStatus.WAITING)
        return self._service.summary()

    def _windows(self, t_end: float) -> tuple[WindowStats, ...]:
        duration = t_end - self.t_start_s
        count = max(1, math.ceil(duration / self.delay_window_s)) if duration > 0 else 0
        count = max(count, max(self._delay_windows, default=-1) + 1)
        first = min(0, min(self._delay_windows, default=0))
        result = []
        for index in range(first, count):
            start = self.t_start_s + index * self.delay_window_s
            result.append(
                WindowStats(
                    start_s=start,
                    end_s=start + self.delay_window_s,
                    delay_ms=Stats.of(self._delay_windows.get(index, ())),
                )
            )
        return tuple(result)
