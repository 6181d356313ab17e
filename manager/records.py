"""Request records: what clients asked for and what became of it, kept in Redis.

=================================  ==============================================================
 key                                holds
=================================  ==============================================================
 ``{p}:request:{id}``               hash: the request (JSON spec), status, host, service id,
                                    current resources, cut received, kills, timestamps, the
                                    peer cluster it runs in and the one that forwarded it
 ``{p}:request:{id}:history``       list: typed events, oldest first, as JSON {"t", "kind",
                                    "reason", ...} (domain.events; records of earlier
                                    versions are migrated at start:
                                    manager/record_migrations.py)
 ``{p}:requests``                   sorted set: every request id by creation time
 ``{p}:requests:{status}``          set: the ids in one status, for ``GET /requests?status=``
 ``{p}:slo:...``                    the per-class SLO tally, written with the records
                                    (manager/slo_tally.py)
 ``{p}:events``                     stream: every history event of every request as it is
                                    written (fields ``request`` and ``event``, its JSON), the
                                    last ``EVENTS_KEPT`` or so, for ``GET /events``; the
                                    stream's entry ids are the cursors
=================================  ==============================================================
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import redis

from domain.errors import (
    DamagedRecordError,
    FencedError,
    NotFoundError,
    UnavailableError,
    ValidationError,
)
from domain.events import Event, Submitted, event_from_json, with_changes
from domain.lifecycle import RequestStatus
from host_registry.connection import ReplicaWait, wait_for_replicas
from host_registry.keys import HostKeys
from host_registry.redis_store import redis_errors
from host_registry.requests import request_key
from manager.record_migrations import MigrationReport, RecordMigration
from manager.slo_tally import SloTally

log = logging.getLogger(__name__)
EVENTS_KEPT = 10_000  # the event stream's length (approximately: Redis trims by blocks)
WRITE_TRIES = 20  # a record written by someone else meanwhile: read it again, this often


@dataclass(frozen=True)
class RequestRecord:
    id: str
    spec: dict[str, Any]
    status: RequestStatus
    host: str | None
    service_id: str | None
    cpu_shares: int
    memory: int
    cut_received: str
    kills: int  # times it was taken off a host (killed, or its host left)
    created_at: float
    updated_at: float
    history: list[Event]
    cluster: str | None = None  # the peer cluster it was offloaded to (federation); None: here
    forwarded_from: str | None = None  # the cluster that forwarded it here; None: a client
    host_name: str | None = None  # offloaded: its host's name in the peer's Swarm, as it said

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "host": self.host,
            "service_id": self.service_id,
            "image": self.spec.get("image"),
            "class": self.spec.get("class"),
            "type": self.spec.get("type"),
            "original": {
                "cpu_shares": self.spec.get("cpu_shares"),
                "memory": self.spec.get("memory"),
            },
            "current": {"cpu_shares": self.cpu_shares, "memory": self.memory},
            "cut_received": self.cut_received,
            "kills": self.kills,
            "cluster": self.cluster,
            "forwarded_from": self.forwarded_from,
            "spec": self.spec,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "history": [event.to_json() for event in self.history],
        }


class RequestRecords:
    def __init__(self, client: redis.Redis, prefix: str = "gs") -> None:
        self._redis: Any = client  # decode_responses=True: replies are str (see redis_store)
        self.prefix = prefix
        self.tally: SloTally | None = None  # the per-class SLO tally, kept with every write
        # the lease token the leading manager writes with (DESIGN 13; None: unfenced)
        self._fence: int | None = None
        self._fence_key = HostKeys(prefix).fence
        self._wait_replicas = 0
        self._replica_wait = ReplicaWait(0)

    def replicate(self, replicas: int) -> None:
        """Each record write returns only once this many replicas hold it (at most
        WAIT_TIMEOUT_MS; DESIGN 13, GREENSWARM_REDIS_WAIT_REPLICAS): a submission answered is
        on a replica, and a failover right after the answer keeps it."""
        self._wait_replicas = replicas
        self._replica_wait = ReplicaWait(replicas)

    def _replicated(self) -> None:
        if self._wait_replicas:
            timeout_ms = self._replica_wait.timeout_ms()
            held = wait_for_replicas(self._redis, f"{self.prefix}:replicated",
                                     self._wait_replicas, timeout_ms)
            was_short = self._replica_wait.short
            self._replica_wait.saw(held, timeout_ms)
            if held < self._wait_replicas and not was_short:
                log.warning("a record write reached %d of %d replicas", held,
                            self._wait_replicas)

    def fence(self, token: int | None) -> None:
        """Every record written from now on carries this lease token, as the registry's
        writes do (RedisStore.fence): refused once a newer one was given."""
        self._fence = token

    def _check_fence(self, pipe: Any) -> None:
        """Before MULTI: watch the fencing counter and refuse a write whose token is older;
        should a new token be given before EXEC, the EXEC fails (WatchError)."""
        if self._fence is None:
            return
        pipe.watch(self._fence_key)
        if self._fence < int(pipe.get(self._fence_key) or 0):
            pipe.reset()
            raise FencedError(f"this manager's lease token {self._fence} is no longer the "
                              "newest: another manager leads, and the record was not written")

    def keep_tally(self, tally: SloTally) -> None:
        """Keep ``tally`` with every write from now on; rebuilt from every record first when
        it was made with other objectives (or never). Call before the records are written."""
        self.tally = tally
        with redis_errors():
            if not tally.is_current():
                self._rebuild_tally(tally)

    def _rebuild_tally(self, tally: SloTally, batch: int = 500) -> None:
        pipe = self._redis.pipeline(transaction=True)
        tally.clear(pipe)
        pipe.execute()
        ids = list(self._redis.zrange(f"{self.prefix}:requests", 0, -1))
        for start in range(0, len(ids), batch):
            chunk = ids[start:start + batch]
            reads = self._redis.pipeline(transaction=False)
            for request_id in chunk:
                reads.hget(self._key(request_id), "spec")
                reads.lrange(self._key(request_id) + ":history", 0, -1)
            found = reads.execute()
            writes = self._redis.pipeline(transaction=False)
            for i, request_id in enumerate(chunk):
                spec, history = found[2 * i], found[2 * i + 1]
                if spec is None:
                    continue
                events = _events(history)
                verdict = tally.verdict(json.loads(spec), events)
                tally.stage(writes, request_id, self._key(request_id), None, verdict)
                tally.count_events(writes, json.loads(spec), events)
            writes.execute()

    def migrate(self) -> MigrationReport:
        """Bring records of earlier versions to today's form, once (manager/record_migrations.py):
        before anything else reads or writes them."""
        with redis_errors():
            return RecordMigration(self._redis, self.prefix).run()

    @property
    def _events_key(self) -> str:
        return f"{self.prefix}:events"

    def _key(self, request_id: str) -> str:
        return request_key(self.prefix, request_id)  # the registries read it too

    def _status_key(self, status: RequestStatus) -> str:
        return f"{self.prefix}:requests:{status.value}"

    def exists(self, request_id: str) -> bool:
        with redis_errors():
            return bool(self._redis.exists(self._key(request_id)))

    def create(
        self, request_id: str, spec: dict[str, Any], *, forwarded_from: str | None = None
    ) -> None:
        now = time.time()
        with redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            self._check_fence(pipe)
            pipe.multi()
            pipe.hset(
                self._key(request_id),
                mapping={
                    "id": request_id,
                    "spec": json.dumps(spec),
                    "status": RequestStatus.PENDING.value,
                    "host": "",
                    "service_id": "",
                    "cpu_shares": str(spec["cpu_shares"]),
                    "memory": str(spec["memory"]),
                    "cut_received": "0",
                    "kills": "0",
                    "cluster": "",
                    "forwarded_from": forwarded_from or "",
                    "created_at": repr(now),
                    "updated_at": repr(now),
                },
            )
            pipe.zadd(f"{self.prefix}:requests", {request_id: now})
            pipe.sadd(self._status_key(RequestStatus.PENDING), request_id)
            first = Submitted("submitted", t=now)
            submitted = json.dumps(first.to_json())
            pipe.rpush(self._key(request_id) + ":history", submitted)
            self._stream(pipe, request_id, submitted)
            if self.tally is not None:
                self.tally.stage(pipe, request_id, self._key(request_id), None,
                                 self.tally.verdict(spec, [first]))
            try:
                pipe.execute()
            except redis.WatchError:  # only the fencing counter is watched: a new leader
                raise FencedError("another manager took the lease while a record was "
                                  "written; it was not") from None
            self._replicated()

    def _stream(self, pipe: Any, request_id: str, entry: str) -> None:
        pipe.xadd(self._events_key, {"request": request_id, "event": entry},
                  maxlen=EVENTS_KEPT, approximate=True)

    def host_event(self, host_id: str, event: Event, t: float | None = None) -> None:
        """A host's event (its power, DESIGN 3.15) into the event stream, with the host in
        place of a request (``GET /events`` gives it with ``"request": ""`` and ``"host"``)."""
        dated = with_changes(event, time.time() if t is None else t, {})
        with redis_errors():
            self._redis.xadd(self._events_key,
                             {"request": "", "host": host_id,
                              "event": json.dumps(dated.to_json())},
                             maxlen=EVENTS_KEPT, approximate=True)

    def events(self, since: str = "0", limit: int = 100) -> tuple[list[dict[str, Any]], str]:
        """Events written after the cursor ``since`` (oldest first, at most ``limit``), each
        ``{"id", "request", ...the event}``, and the cursor to ask from next ("0": from the
        oldest kept; "$": from now on, nothing but the cursor)."""
        with redis_errors():
            if since == "$":
                last = self._redis.xrevrange(self._events_key, count=1)
                return [], (last[0][0] if last else "0")
            start = "-" if since == "0" else _after(since)
            if start is None:
                return [], since  # the last id a stream can have: nothing comes after it
            try:
                raw = self._redis.xrange(self._events_key, min=start, count=limit)
            except redis.ResponseError:
                raise ValidationError("since", "must be a cursor that GET /events gave, "
                                      "0 or $") from None
        out = []
        for entry_id, fields_ in raw:
            try:
                event = event_from_json(json.loads(fields_["event"])).to_json()
            except (KeyError, ValueError, TypeError):
                continue  # a damaged entry is skipped, never an error
            out.append({"id": entry_id, "request": fields_.get("request", ""), **event})
            if fields_.get("host"):  # a host's event (its power)
                out[-1]["host"] = fields_["host"]
        return out, (raw[-1][0] if raw else since)

    def note(self, request_id: str, event: Event) -> None:
        """An event of a request that has no record (refused at admission, DESIGN 3.13): into
        the events stream only, so ``GET /events`` shows it."""
        moment = time.time() if event.t is None else event.t
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            self._stream(pipe, request_id, json.dumps(with_changes(event, moment, {}).to_json()))
            pipe.execute()

    def update(
        self,
        request_id: str,
        event: Event,
        *,
        status: RequestStatus | None = None,
        **fields_: object,
    ) -> None:
        """Append a history event and change the status and fields, atomically. The entry is
        the event with the record's fields this change set (status, host, resources, ...):
        fields of its kind (domain.events.with_changes; TypeError, before any write, when its
        kind has no such field)."""
        now = time.time()
        key = self._key(request_id)
        mapping = {name: "" if value is None else str(value) for name, value in fields_.items()}
        mapping["updated_at"] = repr(now)
        detail = {k: v for k, v in fields_.items() if v is not None}
        if status is not None:
            mapping["status"] = status.value
            detail["status"] = status
        moment = now if event.t is None else event.t  # a given t: when it happened
        entry = json.dumps(with_changes(event, moment, detail).to_json())
        written = event_from_json(json.loads(entry))  # as the history will read it back
        with redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            for _ in range(WRITE_TRIES):
                try:
                    self._check_fence(pipe)
                    pipe.watch(key)  # the tally moves the record from what it read
                    old_status, spec, old_bucket = pipe.hmget(key, "status", "spec", "slo")
                    if old_status is None:
                        raise NotFoundError(f"no request {request_id!r}")
                    verdict = None
                    if self.tally is not None:
                        history = _events(pipe.lrange(key + ":history", 0, -1))
                        verdict = self.tally.verdict(json.loads(spec), [*history, written])
                    pipe.multi()
                    if status is not None:
                        # the old status's set by its stored name (an earlier version's too)
                        pipe.srem(f"{self.prefix}:requests:{old_status}", request_id)
                        pipe.sadd(self._status_key(status), request_id)
                    pipe.hset(key, mapping=mapping)
                    pipe.rpush(key + ":history", entry)
                    self._stream(pipe, request_id, entry)
                    if self.tally is not None:
                        self.tally.stage(pipe, request_id, key, old_bucket, verdict)
                        self.tally.count_events(pipe, json.loads(spec), [written])
                    pipe.execute()
                    self._replicated()
                    return
                except redis.WatchError:
                    continue
        raise UnavailableError(f"request {request_id!r} kept changing while it was written")

    def remove(self, request_id: str, event: Event) -> dict[str, str] | RequestRecord:
        """Remove a record that cannot be read (DESIGN 9: a failing record can be removed
        through the API): its hash and history, its place in the lists and the SLO tally;
        ``event`` goes to the events stream (``GET /events`` says what became of it). Returns
        the hash as it was (NotFoundError when there is none). A record that reads again by
        then (mended by hand since it was found damaged) is kept, and returned as read: the
        caller stops it as any other (:meth:`update`), its history kept."""
        key = self._key(request_id)
        entry = json.dumps(with_changes(event, time.time() if event.t is None else event.t,
                                        {}).to_json())
        with redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            for _ in range(WRITE_TRIES):
                try:
                    self._check_fence(pipe)
                    pipe.watch(key, key + ":history")
                    fields_: dict[str, str] = pipe.hgetall(key)
                    if not fields_:
                        raise NotFoundError(f"no request {request_id!r}")
                    try:
                        readable = _record(request_id, fields_,
                                           pipe.lrange(key + ":history", 0, -1))
                    except DamagedRecordError:
                        pass
                    else:
                        pipe.reset()
                        return readable
                    pipe.multi()
                    if self.tally is not None:  # first: it writes the hash's "slo"
                        self.tally.stage(pipe, request_id, key, fields_.get("slo"), None)
                    # every status's set, and the one its damaged status names
                    for name in {*(s.value for s in RequestStatus), fields_.get("status", "")}:
                        pipe.srem(f"{self.prefix}:requests:{name}", request_id)
                    pipe.zrem(f"{self.prefix}:requests", request_id)
                    pipe.delete(key, key + ":history")
                    self._stream(pipe, request_id, entry)
                    pipe.execute()
                    self._replicated()
                    return fields_
                except redis.WatchError:
                    continue
        raise UnavailableError(f"request {request_id!r} kept changing while it was removed")

    def get(self, request_id: str) -> RequestRecord:
        key = self._key(request_id)
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hgetall(key)
            pipe.lrange(key + ":history", 0, -1)
            fields_, history = pipe.execute()
        if not fields_:
            raise NotFoundError(f"no request {request_id!r}")
        return _record(request_id, fields_, history)

    def counts(self) -> dict[RequestStatus, int]:
        """How many records are in each status (one round trip)."""
        with redis_errors():
            pipe = self._redis.pipeline(transaction=False)
            for status in RequestStatus:
                pipe.scard(self._status_key(status))
            sizes = pipe.execute()
        return dict(zip(RequestStatus, (int(n) for n in sizes), strict=True))

    def ids(self, status: RequestStatus | None = None, limit: int = 1000) -> list[str]:
        with redis_errors():
            if status is None:
                return list(self._redis.zrange(f"{self.prefix}:requests", -limit, -1))
            members = sorted(self._redis.smembers(self._status_key(status)))
            scores = self._redis.zmscore(f"{self.prefix}:requests", members) if members else []
        ordered = sorted(zip(scores, members, strict=True), key=lambda p: (p[0] or 0.0, p[1]))
        return [member for _, member in ordered][-limit:]

    def status_of(self, request_id: str) -> RequestStatus | None:
        """The record's status; None when it has none (or there is no record)."""
        raw = self._field(request_id, "status")
        try:
            return RequestStatus(raw) if raw else None
        except ValueError:
            raise DamagedRecordError(f"request {request_id!r}: its record's status {raw!r} "
                                     "is no status") from None

    def cluster_of(self, request_id: str) -> str | None:
        """The peer cluster the request was offloaded to, None when it runs here: the field
        alone, so also of a record whose other fields cannot be read."""
        return self._field(request_id, "cluster") or None

    def kills_of(self, request_id: str) -> int:
        """The record's kill count (0 for a record written before it was kept)."""
        return int(self._field(request_id, "kills") or 0)

    def _field(self, request_id: str, name: str) -> str | None:
        """One field of the record's hash, without its history."""
        with redis_errors():
            raw: str | None = self._redis.hget(self._key(request_id), name)
        return raw


