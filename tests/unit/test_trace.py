"""The trace format: round trips, and errors that name the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationError
from domain.model import HostSpec, TaskType
from workloads.trace import (
    Trace,
    TraceError,
    TraceHeader,
    TraceRequest,
    Workload,
    request_from_json,
)
from workloads.trace_file import TraceWriter, open_trace, read_trace, write_trace

GIB = 1024**3


def header(**changes: Any) -> TraceHeader:
    values: dict[str, Any] = {
        "source": "thesis",
        "seed": 3,
        "duration_s": 100.0,
        "hosts": (HostSpec("h1", 8192, 12 * GIB), HostSpec("h2", 4096, 8 * GIB)),
        "notes": "test",
    }
    values.update(changes)
    return TraceHeader(**values)


def request(number: int, t: float, **changes: Any) -> TraceRequest:
    values: dict[str, Any] = {
        "t_s": t,
        "id": f"r{number}",
        "request_class": 1 + number % 4,
        "type": TaskType.JOB,
        "workload": Workload.FFMPEG,
        "cpu_shares": 204 + number,
        "memory_bytes": 256 * 1024**2 + number,
        "makespan_s": 30.0 + number,
        "request_rate": None,
    }
    values.update(changes)
    return TraceRequest(**values)


def sample_trace() -> Trace:
    return Trace(
        header(),
        (
            request(1, 0.0),
            request(2, 0.5, type=TaskType.SERVICE, workload=Workload.REDIS, request_rate=40),
            request(3, 0.5, workload=Workload.DL),
            request(4, 99.0, type=TaskType.SERVICE, workload=Workload.GENERIC),
        ),
    )


def lines_of(trace: Trace) -> list[dict[str, Any]]:
    return [trace.header.to_json(), *(r.to_json() for r in trace.requests)]


def write_lines(path: Path, lines: list[dict[str, Any]] | list[str]) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_write_then_read_gives_the_same_trace(tmp_path: Path, name: str) -> None:
    trace = sample_trace()
    write_trace(tmp_path / name, trace)
    assert read_trace(tmp_path / name) == trace
    assert not list(tmp_path.glob("*.tmp*"))


def test_the_file_is_one_json_object_per_line_with_the_documented_keys(tmp_path: Path) -> None:
    write_trace(tmp_path / "t.jsonl", sample_trace())
    rows = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert rows[0] == {
        "kind": "header", "version": 1, "source": "thesis", "seed": 3, "duration_s": 100.0,
        "hosts": [{"id": "h1", "cpu_capacity": 8192, "memory_capacity": 12 * GIB},
                  {"id": "h2", "cpu_capacity": 4096, "memory_capacity": 8 * GIB}],
        "notes": "test",
    }
    assert rows[2] == {
        "kind": "request", "t": 0.5, "id": "r2", "class": 3, "type": "service",
        "workload": "redis", "cpu_shares": 206, "memory": 256 * 1024**2 + 2,
        "makespan_s": 32.0, "request_rate": 40,
    }
    assert [r["t"] for r in rows[1:]] == [0.0, 0.5, 0.5, 99.0]


def test_blank_lines_are_ignored_and_streaming_yields_requests_in_order(tmp_path: Path) -> None:
    trace = sample_trace()
    path = write_lines(tmp_path / "t.jsonl", ["", *map(json.dumps, lines_of(trace)), ""])
    with open_trace(path) as reader:
        assert reader.header == trace.header
        assert tuple(reader) == trace.requests


def test_cluster_totals_sum_the_hosts() -> None:
    h = header()
    assert h.cpu_capacity_shares == 8192 + 4096
    assert h.memory_capacity_bytes == 20 * GIB


def error_of(path: Path) -> TraceError:
    with pytest.raises(TraceError) as info:
        read_trace(path)
    return info.value


@pytest.mark.parametrize(
    ("line", "key", "value", "field", "words"),
    [
        (3, "class", 5, "class", "<= 4"),
        (3, "class", True, "class", "integer"),
        (2, "cpu_shares", 1.5, "cpu_shares", "integer"),
        (2, "cpu_shares", 1, "cpu_shares", ">= 2"),
        (4, "memory", 0, "memory", ">= 1"),
        (2, "makespan_s", 0, "makespan_s", "> 0"),
        (2, "makespan_s", "10", "makespan_s", "number"),
        (2, "type", "batch", "type", "job"),
        (2, "workload", "nginx", "workload", "ffmpeg"),
        (2, "workload", "redis", "type", "service"),
        (2, "request_rate", 20, "request_rate", "null for a job"),
        (3, "request_rate", -1, "request_rate", ">= 0"),
        (2, "id", "", "id", "non-empty"),
        (2, "kind", "req", "kind", "request"),
        (5, "t", 100.5, "t", "after the end"),
        (2, "t", -1.0, "t", ">= 0"),
        (2, "colour", "red", "colour", "unknown field"),
    ],
)
def test_a_bad_request_names_its_line_and_field(
    tmp_path: Path, line: int, key: str, value: object, field: str, words: str
) -> None:
    lines = lines_of(sample_trace())
    lines[line - 1][key] = value
    error = error_of(write_lines(tmp_path / "bad.jsonl", lines))
    assert error.line == line
    assert error.field == field
    assert words in error.message
    assert f"line {line}" in str(error) and "bad.jsonl" in str(error)
    assert isinstance(error, ValidationError)


def test_a_missing_request_key_is_named(tmp_path: Path) -> None:
    lines = lines_of(sample_trace())
    del lines[2]["makespan_s"]
    error = error_of(write_lines(tmp_path / "t.jsonl", lines))
    assert (error.line, error.field, error.message) == (3, "makespan_s", "is missing")


def test_requests_out_of_time_order_are_refused(tmp_path: Path) -> None:
    lines = lines_of(sample_trace())
    lines[3]["t"] = 0.25
    error = error_of(write_lines(tmp_path / "t.jsonl", lines))
    assert (error.line, error.field) == (4, "t")
    assert "sorted" in error.message


def test_a_repeated_id_is_refused(tmp_path: Path) -> None:
    lines = lines_of(sample_trace())
    lines[4]["id"] = "r1"
    error = error_of(write_lines(tmp_path / "t.jsonl", lines))
    assert (error.line, error.field) == (5, "id")
    assert "twice" in error.message


def test_a_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    lines: list[str] = [json.dumps(x) for x in lines_of(sample_trace())]
    lines[2] = '{"kind": "request", "t": NaN}'
    error = error_of(write_lines(tmp_path / "t.jsonl", lines))
    assert (error.line, error.field) == (3, "json")
    lines[2] = "{not json"
    assert error_of(write_lines(tmp_path / "t.jsonl", lines)).line == 3


def test_a_second_header_is_refused(tmp_path: Path) -> None:
    lines = lines_of(sample_trace())
    lines.insert(2, lines[0])
    error = error_of(write_lines(tmp_path / "t.jsonl", lines))
    assert (error.line, error.field) == (3, "kind")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 2}, "version"),
        ({"kind": "request"}, "kind"),
        ({"duration_s": 0}, "duration_s"),
        ({"duration_s": "1h"}, "duration_s"),
        ({"seed": 1.5}, "seed"),
        ({"source": "has space"}, "source"),
        ({"hosts": []}, "hosts"),
        ({"notes": 3}, "notes"),
        ({"extra": 1}, "extra"),
        ({"hosts": [{"id": "a", "cpu_capacity": 0, "memory_capacity": 1}]},
         "hosts.0.cpu_capacity"),
        ({"hosts": [{"id": "a", "cpu_capacity": 1, "memory_capacity": 1},
                    {"id": "a", "cpu_capacity": 1, "memory_capacity": 1}]}, "hosts.1.id"),
        ({"hosts": [{"id": "a", "cpu_capacity": 1}]}, "hosts.0.memory_capacity"),
    ],
)
def test_a_bad_header_is_line_1_and_names_the_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    lines = lines_of(sample_trace())
    lines[0].update(change)
    error = error_of(write_lines(tmp_path / "t.jsonl", lines))
    assert (error.line, error.field) == (1, field)


def test_an_empty_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    error = error_of(tmp_path / "empty.jsonl")
    assert error.field == "header" and "empty" in error.message
    assert error_of(tmp_path / "absent.jsonl").field == "file"


def test_values_check_themselves() -> None:
    with pytest.raises(ValidationError, match="class"):
        request(1, 0.0, request_class=0)
    with pytest.raises(ValidationError, match="appears twice"):
        header(hosts=(HostSpec("a", 1, 1), HostSpec("a", 2, 2)))
    with pytest.raises(ValidationError, match=r"requests\.1\.t"):
        Trace(header(), (request(1, 5.0), request(2, 4.0)))
    with pytest.raises(ValidationError, match=r"requests\.1\.id"):
        Trace(header(), (request(1, 5.0), request(1, 6.0)))


def test_the_writer_refuses_disorder_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with pytest.raises(TraceError) as info, TraceWriter(path, header()) as writer:
        writer.write(request(1, 5.0))
        writer.write(request(2, 4.0))
    assert (info.value.line, info.value.field) == (3, "t")
    assert not path.exists() and not list(tmp_path.iterdir())


requests_strategy = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=1000, allow_nan=False),
        st.integers(1, 4),
        st.sampled_from(list(Workload)),
        st.integers(2, 10**6),
        st.integers(1, 2**40),
        st.floats(min_value=1e-3, max_value=1e6, allow_nan=False),
        st.one_of(st.none(), st.integers(0, 1000)),
    ),
    max_size=20,
)


@settings(max_examples=40, deadline=None)
@given(requests_strategy)
def test_any_valid_trace_survives_a_round_trip(
    tmp_path_factory: pytest.TempPathFactory,
    raw: list[tuple[float, int, Workload, int, int, float, int | None]],
) -> None:
    requests = []
    for index, (t, cls, workload, cpu, memory, makespan, rate) in enumerate(
        sorted(raw, key=lambda x: x[0])
    ):
        task_type = TaskType.SERVICE if workload in (Workload.REDIS, Workload.TIMESERVER) or (
            workload is Workload.GENERIC and rate is not None) else TaskType.JOB
        requests.append(TraceRequest(
            t, f"id-{index}", cls, task_type, workload, cpu, memory, makespan,
            rate if task_type is TaskType.SERVICE else None,
        ))
    trace = Trace(header(duration_s=1000.0), tuple(requests))
    path = tmp_path_factory.mktemp("rt") / "t.jsonl"
    write_trace(path, trace)
    assert read_trace(path) == trace


def test_hosts_labels_and_requests_constraints_round_trip() -> None:
    from domain.constraints import check_constraints
    from workloads.trace import header_from_json, request_from_json

    header = {"kind": "header", "version": 1, "source": "test", "seed": 1, "duration_s": 10.0,
              "hosts": [{"id": "h1", "cpu_capacity": 2048, "memory_capacity": 2**30,
                         "labels": {"disk": "ssd"}}]}
    parsed = header_from_json(header)
    assert parsed.hosts[0].labels == (("disk", "ssd"),)
    assert parsed.hosts[0].to_json()["labels"] == {"disk": "ssd"}
    assert parsed.hosts[0].facts().labels == (("disk", "ssd"),)
    line = {"kind": "request", "t": 1.0, "id": "r1", "class": 2, "type": "job",
            "workload": "generic", "cpu_shares": 512, "memory": 2**20, "makespan_s": 5.0,
            "request_rate": None, "constraints": ["node.labels.disk==ssd"]}
    request = request_from_json(line)
    assert request.constraints == check_constraints(["node.labels.disk==ssd"])
    assert request.to_json() == line
    without = request_from_json({k: v for k, v in line.items() if k != "constraints"})
    assert "constraints" not in without.to_json()  # traces without them are unchanged
    with pytest.raises(ValidationError) as caught:
        request_from_json(dict(line, constraints=["disk==ssd"]))
    assert caught.value.field == "constraints[0]"
    with pytest.raises(ValidationError) as caught:
        header_from_json(dict(header, hosts=[dict(header["hosts"][0], labels={"a": 1})]))
    assert caught.value.field == "hosts.0.labels.a"


def test_a_checkpointable_job_round_trips_and_its_fields_are_checked(tmp_path: Path) -> None:
    """DESIGN 3.14 in the trace format: "checkpoint": true with "checkpoint_interval_s"."""
    head = TraceHeader("test", 1, 100.0, (HostSpec("h1", 1024, 2**30),))
    job = TraceRequest(1.0, "j", 3, TaskType.JOB, Workload.DL, 512, 2**28, 60.0,
                       checkpoint_interval_s=30.0)
    path = tmp_path / "ckpt.jsonl"
    write_trace(path, Trace(head, (job,)))
    line = json.loads(path.read_text().splitlines()[1])
    assert (line["checkpoint"], line["checkpoint_interval_s"]) == (True, 30.0)
    assert read_trace(path).requests == (job,)
    base = {k: v for k, v in job.to_json().items() if not k.startswith("checkpoint")}
    for extra, field in (({"checkpoint": True}, "checkpoint_interval_s"),
                         ({"checkpoint_interval_s": 30}, "checkpoint_interval_s"),
                         ({"checkpoint": "yes", "checkpoint_interval_s": 30}, "checkpoint"),
                         ({"checkpoint": True, "checkpoint_interval_s": 0}, "checkpoint_interval_s"),
                         ({**{"type": "service", "workload": "redis", "request_rate": 20},
                           "checkpoint": True, "checkpoint_interval_s": 30},
                          "checkpoint_interval_s")):
        with pytest.raises(ValidationError) as caught:
            request_from_json({**base, **extra})
        assert caught.value.field == field, extra
