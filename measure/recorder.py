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
        ``standby_w``: what a host switched off draws (``on_power_state``; default 5 W).
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

    rec.on_power_state(t, host_id, state)
        The power manager (DESIGN 3.15) put the host in power ``state`` (a domain.power
        PowerState) from ``t``: the energy as drawn charges that state's power; switches on
        and off are counted. Never called: every host is on (as drawn = all on).

    rec.on_moved(t, task_id, source, target)
        Consolidation moved a running service make-before-break (it never stopped); counted.

    rec.on_boot_wait(t, request_id, waited_s)
        A request held for a booting host (it was queued: ``on_queued``) is released after
        ``waited_s``; counted with its wait.
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

What the result holds: see :mod:`measure.summarise`.
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from domain.classes import MAX_CLASS
from domain.decision import Decision
from domain.energy import DEFAULT_STANDBY_W, PowerModel
from domain.errors import ValidationError
from domain.lifecycle import EndStatus
from domain.model import HostSpec, TaskType
from domain.power import PowerState
from domain.regions import RegionBounds
from domain.slo import SloTable
from measure.checks import as_member, check_class, check_nonneg, check_t
from measure.host_time import HostBook
from measure.results import PolicyResult
from measure.service_levels import SHARES_PER_CORE, RequestStatus
from measure.summarise import OpenEnds, RunInfo, Tallies, summarise
from measure.task_levels import LevelBook, TaskRecord
from workloads.trace import TraceHeader, TraceRequest, Workload

DEFAULT_DELAY_WINDOW_S = 300.0
DEFAULT_SERIES_BINS = 360
_RECENT_ENDS = 100_000


class Cut(NamedTuple):
    """Resources removed from one task by one decision."""

    task_id: str
    cpu_shares: int
    memory_bytes: int


def cuts_of(decision: Decision) -> list[Cut]:
    """A placing decision's cuts as the recorder counts them: every task it cut, and the
    placed request itself when it was placed cut (with what it did not receive)."""
    cuts = [Cut(c.task, c.cpu_freed, c.memory_freed) for c in decision.cuts]
    if decision.cut_received.numerator > 0:  # (no Fraction made and compared: interpreted code)
        request = decision.request
        cuts.append(Cut(request.id, request.cpu_shares - decision.cpu_shares,
                        request.memory - decision.memory))
    return cuts


_END_STATUS = {
    EndStatus.FINISHED: RequestStatus.FINISHED,
    EndStatus.STOPPED: RequestStatus.STOPPED,
    EndStatus.FAILED: RequestStatus.FAILED,
    EndStatus.OOM: RequestStatus.OOM,
}


