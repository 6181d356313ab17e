"""Real servers for tests: redis-server on a free loopback port, and a Docker engine.

Everything started here is stopped by its pid; nothing is ever stopped by name.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

DOCKER_SOCKET = "/var/run/docker.sock"
BUSYBOX_IMAGE = "greenswarm/busybox:latest"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: object, timeout_s: float, what: str, interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


def stop_child(process: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """SIGTERM a child we started, wait (bounded) and reap it, then SIGKILL if needed."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@dataclass
class RedisServer:
    """A redis-server with append-only persistence in its own directory."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run scripts/setup.sh")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
             "--protected-mode", "yes", "--daemonize", "no", "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(self.ping, 10.0, f"redis-server on port {self.port}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            stop_child(self.process)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="gs-redis-") as directory:
        server = RedisServer(free_port(), Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def docker_ping(socket_path: str = DOCKER_SOCKET) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(1.0)
            sock.connect(socket_path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b"200 OK" in sock.recv(64)
    except OSError:
        return False


@contextlib.contextmanager
def docker_engine() -> Iterator[str]:
    """The machine's Docker engine at /var/run/docker.sock; started (and later stopped, by
    pid) when it is not running. Yields the socket path."""
    if docker_ping():
        yield DOCKER_SOCKET
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise RuntimeError("dockerd is not installed: run scripts/setup.sh")
    log_dir = Path("/var/log/greenswarm")
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "dockerd-tests.log", "ab") as log:
        process = subprocess.Popen(
            [dockerd, "--pidfile", "/run/greenswarm-tests-dockerd.pid"],
            stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        wait_for(docker_ping, 60.0, "dockerd to answer")
        yield DOCKER_SOCKET
    finally:
        stop_child(process, timeout_s=30.0)


def ensure_busybox_image(socket_path: str = DOCKER_SOCKET) -> str:
    """greenswarm/busybox:latest on the engine at ``socket_path``, from the lab's own image
    builder (the same image the lab and the benchmarks use; rebuilt only when missing or
    when the machine's busybox changed). Returns its tag."""
    from benchmarks.lab.images import Builder
    from benchmarks.lab.settings import settings_from_env

    settings = settings_from_env()
    settings = replace(settings, engine=replace(settings.engine, main_socket=Path(socket_path)))
    settings.paths.log_dir.mkdir(parents=True, exist_ok=True)
    return Builder(settings, lambda line: None).busybox().tag
