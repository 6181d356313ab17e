"""A live greenswarm on the machine's Docker engine: a single-node swarm, Redis, the manager
and an agent as real subprocesses (stopped by pid), and helpers to look at containers."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests

from domain.credentials import manager_word, node_credential
from domain.labels import CAPACITY_CPU_LABEL, CAPACITY_MEMORY_LABEL, LABEL_TASK
from lab.processes import free_port, stop_child, wait_for, wait_serving

TOKEN = "test-token"
NODE_SECRET = "test-node-secret"  # the agent's (DESIGN 9: nodes never hold the token)
CAPACITY_CPU = 2048
CAPACITY_MEMORY = 4 * 2**30


# Marks the node of a swarm these tests created, so that a run killed before its clean-up
# (machine restart, SIGKILL) can be recognised and undone by the next one; never set on a
# swarm somebody else created.
TEST_SWARM_LABEL = "greenswarm.tests.single-node-swarm"


def _is_test_swarm(client: Any) -> bool:
    info = client.info()["Swarm"]
    if info["LocalNodeState"] != "active" or not info.get("ControlAvailable"):
        return False
    labels = client.nodes.get(info["NodeID"]).attrs["Spec"].get("Labels") or {}
    return labels.get(TEST_SWARM_LABEL) == "1"


def leave_leftover_test_swarm(socket_path: str) -> None:
    """Leave a single-node swarm an interrupted test run left on the engine.

    Only a swarm carrying TEST_SWARM_LABEL is touched."""
    client = docker.DockerClient(base_url=f"unix://{socket_path}")
    try:
        if _is_test_swarm(client):
            client.swarm.leave(force=True)
    finally:
        client.close()


@contextlib.contextmanager
def single_node_swarm(socket_path: str) -> Iterator[str]:
    """The engine's Swarm node id; the swarm is created on loopback (and left afterwards) only
    when the engine was in none, or in one an interrupted run of these tests left behind. The
    node's capacity labels are set, then restored."""
    client = docker.DockerClient(base_url=f"unix://{socket_path}")
    created = _is_test_swarm(client)
    if client.info()["Swarm"]["LocalNodeState"] != "active":
        client.swarm.init(advertise_addr="127.0.0.1", listen_addr="127.0.0.1:2377")
        created = True
    node_id = client.info()["Swarm"]["NodeID"]
    node = client.nodes.get(node_id)
    old_spec = dict(node.attrs["Spec"])
    labels = dict(old_spec.get("Labels") or {})
    labels.update(
        {
            CAPACITY_CPU_LABEL: str(CAPACITY_CPU),
            CAPACITY_MEMORY_LABEL: str(CAPACITY_MEMORY),
        }
    )
    if created:
        labels[TEST_SWARM_LABEL] = "1"
    node.update({**old_spec, "Labels": labels})
    try:
        yield node_id
    finally:
        if created:
            with contextlib.suppress(docker.errors.APIError):
                client.swarm.leave(force=True)
        else:
            node.reload()
            node.update({**node.attrs["Spec"], "Labels": old_spec.get("Labels") or {}})
        client.close()


