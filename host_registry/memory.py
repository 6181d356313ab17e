"""In-memory Host and Task Registry: the store the simulator, ``greenswarm decide`` and the
tests use, with the same behaviour as the Redis store.

Hosts sit in one sorted list per (region, class) — ``None`` is the list of empty hosts — keyed
by (U, host id) ascending, so a descending walk is ``reversed``. To answer "nothing fits" fast
at 10,000 hosts, each list keeps, per room key (domain.capacity), an upper bound of the room of
its hosts: raised whenever a host enters or changes, made exact again whenever a walk visits
the whole list. A list whose bound is below the request is skipped without being read.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import replace

from domain.booking import book
from domain.capacity import RoomKey, room
from domain.classes import ClassTable
from domain.decision import Decision
from domain.errors import ConflictError, NotFoundError
from domain.model import HostSpec, HostView, Task
from domain.pending import PendingEntry
from domain.regions import Region, RegionBounds
from domain.store import Segment
from domain.tally import EMPTY_TALLY, combine, contribution

GroupKey = tuple[Region, int | None]


class _Group:
    """One (region, class) list: sorted entries plus room bounds."""

    __slots__ = ("bounds", "entries", "version")

    def __init__(self) -> None:
        self.entries: list[tuple[float, str]] = []
        self.bounds: dict[RoomKey, tuple[int, int]] = {}
        self.version = 0

    def insert(self, view: HostView) -> None:
        bisect.insort(self.entries, (view.util, view.id))
        self.version += 1
        for key, (bound_cpu, bound_memory) in self.bounds.items():
            cpu, memory = room(view, key)
            if cpu > bound_cpu or memory > bound_memory:
                self.bounds[key] = (max(cpu, bound_cpu), max(memory, bound_memory))

    def remove(self, view: HostView) -> None:
        entry = (view.util, view.id)
        index = bisect.bisect_left(self.entries, entry)
        if index == len(self.entries) or self.entries[index] != entry:
            raise RuntimeError(f"host {view.id} missing from its list")  # a broken invariant
        del self.entries[index]
        self.version += 1


class MemoryStore:
    """Hosts, tasks and the pending queue in process memory (implements ClusterStore)."""

    def __init__(
        self, classes: ClassTable | None = None, bounds: RegionBounds | None = None
    ) -> None:
        self._classes = classes or ClassTable()
        self._bounds = bounds or RegionBounds()
        self._views: dict[str, HostView] = {}
        self._groups: dict[GroupKey, _Group] = {}
        self._tasks: dict[str, Task] = {}
        self._host_tasks: dict[str, dict[str, Task]] = {}
        self._pending: dict[str, PendingEntry] = {}
        self._pending_order: list[tuple[tuple[float, int, str], str]] = []

    # -- reading ----------------------------------------------------------------------------

    @property
    def classes(self) -> ClassTable:
        return self._classes

    @property
    def bounds(self) -> RegionBounds:
        return self._bounds

    def hosts(
        self,
        region: Region,
        host_class: int | None,
        *,
        ascending: bool,
        room_key: RoomKey | None = None,
        need: tuple[int, int] = (0, 0),
    ) -> Iterator[HostView]:
        group = self._groups.get((region, host_class))
        if group is None or not group.entries:
            return
        need_cpu, need_memory = need
        if room_key is not None:
            bound = group.bounds.get(room_key)
            if bound is not None and (bound[0] < need_cpu or bound[1] < need_memory):
                return
        version = group.version
        best_cpu = best_memory = -1
        entries = group.entries if ascending else reversed(group.entries)
        views = self._views
        for _, host_id in entries:
            view = views[host_id]
            if room_key is not None:
                cpu, memory = room(view, room_key)
                best_cpu = max(best_cpu, cpu)
                best_memory = max(best_memory, memory)
                if cpu < need_cpu or memory < need_memory:
                    continue
            yield view
        if room_key is not None and group.version == version:
            # The whole list was read and nothing changed meanwhile: the bound is now exact.
            group.bounds[room_key] = (best_cpu, best_memory)

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        for index, segment in enumerate(segments):
            for view in self.hosts(
                segment.region,
                segment.host_class,
                ascending=segment.ascending,
                room_key=segment.room_key,
                need=segment.need,
            ):
                yield index, view

    def all_hosts(self) -> Iterator[HostView]:
        for host_id in sorted(self._views):
            yield self._views[host_id]

    def host(self, host_id: str) -> HostView:
        try:
            return self._views[host_id]
        except KeyError:
            raise NotFoundError(f"no host {host_id!r}") from None

    def tasks_on(self, host_id: str) -> list[Task]:
        tasks = self._host_tasks.get(host_id)
        if tasks is None:
            raise NotFoundError(f"no host {host_id!r}")
        return sorted(tasks.values(), key=lambda t: (-t.cls, t.util, t.id))

    def task(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def tasks(self) -> list[Task]:
        return sorted(self._tasks.values(), key=lambda t: t.id)

    def group_members(self, region: Region, host_class: int | None) -> list[str]:
        """Host ids of one list, ascending: for consistency checks."""
        group = self._groups.get((region, host_class))
        return [host_id for _, host_id in group.entries] if group else []

    # -- hosts ------------------------------------------------------------------------------

    def add_host(self, spec: HostSpec, cpu_util: float = 0.0, memory_util: float = 0.0) -> HostView:
        old = self._views.get(spec.id)
        tally = old.tally if old is not None else EMPTY_TALLY
        view = HostView(
            id=spec.id,
            cpu_capacity=spec.cpu_capacity,
            memory_capacity=spec.memory_capacity,
            cpu_util=cpu_util if old is None else old.cpu_util,
            memory_util=memory_util if old is None else old.memory_util,
            region=self._bounds.classify(max(cpu_util, memory_util)) if old is None else old.region,
            tally=tally,
            cpu_limits=tuple(self._classes.limit(spec.cpu_capacity, c) for c in (1, 2, 3, 4)),
            memory_limits=tuple(self._classes.limit(spec.memory_capacity, c) for c in (1, 2, 3, 4)),
            address=spec.address,
        )
        if old is None:
            self._host_tasks[spec.id] = {}
        self._replace_view(old, view)
        return view

    def remove_host(self, host_id: str) -> list[Task]:
        view = self.host(host_id)
        tasks = sorted(self._host_tasks.pop(host_id).values(), key=lambda t: t.id)
        for task in tasks:
            del self._tasks[task.id]
        self._group(view).remove(view)
        del self._views[host_id]
        return tasks

    def update_host_utilization(
        self, host_id: str, cpu_util: float, memory_util: float
    ) -> HostView:
        old = self.host(host_id)
        util = max(cpu_util, memory_util)
        view = replace(
            old, cpu_util=cpu_util, memory_util=memory_util, region=self._bounds.classify(util)
        )
        self._replace_view(old, view)
        return view

    # -- tasks ------------------------------------------------------------------------------

    def apply(
        self, decision: Decision, now: float, executed_s: float = 0.0, pending_s: float = 0.0
    ) -> list[Task]:
        if decision.request.id in self._tasks:
            raise ConflictError(f"task {decision.request.id!r} is already running")
        host = self.host(decision.host or "")
        on_host = self._host_tasks[host.id]
        booking = book(decision, host, on_host, self._classes, now, executed_s, pending_s)
        for victim in booking.killed:
            del on_host[victim.id], self._tasks[victim.id]
        for task in (*booking.cut, booking.placed):
            on_host[task.id] = self._tasks[task.id] = task
        self._replace_view(host, booking.host)
        return list(booking.killed)

    def load_task(self, task: Task) -> None:
        """Book a task exactly as given (restoring state, building scenarios)."""
        if task.id in self._tasks:
            raise ConflictError(f"task {task.id!r} is already booked")
        host = self.host(task.host)
        self._host_tasks[host.id][task.id] = self._tasks[task.id] = task
        tally = combine(host.tally, contribution(task, self._classes))
        self._replace_view(host, replace(host, tally=tally))

    def resize_task(self, task_id: str, cpu_shares: int, memory: int) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}")
        resized = replace(task, cpu_shares=cpu_shares, memory=memory)
        host = self._views[task.host]
        tally = combine(host.tally, contribution(task, self._classes), -1)
        tally = combine(tally, contribution(resized, self._classes))
        self._tasks[task_id] = self._host_tasks[task.host][task_id] = resized
        self._replace_view(host, replace(host, tally=tally))
        return resized

    def end_task(self, task_id: str) -> Task:
        task = self._tasks.pop(task_id, None)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}")
        del self._host_tasks[task.host][task_id]
        host = self._views[task.host]
        tally = combine(host.tally, contribution(task, self._classes), -1)
        self._replace_view(host, replace(host, tally=tally))
        return task

    def update_task_utilization(self, task_id: str, cpu_util: float, memory_util: float) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}")
        updated = task.with_utilization(cpu_util, memory_util)
        self._tasks[task_id] = self._host_tasks[task.host][task_id] = updated
        return updated

    # -- pending queue ----------------------------------------------------------------------

    def push_pending(self, entry: PendingEntry) -> None:
        self.remove_pending(entry.request.id)
        self._pending[entry.request.id] = entry
        bisect.insort(self._pending_order, (entry.order_key, entry.request.id))

    def pending(self) -> list[PendingEntry]:
        return [self._pending[request_id] for _, request_id in self._pending_order]

    def remove_pending(self, request_id: str) -> bool:
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return False
        self._pending_order.remove((entry.order_key, request_id))
        return True

    # -- internals --------------------------------------------------------------------------

    def _group(self, view: HostView) -> _Group:
        key = (view.region, view.host_class)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
        return group

    def _replace_view(self, old: HostView | None, new: HostView) -> None:
        if old is not None:
            self._group(old).remove(old)
        self._views[new.id] = new
        self._group(new).insert(new)
