"""The power manager in the simulator (DESIGN 3.15): the same pure code as the live manager
(scheduler/power.py, scheduler/consolidation.py) decides; this module plays the world around it.

* Hosts are ``on``, ``shutting-down``, ``off`` or ``booting``; :class:`domain.power.PowerBook`
  times the transitions (``shutdown_s``, ``boot_s``) and the engine ticks it at their exact
  moments, so the energy as drawn (the recorder's meter, ``on_power_state``) is exact. Only
  ``on`` hosts take work (``Scheduler.set_closed_hosts``).
* A new request that no host on takes without a kill, and that a host not on would take by the
  simple pass, is held for it (``PowerManager.hold``): it waits, outside the scheduler's queue,
  instead of triggering the kill pass or a refusal; its host is switched on if it is off. When
  the host is on, its held requests are submitted (asking to queue); every second of the wait
  is pending time in their availability (the recorder has them queued) and the wait is counted
  (``boot_waits``). One that a host on takes meanwhile (a task ended) is placed there at the
  next power round.
* Every ``POWER_ROUND_S`` a power round runs: the plan (``PowerManager.plan``: holds for the
  head of the scheduler's queue, switch-ons for ``min_on`` and the spare room, switch-offs of
  hosts empty for ``idle_s``), then, for ``energy`` and ``qos`` with consolidation on, every
  ``consolidate_every_s`` a consolidation round: the services of one host move make-before-
  break (at once here: the run goes on, on its new host, with its original resources; its
  service level is unchanged), so that host can be switched off.
* Every switch and every move is a typed event (domain/events.py: the live manager's
  ``SwitchingOff``, ``SwitchedOff``, ``SwitchingOn``, ``SwitchedOn``, and ``Moved``), kept in
  :attr:`SimPower.events`.

Several clusters (``SimConfig.clusters``) are not supported with the power manager yet.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from fractions import Fraction
from typing import Protocol

from domain.energy import PowerModel
from domain.events import Moved, SwitchedOff, SwitchedOn, SwitchingOff, SwitchingOn
from domain.model import Request, Task
from domain.power import (
    PowerBook,
    PowerChange,
    PowerDecision,
    PowerSettings,
    PowerState,
    RecentRequests,
)
from scheduler.consolidation import Consolidator, Move
from scheduler.constraints import ruled_out
from scheduler.power import PowerHost, PowerManager
from scheduler.preview import Preview
from scheduler.service import Outcome
from sim.routing import Cluster

# A power round (the plan, and consolidation when due) runs this often (simulated seconds).
POWER_ROUND_S = 10.0
# The head of the scheduler's queue the plan considers for holds, per round.
PLAN_WAITING = 8
# The policies that consolidate (DESIGN 3.15).
CONSOLIDATING = frozenset({"energy", "qos"})


class PowerWorld(Protocol):
    """What the power manager needs of the engine."""

    def follow_outcome(self, cluster: Cluster, outcome: Outcome, t: float,
                       new_id: str | None = None) -> None: ...

    def move_run(self, task_id: str, target: str, cpu_shares: int, memory: int,
                 t: float) -> None: ...

    def wake_at(self, t: float) -> None: ...


class SimPower:
    """The power book, manager, recent requests and consolidator of one simulated cluster, and
    the requests held for hosts not on yet."""

    def __init__(self, settings: PowerSettings, cluster: Cluster,
                 models: Mapping[str, PowerModel], *, policy: str, consolidate: bool,
                 record_state: Callable[[float, str, PowerState], None],
                 record_move: Callable[[float, str, str, str], None],
                 record_boot_wait: Callable[[float, str, float], None],
                 queued: Callable[[float, str], None]) -> None:
        scheduler = cluster.scheduler
        store = cluster.store
        self.settings = settings
        self.cluster = cluster
        self.models = models
        host_ids = list(cluster.hosts)
        self.book = PowerBook.of(settings, host_ids, now=0.0, timed=True)
        self.manager = PowerManager(settings, store.classes, store.bounds)
        self.recent = RecentRequests.of(settings)
        phi_s = float(getattr(scheduler.policy, "safety_margin_s", 10.0))
        self.consolidator = (Consolidator(settings, scheduler.slo, scheduler.alpha_s, phi_s)
                             if consolidate and policy in CONSOLIDATING else None)
        self.idle_since: dict[str, float | None] = dict.fromkeys(host_ids, 0.0)
        # held outside the scheduler's queue, with how long each is expected to run
        self.held_new: dict[str, tuple[Request, float | None]] = {}
        self.held_at: dict[str, float] = {}  # every held request: since when
        self.events: list[SwitchingOff | SwitchedOff | SwitchingOn | SwitchedOn | Moved] = []
        self._record_state = record_state
        self._record_move = record_move
        self._record_boot_wait = record_boot_wait
        self._queued = queued

    # -- what the manager reads -------------------------------------------------------------

    def note_host(self, t: float, host_id: str, tasks: int) -> None:
        """The host holds ``tasks`` tasks from ``t`` (it became empty, or not)."""
        if tasks:
            self.idle_since[host_id] = None
        elif self.idle_since[host_id] is None:
            self.idle_since[host_id] = t

    def hosts(self) -> list[PowerHost]:
        out: list[PowerHost] = []
        book = self.book
        for view in self.cluster.store.all_hosts():
            power = book.get(view.id)
            idle = self.idle_since[view.id]
            if idle is not None:
                idle = max(idle, power.since)
            out.append(PowerHost(view, power, idle, self.models[view.id]))
        return out

    def excluded(self, request: Request) -> Collection[str]:
        if not request.constraints:
            return ()
        return ruled_out(request, self.cluster.hosts, self.cluster.scheduler.node_facts)

    # -- new requests -----------------------------------------------------------------------

    def submit(self, world: PowerWorld, request: Request, t: float, queue: bool | None,
               expected_s: float | None = None) -> Outcome | None:
        """Submit a new request, or hold it for a host not on (None: held; it is queued for
        the recorder). A request admission control would refuse (DESIGN 3.13) is not held:
        it is submitted, and refused at the door."""
        self.recent.record(t, request.cpu_shares, request.memory)
        scheduler = self.cluster.scheduler
        if len(self.book.closed()) == 0:  # every host on: nothing to wait for
            return scheduler.submit(request, t, queue=queue, expected_s=expected_s)
        preview = scheduler.preview(request, t)
        decision = preview.decision
        if decision.placed and not decision.kills and not decision.suspends:
            return scheduler.submit(request, t, queue=queue, preview=preview,
                                    expected_s=expected_s)
        hold = None
        if scheduler.admission_refusal(request, queue=True) is None:
            hold = self.manager.hold(request, self.hosts(), t, exclude=self.excluded(request))
        if hold is None:
            return scheduler.submit(request, t, queue=queue, preview=preview,
                                    expected_s=expected_s)
        if hold.decision is not None:
            self._apply(world, [hold.decision], t)
        self.held_new[request.id] = (request, expected_s)
        self.held_at[request.id] = t
        self._queued(t, request.id)
        return None

    # -- rounds -----------------------------------------------------------------------------

    def tick(self, world: PowerWorld, t: float) -> None:
        """End the transitions due by ``t``; a host that came on takes what was held for it."""
        changes = self.book.tick(t)
        if not changes:
            return
        for change in changes:
            self._changed(change)
        self.cluster.scheduler.set_closed_hosts(self.book.closed())
        for change in changes:
            if change.new is PowerState.ON:
                self._release(world, self.manager.release(change.host), t)
        self._wake(world)

    def round(self, world: PowerWorld, t: float) -> None:
        """A power round: held requests a host on takes now are placed, then the plan, then
        consolidation when due."""
        self.tick(world, t)
        self._place_held(world, t)
        store = self.cluster.store
        for request_id in list(self.manager.held()):  # placed or ended meanwhile
            if request_id not in self.held_new and not store.is_pending(request_id):
                self.manager.forget(request_id)
                self.held_at.pop(request_id, None)
        waiting = [entry.request for entry in store.pending()[:PLAN_WAITING]]
        plan = self.manager.plan(self.hosts(), self.recent, t, waiting=waiting,
                                 excluded=self.excluded)
        for hold in plan.holds:
            self.held_at.setdefault(hold.request, t)
        self._apply(world, list(plan.decisions), t)
        if self.consolidator is not None and self.consolidator.due(t):
            self._consolidate(world, t)

    def _place_held(self, world: PowerWorld, t: float) -> None:
        scheduler = self.cluster.scheduler
        for request_id, (request, _) in list(self.held_new.items()):
            preview = scheduler.preview(request, t)
            decision = preview.decision
            if decision.placed and not decision.kills and not decision.suspends:
                self.manager.forget(request_id)
                self._submit_held(world, request, t, preview)

    def _release(self, world: PowerWorld, request_ids: list[str], t: float) -> None:
        retry = False
        for request_id in request_ids:
            held = self.held_new.get(request_id)
            if held is None:
                retry = True  # it waits in the scheduler's queue
                self._boot_waited(request_id, t)
                continue
            self._submit_held(world, held[0], t)
        if retry:
            cluster = self.cluster
            world.follow_outcome(cluster, cluster.scheduler.retry_pending(t), t)

    def _submit_held(self, world: PowerWorld, request: Request, t: float,
                     preview: Preview | None = None) -> None:
        """Submit a held request, asking to queue (held, it was waiting already)."""
        _, expected_s = self.held_new.pop(request.id)
        self._boot_waited(request.id, t)
        cluster = self.cluster
        outcome = cluster.scheduler.submit(request, t, queue=True, preview=preview,
                                           expected_s=expected_s)
        world.follow_outcome(cluster, outcome, t, request.id)

    def _boot_waited(self, request_id: str, t: float) -> None:
        since = self.held_at.pop(request_id, None)
        if since is not None:
            self._record_boot_wait(t, request_id, t - since)

    def _apply(self, world: PowerWorld, decisions: list[PowerDecision], t: float) -> None:
        if not decisions:
            return
        for decision in decisions:
            change = self.book.apply(decision, t)
            self._changed(change, decision.detail)
        self.cluster.scheduler.set_closed_hosts(self.book.closed())
        self._wake(world)

    def _changed(self, change: PowerChange, detail: str = "") -> None:
        self._record_state(change.at, change.host, change.new)
        # the live manager's kinds (manager/switching.py), one per state entered
        reason, new = detail or f"{change.host} is {change.new.value}", change.new
        if new is PowerState.SHUTTING_DOWN:
            self.events.append(SwitchingOff(reason=reason, t=change.at, host=change.host,
                                            power_reason=change.reason or None))
        elif new is PowerState.BOOTING:
            self.events.append(SwitchingOn(reason=reason, t=change.at, host=change.host,
                                           power_reason=change.reason or None))
        elif new is PowerState.OFF:
            self.events.append(SwitchedOff(reason=reason, t=change.at, host=change.host))
        else:
            self.events.append(SwitchedOn(reason=reason, t=change.at, host=change.host))

    def _wake(self, world: PowerWorld) -> None:
        due = self.book.next_change_at()
        if due is not None:
            world.wake_at(due)

    # -- consolidation ----------------------------------------------------------------------

    def _consolidate(self, world: PowerWorld, t: float) -> None:
        consolidator = self.consolidator
        assert consolidator is not None
        store = self.cluster.store
        plan = consolidator.plan(store, t, on=self.book.in_state(PowerState.ON),
                                 excluded=self.excluded)
        consolidator.commit(plan, t)
        for move in plan.moves:
            self._move(world, move, t)
        consolidator.finished()

    def _move(self, world: PowerWorld, move: Move, t: float) -> None:
        """Make-before-break: the service runs on ``move.target`` from ``t`` with the
        resources the simple pass gave it, and never stopped (its history is unchanged)."""
        store = self.cluster.store
        task = store.end_task(move.task)
        store.load_task(Task(task.id, move.target, task.cls, task.type, move.cpu_shares,
                             move.memory, task.original_cpu_shares, task.original_memory,
                             Fraction(0), task.cpu_util, task.memory_util, task.started_at,
                             task.executed_s, task.pending_s, task.preemptions,
                             task.constraints))
        world.move_run(move.task, move.target, move.cpu_shares, move.memory, t)
        self._record_move(t, move.task, move.source, move.target)
        self.events.append(Moved(
            reason=f"consolidation: {move.source} emptied make-before-break", t=t,
            host=move.target, source=move.source, cpu_shares=move.cpu_shares,
            memory=move.memory))
