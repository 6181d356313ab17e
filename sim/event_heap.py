"""The simulator's timed events: a heap that gives them back in the order of their time, then
their kind, then the order they were pushed in.

``EventHeap`` is the reference: a ``heapq`` of (t, kind, seq, obj) tuples, seq counted by the
heap, so two events never tie and their objects are never compared. The Rust core has the same
heap (``greenswarm_core.EventHeap``, native/rust/src/event_heap.rs, DESIGN 10), which the
simulator uses when this process runs the native core; tests/unit/test_native_event_heap.py
compares them.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Protocol

# The Rust heap when this process runs the native core (importable only then: see domain.rooms).
try:
    from greenswarm_core import EventHeap as NativeEventHeap
except ImportError:
    NativeEventHeap = None  # type: ignore[assignment,misc]


class Events(Protocol):
    """The simulator's events: EventHeap, or the Rust core's."""

    def __len__(self) -> int: ...

    def push(self, t: float, kind: int, obj: object) -> None: ...

    def pop_through(self, limit: float) -> tuple[float, int, Any] | None: ...


class EventHeap:
    """Events in order of (t, kind, push order); their objects ride along."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, t: float, kind: int, obj: object) -> None:
        """Queue ``obj`` for time ``t`` with ``kind``; a time that is not a number is refused
        (no order holds it)."""
        if math.isnan(t):
            raise ValueError("an event's time is not a number")
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, obj))

    def pop_through(self, limit: float) -> tuple[float, int, Any] | None:
        """The earliest event as (t, kind, obj) when its time is at most ``limit``, else None
        (and it stays)."""
        heap = self._heap
        if heap and heap[0][0] <= limit:
            t, kind, _, obj = heapq.heappop(heap)
            return t, kind, obj
        return None


def events_implementation() -> str:
    """``rust`` or ``python``: which heap a new simulation keeps its events in."""
    return "python" if NativeEventHeap is None else "rust"


def new_events() -> Events:
    if NativeEventHeap is not None:
        return NativeEventHeap()
    return EventHeap()
