"""The simulator's pure pieces: CPU sharing, the monitor's window arithmetic, usage profiles, and
the command line end to end on a short run."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import pytest

from cli.main import main
from cli.simulate import ProgressBoard
from domain.errors import ValidationError
from domain.model import HostSpec, TaskType
from sim.contention import share_cpu
from sim.model import Host, Run, place, reshare
from sim.monitor_model import (
    HostMonitor,
    MonitorModelConfig,
    WindowAccumulator,
    instants_between,
)
from sim.profiles import (
    DEFAULT_PROFILES,
    SHIPPED_PROFILES_PATH,
    Profiles,
    ProfileSource,
    Step,
    load_shipped_profiles,
    steps_from_series,
)
from workloads.cluster import GIB
from workloads.trace import TraceHeader, TraceRequest, Workload
from workloads.trace_file import write_requests

# ------------------------------------------------------------------ CPU sharing


@pytest.mark.parametrize(
    ("capacity", "demands", "weights", "served"),
    [
        (8.0, [1.0, 2.0], [1024, 512], [1.0, 2.0]),  # fits: everyone gets what it wants
        (2.0, [2.0, 2.0], [1024, 1024], [1.0, 1.0]),  # equal weights, equal halves
        (2.0, [2.0, 2.0], [1536, 512], [1.5, 0.5]),  # by shares
        (2.0, [0.2, 2.0, 2.0], [1024, 1024, 1024], [0.2, 0.9, 0.9]),  # unused share goes on
        (1.0, [0.0, 3.0], [1024, 2], [0.0, 1.0]),  # a tiny weight still gets idle capacity
        (3.0, [1.0, 1.0, 1.0], [5, 7, 9], [1.0, 1.0, 1.0]),  # exactly full
    ],
)
def test_cpu_is_shared_by_weight_and_nothing_is_left_idle(
    capacity: float, demands: list[float], weights: list[int], served: list[float]
) -> None:
    result = share_cpu(capacity, demands, weights)
    assert result == pytest.approx(served)
    assert sum(result) <= capacity + 1e-9
    assert all(s <= d + 1e-12 for s, d in zip(result, demands, strict=True))


def test_cpu_sharing_is_work_conserving_on_random_cases() -> None:
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 12)
        demands = [rng.choice([0.0, rng.uniform(0, 4)]) for _ in range(n)]
        weights = [rng.randint(2, 2048) for _ in range(n)]
        capacity = rng.uniform(0.5, 8)
        served = share_cpu(capacity, demands, weights)
        assert sum(served) == pytest.approx(min(capacity, sum(demands)))
        level = None  # every unsatisfied task gets the same CPU per share, the highest one
        for s, d, w in zip(served, demands, weights, strict=True):
            assert -1e-12 <= s <= d + 1e-12
            if s < d - 1e-9:
                level = s / w if level is None else level
                assert s / w == pytest.approx(level)
        if level is not None:
            assert all(s / w <= level + 1e-9 for s, w in zip(served, weights, strict=True))


def quiet_host(rng: random.Random, number: int) -> tuple[Host, list[Run]]:
    """A host of 16 cores with up to 30 runs, jobs and services, whose demands fit."""
    config = MonitorModelConfig()
    host = Host(f"h{number}", 16 * 1024, 64 * GIB, 0.0, config, 0.0)
    runs = []
    for i in range(rng.randrange(31)):
        job = rng.random() < 0.6
        request = TraceRequest(0.0, f"r{number}-{i}", rng.randint(1, 4),
                               TaskType.JOB if job else TaskType.SERVICE,
                               Workload.FFMPEG if job else Workload.REDIS, rng.choice((128, 256)),
                               GIB, rng.uniform(1.0, 500.0))
        run = Run(request, host, DEFAULT_PROFILES[request.workload], rng.uniform(0.0, 50.0),
                  request.cpu_shares, request.memory_bytes, WindowAccumulator(0.0, 3.0, 0.0))
        run.demand = rng.uniform(0.0, 0.5)
        place(run)
        runs.append(run)
    return host, runs


def test_a_quiet_host_is_served_as_a_full_share_out_would_serve_it() -> None:
    """reshare's path for a host uncontended before and after serves only the changed runs,
    yet returns the cores served in all and the next job end that sharing the CPU out anew
    returns (the same floats: its demands added in the same order)."""
    rng = random.Random(7)
    for number in range(300):
        host, runs = quiet_host(random.Random(number), number)
        twin, _ = quiet_host(random.Random(number), number)  # the same, shared out in full
        jobs = [r.finish_t for r in runs if r.is_job]
        changed = [r for r in runs if rng.random() < 0.3]
        host.changed.extend(changed)
        host.recount = rng.random() < 0.5
        if not host.recount:  # the engine's next end, as kept when the unchanged ones came
            unchanged = [r.finish_t for r in runs if r.is_job and r not in changed]
            host.next_t = min(unchanged, default=math.inf)
        twin.contended = True  # so reshare shares the CPU out over every run
        assert host.demand <= host.cap_cores
        got, expected = reshare(host, 5.0), reshare(twin, 5.0)
        assert got == expected, (number, got, expected)
        assert got[1] == min(jobs, default=math.inf)
        assert not host.changed and not host.recount


# ------------------------------------------------------------------ monitor windows


def test_sampling_instants_are_counted_in_half_open_intervals() -> None:
    assert instants_between(0.0, 30.0, 0.0, 3.0) == 10
    assert instants_between(0.5, 30.5, 0.5, 3.0) == 10
    assert instants_between(1.0, 2.0, 0.0, 3.0) == 0
    assert instants_between(2.0, 3.0, 0.0, 3.0) == 1  # (2, 3] holds 3
    assert instants_between(3.0, 4.0, 0.0, 3.0) == 0  # 3 is not in (3, 4]


def _brute_force(changes: list[tuple[float, float, float]], phase: float, start: float,
                 end: float) -> tuple[float, float]:
    """The real monitor's samples: CPU as the average over the 3 s before each instant (a
    counter difference, integrated finely here), memory as the value just before the
    instant; the window's average is their mean."""

    def value(t: float, index: int) -> float:  # the value in force at t (changes at t excluded)
        current = 0.0
        for at, cpu, memory in changes:
            if at < t:
                current = cpu if index == 1 else memory
        return current

    instants = [phase + 3.0 * k for k in range(1, 1000) if start < phase + 3.0 * k <= end]
    cpu_samples = []
    for s in instants:
        steps = 3000
        cpu_samples.append(sum(value(s - 3.0 + (i + 0.5) * 3.0 / steps, 1)
                               for i in range(steps)) / steps)
    memory_samples = [value(s, 2) for s in instants]
    return sum(cpu_samples) / len(cpu_samples), sum(memory_samples) / len(memory_samples)


