"""The thesis workload generator against DESIGN 7.1, and the --hosts SPEC parser."""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.bench import register
from domain.errors import ValidationError
from domain.model import TaskType
from workloads.cluster import format_hosts_spec, parse_hosts_spec, thesis_hosts
from workloads.thesis import (
    ProbeConfig,
    Range,
    ThesisWorkloadConfig,
    generate_thesis_trace,
    iter_probe_requests,
    iter_thesis_requests,
    truncated_exponential,
    with_probes,
)
from workloads.trace import TraceRequest, Workload
from workloads.trace_file import read_trace

MIB = 1024**2
GIB = 1024**3


@cache
def big_sample() -> tuple[TraceRequest, ...]:
    """About 22,000 requests: ten thesis hours (seeds 0..9)."""
    return tuple(r for seed in range(10) for r in generate_thesis_trace(seed).requests)


def shares(values: Sequence[object]) -> dict[object, float]:
    counts = Counter(values)
    return {k: v / len(values) for k, v in counts.items()}


# ------------------------------------------------------------------ the cluster


def test_the_default_cluster_is_the_thesis_cluster() -> None:
    hosts = thesis_hosts()
    assert [h.id for h in hosts] == ["host-1", "host-2", "host-3", "host-4", "host-5"]
    assert {(h.cpu_capacity, h.memory_capacity) for h in hosts} == {
        (8192, 12 * GIB)
    }
    assert generate_thesis_trace(1).header.hosts == hosts


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("5x8c12g", [(8192, 12 * GIB)] * 5),
        ("8c12g", [(8192, 12 * GIB)]),
        ("2x0.5c512m", [(512, 512 * MIB)] * 2),
        ("1x4c8g+2X16C1T", [(4096, 8 * GIB), (16384, 1024 * GIB), (16384, 1024 * GIB)]),
    ],
)
def test_hosts_spec(spec: str, expected: list[tuple[int, int]]) -> None:
    hosts = parse_hosts_spec(spec)
    assert [(h.cpu_capacity, h.memory_capacity) for h in hosts] == expected
    assert len({h.id for h in hosts}) == len(hosts)


def test_host_names_are_padded_to_sort_in_order() -> None:
    hosts = parse_hosts_spec("1000x8c12g")
    assert hosts[0].id == "host-0001" and hosts[-1].id == "host-1000"
    assert sorted(h.id for h in hosts) == [h.id for h in hosts]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("", "empty"),
        ("5x8c", "'5x8c'"),
        ("5x8c12", "'5x8c12'"),
        ("5 x 8c12g", "without spaces"),
        ("0x8c12g", "at least 1"),
        ("5x0c12g", "more than 0 cores"),
        ("5x8c0g", "more than 0 memory"),
        ("5x8c12g+", "''"),
        ("200000x1c1g", "supported"),
    ],
)
def test_bad_hosts_specs_are_explained(spec: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_hosts_spec(spec)
    assert info.value.field == "hosts"
    assert words in info.value.message


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 64), st.integers(1, 512)),
                min_size=1, max_size=4))
def test_a_formatted_spec_parses_back_to_the_same_sizes(
    groups: list[tuple[int, int, int]],
) -> None:
    spec = "+".join(f"{n}x{c}c{g}g" for n, c, g in groups)
    hosts = parse_hosts_spec(spec)
    again = parse_hosts_spec(format_hosts_spec(hosts))
    assert [(h.cpu_capacity, h.memory_capacity) for h in again] == [
        (h.cpu_capacity, h.memory_capacity) for h in hosts
    ]


# ------------------------------------------------------------------ distributions


