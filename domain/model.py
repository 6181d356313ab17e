"""The values every package shares: requests, tasks, hosts.

Memory is always in bytes and CPU in shares (1024 = one core). A task's id is the id of the
request it runs, so a killed and rescheduled task keeps its identity.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from domain import tally as layout
from domain.classes import check_class
from domain.constraints import Constraint, NodeFacts
from domain.errors import ValidationError
from domain.fields import Choice, Num, Text
from domain.load import LoadWindows
from domain.regions import Region, total_utilization
from domain.rooms import compute_rooms
from domain.units import MIN_CPU_SHARES as MIN_CPU_SHARES  # re-exported: its users import it here

ID_TEXT = "[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
ID_PATTERN = re.compile(ID_TEXT)  # matched whole ('$' would allow a final newline)
# Ids become parts of Redis keys, Docker names and URLs.
ID = Text(ID_TEXT, message="must be 1-128 letters, digits, '_', '.' or '-', starting alphanumeric")
# Words a task id cannot be: they are routes beside /registry/tasks/{task_id}.
RESERVED_TASK_IDS = frozenset({"utilization"})
# An id that may name a task: a request's name becomes its task's id.
TASK_ID = Text(ID_TEXT, message=ID.message,
               unlike="|".join(re.escape(word) for word in sorted(RESERVED_TASK_IDS)),
               unlike_message="is reserved (a route beside /registry/tasks/{task_id})")
UTILIZATION = Num(0.0, 1.0, description="a fraction of the capacity, in [0, 1]")


def check_id(value: object, field_name: str = "id") -> str:
    """``ID.read``, written out: every new request and task checks its id (the hot path)."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise ValidationError(field_name, ID.message)
    return value


def check_task_id(value: object, field_name: str) -> str:
    """An id (:func:`check_id`) that may name a task: a request's name becomes its task's id."""
    result: str = TASK_ID.read(value, field_name)
    return result


class TaskType(StrEnum):
    JOB = "job"  # finite: runs to completion
    SERVICE = "service"  # runs until stopped


TASK_TYPE = Choice(tuple(t.value for t in TaskType))


def check_task_type(value: object, field_name: str = "type") -> TaskType:
    if not isinstance(value, str) or value not in TaskType.__members__.values():
        raise ValidationError(field_name, "must be 'job' or 'service'")
    return TaskType(value)


def check_int(value: object, field_name: str, minimum: int, maximum: int | None = None) -> int:
    """``Int(minimum, maximum).read``, written out for the hot path (every new request)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field_name, "must be an integer")
    if value < minimum:
        raise ValidationError(field_name, f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ValidationError(field_name, f"must be at most {maximum}")
    return value


def check_fraction_of_one(value: object, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field_name, "must be a number in [0, 1]")
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValidationError(field_name, "must be in [0, 1]")
    return number


@dataclass(frozen=True, slots=True, init=False)
class Request:
    """What a client asks to run; resources are the original (uncut) ones."""

    id: str
    cls: int
    type: TaskType
    cpu_shares: int
    memory: int
    constraints: tuple[Constraint, ...] = ()  # placement constraints (DESIGN 4)
    # A job that saves its progress this often and resumes from it when restarted (DESIGN
    # 3.14): a kill loses only the time since its last checkpoint. 0: it restarts from scratch.
    checkpoint_interval_s: float = 0.0

    # Written by hand (init=False), as the generated one would be: compiled, it makes a
    # request several times faster (see native.loader; tests/unit/test_dataclass_inits.py
    # checks it against the fields).
    def __init__(self, id: str, cls: int, type: TaskType, cpu_shares: int, memory: int,
                 constraints: tuple[Constraint, ...] = (),
                 checkpoint_interval_s: float = 0.0) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "cls", cls)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "cpu_shares", cpu_shares)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "constraints", constraints)
        object.__setattr__(self, "checkpoint_interval_s", checkpoint_interval_s)
        self.__post_init__()

    def __post_init__(self) -> None:
        check_id(self.id)
        check_class(self.cls)
        check_int(self.cpu_shares, "cpu_shares", MIN_CPU_SHARES)
        check_int(self.memory, "memory", 1)
        if self.checkpoint_interval_s != 0.0:
            check_checkpoint(self.checkpoint_interval_s, self.type)


MAX_CHECKPOINT_INTERVAL_S = 86_400.0


def check_checkpoint(value: object, task_type: TaskType,
                     field_name: str = "checkpoint_interval_s") -> float:
    """A checkpoint interval: seconds in (0, 1 day], and only for a job (a service keeps what
    it served: it has no work to lose, DESIGN 3.10)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        0 < value <= MAX_CHECKPOINT_INTERVAL_S
    ):
        raise ValidationError(field_name, f"must be a number of seconds in (0, "
                              f"{MAX_CHECKPOINT_INTERVAL_S:g}]")
    if task_type is not TaskType.JOB:
        raise ValidationError(field_name, "only a job checkpoints (a service loses no work)")
    return float(value)