def test_a_window_average_equals_the_mean_of_its_3_s_samples() -> None:
    rng = random.Random(11)
    for _ in range(5):
        phase = rng.uniform(0, 30)
        start = phase  # a window: (phase, phase + 30]
        times = sorted(rng.uniform(start - 5, start + 30) for _ in range(6))
        changes = [(t, rng.random(), rng.random()) for t in times]
        acc = WindowAccumulator(phase, 3.0, start - 10)
        for t, cpu, memory in changes:
            if t <= start:
                acc.set(t, cpu, memory)
        acc.close(start)  # the previous window ends where ours starts
        for t, cpu, memory in changes:
            if t > start:
                acc.set(t, cpu, memory)
        average = acc.close(start + 30.0)
        assert average is not None
        cpu, memory = _brute_force(changes, phase, start, start + 30.0)
        assert average.cpu_util == pytest.approx(cpu, abs=2e-3)
        assert average.memory_util == pytest.approx(memory, abs=1e-12)


def test_a_window_without_a_sampling_instant_reports_nothing() -> None:
    acc = WindowAccumulator(0.0, 3.0, 4.0, 0.5, 0.5)  # alive only in (4, 5.5]
    assert acc.close(5.5) is None


def test_the_host_monitor_uses_the_threshold_of_the_real_monitor() -> None:
    monitor = HostMonitor(MonitorModelConfig(), 0.0, 0.0)
    monitor.accumulator.set(0.0, 0.05, 0.2)
    first = monitor.window_closed(30.0)  # the first window always sends
    assert first is not None and first.cpu_util == pytest.approx(0.05)
    monitor.accumulator.set(30.0, 0.149, 0.2)
    assert monitor.window_closed(60.0) is None  # 9.9 p.p.: not sent
    monitor.accumulator.set(60.0, 0.15, 0.2)
    update = monitor.window_closed(90.0)  # 10 p.p.: sent
    assert update is not None and update.cpu_util == pytest.approx(0.15)
    assert update.memory_util is None  # memory did not move: only CPU travels
    assert monitor.held is not None and monitor.held.memory_util == pytest.approx(0.2)