def test_sizes_and_makespans_stay_in_the_thesis_ranges() -> None:
    for r in big_sample():
        if r.type is TaskType.JOB:
            assert 204 <= r.cpu_shares <= 1024
        else:
            assert 2 <= r.cpu_shares <= 1024
        assert 256 * MIB <= r.memory_bytes <= 2 * GIB
        assert r.memory_bytes % MIB == 0
        assert 30.0 <= r.makespan_s <= 1800.0
    services = [r.cpu_shares for r in big_sample() if r.type is TaskType.SERVICE]
    assert min(services) < 204  # services really go below the job minimum


def test_the_distributions_are_exponential_small_values_most_frequent() -> None:
    config = ThesisWorkloadConfig()
    sample = big_sample()
    columns: dict[str, tuple[list[float], Range]] = {
        "job cpu": ([float(r.cpu_shares) for r in sample if r.type is TaskType.JOB],
                    config.job_cpu_shares),
        "service cpu": ([float(r.cpu_shares) for r in sample if r.type is TaskType.SERVICE],
                        config.service_cpu_shares),
        "memory MiB": ([r.memory_bytes / MIB for r in sample], config.memory_mib),
        "makespan": ([r.makespan_s for r in sample], config.makespan_s),
    }
    for name, (values, rng) in columns.items():
        mean = statistics.fmean(values)
        assert mean == pytest.approx(rng.mean(), rel=0.03), name
        # exponential: the median sits below the mean, and the lower half of the range holds
        # most of the values.
        assert statistics.median(values) < mean, name
        midpoint = (rng.low + rng.high) / 2
        assert sum(v < midpoint for v in values) / len(values) > 0.8, name


def test_the_four_workloads_are_equally_likely_and_have_their_type() -> None:
    sample = big_sample()
    mix = shares([r.workload for r in sample])
    assert set(mix) == {Workload.FFMPEG, Workload.REDIS, Workload.DL, Workload.TIMESERVER}
    for workload, share in mix.items():
        assert share == pytest.approx(0.25, abs=0.02), workload
    expected = {Workload.FFMPEG: TaskType.JOB, Workload.DL: TaskType.JOB,
                Workload.REDIS: TaskType.SERVICE, Workload.TIMESERVER: TaskType.SERVICE}
    assert all(r.type is expected[r.workload] for r in sample)


def test_the_class_mix_is_10_30_45_15_percent() -> None:
    mix = shares([r.request_class for r in big_sample()])
    for cls, share in {1: 0.10, 2: 0.30, 3: 0.45, 4: 0.15}.items():
        assert mix[cls] == pytest.approx(share, abs=0.015), cls


def test_service_request_rates_follow_memory_and_jobs_have_none() -> None:
    seen = set()
    for r in big_sample():
        if r.type is TaskType.JOB:
            assert r.request_rate is None
            continue
        expected = 20 if r.memory_bytes < 500 * MIB else 40 if r.memory_bytes < GIB else 80
        assert r.request_rate == expected, r
        seen.add(expected)
    assert seen == {20, 40, 80}


def test_truncated_exponential_covers_the_range_monotonically() -> None:
    assert truncated_exponential(0.0, 30, 1800, 120) == 30
    assert truncated_exponential(1 - 1e-12, 30, 1800, 120) == pytest.approx(1800, rel=1e-3)
    values = [truncated_exponential(u / 100, 2, 1024, 256) for u in range(100)]
    assert values == sorted(values)
    assert truncated_exponential(0.5, 5, 5, 1) == 5
    with pytest.raises(ValidationError):
        Range(10, 5, 1)
    with pytest.raises(ValidationError):
        Range(1, 5, 0)


# ------------------------------------------------------------------ arrivals


