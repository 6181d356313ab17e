"""Where Redis is: one URL (one machine, the default), or the primary Redis Sentinel names.

With Sentinels (DESIGN 13) every process asks them for the current primary (redis-py's
``Sentinel``) and asks again after a failover, so a promoted replica is found without any
reconfiguration. The URL still gives the database, user and password; its host and port are
then unused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.backoff
import redis.connection
import redis.retry
import redis.sentinel

from domain.errors import ValidationError

# redis-py leaves these untyped: typed Any at this one edge
_parse_url: Any = redis.connection.parse_url
_Sentinel: Any = redis.sentinel.Sentinel
SENTINELS_SETTING = "GREENSWARM_REDIS_SENTINELS"
MASTER_SETTING = "GREENSWARM_REDIS_MASTER"
WAIT_SETTING = "GREENSWARM_REDIS_WAIT_REPLICAS"
WAIT_TIMEOUT_MS = 500  # well under any socket timeout
# While the replicas are short (the one replica died with its node), WAIT only looks (1 ms) and
# waits in full again once this often: waiting 500 ms on every write for a replica that is not
# there protects nothing and, several writes a submission, stops the leader under load.
SHORT_WAIT_MS = 1
SHORT_RECHECK_S = 5.0
SENTINEL_TIMEOUT_S = 0.5  # a Sentinel that does not answer this fast is skipped for the next


@dataclass(frozen=True)
class RedisEndpoint:
    url: str = "redis://127.0.0.1:6379/0"
    sentinels: str = ""  # "host:port,host:port,...": empty, the URL's server alone
    master: str = "greenswarm"  # the name the Sentinels monitor the primary under
    socket_timeout_s: float = 5.0
    # Each registry write waits until this many replicas hold it (WAIT, at most
    # WAIT_TIMEOUT_MS), so that a failover right after an answer cannot lose what was answered.
    wait_replicas: int = 0

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """The Sentinels as (host, port); ValidationError naming the setting when one is not
        HOST:PORT."""
        addresses = []
        for part in filter(None, (item.strip() for item in self.sentinels.split(","))):
            host, sep, port = part.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValidationError(SENTINELS_SETTING, f"{part!r} is not HOST:PORT")
            addresses.append((host.strip("[]"), int(port)))
        return addresses

    def validate(self) -> None:
        self.sentinel_addresses()
        if self.wait_replicas and self.socket_timeout_s * 1000 <= 2 * WAIT_TIMEOUT_MS:
            raise ValidationError(WAIT_SETTING, "needs a socket timeout over "
                                  f"{2 * WAIT_TIMEOUT_MS} ms")
        if not 0 <= self.wait_replicas <= 16:
            raise ValidationError(WAIT_SETTING, "must be between 0 and 16 replicas")
        if self.sentinels and not self.master.strip():
            raise ValidationError(MASTER_SETTING, "must name the primary the Sentinels watch")

    def connect(self, retries: int | None = None) -> redis.Redis:
        """A client that decodes replies to str: on the URL's server, or on whichever server
        the Sentinels name primary at the time of each new connection. ``retries``: how often
        a call that lost its connection (or timed out) is tried again on a new one, at once;
        None keeps redis-py's own policy (ten, backing off up to a second each)."""
        self.validate()
        kwargs: dict[str, Any] = {} if retries is None else {
            "retry": redis.retry.Retry(redis.backoff.NoBackoff(), retries)}
        try:
            options = _parse_url(self.url)
        except ValueError as exc:
            raise ValidationError("GREENSWARM_REDIS_URL", str(exc)) from None
        addresses = self.sentinel_addresses()
        if not addresses:
            return redis.Redis.from_url(self.url, decode_responses=True,
                                        socket_timeout=self.socket_timeout_s, **kwargs)
        kept = {name: options[name] for name in ("db", "username", "password") if name in options}
        sentinel = _Sentinel(addresses, socket_timeout=SENTINEL_TIMEOUT_S,
                            sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT_S})
        client: redis.Redis = sentinel.master_for(
            self.master, decode_responses=True, socket_timeout=self.socket_timeout_s,
            socket_connect_timeout=self.socket_timeout_s, **kept, **kwargs)
        return client


@dataclass
class ReplicaWait:
    """How long the next WAIT may block: WAIT_TIMEOUT_MS while the replicas keep up; after a
    WAIT came back short, SHORT_WAIT_MS (the write stands either way), with one full wait
    every SHORT_RECHECK_S to notice that a replica is back."""

    replicas: int
    clock: Callable[[], float] = time.monotonic
    short_since_s: float | None = field(default=None, init=False)
    full_at_s: float = field(default=0.0, init=False)

    def timeout_ms(self) -> int:
        if self.short_since_s is None:
            return WAIT_TIMEOUT_MS
        if self.clock() - self.full_at_s >= SHORT_RECHECK_S:
            return WAIT_TIMEOUT_MS
        return SHORT_WAIT_MS

    def saw(self, held: int, timeout_ms: int) -> None:
        """What a WAIT of ``timeout_ms`` answered: ``held`` replicas have the write."""
        now = self.clock()
        if held >= self.replicas:
            self.short_since_s = None
        elif timeout_ms == WAIT_TIMEOUT_MS:
            self.short_since_s = self.short_since_s if self.short_since_s is not None else now
            self.full_at_s = now

    @property
    def short(self) -> bool:
        return self.short_since_s is not None


def wait_for_replicas(client: Any, marker_key: str, replicas: int,
                      timeout_ms: int = WAIT_TIMEOUT_MS) -> int:
    """After a write made on any connection of ``client``: wait (at most WAIT_TIMEOUT_MS) until
    ``replicas`` replicas hold it, and say how many do. WAIT counts the writes of its own
    connection, so one tiny write (``marker_key``) and WAIT go together on one connection: the
    replication stream is ordered, so a replica that has the marker has everything written
    before it, on every connection."""
    pipe = client.pipeline(transaction=False)
    pipe.incr(marker_key)
    pipe.wait(replicas, timeout_ms)
    return int(pipe.execute()[1])
