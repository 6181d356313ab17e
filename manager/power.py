"""Each host's power, measured where its monitor reads RAPL and estimated everywhere (DESIGN
7.4, 11), and the cluster's energy since the manager started.

The estimate is the energy model at the host's reported CPU utilization and memory in use; a
measured reading counts while it is no older than the staleness bound of the load-aware
policies (DESIGN 3.12; 300 s by default), and is then shown as the host's measured power.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from domain.energy import ClusterEnergy, PowerModel, PowerReading
from domain.model import HostView
from domain.power import PowerState
from host_registry.power import PowerReadings


@dataclass(frozen=True, slots=True)
class HostPower:
    estimated_w: float
    measured_w: float | None
    measured_at: float | None

    def to_json(self) -> dict[str, Any]:
        return {"estimated_w": round(self.estimated_w, 3),
                "measured_w": None if self.measured_w is None else round(self.measured_w, 3),
                "measured_at": self.measured_at}


class PowerView:
    def __init__(self, model: PowerModel, readings: PowerReadings, since_s: float,
                 stale_after_s: float) -> None:
        self.model = model
        self.readings = readings
        self.stale_after_s = stale_after_s
        self.energy = ClusterEnergy(since_s)  # as the hosts were switched (DESIGN 3.15)
        self.energy_all_on = ClusterEnergy(since_s)  # had every host stayed on
        # each host's power state (the power manager's, when it switches hosts: DESIGN 3.15)
        self.state_of: Callable[[str], PowerState] | None = None
        self.standby_w = 5.0

    def estimate_w(self, host: HostView) -> float:
        """The host's power in its power state: on, the model at its use; shutting down,
        idle; off, standby; booting, the table's 100 %."""
        state = PowerState.ON if self.state_of is None else self.state_of(host.id)
        return self.model.state_power_w(state, host.cpu_util,
                                        host.memory_util * host.memory_capacity, self.standby_w)

    def all_on_w(self, host: HostView) -> float:
        """What the host would draw on: the model at its use (an off host: idle)."""
        state = PowerState.ON if self.state_of is None else self.state_of(host.id)
        if state is PowerState.ON:
            return self.model.power_w(host.cpu_util, host.memory_util * host.memory_capacity)
        return self.model.table.idle_w

    def of(self, host: HostView, now: float,
           readings: dict[str, PowerReading] | None = None) -> HostPower:
        reading = (self.readings.readings() if readings is None else readings).get(host.id)
        fresh = reading is not None and now - reading.measured_at <= self.stale_after_s
        return HostPower(self.estimate_w(host), reading.watts if fresh and reading else None,
                         reading.measured_at if fresh and reading else None)

    def hosts(self, hosts: Iterable[HostView], now: float) -> dict[str, HostPower]:
        readings = self.readings.readings()
        return {host.id: self.of(host, now, readings) for host in hosts}

    def meter(self, now: float, hosts: Iterable[HostView]) -> dict[str, HostPower]:
        """The cluster's power now, added to its energy; each host's, for the caller."""
        listed = list(hosts)
        powers = self.hosts(listed, now)
        estimated, measured, _ = _totals(powers)
        self.energy.add(now, estimated, measured)
        self.energy_all_on.add(now, sum(self.all_on_w(h) for h in listed), None)
        return powers

    def cluster_json(self, powers: dict[str, HostPower]) -> dict[str, Any]:
        estimated, measured, measured_hosts = _totals(powers)
        return {
            "estimated_w": round(estimated, 3),
            "measured_w": None if measured is None else round(measured, 3),
            "measured_hosts": measured_hosts,
            "estimated_kwh": self.energy.estimated_kwh,
            "estimated_kwh_all_on": self.energy_all_on.estimated_kwh,
            "measured_kwh": self.energy.measured_kwh,
            "since": self.energy.since_s,
        }


def _totals(powers: dict[str, HostPower]) -> tuple[float, float | None, int]:
    """The cluster's estimated W, its measured W (None: no host measured), and how many hosts
    were measured."""
    measured = [p.measured_w for p in powers.values() if p.measured_w is not None]
    return (sum(p.estimated_w for p in powers.values()),
            sum(measured) if measured else None, len(measured))
