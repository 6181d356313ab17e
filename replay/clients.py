"""The clients of the replay's services: one thread per running service, sending rounds.

Every ``interval_s`` (10 s of trace time, ``10 / K`` wall seconds) a client sends ``rate``
requests one after the other and reports how long the round took (:class:`RoundResult`), as
the profiler measured the thesis's service load (sim/profiler.py):

* Redis (:class:`RedisRound`): per request ``SET key:<j> <1 KiB value>`` then ``GET key:<j>``
  over one TCP connection (redis-py without a connection pool, as the profiler's rounds),
  ``j`` cycling over the keys the image populated (``key:0`` .. ``key:N-1``), so the data set
  keeps its size; the service is ready once ``DBSIZE`` is above 0 (its data is loaded);
* the time server (:class:`HttpRound`): per request one ``GET /`` on a new connection (the
  server speaks HTTP/1.0); ready once a GET answers 200.

A round that starts late (the previous one took longer than the interval) starts at once; a
failed round (connection refused, timeout, error reply) is reported with ``ok=False`` and the
connection is opened again for the next one. Rounds before the service first answered are
reported with ``ready=False``. Traffic goes only to the address and port the feed names (a lab
node's address).
"""

from __future__ import annotations

import http.client
import queue
import threading
import time
from typing import Protocol

import redis

from domain.errors import GreenSwarmError
from replay.values import RoundResult, ServiceTarget
from workloads.trace import Workload

VALUE_BYTES = 1024  # the redis image's REDIS_VALUE_BYTES
_VALUE = b"v" * VALUE_BYTES


class Round(Protocol):
    def ready(self, address: str, port: int) -> bool: ...
    def run(self, address: str, port: int, count: int) -> None: ...
    def close(self) -> None: ...


class RedisRound:
    def __init__(self, keys: int, timeout_s: float) -> None:
        self.keys = max(1, keys)
        self.timeout_s = timeout_s
        self._client: redis.Redis | None = None
        self._where: tuple[str, int] | None = None
        self._next = 0

    def _connect(self, address: str, port: int) -> redis.Redis:
        if self._client is None or self._where != (address, port):
            self.close()
            self._client = redis.Redis(
                address, port, socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s, single_connection_client=True,
            )
            self._where = (address, port)
        return self._client

    def ready(self, address: str, port: int) -> bool:
        size = self._connect(address, port).dbsize()
        return isinstance(size, int) and size > 0

    def run(self, address: str, port: int, count: int) -> None:
        client = self._connect(address, port)
        for _ in range(count):
            key = f"key:{self._next % self.keys}"
            self._next += 1
            client.set(key, _VALUE)
            client.get(key)

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.close()


class HttpRound:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def _get(self, address: str, port: int) -> None:
        connection = http.client.HTTPConnection(address, port, timeout=self.timeout_s)
        try:
            connection.request("GET", "/")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise GreenSwarmError(f"HTTP {response.status}")
        finally:
            connection.close()

    def ready(self, address: str, port: int) -> bool:
        self._get(address, port)
        return True

    def run(self, address: str, port: int, count: int) -> None:
        for _ in range(count):
            self._get(address, port)

    def close(self) -> None:
        return


def round_for(target: ServiceTarget, timeout_s: float) -> Round:
    if target.workload is Workload.REDIS:
        return RedisRound(target.data_keys, timeout_s)
    if target.workload is Workload.TIMESERVER:
        return HttpRound(timeout_s)
    raise GreenSwarmError(f"no client for the {target.workload.value} workload")


_ERRORS = (OSError, GreenSwarmError, http.client.HTTPException, redis.RedisError)


class ServiceClient:
    """Rounds against one service, on a thread of its own, until :meth:`stop`."""

    def __init__(self, target: ServiceTarget, interval_s: float,
                 results: queue.SimpleQueue[RoundResult], *, timeout_s: float = 5.0) -> None:
        self.target = target
        self.interval_s = interval_s
        self.results = results
        self.timeout_s = timeout_s
        self._where = (target.address, target.port)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"client-{target.request_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def retarget(self, address: str, port: int) -> None:
        """The service moved (killed and rescheduled): talk to its new node."""
        with self._lock:
            self._where = (address, port)

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        rounds = round_for(self.target, self.timeout_s)
        ready = False
        last_where: tuple[str, int] | None = None
        next_round = time.time()
        try:
            while not self._stop.is_set():
                wait_s = next_round - time.time()
                if wait_s > 0 and self._stop.wait(wait_s):
                    break
                started = time.time()
                next_round = max(next_round + self.interval_s, started)
                with self._lock:
                    address, port = self._where
                if (address, port) != last_where:  # first round, or the service moved
                    last_where = (address, port)
                    ready = False
                    rounds.close()
                if not ready:
                    try:
                        ready = rounds.ready(address, port)
                    except _ERRORS:
                        rounds.close()
                        ready = False
                    if not ready:
                        self._report(started, 0.0, ok=False, ready=False)
                        continue
                    started = time.time()
                try:
                    rounds.run(address, port, self.target.rate)
                except _ERRORS:
                    rounds.close()
                    self._report(started, (time.time() - started) * 1000.0, ok=False)
                    continue
                self._report(started, (time.time() - started) * 1000.0, ok=True)
        finally:
            rounds.close()

    def _report(self, started: float, ms: float, *, ok: bool, ready: bool = True) -> None:
        self.results.put(RoundResult(started, self.target.request_id, self.target.rate, ms, ok,
                                     ready))
