"""A lab node switched off and on for real (DESIGN 3.15): the manager's ``lab`` power backend
drains the Swarm node and asks the lab's power endpoint (``python -m lab power serve``) to stop
the node's engine; then to start it again, waits until the node is Ready and sets it active.
The node comes back as the same Swarm node. The timings are printed (``pytest -s``).

Run under the machine's lab lock: ``flock /tmp/gs-lab.lock python -m pytest
tests/e2e/test_power_lab.py -s``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from domain.power import PowerState
from lab.power_server import server_pid
from lab.proc import daemon_pid
from manager.power_backends import (
    BackendKind,
    DockerNodes,
    LabBackend,
    PowerBackendSettings,
    PowerTarget,
)
from tests.e2e.conftest import REPO, Lab, assert_lab_gone, lab_cli, node_engine

pytestmark = pytest.mark.lab

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "0.5", "--node-memory", "512m",
               "--images", "minimal")
BUSYBOX = "greenswarm/busybox:latest"
TOKEN = "e2e-power-token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def power_url(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The lab's power endpoint, served by a process of this test (stopped by its pid)."""
    token_file = tmp_path_factory.mktemp("power") / "token"
    token_file.write_text(TOKEN)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "lab", "power", "serve", "--listen", f"127.0.0.1:{port}",
         "--token-file", str(token_file)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if requests.get(f"{url}/healthz", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        else:
            pytest.fail("the power endpoint did not answer")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def backend(lab: Lab, power_url: str) -> Iterator[LabBackend]:
    nodes = DockerNodes(lab.settings.engine.main_url)
    try:
        yield LabBackend(PowerBackendSettings(BackendKind.LAB, lab_url=power_url,
                                              lab_token=TOKEN, ready_timeout_s=120.0),
                         nodes)
    finally:
        nodes.close()


def _swarm_node(main_engine: Any, node_id: str) -> dict[str, Any]:
    return dict(main_engine.api.inspect_node(node_id))


def _status_json() -> dict[str, Any]:
    done = lab_cli("status", "--json")
    return dict(json.loads(done.stdout))


def test_a_node_is_drained_switched_off_and_on_again_as_the_same_swarm_node(
        lab: Lab, main_engine: Any, backend: LabBackend) -> None:
    node = lab.node("gs-node2")
    node_id = node["swarm_node_id"]
    target = PowerTarget(node_id, node["name"], node["address"])
    engine_id = node_engine(node).info()["Swarm"]["NodeID"]
    assert engine_id == node_id
    # a task on the node: the drain must stop it before the engine goes
    service = main_engine.services.create(
        BUSYBOX, ["sleep", "3600"], name="gs-e2e-power",
        constraints=[f"node.id=={node_id}"])
    try:
        for _ in range(120):
            if backend.nodes.running_tasks(node_id) == 1:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the service's task did not start on gs-node2")
        assert backend.status(target).state is PowerState.ON

        off = backend.switch_off(target)
        print(f"\nswitch off gs-node2: {off.duration_s:.2f} s, steps {off.steps}")
        assert off.ok and off.switched and off.state is PowerState.OFF
        assert [name for name, _ in off.steps] == ["drain", "drained", "engine-stopped"]
        assert daemon_pid(Path(node["pidfile"])) is None  # the engine really stopped
        assert _swarm_node(main_engine, node_id)["Spec"]["Availability"] == "drain"
        down_at = time.monotonic()
        for _ in range(120):  # the manager notices the node is gone
            if _swarm_node(main_engine, node_id)["Status"]["State"] == "down":
                break
            time.sleep(0.5)
        print(f"Swarm sees gs-node2 down {time.monotonic() - down_at:.1f} s after it stopped")
        assert _swarm_node(main_engine, node_id)["Status"]["State"] == "down"
        status = next(n for n in _status_json()["nodes"] if n["name"] == "gs-node2")
        assert status["daemon"] == "off"
        table = lab_cli("status").stdout
        assert any(line.startswith("gs-node2") and " off " in line for line in table.splitlines())
        assert backend.status(target).state is PowerState.OFF
        assert backend.switch_off(target).ok  # a second switch off changes nothing

        on = backend.switch_on(target)
        print(f"switch on gs-node2: {on.duration_s:.2f} s, steps {on.steps}")
        assert on.ok and on.switched and on.state is PowerState.ON
        assert [name for name, _ in on.steps] == ["engine-started", "ready", "active"]
        swarm_node = _swarm_node(main_engine, node_id)  # the same Swarm node, by its id
        assert swarm_node["Status"]["State"] == "ready"
        assert swarm_node["Spec"]["Availability"] == "active"
        assert node_engine(node).info()["Swarm"]["NodeID"] == node_id
        status = next(n for n in _status_json()["nodes"] if n["name"] == "gs-node2")
        assert status["daemon"] == "running" and status["swarm"] == "ready"
        assert backend.status(target).state is PowerState.ON
    finally:
        service.remove()


def test_a_detached_power_endpoint_serves_until_lab_down_stops_it(
        lab: Lab, main_engine: Any, tmp_path: Path) -> None:
    """The last test: it takes the module's lab down."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    port = _free_port()
    done = lab_cli("power", "serve", "--listen", f"127.0.0.1:{port}", "--token-file",
                   str(token_file), "--detach")
    assert done.returncode == 0, done.stdout + done.stderr
    pid = server_pid(lab.settings)
    assert pid is not None
    nodes = requests.get(f"http://127.0.0.1:{port}/nodes", timeout=10,
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert {n["name"]: n["power"] for n in nodes} == {"gs-node1": "on", "gs-node2": "on"}
    down = lab_cli("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert server_pid(lab.settings) is None
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    assert_lab_gone(lab, main_engine)
