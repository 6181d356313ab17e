"""A stand-in for the manager's Swarm backend (manager/swarm.py), in memory.

Only for the fast suite's tests of what the manager does with what the Swarm says (a node that
is Down, gone or back under a new id, a task Swarm refused): a real node's loss needs the lab
(root, minutes), so those tests say they use this and the lab's tests (tests/e2e) do it for
real. It answers the calls the manager makes (``nodes``, ``services``, ``create``, ``remove``,
``move``, ``ping``) with the backend's own types; a created service runs at once on its node, a
moved one on its new node (or its new task stays pending there with ``move_pending``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from domain.errors import NotFoundError, UnavailableError
from manager.swarm import NodeAvailability, NodeInfo, Placement, ServiceInfo, TaskState

_ids = itertools.count(1)
T = TypeVar("T")


def _with(value: T, **changes: Any) -> T:
    """``replace`` with the fields the type has (the same stand-in runs against main's types
    when a test is checked to fail there)."""
    names = {f.name for f in fields(value)}  # type: ignore[arg-type]
    return replace(value, **{k: v for k, v in changes.items() if k in names})  # type: ignore[type-var]


@dataclass
class StandInSwarm:
    """Nodes by id (with their Swarm state: ``ready`` or ``down``) and services by request id."""

    nodes_by_id: dict[str, NodeInfo] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # node id -> "ready" | "down"
    services_by_task: dict[str, ServiceInfo] = field(default_factory=dict)
    created: list[Placement] = field(default_factory=list)
    reachable: bool = True  # False: every call fails as when the engine does not answer
    moves: list[tuple[str, str]] = field(default_factory=list)  # (task id, node id) per move
    move_pending: bool = False  # a moved service's new task stays pending (run_moved runs it)

    @classmethod
    def of(cls, count: int, cpu: int = 2048, memory: int = 4 * 2**30) -> StandInSwarm:
        """``count`` Ready nodes ``node000``... named ``sn000``... (a Swarm this machine
        cannot run, for the tests at scale)."""
        swarm = cls()
        for i in range(count):
            swarm.add_node(f"node{i:03d}", f"sn{i:03d}", cpu, memory)
        return swarm

    def add_node(self, node_id: str, hostname: str, cpu: int = 2048,
                 memory: int = 4 * 2**30) -> NodeInfo:
        n = len(self.nodes_by_id)
        node = NodeInfo(node_id, hostname, f"10.9.{n // 250}.{n % 250 + 2}", cpu, memory,
                        {}, NodeAvailability.ACTIVE)
        self.nodes_by_id[node_id] = node
        self.states[node_id] = "ready"
        return node

    def set_down(self, node_id: str) -> None:
        self.states[node_id] = "down"

    def set_ready(self, node_id: str) -> None:
        self.states[node_id] = "ready"

    def drain(self, node_id: str) -> None:
        """``docker node update --availability drain``: Swarm moves its tasks away."""
        self.nodes_by_id[node_id] = _with(self.nodes_by_id[node_id],
                                          availability=NodeAvailability.DRAIN)

    def remove_node(self, node_id: str) -> None:
        del self.nodes_by_id[node_id], self.states[node_id]

    def _check(self) -> None:
        if not self.reachable:
            raise UnavailableError("stand-in Swarm: the engine does not answer")

    # -- the backend's calls ------------------------------------------------------------------

    def ping(self) -> bool:
        self._check()
        return True

    def nodes(self, label: str = "", only: frozenset[str] = frozenset(),
              include_down: bool = False) -> list[NodeInfo]:
        self._check()
        return [_with(node, ready=self.states[node.id] == "ready")
                for node in self.nodes_by_id.values()
                if include_down or self.states[node.id] == "ready"]

    def services(self) -> list[ServiceInfo]:
        self._check()
        return list(self.services_by_task.values())

    def create(self, placement: Placement) -> str:
        self._check()
        service_id = f"svc{next(_ids)}"
        self.created.append(placement)
        self.services_by_task[placement.task_id] = ServiceInfo(
            service_id, f"gs-{placement.task_id}", placement.task_id, TaskState.RUNNING,
            placement.node_id, None, "", time.time())
        return service_id

    def move(self, task_id: str, node_id: str) -> None:
        """The service update with the new node constraint (start-first): its newest task is
        the new one, on ``node_id``: running at once, or pending with ``move_pending``."""
        self._check()
        info = self.services_by_task.get(task_id)
        if info is None:
            raise NotFoundError(f"stand-in Swarm: no service of {task_id}")
        self.moves.append((task_id, node_id))
        running = not self.move_pending
        self.services_by_task[task_id] = _with(
            info, node_id=node_id, state=TaskState.RUNNING if running else TaskState.PENDING,
            running_since=time.time() if running else None,
            update_state="completed" if running else "updating")

    def run_moved(self, task_id: str) -> None:
        """The moved service's new task runs."""
        self.services_by_task[task_id] = _with(self.services_by_task[task_id],
                                               state=TaskState.RUNNING,
                                               running_since=time.time(),
                                               update_state="completed")

    def remove(self, task_id: str) -> bool:
        self._check()
        return self.services_by_task.pop(task_id, None) is not None

    def refuse(self, task_id: str, message: str) -> None:
        """Swarm refused the task's container (state ``rejected``), as it says of an image
        its node does not have."""
        info = self.services_by_task[task_id]
        rejected = getattr(TaskState, "REJECTED", TaskState.FAILED)
        self.services_by_task[task_id] = _with(info, state=rejected, message=message,
                                               exit_code=0)

    def roll_back(self, task_id: str) -> None:
        """Swarm rolled a moved service back (its new task failed on the target): it runs on
        its first node again, and the service's update status says so."""
        info = self.services_by_task[task_id]
        first = next(p.node_id for p in self.created if p.task_id == task_id)
        self.services_by_task[task_id] = _with(
            info, node_id=first, state=TaskState.RUNNING, running_since=time.time(),
            update_state="rollback_completed")

    def close(self) -> None:
        return None
