"""Offloading between two real Swarms end to end (DESIGN 12, issue 20): the lab with two
clusters of one node each, a greenswarm deployed on each as users deploy it (compose and
`docker stack deploy`, cluster 2's through its own manager engine), named ``a`` and ``b``, each
the other's peer; a offloads what it cannot place (``GREENSWARM_OFFLOAD=unplaced``).

a's node (512 CPU shares) is filled first by a class-1 service of 384 shares: nothing of class 1
larger than 128 shares fits beside it (class 1 is neither cut nor killed), so a's own policy
places no such request, and b's empty node has room. Tests run in file order and share the
module's stacks: an offload, its status and stop through a; b's manager stopped (a alone, its
offloads refused naming b); b's manager back (offloading again); a deployment of three linked
services placed across both Swarms and stopped together, and one whose link cannot hold
refused whole. Every wait is bounded. Traffic
goes only to 127.0.0.1 and the lab's addresses (a's bridge address, b's manager namespace).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.e2e.conftest import REPO, Lab
from tests.e2e.stack import BUSYBOX, IDLE, Stack, federated, poll, task_containers

pytestmark = pytest.mark.lab

LATENCY_MS = 10.0
LAB_UP_ARGS = ("up", "--clusters", "2", "--nodes", "1", "--node-cpus", "0.5",
               "--node-memory", "1g", "--inter-cluster-latency-ms", f"{LATENCY_MS:g}")
PEER_SETTINGS = {"GREENSWARM_PEER_REFRESH_S": "2", "GREENSWARM_PEER_TIMEOUT_S": "2"}
FILL_SHARES, OFFLOADED_SHARES, LOCAL_SHARES = 384, 256, 128


@pytest.fixture(scope="module")
def pair(lab: Lab) -> Iterator[tuple[Stack, Stack]]:
    with federated(lab, LATENCY_MS, {**PEER_SETTINGS, "GREENSWARM_OFFLOAD": "unplaced"},
                   PEER_SETTINGS) as (a, b):
        filled = a.submit("fill", 1, "service", FILL_SHARES, "64m")
        assert filled["request"]["host"] == a.nodes[0]["swarm_node_id"], filled
        poll(lambda: peer(a)["state"] == "up", 30, "a to see b up")
        try:
            yield a, b
        finally:
            a.stop_all()
            b.stop_all()


def peer(a: Stack) -> dict[str, Any]:
    (found,) = a.get("/federation/peers")["peers"]
    assert found["name"] == "b"
    return dict(found)


def post(stack: Stack, name: str, shares: int) -> requests.Response:
    body = {"image": BUSYBOX, "name": name, "class": 1, "type": "service",
            "cpu_shares": shares, "memory": "32m", "command": IDLE}
    return requests.post(stack.url + "/requests", json=body, headers=stack.headers(),
                         timeout=60)


def runs_on(node: dict[str, Any], name: str) -> bool:
    return len(task_containers(node, name)) == 1


def test_a_request_a_cannot_place_runs_on_bs_node_and_status_and_stop_work_through_a(
    pair: tuple[Stack, Stack]
) -> None:
    a, b = pair
    a_node, b_node = a.nodes[0], b.nodes[0]
    started = time.monotonic()
    answer = a.submit("x", 1, "service", OFFLOADED_SHARES, "32m")
    offload_s = time.monotonic() - started
    assert answer["request"]["cluster"] == "b" and answer["decision"]["cluster"] == "b", answer
    # a real container on b's node, as that node's own engine sees it; none on a's node
    poll(lambda: runs_on(b_node, "x"), 60, "x's container on b's node")
    assert task_containers(a_node, "x") == []
    assert b.request("x")["forwarded_from"] == "a"
    # through a: b's record, with where it runs
    record = a.request("x")
    assert (record["cluster"], record["status"], record["host"], record["host_name"]) == \
        ("b", "running", b_node["swarm_node_id"], b_node["name"])
    assert [e["kind"] for e in record["history"]][:2] == ["submitted", "offloaded"]
    # a's list answers from a's own record: running at b is not waiting here
    (listed,) = [r for r in a.get("/requests") if r["id"] == "x"]
    assert listed["cluster"] == "b" and listed["service"]["pending_s"] == 0.0, listed
    assert listed["host_name"] == b_node["name"], listed  # as b names its node
    # the CLI through a: a CLUSTER column saying b
    done = subprocess.run([sys.executable, "-m", "cli.main", "status", "--url", a.url],
                          cwd=REPO, env={**a.env(), "GREENSWARM_TOKEN": a.token},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    table = done.stdout.splitlines()
    assert "CLUSTER" in table[0].split(), done.stdout
    assert any(line.split()[0] == "x" and "b" in line.split() and b_node["name"] in line.split()
               for line in table[1:]), done.stdout
    # stop through a: the container leaves b's node, both records say stopped
    a.stop("x")
    poll(lambda: not runs_on(b_node, "x"), 60, "x's container to leave b's node")
    assert a.request("x")["status"] == "stopped"
    assert b.request("x")["status"] == "stopped"
    print(f"\noffload: a answered in {offload_s:.2f} s, x ran on {b_node['name']}")


def test_with_bs_manager_stopped_a_works_alone_and_refuses_offloads_naming_b(
    pair: tuple[Stack, Stack]
) -> None:
    a, b = pair
    a_node = a.nodes[0]
    b.compose("stop", "manager")
    poll(lambda: peer(a)["state"] == "down", 30, "a to mark b down")
    assert peer(a)["error"]
    answer = post(a, "while-down", OFFLOADED_SHARES)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["request"]["status"] == "rejected" and body["request"]["cluster"] is None
    assert "peer b is down" in body["decision"]["reason"], body["decision"]
    print(f"\nrefused while b is down: {body['decision']['reason']}")
    # a alone places what fits beside its filler
    local = a.submit("local", 1, "service", LOCAL_SHARES, "32m")
    assert local["request"]["host"] == a_node["swarm_node_id"]
    assert local["request"]["cluster"] in (None, "a"), local
    poll(lambda: runs_on(a_node, "local"), 60, "local's container on a's node")
    a.stop("local")
    assert a.healthz()["status"] == "ok"


def test_with_bs_manager_back_offloading_resumes(pair: tuple[Stack, Stack]) -> None:
    a, b = pair
    b.compose("start", "manager")
    poll(lambda: b.healthz()["status"] == "ok", 60, "b's manager to answer again")
    poll(lambda: peer(a)["state"] == "up", 30, "a to see b up again")
    answer = a.submit("after", 1, "service", OFFLOADED_SHARES, "32m")
    assert answer["request"]["cluster"] == "b", answer
    poll(lambda: runs_on(b.nodes[0], "after"), 60, "after's container on b's node")
    a.stop("after")
    poll(lambda: not runs_on(b.nodes[0], "after"), 60, "after's container to leave b's node")


# -- deployments across the two Swarms ------------------------------------------------------------

# a has room for 128 shares of class 1 beside its filler, b for 512: web (128) fits only a, api
# and db (256 each) only b, and b cannot take all three (640): the only placement splits them.
DEPLOYED = (("web", 128), ("api", 256), ("db", 256))


def deployment(name: str, max_latency_ms: float) -> dict[str, Any]:
    return {
        "name": name,
        "requests": [{"name": n, "image": BUSYBOX, "class": 1, "type": "service",
                      "cpu_shares": shares, "memory": "32m", "command": IDLE}
                     for n, shares in DEPLOYED],
        "links": [{"a": "web", "b": "api", "max_latency_ms": max_latency_ms},
                  {"a": "api", "b": "db", "max_latency_ms": max_latency_ms}],
    }


def test_a_deployment_is_placed_across_both_swarms_or_refused_whole(
    pair: tuple[Stack, Stack]
) -> None:
    a, b = pair
    a_node, b_node = a.nodes[0], b.nodes[0]
    # the link a-b is 10 ms (the peers files, and the lab's real delay): 50 ms holds
    placed = requests.post(a.url + "/deployments", json=deployment("shop", 50),
                           headers=a.headers(), timeout=120)
    assert placed.status_code == 201, placed.text
    where = {p["name"]: p["cluster"] or "a" for p in placed.json()["requests"]}
    assert where == {"web": "a", "api": "b", "db": "b"}, placed.json()
    poll(lambda: runs_on(a_node, "shop-web"), 60, "web's container on a's node")
    for name in ("shop-api", "shop-db"):
        poll(lambda name=name: runs_on(b_node, name), 60, f"{name}'s container on b's node")
    stopped = requests.delete(a.url + "/deployments/shop", headers=a.headers(), timeout=120)
    assert stopped.status_code == 200, stopped.text
    poll(lambda: not runs_on(a_node, "shop-web"), 60, "web to leave a's node")
    for name in ("shop-api", "shop-db"):
        poll(lambda name=name: not runs_on(b_node, name), 60, f"{name} to leave b's node")

    # 5 ms cannot hold over the 10 ms link, and the three fit in neither Swarm alone
    refused = requests.post(a.url + "/deployments", json=deployment("tight", 5),
                            headers=a.headers(), timeout=120)
    assert refused.status_code == 409, refused.text
    body = refused.json()
    # the first constraint that failed: the link, or a request that fits no host where the
    # link would let it go
    assert "within 5 ms" in body["reason"] or "fits no host" in body["reason"], body
    for stack in (a, b):  # nothing created anywhere: no record, no container
        for name in ("tight-web", "tight-api", "tight-db"):
            gone = requests.get(f"{stack.url}/requests/{name}", headers=stack.headers(),
                                timeout=60)
            assert gone.status_code == 404, (name, gone.text)
    assert not [c for node in (a_node, b_node) for n in ("tight-web", "tight-api", "tight-db")
                for c in task_containers(node, n)]
    print(f"\ndeployment refused whole: {body.get('reason')}")
