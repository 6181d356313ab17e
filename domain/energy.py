"""Energy model of DESIGN 7.4: SPECpower tables, memory power, exact piecewise integration.

Power of a host that is on::

    P(cpu_util, memory_in_use_bytes) = table(cpu_util) + memory_w_per_gib x memory_in_use / GiB

``table`` interpolates linearly between the watts measured at 0 %, 10 %, ..., 100 % CPU load;
``cpu_util`` is clamped to [0, 1] (a simulator may report demand above capacity). The memory
term is 0.392 W per GB of memory in use (DESIGN 7.4), taken per GiB (2^30 bytes, the binary
unit the project uses for memory everywhere).

Three variants are always computed side by side:

* ``energy_kwh``: what the hosts drew as switched by the power manager (DESIGN 3.15): a host
  ``on`` draws the formula above, ``shutting-down`` its idle power (the table's 0 % value),
  ``off`` the standby power (``standby_w``, 5 W by default), ``booting`` the table's 100 %
  value. With no power state ever fed (the power manager off), every host is on, and this is
  ``energy_kwh_all_on``;
* ``energy_kwh_all_on``: every host on for the whole run, idle power included;
* ``energy_kwh_switch_off``: a bound: a host with no task counts as switched off (0 W) while
  empty, at no cost and with no delay.

Energy is the integral of power over time. Utilization is piecewise constant between the state
changes fed to :class:`EnergyMeter`, so the integral is an exact sum of ``P x dt`` over the
segments (no sampling error). Before its first state change a host is on, idle and empty.
Power states are fed the same way (:meth:`EnergyMeter.set_power_state`), so the energy as drawn
is exact too.

Published tables (watts at 0, 10, ..., 100 % load). All are SPECpower_ssj2008 results of real
servers, as packaged in CloudSim's ``power.models`` (``PowerModelSpecPower*``) and used by
Beloglazov & Buyya, "Optimal online deterministic algorithms and adaptive heuristics for energy
and performance efficient dynamic consolidation of virtual machines in cloud data centers"
(Concurrency Computat.: Pract. Exper., 2012), the source the thesis's related work builds on:

========================  =========================================  ====================
name                      server                                     0 % .. 100 % (W)
========================  =========================================  ====================
hp-ml110-g3               HP ProLiant ML110 G3, Pentium D 930        105 .. 169
hp-ml110-g4 (default)     HP ProLiant ML110 G4, Xeon 3040            86 .. 117
hp-ml110-g5               HP ProLiant ML110 G5, Xeon 3075            93.7 .. 135
ibm-x3250-x3470           IBM System x3250, Xeon X3470               41.6 .. 113
ibm-x3250-x3480           IBM System x3250, Xeon X3480               42.3 .. 113
ibm-x3550-x5670           IBM System x3550 M3, Xeon X5670            66 .. 247
ibm-x3550-x5675           IBM System x3550 M3, Xeon X5675            58.4 .. 222
========================  =========================================  ====================
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from domain.errors import ValidationError
from domain.power import PowerState

# The Rust implementation of _HostMeter (native/rust/src/energy.rs, DESIGN 10) when this process
# runs the native core (importable only then: see domain.rooms): the same attributes (``state``
# and ``state_w`` writable, the lists of pieces copies) and methods; _HostMeter stays the
# reference (tests/unit/test_native_host_time.py compares them).
try:
    from greenswarm_core import HostMeter as NativeHostMeter
except ImportError:
    NativeHostMeter = None  # type: ignore[assignment,misc]

GIB = 1024**3
JOULES_PER_KWH = 3.6e6
MEMORY_W_PER_GIB = 0.392
DEFAULT_STANDBY_W = 5.0  # an off host (DESIGN 3.15)
EFFICIENCY_LOAD = 0.7  # the load at which hosts are compared for efficiency (DESIGN 3.15)
_SPEC_SOURCE = "SPECpower_ssj2008, via CloudSim power.models (Beloglazov & Buyya 2012)"


@dataclass(frozen=True, slots=True)
class PowerTable:
    """Watts at 0 %, 10 %, ..., 100 % CPU load (11 values, non-decreasing)."""

    name: str
    server: str
    watts: tuple[float, ...]
    source: str = _SPEC_SOURCE

    def __post_init__(self) -> None:
        if len(self.watts) != 11:
            raise ValidationError("watts", f"need 11 values (0..100 % by 10), got "
                                  f"{len(self.watts)}")
        if any(not math.isfinite(w) or w < 0 for w in self.watts):
            raise ValidationError("watts", "must be finite and >= 0")
        if any(b < a for a, b in zip(self.watts, self.watts[1:], strict=False)):
            raise ValidationError("watts", "must not decrease with load")

    @property
    def idle_w(self) -> float:
        return self.watts[0]

    @property
    def max_w(self) -> float:
        return self.watts[-1]

    def cpu_power_w(self, cpu_util: float) -> float:
        """Linear interpolation in the table; ``cpu_util`` clamped to [0, 1]."""
        _check_util(cpu_util, "cpu_util")
        return self._interpolate(cpu_util)

    def _interpolate(self, cpu_util: float) -> float:
        u = min(1.0, cpu_util)
        position = u * 10
        index = min(9, math.floor(position))
        fraction = position - index
        low, high = self.watts[index], self.watts[index + 1]
        return low + (high - low) * fraction


def _check_util(value: float, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValidationError(field, f"must be finite and >= 0, got {value!r}")


def _table(name: str, server: str, *watts: float) -> PowerTable:
    return PowerTable(name=name, server=server, watts=tuple(float(w) for w in watts))


POWER_TABLES: dict[str, PowerTable] = {
    t.name: t
    for t in (
        _table("hp-ml110-g3", "HP ProLiant ML110 G3 (Pentium D 930)",
               105, 112, 118, 125, 131, 137, 147, 153, 157, 164, 169),
        _table("hp-ml110-g4", "HP ProLiant ML110 G4 (Xeon 3040)",
               86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117),
        _table("hp-ml110-g5", "HP ProLiant ML110 G5 (Xeon 3075)",
               93.7, 97, 101, 105, 110, 116, 121, 125, 129, 133, 135),
        _table("ibm-x3250-x3470", "IBM System x3250 (Xeon X3470)",
               41.6, 46.7, 52.3, 57.9, 65.4, 73.0, 80.7, 89.5, 99.6, 105, 113),
        _table("ibm-x3250-x3480", "IBM System x3250 (Xeon X3480)",
               42.3, 46.7, 49.7, 55.4, 61.8, 69.3, 76.1, 87, 96.1, 106, 113),
        _table("ibm-x3550-x5670", "IBM System x3550 M3 (Xeon X5670)",
               66, 107, 120, 131, 143, 156, 173, 191, 211, 229, 247),
        _table("ibm-x3550-x5675", "IBM System x3550 M3 (Xeon X5675)",
               58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222),
    )
}
DEFAULT_POWER_TABLE = "hp-ml110-g4"


def power_table(name: str) -> PowerTable:
    """The published table called ``name``; ValidationError lists the known names."""
    try:
        return POWER_TABLES[name]
    except KeyError:
        raise ValidationError(
            "power_table", f"unknown table {name!r}; known: {', '.join(sorted(POWER_TABLES))}"
        ) from None


@dataclass(frozen=True, slots=True)
class PowerModel:
    """Power of one host: a CPU table plus memory in use."""

    table: PowerTable
    memory_w_per_gib: float = MEMORY_W_PER_GIB

    def __post_init__(self) -> None:
        if not (math.isfinite(self.memory_w_per_gib) and self.memory_w_per_gib >= 0):
            raise ValidationError("memory_w_per_gib", "must be finite and >= 0")

    @classmethod
    def named(cls, name: str = DEFAULT_POWER_TABLE,
              memory_w_per_gib: float = MEMORY_W_PER_GIB) -> PowerModel:
        return cls(power_table(name), memory_w_per_gib)

    def power_w(self, cpu_util: float, memory_in_use_bytes: float) -> float:
        """Watts of a host that is on."""
        _check_util(cpu_util, "cpu_util")
        _check_util(memory_in_use_bytes, "memory_in_use_bytes")
        return self.power_w_unchecked(cpu_util, memory_in_use_bytes)

    def power_w_unchecked(self, cpu_util: float, memory_in_use_bytes: float) -> float:
        """power_w for values already checked (finite, >= 0): the hot path of the meters."""
        return self.table._interpolate(cpu_util) + self.memory_w_per_gib * (
            memory_in_use_bytes / GIB
        )

    def state_power_w(self, state: PowerState, cpu_util: float, memory_in_use_bytes: float,
                      standby_w: float = DEFAULT_STANDBY_W) -> float:
        """Watts of a host in a power state (DESIGN 3.15, 7.4): on, the formula; shutting
        down, idle; off, ``standby_w``; booting, the table's 100 % value."""
        if state is PowerState.ON:
            return self.power_w(cpu_util, memory_in_use_bytes)
        if state is PowerState.SHUTTING_DOWN:
            return self.table.idle_w
        if state is PowerState.OFF:
            return standby_w
        return self.table.max_w

    def watts_per_core(self, cpu_capacity: int, load: float = EFFICIENCY_LOAD) -> float:
        """Watts per core (1024 shares) of a host of ``cpu_capacity`` shares at ``load``: the
        power manager switches on the least first (DESIGN 3.15)."""
        if cpu_capacity <= 0:
            raise ValidationError("cpu_capacity", "must be > 0")
        return self.table.cpu_power_w(load) * 1024 / cpu_capacity

    def describe(self) -> dict[str, object]:
        return {
            "table": self.table.name,
            "server": self.table.server,
            "watts": list(self.table.watts),
            "memory_w_per_gib": self.memory_w_per_gib,
            "source": self.table.source,
        }