@dataclass
class Live:
    """One manager and one agent for a test, with their own Redis prefix and service names."""

    node_id: str
    redis_url: str
    prefix: str
    log_dir: Path
    manager_port: int = field(default_factory=free_port)
    agent_port: int = field(default_factory=free_port)
    manager: subprocess.Popen[bytes] | None = None
    agent: subprocess.Popen[bytes] | None = None
    docker: Any = field(default_factory=docker.from_env)
    settings: dict[str, str] = field(default_factory=dict)  # extra GREENSWARM_* variables

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.manager_port}"

    @property
    def agent_url(self) -> str:
        return f"http://127.0.0.1:{self.agent_port}"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "GREENSWARM_TOKEN": TOKEN,
            "GREENSWARM_NODE_SECRET": NODE_SECRET,
            "GREENSWARM_REDIS_URL": self.redis_url,
            "GREENSWARM_REDIS_PREFIX": self.prefix,
            "GREENSWARM_SERVICE_PREFIX": f"{self.prefix}-",
            "GREENSWARM_NODES": self.node_id,
            "GREENSWARM_AGENT_URL": self.agent_url,
            "GREENSWARM_SYNC_INTERVAL_S": "1",
            "GREENSWARM_RETRY_INTERVAL_S": "2",
            "GREENSWARM_MANAGER_URL": self.url,
            "GREENSWARM_AGENT_RECONCILE_INTERVAL_S": "2",
            **self.settings,
        }

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{self.prefix}-{name}.log", "ab")  # noqa: SIM115 - child's
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", *args],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def start_manager(self) -> None:
        self.manager = self._spawn(
            "manager", ["manager", "--listen", f"127.0.0.1:{self.manager_port}"]
        )
        wait_serving(self.manager, self.url + "/healthz", 30.0, "the manager")
        # the only manager, but it leads only once the lease of one killed before expires
        wait_for(self._leads, 30.0, "the manager to lead")
        wait_for(lambda: bool(self.get("/hosts")), 30.0, "the manager to see its node")

    def _leads(self) -> bool:
        answer = requests.get(self.url + "/healthz", timeout=30, headers=self.headers())
        return bool(answer.json().get("role", "leader") == "leader")  # none: no election

    def start_agent(self) -> None:
        self.agent = self._spawn(
            "agent",
            ["agent", "--listen", f"127.0.0.1:{self.agent_port}", "--node-id", self.node_id],
        )
        wait_serving(self.agent, self.agent_url + "/healthz", 30.0, "the agent")

    def stop_manager(self) -> None:
        if self.manager is not None:
            stop_child(self.manager)
            self.manager = None

    def stop_agent(self) -> None:
        if self.agent is not None:
            stop_child(self.agent)
            self.agent = None

    def close(self) -> None:
        self.stop_agent()
        self.stop_manager()
        for service in self.docker.services.list():
            if service.name.startswith(f"{self.prefix}-"):
                with contextlib.suppress(docker.errors.APIError):
                    service.remove()
        for container in self.containers(all_=True):  # no need to wait for Swarm's grace
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
        self.docker.close()

    # -- HTTP ---------------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    def post(self, path: str, body: object, *, auth: bool = True) -> requests.Response:
        return requests.post(
            self.url + path, json=body, timeout=60, headers=self.headers() if auth else {}
        )

    def put(self, path: str, body: object) -> requests.Response:
        return requests.put(self.url + path, json=body, timeout=60, headers=self.headers())

    def node_put(self, path: str, body: object) -> requests.Response:
        """A PUT with the node's own credential (what its monitor sends)."""
        return requests.put(self.url + path, json=body, timeout=60, headers=self.node_headers())

    def node_post(self, path: str, body: object, host_id: str | None = None) -> requests.Response:
        """A POST with a node's credential (the live node's, or ``host_id``'s)."""
        return requests.post(self.url + path, json=body, timeout=60,
                             headers=self.node_headers(host_id))

    def delete(self, path: str) -> requests.Response:
        return requests.delete(self.url + path, timeout=60, headers=self.headers())

    def node_headers(self, host_id: str | None = None) -> dict[str, str]:
        """The node's own credential, as its agent and monitor present it (or the credential
        of another node id, ``host_id``)."""
        credential = node_credential(NODE_SECRET, host_id or self.node_id)
        return {"Authorization": f"Bearer {credential}"}

    def agent_headers(self) -> dict[str, str]:
        """The manager's word to the node's agent (the only token the agent takes)."""
        word = manager_word(node_credential(NODE_SECRET, self.node_id))
        return {"Authorization": f"Bearer {word}"}

    def get_agent_tasks(self) -> Any:
        response = requests.get(self.agent_url + "/agent/tasks", timeout=30,
                                headers=self.agent_headers())
        response.raise_for_status()
        return response.json()

    def get(self, path: str) -> Any:
        response = requests.get(self.url + path, timeout=30, headers=self.headers())
        response.raise_for_status()
        return response.json()

    def submit(
        self,
        name: str,
        cls: int,
        kind: str,
        cpu: int,
        memory: str,
        command: list[str] | None = None,
        **extra: object,
    ) -> dict[str, Any]:
        body = {
            "image": "greenswarm/busybox:latest",
            "name": name,
            "class": cls,
            "type": kind,
            "cpu_shares": cpu,
            "memory": memory,
            "command": command or ["sleep", "3600"],
            **extra,
        }
        response = self.post("/requests", body)
        assert response.status_code == 201, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def request(self, name: str) -> dict[str, Any]:
        record: dict[str, Any] = self.get(f"/requests/{name}")
        return record

    def wait_status(self, name: str, *statuses: str, timeout_s: float = 60.0) -> dict[str, Any]:
        try:
            wait_for(
                lambda: self.request(name)["status"] in statuses,
                timeout_s,
                f"{name} to be {'/'.join(statuses)}",
                interval_s=0.2,
            )
        except TimeoutError as exc:  # what it was instead, for a run that cannot be repeated
            record = self.request(name)
            raise TimeoutError(f"{exc}; it is {record['status']}, its last events "
                               f"{record['history'][-3:]}") from None
        return self.request(name)

    # -- Docker -------------------------------------------------------------------------------

    def containers(self, task: str | None = None, *, all_: bool = False) -> list[Any]:
        label = LABEL_TASK if task is None else f"{LABEL_TASK}={task}"
        # a container Swarm removes between the list and its inspection is skipped, not an
        # error (it failed a teardown, which then left the other cluster's processes running)
        found = self.docker.containers.list(all=all_, filters={"label": label},
                                            ignore_removed=True)
        return [
            c
            for c in found
            if c.labels.get("com.docker.swarm.service.name", "").startswith(self.prefix)
        ]

    def running(self, task: str, timeout_s: float = 60.0) -> Any:
        wait_for(
            lambda: bool(self.containers(task)), timeout_s, f"a container of {task}", interval_s=0.2
        )
        return self.containers(task)[0]

    def resources(self, task: str) -> tuple[int, int]:
        container = self.running(task)
        container.reload()
        config = container.attrs["HostConfig"]
        return int(config["CpuShares"]), int(config["Memory"])

    def wait_resources(self, task: str, expected: tuple[int, int], timeout_s: float = 30.0) -> None:
        wait_for(
            lambda: self.resources(task) == expected,
            timeout_s,
            f"{task} to have {expected}",
            interval_s=0.2,
        )


