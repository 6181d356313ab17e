"""The monitor's pure core: utilization arithmetic, window averages, threshold decisions, back-off.

Nothing here reads a file, a clock or the network. The samplers hand in counter readings (with the
monotonic time they were taken at), the main loop hands in the window's samples, and the core
answers with numbers and with small frozen decision objects ("what to send").

Units: utilizations are fractions in [0, 1]; thresholds are percentage points (``_pp``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from domain.load import WINDOW_SPANS_S, LoadWindows, windows_of

NS_PER_S = 1_000_000_000
UJ_PER_J = 1_000_000
SHARES_PER_CORE = 1024
# Floating-point slack on the threshold: 0.41 - 0.31 is 0.0999..., which is 10 p.p. to a human.
_THRESHOLD_SLACK_PP = 1e-6
# A timer may wake a hair early; a slot due that close counts as due.
_EARLY_S = 1e-6


class Resource(StrEnum):
    CPU = "cpu"
    MEMORY = "memory"


# --- utilization arithmetic -------------------------------------------------------------------


def clamp_fraction(value: float) -> float:
    """``value`` capped to [0, 1]; NaN counts as 0."""
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class CpuCounter:
    """A cumulative CPU-time counter (cgroup ``cpuacct.usage``, ``cpu.stat`` usage, or the
    Docker stats ``total_usage``) and the monotonic time it was read at."""

    usage_ns: int
    at_s: float


def cores_used(previous: CpuCounter, current: CpuCounter) -> float | None:
    """Average number of cores busy between two readings; None when the readings cannot be
    compared (no time elapsed, or the counter went backwards: the cgroup was recreated)."""
    elapsed_s = current.at_s - previous.at_s
    delta_ns = current.usage_ns - previous.usage_ns
    if elapsed_s <= 0 or delta_ns < 0:
        return None
    return delta_ns / NS_PER_S / elapsed_s


def shares_or_default(cpu_shares: int) -> int:
    """Docker reports CpuShares 0 for "not set", which the kernel runs as 1024."""
    return cpu_shares if cpu_shares > 0 else SHARES_PER_CORE


def cpu_util_of_shares(cores: float, cpu_shares: int) -> float:
    """A task's CPU use relative to its own allocation: cores / (shares / 1024), capped."""
    allocation_cores = shares_or_default(cpu_shares) / SHARES_PER_CORE
    return clamp_fraction(cores / allocation_cores)


def cpu_util_of_cores(cores: float, capacity_cores: float) -> float:
    """A host's (or a cgroup's) CPU use relative to the cores it may use, capped."""
    if capacity_cores <= 0:
        return 0.0
    return clamp_fraction(cores / capacity_cores)


def quota_cores(quota_us: int | None, period_us: int | None, cpu_count: int) -> float:
    """Cores a CFS quota allows (quota / period), or ``cpu_count`` when there is no quota."""
    if quota_us is None or period_us is None or quota_us <= 0 or period_us <= 0:
        return float(cpu_count)
    return min(float(cpu_count), quota_us / period_us)


def memory_used_bytes(usage_bytes: int, cache_bytes: int) -> int:
    """Memory in use without the page cache (which the kernel reclaims under pressure)."""
    return max(0, usage_bytes - max(0, cache_bytes))


def memory_used_from_stats(memory_stats: Mapping[str, Any]) -> int:
    """Memory in use without the page cache, from the ``memory_stats`` of Docker's stats API
    (cgroup v1 reports the cache as ``total_cache`` or ``cache``, cgroup v2 as ``file``)."""
    detail = memory_stats.get("stats") or {}
    cache = int(detail.get("total_cache", detail.get("cache", detail.get("file", 0))))
    return memory_used_bytes(int(memory_stats.get("usage", 0)), cache)


def memory_limit_or_host(limit_bytes: int | None, host_memory_bytes: int) -> int:
    """The memory a cgroup may use: its limit, or the host's memory when unlimited (cgroup v1
    writes "unlimited" as a huge number, so anything above the host's memory means no limit)."""
    if limit_bytes is None or limit_bytes <= 0 or limit_bytes >= host_memory_bytes:
        return host_memory_bytes
    return limit_bytes


