"""The interface between the scheduling core and whatever keeps hosts and tasks.

The in-memory store (host_registry.memory) and the Redis store implement ClusterReader and
ClusterStore; the scheduler and the simulator only ever talk to these protocols. The in-memory
store also implements ChangeLog, which lets the scheduler skip hopeless retries.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Protocol, runtime_checkable

from domain.classes import ClassTable
from domain.decision import Decision
from domain.load import LoadWindows
from domain.model import HostSpec, HostView, Task
from domain.pending import PendingEntry
from domain.regions import RegionBounds
from domain.restore import TaskRestore
from domain.segments import Segment as Segment  # re-exported: part of the readers' API
from domain.slo import SloTable


class ClusterReader(Protocol):
    """What a policy reads to decide."""

    @property
    def classes(self) -> ClassTable: ...

    @property
    def bounds(self) -> RegionBounds: ...

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        """The hosts of each segment in turn, as (segment index, host); ordered by U (ties by
        id, reversed when descending) inside a segment."""
        ...

    def all_hosts(self) -> Iterator[HostView]:
        """Every host, ordered by id."""
        ...

    def host(self, host_id: str) -> HostView:
        """One host; raises NotFoundError."""
        ...

    def tasks_on(self, host_id: str) -> list[Task]:
        """The tasks of a host, ordered by class descending, then utilization, then id."""
        ...


class ClusterStore(ClusterReader, Protocol):
    """A reader that also takes the registry updates of DESIGN 3.8."""

    def add_host(self, spec: HostSpec, cpu_util: float = 0.0, memory_util: float = 0.0) -> HostView:
        """Register a host (idempotent for the same capacity); returns its view."""
        ...

    def remove_host(self, host_id: str) -> list[Task]:
        """Forget a host; returns the tasks that were on it (to be rescheduled)."""
        ...

    def apply(
        self,
        decision: Decision,
        now: float,
        executed_s: float = 0.0,
        pending_s: float = 0.0,
        preemptions: int = 0,
    ) -> list[Task]:
        """Apply a placed decision atomically: kills, then cuts, then the new task.

        Returns the killed tasks as they were booked. ``executed_s``, ``pending_s`` and
        ``preemptions`` carry a rescheduled task's history.
        """
        ...

    def load_task(self, task: Task) -> None:
        """Book a task exactly as given, on an existing host (restores, scenarios)."""
        ...

    def resize_task(self, task_id: str, cpu_shares: int, memory: int) -> Task:
        """Record the resources a task really has (e.g. a memory cut the node could only apply
        in part); its cut_received, class and host are unchanged."""
        ...

    def end_task(self, task_id: str) -> Task:
        """A task finished, failed, was killed or stopped: remove it; raises NotFoundError."""
        ...

    def restore_cuts(self, host_id: str) -> list[TaskRestore]:
        """Give the host's cut tasks resources back as far as its class allows
        (domain.restore.plan_restores), atomically; returns the restorations made, in order
        (none: nothing changed). Raises NotFoundError for an unknown host."""
        ...

    def resume_suspended(self, host_id: str, now: float, slo: SloTable) -> list[Task]:
        """Resume the host's suspended tasks that its CPU room lets run again, the most urgent
        first (domain.preemption.resume_on), atomically; returns them as they are now (none:
        nothing changed). Raises NotFoundError for an unknown host."""
        ...

    def task(self, task_id: str) -> Task | None: ...

    def update_host_utilization(
        self, host_id: str, cpu_util: float, memory_util: float,
        util_at: float | None = None, windows: LoadWindows | None = None,
    ) -> HostView:
        """A host's measured utilization; with the time it was measured and the monitor's load
        windows when known (else the host keeps the ones it had)."""
        ...

    def update_host_load(
        self, host_id: str, util_at: float, windows: LoadWindows | None = None
    ) -> HostView:
        """The monitor confirms at ``util_at`` that the utilization held is still current (a
        heartbeat: DESIGN 5), with its load windows; nothing else changes."""
        ...

    def update_task_utilization(
        self, task_id: str, cpu_util: float, memory_util: float
    ) -> Task: ...

    def push_pending(self, entry: PendingEntry) -> None: ...

    def pending(self) -> Sequence[PendingEntry]:
        """The pending queue in order (soonest violation first): a snapshot the store does
        not change afterwards, and the caller must not change either."""
        ...

    def remove_pending(self, request_id: str) -> bool: ...

    def is_pending(self, request_id: str) -> bool:
        """Whether the request waits in the pending queue (without reading the queue)."""
        ...


@runtime_checkable
class ChangeLog(Protocol):
    """Which hosts changed, for a store whose every change happens in this process.

    A mark is a point in the store's history. The scheduler notes one when a pending request
    fails, and on the next retry decides it again only if a host changed since then could take
    it: a host's fit for a request depends on that host's own books alone, so a request that
    fitted no host cannot fit now on a host that did not change. The in-memory store keeps
    such a log, of each host's last change, so it answers for any mark at the cost of the
    hosts changed since; the Redis store does not (other processes write to it), so every
    retry there is a full decision.
    """

    def change_mark(self) -> int:
        """The current point in the history."""
        ...

    def changed_since(self, mark: int) -> Collection[HostView] | None:
        """The hosts added or changed after ``mark``, as they are now (hosts that left are
        not listed: they take nothing); None when the log no longer reaches back that far
        (then anything may have changed)."""
        ...
