"""A request's service level from its typed history (domain/service_history.py), by hand."""

from __future__ import annotations

import pytest

from domain.events import Event, EventKind, event_from_json
from domain.service_history import service_level

K = EventKind


def ev(kind: EventKind, t: float, host: str | None = None) -> Event:
    """An event of ``kind`` at ``t``, on ``host`` when its kind has one."""
    return event_from_json({"kind": kind.value, "t": t, "host": host})


def test_a_service_killed_once_and_placed_again() -> None:
    """Submitted at 100 and queued, placed at 101 (its first allocation, 1.2 s, is free: it runs from
    102.2), killed at 200, queued, placed again at 250 (runs from 251.2: its 1.2 s are
    charged), asked about at 400. e = (200 - 102.2) + (400 - 251.2) = 246.6;
    p = 1 (waiting before its first placement) + 50 + 1.2 = 52.2; A = 246.6 / 298.8.
    SLO 0.9: Q = 246.6 / 0.9 - 298.8 - 1.2 = -26.0 (behind)."""
    history = [ev(K.SUBMITTED, 100), ev(K.QUEUED, 100), ev(K.PLACED, 101, "a"),
               ev(K.KILLED, 200), ev(K.QUEUED, 200), ev(K.PLACED, 250, "b")]
    level = service_level(history, now=400, objective=0.9, alpha_s=1.2, is_job=False)
    assert level is not None
    assert level.executed_s == pytest.approx(246.6)
    assert level.pending_s == pytest.approx(52.2)
    assert level.availability == pytest.approx(246.6 / 298.8)
    assert level.qos == pytest.approx(246.6 / 0.9 - 298.8 - 1.2)
    assert (level.preemptions, level.met, level.lost_s) == (1, False, 0.0)  # a service
    assert level.to_json()["slo"] == 0.9


def test_a_job_loses_the_work_of_the_run_it_was_preempted_from_and_ends() -> None:
    history = [ev(K.SUBMITTED, 0), ev(K.PLACED, 0, "a"), ev(K.PREEMPTED, 50),
               ev(K.PLACED, 60, "a"), ev(K.ENDED, 160), ev(K.OTHER, 500)]
    level = service_level(history, now=1000, objective=0.5, alpha_s=0.0, is_job=True)
    assert level is not None  # over at 160: later moments change nothing
    # its 50 s before the preemption delivered nothing: p, not e (DESIGN 3.10)
    assert (level.executed_s, level.pending_s, level.lost_s) == (100.0, 60.0, 50.0)
    assert level.met and level.preemptions == 1  # 100 / 160 >= 0.5


def test_refused_at_once_received_nothing_and_cuts_change_nothing() -> None:
    refused = service_level([ev(K.SUBMITTED, 0), ev(K.REJECTED, 0)], now=10, objective=0.5,
                            alpha_s=1.2, is_job=True)
    assert refused is not None and refused.availability == 0.0 and not refused.met
    cut = service_level([ev(K.SUBMITTED, 0), ev(K.PLACED, 0, "a"), ev(K.CUT, 30),
                         ev(K.RESTORED, 60)], now=100, objective=1.0, alpha_s=0.0,
                        is_job=False)
    assert cut is not None and cut.availability == 1.0 and cut.executed_s == 100.0


def test_taken_off_before_its_container_ran_and_no_submission_to_start_from() -> None:
    """Placed again at 10, its host lost at 10.5 (alpha 1.2: it never ran there)."""
    history = [ev(K.SUBMITTED, 0), ev(K.PLACED, 0, "a"), ev(K.KILLED, 5),
               ev(K.PLACED, 10, "b"), ev(K.HOST_LOST, 10.5)]
    level = service_level(history, now=20, objective=1.0, alpha_s=1.2, is_job=False)
    assert level is not None
    assert level.executed_s == pytest.approx(5 - 1.2)
    assert level.preemptions == 2
    assert service_level([ev(K.PLACED, 0, "a")], now=5, objective=1.0, alpha_s=0.0,
                         is_job=False) is None


