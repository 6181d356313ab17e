"""The replay's service clients against real servers on 127.0.0.1: the session's
redis-server, and the time server of the image."""

from __future__ import annotations

import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from lab.processes import RedisServer, free_port, stop_child, wait_serving
from replay.clients import HttpRound, RedisRound, ServiceClient
from replay.values import RoundResult, ServiceTarget
from workloads.trace import Workload

pytestmark = pytest.mark.redis


def test_the_redis_round_waits_for_data_then_sets_and_gets(redis_srv: RedisServer) -> None:
    with redis.Redis("127.0.0.1", redis_srv.port) as admin:
        rounds = RedisRound(keys=3, timeout_s=5.0)
        try:
            admin.set("key:0", "value")  # "loaded": DBSIZE > 0
            assert rounds.ready("127.0.0.1", redis_srv.port)
            rounds.run("127.0.0.1", redis_srv.port, 5)
            # Only key:0 .. key:2 are written, with 1 KiB values: the data set keeps its size.
            assert admin.exists("key:0", "key:1", "key:2") == 3
            assert admin.exists("key:3") == 0
            assert admin.strlen("key:1") == 1024
        finally:
            rounds.close()
            admin.delete("key:0", "key:1", "key:2")


TIMESERVER = Path(__file__).resolve().parents[2] / "lab/image_sources/timeserver/server.py"


@pytest.fixture
def http_port() -> Iterator[int]:
    """The real time server of the timeserver image, as a process on a free port."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(TIMESERVER)], env={"PORT": str(port)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_serving(process, f"http://127.0.0.1:{port}/", 15.0, "the time server")
        yield port
    finally:
        stop_child(process)


def _collect(results: queue.SimpleQueue[RoundResult]) -> list[RoundResult]:
    out = []
    while not results.empty():
        out.append(results.get())
    return out


def test_a_service_client_sends_rounds_at_its_interval(http_port: int) -> None:
    HttpRound(2.0).ready("127.0.0.1", http_port)
    results: queue.SimpleQueue[RoundResult] = queue.SimpleQueue()
    target = ServiceTarget("ts", Workload.TIMESERVER, 20, "127.0.0.1", http_port, 0)
    client = ServiceClient(target, 0.25, results, timeout_s=2.0)
    client.start()
    time.sleep(1.1)
    client.stop()
    assert client.join(5.0)
    rounds = _collect(results)
    assert 3 <= len(rounds) <= 6, rounds
    assert all(r.ok and r.ready and r.rate == 20 and r.request_id == "ts" for r in rounds)
    starts = [r.at_wall_s for r in rounds]
    # a fixed cadence: never ahead of it (a late round's successor may come sooner to catch up,
    # as a loaded machine shows), and at the interval on average
    assert all(s - starts[0] >= i * 0.25 - 0.02 for i, s in enumerate(starts)), starts
    assert 0.2 <= (starts[-1] - starts[0]) / (len(starts) - 1) <= 0.4, starts


def test_a_client_reports_not_ready_until_the_service_answers_and_follows_a_move(
    http_port: int,
) -> None:
    closed = free_port()  # nothing listens there
    results: queue.SimpleQueue[RoundResult] = queue.SimpleQueue()
    target = ServiceTarget("ts", Workload.TIMESERVER, 5, "127.0.0.1", closed, 0)
    client = ServiceClient(target, 0.1, results, timeout_s=1.0)
    client.start()
    time.sleep(0.35)
    client.retarget("127.0.0.1", http_port)  # "killed and rescheduled" elsewhere
    time.sleep(0.4)
    client.stop()
    assert client.join(5.0)
    rounds = _collect(results)
    assert rounds[0].ready is False and rounds[0].ok is False
    assert rounds[-1].ready and rounds[-1].ok
    first_ok = next(i for i, r in enumerate(rounds) if r.ok)
    assert all(not r.ready for r in rounds[:first_ok])
