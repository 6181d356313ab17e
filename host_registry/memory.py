"""In-memory Host and Task Registry: the store the simulator, ``greenswarm decide`` and the
tests use, with the same behaviour as the Redis store.

Hosts sit in one sorted list per (region, class) — ``None`` is the list of empty hosts — keyed
by (U, host id) ascending, so a descending walk is ``reversed``. To answer "nothing fits" fast
at 10,000 hosts, and to find the few hosts with room among many full ones, each list is cut
into blocks that know, per room key (domain.capacity), the largest room of their hosts: a
block or a whole list that cannot hold the request is skipped without reading its hosts.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterator, Sequence
from dataclasses import replace
from typing import Protocol

from domain.booking import book
from domain.books import contribution
from domain.classes import ClassTable
from domain.decision import Decision
from domain.errors import ConflictError, NotFoundError
from domain.load import LoadWindows
from domain.model import HostSpec, HostView, Task, host_task_order
from domain.pending import PendingEntry
from domain.preemption import resume_on
from domain.regions import Region, RegionBounds
from domain.restore import TaskRestore, apply_restores, plan_restores
from domain.rooms import ROOM_INDEX, ROOM_KEYS
from domain.slo import SloTable
from domain.store import Segment
from domain.tally import EMPTY_TALLY, combine

GroupKey = tuple[Region, int | None]


# Hosts per block of a list (see _Group); a block is split at twice this size.
BLOCK_SIZE = 32

# The Rust implementation of a list (native/rust/src/group.rs, DESIGN 10) when this process
# runs the native core (importable only then: see domain.rooms); _Group stays the reference
# (tests/unit/test_native_group.py compares them).
try:
    from greenswarm_core import HostGroup as NativeGroup
except ImportError:
    NativeGroup = None  # type: ignore[assignment,misc]


class HostList(Protocol):
    """One (region, class) list of hosts: _Group, or the Rust core's HostGroup."""

    @property
    def size(self) -> int: ...

    def insert(self, view: HostView) -> None: ...

    def remove(self, view: HostView) -> None: ...

    def walk(
        self, index: int, need_cpu: int, need_memory: int, ascending: bool
    ) -> Iterator[HostView] | None: ...

    def views(self, ascending: bool) -> list[HostView]: ...

    def host_ids(self) -> list[str]: ...

    def block_sizes(self) -> list[int]: ...


def groups_implementation() -> str:
    """``rust`` or ``python``: which lists a new store keeps its hosts in."""
    return "python" if NativeGroup is None else "rust"


def _new_group() -> HostList:
    if NativeGroup is not None:
        return NativeGroup(BLOCK_SIZE)
    return _Group()


