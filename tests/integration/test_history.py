"""The manager's history (manager/history.py) in a real Redis: bounded, read after a cursor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from domain.energy import ClusterEnergy
from domain.errors import ValidationError
from domain.model import HostSpec
from host_registry.memory import MemoryStore
from lab.processes import RedisServer
from manager.history import History, build_sample
from manager.power import HostPower
from manager.slo_tally import ClassFulfilment

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_srv: RedisServer, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    found = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    yield found
    found.delete(f"hist-{request.node.name}:history")


def test_the_history_keeps_its_last_samples_and_reads_after_a_cursor(
    client: redis.Redis, request: pytest.FixtureRequest,
) -> None:
    history = History(client, f"hist-{request.node.name}", interval_s=10.0, keep_s=50.0)
    assert history.keep == 5
    assert history.due(100.0) and not history.due(105.0) and history.due(110.0)
    for t in range(12):
        history.record({"t": float(t), "queue": t})
    assert client.xlen(history.key) == 5  # bounded: a day by default
    first, cursor = history.read("0", limit=3)
    assert [s["t"] for s in first] == [7.0, 8.0, 9.0]
    rest, last = history.read(cursor)
    assert [s["t"] for s in rest] == [10.0, 11.0]
    assert history.read(last) == ([], last)
    with pytest.raises(ValidationError):
        history.read("99999999999999999999-99999999999999999999x")


def test_a_sample_weighs_utilization_by_capacity() -> None:
    store = MemoryStore()
    small = store.add_host(HostSpec("a", 1024, 2**30), cpu_util=1.0, memory_util=0.5)
    big = store.add_host(HostSpec("b", 3072, 3 * 2**30), cpu_util=0.0, memory_util=0.1)
    powers = {"a": HostPower(100.0, 90.0, 1.0), "b": HostPower(50.0, None, None)}
    energy = ClusterEnergy(0.0)
    energy.add(0.0, 150.0, 90.0)
    energy.add(3600.0, 150.0, 90.0)
    rows = [ClassFulfilment(1, 1.0, 1, 1, 1, 1), ClassFulfilment(2, 5 / 6, 0, 0, 0, 0)]
    sample = build_sample(3600.0, [small, big], powers, energy, 3, rows)
    assert sample["hosts_on"] == 2 and sample["queue"] == 3
    assert sample["cpu_util"] == 0.25 and sample["memory_util"] == pytest.approx(0.2)
    assert (sample["estimated_w"], sample["measured_w"]) == (150.0, 90.0)
    assert sample["estimated_kwh"] == pytest.approx(0.15)
    assert sample["slo"] == {"1": 0.5, "2": None}
