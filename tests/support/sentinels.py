"""Redis replicated for tests (DESIGN 13): a real primary and replica (append-only persistence on
each) and three real ``redis-sentinel`` processes, all on free loopback ports, stopped by pid.

The Sentinels notice a dead primary after ``DOWN_AFTER_MS`` and promote the replica; the
quorum is two of three, as an operator would configure them.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from lab.processes import free_port, stop_child, wait_for

MASTER = "gs-test-primary"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is not installed: run scripts/setup.sh")
    return path


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class ReplicatedRedis:
    directory: Path
    ports: list[int] = field(default_factory=list)  # the data servers, primary first
    sentinel_ports: list[int] = field(default_factory=list)
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    master: str = MASTER

    @property
    def sentinels(self) -> str:
        """GREENSWARM_REDIS_SENTINELS for these Sentinels."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def start_server(self, port: int, replica_of: int | None = None) -> None:
        data = self.directory / f"redis-{port}"
        data.mkdir(exist_ok=True)
        args = [_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                "--dir", str(data), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--daemonize", "no", "--logfile", "redis.log"]
        if replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.processes[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL)
        self._wait_started(port, "redis-server")

    def start_sentinel(self, port: int, primary: int) -> None:
        data = self.directory / f"sentinel-{port}"
        data.mkdir(exist_ok=True)
        conf = data / "sentinel.conf"  # Sentinel rewrites its own file: one each
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndaemonize no\ndir {data}\nlogfile sentinel.log\n"
            f"sentinel monitor {self.master} 127.0.0.1 {primary} 2\n"
            f"sentinel down-after-milliseconds {self.master} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {self.master} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {self.master} 1\n"
        )
        self.processes[port] = subprocess.Popen([_binary("redis-sentinel"), str(conf)],
                                                stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL)
        self._wait_started(port, "redis-sentinel")

    def _wait_started(self, port: int, what: str) -> None:
        """Until ``port`` answers; an error when our process there ended instead (another
        process took the port first, and would have answered in its place)."""
        process = self.processes[port]
        wait_for(lambda: _answers(port) or process.poll() is not None, 10.0,
                 f"{what} on port {port}")
        if process.poll() is not None:
            raise RuntimeError(f"{what} on port {port} exited ({process.returncode}): its log "
                               f"is in {self.directory}")

    def primary_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers names it."""
        for port in self.sentinel_ports:
            client = redis.Redis(port=port, socket_timeout=0.5, decode_responses=True)
            try:
                address = client.sentinel_get_master_addr_by_name(self.master)
            except redis.RedisError:
                continue
            finally:
                client.close()
            if address:
                return int(address[1])
        return None

    def kill(self, port: int) -> None:
        """SIGKILL one of our processes: a machine that dies says nothing first."""
        process = self.processes.pop(port)
        process.kill()
        process.wait(timeout=10)

    def replicas_in_sync(self, primary: int) -> bool:
        client = redis.Redis(port=primary, socket_timeout=0.5, decode_responses=True)
        try:
            info = client.info("replication")
        finally:
            client.close()
        replicas = [info[key] for key in info if key.startswith("slave") and
                    isinstance(info[key], dict)]
        return bool(replicas) and all(r.get("state") == "online" for r in replicas)

    def stop(self) -> None:
        for process in self.processes.values():
            stop_child(process, timeout_s=10.0)
        self.processes.clear()


@contextlib.contextmanager
def replicated_redis(replicas: int = 1, sentinels: int = 3) -> Iterator[ReplicatedRedis]:
    """A primary, ``replicas`` replicas and ``sentinels`` Sentinels, ready: the replicas are in
    sync and every Sentinel knows them all."""
    with tempfile.TemporaryDirectory(prefix="gs-sentinel-") as tmp:
        cluster = ReplicatedRedis(Path(tmp))
        try:
            cluster.ports = _distinct_free_ports(1 + replicas, ())
            cluster.start_server(cluster.ports[0])
            for port in cluster.ports[1:]:
                cluster.start_server(port, replica_of=cluster.ports[0])
            wait_for(lambda: cluster.replicas_in_sync(cluster.ports[0]), 20.0,
                     "the replicas to sync")
            cluster.sentinel_ports = _distinct_free_ports(sentinels, cluster.ports)
            for port in cluster.sentinel_ports:
                cluster.start_sentinel(port, cluster.ports[0])
            try:
                wait_for(lambda: _sentinels_ready(cluster, replicas, sentinels), 30.0,
                         "the Sentinels to know the replicas and each other")
            except TimeoutError as exc:  # say what each one knew
                raise TimeoutError(f"{exc}: {_sentinels_view(cluster)}") from None
            yield cluster
        finally:
            cluster.stop()


def _distinct_free_ports(count: int, taken: Iterable[int]) -> list[int]:
    """``count`` ports free now, none twice and none of ``taken`` (two free_port calls may
    give the same port once the first socket is closed)."""
    ports: list[int] = []
    seen = set(taken)
    for _ in range(100 * count):
        port = free_port()
        if port not in seen:
            seen.add(port)
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} distinct free ports")


def _sentinel_states(cluster: ReplicatedRedis) -> dict[int, dict[str, str] | str]:
    """What each Sentinel knows of the primary (its ``SENTINEL MASTER`` answer), or the error
    it answered with, by port."""
    states: dict[int, dict[str, str] | str] = {}
    for port in cluster.sentinel_ports:
        client = redis.Redis(port=port, socket_timeout=0.5, decode_responses=True)
        try:
            states[port] = dict(client.sentinel_master(cluster.master))
        except redis.RedisError as exc:
            states[port] = str(exc)
        finally:
            client.close()
    return states


def _sentinels_view(cluster: ReplicatedRedis) -> str:
    """What each Sentinel knows: its replicas and the other Sentinels."""
    return "; ".join(
        f"{port}: {state}" if isinstance(state, str) else
        f"{port}: {state.get('num-slaves')} replica(s), "
        f"{state.get('num-other-sentinels')} other Sentinel(s)"
        for port, state in _sentinel_states(cluster).items())


def _sentinels_ready(cluster: ReplicatedRedis, replicas: int, sentinels: int) -> bool:
    return all(not isinstance(state, str) and int(state["num-slaves"]) >= replicas
               and int(state["num-other-sentinels"]) >= sentinels - 1
               for state in _sentinel_states(cluster).values())
