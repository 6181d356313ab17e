"""Energy model of DESIGN 7.4: interpolation, memory power, exact piecewise integration."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.energy import (
    DEFAULT_POWER_TABLE,
    JOULES_PER_KWH,
    MEMORY_W_PER_GIB,
    POWER_TABLES,
    EnergyMeter,
    HostPowerState,
    PowerModel,
    PowerTable,
    energy_kwh_constant,
    power_table,
)
from domain.errors import ValidationError

GIB = 1024**3
G4 = (86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117)
G5 = (93.7, 97, 101, 105, 110, 116, 121, 125, 129, 133, 135)


def kwh(watts: float, seconds: float) -> float:
    return watts * seconds / 3.6e6


def test_the_design_tables_are_shipped_with_their_published_values() -> None:
    assert power_table("hp-ml110-g4").watts == tuple(float(w) for w in G4)
    assert power_table("hp-ml110-g5").watts == tuple(float(w) for w in G5)
    assert len(POWER_TABLES) >= 4
    assert DEFAULT_POWER_TABLE in POWER_TABLES
    assert MEMORY_W_PER_GIB == 0.392


def test_an_unknown_table_lists_the_known_ones() -> None:
    with pytest.raises(ValidationError) as info:
        power_table("toaster")
    assert info.value.field == "power_table"
    assert "hp-ml110-g4" in info.value.message and "hp-ml110-g5" in info.value.message


@pytest.mark.parametrize("name", sorted(POWER_TABLES))
def test_interpolation_hits_every_table_point(name: str) -> None:
    table = POWER_TABLES[name]
    for i, watts in enumerate(table.watts):
        assert table.cpu_power_w(i / 10) == pytest.approx(watts, abs=1e-9)


@pytest.mark.parametrize(
    ("util", "expected"),
    [
        (0.05, (86 + 89.4) / 2),
        (0.37, 96 + 0.7 * (99.5 - 96)),
        (0.99, 114 + 0.9 * (117 - 114)),
        (1.0, 117.0),
        (1.7, 117.0),  # demand above capacity is clamped to 100 %
    ],
)
def test_interpolation_is_linear_between_points(util: float, expected: float) -> None:
    assert power_table("hp-ml110-g4").cpu_power_w(util) == pytest.approx(expected)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_impossible_utilizations_are_refused(bad: float) -> None:
    with pytest.raises(ValidationError):
        power_table("hp-ml110-g4").cpu_power_w(bad)


def test_memory_in_use_adds_0_392_watt_per_gib() -> None:
    model = PowerModel.named("hp-ml110-g5")
    assert model.power_w(0.0, 0) == pytest.approx(93.7)
    assert model.power_w(0.0, 2 * GIB) == pytest.approx(93.7 + 2 * 0.392)
    assert model.power_w(0.5, 10 * GIB) == pytest.approx(116 + 3.92)
    assert PowerModel.named("hp-ml110-g5", memory_w_per_gib=0.0).power_w(0.5, 10 * GIB) == 116


@pytest.mark.parametrize(
    "watts",
    [(1.0,) * 10, (1.0,) * 12, (5.0, 4.0, *([5.0] * 9)), (math.nan, *([1.0] * 10)),
     (-1.0, *([1.0] * 10))],
)
def test_bad_tables_are_refused(watts: tuple[float, ...]) -> None:
    with pytest.raises(ValidationError):
        PowerTable("bad", "bad", watts)


def test_a_constant_load_uses_power_times_time() -> None:
    model = PowerModel.named("hp-ml110-g4")
    meter = EnergyMeter(["h"], model)
    meter.update(0.0, "h", 0.5, 4 * GIB, empty=False)
    report = meter.finish(3600.0)
    expected = kwh(102 + 4 * 0.392, 3600)
    assert report.energy_kwh == pytest.approx(expected, rel=1e-12)
    assert report.energy_kwh_switch_off == pytest.approx(expected, rel=1e-12)
    assert energy_kwh_constant(model, 0.5, 4 * GIB, 3600) == pytest.approx(expected)
    assert report.mean_power_w == pytest.approx(102 + 4 * 0.392)


def test_a_two_step_load_sums_both_steps() -> None:
    meter = EnergyMeter(["h"], PowerModel.named("hp-ml110-g4"), t_start_s=100.0)
    meter.feed([
        HostPowerState(100.0, "h", 0.2, 0, False),
        HostPowerState(1100.0, "h", 0.8, 2 * GIB, False),
    ])
    report = meter.finish(3100.0)
    expected = kwh(92.6, 1000) + kwh(112 + 2 * 0.392, 2000)
    assert report.energy_kwh == pytest.approx(expected, rel=1e-12)
    assert report.duration_s == 3000.0


def test_an_empty_host_counts_as_off_in_the_second_variant_only() -> None:
    meter = EnergyMeter(["a", "b"], PowerModel.named("hp-ml110-g4"))
    meter.update(0.0, "a", 0.0, 0, empty=True)
    meter.update(500.0, "a", 0.3, GIB, empty=False)
    meter.update(800.0, "a", 0.0, 0, empty=True)
    # b never reports: on, idle and empty all along
    report = meter.finish(1000.0)
    a = report.host("a")
    busy = kwh(96 + 0.392, 300)
    assert a.energy_kwh == pytest.approx(kwh(86, 500) + busy + kwh(86, 200))
    assert a.energy_kwh_switch_off == pytest.approx(busy)
    assert a.empty_s == pytest.approx(700.0)
    b = report.host("b")
    assert b.energy_kwh == pytest.approx(kwh(86, 1000))
    assert (b.energy_kwh_switch_off, b.empty_s) == (0.0, 1000.0)
    assert report.energy_kwh == pytest.approx(a.energy_kwh + b.energy_kwh)
    assert report.energy_kwh_switch_off == pytest.approx(busy)


def test_hosts_may_have_their_own_tables() -> None:
    meter = EnergyMeter(["old", "new"], {"old": PowerModel.named("hp-ml110-g4"),
                                         "new": PowerModel.named("ibm-x3550-x5670")})
    meter.update(0.0, "old", 1.0, 0, False)
    meter.update(0.0, "new", 1.0, 0, False)
    report = meter.finish(3600.0)
    assert report.host("old").energy_kwh == pytest.approx(117 / 1000)
    assert report.host("new").energy_kwh == pytest.approx(247 / 1000)
    assert meter.power_w("new") == (247.0, 247.0)
    with pytest.raises(ValidationError, match="no power model"):
        EnergyMeter(["x"], {"y": PowerModel.named()})


def test_the_meter_refuses_time_going_back_and_unknown_hosts() -> None:
    meter = EnergyMeter(["h"])
    meter.update(10.0, "h", 0.1, 0, False)
    with pytest.raises(ValidationError, match="before"):
        meter.update(9.0, "h", 0.1, 0, False)
    with pytest.raises(ValidationError, match="unknown host"):
        meter.update(11.0, "x", 0.1, 0, False)
    with pytest.raises(ValidationError, match="before"):
        meter.finish(5.0)
    with pytest.raises(ValidationError):
        meter.update(12.0, "h", 0.1, -1, False)
    with pytest.raises(ValidationError, match="unique"):
        EnergyMeter(["h", "h"])


def test_finish_does_not_change_the_meter() -> None:
    meter = EnergyMeter(["h"])
    meter.update(0.0, "h", 0.5, 0, False)
    first = meter.finish(100.0)
    assert meter.finish(100.0) == first
    assert meter.finish(200.0).energy_kwh == pytest.approx(2 * first.energy_kwh)


@given(
    st.floats(0, 1.5, allow_nan=False),
    st.floats(0, 64 * GIB, allow_nan=False),
    st.lists(st.floats(0.001, 1000, allow_nan=False), min_size=1, max_size=30),
)
def test_splitting_a_constant_segment_does_not_change_the_energy(
    util: float, memory: float, pieces: list[float]
) -> None:
    model = PowerModel.named("hp-ml110-g5")
    meter = EnergyMeter(["h"], model)
    t = 0.0
    for piece in pieces:
        meter.update(t, "h", util, memory, False)
        t += piece
    report = meter.finish(t)
    expected = model.power_w(util, memory) * t / JOULES_PER_KWH
    assert report.energy_kwh == pytest.approx(expected, rel=1e-9)


@given(st.floats(0, 1, allow_nan=False), st.floats(0, 1, allow_nan=False))
def test_power_never_decreases_with_load(a: float, b: float) -> None:
    for table in POWER_TABLES.values():
        low, high = sorted((a, b))
        assert table.cpu_power_w(low) <= table.cpu_power_w(high) + 1e-9
        assert table.idle_w <= table.cpu_power_w(low) <= table.max_w
