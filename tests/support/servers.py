"""Real servers for tests: redis-server on a free loopback port (lab.processes, shared
with the benchmarks), and a Docker engine.

Everything started here is stopped by its pid; nothing is ever stopped by name.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from lab.processes import stop_child, wait_for

DOCKER_SOCKET = "/var/run/docker.sock"


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
