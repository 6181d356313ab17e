"""The power manager in the live service (DESIGN 3.15): hosts switched off when idle and on
when needed, through a backend (manager/power_backends.py).

The decisions are the pure power manager's (scheduler/power.py), the same code the simulator
runs; this module feeds it the registry, the queue and the clock, keeps each host's power state
(:class:`domain.power.PowerBook`, untimed: a switch ends when its backend says so) and carries
out its decisions:

* every tick (the reconciliation's interval, on the scheduling loop): each host's idle time,
  then a plan (switch-offs of hosts empty for ``idle_s`` that the spare room can spare,
  switch-ons for the waiting requests, ``min_on`` and the spare room);
* a request that no host on takes without a kill, but a host not on yet would, waits for that
  host (the scheduler asks :meth:`PowerControl.hold` through its ``power`` gate), which is
  switched on at once when it is off;
* a switch runs on a thread of its own (a backend blocks: a node's drain, an engine's start, a
  command's timeout) and reports back to the loop; the host is closed to every pass from the
  moment it is switched off until it is on again, and the reconciliation does not count a host
  switched off as a lost node (``exempt``);
* with ``advise`` nothing is switched: the hosts the power manager would switch off are kept
  as advice (``GET /hosts``, a ``switch-advised`` event when a host is first advised);
  with ``none`` nothing is planned.

Each host's state and since when are kept in Redis (:class:`PowerStates`), so a manager that
restarts knows which Down nodes it switched off. Every switch is a typed event (domain/events.py:
switching-off, switched-off, switching-on, switched-on, switch-failed, switch-advised).

=================================  ==============================================================
 key                                holds
=================================  ==============================================================
 ``{p}:power:states``               hash: host id -> {"state", "since"} of hosts not on
=================================  ==============================================================
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from domain.constraints import NodeFacts
from domain.energy import PowerModel
from domain.errors import FencedError, GreenSwarmError, NotFoundError
from domain.events import (
    PowerEvent,
    SwitchAdvised,
    SwitchedOff,
    SwitchedOn,
    SwitchFailed,
    SwitchingOff,
    SwitchingOn,
)
from domain.model import Request
from domain.power import (
    HostPower,
    PowerAction,
    PowerBook,
    PowerDecision,
    PowerSettings,
    PowerState,
    RecentRequests,
)
from host_registry.keys import HostKeys
from host_registry.redis_store import RedisStore, redis_errors
from manager.loop import SchedulingLoop
from manager.power_backends import (
    BackendKind,
    PowerBackend,
    PowerResult,
    PowerSwitchError,
    PowerTarget,
)
from manager.records import RequestRecords
from scheduler.constraints import ruled_out
from scheduler.power import PowerHost, PowerManager
from scheduler.service import Scheduler

log = logging.getLogger(__name__)
FAILED_BACKOFF_S = 60.0  # a host whose switch failed is not switched again for this long


# a power state written (or, for a host on, deleted) unless a newer lease token was given
# (DESIGN 13): KEYS states, fence; ARGV host, state json ('' for on), token ('' for none)
SAVE_LUA = """
if ARGV[3] ~= '' and tonumber(ARGV[3]) < tonumber(redis.call('GET', KEYS[2]) or '0') then
  return -1
end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1])
else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
"""


class PowerStates:
    """Each host's power state when it is not ``on``, kept in Redis (a restart keeps them);
    written under the leader's lease token, like every registry write."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._redis: Any = client  # decode_responses=True
        self._key = f"{prefix}:power:states"
        self._fence_key = HostKeys(prefix).fence
        self._fence: int | None = None
        self._save = self._redis.register_script(SAVE_LUA)

    def fence(self, token: int | None) -> None:
        """Writes from now on carry this lease token (as RedisStore.fence)."""
        self._fence = token

    def load(self) -> dict[str, HostPower]:
        with redis_errors():
            raw = self._redis.hgetall(self._key)
        out: dict[str, HostPower] = {}
        for host_id, text in raw.items():
            try:
                obj = json.loads(text)
                out[host_id] = HostPower(PowerState(obj["state"]), float(obj["since"]))
            except (ValueError, KeyError, TypeError):
                log.warning("power state of host %s unreadable: %r (taken as on)", host_id, text)
        return out

    def save(self, host_id: str, power: HostPower) -> None:
        text = ("" if power.state is PowerState.ON
                else json.dumps({"state": power.state.value, "since": power.since}))
        token = "" if self._fence is None else str(self._fence)
        with redis_errors():
            written = self._save(keys=[self._key, self._fence_key], args=[host_id, text, token])
        if written == -1:
            raise FencedError(f"this manager's lease token {self._fence} is no longer the "
                              "newest: another manager leads, and this power state was not "
                              "written")


