"""The records' migration to typed events (manager/record_migrations.py) on genuine old records:
tests/data/records_e8f305a/dump.json holds every key the manager of commit e8f305a wrote in a
real Redis (tests/data/records_e8f305a/make_dump.py says how it was made), free-text history
entries of every kind and the status ``killed-and-rescheduled`` among them. Each test loads it
into a real redis-server under a prefix of its own, migrates, and reads."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from domain.events import (
    Cut,
    Ended,
    Event,
    Exited,
    HostLost,
    Killed,
    Other,
    Placed,
    Queued,
    Rejected,
    StartFailed,
    Stopped,
    Submitted,
    Swarm,
    Vanished,
    event_from_json,
)
from domain.lifecycle import RequestStatus
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer
from manager.agents import AgentClient
from manager.app import create_app
from manager.core import Manager
from manager.record_migrations import SCHEMA_VERSION, RecordMigration
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from tests.support.standin_swarm import StandInSwarm

pytestmark = pytest.mark.redis
DUMP = json.loads((Path(__file__).parents[1] / "data" / "records_e8f305a" / "dump.json")
                  .read_text(encoding="utf-8"))
_numbers = itertools.count()
S = RequestStatus


def e(cls: type, **fields: Any) -> tuple[type, dict[str, Any]]:
    return cls, fields


PLACED_N2 = e(Placed, pass_="simple", host="n2", status=S.RUNNING)
# What each entry e8f305a wrote must read as: its kind's type, with these fields.
EXPECTED: dict[tuple[str, str], list[tuple[type, dict[str, Any]]]] = {
    ("gs", "a"): [e(Submitted), e(Placed, pass_="simple", policy=None, host="n2",
                                   service_id="svc001", cpu_shares=600, memory=600 * 2**20,
                                   cut_received="0", status=S.RUNNING),
                  e(Cut, cpu_shares=400, memory=471859200, cut_received="1/3"),
                  e(Ended, exit_code=3, oom=None, status=S.FAILED)],
    ("gs", "b"): [e(Submitted), PLACED_N2,
                  e(Cut, cpu_shares=334, memory=349525334, cut_received="1/3"),
                  e(Exited, exit_code=1, oom=None), e(Exited, exit_code=137, oom=True),
                  e(Stopped, status=S.STOPPED)],
    ("gs", "c"): [e(Submitted), e(Placed, pass_="cut", host="n2", cpu_shares=250),
                  e(Ended, exit_code=137, oom=True, status=S.FAILED)],
    ("gs", "d"): [e(Submitted), e(Placed, pass_="kill", host="n1", cpu_shares=900),
                  e(Ended, exit_code=0, status=S.COMPLETED)],
    ("gs", "e"): [e(Submitted), e(Rejected, status=S.REJECTED)],
    ("gs", "f"): [e(Submitted), e(Queued, queue_reason="queued", status=S.PENDING,
                                  cpu_shares=1000, memory=1000 * 2**20, cut_received="0"),
                  e(Stopped, status=S.STOPPED)],
    ("gs", "j"): [e(Submitted), e(StartFailed, status=S.FAILED)],
    ("gs", "k"): [e(Submitted), PLACED_N2, e(Killed, by=None, kills=1),
                  e(Queued, queue_reason="victim", status=S.PENDING), PLACED_N2,
                  e(HostLost, kills=2), e(Queued, queue_reason="host-lost"),
                  e(Placed, pass_="simple", host="n1", status=S.RUNNING)],
    ("gs", "l"): [e(Submitted), PLACED_N2, e(Vanished, status=S.FAILED)],
    ("gs", "m"): [e(Submitted), PLACED_N2, e(Ended, exit_code=0, status=S.COMPLETED)],
    ("gs", "n"): [e(Submitted), PLACED_N2, e(Ended, exit_code=2, status=S.FAILED)],
    ("gs", "o"): [e(Submitted), PLACED_N2, e(HostLost, kills=1),
                  e(Queued, queue_reason="host-lost", status=S.PENDING),
                  e(Placed, host="n1", status=S.RUNNING)],
    ("gs", "z"): [e(Submitted), e(Placed, pass_="simple", host="n1", cpu_shares=1000),
                  e(Killed, by="d", kills=1), e(Queued, queue_reason="victim"),
                  e(Placed, host="n2", status=S.RUNNING), e(HostLost, kills=2),
                  e(Queued, queue_reason="host-lost"),
                  e(Placed, pass_="simple", host="n1", status=S.RUNNING)],
    ("sp", "p"): [e(Submitted), e(Placed, pass_=None, policy="spread", host="n1",
                                  service_id="svc001", status=S.RUNNING)],
    ("sp", "q"): [e(Submitted), e(Rejected, status=S.REJECTED)],
    ("sw", "s1"): [e(Submitted), e(Swarm, service_id="svc001", host=None, status=None),
                   e(Swarm, host="n1", status=S.RUNNING)],
    ("sw", "s2"): [e(Submitted), e(Swarm, service_id="svc002"),
                   e(Swarm, host="elsewhere", status=S.RUNNING)],
    ("sw", "s3"): [e(Submitted), e(Swarm, service_id="svc003"), e(Rejected, status=S.REJECTED)],
    ("sw", "s4"): [e(Submitted), e(Rejected, status=S.REJECTED)],
    ("sw", "s5"): [e(Submitted), e(Swarm, service_id="svc004"),
                   e(Ended, host="n1", exit_code=0, status=S.COMPLETED)],
}
OLD_PREFIXES = ("gs", "sp", "sw")


@pytest.fixture
def client(redis_srv: RedisServer) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    made: list[str] = []
    connection.made = made  # type: ignore[attr-defined]
    yield connection
    for prefix in made:
        for key in connection.scan_iter(f"{prefix}:*"):
            connection.delete(key)
    connection.close()


def load(client: redis.Redis, *, only_records: bool = False) -> dict[str, str]:
    """The dump under fresh prefixes, one per old one: old prefix -> new."""
    n = next(_numbers)
    prefixes = {old: f"mig{n}{old}" for old in OLD_PREFIXES}
    client.made.extend(prefixes.values())  # type: ignore[attr-defined]
    pipe = client.pipeline(transaction=False)
    for key, item in DUMP["keys"].items():
        old, rest = key.split(":", 1)
        if only_records and not rest.startswith("request"):
            continue
        new = f"{prefixes[old]}:{rest}"
        kind, value = item["type"], item["value"]
        if kind == "hash":
            pipe.hset(new, mapping=value)
        elif kind == "list":
            pipe.rpush(new, *value)
        elif kind == "set":
            pipe.sadd(new, *value)
        elif kind == "zset":
            pipe.zadd(new, dict(value))
        else:
            pipe.set(new, value)
    pipe.execute()
    return prefixes


def snapshot(client: redis.Redis, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(client.scan_iter(f"{prefix}:*")):
        kind = client.type(key)
        out[key] = {"hash": client.hgetall, "list": lambda k: client.lrange(k, 0, -1),
                    "set": lambda k: sorted(client.smembers(k)),
                    "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
                    "string": client.get, "stream": client.xrange}[kind](key)
    return out


def old_history(prefix: str, request_id: str) -> list[dict[str, Any]]:
    return [json.loads(item) for item in DUMP["keys"][f"{prefix}:request:{request_id}:history"]
            ["value"]]


def check_typed(events: list[Event], old: list[dict[str, Any]],
                expected: list[tuple[type, dict[str, Any]]], where: str) -> None:
    assert len(events) == len(old) == len(expected), where
    for i, (event, entry, (cls, fields)) in enumerate(zip(events, old, expected, strict=True)):
        at = f"{where}[{i}] {entry['event']!r}"
        assert type(event) is cls, at
        assert (event.t, event.reason) == (entry["t"], entry["event"]), at
        for name, value in fields.items():
            assert getattr(event, name) == value, (at, name)
        # nothing the old entry said is lost: each of its fields is one of the event's
        form = event.to_json()
        for name, value in entry.items():
            if name == "event":
                continue
            if name == "status" and value == "killed-and-rescheduled":
                value = "running"
            assert form.get(name) == value, (at, name)


def test_every_record_e8f305a_wrote_reads_as_typed_events_after_the_migration(
    client: redis.Redis,
) -> None:
    prefixes = load(client)
    for old, prefix in prefixes.items():
        report = RecordMigration(client, prefix).run()
        assert (report.from_version, report.to_version, report.unread) == (1, SCHEMA_VERSION, {})
        records = RequestRecords(client, prefix)
        ids = records.ids()
        assert report.records == len(ids)  # every record had free-text entries
        assert sorted(ids) == sorted(r for o, r in EXPECTED if o == old)
        for request_id in ids:
            stored = [json.loads(item) for item in
                      client.lrange(f"{prefix}:request:{request_id}:history", 0, -1)]
            assert all("kind" in item and "event" not in item for item in stored)
            check_typed(records.get(request_id).history, old_history(old, request_id),
                        EXPECTED[old, request_id], f"{old}:{request_id}")
    records = RequestRecords(client, prefixes["gs"])
    # killed-and-rescheduled was for good once a killed request ran again: running now
    assert sorted(records.ids(RequestStatus.RUNNING)) == ["k", "o", "z"]
    assert {records.get(r).status for r in ("k", "o", "z")} == {RequestStatus.RUNNING}
    assert not client.exists(f"{prefixes['gs']}:requests:killed-and-rescheduled")
    assert records.counts()[RequestStatus.RUNNING] == 3
    # the other keys (hosts, tasks, the queue) are not the migration's
    for key, item in DUMP["keys"].items():
        old, rest = key.split(":", 1)
        if not rest.startswith("request"):
            assert client.type(f"{prefixes[old]}:{rest}") == item["type"]


def test_the_migration_runs_once_and_a_second_run_changes_nothing(client: redis.Redis) -> None:
    prefix = load(client)["gs"]
    first = RecordMigration(client, prefix).run()
    assert first.records == 13 and client.get(f"{prefix}:schema") == str(SCHEMA_VERSION)
    after = snapshot(client, prefix)
    again = RecordMigration(client, prefix).run()
    assert (again.from_version, again.records, again.stream_entries) == (SCHEMA_VERSION, 0, 0)
    assert snapshot(client, prefix) == after
    # even told to run again from the start, nothing at the current version changes
    client.delete(f"{prefix}:schema")
    assert RecordMigration(client, prefix).run().records == 0
    assert snapshot(client, prefix) == after


def test_two_managers_migrating_at_once_reach_the_same_records(client: redis.Redis) -> None:
    alone = load(client)["gs"]
    RecordMigration(client, alone).run()
    both = load(client)["gs"]
    start = threading.Barrier(2)
    reports, errors = [], []

    def migrate() -> None:
        own = redis.Redis(connection_pool=client.connection_pool)
        start.wait(timeout=10)
        try:
            reports.append(RecordMigration(own, both).run())
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and len(reports) == 2
    assert sum(r.records for r in reports) >= 13  # each record rewritten by one, maybe both
    expected = {key.replace(alone, both, 1): value
                for key, value in snapshot(client, alone).items()}
    assert snapshot(client, both) == expected


def test_a_record_it_cannot_read_is_left_whole_and_reported(client: redis.Redis) -> None:
    prefix = load(client)["gs"]
    damaged = f"{prefix}:request:z:history"
    client.rpush(damaged, "{not json")
    before = client.lrange(damaged, 0, -1)
    report = RecordMigration(client, prefix).run()
    assert list(report.unread) == ["z"] and "not JSON" in report.unread["z"]
    assert report.records == 12  # every other record
    assert client.lrange(damaged, 0, -1) == before  # left whole, its old entries too
    assert client.hget(f"{prefix}:request:z", "status") == "killed-and-rescheduled"
    assert client.smembers(f"{prefix}:requests:killed-and-rescheduled") == {"z"}
    assert client.smembers(f"{prefix}:schema:unread") == {"z"}
    assert RequestRecords(client, prefix).get("k").status is RequestStatus.RUNNING


def test_the_events_stream_keeps_its_ids_and_takes_todays_statuses(client: redis.Redis) -> None:
    """Versions between typed events and this one streamed entries with the old status."""
    prefix = load(client)["gs"]
    key = f"{prefix}:events"
    old = {"t": 5.0, "kind": "placed", "reason": "placed", "status": "killed-and-rescheduled"}
    ids = [client.xadd(key, {"request": "z", "event": json.dumps(old)}),
           client.xadd(key, {"request": "y", "event": "{damaged"}),
           client.xadd(key, {"request": "k", "event": json.dumps({**old, "status": "running"})})]
    report = RecordMigration(client, prefix).run()
    assert report.stream_entries == 1
    entries = client.xrange(key)
    assert [entry_id for entry_id, _ in entries] == ids
    assert json.loads(entries[0][1]["event"])["status"] == "running"
    assert entries[1][1] == {"request": "y", "event": "{damaged"}
    served, _ = RequestRecords(client, prefix).events()
    assert [(item["id"], item["request"], item.get("status")) for item in served] == [
        (ids[0], "z", "running"), (ids[2], "k", "running")]


def test_a_fresh_database_is_at_the_current_version_and_an_unknown_kind_is_kept(
    client: redis.Redis,
) -> None:
    prefix = f"mig{next(_numbers)}fresh"
    client.made.append(prefix)  # type: ignore[attr-defined]
    assert RecordMigration(client, prefix).run().records == 0
    assert client.get(f"{prefix}:schema") == str(SCHEMA_VERSION)
    records = RequestRecords(client, prefix)
    records.create("r", {"cpu_shares": 1, "memory": 1, "class": 1, "type": "job"})
    later = {"t": 2.0, "kind": "hibernated", "reason": "a later version's", "host": "n1"}
    client.rpush(f"{prefix}:request:r:history", json.dumps(later))
    client.delete(f"{prefix}:schema")
    assert RecordMigration(client, prefix).run().records == 0
    [_, event] = records.get("r").history
    assert isinstance(event, Other) and event.to_json() == later


def test_the_manager_migrates_at_start_before_its_loop(client: redis.Redis,
                                                       redis_srv: RedisServer) -> None:
    """The manager of today started on e8f305a's records serves them typed."""
    prefix = load(client, only_records=True)["gs"]
    swarm = StandInSwarm()
    swarm.add_node("n1", "h1")
    config = ManagerSettings(token="t", redis_prefix=prefix)
    store = RedisStore.from_url(redis_srv.url, config.classes, config.bounds, prefix)
    manager = Manager(config, store, store.sibling(RequestRecords), swarm,  # type: ignore[arg-type]
                      AgentClient("t"))
    manager.start()
    try:
        assert client.get(f"{prefix}:schema") == str(SCHEMA_VERSION)
        http = create_app(manager).test_client()
        answer = http.get("/requests/z", headers={"Authorization": "Bearer t"}).get_json()
        assert answer["status"] == "running"
        assert [item["kind"] for item in answer["history"]] == [
            "submitted", "placed", "killed", "queued", "placed", "host-lost", "queued",
            "placed"]
        assert answer["history"][2]["by"] == "d" and answer["history"][4]["status"] == "running"
        events = [event_from_json(item) for item in answer["history"]]
        check_typed(events, old_history("gs", "z"), EXPECTED["gs", "z"], "z over HTTP")
    finally:
        manager.stop()
        store.close()