def memory_util(used_bytes: int, limit_bytes: int) -> float:
    if limit_bytes <= 0:
        return 0.0
    return clamp_fraction(used_bytes / limit_bytes)


def task_memory_limit_bytes(host_config_memory_bytes: int, host_memory_bytes: int) -> int:
    """A task's memory allocation: HostConfig.Memory, or the host's memory when unlimited."""
    return host_config_memory_bytes if host_config_memory_bytes > 0 else host_memory_bytes


# --- RAPL -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnergyCounter:
    """One RAPL zone's ``energy_uj`` and the monotonic time it was read at."""

    energy_uj: int
    at_s: float


def energy_delta_uj(previous_uj: int, current_uj: int, max_energy_range_uj: int) -> int:
    """Energy used between two readings of a counter that wraps to 0 after
    ``max_energy_range_uj`` (at most one wrap between readings, which at RAPL's ranges means
    readings closer than tens of minutes apart)."""
    if current_uj >= previous_uj:
        return current_uj - previous_uj
    return (max_energy_range_uj - previous_uj) + current_uj


def power_w(
    previous: EnergyCounter, current: EnergyCounter, max_energy_range_uj: int
) -> float | None:
    """Average power between two readings, in watts; None when no time elapsed."""
    elapsed_s = current.at_s - previous.at_s
    if elapsed_s <= 0:
        return None
    delta_uj = energy_delta_uj(previous.energy_uj, current.energy_uj, max_energy_range_uj)
    return delta_uj / UJ_PER_J / elapsed_s


# --- windows ----------------------------------------------------------------------------------


@dataclass(frozen=True, init=False)
class UtilSample:
    """One sample (or a window's average) of CPU and memory utilization, optionally power."""

    cpu_util: float
    memory_util: float
    power_w: float | None = None

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(self, cpu_util: float, memory_util: float, power_w: float | None = None) -> None:
        object.__setattr__(self, "cpu_util", cpu_util)
        object.__setattr__(self, "memory_util", memory_util)
        object.__setattr__(self, "power_w", power_w)


def average(samples: Sequence[UtilSample]) -> UtilSample | None:
    """The window's average; power over the samples that had it. None for an empty window."""
    if not samples:
        return None
    count = len(samples)
    powers = [s.power_w for s in samples if s.power_w is not None]
    return UtilSample(
        cpu_util=clamp_fraction(math.fsum(s.cpu_util for s in samples) / count),
        memory_util=clamp_fraction(math.fsum(s.memory_util for s in samples) / count),
        power_w=math.fsum(powers) / len(powers) if powers else None,
    )


@dataclass
class WindowSchedule:
    """A fixed-rate schedule of sampling slots grouped into windows of ``slots`` slots.

    Slot k is due at ``start_s + k x interval_s``; a late loop skips the slots it missed, and a
    window ends when the slot count crosses a multiple of ``slots``, so windows close on
    schedule even when a sample was late or missed."""

    start_s: float
    interval_s: float
    slots: int
    slot: int = 0
    windows: int = 0

    @property
    def next_due_s(self) -> float:
        return self.start_s + (self.slot + 1) * self.interval_s

    def due(self, now_s: float) -> bool:
        return now_s >= self.next_due_s - _EARLY_S

    def advance(self, now_s: float) -> bool:
        """Consume the due slot (and any missed ones); True when a window ended with it."""
        self.slot += 1
        while now_s >= self.next_due_s - _EARLY_S:
            self.slot += 1
        if self.slot // self.slots > self.windows:
            self.windows = self.slot // self.slots
            return True
        return False


def slots_per_window(interval_s: float, window_s: float) -> int:
    """Sampling slots in one window (at least one): 30 s / 3 s = 10, 45 s / 3 s = 15."""
    return max(1, round(window_s / interval_s))


# --- threshold decisions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """The last values the registry acknowledged (per resource)."""

    cpu_util: float
    memory_util: float


