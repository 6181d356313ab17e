"""Adapters from Google 2011 task events and Alibaba pod lists, on CSV files written here."""

from __future__ import annotations

import argparse
import csv
import gzip
from collections.abc import Sequence
from pathlib import Path

import pytest

from cli.bench import register
from domain.errors import ValidationError
from domain.model import TaskType
from workloads.alibaba import convert_alibaba
from workloads.cluster import parse_hosts_spec
from workloads.google2011 import convert_google2011, google_class, google_type, reference_host
from workloads.readers import DOCKER_MIN_MEMORY_BYTES
from workloads.trace import TraceError, TraceRequest, Workload
from workloads.trace_file import read_trace

GIB = 1024**3
MIB = 1024**2
S = 1_000_000  # microseconds per second
HOSTS = parse_hosts_spec("2x4c8g+1x8c12g")  # reference: the 8-core host

# timestamp, missing, job, index, machine, event, user, sched class, priority, cpu, mem, disk, diff
GOOGLE_ROWS = [
    # D: running before the window (timestamp 0), size partly missing, never ends -> censored
    [0, "", 3, 0, 77, 0, "u", 1, 5, "", 0.1, 0, 0],
    [0, "", 3, 0, 77, 1, "u", 1, 5, "", 0.1, 0, 0],
    # A: production, latency-sensitive: class 1 service, runs 60 s
    [600 * S, "", 1, 0, "", 0, "u", 3, 9, 0.5, 0.25, 0, 0],
    [601 * S, "", 1, 0, 5, 1, "u", 3, 9, 0.5, 0.25, 0, 0],
    # B: free, batch, tiny: class 4 job; evicted, rescheduled, last run 30 s
    [602 * S, "", 2, 0, "", 0, "u", 0, 0, 0.01, 0.0001, 0, 0],
    [603 * S, "", 2, 0, 6, 1, "u", 0, 0, 0.01, 0.0001, 0, 0],
    [613 * S, "", 2, 0, 6, 2, "u", 0, 0, 0.01, 0.0001, 0, 0],
    [620 * S, "", 2, 0, 7, 1, "u", 0, 0, 0.01, 0.0001, 0, 0],
    # C: submitted, killed while pending: never ran -> left out
    [605 * S, "", 2, 1, "", 0, "u", 2, 4, 0.2, 0.2, 0, 0],
    [650 * S, "", 2, 0, 7, 4, "u", 0, 0, 0.01, 0.0001, 0, 0],
    # E: middle priority, latency-sensitive: class 2 service; finishes
    [660 * S, "", 4, 2, "", 0, "u", 2, 6, 0.125, 0.5, 0, 0],
    [661 * S, "", 4, 2, 8, 1, "u", 2, 6, 0.125, 0.5, 0, 0],
    [661 * S, "", 1, 0, 5, 4, "u", 3, 9, 0.5, 0.25, 0, 0],  # A finishes
    [690 * S, "", 4, 2, 8, 4, "u", 2, 6, 0.125, 0.5, 0, 0],
    [700 * S, "", 2, 1, "", 5, "u", 2, 4, 0.2, 0.2, 0, 0],
    # an event "after the window" is ignored
    [2**63 - 1, "", 9, 0, "", 0, "u", 0, 0, 0.1, 0.1, 0, 0],
]


def write_csv(path: Path, rows: Sequence[Sequence[object]], *, gz: bool = False) -> Path:
    if gz:
        with gzip.open(path, "wt", newline="") as handle:
            csv.writer(handle).writerows(rows)
    else:
        with path.open("w", newline="") as handle:
            csv.writer(handle).writerows(rows)
    return path


def by_id(requests: tuple[TraceRequest, ...]) -> dict[str, TraceRequest]:
    return {r.id: r for r in requests}


# ------------------------------------------------------------------ Google 2011


@pytest.mark.parametrize(
    ("priority", "scheduling_class", "expected"),
    [(11, 0, 1), (9, 3, 1), (8, 3, 2), (2, 2, 2), (8, 1, 3), (2, 0, 3), (1, 3, 4), (0, 0, 4)],
)
def test_google_priority_bands_map_to_classes(
    priority: int, scheduling_class: int, expected: int
) -> None:
    assert google_class(priority, scheduling_class) == expected


def test_google_latency_sensitive_tasks_are_services() -> None:
    assert [google_type(c) for c in range(4)] == [TaskType.JOB, TaskType.JOB, TaskType.SERVICE,
                                                 TaskType.SERVICE]


