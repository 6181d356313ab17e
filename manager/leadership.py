"""Several managers, one leader (DESIGN 13): a lease in Redis and its fencing token.

Every manager serves reads; the one that holds the lease alone runs the scheduling loop's
periodic work, the queue, reconciliation, the power meter and peering. The lease is one Redis
key set only when absent, with an expiry (``SET NX PX``), renewed by its holder every
``renew_s``; when the holder stops renewing (dead, paused, cut off) it expires after
``lease_s`` and another manager takes it. Each acquisition increments the fencing token
(``INCR``), and every registry write of the scheduling side carries the token of the lease it
holds (RedisStore.fence): a write with an older token is refused inside Redis, so a former
leader that wakes from a pause cannot book anything (Kleppmann's fencing tokens; Redis' own
lease recipe, one key with an expiry).

The holder also steps down on its own once it could not renew for ``lease_s`` minus one renewal
interval: by then another manager may hold the lease, and the fence refuses its writes anyway.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis

from domain.errors import GreenSwarmError
from host_registry.connection import WAIT_TIMEOUT_MS, wait_for_replicas
from host_registry.keys import HostKeys
from host_registry.redis_store import RedisStore, redis_errors

log = logging.getLogger(__name__)


class Role(StrEnum):
    LEADER = "leader"
    STANDBY = "standby"


# KEYS[1] the lease, KEYS[2] the fencing counter; ARGV: holder id, holder's URL, lease in ms.
# The lease is set only when absent (SET NX PX) with a token one higher than any given before
# (INCR); its holder renews it (PEXPIRE). Returns {held (1|0), token, leader's URL}.
HOLD_LUA = """
local current = redis.call('GET', KEYS[1])
if current then
  local lease = cjson.decode(current)
  if lease.holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, lease.token, lease.url}
  end
  return {0, lease.token, lease.url}
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], cjson.encode({holder = ARGV[1], url = ARGV[2], token = token}),
           'NX', 'PX', ARGV[3])
return {1, token, ARGV[2]}
"""

# The holder gives the lease up (a manager that stops): the next one need not wait it out.
RELEASE_LUA = """
local current = redis.call('GET', KEYS[1])
if current and cjson.decode(current).holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


@dataclass(frozen=True)
class LeaderView:
    """What this manager knows of the leadership: its role, the leader's URL (None: nobody
    leads, as far as it knows) and, while it leads, its fencing token."""

    role: Role
    leader_url: str | None
    token: int | None = None


