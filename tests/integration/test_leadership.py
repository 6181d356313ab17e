"""Several managers, one leader (DESIGN 13; issue 32 item 2): two real managers (their apps
served over real HTTP, their loops, timers and leadership threads) on one real Redis.

The Swarm is the in-memory stand-in of tests/support/standin_swarm.py (both managers share
it, as two managers share one Swarm): a Swarm is not what is under test here, the lease is.
A leader that is paused stops renewing its lease; here the pause is of its leadership thread
(it stops renewing and is not told), and test_a_paused_process_is_fenced pauses a real
process holding the lease with SIGSTOP.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.serving import BaseWSGIServer, make_server

from domain.errors import FencedError
from domain.model import HostSpec
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer, free_port, wait_for
from manager.agents import AgentClient
from manager.app import create_app
from manager.core import Manager
from manager.leadership import LeaderView, Lease, Role, holder_id
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from tests.support.standin_swarm import StandInSwarm

pytestmark = pytest.mark.redis
TOKEN = "leader-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEASE_S = 2.0
RENEW_S = 0.2
_numbers = itertools.count()


@dataclass
class Running:
    manager: Manager
    store: RedisStore
    server: BaseWSGIServer
    url: str

    def get(self, path: str, auth: bool = True) -> requests.Response:
        return requests.get(self.url + path, headers=AUTH if auth else {}, timeout=10)

    def post(self, path: str, body: object) -> requests.Response:
        return requests.post(self.url + path, json=body, headers=AUTH, timeout=30)

    def role(self) -> str:
        return str(self.get("/healthz").json()["role"])

    def pause(self) -> None:
        """Its leadership thread stops renewing, as in a pause, and nobody tells it."""
        self.manager.leadership._stop.set()
        self.manager.leadership._thread.join(timeout=5)

    def stop(self) -> None:
        self.manager.stop()
        self.server.shutdown()
        self.store.close()


def start_manager(redis_url: str, swarm: StandInSwarm, prefix: str) -> Running:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = ManagerSettings(token=TOKEN, redis_prefix=prefix, listen_port=port,
                             advertise_url=url, leader_lease_s=LEASE_S,
                             leader_renew_s=RENEW_S, sync_interval_s=0.5)
    store = RedisStore.from_url(redis_url, config.classes, config.bounds, prefix)
    manager_ = Manager(config, store, store.sibling(RequestRecords), swarm,  # type: ignore[arg-type]
                       AgentClient(TOKEN))
    server = make_server("127.0.0.1", port, create_app(manager_), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    manager_.start()
    return Running(manager_, store, server, url)


@pytest.fixture
def pair(redis_srv: RedisServer) -> Iterator[tuple[Running, Running]]:
    swarm = StandInSwarm()
    swarm.add_node("n1", "h1")
    prefix = f"lead{next(_numbers)}"
    first = start_manager(redis_srv.url, swarm, prefix)
    second = start_manager(redis_srv.url, swarm, prefix)
    try:
        yield first, second
    finally:
        for running in (second, first):
            running.stop()
        RedisStore.from_url(redis_srv.url, prefix=prefix).flush()


def _submit(running: Running, name: str) -> requests.Response:
    return running.post("/requests", {"image": "busybox", "name": name, "class": 3,
                                      "type": "service", "cpu_shares": 10, "memory": "8m"})


def _metric(running: Running) -> float:
    for line in running.get("/metrics").text.splitlines():
        if line.startswith("greenswarm_manager_leader "):
            return float(line.split()[1])
    raise AssertionError("no greenswarm_manager_leader in /metrics")


def test_one_leader_and_the_standby_forwards_writes(pair: tuple[Running, Running]) -> None:
    first, second = pair
    assert (first.role(), second.role()) == ("leader", "standby")
    assert (_metric(first), _metric(second)) == (1.0, 0.0)
    assert second.get("/healthz").json()["leader"] == first.url
    assert "leader" not in second.get("/healthz", auth=False).json()  # the address: token only
    wait_for(lambda: first.get("/hosts").json(), 10.0, "the leader to reconcile the node")
    # a write sent to the standby is done by the leader; reads are served by both
    answer = _submit(second, "via-standby")
    assert answer.status_code == 201, answer.text
    for running in (first, second):
        assert running.get("/requests/via-standby").json()["status"] == "running"


def test_the_standby_takes_over_within_the_lease(pair: tuple[Running, Running]) -> None:
    first, second = pair
    assert first.role() == "leader"
    wait_for(lambda: first.get("/hosts").json(), 10.0, "the leader to reconcile the node")
    first.pause()
    paused_at = time.monotonic()
    wait_for(lambda: second.role() == "leader", LEASE_S + 2 * RENEW_S + 1.0,
             "the standby to take the lease over")
    print(f"takeover after {time.monotonic() - paused_at:.2f} s (lease {LEASE_S} s)")
    answer = _submit(second, "after-takeover")
    assert answer.status_code == 201, answer.text
    assert second.get("/requests/after-takeover").json()["status"] == "running"
    # the paused former leader still believes it leads; its write carries the old token
    assert first.manager.leadership.is_leader
    before = {task.id for task in first.store.tasks()}
    with pytest.raises(FencedError):
        first.store.add_host(HostSpec("h-stale", 1, 1))
    refused = _submit(first, "from-the-paused-leader")
    assert refused.status_code == 503, refused.text
    # nothing of it was written: not its record, not a booking
    assert second.get("/requests/from-the-paused-leader").status_code == 404
    assert {task.id for task in second.store.tasks()} == before
    assert "h-stale" not in {view.id for view in second.store.all_hosts()}


def test_a_stopped_leader_hands_over_at_once(pair: tuple[Running, Running]) -> None:
    first, second = pair
    first.manager.leadership.stop()  # a manager that stops gives the lease up
    wait_for(lambda: second.role() == "leader", 3 * RENEW_S + 1.0, "the standby to lead")


# A process that holds the lease and, when told (a line on stdin), writes with its token.
HOLDER = """
import sys
from domain.model import HostSpec
from host_registry.redis_store import RedisStore
from manager.leadership import Lease, Leadership
store = RedisStore.from_url(sys.argv[1], prefix=sys.argv[2])
lease = store.sibling(lambda c, p: Lease(c, p, "holder", "http://holder", float(sys.argv[3])))
leadership = Leadership(lease, 0.2, float(sys.argv[3]), store.fence, lambda: None)
leadership.start()
print("leader" if leadership.is_leader else "standby", flush=True)
sys.stdin.readline()
try:
    store.add_host(HostSpec("h-from-paused", 1, 1))
    print("written", flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
"""


def test_a_paused_process_is_fenced(redis_srv: RedisServer) -> None:
    prefix = f"lead{next(_numbers)}"
    root = Path(__file__).resolve().parents[2]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, redis_srv.url, prefix, str(LEASE_S)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root,
                              env={**os.environ, "PYTHONPATH": str(root)})
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == b"leader"
        os.kill(holder.pid, signal.SIGSTOP)  # a real pause: no renewal, no warning
        lease = store.sibling(lambda c, p: Lease(c, p, holder_id(), "http://b", LEASE_S))
        started = time.monotonic()
        held: tuple[bool, int, Any] = lease.hold()
        while not held[0] and time.monotonic() - started < LEASE_S + 2.0:
            time.sleep(0.1)
            held = lease.hold()
        assert held[0], "the lease of the paused holder never expired"
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write(b"write\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == b"FencedError"
        assert "h-from-paused" not in {view.id for view in store.all_hosts()}
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait(timeout=10)
        store.flush()
        store.close()


def test_a_dashboard_login_through_the_standby_works_on_both(
        pair: tuple[Running, Running]) -> None:
    """The login is a write: relayed to the leader, its cookie relayed back; the session is in
    the shared Redis, so the standby takes it too."""
    first, second = pair
    browser = requests.Session()
    login = browser.post(second.url + "/dashboard/login", json={"token": TOKEN}, timeout=10)
    assert login.status_code == 200, login.text
    assert browser.cookies, "the leader's Set-Cookie did not come back through the standby"
    for running in (second, first):
        assert browser.get(running.url + "/healthz", timeout=10).json()["details"] is True


def test_a_leader_whose_name_does_not_resolve_is_not_waited_for(
        pair: tuple[Running, Running], monkeypatch: pytest.MonkeyPatch) -> None:
    """A standby relaying to a leader whose task died: Swarm's DNS takes about 10 s to give up
    on the dead task's name, and relays stuck on it held every worker thread of the standby
    past the next leader's election (the lab's chaos test). Stand-in: a slow resolution cannot
    be had for real in the fast suite, so the resolver is made to hang on one made-up name."""
    first, second = pair
    wait_for(lambda: first.get("/hosts").json(), 10.0, "the leader to reconcile the node")
    slow_name = "dead-leader.invalid"
    real = socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == slow_name:
            time.sleep(5.0)
            raise socket.gaierror("no such name")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    second.pause()  # its view stays as set here: the lease names the dead leader
    second.manager.leadership._view = LeaderView(Role.STANDBY, f"http://{slow_name}:8080")
    started = time.monotonic()
    answer = _submit(second, "via-a-dead-name")
    took = time.monotonic() - started
    assert answer.status_code == 503, answer.text
    assert "does not resolve" in answer.json()["message"]
    assert took < 3.0, took
