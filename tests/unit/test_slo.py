"""Service levels per request (DESIGN 3.10): the paper's numbers, worked by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.errors import ValidationError
from domain.slo import (
    Phase,
    ServiceClock,
    SloTable,
    availability,
    preemption_overhead,
    qos_metric,
)

MIN = 60.0


def test_the_papers_example_time_to_violate() -> None:
    """j ran 58 of its 60 minutes, k ran all of its 10, both with an SLO of 0.9: j may wait
    about 4.4 minutes before it violates it, k about 1.1 (the paper's section on QoS metrics)."""
    j = qos_metric(58 * MIN, 2 * MIN, 0.9, 0.0)
    k = qos_metric(10 * MIN, 0.0, 0.9, 0.0)
    assert j / MIN == pytest.approx(58 / 0.9 - 60)  # 4.444...
    assert round(j / MIN, 1) == 4.4 and round(k / MIN, 1) == 1.1
    assert availability(58 * MIN, 2 * MIN) == pytest.approx(0.9667, abs=1e-4)
    assert availability(10 * MIN, 0) == 1.0
    # after k waited its 1.1 minutes: 10 / 11.1 = 90.09 %, right at the edge
    assert availability(10 * MIN, k) == pytest.approx(0.9)


def test_recoverability_is_the_same_formula_negative_below_the_objective() -> None:
    assert availability(30.0, 70.0) < 0.5
    r = qos_metric(30.0, 70.0, 0.5, 0.0)
    assert r == pytest.approx(30 / 0.5 - 100) == -40.0  # 40 s it would have had to run more
    assert qos_metric(30.0, 70.0, 0.5, 2.0) == -42.0  # alpha makes it more urgent


def test_the_preemption_overhead() -> None:
    assert preemption_overhead(0.0, 100.0) == 0.0
    assert preemption_overhead(10.0, 90.0) == pytest.approx(0.1)  # 10 / (90 + 10)
    assert preemption_overhead(0.0, 0.0) == 0.0


def test_a_clock_counts_e_and_p_and_spares_the_first_allocation() -> None:
    clock = ServiceClock(admitted_s=0.0)
    clock.placed(5.0)  # waited 5 s
    clock.running(7.0)  # the first allocation: 2 s, counted nowhere
    clock.stopped(57.0)  # ran 50 s, killed: those 50 s of work are lost
    clock.placed(67.0)  # waited 10 s
    clock.running(70.0)  # a second allocation: 3 s, counted in p and in C
    clock.ended(100.0)  # ran 30 s
    level = clock.at(100.0, objective=0.8)
    # a job restarts from scratch: its 50 s before the kill delivered nothing and are p
    # (DESIGN 3.10); it met nothing
    assert (level.executed_s, level.pending_s) == (30.0, 68.0)
    assert level.availability == pytest.approx(30 / 98)
    assert not level.met
    assert level.overhead == pytest.approx(3 / 33)
    assert (level.preemptions, level.lost_s) == (1, 50.0)
    assert clock.at(500.0, 0.8) == level  # nothing counts once it is over


def test_a_service_keeps_the_time_it_served_before_a_kill() -> None:
    clock = ServiceClock(admitted_s=0.0)
    clock.placed(5.0)
    clock.running(7.0)
    clock.stopped(57.0, work_lost=False)  # a service: it served those 50 s
    clock.placed(67.0)
    clock.running(70.0)
    clock.ended(100.0)
    level = clock.at(100.0, objective=0.8)
    assert (level.executed_s, level.pending_s) == (80.0, 18.0)
    assert level.availability == pytest.approx(80 / 98) and level.met  # 0.816 >= 0.8
    assert level.overhead == pytest.approx(3 / 83)
    assert (level.preemptions, level.lost_s) == (1, 0.0)


def test_an_expected_start_happens_when_time_passes_it_and_never_after_a_stop() -> None:
    """Placed again at 10 with its container taken to run 2 s later: at 11 it still waits;
    any later call (here a settle at 13) starts it at 12, not at 13. Placed again at 20 and
    stopped at 21, before its expected start at 22: it never ran there."""
    clock = ServiceClock(admitted_s=0.0)
    clock.placed(0.0, on_arrival=True, starts_after_s=0.0)
    clock.stopped(5.0)  # ran 0-5
    clock.placed(10.0, starts_after_s=2.0)
    clock.settle(11.0)
    assert clock.phase is Phase.ALLOCATING
    clock.settle(13.0)
    # p: the 5 s run the stop threw away, 5 s waiting, 2 s allocating
    assert (clock.phase, clock.run_started_s, clock.pending_s) == (Phase.RUNNING, 12.0, 12.0)
    clock.stopped(15.0)
    clock.placed(20.0, starts_after_s=2.0)
    clock.stopped(21.0)
    clock.settle(30.0)
    # it ran 5 s and 3 s, never there after: a job, both runs thrown away (p, and lost)
    assert clock.phase is Phase.WAITING and clock.executed_s == 0.0
    assert clock.lost_s == 5.0 + 3.0


def test_a_new_request_starts_at_q_zero_and_loses_a_second_per_second() -> None:
    clock = ServiceClock(admitted_s=100.0)
    assert clock.at(100.0, 0.5, expected_alpha_s=3.0).qos == 0.0
    assert clock.at(130.0, 0.5, expected_alpha_s=3.0).qos == -30.0
    assert clock.at(130.0, 0.5).availability == 0.0
    clock.placed(130.0)
    clock.running(131.0)
    running = clock.at(151.0, 0.5, expected_alpha_s=3.0)  # ran 20 s, waited 30 s
    assert running.qos == pytest.approx(20 / 0.5 - 50 - 3)


@given(st.lists(st.tuples(st.sampled_from(["placed", "running", "stopped", "ended"]),
                          st.floats(0, 1000)), max_size=30),
       st.floats(0.05, 1.0))
def test_availability_stays_in_zero_one(steps: list[tuple[str, float]], objective: float) -> None:
    clock = ServiceClock(admitted_s=0.0)
    t = 0.0
    for action, dt in steps:
        t += dt
        getattr(clock, action)(t)
        level = clock.at(t, objective)
        assert 0.0 <= level.availability <= 1.0
        assert 0.0 <= level.overhead <= 1.0
        assert level.executed_s >= 0 and level.pending_s >= 0


def test_the_slo_table_defaults_and_overrides() -> None:
    table = SloTable.parse("2=0.9,4=0.5")
    assert [table.objective(c) for c in (1, 2, 3, 4)] == [1.0, 0.9, pytest.approx(2 / 3), 0.5]
    assert SloTable().as_dict() == {"1": 1.0, "2": pytest.approx(5 / 6),
                                    "3": pytest.approx(2 / 3), "4": 0.5}
    for bad in ("2", "5=0.5", "2=0", "2=1.5", "2=x", "2=0.9,2=0.8", "2=nan"):
        with pytest.raises(ValidationError) as error:
            SloTable.parse(bad)
        assert error.value.field == "slo"


@pytest.mark.parametrize(("case", "checkpoint_s", "work_lost", "e", "p", "lost", "restarts"), [
    # ran 0-250 s, killed at 250, waits 50 s, ends at 300
    ("a job from scratch: its run moves to p", 0.0, True, 0.0, 300.0, 250.0, 0),
    ("checkpoints every 100 s: 200 kept, 50 lost", 100.0, True, 200.0, 100.0, 50.0, 1),
    ("a checkpoint interval longer than the run keeps nothing", 300.0, True, 0.0, 300.0,
     250.0, 0),
    ("a service keeps what it served", 0.0, False, 250.0, 50.0, 0.0, 0),
])
def test_a_kill_costs_the_run_since_the_last_start_or_checkpoint(
    case: str, checkpoint_s: float, work_lost: bool, e: float, p: float, lost: float,
    restarts: int,
) -> None:
    clock = ServiceClock(admitted_s=0.0, checkpoint_interval_s=checkpoint_s)
    clock.placed(0.0, on_arrival=True, starts_after_s=0.0)
    clock.stopped(250.0, work_lost=work_lost)
    clock.ended(300.0)
    level = clock.at(300.0, objective=0.5)
    assert (level.executed_s, level.pending_s, level.lost_s) == (e, p, lost), case
    assert clock.checkpoint_restarts == restarts, case


def test_a_paused_request_accrues_p_and_loses_nothing_and_a_later_kill_only_its_runs() -> None:
    """Runs 0-100, paused 100-160 (p), runs 160-200: e = 140, p = 60, nothing lost. Killed at
    200 it loses its 140 s of running since its start (the pause is p already)."""
    clock = ServiceClock(admitted_s=0.0)
    clock.placed(0.0, on_arrival=True, starts_after_s=0.0)
    clock.suspended(100.0)
    assert clock.at(130.0, 0.5).pending_s == 30.0
    clock.resumed(160.0)
    level = clock.at(200.0, 0.5)
    assert (level.executed_s, level.pending_s, level.lost_s) == (140.0, 60.0, 0.0)
    assert (clock.suspensions, clock.preemptions) == (1, 0)
    clock.stopped(200.0)
    level = clock.at(200.0, 0.5)
    assert (level.executed_s, level.pending_s, level.lost_s) == (0.0, 200.0, 140.0)
    assert clock.preemptions == 1