@pytest.mark.parametrize("gz", [False, True])
def test_google_task_events_become_requests(tmp_path: Path, gz: bool) -> None:
    name = "part-00000-of-00500.csv" + (".gz" if gz else "")
    path = write_csv(tmp_path / name, GOOGLE_ROWS, gz=gz)
    conversion = convert_google2011([path], HOSTS)
    trace = conversion.trace
    requests = by_id(trace.requests)
    assert list(requests) == ["g3-0", "g1-0", "g2-0", "g4-2"]  # by arrival, ties in file order
    reference = reference_host(HOSTS)
    assert (reference.cpu_capacity, reference.memory_capacity) == (8192, 12 * GIB)

    a = requests["g1-0"]  # arrivals on the data's clock: submitted at 600 s
    assert (a.t_s, a.request_class, a.type, a.workload) == (600.0, 1, TaskType.SERVICE,
                                                           Workload.GENERIC)
    assert (a.cpu_shares, a.memory_bytes, a.makespan_s) == (4096, 3 * GIB, 60.0)
    assert a.request_rate is None

    b = requests["g2-0"]
    assert (b.t_s, b.request_class, b.type) == (602.0, 4, TaskType.JOB)
    assert b.cpu_shares == round(0.01 * 8192)
    assert b.memory_bytes == DOCKER_MIN_MEMORY_BYTES  # 0.0001 x 12 GiB is below Docker's minimum
    assert b.makespan_s == 30.0  # the last run, not the evicted one

    d = requests["g3-0"]
    assert (d.t_s, d.request_class, d.type) == (0.0, 3, TaskType.JOB)
    assert d.cpu_shares == 2  # missing CPU request: the minimum
    assert d.makespan_s == 700.0  # censored at the last timestamp of the data

    e = requests["g4-2"]
    assert (e.t_s, e.request_class, e.type, e.cpu_shares) == (660.0, 2, TaskType.SERVICE, 1024)
    assert e.makespan_s == 29.0

    stats = conversion.stats
    assert (stats.rows, stats.requests, stats.skipped_never_ran, stats.censored_still_running,
            stats.missing_size, stats.raised_to_minimum) == (len(GOOGLE_ROWS), 4, 1, 1, 1, 2)
    header = trace.header
    assert (header.source, header.seed, header.duration_s) == ("google2011", None, 660.0)
    assert header.hosts == HOSTS
    assert "1 never ran" in header.notes and "1 still running" in header.notes


def test_google_several_parts_are_one_stream_and_windows_cut(tmp_path: Path) -> None:
    first = write_csv(tmp_path / "part-0.csv", GOOGLE_ROWS[:8])
    second = write_csv(tmp_path / "part-1.csv", GOOGLE_ROWS[8:])
    whole = convert_google2011([first, second], HOSTS).trace
    assert [r.id for r in whole.requests] == ["g3-0", "g1-0", "g2-0", "g4-2"]
    window = convert_google2011([first, second], HOSTS, window_end_s=610.0)
    assert [r.id for r in window.trace.requests] == ["g3-0", "g1-0", "g2-0"]
    assert window.trace.header.duration_s == 610.0 and window.stats.outside_window == 1
    limited = convert_google2011([first, second], HOSTS, limit=2)
    assert [r.id for r in limited.trace.requests] == ["g3-0", "g1-0"]
    assert limited.stats.over_limit == 2


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ([1, "", 1, 0, "", 0, "u", 0, 0, 0.1, 0.1, 0], "columns"),
        (["soon", "", 1, 0, "", 0, "u", 0, 0, 0.1, 0.1, 0, 0], "timestamp"),
        ([1, "", 1, 0, "", 9, "u", 0, 0, 0.1, 0.1, 0, 0], "event_type"),
        ([1, "", 1, 0, "", 0, "u", 0, 0, "lots", 0.1, 0, 0], "cpu_request"),
        ([1, "", 1, 0, "", 0, "u", 0, 0, 0.1, -0.5, 0, 0], "memory_request"),
        ([1, "", 1, 0, "", 0, "u", 0, "high", 0.1, 0.1, 0, 0], "priority"),
        ([1, "", "", 0, "", 0, "u", 0, 0, 0.1, 0.1, 0, 0], "job_id"),
    ],
)
def test_google_bad_rows_name_the_file_line_and_column(
    tmp_path: Path, row: list[object], field: str
) -> None:
    path = write_csv(tmp_path / "part.csv", [GOOGLE_ROWS[2], GOOGLE_ROWS[3], row])
    with pytest.raises(TraceError) as info:
        convert_google2011([path], HOSTS)
    assert (info.value.line, info.value.field) == (3, field)
    assert "part.csv line 3" in str(info.value)