def bursts(requests: Sequence[TraceRequest], interval_s: float) -> list[list[TraceRequest]]:
    """Split at every gap longer than the arrival interval."""
    groups: list[list[TraceRequest]] = [[requests[0]]]
    for previous, current in itertools.pairwise(requests):
        if current.t_s - previous.t_s > interval_s + 1e-6:
            groups.append([])
        groups[-1].append(current)
    return groups


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_arrivals_pause_for_the_mean_makespan_after_reaching_150_percent(seed: int) -> None:
    trace = generate_thesis_trace(seed)
    requests = trace.requests
    cpu_limit = 1.5 * 5 * 8192
    memory_limit = 1.5 * 5 * 12 * GIB
    groups = bursts(requests, 0.5)
    assert len(groups) >= 10
    for index, group in enumerate(groups):
        # two requests per second inside a burst
        for a, b in itertools.pairwise(group):
            assert b.t_s - a.t_s == pytest.approx(0.5, abs=1e-6)
        cpu = [r.cpu_shares for r in group]
        memory = [r.memory_bytes for r in group]
        before_last = sum(cpu[:-1]) < cpu_limit and sum(memory[:-1]) < memory_limit
        assert before_last, f"burst {index} went on after reaching the limit"
        if index == len(groups) - 1:
            continue  # the hour ended inside or right after it
        assert sum(cpu) >= cpu_limit or sum(memory) >= memory_limit, f"burst {index} stopped early"
        pause = groups[index + 1][0].t_s - group[-1].t_s - 0.5
        assert pause == pytest.approx(statistics.fmean(r.makespan_s for r in group), abs=1e-5)


def test_an_hour_holds_about_as_many_requests_as_the_thesis_runs() -> None:
    counts = [len(generate_thesis_trace(seed).requests) for seed in range(5)]
    assert all(2000 <= c <= 2500 for c in counts), counts  # thesis Table 5.1: 2133, 2223


def test_a_trace_is_sorted_inside_its_window_with_unique_ids() -> None:
    trace = generate_thesis_trace(4)
    times = [r.t_s for r in trace.requests]
    assert times == sorted(times)
    assert times[0] == 0.0 and times[-1] < 3600.0
    assert len({r.id for r in trace.requests}) == len(trace.requests)
    assert trace.header.source == "thesis" and trace.header.seed == 4
    assert trace.header.duration_s == 3600.0


def test_the_same_seed_gives_the_same_trace_and_another_seed_another() -> None:
    assert generate_thesis_trace(11) == generate_thesis_trace(11)
    assert generate_thesis_trace(11).requests != generate_thesis_trace(12).requests


def test_the_arrival_rate_and_the_limit_scale_with_the_cluster() -> None:
    ten = ThesisWorkloadConfig(hosts=parse_hosts_spec("10x8c12g"), duration_s=120.0)
    assert ten.effective_arrival_rate_per_s == pytest.approx(4.0)
    assert ten.cpu_limit_shares == pytest.approx(1.5 * 10 * 8192)
    requests = list(iter_thesis_requests(5, ten))
    first_gap = requests[1].t_s - requests[0].t_s
    assert first_gap == pytest.approx(0.25)
    thousand = ThesisWorkloadConfig(hosts=parse_hosts_spec("1000x8c12g"))
    assert thousand.effective_arrival_rate_per_s == pytest.approx(400.0)
    explicit = ThesisWorkloadConfig(arrival_rate_per_s=1.0, duration_s=10.0)
    assert [r.t_s for r in iter_thesis_requests(1, explicit)] == [float(i) for i in range(10)]


def test_a_shorter_window_is_a_prefix_of_the_hour() -> None:
    short = generate_thesis_trace(8, ThesisWorkloadConfig(duration_s=600.0)).requests
    hour = generate_thesis_trace(8).requests
    assert short == hour[: len(short)]
    assert all(r.t_s < 600.0 for r in short) and hour[len(short)].t_s >= 600.0


