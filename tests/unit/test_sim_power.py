"""The power manager in the simulator (DESIGN 3.15, sim/power.py): hosts switched off when idle
and on when needed, the energy as drawn, requests held for a booting host, and consolidation's
make-before-break moves. Small hand-made traces whose outcome can be computed by hand."""

from __future__ import annotations

from typing import Any

import pytest

from domain.energy import JOULES_PER_KWH, PowerModel
from domain.events import Moved, SwitchedOff, SwitchedOn, SwitchingOff, SwitchingOn
from domain.power import PowerSettings, PowerState
from domain.slo import SloTable
from sim.config import SimConfig, SimResult
from sim.engine import Simulation
from tests.unit.test_simulator import GIB, header, profiles, request
from workloads.trace import TraceRequest

FLAT = profiles(ffmpeg=[(0.0, 1.0, 0.5)], redis=[(0.0, 0.2, 0.5)])
CORE = 1024
ON = PowerSettings(enabled=True)


def run(requests: list[TraceRequest], *, hosts: int = 2, policy: str = "spread",
        duration_s: float = 1000.0, power: PowerSettings | None = ON,
        **config: Any) -> tuple[Simulation, SimResult]:
    head = header(*((f"h{i}", 8 * CORE, 12 * GIB) for i in range(1, hosts + 1)),
                  duration_s=duration_s)
    sim = Simulation(head, [(r, False) for r in requests], FLAT,
                     SimConfig(policy, power=power, check_invariants=True, **config))
    return sim, sim.run()


def switches(sim: Simulation) -> list[tuple[float, str, str]]:
    assert sim._power is not None
    state = {SwitchingOff: "shutting-down", SwitchedOff: "off", SwitchingOn: "booting",
             SwitchedOn: "on"}
    return [(e.t or 0.0, e.host or "", state[type(e)]) for e in sim._power.events
            if not isinstance(e, Moved)]


def test_without_the_power_manager_the_energy_as_drawn_is_all_on_and_nothing_switches() -> None:
    reqs = [request(10.0, "r1", "ffmpeg", CORE, GIB, 100.0)]
    _, off = run(reqs, power=None)
    _, disabled = run(reqs, power=PowerSettings(enabled=False))
    for result in (off, disabled):
        metrics = result.result.metrics
        assert metrics.energy_kwh == metrics.energy_kwh_all_on
        assert (metrics.switches_on, metrics.switches_off, metrics.moves,
                metrics.boot_waits) == (0, 0, 0, 0)
    assert off.result.metrics.energy_kwh == disabled.result.metrics.energy_kwh


@pytest.mark.parametrize("standby_w", [5.0, 12.5])
def test_an_idle_host_is_switched_off_after_idle_s_and_draws_standby_power(
        standby_w: float) -> None:
    # h1 runs a job from 10 s to 110 s; h2 never holds anything: it is switched off at 300 s
    # (empty since 0 for idle_s), shuts down for 20 s at idle power, then draws standby_w. h1
    # stays on: min_on is 1.
    power = PowerSettings(enabled=True, standby_w=standby_w)
    sim, result = run([request(10.0, "r1", "ffmpeg", CORE, GIB, 100.0)], power=power)
    assert switches(sim) == [(300.0, "h2", "shutting-down"), (320.0, "h2", "off")]
    metrics = result.result.metrics
    assert (metrics.switches_off, metrics.switches_on) == (1, 0)
    idle_w = PowerModel.named().table.idle_w
    saved_j = (idle_w - standby_w) * (1000.0 - 320.0)
    assert metrics.energy_kwh_all_on - metrics.energy_kwh == pytest.approx(
        saved_j / JOULES_PER_KWH, rel=1e-9)
    assert metrics.hosts_off_mean == pytest.approx((1000.0 - 300.0) / 1000.0)
    assert sim._power is not None and sim._power.book.state("h2") is PowerState.OFF