class _Group:
    """One (region, class) list: hosts sorted by (U, id), in blocks that know their largest room.

    The list is cut into consecutive blocks of at most 2 x BLOCK_SIZE entries (a block that
    falls below BLOCK_SIZE / 2 joins a neighbour when both fit in BLOCK_SIZE). For every room
    key a block caches the largest CPU room and the largest memory room of its hosts (maybe of
    two hosts), and so does the whole list. A host that joins can only raise them; one that
    leaves forgets those it may have held, which are recomputed, per key, when next asked. A
    walk skips a list whose largest room is below the need at once, then every such block, and
    reads the hosts of the others only. A walk ends when the list changes under it (a host
    joins or leaves between two of its hosts).

    The reference of the Rust core's ``greenswarm_core.HostGroup`` (native/rust/src/group.rs),
    which the store uses instead when this process runs the native core.
    """

    __slots__ = ("blocks", "firsts", "rooms", "size", "top", "version")

    def __init__(self) -> None:
        self.blocks: list[list[_Entry]] = []
        self.firsts: list[_Entry] = []  # the first entry of each block, for bisection
        # rooms[block][key index]: the block's (largest CPU room, largest memory room), or None
        self.rooms: list[list[tuple[int, int] | None]] = []
        self.top: list[tuple[int, int] | None] = [None] * len(ROOM_KEYS)  # the same, whole list
        self.size = 0
        self.version = 0  # changed by every insert and removal: a walk that began before ends

    def insert(self, view: HostView) -> None:
        entry = (view.util, view.id, view)
        self.size += 1
        self.version += 1
        _grow(self.top, view.rooms)
        if not self.blocks:
            self.blocks.append([entry])
            self.firsts.append(entry)
            self.rooms.append([None] * len(ROOM_KEYS))
            return
        b = max(0, bisect.bisect_right(self.firsts, entry) - 1)
        block = self.blocks[b]
        bisect.insort(block, entry)
        self.firsts[b] = block[0]
        if len(block) > 2 * BLOCK_SIZE:
            self.blocks[b : b + 1] = [block[:BLOCK_SIZE], block[BLOCK_SIZE:]]
            self.firsts[b : b + 1] = [block[0], block[BLOCK_SIZE]]
            self.rooms[b : b + 1] = [[None] * len(ROOM_KEYS), [None] * len(ROOM_KEYS)]
        else:
            _grow(self.rooms[b], view.rooms)

    def remove(self, view: HostView) -> None:
        entry = (view.util, view.id, view)
        b = bisect.bisect_right(self.firsts, entry) - 1
        block = self.blocks[b] if b >= 0 else []
        index = bisect.bisect_left(block, entry)
        if index == len(block) or block[index][2] is not view:
            raise RuntimeError(f"host {view.id} missing from its list")  # a broken invariant
        del block[index]
        self.size -= 1
        self.version += 1
        _shrink(self.top, view.rooms)
        if not block:
            del self.blocks[b], self.firsts[b], self.rooms[b]
            return
        self.firsts[b] = block[0]
        _shrink(self.rooms[b], view.rooms)
        if len(block) < BLOCK_SIZE // 2:  # merge a small block into a neighbour that has room
            for left in (b, b - 1):
                if 0 <= left < len(self.blocks) - 1 and (
                    len(self.blocks[left]) + len(self.blocks[left + 1]) <= BLOCK_SIZE
                ):
                    self.blocks[left : left + 2] = [self.blocks[left] + self.blocks[left + 1]]
                    del self.firsts[left + 1], self.rooms[left + 1]
                    self.rooms[left] = [None] * len(ROOM_KEYS)
                    break

    def host_ids(self) -> list[str]:
        return [host_id for block in self.blocks for _, host_id, _ in block]

    def views(self, ascending: bool) -> list[HostView]:
        """Every host of the list in order (or reversed)."""
        views = [view for block in self.blocks for _, _, view in block]
        if not ascending:
            views.reverse()
        return views

    def block_sizes(self) -> list[int]:
        return [len(block) for block in self.blocks]

    def walk(
        self, index: int, need_cpu: int, need_memory: int, ascending: bool
    ) -> Iterator[HostView] | None:
        """The hosts whose room for key ``index`` holds the need, in list order (or reversed);
        None when the list's largest room cannot hold it."""
        top = self.top[index]
        if top is None:
            top = self.list_room(index)
        if top[0] < need_cpu or top[1] < need_memory:
            return None  # no host of the list can take it
        return self._fitting(index, need_cpu, need_memory, ascending, self.version)

    def _fitting(
        self, index: int, need_cpu: int, need_memory: int, ascending: bool, version: int
    ) -> Iterator[HostView]:
        if self.version != version:
            return  # the list changed before the walk's first host was asked for
        order = range(len(self.blocks)) if ascending else range(len(self.blocks) - 1, -1, -1)
        for b in order:
            best = self.rooms[b][index]
            if best is None:
                best = self._block_room(b, index)
            if best[0] < need_cpu or best[1] < need_memory:
                continue  # no host of this block can take it
            block = self.blocks[b]
            for _, _, view in block if ascending else reversed(block):
                cpu, memory = view.rooms[index]
                if cpu >= need_cpu and memory >= need_memory:
                    yield view
                    if self.version != version:
                        return  # the list changed since the walk began: it ends

    def list_room(self, index: int) -> tuple[int, int]:
        """The largest (CPU, memory) room of key ``index`` in the list (cached)."""
        best_cpu = best_memory = -1
        for b, cached in enumerate(self.rooms):
            best = cached[index]
            if best is None:
                best = self._block_room(b, index)
            if best[0] > best_cpu:
                best_cpu = best[0]
            if best[1] > best_memory:
                best_memory = best[1]
        top = (best_cpu, best_memory)
        self.top[index] = top
        return top

    def _block_room(self, b: int, index: int) -> tuple[int, int]:
        # the largest of -1 and each host's room, per resource (a block is never empty)
        rooms = [entry[2].rooms[index] for entry in self.blocks[b]]
        best = (max(-1, max([room[0] for room in rooms])),
                max(-1, max([room[1] for room in rooms])))
        self.rooms[b][index] = best
        return best


_Entry = tuple[float, str, HostView]
_Cache = list[tuple[int, int] | None]


