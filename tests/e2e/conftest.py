"""Fixtures of the end-to-end tests: a real local lab (DESIGN 6), brought up once per module.

The lab is driven through its command line (``python -m lab``), exactly as an operator
would. The fixture owns the lab: it refuses (skips) when another lab is already up, and always
takes its lab down at the end (a second `down` is harmless).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lab.settings import LabSettings, settings_from_env
from tests.support.live import leave_leftover_test_swarm

REPO = Path(__file__).resolve().parents[2]
LAB_NODES = 2
LAB_NODE_CPUS = "0.5"
LAB_NODE_MEMORY = "512m"
LAB_UP_ARGS = ("up", "--nodes", str(LAB_NODES), "--node-cpus", LAB_NODE_CPUS,
               "--node-memory", LAB_NODE_MEMORY)
UP_TIMEOUT_S = 1800.0  # the very first `up` builds the root file systems (minutes)


def lab_cli(*args: str, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m lab <args>`` from the repository; never raises on failure."""
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def _skip_reason(settings: LabSettings) -> str | None:
    if os.geteuid() != 0:
        return "the lab needs root"
    if not Path(settings.engine.dockerd).exists() or shutil.which("nsenter") is None:
        return f"{settings.engine.dockerd} or nsenter is missing (run scripts/setup.sh)"
    if settings.paths.state_file.exists():
        return (f"a lab is already up ({settings.paths.state_file}); the e2e tests bring up "
                "their own: run `greenswarm lab down` first")
    return None


@dataclass(frozen=True)
class Lab:
    """The running lab as its state file describes it."""

    settings: LabSettings
    state: dict[str, Any]
    up_output: str

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return list(self.state["nodes"])

    def node(self, name: str) -> dict[str, Any]:
        return next(n for n in self.all_nodes if n["name"] == name)

    @property
    def clusters(self) -> list[dict[str, Any]]:
        """Clusters 2... (DESIGN 12); empty for the one-Swarm lab."""
        return list(self.state.get("clusters", []))

    @property
    def all_nodes(self) -> list[dict[str, Any]]:
        """Every engine of the lab: cluster 1's nodes, each further cluster's manager and nodes."""
        return self.nodes + [n for c in self.clusters for n in (c["manager"], *c["nodes"])]


@pytest.fixture(scope="module")
def lab_settings() -> LabSettings:
    return settings_from_env()


@pytest.fixture(scope="module")
def lab_up_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The `up` arguments: a test module's own LAB_UP_ARGS, else this file's."""
    return tuple(getattr(request.module, "LAB_UP_ARGS", LAB_UP_ARGS))


@pytest.fixture(scope="module")
def lab(
    lab_settings: LabSettings, lab_up_args: tuple[str, ...], request: pytest.FixtureRequest
) -> Iterator[Lab]:
    """The lab on the session's engine (``docker_socket``), after undoing what an interrupted
    run of the live tests may have left on it (their loopback swarm, which the lab refuses).
    The engine is asked for only once the lab can run here (else the tests skip)."""
    reason = _skip_reason(lab_settings)
    if reason:
        pytest.skip(reason)
    leave_leftover_test_swarm(request.getfixturevalue("docker_socket"))
    try:
        done = lab_cli(*lab_up_args, timeout_s=UP_TIMEOUT_S)
        assert done.returncode == 0, f"lab up failed:\n{done.stdout}\n{done.stderr}"
        state = json.loads(lab_settings.paths.state_file.read_text())
        yield Lab(lab_settings, state, done.stdout)
    finally:
        lab_cli("down")


@pytest.fixture(scope="module")
def main_engine(lab: Lab) -> Iterator[Any]:
    import docker

    client = docker.DockerClient(base_url=lab.settings.engine.main_url, timeout=60)
    yield client
    client.close()


def node_engine(node: dict[str, Any]) -> Any:
    """A Docker SDK client of one lab node's own engine."""
    import docker

    return docker.DockerClient(base_url=f"unix://{node['socket']}", timeout=60)


def assert_lab_gone(lab: Lab, main_engine: Any) -> None:
    """After `lab down`: none of what the lab created remains (namespaces, links, daemons,
    mounts, cgroups, the forward rule, Swarm nodes, the swarm it initialised, the state)."""
    settings = lab.settings
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in lab.all_nodes if n["netns"] in netns.split()]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert settings.bridge not in links
    assert not [c["bridge"] for c in lab.clusters if f" {c['bridge']}:" in links]
    assert not [n for n in lab.all_nodes if n["veth_host"] in links]
    for pid in (n["pid"] for n in lab.all_nodes):
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(settings.paths.run_dir) not in mounts
    assert str(settings.paths.nodes_cache) not in mounts
    for node in lab.all_nodes:
        assert not [d for d in node["cgroup_dirs"].values() if Path(d).exists()]
        assert not Path(node["socket"]).exists()
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{settings.cgroup_name}"))
    assert not Path("/sys/fs/cgroup", settings.cgroup_name).exists()
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert "greenswarm-lab" not in rules
    manager_ids = {n["ID"] for n in main_engine.api.nodes()} \
        if main_engine.info()["Swarm"]["LocalNodeState"] == "active" else set()
    assert not manager_ids & {n["swarm_node_id"] for n in lab.nodes}
    if lab.state["swarm_initialised_by_lab"]:
        assert main_engine.info()["Swarm"]["LocalNodeState"] == "inactive"
    assert not settings.paths.state_file.exists()