# ------------------------------------------------------------------ profiles


def test_a_measured_series_becomes_a_ramp_and_a_plateau() -> None:
    cpu = [0.1, 0.5, 1.6, 1.65, 1.55, 1.6, 1.62, 1.58, 1.6, 1.61]
    memory = [0.01, 0.1, 0.2, 0.2, 0.2, 0.2, 0.21, 0.2, 0.2, 0.2]
    steps = steps_from_series(cpu, memory)
    assert [s.at_s for s in steps] == [0.0, 1.0, 2.0]
    assert steps[0].cpu_fraction == pytest.approx(0.1)
    assert steps[-1].cpu_fraction == pytest.approx(1.6)
    assert steps[-1].memory_fraction == pytest.approx(0.2)
    flat = steps_from_series([0.5] * 5, [0.3] * 5)
    assert flat == (Step(0.0, 0.5, 0.3),)


def test_profiles_round_trip_through_json_and_are_checked() -> None:
    again = Profiles.from_json(json.loads(json.dumps(DEFAULT_PROFILES.to_json())))
    assert again == DEFAULT_PROFILES
    broken = DEFAULT_PROFILES.to_json()
    del broken["workloads"]["redis"]
    with pytest.raises(ValidationError, match="redis"):
        Profiles.from_json(broken)
    broken = DEFAULT_PROFILES.to_json()
    broken["workloads"]["dl"]["steps"] = [[1.0, 0.5, 0.5]]
    with pytest.raises(ValidationError, match="first step"):
        Profiles.from_json(broken)


def test_the_shipped_profiles_say_which_numbers_were_measured() -> None:
    assert SHIPPED_PROFILES_PATH.is_file()
    shipped = load_shipped_profiles()
    for workload in (Workload.FFMPEG, Workload.REDIS, Workload.DL, Workload.TIMESERVER):
        assert shipped[workload].source is ProfileSource.MEASURED, workload
        assert shipped[workload].note.startswith("measured")
    assert shipped[Workload.GENERIC].source is ProfileSource.DEFAULT
    assert shipped.measured is not None and shipped.measured["machine_cpus"] >= 1
    for workload in Workload:
        assert all(s.memory_fraction <= 1.0 for s in shipped[workload].steps)


# ------------------------------------------------------------------ the command line


def test_bench_simulate_writes_results_and_the_report(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--workload", "thesis", "--seed", "2", "--duration-s",
                 "300", "--policies", "energy,spread", "--out", str(out), "--no-plots"])
    assert code == 0
    for policy in ("energy", "spread"):
        assert (out / policy / "result.json").is_file()
        stats = json.loads((out / policy / "simulation.json").read_text())
        assert stats["policy"] == policy and stats["events"] > 0
    assert (out / "summary.md").is_file() and (out / "simulation.md").is_file()
    printed = capsys.readouterr().out
    assert "success rate" in printed and "(thesis 83.7%)" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["policies"]) == {"energy", "spread"}
    assert math.isclose(summary["policies"]["spread"]["duration_s"], 300.0)


