"""The modelled cluster: a task's run on a host (what it wants, holds and has done) and a host's
runs, demand and monitor, and what happens to them: a run starts, steps through its usage
profile, is cut, restored or taken off; a host's CPU is shared out (:func:`reshare`); memory
limits follow the live agent's rule and who runs out of memory is the kernel's choice
(:class:`Memory`); a host's monitors close their windows and push to the store
(:class:`Monitors`). The engine (sim/engine.py) moves them through time and decides when.

* usage: each run follows its workload's profile (sim/profiles.py): it wants a fraction of its
  original allocated cores and holds a fraction of its original memory;
* CPU contention (sim/contention.py): a host's cores are shared by CPU shares,
  work-conserving; a job progresses at served / wanted (at most 1), so contended jobs take
  longer than their makespan;
* memory: the limit of a container is its booked memory. A cut lowers it like the live agent:
  never below the current use plus a margin (the rest is counted as a cut not fully applied).
  A task whose use exceeds its limit, and the largest task of a host whose tasks use more than
  its memory, are killed for lack of memory (counted as OOM kills, never rescheduled);
* the monitor (sim/monitor_model.py): hosts and tasks are averaged over 30 s / 45 s windows and
  pushed only past the 10 p.p. threshold, so decisions see stale utilization.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from domain.model import TaskType
from host_registry.memory import MemoryStore
from monitor.core import TaskTracker, UtilSample
from sim.contention import share_cpu
from sim.monitor_model import (
    HostMonitor,
    MonitorModelConfig,
    WindowAccumulator,
    close_task_window,
)
from sim.profiles import UsageProfile
from workloads.trace import TraceRequest

SHARES_PER_CORE = 1024
_INF = math.inf


class Run:
    """One run of a task on a host (a rescheduled task gets a new run)."""

    __slots__ = ("acc", "alive", "alloc_cores", "ckpt_origin", "ckpt_s", "cpu_shares",
                 "demand", "finish_t", "host", "id", "is_job", "limit", "mem_use", "memory",
                 "original_memory", "paused", "paused_at", "paused_s", "profile", "rate",
                 "request", "run_wall", "saved", "served", "start_t", "step", "stop_t",
                 "work0", "work_left", "work_t")

    def __init__(self, request: TraceRequest, host: Host, profile: UsageProfile, t: float,
                 cpu_shares: int, memory: int, acc: WindowAccumulator) -> None:
        self.id = request.id
        self.request = request
        self.host = host
        self.profile = profile
        self.is_job = request.type is TaskType.JOB
        self.start_t = t
        self.step = 0
        self.alive = True
        self.cpu_shares = cpu_shares  # booked, possibly cut: the CPU weight
        self.memory = memory  # booked, possibly cut
        self.limit = memory  # the container's memory limit
        self.alloc_cores = request.cpu_shares / SHARES_PER_CORE  # original allocation
        self.original_memory = request.memory_bytes
        first = profile.steps[0]
        self.demand = profile.cpu_fraction(first, request.request_rate) * self.alloc_cores
        self.mem_use = first.memory_fraction * self.original_memory
        self.served = 0.0
        self.rate = 1.0
        self.work_left = request.makespan_s if self.is_job else 0.0
        self.work_t = t
        self.finish_t = t + self.work_left if self.is_job else _INF
        self.acc = acc
        # preemption that keeps work (sim/preempt.py, DESIGN 3.14): paused on its host; a
        # checkpointable job's interval, the running time before its first checkpoint counts,
        # its running time at work_t, the progress its last checkpoint saved in this run, and
        # the work it had left when this run started
        self.paused = False
        self.paused_at = 0.0  # since when it is paused
        self.paused_s = 0.0  # its pauses before, in all
        # a service: when its client stops it (sim/preempt.py; inf for a job)
        self.stop_t = _INF
        self.ckpt_s = request.checkpoint_interval_s
        self.ckpt_origin = 0.0
        self.run_wall = 0.0
        self.saved = 0.0
        self.work0 = self.work_left


class Host:
    __slots__ = (
        "booked_cpu",
        "booked_mem",
        "cap_cores",
        "cap_mem",
        "changed",
        "contended",
        "contended_s",
        "contended_since",
        "demand",
        "id",
        "mem_use",
        "monitor",
        "next_t",
        "phase",
        "recount",
        "runs",
        "served",
        "task_tracker",
    )

    def __init__(self, host_id: str, cpu_shares: int, memory_bytes: int, phase: float,
                 config: MonitorModelConfig, t: float) -> None:
        self.id = host_id
        self.cap_cores = cpu_shares / SHARES_PER_CORE
        self.cap_mem = memory_bytes
        self.phase = phase
        self.runs: dict[str, Run] = {}
        # Since the last recompute: runs started or changed, and whether a job left (then the
        # next completion must be looked for among all jobs).
        self.changed: list[Run] = []
        self.recount = False
        self.demand = 0.0
        self.served = 0.0
        self.mem_use = 0.0
        self.booked_cpu = 0
        self.booked_mem = 0
        self.next_t = _INF
        self.contended = False
        self.contended_since = 0.0
        self.contended_s = 0.0
        self.monitor = HostMonitor(config, phase, t)
        self.task_tracker = TaskTracker(config.threshold_pp)


def serve(run: Run, served: float, t: float) -> None:
    """``run`` is served ``served`` cores from ``t``: what its monitor window sees."""
    run.served = served
    allocation = run.cpu_shares / SHARES_PER_CORE
    # (paused, sim/preempt.py: nothing booked, nothing used)
    cpu_util = 0.0 if allocation <= 0 else served / allocation if served < allocation else 1.0
    mem_util = run.mem_use / run.limit if run.mem_use < run.limit else 1.0
    acc = run.acc
    if cpu_util != acc.cpu or mem_util != acc.memory:
        acc.set(t, cpu_util, mem_util)


# ------------------------------------------------------------------ runs on hosts


def place(run: Run) -> None:
    """``run`` starts on its host: it books its resources and uses what its profile says."""
    host = run.host
    host.runs[run.id] = run
    host.demand += run.demand
    host.mem_use += run.mem_use
    host.booked_cpu += run.cpu_shares
    host.booked_mem += run.memory


def take_off(run: Run) -> None:
    """``run`` leaves its host (it ended, was killed, or was killed for memory)."""
    run.alive = False
    host = run.host
    del host.runs[run.id]
    host.demand -= run.demand
    host.mem_use -= run.mem_use
    host.booked_cpu -= run.cpu_shares
    host.booked_mem -= run.memory
    if not host.runs:  # no float residue on an empty host
        host.demand = 0.0
        host.mem_use = 0.0
    host.recount = host.recount or run.is_job


def next_step(run: Run) -> None:
    """``run`` moves to the next step of its usage profile."""
    run.step += 1
    now = run.profile.steps[run.step]
    host = run.host
    demand = run.profile.cpu_fraction(now, run.request.request_rate) * run.alloc_cores
    mem_use = now.memory_fraction * run.original_memory
    host.demand += demand - run.demand
    host.mem_use += mem_use - run.mem_use
    run.demand = demand
    run.mem_use = mem_use


class Memory:
    """The memory model: a container's limit is its booked memory, lowered by a cut like the
    live agent lowers it (never below the current use plus a margin: the rest is counted as a
    cut not fully applied), raised by a restoration; a run over its limit, or the largest user
    of a host over its memory, is killed (counted as OOM kills)."""

    __slots__ = ("cut_unapplied_bytes", "cuts", "cuts_partial", "margin_bytes", "oom_by_workload",
                 "oom_host", "oom_limit")

    def __init__(self, margin_bytes: int) -> None:
        self.margin_bytes = margin_bytes
        self.cuts = 0  # task cuts that lowered memory
        self.cuts_partial = 0  # of those, limited by the task's use plus the margin
        self.cut_unapplied_bytes = 0  # what those could not take
        self.oom_host = 0  # a host's tasks used more than its memory: the largest was killed
        self.oom_limit = 0  # a task used more than its own (cut) limit
        self.oom_by_workload: dict[str, int] = {}  # "<workload> class <c>" -> OOM kills

    def cut(self, run: Run, cpu_shares: int, memory: int) -> None:
        """``run`` is cut to ``cpu_shares`` and ``memory``."""
        host = run.host
        host.booked_cpu += cpu_shares - run.cpu_shares
        host.booked_mem += memory - run.memory
        run.cpu_shares = cpu_shares
        if memory < run.memory:
            self.cuts += 1
            limit = self._lowered_limit(run, memory)
            if limit > memory:
                self.cuts_partial += 1
                self.cut_unapplied_bytes += limit - memory
            run.limit = limit
        run.memory = memory

    def restore(self, run: Run, cpu_shares: int, memory: int) -> None:
        """A cut given back (DESIGN 3.8): the run's CPU weight and booked memory grow back,
        and its container's limit is set to the booked memory as the live agent sets it
        (raised at once; lowered, by the rule of a cut, only where an earlier cut the node
        could apply only in part had left it above)."""
        host = run.host
        host.booked_cpu += cpu_shares - run.cpu_shares
        host.booked_mem += memory - run.memory
        run.cpu_shares = cpu_shares
        run.memory = memory
        run.limit = memory if memory >= run.limit else self._lowered_limit(run, memory)

    def _lowered_limit(self, run: Run, memory: int) -> int:
        """The container's limit once set to ``memory`` below it, by the live agent's rule:
        never below what the container uses plus a margin."""
        floor = math.ceil(run.mem_use) + self.margin_bytes
        return min(run.limit, max(memory, floor))

    @staticmethod
    def over_limit(run: Run) -> bool:
        return run.mem_use > run.limit

    def host_victim(self, host: Host) -> Run | None:
        """The run the kernel kills when the host's runs use more than its memory: the
        largest user of memory (counted); None while they fit."""
        if host.mem_use > host.cap_mem and host.runs:
            self.oom_host += 1
            return max(host.runs.values(), key=lambda r: (r.mem_use, r.id))
        return None

    def killed(self, run: Run) -> None:
        """``run`` was killed for lack of memory."""
        key = f"{run.request.workload.value} class {run.request.request_class}"
        self.oom_by_workload[key] = self.oom_by_workload.get(key, 0) + 1


# ------------------------------------------------------------------ progress


def note_checkpoints(run: Run, t: float) -> None:
    """The segment of ``run`` from ``run.work_t`` to ``t`` at its current rate is over: note the
    last checkpoint inside it (call it before the engine moves ``work_t`` to ``t``)."""
    if run.ckpt_s <= 0 or run.paused or not run.is_job:
        return
    dt = t - run.work_t
    if dt <= 0:
        return
    before = run.run_wall
    after = before + dt
    k = math.floor((after - run.ckpt_origin) / run.ckpt_s)
    if k >= 1:
        at = run.ckpt_origin + k * run.ckpt_s
        if at > before:  # a checkpoint inside this segment
            done = run.work0 - run.work_left  # progress at work_t, in full-speed seconds
            run.saved = done + run.rate * (at - before)
    run.run_wall = after


def advance(run: Run, t: float) -> None:
    """A job's progress brought to ``t`` at its current rate (its checkpoints noted)."""
    if not run.is_job or t <= run.work_t:
        return
    note_checkpoints(run, t)
    run.work_left -= run.rate * (t - run.work_t)
    run.work_t = t


