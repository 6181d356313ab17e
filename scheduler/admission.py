"""Admission control (DESIGN 3.13), after the QoS-driven paper's own frame: "decides which
requests to reject in order to increase the chances of satisfying the QoS promised to the ones
already admitted".

The rule, per resource (CPU shares and memory bytes): a request j of class c is admitted when

    sum over admitted k with c_k <= c of sigma(c_k) x r_k  +  sigma(c) x r_j
        <=  sum over hosts (on, or that can be switched on) of M(c) x capacity

where the admitted requests are those running, suspended or queued, r their original
resources, sigma the availability objective of a class (3.10) and M(c) the booking limit of a
class-c host (3.2: the hosts' ``cpu_limits`` and ``memory_limits``). Less important classes
never block more important ones (those may preempt them). An admitted request is never
refused later: it waits by Q.

It applies to a request that would wait in the queue: every request of the ``qos`` policy by
default, those that ask to queue under the others; ``AdmissionMode.NONE`` turns it off.

:class:`AdmissionLedger` keeps the admitted requests and their sums per class (O(1) a check),
and the bookable room per class (recomputed when the hosts change). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.classes import CLASSES
from domain.model import HostView, Request
from domain.slo import SloTable

MIN_RETRY_AFTER_S = 5.0


class AdmissionMode(StrEnum):
    NONE = "none"  # every request that asks to queue waits (the earlier behaviour)
    SLO = "slo"  # the rule above, for requests that would wait in the queue


class Resource(StrEnum):
    CPU = "cpu"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request was not admitted: its class, the first resource whose SLO-weighted demand
    (the admitted requests' of its class and the more important ones, plus its own) exceeds the
    room that class may book, in shares or bytes."""

    request_id: str
    cls: int
    resource: Resource
    demand: float
    room: float

    @property
    def ratio(self) -> float:
        return self.demand / self.room if self.room > 0 else math.inf

    @property
    def reason(self) -> str:
        word = "CPU" if self.resource is Resource.CPU else "memory"
        return f"admission: class-{self.cls} {word} demand {self.ratio:.2f} x the bookable room"

    def to_dict(self) -> dict[str, Any]:
        """The JSON body's details (DESIGN 3.13)."""
        return {"class": self.cls, "resource": self.resource.value,
                "demand": self.demand, "room": self.room,
                "ratio": self.ratio if math.isfinite(self.ratio) else None}


class AdmissionLedger:
    """The admitted requests (running, suspended or queued) and their original resources,
    summed per class; and the room each class may book on the hosts."""

    __slots__ = ("_cpu", "_ends", "_entries", "_memory", "_room")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, int, int]] = {}  # id -> (class, cpu, memory)
        self._ends: dict[str, float] = {}  # id -> expected end, where known
        self._cpu = [0, 0, 0, 0]  # by class - 1
        self._memory = [0, 0, 0, 0]
        self._room: list[tuple[int, int]] | None = None  # by class - 1: (CPU, memory)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._entries

    def admit(self, request: Request, expected_end_s: float | None = None) -> None:
        """``request`` is admitted (placed, or queued); again: nothing changes."""
        if request.id in self._entries:
            return
        cls = request.cls
        self._entries[request.id] = (cls, request.cpu_shares, request.memory)
        self._cpu[cls - 1] += request.cpu_shares
        self._memory[cls - 1] += request.memory
        if expected_end_s is not None:
            self._ends[request.id] = expected_end_s

    def release(self, request_id: str) -> None:
        """``request_id`` is over (or was never admitted: nothing changes)."""
        entry = self._entries.pop(request_id, None)
        if entry is None:
            return
        cls, cpu, memory = entry
        self._cpu[cls - 1] -= cpu
        self._memory[cls - 1] -= memory
        self._ends.pop(request_id, None)

    def reset(self, requests: Iterable[Request]) -> None:
        """Exactly ``requests`` are admitted (a manager reading its store); the expected ends
        of those already known are kept."""
        ends = self._ends
        self._entries, self._ends = {}, {}
        self._cpu, self._memory = [0, 0, 0, 0], [0, 0, 0, 0]
        for request in requests:
            self.admit(request, ends.get(request.id))

    def hosts_changed(self, hosts: Iterable[HostView]) -> None:
        """The hosts' bookable room per class, from their limits (M(c) x capacity)."""
        cpu = [0, 0, 0, 0]
        memory = [0, 0, 0, 0]
        for host in hosts:
            for index in range(4):
                cpu[index] += host.cpu_limits[index]
                memory[index] += host.memory_limits[index]
        self._room = list(zip(cpu, memory, strict=True))

    @property
    def has_room(self) -> bool:
        """Whether the hosts were given (:meth:`hosts_changed`)."""
        return self._room is not None

    def check(self, request: Request, slo: SloTable) -> Refusal | None:
        """None when ``request`` may be admitted; else why not (DESIGN 3.13)."""
        if self._room is None:
            raise RuntimeError("admission: the hosts' room is not known (hosts_changed)")
        cls = request.cls
        demand_cpu = slo.objective(cls) * request.cpu_shares
        demand_memory = slo.objective(cls) * request.memory
        for k in range(1, cls + 1):
            weight = slo.objective(k)
            demand_cpu += weight * self._cpu[k - 1]
            demand_memory += weight * self._memory[k - 1]
        room_cpu, room_memory = self._room[cls - 1]
        if demand_cpu > room_cpu:
            return Refusal(request.id, cls, Resource.CPU, demand_cpu, room_cpu)
        if demand_memory > room_memory:
            return Refusal(request.id, cls, Resource.MEMORY, demand_memory, room_memory)
        return None

    def retry_after_s(self, cls: int, now: float, fallback_s: float) -> float:
        """Seconds until the earliest expected end of an admitted request of class >= ``cls``
        (``fallback_s`` when none is known), at least MIN_RETRY_AFTER_S."""
        soonest = math.inf
        for request_id, end in self._ends.items():
            entry = self._entries.get(request_id)
            if entry is not None and entry[0] >= cls and end < soonest:
                soonest = end
        wait = soonest - now if math.isfinite(soonest) else fallback_s
        return max(MIN_RETRY_AFTER_S, wait)

    def demand_by_class(self) -> dict[int, tuple[int, int]]:
        """The admitted requests' original (CPU, memory) per class, unweighted."""
        return {c: (self._cpu[c - 1], self._memory[c - 1]) for c in CLASSES}
