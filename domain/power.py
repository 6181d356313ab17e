"""Hosts switched off and on (DESIGN 3.15): the power states, their settings, the decisions and
changes as data, the state machine the caller ticks, and the record of recent requests that the
spare-room rule reads.

Pure: no clock of its own (every moment is given), no I/O. The power manager that decides
(scheduler/power.py) and the consolidation planner (scheduler/consolidation.py) build on these;
the energy model (domain/energy.py) charges each state its power.

A host's states and times::

    on --switch off--> shutting-down --shutdown_s--> off --switch on--> booting --boot_s--> on

``shutting-down`` draws the host's idle power, ``off`` ``standby_w``, ``booting`` the table's
100 % value; only ``on`` hosts take work. The simulator lets :class:`PowerBook` time the
transitions (``timed``); a live manager settles them when its backend says the host is off or
Ready (:meth:`PowerBook.settle`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.errors import ConflictError, NotFoundError, ValidationError
from domain.settings import load_settings


class PowerState(StrEnum):
    ON = "on"
    SHUTTING_DOWN = "shutting-down"
    OFF = "off"
    BOOTING = "booting"


class PowerAction(StrEnum):
    SWITCH_ON = "switch-on"
    SWITCH_OFF = "switch-off"


class SpareRule(StrEnum):
    """What the busiest boot_s window of the spare-room rule counts (DESIGN 3.15)."""

    REQUESTED = "requested"  # DESIGN's: the CPU and memory requested in the window
    # an experiment: requested less what ended in the same window (a burst that replaces
    # tasks ending asks for no new room)
    NET = "net"


class PowerReason(StrEnum):
    """Why a host is switched (the ``reason`` of a power event, for machines)."""

    IDLE = "idle"  # empty for idle_s, and the hosts left on keep the spare room
    REQUEST = "request"  # a waiting request that only this host would take
    SPARE_ROOM = "spare-room"  # the hosts on fell below the spare room
    MIN_ON = "min-on"  # fewer than min_on hosts on or booting


@dataclass(frozen=True)
class PowerSettings:
    """The power manager's knobs (DESIGN 3.15); the environment's ``GREENSWARM_POWER`` (on|off)
    and ``GREENSWARM_POWER_<FIELD>`` at the edge (:func:`power_settings_from_env`)."""

    enabled: bool = False  # GREENSWARM_POWER=on|off, --power-manager on|off
    idle_s: float = 300.0  # an empty host is switched off after this long
    boot_s: float = 120.0  # booting -> on (the simulator's; live: when the node is Ready)
    shutdown_s: float = 20.0  # shutting-down -> off (the simulator's; live: the backend's)
    standby_w: float = 5.0  # what an off host draws
    min_on: int = 1  # never fewer hosts on (or booting)
    spare_horizon_s: float = 3600.0  # "the last hour" of the spare-room rule
    consolidate: bool = True  # energy and qos: empty the least-allocated host of services
    consolidate_every_s: float = 60.0
    move_pin_s: float = 1800.0  # a task moved is not moved again within this
    consolidate_tries: int = 4  # hosts tried, lowest allocation first, per consolidation round
    # the share of the busiest boot_s window's demand the spare room keeps (DESIGN 3.15: all of
    # it, 1; a lower share is an experiment: fewer hosts on, more boot waits)
    spare_window_share: float = 1.0
    spare_rule: SpareRule = SpareRule.REQUESTED

    def __post_init__(self) -> None:
        for name in ("idle_s", "boot_s", "shutdown_s", "standby_w", "spare_horizon_s",
                     "consolidate_every_s", "move_pin_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    math.isfinite(value) and value >= 0):
                raise ValidationError(name, f"must be a finite number >= 0, got {value!r}")
        if not (isinstance(self.spare_window_share, int | float)
                and not isinstance(self.spare_window_share, bool)
                and 0 <= self.spare_window_share <= 1):
            raise ValidationError("spare_window_share", f"must be in [0, 1], got "
                                  f"{self.spare_window_share!r}")
        for name in ("min_on", "consolidate_tries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(name, f"must be an integer >= 1, got {value!r}")
        if self.boot_s > self.spare_horizon_s:
            raise ValidationError("boot_s", "must not exceed spare_horizon_s (the window of "
                                  "the spare-room rule lies inside its horizon)")

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "idle_s": self.idle_s, "boot_s": self.boot_s,
                "shutdown_s": self.shutdown_s, "standby_w": self.standby_w,
                "min_on": self.min_on, "spare_horizon_s": self.spare_horizon_s,
                "consolidate": self.consolidate,
                "consolidate_every_s": self.consolidate_every_s,
                "move_pin_s": self.move_pin_s, "consolidate_tries": self.consolidate_tries,
                "spare_window_share": self.spare_window_share,
                "spare_rule": self.spare_rule.value}


POWER_ENV_PREFIX = "GREENSWARM_POWER_"
POWER_ENV_ALIASES = {"enabled": "GREENSWARM_POWER"}


def power_settings_from_env(environ: Mapping[str, str],
                            overrides: Mapping[str, object] | None = None) -> PowerSettings:
    """``GREENSWARM_POWER`` (on|off) and ``GREENSWARM_POWER_IDLE_S``, ``_BOOT_S``,
    ``_SHUTDOWN_S``, ``_STANDBY_W``, ``_MIN_ON``, ``_SPARE_HORIZON_S``, ``_CONSOLIDATE``,
    ``_CONSOLIDATE_EVERY_S``, ``_MOVE_PIN_S``, ``_CONSOLIDATE_TRIES``,
    ``_SPARE_WINDOW_SHARE``, ``_SPARE_RULE``; ``overrides``
    (command-line options) win."""
    return load_settings(PowerSettings, environ, POWER_ENV_PREFIX, overrides,
                         POWER_ENV_ALIASES)


@dataclass(frozen=True, slots=True)
class HostPower:
    """A host's power state, since when, and (a timed transition) when it ends."""

    state: PowerState
    since: float
    until: float | None = None  # booting/shutting-down under a timed book: when it is over

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state.value, "since": self.since}
        if self.until is not None:
            out["until"] = self.until
        return out