def test_bench_simulate_takes_the_number_of_jobs(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--workload", "thesis", "--seed", "2", "--duration-s",
                 "120", "--policies", "binpack,spread", "--jobs", "1", "--out", str(out),
                 "--no-plots"])
    assert code == 0
    assert set(json.loads((out / "summary.json").read_text())["policies"]) == {"binpack",
                                                                               "spread"}
    capsys.readouterr()
    for bad in ("0", "two", "-1"):
        with pytest.raises(SystemExit) as exited:
            main(["bench", "simulate", "--workload", "thesis", "--seed", "2", "--jobs", bad,
                  "--out", str(tmp_path / "never")])
        assert exited.value.code == 2
        assert "--jobs" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_the_progress_board_shows_every_policy_and_ends_its_line_once() -> None:
    stream = io.StringIO()
    board = ProgressBoard(stream, ["energy", "spread"], width=10)
    energy, spread = board.callback("energy"), board.callback("spread")
    energy(50.0, 100.0)
    shown = stream.getvalue()
    assert "energy [#####-----]  50%  spread [----------]   0%  wall" in shown
    energy(100.0, 100.0)
    spread(100.0, 100.0)  # the last one: shown however soon it comes
    text = stream.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    assert "energy [##########] 100%  spread [##########] 100%" in text.rsplit("\r", 1)[1]
    spread(100.0, 100.0)
    assert stream.getvalue() == text  # the line was ended: nothing more
    with pytest.raises(ValueError, match="binpack"):
        board.callback("binpack")


def test_bench_simulate_needs_a_seed_for_the_generated_workload(tmp_path: Path) -> None:
    assert main(["bench", "simulate", "--workload", "thesis", "--out", str(tmp_path)]) == 2


def _class_2_pair_trace(path: Path) -> None:
    """One host of one core; two class-2 jobs asking 1024 + 204 shares = 1228 in total: more
    than 1024 x 7/6 (the thesis table) allows, within 1024 x 1.2 (the label table)."""
    head = TraceHeader("test", 0, 100.0, (HostSpec("h1", 1024, 4 * GIB),))
    requests = [
        TraceRequest(0.0, "a", 2, TaskType.JOB, Workload.FFMPEG, 1024, GIB, 500.0, None),
        TraceRequest(1.0, "b", 2, TaskType.JOB, Workload.FFMPEG, 204, GIB // 4, 500.0, None),
    ]
    write_requests(path, head, requests)


@pytest.mark.parametrize(("model", "placed"), [("thesis", 1), ("label", 2)])
def test_bench_simulate_takes_the_class_table_and_the_region_bounds(
    tmp_path: Path, model: str, placed: int
) -> None:
    trace = tmp_path / "pair.jsonl"
    _class_2_pair_trace(trace)
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--trace", str(trace), "--policies", "energy",
                 "--overbooking-model", model, "--lee-below", "0.3", "--eed-above", "0.9",
                 "--no-probes", "--no-plots", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())["policies"]["energy"]
    assert (summary["successful"], summary["failed"]) == (placed, 2 - placed)
    result = json.loads((out / "energy" / "result.json").read_text())
    assert result["region_bounds"] == {"lee_below": 0.3, "eed_above": 0.9}
    text = (out / "simulation.md").read_text()
    assert f"overbooking model {model}; empty hosts last; " in text
    assert "; regions LEE < 0.3 <= DEE <= 0.9 < EED" in text
    assert "new requests no pass places are refused" in text


def test_bench_simulate_refuses_bounds_out_of_order_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "pair.jsonl"
    _class_2_pair_trace(trace)
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--trace", str(trace), "--lee-below", "0.9",
                 "--eed-above", "0.5", "--no-plots", "--out", str(out)])
    assert code == 2
    assert "region_bounds" in capsys.readouterr().err
    assert not out.exists()


