"""Consolidation (DESIGN 3.15, the energy and qos policies): empty the least-allocated host of
its services, so that the power manager can switch it off. Pure: the planner reads the cluster
and returns a move plan as data; the caller moves the services (make-before-break live, at once
in the simulator) and reports back.

Every ``consolidate_every_s`` (60 s), the on hosts whose tasks are all services are tried, the
lowest allocation first (overbooking factor, then fewer tasks, then id; at most
``consolidate_tries`` of them): a host is emptied when each of its services

* has slack: its QoS metric Q_k >= phi + alpha (DESIGN 3.10, 3.11), so the move's allocation
  time cannot make it miss its objective;
* was not moved in the last ``move_pin_s`` (30 min);
* fits on another on host by the simple pass (DESIGN 3.4, the real code, over a scratch view of
  the cluster that excludes the host being emptied, the hosts not on, and the empty hosts: a
  service moved onto an empty host would only move the emptiness), with the services planned
  before it booked there, without turning that host EED (its utilization raised by the
  service's predicted use: measured, else its allocation). A target that would turn EED is left
  out and the pass asked again.

Jobs are never moved (a host with a job is never emptied); one host at a time (no plan while
one is under way); a moved service keeps its original resources (the simple pass places it
unchanged).

A caller (energy and qos, with the power manager and ``consolidate`` on)::

    if consolidator.due(now):
        plan = consolidator.plan(store, now, on=book.in_state(PowerState.ON),
                                 excluded=constrained_out)
        consolidator.commit(plan, now)           # pins its tasks, marks its host in flight
        for move in plan.moves:                  # simulator: at once; live: make-before-break
            ...                                  # (--update-order start-first, new node.id)
        consolidator.finished()                  # live: once every moved service runs
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from domain.model import HostView, Request, Task, TaskType
from domain.power import PowerSettings
from domain.regions import Region
from domain.slo import SloTable
from domain.store import ClusterReader
from scheduler.explain import Notes
from scheduler.load import predicted_use
from scheduler.policies.energy import Passes
from scheduler.policies.qos import task_q
from scheduler.scratch import ScratchView

Excluded = Callable[[Request], Collection[str]]  # hosts a request's constraints rule out
# how many times the simple pass is asked again for one service after its target would have
# turned EED (each time without that target)
MAX_EED_RETRIES = 16


class MoveVerdict(StrEnum):
    PLANNED = "planned"
    NOT_DUE = "not-due"  # less than consolidate_every_s since the last round
    IN_FLIGHT = "in-flight"  # a host is being emptied: one at a time
    NO_CANDIDATE = "no-candidate"  # no on host holds only services
    PINNED = "pinned"  # a service of the host was moved less than move_pin_s ago
    NO_SLACK = "no-slack"  # a service's Q is below phi + alpha
    NO_ROOM = "no-room"  # a service fits on no other on host without turning it EED


@dataclass(frozen=True, slots=True)
class Move:
    """Move service ``task`` from ``source`` to ``target``, with these resources there."""

    task: str
    source: str
    target: str
    cpu_shares: int
    memory: int

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "source": self.source, "target": self.target,
                "cpu_shares": self.cpu_shares, "memory": self.memory}


@dataclass(frozen=True, slots=True)
class MovePlan:
    """Empty ``host`` by ``moves`` (verdict PLANNED), or why nothing moves (``host`` is the
    last host tried, if any)."""

    verdict: MoveVerdict
    detail: str
    host: str | None = None
    moves: tuple[Move, ...] = ()

    @property
    def planned(self) -> bool:
        return self.verdict is MoveVerdict.PLANNED

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "detail": self.detail, "host": self.host,
                "moves": [m.to_json() for m in self.moves]}


def _allocation_key(host: HostView) -> tuple[float, int, str]:
    return (host.overbooking_factor, host.task_count, host.id)


def plan_moves(
    view: ClusterReader,
    now: float,
    *,
    slo: SloTable,
    alpha_s: float,
    phi_s: float,
    on: Collection[str] | None = None,
    pins: Mapping[str, float] | None = None,
    pin_s: float = 1800.0,
    tries: int = 4,
    excluded: Excluded | None = None,
) -> MovePlan:
    """A move plan that empties one on host of services (see the module), or why there is none.

    ``on``: the hosts that are on (None: every host of ``view``); ``pins``: when each task was
    last moved; ``excluded``: the hosts a request's constraints rule out.
    """
    pins = pins or {}
    hosts = [h for h in view.all_hosts() if on is None or h.id in on]
    closed = {h.id for h in view.all_hosts() if on is not None and h.id not in on}
    closed |= {h.id for h in hosts if h.task_count == 0}
    candidates: list[tuple[HostView, list[Task]]] = []
    for host in sorted((h for h in hosts if h.task_count > 0), key=_allocation_key):
        tasks = view.tasks_on(host.id)
        if all(t.type is TaskType.SERVICE for t in tasks):
            candidates.append((host, tasks))
    if not candidates:
        return MovePlan(MoveVerdict.NO_CANDIDATE, "no on host holds only services")
    last = MovePlan(MoveVerdict.NO_CANDIDATE, "no on host holds only services")
    for host, tasks in candidates[:tries]:
        last = _empty_host(view, host, tasks, now, slo=slo, alpha_s=alpha_s, phi_s=phi_s,
                           closed=closed, pins=pins, pin_s=pin_s, excluded=excluded)
        if last.planned:
            return last
    return last


def _empty_host(
    view: ClusterReader, host: HostView, tasks: list[Task], now: float, *, slo: SloTable,
    alpha_s: float, phi_s: float, closed: set[str], pins: Mapping[str, float], pin_s: float,
    excluded: Excluded | None,
) -> MovePlan:
    for task in tasks:
        moved_at = pins.get(task.id)
        if moved_at is not None and now - moved_at < pin_s:
            return MovePlan(MoveVerdict.PINNED, f"{task.id} on {host.id} was moved "
                            f"{now - moved_at:.0f} s ago (pinned for {pin_s:g} s)", host.id)
        q = task_q(task, now, slo, alpha_s)
        if q < phi_s + alpha_s:
            return MovePlan(MoveVerdict.NO_SLACK, f"{task.id} on {host.id} has Q = {q:.1f} s, "
                            f"below phi + alpha = {phi_s + alpha_s:.1f} s", host.id)
    scratch = ScratchView(view)
    moves: list[Move] = []
    # the largest first: they are the hardest to place
    for task in sorted(tasks, key=lambda t: (-t.original_cpu_shares, -t.original_memory, t.id)):
        move = _place_elsewhere(scratch, task, {host.id, *closed}, excluded)
        if move is None:
            return MovePlan(MoveVerdict.NO_ROOM, f"{task.id} on {host.id} fits on no other on "
                            "host by the simple pass without turning it EED", host.id)
        moves.append(move)
    targets = sorted({m.target for m in moves})
    return MovePlan(MoveVerdict.PLANNED, f"empty {host.id} (overbooking factor "
                    f"{host.overbooking_factor:.2f}, {len(tasks)} service(s)) onto "
                    f"{', '.join(targets)}", host.id, tuple(moves))


def _place_elsewhere(scratch: ScratchView, task: Task, closed: set[str],
                     excluded: Excluded | None) -> Move | None:
    request = task.as_request()
    exclude = set(closed)
    if excluded is not None:
        exclude |= set(excluded(request))
    cpu_used, memory_used = predicted_use(task, 1.0)
    bounds = scratch.bounds
    for _ in range(MAX_EED_RETRIES):
        decision = Passes(request, scratch, exclude, Notes(False), False).simple()
        if decision is None or decision.host is None:
            return None
        target = scratch.host(decision.host)
        after = max(target.cpu_util + cpu_used / target.cpu_capacity,
                    target.memory_util + memory_used / target.memory_capacity)
        if bounds.classify(after) is Region.EED:
            exclude.add(target.id)
            continue
        scratch.place(Task(task.id, target.id, task.cls, task.type, decision.cpu_shares,
                           decision.memory, task.original_cpu_shares, task.original_memory,
                           decision.cut_received, task.cpu_util, task.memory_util,
                           task.started_at, task.executed_s, task.pending_s, task.preemptions,
                           task.constraints),
                      cpu_used, memory_used)
        return Move(task.id, task.host, target.id, decision.cpu_shares, decision.memory)
    return None


@dataclass
class Consolidator:
    """The planner's memory between rounds: when it last ran, the host being emptied, and when
    each task was last moved. ``plan`` is side-effect free; ``commit`` starts a plan,
    ``finished`` ends it (at once in the simulator; live, when every moved service runs on its
    new host)."""

    settings: PowerSettings
    slo: SloTable
    alpha_s: float
    phi_s: float = 10.0
    last_at: float | None = None
    in_flight: str | None = None
    pins: dict[str, float] = field(default_factory=dict)

    def due(self, now: float) -> bool:
        return self.last_at is None or now - self.last_at >= self.settings.consolidate_every_s

    def plan(self, view: ClusterReader, now: float, *, on: Collection[str] | None = None,
             excluded: Excluded | None = None) -> MovePlan:
        if self.in_flight is not None:
            return MovePlan(MoveVerdict.IN_FLIGHT, f"{self.in_flight} is being emptied",
                            self.in_flight)
        if not self.due(now):
            return MovePlan(MoveVerdict.NOT_DUE, f"last round at {self.last_at}")
        pin_s = self.settings.move_pin_s
        self.pins = {t: at for t, at in self.pins.items() if now - at < pin_s}
        return plan_moves(view, now, slo=self.slo, alpha_s=self.alpha_s, phi_s=self.phi_s,
                          on=on, pins=self.pins, pin_s=pin_s,
                          tries=self.settings.consolidate_tries, excluded=excluded)

    def ran(self, now: float) -> None:
        """A round ran at ``now`` (whatever it planned): the next is due 60 s later."""
        self.last_at = now

    def commit(self, plan: MovePlan, now: float) -> None:
        """The caller starts ``plan``: its tasks are pinned from ``now``, its host is in flight."""
        self.ran(now)
        if not plan.planned:
            return
        self.in_flight = plan.host
        for move in plan.moves:
            self.pins[move.task] = now

    def finished(self) -> None:
        self.in_flight = None
