"""Consolidation in the live service on the lab (DESIGN 3.15, issue 31 item 2): greenswarm
deployed as users deploy it (compose + stack) with the power manager on (``lab`` backend) moves
a real service from one lab node to the other make-before-break, and the service answers HTTP
throughout the move.

mv-a (class 4, a busybox httpd publishing a host port) is placed first; mv-job (class 4, a job,
constrained off mv-a's node) holds the other node, which is then no candidate (a host with a job
is never emptied). Once mv-a ran long enough to have slack (Q = e / sigma - e - p - alpha >= phi
+ alpha: about 15 s for class 4), a consolidation round (every 10 s here; 60 s by default)
empties mv-a's node: Swarm's start-first update runs the new container on mv-job's node before
the old one stops. A poller asks both nodes' published port every 0.2 s for the whole move: at
least one of them answers each time. The end is checked with ``docker inspect`` on the nodes'
own engines, the job is checked never moved, and the emptied node is then switched off by the
power manager's idle rule (``idle_s`` shortened to 60 s) through the lab backend. The timings
are printed (``-s``).

Run under the machine's lab lock: ``flock /tmp/gs-lab.lock python -m pytest
tests/e2e/test_consolidation_lab.py -s``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest
import requests

from domain.labels import LABEL_TASK
from tests.e2e.conftest import Lab
from tests.e2e.stack import BUSYBOX, IDLE, Stack, deployed, poll, task_containers
from tests.e2e.test_power_manager_lab import POWER_TOKEN, power_url

pytestmark = pytest.mark.lab
__all__ = ["power_url"]  # the lab's power endpoint fixture, shared

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "0.5", "--node-memory", "1g",
               "--images", "minimal")
PORT = 18093
IDLE_S = "60"  # shortened (default 300 s): the emptied node is switched off within the test
CONSOLIDATE_EVERY_S = "10"  # a round every 10 s (default 60 s)
HTTPD = ["sh", "-c", "mkdir -p /w && echo moved-ok > /w/index.html && "
         f"exec httpd -f -p {PORT} -h /w"]


@pytest.fixture(scope="module")
def stack(lab: Lab, power_url: str) -> Iterator[Stack]:
    env = {"GREENSWARM_POWER": "on", "GREENSWARM_POWER_BACKEND": "lab",
           "GREENSWARM_POWER_IDLE_S": IDLE_S,
           "GREENSWARM_POWER_CONSOLIDATE_EVERY_S": CONSOLIDATE_EVERY_S,
           "GREENSWARM_POWER_LAB_URL": power_url, "GREENSWARM_POWER_LAB_TOKEN": POWER_TOKEN}
    with deployed(lab, name="gsmov", extra_env=env) as up:
        yield up


def _answers(address: str) -> bool:
    """One HTTP/1.0 request, the answer read to its end (httpd closes the connection; its
    header and body may come in separate segments)."""
    try:
        with socket.create_connection((address, PORT), timeout=1) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\nHost: lab\r\n\r\n")
            answer = b""
            while len(answer) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                answer += chunk
            return b"moved-ok" in answer
    except OSError:
        return False


def _swarm_tasks(stack: Stack, name: str) -> list[str]:
    """The Swarm tasks of request ``name``'s service (for a failure's message)."""
    client = docker.DockerClient(base_url=stack.engine_url, timeout=30)
    try:
        out = []
        for service in client.services.list(filters={"label": f"{LABEL_TASK}={name}"}):
            out.append(f"service update status: {service.attrs.get('UpdateStatus')}")
            for t in service.tasks():
                status = t.get("Status", {})
                out.append(f"{t.get('CreatedAt')} node {t.get('NodeID')} desired "
                           f"{t.get('DesiredState')} state {status.get('State')} at "
                           f"{status.get('Timestamp')} {status.get('Err') or ''}")
        return out
    finally:
        client.close()


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
                self.silent.append(time.time())

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


def _kinds(stack: Stack, name: str, *kinds: str) -> list[dict[str, Any]]:
    return [e for e in stack.request(name)["history"] if e["kind"] in kinds]


def _power_state(stack: Stack, host_id: str) -> str:
    return str(stack.host(host_id)["power"]["state"])


def test_a_service_moves_between_lab_nodes_and_answers_throughout(
        lab: Lab, stack: Stack) -> None:
    a = _submit(stack, {"name": "mv-a", "command": HTTPD, "cpu_shares": 64,
                        "ports": [{"published": PORT, "target": PORT}]})
    source = a["request"]["host"]
    nodes = {n["swarm_node_id"]: n for n in stack.nodes}
    target = next(h for h in nodes if h != source)
    # a job on the other node: that node is no candidate (a host with a job is never emptied)
    # and the job is never moved
    b = _submit(stack, {"name": "mv-job", "type": "job", "command": IDLE, "cpu_shares": 96,
                        "constraints": [f"node.id!={source}"]})
    assert b["request"]["host"] == target, b
    addresses = [n["address"] for n in nodes.values()]
    poll(lambda: _answers(nodes[source]["address"]), 60, "mv-a to answer on its node")
    answered, answered_wall = time.monotonic(), time.time()
    with Poller(addresses) as poller:
        try:
            poll(lambda: bool(_kinds(stack, "mv-a", "moved", "move-undone")), 240,
                 "mv-a's move to end")
        except AssertionError:
            print("\nGET /power:", stack.get("/power")["switching"])
            print("mv-a:", stack.request("mv-a")["history"])
            print(stack.compose("logs", "--no-color", "--tail", "200", "manager").stdout)
            raise
        poll(lambda: not task_containers(nodes[source], "mv-a"), 60,
             "mv-a's old container to stop")
        old_stopped = time.monotonic()
        time.sleep(2)  # a few more rounds after the old one stopped
    history = stack.request("mv-a")["history"]
    [started] = [e for e in history if e["kind"] == "move-started"]
    [event] = [e for e in history if e["kind"] in ("moved", "move-undone")]
    assert event["kind"] == "moved", history
    assert (event["host"], event["source"]) == (target, source), event
    assert (started["host"], started["target"]) == (source, target), started
    assert stack.request("mv-a")["host"] == target
    on_target = task_containers(nodes[target], "mv-a")  # docker inspect on its own engine
    assert len(on_target) == 1 and on_target[0]["State"]["Running"], on_target
    assert task_containers(nodes[source], "mv-a") == []
    assert _answers(nodes[target]["address"])
    assert poller.rounds > 10, poller.rounds
    assert poller.silent == [], (
        f"{len(poller.silent)} of {poller.rounds} rounds unanswered, at (s after move-started) "
        f"{[round(t - started['t'], 1) for t in poller.silent]}; moved at "
        f"{event['t'] - started['t']:.1f} s; tasks:\n" + "\n".join(_swarm_tasks(stack, "mv-a")))
    job = stack.request("mv-job")
    assert job["host"] == target and not [e for e in job["history"] if "move" in e["kind"]]

    # the emptied node is switched off by the power manager's idle rule (backend lab)
    poll(lambda: _power_state(stack, source) == "off", 240,
         f"{nodes[source]['name']} to be switched off")
    off_at = time.monotonic()
    moves = stack.get("/power")["switching"]["moves"]
    assert moves == {"started": 1, "moved": 1, "undone": 0}, moves
    metrics = requests.get(stack.url + "/metrics", headers=stack.headers(), timeout=30).text
    assert 'greenswarm_consolidation_moves_total{result="moved"} 1.0' in metrics
    name_of = {h: n["name"] for h, n in nodes.items()}
    print(f"\nmv-a moved {name_of[source]} -> {name_of[target]}, class 4 with slack after "
          f"about 15 s, a consolidation round every {CONSOLIDATE_EVERY_S} s:\n"
          f"  first answer on {name_of[source]} -> round that started the move (move-started):"
          f" {started['t'] - answered_wall:.1f} s\n"
          f"  move-started -> moved (Swarm start-first, new task running on the target): "
          f"{event['t'] - started['t']:.1f} s\n"
          f"  first answer -> old container gone: {old_stopped - answered:.1f} s\n"
          f"  old container gone -> {name_of[source]} switched off (idle_s {IDLE_S}): "
          f"{off_at - old_stopped:.1f} s\n"
          f"  serving: {poller.rounds} polls every 0.2 s, {len(poller.silent)} unanswered "
          f"(gap 0 s)")
    for name in ("mv-a", "mv-job"):
        stack.stop(name)