def checkpoint_of(obj: Mapping[str, object], task_type: TaskType) -> float:
    """``"checkpoint": true`` with ``"checkpoint_interval_s"`` (a job's, DESIGN 3.14) as the
    interval; 0 without them. The trace format's and ``POST /requests``' fields."""
    checkpoint = obj.get("checkpoint", False)
    if not isinstance(checkpoint, bool):
        raise ValidationError("checkpoint", "must be true or false")
    interval = obj.get("checkpoint_interval_s")
    if not checkpoint:
        if interval is not None:
            raise ValidationError("checkpoint_interval_s", 'needs "checkpoint": true')
        return 0.0
    if interval is None:
        raise ValidationError("checkpoint_interval_s", 'is required with "checkpoint": true')
    return check_checkpoint(interval, task_type)


@dataclass(frozen=True, slots=True, init=False)
class Task:
    """A request running on a host, as the Task Registry books it.

    ``cpu_shares`` and ``memory`` are the current (possibly cut) resources; ``cut_received`` is
    the total share of the original resources cut so far. ``started_at`` (this placement),
    ``executed_s``, ``pending_s`` and ``preemptions`` (its earlier runs) feed its QoS metric
    and its time-to-violate once killed (DESIGN 3.7, 3.10).
    """

    id: str
    host: str
    cls: int
    type: TaskType
    cpu_shares: int
    memory: int
    original_cpu_shares: int
    original_memory: int
    cut_received: Fraction = Fraction(0)
    cpu_util: float = 0.0
    memory_util: float = 0.0
    started_at: float = 0.0
    executed_s: float = 0.0
    pending_s: float = 0.0
    preemptions: int = 0  # times it was taken off a host before this placement
    constraints: tuple[Constraint, ...] = ()  # its request's, kept for rescheduling
    checkpoint_interval_s: float = 0.0  # its request's (0: a job restarts from scratch)
    # Suspended (DESIGN 3.14): paused on its host, keeping its memory and booking no CPU
    # (``cpu_shares`` 0); the CPU shares it gets back when it resumes, and since when it is
    # paused. 0: it runs.
    suspended_cpu_shares: int = 0
    suspended_at: float = 0.0

    # By hand (init=False) for compiled construction speed, as Request's.
    def __init__(self, id: str, host: str, cls: int, type: TaskType, cpu_shares: int,
                 memory: int, original_cpu_shares: int, original_memory: int,
                 cut_received: Fraction = Fraction(0), cpu_util: float = 0.0,
                 memory_util: float = 0.0, started_at: float = 0.0, executed_s: float = 0.0,
                 pending_s: float = 0.0, preemptions: int = 0,
                 constraints: tuple[Constraint, ...] = (), checkpoint_interval_s: float = 0.0,
                 suspended_cpu_shares: int = 0, suspended_at: float = 0.0) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "host", host)
        object.__setattr__(self, "cls", cls)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "cpu_shares", cpu_shares)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "original_cpu_shares", original_cpu_shares)
        object.__setattr__(self, "original_memory", original_memory)
        object.__setattr__(self, "cut_received", cut_received)
        object.__setattr__(self, "cpu_util", cpu_util)
        object.__setattr__(self, "memory_util", memory_util)
        object.__setattr__(self, "started_at", started_at)
        object.__setattr__(self, "executed_s", executed_s)
        object.__setattr__(self, "pending_s", pending_s)
        object.__setattr__(self, "preemptions", preemptions)
        object.__setattr__(self, "constraints", constraints)
        object.__setattr__(self, "checkpoint_interval_s", checkpoint_interval_s)
        object.__setattr__(self, "suspended_cpu_shares", suspended_cpu_shares)
        object.__setattr__(self, "suspended_at", suspended_at)

    @property
    def util(self) -> float:
        return total_utilization(self.cpu_util, self.memory_util)

    @property
    def suspended(self) -> bool:
        """Paused on its host (DESIGN 3.14): it keeps its memory and books no CPU."""
        return self.suspended_cpu_shares > 0

    def as_request(self) -> Request:
        """The request that reschedules this task: its own class, its original resources."""
        return Request(self.id, self.cls, self.type, self.original_cpu_shares, self.original_memory,
                       self.constraints, self.checkpoint_interval_s)

    def with_utilization(self, cpu_util: float, memory_util: float) -> Task:
        """This task with another utilization (``dataclasses.replace`` without its field
        lookups: the monitor reports every task's every window)."""
        return Task(self.id, self.host, self.cls, self.type, self.cpu_shares, self.memory,
                    self.original_cpu_shares, self.original_memory, self.cut_received,
                    cpu_util, memory_util, self.started_at, self.executed_s, self.pending_s,
                    self.preemptions, self.constraints, self.checkpoint_interval_s,
                    self.suspended_cpu_shares, self.suspended_at)

    def resized(self, cpu_shares: int, memory: int, cut_received: Fraction) -> Task:
        """This task with other resources and total cut (a cut, or one given back):
        ``dataclasses.replace`` without its field lookups."""
        return Task(self.id, self.host, self.cls, self.type, cpu_shares, memory,
                    self.original_cpu_shares, self.original_memory, cut_received,
                    self.cpu_util, self.memory_util, self.started_at, self.executed_s,
                    self.pending_s, self.preemptions, self.constraints,
                    self.checkpoint_interval_s, self.suspended_cpu_shares, self.suspended_at)


