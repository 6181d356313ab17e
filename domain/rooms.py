"""The "room" of a host for each pass, from its tally (no HostView: the view computes its rooms
with this module when it is made).

``room(host, key)`` is the largest (cpu, memory) request that the pass named by ``key`` could
place on ``host`` if it did everything it is allowed to do there (cut every cuttable task, kill
every eligible victim). A request fits a pass on a host exactly when it is <= the room in both
dimensions; stores use it to skip whole groups of hosts, and the scheduler to skip hosts before
looking at their tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from domain.tally import CPU, CUT_CPU, CUT_MEM, MEM, SVC4_CPU, SVC4_MEM
from domain.tally import cpu_allocated as tally_cpu_allocated
from domain.tally import host_class as tally_host_class
from domain.tally import memory_allocated as tally_memory_allocated


class RoomKind(StrEnum):
    SIMPLE = "simple"  # as the host is, under its own class (capacity for an empty host)
    CUT = "cut"  # if the host class became ``cls`` and every allowed task cut were made
    KILL = "kill"  # if every task a request of class ``cls`` may kill were killed


@dataclass(frozen=True, slots=True, init=False)
class RoomKey:
    kind: RoomKind
    cls: int = 0  # CUT: the new host class; KILL: the request class
    job: bool = False  # KILL: whether the request is a job (class-4 services become victims)

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(self, kind: RoomKind, cls: int = 0, job: bool = False) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "cls", cls)
        object.__setattr__(self, "job", job)

    # Also by hand, as the generated ones would be: the stores look a key up in ROOM_INDEX on
    # every segment they walk, and the generated methods stay interpreted when compiled.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RoomKey):
            return NotImplemented
        return self.kind == other.kind and self.cls == other.cls and self.job == other.job

    def __hash__(self) -> int:
        return hash((self.kind, self.cls, self.job))


SIMPLE_ROOM = RoomKey(RoomKind.SIMPLE)


RoomsFunction = Callable[
    [tuple[int, ...], int, int, tuple[int, ...], tuple[int, ...]], tuple[tuple[int, int], ...]
]

# The Rust implementation (native/rust, DESIGN 10) when this process runs the native core: the
# module ``greenswarm_core`` is importable only when an entry point enabled it
# (native.loader.enable(); GREENSWARM_NATIVE=0 or GREENSWARM_NATIVE_RUST=0 keep it away), so
# this import reads no setting and finds no file of its own.
_native_rooms: RoomsFunction | None
try:
    from greenswarm_core import compute_rooms as _imported_rooms

    _native_rooms = _imported_rooms
except ImportError:
    _native_rooms = None


def rooms_implementation() -> str:
    """``rust`` or ``python``: which :func:`compute_rooms` this process runs."""
    return "python" if _native_rooms is None else "rust"


def compute_rooms(
    t: tuple[int, ...],
    cpu_capacity: int,
    memory_capacity: int,
    cpu_limits: tuple[int, ...],
    memory_limits: tuple[int, ...],
) -> tuple[tuple[int, int], ...]:
    """The room for every key of ``ROOM_KEYS``, in that order, from a host's tally, capacity
    and class limits: the Rust implementation when loaded, else :func:`compute_rooms_reference`
    (also for values it cannot hold in 64 bits or that are no ints: it raises OverflowError or
    TypeError then, and the reference decides). Both give the same rooms
    (tests/unit/test_native_rust.py)."""
    native = _native_rooms
    if native is not None:
        try:
            return native(t, cpu_capacity, memory_capacity, cpu_limits, memory_limits)
        except (OverflowError, TypeError):
            pass
    return compute_rooms_reference(t, cpu_capacity, memory_capacity, cpu_limits, memory_limits)


def compute_rooms_reference(
    t: tuple[int, ...],
    cpu_capacity: int,
    memory_capacity: int,
    cpu_limits: tuple[int, ...],
    memory_limits: tuple[int, ...],
) -> tuple[tuple[int, int], ...]:
    """The rooms in Python: the reference the Rust implementation must match (a HostView
    computes its rooms once, when it is made: on every change of a host, so it is written for
    speed; ``tests/unit/test_capacity.py`` checks it against the rules term by term)."""
    host_class = tally_host_class(t)
    if host_class is None:
        return ((cpu_capacity, memory_capacity),) * len(ROOM_KEYS)
    cpu_allocated, memory_allocated = tally_cpu_allocated(t), tally_memory_allocated(t)
    # What killing every task of a class above k frees, for k = 1, 2, 3 (index k - 1).
    above_cpu = (t[CPU + 1] + t[CPU + 2] + t[CPU + 3], t[CPU + 2] + t[CPU + 3], t[CPU + 3])
    above_memory = (t[MEM + 1] + t[MEM + 2] + t[MEM + 3], t[MEM + 2] + t[MEM + 3], t[MEM + 3])
    rooms = []
    for kind, cls, job in _ROOM_PLAN:
        new_class = host_class if host_class < cls else cls
        if kind == _SIMPLE:
            free_cpu = free_memory = 0
        elif kind == _CUT:
            if new_class < 4:
                free_cpu = t[CUT_CPU + new_class - 1]
                free_memory = t[CUT_MEM + new_class - 1]
            else:
                free_cpu = free_memory = 0
        elif cls < 4:
            free_cpu, free_memory = above_cpu[cls - 1], above_memory[cls - 1]
        elif job:  # class 4 jobs may kill class 4 services
            free_cpu, free_memory = t[SVC4_CPU], t[SVC4_MEM]
        else:
            free_cpu = free_memory = 0
        cpu = cpu_limits[new_class - 1] - cpu_allocated + free_cpu
        memory = memory_limits[new_class - 1] - memory_allocated + free_memory
        rooms.append((cpu if cpu < cpu_capacity else cpu_capacity,
                      memory if memory < memory_capacity else memory_capacity))
    return tuple(rooms)


def all_room_keys() -> tuple[RoomKey, ...]:
    """Every key a pass may ask about: stores that keep per-group bounds keep one per key."""
    keys = [SIMPLE_ROOM]
    keys += [RoomKey(RoomKind.CUT, cls) for cls in (1, 2, 3, 4)]
    keys += [RoomKey(RoomKind.KILL, cls, job) for cls in (1, 2, 3, 4) for job in (False, True)]
    return tuple(keys)


ROOM_KEYS: tuple[RoomKey, ...] = all_room_keys()
ROOM_INDEX: dict[RoomKey, int] = {key: index for index, key in enumerate(ROOM_KEYS)}
# compute_rooms' view of the keys: (kind, class bounding the new host class, job). The simple
# pass keeps the host class (bound 4); cut and kill rooms use min(host class, key class). The
# kinds as small ints: compute_rooms runs on every change of a host, and reading an enum
# member from its class costs more than the rest of an iteration.
_SIMPLE, _CUT, _KILL = 0, 1, 2
_KIND_CODE = {RoomKind.SIMPLE: _SIMPLE, RoomKind.CUT: _CUT, RoomKind.KILL: _KILL}
_ROOM_PLAN: tuple[tuple[int, int, bool], ...] = tuple(
    (_KIND_CODE[key.kind], 4 if key.kind is RoomKind.SIMPLE else key.cls, key.job)
    for key in ROOM_KEYS
)
# The same indices without building a key: SIMPLE, CUT by new class, KILL by (class, job).
SIMPLE_INDEX = ROOM_INDEX[SIMPLE_ROOM]
CUT_INDEX: dict[int, int] = {c: ROOM_INDEX[RoomKey(RoomKind.CUT, c)] for c in (1, 2, 3, 4)}
KILL_INDEX: dict[tuple[int, bool], int] = {
    (c, job): ROOM_INDEX[RoomKey(RoomKind.KILL, c, job)]
    for c in (1, 2, 3, 4)
    for job in (False, True)
}