def test_started_events_measure_each_allocation_time() -> None:
    """The same story as the first test, with the manager's `started` events: the first start
    (at 104, 3 s after its placement) is free; the second placement's (250 to 256) is measured,
    not alpha; and the events are read in time order, as a started event is recorded late,
    dated when Swarm saw the container run. e = (200 - 104) + (400 - 256) = 240;
    p = 1 + 50 + 6 = 57; C = 6 / (240 + 6)."""
    history = [ev(K.SUBMITTED, 100), ev(K.QUEUED, 100), ev(K.PLACED, 101, "a"), ev(K.CUT, 105),
               ev(K.STARTED, 104, "a"), ev(K.KILLED, 200), ev(K.QUEUED, 200),
               ev(K.PLACED, 250, "b"), ev(K.STARTED, 256, "b")]
    level = service_level(history, now=400, objective=0.9, alpha_s=1.2, is_job=False)
    assert level is not None
    assert level.executed_s == pytest.approx(240.0)
    assert level.pending_s == pytest.approx(57.0)
    assert level.overhead == pytest.approx(6 / 246)
    # placed again, not started yet: waiting, however long past alpha
    waiting = service_level(history[:-1], now=300, objective=0.9, alpha_s=1.2, is_job=False)
    assert waiting is not None
    assert waiting.executed_s == pytest.approx(96.0)
    assert waiting.pending_s == pytest.approx(1 + 50 + 50)


def test_placed_on_arrival_its_decision_is_part_of_the_free_first_allocation() -> None:
    """Class 1, SLO 1: submitted at 0, placed by the decision on its arrival at 0.3 (the
    manager's decision and the service's creation), running at 1.5. It never waited: it meets
    an objective of 1, as it does in the simulator, where a decision takes no time."""
    history = [ev(K.SUBMITTED, 0), ev(K.PLACED, 0.3, "a"), ev(K.STARTED, 1.5, "a")]
    level = service_level(history, now=100, objective=1.0, alpha_s=1.2, is_job=False)
    assert level is not None
    assert (level.pending_s, level.availability, level.met) == (0.0, 1.0, True)
    # one that waited in the queue first had that wait counted
    queued = [ev(K.SUBMITTED, 0), ev(K.QUEUED, 0), *history[1:]]
    level = service_level(queued, now=100, objective=1.0, alpha_s=1.2, is_job=False)
    assert level is not None and level.pending_s == pytest.approx(0.3) and not level.met


def test_swarm_timestamps_are_read_to_the_microsecond() -> None:
    from manager.swarm import swarm_time

    assert swarm_time("2026-11-26T19:20:31.123456789Z") == pytest.approx(1795720831.123456)
    assert swarm_time("2026-11-26T19:20:31Z") == 1795720831.0
    assert swarm_time("2026-11-26T20:20:31.5+01:00") == 1795720831.5
    assert [swarm_time(x) for x in ("", None, "yesterday", 17)] == [None] * 4


def test_the_manager_reads_its_slo_and_allocation_time_and_refuses_bad_ones() -> None:
    from domain.errors import ValidationError
    from manager.settings import ManagerSettings

    settings = ManagerSettings.from_env({"GREENSWARM_SLO": "2=0.9,4=0.5",
                                         "GREENSWARM_ALLOCATION_S": "2.5"})
    assert [settings.slo_table.objective(c) for c in (1, 2, 3, 4)] == pytest.approx(
        [1.0, 0.9, 2 / 3, 0.5])
    assert settings.allocation_s == 2.5
    for env, field in (({"GREENSWARM_SLO": "2=1.5"}, "GREENSWARM_SLO"),
                       ({"GREENSWARM_SLO": "9=0.5"}, "GREENSWARM_SLO"),
                       ({"GREENSWARM_ALLOCATION_S": "-1"}, "GREENSWARM_ALLOCATION_S")):
        with pytest.raises(ValidationError) as caught:
            ManagerSettings.from_env(env)
        assert caught.value.field == field


def test_offloaded_on_arrival_runs_at_its_peer_like_a_placement_here() -> None:
    """A request its cluster offloaded (federation, DESIGN 12) is placed on the peer's host:
    this cluster's record then gets no `placed` or `started`, only `offloaded` with the host,
    and must not count the time it runs there as waiting. Stopped through this cluster at 50."""
    history = [ev(K.SUBMITTED, 0), ev(K.OFFLOADED, 0.5, "peer-node"), ev(K.STOPPED, 50)]
    level = service_level(history, now=100, objective=1.0, alpha_s=1.2, is_job=False)
    assert level is not None
    assert (level.availability, level.pending_s, level.met) == (1.0, 0.0, True)
    assert level.executed_s == pytest.approx(50 - 0.5 - 1.2)
    # refused by every peer and here: an offload without a host is no placement
    refused = service_level([ev(K.SUBMITTED, 0), ev(K.NOT_OFFLOADED, 0), ev(K.REJECTED, 0)],
                            now=10, objective=1.0, alpha_s=1.2, is_job=False)
    assert refused is not None and refused.availability == 0.0


