"""The recorder's checks of what a driver tells it: a bad value raises
:class:`domain.errors.ValidationError` naming it. Pure."""

from __future__ import annotations

import math
from enum import Enum
from typing import TypeVar

from domain.classes import MAX_CLASS, MIN_CLASS
from domain.errors import ValidationError


# (isinstance with a tuple: ``int | float`` builds a union object on every call, and the recorder
# checks every time it is told)
def check_t(t: float, field_name: str = "t") -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValidationError(field_name, f"must be a finite number, got {t!r}")
    return float(t)


def check_nonneg(value: float, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(field_name, f"must be a finite number, got {value!r}")
    if value < 0:
        raise ValidationError(field_name, f"must be >= 0, got {value!r}")
    return float(value)


def check_class(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (
        MIN_CLASS <= value <= MAX_CLASS
    ):
        raise ValidationError("request_class", f"must be {MIN_CLASS}..{MAX_CLASS}, got {value!r}")
    return value


E = TypeVar("E", bound=Enum)


def as_member(value: E | str, kind: type[E]) -> E:
    """``kind(value)``, but a member as it is: the recorder is told a member almost always, and
    calling an enum is interpreted code (a value that is not one still raises its ValueError)."""
    return value if isinstance(value, kind) else kind(value)
