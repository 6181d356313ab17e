"""Deployment records (DESIGN 12): what a deployment placed where, kept in Redis.

=================================  ==============================================================
 key                                holds
=================================  ==============================================================
 ``{p}:deployment:{name}``          string: the deployment as JSON {"name", "status", "created_at",
                                    "requests": [{"name", "id", "cluster"}], "links", "cost",
                                    "reason"}; written once with SET NX while it is placed, so
                                    two deployments never take one name
 ``{p}:deployments``                sorted set: every deployment name by creation time
=================================  ==============================================================
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from typing import Any

import redis

from domain.errors import ConflictError, NotFoundError
from host_registry.redis_store import redis_errors


class DeploymentStatus(StrEnum):
    PLACING = "placing"  # its requests are being created
    DEPLOYED = "deployed"  # every request was created
    UNDONE = "undone"  # a creation failed: what was created is stopped again
    STOPPED = "stopped"  # DELETE /deployments/{name}


class DeploymentRecords:
    def __init__(self, client: redis.Redis, prefix: str = "gs") -> None:
        self._redis: Any = client
        self.prefix = prefix

    def _key(self, name: str) -> str:
        return f"{self.prefix}:deployment:{name}"

    def reserve(self, name: str) -> None:
        """Take the name (ConflictError when a deployment has it)."""
        now = time.time()
        record = {"name": name, "status": DeploymentStatus.PLACING.value, "created_at": now,
                  "requests": [], "links": [], "cost": None, "reason": None}
        with redis_errors():
            if not self._redis.set(self._key(name), json.dumps(record), nx=True):
                raise ConflictError(f"a deployment named {name!r} already exists")
            self._redis.zadd(f"{self.prefix}:deployments", {name: now})

    def release(self, name: str) -> None:
        """Give the name back (a deployment refused before anything was created)."""
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.delete(self._key(name))
            pipe.zrem(f"{self.prefix}:deployments", name)
            pipe.execute()

    def save(self, name: str, **fields: Any) -> dict[str, Any]:
        record = self.get(name)
        record.update(fields)
        with redis_errors():
            self._redis.set(self._key(name), json.dumps(record))
        return record

    def get(self, name: str) -> dict[str, Any]:
        with redis_errors():
            raw = self._redis.get(self._key(name))
        if raw is None:
            raise NotFoundError(f"no deployment named {name!r}")
        record: dict[str, Any] = json.loads(raw)
        return record

    def names(self, limit: int = 1000) -> list[str]:
        with redis_errors():
            return list(self._redis.zrange(f"{self.prefix}:deployments", -limit, -1))
