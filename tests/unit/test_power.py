"""Power per host and the cluster's energy (domain/energy.py ClusterEnergy, manager/power.py)."""

from __future__ import annotations

import pytest

from domain.energy import JOULES_PER_KWH, ClusterEnergy, PowerModel, PowerReading
from domain.model import HostSpec
from host_registry.memory import MemoryStore
from host_registry.power import MemoryPowerReadings
from manager.power import PowerView


def test_the_cluster_energy_holds_each_power_until_the_next_reading() -> None:
    """100 W from 0 to 60 s, then 200 W to 90 s: 6,000 + 6,000 J; measured only from 60 s,
    when one host measures 150 W, until 90 s: 4,500 J."""
    energy = ClusterEnergy(since_s=0.0)
    energy.add(0.0, 100.0, None)
    energy.add(60.0, 200.0, 150.0)
    energy.add(90.0, 0.0, None)
    energy.add(80.0, 999.0, 999.0)  # out of order: no time goes backwards
    assert energy.estimated_j == pytest.approx(12_000.0)
    assert energy.measured_j == pytest.approx(4_500.0)
    assert energy.estimated_kwh == pytest.approx(12_000.0 / JOULES_PER_KWH)


def test_a_host_shows_its_measured_power_while_fresh_and_always_its_estimate() -> None:
    store = MemoryStore()
    store.add_host(HostSpec("a", 4096, 8 * 2**30))
    store.add_host(HostSpec("b", 4096, 8 * 2**30))
    a = store.update_host_utilization("a", 0.5, 0.25)
    readings = MemoryPowerReadings()
    readings.record("a", PowerReading(42.5, 1000.0))
    view = PowerView(PowerModel.named("hp-ml110-g4"), readings, 0.0, stale_after_s=300.0)
    fresh = view.of(a, now=1200.0)
    assert fresh.measured_w == 42.5 and fresh.measured_at == 1000.0
    # 102 W at 50 % on the table, plus 0.392 W per GiB of the 2 GiB in use
    assert fresh.estimated_w == pytest.approx(102.0 + 0.392 * 2)
    assert view.of(a, now=1400.0).measured_w is None  # older than 300 s: not shown as now
    powers = view.meter(1200.0, store.all_hosts())
    assert powers["b"].measured_w is None and powers["b"].estimated_w == pytest.approx(86.0)
    assert view.cluster_json(powers)["measured_w"] == 42.5
