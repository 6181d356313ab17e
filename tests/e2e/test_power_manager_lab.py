"""The power manager in the live service on the lab (DESIGN 3.15, issue 31 item 5): greenswarm
deployed as users deploy it (compose + stack), with ``GREENSWARM_POWER=on`` and the ``lab``
backend, switches an empty node off for real (drained in Swarm, its engine stopped by the lab's
power endpoint) and keeps it as a host switched off, not a lost node; a request that only that
node would take (any other placement would kill) waits for it while it is switched on again
(engine started, node Ready, active), and is placed there. idle_s is shortened to 20 s for the
test (the default is 300 s). Timings are printed (``pytest -s``).

Run under the machine's lab lock: ``flock /tmp/gs-lab.lock python -m pytest
tests/e2e/test_power_manager_lab.py -s``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from lab.processes import free_port
from tests.e2e.conftest import REPO, Lab, lab_cli
from tests.e2e.stack import IDLE, Stack, deployed, poll

pytestmark = pytest.mark.lab

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "0.5", "--node-memory", "1g",
               "--images", "minimal")
POWER_TOKEN = "e2e-power-manager-token"
IDLE_S = 20.0


@pytest.fixture(scope="module")
def power_url(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The lab's power endpoint, served by a process of this test (stopped by its pid)."""
    token_file = tmp_path_factory.mktemp("power") / "token"
    token_file.write_text(POWER_TOKEN)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "lab", "power", "serve", "--listen", f"127.0.0.1:{port}",
         "--token-file", str(token_file)], cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        poll(lambda: requests.get(f"{url}/healthz", timeout=1).ok, 20, "the power endpoint",
             interval_s=0.1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(lab: Lab, power_url: str) -> Iterator[Stack]:
    env = {"GREENSWARM_POWER": "on", "GREENSWARM_POWER_BACKEND": "lab",
           "GREENSWARM_POWER_IDLE_S": str(IDLE_S), "GREENSWARM_POWER_LAB_URL": power_url,
           "GREENSWARM_POWER_LAB_TOKEN": POWER_TOKEN}
    with deployed(lab, name="gspow", extra_env=env) as up:
        yield up


def _lab_power(name: str) -> str:
    done = lab_cli("power", "status", name)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads(done.stdout)["power"])


def _power(stack: Stack, host_id: str) -> dict[str, Any]:
    power: dict[str, Any] = stack.host(host_id)["power"]
    return power


def test_an_idle_node_is_switched_off_for_real_and_on_again_for_a_request(
        lab: Lab, stack: Stack) -> None:
    started = time.monotonic()
    a = stack.submit("pm-a", 3, "service", 128, "64m")  # stays: the hosts left on hold it
    busy = a["request"]["host"]
    idle_node = next(n for n in stack.nodes if n["swarm_node_id"] != busy)
    idle_id = idle_node["swarm_node_id"]
    poll(lambda: _power(stack, idle_id)["state"] == "off", 240,
         f"{idle_node['name']} to be switched off")
    off_s = time.monotonic() - started
    assert _lab_power(idle_node["name"]) == "off"  # its engine is really stopped
    status = lab_cli("status")
    assert status.returncode == 0 and "off" in status.stdout, status.stdout
    time.sleep(20)  # past the manager's NODE_GRACE_S (15 s): a Down node would be lost now
    hosts = {h["id"]: h for h in stack.hosts()}
    assert hosts[idle_id]["power"]["state"] == "off", hosts[idle_id]
    assert stack.healthz()["nodes_down"] == []  # switched off: not a node down

    # class 1, 480 shares: the busy node (512 shares, 128 booked by a class-3 task) takes it
    # only by killing pm-a; the node switched off would take it: it waits for that node
    asked = time.monotonic()
    response = requests.post(stack.url + "/requests", headers=stack.headers(), timeout=60, json={
        "image": "greenswarm/busybox:latest", "name": "pm-b", "class": 1, "type": "service",
        "cpu_shares": 480, "memory": "64m", "command": IDLE, "queue": False})
    assert response.status_code == 201, response.text
    assert response.json()["request"]["status"] == "pending", response.json()
    poll(lambda: stack.request("pm-b")["status"] == "running", 240, "pm-b to run")
    on_s = time.monotonic() - asked
    b = stack.request("pm-b")
    assert b["host"] == idle_id, b
    assert _power(stack, idle_id)["state"] == "on"
    assert _lab_power(idle_node["name"]) == "on"
    a_now = stack.request("pm-a")
    assert (a_now["status"], a_now["kills"]) == ("running", 0), a_now
    events = stack.get("/events?limit=1000")["events"]
    kinds = [e["kind"] for e in events if e.get("host") == idle_id and not e["request"]]
    assert kinds[:4] == ["switching-off", "switched-off", "switching-on", "switched-on"], kinds
    print(f"\nswitched off {off_s:.1f} s after the start (idle_s {IDLE_S:g}); pm-b placed "
          f"{on_s:.1f} s after it was asked for (switch on, Ready, active, placed)")
    for name in ("pm-a", "pm-b"):
        stack.stop(name)