def holder_id() -> str:
    """This process among the managers: host name, pid and a random part (a restarted
    manager is a new holder)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Lease:
    """The lease in Redis: held (acquired or renewed) and released by one holder."""

    def __init__(self, client: redis.Redis, prefix: str, holder: str, url: str,
                 lease_s: float, wait_replicas: int = 0) -> None:
        keys = HostKeys(prefix)
        self._keys = [keys.leader, keys.fence]
        self._marker = f"{prefix}:replicated"
        self._wait_replicas = wait_replicas
        self._token = 0  # the token of the lease last held
        self.holder, self.url = holder, url
        self._lease_ms = max(1, round(lease_s * 1000))
        self._hold: Any = client.register_script(HOLD_LUA)
        self._release: Any = client.register_script(RELEASE_LUA)
        self._client: Any = client

    def hold(self) -> tuple[bool, int, str]:
        """Acquire the lease when nobody holds it, renew it when this holder does: (held,
        the lease's token, the leader's URL)."""
        with redis_errors():
            held, token, url = self._hold(keys=self._keys,
                                          args=[self.holder, self.url, self._lease_ms])
            if held and int(token) != self._token and self._wait_replicas:
                # a new token must survive a failover, or a later one could repeat it
                replicas = wait_for_replicas(self._client, self._marker, self._wait_replicas)
                if replicas < self._wait_replicas:
                    log.warning("the lease's new token reached %d of %d replicas", replicas,
                                self._wait_replicas)
        if held:
            self._token = int(token)
        return bool(held), int(token), str(url)

    def release(self) -> None:
        with redis_errors():
            self._release(keys=self._keys[:1], args=[self.holder])

    def current(self) -> tuple[str, int] | None:
        """Who leads (URL, token) as Redis says now; None when nobody does."""
        with redis_errors():
            text = self._client.get(self._keys[0])
        if not text:
            return None
        lease = json.loads(text)
        return str(lease["url"]), int(lease["token"])


def lease_timeout_s(renew_s: float) -> float:
    """How long one call of the lease waits for Redis: a renewal period, and room for the
    WAIT of a new token (WAIT_TIMEOUT_MS) twice over."""
    return max(renew_s, 2 * WAIT_TIMEOUT_MS / 1000 + 0.5)


def lease_on(store: RedisStore, holder: str, url: str, lease_s: float, renew_s: float,
             wait_replicas: int = 0) -> Lease:
    """The lease beside ``store``'s registries, on a client of its own whose calls give up
    within :func:`lease_timeout_s` and are tried once more on a new connection: a standby
    whose renewal waited out the registry's 5 s socket timeout on a primary gone silent led
    that much later after the failover (RedisStore.sibling_apart)."""
    return store.sibling_apart(
        lambda connection, prefix: Lease(connection, prefix, holder, url, lease_s,
                                         wait_replicas),
        lease_timeout_s(renew_s))


class Leadership:
    """Holds (or waits for) the lease on a thread of its own, renewing every ``renew_s``;
    ``on_lead(token)`` runs when this manager becomes leader, ``on_follow()`` when it stops
    leading."""

    def __init__(self, lease: Lease, renew_s: float, lease_s: float,
                 on_lead: Callable[[int], None], on_follow: Callable[[], None],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.lease = lease
        self.renew_s, self.lease_s = renew_s, lease_s
        self._on_lead, self._on_follow = on_lead, on_follow
        self._monotonic = monotonic
        self._view = LeaderView(Role.STANDBY, None)
        self._held_at = 0.0  # when the lease was last acquired or renewed (monotonic)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leadership", daemon=True)
        # False until start(): a manager whose parts are driven by hand (tests, tools) takes
        # part in no election, and nothing is forwarded
        self.elected = False
        self.starting = False  # during start()'s first attempt, on the caller's thread

    @property
    def view(self) -> LeaderView:
        with self._lock:
            return self._view

    @property
    def is_leader(self) -> bool:
        return self.view.role is Role.LEADER

    def start(self) -> None:
        """Try once now (a lone manager leads at once), then keep at it on the thread."""
        self.elected = self.starting = True
        try:
            self.step()
        finally:
            self.starting = False
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and give the lease up, so that a standby takes over at once."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2 * self.renew_s + 1.0)
        if self.is_leader:
            self._change(LeaderView(Role.STANDBY, None))
            try:
                self.lease.release()
            except GreenSwarmError as exc:
                log.warning("could not give the lease up (it expires by itself): %s", exc)

    def _run(self) -> None:
        """A step every ``renew_s`` from the start of the last: one that waited on a silent
        primary (up to the lease's timeout, twice) is followed by the next at once."""
        wait_s = self.renew_s
        while not self._stop.wait(wait_s):
            started = self._monotonic()
            self.step()
            wait_s = max(0.0, self.renew_s - (self._monotonic() - started))

    def step(self) -> None:
        """One renewal (or attempt to acquire)."""
        now = self._monotonic()
        try:
            held, token, url = self.lease.hold()
        except GreenSwarmError as exc:
            if self.is_leader and now - self._held_at >= self.lease_s - self.renew_s:
                log.warning("leadership: could not renew the lease for %.1f s, stepping "
                            "down: %s", now - self._held_at, exc)
                self._change(LeaderView(Role.STANDBY, None))
            elif not self.is_leader:
                self._change(LeaderView(Role.STANDBY, None))
            return
        if held:
            self._held_at = now
            self._change(LeaderView(Role.LEADER, url, token))
        else:
            self._change(LeaderView(Role.STANDBY, url))

    def _change(self, view: LeaderView) -> None:
        with self._lock:
            old, self._view = self._view, view
        if view.role is Role.LEADER and (old.role is not Role.LEADER or old.token != view.token):
            log.info("leadership: this manager leads (token %s)", view.token)
            self._on_lead(view.token or 0)
        elif view.role is Role.STANDBY and old.role is Role.LEADER:
            log.warning("leadership: this manager no longer leads")
            self._on_follow()
