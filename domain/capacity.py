"""Fit checks (DESIGN 3.3) and the "room" of a host for each pass, from its tally.

``room(host, key)`` is the largest (cpu, memory) request that the pass named by ``key`` could
place on ``host`` if it did everything it is allowed to do there (cut every cuttable task, kill
every eligible victim). A request fits a pass on a host exactly when it is <= the room in both
dimensions; stores use it to skip whole groups of hosts, and the scheduler to skip hosts before
looking at their tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from domain.tally import CPU, CUT_CPU, CUT_MEM, MEM, SVC4_CPU, SVC4_MEM

if TYPE_CHECKING:  # the view computes its rooms with this module: no import cycle at run time
    from domain.model import HostView


class RoomKind(StrEnum):
    SIMPLE = "simple"  # as the host is, under its own class (capacity for an empty host)
    CUT = "cut"  # if the host class became ``cls`` and every allowed task cut were made
    KILL = "kill"  # if every task a request of class ``cls`` may kill were killed


@dataclass(frozen=True, slots=True)
class RoomKey:
    kind: RoomKind
    cls: int = 0  # CUT: the new host class; KILL: the request class
    job: bool = False  # KILL: whether the request is a job (class-4 services become victims)


SIMPLE_ROOM = RoomKey(RoomKind.SIMPLE)


def fits(host: HostView, cpu: int, memory: int, new_class: int) -> bool:
    """DESIGN 3.3: one task never exceeds the machine, and the host stays within M(new_class)."""
    return (
        cpu <= host.cpu_capacity
        and memory <= host.memory_capacity
        and host.cpu_allocated + cpu <= host.cpu_limits[new_class - 1]
        and host.memory_allocated + memory <= host.memory_limits[new_class - 1]
    )


def _killable(t: tuple[int, ...], request_class: int, request_is_job: bool) -> tuple[int, int]:
    if request_class < 4:
        first = request_class  # offset of class request_class + 1
        return sum(t[CPU + first : CPU + 4]), sum(t[MEM + first : MEM + 4])
    if request_is_job:
        return t[SVC4_CPU], t[SVC4_MEM]
    return 0, 0


def room(host: HostView, key: RoomKey) -> tuple[int, int]:
    """The room of ``host`` for the pass named by ``key`` (computed with the view)."""
    return host.rooms[ROOM_INDEX[key]]


def compute_rooms(host: HostView) -> tuple[tuple[int, int], ...]:
    """The room for every key of ``ROOM_KEYS``, in that order, from a host's books (the view
    calls this once, when it is made)."""
    host_class = host.host_class
    if host_class is None:
        return ((host.cpu_capacity, host.memory_capacity),) * len(ROOM_KEYS)
    tally = host.tally
    cpu_capacity, memory_capacity = host.cpu_capacity, host.memory_capacity
    cpu_limits, memory_limits = host.cpu_limits, host.memory_limits
    cpu_allocated, memory_allocated = host.cpu_allocated, host.memory_allocated
    rooms = []
    for key in ROOM_KEYS:
        if key.kind is RoomKind.SIMPLE:
            new_class, free_cpu, free_memory = host_class, 0, 0
        elif key.kind is RoomKind.CUT:
            new_class = min(host_class, key.cls)
            if new_class < 4:
                free_cpu = tally[CUT_CPU + new_class - 1]
                free_memory = tally[CUT_MEM + new_class - 1]
            else:
                free_cpu = free_memory = 0
        else:
            new_class = min(host_class, key.cls)
            free_cpu, free_memory = _killable(tally, key.cls, key.job)
        rooms.append(
            (
                min(cpu_capacity, cpu_limits[new_class - 1] - cpu_allocated + free_cpu),
                min(memory_capacity, memory_limits[new_class - 1] - memory_allocated + free_memory),
            )
        )
    return tuple(rooms)


def all_room_keys() -> tuple[RoomKey, ...]:
    """Every key a pass may ask about: stores that keep per-group bounds keep one per key."""
    keys = [SIMPLE_ROOM]
    keys += [RoomKey(RoomKind.CUT, cls) for cls in (1, 2, 3, 4)]
    keys += [RoomKey(RoomKind.KILL, cls, job) for cls in (1, 2, 3, 4) for job in (False, True)]
    return tuple(keys)


ROOM_KEYS: tuple[RoomKey, ...] = all_room_keys()
ROOM_INDEX: dict[RoomKey, int] = {key: index for index, key in enumerate(ROOM_KEYS)}
# The same indices without building a key: SIMPLE, CUT by new class, KILL by (class, job).
SIMPLE_INDEX = ROOM_INDEX[SIMPLE_ROOM]
CUT_INDEX: dict[int, int] = {c: ROOM_INDEX[RoomKey(RoomKind.CUT, c)] for c in (1, 2, 3, 4)}
KILL_INDEX: dict[tuple[int, bool], int] = {
    (c, job): ROOM_INDEX[RoomKey(RoomKind.KILL, c, job)]
    for c in (1, 2, 3, 4)
    for job in (False, True)
}
