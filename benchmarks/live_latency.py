"""Time from ``POST /requests`` to a running container, against a live manager (DESIGN 8).

Run against any manager whose node engines this machine can reach::

    python -m benchmarks.live_latency --url http://127.0.0.1:8080 --requests 20

(GREENSWARM_TOKEN in the environment). It submits small class-4 busybox services one after
another, reads each container's ``State.StartedAt`` from the engine that runs it (the Docker
socket given, or every lab node's socket), prints p50 / p90 / max, and stops what it started.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from datetime import datetime
from pathlib import Path

import docker

from client.manager import ManagerClient
from domain.errors import GreenSwarmError
from domain.labels import LABEL_TASK
from measure.stats import Stats


def started_at(clients: list[docker.DockerClient], task_id: str) -> float | None:
    for client in clients:
        for container in client.containers.list(filters={"label": f"{LABEL_TASK}={task_id}"}):
            stamp = container.attrs["State"]["StartedAt"]
            # Docker writes nanoseconds; datetime takes microseconds.
            head, _, rest = stamp.partition(".")
            fraction = rest.rstrip("Z")[:6]
            return datetime.fromisoformat(f"{head}.{fraction}+00:00").timestamp()
    return None


def engines(socket: str, lab_dir: Path) -> list[docker.DockerClient]:
    sockets = [socket, *sorted(str(p) for p in lab_dir.glob("*.sock"))]
    return [docker.DockerClient(base_url=f"unix://{s}") for s in sockets if Path(s).exists()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=os.environ.get("GREENSWARM_URL",
                                                        "http://127.0.0.1:8080"))
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--image", default="greenswarm/busybox:latest")
    parser.add_argument("--docker-socket", default="/var/run/docker.sock")
    parser.add_argument("--lab-dir", default="/run/greenswarm/lab")
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    api = ManagerClient(args.url)  # the token as every process reads it
    clients = engines(args.docker_socket, Path(args.lab_dir))
    run = uuid.uuid4().hex[:6]
    latencies: list[float] = []
    names: list[str] = []
    try:
        for number in range(args.requests):
            name = f"lat-{run}-{number}"
            names.append(name)
            sent = time.time()
            answer = api.call("POST", "/requests", {
                "image": args.image, "name": name, "class": 4, "type": "service",
                "cpu_shares": 16, "memory": "8m", "command": ["sleep", "600"]})
            status = answer["request"]["status"]
            if status != "running":
                print(f"{name}: {status}; skipped")
                continue
            deadline = time.monotonic() + args.timeout_s
            while (stamp := started_at(clients, name)) is None:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{name} did not start within {args.timeout_s} s")
                time.sleep(0.02)
            latencies.append(stamp - sent)
    finally:
        for name in names:
            try:
                api.delete(f"/requests/{name}")
            except GreenSwarmError as exc:  # keep stopping the others
                print(f"{name}: not stopped: {exc}")
    stats = Stats.of(latencies)
    if not stats.count:
        raise SystemExit("no request was placed and started: nothing to measure")
    print(f"request -> running container, {stats.count} requests: "
          f"p50 {stats.p50:.2f} s, p90 {stats.p90:.2f} s, max {stats.max:.2f} s, "
          f"mean {stats.mean:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