def host_task_order(task: Task) -> tuple[int, float, str]:
    """The order of a host's tasks (ClusterReader.tasks_on): class descending, then
    utilization, then id."""
    return -task.cls, task.util, task.id


@dataclass(frozen=True, slots=True)
class HostSpec:
    """A machine: its id (Swarm node id, or a trace's name for it) and capacity. The registry
    takes hosts of at least MIN_CPU_SHARES; a trace may describe any machine."""

    id: str
    cpu_capacity: int
    memory_capacity: int
    address: str = ""
    labels: tuple[tuple[str, str], ...] = ()  # node labels, for placement constraints

    def __post_init__(self) -> None:
        check_id(self.id)
        check_int(self.cpu_capacity, "cpu_capacity", 1)
        check_int(self.memory_capacity, "memory_capacity", 1)

    def to_json(self) -> dict[str, object]:
        """The form a trace header and the host endpoints share (an address and labels when it
        has them)."""
        out: dict[str, object] = {"id": self.id, "cpu_capacity": self.cpu_capacity,
                                  "memory_capacity": self.memory_capacity}
        if self.address:
            out["address"] = self.address
        if self.labels:
            out["labels"] = dict(self.labels)
        return out

    def facts(self) -> NodeFacts:
        """What a constraint can ask about this host when nothing but the spec is known (a
        trace's host): its id as hostname, Linux on x86_64, its labels."""
        return NodeFacts(self.id, self.id, labels=self.labels)


MAX_LABELS = 64


def check_labels(raw: object, field_name: str = "labels") -> tuple[tuple[str, str], ...]:
    """Node labels as ``{"name": "value"}`` (strings, at most MAX_LABELS), sorted by name."""
    if not isinstance(raw, dict):
        raise ValidationError(field_name, "must be an object of label names to values")
    if len(raw) > MAX_LABELS:
        raise ValidationError(field_name, f"at most {MAX_LABELS} labels")
    for name, value in raw.items():
        if not isinstance(name, str) or not name or len(name) > 128:
            raise ValidationError(field_name, "label names must be 1-128 characters")
        if not isinstance(value, str) or len(value) > 256:
            raise ValidationError(f"{field_name}.{name}", "must be a string of <= 256 characters")
    return tuple(sorted(raw.items()))