def _series_step(series_step_s: float | None, duration_hint_s: float | None) -> float:
    """The width of the plots' bins: as given, or the expected duration in
    DEFAULT_SERIES_BINS bins (an hour when not known), at least a second."""
    if series_step_s is None:
        hint = duration_hint_s if duration_hint_s and duration_hint_s > 0 else 3600.0
        series_step_s = max(1.0, hint / DEFAULT_SERIES_BINS)
    if not series_step_s > 0:
        raise ValidationError("series_step_s", "must be > 0")
    return float(series_step_s)


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
        standby_w: float = DEFAULT_STANDBY_W,
    ) -> None:
        if not isinstance(policy, str) or not policy.strip():
            raise ValidationError("policy", "must be a non-empty name")
        if not hosts:
            raise ValidationError("hosts", "need at least one host")
        self.policy = policy
        self.t_start_s = check_t(t_start_s, "t_start_s")
        self.bounds = region_bounds or RegionBounds()
        if not delay_window_s > 0:
            raise ValidationError("delay_window_s", "must be > 0")
        self.delay_window_s = float(delay_window_s)
        self.series_step_s = _series_step(series_step_s, duration_hint_s)
        self.trace_info = dict(trace_info or {})
        self._hosts = HostBook(hosts, power_model, self.bounds, self.t_start_s,
                               self.series_step_s, duration_hint_s, standby_w)
        self._tasks: dict[str, TaskRecord] = {}
        self._recent_ends: OrderedDict[str, EndStatus] = OrderedDict()
        self._lost: set[str] = set()
        self._tallies = Tallies()
        self._finished = False
        # service levels (DESIGN 3.10)
        self._levels = LevelBook(self._tasks, slo or SloTable(),
                                 check_nonneg(allocation_s, "allocation_s"), keep_requests,
                                 self.t_start_s)

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
        t = check_t(t)
        task = TaskRecord(check_class(request_class), as_member(task_type, TaskType))
        task.workload = as_member(workload, Workload)
        task.expected_s = expected_makespan_s
        task.probe = probe
        task.submit_t = t
        if cpu_shares is not None:
            task.cores = check_nonneg(cpu_shares, "cpu_shares") / SHARES_PER_CORE
        self._levels.tick(t)
        self._levels.admit(task, t)
        if checkpoint_interval_s > 0 and task.clock is not None:
            task.clock.checkpoint_interval_s = check_nonneg(checkpoint_interval_s,
                                                            "checkpoint_interval_s")
        self._tasks[request_id] = task
        if probe:
            self._tallies.probes += 1

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
            cpu_cut = int(check_nonneg(cpu, "cuts.cpu_shares"))
            memory_cut = int(check_nonneg(memory, "cuts.memory_bytes"))
            self._tallies.cuts += 1
            self._tallies.cut_cpu += cpu_cut
            self._tallies.cut_memory += memory_cut
            task = self._tasks.get(task_id)
            if task is not None:
                self._tallies.by_class[task.request_class]["cut"] += 1
        for victim_id in kills:
            self._tallies.kills += 1
            self._tallies.victims.add(victim_id)
            task = self._tasks.get(victim_id)
            if task is None:  # never told about it: track it as a victim of unknown class
                task = TaskRecord(MAX_CLASS, TaskType.JOB)
                task.placed = True
                self._tasks[victim_id] = task
            else:
                self._tallies.by_class[task.request_class]["killed"] += 1
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
        t = check_t(t)
        if decision_ms is not None:
            decision_ms = check_nonneg(decision_ms, "decision_ms")
        request_class = check_class(request_class)
        self._levels.tick(t)
        task = self._tasks.get(request_id)
        if task is None or task.placed:
            task = TaskRecord(request_class, TaskType(task_type))
            self._levels.admit(task, t)
            self._tasks[request_id] = task
        on_arrival = not task.queued  # placed, if at all, by the decision on its arrival
        task.queued = False
        if delay_ms is None:
            delay_ms = decision_ms or 0.0
            if task.submit_t is not None:
                delay_ms = max((t - task.submit_t) * 1000.0, delay_ms)
        delay_ms = check_nonneg(delay_ms, "delay_ms")
        if decision_ms is not None:
            self._tallies.decision_ms.append(decision_ms)
        self._apply_cuts_and_kills(t, cuts, kills)
        if not task.probe:
            window = math.floor((t - self.t_start_s) / self.delay_window_s)
            self._tallies.decided(request_class, placed, delay_ms, window)
        if placed:
            task.placed = True
            self._runs(task, t, host_id, pass_name)
            self._levels.placed(task, t, on_arrival=on_arrival)
        else:
            del self._tasks[request_id]
            self._levels.over(request_id, task, t, RequestStatus.REFUSED)

    def _runs(self, task: TaskRecord, t: float, host_id: str | None,
              pass_name: str | None) -> None:
        """A placement: the task runs from ``t`` on ``host_id``."""
        task.running = True
        task.run_start = t
        task.host_id = host_id
        self._tallies.placed_by(pass_name)

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
        t = check_t(t)
        self._levels.tick(t)
        if decision_ms is not None:
            self._tallies.decision_ms.append(check_nonneg(decision_ms, "decision_ms"))
        self._tallies.reschedule_attempts += 1
        self._apply_cuts_and_kills(t, cuts, kills)
        task = self._tasks.get(task_id)
        if task is None:
            if task_id in self._lost:
                self._lost.discard(task_id)
            task = TaskRecord(MAX_CLASS, TaskType.JOB)
            task.placed = True
            self._tasks[task_id] = task
        if placed:
            self._tallies.reschedules_placed += 1
            self._lost.discard(task_id)
            task.awaiting = False
            self._runs(task, t, host_id, pass_name)
            self._recent_ends.pop(task_id, None)
            self._levels.placed(task, t)
        else:
            task.awaiting = True

    def on_queued(self, t: float, request_id: str, *, decision_ms: float | None = None) -> None:
        self._check_open()
        self._levels.tick(check_t(t))
        task = self._tasks.get(request_id)
        if task is None or task.placed:
            raise ValidationError("request_id", f"{request_id!r} is not a submitted request "
                                  "waiting for its first place")
        if decision_ms is not None:
            self._tallies.decision_ms.append(check_nonneg(decision_ms, "decision_ms"))
        if not task.queued and not task.probe:
            self._tallies.queued += 1
        task.queued = True

    def on_victim_lost(self, task_id: str, t: float | None = None) -> None:
        self._check_open()
        when = self._levels.last_t if t is None else check_t(t)
        self._levels.tick(when)
        task = self._tasks.pop(task_id, None)
        if task is not None and task.running:
            # It was running: it is not a waiting victim; put it back untouched.
            self._tasks[task_id] = task
            raise ValidationError("task_id", f"{task_id!r} is running, not a waiting victim")
        self._lost.add(task_id)
        if task is not None:
            self._levels.over(task_id, task, when, RequestStatus.LOST)

    def on_started(self, t: float, request_id: str) -> None:
        """The container of a placed request runs (a driver that sees it: the live replay's
        ``started`` events). Its allocation time, from its placement to now, replaces the
        ``allocation_s`` charged otherwise; the first placement's is charged to no one."""
        self._check_open()
        t = check_t(t)
        self._levels.tick(t)
        task = self._tasks.get(request_id)
        if task is not None:
            self._levels.started(task, t)

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
        t = check_t(t)
        host = self._hosts.host(host_id)
        if t < host.last_t:
            raise ValidationError("t", f"{t} is before the last state of {host_id} at "
                                  f"{host.last_t}")
        cpu = min(1.0, check_nonneg(cpu_util, "cpu_util"))
        mem = min(1.0, check_nonneg(memory_util, "memory_util"))
        if isinstance(task_count, bool) or not isinstance(task_count, int) or task_count < 0:
            raise ValidationError("task_count", f"must be an integer >= 0, got {task_count!r}")
        mem_bytes = (
            mem * host.cap_mem if memory_in_use_bytes is None
            else check_nonneg(memory_in_use_bytes, "memory_in_use_bytes")
        )
        cpu_alloc = (None if cpu_allocated_shares is None
                     else check_nonneg(cpu_allocated_shares, "cpu_allocated_shares"))
        mem_alloc = (None if memory_allocated_bytes is None
                     else check_nonneg(memory_allocated_bytes, "memory_allocated_bytes"))
        self._hosts.record(t, host_id, host, cpu, mem, mem_bytes, task_count, cpu_alloc,
                           mem_alloc)

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
        host = self._hosts.hosts[host_id]
        t = float(t)
        if t < host.last_t:
            raise ValidationError("t", f"{t} is before the last state of {host_id} at "
                                  f"{host.last_t}")
        if not (cpu_util >= 0 and memory_util >= 0 and task_count >= 0
                and memory_in_use_bytes >= 0 and cpu_allocated_shares >= 0
                and memory_allocated_bytes >= 0):
            raise ValidationError("host_state", f"negative or NaN state of {host_id} at {t}")
        self._hosts.record(t, host_id, host, min(1.0, float(cpu_util)),
                           min(1.0, float(memory_util)), float(memory_in_use_bytes),
                           task_count, float(cpu_allocated_shares),
                           float(memory_allocated_bytes))

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
        t = check_t(t)
        status = as_member(status, EndStatus)
        self._levels.tick(t)
        task = self._tasks.get(task_id)
        if task is None or not task.running:
            self._tallies.ignored += 1
            return
        task.running = False
        self._remember_end(task_id, status)
        if status is EndStatus.KILLED:  # a kill no decision reported
            self._tallies.kills += 1
            self._tallies.victims.add(task_id)
            self._tallies.by_class[task.request_class]["killed"] += 1
            task.awaiting = True
            self._stopped(task, t)
            return
        del self._tasks[task_id]
        self._levels.over(task_id, task, t, _END_STATUS[status])
        if status is EndStatus.OOM:
            self._count_oom(task.host_id)
        elif status is EndStatus.FAILED:
            self._tallies.tasks_failed += 1
        elif status is EndStatus.STOPPED:
            self._tallies.services_stopped += 1
        elif status is EndStatus.FINISHED and task.type is TaskType.JOB:
            self._tallies.jobs_finished += 1
            run_s = t - task.run_start if makespan_s is None else check_nonneg(
                makespan_s, "makespan_s")
            expected = expected_makespan_s if expected_makespan_s is not None else task.expected_s
            self._tallies.job_run(("probes" if task.probe else "jobs", task.workload.value),
                                  run_s, expected)
        elif status is EndStatus.FINISHED:  # a service that exited by itself
            self._tallies.services_stopped += 1

    def _count_oom(self, host_id: str | None) -> None:
        self._tallies.oom += 1
        host = self._hosts.hosts.get(host_id) if host_id is not None else None
        if host is not None:
            host.oom += 1

    def on_oom_kill(self, t: float, host_id: str, task_id: str) -> None:
        self._check_open()
        t = check_t(t)
        self._hosts.host(host_id)  # known, or ValidationError
        self._levels.tick(t)
        task = self._tasks.get(task_id)
        if task is not None and task.running:
            task.running = False
            task.host_id = host_id
            del self._tasks[task_id]
            self._remember_end(task_id, EndStatus.OOM)
            self._count_oom(host_id)
            self._levels.over(task_id, task, t, RequestStatus.OOM)
            return
        if self._recent_ends.get(task_id) is EndStatus.OOM:  # already counted by on_task_end
            self._recent_ends.pop(task_id)
            self._tallies.ignored += 1
            return
        self._count_oom(host_id)

    def _stopped(self, task: TaskRecord, t: float) -> None:
        """Taken off its host: a checkpointed restart is counted (per class too)."""
        if self._levels.stopped(task, t) and not task.probe:
            self._tallies.checkpoint_restarts += 1
            self._tallies.by_class[task.request_class]["checkpoint_restarts"] += 1

    def on_admission_refused(self, t: float, request_id: str) -> None:
        self._check_open()
        t = check_t(t)
        self._levels.tick(t)
        task = self._tasks.pop(request_id, None)
        if task is None or task.placed:
            if task is not None:
                self._tasks[request_id] = task
            raise ValidationError("request_id", f"{request_id!r} is not a new request")
        if task.probe:
            return
        tallies = self._tallies
        tallies.submitted += 1
        tallies.failed += 1
        tallies.refused_admission += 1
        counts = tallies.by_class[task.request_class]
        counts["requests"] += 1
        counts["failed"] += 1
        counts["refused_at_admission"] += 1
        self._levels.over(request_id, task, t, RequestStatus.REFUSED_AT_ADMISSION)

    def on_suspended(self, t: float, task_id: str) -> None:
        self._pause_changed(t, task_id, resumed=False)

    def on_resumed(self, t: float, task_id: str) -> None:
        self._pause_changed(t, task_id, resumed=True)

    def _pause_changed(self, t: float, task_id: str, *, resumed: bool) -> None:
        """A running task paused on its host, or running again (DESIGN 3.14): its clock and
        the counts (per class too); an unknown or stopped task is ignored."""
        self._check_open()
        t = check_t(t)
        self._levels.tick(t)
        task = self._tasks.get(task_id)
        if task is None or not task.running or task.clock is None:
            self._tallies.ignored += 1
            return
        if resumed:
            task.clock.resumed(t)
        else:
            task.clock.suspended(t)
        if not task.probe:
            if resumed:
                self._tallies.resumes += 1
            else:
                self._tallies.suspensions += 1
            self._tallies.by_class[task.request_class]["resumed" if resumed else "suspended"] += 1

    def on_restore(self, t: float, task_id: str, cpu_shares: int, memory: int) -> None:
        self._check_open()
        check_t(t)
        check_nonneg(cpu_shares, "cpu_shares")
        check_nonneg(memory, "memory")
        self._tallies.restores += 1

    # ------------------------------------------------------------------ power (DESIGN 3.15)

    def on_power_state(self, t: float, host_id: str, state: PowerState) -> None:
        """The host is in power ``state`` from ``t`` (the power manager switched it, or a
        switch ended): the energy as drawn charges that state's power from ``t``. A switch on
        (to ``booting``) and a switch off (to ``shutting-down``) are counted."""
        self._check_open()
        t = check_t(t)
        state = PowerState(state)
        self._hosts.energy.set_power_state(t, host_id, state)
        if state is PowerState.BOOTING:
            self._tallies.switch_on += 1
        elif state is PowerState.SHUTTING_DOWN:
            self._tallies.switch_off += 1

    def on_moved(self, t: float, task_id: str, source: str, target: str) -> None:
        """A service moved from ``source`` to ``target`` make-before-break (consolidation): it
        kept running, so its service level is unchanged; counted."""
        self._check_open()
        check_t(t)
        task = self._tasks.get(task_id)
        if task is None or not task.running:
            raise ValidationError("task_id", f"{task_id!r} is not a running task")
        self._hosts.host(target)
        task.host_id = target
        self._tallies.moves += 1

    def on_boot_wait(self, t: float, request_id: str, waited_s: float) -> None:
        """A request waited ``waited_s`` for a booting host (held for it, DESIGN 3.15) and is
        released at ``t``; its wait is pending time in its availability already (it was
        queued, ``on_queued``). Counted, with the wait."""
        self._check_open()
        check_t(t)
        self._tallies.boot_waits += 1
        self._tallies.boot_wait_s += check_nonneg(waited_s, "waited_s")

    def on_service_response(
        self, t: float, task_id: str, request_rate: int, response_ms: float
    ) -> None:
        self._check_open()
        check_t(t)
        if isinstance(request_rate, bool) or not isinstance(request_rate, int) or (
            request_rate < 0
        ):
            raise ValidationError("request_rate", f"must be an integer >= 0, got {request_rate!r}")
        response_ms = check_nonneg(response_ms, "response_ms")
        task = self._tasks.get(task_id)
        workload = task.workload.value if task is not None else Workload.GENERIC.value
        self._tallies.responses.setdefault((workload, request_rate), array("d")).append(response_ms)

    # ------------------------------------------------------------------ the result

    def finish(self, t_end: float) -> PolicyResult:
        self._check_open()
        t_end = check_t(t_end, "t_end")
        self._hosts.close(t_end)
        service = self._levels.finish(t_end)
        self._finished = True
        energy = self._hosts.energy.finish(t_end)
        run = RunInfo(self.policy, self.t_start_s, t_end, self.bounds, self.delay_window_s,
                      self.series_step_s, self.trace_info, self._hosts.models)
        return summarise(run, self._tallies, self._open_ends(), self._hosts.hosts, energy,
                         service, self._levels.levels())

    def _open_ends(self) -> OpenEnds:
        tasks = self._tasks.values()
        waiting = {tid for tid, task in self._tasks.items() if task.awaiting}
        return OpenEnds(
            lost=len(self._lost | waiting),  # disjoint: a task given up leaves _tasks
            waiting=len(waiting),
            undecided=sum(1 for task in tasks if not task.placed and not task.probe),
            queued_at_end=sum(1 for task in tasks if task.queued and not task.probe),
        )
