"""The monitor's own CPU use with N idle task containers (design section 8: < 1% of one core).

Starts N busybox ``sleep`` containers labelled ``greenswarm.task``, a stand-in registry on the
loopback (answers messages 11-13 like the real one), and the monitor as its own process
(``python -m monitor``) with the default intervals unless told otherwise; after a warm-up, reads
utime + stime of the monitor from ``/proc/<pid>/stat`` over ``--duration-s`` and prints the
monitor's CPU use in percent of one core. Everything it started is stopped (by pid) and removed
(by container id) at the end, also on failure.

    python benchmarks/monitor_overhead.py --containers 20 --duration-s 60
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
IMAGE = "greenswarm/busybox:latest"
TASK_LABEL = "greenswarm.task"
TOKEN = "monitor-overhead-bench"


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_path: dict[str, int] = {}

    def add(self, method: str, path: str) -> None:
        key = f"{method} {path if 'tasks' in path or path.endswith('hosts') else 'host util'}"
        with self.lock:
            self.by_path[key] = self.by_path.get(key, 0) + 1


@contextlib.contextmanager
def stand_in_registry() -> Iterator[tuple[str, _Counts]]:
    counts = _Counts()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            counts.add(self.command, self.path)
            if self.path == "/registry/tasks/utilization":
                status, answer = 200, {"updated": [t["id"] for t in body["tasks"]], "unknown": []}
            else:
                status, answer = (201 if self.command == "POST" else 200), body
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def ensure_image(client: Any) -> None:
    """Import a static-busybox image when the engine does not have it (no registry needed)."""
    import docker

    try:
        client.images.get(IMAGE)
        return
    except docker.errors.ImageNotFound:
        pass
    binary = shutil.which("busybox")
    if binary is None:
        raise SystemExit(f"{IMAGE} is missing and busybox is not installed")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in ("bin", "tmp", "proc", "sys", "dev", "etc"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        tar.add(binary, arcname="bin/busybox")
        for applet in ("sh", "sleep"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    repository, tag = IMAGE.split(":")
    client.api.import_image_from_data(buffer.getvalue(), repository=repository, tag=tag,
                                      changes=['CMD ["sh"]', "ENV PATH=/bin"])


@contextlib.contextmanager
def idle_containers(client: Any, count: int) -> Iterator[list[str]]:
    import docker

    started: list[str] = []
    run = uuid.uuid4().hex[:8]
    try:
        for index in range(count):
            container = client.containers.run(
                IMAGE, ["sleep", "86400"], detach=True, cpu_shares=256, mem_limit="64m",
                labels={TASK_LABEL: f"bench-{run}-{index}"},
            )
            started.append(container.id)
        yield started
    finally:
        for container_id in started:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(container_id, force=True)


@contextlib.contextmanager
def monitor_process(registry_url: str, docker_socket: str,
                    extra: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    environment = {**os.environ, "GREENSWARM_TOKEN": TOKEN,
                   "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    process = subprocess.Popen(
        [sys.executable, "-m", "monitor", "--registry-url", registry_url,
         "--docker-socket", docker_socket, "--log-level", "WARNING", *extra],
        cwd=REPO, env=environment,
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--containers", type=int, default=20)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--warmup-s", type=float, default=5.0,
                        help="seconds after start not counted (imports, first inspections)")
    parser.add_argument("--docker-socket", default="/var/run/docker.sock")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("monitor_args", nargs="*",
                        help="extra monitor options after --, e.g. -- --host-interval-s 1")
    args = parser.parse_args(argv)

    import docker

    client = docker.DockerClient(base_url=f"unix://{args.docker_socket}", version="1.41")
    try:
        ensure_image(client)
        with (
            idle_containers(client, args.containers) as containers,
            stand_in_registry() as (url, counts),
            monitor_process(url, args.docker_socket, args.monitor_args) as process,
        ):
            time.sleep(args.warmup_s)
            if process.poll() is not None:
                raise SystemExit(f"the monitor exited early with {process.returncode}")
            before_s, start_s = cpu_seconds(process.pid), time.monotonic()
            time.sleep(args.duration_s)
            after_s, end_s = cpu_seconds(process.pid), time.monotonic()
            if process.poll() is not None:
                raise SystemExit(f"the monitor exited with {process.returncode}")
            percent = 100.0 * (after_s - before_s) / (end_s - start_s)
            result = {
                "monitor_cpu_percent_of_one_core": round(percent, 3),
                "containers": len(containers),
                "measured_s": round(end_s - start_s, 1),
                "monitor_cpu_s": round(after_s - before_s, 3),
                "monitor_args": args.monitor_args,
                "registry_requests": dict(sorted(counts.by_path.items())),
            }
    finally:
        client.close()
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"monitor CPU: {result['monitor_cpu_percent_of_one_core']:.2f} % of one core "
              f"({result['containers']} idle containers, {result['measured_s']} s measured, "
              f"{result['monitor_cpu_s']} CPU-s; registry requests {result['registry_requests']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