def test_google_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot open"):
        convert_google2011([tmp_path / "absent.csv"], HOSTS)


# ------------------------------------------------------------------ Alibaba

ALIBABA_HEADER: list[object] = [
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
]
ALIBABA_ROWS = [
    ["openb-pod-0000", 12000, 16384, 1, 1000, "", "LS", "Running", 100, 400, 100],
    ["openb-pod-0001", 4000, 15258, 1, 220, "", "BE", "Running", 150, 160, 155],
    ["openb-pod-0002", 88000, 327680, 8, 1000, "", "Burstable", "Pending", 120, 125, ""],
    ["openb-pod-0003", 1000, 2048, 0, 0, "", "Guaranteed", "Running", 130, "", 130],
    ["openb-pod-0004", 500, 1024, 0, 0, "V100M16|V100M32", "lsr", "Succeeded", 170, 170.5, 170],
]


def test_alibaba_pods_become_requests(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "openb_pod_list_default.csv", [ALIBABA_HEADER, *ALIBABA_ROWS])
    conversion = convert_alibaba([path], HOSTS)
    trace = conversion.trace
    assert [r.id for r in trace.requests] == [
        "openb-pod-0000", "openb-pod-0003", "openb-pod-0001", "openb-pod-0004",
    ]
    requests = by_id(trace.requests)
    ls = requests["openb-pod-0000"]  # the data's clock: created at 100 s
    assert (ls.t_s, ls.request_class, ls.type, ls.workload) == (100.0, 2, TaskType.SERVICE,
                                                               Workload.GENERIC)
    assert (ls.cpu_shares, ls.memory_bytes, ls.makespan_s) == (12288, 16 * GIB, 300.0)
    be = requests["openb-pod-0001"]
    assert (be.t_s, be.request_class, be.type, be.makespan_s) == (150.0, 4, TaskType.JOB, 5.0)
    assert be.cpu_shares == 4096 and be.memory_bytes == 15258 * MIB
    guaranteed = requests["openb-pod-0003"]  # no deletion time: censored at the data's end
    assert (guaranteed.request_class, guaranteed.makespan_s) == (1, 400.0 - 130.0)
    lsr = requests["openb-pod-0004"]
    assert (lsr.request_class, lsr.type, lsr.cpu_shares, lsr.makespan_s) == (
        1, TaskType.SERVICE, 512, 1.0)  # at least 1 s
    assert (trace.header.source, trace.header.duration_s) == ("alibaba", 170.0)


def test_alibaba_resource_scale_shrinks_pods(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "pods.csv", [ALIBABA_HEADER, *ALIBABA_ROWS[:2]])
    requests = by_id(convert_alibaba([path], HOSTS, resource_scale=0.125).trace.requests)
    assert requests["openb-pod-0000"].cpu_shares == 1536
    assert requests["openb-pod-0000"].memory_bytes == 2 * GIB
    with pytest.raises(ValidationError):
        convert_alibaba([path], HOSTS, resource_scale=0)


def test_alibaba_accepts_another_name_column_and_column_order(tmp_path: Path) -> None:
    rows: list[list[object]] = [
        ["qos", "creation_time", "deletion_time", "pod_name", "memory_mib", "cpu_milli"],
        ["BE", 5, 65, "p-1", 512, 250],
    ]
    trace = convert_alibaba([write_csv(tmp_path / "p.csv", rows)], HOSTS).trace
    only = trace.requests[0]
    assert (only.id, only.cpu_shares, only.memory_bytes, only.makespan_s) == (
        "p-1", 256, 512 * MIB, 60.0)


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        (["x", 1000, 1024, 0, 0, "", "Gold", "Running", 1, 2, 1], "qos", "'Gold'"),
        (["x", "many", 1024, 0, 0, "", "LS", "Running", 1, 2, 1], "cpu_milli", "number"),
        (["x", 1000, 1024, 0, 0, "", "LS", "Running", "", 2, 1], "creation_time", "empty"),
        (["", 1000, 1024, 0, 0, "", "LS", "Running", 1, 2, 1], "name", "empty"),
        (["openb-pod-0000", 1, 1, 0, 0, "", "LS", "Running", 1, 2, 1], "name", "line 2"),
        (["x", 1000, 1024], "columns", "11 columns"),
    ],
)
def test_alibaba_bad_rows_name_the_line_and_column(
    tmp_path: Path, row: list[object], field: str, words: str
) -> None:
    path = write_csv(tmp_path / "pods.csv", [ALIBABA_HEADER, ALIBABA_ROWS[0], row])
    with pytest.raises(TraceError) as info:
        convert_alibaba([path], HOSTS)
    assert (info.value.line, info.value.field) == (3, field)
    assert words in info.value.message


