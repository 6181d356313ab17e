"""The monitor of DESIGN 5, as a model: what the registries would hold, and when.

The real monitor samples every 3 s, averages each 30 s window (45 s for tasks), and pushes a
value only when it moved >= 10 percentage points since the last value sent. The threshold
decisions here are the real ones (``monitor.core.HostTracker`` / ``TaskTracker``); only the
sampling is replaced by arithmetic: utilization in the simulator is piecewise constant between
events, so a window's average is computed from the pieces instead of from simulated samples.

What one sample means, as in the real samplers: CPU is the average over the 3 s since the
previous sample (a cumulative counter's difference), memory is the value at the sampling
instant. So a window's CPU average is the time-average of CPU over the window (exactly the mean
of its 3 s samples), and its memory average is the mean of the values at the sampling instants
``phase + k x 3 s`` inside the window. A sample taken at the same instant as a change sees the
value before the change. A task that started or ended inside a window is averaged over the part
of the window it lived (CPU) and over the instants it was there (memory); with no instant at all
it is not in the window, as in the real monitor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from monitor.core import (
    HostTracker,
    HostUpdate,
    LoadHistory,
    Sent,
    TaskBatch,
    TaskTracker,
    UtilSample,
    clamp_fraction,
)

# Float slack when counting sampling instants: a window end computed as phase + 10 x 3.0 must
# count its own instant.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class MonitorModelConfig:
    """DESIGN 5's three numbers (plus the task window)."""

    interval_s: float = 3.0
    host_window_s: float = 30.0
    task_window_s: float = 45.0
    threshold_pp: float = 10.0
    heartbeat_s: float = 60.0
    # Date every value and keep load windows (DESIGN 3.12, 5): on for load-aware policies,
    # which are the only readers (off, the registry holds what it always held).
    dated: bool = False

    def __post_init__(self) -> None:
        if not (self.interval_s > 0 and self.host_window_s >= self.interval_s
                and self.task_window_s >= self.interval_s and 0 < self.threshold_pp <= 100):
            raise ValueError("monitor model: need 0 < interval <= windows, 0 < threshold <= 100")


def instants_between(a: float, b: float, phase_s: float, interval_s: float) -> int:
    """How many sampling instants ``phase + k x interval`` lie in (a, b]."""
    return math.floor((b - phase_s) / interval_s + _EPS) - math.floor(
        (a - phase_s) / interval_s + _EPS
    )


class WindowAccumulator:
    """Running sums of one piecewise-constant (cpu, memory) signal over the current window."""

    __slots__ = ("alive_s", "cpu", "cpu_integral", "interval_s", "last_instant", "last_t",
                 "memory", "memory_sum", "phase_s", "samples")

    def __init__(self, phase_s: float, interval_s: float, t: float,
                 cpu: float = 0.0, memory: float = 0.0) -> None:
        self.phase_s = phase_s
        self.interval_s = interval_s
        self.last_t = t
        # floor((last_t - phase) / interval + eps): the count of instants up to last_t, kept
        # from the advance that set last_t (the same expression, so the same number)
        self.last_instant = math.floor((t - phase_s) / interval_s + _EPS)
        self.cpu = cpu
        self.memory = memory
        self.cpu_integral = 0.0
        self.alive_s = 0.0
        self.memory_sum = 0.0
        self.samples = 0

    def advance(self, t: float) -> None:
        """Account for the current values from the last change up to ``t``."""
        a = self.last_t
        if t <= a:
            return
        dt = t - a
        self.cpu_integral += self.cpu * dt
        self.alive_s += dt
        interval = self.interval_s
        # instants_between(a, t, ...), inlined: this runs for every utilization change
        instant = math.floor((t - self.phase_s) / interval + _EPS)
        n = instant - self.last_instant
        if n:
            self.memory_sum += self.memory * n
            self.samples += n
        self.last_t = t
        self.last_instant = instant

    def set(self, t: float, cpu: float, memory: float) -> None:
        """The values change at ``t``."""
        self.advance(t)
        self.cpu = cpu
        self.memory = memory

    def close(self, t: float) -> UtilSample | None:
        """The window's average (None without a sampling instant); starts the next window."""
        self.advance(t)
        result = None
        if self.samples and self.alive_s > 0:
            result = UtilSample(
                clamp_fraction(self.cpu_integral / self.alive_s),
                clamp_fraction(self.memory_sum / self.samples),
            )
        self.cpu_integral = 0.0
        self.alive_s = 0.0
        self.memory_sum = 0.0
        self.samples = 0
        return result


class HostMonitor:
    """One host's monitor: its window sums and the real threshold logic.

    With ``dated`` (a load-aware policy reads them), every update carries its time and the load
    windows, and a heartbeat dates the values when nothing moved for ``heartbeat_s``, exactly
    as the real monitor's ``HostTracker`` and ``LoadHistory`` do on its window averages."""

    __slots__ = ("accumulator", "load", "tracker")

    def __init__(self, config: MonitorModelConfig, phase_s: float, t: float) -> None:
        self.accumulator = WindowAccumulator(phase_s, config.interval_s, t)
        self.tracker = HostTracker(config.threshold_pp, config.heartbeat_s)
        self.load = LoadHistory() if config.dated else None
        # Registration (message 11) carries the first sample: an idle host.
        self.tracker.registered(0.0, 0.0, t if config.dated else None)

    def window_closed(self, t: float) -> HostUpdate | None:
        """Close the window at ``t``; the update sent to the registry, if any."""
        average = self.accumulator.close(t)
        if average is None:
            return None
        load = self.load
        if load is None:
            update = self.tracker.window_closed(average)
        else:
            load.add(t, average)
            update = self.tracker.window_closed(average, t, load.windows(t))
        if update.empty:
            return None
        self.tracker.acknowledged(update)  # the in-memory registry is always reachable
        return update

    @property
    def held(self) -> Sent | None:
        """The values the registry holds."""
        return self.tracker.last_sent


def close_task_window(tracker: TaskTracker, averages: dict[str, UtilSample]) -> TaskBatch:
    """The real task rule: the batch to send (acknowledged at once), possibly empty."""
    batch = tracker.window_closed(averages)
    if not batch.empty:
        tracker.acknowledged(batch)
    return batch
