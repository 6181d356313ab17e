"""Power states (DESIGN 3.15): the timed state machine, the record of recent requests behind the
spare-room rule, the settings, and the energy as drawn in each state (DESIGN 7.4)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.energy import JOULES_PER_KWH, EnergyMeter, PowerModel
from domain.errors import ConflictError, ValidationError
from domain.power import (
    HostPower,
    PowerAction,
    PowerBook,
    PowerDecision,
    PowerReason,
    PowerSettings,
    PowerState,
    RecentRequests,
    power_settings_from_env,
)

ON, OFF, BOOTING, SHUTTING = (PowerState.ON, PowerState.OFF, PowerState.BOOTING,
                              PowerState.SHUTTING_DOWN)


def off(host: str) -> PowerDecision:
    return PowerDecision(host, PowerAction.SWITCH_OFF, PowerReason.IDLE, "test")


def on(host: str) -> PowerDecision:
    return PowerDecision(host, PowerAction.SWITCH_ON, PowerReason.REQUEST, "test", "r1")


# -- the state machine ---------------------------------------------------------------------------


def test_a_switch_off_takes_shutdown_s_and_a_switch_on_boot_s_each_ended_at_its_own_moment() -> None:
    book = PowerBook(["a", "b"], now=0.0, boot_s=120.0, shutdown_s=20.0)
    change = book.apply(off("a"), 100.0)
    assert (change.old, change.new, change.at) == (ON, SHUTTING, 100.0)
    assert book.get("a") == HostPower(SHUTTING, 100.0, 120.0)
    assert book.next_change_at() == 120.0
    assert book.tick(119.999) == []
    assert book.closed() == frozenset({"a"})
    [done] = book.tick(500.0)  # ticked late: the change still happens at 120 s
    assert (done.host, done.old, done.new, done.at) == ("a", SHUTTING, OFF, 120.0)
    assert book.get("a") == HostPower(OFF, 120.0)
    assert book.next_change_at() is None
    book.apply(on("a"), 600.0)
    assert book.get("a") == HostPower(BOOTING, 600.0, 720.0)
    assert book.tick(719.0) == []
    [up] = book.tick(720.0)
    assert (up.old, up.new, up.at) == (BOOTING, ON, 720.0)
    assert book.closed() == frozenset()


def test_several_due_transitions_come_in_time_order() -> None:
    book = PowerBook(["a", "b", "c"], boot_s=120.0, shutdown_s=20.0)
    book.apply(off("a"), 50.0)
    book.apply(off("b"), 10.0)
    book.tick(100.0)
    book.apply(on("b"), 30.0 + 20.0)
    changes = book.tick(1000.0)
    assert [(c.host, c.at) for c in changes] == [("b", 170.0)]
    assert book.state("a") is OFF and book.state("b") is ON and book.state("c") is ON


@pytest.mark.parametrize(("state", "decision"), [
    (SHUTTING, off), (OFF, off), (BOOTING, off), (ON, on), (SHUTTING, on), (BOOTING, on),
])
def test_a_switch_from_the_wrong_state_is_a_conflict_and_changes_nothing(state, decision) -> None:
    book = PowerBook(["a"])
    book.remove_host("a")
    book.add_host("a", 0.0, state)
    with pytest.raises(ConflictError):
        book.apply(decision("a"), 10.0)
    assert book.state("a") is state


def test_a_live_book_waits_for_the_backend_to_settle_a_switch() -> None:
    book = PowerBook(["a"], timed=False)
    book.apply(off("a"), 10.0)
    assert book.get("a").until is None and book.next_change_at() is None
    assert book.tick(10_000.0) == []
    change = book.settle("a", OFF, 14.5, "engine stopped")
    assert change is not None and (change.old, change.new, change.at) == (SHUTTING, OFF, 14.5)
    assert book.settle("a", OFF, 20.0) is None  # nothing changed


def test_settings_read_from_the_environment_and_bad_values_name_their_field() -> None:
    loaded = power_settings_from_env({"GREENSWARM_POWER": "on", "GREENSWARM_POWER_IDLE_S": "60",
                                      "GREENSWARM_POWER_MIN_ON": "2",
                                      "GREENSWARM_POWER_BACKEND": "lab"})
    assert loaded.enabled and loaded.idle_s == 60.0 and loaded.min_on == 2
    assert loaded.boot_s == 120.0 and loaded.shutdown_s == 20.0 and loaded.standby_w == 5.0
    assert not power_settings_from_env({}).enabled
    with pytest.raises(ValidationError) as info:
        power_settings_from_env({"GREENSWARM_POWER_MIN_ON": "0"})
    assert info.value.field == "min_on"
    with pytest.raises(ValidationError) as info:
        power_settings_from_env({"GREENSWARM_POWER": "maybe"})
    assert info.value.field == "GREENSWARM_POWER_ENABLED"
    with pytest.raises(ValidationError) as info:
        PowerSettings(idle_s=math.inf)
    assert info.value.field == "idle_s"


# -- recent requests -------------------------------------------------------------------------------


def test_the_spare_room_is_the_largest_request_plus_the_busiest_boot_window() -> None:
    recent = RecentRequests(window_s=120.0, horizon_s=3600.0)
    recent.record(0.0, 1000, 10)
    recent.record(60.0, 200, 500)  # window ending at 60: 1200 CPU, 510 memory
    recent.record(200.0, 300, 300)  # (0 and 60 are out of its window)
    recent.record(250.0, 400, 100)  # window ending at 250: 700, 400
    assert recent.spare_need(300.0) == (1000 + 1200, 500 + 510)
    # an hour after the first two, only the later ones count
    assert recent.spare_need(3660.5) == (400 + 700, 300 + 400)
    assert recent.spare_need(10_000.0) == (0, 0)


def test_requests_must_come_in_time_order() -> None:
    recent = RecentRequests()
    recent.record(10.0, 1, 1)
    with pytest.raises(ValidationError):
        recent.record(9.0, 1, 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 50), st.integers(1, 4096), st.integers(1, 4096)),
                max_size=40),
       st.floats(0, 200), st.floats(200, 2000))
def test_the_incremental_spare_room_equals_a_brute_force_count(gaps, window, horizon) -> None:
    recent = RecentRequests(window_s=window, horizon_s=horizon)
    arrivals: list[tuple[float, int, int]] = []
    t = 0.0
    for gap, cpu, memory in gaps:
        t += gap
        recent.record(t, cpu, memory)
        arrivals.append((t, cpu, memory))
    now = t + 1.0
    kept = [a for a in arrivals if a[0] >= now - horizon]
    # windows ending at each arrival of the horizon, over every arrival (the first may reach
    # back before the horizon)
    busy_cpu = max((sum(c for (s, c, _) in arrivals if e - window < s <= e)
                    for (e, _, _) in kept), default=0)
    busy_memory = max((sum(m for (s, _, m) in arrivals if e - window < s <= e)
                       for (e, _, _) in kept), default=0)
    expected = (max((c for _, c, _ in kept), default=0) + busy_cpu,
                max((m for _, _, m in kept), default=0) + busy_memory)
    assert recent.spare_need(now) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 50), st.booleans(), st.integers(1, 4096),
                          st.integers(1, 4096)), max_size=40),
       st.floats(0, 200), st.floats(200, 2000), st.booleans())
def test_the_net_spare_room_takes_what_ended_off_each_window(events, window, horizon,
                                                             net) -> None:
    """The net spare rule (an experiment beside DESIGN 3.15's): at each arrival, what was
    requested less what ended in the window before it; without the rule, ends change
    nothing."""
    recent = RecentRequests(window_s=window, horizon_s=horizon, net=net)
    seen: list[tuple[float, bool, int, int]] = []
    t = 0.0
    for gap, is_end, cpu, memory in events:
        t += gap
        if is_end:
            recent.release(t, cpu, memory)
        else:
            recent.record(t, cpu, memory)
        seen.append((t, is_end, cpu, memory))
    now = t + 1.0
    arrivals = [(s, c, m) for (s, end, c, m) in seen if not end]
    kept = [a for a in arrivals if a[0] >= now - horizon]

    # a window ends at an arrival: the entries up to it (an end at the same instant after it
    # is not yet in)
    def at(e: float, position: int, index: int) -> int:
        upto = seen[:position + 1]
        return sum((-v[index] if end and net else 0 if end else v[index])
                   for (s, end, *v) in upto if e - window < s <= e)

    positions = [i for i, (s, end, _, _) in enumerate(seen) if not end and s >= now - horizon]
    busy_cpu = max([0, *(at(seen[i][0], i, 0) for i in positions)])
    busy_memory = max([0, *(at(seen[i][0], i, 1) for i in positions)])
    expected = (max((c for _, c, _ in kept), default=0) + busy_cpu,
                max((m for _, _, m in kept), default=0) + busy_memory)
    assert recent.spare_need(now) == expected


# -- energy as drawn -------------------------------------------------------------------------------


G4 = PowerModel.named("hp-ml110-g4")  # 86 W idle, 117 W at 100 %


def kwh(joules: float) -> float:
    return joules / JOULES_PER_KWH


def test_each_power_state_draws_its_own_power_exactly_between_changes() -> None:
    meter = EnergyMeter(["a", "b"], G4, standby_w=5.0)
    meter.update(0.0, "a", 0.5, 0.0, False)  # 102 W
    meter.update(100.0, "a", 0.0, 0.0, True)  # 86 W, empty
    meter.set_power_state(200.0, "a", SHUTTING)  # idle: 86 W
    meter.set_power_state(220.0, "a", OFF)  # 5 W
    assert meter.drawn_w("a") == 5.0
    meter.set_power_state(1000.0, "a", BOOTING)  # 117 W
    meter.set_power_state(1120.0, "a", ON)  # 86 W again, empty
    report = meter.finish(1200.0)
    a = report.host("a")
    drawn = 102 * 100 + 86 * 100 + 86 * 20 + 5 * 780 + 117 * 120 + 86 * 80
    all_on = 102 * 100 + 86 * 1100
    assert a.energy_kwh == pytest.approx(kwh(drawn), rel=1e-12)
    assert a.energy_kwh_all_on == pytest.approx(kwh(all_on), rel=1e-12)
    assert a.energy_kwh_switch_off == pytest.approx(kwh(102 * 100), rel=1e-12)
    assert a.off_s == pytest.approx(20 + 780 + 120)
    b = report.host("b")  # never switched: as drawn is all on
    assert b.energy_kwh == b.energy_kwh_all_on == pytest.approx(kwh(86 * 1200))
    assert report.energy_kwh == pytest.approx(a.energy_kwh + b.energy_kwh)
    assert report.energy_kwh_all_on == pytest.approx(a.energy_kwh_all_on + b.energy_kwh_all_on)


def test_a_host_still_off_at_the_end_counts_standby_to_the_end() -> None:
    meter = EnergyMeter(["a"], G4, standby_w=7.5)
    meter.set_power_state(0.0, "a", OFF)
    report = meter.finish(3600.0)
    assert report.energy_kwh == pytest.approx(7.5 / 1000)
    assert report.energy_kwh_all_on == pytest.approx(86 / 1000)
    assert report.host("a").off_s == 3600.0


def test_without_power_states_the_energy_as_drawn_is_all_on() -> None:
    meter = EnergyMeter(["a"], G4)
    meter.update(10.0, "a", 0.3, 2 * 1024**3, False)
    report = meter.finish(1000.0)
    assert report.energy_kwh == report.energy_kwh_all_on


def test_a_power_state_before_the_hosts_last_change_is_refused() -> None:
    meter = EnergyMeter(["a"], G4)
    meter.update(10.0, "a", 0.3, 0.0, False)
    with pytest.raises(ValidationError):
        meter.set_power_state(5.0, "a", OFF)
    with pytest.raises(ValidationError):
        meter.set_power_state(20.0, "nope", OFF)


def test_efficiency_is_watts_per_core_at_70_percent_load() -> None:
    assert G4.watts_per_core(2048) == pytest.approx(108 / 2)
    assert G4.watts_per_core(1024, load=1.0) == pytest.approx(117)
    assert G4.state_power_w(BOOTING, 0.0, 0.0) == 117
    assert G4.state_power_w(SHUTTING, 0.9, 0.0) == 86
    assert G4.state_power_w(OFF, 0.9, 0.0, standby_w=3.0) == 3.0
