"""Overbooking classes (DESIGN 3.2), as exact fractions.

Class c tolerates t(c) = 1 - 100/label(c) of its resources being cut, and a host whose lowest
class is c may be booked up to M(c) x capacity. Two models of M are offered:

* ``thesis`` (default): M(c) = 1 + t(c)  -> 1, 7/6, 4/3, 3/2;
* ``label``: M(c) is the label itself     -> 1, 6/5, 3/2, 2;
* ``none``: M(c) = 1 and t(c) = 0 for every class: no overbooking and no cuts, to compare with
  schedulers that never overbook (the QoS-driven paper's).

The cut tolerance t(c) is the same in the first two models; only the booking ceiling differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from domain.errors import ValidationError
from domain.fields import Choice, Int, Then
from domain.units import MIN_MEMORY_BYTES

MIN_CLASS = 1
# The floor of memory after a cut (Docker refuses a container limited below it): every memory
# cut is ``after_cut(..., MEMORY_FLOOR)``, so the decisions, the tallies and the restorations
# agree on what a cut task keeps.
MEMORY_FLOOR = MIN_MEMORY_BYTES
MAX_CLASS = 4
CLASSES: tuple[int, ...] = (1, 2, 3, 4)
CLASS = Int(MIN_CLASS, MAX_CLASS)

# The label of each class, in percent of the request that the class is sold as.
CLASS_LABEL_PERCENT: dict[int, int] = {1: 100, 2: 120, 3: 150, 4: 200}


class OverbookingModel(StrEnum):
    THESIS = "thesis"
    LABEL = "label"
    NONE = "none"


def check_class(value: object, field_name: str = "class") -> int:
    """Return ``value`` as a class number, or raise ValidationError naming ``field_name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field_name, f"must be an integer {MIN_CLASS}..{MAX_CLASS}")
    if not MIN_CLASS <= value <= MAX_CLASS:
        raise ValidationError(field_name, f"must be between {MIN_CLASS} and {MAX_CLASS}")
    return value


@dataclass(frozen=True)
class ClassTable:
    """t(c) and M(c) for every class, exact."""

    model: OverbookingModel = OverbookingModel.THESIS
    _tolerance: dict[int, Fraction] = field(init=False, repr=False, compare=False)
    _max_factor: dict[int, Fraction] = field(init=False, repr=False, compare=False)
    _cuts: dict[tuple[int, int], Fraction] = field(init=False, repr=False, compare=False)
    _cut_ratios: dict[tuple[int, int], tuple[int, int]] = field(
        init=False, repr=False, compare=False
    )
    _steps: dict[int, tuple[tuple[Fraction, int, int], ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        tol = {c: 1 - Fraction(100, CLASS_LABEL_PERCENT[c]) for c in CLASSES}
        if self.model is OverbookingModel.THESIS:
            factor = {c: 1 + tol[c] for c in CLASSES}
        elif self.model is OverbookingModel.LABEL:
            factor = {c: Fraction(CLASS_LABEL_PERCENT[c], 100) for c in CLASSES}
        else:
            tol = {c: Fraction(0) for c in CLASSES}
            factor = {c: Fraction(1) for c in CLASSES}
        object.__setattr__(self, "_tolerance", tol)
        object.__setattr__(self, "_max_factor", factor)
        # Fraction arithmetic is slow and these are asked for on every decision: computed once.
        cuts = {(a, b): max(Fraction(0), tol[a] - tol[b]) for a in CLASSES for b in CLASSES}
        object.__setattr__(self, "_cuts", cuts)
        # The same cuts as (numerator, denominator), for exact integer comparisons and
        # roundings in hot paths (Fraction's operators are slow).
        ratios = {key: (cut.numerator, cut.denominator) for key, cut in cuts.items()}
        object.__setattr__(self, "_cut_ratios", ratios)
        # Per class c, the distinct cuts t(c) - t(k) over every class k, ascending.
        steps = {
            a: tuple((cut, cut.numerator, cut.denominator)
                     for cut in sorted({cuts[a, b] for b in CLASSES}))
            for a in CLASSES
        }
        object.__setattr__(self, "_steps", steps)

    def tolerance(self, cls: int) -> Fraction:
        """t(c): the share of a class-c task's resources that may be cut."""
        return self._tolerance[cls]

    def max_factor(self, cls: int) -> Fraction:
        """M(c): how far a host of class c may be booked, as a multiple of capacity."""
        return self._max_factor[cls]

    def limit(self, capacity: int, cls: int) -> int:
        """The largest whole allocation allowed on ``capacity`` for host class ``cls``.

        Allocations are integers, so ``alloc <= capacity * M`` is ``alloc <= floor(capacity * M)``.
        """
        return math.floor(capacity * self._max_factor[cls])

    def request_cut(self, request_class: int, host_class: int) -> Fraction:
        """The cut a request of ``request_class`` takes on a stricter host (0 if none):
        max(0, t(request_class) - t(host_class))."""
        return self._cuts[request_class, host_class]

    def request_cut_ratio(self, request_class: int, host_class: int) -> tuple[int, int]:
        """``request_cut`` as (numerator, denominator), the denominator > 0."""
        return self._cut_ratios[request_class, host_class]

    def cut_steps(self, cls: int) -> tuple[tuple[Fraction, int, int], ...]:
        """Every distinct ``request_cut(cls, k)`` over the classes k, ascending, each with its
        numerator and denominator: the cuts a class-``cls`` task can have (DESIGN 3.8)."""
        return self._steps[cls]

    def availability_objective(self, cls: int) -> Fraction:
        """Default availability objective of a class: 1 - t(c) of the thesis model (1, 5/6,
        2/3, 1/2), whatever the booking model (DESIGN 3.10)."""
        return Fraction(100, CLASS_LABEL_PERCENT[cls])


def after_cut(original: int, cut: Fraction, floor: int = 0) -> int:
    """Resources left after a total cut of ``cut``, rounded up to a whole unit, and never below
    ``floor`` (Docker's floor of the resource, ``MIN_MEMORY_BYTES`` for memory) unless the
    original was: a cut that would go below it is limited to it (DESIGN 3.5).

    Rounding up means a task is never cut beyond its allowance.
    """
    numerator = cut.numerator
    if not numerator:  # most sizes are uncut: the original, which the lines below give too
        return original
    # ceil(original x (1 - n/d)) in integers: exact, and much cheaper than Fraction arithmetic
    denominator = cut.denominator
    left = -(-original * (denominator - numerator) // denominator)
    return left if left >= floor else min(original, floor)


def after_cut_ratio(original: int, numerator: int, denominator: int, floor: int = 0) -> int:
    """``after_cut`` of the cut numerator/denominator (denominator > 0), for callers that hold
    the integers already."""
    left = -(-original * (denominator - numerator) // denominator)
    return left if left >= floor else min(original, floor)


def _table_cuts() -> tuple[Fraction, ...]:
    """Every cut a task can have received, in any model: the steps of the class table."""
    return tuple(sorted({ClassTable(model).request_cut(a, b)
                         for model in OverbookingModel for a in CLASSES for b in CLASSES}))


TABLE_CUTS = _table_cuts()  # 0, 1/6, 1/3, 1/2


def _fraction_of(value: object, path: str) -> Fraction:
    return Fraction(str(value))


# A task's total cut as a placement gives it: one of the table's steps, as an exact fraction
# ("1/6"), or 0 (restorations step back along the table, so no other cut can stand).
CUT_RECEIVED = Then(Choice((*(str(cut) for cut in TABLE_CUTS), 0)), _fraction_of,
                    description="the total cut, a step of the class table as an exact fraction")
