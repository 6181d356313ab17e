"""What a load-aware policy sees: measured utilization, plus what it cannot see yet (DESIGN 3.12).

A host's utilization is measured by its monitor and dated (``HostView.util_at``). A task placed
after that moment is invisible to it until the next update: the Trimaran KEP's "bad metrics".
:class:`RecentPlacements` remembers, per host, the tasks placed in the last ``stale_after_s``
seconds (the KEP's PostBind state); :class:`LoadView` wraps a store so that every host a policy
reads carries its *expected* utilization:

* measured less than ``stale_after_s`` ago: the measurement, plus the predicted use of the tasks
  placed on it since (the task's own measured use where the Task Registry has one, else its
  allocation times ``predict_multiplier``);
* older, or never measured (a monitor that died, or no monitor stream at all): its allocation
  (best fit by allocation).

The same arithmetic shifts the load windows' means (``lvrb``); a host judged by allocation has a
single window of its allocation with no variation. Pure: the caller hands in ``now``.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from domain.classes import ClassTable
from domain.load import STALE_AFTER_S, WINDOW_SPANS_S, LoadWindow, LoadWindows, is_stale
from domain.model import HostView, Task
from domain.regions import RegionBounds
from domain.store import ClusterReader, Segment

TaskLookup = Callable[[str], Task | None]  # a store's ``task``


@dataclass(frozen=True)
class Freshness:
    """When a measurement is too old, and how a task nobody measured yet is predicted."""

    stale_after_s: float = STALE_AFTER_S
    predict_multiplier: float = 1.0


@dataclass(frozen=True, slots=True)
class Placement:
    at: float
    host: str
    task_id: str


class RecentPlacements:
    """Tasks placed in the last ``horizon_s`` seconds, per host, oldest first."""

    __slots__ = ("_by_host", "_order", "horizon_s")

    def __init__(self, horizon_s: float = STALE_AFTER_S) -> None:
        self.horizon_s = horizon_s
        self._order: deque[Placement] = deque()
        self._by_host: dict[str, deque[Placement]] = {}

    def placed(self, host: str, task_id: str, at: float) -> None:
        placement = Placement(at, host, task_id)
        self._order.append(placement)
        self._by_host.setdefault(host, deque()).append(placement)
        self._forget_before(at - self.horizon_s)

    def hosts(self) -> list[str]:
        return list(self._by_host)

    def since(self, host: str, after: float) -> list[Placement]:
        """The placements on ``host`` strictly after ``after``."""
        return [p for p in self._by_host.get(host, ()) if p.at > after]

    def __len__(self) -> int:
        return len(self._order)

    def _forget_before(self, limit: float) -> None:
        order = self._order
        while order and order[0].at < limit:
            old = order.popleft()
            on_host = self._by_host[old.host]
            on_host.popleft()  # per host, the same order
            if not on_host:
                del self._by_host[old.host]


def predicted_use(task: Task, multiplier: float) -> tuple[float, float]:
    """A task's expected use (CPU shares, bytes): measured where the Task Registry has a value
    (a running container always uses some memory), else its allocation x ``multiplier``."""
    if task.cpu_util > 0 or task.memory_util > 0:
        return task.cpu_util * task.cpu_shares, task.memory_util * task.memory
    return task.cpu_shares * multiplier, task.memory * multiplier


@dataclass(frozen=True, slots=True)
class Basis:
    """How a host's expected utilization was made, for ``--explain``."""

    by_allocation: bool
    age_s: float | None  # of the measurement; None: never measured
    predicted: int = 0  # recent tasks added

    def describe(self) -> str:
        age = "never measured" if self.age_s is None else f"measured {self.age_s:.0f} s ago"
        if self.by_allocation:
            return f"by allocation ({age})"
        if self.predicted:
            return f"{age}, + {self.predicted} recent task(s) predicted"
        return age


def allocation_windows(cpu: float, memory: float) -> LoadWindows:
    return LoadWindows(tuple(LoadWindow(span, cpu, 0.0, memory, 0.0, 1)
                             for span in WINDOW_SPANS_S))


def _shift(windows: LoadWindows, cpu: float, memory: float) -> LoadWindows:
    return LoadWindows(tuple(
        LoadWindow(w.span_s, w.cpu_mean + cpu, w.cpu_std, w.memory_mean + memory, w.memory_std,
                   w.samples)
        for w in windows.windows
    ))