# ------------------------------------------------------------------ CPU


def reshare(host: Host, t: float) -> tuple[float, float]:
    """A changed host's runs are served from ``t``: what each wants, or, when the host's
    demand exceeds its cores, its share by CPU shares (sim/contention.py; a job then progresses
    at served / wanted). Returns the cores served in all and when the host's next job ends."""
    contended = host.demand > host.cap_cores + 1e-12
    if not contended and not host.contended:
        return _reserve_changed(host, t)
    host.changed.clear()
    host.recount = False
    runs = list(host.runs.values())
    if contended:
        served_all = share_cpu(host.cap_cores, [r.demand for r in runs],
                               [r.cpu_shares for r in runs])
    else:
        served_all = [r.demand for r in runs]
    if contended != host.contended:
        if host.contended:
            host.contended_s += t - host.contended_since
        else:
            host.contended_since = t
        host.contended = contended
    total = 0.0
    next_t = _INF
    for run, served in zip(runs, served_all, strict=True):
        total += served
        serve(run, served, t)
        if run.is_job and not run.paused:
            rate = served / run.demand if served < run.demand else 1.0
            if rate != run.rate:
                advance(run, t)
                run.rate = rate
                run.finish_t = t + max(0.0, run.work_left) / rate
            if run.finish_t < next_t:
                next_t = run.finish_t
    return total, next_t