def test_alibaba_header_without_required_columns_is_refused(tmp_path: Path) -> None:
    rows: list[list[object]] = [["name", "cpu_milli", "qos"], ["x", 1, "LS"]]
    path = write_csv(tmp_path / "pods.csv", rows)
    with pytest.raises(TraceError) as info:
        convert_alibaba([path], HOSTS)
    assert info.value.line == 1
    assert "memory_mib" in info.value.message and "creation_time" in info.value.message
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(TraceError, match="empty"):
        convert_alibaba([empty], HOSTS)


# ------------------------------------------------------------------ the command


def bench_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="greenswarm")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_bench_convert_writes_a_trace_file(tmp_path: Path) -> None:
    events = write_csv(tmp_path / "events.csv", GOOGLE_ROWS)
    out = tmp_path / "google.jsonl"
    args = bench_parser().parse_args(["bench", "convert", "--format", "google2011",
                                      str(events), "--out", str(out), "--hosts", "3x8c12g"])
    assert args.handler(args) == 0
    trace = read_trace(out)
    assert len(trace.requests) == 4 and len(trace.header.hosts) == 3

    pods = write_csv(tmp_path / "pods.csv", [ALIBABA_HEADER, *ALIBABA_ROWS])
    out = tmp_path / "alibaba.jsonl"
    args = bench_parser().parse_args(["bench", "convert", "--format", "alibaba", str(pods),
                                      "--out", str(out), "--resource-scale", "0.5"])
    assert args.handler(args) == 0
    assert by_id(read_trace(out).requests)["openb-pod-0000"].cpu_shares == 6144


def test_bench_convert_refuses_resource_scale_for_google(tmp_path: Path) -> None:
    events = write_csv(tmp_path / "events.csv", GOOGLE_ROWS)
    args = bench_parser().parse_args(["bench", "convert", "--format", "google2011",
                                      str(events), "--out", str(tmp_path / "o.jsonl"),
                                      "--resource-scale", "2"])
    with pytest.raises(ValidationError, match="alibaba only"):
        args.handler(args)


# ------------------------------------------------------------------ read faithfully (DESIGN 7.5)


def pod(name: str, created: float, deleted: object, scheduled: object, *, phase: str = "Running",
        cpu: int = 1000, memory: int = 1024, gpus: int = 0, qos: str = "LS") -> list[object]:
    return [name, cpu, memory, gpus, 1000 if gpus else 0, "", qos, phase, created, deleted,
            scheduled]


def test_alibaba_pods_that_never_ran_are_left_out_and_counted_as_google_does(
    tmp_path: Path,
) -> None:
    pods = write_csv(tmp_path / "pods.csv", [
        ALIBABA_HEADER,
        pod("ran", 0, 100, 0, phase="Succeeded"),
        pod("queued-then-deleted", 10, 70, "", phase="Pending"),  # 60 s in the queue only
        pod("ran-too", 20, 100, 25, phase="Failed"),
    ])
    conversion = convert_alibaba([pods], HOSTS)
    assert [r.id for r in conversion.trace.requests] == ["ran", "ran-too"]
    assert conversion.stats.skipped_never_ran == 1
    google = convert_google2011([write_csv(tmp_path / "events.csv", GOOGLE_ROWS)], HOSTS)
    assert google.stats.skipped_never_ran == 1
    for notes in (conversion.trace.header.notes, google.trace.header.notes):
        assert "left out: 1 never ran" in notes


