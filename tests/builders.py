"""Compact builders for scheduler tests: hosts of 1200 shares and 1200 bytes by default, so the
class limits are round numbers (M = 1, 7/6, 4/3, 3/2 -> 1200, 1400, 1600, 1800)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from hypothesis import assume
from hypothesis import strategies as st

from domain.classes import ClassTable
from domain.model import HostSpec, Request, Task, TaskType
from domain.regions import RegionBounds
from domain.store import ClusterStore
from host_registry.memory import MemoryStore
from scheduler.service import Outcome

JOB, SERVICE = TaskType.JOB, TaskType.SERVICE


@dataclass
class T:
    id: str
    cls: int
    cpu: int = 100
    mem: int = 100
    type: TaskType = JOB
    util: float = 0.0
    orig_cpu: int | None = None
    orig_mem: int | None = None
    cut: Fraction = Fraction(0)


HOST_SIZE = 1200  # H's default CPU shares and memory bytes


@dataclass
class H:
    id: str
    util: float = 0.0
    tasks: list[T] = field(default_factory=list)
    cpu: int = HOST_SIZE
    mem: int = HOST_SIZE


def build(
    *hosts: H,
    classes: ClassTable | None = None,
    bounds: RegionBounds | None = None,
    store: ClusterStore | None = None,
) -> ClusterStore:
    """Load ``hosts`` into ``store`` (a new MemoryStore unless one is given)."""
    store = store if store is not None else MemoryStore(classes, bounds)
    for h in hosts:
        store.add_host(HostSpec(h.id, h.cpu, h.mem), h.util, h.util)
        for t in h.tasks:
            store.load_task(
                Task(
                    id=t.id,
                    host=h.id,
                    cls=t.cls,
                    type=t.type,
                    cpu_shares=t.cpu,
                    memory=t.mem,
                    original_cpu_shares=t.orig_cpu if t.orig_cpu is not None else t.cpu,
                    original_memory=t.orig_mem if t.orig_mem is not None else t.mem,
                    cut_received=t.cut,
                    cpu_util=t.util,
                    memory_util=t.util,
                )
            )
    return store


def req(cls: int, cpu: int = 100, mem: int = 100, type: TaskType = JOB, id: str = "new") -> Request:
    return Request(id, cls, type, cpu, mem)


def outcome_key(outcome: Outcome) -> object:
    """What an outcome decided, comparable between two schedulers (differential tests)."""
    return ([(d.to_dict(), d.new_class) for d in outcome.applied],
            [t.id for t in outcome.killed],
            [(e.request.id, e.reason, e.deadline) for e in outcome.queued],
            [d.to_dict() for d in outcome.refused],
            list(outcome.restored),
            [(t.id, t.host, t.suspended_cpu_shares) for t in outcome.suspended],
            [(t.id, t.host, t.cpu_shares, t.started_at, t.pending_s) for t in outcome.resumed],
            None if outcome.admission is None else outcome.admission.to_dict())


# One host's tasks drawn by hypothesis (property tests of a single host's rooms and passes).
task_strategy = st.builds(
    T,
    id=st.just(""),
    cls=st.integers(1, 4),
    cpu=st.integers(10, 700),
    mem=st.integers(10, 700),
    type=st.sampled_from([JOB, SERVICE]),
    util=st.floats(0.0, 1.0),
    cut=st.sampled_from([Fraction(0), Fraction(1, 6), Fraction(1, 3)]),
)


def host_tasks(tasks: list[T], classes: ClassTable) -> list[T]:
    """``tasks`` named t0, t1, ..., each cut at most by its class's tolerance, on a host of the
    default size within the limit of its class, as every store keeps one (else: assume away)."""
    named = [replace(t, id=f"t{i}", cut=min(t.cut, classes.tolerance(t.cls)))
             for i, t in enumerate(tasks)]
    if named:
        limit_class = min(t.cls for t in named)
        limit = classes.limit(HOST_SIZE, limit_class)
        assume(sum(t.cpu for t in named) <= limit and sum(t.mem for t in named) <= limit)
    return named
