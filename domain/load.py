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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from domain.errors import ValidationError

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
        """Read the JSON form; a ValidationError naming the bad field otherwise."""
        if not isinstance(raw, Mapping):
            raise ValidationError(field_name, "must be an object of windows (5m, 10m, 15m)")
        found: list[LoadWindow] = []
        for name, body in raw.items():
            where = f"{field_name}.{name}"
            span = _SPAN_OF_NAME.get(name) if isinstance(name, str) else None
            if span is None:
                raise ValidationError(where, f"unknown window; use {', '.join(_SPAN_OF_NAME)}")
            if not isinstance(body, Mapping):
                raise ValidationError(where, "must be an object")
            unknown = set(body) - {"cpu_mean", "cpu_std", "memory_mean", "memory_std",
                                   "samples"}
            if unknown:
                raise ValidationError(f"{where}.{sorted(unknown)[0]}", "is not a window field")
            samples = body.get("samples", 1)
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
                raise ValidationError(f"{where}.samples", "must be a positive integer")
            found.append(LoadWindow(
                span,
                cpu_mean=_fraction(body.get("cpu_mean"), f"{where}.cpu_mean"),
                cpu_std=_fraction(body.get("cpu_std"), f"{where}.cpu_std"),
                memory_mean=_fraction(body.get("memory_mean"), f"{where}.memory_mean"),
                memory_std=_fraction(body.get("memory_std"), f"{where}.memory_std"),
                samples=samples,
            ))
        found.sort(key=lambda w: w.span_s)
        return LoadWindows(tuple(found))


def _fraction(value: object, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field_name, "must be a number in [0, 1]")
    number = float(value)
    if not 0.0 <= number <= 1.0:  # NaN fails too
        raise ValidationError(field_name, "must be a number in [0, 1]")
    return number


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


def check_measured_at(value: object, now: float, field_name: str = "measured_at") -> float:
    """A measurement time from a monitor: a finite, non-negative number of epoch seconds, never
    later than ``now`` (a clock ahead of the registry's would make data look fresh forever)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(field_name, "must be a number of seconds since the epoch")
    if value < 0:
        raise ValidationError(field_name, "must not be negative")
    return min(float(value), now)