def test_alibaba_censored_pods_zero_sizes_and_gpus_are_counted_and_said(tmp_path: Path) -> None:
    pods = write_csv(tmp_path / "pods.csv", [
        ALIBABA_HEADER,
        pod("done", 0, 50, 0, phase="Succeeded", gpus=1),
        # still Running at the data's last timestamp (1000 s): the data gives it as deletion
        pod("running-at-end", 100, 1000, 110, gpus=2),
        pod("no-deletion", 200, "", 200),  # runs until the data's end too
        pod("zero-memory", 300, 400, 300, phase="Succeeded", memory=0),
        pod("deleted-running", 500, 600, 500),  # deleted before the end: ended, not censored
    ])
    conversion = convert_alibaba([pods], HOSTS)
    stats = conversion.stats
    requests = by_id(conversion.trace.requests)
    assert requests["running-at-end"].makespan_s == 890.0
    assert requests["no-deletion"].makespan_s == 800.0
    assert requests["deleted-running"].makespan_s == 100.0
    assert requests["zero-memory"].memory_bytes == DOCKER_MIN_MEMORY_BYTES
    assert (stats.censored_still_running, stats.missing_size, stats.raised_to_minimum,
            stats.gpu_requests) == (2, 1, 1, 2)
    notes = conversion.trace.header.notes
    assert "2 still running at the end of the data (censored" in notes
    assert "1 with a missing or zero size" in notes
    assert "2 of the pods that ran ask for GPUs: their GPUs were ignored" in notes


def test_alibaba_window_takes_the_busy_part_with_pods_alive_at_its_start(tmp_path: Path) -> None:
    day = 86400.0
    pods = write_csv(tmp_path / "pods.csv", [
        ALIBABA_HEADER,
        pod("early-done", 0, 3600, 0, phase="Succeeded"),  # ended long before the window
        pod("long-runner", 100, 120 * day, 100),  # running at the window's start
        pod("queued-at-start", 99 * day, 101 * day, 100.5 * day, phase="Succeeded"),
        pod("busy-1", 100 * day + 60, 100 * day + 660, 100 * day + 60, phase="Succeeded"),
        pod("busy-2", 101 * day, 101 * day + 30, 101 * day, phase="Succeeded"),
        pod("after", 103 * day, 103 * day + 5, 103 * day, phase="Succeeded"),
    ])
    conversion = convert_alibaba([pods], HOSTS, window_start_s=100 * day,
                                 window_end_s=102 * day)
    requests = conversion.trace.requests
    assert [(r.id, r.t_s, r.makespan_s) for r in requests] == [
        ("long-runner", 0.0, 20 * day),  # its remaining time
        ("queued-at-start", 0.0, 0.5 * day),  # arrives at the start, runs its whole run
        ("busy-1", 60.0, 600.0),
        ("busy-2", day, 30.0),
    ]
    stats = conversion.stats
    assert (stats.alive_at_start, stats.before_window, stats.outside_window) == (2, 1, 1)
    assert conversion.trace.header.duration_s == 2 * day
    assert "window 8640000-8812800 s of the data's clock" in conversion.trace.header.notes
    with pytest.raises(ValidationError, match="window_end_s"):
        convert_alibaba([pods], HOSTS, window_start_s=10.0, window_end_s=5.0)


def test_requests_larger_than_every_host_are_counted_and_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = write_csv(tmp_path / "pods.csv", [
        ALIBABA_HEADER,
        pod("fits", 0, 100, 0, cpu=8000, memory=4096),
        pod("too-much-cpu", 1, 100, 1, cpu=9000, memory=1024),
        # fits the CPU of the 8-core host and the memory of the 4-core ones, but no one host
        pod("no-one-host", 2, 100, 2, cpu=8000, memory=12 * 1024 + 1),
    ])
    conversion = convert_alibaba([pods], HOSTS)
    assert conversion.stats.too_large == 2
    assert "2 of 3 requests are larger than every host" in conversion.warnings[0]
    assert "2 larger than every host" in conversion.trace.header.notes
    out = tmp_path / "t.jsonl"
    args = bench_parser().parse_args(["bench", "convert", "--format", "alibaba", str(pods),
                                      "--out", str(out), "--hosts", "2x4c8g+1x8c12g"])
    assert args.handler(args) == 0
    assert "warning: 2 of 3 requests are larger than every host" in capsys.readouterr().err


NODE_ROWS: list[list[object]] = [
    ["sn", "cpu_milli", "memory_mib", "gpu", "model"],
    ["openb-node-0000", 32000, 262144, 0, ""],
    ["openb-node-0001", 96000, 393216, 8, "G2"],
    ["openb-node-0002", 64000, 262144, 2, "P100"],
    ["openb-node-0003", 8000, 32768, 1, "V100M16"],
]


