"""High availability with real processes (DESIGN 13; issue 32 items 1 and 2): two
``greenswarm manager`` processes find Redis through three real Sentinels (a real primary and
replica underneath); one leads. The leader is paused (SIGSTOP) and later killed (SIGKILL), and
the Redis primary is killed: each time one manager leads again within the lease, and every
submission that was accepted is still there.

The managers are given no Docker engine (a socket that does not exist): the Swarm is not
under test here, and no engine is touched, so this runs in the fast suite. One host is written
into the registry beforehand by the registry's own code (what a Swarm node's admission
writes), so that submissions are accepted; their services cannot be created without an
engine, which is enough to see that they were accepted, by whom, and kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from domain.model import HostSpec
from host_registry.connection import RedisEndpoint
from host_registry.redis_store import RedisStore
from lab.processes import free_port, stop_child, wait_for
from tests.support.sentinels import ReplicatedRedis, replicated_redis

pytestmark = pytest.mark.redis
TOKEN = "ha-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEASE_S = 2.0
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ManagerProcess:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def health(self) -> dict[str, Any] | None:
        try:  # 503 (no Docker engine here) carries the same body
            answer: dict[str, Any] = requests.get(self.url + "/healthz", headers=AUTH,
                                                  timeout=2).json()
        except (requests.RequestException, ValueError):
            return None
        return answer

    def role(self) -> str | None:
        health = self.health()
        return None if health is None else health.get("role")

    def submit(self, name: str) -> requests.Response:
        return requests.post(self.url + "/requests", headers=AUTH, timeout=30, json={
            "image": "busybox", "name": name, "class": 3, "type": "service",
            "cpu_shares": 10, "memory": "8m"})

    def record(self, name: str) -> requests.Response:
        return requests.get(f"{self.url}/requests/{name}", headers=AUTH, timeout=10)


def _spawn(cluster: ReplicatedRedis, log_dir: Path, name: str) -> ManagerProcess:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GREENSWARM_TOKEN": TOKEN,
           "GREENSWARM_REDIS_URL": "redis://127.0.0.1:1/0",  # the Sentinels say where
           "GREENSWARM_REDIS_SENTINELS": cluster.sentinels,
           "GREENSWARM_REDIS_MASTER": cluster.master, "GREENSWARM_REDIS_PREFIX": "ha",
           "GREENSWARM_REDIS_WAIT_REPLICAS": "1",
           "GREENSWARM_DOCKER_URL": f"unix://{log_dir}/no-docker.sock",
           "GREENSWARM_LEADER_LEASE_S": str(LEASE_S), "GREENSWARM_LEADER_RENEW_S": "0.2",
           "GREENSWARM_ADVERTISE_URL": f"http://127.0.0.1:{port}",
           "GREENSWARM_SYNC_INTERVAL_S": "1", "GREENSWARM_RETRY_INTERVAL_S": "1"}
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child's
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "manager", "--listen", f"127.0.0.1:{port}"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    manager = ManagerProcess(port, process)
    wait_for(lambda: process.poll() is not None or manager.health() is not None, 30.0,
             f"manager {name} to answer")
    assert process.poll() is None, (log_dir / f"{name}.log").read_text()
    return manager


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[ReplicatedRedis, list[ManagerProcess]]]:
    with replicated_redis() as cluster:
        store = RedisStore.connect(RedisEndpoint("redis://127.0.0.1:1/0", cluster.sentinels,
                                                 cluster.master), prefix="ha")
        store.add_host(HostSpec("n1", 2048, 2**30))
        store.close()
        managers: list[ManagerProcess] = []
        try:
            managers.append(_spawn(cluster, tmp_path, "a"))
            managers.append(_spawn(cluster, tmp_path, "b"))
            yield cluster, managers
        finally:
            for manager in managers:
                if manager.process.poll() is None:
                    os.kill(manager.process.pid, signal.SIGCONT)
                stop_child(manager.process, timeout_s=10.0)


def _leader(managers: list[ManagerProcess]) -> ManagerProcess | None:
    leading = [m for m in managers if m.process.poll() is None and m.role() == "leader"]
    assert len(leading) <= 1, "two managers lead at once"
    return leading[0] if leading else None


def _accepted(manager: ManagerProcess, name: str, accepted: list[str]) -> None:
    answer = manager.submit(name)
    assert answer.status_code in (201, 202), answer.text
    accepted.append(name)


def _takeover(managers: list[ManagerProcess], old: ManagerProcess, what: str) -> ManagerProcess:
    started = time.monotonic()
    others = [m for m in managers if m is not old]  # a paused one would hold each poll up
    wait_for(lambda: _leader(others) is not None, LEASE_S + 8.0,
             f"another manager to lead after {what}", interval_s=0.1)
    print(f"{what}: another manager leads after {time.monotonic() - started:.2f} s "
          f"(lease {LEASE_S} s)")
    new = _leader(others)
    assert new is not None
    return new


def test_managers_and_redis_fail_over(setup: tuple[ReplicatedRedis, list[ManagerProcess]]
                                      ) -> None:
    cluster, managers = setup
    wait_for(lambda: _leader(managers) is not None, 10.0, "a leader")
    leader = _leader(managers)
    assert leader is not None
    standby = next(m for m in managers if m is not leader)
    assert standby.role() == "standby" and standby.health()["leader"] == leader.url  # type: ignore[index]
    accepted: list[str] = []
    _accepted(standby, "through-the-standby", accepted)  # forwarded to the leader

    os.kill(leader.process.pid, signal.SIGSTOP)  # paused: no renewal, no goodbye
    new = _takeover(managers, leader, "the leader paused")
    assert new is standby
    _accepted(new, "after-the-pause", accepted)
    os.kill(leader.process.pid, signal.SIGCONT)  # wakes up: finds it no longer leads
    wait_for(lambda: leader.role() == "standby", 5.0, "the former leader to stand by")
    _accepted(leader, "through-the-former-leader", accepted)

    old_primary = cluster.primary_port()
    assert old_primary is not None
    cluster.kill(old_primary)  # the Redis primary's machine dies
    killed_at = time.monotonic()
    wait_for(lambda: cluster.primary_port() not in (None, old_primary), 30.0,
             "the Sentinels to promote the replica")
    wait_for(lambda: new.submit("after-redis-failover").status_code in (201, 202), 30.0,
             "a submission to be accepted after the Redis failover", interval_s=0.2)
    accepted.append("after-redis-failover")
    print(f"the Redis primary killed: submissions accepted again after "
          f"{time.monotonic() - killed_at:.2f} s")

    current = _leader(managers)
    assert current is not None
    current.process.kill()  # the leader's machine dies
    current.process.wait(timeout=10)
    survivor = _takeover(managers, current, "the leader killed")
    _accepted(survivor, "after-the-kill", accepted)
    for name in accepted:  # nothing accepted was lost, and every manager reads it
        answer = survivor.record(name)
        assert answer.status_code == 200, (name, answer.text)
