"""Consolidation in the live service (DESIGN 3.15, the energy and qos policies with the power
manager and ``consolidate`` on): every ``consolidate_every_s`` (60 s) the planner
(scheduler/consolidation.py, the code the simulator runs) is asked to empty one host of its
services; each service moves make-before-break, and the emptied host is then switched off by the
power manager's usual idle rule.

A move, carried out on the scheduling loop:

1. the booking moves at once, on decision: the task leaves the source and is booked on the
   target with the plan's resources. So the room the new container needs while both run is the
   target's from the first moment (a placement in between cannot take it and turn the target
   EED), and the source, being emptied, is closed to every pass while the move runs (its old
   container still runs there; its room is not given away);
2. the Swarm service is updated with the new ``node.id`` constraint and the update order
   ``start-first`` (manager/swarm.py ``SwarmBackend.move``): the new container runs before the
   old one stops, so the service never stops;
3. each round after, the move is done when Swarm reports the service's newest task running on
   the target: a typed ``Moved`` event goes into the request's history (host, source, and their
   names in its sentence). A move Swarm refused (the update failed: Swarm rolls it back, the old
   container stays), or not running on the target within ``timeout_s``, is undone: the booking
   goes back to the source and the service is pinned there again. A request that ended meanwhile
   is left to its ending.

One host at a time: no plan while a move is under way. Jobs are never moved, and a moved task
is not moved again within 30 min (both the planner's rules). While a task moves, the
reconciliation leaves its service alone (:meth:`LiveConsolidation.moving`): its newest task is
the new one, pending or refused for a moment, which is no ending of the request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Protocol

from domain.errors import GreenSwarmError, NotFoundError
from domain.events import Event, Moved, MoveStarted, MoveUndone
from domain.model import Request, Task, TaskType
from host_registry.redis_store import RedisStore
from manager.records import RequestRecords
from manager.swarm import ServiceInfo, TaskState
from scheduler.consolidation import Consolidator, Move

log = logging.getLogger(__name__)
# The policies that consolidate (DESIGN 3.15).
CONSOLIDATING = frozenset({"energy", "qos"})
# a service update Swarm rolled back (or is rolling back, or paused on a failure): the move
# failed, the old container runs (or runs again) on the source
ROLLED_BACK = frozenset({"rollback_started", "rollback_completed", "rollback_paused", "paused"})
MOVE_TIMEOUT_S = 180.0  # a moved service runs on its target within this, or the move is undone


class MoveBackend(Protocol):
    """The Swarm calls a move makes (manager/swarm.py ``SwarmBackend``)."""

    def move(self, task_id: str, node_id: str) -> None: ...

    def services(self) -> list[ServiceInfo]: ...


@dataclass(frozen=True)
class MoveParts:
    """What the live consolidation reads and tells, from the manager's other parts."""

    store: RedisStore
    records: RequestRecords
    backend: MoveBackend
    clock: Callable[[], float]
    host_name: Callable[[str], str]
    on_hosts: Callable[[], Collection[str]]  # the hosts that are on (the power book's)
    excluded: Callable[[Request], Collection[str]]  # hosts a request's constraints rule out
    closed_changed: Callable[[], None]  # the host being emptied changed: (re)close it


@dataclass(frozen=True)
class _Moving:
    move: Move
    before: Task  # the task as it was booked on the source (the undo)