def test_bench_simulate_hosts_replace_the_hosts_of_a_trace(tmp_path: Path) -> None:
    # The trace's one host of one core places one of the two class-2 jobs (thesis table);
    # two hosts of two cores place both, and the run says whose hosts it used.
    trace = tmp_path / "pair.jsonl"
    _class_2_pair_trace(trace)
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--trace", str(trace), "--hosts", "2x2c4g",
                 "--policies", "spread", "--no-probes", "--no-plots", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())["policies"]["spread"]
    assert (summary["successful"], summary["failed"]) == (2, 0)
    assert [h["host_id"] for h in summary["hosts_detail"]] == ["host-1", "host-2"]
    text = (out / "simulation.md").read_text()
    assert "2 hosts (from --hosts 2x2c4g, replacing the trace's 1 hosts, 1x1c4g)" in text
    bad = main(["bench", "simulate", "--trace", str(trace), "--hosts", "lots",
                "--no-plots", "--out", str(tmp_path / "never")])
    assert bad == 2 and not (tmp_path / "never").exists()


def test_bench_simulate_repeats_the_trace_notes_and_their_warnings(tmp_path: Path) -> None:
    notes = "converted from x: 1 never ran. Warning: the window (1 s) is shorter than most"
    head = TraceHeader("test", 0, 1.0, (HostSpec("h1", 1024, 4 * GIB),), notes)
    trace = tmp_path / "short.jsonl"
    write_requests(trace, head, [
        TraceRequest(0.0, "a", 3, TaskType.JOB, Workload.FFMPEG, 512, GIB, 300.0, None),
    ])
    out = tmp_path / "run"
    assert main(["bench", "simulate", "--trace", str(trace), "--policies", "spread",
                 "--no-probes", "--no-plots", "--out", str(out)]) == 0
    assert f"Trace notes: {notes}\n" in (out / "simulation.md").read_text()


def test_bench_simulate_drains_after_the_arrival_window(tmp_path: Path) -> None:
    trace = tmp_path / "pair.jsonl"
    _class_2_pair_trace(trace)
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--trace", str(trace), "--policies", "energy",
                 "--duration-s", "60", "--drain-s", "90", "--no-probes", "--no-plots",
                 "--out", str(out)])
    assert code == 0
    result = json.loads((out / "energy" / "result.json").read_text())
    assert result["t_end_s"] == 150.0
    assert "arrivals until 60 s; simulated 150 s" in (out / "simulation.md").read_text()


def test_bench_simulate_lets_new_requests_queue(tmp_path: Path) -> None:
    # Two class-1 jobs on a one-core host: "b" cannot fit beside "a" and may not kill it, so
    # it waits, and is placed when "a" ends, during the drain.
    head = TraceHeader("test", 0, 60.0, (HostSpec("h1", 1024, 4 * GIB),))
    trace = tmp_path / "pair.jsonl"
    write_requests(trace, head, [
        TraceRequest(0.0, "a", 1, TaskType.JOB, Workload.FFMPEG, 1024, GIB, 30.0, None),
        TraceRequest(1.0, "b", 1, TaskType.JOB, Workload.FFMPEG, 512, GIB, 30.0, None),
    ])
    out = tmp_path / "run"
    code = main(["bench", "simulate", "--trace", str(trace), "--policies", "energy",
                 "--queue-new", "--admission", "none", "--drain-s", "600", "--no-probes",
                 "--no-plots", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())["policies"]["energy"]
    assert (summary["successful"], summary["failed"]) == (2, 0)
    assert (summary["queued_requests"], summary["queued_at_end"]) == (1, 0)
    assert "new requests no pass places wait in the queue" in (out / "simulation.md").read_text()
    plain = tmp_path / "plain"
    assert main(["bench", "simulate", "--trace", str(trace), "--policies", "energy",
                 "--drain-s", "600", "--no-probes", "--no-plots", "--out", str(plain)]) == 0
    summary = json.loads((plain / "summary.json").read_text())["policies"]["energy"]
    assert (summary["successful"], summary["failed"], summary["queued_requests"]) == (1, 1, 0)