@pytest.mark.parametrize(
    "kwargs",
    [{"duration_s": 0.0}, {"arrival_rate_per_s": -1.0}, {"hosts": ()},
     {"class_weights": (0.0, 0.0, 0.0, 0.0)}, {"class_weights": (math.inf, 1.0, 1.0, 1.0)},
     {"class_weights": (math.nan, 1.0, 1.0, 1.0)}, {"duration_s": math.inf}],
)
def test_bad_configurations_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ThesisWorkloadConfig(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ probes


def test_probe_jobs_come_every_5_minutes_alternating_ffmpeg_and_dl() -> None:
    probes = list(iter_probe_requests(3600.0))
    assert [p.t_s for p in probes] == [150.0 + 300.0 * i for i in range(12)]
    assert [p.workload for p in probes[:4]] == [Workload.FFMPEG, Workload.DL] * 2
    assert all(p.type is TaskType.JOB and p.makespan_s == 120.0 for p in probes)
    assert len({p.id for p in probes}) == 12 and probes[0].id == "probe-0001"
    with pytest.raises(ValidationError):
        ProbeConfig(workloads=(Workload.REDIS,))


def test_probes_merge_into_the_trace_in_time_order() -> None:
    trace = generate_thesis_trace(2, ThesisWorkloadConfig(duration_s=800.0))
    merged = list(with_probes(trace.requests, iter_probe_requests(800.0)))
    assert [r for r, probe in merged if not probe] == list(trace.requests)
    assert [r.id for r, probe in merged if probe] == ["probe-0001", "probe-0002", "probe-0003"]
    times = [r.t_s for r, _ in merged]
    assert times == sorted(times)


def test_probes_merge_reads_the_trace_as_it_goes() -> None:
    """The merge reads one request ahead of what it gave, of either stream: a day's trace on
    1,000 hosts is 10 M requests, and the simulator must not hold them all (the compiled core
    once did: mypyc compiles generator expressions as lists). Also run compiled, by
    tests/support/native_lazy.py."""
    read = {"trace": 0, "probes": 0}

    def endless(name: str, requests: Sequence[TraceRequest]) -> Iterator[TraceRequest]:
        for request in itertools.cycle(requests):  # the same times again: fine for a count
            read[name] += 1
            if read[name] > 1_000:
                raise AssertionError(f"the merge read the {name} stream to its end")
            yield request

    trace = generate_thesis_trace(2, ThesisWorkloadConfig(duration_s=800.0)).requests
    probes = list(iter_probe_requests(800.0))
    merged = with_probes(endless("trace", trace), endless("probes", probes[:1]))
    first = list(itertools.islice(merged, 5))
    assert first == list(with_probes(trace, probes[:1]))[:5]
    assert read == {"trace": 5, "probes": 1}


def test_probes_merge_puts_the_trace_first_at_equal_times() -> None:
    trace = generate_thesis_trace(2, ThesisWorkloadConfig(duration_s=800.0)).requests
    at = [replace(r, t_s=10.0) for r in trace[:3]]
    probe = replace(next(iter(iter_probe_requests(800.0))), t_s=10.0)
    early = replace(probe, id="probe-0000", t_s=5.0)
    merged = list(with_probes(at, [early, probe]))
    assert [(r.id, flag) for r, flag in merged] == [
        ("probe-0000", True), *((r.id, False) for r in at), ("probe-0001", True)]
    assert list(with_probes([], [probe])) == [(probe, True)]
    assert list(with_probes(at[:1], [])) == [(at[0], False)]


# ------------------------------------------------------------------ the command


def bench_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="greenswarm")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_bench_generate_writes_the_seeded_trace(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.jsonl"
    args = bench_parser().parse_args(
        ["bench", "generate", "--workload", "thesis", "--seed", "3", "--out", str(out),
         "--duration-s", "900"]
    )
    assert args.handler(args) == 0
    written = read_trace(out)
    assert written == generate_thesis_trace(3, ThesisWorkloadConfig(duration_s=900.0))
    assert f"wrote {len(written.requests)} requests" in capsys.readouterr().out


def test_bench_generate_takes_a_hosts_spec_and_refuses_a_bad_one(tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl.gz"
    parser = bench_parser()
    args = parser.parse_args(["bench", "generate", "--seed", "1", "--out", str(out),
                              "--hosts", "10x4c8g", "--duration-s", "60"])
    assert args.handler(args) == 0
    trace = read_trace(out)
    assert len(trace.header.hosts) == 10
    assert trace.header.hosts[0].cpu_capacity == 4096
    args = parser.parse_args(["bench", "generate", "--seed", "1", "--out", str(out),
                              "--hosts", "10x4c"])
    with pytest.raises(ValidationError, match="10x4c"):
        args.handler(args)
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "generate", "--seed", "1", "--out", "x",
                           "--duration-s", "-5"])


