"""The local lab end to end: a real multi-node Swarm on this machine (DESIGN 6).

Brings up 2 nodes of 0.5 CPU and 512 MiB, checks that they are Swarm nodes with their own engines
and that their size is enforced by their cgroups, then takes the lab down and checks that nothing
is left. Tests run in file order and share the module's lab; the last one takes it down.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    LAB_NODES,
    LAB_UP_ARGS,
    Lab,
    assert_lab_gone,
    lab_cli,
    node_engine,
)

pytestmark = pytest.mark.lab

BUSYBOX = "greenswarm/busybox:latest"
SERVICE_PORT = 18090


def _cpu_usage_ns(node: dict[str, Any]) -> int:
    dirs = node["cgroup_dirs"]
    if "cpuacct" in dirs:
        return int(Path(dirs["cpuacct"], "cpuacct.usage").read_text())
    stat = Path(dirs["unified"], "cpu.stat").read_text().split()
    return int(stat[stat.index("usage_usec") + 1]) * 1000


def _memory_limit(node: dict[str, Any]) -> int:
    dirs = node["cgroup_dirs"]
    if "memory" in dirs:
        return int(Path(dirs["memory"], "memory.limit_in_bytes").read_text())
    return int(Path(dirs["unified"], "memory.max").read_text())


def _http_get(address: str, port: int, attempts: int = 40) -> bytes:
    """GET / from a lab node's address (bounded retries while the service starts)."""
    for _ in range(attempts):
        try:
            with socket.create_connection((address, port), timeout=2) as conn:
                conn.sendall(b"GET / HTTP/1.0\r\nHost: lab\r\n\r\n")
                chunks = []
                while chunk := conn.recv(4096):
                    chunks.append(chunk)
                return b"".join(chunks)
        except OSError:
            time.sleep(0.25)
    raise AssertionError(f"nothing answered on {address}:{port}")


def test_every_node_is_ready_in_the_managers_node_list(lab: Lab, main_engine: Any) -> None:
    assert len(lab.nodes) == LAB_NODES
    swarm_nodes = {n["ID"]: n for n in main_engine.api.nodes()}
    for node in lab.nodes:
        swarm_node = swarm_nodes[node["swarm_node_id"]]
        assert swarm_node["Status"]["State"] == "ready", node["name"]
        assert swarm_node["Spec"]["Availability"] == "active"
        assert swarm_node["Description"]["Hostname"] == node["name"]
        assert swarm_node["Status"]["Addr"] == node["address"]
        labels = swarm_node["Spec"]["Labels"]
        assert labels["greenswarm.lab.socket"] == node["socket"]
        assert labels["greenswarm.capacity.cpu_shares"] == "512"
        assert labels["greenswarm.capacity.memory_bytes"] == str(512 * 2**20)


def test_each_node_engine_runs_busybox_inside_the_nodes_cgroup(lab: Lab, main_engine: Any) -> None:
    main_id = main_engine.images.get(BUSYBOX).id
    for node in lab.nodes:
        client = node_engine(node)
        try:
            assert client.info()["Name"] == node["name"]
            assert client.images.get(BUSYBOX).id == main_id
            out = client.containers.run(BUSYBOX, ["cat", "/proc/self/cgroup"], remove=True)
        finally:
            client.close()
        assert f"{node['cgroup_parent']}/" in out.decode(), out


def test_node_cpu_is_limited_by_its_cgroup(lab: Lab) -> None:
    node = lab.node("gs-node1")
    client = node_engine(node)
    # Two busy loops: unlimited they would take both cores of the machine.
    burner = client.containers.run(BUSYBOX, ["sh", "-c", "yes >/dev/null & yes >/dev/null"],
                                   detach=True)
    try:
        time.sleep(1.0)
        before, started = _cpu_usage_ns(node), time.monotonic()
        time.sleep(4.0)
        cores = (_cpu_usage_ns(node) - before) / 1e9 / (time.monotonic() - started)
    finally:
        burner.remove(force=True)
        client.close()
    # Unlimited, two busy loops take ~2 cores; contention from other work can only lower it.
    assert 0.3 <= cores <= 0.65, f"gs-node1 (0.5 cpu) used {cores:.2f} cores"


