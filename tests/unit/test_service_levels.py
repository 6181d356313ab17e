"""Service levels in the simulator and the reports (DESIGN 3.10, 7.3): every request's
availability, SLO, preemptions and work lost, per class; worked by hand on small traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.classes import CLASSES
from domain.lifecycle import EndStatus
from domain.model import HostSpec, TaskType
from domain.slo import SloTable
from measure.recorder import MetricsRecorder
from measure.report import build_summary, write_report
from measure.result_files import REQUESTS_FILE, load_result, save_result
from measure.service_levels import RequestStatus, gini, tally_of
from scheduler.admission import AdmissionMode
from tests.unit.test_simulator import (
    GIB,
    KILL_JOBS,
    KILL_PROFILES,
    KILLING,
    header,
    profiles,
    request,
    simulation,
)

SLO_KEYS = ("slo_fulfilment", "slo_fulfilment_by_class", "availability_by_class",
            "qos_deficit_by_class", "gini_by_class", "preemptions_mean", "preemptions_max",
            "work_lost_cpu_s", "work_lost_share", "restores")


def levels_of(result: Any) -> dict[str, Any]:
    return {level.id: level for level in result.result.request_levels}


# ------------------------------------------------------------------ one request, by hand


def test_a_killed_job_pays_its_wait_and_its_second_allocation_and_loses_its_run() -> None:
    """KILL_JOBS under energy (victims killed) on one 2-core host: 'low' (class 4, 150 s of
    work, 2 cores) runs 0-100 s, is killed for 'high' (class 1, 100-200 s), waits 100 s, is
    placed again at 200 s (alpha = 2 s charged as waiting: its first allocation was free) and
    ends at 350 s. It restarts from scratch: its first 100 s delivered nothing, so they are p,
    not e (DESIGN 3.10), and their 100 s x 2 cores are lost.
    low: e = 148, p = 100 + 100 + 2 = 202, A = 148 / 350 < 1/2: a miss; high: e = 100, A = 1."""
    result = simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                        policy="energy", end_s=1000.0, allocation_s=2.0, options=KILLING).run()
    levels = levels_of(result)
    low, high = levels["low"], levels["high"]
    assert low.availability == pytest.approx(148 / 350)
    assert (low.met_slo, low.preemptions, low.status) == (False, 1, RequestStatus.FINISHED)
    assert (high.availability, high.met_slo, high.preemptions) == (1.0, True, 0)
    m = result.result.metrics
    assert m.work_lost_cpu_s == pytest.approx(100 * 2.0)
    # delivered: every run, the one thrown away included
    assert m.work_lost_share == pytest.approx(200 / ((148 + 100 + 100) * 2.0))
    assert (m.slo_fulfilment, m.slo_met, m.preemptions_mean, m.preemptions_max) == (
        0.5, 1, 0.5, 1)
    assert m.slo_met_per_kwh == pytest.approx(1 / m.energy_kwh)


def test_a_paused_job_loses_nothing_and_its_pause_is_p() -> None:
    """The same jobs, victims paused where only CPU is missing (DESIGN 3.14, the default):
    'low' runs 0-100 s, is paused for 'high' (100-200 s) on the same host, resumes at 200 s
    with its 50 s of work left and ends at 250 s: e = 150, p = 100, A = 0.6 >= 1/2, nothing
    lost, no kill."""
    result = simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                        policy="energy", end_s=1000.0, allocation_s=2.0).run()
    low = levels_of(result)["low"]
    assert (low.availability, low.met_slo, low.status) == (
        pytest.approx(0.6), True, RequestStatus.FINISHED)
    m = result.result.metrics
    assert (m.kills, m.suspensions, m.resumes, m.work_lost_cpu_s) == (0, 1, 1, 0.0)
    assert result.result.by_class["4"]["suspended"] == 1
    assert result.result.by_class["4"]["resumed"] == 1
    assert result.result.makespan_s["ffmpeg"].mean == pytest.approx(250.0)  # 150 + its pause
    assert (m.slo_fulfilment, m.jobs_finished) == (1.0, 2)


def test_a_stricter_slo_turns_the_same_run_into_a_miss() -> None:
    result = simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                        policy="energy", end_s=1000.0, allocation_s=2.0,
                        slo=SloTable.parse("4=0.75")).run()
    service = result.result.service_levels
    assert service is not None
    four = service.by_class[4]
    assert (four.requests, four.met) == (1, 0)
    assert four.qos_deficit == pytest.approx(0.75 - 0.6)  # paused: 150 / 250
    assert service.fulfilment == 0.5


def test_a_victim_still_waiting_at_the_end_is_evaluated_then() -> None:
    # Cut off at 150 s: low ran 100 s and has waited 50: A = 100 / 150, status waiting.
    result = simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                        policy="energy", end_s=150.0).run()
    levels = levels_of(result)
    assert levels["low"].availability == pytest.approx(100 / 150)
    assert levels["low"].status is RequestStatus.WAITING
    assert levels["high"].status is RequestStatus.RUNNING


def test_a_refused_request_received_nothing_and_a_queued_one_its_share() -> None:
    """Class-1 jobs on one 2-core host: 'second' (at 10 s) does not fit beside 'first'
    (0-100 s). Refused, it has availability 0; queued, it waits 90 s and runs 50: 50 / 140."""
    head = header(("h1", 2048, 4 * GIB))
    jobs = (request(0, "first", "ffmpeg", 2048, GIB, 100.0, cls=1),
            request(10, "second", "ffmpeg", 1024, GIB, 50.0, cls=1))
    profs = profiles(ffmpeg=[(0.0, 0.5, 0.1)])
    refused = simulation(head, jobs, profs, policy="spread", end_s=200.0).run()
    second = levels_of(refused)["second"]
    assert (second.availability, second.met_slo, second.status) == (
        0.0, False, RequestStatus.REFUSED)
    assert refused.result.metrics.slo_fulfilment == 0.5
    queued = simulation(head, jobs, profs, policy="spread", end_s=200.0, queue_new=True,
                        admission=AdmissionMode.NONE).run()
    second = levels_of(queued)["second"]
    assert second.availability == pytest.approx(50 / 140)
    assert not second.met_slo
    service = queued.result.service_levels
    assert service is not None
    assert service.by_class[1].qos_deficit == pytest.approx(1 - 50 / 140)  # first met it
    assert service.by_class[1].availability_min == pytest.approx(50 / 140)
    assert service.by_class[1].availability_median == pytest.approx((1 + 50 / 140) / 2)


# ------------------------------------------------------------------ the recorder alone


HOSTS = (HostSpec("h1", 8192, 8 * GIB),)


def test_fairness_is_the_gini_of_each_intervals_active_requests_averaged() -> None:
    """Two class-2 services admitted at 0: 'a' runs from 0, 'b' waits until 300 s, then both
    run. At 600 s: A(a) = 1, A(b) = 300 / 600 = 0.5: Gini = (0.5 / 2) / 1.5 = 1/6; at 1200 s
    A(b) = 900 / 1200 = 0.75: Gini = (0.25 / 2) / 1.75 = 1/14. The run's: their mean."""
    rec = MetricsRecorder("p", HOSTS)
    for rid in ("a", "b"):
        rec.on_submit(0.0, rid, 2, TaskType.SERVICE, cpu_shares=1024)
    rec.on_decision(0.0, "a", 2, TaskType.SERVICE, True, decision_ms=0.1, host_id="h1")
    rec.on_queued(0.0, "b")
    rec.on_decision(300.0, "b", 2, TaskType.SERVICE, True, decision_ms=0.1, host_id="h1")
    result = rec.finish(1200.0)
    service = result.service_levels
    assert service is not None
    assert gini([1.0, 0.5]) == pytest.approx(1 / 6)
    assert service.by_class[2].gini == pytest.approx((1 / 6 + 1 / 14) / 2)
    assert service.by_class[1].gini is None  # no class-1 request
    assert [lv.status for lv in result.request_levels] == [RequestStatus.RUNNING] * 2


