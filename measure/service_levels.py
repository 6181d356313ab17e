"""Service levels per request and per class in the reports (DESIGN 3.10, 7.3), as pure values.

The recorder (measure/recorder.py) keeps one :class:`domain.slo.ServiceClock` per request and,
when the request is over (or the run ends), hands its final figures to a :class:`ServiceTally`
and, when asked to, keeps them as a :class:`RequestLevel` (``DIR/<policy>/requests.jsonl``, one
line per request: ``{"id", "class", "type", "availability", "met_slo", "preemptions",
"status"}``). :meth:`ServiceTally.summary` gives the :class:`ServiceSummary` of a run:

* per class: how many requests met their SLO (A >= sigma(c) when they ended, or when the run
  ended), their availabilities (min, p10, median, mean), the QoS deficit (mean of sigma - A over
  those that missed) and the fairness (:func:`gini` of the availabilities of the class's
  requests active in each 10-minute interval, averaged over the intervals that had two or more:
  the paper's measure);
* for every request: preemptions (mean, max) and the work lost to kills, in CPU-seconds (a
  killed job restarts from scratch: what it had run since its last start times its requested
  cores) and as a share of the CPU-seconds delivered (every request's run time times its
  requested cores, lost runs included).

A request refused at once (the thesis behaviour) received nothing: availability 0, an SLO miss.
Probe jobs are measuring instruments and are left out, as they are of the allocations.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.classes import CLASSES
from domain.errors import ValidationError
from domain.model import TaskType
from domain.slo import SloTable, default_objective
from measure.stats import ordered, percentile

GINI_INTERVAL_S = 600.0  # the paper's 10-minute intervals
SHARES_PER_CORE = 1024


class RequestStatus(StrEnum):
    """How a request's accounting ended."""

    FINISHED = "finished"  # a job that completed
    STOPPED = "stopped"  # a service stopped by its client (or that exited by itself)
    FAILED = "failed"  # its run failed
    OOM = "oom"  # killed for lack of memory (not rescheduled)
    REFUSED = "refused"  # refused at once: it never ran (an SLO miss)
    REFUSED_AT_ADMISSION = "refused-at-admission"  # not admitted (DESIGN 3.13): an SLO miss
    LOST = "lost"  # a victim the driver gave up on
    RUNNING = "running"  # still running (or starting) when the run ended
    WAITING = "waiting"  # still waiting (queued, or a victim) when the run ended