class HostPowerState(NamedTuple):
    """One state change of a host, as fed to :meth:`EnergyMeter.feed`."""

    t_s: float
    host_id: str
    cpu_util: float
    memory_in_use_bytes: float
    empty: bool


@dataclass(frozen=True, slots=True)
class HostEnergy:
    host_id: str
    energy_kwh: float  # as drawn, in the power states fed (all on when none was)
    energy_kwh_switch_off: float  # the bound: 0 W while empty
    empty_s: float  # time the host had no task (switched off in the bound)
    energy_kwh_all_on: float = math.nan  # on for the whole run (nan: the same as energy_kwh)
    off_s: float = 0.0  # time the host was not on (shutting down, off or booting)

    def __post_init__(self) -> None:
        if math.isnan(self.energy_kwh_all_on):
            object.__setattr__(self, "energy_kwh_all_on", self.energy_kwh)


@dataclass(frozen=True, slots=True)
class EnergyReport:
    t_start_s: float
    t_end_s: float
    hosts: tuple[HostEnergy, ...]

    @property
    def energy_kwh(self) -> float:
        return math.fsum(h.energy_kwh for h in self.hosts)

    @property
    def energy_kwh_all_on(self) -> float:
        return math.fsum(h.energy_kwh_all_on for h in self.hosts)

    @property
    def energy_kwh_switch_off(self) -> float:
        return math.fsum(h.energy_kwh_switch_off for h in self.hosts)

    @property
    def duration_s(self) -> float:
        return self.t_end_s - self.t_start_s

    @property
    def mean_power_w(self) -> float:
        """Mean power of the whole cluster, as drawn (all hosts on when no power state was
        fed)."""
        if self.duration_s <= 0:
            return 0.0
        return self.energy_kwh * JOULES_PER_KWH / self.duration_s

    def host(self, host_id: str) -> HostEnergy:
        for item in self.hosts:
            if item.host_id == host_id:
                return item
        raise ValidationError("host_id", f"unknown host {host_id!r}")


