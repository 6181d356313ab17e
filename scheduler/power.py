"""The power manager (DESIGN 3.15): which hosts to switch off and on, as data. Pure: the hosts,
the waiting requests, the record of recent requests and the moment come in; decisions go out.
The same code decides in the manager's loop and in the simulator.

Rules:

* **Switch off** a host ``on`` and empty (no task, nothing booked, no suspended task: the
  caller's ``idle_since`` is None otherwise) for ``idle_s``, as long as the hosts left on (and
  booting) keep the spare room, and never below ``min_on`` hosts; the most power-hungry idle
  host first (idle watts descending).
* **Spare room**: the largest request of the last hour plus the CPU and memory requested in the
  busiest ``boot_s`` window of that hour (:class:`domain.power.RecentRequests`), in each
  dimension, against the sum of what the hosts on have free (capacity less allocation) and
  what the booting hosts will have (capacity less what is held for them).
* **Switch on** when a request waits (queued, or would otherwise be refused, or placed only by a
  kill) and a host that is off would take it by the simple pass (DESIGN 3.4), or when the hosts
  on fall below the spare room or ``min_on``: the most efficient host first (the least watts
  per core at 70 % load, from its table; ties by capacity descending, then id).
* A request that a **booting** host will take is **held** for it (it waits rather than
  triggering the kill pass, and its wait counts as pending); one that only an off host would
  take is held for that host, which is switched on. The scheduler's caller refuses a request
  (with ``queue: false``) only when no host, on or off, would take it: ``would_take`` answers
  for the hosts not on.

The manager keeps the holds between calls; its caller applies each decision to its
:class:`domain.power.PowerBook` at once (the simulator), or when its backend switched the host
(live: ``switch_failed`` drops the holds of a switch that failed).

How a caller (the simulator's engine, the manager's loop) drives it, at each moment ``now``::

    for change in book.tick(now):            # timed (simulator); live: book.settle(...)
        meter.set_power_state(change.at, change.host, change.new)
        if change.new is PowerState.ON:
            retry(power.release(change.host))    # the requests held for it, from the queue
    scheduler.set_closed_hosts(book.closed())    # only hosts on take work
    recent.record(now, request.cpu_shares, request.memory)  # each new request, on arrival
    # a request no host on takes (refused, queued, or placed only by a kill):
    hold = power.hold(request, power_hosts(), now, exclude=constrained_out)
    #   hold: it waits in the queue (its wait is pending time) instead of the kill or the
    #   refusal; hold.decision, if any, is applied (book.apply) and sent to the backend;
    #   None, and power.would_take(...) None too: refused as before (queue: false)
    plan = power.plan(power_hosts(), recent, now, waiting=queue_no_host_on_takes)
    for decision in plan.decisions:              # at least every few seconds, and on task ends
        change = book.apply(decision, now)       # live: after (or while) the backend switches
        meter.set_power_state(now, change.host, change.new)

``power_hosts()`` builds one :class:`PowerHost` per host: its view, ``book.get(id)``, when it
last became empty (None while it holds a task, a booking or a suspended task) and its model.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain.classes import ClassTable
from domain.energy import PowerModel
from domain.model import HostView, Request, Task
from domain.power import (
    HostPower,
    PowerAction,
    PowerDecision,
    PowerReason,
    PowerSettings,
    PowerState,
    RecentRequests,
)
from domain.regions import RegionBounds
from scheduler.explain import Notes
from scheduler.policies.energy import Passes
from scheduler.scratch import ScratchView, empty_view

Excluded = Callable[[Request], Collection[str]]  # hosts a request's constraints rule out


@dataclass(frozen=True, slots=True)
class PowerHost:
    """What the power manager reads of one host: its books (capacity, allocation, tasks), its
    power state and since when, when it last became empty (None: it holds a task, a booking
    or a suspended task), and its power model."""

    view: HostView
    power: HostPower
    idle_since: float | None
    model: PowerModel

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def state(self) -> PowerState:
        return self.power.state

    @property
    def efficiency_key(self) -> tuple[float, int, int, str]:
        """Switched on first when smallest: watts per core at 70 % load, then the larger."""
        view = self.view
        return (self.model.watts_per_core(view.cpu_capacity), -view.cpu_capacity,
                -view.memory_capacity, view.id)

    @property
    def hunger_key(self) -> tuple[float, float, str]:
        """Switched off first when smallest: idle watts descending, then the less efficient."""
        view = self.view
        return (-self.model.table.idle_w, -self.model.watts_per_core(view.cpu_capacity), view.id)


@dataclass(frozen=True, slots=True)
class Hold:
    """``request`` waits for ``host``, which boots (``decision`` None) or is switched on for it
    (``decision``)."""

    request: str
    host: str
    decision: PowerDecision | None = None

    def to_json(self) -> dict[str, Any]:
        return {"request": self.request, "host": self.host,
                "decision": None if self.decision is None else self.decision.to_json()}


@dataclass(frozen=True, slots=True)
class SpareRoom:
    """What the hosts on should keep free (``need``) and what they and the booting hosts have
    (``free``), after the plan's decisions; CPU shares and memory bytes."""

    need_cpu: int
    need_memory: int
    free_cpu: int
    free_memory: int
    on: int  # hosts on or booting, after the plan

    @property
    def kept(self) -> bool:
        return self.free_cpu >= self.need_cpu and self.free_memory >= self.need_memory

    def to_json(self) -> dict[str, Any]:
        return {"need_cpu": self.need_cpu, "need_memory": self.need_memory,
                "free_cpu": self.free_cpu, "free_memory": self.free_memory, "on": self.on,
                "kept": self.kept}


