"""greenswarm deployed on the lab as users deploy it: `docker-compose up -d` (Redis and the
manager, docker-compose.yml) and `docker stack deploy` (agent and monitor on every node,
docker-stack.yml + docker-stack.lab.yml), plus a REST client of the manager and helpers that
look at each node's own engine.

Everything is named for the test run (compose project, stack, service prefix, free ports), and
taken down by those names: nothing that the test did not create is touched.

On the lab with several Swarms (DESIGN 12) a stack belongs to one cluster (``cluster``): cluster
1's as above, on the main engine; a further cluster's through its own manager engine's socket
(``DOCKER_HOST``): compose runs Redis and the manager in that engine's namespace (host network,
listening on the cluster's manager address, the Swarm of that engine mounted as the manager's
Docker socket), and the stack's agents and monitors go to that cluster's nodes. ``peers`` gives
the manager a peers file (federation, ``GREENSWARM_PEERS_FILE``), mounted by a compose override.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests

from domain.labels import LABEL_TASK
from domain.lifecycle import FINAL
from lab.processes import free_port
from tests.e2e.conftest import REPO, Lab, lab_cli, node_engine
from tests.support import settle

BUSYBOX = "greenswarm/busybox:latest"
# PID 1 of a container ignores SIGTERM unless it traps it: these stop at once when removed.
IDLE = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
PEERS_IN_CONTAINER = "/etc/greenswarm/peers.json"
BURN = ["sh", "-c", "trap 'exit 0' TERM; yes > /dev/null & wait"]


def poll(check: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.5) -> None:
    """Wait (bounded) until ``check`` holds; transient HTTP errors count as 'not yet'."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (requests.RequestException, KeyError, ValueError) as exc:
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return ["/usr/bin/docker", "compose"]