@dataclass(frozen=True, slots=True)
class PowerDecision:
    """Switch ``host`` on or off, and why: what the power manager outputs, what an event
    carries (``to_json``)."""

    host: str
    action: PowerAction
    reason: PowerReason
    detail: str  # a sentence for people
    request: str | None = None  # REQUEST: the request that waits for the host

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "action": self.action.value,
                               "reason": self.reason.value, "detail": self.detail}
        if self.request is not None:
            out["request"] = self.request
        return out


@dataclass(frozen=True, slots=True)
class PowerChange:
    """A host went from one power state to another at ``at`` (an event's data)."""

    host: str
    old: PowerState
    new: PowerState
    at: float
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "from": self.old.value, "to": self.new.value, "at": self.at,
                "reason": self.reason}


class PowerBook:
    """Every host's power state: the state machine of DESIGN 3.15, which the caller ticks.

    ``apply(decision, now)`` starts a switch (on -> shutting-down, off -> booting). With
    ``timed`` (the simulator), ``tick(now)`` ends those due by ``now`` at their exact moments
    (``since + shutdown_s``, ``since + boot_s``), and :meth:`next_change_at` says when to tick
    next; without it (live), :meth:`settle` ends them when the backend reports the host off or
    Ready. Hosts start ``on``.
    """

    __slots__ = ("_hosts", "boot_s", "shutdown_s", "timed")

    def __init__(self, host_ids: Iterable[str] = (), *, now: float = 0.0,
                 boot_s: float = 120.0, shutdown_s: float = 20.0, timed: bool = True) -> None:
        if not (math.isfinite(boot_s) and boot_s >= 0 and math.isfinite(shutdown_s)
                and shutdown_s >= 0):
            raise ValidationError("boot_s", "boot_s and shutdown_s must be finite and >= 0")
        self.boot_s = boot_s
        self.shutdown_s = shutdown_s
        self.timed = timed
        self._hosts: dict[str, HostPower] = {}
        for host_id in host_ids:
            self.add_host(host_id, now)

    @classmethod
    def of(cls, settings: PowerSettings, host_ids: Iterable[str] = (), *, now: float = 0.0,
           timed: bool = True) -> PowerBook:
        return cls(host_ids, now=now, boot_s=settings.boot_s, shutdown_s=settings.shutdown_s,
                   timed=timed)

    # -- hosts ------------------------------------------------------------------------------

    def add_host(self, host_id: str, now: float,
                 state: PowerState = PowerState.ON) -> HostPower:
        """A host joins in ``state`` (on unless said); one already known keeps its state."""
        known = self._hosts.get(host_id)
        if known is not None:
            return known
        power = HostPower(state, now)
        self._hosts[host_id] = power
        return power

    def remove_host(self, host_id: str) -> None:
        self._hosts.pop(host_id, None)

    def get(self, host_id: str) -> HostPower:
        power = self._hosts.get(host_id)
        if power is None:
            raise NotFoundError(f"no power state for host {host_id!r}")
        return power

    def state(self, host_id: str) -> PowerState:
        return self.get(host_id).state

    def items(self) -> list[tuple[str, HostPower]]:
        return list(self._hosts.items())

    def in_state(self, *states: PowerState) -> list[str]:
        return [h for h, p in self._hosts.items() if p.state in states]

    def closed(self) -> frozenset[str]:
        """The hosts no pass may use: every host that is not on (the scheduler's
        ``set_closed_hosts``)."""
        return frozenset(h for h, p in self._hosts.items() if p.state is not PowerState.ON)

    # -- transitions ------------------------------------------------------------------------

    def apply(self, decision: PowerDecision, now: float) -> PowerChange:
        """Start the switch ``decision`` asks for; a ConflictError when the host is not in the
        state it starts from (on for a switch off, off for a switch on)."""
        power = self.get(decision.host)
        if decision.action is PowerAction.SWITCH_OFF:
            old, new, span = PowerState.ON, PowerState.SHUTTING_DOWN, self.shutdown_s
        else:
            old, new, span = PowerState.OFF, PowerState.BOOTING, self.boot_s
        if power.state is not old:
            raise ConflictError(f"host {decision.host} is {power.state.value}: cannot "
                                f"{decision.action.value}")
        if now < power.since:
            raise ValidationError("now", f"{now} is before {decision.host}'s last change at "
                                  f"{power.since}")
        self._hosts[decision.host] = HostPower(new, now, now + span if self.timed else None)
        return PowerChange(decision.host, old, new, now, decision.reason.value)

    def settle(self, host_id: str, state: PowerState, now: float,
               reason: str = "") -> PowerChange | None:
        """The host is in ``state`` from ``now`` as its backend reports (live): a booting host
        that is Ready is on, a host shutting down that is off is off; a host seen on or off
        against the book (switched by hand) takes that state. None when nothing changed."""
        power = self.get(host_id)
        if power.state is state:
            return None
        at = max(now, power.since)
        self._hosts[host_id] = HostPower(state, at)
        return PowerChange(host_id, power.state, state, at, reason or "reported")

    def tick(self, now: float) -> list[PowerChange]:
        """End every timed transition due by ``now``, each at its own moment; in time order."""
        due = sorted((p.until, h) for h, p in self._hosts.items()
                     if p.until is not None and p.until <= now)
        changes: list[PowerChange] = []
        for until, host_id in due:
            power = self._hosts[host_id]
            new = PowerState.ON if power.state is PowerState.BOOTING else PowerState.OFF
            self._hosts[host_id] = HostPower(new, until)
            changes.append(PowerChange(host_id, power.state, new, until, "timed"))
        return changes

    def next_change_at(self) -> float | None:
        """When the next timed transition ends (None: none under way)."""
        return min((p.until for p in self._hosts.values() if p.until is not None), default=None)