@dataclass(frozen=True, slots=True, init=False)
class RequestLevel:
    """One line of ``requests.jsonl``."""

    id: str
    cls: int
    type: TaskType
    availability: float
    met_slo: bool
    preemptions: int
    status: RequestStatus

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(self, id: str, cls: int, type: TaskType, availability: float,
                 met_slo: bool, preemptions: int, status: RequestStatus) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "cls", cls)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "availability", availability)
        object.__setattr__(self, "met_slo", met_slo)
        object.__setattr__(self, "preemptions", preemptions)
        object.__setattr__(self, "status", status)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "class": self.cls, "type": self.type.value,
                "availability": self.availability, "met_slo": self.met_slo,
                "preemptions": self.preemptions, "status": self.status.value}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RequestLevel:
        try:
            level = cls(
                id=str(obj["id"]), cls=int(obj["class"]), type=TaskType(obj["type"]),
                availability=float(obj["availability"]), met_slo=bool(obj["met_slo"]),
                preemptions=int(obj["preemptions"]), status=RequestStatus(obj["status"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError("requests", f"malformed request line: {exc!r}") from None
        if level.cls not in CLASSES or not 0.0 <= level.availability <= 1.0:
            raise ValidationError("requests", f"{level.id}: class or availability out of range")
        return level


def gini(values: Sequence[float]) -> float:
    """The Gini coefficient of ``values`` (>= 0): 0 when all are equal (all zero included),
    towards 1 when one holds everything. Sorted form: sum (2i - n - 1) x_i / (n sum x)."""
    n = len(values)
    total = math.fsum(values)
    if n < 2 or total <= 0:
        return 0.0
    ordered = sorted(values)
    weighted = math.fsum((2 * i - n - 1) * x for i, x in enumerate(ordered, start=1))
    return weighted / (n * total)


@dataclass(frozen=True, slots=True)
class ClassLevels:
    """One class's service levels over a run (None where there is nothing to measure)."""

    requests: int
    met: int
    availability_min: float | None
    availability_p10: float | None
    availability_median: float | None
    availability_mean: float | None
    qos_deficit: float | None  # mean of sigma - A over the requests that missed
    gini: float | None  # mean over the 10-minute intervals with >= 2 active requests

    @property
    def fulfilment(self) -> float | None:
        return self.met / self.requests if self.requests else None

    def availability_json(self) -> dict[str, float | None]:
        return {"min": self.availability_min, "p10": self.availability_p10,
                "median": self.availability_median, "mean": self.availability_mean}


@dataclass(frozen=True, slots=True)
class ServiceSummary:
    """A run's service levels, per class and overall (see the module docstring)."""

    slo: SloTable
    allocation_s: float
    by_class: Mapping[int, ClassLevels]
    preemptions_mean: float | None
    preemptions_max: int | None
    work_lost_cpu_s: float
    delivered_cpu_s: float

    @property
    def requests(self) -> int:
        return sum(levels.requests for levels in self.by_class.values())

    @property
    def met(self) -> int:
        return sum(levels.met for levels in self.by_class.values())

    @property
    def fulfilment(self) -> float | None:
        return self.met / self.requests if self.requests else None

    @property
    def work_lost_share(self) -> float | None:
        return self.work_lost_cpu_s / self.delivered_cpu_s if self.delivered_cpu_s else None

    def to_json(self) -> dict[str, Any]:
        """The per-class keys of summary.json (DESIGN 7.3), and what they were measured with."""
        by = {str(c): self.by_class[c] for c in CLASSES}
        return {
            "slo": self.slo.as_dict(),
            "allocation_s": self.allocation_s,
            "requests_by_class": {k: v.requests for k, v in by.items()},
            "slo_met_by_class": {k: v.met for k, v in by.items()},
            "slo_fulfilment_by_class": {k: v.fulfilment for k, v in by.items()},
            "availability_by_class": {k: v.availability_json() for k, v in by.items()},
            "qos_deficit_by_class": {k: v.qos_deficit for k, v in by.items()},
            "gini_by_class": {k: v.gini for k, v in by.items()},
            "delivered_cpu_s": self.delivered_cpu_s,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], flat: Mapping[str, Any]) -> ServiceSummary:
        """From ``to_json`` and the run's flat metrics (preemptions, work lost)."""
        # the objectives set, the defaults aside (a table equal to the one it was written from)
        slo = SloTable({int(k): float(v) for k, v in obj["slo"].items()
                        if float(v) != float(default_objective(int(k)))})
        by_class: dict[int, ClassLevels] = {}
        for c in CLASSES:
            key = str(c)
            availability = obj["availability_by_class"][key]
            by_class[c] = ClassLevels(
                requests=int(obj["requests_by_class"][key]),
                met=int(obj["slo_met_by_class"][key]),
                availability_min=availability["min"],
                availability_p10=availability["p10"],
                availability_median=availability["median"],
                availability_mean=availability["mean"],
                qos_deficit=obj["qos_deficit_by_class"][key],
                gini=obj["gini_by_class"][key],
            )
        return cls(slo, float(obj["allocation_s"]), by_class, flat.get("preemptions_mean"),
                   flat.get("preemptions_max"), float(flat.get("work_lost_cpu_s") or 0.0),
                   float(obj["delivered_cpu_s"]))


class ServiceTally:
    """Accumulates every request's final figures, and the Gini of each 10-minute interval."""

    def __init__(self, slo: SloTable, allocation_s: float = 0.0) -> None:
        self.slo = slo
        self.allocation_s = allocation_s
        self._availability: dict[int, array[float]] = {c: array("d") for c in CLASSES}
        self._met = dict.fromkeys(CLASSES, 0)
        self._deficit: dict[int, list[float]] = {c: [] for c in CLASSES}
        self._ginis: dict[int, list[float]] = {c: [] for c in CLASSES}
        self._preemptions = 0
        self._preemptions_max = 0
        self.work_lost_cpu_s = 0.0
        self.delivered_cpu_s = 0.0

    def add(self, cls: int, availability: float, preemptions: int = 0) -> bool:
        """One request over; returns whether it met its SLO."""
        objective = self.slo.objective(cls)
        self._availability[cls].append(availability)
        met = availability >= objective
        if met:
            self._met[cls] += 1
        else:
            self._deficit[cls].append(objective - availability)
        self._preemptions += preemptions
        self._preemptions_max = max(self._preemptions_max, preemptions)
        return met

    def add_work(self, delivered_cpu_s: float, lost_cpu_s: float) -> None:
        self.delivered_cpu_s += delivered_cpu_s
        self.work_lost_cpu_s += lost_cpu_s

    def add_interval(self, availabilities: Mapping[int, Sequence[float]]) -> None:
        """The availabilities of each class's requests active in one interval."""
        for cls, values in availabilities.items():
            if len(values) >= 2:
                self._ginis[cls].append(gini(values))

    def summary(self) -> ServiceSummary:
        by_class: dict[int, ClassLevels] = {}
        count = 0
        for c in CLASSES:
            values = ordered(self._availability[c])
            count += len(values)
            deficits = self._deficit[c]
            ginis = self._ginis[c]
            by_class[c] = ClassLevels(
                requests=len(values),
                met=self._met[c],
                availability_min=values[0] if values else None,
                availability_p10=percentile(values, 0.10) if values else None,
                availability_median=percentile(values, 0.50) if values else None,
                availability_mean=math.fsum(values) / len(values) if values else None,
                qos_deficit=math.fsum(deficits) / len(deficits) if deficits else None,
                gini=math.fsum(ginis) / len(ginis) if ginis else None,
            )
        return ServiceSummary(
            slo=self.slo,
            allocation_s=self.allocation_s,
            by_class=by_class,
            preemptions_mean=self._preemptions / count if count else None,
            preemptions_max=self._preemptions_max if count else None,
            work_lost_cpu_s=self.work_lost_cpu_s,
            delivered_cpu_s=self.delivered_cpu_s,
        )


def tally_of(levels: Iterable[RequestLevel], slo: SloTable) -> ServiceTally:
    """A tally of ``requests.jsonl``'s lines, judged by ``slo`` (the lines' own ``met_slo``
    aside): per class, the same numbers as the run's summary but the Gini and the work lost,
    which the lines do not hold."""
    tally = ServiceTally(slo)
    for level in levels:
        tally.add(level.cls, level.availability, level.preemptions)
    return tally