# -- the outlook: the verdict from the last event on, without replaying again -----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from domain.service_history import slo_outlook  # noqa: E402

_STEPS = st.lists(st.tuples(st.sampled_from([K.QUEUED, K.PLACED, K.STARTED, K.KILLED,
                                             K.SUSPENDED, K.RESUMED,
                                             K.PREEMPTED, K.HOST_LOST, K.START_FAILED,
                                             K.CUT, K.ENDED, K.REJECTED]),
                            st.floats(0, 50)), max_size=8)


@settings(max_examples=400, deadline=None)
@given(_STEPS, st.sampled_from([1.0, 5 / 6, 2 / 3, 0.5]), st.sampled_from([0.0, 1.2, 7.0]),
       st.booleans(), st.lists(st.floats(0, 400), min_size=1, max_size=6))
def test_the_outlook_says_what_the_service_level_says_at_every_later_moment(
    steps: list[tuple[EventKind, float]], objective: float, alpha_s: float, is_job: bool,
    later: list[float],
) -> None:
    """The metrics' tally (manager/slo_tally.py) keeps each request's outlook from its last
    event; asked at any later moment it must agree with the full replay of GET /requests/{id}
    (away from the exact moment of a change, where rounding decides)."""
    t = 100.0
    history = [ev(K.SUBMITTED, t)]
    for kind, gap in steps:
        t += gap
        history.append(ev(kind, t, "a" if kind is K.PLACED else None))
    outlook = slo_outlook(history, objective=objective, alpha_s=alpha_s, is_job=is_job)
    assert outlook is not None and len(outlook.flips) <= 2
    for extra in later:
        now = t + extra
        if any(abs(now - f) < 1e-6 for f in outlook.flips):
            continue
        level = service_level(history, now=now, objective=objective, alpha_s=alpha_s,
                              is_job=is_job)
        assert level is not None
        assert outlook.meets_at(now) == (level.availability >= objective), (now, outlook)


def test_a_waiting_request_stops_meeting_its_objective_when_its_slack_is_spent() -> None:
    """Placed on arrival at 0, running from 0 (measured), killed at 100: e = 100, p = 0. With
    sigma = 0.5 it meets the objective until p = 100, at 200, unless something happens."""
    history = [ev(K.SUBMITTED, 0), ev(K.PLACED, 0, "a"), ev(K.STARTED, 0), ev(K.KILLED, 100)]
    outlook = slo_outlook(history, objective=0.5, alpha_s=1.2, is_job=False)
    assert outlook is not None and not outlook.final
    assert outlook.meets and outlook.flips == (pytest.approx(200.0),)
    assert outlook.meets_at(199) and not outlook.meets_at(201)
    refused = slo_outlook([ev(K.SUBMITTED, 0), ev(K.REJECTED, 0)], objective=0.5,
                          alpha_s=1.2, is_job=False)
    assert refused is not None and refused.final and not refused.meets


def test_a_pause_is_p_and_a_checkpointed_job_keeps_its_checkpoints() -> None:
    """A job placed at 0 (alpha 0), paused 100-160 (suspended, resumed: DESIGN 3.14), killed
    at 260 (it ran 200 s since its start), placed again at 300, ended at 400. With a checkpoint
    every 60 s of its run it kept 180 s and lost 20: e = 180 + 100, p = 60 + 20 + 40; without,
    it lost all 200: e = 100, p = 60 + 200 + 40."""
    history = [ev(K.SUBMITTED, 0), ev(K.PLACED, 0, "a"), ev(K.SUSPENDED, 100),
               ev(K.RESUMED, 160), ev(K.KILLED, 260), ev(K.PLACED, 300, "b"), ev(K.ENDED, 400)]
    kept = service_level(history, now=400, objective=0.5, alpha_s=0.0, is_job=True,
                         checkpoint_interval_s=60.0)
    assert kept is not None
    assert (kept.executed_s, kept.pending_s, kept.lost_s) == (280.0, 120.0, 20.0)
    lost = service_level(history, now=400, objective=0.5, alpha_s=0.0, is_job=True)
    assert lost is not None
    assert (lost.executed_s, lost.pending_s, lost.lost_s) == (100.0, 300.0, 200.0)