class RecentRequests:
    """The requests of the last ``horizon_s`` (an hour), for the spare-room rule: the largest
    request, and the CPU and memory requested in the busiest ``window_s`` (boot_s) window.

    Kept incrementally, O(1) amortised per request: the sums over the window ending at each
    arrival (the busiest window of any placement ends at an arrival) and two monotonic queues
    for the maxima over the horizon. Arrivals must come in time order. With ``net`` (the
    ``net`` spare rule) what ends normally is taken off the window's sums (:meth:`release`),
    so the busiest window is of the demand that grew; without it :meth:`release` does nothing.
    """

    __slots__ = ("_big_cpu", "_big_memory", "_busy_cpu", "_busy_memory", "_last_t", "_window",
                 "_window_cpu", "_window_memory", "horizon_s", "net", "window_s")

    def __init__(self, window_s: float = 120.0, horizon_s: float = 3600.0,
                 net: bool = False) -> None:
        if not (math.isfinite(window_s) and math.isfinite(horizon_s)
                and 0 <= window_s <= horizon_s):
            raise ValidationError("window_s", "need 0 <= window_s <= horizon_s, both finite")
        self.window_s = window_s
        self.horizon_s = horizon_s
        self.net = net
        self._window: deque[tuple[float, int, int]] = deque()  # arrivals in the window
        self._window_cpu = 0
        self._window_memory = 0
        # (t, value), values decreasing: the maximum of the horizon at the front
        self._big_cpu: deque[tuple[float, int]] = deque()
        self._big_memory: deque[tuple[float, int]] = deque()
        self._busy_cpu: deque[tuple[float, int]] = deque()
        self._busy_memory: deque[tuple[float, int]] = deque()
        self._last_t = -math.inf

    @classmethod
    def of(cls, settings: PowerSettings) -> RecentRequests:
        return cls(settings.boot_s, settings.spare_horizon_s,
                   net=settings.spare_rule is SpareRule.NET)

    def record(self, t: float, cpu_shares: int, memory: int) -> None:
        """A request of ``cpu_shares`` and ``memory`` bytes arrived at ``t``."""
        self._slide(t, cpu_shares, memory)
        _push_max(self._big_cpu, t, cpu_shares)
        _push_max(self._big_memory, t, memory)
        _push_max(self._busy_cpu, t, self._window_cpu)
        _push_max(self._busy_memory, t, self._window_memory)

    def release(self, t: float, cpu_shares: int, memory: int) -> None:
        """A task of ``cpu_shares`` and ``memory`` bytes ended at ``t`` (it finished, or its
        client stopped it): its room is free again (the net rule only). The windows compared
        still end at arrivals: at each, what was requested less what ended in the boot_s
        before it."""
        if self.net:
            self._slide(t, -cpu_shares, -memory)

    def _slide(self, t: float, cpu_shares: int, memory: int) -> None:
        if not math.isfinite(t) or t < self._last_t:
            raise ValidationError("t", f"{t} is before the last request at {self._last_t}")
        self._last_t = t
        window = self._window
        window.append((t, cpu_shares, memory))
        self._window_cpu += cpu_shares
        self._window_memory += memory
        while window and window[0][0] <= t - self.window_s:
            _, old_cpu, old_memory = window.popleft()
            self._window_cpu -= old_cpu
            self._window_memory -= old_memory

    def spare_need(self, now: float, window_share: float = 1.0) -> tuple[int, int]:
        """(CPU shares, memory bytes) the hosts on should keep free at ``now``: the largest
        request of the horizon plus its busiest window (``window_share`` of it), in each
        dimension."""
        limit = now - self.horizon_s
        for queue in (self._big_cpu, self._big_memory, self._busy_cpu, self._busy_memory):
            while queue and queue[0][0] < limit:
                queue.popleft()
        if window_share == 1.0:
            return (_front(self._big_cpu) + _front(self._busy_cpu),
                    _front(self._big_memory) + _front(self._busy_memory))
        return (_front(self._big_cpu) + math.ceil(window_share * _front(self._busy_cpu)),
                _front(self._big_memory) + math.ceil(window_share * _front(self._busy_memory)))


def _push_max(queue: deque[tuple[float, int]], t: float, value: int) -> None:
    while queue and queue[-1][1] <= value:
        queue.pop()
    queue.append((t, value))


def _front(queue: deque[tuple[float, int]]) -> int:
    """The horizon's maximum (never below 0: a net window may have shrunk)."""
    return max(0, queue[0][1]) if queue else 0