class LoadView:
    """A :class:`ClusterReader` whose hosts carry their expected utilization at ``now``."""

    def __init__(
        self, inner: ClusterReader, now: float, recent: RecentPlacements, freshness: Freshness,
        task_of: TaskLookup,
    ) -> None:
        self._inner = inner
        self.now = now
        self._recent = recent
        self._freshness = freshness
        self._task_of = task_of
        self._changed: dict[str, HostView] | None = None
        self._basis: dict[str, Basis] = {}

    @property
    def classes(self) -> ClassTable:
        return self._inner.classes

    @property
    def bounds(self) -> RegionBounds:
        return self._inner.bounds

    def expected(self, host: HostView) -> tuple[HostView, Basis]:
        """``host`` with its expected utilization, and how it was made."""
        now, fresh = self.now, self._freshness
        age = None if host.util_at is None else max(0.0, now - host.util_at)
        if is_stale(host.util_at, now, fresh.stale_after_s):
            cpu = host.cpu_allocated / host.cpu_capacity
            memory = host.memory_allocated / host.memory_capacity
            view = host.with_utilization(cpu, memory, self.bounds.classify(max(cpu, memory)))
            return _with_windows(view, allocation_windows(cpu, memory)), Basis(True, age)
        assert host.util_at is not None
        extra_cpu = extra_memory = 0.0
        count = 0
        for placement in self._recent.since(host.id, host.util_at):
            task = self._task_of(placement.task_id)
            if task is None or task.host != host.id:
                continue  # ended, or moved since
            cpu_use, memory_use = predicted_use(task, fresh.predict_multiplier)
            extra_cpu += cpu_use
            extra_memory += memory_use
            count += 1
        if not count:
            return host, Basis(False, age)
        add_cpu = extra_cpu / host.cpu_capacity
        add_memory = extra_memory / host.memory_capacity
        cpu, memory = host.cpu_util + add_cpu, host.memory_util + add_memory
        view = host.with_utilization(cpu, memory, self.bounds.classify(max(cpu, memory)))
        if host.windows is not None:
            view = _with_windows(view, _shift(host.windows, add_cpu, add_memory))
        return view, Basis(False, age, count)

    def basis(self, host_id: str) -> Basis | None:
        """How the host's expected utilization was made (after it was read), for notes."""
        return self._basis.get(host_id)

    def _adjusted(self) -> dict[str, HostView]:
        """The hosts whose expected utilization differs from the measurement, computed once."""
        if self._changed is None:
            changed: dict[str, HostView] = {}
            for host in self._inner.all_hosts():
                view, basis = self.expected(host)
                self._basis[host.id] = basis
                if view is not host:
                    changed[host.id] = view
            self._changed = changed
        return self._changed

    def all_hosts(self) -> Iterator[HostView]:
        changed = self._adjusted()
        for host in self._inner.all_hosts():
            yield changed.get(host.id, host)

    def host(self, host_id: str) -> HostView:
        return self._adjusted().get(host_id) or self._inner.host(host_id)

    def tasks_on(self, host_id: str) -> list[Task]:
        return self._inner.tasks_on(host_id)

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        """Each segment in (U, id) order, with every host where its expected utilization puts
        it: the store's list without the adjusted hosts, merged with those that now belong."""
        changed = self._adjusted()
        for position, segment in enumerate(segments):
            moved = sorted(
                (h for h in changed.values()
                 if h.region is segment.region and h.host_class == segment.host_class),
                key=_order_key, reverse=not segment.ascending,
            )
            kept = _unchanged(self._inner.candidates([segment]), changed)
            for host in heapq.merge(kept, moved, key=_order_key,
                                    reverse=not segment.ascending):
                yield position, host


def _unchanged(
    candidates: Iterator[tuple[int, HostView]], changed: Mapping[str, HostView]
) -> Iterator[HostView]:
    """The hosts of ``candidates`` not in ``changed``, read as the walk goes (a generator
    function: mypyc compiles a generator expression as a list, which would read the whole
    segment before its first host)."""
    for _, host in candidates:
        if host.id not in changed:
            yield host


def _order_key(host: HostView) -> tuple[float, str]:
    return host.util, host.id


def _with_windows(view: HostView, windows: LoadWindows) -> HostView:
    return HostView(view.id, view.cpu_capacity, view.memory_capacity, view.cpu_util,
                    view.memory_util, view.region, view.tally, view.cpu_limits,
                    view.memory_limits, view.address, view.util_at, windows)


def basis_note(view: ClusterReader, host_id: str) -> str:
    """`` (measured 12 s ago, + 1 recent task(s) predicted)`` for a host read through a
    :class:`LoadView`; empty otherwise."""
    basis = view.basis(host_id) if isinstance(view, LoadView) else None
    return f" ({basis.describe()})" if basis is not None else ""
