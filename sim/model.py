"""The modelled cluster: a task's run on a host (what it wants, holds and has done) and a host's
runs, demand and monitor. The engine (sim/engine.py) moves them through time."""

from __future__ import annotations

import math

from domain.model import TaskType
from monitor.core import TaskTracker
from sim.monitor_model import HostMonitor, MonitorModelConfig, WindowAccumulator
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