@dataclass
class Stack:
    """One deployment of greenswarm on the lab, with its own names and ports."""

    lab: Lab
    name: str = "gse2e"
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    node_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    manager_port: int = field(default_factory=free_port)
    redis_port: int = field(default_factory=free_port)
    monitor_window_s: float = 3.0
    extra_env: dict[str, str] = field(default_factory=dict)  # the manager's policy, ...
    started_s: float = 0.0  # how long compose up + stack deploy + all hosts reported took
    cluster: int = 1  # the lab's Swarm (state file ``swarms``): 1 is the main engine's
    peers: list[dict[str, Any]] = field(default_factory=list)  # the peers file's entries
    _files: Path | None = None  # the compose override and peers file, written by up()

    @property
    def swarm(self) -> dict[str, Any]:
        """This stack's cluster as the state file's ``swarms`` describes it."""
        found: dict[str, Any] = self.lab.state["swarms"][self.cluster - 1]
        assert found["cluster"] == self.cluster, found
        return found

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """The worker nodes of this stack's cluster (full lab node records)."""
        return [self.lab.node(n["name"]) for n in self.swarm["nodes"]]

    @property
    def engine_url(self) -> str:
        """The Swarm manager engine this stack is deployed through."""
        if self.cluster == 1:
            return self.lab.settings.engine.main_url
        return f"unix://{self.swarm['manager_socket']}"

    @property
    def address(self) -> str:
        """Where the manager listens besides its namespace's loopback, and where its nodes (and
        its peers) reach it: cluster 1's bridge address, else its manager engine's address."""
        return str(self.lab.state["gateway"] if self.cluster == 1
                   else self.swarm["manager_address"])

    @property
    def project(self) -> str:
        return f"{self.name}"

    @property
    def stack_name(self) -> str:
        return f"{self.name}-node"

    @property
    def prefix(self) -> str:
        return f"{self.name}-"  # Swarm services of requests: gse2e-<request id>

    @property
    def url(self) -> str:
        """The manager as this machine reaches it (another cluster's: in its namespace)."""
        host = "127.0.0.1" if self.cluster == 1 else self.address
        return f"http://{host}:{self.manager_port}"

    @property
    def peer_url(self) -> str:
        """The manager as the other clusters' managers reach it."""
        return f"http://{self.address}:{self.manager_port}"

    @property
    def docker_cli(self) -> str:
        return self.lab.settings.engine.docker_cli

    def env(self) -> dict[str, str]:
        engine = {} if self.cluster == 1 else {"DOCKER_HOST": self.engine_url}
        peers = {"GREENSWARM_PEERS_FILE": PEERS_IN_CONTAINER} if self.peers else {}
        return {
            **os.environ,
            **engine,
            **peers,
            "GREENSWARM_TOKEN": self.token,
            "GREENSWARM_NODE_SECRET": self.node_secret,
            "GREENSWARM_LISTEN_HOST": f"127.0.0.1,{self.address}",
            "GREENSWARM_LISTEN_PORT": str(self.manager_port),
            "GREENSWARM_REDIS_PORT": str(self.redis_port),
            "GREENSWARM_NODE_LABEL": "greenswarm.lab.node",
            "GREENSWARM_SERVICE_PREFIX": self.prefix,
            "GREENSWARM_SYNC_INTERVAL_S": "1",
            "GREENSWARM_RETRY_INTERVAL_S": "2",
            "GREENSWARM_HISTORY_INTERVAL_S": "1",
            "GREENSWARM_MANAGER_URL": self.peer_url,
            "GREENSWARM_AGENT_RECONCILE_INTERVAL_S": "2",
            "GREENSWARM_MONITOR_HOST_INTERVAL_S": "1",
            "GREENSWARM_MONITOR_HOST_WINDOW_S": str(self.monitor_window_s),
            "GREENSWARM_MONITOR_TASK_INTERVAL_S": "1",
            "GREENSWARM_MONITOR_TASK_WINDOW_S": str(self.monitor_window_s),
            **self.extra_env,
        }

    def run(self, argv: list[str], timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(argv, cwd=REPO, env=self.env(), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
        return done

    def compose_files(self) -> list[str]:
        files = ["-f", str(REPO / "docker-compose.yml")]
        override = self._override()
        return files + (["-f", str(override)] if override else [])

    def _override(self) -> Path | None:
        """A compose override (written once, in a directory of its own) when this stack needs
        one: another cluster's Swarm as the manager's Docker socket, and the peers file. The
        directory is on this machine's file system, which every lab engine shares."""
        if self.cluster == 1 and not self.peers:
            return None
        if self._files is None:
            self._files = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        volumes = []
        if self.cluster != 1:
            volumes.append(f"{self.swarm['manager_socket']}:/var/run/docker.sock")
        if self.peers:
            peers_file = self._files / "peers.json"
            peers_file.write_text(json.dumps(self.peers, indent=2))
            peers_file.chmod(0o600)  # it holds the peers' tokens
            volumes.append(f"{peers_file}:{PEERS_IN_CONTAINER}:ro")
        override = self._files / "docker-compose.override.yml"
        override.write_text(json.dumps({"services": {
            "manager": {"volumes": volumes}}}))
        return override

    def compose(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run([*compose_command(), "-p", self.project, *self.compose_files(), *args])

    # -- life cycle ---------------------------------------------------------------------------

    def up(self) -> None:
        """The project image as the working tree is (rebuilt and loaded into the nodes when the
        source changed), what an interrupted run left under these names removed, then compose,
        then the stack; timed from compose on."""
        done = lab_cli("images", timeout_s=900)
        assert done.returncode == 0, done.stdout + done.stderr
        # What a run stopped in its middle (a crash, a machine restart) left under these names
        # goes first: its Redis volume would hand this manager the old run's records (a test
        # then finds its request names taken).
        self.down(strict=False)
        started = time.monotonic()
        self.compose("up", "-d")
        self.run([self.docker_cli, "stack", "deploy", "--resolve-image", "never",
                  "-c", "docker-stack.yml", "-c", "docker-stack.lab.yml", self.stack_name])
        poll(self.all_reported, 180, "the manager to see every lab node, reported by its monitor")
        self.started_s = time.monotonic() - started

    def all_reported(self) -> bool:
        hosts = self.hosts()
        wanted = {node["swarm_node_id"] for node in self.swarm["nodes"]}
        return {h["id"] for h in hosts} == wanted and all(
            h["cpu_util"] > 0 or h["memory_util"] > 0 for h in hosts)

    def down(self, strict: bool = True) -> None:
        """Stack, our request services, the compose project and its volume, by their names.
        ``strict``: fail on any error (a finalizer passes False and does its best)."""
        errors = []
        client = docker.DockerClient(base_url=self.engine_url, timeout=60)
        try:
            if client.info()["Swarm"].get("ControlAvailable"):
                done = subprocess.run([self.docker_cli, "stack", "rm", self.stack_name],
                                      cwd=REPO, env=self.env(), capture_output=True, text=True,
                                      timeout=180, check=False)
                if done.returncode != 0 and "Nothing found" not in done.stdout + done.stderr:
                    errors.append(f"stack rm: {done.stderr.strip()}")
                for service in client.services.list():
                    if service.name.startswith(self.prefix):
                        with contextlib.suppress(docker.errors.APIError):
                            service.remove()
        finally:
            client.close()
        done = subprocess.run(
            [*compose_command(), "-p", self.project, *self.compose_files(),
             "down", "-v", "--remove-orphans", "--timeout", "5"],
            cwd=REPO, env=self.env(), capture_output=True, text=True, timeout=180, check=False)
        if done.returncode != 0:
            errors.append(f"compose down: {done.stderr.strip()}")
        if self._files is not None:
            shutil.rmtree(self._files, ignore_errors=True)
            self._files = None
        assert not (strict and errors), errors

    # -- REST ---------------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def get(self, path: str) -> Any:
        response = requests.get(self.url + path, timeout=30, headers=self.headers())
        response.raise_for_status()
        return response.json()

    def healthz(self) -> dict[str, Any]:
        """With the token: its details (the nodes down by name, the failing records)."""
        response = requests.get(self.url + "/healthz", timeout=10, headers=self.headers())
        body: dict[str, Any] = response.json()
        return body

    def hosts(self) -> list[dict[str, Any]]:
        hosts: list[dict[str, Any]] = self.get("/hosts")
        return hosts

    def host(self, host_id: str) -> dict[str, Any]:
        return next(h for h in self.hosts() if h["id"] == host_id)

    def submit(self, name: str, cls: int, kind: str, cpu: int, memory: str,
               command: list[str] | None = None, image: str = BUSYBOX) -> dict[str, Any]:
        body = {"image": image, "name": name, "class": cls, "type": kind, "cpu_shares": cpu,
                "memory": memory, "command": command or IDLE}
        response = requests.post(self.url + "/requests", json=body, headers=self.headers(),
                                 timeout=60)
        assert response.status_code == 201, response.text
        answer: dict[str, Any] = response.json()
        assert answer["request"]["status"] == "running", answer
        return answer

    def request(self, name: str) -> dict[str, Any]:
        record: dict[str, Any] = self.get(f"/requests/{name}")
        return record

    def stop(self, name: str) -> None:
        response = requests.delete(f"{self.url}/requests/{name}", headers=self.headers(),
                                   timeout=60)
        assert response.status_code == 200, response.text

    def stop_all(self) -> None:
        """Stop every request that still runs or waits (the test's own manager)."""
        for record in self.get("/requests"):
            if record["status"] not in FINAL:
                requests.delete(f"{self.url}/requests/{record['id']}", headers=self.headers(),
                                timeout=60)

    def wait_quiet(self, timeout_s: float = 120.0) -> None:
        """Every host empty in the registry, in LEE, and settled: nothing moved for two windows
        (after a start or a busy task, values move for a while; tests/support/settle.py says
        what a move is: not a monitor's re-send of an idle host's values)."""
        settle_s = 2 * self.monitor_window_s + 1.0
        state: dict[str, Any] = {"reference": None, "since": time.monotonic()}

        def settled() -> bool:
            seen = settle.view(self.hosts())
            now = time.monotonic()
            if settle.moved(state["reference"], seen):
                state["reference"], state["since"] = seen, now
            idle = all(h.task_count == 0 and h.region == "LEE" for h in seen.values())
            return idle and now - state["since"] >= settle_s

        try:
            poll(settled, timeout_s, "every host to be empty, in LEE and settled")
        except AssertionError as exc:
            quiet_s = time.monotonic() - state["since"]
            raise AssertionError(f"{exc}; quiet for {quiet_s:.1f} s of {settle_s:.1f} since "
                                 f"{state['reference']}") from exc

    def wait_region(self, host_id: str, region: str, timeout_s: float = 60.0) -> None:
        poll(lambda: self.host(host_id)["region"] == region, timeout_s,
             f"host {host_id} to be {region}")

    def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        """What `greenswarm decide` says for the registry as it is now and this request."""
        scenario = {
            "hosts": [
                {
                    "id": h["id"],
                    "cpu_capacity": h["cpu_capacity"],
                    "memory_capacity": h["memory_capacity"],
                    "cpu_util": h["cpu_util"],
                    "memory_util": h["memory_util"],
                    "tasks": [
                        {
                            "id": t["id"], "class": t["class"], "type": t["type"],
                            "cpu_shares": t["cpu_shares"], "memory": t["memory"],
                            "original_cpu_shares": t["original_cpu_shares"],
                            "original_memory": t["original_memory"],
                            "cut_received": t["cut_received_exact"],
                            "cpu_util": t["cpu_util"], "memory_util": t["memory_util"],
                        }
                        for t in h["tasks"]
                    ],
                }
                for h in self.hosts()
            ],
            "request": body,
        }
        done = subprocess.run([sys.executable, "-m", "cli.main", "decide", "--scenario", "-"],
                              cwd=REPO, input=json.dumps(scenario), capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        decision: dict[str, Any] = json.loads(done.stdout)
        return decision


def stack_ps(stack: Stack) -> list[dict[str, str]]:
    """The stack's tasks as `docker stack ps` shows them (desired state running)."""
    done = stack.run([stack.docker_cli, "stack", "ps", stack.stack_name, "--no-trunc",
                      "--filter", "desired-state=running", "--format", "{{json .}}"])
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@contextlib.contextmanager
def node_client(node: dict[str, Any]) -> Iterator[Any]:
    client = node_engine(node)
    try:
        yield client
    finally:
        client.close()


def task_containers(node: dict[str, Any], task: str) -> list[dict[str, Any]]:
    """`docker inspect` of the running containers of one request, on one node's own engine."""
    with node_client(node) as client:
        found = client.containers.list(filters={"label": f"{LABEL_TASK}={task}",
                                                "status": "running"})
        return [c.attrs for c in found]


def resources(attrs: dict[str, Any]) -> tuple[int, int]:
    config = attrs["HostConfig"]
    return int(config["CpuShares"]), int(config["Memory"])


@contextlib.contextmanager
def deployed(lab: Lab, **settings: Any) -> Iterator[Stack]:
    """A stack on the lab (``Stack(lab, **settings)``), up for the block, down after it;
    skips when the lab was moved away from the sockets and cgroups docker-stack.lab.yml names."""
    stack = Stack(lab, **settings)
    with up_for_the_block(stack) as ready:
        yield ready


@contextlib.contextmanager
def up_for_the_block(stack: Stack) -> Iterator[Stack]:
    """``stack`` (not up yet) up for the block, down after it, even when the block fails."""
    import pytest

    for node in stack.nodes:
        if node["socket"] != f"/run/greenswarm/lab/{node['name']}.sock" or \
                node["cgroup_parent"] != f"/greenswarm-lab/{node['name']}":
            pytest.skip("docker-stack.lab.yml names the default lab's sockets and cgroups; "
                        "this lab was moved by GREENSWARM_LAB_* settings")
    try:
        stack.up()
        yield stack
    finally:
        stack.down(strict=False)


@contextlib.contextmanager
def idle(stack: Stack) -> Iterator[Stack]:
    """The stack, idle for a test; the test's requests are stopped afterwards, even when it
    fails."""
    stack.wait_quiet()
    try:
        yield stack
    finally:
        stack.stop_all()


def peer_entry(name: str, stack: Stack, latency_ms: float, bandwidth_mbit: float = 1000.0
               ) -> dict[str, Any]:
    """``stack``'s manager as an entry of its peers' peers files (DESIGN 12)."""
    return {"name": name, "url": stack.peer_url, "token": stack.token,
            "latency_ms": latency_ms, "bandwidth_mbit": bandwidth_mbit}


@contextlib.contextmanager
def federated(lab: Lab, latency_ms: float, env_a: dict[str, str], env_b: dict[str, str],
              names: tuple[str, str] = ("gsfa", "gsfb")) -> Iterator[tuple[Stack, Stack]]:
    """A greenswarm on each of the lab's first two Swarms, named ``a`` (cluster 1) and ``b``
    (cluster 2), each the other's peer; up for the block (b first: a's peer), down after it.
    ``env_a``, ``env_b``: each manager's further settings (offloading, refresh, ...)."""
    a = Stack(lab, name=names[0], cluster=1,
              extra_env={"GREENSWARM_FEDERATION_NAME": "a", **env_a})
    b = Stack(lab, name=names[1], cluster=2,
              extra_env={"GREENSWARM_FEDERATION_NAME": "b", **env_b})
    a.peers = [peer_entry("b", b, latency_ms)]
    b.peers = [peer_entry("a", a, latency_ms)]
    with up_for_the_block(b), up_for_the_block(a):
        yield a, b