def test_a_measured_start_replaces_the_charged_allocation_time() -> None:
    """A driver that sees containers start (the live replay) says so: the runs count from
    the starts it saw; the second allocation is what it measured (5 s), not the configured
    alpha, and the first (1 s) is charged to no one. A service keeps what it served:
    e = 49 + 35, p = 10 + 5."""
    rec = MetricsRecorder("p", HOSTS, allocation_s=2.0)
    rec.on_submit(0.0, "j", 3, TaskType.SERVICE, cpu_shares=512)
    rec.on_decision(0.0, "j", 3, TaskType.SERVICE, True, decision_ms=0.1, host_id="h1")
    rec.on_started(1.0, "j")  # the first allocation: free
    rec.on_decision(50.0, "k", 1, TaskType.JOB, True, decision_ms=0.1, host_id="h1",
                    kills=["j"])
    rec.on_reschedule(60.0, "j", True, host_id="h1")
    rec.on_started(65.0, "j")
    rec.on_task_end(100.0, "j", EndStatus.STOPPED)
    [level] = [lv for lv in rec.finish(100.0).request_levels if lv.id == "j"]
    assert level.availability == pytest.approx((49 + 35) / (49 + 35 + 10 + 5))


def test_without_requests_kept_the_summary_is_the_same() -> None:
    kept = simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                      policy="energy", end_s=1000.0).run().result
    bare = simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                      policy="energy", end_s=1000.0, keep_requests=False).run().result
    assert bare.request_levels == () and len(kept.request_levels) == 2
    assert bare.service_levels == kept.service_levels


