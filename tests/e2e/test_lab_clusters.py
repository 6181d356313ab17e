"""The lab with several Swarms end to end (DESIGN 12): two clusters of one node each.

Cluster 1 is the usual lab (the main engine manages it); cluster 2 has its own bridge, its own
manager engine in a namespace and its own node. The tests check that each manager sees exactly
its own nodes, that the swarms are distinct, that a service of cluster 2 runs on cluster 2's
node, that the clusters reach each other through the host with the configured delay between
them (and none inside one), and that `down` leaves nothing. Tests run in file order and share
the module's lab; the last one takes it down.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from typing import Any

import pytest

from lab.proc import pids_mentioning
from tests.e2e.conftest import Lab, assert_lab_gone, lab_cli, node_engine

pytestmark = pytest.mark.lab

LATENCY_MS = 20.0
LAB_UP_ARGS = ("up", "--clusters", "2", "--nodes", "1", "--node-cpus", "0.5",
               "--node-memory", "512m", "--images", "minimal",
               "--inter-cluster-latency-ms", f"{LATENCY_MS:g}")
BUSYBOX = "greenswarm/busybox:latest"
C1_NODE, C2_NODE, C2_MANAGER = "gs-node1", "gs-node-c2-1", "gs-node-c2-mgr"
_RTT_RE = re.compile(r"min/avg/max = ([\d.]+)/([\d.]+)/([\d.]+) ms")


def _cluster2(lab: Lab) -> dict[str, Any]:
    (cluster,) = lab.clusters
    assert cluster["index"] == 2
    return cluster


def _rtt_ms(netns: str, address: str, count: int = 10) -> tuple[float, float]:
    """(min, avg) round trip from inside the namespace ``netns`` to ``address``."""
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox (for ping) is not installed")
    done = subprocess.run(["nsenter", f"--net=/var/run/netns/{netns}", busybox, "ping", "-c",
                           str(count), "-i", "0.2", "-W", "2", "-q", address],
                          capture_output=True, text=True, timeout=60, check=False)
    found = _RTT_RE.search(done.stdout)
    assert done.returncode == 0 and found, f"ping {address} from {netns}: {done.stdout}"
    return float(found.group(1)), float(found.group(2))


def test_each_manager_lists_exactly_its_own_nodes_as_ready(lab: Lab, main_engine: Any) -> None:
    cluster = _cluster2(lab)
    main_nodes = {n["Description"]["Hostname"]: n for n in main_engine.api.nodes()
                  if n["Spec"]["Role"] == "worker"}
    assert set(main_nodes) == {C1_NODE}
    assert main_nodes[C1_NODE]["Status"]["State"] == "ready"

    manager = node_engine(cluster["manager"])
    try:
        c2_nodes = {n["Description"]["Hostname"]: n for n in manager.api.nodes()}
    finally:
        manager.close()
    assert set(c2_nodes) == {C2_MANAGER, C2_NODE}
    assert all(n["Status"]["State"] == "ready" for n in c2_nodes.values())
    assert c2_nodes[C2_MANAGER]["Spec"]["Role"] == "manager"
    assert c2_nodes[C2_MANAGER]["Spec"]["Availability"] == "drain"
    assert c2_nodes[C2_NODE]["ID"] == lab.node(C2_NODE)["swarm_node_id"]
    assert c2_nodes[C2_NODE]["Status"]["Addr"] == lab.node(C2_NODE)["address"]
    assert c2_nodes[C2_NODE]["Spec"]["Labels"]["greenswarm.lab.node"] == C2_NODE


def test_the_swarms_are_distinct(lab: Lab, main_engine: Any) -> None:
    cluster = _cluster2(lab)
    manager = node_engine(cluster["manager"])
    try:
        c2_swarm = manager.swarm.attrs["ID"]
        c2_info = manager.info()["Swarm"]
    finally:
        manager.close()
    assert c2_swarm == cluster["swarm_id"]
    assert main_engine.swarm.attrs["ID"] != c2_swarm
    assert c2_info["NodeAddr"] == cluster["manager"]["address"]
    assert cluster["bridge"] == "gsbr1" and cluster["gateway"] == "10.123.1.1"
    swarms = lab.state["swarms"]
    assert [(s["name"], s["manager_socket"], [n["name"] for n in s["nodes"]])
            for s in swarms] == [
        ("c1", lab.state["main_socket"], [C1_NODE]),
        ("c2", cluster["manager"]["socket"], [C2_NODE]),
    ]


def test_a_service_of_cluster_2_runs_on_cluster_2s_node(lab: Lab) -> None:
    import docker.types

    cluster = _cluster2(lab)
    node = lab.node(C2_NODE)
    manager = node_engine(cluster["manager"])
    service = manager.services.create(
        BUSYBOX, ["sleep", "300"], name="gs-e2e-c2-sleeper",
        restart_policy=docker.types.RestartPolicy(condition="none"))
    try:
        running: list[dict[str, Any]] = []
        for _ in range(120):  # bounded: 30 s
            running = [t for t in service.tasks() if t["Status"]["State"] == "running"]
            if running:
                break
            time.sleep(0.25)
        assert running, service.tasks()
        assert {t["NodeID"] for t in running} == {node["swarm_node_id"]}
        on_node = node_engine(node)
        try:
            names = [c.name for c in on_node.containers.list()]
        finally:
            on_node.close()
        assert any(n.startswith("gs-e2e-c2-sleeper.") for n in names), names
    finally:
        service.remove()
        manager.close()


def test_nodes_reach_each_other_across_clusters(lab: Lab) -> None:
    c1, c2 = lab.node(C1_NODE), lab.node(C2_NODE)
    _rtt_ms(c1["netns"], c2["address"], count=3)
    _rtt_ms(c2["netns"], c1["address"], count=3)
    _rtt_ms(c1["netns"], _cluster2(lab)["manager"]["address"], count=3)


def test_the_delay_is_between_clusters_and_not_inside_one(lab: Lab) -> None:
    if lab.state["latency"] not in ("netem", "nfqueue"):
        pytest.skip(f"the inter-cluster delay is {lab.state['latency']} on this machine")
    assert lab.state["inter_cluster_latency_ms"] == LATENCY_MS
    c1, c2 = lab.node(C1_NODE), lab.node(C2_NODE)
    across_min, across_avg = _rtt_ms(c1["netns"], c2["address"])
    inside_min, inside_avg = _rtt_ms(c2["netns"], _cluster2(lab)["manager"]["address"])
    to_gateway_min, _ = _rtt_ms(c1["netns"], lab.state["gateway"])
    # The delay is each way: a round trip between clusters waits twice.
    assert across_min >= 2 * LATENCY_MS, (across_min, across_avg)
    assert across_avg < 2 * LATENCY_MS + 50, (across_min, across_avg)
    assert inside_avg < LATENCY_MS / 4, (inside_min, inside_avg)
    assert to_gateway_min < LATENCY_MS / 4, to_gateway_min


def test_status_shows_every_cluster(lab: Lab) -> None:
    done = lab_cli("status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    assert status["up"] is True
    (cluster,) = status["clusters"]
    assert cluster["cluster"] == 2 and cluster["swarm"] == "active" and cluster["up"]
    assert [n["name"] for n in cluster["nodes"]] == [C2_NODE]
    assert cluster["manager"]["engine"] == "answering"
    text = lab_cli("status").stdout
    assert "cluster 2 up: bridge gsbr1" in text and C2_NODE in text


def test_a_second_up_changes_nothing(lab: Lab) -> None:
    done = lab_cli(*LAB_UP_ARGS)
    assert done.returncode == 0, done.stderr
    assert "nothing changed" in done.stdout
    state = json.loads(lab.settings.paths.state_file.read_text())
    again = Lab(lab.settings, state, done.stdout)
    assert [(n["pid"], n["swarm_node_id"]) for n in again.all_nodes] == \
        [(n["pid"], n["swarm_node_id"]) for n in lab.all_nodes]
    assert again.clusters[0]["swarm_id"] == lab.clusters[0]["swarm_id"]


def test_down_leaves_nothing_behind(lab: Lab, main_engine: Any) -> None:
    done = lab_cli("down")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_lab_gone(lab, main_engine)
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    assert "gsbr" not in qdiscs
    mangle = subprocess.run(["iptables", "-t", "mangle", "-S"], capture_output=True,
                            text=True).stdout
    assert "greenswarm-lab" not in mangle
    assert not pids_mentioning(str(lab.settings.paths.delay_pidfile))

    again = lab_cli("down")
    assert again.returncode == 0, again.stderr
    assert "nothing to take down" in again.stdout