@dataclass(frozen=True)
class PowerPlan:
    decisions: tuple[PowerDecision, ...]
    holds: tuple[Hold, ...]  # new holds of this plan (their switch-ons are in ``decisions``)
    spare: SpareRoom

    def switch_on(self) -> list[str]:
        return [d.host for d in self.decisions if d.action is PowerAction.SWITCH_ON]

    def switch_off(self) -> list[str]:
        return [d.host for d in self.decisions if d.action is PowerAction.SWITCH_OFF]

    def to_json(self) -> dict[str, Any]:
        return {"decisions": [d.to_json() for d in self.decisions],
                "holds": [h.to_json() for h in self.holds], "spare": self.spare.to_json()}


@dataclass
class _Round:
    """One call's working state: the hosts, the hosts switched on in it (booting from now)."""

    hosts: dict[str, PowerHost]
    switched_on: list[str] = field(default_factory=list)

    def booting(self, host: PowerHost) -> bool:
        return host.state is PowerState.BOOTING or host.id in self.switched_on


class PowerManager:
    """Decides switches (:meth:`plan`), holds requests for hosts not on yet (:meth:`hold`),
    and says which host not on would take a request (:meth:`would_take`)."""

    def __init__(self, settings: PowerSettings, classes: ClassTable,
                 bounds: RegionBounds) -> None:
        self.settings = settings
        self.classes = classes
        self.bounds = bounds
        self._held: dict[str, tuple[str, Request]] = {}  # request id -> (host, request)

    # -- holds ------------------------------------------------------------------------------

    def held(self) -> dict[str, str]:
        """Every held request, with the host it waits for."""
        return {request_id: host for request_id, (host, _) in self._held.items()}

    def held_for(self, host_id: str) -> list[str]:
        return [r for r, (host, _) in self._held.items() if host == host_id]

    def release(self, host_id: str) -> list[str]:
        """The host is on: the requests held for it, in the order they were held, for the
        caller to place (they wait in its queue); they are held no more."""
        released = self.held_for(host_id)
        for request_id in released:
            del self._held[request_id]
        return released

    def forget(self, request_id: str) -> bool:
        """The request is placed elsewhere, stopped or refused: held no more."""
        return self._held.pop(request_id, None) is not None

    def switch_failed(self, host_id: str) -> list[str]:
        """The backend could not switch the host on: its holds are dropped (the requests wait
        again, and the next plan may hold them for another host)."""
        return self.release(host_id)

    # -- one request --------------------------------------------------------------------------

    def would_take(self, request: Request, hosts: Iterable[PowerHost],
                   exclude: Collection[str] = ()) -> str | None:
        """The host not on that would take ``request`` by the simple pass once on, with what is
        already held for it: a booting host first (the soonest up), else the most efficient off
        host; None when none would (then, if no host on takes it either, it is refused)."""
        return self._choose(request, _Round({h.id: h for h in hosts}), exclude)

    def hold(self, request: Request, hosts: Iterable[PowerHost], now: float,
             exclude: Collection[str] = ()) -> Hold | None:
        """Hold ``request`` (which no host on takes without a kill) for the host not on that
        would take it (:meth:`would_take`), switching that host on if it is off; None when no
        such host exists. The caller applies ``Hold.decision`` at once."""
        known = self._held.get(request.id)
        if known is not None:
            return Hold(request.id, known[0])
        work = _Round({h.id: h for h in hosts})
        return self._hold(request, work, exclude)

    def _hold(self, request: Request, work: _Round, exclude: Collection[str]) -> Hold | None:
        host_id = self._choose(request, work, exclude)
        if host_id is None:
            return None
        self._held[request.id] = (host_id, request)
        if work.booting(work.hosts[host_id]):
            return Hold(request.id, host_id)
        work.switched_on.append(host_id)
        decision = PowerDecision(
            host_id, PowerAction.SWITCH_ON, PowerReason.REQUEST,
            f"request {request.id} ({request.cpu_shares} CPU shares, {request.memory} bytes, "
            f"class {request.cls}) waits, and no host on or booting would take it",
            request=request.id)
        return Hold(request.id, host_id, decision)

    def _choose(self, request: Request, work: _Round, exclude: Collection[str]) -> str | None:
        booting = sorted((h for h in work.hosts.values() if work.booting(h)),
                         key=lambda h: (h.power.since, h.efficiency_key))
        off = sorted((h for h in work.hosts.values()
                      if h.state is PowerState.OFF and h.id not in work.switched_on),
                     key=lambda h: h.efficiency_key)
        for host in (*booting, *off):
            if host.id not in exclude and self._takes(request, host):
                return host.id
        return None

    def _takes(self, request: Request, host: PowerHost) -> bool:
        """The simple pass (the real one) over this host alone, as it will be once on: empty,
        with what is held for it booked."""
        scratch = ScratchView(None, [empty_view(host.view, self.bounds)], classes=self.classes,
                              bounds=self.bounds)
        for request_id in self.held_for(host.id):
            if request_id != request.id:
                held = self._held[request_id][1]
                scratch.place(Task(held.id, host.id, held.cls, held.type, held.cpu_shares,
                                   held.memory, held.cpu_shares, held.memory))
        return Passes(request, scratch, (), Notes(False), False).simple() is not None

    # -- a round ------------------------------------------------------------------------------

    def plan(self, hosts: Iterable[PowerHost], recent: RecentRequests, now: float,
             waiting: Sequence[Request] = (), excluded: Excluded | None = None) -> PowerPlan:
        """The switches due at ``now``: holds (and switch-ons) for the ``waiting`` requests (in
        the caller's order: its queue's), then switch-ons for ``min_on`` and the spare room,
        then switch-offs of idle hosts the spare room can spare."""
        work = _Round({h.id: h for h in hosts})
        self._drop_stale_holds(work)
        decisions: list[PowerDecision] = []
        holds: list[Hold] = []
        for request in waiting:
            if request.id in self._held:
                continue
            hold = self._hold(request, work, excluded(request) if excluded else ())
            if hold is not None:
                holds.append(hold)
                if hold.decision is not None:
                    decisions.append(hold.decision)
        need = recent.spare_need(now, self.settings.spare_window_share)
        decisions += self._switch_on_for_room(work, need)
        decisions += self._switch_off_idle(work, need, now)
        free_cpu, free_memory = self._free(work)
        return PowerPlan(tuple(decisions), tuple(holds),
                         SpareRoom(need[0], need[1], free_cpu, free_memory, self._on_count(work)))

    def _drop_stale_holds(self, work: _Round) -> None:
        """Holds for a host no longer booting (it is on: the caller should have released them;
        or it is gone or switched off again) are dropped: their requests wait again."""
        for request_id, (host_id, _) in list(self._held.items()):
            host = work.hosts.get(host_id)
            if host is None or host.state is not PowerState.BOOTING:
                del self._held[request_id]

    def _on_count(self, work: _Round) -> int:
        return sum(1 for h in work.hosts.values()
                   if h.state is PowerState.ON or work.booting(h))

    def _host_free(self, host: PowerHost, work: _Round) -> tuple[int, int]:
        view = host.view
        if host.state is PowerState.ON:
            return (max(0, view.cpu_capacity - view.cpu_allocated),
                    max(0, view.memory_capacity - view.memory_allocated))
        if work.booting(host):
            held = [self._held[r][1] for r in self.held_for(host.id)]
            return (max(0, view.cpu_capacity - sum(r.cpu_shares for r in held)),
                    max(0, view.memory_capacity - sum(r.memory for r in held)))
        return (0, 0)

    def _free(self, work: _Round) -> tuple[int, int]:
        cpu = memory = 0
        for host in work.hosts.values():
            host_cpu, host_memory = self._host_free(host, work)
            cpu += host_cpu
            memory += host_memory
        return cpu, memory

    def _switch_on_for_room(self, work: _Round, need: tuple[int, int]) -> list[PowerDecision]:
        decisions: list[PowerDecision] = []
        off = sorted((h for h in work.hosts.values()
                      if h.state is PowerState.OFF and h.id not in work.switched_on),
                     key=lambda h: h.efficiency_key)
        for host in off:
            on = self._on_count(work)
            free_cpu, free_memory = self._free(work)
            if on < self.settings.min_on:
                reason, detail = PowerReason.MIN_ON, (
                    f"{on} host(s) on or booting, fewer than min_on {self.settings.min_on}")
            elif free_cpu < need[0] or free_memory < need[1]:
                reason, detail = PowerReason.SPARE_ROOM, (
                    f"the hosts on keep {free_cpu} CPU shares and {free_memory} bytes free, "
                    f"less than the spare room of {need[0]} and {need[1]}")
            else:
                break
            work.switched_on.append(host.id)
            decisions.append(PowerDecision(host.id, PowerAction.SWITCH_ON, reason, detail))
        return decisions

    def _switch_off_idle(self, work: _Round, need: tuple[int, int],
                         now: float) -> list[PowerDecision]:
        idle_s = self.settings.idle_s
        idle = sorted((h for h in work.hosts.values()
                       if h.state is PowerState.ON and h.view.task_count == 0
                       and h.idle_since is not None and now - h.idle_since >= idle_s),
                      key=lambda h: h.hunger_key)
        decisions: list[PowerDecision] = []
        on = self._on_count(work)
        free_cpu, free_memory = self._free(work)
        for host in idle:
            host_cpu, host_memory = self._host_free(host, work)
            left_cpu, left_memory = free_cpu - host_cpu, free_memory - host_memory
            if on - 1 < self.settings.min_on or left_cpu < need[0] or left_memory < need[1]:
                continue
            on -= 1
            free_cpu, free_memory = left_cpu, left_memory
            idle_since = host.idle_since if host.idle_since is not None else now
            work.hosts[host.id] = PowerHost(host.view, HostPower(PowerState.SHUTTING_DOWN, now),
                                            None, host.model)
            decisions.append(PowerDecision(
                host.id, PowerAction.SWITCH_OFF, PowerReason.IDLE,
                f"empty for {now - idle_since:.0f} s (idle_s {idle_s:g}); the "
                f"{on} host(s) left on keep {left_cpu} CPU shares and {left_memory} bytes "
                f"free, the spare room being {need[0]} and {need[1]}"))
        return decisions
