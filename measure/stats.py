"""A sample's statistics, built once and written the same way everywhere: :class:`Stats`
(count, mean, p50, p75, p90, p99, min, max), :func:`percentile`, the one quantile rule of
every report (numpy's default), and :func:`ordered`, the one sort of a sample. Pure values, no
I/O."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# The Rust core's sort of a float column when this process runs the native core (importable
# only then: see domain.rooms).
try:
    from greenswarm_core import sort_floats as native_sort_floats
except ImportError:
    native_sort_floats = None  # type: ignore[assignment]


def ordered(values: Iterable[float]) -> Sequence[float]:
    """``values`` in ascending order, as ``sorted`` orders them (the reference), equal values
    in the order they came. A column of doubles (``array('d')``, the tallies of a run) is
    sorted as a copy of its own kind by the Rust core when this process runs it: 8 bytes a
    value, where a list of floats takes 32, on the tens of millions of values a long run
    tallies. Anything else, a column shorter than two, and a column holding NaN (no order holds
    it), goes to ``sorted``."""
    if (native_sort_floats is not None and isinstance(values, array) and values.typecode == "d"
            and len(values) > 1):  # an empty array's storage may be unaligned: the Rust refuses it
        column = array("d", values)
        if native_sort_floats(column):
            return column
    return sorted(values)


def sort_implementation() -> str:
    """``rust`` or ``python``: which sort :func:`ordered` gives a column of doubles."""
    return "python" if native_sort_floats is None else "rust"


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        raise ValueError("no values")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return float(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction)


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of a sample; every number is None when the sample is empty."""

    count: int
    mean: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Stats:
        sample = ordered(values)
        if not sample:
            return cls(0)
        return cls(
            count=len(sample),
            mean=math.fsum(sample) / len(sample),
            p50=percentile(sample, 0.50),
            p75=percentile(sample, 0.75),
            p90=percentile(sample, 0.90),
            p99=percentile(sample, 0.99),
            min=float(sample[0]),
            max=float(sample[-1]),
        )

    def flat(self, prefix: str, figures: Iterable[str]) -> dict[str, float | None]:
        """The named figures as flat fields ``<prefix>_<figure>`` (``decision_ms_p50``), the
        way a table of flat numbers (measure.results.PolicyMetrics) holds them."""
        return {f"{prefix}_{name}": getattr(self, name) for name in figures}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Stats:
        def number(key: str) -> float | None:
            value = obj.get(key)
            return None if value is None else float(value)

        return cls(
            count=int(obj["count"]),
            mean=number("mean"),
            p50=number("p50"),
            p75=number("p75"),
            p90=number("p90"),
            p99=number("p99"),
            min=number("min"),
            max=number("max"),
        )
