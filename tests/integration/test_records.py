"""Request records in a real Redis: histories are typed events (records of earlier versions:
test_record_migrations.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from domain.events import EventKind, Killed, Placed
from domain.lifecycle import RequestStatus
from lab.processes import RedisServer
from manager.records import RequestRecords

pytestmark = pytest.mark.redis

SPEC = {"image": "busybox", "cpu_shares": 512, "memory": 2**28, "type": "job", "class": 3,
        "command": [], "env": {}, "ports": [], "volumes": [], "name": "r1"}


@pytest.fixture
def records(redis_srv: RedisServer, request: pytest.FixtureRequest) -> Iterator[RequestRecords]:
    client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    prefix = f"records-{request.node.name}"
    yield RequestRecords(client, prefix)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


def test_a_history_holds_typed_events_with_the_fields_each_change_set(
    records: RequestRecords,
) -> None:
    records.create("r1", SPEC)
    records.update("r1", Placed("placed: cut pass: ...", pass_="cut", policy="energy",
                                cuts=("c1",)),
                   status=RequestStatus.RUNNING, host="n1", cpu_shares=427)
    records.update("r1", Killed("killed on n1 to make room for r9", host="n1", by="r9"),
                   kills=1)
    history = records.get("r1").history
    assert [e.kind for e in history] == [EventKind.SUBMITTED, EventKind.PLACED,
                                         EventKind.KILLED]
    placed, killed = history[1], history[2]
    assert isinstance(placed, Placed) and isinstance(killed, Killed)
    assert (placed.pass_, placed.policy, placed.cuts, placed.status, placed.host,
            placed.cpu_shares) == ("cut", "energy", ("c1",), "running", "n1", 427)
    assert (killed.by, killed.kills, killed.host) == ("r9", 1, "n1")
    assert all(e.t is not None for e in history)
    assert records.get("r1").to_json()["history"][2]["by"] == "r9"


def test_a_change_its_kind_has_no_field_for_is_refused_before_anything_is_written(
    records: RequestRecords,
) -> None:
    records.create("r1", SPEC)
    with pytest.raises(TypeError, match="killed event has no field status"):
        records.update("r1", Killed("killed"), status=RequestStatus.PENDING)
    assert records.get("r1").status is RequestStatus.PENDING
    assert len(records.get("r1").history) == 1
