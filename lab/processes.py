"""Local processes for the benchmarks (and the tests): a free loopback port, a bounded wait, a
child stopped by its pid, and a private redis-server.

Everything started here is stopped by its pid; nothing is ever stopped by name.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """Whether ``url`` answers a GET with 200 (False when nothing answers); asked once, since
    its callers poll it."""
    from domain.errors import GreenSwarmError
    from web.client import HttpClient, HttpSettings

    probe = HttpClient(url, url, settings=HttpSettings(connect_timeout_s=timeout_s,
                                                       read_timeout_s=timeout_s, tries=1))
    try:
        return probe.answer("GET", "").status == 200
    except GreenSwarmError:
        return False
    finally:
        probe.close()


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str,
             interval_s: float = 0.05) -> None:
    """Poll ``predicate`` until it is true; TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


def wait_serving(process: subprocess.Popen[bytes], url: str, timeout_s: float, what: str) -> None:
    """Wait until the child ``process`` answers 200 on ``url``; TimeoutError naming ``what``
    when it does not in time, or when it exits first (without waiting out the time)."""
    wait_for(lambda: process.poll() is not None or http_ok(url), timeout_s, what)
    if process.poll() is not None:
        raise TimeoutError(f"{what} exited with code {process.returncode} before answering")


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
    """A redis-server on 127.0.0.1, with append-only persistence in its own directory."""

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
def redis_server(directory: Path | None = None) -> Iterator[RedisServer]:
    """A started RedisServer on a free port, stopped at the end; its files go to ``directory``
    (a temporary one, removed afterwards, when None)."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gs-redis-")))
        server = RedisServer(free_port(), directory)
        stack.callback(server.stop)  # also when it never answers
        server.start()
        yield server
