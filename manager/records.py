"""Request records: what clients asked for and what became of it, kept in Redis.

=================================  ==============================================================
 key                                holds
=================================  ==============================================================
 ``{p}:request:{id}``               hash: the request (JSON spec), status, host, service id,
                                    current resources, cut received, kills, timestamps
 ``{p}:request:{id}:history``       list: events, oldest first, as JSON {"t", "event", ...}
 ``{p}:requests``                   sorted set: every request id by creation time
 ``{p}:requests:{status}``          set: the ids in one status, for ``GET /requests?status=``
=================================  ==============================================================
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis

from domain.errors import NotFoundError
from host_registry.redis_store import redis_errors


class RequestStatus(StrEnum):
    PENDING = "pending"  # waiting in the pending queue (queued, or a victim without a place)
    RUNNING = "running"
    COMPLETED = "completed"  # a job that exited 0
    FAILED = "failed"  # exited non-zero, or could not be started
    REJECTED = "rejected"  # no pass placed it and the client did not ask to queue
    KILLED_AND_RESCHEDULED = "killed-and-rescheduled"  # killed to make room, running elsewhere
    STOPPED = "stopped"  # stopped by the client (DELETE /requests/{id})


FINAL = frozenset(
    {RequestStatus.COMPLETED, RequestStatus.FAILED, RequestStatus.REJECTED, RequestStatus.STOPPED}
)


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
    history: list[dict[str, Any]]

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
            "spec": self.spec,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "history": self.history,
        }


class RequestRecords:
    def __init__(self, client: redis.Redis, prefix: str = "gs") -> None:
        self._redis: Any = client  # decode_responses=True: replies are str (see redis_store)
        self.prefix = prefix

    def _key(self, request_id: str) -> str:
        return f"{self.prefix}:request:{request_id}"

    def _status_key(self, status: RequestStatus) -> str:
        return f"{self.prefix}:requests:{status.value}"

    def exists(self, request_id: str) -> bool:
        with redis_errors():
            return bool(self._redis.exists(self._key(request_id)))

    def create(self, request_id: str, spec: dict[str, Any]) -> None:
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
                    "created_at": repr(now),
                    "updated_at": repr(now),
                },
            )
            pipe.zadd(f"{self.prefix}:requests", {request_id: now})
            pipe.sadd(self._status_key(RequestStatus.PENDING), request_id)
            pipe.rpush(
                self._key(request_id) + ":history", json.dumps({"t": now, "event": "submitted"})
            )
            pipe.execute()

    def update(
        self,
        request_id: str,
        event: str,
        *,
        status: RequestStatus | None = None,
        **fields_: object,
    ) -> None:
        """Append a history event and change the status and fields, atomically."""
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
            pipe.rpush(key + ":history", json.dumps({"t": now, "event": event, **detail}))
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
            history=[json.loads(item) for item in history],
        )

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