@dataclass(frozen=True)
class PowerParts:
    """What the power control reads and tells, from the manager's other parts."""

    store: RedisStore
    scheduler: Scheduler
    records: RequestRecords
    loop: SchedulingLoop
    clock: Callable[[], float]
    queue_retry: Callable[[], None]  # a host came on: what waits may fit
    host_name: Callable[[str], str]
    closed_changed: Callable[[], None]  # the hosts not on changed: close them to the passes
    node_ready: Callable[[str], bool]  # the host's node is Ready and active in the Swarm
    sync_passes: Callable[[], int]  # the reconciliation's passes so far


class PowerControl:
    """The power manager at work in the live service; every method but :meth:`exempt`,
    :meth:`state_of` and :meth:`host_json` runs on the scheduling loop."""

    def __init__(self, settings: PowerSettings, backend: PowerBackend, model: PowerModel,
                 parts: PowerParts, states: PowerStates) -> None:
        self.settings = settings
        self.backend = backend
        self.model = model
        self.parts = parts
        self.states = states
        store = parts.store
        self.book = PowerBook.of(settings, now=parts.clock(), timed=False)
        self.manager = PowerManager(settings, store.classes, store.bounds)
        self.recent = RecentRequests.of(settings)
        self.idle_since: dict[str, float] = {}
        self.advice: dict[str, PowerDecision] = {}  # advise: what it would switch
        self.last: dict[str, PowerResult] = {}  # each host's last backend result
        self.facts: dict[str, NodeFacts] = {}  # the nodes' last facts (an off node has none)
        self.switches = {"on": 0, "off": 0, "failed": 0}
        self._lock = threading.Lock()  # the book's states, read by other threads
        self._busy: set[str] = set()  # hosts whose backend call runs
        # switched on by the backend, its node not Ready yet: since when, and the
        # reconciliation's pass count then (a node is Ready only as a later pass saw it: the
        # Swarm may still list a machine just switched off as Ready)
        self._booted: dict[str, tuple[float, int]] = {}
        self.ready_timeout_s = 180.0  # a node switched on is Ready within this, or it failed
        self._failed_at: dict[str, float] = {}  # hosts whose last switch failed: when
        self._snapshot: dict[str, HostPower] = {}
        # the hosts never idle, whatever their bookings: the one consolidation empties (its old
        # containers run until the new ones do; manager/moving.py)
        self.keep_on: Callable[[], frozenset[str]] = frozenset

    # -- start and the scheduler's gate ------------------------------------------------------

    def load(self) -> None:
        """The states kept in Redis, as a previous run or the previous leader left them (hosts
        switched off stay off); this manager's own view before is dropped."""
        now = self.parts.clock()
        self.book = PowerBook.of(self.settings, now=now, timed=False)
        self._booted.clear()
        for host_id, power in self.states.load().items():
            # a switch the previous run did not see end: the host counts as off (a waiting
            # request or the spare room switches it on again)
            self.book.add_host(host_id, power.since, PowerState.OFF)
        for host in self.parts.store.all_hosts():
            self.book.add_host(host.id, now)
        self._publish()
        self.parts.closed_changed()

    def arrived(self, request: Request, now: float) -> None:
        # a clock that went back: the record keeps its order, this request is left out
        with contextlib.suppress(GreenSwarmError):
            self.recent.record(now, request.cpu_shares, request.memory)

    def ended(self, cpu_shares: int, memory: int, now: float) -> None:
        with contextlib.suppress(GreenSwarmError):  # as arrived: a clock that went back
            self.recent.release(now, cpu_shares, memory)

    def hold(self, request: Request, now: float) -> str | None:
        if self.backend.kind is BackendKind.NONE or not self.backend.switches:
            return None
        hold = self.manager.hold(request, self._plannable(now), now,
                                 exclude=self._excluded(request))
        if hold is None:
            return None
        if hold.decision is not None:
            self._start(hold.decision, now)
        return hold.host

    # -- the tick ----------------------------------------------------------------------------

    def tick(self) -> None:
        """One round: idle times, then the plan's switches (or advice)."""
        if self.backend.kind is BackendKind.NONE:
            return
        now = self.parts.clock()
        self._settle_booted(now)
        self.facts.update(self.parts.scheduler.node_facts)
        hosts = self._plannable(now)
        pending = [e.request for e in self.parts.store.pending()]
        waiting_ids = {r.id for r in pending}
        for request_id in list(self.manager.held()):
            if request_id not in waiting_ids:
                self.manager.forget(request_id)  # placed elsewhere, stopped or refused
        waiting = pending if self.backend.switches else []
        plan = self.manager.plan(hosts, self.recent, now, waiting=waiting,
                                 excluded=self._excluded)
        if not self.backend.switches:
            self._advise(plan.decisions, now)
            return
        for decision in plan.decisions:
            self._start(decision, now)

    def _plannable(self, now: float) -> list[PowerHost]:
        """The hosts the power manager may decide on: all but those whose switch failed in the
        last ``FAILED_BACKOFF_S`` (switched again and again, a host that does not come would
        be asked for every round)."""
        for host_id, at in list(self._failed_at.items()):
            if now - at >= FAILED_BACKOFF_S:
                del self._failed_at[host_id]
        return [h for h in self._power_hosts(now) if h.id not in self._failed_at]

    def _power_hosts(self, now: float) -> list[PowerHost]:
        views = list(self.parts.store.all_hosts())
        kept = self.keep_on()
        out: list[PowerHost] = []
        for view in views:
            power = self.book.add_host(view.id, now)
            if power.state is PowerState.ON and view.task_count == 0 and view.id not in kept:
                idle = self.idle_since.setdefault(view.id, max(now, power.since))
            else:
                self.idle_since.pop(view.id, None)
                idle = None
            out.append(PowerHost(view, power, idle, self.model))
        known = {v.id for v in views}
        for host_id, _ in self.book.items():
            if host_id not in known:
                self.book.remove_host(host_id)
                self.idle_since.pop(host_id, None)
        self._publish()  # hosts added or removed: the views count them (GET /power)
        return out

    def on_hosts(self) -> frozenset[str]:
        """The hosts that are on (the candidates of every pass and of consolidation)."""
        return frozenset(self.book.in_state(PowerState.ON))

    def excluded(self, request: Request) -> dict[str, str]:
        """The hosts ``request``'s constraints rule out, with why (the nodes' last facts)."""
        return self._excluded(request)

    def _excluded(self, request: Request) -> dict[str, str]:
        if not request.constraints:
            return {}
        return ruled_out(request, [h for h, _ in self.book.items()], self.facts)

    def _advise(self, decisions: tuple[PowerDecision, ...], now: float) -> None:
        advice = {d.host: d for d in decisions}
        for host_id, decision in advice.items():
            if host_id not in self.advice:
                self._event(host_id, SwitchAdvised(
                    f"advise: would {decision.action.value} {self.parts.host_name(host_id)}: "
                    f"{decision.detail}", action=decision.action.value,
                    power_reason=decision.reason.value), now)
        self.advice = advice

    # -- switches ----------------------------------------------------------------------------

    def _start(self, decision: PowerDecision, now: float) -> None:
        """Start a switch: the book's state now, the event, the backend on a thread."""
        host_id = decision.host
        if host_id in self._busy:
            return
        try:
            change = self.book.apply(decision, now)
        except GreenSwarmError as exc:
            log.warning("power: %s", exc)
            return
        self._changed(host_id)
        name = self.parts.host_name(host_id)
        kind = self.backend.kind.value
        if decision.action is PowerAction.SWITCH_OFF:
            event: PowerEvent = SwitchingOff(
                f"switching {name} off: {decision.detail}", power_reason=decision.reason.value,
                backend=kind)
        else:
            event = SwitchingOn(f"switching {name} on: {decision.detail}",
                                power_reason=decision.reason.value, for_request=decision.request,
                                backend=kind)
        self._event(host_id, event, change.at)
        self._busy.add(host_id)
        target = PowerTarget(host_id, name, self._address(host_id))
        threading.Thread(target=self._run, args=(decision.action, target),
                         name=f"power-{host_id[:12]}", daemon=True).start()

    def _address(self, host_id: str) -> str:
        try:
            return self.parts.store.host(host_id).address
        except NotFoundError:
            return ""

    def _run(self, action: PowerAction, target: PowerTarget) -> None:
        """On the switch's own thread: the backend's call, then its result to the loop."""
        call = (self.backend.switch_off if action is PowerAction.SWITCH_OFF
                else self.backend.switch_on)
        try:
            result: PowerResult | Exception = call(target)
        except PowerSwitchError as exc:
            result = exc
        except Exception as exc:  # any failure of a backend ends the switch
            log.exception("power: %s of %s failed", action.value, target.label())
            result = exc
        self.parts.loop.post(lambda: self._switched(action, target, result))

    def _switched(self, action: PowerAction, target: PowerTarget,
                  result: PowerResult | Exception) -> None:
        """On the loop: the switch is over; the host's state, its event, what waits for it."""
        host_id = target.id
        self._busy.discard(host_id)
        now = self.parts.clock()
        name = self.parts.host_name(host_id)
        try:
            self.book.get(host_id)
        except NotFoundError:
            return  # the host left meanwhile
        if isinstance(result, PowerResult):
            self.last[host_id] = result
            fields: dict[str, Any] = {
                "backend": result.backend.value, "exit_status": result.exit_status,
                "output": result.output or None, "duration_s": round(result.duration_s, 3)}
            if action is PowerAction.SWITCH_OFF:
                self.book.settle(host_id, PowerState.OFF, now, "switched off")
                self.switches["off"] += 1
                self._event(host_id, SwitchedOff(f"{name} is off: {result.detail}", **fields),
                            now)
                self._changed(host_id)
            else:  # booting until the Swarm has its node Ready and active again
                self._booted[host_id] = (now, self.parts.sync_passes())
                self._settle_booted(now)
            return
        self.switches["failed"] += 1
        self._failed_at[host_id] = now
        failed = result.result if isinstance(result, PowerSwitchError) else None
        if action is PowerAction.SWITCH_OFF:
            state = PowerState.ON  # it was drained, perhaps: the reconciliation sees to it
        else:
            state = PowerState.OFF
            self.manager.switch_failed(host_id)  # what waited for it waits again
        self.book.settle(host_id, state, now, "switch failed")
        if state is PowerState.ON:
            self.idle_since[host_id] = now
        self._event(host_id, SwitchFailed(
            f"could not switch {name} {'off' if action is PowerAction.SWITCH_OFF else 'on'}: "
            f"{result}", backend=self.backend.kind.value,
            op="off" if action is PowerAction.SWITCH_OFF else "on", state=state.value,
            exit_status=None if failed is None else failed.exit_status,
            output=None if failed is None else failed.output or None,
            duration_s=None if failed is None else round(failed.duration_s, 3)), now)
        self._changed(host_id)
        self.parts.queue_retry()

    def _settle_booted(self, now: float) -> None:
        """Hosts switched on whose node the Swarm has Ready and active: on, and what was held
        for them is retried."""
        passes = self.parts.sync_passes()
        for host_id, (since, seen) in sorted(self._booted.items()):
            if passes <= seen or not self.parts.node_ready(host_id):
                if now - since > self.ready_timeout_s:
                    self._never_ready(host_id, now)
                continue
            del self._booted[host_id]
            try:
                self.book.get(host_id)
            except NotFoundError:
                continue
            result = self.last.get(host_id)
            self.book.settle(host_id, PowerState.ON, now, "switched on")
            self.switches["on"] += 1
            self.idle_since[host_id] = now  # idle_s counts from now on
            self.manager.release(host_id)
            self._event(host_id, SwitchedOn(
                f"{self.parts.host_name(host_id)} is on and Ready"
                + (f": {result.detail}" if result is not None else ""),
                backend=self.backend.kind.value,
                exit_status=None if result is None else result.exit_status,
                output=None if result is None else result.output or None,
                duration_s=None if result is None else round(result.duration_s, 3)), now)
            self._changed(host_id)
            self.parts.queue_retry()

    def _never_ready(self, host_id: str, now: float) -> None:
        """Switched on, but its node is not Ready and active within ``ready_timeout_s``: the
        switch failed; the host counts as off, what waited for it waits again."""
        del self._booted[host_id]
        self.switches["failed"] += 1
        self._failed_at[host_id] = now
        self.manager.switch_failed(host_id)
        self.book.settle(host_id, PowerState.OFF, now, "never Ready")
        self._event(host_id, SwitchFailed(
            f"{self.parts.host_name(host_id)} was switched on, but its node is not Ready and "
            f"active in the Swarm after {self.ready_timeout_s:g} s: taken as off",
            backend=self.backend.kind.value, op="on", state=PowerState.OFF.value), now)
        self._changed(host_id)
        self.parts.queue_retry()

    def _changed(self, host_id: str) -> None:
        power = self.book.get(host_id)
        try:
            self.states.save(host_id, power)
        except GreenSwarmError as exc:
            log.warning("power: the state of %s not kept: %s", host_id, exc)
        self._publish()
        self.parts.closed_changed()

    def _publish(self) -> None:
        with self._lock:
            self._snapshot = dict(self.book.items())

    def _event(self, host_id: str, event: PowerEvent, t: float) -> None:
        event = dataclasses.replace(event, host=host_id,
                                    host_name=self.parts.host_name(host_id))
        try:
            self.parts.records.host_event(host_id, event, t)
        except GreenSwarmError as exc:
            log.warning("power: event of %s not written: %s", host_id, exc)
        log.info("power: %s", event.reason)

    # -- read by any thread --------------------------------------------------------------------

    def closed(self) -> frozenset[str]:
        """The hosts no pass may use: those not on."""
        with self._lock:
            return frozenset(h for h, p in self._snapshot.items()
                             if p.state is not PowerState.ON)

    def exempt(self) -> frozenset[str]:
        """The hosts whose node the power manager switched (shutting down, off, booting): not
        lost, not down, never retired while so."""
        return self.closed()

    def state_of(self, host_id: str) -> PowerState:
        with self._lock:
            power = self._snapshot.get(host_id)
        return PowerState.ON if power is None else power.state

    def host_json(self, host_id: str) -> dict[str, Any]:
        """``power`` of ``GET /hosts``: state, since, and the advice or the last switch."""
        with self._lock:
            power = self._snapshot.get(host_id)
        out: dict[str, Any] = ({"state": PowerState.ON.value, "since": None} if power is None
                               else {"state": power.state.value, "since": power.since})
        advice = self.advice.get(host_id)
        if advice is not None:
            out["advice"] = advice.action.value
            out["advice_detail"] = advice.detail
        last = self.last.get(host_id)
        if last is not None:
            out["last_switch"] = {"op": last.op.value, "detail": last.detail,
                                  "exit_status": last.exit_status,
                                  "duration_s": round(last.duration_s, 3)}
        return out

    def summary_json(self) -> dict[str, Any]:
        with self._lock:
            states = [p.state.value for p in self._snapshot.values()]
        return {"backend": self.backend.kind.value,
                "hosts": {s.value: states.count(s.value) for s in PowerState},
                "switches": dict(self.switches),
                "advice": sorted(self.advice)}