class _HostMeter:
    __slots__ = ("cpu_util", "drawn", "empty", "empty_s", "joules", "joules_off", "last_t",
                 "memory", "model", "not_on_s", "state", "state_w", "watts")

    def __init__(self, model: PowerModel, t_start_s: float) -> None:
        self.model = model
        self.last_t = t_start_s
        self.cpu_util = 0.0
        self.memory = 0.0
        self.watts = model.power_w_unchecked(0.0, 0.0)  # of (cpu_util, memory), kept with them
        self.empty = True
        self.joules: list[float] = []
        self.joules_off: list[float] = []
        self.empty_s = 0.0
        # The power state (DESIGN 3.15): while the host is not on it draws ``state_w`` instead
        # of ``watts``; ``drawn`` keeps the differences, so that the energy as drawn is the
        # energy all on plus their sum (nothing more to do while the host is on).
        self.state = PowerState.ON
        self.state_w: float | None = None
        self.drawn: list[float] = []
        self.not_on_s = 0.0

    def advance(self, t: float) -> None:
        dt = t - self.last_t
        if dt > 0:
            watts = self.watts
            self.joules.append(watts * dt)
            if self.empty:
                self.empty_s += dt
            else:
                self.joules_off.append(watts * dt)
            if self.state_w is not None:
                self.drawn.append((self.state_w - watts) * dt)
                self.not_on_s += dt
                if len(self.drawn) > 4096:
                    self.drawn = [math.fsum(self.drawn)]
            self.last_t = t
            if len(self.joules) > 4096:  # keep the exact sum, bound the memory
                self.joules = [math.fsum(self.joules)]
            if len(self.joules_off) > 4096:
                self.joules_off = [math.fsum(self.joules_off)]

    def set(self, t: float, host_id: str, cpu_util: float, memory: float, empty: bool,
            watts: float) -> None:
        """The state from ``t`` on (``t`` checked finite); a time before the last raises."""
        if t < self.last_t:
            raise ValidationError(
                "t", f"{t} is before the last state of {host_id} at {self.last_t}"
            )
        self.advance(t)
        self.cpu_util = cpu_util
        self.memory = memory
        self.empty = empty
        self.watts = watts


