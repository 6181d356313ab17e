"""Write genuine request records with the manager of commit e8f305a, and dump them (the fixture
``dump.json`` beside this file; tests/integration/test_record_migrations.py migrates it).

e8f305a's manager wrote free-text history entries (``{"t", "event": text, ...fields}``) and the
status ``killed-and-rescheduled``. This script runs that version's own ``Manager`` (its
scheduling loop, its scheduler and energy policy, its ``RequestRecords`` and ``RedisStore``)
against a real redis-server, and drives it through every situation in which it wrote a history
entry. Only Docker and the node agents are stand-ins (``StandInSwarm``, ``StandInAgents``): they
answer as a Swarm and an agent would, so that the manager's own code writes each entry.

Run from a checkout of e8f305a, with this repository's virtualenv (it has that version's
dependencies), and a redis-server of your own::

    git worktree add --detach /tmp/old e8f305a
    redis-server --port 6390 --save '' --appendonly no &
    PYTHONPATH=/tmp/old .venv/bin/python tests/data/records_e8f305a/make_dump.py \\
        redis://127.0.0.1:6390/0 tests/data/records_e8f305a/dump.json

It flushes that database first. The dump lists every key under the prefixes ``gs`` (the energy
policy), ``sp`` (spread) and ``sw`` (the swarm policy), with its type and value.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import redis

from domain.errors import UnavailableError, ValidationError
from host_registry.redis_store import RedisStore
from manager.agents import CutResult
from manager.core import Manager
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.swarm import NodeInfo, Placement, ServiceInfo, TaskState
from task_registry.api import EndStatus

MIB = 2**20


class StandInSwarm:
    """What e8f305a's SwarmBackend answers, kept in memory: nodes, and one service per task."""

    def __init__(self) -> None:
        self.node_list: list[NodeInfo] = []
        self.created: dict[str, Placement] = {}
        self.ids: dict[str, str] = {}
        self.states: dict[str, ServiceInfo] = {}  # what services() says of a task, when set
        self.refuse: str | None = None  # the next create fails with this message
        self.count = 0

    def add_node(self, node_id: str, cpu: int, memory: int) -> None:
        self.node_list.append(NodeInfo(node_id, f"host-{node_id}", "10.0.0.1", cpu, memory, {}))

    def ping(self) -> bool:
        return True

    def nodes(self, label: str = "", only: frozenset[str] = frozenset()) -> list[NodeInfo]:
        return list(self.node_list)

    def create(self, placement: Placement) -> str:
        if self.refuse is not None:
            message, self.refuse = self.refuse, None
            raise UnavailableError(message)
        self.count += 1
        self.created[placement.task_id] = placement
        self.ids[placement.task_id] = f"svc{self.count:03d}"
        return self.ids[placement.task_id]

    def remove(self, task_id: str) -> bool:
        self.states.pop(task_id, None)
        return self.created.pop(task_id, None) is not None

    def set_state(self, task_id: str, state: TaskState, node_id: str | None,
                  exit_code: int | None = None, message: str = "") -> None:
        """What Swarm says of the task's service from now on."""
        self.states[task_id] = ServiceInfo(self.ids[task_id], f"gs-{task_id}", task_id, state,
                                           node_id, exit_code, message)

    def services(self) -> list[ServiceInfo]:
        return [self.states.get(task_id) or ServiceInfo(
            self.ids[task_id], f"gs-{task_id}", task_id, TaskState.RUNNING, placement.node_id,
            None, "") for task_id, placement in self.created.items()]


class StandInAgents:
    """The node agents: a cut is applied, refused (unreachable), or applied with more memory
    kept than asked (the task uses more)."""

    def __init__(self) -> None:
        self.unreachable: set[str] = set()
        self.keeps: dict[str, int] = {}

    def cut(self, agent_url: str, task_id: str, cpu_shares: int, memory: int) -> CutResult:
        if task_id in self.unreachable:
            raise UnavailableError(f"agent at {agent_url} is unreachable: connection refused")
        return CutResult(cpu_shares, self.keeps.get(task_id, memory))


def body(name: str, cls: int, kind: str, cpu: int, memory: int, queue: bool = False) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "class": cls, "type": kind, "cpu_shares": cpu,
            "memory": memory, "queue": queue}


class Run:
    def __init__(self, client: redis.Redis, prefix: str, policy: str) -> None:
        self.offset = 0.0
        self.swarm = StandInSwarm()
        self.agents = StandInAgents()
        settings = ManagerSettings(policy=policy, redis_prefix=prefix, agent_url="http://agent",
                                   swarm_pending_timeout_s=60.0)
        store = RedisStore(client, settings.classes, settings.bounds, prefix=prefix)
        self.records = RequestRecords(client, prefix)
        self.manager = Manager(settings, store, self.records, self.swarm,  # type: ignore[arg-type]
                               self.agents, clock=lambda: time.time() + self.offset)  # type: ignore[arg-type]
        self.manager.loop.start()

    def sync(self) -> None:
        self.manager.loop.call(self.manager.sync)

    def submit(self, *args: Any, **kwargs: Any) -> str:
        try:
            record, _, _ = self.manager.submit(body(*args, **kwargs))
        except ValidationError as exc:
            raise SystemExit(f"{args[0]}: {exc}") from exc
        return record.status.value

    def close(self) -> None:
        self.manager.loop.stop()