# ------------------------------------------------------------------ load as a knob (DESIGN 7.1)


def generated(tmp_path: Path, name: str, *extra: str) -> list[TraceRequest]:
    out = tmp_path / f"{name}.jsonl"
    args = bench_parser().parse_args(["bench", "generate", "--seed", "5", "--out", str(out),
                                      "--duration-s", "900", *extra])
    assert args.handler(args) == 0
    return list(read_trace(out).requests)


def test_the_default_peak_is_the_thesis_trace_and_a_lower_one_pauses_earlier(
    tmp_path: Path,
) -> None:
    plain = generated(tmp_path, "plain")
    assert generated(tmp_path, "peak", "--peak", "1.5") == plain
    moderate = generated(tmp_path, "moderate", "--peak", "0.75")
    # the same draws, paused after half as much: the first burst is about half as long
    assert [(r.cpu_shares, r.memory_bytes) for r in moderate[:20]] == [
        (r.cpu_shares, r.memory_bytes) for r in plain[:20]]
    first_pause = next(i for i, (a, b) in enumerate(itertools.pairwise(plain)) if b.t_s - a.t_s > 1)
    moderate_pause = next(i for i, (a, b) in enumerate(itertools.pairwise(moderate))
                          if b.t_s - a.t_s > 1)
    assert moderate_pause < first_pause


@pytest.mark.parametrize(("t_s", "level"), [
    (0.0, 0.2 * 1.5),  # midnight: a fifth of the peak
    (6 * 3600.0, 0.6 * 1.5),
    (12 * 3600.0, 1.5),  # noon: the peak
    (24 * 3600.0, 0.2 * 1.5),
])
def test_the_diurnal_level_follows_a_day(t_s: float, level: float) -> None:
    config = ThesisWorkloadConfig(diurnal=True)
    assert config.level_at(t_s) == pytest.approx(level)
    assert ThesisWorkloadConfig().level_at(t_s) == 1.5


def test_a_diurnal_night_sends_less_than_the_flat_peak(tmp_path: Path) -> None:
    assert len(generated(tmp_path, "night", "--diurnal")) < len(generated(tmp_path, "flat"))


def test_a_share_of_checkpointable_jobs_changes_nothing_else(tmp_path: Path) -> None:
    plain = generated(tmp_path, "plain")
    mixed = generated(tmp_path, "mixed", "--checkpoint-share", "0.5",
                      "--checkpoint-interval-s", "120")
    assert [replace(r, checkpoint_interval_s=0.0) for r in mixed] == plain
    jobs = [r for r in mixed if r.type is TaskType.JOB]
    checkpointed = [r for r in jobs if r.checkpoint_interval_s > 0]
    assert {r.checkpoint_interval_s for r in checkpointed} == {120.0}
    assert 0.35 < len(checkpointed) / len(jobs) < 0.65
    assert all(r.checkpoint_interval_s == 0 for r in mixed if r.type is TaskType.SERVICE)


def test_the_load_knobs_shape_the_thesis_workload_only(tmp_path: Path) -> None:
    args = bench_parser().parse_args(["bench", "generate", "--workload", "qos-validation-1",
                                      "--seed", "1", "--out", str(tmp_path / "v.jsonl"),
                                      "--peak", "0.75"])
    with pytest.raises(ValidationError, match="thesis workload only"):
        args.handler(args)