class EnergyMeter:
    """Accumulates energy per host from a time-ordered stream of state changes.

    ``update(t, host, cpu_util, memory_in_use_bytes, empty)`` says the host is in that state
    from ``t`` until its next update; times must not go backwards for one host (hosts are
    independent). ``finish(t_end)`` closes every host at ``t_end`` and returns the report; the
    meter can keep going afterwards (``finish`` does not change it).
    """

    def __init__(
        self,
        host_ids: Sequence[str],
        model: PowerModel | Mapping[str, PowerModel] | None = None,
        *,
        t_start_s: float = 0.0,
        standby_w: float = DEFAULT_STANDBY_W,
        reference: bool = False,
    ) -> None:
        """``reference``: every host's meter the Python class, even when the Rust core is
        loaded (to compare them)."""
        if not (math.isfinite(standby_w) and standby_w >= 0):
            raise ValidationError("standby_w", "must be finite and >= 0")
        self.standby_w = standby_w
        if not host_ids:
            raise ValidationError("hosts", "need at least one host")
        if len(set(host_ids)) != len(host_ids):
            raise ValidationError("hosts", "host ids must be unique")
        if not math.isfinite(t_start_s):
            raise ValidationError("t_start_s", "must be finite")
        default = PowerModel.named()
        self.t_start_s = t_start_s
        self._hosts: dict[str, _HostMeter | NativeHostMeter] = {}
        for host_id in host_ids:
            if model is None:
                host_model = default
            elif isinstance(model, PowerModel):
                host_model = model
            else:
                if host_id not in model:
                    raise ValidationError("model", f"no power model for host {host_id!r}")
                host_model = model[host_id]
            self._hosts[host_id] = (
                _HostMeter(host_model, t_start_s) if reference or NativeHostMeter is None
                else NativeHostMeter(host_model, t_start_s,
                                     host_model.power_w_unchecked(0.0, 0.0), PowerState.ON))

    @property
    def host_ids(self) -> tuple[str, ...]:
        return tuple(self._hosts)

    def native_meter(self, host_id: str) -> NativeHostMeter | None:
        """The host's meter when it is the Rust one (for the Rust host time accounting to
        update it itself), else None."""
        meter = self._hosts[host_id]
        return None if isinstance(meter, _HostMeter) else meter

    def update(
        self, t: float, host_id: str, cpu_util: float, memory_in_use_bytes: float, empty: bool
    ) -> None:
        meter = self._hosts.get(host_id)
        if meter is None:
            raise ValidationError("host_id", f"unknown host {host_id!r}")
        if not math.isfinite(t):
            raise ValidationError("t", "must be finite")
        if t < meter.last_t:
            raise ValidationError(
                "t", f"{t} is before the last state of {host_id} at {meter.last_t}"
            )
        _check_util(cpu_util, "cpu_util")
        _check_util(memory_in_use_bytes, "memory_in_use_bytes")
        cpu, memory = float(cpu_util), float(memory_in_use_bytes)
        meter.set(t, host_id, cpu, memory, bool(empty), meter.model.power_w_unchecked(cpu, memory))

    def update_unchecked(
        self, t: float, host_id: str, cpu_util: float, memory_in_use_bytes: float, empty: bool,
        watts: float | None = None,
    ) -> None:
        """``update`` for a caller that already checked ``t`` (finite) and both numbers
        (finite, >= 0, floats): the metrics recorder, on every change of a host. ``watts``:
        the host's power in that state when the caller has it (it must be its model's
        ``power_w_unchecked(cpu_util, memory_in_use_bytes)``: computed once for both). A time
        before the host's last state still raises."""
        meter = self._hosts[host_id]
        if watts is None:
            watts = meter.model.power_w_unchecked(cpu_util, memory_in_use_bytes)
        meter.set(t, host_id, cpu_util, memory_in_use_bytes, empty, watts)

    def set_power_state(self, t: float, host_id: str, state: PowerState) -> None:
        """The host is in power ``state`` from ``t`` on (DESIGN 3.15): it draws that state's
        power (``PowerModel.state_power_w``) in the energy as drawn; its load, fed by
        ``update``, still counts in the energy all on. A time before its last change raises."""
        meter = self._hosts.get(host_id)
        if meter is None:
            raise ValidationError("host_id", f"unknown host {host_id!r}")
        if not math.isfinite(t):
            raise ValidationError("t", "must be finite")
        meter.set(t, host_id, meter.cpu_util, meter.memory, meter.empty, meter.watts)
        meter.state = PowerState(state)
        meter.state_w = (None if meter.state is PowerState.ON else
                         meter.model.state_power_w(meter.state, 0.0, 0.0, self.standby_w))

    def power_state(self, host_id: str) -> PowerState:
        return self._hosts[host_id].state

    def feed(self, states: Iterable[HostPowerState]) -> None:
        for state in states:
            self.update(state.t_s, state.host_id, state.cpu_util, state.memory_in_use_bytes,
                        state.empty)

    def power_w(self, host_id: str) -> tuple[float, float]:
        """Current power of a host: (all on, empty switched off)."""
        meter = self._hosts[host_id]
        watts = meter.model.power_w(meter.cpu_util, meter.memory)
        return watts, (0.0 if meter.empty else watts)

    def drawn_w(self, host_id: str) -> float:
        """Current power of a host as drawn, in its power state."""
        meter = self._hosts[host_id]
        return meter.watts if meter.state_w is None else meter.state_w

    def finish(self, t_end_s: float) -> EnergyReport:
        hosts: list[HostEnergy] = []
        for host_id, meter in self._hosts.items():
            if t_end_s < meter.last_t:
                raise ValidationError(
                    "t_end_s", f"{t_end_s} is before the last state of {host_id} at "
                    f"{meter.last_t}"
                )
            dt = t_end_s - meter.last_t
            watts = meter.model.power_w_unchecked(meter.cpu_util, meter.memory)
            joules = math.fsum([*meter.joules, watts * dt])
            joules_off = math.fsum([*meter.joules_off, 0.0 if meter.empty else watts * dt])
            not_on = meter.state_w is not None
            drawn = (joules if not meter.drawn and not not_on else math.fsum(
                [*meter.joules, watts * dt, *meter.drawn,
                 (meter.state_w - watts) * dt if meter.state_w is not None else 0.0]))
            hosts.append(
                HostEnergy(
                    host_id=host_id,
                    energy_kwh=drawn / JOULES_PER_KWH,
                    energy_kwh_switch_off=joules_off / JOULES_PER_KWH,
                    empty_s=meter.empty_s + (dt if meter.empty else 0.0),
                    energy_kwh_all_on=joules / JOULES_PER_KWH,
                    off_s=meter.not_on_s + (dt if not_on else 0.0),
                )
            )
        return EnergyReport(self.t_start_s, t_end_s, tuple(hosts))


