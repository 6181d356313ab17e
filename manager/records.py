"""Request records: what clients asked for and what became of it, kept in Redis.

=================================  ==============================================================
 key                                holds
=================================  ==============================================================
 ``{p}:request:{id}``               hash: the request (JSON spec), status, host, service id,
                                    current resources, cut received, kills, timestamps, the
                                    peer cluster it runs in and the one that forwarded it
 ``{p}:request:{id}:history``       list: typed events, oldest first, as JSON {"t", "kind",
                                    "reason", ...} (domain.events; entries written before
                                    typed events are converted when read, see legacy_event)
 ``{p}:requests``                   sorted set: every request id by creation time
 ``{p}:requests:{status}``          set: the ids in one status, for ``GET /requests?status=``
 ``{p}:events``                     stream: every history event of every request as it is
                                    written (fields ``request`` and ``event``, its JSON), the
                                    last ``EVENTS_KEPT`` or so, for ``GET /events``; the
                                    stream's entry ids are the cursors
=================================  ==============================================================
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import redis

from domain.errors import NotFoundError, ValidationError
from domain.events import Event, EventKind
from domain.lifecycle import RequestStatus
from host_registry.redis_store import redis_errors

EVENTS_KEPT = 10_000  # the event stream's length (approximately: Redis trims by blocks)


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

    @property
    def _events_key(self) -> str:
        return f"{self.prefix}:events"

    def _key(self, request_id: str) -> str:
        return f"{self.prefix}:request:{request_id}"

    def _status_key(self, status: RequestStatus) -> str:
        return f"{self.prefix}:requests:{status.value}"

    def exists(self, request_id: str) -> bool:
        with redis_errors():
            return bool(self._redis.exists(self._key(request_id)))

    def create(
        self, request_id: str, spec: dict[str, Any], *, forwarded_from: str | None = None
    ) -> None:
        now = time.time()
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
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
            submitted = json.dumps(Event(EventKind.SUBMITTED, "submitted", t=now).to_json())
            pipe.rpush(self._key(request_id) + ":history", submitted)
            self._stream(pipe, request_id, submitted)
            pipe.execute()

    def _stream(self, pipe: Any, request_id: str, entry: str) -> None:
        pipe.xadd(self._events_key, {"request": request_id, "event": entry},
                  maxlen=EVENTS_KEPT, approximate=True)

    def events(self, since: str = "0", limit: int = 100) -> tuple[list[dict[str, Any]], str]:
        """Events written after the cursor ``since`` (oldest first, at most ``limit``), each
        ``{"id", "request", ...the event}``, and the cursor to ask from next ("0": from the
        oldest kept; "$": from now on, nothing but the cursor)."""
        with redis_errors():
            if since == "$":
                last = self._redis.xrevrange(self._events_key, count=1)
                return [], (last[0][0] if last else "0")
            start = "-" if since == "0" else f"({since}"
            try:
                raw = self._redis.xrange(self._events_key, min=start, count=limit)
            except redis.ResponseError:
                raise ValidationError("since", "must be a cursor that GET /events gave, "
                                      "0 or $") from None
        out = []
        for entry_id, fields_ in raw:
            try:
                event = read_event(json.loads(fields_["event"])).to_json()
            except (KeyError, ValueError, TypeError):
                continue  # a damaged entry is skipped, never an error
            out.append({"id": entry_id, "request": fields_.get("request", ""), **event})
        return out, (raw[-1][0] if raw else since)

    def note(self, request_id: str, event: Event) -> None:
        """An event of a request that has no record (refused at admission, DESIGN 3.13): into
        the events stream only, so ``GET /events`` shows it."""
        moment = time.time() if event.t is None else event.t
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            self._stream(pipe, request_id, json.dumps(replace(event, t=moment).to_json()))
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
        the event with the record's fields this change set (status, host, resources, ...)."""
        now = time.time()
        key = self._key(request_id)
        with redis_errors():
            old_status = self._redis.hget(key, "status")
            if old_status is None:
                raise NotFoundError(f"no request {request_id!r}")
            mapping = {name: "" if value is None else str(value) for name, value in fields_.items()}
            mapping["updated_at"] = repr(now)
            detail = {k: v for k, v in fields_.items() if v is not None}
            pipe = self._redis.pipeline(transaction=True)
            if status is not None:
                mapping["status"] = status.value
                pipe.srem(self._status_key(RequestStatus(old_status)), request_id)
                pipe.sadd(self._status_key(status), request_id)
                detail["status"] = status.value
            pipe.hset(key, mapping=mapping)
            moment = now if event.t is None else event.t  # a given t: when it happened
            entry = json.dumps({**replace(event, t=moment).to_json(), **detail})
            pipe.rpush(key + ":history", entry)
            self._stream(pipe, request_id, entry)
            pipe.execute()

    def get(self, request_id: str) -> RequestRecord:
        key = self._key(request_id)
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hgetall(key)
            pipe.lrange(key + ":history", 0, -1)
            fields_, history = pipe.execute()
        if not fields_:
            raise NotFoundError(f"no request {request_id!r}")
        return RequestRecord(
            id=fields_["id"],
            spec=json.loads(fields_["spec"]),
            status=RequestStatus(fields_["status"]),
            host=fields_["host"] or None,
            service_id=fields_["service_id"] or None,
            cpu_shares=int(fields_["cpu_shares"]),
            memory=int(fields_["memory"]),
            cut_received=fields_["cut_received"],
            kills=int(fields_.get("kills") or 0),  # absent from records written before it
            created_at=float(fields_["created_at"]),
            updated_at=float(fields_["updated_at"]),
            history=[read_event(json.loads(item)) for item in history],
            cluster=fields_.get("cluster") or None,  # absent from records written before it
            forwarded_from=fields_.get("forwarded_from") or None,
            host_name=fields_.get("host_name") or None,
        )

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
        raw = self._field(request_id, "status")
        return RequestStatus(raw) if raw else None

    def kills_of(self, request_id: str) -> int:
        """The record's kill count (0 for a record written before it was kept)."""
        return int(self._field(request_id, "kills") or 0)

    def _field(self, request_id: str, name: str) -> str | None:
        """One field of the record's hash, without its history."""
        with redis_errors():
            raw: str | None = self._redis.hget(self._key(request_id), name)
        return raw


