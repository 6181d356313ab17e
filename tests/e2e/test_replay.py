"""`greenswarm bench replay` end to end: a tiny trace replayed through the REST API of greenswarm
deployed on the lab (compose + stack, tests/e2e/stack.py), with real containers of the four
workload images and real client rounds; the result file's counts are checked against the trace.

Six requests over 300 trace seconds at speedup 20 (15 s of wall time): three short jobs, three
services with clients. Two nodes of 1 CPU and 2 GiB take them all without cuts or kills.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.lifecycle import FINAL
from domain.model import HostSpec, TaskType
from tests.e2e.conftest import REPO, Lab
from tests.e2e.stack import Stack
from workloads.trace import Trace, TraceHeader, TraceRequest, Workload
from workloads.trace_file import write_trace

pytestmark = pytest.mark.lab

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "1", "--node-memory", "2g")
MIB = 1024**2
SPEEDUP = 20


@pytest.fixture(scope="module")
def stack(lab: Lab) -> Iterator[Stack]:
    for node in lab.nodes:
        if node["socket"] != f"/run/greenswarm/lab/{node['name']}.sock":
            pytest.skip("docker-stack.lab.yml names the default lab's sockets")
    deployed = Stack(lab, name="gsreplay", monitor_window_s=2.0)
    try:
        deployed.up()
        yield deployed
    finally:
        deployed.down(strict=False)


def tiny_trace() -> Trace:
    hosts = tuple(HostSpec(f"host-{i}", 1024, 2048 * MIB) for i in (1, 2))
    job, service = TaskType.JOB, TaskType.SERVICE
    requests = (
        TraceRequest(0.0, "r1", 3, job, Workload.FFMPEG, 256, 384 * MIB, 60.0),
        TraceRequest(10.0, "r2", 4, service, Workload.REDIS, 128, 256 * MIB, 140.0, 20),
        TraceRequest(20.0, "r3", 2, service, Workload.TIMESERVER, 64, 256 * MIB, 120.0, 20),
        TraceRequest(30.0, "r4", 3, job, Workload.DL, 256, 512 * MIB, 40.0),
        TraceRequest(40.0, "r5", 1, job, Workload.FFMPEG, 256, 384 * MIB, 40.0),
        TraceRequest(60.0, "r6", 4, service, Workload.TIMESERVER, 64, 256 * MIB, 100.0, 40),
    )
    return Trace(TraceHeader("tiny", 1, 300.0, hosts), requests)


def run_replay(stack: Stack, tmp_path: Path, trace: Trace, label: str,
               *options: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``greenswarm bench replay`` of ``trace`` against the stack at SPEEDUP, without probes,
    into tmp_path/out; the output directory and the finished command."""
    stack.wait_quiet()
    trace_file = tmp_path / "trace.jsonl"
    write_trace(trace_file, trace)
    token_file = tmp_path / "token"
    token_file.write_text(stack.token + "\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "bench", "replay", "--trace", str(trace_file),
         "--manager", stack.url, "--speedup", str(SPEEDUP), "--policy-label", label,
         "--out", str(out), "--token-file", str(token_file), "--no-probes", *options],
        cwd=REPO, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done


