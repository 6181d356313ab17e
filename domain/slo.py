"""Service levels per request (DESIGN 3.10), after the QoS-driven scheduling paper (eq. 1-8).

Every request, under every policy, live and simulated, is accounted from its admission:

* e, the time it ran (a cut task runs);
* p, the time it was admitted but not running: waiting in the queue (as a new request or a
  victim) and the allocation time alpha from a placement until its container runs, except the
  allocation time of its first placement, which every request pays under every policy;
* its availability A = e / (e + p) (1 before anything is counted);
* the objective sigma of its class (configuration; by default 1, 5/6, 2/3, 1/2);
* its QoS metric Q = e / sigma - (e + p) - alpha: the time-to-violate V* while A >= sigma (how
  long it could still wait), else its recoverability R*, the same formula and negative. A request
  that never ran starts at Q = 0 (its first allocation is not held against it) and loses a
  second per second while it waits;
* its preemption overhead C = (sum of its allocation times) / (e + that sum) (eq. 8), over the
  placements after the first;
* its preemptions (times it was taken off a host), and the work it lost: a killed job restarts
  from scratch, so what it had run since its last start is lost (times its CPU share) and that
  time moves from e to p (it delivered nothing); a checkpointable job loses only the part since
  its last checkpoint; a service keeps its running time in e (it served while it ran);
* its suspensions (DESIGN 3.14): paused on its host, it accrues p, not e, and loses nothing.

:class:`ServiceClock` keeps these for one request from the moments things happen to it; the
recorder (simulator, replay) and the manager (from a request's typed history) both use it.
Pure: no clock of its own, every moment is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from domain.classes import CLASS_LABEL_PERCENT, CLASSES, check_class
from domain.errors import ValidationError

# alpha (DESIGN 3.10, 3.11): the time from a placement to a running container, charged to a
# request (as time waiting) on every placement after its first where it is not measured (the
# simulator; a live manager or replay without a container start to go by), and the allocation
# time the queue's order and the qos policy expect. The paper's alpha is the expected maximum
# allocation time; scripts/bench-live.sh --requests 20 measured POST /requests to a running
# container at p50 0.66 s, p90 0.77 s, max 1.19 s on the lab: the max, rounded up.
DEFAULT_ALLOCATION_S = 1.2


def default_objective(cls: int) -> Fraction:
    """sigma(c) by default: 1 - t(c) of the thesis model (1, 5/6, 2/3, 1/2)."""
    return Fraction(100, CLASS_LABEL_PERCENT[cls])


@dataclass(frozen=True)
class SloTable:
    """The availability objective of every class; the defaults unless set."""

    objectives: Mapping[int, float] = field(default_factory=dict)
    # every class's objective, by class - 1 (asked for on every decision of the qos policy)
    _values: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for cls, value in self.objectives.items():
            check_class(cls, "slo")
            if isinstance(value, bool) or not isinstance(value, int | float | Fraction) or not (
                0 < float(value) <= 1
            ):
                raise ValidationError("slo", f"class {cls}: the objective must be in (0, 1]")
        values = tuple(float(self.objectives.get(c, default_objective(c))) for c in CLASSES)
        object.__setattr__(self, "_values", values)

    def objective(self, cls: int) -> float:
        return self._values[cls - 1]

    def as_dict(self) -> dict[str, float]:
        return {str(c): self.objective(c) for c in CLASSES}

    @classmethod
    def parse(cls, text: str, field_name: str = "slo") -> SloTable:
        """``"2=0.9,4=0.5"`` (classes not named keep their default); empty: the defaults."""
        objectives: dict[int, float] = {}
        for part in [p.strip() for p in text.split(",")]:
            if not part:
                continue
            name, sep, raw = part.partition("=")
            try:
                cls_number = int(name)
                value = float(raw)
            except ValueError:
                raise ValidationError(
                    field_name, f"{part!r} is not CLASS=OBJECTIVE, e.g. 2=0.9") from None
            if not sep or cls_number not in CLASSES:
                raise ValidationError(field_name, f"{part!r}: the class must be 1..4")
            if not 0 < value <= 1 or not math.isfinite(value):
                raise ValidationError(field_name, f"{part!r}: the objective must be in (0, 1]")
            if cls_number in objectives:
                raise ValidationError(field_name, f"class {cls_number} is set twice")
            objectives[cls_number] = value
        return cls(objectives)

    def describe(self) -> str:
        return ", ".join(f"{c}={self.objective(c):g}" for c in CLASSES)


# -- the formulas -----------------------------------------------------------------------------


def availability(executed_s: float, pending_s: float) -> float:
    """A = e / (e + p), eq. 1; 1 when nothing is counted yet."""
    total = executed_s + pending_s
    return executed_s / total if total > 0 else 1.0


def qos_metric(executed_s: float, pending_s: float, objective: float, alpha_s: float) -> float:
    """Q = e / sigma - (e + p) - alpha: V* (eq. 4) when A >= sigma, else R* (eq. 7)."""
    return executed_s / objective - (executed_s + pending_s) - alpha_s


def preemption_overhead(allocation_s: float, executed_s: float) -> float:
    """C = (sum of allocation times) / (e + that sum), eq. 8; 0 with no allocation time."""
    total = executed_s + allocation_s
    return allocation_s / total if total > 0 else 0.0


# -- one request's clock ------------------------------------------------------------------------


class Phase(StrEnum):
    NEW = "new"  # admitted, never placed: waiting, Q from 0
    ALLOCATING = "allocating"  # placed, its container not running yet
    RUNNING = "running"
    SUSPENDED = "suspended"  # paused on its host (DESIGN 3.14): waiting, nothing lost
    WAITING = "waiting"  # taken off a host (or never started), waiting to run again
    DONE = "done"


@dataclass(init=False)
class ServiceClock:
    """The service one request received, from its admission at ``admitted_s``.

    Call, in time order: :meth:`placed` when a host is booked for it, :meth:`running` when its
    container runs, :meth:`stopped` when it leaves its host (killed, preempted, its host lost:
    it waits again), :meth:`suspended` and :meth:`resumed` when it is paused on its host and
    runs again there, :meth:`ended` when it is over (finished, failed, stopped by its client,
    refused). Where a start is not measured, :meth:`placed` says when the container is taken to
    run (``starts_after_s``); each call, and :meth:`settle`, applies that start once time has
    passed it. Ask :meth:`at` for the figures at any moment (after :meth:`settle`).
    ``checkpoint_interval_s``: a job that saves its progress every that many seconds of its
    running time since its last start (0: it restarts from scratch).
    """

    admitted_s: float
    phase: Phase = Phase.NEW
    since_s: float = 0.0
    executed_s: float = 0.0  # e, up to since_s
    pending_s: float = 0.0  # p, up to since_s
    allocation_s: float = 0.0  # sum of the allocation times after the first placement
    placements: int = 0
    preemptions: int = 0
    run_started_s: float | None = None  # its current run's start (work since it is lost on a kill)
    lost_s: float = 0.0  # run time lost to kills (a killed job restarts from scratch)
    starts_at_s: float | None = None  # when the current placement's container is taken to run
    checkpoint_interval_s: float = 0.0  # a checkpointable job's interval (0: none)
    ran_s: float = 0.0  # running time since its last start, up to since_s (pauses excluded)
    suspensions: int = 0  # times it was paused on its host
    checkpoint_restarts: int = 0  # kills after which it resumed from a checkpoint
    kept_s: float = 0.0  # run time kills did not throw away thanks to checkpoints

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(
        self, admitted_s: float, phase: Phase = Phase.NEW, since_s: float = 0.0,
        executed_s: float = 0.0, pending_s: float = 0.0, allocation_s: float = 0.0,
        placements: int = 0, preemptions: int = 0, run_started_s: float | None = None,
        lost_s: float = 0.0, starts_at_s: float | None = None,
        checkpoint_interval_s: float = 0.0, ran_s: float = 0.0, suspensions: int = 0,
        checkpoint_restarts: int = 0, kept_s: float = 0.0,
    ) -> None:
        self.admitted_s = admitted_s
        self.phase = phase
        self.since_s = since_s
        self.executed_s = executed_s
        self.pending_s = pending_s
        self.allocation_s = allocation_s
        self.placements = placements
        self.preemptions = preemptions
        self.run_started_s = run_started_s
        self.lost_s = lost_s
        self.starts_at_s = starts_at_s
        self.checkpoint_interval_s = checkpoint_interval_s
        self.ran_s = ran_s
        self.suspensions = suspensions
        self.checkpoint_restarts = checkpoint_restarts
        self.kept_s = kept_s
        self.__post_init__()

    def __post_init__(self) -> None:
        self.since_s = self.admitted_s

    def _advance(self, t: float) -> None:
        dt = max(0.0, t - self.since_s)
        if self.phase is Phase.RUNNING:
            self.executed_s += dt
            self.ran_s += dt
        elif self.phase in (Phase.NEW, Phase.WAITING, Phase.SUSPENDED):
            self.pending_s += dt
        elif self.phase is Phase.ALLOCATING and self.placements > 1:
            self.pending_s += dt
            self.allocation_s += dt
        self.since_s = max(self.since_s, t)

    def settle(self, t: float) -> None:
        """Time reached ``t``: the expected start of the current placement, if it is due by
        then, happens (at its own moment)."""
        if self.starts_at_s is not None and self.starts_at_s <= t:
            self.running(self.starts_at_s)

    def placed(
        self, t: float, *, on_arrival: bool = False, starts_after_s: float | None = None
    ) -> None:
        """A host booked for it. ``on_arrival``: by the decision on its arrival (it never
        waited in the queue): the time that decision took, from its admission, is part of its
        first allocation, which is free (live, the round trip and the decision; in the
        simulator, no time at all). ``starts_after_s``: its container is taken to run that
        long after ``t`` (None: :meth:`running` will say when)."""
        self.settle(t)
        if self.phase is Phase.DONE:
            return
        self.starts_at_s = None if starts_after_s is None else t + starts_after_s
        if on_arrival and self.phase is Phase.NEW and self.placements == 0:
            self.since_s = max(self.since_s, t)
        else:
            self._advance(t)
        self.placements += 1
        self.phase = Phase.ALLOCATING

    def running(self, t: float) -> None:
        if self.phase is not Phase.ALLOCATING:
            return
        self.starts_at_s = None
        self._advance(t)
        self.phase = Phase.RUNNING
        self.run_started_s = t
        self.ran_s = 0.0

    def stopped(self, t: float, *, preempted: bool = True, work_lost: bool = True) -> None:
        """It left its host and waits to run again (a kill, a preemption, its host lost).
        ``work_lost``: a job, whose run since its last start was thrown away (but for what its
        last checkpoint kept): that time moves from e to p and counts as lost; a service's
        (False) stays in e."""
        self.settle(t)
        self.starts_at_s = None
        if self.phase is Phase.DONE:
            return
        self._advance(t)
        ran = self.ran_s
        if (self.phase in (Phase.RUNNING, Phase.SUSPENDED) and work_lost
                and self.run_started_s is not None and ran > 0):
            kept = 0.0
            interval = self.checkpoint_interval_s
            if interval > 0:
                kept = math.floor(ran / interval) * interval
                if kept > 0:
                    self.checkpoint_restarts += 1
                    self.kept_s += kept
            lost = ran - kept
            self.lost_s += lost
            self.executed_s -= lost
            self.pending_s += lost
        if preempted and self.phase in (Phase.RUNNING, Phase.ALLOCATING, Phase.SUSPENDED):
            self.preemptions += 1
        self.phase = Phase.WAITING
        self.run_started_s = None
        self.ran_s = 0.0

    def suspended(self, t: float) -> None:
        """Paused on its host (DESIGN 3.14): from ``t`` it waits (p) and loses nothing."""
        self.settle(t)
        if self.phase not in (Phase.RUNNING, Phase.ALLOCATING):
            return
        self.starts_at_s = None
        self._advance(t)
        if self.phase is Phase.ALLOCATING:  # paused before its container ran: it runs when
            self.run_started_s = t  # resumed, its allocation over
            self.ran_s = 0.0
        self.phase = Phase.SUSPENDED
        self.suspensions += 1

    def resumed(self, t: float) -> None:
        """Running again on the host it was paused on; its run goes on where it stopped."""
        if self.phase is not Phase.SUSPENDED:
            return
        self._advance(t)
        self.phase = Phase.RUNNING

    def ended(self, t: float) -> None:
        self.settle(t)
        self.starts_at_s = None
        if self.phase is Phase.DONE:
            return
        self._advance(t)
        self.phase = Phase.DONE
        self.run_started_s = None

    def at(self, t: float, objective: float, expected_alpha_s: float = 0.0) -> ServiceLevel:
        """The figures at ``t`` (at or after the last call), as if the request stayed as it is.
        ``expected_alpha_s``: the allocation time it would need to run again (the alpha of Q);
        a request never placed is not charged it (it starts at Q = 0)."""
        executed, pending, allocation = self.executed_s, self.pending_s, self.allocation_s
        if self.phase is not Phase.DONE and t > self.since_s:
            dt = t - self.since_s
            if self.phase is Phase.RUNNING:
                executed += dt
            elif self.phase in (Phase.NEW, Phase.WAITING, Phase.SUSPENDED):
                pending += dt
            elif self.placements > 1:
                pending += dt
                allocation += dt
        # to run (again) after a placement costs another allocation, counted against it; a
        # request never placed has its first allocation free, as every request does
        alpha = expected_alpha_s if self.placements > 0 else 0.0
        return ServiceLevel(
            executed_s=executed,
            pending_s=pending,
            availability=availability(executed, pending),
            objective=objective,
            qos=qos_metric(executed, pending, objective, alpha),
            overhead=preemption_overhead(allocation, executed),
            preemptions=self.preemptions,
            lost_s=self.lost_s,
        )


@dataclass(frozen=True, slots=True, init=False)
class ServiceLevel:
    """One request's figures at a moment."""

    executed_s: float
    pending_s: float
    availability: float
    objective: float
    qos: float  # Q: V* (>= 0) while the objective is met, else R* (< 0)
    overhead: float  # C
    preemptions: int
    lost_s: float

    # By hand (init=False), as ServiceClock's.
    def __init__(self, executed_s: float, pending_s: float, availability: float,
                 objective: float, qos: float, overhead: float, preemptions: int,
                 lost_s: float) -> None:
        object.__setattr__(self, "executed_s", executed_s)
        object.__setattr__(self, "pending_s", pending_s)
        object.__setattr__(self, "availability", availability)
        object.__setattr__(self, "objective", objective)
        object.__setattr__(self, "qos", qos)
        object.__setattr__(self, "overhead", overhead)
        object.__setattr__(self, "preemptions", preemptions)
        object.__setattr__(self, "lost_s", lost_s)

    @property
    def met(self) -> bool:
        return self.availability >= self.objective

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "availability": self.availability,
            "slo": self.objective,
            "met_slo": self.met,
            "q_s": self.qos,
            "executed_s": self.executed_s,
            "pending_s": self.pending_s,
            "overhead": self.overhead,
            "preemptions": self.preemptions,
            "work_lost_s": self.lost_s,
        }