def test_the_node_list_is_the_cluster_or_a_seeded_sample_of_it(tmp_path: Path) -> None:
    nodes = write_csv(tmp_path / "openb_node_list_all_node.csv", NODE_ROWS)
    pods = write_csv(tmp_path / "pods.csv", [ALIBABA_HEADER, pod("big", 0, 10, 0, cpu=90000,
                                                                 memory=300000)])
    out = tmp_path / "t.jsonl"
    args = bench_parser().parse_args(["bench", "convert", "--format", "alibaba", str(pods),
                                      "--out", str(out), "--nodes-file", str(nodes)])
    assert args.handler(args) == 0
    trace = read_trace(out)
    assert [(h.id, h.cpu_capacity, h.memory_capacity) for h in trace.header.hosts] \
        == [("openb-node-0000", 32768, 256 * GIB), ("openb-node-0001", 98304, 384 * GIB),
            ("openb-node-0002", 65536, 256 * GIB), ("openb-node-0003", 8192, 32 * GIB)]
    assert "the 4 nodes of" in trace.header.notes and "0 larger than every host" in \
        trace.header.notes  # the 96-core node holds the big pod
    samples = []
    for _ in range(2):
        args = bench_parser().parse_args(["bench", "convert", "--format", "alibaba", str(pods),
                                          "--out", str(out), "--nodes-file", str(nodes),
                                          "--nodes-sample", "2", "--nodes-seed", "7"])
        assert args.handler(args) == 0
        samples.append([h.id for h in read_trace(out).header.hosts])
    assert samples[0] == samples[1] and len(samples[0]) == 2
    assert samples[0] == sorted(samples[0])  # in the file's order
    assert "2 nodes drawn (seed 7)" in read_trace(out).header.notes
    with pytest.raises(SystemExit):  # --hosts and --nodes-file: one cluster
        bench_parser().parse_args(["bench", "convert", "--format", "alibaba", str(pods),
                                   "--out", str(out), "--nodes-file", str(nodes),
                                   "--hosts", "3x8c12g"])
    args = bench_parser().parse_args(["bench", "convert", "--format", "alibaba", str(pods),
                                      "--out", str(out), "--nodes-sample", "2"])
    with pytest.raises(ValidationError, match="nodes-file"):
        args.handler(args)


def test_google_arrivals_are_the_datas_and_a_short_window_is_warned_about(
    tmp_path: Path,
) -> None:
    rows = [
        # job 1 task 0: there before the trace window (timestamp 0), runs until 300 s
        [0, "", 1, 0, "", 0, "u", 0, 0, 0.1, 0.1, 0, 0],
        [0, "", 1, 0, 5, 1, "u", 0, 0, 0.1, 0.1, 0, 0],
        # job 4 task 3: submitted at 10 s, scheduled at 12 s, finishes at 100 s
        [10 * S, "", 4, 3, "", 0, "u", 0, 0, 0.1, 0.1, 0, 0],
        [12 * S, "", 4, 3, 6, 1, "u", 0, 0, 0.1, 0.1, 0, 0],
        [100 * S, "", 4, 3, 6, 4, "u", 0, 0, 0.1, 0.1, 0, 0],
        [300 * S, "", 1, 0, 5, 4, "u", 0, 0, 0.1, 0.1, 0, 0],
    ]
    conversion = convert_google2011([write_csv(tmp_path / "part.csv", rows)], HOSTS)
    requests = by_id(conversion.trace.requests)
    assert (requests["g1-0"].t_s, requests["g4-3"].t_s) == (0.0, 10.0)
    assert requests["g4-3"].makespan_s == 88.0
    assert conversion.trace.header.duration_s == 10.0
    assert conversion.stats.ends_after_window == 2
    assert any("shorter than most requests' makespans (median 300 s" in w
               for w in conversion.warnings)
    assert "Warning: the window (10 s) is shorter" in conversion.trace.header.notes


def test_comment_lines_are_skipped(tmp_path: Path) -> None:
    events = tmp_path / "part.csv"
    write_csv(events, GOOGLE_ROWS)
    events.write_text("# task_events sample, see the schema\n" + events.read_text()
                      + "# the end\n")
    assert len(convert_google2011([events], HOSTS).trace.requests) == 4
    pods = tmp_path / "pods.csv"
    write_csv(pods, [ALIBABA_HEADER, *ALIBABA_ROWS])
    pods.write_text("# openb pods, cluster-trace-gpu-v2023\n" + pods.read_text())
    assert len(convert_alibaba([pods], HOSTS).trace.requests) == 4
