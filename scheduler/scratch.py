"""A scratch copy of the cluster for what-if questions: would these tasks fit elsewhere, would an
off host take this request? The power manager and the consolidation planner (DESIGN 3.15) ask
them with the real passes (scheduler.policies.energy.Passes), never with a copy of their rules.

:class:`ScratchView` is a ClusterReader over a base reader (the live store, unchanged) or over
hosts of its own (the off hosts, say), plus hosts changed by tentative placements (``place``):
every read merges the changed hosts into the base's order. Pure; the base is never written.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence

from domain.books import contribution
from domain.classes import ClassTable
from domain.errors import NotFoundError
from domain.model import HostView, Task, host_task_order
from domain.regions import RegionBounds
from domain.rooms import ROOM_INDEX
from domain.store import ClusterReader, Segment
from domain.tally import EMPTY_TALLY, combine


def _order(host: HostView) -> tuple[float, str]:
    return (host.util, host.id)


def empty_view(host: HostView, bounds: RegionBounds) -> HostView:
    """``host`` with nothing on it and nothing measured: an off or booting host as the passes
    would see it once on."""
    return HostView(host.id, host.cpu_capacity, host.memory_capacity, 0.0, 0.0,
                    bounds.classify(0.0), EMPTY_TALLY, host.cpu_limits, host.memory_limits,
                    host.address)


class ScratchView:
    """A ClusterReader: ``base`` (may be None) with ``hosts`` of its own replacing or adding to
    its hosts; ``place`` books a task on a host here only."""

    def __init__(self, base: ClusterReader | None, hosts: Iterable[HostView] = (), *,
                 classes: ClassTable | None = None, bounds: RegionBounds | None = None) -> None:
        if base is not None:
            classes = base.classes if classes is None else classes
            bounds = base.bounds if bounds is None else bounds
        if classes is None or bounds is None:
            raise ValueError("a scratch view without a base needs classes and bounds")
        self.base = base
        self._classes = classes
        self._bounds = bounds
        self._own: dict[str, HostView] = {h.id: h for h in hosts}
        self._added: dict[str, list[Task]] = {}

    # -- ClusterReader -------------------------------------------------------------------------

    @property
    def classes(self) -> ClassTable:
        return self._classes

    @property
    def bounds(self) -> RegionBounds:
        return self._bounds

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        for index, segment in enumerate(segments):
            own = sorted((h for h in self._own.values() if _in_segment(h, segment)),
                         key=_order, reverse=not segment.ascending)
            if self.base is None:
                merged: Iterable[HostView] = own
            else:
                from_base = (h for _, h in self.base.candidates([segment])
                             if h.id not in self._own)
                merged = heapq.merge(from_base, own, key=_order, reverse=not segment.ascending)
            for host in merged:
                yield index, host

    def all_hosts(self) -> Iterator[HostView]:
        base = () if self.base is None else (h for h in self.base.all_hosts()
                                             if h.id not in self._own)
        yield from heapq.merge(base, sorted(self._own.values(), key=lambda h: h.id),
                               key=lambda h: h.id)

    def host(self, host_id: str) -> HostView:
        own = self._own.get(host_id)
        if own is not None:
            return own
        if self.base is None:
            raise NotFoundError(f"unknown host {host_id!r}")
        return self.base.host(host_id)

    def tasks_on(self, host_id: str) -> list[Task]:
        tasks = list(self._added.get(host_id, ()))
        if self.base is not None:
            try:
                self.base.host(host_id)
            except NotFoundError:
                pass
            else:
                tasks += self.base.tasks_on(host_id)
        return sorted(tasks, key=host_task_order) if tasks else tasks

    # -- what-if ------------------------------------------------------------------------------

    def place(self, task: Task, cpu_used: float = 0.0, memory_used: float = 0.0) -> HostView:
        """Book ``task`` (its ``host`` says where, its resources as given) here, its host's
        utilization raised by ``cpu_used`` shares and ``memory_used`` bytes and its region
        judged again; returns the host as it is now."""
        host = self.host(task.host)
        tally = combine(host.tally, contribution(task, self._classes))
        cpu_util = host.cpu_util + cpu_used / host.cpu_capacity
        memory_util = host.memory_util + memory_used / host.memory_capacity
        region = self._bounds.classify(max(cpu_util, memory_util))
        changed = host.with_tally(tally).with_utilization(cpu_util, memory_util, region)
        self._own[host.id] = changed
        self._added.setdefault(host.id, []).append(task)
        return changed


def _in_segment(host: HostView, segment: Segment) -> bool:
    if host.region is not segment.region or host.host_class != segment.host_class:
        return False
    if segment.room_key is None:
        return True
    cpu, memory = host.rooms[ROOM_INDEX[segment.room_key]]
    return cpu >= segment.need[0] and memory >= segment.need[1]

