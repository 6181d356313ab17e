"""Where Redis is: one URL (one machine, the default), or the primary Redis Sentinel names.

With Sentinels (DESIGN 13) every process asks them for the current primary (redis-py's
``Sentinel``) and asks again after a failover, so a promoted replica is found without any
reconfiguration. The URL still gives the database, user and password; its host and port are
then unused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
import redis.connection
import redis.sentinel

from domain.errors import ValidationError

# redis-py leaves these untyped: typed Any at this one edge
_parse_url: Any = redis.connection.parse_url
_Sentinel: Any = redis.sentinel.Sentinel
SENTINELS_SETTING = "GREENSWARM_REDIS_SENTINELS"
MASTER_SETTING = "GREENSWARM_REDIS_MASTER"
WAIT_SETTING = "GREENSWARM_REDIS_WAIT_REPLICAS"
WAIT_TIMEOUT_MS = 500  # well under any socket timeout
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

    def connect(self) -> redis.Redis:
        """A client that decodes replies to str: on the URL's server, or on whichever server
        the Sentinels name primary at the time of each new connection."""
        self.validate()
        try:
            options = _parse_url(self.url)
        except ValueError as exc:
            raise ValidationError("GREENSWARM_REDIS_URL", str(exc)) from None
        addresses = self.sentinel_addresses()
        if not addresses:
            return redis.Redis.from_url(self.url, decode_responses=True,
                                        socket_timeout=self.socket_timeout_s)
        kept = {name: options[name] for name in ("db", "username", "password") if name in options}
        sentinel = _Sentinel(addresses, socket_timeout=SENTINEL_TIMEOUT_S,
                            sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT_S})
        client: redis.Redis = sentinel.master_for(
            self.master, decode_responses=True, socket_timeout=self.socket_timeout_s,
            socket_connect_timeout=self.socket_timeout_s, **kept)
        return client


def wait_for_replicas(client: Any, marker_key: str, replicas: int) -> int:
    """After a write made on any connection of ``client``: wait (at most WAIT_TIMEOUT_MS) until
    ``replicas`` replicas hold it, and say how many do. WAIT counts the writes of its own
    connection, so one tiny write (``marker_key``) and WAIT go together on one connection: the
    replication stream is ordered, so a replica that has the marker has everything written
    before it, on every connection."""
    pipe = client.pipeline(transaction=False)
    pipe.incr(marker_key)
    pipe.wait(replicas, WAIT_TIMEOUT_MS)
    return int(pipe.execute()[1])