def peers_file(path: Path, peers: dict[str, Live]) -> Path:
    """A peers file (GREENSWARM_PEERS_FILE) naming each live cluster by its name, with the
    tests' token and a nominal link."""
    path.write_text(json.dumps([
        {"name": name, "url": peer.url, "token": TOKEN, "latency_ms": 1.0,
         "bandwidth_mbit": 1000.0}
        for name, peer in peers.items()
    ]))
    return path


@contextlib.contextmanager
def federated_pair(
    node_id: str, redis_url: str, prefix: str, log_dir: Path, *, offload: str = "unplaced"
) -> Iterator[tuple[Live, Live]]:
    """Two clusters on the one node, each its own manager, Redis prefix and service names:
    ``b`` (its manager and agent, no peers) and ``a`` (its manager only, with ``b`` as its
    peer and GREENSWARM_OFFLOAD ``offload``, asking b's advert every second). Both stopped by
    pid, their services and containers removed, at the end."""
    b = Live(node_id, redis_url, f"{prefix}b", log_dir,
             settings={"GREENSWARM_FEDERATION_NAME": "b"})
    a = Live(node_id, redis_url, f"{prefix}a", log_dir)
    a.settings = {
        "GREENSWARM_FEDERATION_NAME": "a",
        "GREENSWARM_PEERS_FILE": str(peers_file(log_dir / f"{prefix}-peers.json", {"b": b})),
        "GREENSWARM_OFFLOAD": offload,
        "GREENSWARM_PEER_REFRESH_S": "1",
        "GREENSWARM_AGENT_URL": f"http://127.0.0.1:{a.agent_port}",  # none: no cut is needed
    }
    try:
        b.start_manager()
        b.start_agent()
        a.start_manager()
        yield a, b
    finally:
        try:
            a.close()
        finally:
            b.close()


def poll(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    wait_for(check, timeout_s, what, interval_s=0.2)
