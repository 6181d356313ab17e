"""The per-class SLO tally (manager/slo_tally.py) kept by the request records in a real Redis:
at any moment it says what replaying every request's history says (GET /requests/{id}'s
service level), and reading it walks no history. Records of an earlier version's statuses
are moved to today's (issue 28, item 7)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from domain.events import (
    CheckpointRestart,
    Ended,
    HostLost,
    Killed,
    Placed,
    Queued,
    Rejected,
    Resumed,
    Started,
    Suspended,
)
from domain.lifecycle import RequestStatus
from domain.service_history import service_level
from domain.slo import SloTable
from lab.processes import RedisServer
from manager.records import RequestRecords
from manager.slo_tally import SloTally

pytestmark = pytest.mark.redis
ALPHA_S = 1.2
PLACED: dict[str, Any] = {"status": RequestStatus.RUNNING, "host": "h1"}


def spec(name: str, cls: int, kind: str = "service") -> dict[str, object]:
    return {"image": "busybox", "cpu_shares": 256, "memory": 2**26, "type": kind,
            "class": cls, "command": [], "env": {}, "ports": [], "volumes": [], "name": name}


@pytest.fixture
def client(redis_srv: RedisServer, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    found = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    yield found
    for key in found.scan_iter(f"tally-{request.node.name}:*"):
        found.delete(key)


@pytest.fixture
def records(client: redis.Redis, request: pytest.FixtureRequest) -> RequestRecords:
    return RequestRecords(client, f"tally-{request.node.name}")


def replayed(records: RequestRecords, slo: SloTable, now: float) -> dict[int, Counter[str]]:
    """Each class's requests by state at ``now``, from every history in full."""
    out: dict[int, Counter[str]] = {c: Counter() for c in (1, 2, 3, 4)}
    for request_id in records.ids(limit=10_000):
        record = records.get(request_id)
        cls = int(record.spec["class"])
        level = service_level(record.history, now=now, objective=slo.objective(cls),
                              alpha_s=ALPHA_S, is_job=record.spec["type"] == "job")
        assert level is not None
        over = record.status in (RequestStatus.COMPLETED, RequestStatus.FAILED,
                                 RequestStatus.REJECTED, RequestStatus.STOPPED)
        met = level.availability >= slo.objective(cls)
        out[cls][("met" if met else "missed") if over else ("meeting" if met else "missing")] += 1
    return out


def tallied(tally: SloTally, now: float) -> dict[int, Counter[str]]:
    return {row.cls: Counter({k: v for k, v in (("met", row.met), ("missed", row.missed),
                                                 ("meeting", row.meeting),
                                                 ("missing", row.missing)) if v})
            for row in tally.classes(now)}


def write_histories(records: RequestRecords) -> float:
    """Requests of every class in the situations that matter; the moment they start at."""
    t = time.time() + 1.0  # every event after the records' own "submitted"
    for name, cls, kind in (("run", 1, "service"), ("moved", 2, "service"),
                            ("waits", 4, "service"), ("late", 4, "service"),
                            ("done", 3, "job"), ("refused", 3, "job"), ("lost", 1, "job")):
        records.create(name, spec(name, cls, kind))

    records.update("run", Placed("placed", t=t), **PLACED)
    records.update("run", Started("runs", t=t + 0.5))
    # ran 100 s, killed, queued: meeting 5/6 until its slack (100/(5/6) - 100 = 20 s) is spent
    records.update("moved", Placed("placed", t=t), **PLACED)
    records.update("moved", Started("runs", t=t))
    records.update("moved", Killed("killed", t=t + 100, host="h1"), kills=1)
    records.update("moved", Queued("queued", t=t + 100),
                   status=RequestStatus.PENDING)
    # waited 30 s before its first placement: misses 1/2 until it has run 30 s
    records.update("waits", Queued("queued", t=t), status=RequestStatus.PENDING)
    records.update("waits", Placed("placed", t=t + 30), **PLACED)
    records.update("waits", Started("runs", t=t + 30))
    # placed again after a kill, its start not measured yet (no "started" ever): it waits
    # its allocation, then runs
    records.update("late", Placed("placed", t=t), **PLACED)
    records.update("late", Killed("killed", t=t + 40, host="h1"), kills=1)
    records.update("late", Placed("placed", t=t + 45), **PLACED)
    records.update("done", Placed("placed", t=t), **PLACED)
    records.update("done", Started("runs", t=t))
    records.update("done", Ended("ended", t=t + 60), status=RequestStatus.COMPLETED)
    records.update("refused", Rejected("no room", t=t), status=RequestStatus.REJECTED)
    records.update("lost", Placed("placed", t=t), **PLACED)
    records.update("lost", Started("runs", t=t))
    records.update("lost", HostLost("its host left", t=t + 10, host="h1"), kills=1)
    records.update("lost", Ended("stopped", t=t + 20), status=RequestStatus.STOPPED)
    return t