def _record(request_id: str, fields_: dict[str, str], history: list[str]) -> RequestRecord:
    """A record from its hash and history (DamagedRecordError when they cannot be read)."""
    try:
        spec = json.loads(fields_["spec"])
        if not isinstance(spec, dict):
            raise TypeError(f"its spec is a {type(spec).__name__}, not an object")
        return RequestRecord(
            id=fields_["id"],
            spec=spec,
            status=RequestStatus(fields_["status"]),
            host=fields_["host"] or None,
            service_id=fields_["service_id"] or None,
            cpu_shares=int(fields_["cpu_shares"]),
            memory=int(fields_["memory"]),
            cut_received=fields_["cut_received"],
            kills=int(fields_.get("kills") or 0),  # absent from records written before it
            created_at=float(fields_["created_at"]),
            updated_at=float(fields_["updated_at"]),
            history=_events(history),
            cluster=fields_.get("cluster") or None,  # absent from records written before it
            forwarded_from=fields_.get("forwarded_from") or None,
            host_name=fields_.get("host_name") or None,
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise DamagedRecordError(f"request {request_id!r}: its record cannot be read "
                                 f"({type(exc).__name__}: {exc})") from exc


def _events(raw: list[str]) -> list[Event]:
    return [event_from_json(json.loads(item)) for item in raw]


MAX_STREAM_PART = 2**64 - 1  # each part of a Redis stream id is an unsigned 64-bit number


def _after(cursor: str) -> str | None:
    """The exclusive start of an XRANGE after ``cursor`` ("ms-seq"), a part larger than a
    stream id can hold read as the largest; None after the last id a stream can have."""
    ms, seq = (min(int(part), MAX_STREAM_PART) for part in cursor.split("-"))
    if ms == seq == MAX_STREAM_PART:
        return None
    return f"({ms}-{seq}"