def test_a_tiny_trace_replayed_live_gives_a_result_that_matches_the_trace(
    stack: Stack, tmp_path: Path
) -> None:
    out, _ = run_replay(stack, tmp_path, tiny_trace(), "live-energy", "--port-base", "24100",
                        "--progress")
    result = json.loads((out / "live-energy" / "result.json").read_text())
    replay = json.loads((out / "live-energy" / "replay.json").read_text())
    m = result["metrics"]
    # Every request of the trace was decided, and the small cluster took them all.
    assert (m["requests"], m["successful"], m["failed"], m["probes"]) == (6, 6, 0, 0)
    assert m["undecided"] == 0
    assert (m["cuts"], m["kills"], m["oom_kills"]) == (0, 0, 0), m
    # Three jobs ran to their end (3, 2 and 2 wall seconds, plus starting and reporting).
    assert m["jobs_finished"] == 3, replay["counters"]
    assert m["job_makespan_s_mean"] >= 40.0
    # The three services were stopped by their client, and answered it on the way.
    assert m["services_stopped"] == 3, replay["counters"]
    assert m["responses"] >= 1, replay["counters"]
    assert set(result["response_ms"]) <= {"redis-20", "timeserver-20", "timeserver-40"}
    assert m["decisions"] == 6
    assert m["scheduling_delay_ms_p50"] > 0
    # The hosts' states came from the manager's /hosts, named by their addresses.
    assert sorted(h["host_id"] for h in result["hosts"]) == sorted(
        n["address"] for n in stack.lab.nodes)
    assert m["avg_memory_util"] > 0
    assert replay["counters"]["submitted"] == 6 and replay["submit_errors"] == 0
    # Nothing of the replay runs any more.
    assert all(r["status"] in FINAL for r in stack.get("/requests"))
    assert all(h["task_count"] == 0 for h in stack.hosts())
    # The report reads it like a simulated run.
    report = subprocess.run([sys.executable, "-m", "cli.main", "bench", "report", str(out),
                             "--no-plots"], cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=False)
    assert report.returncode == 0, report.stderr
    assert "live-energy" in (out / "summary.md").read_text()


def test_queued_requests_replayed_live_wait_and_are_placed_later(
    stack: Stack, tmp_path: Path
) -> None:
    """--queue-new: two class-1 jobs of three quarters of a core each leave a quarter free on
    each node; a third class-1 job of half a core can neither fit nor kill them, so the manager
    queues it (admitted: the three ask for the two cores class 1 may book, DESIGN 3.13), and
    places it when one of them ends."""
    hosts = tuple(HostSpec(f"host-{i}", 1024, 2048 * MIB) for i in (1, 2))
    job = TaskType.JOB
    requests = (
        TraceRequest(0.0, "q1", 1, job, Workload.FFMPEG, 768, 256 * MIB, 60.0),
        TraceRequest(1.0, "q2", 1, job, Workload.FFMPEG, 768, 256 * MIB, 60.0),
        TraceRequest(2.0, "q3", 1, job, Workload.FFMPEG, 512, 256 * MIB, 40.0),
    )
    trace = Trace(TraceHeader("queued", 1, 300.0, hosts), requests)
    out, done = run_replay(stack, tmp_path, trace, "queued", "--queue-new", "--progress")
    assert "queued 1 new request(s): 1 placed later, 0 still waiting at the end" in done.stdout
    assert "placed 2 queued 1 (placed later 1) rejected 0" in done.stderr  # the last line
    result = json.loads((out / "queued" / "result.json").read_text())
    replay = json.loads((out / "queued" / "replay.json").read_text())
    m = result["metrics"]
    assert (m["requests"], m["successful"], m["failed"], m["undecided"]) == (3, 3, 0, 0), m
    assert (m["queued_requests"], m["queued_at_end"], m["kills"]) == (1, 0, 0), m
    assert (replay["counters"]["queued"], replay["counters"]["queued_placed"]) == (1, 1)
    assert m["jobs_finished"] == 3, replay["counters"]
    # q3 waited for a job of 3 wall seconds (60 trace s) to end: most of it on its delay.
    assert result["scheduling_delay_ms"]["max"] >= 30_000.0
    records = [json.loads(line) for line in (out / "queued" / "histories.jsonl").open()]
    [q3] = [r for r in records if r["id"] == "q3"]
    kinds = [e["kind"] for e in q3["history"]]
    assert kinds[1] == "queued" and q3["history"][1]["queue_reason"] == "queued"
    assert "placed" in kinds[2:]
    assert all(r["status"] in FINAL for r in stack.get("/requests"))