@dataclass(frozen=True, slots=True, init=False)
class HostView:
    """A read-only snapshot of one host, as the scheduler sees it.

    ``tally`` holds the per-class sums a store keeps up to date (see domain.tally); allocation,
    class and the room for every pass derive from it in O(1). ``cpu_limits[c-1]`` is the largest
    CPU allocation allowed when the host class is c (floor(capacity x M(c))), same for memory.
    """

    id: str
    cpu_capacity: int
    memory_capacity: int
    cpu_util: float
    memory_util: float
    region: Region
    tally: tuple[int, ...]
    cpu_limits: tuple[int, ...]
    memory_limits: tuple[int, ...]
    address: str = ""
    # When the utilization was measured (the monitor's clock; None: never), and the load
    # windows the monitor sent with it (DESIGN 3.12, 5).
    util_at: float | None = None
    windows: LoadWindows | None = None
    # The room of every pass (domain.capacity.ROOM_KEYS order), derived from the fields above
    # whenever a view is made, so a changed copy can never carry stale rooms.
    rooms: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    # The lowest class among the running tasks (None: an empty host), derived from the tally
    # with the rooms: the passes read it for every host they judge.
    host_class: int | None = field(init=False, repr=False, compare=False)

    # By hand (init=False) for compiled construction speed, as Request's.
    def __init__(self, id: str, cpu_capacity: int, memory_capacity: int, cpu_util: float,
                 memory_util: float, region: Region, tally: tuple[int, ...],
                 cpu_limits: tuple[int, ...], memory_limits: tuple[int, ...],
                 address: str = "", util_at: float | None = None,
                 windows: LoadWindows | None = None) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "cpu_capacity", cpu_capacity)
        object.__setattr__(self, "memory_capacity", memory_capacity)
        object.__setattr__(self, "cpu_util", cpu_util)
        object.__setattr__(self, "memory_util", memory_util)
        object.__setattr__(self, "region", region)
        object.__setattr__(self, "tally", tally)
        object.__setattr__(self, "cpu_limits", cpu_limits)
        object.__setattr__(self, "memory_limits", memory_limits)
        object.__setattr__(self, "address", address)
        object.__setattr__(self, "util_at", util_at)
        object.__setattr__(self, "windows", windows)
        self.__post_init__()

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "rooms",
            compute_rooms(self.tally, self.cpu_capacity, self.memory_capacity, self.cpu_limits,
                          self.memory_limits),
        )
        object.__setattr__(self, "host_class", layout.host_class(self.tally))

    @property
    def util(self) -> float:
        return total_utilization(self.cpu_util, self.memory_util)

    def with_tally(self, tally: tuple[int, ...]) -> HostView:
        """This host with other books (``dataclasses.replace``, without its field lookups:
        a store makes one on every change)."""
        return HostView(self.id, self.cpu_capacity, self.memory_capacity, self.cpu_util,
                        self.memory_util, self.region, tally, self.cpu_limits,
                        self.memory_limits, self.address, self.util_at, self.windows)

    def with_utilization(
        self, cpu_util: float, memory_util: float, region: Region,
        util_at: float | None = None, windows: LoadWindows | None = None,
    ) -> HostView:
        """This host with another utilization and the region it puts it in; its measurement
        time and windows when given, else the ones it had."""
        return HostView(self.id, self.cpu_capacity, self.memory_capacity, cpu_util,
                        memory_util, region, self.tally, self.cpu_limits, self.memory_limits,
                        self.address, self.util_at if util_at is None else util_at,
                        self.windows if windows is None else windows)

    @property
    def cpu_allocated(self) -> int:
        return layout.cpu_allocated(self.tally)

    @property
    def memory_allocated(self) -> int:
        return layout.memory_allocated(self.tally)

    @property
    def task_count(self) -> int:
        return layout.task_count(self.tally)

    @property
    def overbooking_factor(self) -> float:
        return max(
            self.cpu_allocated / self.cpu_capacity,
            self.memory_allocated / self.memory_capacity,
        )