def moved(current: float, last_sent: float, threshold_pp: float) -> bool:
    """True when ``current`` is at least ``threshold_pp`` percentage points from ``last_sent``."""
    return abs(current - last_sent) * 100.0 >= threshold_pp - _THRESHOLD_SLACK_PP


@dataclass(frozen=True)
class HostUpdate:
    """What to send to the Host Registry (message 12): the resources that moved, or nothing.

    ``measured_at`` (wall-clock epoch seconds: the end of the window) and ``windows`` travel
    with every update; an update with only them is a heartbeat (the values held are still
    current, DESIGN 5)."""

    cpu_util: float | None = None
    memory_util: float | None = None
    power_w: float | None = None
    measured_at: float | None = None
    windows: LoadWindows | None = None

    @property
    def resources(self) -> tuple[Resource, ...]:
        found: list[Resource] = []
        if self.cpu_util is not None:
            found.append(Resource.CPU)
        if self.memory_util is not None:
            found.append(Resource.MEMORY)
        return tuple(found)

    @property
    def has_values(self) -> bool:
        return self.cpu_util is not None or self.memory_util is not None

    @property
    def empty(self) -> bool:
        """Nothing to send: no value moved and no heartbeat is due."""
        return not self.has_values and self.measured_at is None

    def payload(self) -> dict[str, object]:
        body: dict[str, object] = {}
        if self.cpu_util is not None:
            body["cpu_util"] = round(self.cpu_util, 4)
        if self.memory_util is not None:
            body["memory_util"] = round(self.memory_util, 4)
        if self.power_w is not None and self.has_values:
            body["power_w"] = round(self.power_w, 2)
        if self.measured_at is not None:
            body["measured_at"] = round(self.measured_at, 3)
        if self.windows is not None and self.windows.windows:
            body["windows"] = self.windows.to_json()
        return body

    def applied_to(self, last_sent: Sent | None) -> Sent:
        """The last-sent values once this update has been acknowledged."""
        if not self.has_values and last_sent is not None:
            return last_sent  # a heartbeat
        if last_sent is None:
            if self.cpu_util is None or self.memory_util is None:
                raise ValueError("the first update must carry both CPU and memory")
            return Sent(self.cpu_util, self.memory_util)
        return Sent(
            self.cpu_util if self.cpu_util is not None else last_sent.cpu_util,
            self.memory_util if self.memory_util is not None else last_sent.memory_util,
        )


def decide_host_update(
    current: UtilSample, last_sent: Sent | None, threshold_pp: float, first_window: bool
) -> HostUpdate:
    """The thesis rule (4.2.3): send a resource when it moved >= ``threshold_pp`` since the last
    value sent; both in one message when both moved; everything on the first window."""
    if first_window or last_sent is None:
        return HostUpdate(current.cpu_util, current.memory_util, current.power_w)
    cpu = current.cpu_util if moved(current.cpu_util, last_sent.cpu_util, threshold_pp) else None
    memory = (
        current.memory_util
        if moved(current.memory_util, last_sent.memory_util, threshold_pp)
        else None
    )
    if cpu is None and memory is None:
        return HostUpdate()
    return HostUpdate(cpu, memory, current.power_w)


@dataclass(frozen=True, init=False)
class TaskUtil:
    task_id: str
    cpu_util: float
    memory_util: float

    # By hand (init=False), as UtilSample's.
    def __init__(self, task_id: str, cpu_util: float, memory_util: float) -> None:
        object.__setattr__(self, "task_id", task_id)
        object.__setattr__(self, "cpu_util", cpu_util)
        object.__setattr__(self, "memory_util", memory_util)

    def payload(self) -> dict[str, str | float]:
        return {
            "id": self.task_id,
            "cpu_util": round(self.cpu_util, 4),
            "memory_util": round(self.memory_util, 4),
        }


