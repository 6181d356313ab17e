"""The Rust core's event heap (native/rust/src/event_heap.rs) against the reference
(sim.event_heap.EventHeap, a heapq of tuples): fed the same pushes and pops, both give back the
same events in the same order (ties on time broken by kind, then by push order), the same
length after every step, and refuse the same times.

The build comes from the cache the set-up fills (tests/support/rust_core.py); without it these
tests fail, saying how to build it, unless GREENSWARM_NATIVE_RUST=0 turns them off.
"""

from __future__ import annotations

import gc
import math
import weakref
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.event_heap import EventHeap, Events
from tests.support.rust_core import load_rust, skipped

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

# Few times and kinds, so that events tie on both and the push order decides.
TIMES = st.one_of(st.sampled_from((0.0, -0.0, 1.0, 1.5, 2.0, 1e9, math.inf, -math.inf)),
                  st.floats(allow_nan=False, min_value=-5.0, max_value=5.0))
KINDS = st.integers(min_value=0, max_value=6)
# A step: ("push", t, kind) or ("pop", limit).
STEPS = st.lists(st.one_of(st.tuples(st.just("push"), TIMES, KINDS),
                           st.tuples(st.just("pop"), TIMES)), max_size=300)


@pytest.fixture(scope="module")
def native() -> ModuleType:
    return load_rust()


class Marker:
    """An event's object: compared by identity only (a heap must never compare two)."""

    def __init__(self, number: int) -> None:
        self.number = number

    def __eq__(self, other: object) -> bool:
        raise AssertionError("an event's object was compared")

    __hash__ = object.__hash__

    def __lt__(self, other: object) -> bool:
        raise AssertionError("an event's object was compared")


def same_step(reference: Events, rust: Events, step: tuple[Any, ...], number: int) -> None:
    if step[0] == "push":
        marker = Marker(number)
        reference.push(step[1], step[2], marker)
        rust.push(step[1], step[2], marker)
    else:
        expected, got = reference.pop_through(step[1]), rust.pop_through(step[1])
        if expected is None:
            assert got is None, (step, got)
        else:
            assert got is not None, (step, expected)
            assert got[0] == expected[0] and got[1] == expected[1], (step, got, expected)
            assert math.copysign(1.0, got[0]) == math.copysign(1.0, expected[0])
            assert got[2] is expected[2] and type(got[0]) is float and type(got[1]) is int
    assert len(rust) == len(reference)


@settings(max_examples=300, deadline=None)
@given(steps=STEPS)
def test_the_rust_heap_gives_events_back_as_the_reference(
    native: ModuleType, steps: list[tuple[Any, ...]],
) -> None:
    reference, rust = EventHeap(), native.EventHeap()
    for number, step in enumerate(steps):
        same_step(reference, rust, step, number)
    while len(reference):  # and drained to the end, in the same order
        same_step(reference, rust, ("pop", math.inf), -1)
    assert rust.pop_through(math.inf) is None and len(rust) == 0


def test_ties_on_time_go_by_kind_then_push_order(native: ModuleType) -> None:
    for heap in (EventHeap(), native.EventHeap()):
        markers = [Marker(n) for n in range(6)]
        for marker, (t, kind) in zip(markers, ((2.0, 1), (1.0, 4), (1.0, 0), (1.0, 4), (0.0, 6),
                                               (1.0, 0)), strict=True):
            heap.push(t, kind, marker)
        order = []
        while (event := heap.pop_through(10.0)) is not None:
            order.append(event[2].number)
        assert order == [4, 2, 5, 1, 3, 0], type(heap)


def test_an_event_stays_until_its_time_is_reached(native: ModuleType) -> None:
    for heap in (EventHeap(), native.EventHeap()):
        heap.push(5.0, 0, None)
        assert heap.pop_through(4.999) is None and len(heap) == 1
        assert heap.pop_through(math.nan) is None and len(heap) == 1  # no time is <= NaN
        assert heap.pop_through(5.0) == (5.0, 0, None) and len(heap) == 0


def test_a_time_that_is_not_a_number_is_refused_and_changes_nothing(native: ModuleType) -> None:
    for heap in (EventHeap(), native.EventHeap()):
        heap.push(1.0, 0, "kept")
        with pytest.raises(ValueError, match="not a number"):
            heap.push(math.nan, 0, "refused")
        assert len(heap) == 1
        assert heap.pop_through(math.inf) == (1.0, 0, "kept")


def test_an_int_time_comes_back_as_the_same_float(native: ModuleType) -> None:
    """The compiled reference holds a time as a C double, as the Rust heap does."""
    heap = native.EventHeap()
    heap.push(3, 2, None)
    event = heap.pop_through(3)
    assert event == (3.0, 2, None) and type(event[0]) is float


def test_the_heap_lets_its_objects_go(native: ModuleType) -> None:
    """Its objects leave with their event, or with the heap, and a cycle through the heap is
    found by the collector (the heap tells it what it holds)."""
    heap = native.EventHeap()
    popped, dropped = Marker(1), Marker(2)
    heap.push(1.0, 0, popped)
    heap.push(2.0, 0, dropped)
    watch_popped, watch_dropped = weakref.ref(popped), weakref.ref(dropped)
    del popped, dropped
    heap.pop_through(1.0)
    assert watch_popped() is None and watch_dropped() is not None
    del heap
    assert watch_dropped() is None
    cyclic, owner = native.EventHeap(), Marker(3)
    owner.heap = cyclic  # type: ignore[attr-defined]
    cyclic.push(0.0, 0, owner)
    watch_owner = weakref.ref(owner)
    del owner, cyclic
    gc.collect()
    assert watch_owner() is None