def _grow(cache: _Cache, rooms: tuple[tuple[int, int], ...]) -> None:
    """A host with ``rooms`` joined: known largest rooms can only grow."""
    for index, known in enumerate(cache):
        if known is not None:
            cpu, memory = rooms[index]
            if cpu > known[0] or memory > known[1]:
                cache[index] = (max(cpu, known[0]), max(memory, known[1]))


def _shrink(cache: _Cache, rooms: tuple[tuple[int, int], ...]) -> None:
    """A host with ``rooms`` left: a largest room it may have held becomes unknown."""
    for index, known in enumerate(cache):
        if known is not None:
            cpu, memory = rooms[index]
            if cpu >= known[0] or memory >= known[1]:
                cache[index] = None


class MemoryStore:
    """Hosts, tasks and the pending queue in process memory (implements ClusterStore, and
    ChangeLog: every host change is logged)."""

    def __init__(
        self, classes: ClassTable | None = None, bounds: RegionBounds | None = None
    ) -> None:
        self._classes = classes or ClassTable()
        self._bounds = bounds or RegionBounds()
        self._views: dict[str, HostView] = {}
        # the ids of _views sorted, for all_hosts (None: to sort again, a host came or went;
        # a new list then, so that a walk begun before reads the one it began with)
        self._ids_sorted: list[str] | None = None
        self._groups: dict[GroupKey, HostList] = {}
        self._tasks: dict[str, Task] = {}
        self._host_tasks: dict[str, dict[str, Task]] = {}
        # per host, its tasks in tasks_on's order, until one of them changes: the preempt
        # passes read a host's tasks once per request they judge it for
        self._ordered: dict[str, list[Task]] = {}
        # per host, the ids of its tasks that hold a cut (cut_received > 0): restore_cuts runs
        # after every event that frees room, and most hosts have nothing to give back
        self._cut_tasks: dict[str, set[str]] = {}
        # per host, the ids of its suspended tasks (DESIGN 3.14), resumed when room grows
        self._paused_tasks: dict[str, set[str]] = {}
        self._pending: dict[str, PendingEntry] = {}
        # The queue in order, as two parallel lists: the order keys (searched by bisection)
        # and the entries. A read lends the entries' list itself (the scheduler reads the
        # queue on every retry, and changes it far less often); the next change to the queue
        # then works on a copy, so a list once read never changes.
        self._pending_keys: list[tuple[float, int, str]] = []
        self._pending_entries: list[PendingEntry] = []
        self._pending_lent = False
        # The change log (domain.store.ChangeLog): each host id with the mark of its view's
        # last change, in the order of those marks (a change moves the host to the end), so
        # the hosts changed since a mark are read from the end, one per host, however old the
        # mark; the next change's mark.
        self._changed_at: dict[str, int] = {}
        self._next_mark = 0

    # -- reading ----------------------------------------------------------------------------

    @property
    def classes(self) -> ClassTable:
        return self._classes

    @property
    def bounds(self) -> RegionBounds:
        return self._bounds

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        groups = self._groups
        for position, segment in enumerate(segments):
            group = groups.get((segment.region, segment.host_class))
            if group is None or not group.size:
                continue
            room_key = segment.room_key
            if room_key is None:
                for view in group.views(segment.ascending):
                    yield position, view
                continue
            need_cpu, need_memory = segment.need
            walk = group.walk(ROOM_INDEX[room_key], need_cpu, need_memory, segment.ascending)
            if walk is None:  # the list's largest room cannot hold it, as for most of a pass's
                continue
            for view in walk:
                yield position, view

    def all_hosts(self) -> Iterator[HostView]:
        ids = self._ids_sorted
        if ids is None:
            ids = self._ids_sorted = sorted(self._views)
        views = self._views
        for host_id in ids:
            yield views[host_id]

    def host(self, host_id: str) -> HostView:
        try:
            return self._views[host_id]
        except KeyError:
            raise NotFoundError(f"no host {host_id!r}") from None

    def tasks_on(self, host_id: str) -> list[Task]:
        ordered = self._ordered.get(host_id)
        if ordered is None:
            tasks = self._host_tasks.get(host_id)
            if tasks is None:
                raise NotFoundError(f"no host {host_id!r}")
            ordered = self._ordered[host_id] = sorted(tasks.values(), key=host_task_order)
        return list(ordered)

    def task(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def tasks(self) -> list[Task]:
        return sorted(self._tasks.values(), key=lambda t: t.id)

    def change_mark(self) -> int:
        return self._next_mark

    def changed_since(self, mark: int) -> Collection[HostView] | None:
        """The hosts changed at ``mark`` or later, the last changed first (never None: the
        log keeps every host's last change)."""
        views = self._views
        changed: list[HostView] = []
        for host_id, at in reversed(self._changed_at.items()):
            if at < mark:
                break
            view = views.get(host_id)
            if view is not None:
                changed.append(view)
        return changed

    def group_members(self, region: Region, host_class: int | None) -> list[str]:
        """Host ids of one list, ascending: for consistency checks."""
        group = self._groups.get((region, host_class))
        return group.host_ids() if group else []

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
            util_at=None if old is None else old.util_at,
            windows=None if old is None else old.windows,
        )
        if old is None:
            self._ids_sorted = None
            self._host_tasks[spec.id] = {}
            self._cut_tasks[spec.id] = set()
            self._paused_tasks[spec.id] = set()
        self._replace_view(old, view)
        return view

    def remove_host(self, host_id: str) -> list[Task]:
        view = self.host(host_id)
        tasks = sorted(self._host_tasks.pop(host_id).values(), key=lambda t: t.id)
        self._ordered.pop(host_id, None)
        del self._cut_tasks[host_id]
        del self._paused_tasks[host_id]
        for task in tasks:
            del self._tasks[task.id]
        self._group(view).remove(view)
        del self._views[host_id]
        self._ids_sorted = None
        self._changed(host_id)
        return tasks

    def update_host_utilization(
        self, host_id: str, cpu_util: float, memory_util: float,
        util_at: float | None = None, windows: LoadWindows | None = None,
    ) -> HostView:
        old = self.host(host_id)
        util = max(cpu_util, memory_util)
        view = old.with_utilization(cpu_util, memory_util, self._bounds.classify(util),
                                    util_at, windows)
        self._replace_view(old, view)
        return view

    def update_host_load(
        self, host_id: str, util_at: float, windows: LoadWindows | None = None
    ) -> HostView:
        old = self.host(host_id)
        view = old.with_utilization(old.cpu_util, old.memory_util, old.region, util_at, windows)
        self._replace_view(old, view)
        return view

    # -- tasks ------------------------------------------------------------------------------

    def apply(
        self,
        decision: Decision,
        now: float,
        executed_s: float = 0.0,
        pending_s: float = 0.0,
        preemptions: int = 0,
    ) -> list[Task]:
        if decision.request.id in self._tasks:
            raise ConflictError(f"task {decision.request.id!r} is already running")
        host = self.host(decision.host or "")
        on_host = self._host_tasks[host.id]
        self._ordered.pop(host.id, None)
        booking = book(decision, host, on_host, self._classes, now, executed_s, pending_s,
                       preemptions)
        cut_tasks = self._cut_tasks[host.id]
        paused = self._paused_tasks[host.id]
        for victim in booking.killed:
            del on_host[victim.id], self._tasks[victim.id]
            cut_tasks.discard(victim.id)
            paused.discard(victim.id)
        for task in (*booking.cut, *booking.suspended, booking.placed):
            on_host[task.id] = self._tasks[task.id] = task
            self._note_cut(task)
        self._replace_view(host, booking.host)
        return list(booking.killed)

    def load_task(self, task: Task) -> None:
        """Book a task exactly as given (restoring state, building scenarios)."""
        if task.id in self._tasks:
            raise ConflictError(f"task {task.id!r} is already booked")
        host = self.host(task.host)
        self._host_tasks[host.id][task.id] = self._tasks[task.id] = task
        self._ordered.pop(host.id, None)
        self._note_cut(task)
        tally = combine(host.tally, contribution(task, self._classes))
        self._replace_view(host, host.with_tally(tally))

    def resize_task(self, task_id: str, cpu_shares: int, memory: int) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}")
        resized = replace(task, cpu_shares=cpu_shares, memory=memory)
        host = self._views[task.host]
        tally = combine(host.tally, contribution(task, self._classes), -1)
        tally = combine(tally, contribution(resized, self._classes))
        self._tasks[task_id] = self._host_tasks[task.host][task_id] = resized
        self._ordered.pop(task.host, None)
        self._note_cut(resized)
        self._replace_view(host, host.with_tally(tally))
        return resized

    def end_task(self, task_id: str) -> Task:
        task = self._tasks.pop(task_id, None)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}")
        del self._host_tasks[task.host][task_id]
        self._ordered.pop(task.host, None)
        self._cut_tasks[task.host].discard(task_id)
        self._paused_tasks[task.host].discard(task_id)
        host = self._views[task.host]
        tally = combine(host.tally, contribution(task, self._classes), -1)
        self._replace_view(host, host.with_tally(tally))
        return task

    def restore_cuts(self, host_id: str) -> list[TaskRestore]:
        host = self.host(host_id)
        on_host = self._host_tasks[host_id]
        cut_ids = self._cut_tasks[host_id]
        if not cut_ids:
            return []  # nothing cut here: no change, not even in the change log
        # the cut tasks only, in any order: plan_restores takes nothing else, in its own order
        restores = plan_restores(host, [on_host[task_id] for task_id in cut_ids], self._classes)
        if not restores:
            return []
        view, restored = apply_restores(host, on_host, restores, self._classes)
        self._ordered.pop(host_id, None)
        for task in restored:
            on_host[task.id] = self._tasks[task.id] = task
            self._note_cut(task)
        self._replace_view(host, view)
        return list(restores)

    def resume_suspended(self, host_id: str, now: float, slo: SloTable) -> list[Task]:
        host = self.host(host_id)
        paused_ids = self._paused_tasks[host_id]
        if not paused_ids:
            return []  # nothing paused here: no change, not even in the change log
        on_host = self._host_tasks[host_id]
        view, resumed = resume_on(host, [on_host[task_id] for task_id in paused_ids], now,
                                  slo, self._classes)
        if not resumed:
            return []
        self._ordered.pop(host_id, None)
        for task in resumed:
            on_host[task.id] = self._tasks[task.id] = task
            self._note_cut(task)
        self._replace_view(host, view)
        return list(resumed)

    def update_task_utilization(self, task_id: str, cpu_util: float, memory_util: float) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}")
        updated = task.with_utilization(cpu_util, memory_util)
        self._tasks[task_id] = self._host_tasks[task.host][task_id] = updated
        self._ordered.pop(task.host, None)
        return updated

    # -- pending queue ----------------------------------------------------------------------

    def push_pending(self, entry: PendingEntry) -> None:
        self.remove_pending(entry.request.id)
        self._pending[entry.request.id] = entry
        # order keys end with the request id: unique, so a key finds exactly one place
        key = entry.order_key
        at = bisect.bisect_right(self._pending_keys, key)
        self._pending_keys.insert(at, key)
        self._own_pending().insert(at, entry)

    def pending(self) -> Sequence[PendingEntry]:
        self._pending_lent = True
        return self._pending_entries

    def is_pending(self, request_id: str) -> bool:
        return request_id in self._pending

    def remove_pending(self, request_id: str) -> bool:
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return False
        at = bisect.bisect_left(self._pending_keys, entry.order_key)
        del self._pending_keys[at]
        del self._own_pending()[at]
        return True

    def _own_pending(self) -> list[PendingEntry]:
        """The queue's entries to change: a copy if the list was lent by ``pending``."""
        if self._pending_lent:
            self._pending_entries = self._pending_entries.copy()
            self._pending_lent = False
        return self._pending_entries

    # -- internals --------------------------------------------------------------------------

    def _note_cut(self, task: Task) -> None:
        """Keep ``task`` in its host's set of cut tasks exactly when it holds a cut, and in its
        set of suspended tasks exactly when it is paused."""
        if task.cut_received.numerator > 0:
            self._cut_tasks[task.host].add(task.id)
        else:
            self._cut_tasks[task.host].discard(task.id)
        if task.suspended_cpu_shares > 0:
            self._paused_tasks[task.host].add(task.id)
        else:
            self._paused_tasks[task.host].discard(task.id)

    def _group(self, view: HostView) -> HostList:
        key = (view.region, view.host_class)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _new_group()
        return group

    def _replace_view(self, old: HostView | None, new: HostView) -> None:
        if old is not None:
            self._group(old).remove(old)
        self._views[new.id] = new
        group = self._group(new)
        try:
            group.insert(new)
        except (OverflowError, ValueError):
            if isinstance(group, _Group):
                raise
            # The Rust list refused the host before changing (a room beyond 64 bits, a U that
            # is not a number): this list is kept by the reference from now on.
            python = _Group()
            for view in group.views(True):
                python.insert(view)
            python.insert(new)
            self._groups[new.region, new.host_class] = python
        self._changed(new.id)

    def _changed(self, host_id: str) -> None:
        changed_at = self._changed_at
        changed_at.pop(host_id, None)  # (then the insertion puts it last)
        changed_at[host_id] = self._next_mark
        self._next_mark += 1