# ------------------------------------------------------------------ properties


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 5.0), st.sampled_from(["ffmpeg", "redis"]),
                          st.integers(256, 2048), st.floats(5.0, 120.0),
                          st.sampled_from(CLASSES)), min_size=1, max_size=25),
       st.sampled_from(["energy", "qos", "spread"]))
def test_availability_stays_in_zero_one_and_the_report_matches_its_lines(
    arrivals: list[tuple[float, str, int, float, int]], policy: str,
) -> None:
    t = 0.0
    trace = []
    for i, (gap, workload, cpu, makespan, cls) in enumerate(arrivals):
        t += gap
        trace.append(request(t, f"r{i}", workload, cpu, GIB // 2, makespan, cls=cls))
    result = simulation(header(("h1", 2048, 3 * GIB), ("h2", 2048, 3 * GIB)), trace,
                        profiles(), policy=policy, end_s=200.0).run().result
    lines = result.request_levels
    assert [lv.id for lv in lines] == [r.id for r in trace]  # submission order, every one
    assert all(0.0 <= lv.availability <= 1.0 for lv in lines)
    assert result.service_levels is not None
    again = tally_of(lines, result.service_levels.slo).summary()
    for c in CLASSES:
        ours, theirs = result.service_levels.by_class[c], again.by_class[c]
        assert (ours.requests, ours.met, ours.availability_min, ours.availability_p10,
                ours.availability_median, ours.qos_deficit) == (
            theirs.requests, theirs.met, theirs.availability_min, theirs.availability_p10,
            theirs.availability_median, theirs.qos_deficit)
        assert ours.availability_mean == pytest.approx(theirs.availability_mean)
    assert [lv.met_slo for lv in lines] == [
        lv.availability >= result.service_levels.slo.objective(lv.cls) for lv in lines]


def test_the_summary_keys_and_requests_jsonl_as_the_report_writes_them(tmp_path: Path) -> None:
    results = [simulation(header(("h1", 2048, 4 * GIB)), KILL_JOBS, KILL_PROFILES,
                          policy=policy, end_s=1000.0).run().result
               for policy in ("energy", "spread")]
    for result in results:
        save_result(result, tmp_path)
    write_report(tmp_path, plots=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for policy in ("energy", "spread"):
        entry = summary["policies"][policy]
        for key in SLO_KEYS:
            assert key in entry, key
        for key in ("slo_fulfilment_by_class", "availability_by_class",
                    "qos_deficit_by_class", "gini_by_class"):
            assert sorted(entry[key]) == ["1", "2", "3", "4"]
        assert all(sorted(v) == ["mean", "median", "min", "p10"]
                   for v in entry["availability_by_class"].values())
        assert "successful_per_kwh" in entry and "slo_met_per_kwh" in entry  # old and new
        lines = [json.loads(line)
                 for line in (tmp_path / policy / REQUESTS_FILE).read_text().splitlines()]
        assert [sorted(line) for line in lines] == [
            sorted(["id", "class", "type", "availability", "met_slo", "preemptions",
                    "status"])] * 2
        # the per-class numbers are those of the lines
        for cls in ("1", "4"):
            mine = [line for line in lines if str(line["class"]) == cls]
            met = sum(line["met_slo"] for line in mine) / len(mine)
            assert entry["slo_fulfilment_by_class"][cls] == met
            assert entry["availability_by_class"][cls]["min"] == min(
                line["availability"] for line in mine)
        assert entry["slo_fulfilment_by_class"]["2"] is None  # no class-2 request
    loaded = load_result(tmp_path / "energy")
    assert loaded.request_levels == results[0].request_levels
    assert loaded.service_levels == results[0].service_levels
    assert build_summary([loaded])["policies"]["energy"]["gini_by_class"] == summary[
        "policies"]["energy"]["gini_by_class"]
    md = (tmp_path / "summary.md").read_text()
    assert "## Service levels" in md and "SLO met per kWh" in md


# ------------------------------------------------------------------ the simulator's books


def test_every_request_the_qos_policy_queues_is_counted_once_as_a_request() -> None:
    """One host that runs one service at a time, sixty 10-second services arriving one a
    second: under qos each waits in the queue, the later ones without being tried in the round
    of their arrival (a round stops after 32 failures in a row, and the longer waiting come
    first). Every one is a request, and is placed once as a new request (a victim's placements
    are reschedules)."""
    head = header(("h1", 1024, 2 * GIB))
    services = [request(float(i), f"s{i:02d}", "redis", 1024, GIB, 10.0, cls=2)
                for i in range(60)]
    result = simulation(head, services, profiles(), policy="qos", end_s=1000.0,
                        admission=AdmissionMode.NONE).run()
    m = result.result.metrics
    assert (m.requests, m.successful, m.queued_requests) == (60, 60, 59)
    assert m.reschedules_placed == m.kills  # every victim placed again, as a victim
    assert len(result.result.request_levels) == 60
