"""The Rust core's sort of a float column (native/rust/src/floats.rs) against the reference
(``sorted``, measure.stats.ordered): the same values in the same order, bit for bit (-0.0 and
0.0 are equal and keep the order they came in), and NaN left to ``sorted``; and a run's
statistics the same either way.

The build comes from the cache the set-up fills (tests/support/rust_core.py); without it these
tests fail, saying how to build it, unless GREENSWARM_NATIVE_RUST=0 turns them off.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterable
from types import ModuleType

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import measure.stats
from measure.stats import Stats, ordered
from tests.support.rust_core import load_rust, skipped

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

# Few distinct values, so that equal ones (and both zeros) meet often, and any float.
VALUES = st.lists(st.one_of(st.sampled_from((0.0, -0.0, 1.0, -1.0, 2.5, math.inf, -math.inf,
                                             5e-324, 1e308)),
                            st.floats(allow_nan=False)), max_size=400)


@pytest.fixture(scope="module")
def native() -> ModuleType:
    return load_rust()


@pytest.fixture
def rust_sort(native: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(measure.stats, "native_sort_floats", native.sort_floats)
    return native


def bits(values: Iterable[float]) -> list[bytes]:
    """Each value's bits: tells -0.0 from 0.0, which == does not."""
    return [struct.pack("<d", value) for value in values]


@settings(max_examples=500, deadline=None)
@given(values=VALUES.filter(lambda values: len(values) > 1))
@example(values=[0.0, -0.0, 0.0, -1.0, -0.0])
def test_a_column_sorts_as_sorted_sorts_it(native: ModuleType, values: list[float]) -> None:
    column = array("d", values)
    assert native.sort_floats(column) is True
    assert bits(column) == bits(sorted(values))


def test_a_column_with_nan_is_refused_and_left_as_it_was(native: ModuleType) -> None:
    column = array("d", [2.0, math.nan, 1.0, -0.0])
    assert native.sort_floats(column) is False
    assert bits(column) == bits([2.0, math.nan, 1.0, -0.0])


@pytest.mark.parametrize("column", [array("f", [1.0]), array("q", [1]), b"12345678",
                                    memoryview(array("d", [2.0, 1.0])).toreadonly(), [1.0]])
def test_what_is_not_a_writable_column_of_doubles_is_refused(native: ModuleType,
                                                             column: object) -> None:
    with pytest.raises((TypeError, BufferError)):
        native.sort_floats(column)


@settings(max_examples=300, deadline=None)
@given(values=VALUES)
def test_ordered_gives_sorteds_order_and_leaves_the_column(native: ModuleType,
                                                          values: list[float]) -> None:
    column = array("d", values)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measure.stats, "native_sort_floats", native.sort_floats)
        got = ordered(column)
    assert isinstance(got, array) == (len(values) > 1)  # the Rust sorted it, into a column
    assert bits(got) == bits(sorted(values))
    assert bits(column) == bits(values)  # the tally itself is not reordered


def test_ordered_leaves_nan_and_other_samples_to_sorted(rust_sort: ModuleType) -> None:
    with_nan = array("d", [3.0, math.nan, 1.0])
    assert bits(ordered(with_nan)) == bits(sorted(with_nan))
    assert ordered(x for x in (2.0, 1.0)) == [1.0, 2.0]
    assert ordered([3, 1, 2]) == [1, 2, 3]


def stats_bits(column: array[float], sort: object) -> list[bytes] | str:
    """Stats.of the column with ``sort`` as the Rust core's, as bits; or the error it raises
    (fsum refuses inf - inf and overflows)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measure.stats, "native_sort_floats", sort)
        try:
            stats = Stats.of(column)
        except (ValueError, OverflowError) as error:
            return type(error).__name__
    return bits(float(x) for x in stats.to_json().values() if x is not None)


@settings(max_examples=300, deadline=None)
@given(values=VALUES)
@example(values=[5.0, -0.0, 0.0, 1.0])
def test_stats_are_the_same_with_either_sort(native: ModuleType, values: list[float]) -> None:
    column = array("d", values)
    assert stats_bits(column, native.sort_floats) == stats_bits(column, None)
