"""What the registries' endpoints hand to a scheduler, and where they find their store.

Both registries' blueprints (host_registry.api, task_registry.api) read and write the
ClusterStore found in ``app.extensions["greenswarm"]``; events that need the scheduler (a host
changed or left, a task ended, a kill) go through :class:`RegistryEvents`: the manager routes
them to its scheduling loop, the standalone registry only changes the books.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from flask import current_app

from domain.lifecycle import TaskEnd
from domain.model import HostSpec, HostView, Task
from domain.store import ClusterStore
from host_registry.power import MemoryPowerReadings, PowerReadings
from host_registry.requests import RequestIndex


class RegistryEvents(Protocol):
    """What the registries hand to the scheduler (the manager's loop implements it)."""

    def admit_host(self, spec: HostSpec) -> None:
        """Raises ConflictError when ``spec`` may not become a host (the manager admits only
        Ready nodes of its Swarm)."""
        ...

    def host_changed(self, host: HostView) -> None: ...

    def task_resized(self, task: Task) -> None:
        """A node reported what it really applied to a task (message 6), now booked."""
        ...

    def host_removed(self, host_id: str) -> None: ...

    def task_ended(self, end: TaskEnd) -> bool:
        """False when the report is stale (an earlier placement of the same task)."""
        ...

    def kill(self, task_id: str) -> None: ...


@dataclass
class Registry:
    store: ClusterStore
    events: RegistryEvents
    # the manager's request records: a placement must name one (DESIGN 9)
    requests: RequestIndex
    # the monitors' power readings (RAPL), where a host has them
    power: PowerReadings = field(default_factory=MemoryPowerReadings)


def registry() -> Registry:
    found: Registry = current_app.extensions["greenswarm"]
    return found
