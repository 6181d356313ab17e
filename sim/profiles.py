"""Usage profiles: how much of its allocation each workload really uses over its life.

A profile is a step function of the time since the task started (wall seconds): each step sets
the fraction of the task's *allocated* CPU (cores = original CPU shares / 1024) that the task
wants, and the fraction of its *allocated* memory it holds. A CPU fraction above 1 means the
task would use idle capacity beyond its allocation (CPU shares are a weight, not a cap); a
memory fraction is at most 1 in practice (the memory limit is the allocation). The last step
holds until the task ends. Services add ``cpu_fraction_per_rate`` x their request rate (client
requests per 10 s) to every step: the cost of answering their clients.

File format (``sim/profiles.json``, written by ``greenswarm bench profile``)::

    {"format": "greenswarm-usage-profiles", "version": 1,
     "measured": {... where and how, or null ...},
     "workloads": {
        "ffmpeg": {"source": "measured" | "default", "note": "...",
                   "steps": [[0.0, cpu_fraction, memory_fraction], [at_s, cpu, memory], ...],
                   "cpu_fraction_per_rate": 0.0,
                   "response_ms": {"20": 12.5, ...}},       # services, optional
        "redis": ..., "dl": ..., "timeserver": ..., "generic": ...}}

Every workload of :class:`workloads.trace.Workload` must be present. :data:`DEFAULT_PROFILES`
holds the defaults used when no file is given and documented as such: rough shapes, not
measurements.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from domain.errors import ValidationError
from workloads.outfiles import write_text
from workloads.trace import Workload

PROFILES_FORMAT = "greenswarm-usage-profiles"
PROFILES_VERSION = 1
SHIPPED_PROFILES_PATH = Path(__file__).resolve().parent / "profiles.json"


class ProfileSource(StrEnum):
    MEASURED = "measured"  # from `greenswarm bench profile` on real containers
    DEFAULT = "default"  # a documented guess


@dataclass(frozen=True, slots=True)
class Step:
    """From ``at_s`` seconds after the start: wants ``cpu_fraction`` of its allocated cores and
    holds ``memory_fraction`` of its allocated memory."""

    at_s: float
    cpu_fraction: float
    memory_fraction: float

    def __post_init__(self) -> None:
        for name in ("at_s", "cpu_fraction", "memory_fraction"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValidationError(f"steps.{name}", f"must be a finite number >= 0, got "
                                      f"{value!r}")


@dataclass(frozen=True, slots=True)
class UsageProfile:
    workload: Workload
    steps: tuple[Step, ...]
    cpu_fraction_per_rate: float = 0.0
    source: ProfileSource = ProfileSource.DEFAULT
    note: str = ""
    # Measured round time of one burst of client requests (services), by request rate.
    response_ms: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.steps or self.steps[0].at_s != 0:
            raise ValidationError("steps", f"{self.workload.value}: the first step must be at 0")
        if any(b.at_s <= a.at_s for a, b in zip(self.steps, self.steps[1:], strict=False)):
            raise ValidationError("steps", f"{self.workload.value}: step times must increase")
        rate = self.cpu_fraction_per_rate
        if not (math.isfinite(rate) and rate >= 0):
            raise ValidationError("cpu_fraction_per_rate", "must be a finite number >= 0")

    def cpu_fraction(self, step: Step, request_rate: int | None) -> float:
        return step.cpu_fraction + self.cpu_fraction_per_rate * (request_rate or 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source.value,
            "note": self.note,
            "steps": [[s.at_s, s.cpu_fraction, s.memory_fraction] for s in self.steps],
            "cpu_fraction_per_rate": self.cpu_fraction_per_rate,
        }
        if self.response_ms:
            out["response_ms"] = {str(k): v for k, v in sorted(self.response_ms.items())}
        return out

    @classmethod
    def from_json(cls, workload: Workload, obj: object) -> UsageProfile:
        if not isinstance(obj, dict):
            raise ValidationError(f"workloads.{workload.value}", "must be an object")
        try:
            steps = tuple(Step(float(a), float(c), float(m)) for a, c, m in obj["steps"])
            response = {int(k): float(v) for k, v in (obj.get("response_ms") or {}).items()}
            return cls(
                workload=workload,
                steps=steps,
                cpu_fraction_per_rate=float(obj.get("cpu_fraction_per_rate", 0.0)),
                source=ProfileSource(obj.get("source", ProfileSource.DEFAULT.value)),
                note=str(obj.get("note", "")),
                response_ms=response,
            )
        except ValidationError as exc:
            raise ValidationError(f"workloads.{workload.value}.{exc.field}", exc.message) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"workloads.{workload.value}", f"malformed: {exc!r}") from None


@dataclass(frozen=True)
class Profiles:
    """One profile per workload, plus where they came from."""

    by_workload: Mapping[Workload, UsageProfile]
    measured: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        missing = [w.value for w in Workload if w not in self.by_workload]
        if missing:
            raise ValidationError("workloads", f"missing profiles: {', '.join(missing)}")

    def __getitem__(self, workload: Workload) -> UsageProfile:
        return self.by_workload[workload]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PROFILES_FORMAT,
            "version": PROFILES_VERSION,
            "measured": dict(self.measured) if self.measured is not None else None,
            "workloads": {w.value: self.by_workload[w].to_json() for w in Workload},
        }

    @classmethod
    def from_json(cls, obj: object) -> Profiles:
        if not isinstance(obj, dict) or obj.get("format") != PROFILES_FORMAT:
            raise ValidationError("format", f"not a {PROFILES_FORMAT} document")
        if obj.get("version") != PROFILES_VERSION:
            raise ValidationError("version", f"only version {PROFILES_VERSION} is supported")
        raw = obj.get("workloads")
        if not isinstance(raw, dict):
            raise ValidationError("workloads", "must be an object")
        unknown = sorted(set(raw) - {w.value for w in Workload})
        if unknown:
            raise ValidationError("workloads", f"unknown workloads: {', '.join(unknown)}")
        by_workload = {
            Workload(name): UsageProfile.from_json(Workload(name), value)
            for name, value in raw.items()
        }
        measured = obj.get("measured")
        return cls(by_workload, measured if isinstance(measured, dict) else None)


def read_profiles(path: str | Path) -> Profiles:
    """Read a profiles file (I/O: for the command line edge)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError("profiles", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ValidationError("profiles", f"{path} is not valid JSON: {exc}") from None
    try:
        return Profiles.from_json(obj)
    except ValidationError as exc:
        raise ValidationError(f"profiles: {path}: {exc.field}", exc.message) from None


def write_profiles(path: str | Path, profiles: Profiles) -> None:
    write_text(path, json.dumps(profiles.to_json(), indent=2) + "\n")


def load_shipped_profiles() -> Profiles:
    """``sim/profiles.json`` when it is there, else :data:`DEFAULT_PROFILES`."""
    if SHIPPED_PROFILES_PATH.is_file():
        return read_profiles(SHIPPED_PROFILES_PATH)
    return DEFAULT_PROFILES


# ------------------------------------------------------------------ defaults

_DEFAULT_NOTE = "default (not measured): a rough shape from the workload's description"


def _default(workload: Workload, steps: Sequence[tuple[float, float, float]],
             per_rate: float = 0.0, note: str = "") -> UsageProfile:
    return UsageProfile(
        workload=workload,
        steps=tuple(Step(*s) for s in steps),
        cpu_fraction_per_rate=per_rate,
        source=ProfileSource.DEFAULT,
        note=f"{_DEFAULT_NOTE}; {note}" if note else _DEFAULT_NOTE,
    )


# Defaults, documented as such: shapes, not measurements. A job ramps up in a few seconds, then
# wants its whole allocation (FFmpeg more: it is multi-threaded); Redis loads its data, then
# idles between client requests; the time server idles.
DEFAULT_PROFILES = Profiles(
    {
        Workload.FFMPEG: _default(
            Workload.FFMPEG, [(0.0, 0.5, 0.05), (2.0, 1.5, 0.20)],
            note="x264 threads: wants more than one allocated core when idle cores exist"),
        Workload.REDIS: _default(
            Workload.REDIS, [(0.0, 0.8, 0.05), (2.0, 0.8, 0.40), (4.0, 0.01, 0.70)],
            per_rate=0.0002, note="fills its data set, then serves"),
        Workload.DL: _default(
            Workload.DL, [(0.0, 1.0, 0.10), (2.0, 1.0, 0.60)],
            note="single-threaded NumPy training on a data set of half its memory"),
        Workload.TIMESERVER: _default(
            Workload.TIMESERVER, [(0.0, 0.2, 0.03), (1.0, 0.001, 0.04)],
            per_rate=0.0005, note="idle HTTP server"),
        Workload.GENERIC: _default(
            Workload.GENERIC, [(0.0, 0.6, 0.5)],
            note="a converted public trace: no application known; a middle value"),
    }
)


# ------------------------------------------------------------------ measured series -> steps


def steps_from_series(
    cpu_fractions: Sequence[float],
    memory_fractions: Sequence[float],
    *,
    cpu_tolerance: float = 0.10,
    memory_tolerance: float = 0.03,
    max_steps: int = 6,
) -> tuple[Step, ...]:
    """Compress per-second samples (sample i covers [i, i + 1)) into a ramp and a plateau.

    Each series is first smoothed by a running median of three (one odd sample, such as the
    moment the FFmpeg job starts its next round, is noise, not a phase). The plateau is the
    median of the second half; the ramp is every second before the series settles within the
    tolerances of the plateau for good, merged greedily into steps (a new step when a value
    leaves the current step's tolerance), at most ``max_steps`` in all.
    """
    if not cpu_fractions or len(cpu_fractions) != len(memory_fractions):
        raise ValidationError("series", "need as many CPU as memory samples, at least one")
    cpu_fractions = _median3(cpu_fractions)
    memory_fractions = _median3(memory_fractions)
    half = len(cpu_fractions) // 2
    plateau_cpu = statistics.median(cpu_fractions[half:])
    plateau_memory = statistics.median(memory_fractions[half:])

    def settled(i: int) -> bool:
        return (abs(cpu_fractions[i] - plateau_cpu) <= cpu_tolerance
                and abs(memory_fractions[i] - plateau_memory) <= memory_tolerance)

    ramp_end = len(cpu_fractions)
    while ramp_end > 0 and settled(ramp_end - 1):
        ramp_end -= 1
    steps: list[Step] = []
    for i in range(ramp_end):
        cpu, memory = cpu_fractions[i], memory_fractions[i]
        if steps and (abs(cpu - steps[-1].cpu_fraction) <= cpu_tolerance
                      and abs(memory - steps[-1].memory_fraction) <= memory_tolerance):
            continue
        steps.append(Step(float(i), max(0.0, cpu), max(0.0, memory)))
    steps = steps[: max_steps - 1]
    plateau_at = float(ramp_end) if ramp_end else 0.0
    if steps and plateau_at <= steps[-1].at_s:
        plateau_at = steps[-1].at_s + 1.0
    steps.append(Step(plateau_at, max(0.0, plateau_cpu), max(0.0, plateau_memory)))
    return tuple(steps)


def _median3(values: Sequence[float]) -> list[float]:
    """Running median of three; the first and last values are kept."""
    if len(values) < 3:
        return list(values)
    middle = [sorted(values[i - 1:i + 2])[1] for i in range(1, len(values) - 1)]
    return [values[0], *middle, values[-1]]
