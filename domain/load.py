"""Load windows and the age of a host's utilization (DESIGN 3.12 and 5).

The monitor keeps the mean and standard deviation of its host's CPU and memory utilization over
the last 5, 10 and 15 minutes (the Trimaran KEP's load watcher windows) and sends them with its
updates; every utilization value the registry holds carries the time it was measured. This
module is the value both ends share, its JSON form, and the arithmetic: the statistics of a
series of window averages, and when a measurement is too old to trust.

Units: utilizations are fractions in [0, 1]; times are seconds (the wall clock, epoch seconds,
live; the simulated clock in the simulator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from domain.fields import Fields, Int, Named, Num, Then

# The KEP's windows, in seconds, and their names in JSON.
WINDOW_SPANS_S: tuple[int, ...] = (300, 600, 900)
# A utilization older than this is not trusted: the host is judged by its allocation (KEP,
# "Bad metrics": the latest window is used if not older than 5 minutes).
STALE_AFTER_S = 300.0


def window_name(span_s: int) -> str:
    """``300`` -> ``"5m"``."""
    return f"{span_s // 60}m"


_SPAN_OF_NAME = {window_name(span): span for span in WINDOW_SPANS_S}


@dataclass(frozen=True, slots=True)
class LoadWindow:
    """Mean and standard deviation of one host's CPU and memory utilization over ``span_s``
    seconds, from ``samples`` window averages (the monitor's 30-s windows)."""

    span_s: int
    cpu_mean: float
    cpu_std: float
    memory_mean: float
    memory_std: float
    samples: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "cpu_mean": round(self.cpu_mean, 4),
            "cpu_std": round(self.cpu_std, 4),
            "memory_mean": round(self.memory_mean, 4),
            "memory_std": round(self.memory_std, 4),
            "samples": self.samples,
        }


@dataclass(frozen=True, slots=True)
class LoadWindows:
    """The 5, 10 and 15-minute windows of one host (those with at least one sample)."""

    windows: tuple[LoadWindow, ...] = ()

    def get(self, span_s: int) -> LoadWindow | None:
        for window in self.windows:
            if window.span_s == span_s:
                return window
        return None

    def to_json(self) -> dict[str, dict[str, float | int]]:
        return {window_name(w.span_s): w.to_json() for w in self.windows}

    @staticmethod
    def from_json(raw: object, field_name: str = "windows") -> LoadWindows:
        """Read the JSON form (``WINDOWS``); a ValidationError naming the bad field otherwise."""
        windows: LoadWindows = WINDOWS.read(raw, field_name)
        return windows


def _windows_of_json(read: dict[str, dict[str, Any]], path: str) -> LoadWindows:
    found = [LoadWindow(_SPAN_OF_NAME[name], body["cpu_mean"], body["cpu_std"],
                        body["memory_mean"], body["memory_std"], body.get("samples", 1))
             for name, body in read.items()]
    found.sort(key=lambda w: w.span_s)
    return LoadWindows(tuple(found))


_FRACTION = Num(0.0, 1.0)
WINDOW = Fields({"cpu_mean": _FRACTION, "cpu_std": _FRACTION, "memory_mean": _FRACTION,
                 "memory_std": _FRACTION, "samples": Int(1)},
                ("cpu_mean", "cpu_std", "memory_mean", "memory_std"))
# The JSON form of LoadWindows (read as one): the windows with at least one sample, by name
WINDOWS = Named("LoadWindows", Then(
    Fields({window_name(span): Named("LoadWindow", WINDOW) for span in WINDOW_SPANS_S}),
    _windows_of_json))


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation; (0, 0) for no values."""
    if not values:
        return 0.0, 0.0
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return mean, math.sqrt(max(0.0, variance))


def windows_of(
    samples: Sequence[tuple[float, float, float]], now: float,
    spans_s: Sequence[int] = WINDOW_SPANS_S,
) -> LoadWindows:
    """The windows at ``now`` from ``(time, cpu, memory)`` window averages, oldest first: each
    span takes the samples whose time lies in (now - span, now]."""
    out: list[LoadWindow] = []
    for span in spans_s:
        inside = [s for s in samples if now - span < s[0] <= now]
        if not inside:
            continue
        cpu_mean, cpu_std = mean_std([s[1] for s in inside])
        memory_mean, memory_std = mean_std([s[2] for s in inside])
        out.append(LoadWindow(span, cpu_mean, cpu_std, memory_mean, memory_std, len(inside)))
    return LoadWindows(tuple(out))


def is_stale(util_at: float | None, now: float, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether a utilization measured at ``util_at`` is too old at ``now`` (or missing)."""
    return util_at is None or now - util_at > stale_after_s


MEASURED_AT = Num(0.0, description="when it was measured, in seconds since the epoch (a time "
                                    "ahead of the registry's clock is taken as now)")


def check_measured_at(value: object, now: float, field_name: str = "measured_at") -> float:
    """A measurement time from a monitor (``MEASURED_AT``: a finite, non-negative number of
    epoch seconds), never later than ``now`` (a clock ahead of the registry's would make data
    look fresh forever)."""
    measured: float = MEASURED_AT.read(value, field_name)
    return min(measured, now)
