"""Consolidation in the live service on the lab (DESIGN 3.15, issue 31 item 2): greenswarm
deployed as users deploy it (compose + stack) with the power manager on (``lab`` backend) moves
a real service from one lab node to the other make-before-break, and the service answers HTTP
throughout the move.

mv-a (class 4, a busybox httpd publishing a host port) is placed first; mv-b (class 4,
constrained off mv-a's node) holds the other node. Once mv-a ran long enough to have slack
(Q = e / sigma - e - p - alpha >= phi + alpha: about 15 s for class 4), a consolidation round
(every 10 s here; 60 s by default) empties mv-a's node: Swarm's start-first update runs the new
container on mv-b's node before the old one stops. A poller asks both nodes' published port
every 0.2 s for the whole move: at least one of them answers each time. The end is checked with
``docker inspect`` on the nodes' own engines. ``idle_s`` is an hour, so the emptied node stays
on (its switch-off is the idle rule's, tests/e2e/test_power_manager_lab.py).

Run under the machine's lab lock: ``flock /tmp/gs-lab.lock python -m pytest
tests/e2e/test_consolidation_lab.py -s``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.e2e.conftest import Lab
from tests.e2e.stack import BUSYBOX, IDLE, Stack, deployed, poll, task_containers
from tests.e2e.test_power_manager_lab import POWER_TOKEN, power_url

pytestmark = pytest.mark.lab
__all__ = ["power_url"]  # the lab's power endpoint fixture, shared

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "0.5", "--node-memory", "1g",
               "--images", "minimal")
PORT = 18093
HTTPD = ["sh", "-c", "mkdir -p /w && echo moved-ok > /w/index.html && "
         f"exec httpd -f -p {PORT} -h /w"]


@pytest.fixture(scope="module")
def stack(lab: Lab, power_url: str) -> Iterator[Stack]:
    env = {"GREENSWARM_POWER": "on", "GREENSWARM_POWER_BACKEND": "lab",
           "GREENSWARM_POWER_IDLE_S": "3600", "GREENSWARM_POWER_CONSOLIDATE_EVERY_S": "10",
           "GREENSWARM_POWER_LAB_URL": power_url, "GREENSWARM_POWER_LAB_TOKEN": POWER_TOKEN}
    with deployed(lab, name="gsmov", extra_env=env) as up:
        yield up


def _answers(address: str) -> bool:
    try:
        with socket.create_connection((address, PORT), timeout=1) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\nHost: lab\r\n\r\n")
            return b"moved-ok" in conn.recv(4096)
    except OSError:
        return False


class Poller:
    """Asks every node's published port every 0.2 s; counts the rounds nobody answered."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.rounds = 0
        self.silent: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.rounds += 1
            if not any(_answers(a) for a in self.addresses):
                self.silent.append(time.monotonic())

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _submit(stack: Stack, fields: dict[str, Any]) -> dict[str, Any]:
    """A class-4 busybox service with ``fields`` (a port, constraints: more than
    ``Stack.submit`` sends)."""
    response = requests.post(stack.url + "/requests", headers=stack.headers(), timeout=60,
                             json={"image": BUSYBOX, "class": 4, "type": "service",
                                   "memory": "32m", **fields})
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    assert answer["request"]["status"] == "running", answer
    return answer


def _moved(stack: Stack, name: str) -> list[dict[str, Any]]:
    return [e for e in stack.request(name)["history"] if e["kind"] == "moved"]


def test_a_service_moves_between_lab_nodes_and_answers_throughout(
        lab: Lab, stack: Stack) -> None:
    a = _submit(stack, {"name": "mv-a", "command": HTTPD, "cpu_shares": 64,
                        "ports": [{"published": PORT, "target": PORT}]})
    source = a["request"]["host"]
    nodes = {n["swarm_node_id"]: n for n in stack.nodes}
    target = next(h for h in nodes if h != source)
    b = _submit(stack, {"name": "mv-b", "command": IDLE, "cpu_shares": 128,
                        "constraints": [f"node.id!={source}"]})
    assert b["request"]["host"] == target, b
    addresses = [n["address"] for n in nodes.values()]
    poll(lambda: _answers(nodes[source]["address"]), 60, "mv-a to answer on its node")
    started = time.monotonic()
    with Poller(addresses) as poller:
        try:
            poll(lambda: bool(_moved(stack, "mv-a")), 240, "mv-a to be moved")
        except AssertionError:
            print("\nGET /power:", stack.get("/power")["switching"])
            raise
        poll(lambda: not task_containers(nodes[source], "mv-a"), 60,
             "mv-a's old container to stop")
        time.sleep(2)  # a few more rounds after the old one stopped
    moved_s = time.monotonic() - started
    [event] = _moved(stack, "mv-a")
    assert (event["host"], event["source"]) == (target, source), event
    assert stack.request("mv-a")["host"] == target
    on_target = task_containers(nodes[target], "mv-a")  # docker inspect on its own engine
    assert len(on_target) == 1 and on_target[0]["State"]["Running"], on_target
    assert task_containers(nodes[source], "mv-a") == []
    assert _answers(nodes[target]["address"])
    assert poller.rounds > 10, poller.rounds
    assert poller.silent == [], f"{len(poller.silent)} of {poller.rounds} rounds unanswered"
    print(f"\nmv-a moved {nodes[source]['name']} -> {nodes[target]['name']} "
          f"{moved_s:.1f} s after it first answered; {poller.rounds} poll rounds, none silent")
    for name in ("mv-a", "mv-b"):
        stack.stop(name)
