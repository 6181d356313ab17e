"""Which requests the manager has recorded, as the registries see them (DESIGN 9: a placement
for a request the manager does not know is refused).

The request records are the manager's (manager/records.py); the registries sit below it and
must not import it. They read one field of the same Redis hash, ``{p}:request:{id}``, whose
key is made here only, for both: the manager's records and this index cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Protocol

import redis

from domain.lifecycle import RequestStatus
from host_registry.redis_store import redis_errors


def request_key(prefix: str, request_id: str) -> str:
    """The Redis hash of one request record."""
    return f"{prefix}:request:{request_id}"


class RequestIndex(Protocol):
    def status_of(self, request_id: str) -> RequestStatus | None:
        """The request's status; None when no record of it exists."""
        ...


class RedisRequestIndex:
    """The request records' status field, read where the manager writes it."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._redis: Any = client  # decode_responses=True
        self._prefix = prefix

    def status_of(self, request_id: str) -> RequestStatus | None:
        with redis_errors():
            raw: str | None = self._redis.hget(request_key(self._prefix, request_id), "status")
        if not raw:
            return None
        try:
            return RequestStatus(raw)
        except ValueError:
            return None  # a damaged record is no request one may place