def test_a_request_only_a_host_not_on_takes_waits_for_it_to_boot() -> None:
    # h1 holds a service; h2 and h3 are switched off at 300 s (the spare room is the largest
    # request alone, share 0: h1 keeps it). At 500 s a larger request arrives that h1 cannot
    # take: it is held for h2, which is switched on and boots for boot_s (120 s); then it runs
    # there.
    power = PowerSettings(enabled=True, spare_window_share=0.0)
    reqs = [request(1.0, "s1", "redis", 2 * CORE, 2 * GIB, 5000.0),
            request(500.0, "r2", "ffmpeg", 7 * CORE, 4 * GIB, 100.0)]
    sim, result = run(reqs, hosts=3, power=power, keep_requests=True)
    seen = switches(sim)
    on_at = [t for t, host, state in seen if state == "booting"]
    assert len(on_at) == 1 and on_at[0] == 500.0
    booted = next(t for t, host, state in seen if state == "on")
    assert booted == 500.0 + power.boot_s
    metrics = result.result.metrics
    assert metrics.boot_waits == 1 and metrics.boot_wait_s == pytest.approx(power.boot_s)
    assert metrics.successful == 2 and metrics.failed == 0
    level = next(r for r in result.result.request_levels if r.id == "r2")
    # it waited 120 s, then ran 100 s: availability 100 / 220 (the first allocation is free)
    assert level.availability == pytest.approx(100.0 / 220.0)


def test_without_the_power_manager_that_request_is_refused_on_one_host() -> None:
    reqs = [request(1.0, "s1", "redis", 2 * CORE, 2 * GIB, 5000.0),
            request(500.0, "r2", "ffmpeg", 7 * CORE, 4 * GIB, 100.0)]
    _, result = run(reqs, hosts=1, power=None)
    assert result.result.metrics.failed == 1


def _consolidation_trace() -> list[TraceRequest]:
    # j1 (class 1) fills h3 until 40 s (energy takes the empty hosts from the last); s1
    # (class 4) does not fit beside it and goes to h2; s2 (class 4) goes beside j1 on h3.
    # Once j1 ended, h3 holds only s2, the least allocated host of services: s2 moves to h2
    # and h3 is empty. h1 never held anything.
    return [request(0.0, "j1", "ffmpeg", 7000, 2 * GIB, 40.0, cls=1),
            request(1.0, "s1", "redis", 2 * CORE, GIB, 5000.0, cls=4),
            request(2.0, "s2", "redis", CORE, GIB, 5000.0, cls=4)]


def test_consolidation_moves_a_service_make_before_break_and_never_a_job() -> None:
    power = PowerSettings(enabled=True, spare_window_share=0.0)
    sim, result = run(_consolidation_trace(), hosts=3, policy="energy", power=power,
                      keep_requests=True, slo=SloTable())
    assert sim._power is not None
    moves = [e for e in sim._power.events if isinstance(e, Moved)]
    assert [(m.source, m.host) for m in moves] == [("h3", "h2")]
    assert moves[0].t is not None and moves[0].t > 40.0  # not while j1 (a job) ran on h3
    assert result.result.metrics.moves == 1
    task = sim.store.task("s2")
    assert task is not None and task.host == "h2"
    level = next(r for r in result.result.request_levels if r.id == "s2")
    assert level.availability == 1.0 and level.preemptions == 0  # it never stopped
    # the emptied host is empty from the move on (it follows the switch-off rule: here the
    # spare room, j1's 7000 shares, keeps it on once h1 is off)
    assert sim._power.idle_since["h3"] == moves[0].t
    assert [host for _, host, state in switches(sim) if state == "off"] == ["h1"]


def test_consolidation_off_moves_nothing() -> None:
    power = PowerSettings(enabled=True, spare_window_share=0.0, consolidate=False)
    sim, result = run(_consolidation_trace(), hosts=3, policy="energy", power=power)
    assert result.result.metrics.moves == 0
    task = sim.store.task("s2")
    assert task is not None and task.host == "h3"


@pytest.mark.parametrize("policy", ["energy", "qos", "binpack", "spread", "tlp"])
def test_every_policy_runs_with_the_power_manager_and_keeps_the_books(policy: str) -> None:
    from tests.unit.test_simulator import thesis_sim

    sim = thesis_sim(policy, duration_s=900.0, check_invariants=True,
                     power=PowerSettings(enabled=True, spare_window_share=0.0, idle_s=60.0))
    result = sim.run()
    metrics = result.result.metrics
    assert metrics.energy_kwh <= metrics.energy_kwh_all_on
    assert metrics.successful > 100
