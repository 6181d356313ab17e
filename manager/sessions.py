"""Dashboard sessions, kept server-side in Redis (DESIGN 9).

Logging in with the manager's token opens a session: a random id (256 bits) that the browser
holds in a cookie, and in Redis, under the SHA-256 of that id (so that what Redis holds cannot
be replayed as a cookie), the moment it expires and a fingerprint of the token it was opened
with (an HMAC of a fixed text under the token: it says nothing about the token). A session
ends when it expires (``GREENSWARM_SESSION_MAX_AGE_S``; Redis drops the key then too), when
its holder logs out (the key is deleted, so the cookie is worth nothing even if it was copied),
or when the token changes (its fingerprint no longer matches; every manager sharing the Redis
and the token shares the sessions).

=============================  ===============================================================
 key                            holds
=============================  ===============================================================
 ``{p}:session:{sha256(id)}``   JSON ``{"token", "expires_at"}``, expiring with the session
=============================  ===============================================================
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import time
from collections.abc import Callable
from typing import Any

from host_registry.redis_store import redis_errors

SESSION_ID_BYTES = 32


def token_fingerprint(token: str) -> str:
    return hmac.new(token.encode(), b"greenswarm dashboard session", hashlib.sha256).hexdigest()


class DashboardSessions:
    def __init__(self, client: Any, prefix: str, token: str, max_age_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._redis = client
        self.prefix = prefix
        self.max_age_s = max_age_s
        self.clock = clock
        self._fingerprint = token_fingerprint(token) if token else ""

    def _key(self, session_id: str) -> str:
        digest = hashlib.sha256(session_id.encode()).hexdigest()
        return f"{self.prefix}:session:{digest}"

    def open(self) -> str:
        """A new session's id (for the cookie)."""
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        value = json.dumps({"token": self._fingerprint,
                            "expires_at": self.clock() + self.max_age_s})
        with redis_errors():
            self._redis.set(self._key(session_id), value, ex=max(1, math.ceil(self.max_age_s)))
        return session_id

    def valid(self, session_id: str | None) -> bool:
        """The id names a session that is open, not expired, and opened with today's token."""
        if not session_id or not self._fingerprint or len(session_id) > 256:
            return False
        with redis_errors():
            raw = self._redis.get(self._key(session_id))
        if raw is None:
            return False
        try:
            stored = json.loads(raw)
            fingerprint, expires_at = str(stored["token"]), float(stored["expires_at"])
        except (ValueError, KeyError, TypeError):
            return False
        return hmac.compare_digest(fingerprint, self._fingerprint) and self.clock() < expires_at

    def close(self, session_id: str | None) -> None:
        """Log the session out: its id is worth nothing from now on."""
        if session_id and len(session_id) <= 256:
            with redis_errors():
                self._redis.delete(self._key(session_id))