def energy_kwh_constant(model: PowerModel, cpu_util: float, memory_in_use_bytes: float,
                        duration_s: float) -> float:
    """Energy of a constant load (a reference for tests and quick estimates)."""
    return model.power_w(cpu_util, memory_in_use_bytes) * duration_s / JOULES_PER_KWH


@dataclass(frozen=True, slots=True)
class PowerReading:
    """A host's power as its monitor measured it (RAPL, DESIGN 5 and 11), and when."""

    watts: float
    measured_at: float


class ClusterEnergy:
    """The cluster's energy since ``since_s``, from its power read at moments given in order
    (left rectangles: each reading holds until the next). ``measured`` only counts while at
    least one host measures its power; the estimate always counts."""

    def __init__(self, since_s: float) -> None:
        self.since_s = since_s
        self._last_s = since_s
        self._estimated_w = 0.0
        self._measured_w: float | None = None
        self.estimated_j = 0.0
        self.measured_j = 0.0

    def add(self, t: float, estimated_w: float, measured_w: float | None) -> None:
        """The cluster's power from ``t`` on; the power before it held since the last call."""
        dt = max(0.0, t - self._last_s)
        self.estimated_j += self._estimated_w * dt
        if self._measured_w is not None:
            self.measured_j += self._measured_w * dt
        self._last_s = max(self._last_s, t)
        self._estimated_w, self._measured_w = estimated_w, measured_w

    @property
    def estimated_kwh(self) -> float:
        return self.estimated_j / JOULES_PER_KWH

    @property
    def measured_kwh(self) -> float:
        return self.measured_j / JOULES_PER_KWH