def contended_s(hosts: Iterable[Host], end_s: float) -> float:
    """The host-time with CPU demand above capacity, up to ``end_s``."""
    contended = 0.0
    for host in hosts:
        contended += host.contended_s
        if host.contended:
            contended += end_s - host.contended_since
    return contended


def _reserve_changed(host: Host, t: float) -> tuple[float, float]:
    """``reshare`` for a host uncontended before and after: every run is served what it
    wants and every job runs at full speed, so only the changed runs are served anew (and the
    next completion looked for among all jobs only when a job left). The same result, without
    sharing the CPU out again."""
    next_t = host.next_t
    for run in host.changed:
        if not run.alive:
            continue
        serve(run, run.demand, t)
        if run.is_job and run.finish_t < next_t:
            next_t = run.finish_t
    host.changed.clear()
    recount = host.recount
    if recount:  # a job left: the next end is looked for among all jobs
        host.recount = False
        next_t = _INF
    # (a plain loop, in the order reshare adds them up: the same floats as sum and min of
    # lists, without boxing each value of a compiled run)
    total = 0.0
    for r in host.runs.values():
        total += r.demand
        if recount and r.is_job and r.finish_t < next_t:
            next_t = r.finish_t
    return total, next_t


# ------------------------------------------------------------------ monitors