def test_the_tally_says_what_every_history_says_at_every_moment(
    records: RequestRecords, client: redis.Redis,
) -> None:
    slo = SloTable()
    tally = SloTally(client, records.prefix, slo, ALPHA_S)
    records.keep_tally(tally)
    t = write_histories(records)
    seen_changes = 0
    for offset in (100.5, 119.0, 121.0, 150.0, 1000.0):
        now = t + offset
        assert tallied(tally, now) == replayed(records, slo, now), offset
        seen_changes += tallied(tally, now) != tallied(tally, t + 100.5)
    assert seen_changes >= 2  # the moved request stopped meeting 5/6, "waits" started to
    row = {r.cls: r for r in tally.classes(t + 1000)}
    assert (row[3].met, row[3].missed, row[3].fulfilment) == (1, 1, 0.5)  # done, refused


def test_reading_the_tally_walks_no_history(records: RequestRecords, client: redis.Redis) -> None:
    tally = SloTally(client, records.prefix, SloTable(), ALPHA_S)
    records.keep_tally(tally)
    write_histories(records)

    def history_reads() -> int:
        stats = client.info("commandstats")
        return int(stats.get("cmdstat_lrange", {}).get("calls", 0))

    before = history_reads()
    for _ in range(5):
        tally.classes(time.time())
    assert history_reads() == before


def test_other_objectives_rebuild_the_tally_from_the_records(
    records: RequestRecords, client: redis.Redis,
) -> None:
    records.keep_tally(SloTally(client, records.prefix, SloTable(), ALPHA_S))
    t = write_histories(records)
    strict = SloTable({3: 1.0, 4: 0.99, 2: 0.99})
    again = RequestRecords(client, records.prefix)
    tally = SloTally(client, records.prefix, strict, ALPHA_S)
    assert not tally.is_current()
    again.keep_tally(tally)
    assert tally.is_current()
    for offset in (100.5, 150.0):
        assert tallied(tally, t + offset) == replayed(again, strict, t + offset)


def test_suspensions_resumes_and_checkpointed_restarts_are_counted_per_class(
    records: RequestRecords, client: redis.Redis,
) -> None:
    """DESIGN 3.14: what the dashboard shows beside each class's SLO, kept with the records,
    and the same once the tally is rebuilt from them."""
    records.keep_tally(SloTally(client, records.prefix, SloTable(), ALPHA_S))
    t = time.time() + 1.0
    for name, cls in (("paused", 4), ("saved", 3)):
        records.create(name, {**spec(name, cls, "job"), "checkpoint": True,
                              "checkpoint_interval_s": 10.0})
        records.update(name, Placed("placed", t=t), **PLACED)
    records.update("paused", Suspended("paused", t=t + 5, host="h1", by="x"))
    records.update("paused", Resumed("runs again", t=t + 9, host="h1"))
    records.update("paused", Suspended("paused", t=t + 12, host="h1", by="y"))
    records.update("saved", Killed("killed", t=t + 20, host="h1"), kills=1)
    records.update("saved", Placed("placed", t=t + 21), **{**PLACED, "host": "h2"})
    records.update("saved", CheckpointRestart("from its checkpoint", t=t + 21, host="h2"))

    def counts(tally: SloTally) -> dict[int, tuple[int, int, int]]:
        return {row.cls: (row.suspensions, row.resumes, row.checkpoint_restarts)
                for row in tally.classes(t + 30)}

    tally = records.tally
    assert tally is not None
    wanted = {1: (0, 0, 0), 2: (0, 0, 0), 3: (0, 0, 1), 4: (2, 1, 0)}
    assert counts(tally) == wanted
    assert {row["class"]: row["suspensions"] for row in
            (r.to_json() for r in tally.classes(t + 30))} == {1: 0, 2: 0, 3: 0, 4: 2}
    rebuilt = SloTally(client, records.prefix, SloTable({4: 0.4}), ALPHA_S)
    RequestRecords(client, records.prefix).keep_tally(rebuilt)
    assert counts(rebuilt) == wanted
