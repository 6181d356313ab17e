"""Request records in a real Redis: histories are typed events (records of earlier versions:
test_record_migrations.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from domain.events import EventKind, Killed, Placed
from domain.events import EventKind as K
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


# Entries exactly as the manager wrote them before typed events (main at e8f305a:
# RequestRecords.update pushed {"t", "event": text, **the fields it set}).
LEGACY = [
    ({"t": 1.0, "event": "submitted"}, K.SUBMITTED, {}),
    ({"t": 2.0, "event": "placed: kill pass: EED host n1 (class 3, U=0.90): fits once v is "
                         "killed", "status": "running", "host": "n1", "service_id": "s1",
      "cpu_shares": 512, "memory": 268435456, "cut_received": "0"},
     K.PLACED, {"pass_": "kill", "host": "n1", "cpu_shares": 512}),
    ({"t": 3.0, "event": "placed: spread: host n2 scores 40.0", "status": "running",
      "host": "n2"}, K.PLACED, {"policy": "spread", "pass_": None}),
    ({"t": 4.0, "event": "cut to 341 shares and 178956971 bytes (total cut 1/3)",
      "cpu_shares": 341, "memory": 178956971, "cut_received": "1/3"},
     K.CUT, {"cut_received": "1/3"}),
    ({"t": 5.0, "event": "killed on n1 to make room for r7", "kills": 1}, K.KILLED,
     {"by": "r7", "kills": 1}),
    ({"t": 5.5, "event": "killed on n1 on request", "kills": 2}, K.KILLED, {"by": None}),
    ({"t": 6.0, "event": "killed: its host n3 left the Swarm", "kills": 3},
     K.HOST_LOST, {}),
    ({"t": 7.0, "event": "waiting in the pending queue (host-lost)", "status": "pending",
      "host": "", "service_id": ""}, K.QUEUED, {"queue_reason": "host-lost"}),
    ({"t": 8.0, "event": "container exited (code 137, out of memory); Swarm restarts it",
      "oom": True}, K.EXITED, {"exit_code": 137, "oom": True}),
    ({"t": 9.0, "event": "ended: failed (out of memory)", "status": "failed", "exit_code": 137,
      "oom": True}, K.ENDED, {"exit_code": 137}),
    ({"t": 9.5, "event": "ended: finished (exit code 0)", "status": "completed",
      "exit_code": 0}, K.ENDED, {"exit_code": 0}),
    ({"t": 10.0, "event": "stopped by the client", "status": "stopped"}, K.STOPPED, {}),
    ({"t": 11.0, "event": "could not start on n1: boom", "status": "failed", "host": ""},
     K.START_FAILED, {}),
    ({"t": 12.0, "event": "its service disappeared from the Swarm", "status": "failed"},
     K.VANISHED, {}),
    ({"t": 13.0, "event": "no host can take 9 CPU shares and 9 bytes of class 1, even with "
                          "cuts and kills", "status": "rejected"}, K.REJECTED, {}),
    ({"t": 14.0, "event": "Swarm could not start it: no suitable node", "status": "rejected"},
     K.REJECTED, {}),
    ({"t": 15.0, "event": "handed to Swarm's own scheduler", "service_id": "s9"},
     K.SWARM, {"service_id": "s9"}),
]


def test_a_record_written_before_typed_events_reads_as_typed_events(
    records: RequestRecords,
) -> None:
    records.create("old", SPEC)
    key = f"{records.prefix}:request:old:history"
    records._redis.delete(key)
    records._redis.rpush(key, *(json.dumps(entry) for entry, _, _ in LEGACY))
    history = records.get("old").history
    assert len(history) == len(LEGACY)
    for event, (entry, kind, fields) in zip(history, LEGACY, strict=True):
        assert event.kind is kind, entry["event"]
        assert event.reason == entry["event"] and event.t == entry["t"]
        for name, value in fields.items():
            assert getattr(event, name) == value, (entry["event"], name)
    served = records.get("old").to_json()["history"]
    assert all("event" not in item and "kind" in item for item in served)