class LiveConsolidation:
    """The consolidator at work; :meth:`tick` runs on the scheduling loop, :meth:`moving` and
    :meth:`emptying` on any thread."""

    def __init__(self, consolidator: Consolidator, parts: MoveParts,
                 timeout_s: float = MOVE_TIMEOUT_S) -> None:
        self.consolidator = consolidator
        self.parts = parts
        self.timeout_s = timeout_s
        self._moves: dict[str, _Moving] = {}  # task id -> its move under way
        self._started_at = 0.0
        self._lock = threading.Lock()
        self._moving: frozenset[str] = frozenset()
        self._emptying: frozenset[str] = frozenset()
        self.counts = {"started": 0, "moved": 0, "undone": 0}
        self.last: dict[str, Any] | None = None  # the last round's plan (GET /power)
        self.counted: Callable[[str], None] = lambda _result: None  # the metrics' counter

    # -- read by any thread ----------------------------------------------------------------

    def moving(self) -> frozenset[str]:
        """The tasks whose move is under way: the reconciliation leaves their services alone."""
        with self._lock:
            return self._moving

    def emptying(self) -> frozenset[str]:
        """The host being emptied (none or one): closed to every pass while its services move."""
        with self._lock:
            return self._emptying

    # -- the round -------------------------------------------------------------------------

    def tick(self) -> None:
        """Follow the moves under way; when none is and a round is due, plan and start one."""
        now = self.parts.clock()
        if self._moves:
            self._follow(now)
            return
        consolidator = self.consolidator
        if not consolidator.due(now):
            return
        plan = consolidator.plan(self.parts.store, now, on=set(self.parts.on_hosts()),
                                 excluded=self.parts.excluded)
        consolidator.commit(plan, now)
        self.last = {**plan.to_json(), "t": now}
        if not plan.planned:
            log.debug("consolidation: %s (%s)", plan.verdict.value, plan.detail)
            return
        log.info("consolidation: %s", plan.detail)
        self._started_at = now
        for move in plan.moves:
            self._start(move)
        self._publish(plan.host)
        if not self._moves:
            consolidator.finished()
            self._publish(None)

    def resume(self) -> int:
        """At a take-over: follow the moves a former leader started and did not see end, and
        keep its pins (DESIGN 13: the loop's work carries over). A task booked on the target of
        its last ``move-started`` event, with no ``moved`` or ``move-undone`` after it, is
        followed as if started now (done when Swarm runs it on the target, undone when Swarm
        refused it or it does not run there within ``timeout_s``); a task moved within the
        pin time is not moved again before it ends. Without this the new leader left the
        request's record on the source while it ran on the target, and never undid a move
        Swarm refused. A record that cannot be read is skipped (DESIGN 9). The number of moves
        taken up."""
        store, now = self.parts.store, self.parts.clock()
        pin_s = self.consolidator.settings.move_pin_s
        taken: list[Move] = []
        for task in store.tasks():
            if task.type is not TaskType.SERVICE or task.id in self._moves:
                continue  # jobs are never moved: their records need not be read
            try:
                record = self.parts.records.get(task.id)
            except GreenSwarmError as exc:
                log.warning("consolidation: %s not looked at for a move under way: %s",
                            task.id, exc)
                continue
            started, ended = _last_move(record.history)
            last = ended or started
            if last is not None and last.t is not None and now - last.t < pin_s:
                self.consolidator.pins.setdefault(task.id, last.t)
            if (started is None or ended is not None or started.host is None
                    or started.target != task.host):
                continue
            move = Move(task.id, started.host, task.host, task.cpu_shares, task.memory)
            before = replace(task, host=started.host, cpu_shares=record.cpu_shares,
                             memory=record.memory, cut_received=Fraction(record.cut_received))
            self._moves[task.id] = _Moving(move, before)
            taken.append(move)
        if taken:
            log.info("consolidation: %d move(s) under way taken over", len(taken))
            self._started_at = now
            self.consolidator.in_flight = taken[0].source
            self._publish(taken[0].source)
        return len(taken)

    def _start(self, move: Move) -> None:
        """Book the task on the target, then ask Swarm to move it (start-first)."""
        store = self.parts.store
        before = store.task(move.task)
        if before is None or before.host != move.source:
            return  # ended or moved since the plan
        self._count("started")
        source, target = self.parts.host_name(move.source), self.parts.host_name(move.target)
        self._record(move.task, MoveStarted(
            f"consolidation: moving from {source} to {target} make-before-break (its new "
            "container starts before the old one stops)", t=self.parts.clock(),
            host=move.source, target=move.target, cpu_shares=move.cpu_shares,
            memory=move.memory))
        try:
            store.end_task(move.task)
            store.load_task(_on(before, move.target, move.cpu_shares, move.memory))
            self.parts.backend.move(move.task, move.target)
        except GreenSwarmError as exc:
            log.warning("consolidation: %s not moved to %s: %s", move.task, move.target, exc)
            self._rebook(before)
            self._count("undone")
            self._record(move.task, MoveUndone(
                f"consolidation: not moved to {target}, stays on {source}: Swarm did not take "
                f"the update: {exc}", t=self.parts.clock(), host=move.source,
                target=move.target), host=move.source)
            return
        self._moves[move.task] = _Moving(move, before)

    def _count(self, result: str) -> None:
        self.counts[result] += 1
        self.counted(result)

    def _record(self, task_id: str, event: MoveStarted | Moved | MoveUndone,
                **changes: Any) -> None:
        """``event`` into the request's history (a failed write is logged: the move goes on)."""
        try:
            self.parts.records.update(task_id, event, **changes)
        except GreenSwarmError as exc:
            log.warning("consolidation: the %s of %s not recorded: %s", event.kind.value,
                        task_id, exc)

    def _follow(self, now: float) -> None:
        """The moves Swarm finished, refused or let time out; the round ends with the last."""
        try:
            services = {info.task_id: info for info in self.parts.backend.services()}
        except GreenSwarmError as exc:
            log.warning("consolidation: cannot read the services: %s", exc)
            services = None
        for task_id, moving in list(self._moves.items()):
            if services is not None:
                self._follow_one(moving, services.get(task_id), now)
            elif now - self._started_at > self.timeout_s:
                self._undo(moving, "Swarm did not answer")
        if not self._moves:
            self.consolidator.finished()
            self._publish(None)

    def _follow_one(self, moving: _Moving, info: ServiceInfo | None, now: float) -> None:
        move = moving.move
        task = self.parts.store.task(move.task)
        if info is None or task is None or task.host != move.target:
            del self._moves[move.task]  # stopped or ended meanwhile: its ending saw to it
            return
        if info.update_state in ROLLED_BACK:
            self._undo(moving, f"Swarm rolled the update back ({info.update_state}): "
                               f"{info.message or 'the new task did not run'}")
        elif info.state is TaskState.RUNNING and info.node_id == move.target:
            del self._moves[move.task]
            self._moved(move, now)
        elif info.state in (TaskState.REJECTED, TaskState.FAILED, TaskState.SHUTDOWN):
            self._undo(moving, f"Swarm: {info.state.value} on the target: "
                               f"{info.message or 'no reason given'}")
        elif now - self._started_at > self.timeout_s:
            self._undo(moving, f"not running on the target after {self.timeout_s:g} s")

    def _moved(self, move: Move, now: float) -> None:
        self._count("moved")
        name, source = self.parts.host_name(move.target), self.parts.host_name(move.source)
        self._record(move.task, Moved(
            f"consolidation: moved from {source} to {name} make-before-break (its new "
            "container ran before the old one stopped)", t=now, host=move.target,
            source=move.source, cpu_shares=move.cpu_shares, memory=move.memory),
            host=move.target)
        log.info("consolidation: %s moved from %s to %s", move.task, source, name)

    def _undo(self, moving: _Moving, why: str) -> None:
        """The booking back on the source, the service pinned there again."""
        move = moving.move
        del self._moves[move.task]
        self._count("undone")
        if self.parts.store.task(move.task) is None:
            return  # ended meanwhile: its ending removed the service
        self._rebook(moving.before)
        try:
            self.parts.backend.move(move.task, move.source)
        except GreenSwarmError as exc:
            log.warning("consolidation: %s not pinned back to %s: %s", move.task,
                        move.source, exc)
        self._record(move.task, MoveUndone(
            f"consolidation: not moved to {self.parts.host_name(move.target)}, stays on "
            f"{self.parts.host_name(move.source)}: {why}", t=self.parts.clock(),
            host=move.source, target=move.target), host=move.source)
        log.warning("consolidation: move of %s undone: %s", move.task, why)

    def _rebook(self, before: Task) -> None:
        """``before`` booked again as it was: off the target if it was booked there, on the
        source if it is not booked (its move's booking failed half-way)."""
        store = self.parts.store
        now = store.task(before.id)
        if now is not None and now.host != before.host:
            try:
                store.end_task(before.id)
            except NotFoundError:
                return  # ended meanwhile
        if store.task(before.id) is None:
            store.load_task(before)

    def _publish(self, host: str | None) -> None:
        with self._lock:
            self._moving = frozenset(self._moves)
            self._emptying = frozenset() if host is None else frozenset({host})
        self.parts.closed_changed()


def _last_move(history: list[Event]) -> tuple[MoveStarted | None, Moved | MoveUndone | None]:
    """The last ``move-started`` of a history and the event that ended it (None: none yet)."""
    started: MoveStarted | None = None
    ended: Moved | MoveUndone | None = None
    for event in history:
        if isinstance(event, MoveStarted):
            started, ended = event, None
        elif isinstance(event, (Moved, MoveUndone)):
            ended = event
    return started, ended


def _on(task: Task, host: str, cpu_shares: int, memory: int) -> Task:
    """``task`` booked on ``host`` with these resources, uncut and running (its new container
    is a fresh one: not paused), its times and preemptions unchanged (it never stopped)."""
    return Task(task.id, host, task.cls, task.type, cpu_shares, memory,
                task.original_cpu_shares, task.original_memory, Fraction(0),
                task.cpu_util, task.memory_util, task.started_at, task.executed_s,
                task.pending_s, task.preemptions, task.constraints, task.checkpoint_interval_s)
