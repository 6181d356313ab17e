"""The metrics recorder on a scripted run, result files, and the side-by-side report."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from cli.bench import register
from domain.energy import JOULES_PER_KWH, PowerModel
from domain.errors import ValidationError
from domain.lifecycle import EndStatus
from domain.model import HostSpec, TaskType
from measure.recorder import Cut, MetricsRecorder
from measure.report import build_summary, write_report
from measure.result_files import load_result, load_results, save_result
from measure.results import PolicyResult
from measure.stats import Stats, percentile
from measure.summary_md import render_markdown
from workloads.trace import TraceHeader, Workload

GIB = 1024**3
HOSTS = (HostSpec("h1", 4096, 8 * GIB), HostSpec("h2", 4096, 8 * GIB))
MODEL = PowerModel.named("hp-ml110-g4")


def scripted_run(policy: str = "energy") -> PolicyResult:
    """A small run whose every number can be worked out by hand (see the assertions)."""
    rec = MetricsRecorder(policy, HOSTS, power_model=MODEL, series_step_s=100.0)
    # r1: class 2 job on h1, decided at once (delay = decision time, 2 ms)
    rec.on_submit(0.0, "r1", 2, TaskType.JOB, workload=Workload.FFMPEG, expected_makespan_s=100)
    rec.on_decision(0.0, "r1", 2, TaskType.JOB, True, decision_ms=2.0, pass_name="simple",
                    host_id="h1")
    rec.on_host_state(0.0, "h1", cpu_util=0.4, memory_util=0.7, task_count=1,
                      cpu_allocated_shares=1024, memory_allocated_bytes=2 * GIB)
    # r2: class 4 redis service on h2, answered 0.5 s after submission, placed cut
    rec.on_submit(10.0, "r2", 4, TaskType.SERVICE, workload=Workload.REDIS)
    rec.on_decision(10.5, "r2", 4, TaskType.SERVICE, True, decision_ms=1.0, pass_name="cut",
                    host_id="h2", cuts=[Cut("r2", 100, GIB)])
    rec.on_host_state(10.5, "h2", cpu_util=0.6, memory_util=0.6, task_count=1,
                      cpu_allocated_shares=4096, memory_allocated_bytes=10 * GIB)
    rec.on_service_response(20.0, "r2", 40, 100.0)
    rec.on_service_response(30.0, "r2", 40, 300.0)
    # r3: class 3 job refused
    rec.on_submit(20.0, "r3", 3, TaskType.JOB)
    rec.on_decision(20.0, "r3", 3, TaskType.JOB, False, decision_ms=4.0)
    # r4: class 1 job, placed by killing r2, which waits, then is placed again at 500
    rec.on_submit(400.0, "r4", 1, TaskType.JOB, workload=Workload.DL, expected_makespan_s=50)
    rec.on_decision(400.0, "r4", 1, TaskType.JOB, True, decision_ms=3.0, pass_name="kill",
                    host_id="h1", kills=["r2"])
    rec.on_reschedule(400.0, "r2", False, decision_ms=1.0)
    rec.on_host_state(400.0, "h1", cpu_util=0.9, memory_util=0.6, task_count=2)
    rec.on_host_state(400.0, "h2", cpu_util=0.0, memory_util=0.0, task_count=0,
                      cpu_allocated_shares=0, memory_allocated_bytes=0)
    # r5: class 1 job placed by killing r1, which is never placed again
    rec.on_submit(410.0, "r5", 1, TaskType.JOB)
    rec.on_decision(410.0, "r5", 1, TaskType.JOB, True, decision_ms=3.0, pass_name="kill",
                    host_id="h1", kills=["r1"])
    rec.on_oom_kill(450.0, "h1", "r5")
    rec.on_task_end(460.0, "r5", EndStatus.OOM)  # already ended by the OOM kill: ignored
    rec.on_task_end(480.0, "r4", EndStatus.FINISHED)  # ran 80 s, expected 50
    rec.on_reschedule(500.0, "r2", True, decision_ms=2.0, pass_name="simple", host_id="h1")
    rec.on_host_state(600.0, "h1", cpu_util=0.0, memory_util=0.0, task_count=0)
    rec.on_task_end(700.0, "r2", EndStatus.STOPPED)
    return rec.finish(1000.0)


def test_allocations_cuts_kills_and_victims() -> None:
    m = scripted_run().metrics
    assert (m.requests, m.successful, m.failed, m.undecided) == (5, 4, 1, 0)
    assert m.success_rate == pytest.approx(0.8)
    assert (m.cuts, m.cut_cpu_shares, m.cut_memory_bytes) == (1, 100, GIB)
    assert (m.kills, m.victims, m.victims_lost) == (2, 2, 1)
    assert m.victims_waiting_at_end == 1  # r1 is still queued, not given up
    assert m.kills_share == pytest.approx(2 / 4)
    assert m.victims_lost_share == pytest.approx(1 / 2)
    assert (m.reschedule_attempts, m.reschedules_placed) == (2, 1)
    assert (m.oom_kills, m.ignored_events) == (1, 1)
    assert (m.jobs_finished, m.services_stopped, m.tasks_failed) == (1, 1, 0)


def test_decision_times_and_scheduling_delays() -> None:
    result = scripted_run()
    m = result.metrics
    decisions = [2.0, 1.0, 4.0, 3.0, 1.0, 3.0, 2.0]  # new requests and reschedules
    assert m.decisions == len(decisions)
    assert m.decision_ms_mean == pytest.approx(sum(decisions) / len(decisions))
    assert m.decision_ms_p50 == pytest.approx(2.0)  # the middle of 1 1 2 2 3 3 4
    assert m.decision_ms_max == 4.0
    delays = [2.0, 500.0, 4.0, 3.0, 3.0]  # r2 waited 0.5 s; the others the decision time
    assert result.scheduling_delay_ms.count == 5
    assert m.scheduling_delay_ms_mean == pytest.approx(sum(delays) / 5)
    # linear between ranks: 4 + 0.96 * (500 - 4) over the sorted 2 3 3 4 500
    assert m.scheduling_delay_ms_p99 == pytest.approx(480.16)
    windows = [(w.start_s, w.end_s, w.delay_ms.count) for w in result.delay_windows]
    assert windows == [(0.0, 300.0, 3), (300.0, 600.0, 2), (600.0, 900.0, 0),
                       (900.0, 1200.0, 0)]
    assert result.delay_windows[0].delay_ms.mean == pytest.approx((2 + 500 + 4) / 3)


def test_time_weighted_utilization_regions_and_empty_hosts() -> None:
    result = scripted_run()
    m = result.metrics
    # h1: CPU 0.4 for 400 s, 0.9 for 200 s, then 0; h2: 0 for 10.5 s, 0.6 for 389.5 s, then 0.
    h1_cpu = 0.4 * 400 + 0.9 * 200
    h2_cpu = 0.6 * 389.5
    assert m.avg_cpu_util == pytest.approx((h1_cpu + h2_cpu) / 2000)
    assert m.avg_memory_util == pytest.approx((0.7 * 400 + 0.6 * 200 + 0.6 * 389.5) / 2000)
    lee = 400 + 10.5 + 600  # h1 empty at the end, h2 empty before and after
    dee = 400 + 389.5  # h1 at U = max(0.4, 0.7) (memory decides), h2 at U = 0.6
    eed = 200  # h1 at U = 0.9
    assert (m.lee_share, m.dee_share, m.eed_share) == pytest.approx(
        (lee / 2000, dee / 2000, eed / 2000))
    empty = 400 + 10.5 + 600
    assert m.empty_share == pytest.approx(empty / 2000)
    assert m.hosts_switchable_off_mean == pytest.approx(empty / 1000)
    assert m.hosts_never_used == 0
    assert m.avg_cpu_util_busy == pytest.approx((h1_cpu + h2_cpu) / (2000 - empty))
    # booking: h1 1024 shares from 0 (unchanged later), h2 4096 shares from 10.5 to 400
    assert m.avg_cpu_allocated == pytest.approx((1024 / 4096 * 1000 + 389.5) / 2000)
    h1 = result.hosts[0]
    assert (h1.host_id, h1.oom_kills) == ("h1", 1)
    assert h1.eed_share == pytest.approx(0.2)


def test_energy_with_all_hosts_on_and_with_empty_hosts_off() -> None:
    m = scripted_run().metrics
    idle = MODEL.power_w(0, 0)
    h1_busy = (MODEL.power_w(0.4, 0.7 * 8 * GIB) * 400 + MODEL.power_w(0.9, 0.6 * 8 * GIB) * 200)
    h2_busy = MODEL.power_w(0.6, 0.6 * 8 * GIB) * 389.5
    on = (h1_busy + idle * 400 + h2_busy + idle * 610.5) / JOULES_PER_KWH
    off = (h1_busy + h2_busy) / JOULES_PER_KWH
    assert m.energy_kwh == pytest.approx(on)
    assert m.energy_kwh_switch_off == pytest.approx(off)
    assert m.avg_power_w == pytest.approx(on * JOULES_PER_KWH / 1000)
    assert m.successful_per_kwh == pytest.approx(4 / on)
    assert m.successful_per_kwh_switch_off == pytest.approx(4 / off)


def test_makespans_slowdowns_and_response_times() -> None:
    result = scripted_run()
    m = result.metrics
    assert m.job_makespan_s_mean == pytest.approx(80.0)
    assert m.job_slowdown_mean == pytest.approx(80 / 50)
    assert result.makespan_s["dl"].count == 1 and "ffmpeg" not in result.makespan_s
    assert m.responses == 2 and m.response_ms_mean == pytest.approx(200.0)
    assert set(result.response_ms) == {"redis-40"}
    assert result.response_ms_by_rate["40"].max == 300.0


def test_passes_and_classes() -> None:
    result = scripted_run()
    assert result.passes == {"cut": 1, "kill": 2, "simple": 2}
    assert result.by_class["1"] == {"requests": 2, "successful": 2, "failed": 0, "cut": 0,
                                    "killed": 0, "refused_at_admission": 0, "suspended": 0,
                                    "resumed": 0, "checkpoint_restarts": 0}
    assert result.by_class["2"]["killed"] == 1
    assert result.by_class["3"]["failed"] == 1
    assert (result.by_class["4"]["cut"], result.by_class["4"]["killed"]) == (1, 1)


def test_series_are_bin_averages_per_host() -> None:
    series = scripted_run().series
    assert series.step_s == 100.0 and series.bins == 10 and series.host_ids == ("h1", "h2")
    h1_cpu = series.values["cpu_util"][0]
    assert h1_cpu[:4] == pytest.approx((0.4,) * 4)
    assert h1_cpu[4:6] == pytest.approx((0.9, 0.9))
    assert h1_cpu[6:] == pytest.approx((0.0,) * 4)
    assert series.values["cpu_util"][1][0] == pytest.approx(0.6 * 89.5 / 100)
    assert series.values["power_switch_off_w"][1][5] == 0.0
    assert series.values["power_w"][1][5] == pytest.approx(MODEL.power_w(0, 0))
    assert series.mean_over_hosts("cpu_util")[4] == pytest.approx(0.45)


def test_a_kill_seen_only_as_a_task_end_still_counts() -> None:
    rec = MetricsRecorder("p", HOSTS)
    rec.on_decision(0.0, "a", 3, TaskType.JOB, True, decision_ms=1.0)
    rec.on_task_end(5.0, "a", EndStatus.KILLED)
    rec.on_task_end(6.0, "a", EndStatus.KILLED)  # a second end of the same run: ignored
    rec.on_decision(7.0, "b", 3, TaskType.JOB, True, decision_ms=1.0)
    rec.on_task_end(8.0, "b", EndStatus.OOM)
    rec.on_oom_kill(8.0, "h1", "b")  # the same OOM reported twice: counted once
    m = rec.finish(10.0).metrics
    assert (m.kills, m.victims, m.victims_lost, m.ignored_events, m.oom_kills) == (1, 1, 1, 2, 1)


def test_a_victim_given_up_is_lost_and_queued_requests_are_undecided() -> None:
    rec = MetricsRecorder("p", HOSTS)
    rec.on_decision(0.0, "a", 4, TaskType.SERVICE, True, decision_ms=1.0)
    rec.on_decision(1.0, "b", 1, TaskType.JOB, True, decision_ms=1.0, kills=["a"])
    rec.on_victim_lost("a")
    rec.on_submit(2.0, "c", 2, TaskType.JOB)
    rec.on_submit(3.0, "probe-1", 1, TaskType.JOB, probe=True, expected_makespan_s=10)
    rec.on_decision(3.0, "probe-1", 1, TaskType.JOB, True, decision_ms=1.0)
    rec.on_task_end(15.0, "probe-1", EndStatus.FINISHED)
    m = rec.finish(20.0).metrics
    assert (m.victims_lost, m.undecided, m.requests, m.successful, m.probes) == (1, 1, 3, 2, 1)
    assert m.victims_waiting_at_end == 0  # given up, not waiting
    assert m.probe_makespan_s_mean == pytest.approx(12.0)
    assert m.probe_slowdown_mean == pytest.approx(1.2)
    assert m.job_makespan_s_mean is None  # probes are reported apart


def test_a_request_that_asked_to_queue_counts_when_placed_and_is_undecided_until_then() -> None:
    rec = MetricsRecorder("p", HOSTS)
    rec.on_submit(10.0, "a", 2, TaskType.JOB)
    rec.on_queued(10.0, "a", decision_ms=1.0)
    rec.on_queued(20.0, "a")  # a retry turned down without deciding
    rec.on_queued(30.0, "a", decision_ms=3.0)  # a retry decided, and failed
    rec.on_decision(70.0, "a", 2, TaskType.JOB, True, decision_ms=2.0, host_id="h1")
    rec.on_submit(40.0, "b", 3, TaskType.JOB)
    rec.on_queued(40.0, "b", decision_ms=1.0)
    m = rec.finish(100.0).metrics
    assert (m.requests, m.successful, m.failed, m.undecided) == (2, 1, 0, 1)
    assert (m.queued_requests, m.queued_at_end) == (2, 1)
    assert m.scheduling_delay_ms_p50 == pytest.approx(60_000.0)  # submitted 10, placed 70
    assert m.decisions == 4  # the three that were decided while it waited, and b's
    assert (m.victims, m.victims_lost, m.reschedule_attempts) == (0, 0, 0)  # not victims


def test_only_a_submitted_request_not_yet_placed_can_be_queued() -> None:
    rec = MetricsRecorder("p", HOSTS)
    with pytest.raises(ValidationError, match="request_id"):
        rec.on_queued(1.0, "never-submitted")
    rec.on_decision(2.0, "a", 2, TaskType.JOB, True, decision_ms=1.0)
    with pytest.raises(ValidationError, match="request_id"):
        rec.on_queued(3.0, "a")
    assert rec.finish(5.0).metrics.queued_requests == 0


def test_an_idle_run_has_no_ratios_and_all_hosts_empty() -> None:
    m = MetricsRecorder("idle", HOSTS).finish(100.0).metrics
    assert (m.requests, m.success_rate, m.kills_share, m.successful_per_kwh) == (0, None, None,
                                                                                 0.0)
    assert m.decision_ms_p50 is None and m.avg_cpu_util_busy is None
    assert (m.empty_share, m.lee_share, m.hosts_never_used) == (1.0, 1.0, 2)
    assert m.energy_kwh_switch_off == 0.0 and m.energy_kwh > 0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda r: r.on_host_state(1.0, "nope", cpu_util=0, memory_util=0, task_count=0),
         "unknown host"),
        (lambda r: r.on_host_state(1.0, "h1", cpu_util=-1, memory_util=0, task_count=0),
         "cpu_util"),
        (lambda r: r.on_host_state(1.0, "h1", cpu_util=0, memory_util=0, task_count=-2),
         "task_count"),
        (lambda r: r.on_decision(1.0, "x", 5, TaskType.JOB, True, decision_ms=1), "1..4"),
        (lambda r: r.on_decision(1.0, "x", 1, TaskType.JOB, True, decision_ms=-1),
         "decision_ms"),
        (lambda r: r.on_decision(math.nan, "x", 1, TaskType.JOB, True, decision_ms=1), "t"),
        (lambda r: r.on_service_response(1.0, "x", 20, -5.0), "response_ms"),
        (lambda r: r.on_oom_kill(1.0, "nope", "x"), "unknown host"),
    ],
)
def test_bad_calls_are_refused(call: object, words: str) -> None:
    rec = MetricsRecorder("p", HOSTS)
    with pytest.raises(ValidationError, match=words):
        call(rec)  # type: ignore[operator]


def test_time_going_back_on_a_host_and_using_a_finished_recorder_are_refused() -> None:
    rec = MetricsRecorder("p", HOSTS)
    rec.on_host_state(10.0, "h1", cpu_util=0.1, memory_util=0.1, task_count=1)
    with pytest.raises(ValidationError, match="before"):
        rec.on_host_state(9.0, "h1", cpu_util=0.1, memory_util=0.1, task_count=1)
    with pytest.raises(ValidationError, match="before"):
        rec.finish(5.0)
    rec.finish(20.0)
    with pytest.raises(ValidationError, match="finish"):
        rec.on_submit(21.0, "x", 1, TaskType.JOB)


def test_for_trace_takes_the_cluster_and_trace_info_from_the_header() -> None:
    header = TraceHeader("thesis", 9, 7200.0, HOSTS, "n")
    rec = MetricsRecorder.for_trace("binpack", header)
    result = rec.finish(7200.0)
    assert result.trace == {"source": "thesis", "seed": 9, "duration_s": 7200.0, "hosts": 2,
                            "notes": "n"}
    assert result.series.step_s == pytest.approx(20.0)  # 360 bins over the trace
    assert result.energy_model["table"] == "hp-ml110-g4"


def test_stats_and_percentiles() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([5.0], 0.99) == 5.0
    stats = Stats.of([4.0, 1.0, 3.0, 2.0])
    assert (stats.count, stats.mean, stats.min, stats.max, stats.p75) == (4, 2.5, 1, 4, 3.25)
    assert Stats.of([]) == Stats(0)
    assert Stats.from_json(stats.to_json()) == stats


# ------------------------------------------------------------------ files and the report


def test_a_saved_result_loads_back(tmp_path: Path) -> None:
    result = scripted_run()
    directory = save_result(result, tmp_path)
    assert directory == tmp_path / "energy"
    again = load_result(directory)
    assert again.metrics == result.metrics
    assert again.delay_windows == result.delay_windows
    assert again.response_ms == result.response_ms and again.by_class == result.by_class
    assert again.hosts == result.hosts
    assert again.series.host_ids == result.series.host_ids
    for column, rows in result.series.values.items():
        for a, b in zip(rows, again.series.values[column], strict=True):
            assert b == pytest.approx(a, rel=1e-5, abs=1e-9)
    stored = json.loads((directory / "result.json").read_text())
    assert stored["format"] == "greenswarm-policy-result" and stored["version"] == 1
    # a result written before victims_waiting_at_end existed still loads, without it
    del stored["metrics"]["victims_waiting_at_end"]
    (directory / "result.json").write_text(json.dumps(stored))
    older = load_result(directory).metrics
    assert older.victims_waiting_at_end is None
    assert replace(older, victims_waiting_at_end=1) == result.metrics
    del stored["metrics"]["victims_lost"]  # a key every result has is still required
    (directory / "result.json").write_text(json.dumps(stored))
    with pytest.raises(ValidationError, match="victims_lost"):
        load_result(directory)
    header = (directory / "host_series.csv").read_text().splitlines()[0]
    assert header.startswith("t_s,host_id,cpu_util,memory_util")


def test_bad_result_directories_are_explained(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="no "):
        load_results(tmp_path)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text("{nope")
    with pytest.raises(ValidationError, match="not valid JSON"):
        load_results(tmp_path)
    with pytest.raises(ValidationError, match="policy"):
        save_result(MetricsRecorder("../escape", HOSTS).finish(1.0), tmp_path)


REQUIRED_KEYS = {
    "success_rate", "successful", "failed", "avg_cpu_util", "avg_memory_util", "cuts", "kills",
    "victims_lost", "oom_kills", "energy_kwh", "decision_ms_p50", "decision_ms_p99",
    "energy_kwh_switch_off", "successful_per_kwh", "lee_share", "dee_share", "eed_share",
    "scheduling_delay_ms_mean", "scheduling_delay_ms_p50", "scheduling_delay_ms_p90",
    "scheduling_delay_ms_p99", "delay_windows", "job_makespan_s_mean", "job_slowdown_mean",
    "response_ms_by_rate", "response_ms", "cut_cpu_shares", "cut_memory_bytes", "kills_share",
    "hosts_switchable_off_mean",
}


def baseline_run() -> PolicyResult:
    rec = MetricsRecorder("spread", HOSTS, power_model=MODEL, series_step_s=100.0)
    for i in range(3):
        rec.on_decision(float(i), f"r{i}", 3, TaskType.JOB, i != 2, decision_ms=0.5)
    rec.on_host_state(0.0, "h1", cpu_util=0.3, memory_util=0.3, task_count=1)
    rec.on_host_state(1.0, "h2", cpu_util=0.3, memory_util=0.3, task_count=1)
    return rec.finish(1000.0)


def test_the_summary_holds_every_policy_with_the_required_keys() -> None:
    results = [scripted_run(), baseline_run()]
    summary = build_summary(results)
    assert set(summary["policies"]) == {"energy", "spread"}
    for name, result in zip(("energy", "spread"), results, strict=True):
        policy = summary["policies"][name]
        assert set(policy) >= REQUIRED_KEYS
        assert policy["success_rate"] == result.metrics.success_rate
        assert policy["energy_kwh"] == result.metrics.energy_kwh
    assert summary["policies"]["spread"]["successful"] == 2
    assert summary["policies"]["spread"]["failed"] == 1


def test_the_markdown_puts_policies_side_by_side() -> None:
    text = render_markdown([scripted_run(), baseline_run()], ["energy.png"])
    assert "| | energy | spread |" in text.replace("|  |", "| |")
    assert "| success rate | 80.0% | 66.7% |" in text
    assert "| kills | 2 | 0 |" in text
    assert "| redis-40 | 200 / 200 / 250 | n/a |" in text
    # mean / p50 / p90 / p99 of (2, 4, 500), by hand: 506/3 = 169; 4; 4 + 0.8 * 496 = 401;
    # 4 + 0.98 * 496 = 490 (rounded)
    assert "| 0-5 | 169 / 4 / 401 / 490 | 0.5 / 0.5 / 0.5 / 0.5 |" in text
    assert "![energy](energy.png)" in text


def test_bench_report_writes_summary_files_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every plot is drawn and written, with the shipped layout and resolution (their look is
    checked by eye)."""
    save_result(scripted_run(), tmp_path)
    save_result(baseline_run(), tmp_path)
    parser = argparse.ArgumentParser(prog="greenswarm")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "report", str(tmp_path)])
    assert args.handler(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["policies"]["energy"]["kills"] == 2
    assert (tmp_path / "summary.md").read_text().startswith("# Benchmark report")
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == sorted(summary["plots"])
    assert {"allocations.png", "cpu_util_hosts.png", "memory_util_hosts.png", "avg_util.png",
            "regions.png", "scheduling_delay.png", "energy.png", "response_times.png",
            "makespans.png", "cuts_kills.png"} <= set(pngs)
    for name in pngs:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "summary.json" in capsys.readouterr().out
    write_report(tmp_path, plots=False)  # without plots: the summary stays complete
    assert json.loads((tmp_path / "summary.json").read_text())["plots"] == []


def long_run(policy: str, days: float) -> PolicyResult:
    """A request decided every 10 minutes for ``days``: one 5-minute window in two has a
    delay."""
    rec = MetricsRecorder(policy, HOSTS, power_model=MODEL)
    end_s = days * 86400
    t = 0.0
    while t < end_s:
        rec.on_submit(t, f"r{t:g}", 3, TaskType.JOB)
        rec.on_decision(t + 0.5, f"r{t:g}", 3, TaskType.JOB, True, decision_ms=1.0,
                        host_id="h1")
        t += 600.0
    return rec.finish(end_s)


def test_a_long_run_keeps_its_windows_in_a_csv_and_the_summary_short(tmp_path: Path) -> None:
    results = [long_run("energy", 2.0), long_run("spread", 2.0)]
    for result in results:
        save_result(result, tmp_path)
    files = write_report(tmp_path, plots=True)
    windows = 2 * 86400 // 300
    for result in results:
        rows = (tmp_path / result.policy / "windows.csv").read_text().splitlines()
        assert rows[0] == "start_s,end_s,count,mean,p50,p75,p90,p99,min,max"
        assert len(rows) == 1 + windows
        assert rows[1].startswith("0.0,300.0,1,500.0,500.0,")
        assert rows[2] == "300.0,600.0,0,,,,,,,"
        again = load_result(tmp_path / result.policy)
        assert again.delay_windows == result.delay_windows
        stored = json.loads((tmp_path / result.policy / "result.json").read_text())
        assert "delay_windows" not in stored and stored["windows"]["count"] == windows
    text = files.summary_md.read_text()
    assert len(text.splitlines()) < 200
    assert f"{windows:,} windows per policy" in text
    assert "`energy/windows.csv`, `spread/windows.csv`" in text
    summary = json.loads(files.summary_json.read_text())
    policy = summary["policies"]["energy"]
    assert policy["windows_csv"] == "energy/windows.csv" and policy["delay_windows"] == windows
    assert files.summary_json.stat().st_size < 100_000
    assert "scheduling_delay.png" in summary["plots"]


def test_a_short_run_shows_its_windows_and_says_where_the_csv_is(tmp_path: Path) -> None:
    text = render_markdown([scripted_run(), baseline_run()])
    assert "| 0-5 | 169 / 4 / 401 / 490 |" in text
    assert "every statistic: `energy/windows.csv`, `spread/windows.csv`." in text


def test_a_result_written_with_its_windows_inside_still_loads(tmp_path: Path) -> None:
    result = scripted_run()
    directory = save_result(result, tmp_path)
    stored = json.loads((directory / "result.json").read_text())
    del stored["windows"]
    stored["delay_windows"] = [w.to_json() for w in result.delay_windows]
    (directory / "result.json").write_text(json.dumps(stored))
    (directory / "windows.csv").unlink()
    assert load_result(directory).delay_windows == result.delay_windows