class Monitors:
    """What the hosts' monitors push to their cluster's store when a window closes
    (sim/monitor_model.py decides what and when), counted."""

    __slots__ = ("host_heartbeats", "host_pushes", "task_pushes")

    def __init__(self) -> None:
        self.host_pushes = 0
        self.host_heartbeats = 0  # dated monitors only (load-aware policies)
        self.task_pushes = 0  # task values sent (one per task per batch)

    def host_window(self, host: Host, store: MemoryStore, t: float) -> bool:
        """The host's window closed at ``t``: what it sends, if anything. True when it sent a
        utilization drop (which frees room for the waiting, DESIGN 3.7)."""
        update = host.monitor.window_closed(t)
        if update is None:
            return False
        if not update.has_values:  # a heartbeat: the values held are still current
            self.host_heartbeats += 1
            store.update_host_load(host.id, t, update.windows)
            return False
        sent = host.monitor.held
        assert sent is not None
        self.host_pushes += 1
        before = store.host(host.id)
        store.update_host_utilization(host.id, sent.cpu_util, sent.memory_util,
                                      update.measured_at, update.windows)
        return sent.cpu_util < before.cpu_util or sent.memory_util < before.memory_util

    def task_window(self, host: Host, store: MemoryStore, t: float) -> None:
        """The host's task window closed at ``t``: the tasks' values that moved are sent."""
        averages: dict[str, UtilSample] = {}
        for run in host.runs.values():
            average = run.acc.close(t)
            if average is not None:
                averages[run.id] = average
        batch = close_task_window(host.task_tracker, averages)
        for task in batch.tasks:
            store.update_task_utilization(task.task_id, task.cpu_util, task.memory_util)
        self.task_pushes += len(batch.tasks)
