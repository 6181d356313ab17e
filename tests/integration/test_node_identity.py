"""Node identity (DESIGN 9, issue 28 item 3) on the real manager app and a real Redis, and on the
standalone registry and the node agent's app: each node's credential writes its own host's
utilization, power and tasks and nothing else (403); the operator's token is 403 on those
measurements and still manages requests; the agent takes only the manager's word for its node.

The audit's call: ``PUT /registry/hosts/<id>/utilization {"memory_util": 0.96}`` with the
operator's token turned a node EED. The manager is built as ``greenswarm manager`` builds it,
its scheduling loop running; it is not reconciled with a Swarm (hosts are added to its store as
the Swarm sync adds them), and nothing here places a container."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from domain.credentials import manager_word, node_credential, node_secret_from_token
from domain.model import HostSpec
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer
from manager.agents import AgentClient
from manager.app import create_app
from manager.core import Manager
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.swarm import SwarmBackend
from task_registry.agent import Agent, AgentSettings, ManagerLink
from task_registry.agent_app import create_agent_app
from task_registry.standalone import create_registry_app

pytestmark = pytest.mark.redis
TOKEN = "operator-token"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
NODE_SECRET = "nodes-secret"
GIB = 2**30
_numbers = itertools.count()


def node(host_id: str, secret: str = NODE_SECRET) -> dict[str, str]:
    return {"Authorization": f"Bearer {node_credential(secret, host_id)}"}


@dataclass
class Cluster:
    client: FlaskClient
    store: RedisStore


def _cluster(app: Flask, store: RedisStore, records: RequestRecords | None = None) -> Cluster:
    """Hosts n1 and n2 (as the Swarm sync books them) and task t1 on n1 (a request the
    manager knows, placed by a scheduler's call)."""
    for host_id in ("n1", "n2"):
        store.add_host(HostSpec(host_id, 2048, 4 * GIB, f"10.0.0.{host_id[1]}"), 0.1, 0.1)
    if records is not None:
        records.create("t1", {"image": "busybox", "class": 4, "type": "job",
                              "cpu_shares": 100, "memory": GIB})
    cluster = Cluster(app.test_client(), store)
    placed = cluster.client.post("/registry/placements", headers=OPERATOR, json={
        "request": {"id": "t1", "class": 4, "type": "job", "cpu_shares": 100, "memory": GIB},
        "host": "n1"})
    assert placed.status_code == 201, placed.get_json()
    return cluster


@pytest.fixture
def manager_app(redis_srv: RedisServer) -> Iterator[Cluster]:
    prefix = f"ident{next(_numbers)}"
    settings = ManagerSettings(token=TOKEN, node_secret=NODE_SECRET, redis_prefix=prefix)
    store = RedisStore.from_url(redis_srv.url, settings.classes, settings.bounds, prefix)
    records = store.sibling(RequestRecords)
    manager = Manager(settings, store, records,
                      SwarmBackend("unix:///nonexistent.sock", f"{prefix}-"),
                      AgentClient(settings.nodes_secret))
    manager.loop.start()  # the handlers' work runs there; no Swarm reconciliation
    try:
        yield _cluster(create_app(manager), store, records)
    finally:
        manager.loop.stop()
        store.flush()


@pytest.fixture
def registry_app(redis_srv: RedisServer) -> Iterator[Cluster]:
    """``greenswarm registry``'s app: by default its node secret is derived from the token."""
    store = RedisStore.from_url(redis_srv.url, prefix=f"ident{next(_numbers)}")
    try:
        yield _cluster(create_registry_app(store, TOKEN), store, store.sibling(RequestRecords))
    finally:
        store.flush()


def host(cluster: Cluster, host_id: str) -> Any:
    return cluster.store.host(host_id)


# -- the manager: measurements are the nodes' -------------------------------------------------


def test_the_audits_call_with_the_operators_token_is_403_and_changes_nothing(
    manager_app: Cluster,
) -> None:
    client = manager_app.client
    before = host(manager_app, "n1")
    answer = client.put("/registry/hosts/n1/utilization", headers=OPERATOR,
                        json={"memory_util": 0.96})
    assert answer.status_code == 403, answer.get_json()
    assert answer.get_json()["error"] == "forbidden"
    assert "node" in answer.get_json()["message"]
    assert host(manager_app, "n1") == before
    assert host(manager_app, "n1").region.value == "LEE"


def test_a_node_writes_its_own_hosts_utilization_and_power_and_no_other_hosts(
    manager_app: Cluster,
) -> None:
    client = manager_app.client
    own = client.put("/registry/hosts/n1/utilization", headers=node("n1"),
                     json={"cpu_util": 0.4, "memory_util": 0.3, "power_w": 55.0})
    assert own.status_code == 200 and own.get_json()["memory_util"] == 0.3
    before = host(manager_app, "n1")
    for headers in (node("n2"), OPERATOR):
        for body in ({"memory_util": 0.96}, {"measured_at": 1.0}, {"cpu_util": 0.9, "power_w": 9.0}):
            refused = client.put("/registry/hosts/n1/utilization", headers=headers, json=body)
            assert refused.status_code == 403, (headers, body)
        # registration (message 11) carries utilization too
        refused = client.post("/registry/hosts", headers=headers, json={
            "id": "n1", "cpu_capacity": 2048, "memory_capacity": 4 * GIB, "memory_util": 0.96})
        assert refused.status_code == 403
    assert host(manager_app, "n1") == before
    hosts = {h["id"]: h for h in client.get("/hosts", headers=OPERATOR).get_json()}
    assert hosts["n1"]["power"]["measured_w"] == 55.0  # n1's own reading, nobody else's
    again = client.post("/registry/hosts", headers=node("n1"), json={
        "id": "n1", "address": "10.0.0.1", "cpu_capacity": 2048, "memory_capacity": 4 * GIB,
        "cpu_util": 0.2, "memory_util": 0.2})
    assert again.status_code == 200 and again.get_json()["memory_util"] == 0.2


def test_a_node_writes_only_the_tasks_booked_on_its_host(manager_app: Cluster) -> None:
    client, store = manager_app.client, manager_app.store
    batch = {"host": "n1", "tasks": [{"id": "t1", "cpu_util": 0.5, "memory_util": 0.25}]}
    for headers in (node("n2"), OPERATOR):  # another host's batch, and the token
        assert client.put("/registry/tasks/utilization", headers=headers,
                          json=batch).status_code == 403
    # n2's own batch naming n1's task: not written, listed as unknown (the race of a task
    # that just moved is not an error)
    foreign = client.put("/registry/tasks/utilization", headers=node("n2"),
                         json={**batch, "host": "n2"})
    assert foreign.get_json() == {"updated": [], "unknown": ["t1"]}
    task = store.task("t1")
    assert task is not None and task.cpu_util == 0.0
    own = client.put("/registry/tasks/utilization", headers=node("n1"), json=batch)
    assert own.get_json() == {"updated": ["t1"], "unknown": []}
    task = store.task("t1")
    assert task is not None and (task.cpu_util, task.memory_util) == (0.5, 0.25)
    # message 6: what a cut really left, from the node it runs on (or from a scheduler)
    resized = {"cpu_shares": 90, "memory": GIB}
    assert client.put("/registry/tasks/t1/resources", headers=node("n2"),
                      json=resized).status_code == 403
    assert client.put("/registry/tasks/t1/resources", headers=node("n2"),
                      json=resized).get_json()["error"] == "forbidden"
    assert client.put("/registry/tasks/t1/resources", headers=node("n1"),
                      json=resized).status_code == 200
    assert client.put("/registry/tasks/t1/resources", headers=OPERATOR,
                      json={"cpu_shares": 80, "memory": GIB}).status_code == 200
    assert client.put("/registry/tasks/nope/resources", headers=node("n1"),
                      json=resized).status_code == 404
    # message 10: the end of a task, from its own node's agent only
    end = {"status": "finished", "exit_code": 0}
    for headers in (node("n2"), OPERATOR):
        assert client.post("/registry/tasks/t1/end", headers=headers, json=end).status_code == 403
    assert store.task("t1") is not None
    # n1's own report passes; the manager then removes the job's Swarm service, and there is
    # no Swarm here (503): the live tests see the agents' reports end tasks
    ended = client.post("/registry/tasks/t1/end", headers=node("n1"), json=end)
    assert ended.status_code == 503 and "Docker" in ended.get_json()["message"]
    # a task booked nowhere: nothing to end, for any node (a stale report)
    stale = client.post("/registry/tasks/nope/end", headers=node("n2"), json=end)
    assert stale.status_code == 200 and stale.get_json()["ended"] is False


def test_a_node_credential_reads_its_bookings_and_manages_nothing(manager_app: Cluster) -> None:
    client = manager_app.client
    n1 = node("n1")
    assert client.get("/registry/tasks/t1", headers=n1).get_json()["host"] == "n1"
    assert client.get("/registry/hosts/n1", headers=n1).status_code == 200
    refused = [
        ("GET", "/requests", None), ("GET", "/hosts", None), ("GET", "/registry/hosts", None),
        ("GET", "/metrics", None), ("GET", "/openapi.json", None),
        ("POST", "/requests", {"image": "x", "cpu_shares": 2, "memory": "8m", "type": "job",
                               "class": 1}),
        ("DELETE", "/requests/t1", None), ("DELETE", "/registry/hosts/n2", None),
        ("POST", "/registry/tasks/t1/kill", None), ("DELETE", "/registry/tasks/t1", None),
        ("POST", "/registry/placements", {"request": {"id": "t9", "class": 4, "type": "job",
                                                      "cpu_shares": 2, "memory": 1},
                                          "host": "n1"}),
        ("HEAD", "/registry/tasks/t1", None),
    ]
    for method, path, body in refused[:-1]:
        answer = client.open(path, method=method, headers=n1, json=body)
        assert answer.status_code == 403, (method, path, answer.status_code)
        assert answer.get_json()["error"] == "forbidden"
    assert client.open("/registry/tasks/t1", method="HEAD", headers=n1).status_code == 200
    assert manager_app.store.task("t1") is not None
    assert len(list(manager_app.store.all_hosts())) == 2


def test_a_forged_or_foreign_credential_is_401(manager_app: Cluster) -> None:
    client = manager_app.client
    path, body = "/registry/hosts/n1/utilization", {"cpu_util": 0.9}
    for headers in (node("n1", "another secret"), node("n1", TOKEN),
                    {"Authorization": f"Bearer {node_credential(NODE_SECRET, 'n1')[:-2]}"},
                    {"Authorization": node_credential(NODE_SECRET, "n1")}):
        answer = client.put(path, headers=headers, json=body)
        assert answer.status_code == 401, headers
    # the manager's word to an agent is no credential at the manager
    word = manager_word(node_credential(NODE_SECRET, "n1"))
    assert client.put(path, headers={"Authorization": f"Bearer {word}"},
                      json=body).status_code == 401


def test_the_operators_token_still_manages_requests(manager_app: Cluster) -> None:
    client = manager_app.client
    assert client.get("/requests", headers=OPERATOR).status_code == 200
    assert client.get("/hosts", headers=OPERATOR).status_code == 200
    assert client.get("/registry/tasks/t1", headers=OPERATOR).status_code == 200
    invalid = client.post("/requests", headers=OPERATOR, json={"image": "x"})
    assert invalid.status_code == 400  # past the door: the body's own fault
    assert client.delete("/requests/nope", headers=OPERATOR).status_code == 404
    assert client.delete("/registry/hosts/n2", headers=OPERATOR).status_code == 202
    # OPTIONS on a route only nodes write still answers the token
    options = client.open("/registry/hosts/n1/utilization", method="OPTIONS", headers=OPERATOR)
    assert options.status_code == 200 and "PUT" in options.headers["Allow"]


# -- the standalone registry: the same rules ---------------------------------------------------


def test_the_standalone_registry_keeps_the_same_rules(registry_app: Cluster) -> None:
    client = registry_app.client
    secret = node_secret_from_token(TOKEN)  # no GREENSWARM_NODE_SECRET: derived from the token
    body = {"memory_util": 0.96}
    assert client.put("/registry/hosts/n1/utilization", headers=OPERATOR,
                      json=body).status_code == 403
    assert client.put("/registry/hosts/n1/utilization", headers=node("n2", secret),
                      json=body).status_code == 403
    assert host(registry_app, "n1").memory_util == 0.1
    assert client.put("/registry/hosts/n1/utilization", headers=node("n1", secret),
                      json=body).status_code == 200
    assert host(registry_app, "n1").memory_util == 0.96
    assert client.post("/registry/tasks/t1/end", headers=node("n2", secret),
                       json={"status": "failed"}).status_code == 403
    assert client.post("/registry/tasks/t1/end", headers=OPERATOR,
                       json={"status": "failed"}).status_code == 403
    assert client.post("/registry/tasks/t1/end", headers=node("n1", secret),
                       json={"status": "failed"}).get_json()["ended"] is True


# -- the agent: only the manager's word for its node -------------------------------------------


def test_the_agent_takes_only_the_managers_word_for_its_node() -> None:
    settings = AgentSettings(node_secret=NODE_SECRET, node_id="n1")
    agent = Agent(settings, ManagerLink("http://127.0.0.1:9", "unused"))
    client = create_agent_app(agent).test_client()
    assert agent.credential == node_credential(NODE_SECRET, "n1")
    path, bad_body = "/agent/tasks/t1/resources", {"cpu_shares": 1, "memory": 1}
    words = AgentClient(NODE_SECRET)
    for headers in (OPERATOR, node("n1"), node("n2"),
                    {"Authorization": f"Bearer {words.word('n2')}"},
                    {"Authorization": f"Bearer {manager_word(node_credential('x', 'n1'))}"}):
        answer = client.put(path, headers=headers, json=bad_body)
        assert answer.status_code == 401, headers
    answer = client.put(path, headers={"Authorization": f"Bearer {words.word('n1')}"},
                        json=bad_body)
    assert answer.status_code == 400 and answer.get_json()["field"] == "cpu_shares"
