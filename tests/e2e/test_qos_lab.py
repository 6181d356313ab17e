"""The QoS-driven policy on the real lab (DESIGN 3.10, 3.11): a class-2 service that has run a
while is preempted, its container removed from its node, for a newer class-2 request about to
miss its objective; it waits in the queue with its Q and comes back later, and its history and
availability show it.

The manager runs ``qos`` with no overbooking (GREENSWARM_OVERBOOKING_MODEL=none: every host
takes its capacity, 512 shares, whatever its class) and a class-2 objective of 0.5, so that a
running class-2 task's Q = e / 0.5 - (e + p) - alpha grows by one second per second and passes
the safety margin phi (10 s) about 11 s after its start. Nodes have 0.5 CPU and 1 GiB.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.e2e.conftest import Lab
from tests.e2e.stack import BUSYBOX, IDLE, Stack, deployed, idle, poll, task_containers

pytestmark = pytest.mark.lab

LAB_UP_ARGS = ("up", "--nodes", "3", "--node-cpus", "0.5", "--node-memory", "1g")
PHI_S = 10.0  # the paper's safety margin, the policy's default


@pytest.fixture(scope="module")
def stack(lab: Lab) -> Iterator[Stack]:
    with deployed(lab, name="gsqos", extra_env={
        "GREENSWARM_POLICY": "qos",
        "GREENSWARM_OVERBOOKING_MODEL": "none",
        "GREENSWARM_SLO": "2=0.5",
    }) as up:
        yield up


@pytest.fixture
def cluster(stack: Stack) -> Iterator[Stack]:
    with idle(stack) as ready:
        yield ready


def submit_queued(stack: Stack, name: str) -> dict[str, Any]:
    """A class-2 service of 400 shares that waits in the queue when nothing takes it."""
    body = {"image": BUSYBOX, "name": name, "class": 2, "type": "service",
            "cpu_shares": 400, "memory": "32m", "command": IDLE, "queue": True}
    response = requests.post(stack.url + "/requests", json=body, headers=stack.headers(),
                             timeout=60)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def kinds(record: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in record["history"]]


def test_a_class_2_service_is_preempted_for_a_newer_one_and_comes_back(
    cluster: Stack, lab: Lab
) -> None:
    elder = submit_queued(cluster, "elder")["request"]
    assert elder["status"] == "running", elder
    elder_host = elder["host"]
    node = next(n for n in lab.nodes if n["swarm_node_id"] == elder_host)
    poll(lambda: len(task_containers(node, "elder")) == 1, 60, "elder to run on its node")
    # elder runs until its Q is well past phi; then two fillers take the other hosts (each
    # host takes one 400-share task), with Q near -alpha: below the newcomer's 0
    poll(lambda: cluster.request("elder")["service"]["q_s"] >= PHI_S + 3, 60,
         "elder's Q to pass the safety margin")
    fillers = {submit_queued(cluster, name)["request"]["host"] for name in ("fill1", "fill2")}
    assert len(fillers | {elder_host}) == 3, "one 400-share task per host"

    newcomer = submit_queued(cluster, "newcomer")
    # Only elder is eligible (Q_k >= phi and Q_j = 0 < Q_k); the fillers are below phi and
    # above the newcomer's Q. The round on its arrival preempts elder at once.
    assert newcomer["request"]["status"] == "running", newcomer
    assert newcomer["request"]["host"] == elder_host
    record = cluster.request("elder")
    preempted = [e for e in record["history"] if e["kind"] == "preempted"]
    assert [(e["host"], e["by"]) for e in preempted] == [(elder_host, "newcomer")], record
    assert record["status"] in ("pending", "running"), record["status"]
    poll(lambda: not task_containers(node, "elder"), 60, "elder's container to leave its node")

    # It waits with its Q falling one second per second; once below phi it preempts, by the
    # same rules, a task of its class with more slack, and runs again.
    def back() -> bool:
        return kinds(cluster.request("elder")).count("started") == 2
    poll(back, 120, "elder to be placed again and its container to run")
    record = cluster.request("elder")
    history = kinds(record)
    first = history.index("preempted")
    assert "queued" in history[first:] and "placed" in history[first:], history
    service = record["service"]
    assert service["preemptions"] >= 1 and service["overhead"] > 0
    assert 0 < service["availability"] < 1
    assert service["availability"] == pytest.approx(
        service["executed_s"] / (service["executed_s"] + service["pending_s"]), abs=0.02)
    again = record["host"]
    again_node = next(n for n in lab.nodes if n["swarm_node_id"] == again)
    poll(lambda: len(task_containers(again_node, "elder")) == 1, 60,
         f"elder's container on {again_node['name']}")