def test_node_memory_is_limited_by_its_cgroup(lab: Lab) -> None:
    node = lab.node("gs-node1")
    assert _memory_limit(node) == 512 * 2**20
    client = node_engine(node)
    try:
        small = client.containers.run(BUSYBOX, ["dd", "if=/dev/zero", "of=/dev/null",
                                                "bs=64M", "count=1"], detach=True)
        big = client.containers.run(BUSYBOX, ["dd", "if=/dev/zero", "of=/dev/null",
                                              "bs=700M", "count=1"], detach=True)
        small_exit = small.wait(timeout=60)["StatusCode"]
        big_exit = big.wait(timeout=60)["StatusCode"]
        big.reload()
        oom_killed = big.attrs["State"]["OOMKilled"]
        small.remove()
        big.remove()
    finally:
        client.close()
    assert small_exit == 0
    assert (big_exit, oom_killed) == (137, True), "a 700 MiB buffer must not fit in 512 MiB"


def test_a_swarm_service_answers_on_its_nodes_address(lab: Lab, main_engine: Any) -> None:
    import docker.types

    node = lab.node("gs-node2")
    service = main_engine.services.create(
        "greenswarm/timeserver:latest", name="gs-e2e-timeserver",
        constraints=[f"node.id=={node['swarm_node_id']}"],
        endpoint_spec=docker.types.EndpointSpec(
            ports={SERVICE_PORT: (8080, "tcp", "host")}),
        restart_policy=docker.types.RestartPolicy(condition="none"),
    )
    try:
        reply = _http_get(node["address"], SERVICE_PORT)
    finally:
        service.remove()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200"), head
    assert "epoch_s" in json.loads(body)


def test_a_second_up_changes_nothing(lab: Lab) -> None:
    done = lab_cli(*LAB_UP_ARGS)
    assert done.returncode == 0, done.stderr
    assert "nothing changed" in done.stdout
    state = json.loads(lab.settings.paths.state_file.read_text())
    assert [(n["pid"], n["swarm_node_id"]) for n in state["nodes"]] == \
        [(n["pid"], n["swarm_node_id"]) for n in lab.nodes]


def test_up_restarts_a_dead_nodes_engine_under_its_swarm_id(lab: Lab, main_engine: Any) -> None:
    """A node's engine dies (killed, as a crash would); Swarm marks the node Down. `up` starts
    its engine again on its old data root and says so: the node is back in the swarm under its
    own id, and no second entry of it is left in the manager's list (issue 28, item 2: it
    rejoined under a new id, and greenswarm kept the old host as a ghost)."""
    node = lab.nodes[-1]
    os.kill(node["pid"], signal.SIGKILL)

    def state_in_swarm() -> str:
        return str(main_engine.api.inspect_node(node["swarm_node_id"])["Status"]["State"])

    deadline = time.monotonic() + 90
    while state_in_swarm() != "down" and time.monotonic() < deadline:
        time.sleep(1)
    assert state_in_swarm() == "down"
    done = lab_cli(*LAB_UP_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
    name, node_id = node["name"], node["swarm_node_id"]
    assert f"{name} engine was dead: restarted on its old data root" in done.stdout
    assert f"{name} is back in the swarm under its own id {node_id}" in done.stdout
    state = json.loads(lab.settings.paths.state_file.read_text())
    again = next(n for n in state["nodes"] if n["name"] == name)
    assert again["swarm_node_id"] == node_id and again["pid"] != node["pid"]
    entries = [(n["ID"], n["Status"]["State"]) for n in main_engine.api.nodes()
               if n["Description"]["Hostname"] == name]
    assert entries == [(node_id, "ready")]
    client = node_engine(node)
    try:
        assert client.info()["Swarm"]["NodeID"] == node_id
    finally:
        client.close()


def test_down_leaves_nothing_behind(lab: Lab, main_engine: Any) -> None:
    done = lab_cli("down")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_lab_gone(lab, main_engine)

    again = lab_cli("down")
    assert again.returncode == 0, again.stderr
    assert "nothing to take down" in again.stdout