def energy(client: redis.Redis) -> None:
    """The energy policy: every pass, cuts applied / not applied / kept, kills, queues, ends."""
    run = Run(client, "gs", "energy")
    s, m = run.swarm, run.manager
    s.add_node("n1", 1024, 1024 * MIB)
    s.add_node("n2", 1024, 1024 * MIB)
    run.sync()
    print("a", run.submit("a", 3, "job", 600, 600 * MIB))  # simple pass, an empty host
    print("b", run.submit("b", 3, "service", 500, 500 * MIB))  # simple pass, fits unchanged
    print("z", run.submit("z", 3, "service", 1000, 1000 * MIB))  # the other host
    # the cut pass cuts a (its node keeps more memory) and b (its agent is unreachable)
    run.agents.keeps["a"] = 450 * MIB
    run.agents.unreachable.add("b")
    print("c", run.submit("c", 1, "job", 250, 250 * MIB))
    # the kill pass: z's host is busy (EED); d kills z, which waits in the queue
    busy = m.store.task("z").host  # type: ignore[union-attr]
    m.store.update_host_utilization(busy, 0.95, 0.95)
    print("d", run.submit("d", 1, "job", 900, 900 * MIB))
    print("e", run.submit("e", 1, "job", 1000, 1000 * MIB))  # no room: refused
    print("f", run.submit("f", 1, "job", 1000, 1000 * MIB, queue=True))  # queued
    m.stop_request("f")  # stopped while pending
    m.task_ended("d", EndStatus.FINISHED, 0, None, False)  # z runs again
    m.task_ended("a", EndStatus.FAILED, 3, None, False)
    m.task_ended("c", EndStatus.FAILED, 137, None, True)  # out of memory
    m.task_ended("b", EndStatus.FAILED, 1, None, False)  # a service's container exits
    m.task_ended("b", EndStatus.FAILED, 137, None, True)
    m.stop_request("b")  # stopped while running
    s.refuse = "image busybox:nope not found"
    print("j", run.submit("j", 4, "job", 100, 64 * MIB))  # could not start
    print("k", run.submit("k", 4, "service", 100, 64 * MIB))
    m.kill("k")  # killed on request, placed again
    print("l", run.submit("l", 4, "job", 100, 64 * MIB))
    s.created.pop("l")  # its service disappeared
    run.sync()
    print("m", run.submit("m", 4, "job", 100, 64 * MIB))
    print("n", run.submit("n", 4, "job", 100, 64 * MIB))
    s.set_state("m", TaskState.COMPLETE, s.created["m"].node_id, 0)
    s.set_state("n", TaskState.FAILED, s.created["n"].node_id, 2, "task: non-zero exit (2)")
    run.sync()
    print("o", run.submit("o", 4, "service", 100, 64 * MIB))
    # a host leaves the Swarm: its tasks are killed and placed again or queued
    gone = m.store.task("o").host  # type: ignore[union-attr]
    s.node_list = [n for n in s.node_list if n.id != gone]
    run.sync()
    run.offset = 20.0  # past the grace a node must be gone for
    run.sync()
    # the host left is quiet again: the queue's retry places what waits there, for good
    # "killed-and-rescheduled" (they were killed before)
    m.store.update_host_utilization(busy, 0.1, 0.1)
    m.loop.call(m._retry)
    run.close()


def spread(client: redis.Redis) -> None:
    """Another policy: its placements name the policy, not a pass."""
    run = Run(client, "sp", "spread")
    run.swarm.add_node("n1", 1024, 1024 * MIB)
    run.sync()
    print("p", run.submit("p", 2, "service", 200, 128 * MIB))
    print("q", run.submit("q", 2, "job", 900, 128 * MIB))
    run.close()


def swarm(client: redis.Redis) -> None:
    """The 'swarm' policy: handed to Swarm, started by it (on a host of ours, or not), refused,
    never started, ended before it was booked."""
    run = Run(client, "sw", "swarm")
    s = run.swarm
    s.add_node("n1", 1024, 1024 * MIB)
    run.sync()
    for name in ("s1", "s2", "s3", "s5"):
        print(name, run.submit(name, 3, "service" if name != "s5" else "job", 100, 64 * MIB))
    s.refuse = "no such image"
    print("s4", run.submit("s4", 3, "service", 100, 64 * MIB))
    s.set_state("s1", TaskState.RUNNING, "n1")
    s.set_state("s2", TaskState.RUNNING, "elsewhere")
    s.set_state("s3", TaskState.PENDING, None,
                message="no suitable node (insufficient resources on 1 node)")
    s.set_state("s5", TaskState.COMPLETE, "n1", 0)
    run.sync()
    run.offset = 120.0  # past swarm_pending_timeout_s
    run.sync()
    run.close()


def dump(client: redis.Redis, prefixes: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for prefix in prefixes:
        for key in sorted(client.scan_iter(f"{prefix}:*")):
            kind = client.type(key)
            value: Any
            if kind == "hash":
                value = client.hgetall(key)
            elif kind == "list":
                value = client.lrange(key, 0, -1)
            elif kind == "set":
                value = sorted(client.smembers(key))
            elif kind == "zset":
                value = client.zrange(key, 0, -1, withscores=True)
            elif kind == "string":
                value = client.get(key)
            else:
                raise SystemExit(f"{key}: a {kind}, not dumped")
            out[key] = {"type": kind, "value": value}
    return out


def main() -> int:
    url, path = sys.argv[1], sys.argv[2]
    import manager.records
    print(f"the manager of {manager.records.__file__}")  # e8f305a's, not this repository's
    if hasattr(manager.records, "read_event"):
        raise SystemExit("run it with PYTHONPATH set to a checkout of e8f305a")
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushdb()
    energy(client)
    spread(client)
    swarm(client)
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"written_by": "e8f305a", "keys": dump(client, ("gs", "sp", "sw"))}, out,
                  indent=1, sort_keys=True)
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
