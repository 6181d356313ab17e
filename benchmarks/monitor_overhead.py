"""The monitor's own CPU use with N idle task containers (design section 8: < 1% of one core).

Starts N busybox ``sleep`` containers labelled ``greenswarm.task``, the real registry
(``greenswarm registry`` on a redis-server of its own, on the loopback), and the monitor as its
own process (``python -m monitor``) with the default intervals unless told otherwise; after a
warm-up, reads utime + stime of the monitor from ``/proc/<pid>/stat`` over ``--duration-s``
and prints the monitor's CPU use in percent of one core. Everything it started is stopped (by
pid) and removed (by container id) at the end, also on failure.

    python benchmarks/monitor_overhead.py --containers 20 --duration-s 60
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from domain.labels import DOCKER_API_VERSION, LABEL_TASK
from lab.images import busybox_on
from lab.processes import free_port, redis_server, stop_child, wait_serving

REPO = Path(__file__).resolve().parents[1]
TOKEN = "monitor-overhead-bench"
NODE_SECRET = "monitor-overhead-bench-nodes"


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _child_environment() -> dict[str, str]:
    """The registry's and the monitor's environment: the registry's token, the nodes' secret
    (the monitor reports with its node's credential, DESIGN 9), and this checkout first."""
    return {**os.environ, "GREENSWARM_TOKEN": TOKEN, "GREENSWARM_NODE_SECRET": NODE_SECRET,
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@contextlib.contextmanager
def registry(work: Path) -> Iterator[str]:
    """The real Host and Task Registry (``greenswarm registry``) on a redis-server of its own,
    both on the loopback and stopped by pid; yields the registry's URL."""
    with redis_server(work) as redis:
        registry_port = free_port()
        log_path = work / "registry.log"
        with open(log_path, "ab") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "registry", "--listen",
                 f"127.0.0.1:{registry_port}", "--redis-url", redis.url,
                 "--log-level", "WARNING"], cwd=REPO, env=_child_environment(), stdout=log,
                stderr=log)
        url = f"http://127.0.0.1:{registry_port}"
        try:
            try:
                wait_serving(server, f"{url}/healthz", 30.0, "the registry")
            except TimeoutError:
                # the log goes with the temporary directory: show its end now
                tail = log_path.read_text(errors="replace").splitlines()[-20:]
                raise SystemExit("the registry did not start; its log ends with:\n"
                                 + "\n".join(tail)) from None
            yield url
        finally:
            stop_child(server)


def registered_hosts(url: str) -> list[dict[str, Any]]:
    from client.manager import ManagerClient

    hosts: list[dict[str, Any]] = ManagerClient(url, TOKEN, timeout_s=5.0).get("/registry/hosts")
    return hosts


@contextlib.contextmanager
def idle_containers(client: Any, image: str, count: int) -> Iterator[list[str]]:
    import docker

    started: list[str] = []
    run = uuid.uuid4().hex[:8]
    try:
        for index in range(count):
            container = client.containers.run(
                image, ["sleep", "86400"], detach=True, cpu_shares=256, mem_limit="64m",
                labels={LABEL_TASK: f"bench-{run}-{index}"},
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
    process = subprocess.Popen(
        [sys.executable, "-m", "monitor", "--registry-url", registry_url,
         "--docker-socket", docker_socket, "--log-level", "WARNING", *extra],
        cwd=REPO, env=_child_environment(),
    )
    try:
        yield process
    finally:
        stop_child(process)


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

    client = docker.DockerClient(
        base_url=f"unix://{args.docker_socket}", version=DOCKER_API_VERSION
    )
    try:
        image = busybox_on(args.docker_socket)
        with (
            tempfile.TemporaryDirectory(prefix="monitor-overhead-") as work,
            idle_containers(client, image, args.containers) as containers,
            registry(Path(work)) as url,
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
                "registered_hosts": [
                    {k: h.get(k) for k in ("id", "cpu_util", "memory_util")}
                    for h in registered_hosts(url)],
            }
    finally:
        client.close()
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"monitor CPU: {result['monitor_cpu_percent_of_one_core']:.2f} % of one core "
              f"({result['containers']} idle containers, {result['measured_s']} s measured, "
              f"{result['monitor_cpu_s']} CPU-s; as registered {result['registered_hosts']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