def read_event(obj: Mapping[str, Any]) -> Event:
    """A history entry as a typed event; one written before typed events is converted."""
    if "kind" in obj or "event" not in obj:
        return Event.from_json(obj)
    return legacy_event(obj)


# Entries written before typed events ({"t", "event": text, ...fields}): the kind from the
# text's fixed beginning. The only place that reads such text; nothing reads ``reason``.
_LEGACY_KINDS: tuple[tuple[str, EventKind], ...] = (
    ("submitted", EventKind.SUBMITTED),
    ("placed", EventKind.PLACED),
    ("cut to", EventKind.CUT),
    ("killed: its host", EventKind.HOST_LOST),
    ("killed", EventKind.KILLED),
    ("waiting in the pending queue", EventKind.QUEUED),
    ("ended", EventKind.ENDED),
    ("container exited", EventKind.EXITED),
    ("stopped by the client", EventKind.STOPPED),
    ("could not start", EventKind.START_FAILED),
    ("its service disappeared", EventKind.VANISHED),
    ("handed to Swarm", EventKind.SWARM),
    ("Swarm started it", EventKind.SWARM),
    ("Swarm refused it", EventKind.REJECTED),
    ("Swarm could not start it", EventKind.REJECTED),
)
_LEGACY_PASS = re.compile(r"^placed: (\w+) pass:")
_LEGACY_POLICY = re.compile(r"^placed: (\w+): ")
_LEGACY_FOR = re.compile(r"to make room for (\S+)\s*$")
_LEGACY_QUEUE = re.compile(r"^waiting in the pending queue \(([\w-]+)\)")
_LEGACY_EXIT = re.compile(r"\((?:exit )?code (-?\d+)")


def legacy_event(obj: Mapping[str, Any]) -> Event:
    """An entry of a record written before typed events, as the event it meant."""
    text = str(obj.get("event", ""))
    kind = next((k for prefix, k in _LEGACY_KINDS if text.startswith(prefix)), None)
    if kind is None:
        kind = EventKind.REJECTED if obj.get("status") == "rejected" else EventKind.OTHER
    event = replace(Event.from_json({**obj, "kind": kind.value}), reason=text)
    if kind is EventKind.PLACED:
        found = _LEGACY_PASS.match(text)
        policy = _LEGACY_POLICY.match(text)
        event = replace(event, pass_=found.group(1) if found else None,
                        policy=policy.group(1) if policy and not found else None)
    elif kind is EventKind.KILLED:
        room = _LEGACY_FOR.search(text)
        event = replace(event, by=room.group(1) if room else None)
    elif kind is EventKind.QUEUED:
        queue = _LEGACY_QUEUE.match(text)
        event = replace(event, queue_reason=queue.group(1) if queue else None)
    elif kind in (EventKind.ENDED, EventKind.EXITED) and event.exit_code is None:
        code = _LEGACY_EXIT.search(text)
        event = replace(event, exit_code=int(code.group(1)) if code else None)
    return event