@dataclass(frozen=True)
class TaskBatch:
    """What to send to the Task Registry (message 13): the tasks that moved, sorted by id."""

    tasks: tuple[TaskUtil, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.tasks

    def payload(self, host_id: str) -> dict[str, object]:
        return {"host": host_id, "tasks": [task.payload() for task in self.tasks]}


def decide_task_batch(
    current: Mapping[str, UtilSample], last_sent: Mapping[str, Sent], threshold_pp: float
) -> TaskBatch:
    """Per task, the host rule: a task never sent before is sent; otherwise it is sent when its
    CPU or memory moved >= ``threshold_pp``. A task that is sent carries both of its values."""
    chosen: list[TaskUtil] = []
    for task_id in sorted(current):
        now = current[task_id]
        before = last_sent.get(task_id)
        if (
            before is None
            or moved(now.cpu_util, before.cpu_util, threshold_pp)
            or moved(now.memory_util, before.memory_util, threshold_pp)
        ):
            chosen.append(TaskUtil(task_id, now.cpu_util, now.memory_util))
    return TaskBatch(tuple(chosen))


# --- trackers: the decision state between windows --------------------------------------------


@dataclass
class HostTracker:
    """Last values sent to the Host Registry and the one update waiting to be sent.

    Only the latest decision is kept: a window whose average is back within the threshold of
    what the registry holds drops an older unsent update (the registry is right again).

    Windows closed with their time (``at``) also keep the registry's values dated: every update
    carries the window's end as ``measured_at``. Then, with ``resend_s`` (the live monitor,
    DESIGN 9), the first window that closes ``resend_s`` or more after both values were last
    sent sends both again, moved or not: what the registry holds is never older than that, and
    a wrong value written there cannot stand. Without it (the simulator's model, where nothing
    but the monitor writes), when nothing moved for ``heartbeat_s`` a heartbeat (no values,
    only ``measured_at`` and the load windows) says that what the registry holds is still
    current. Either way a silent host and a dead monitor can be told apart."""

    threshold_pp: float
    heartbeat_s: float = 60.0
    last_sent: Sent | None = None
    pending: HostUpdate | None = None
    windows_closed: int = 0
    last_contact_at: float | None = None  # measured_at of the last acknowledged message
    resend_s: float | None = None
    last_full_at: float | None = None  # measured_at of the last acknowledged pair of values

    def window_closed(
        self, window_average: UtilSample, at: float | None = None,
        windows: LoadWindows | None = None,
    ) -> HostUpdate:
        decision = decide_host_update(
            window_average, self.last_sent, self.threshold_pp, first_window=self.windows_closed == 0
        )
        self.windows_closed += 1
        if at is not None:
            if self.resend_due(at):
                decision = HostUpdate(window_average.cpu_util, window_average.memory_util,
                                      window_average.power_w, at, windows)
            elif decision.has_values:
                decision = replace(decision, measured_at=at, windows=windows)
            elif self.resend_s is None and self.heartbeat_due(at):
                decision = HostUpdate(measured_at=at, windows=windows)
        self.pending = None if decision.empty else decision
        return decision

    def heartbeat_due(self, at: float) -> bool:
        last = self.last_contact_at
        return last is not None and at - last >= self.heartbeat_s - _EARLY_S

    def resend_due(self, at: float) -> bool:
        """Both values are to be sent again at ``at`` (only with ``resend_s``)."""
        last = self.last_full_at
        return (self.resend_s is not None and last is not None
                and at - last >= self.resend_s - _EARLY_S)

    def acknowledged(self, update: HostUpdate) -> None:
        self.last_sent = update.applied_to(self.last_sent)
        if update.measured_at is not None:
            self.last_contact_at = update.measured_at
            if update.cpu_util is not None and update.memory_util is not None:
                self.last_full_at = update.measured_at
        if self.pending == update:
            self.pending = None

    def registered(self, cpu_util: float, memory_util: float, at: float | None = None) -> None:
        """A registration (message 11) carried these values (measured at ``at``): they are what
        the registry holds."""
        self.last_sent = Sent(cpu_util, memory_util)
        if at is not None:
            self.last_contact_at = at
            self.last_full_at = at


@dataclass
class LoadHistory:
    """The host's window averages over the last ``keep_s`` seconds (the longest load window),
    from which the 5, 10 and 15-minute means and standard deviations are computed (DESIGN 5).
    Statistics are over the monitor's window averages (one per 30 s), in the simulator too."""

    keep_s: float = float(max(WINDOW_SPANS_S))
    samples: deque[tuple[float, float, float]] = field(default_factory=deque)

    def add(self, at: float, sample: UtilSample) -> None:
        self.samples.append((at, sample.cpu_util, sample.memory_util))
        while self.samples and self.samples[0][0] <= at - self.keep_s:
            self.samples.popleft()

    def windows(self, now: float) -> LoadWindows:
        return windows_of(self.samples, now)


@dataclass
class TaskTracker:
    """Last values sent per task and the one batch waiting to be sent.

    With ``resend_s`` (the live monitor) and windows closed with their time, a task whose
    values were last sent ``resend_s`` or more before is sent again, moved or not (DESIGN 9)."""

    threshold_pp: float
    last_sent: dict[str, Sent] = field(default_factory=dict)
    pending: TaskBatch | None = None
    resend_s: float | None = None
    sent_at: dict[str, float] = field(default_factory=dict)  # when each task's values went
    pending_at: float | None = None  # when the pending batch's window closed

    def window_closed(
        self, window_averages: Mapping[str, UtilSample], at: float | None = None
    ) -> TaskBatch:
        # Tasks that were not seen in this window are gone: forget them.
        self.last_sent = {k: v for k, v in self.last_sent.items() if k in window_averages}
        batch = decide_task_batch(window_averages, self.last_sent, self.threshold_pp)
        if at is not None and self.resend_s is not None:
            self.sent_at = {k: v for k, v in self.sent_at.items() if k in window_averages}
            batch = self._with_resends(batch, window_averages, at, self.resend_s)
        self.pending = None if batch.empty else batch
        self.pending_at = at
        return batch

    def _with_resends(self, batch: TaskBatch, window_averages: Mapping[str, UtilSample],
                      at: float, resend_s: float) -> TaskBatch:
        chosen = {task.task_id for task in batch.tasks}
        due = [task_id for task_id, sent in self.sent_at.items()
               if task_id not in chosen and at - sent >= resend_s - _EARLY_S]
        if not due:
            return batch
        again = [TaskUtil(task_id, window_averages[task_id].cpu_util,
                          window_averages[task_id].memory_util) for task_id in due]
        return TaskBatch(tuple(sorted((*batch.tasks, *again), key=lambda task: task.task_id)))

    def acknowledged(self, batch: TaskBatch, unknown: Collection[str] = ()) -> None:
        """Record a sent batch. Ids the registry did not know are not recorded as sent, so they
        are sent again next window (the agent may not have recorded the task yet)."""
        unknown_ids = set(unknown)
        for task in batch.tasks:
            if task.task_id in unknown_ids:
                self.last_sent.pop(task.task_id, None)
                self.sent_at.pop(task.task_id, None)
            else:
                self.last_sent[task.task_id] = Sent(task.cpu_util, task.memory_util)
                if self.pending_at is not None and self.resend_s is not None:
                    self.sent_at[task.task_id] = self.pending_at
        if self.pending == batch:
            self.pending = None


# --- back-off ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackoffPolicy:
    """Exponential back-off with a bounded base and cap and "equal" jitter: the n-th retry waits
    between (1 - jitter) and 1 times min(cap, base x 2^n)."""

    base_s: float = 1.0
    cap_s: float = 60.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError("back-off needs 0 < base_s <= cap_s")
        if not 0 <= self.jitter <= 1:
            raise ValueError("back-off jitter must be in [0, 1]")

    def delay_s(self, attempt: int, random_fraction: float) -> float:
        """Delay before retry number ``attempt`` (0-based); ``random_fraction`` in [0, 1)."""
        exponent = min(max(attempt, 0), 62)
        ceiling_s = min(self.cap_s, self.base_s * (2.0**exponent))
        return ceiling_s * (1.0 - self.jitter * clamp_fraction(random_fraction))
