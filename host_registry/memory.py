"""In-memory Host and Task Registry: the store the simulator, ``greenswarm decide`` and the
tests use, with the same behaviour as the Redis store.

Hosts sit in one sorted list per (region, class) — ``None`` is the list of empty hosts — keyed
by (U, host id) ascending, so a descending walk is ``reversed``. To answer "nothing fits" fast
at 10,000 hosts, each list also knows, per room key (domain.capacity), the largest room of its
hosts (kept exact in heaps): a list that cannot hold the request is skipped without being read.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Sequence
from dataclasses import replace

from domain.booking import book
from domain.capacity import ROOM_INDEX, ROOM_KEYS
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
    """One (region, class) list: hosts sorted by (U, id), and the exact largest room per key.

    The largest CPU and memory room of the list's hosts, for every room key, sit in max-heaps
    with lazy deletion: an entry belongs to a view object, and once the host has a newer view
    (or left the list) the entry is dropped when it reaches the top. The heaps are rebuilt
    when they grow well past the list's size.
    """

    __slots__ = ("entries", "heaps", "pushed")

    def __init__(self) -> None:
        self.entries: list[tuple[float, str]] = []
        # heaps[key index][0 for CPU, 1 for memory]: (-room, sequence, host id, view)
        self.heaps: list[tuple[list[_HeapItem], list[_HeapItem]]] = [([], []) for _ in ROOM_KEYS]
        self.pushed = 0

    def insert(self, view: HostView, views: dict[str, HostView]) -> None:
        bisect.insort(self.entries, (view.util, view.id))
        if self.pushed > 4 * len(self.entries) + 64:
            self._rebuild(views)
        else:
            self._push(view)

    def remove(self, view: HostView) -> None:
        entry = (view.util, view.id)
        index = bisect.bisect_left(self.entries, entry)
        if index == len(self.entries) or self.entries[index] != entry:
            raise RuntimeError(f"host {view.id} missing from its list")  # a broken invariant
        del self.entries[index]

    def largest_room(self, index: int, views: dict[str, HostView]) -> tuple[int, int]:
        """The largest CPU room and the largest memory room (maybe of two hosts) for a key."""
        cpu_heap, memory_heap = self.heaps[index]
        return _top(cpu_heap, views), _top(memory_heap, views)

    def _push(self, view: HostView) -> None:
        self.pushed += 1
        for (cpu_heap, memory_heap), (cpu, memory) in zip(self.heaps, view.rooms, strict=True):
            heapq.heappush(cpu_heap, (-cpu, self.pushed, view.id, view))
            heapq.heappush(memory_heap, (-memory, self.pushed, view.id, view))

    def _rebuild(self, views: dict[str, HostView]) -> None:
        self.heaps = [([], []) for _ in ROOM_KEYS]
        self.pushed = 0
        for _, host_id in self.entries:
            self._push(views[host_id])


_HeapItem = tuple[int, int, str, HostView]


def _top(heap: list[_HeapItem], views: dict[str, HostView]) -> int:
    while heap:
        negative, _, host_id, view = heap[0]
        if views.get(host_id) is view:
            return -negative
        heapq.heappop(heap)  # a replaced view, or a host that left the list
    return -1


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

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        views, groups = self._views, self._groups
        for position, segment in enumerate(segments):
            group = groups.get((segment.region, segment.host_class))
            if group is None or not group.entries:
                continue
            entries = group.entries if segment.ascending else reversed(group.entries)
            room_key = segment.room_key
            if room_key is None:
                for _, host_id in entries:
                    yield position, views[host_id]
                continue
            need_cpu, need_memory = segment.need
            index = ROOM_INDEX[room_key]
            best_cpu, best_memory = group.largest_room(index, views)
            if best_cpu < need_cpu or best_memory < need_memory:
                continue  # no host of this list can take it: skipped without reading it
            for _, host_id in entries:
                view = views[host_id]
                cpu, memory = view.rooms[index]
                if cpu >= need_cpu and memory >= need_memory:
                    yield position, view

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

    def is_pending(self, request_id: str) -> bool:
        return request_id in self._pending

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
        self._group(new).insert(new, self._views)
