"""The Host and Task Registry endpoints (thesis messages 1-13) over HTTP, on the real Redis
store: JSON in and out, 400 naming the field with nothing changed, 401 without the token."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from domain.credentials import node_credential
from domain.events import Ended
from domain.lifecycle import RequestStatus
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer
from manager.records import RequestRecords
from task_registry.standalone import create_registry_app

pytestmark = pytest.mark.redis
TOKEN = "registry-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}  # the operator's
NODE_SECRET = "registry-node-secret"


def node(host_id: str) -> dict[str, str]:
    """The credential of node ``host_id``: only it writes that host's measurements."""
    return {"Authorization": f"Bearer {node_credential(NODE_SECRET, host_id)}"}


_numbers = itertools.count()


@pytest.fixture
def store(redis_srv: RedisServer) -> Iterator[RedisStore]:
    redis_store = RedisStore.from_url(redis_srv.url, prefix=f"api{next(_numbers)}")
    yield redis_store
    redis_store.flush()


@pytest.fixture
def client(store: RedisStore) -> FlaskClient:
    return create_registry_app(store, TOKEN, node_secret=NODE_SECRET).test_client()


def register(client: FlaskClient, host_id: str, cpu: int = 1200, memory: int = 1200,
             util: float = 0.2) -> Any:
    response = client.post("/registry/hosts", headers=node(host_id), json={
        "id": host_id, "address": f"10.0.0.{len(host_id)}", "cpu_capacity": cpu,
        "memory_capacity": memory, "cpu_util": util, "memory_util": util / 2})
    assert response.status_code in (200, 201), response.get_json()
    return response.get_json()


def record(store: RedisStore, request_id: str, cls: int = 4, cpu: int = 10) -> None:
    """The manager's record of a request (a placement must name one)."""
    store.sibling(RequestRecords).create(request_id, {
        "image": "busybox", "class": cls, "type": "job", "cpu_shares": cpu, "memory": 10})


def place(client: FlaskClient, request_id: str, host: str, cls: int, cpu: int,
          **extra: object) -> Any:
    body = {"request": {"id": request_id, "class": cls, "type": "job", "cpu_shares": cpu,
                        "memory": 10}, "host": host, **extra}
    return client.post("/registry/placements", headers=AUTH, json=body)


def snapshot(store: RedisStore) -> object:
    return (list(store.all_hosts()), store.tasks(), store.list_members())


def test_register_then_update_then_list_in_scheduling_order(client: FlaskClient) -> None:
    first = client.post("/registry/hosts", headers=node("a"), json={
        "id": "a", "cpu_capacity": 1200, "memory_capacity": 1200})
    assert first.status_code == 201 and first.get_json()["region"] == "LEE"
    again = client.post("/registry/hosts", headers=node("a"), json={
        "id": "a", "cpu_capacity": 9999, "memory_capacity": 9999, "cpu_util": 0.6})
    assert again.status_code == 200
    assert again.get_json()["cpu_capacity"] == 1200, "a known host keeps its capacity"
    assert again.get_json()["region"] == "DEE"
    register(client, "b", util=0.7)
    register(client, "c", util=0.55)
    listed = client.get("/registry/hosts?region=DEE&class=empty", headers=AUTH).get_json()
    assert [h["id"] for h in listed] == ["b", "a", "c"]  # U descending: best fit first
    response = client.put("/registry/hosts/c/utilization", headers=node("c"),
                          json={"cpu_util": 0.9})
    assert response.get_json()["region"] == "EED" and response.get_json()["memory_util"] == 0.275
    assert [h["id"] for h in client.get("/registry/hosts?region=EED", headers=AUTH).get_json()] == ["c"]
    assert [h["id"] for h in client.get("/registry/hosts", headers=AUTH).get_json()] == ["a", "b", "c"]


def test_placement_with_cuts_and_kills_then_the_task_messages(
    client: FlaskClient, store: RedisStore
) -> None:
    register(client, "h")
    for request_id in ("big4", "small4", "c2"):
        record(store, request_id)
    assert place(client, "big4", "h", 4, 600).status_code == 201
    assert place(client, "small4", "h", 4, 300).status_code == 201
    response = place(client, "c2", "h", 2, 200, kills=["small4"], cuts=[
        {"task": "big4", "cpu_shares": 400, "memory": 7, "cut_received": "1/3"}])
    assert response.status_code == 201 and response.get_json()["killed"] == ["small4"]
    host = client.get("/registry/hosts/h", headers=AUTH).get_json()
    assert (host["cpu_allocated"], host["class"], host["task_count"]) == (600, 2, 2)
    tasks = client.get("/registry/hosts/h/tasks", headers=AUTH).get_json()
    assert [t["id"] for t in tasks] == ["big4", "c2"]  # class descending
    assert tasks[0]["cut_received_exact"] == "1/3"
    # message 6: the node could apply the memory cut only in part
    response = client.put("/registry/tasks/big4/resources", headers=AUTH,
                          json={"cpu_shares": 400, "memory": 9})
    assert response.status_code == 200 and response.get_json()["memory"] == 9
    assert client.get("/registry/hosts/h", headers=AUTH).get_json()["memory_allocated"] == 19
    # message 13, with one unknown task
    response = client.put("/registry/tasks/utilization", headers=node("h"), json={
        "host": "h", "tasks": [{"id": "c2", "cpu_util": 0.9, "memory_util": 0.1},
                               {"id": "ghost", "cpu_util": 0.1, "memory_util": 0.1}]})
    assert response.get_json() == {"updated": ["c2"], "unknown": ["ghost"]}
    assert client.get("/registry/tasks/c2", headers=AUTH).get_json()["cpu_util"] == 0.9
    # messages 10 and 9
    ended = client.post("/registry/tasks/c2/end", headers=node("h"),
                        json={"status": "finished", "exit_code": 0})
    assert ended.status_code == 200 and ended.get_json()["ended"] is True
    assert client.get("/registry/tasks/c2", headers=AUTH).status_code == 404
    assert client.delete("/registry/tasks/big4", headers=AUTH).status_code == 202
    assert client.get("/registry/hosts/h", headers=AUTH).get_json()["class"] is None
    assert store.tasks() == []


BAD = [
    ("POST", "/registry/hosts", {"id": "x/y", "cpu_capacity": 100, "memory_capacity": 100}, "id"),
    ("POST", "/registry/hosts", {"id": "x", "cpu_capacity": "8", "memory_capacity": 100},
     "cpu_capacity"),
    ("POST", "/registry/hosts", {"id": "x", "cpu_capacity": 100}, "memory_capacity"),
    ("POST", "/registry/hosts", {"id": "x", "cpu_capacity": 100, "memory_capacity": 100,
                                 "cpu_util": 1.5}, "cpu_util"),
    ("POST", "/registry/hosts", {"id": "x", "cpu_capacity": 100, "memory_capacity": 100,
                                 "color": "red"}, "color"),
    ("PUT", "/registry/hosts/h/utilization", {}, "cpu_util"),
    ("PUT", "/registry/hosts/h/utilization", {"cpu_util": -0.1}, "cpu_util"),
    ("PUT", "/registry/hosts/h/utilization", {"memory_util": "high"}, "memory_util"),
    ("PUT", "/registry/hosts/h/utilization", {"cpu_util": 0.5, "power_w": -3}, "power_w"),
    ("PUT", "/registry/tasks/utilization", {"host": "h", "tasks": [
        {"id": "t", "cpu_util": 0.5, "memory_util": 0.5}, {"id": "u", "cpu_util": 2}]},
     "tasks[1].cpu_util"),
    ("PUT", "/registry/tasks/utilization", {"host": "h", "tasks": "all"}, "tasks"),
    ("PUT", "/registry/tasks/t/resources", {"cpu_shares": 1, "memory": 10}, "cpu_shares"),
    ("POST", "/registry/tasks/t/end", {"status": "exploded"}, "status"),
    ("POST", "/registry/tasks/t/end", {"status": "failed", "oom": "yes"}, "oom"),
    ("POST", "/registry/placements", {"request": {"id": "n", "class": 7, "type": "job",
                                                  "cpu_shares": 10, "memory": 10}, "host": "h"},
     "request.class"),
    ("POST", "/registry/placements", {"request": {"id": "n", "class": 2, "type": "job",
                                                  "cpu_shares": 10, "memory": 10}, "host": "h",
                                      "cuts": [{"task": "t", "cpu_shares": 5, "memory": 5,
                                                "cut_received": 0.3}]},
     "cuts[0].cut_received"),
    ("GET", "/registry/hosts?region=MID", None, "region"),
    ("GET", "/registry/hosts?region=LEE&class=9", None, "class"),
]


def writer(method: str, path: str) -> dict[str, str]:
    """Who may send BAD's calls: the monitor of "x" registers it, "h"'s reports h's values
    and its tasks' ends, the operator does the rest."""
    if (method, path) == ("POST", "/registry/hosts"):
        return node("x")
    if path in ("/registry/hosts/h/utilization", "/registry/tasks/utilization") or \
            path.endswith("/end"):
        return node("h")
    return AUTH


@pytest.mark.parametrize(("method", "path", "body", "field"), BAD,
                         ids=[f"{m} {p.split('?')[0]} {f}" for m, p, _, f in BAD])
def test_bad_input_is_400_naming_the_field_and_changes_nothing(
    client: FlaskClient, store: RedisStore, method: str, path: str, body: object, field: str
) -> None:
    register(client, "h")
    record(store, "t")
    assert place(client, "t", "h", 3, 100).status_code == 201
    before = snapshot(store)
    response = client.open(path, method=method, headers=writer(method, path), json=body)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["field"] == field
    assert snapshot(store) == before


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/registry/hosts"), ("PUT", "/registry/hosts/h/utilization"),
    ("DELETE", "/registry/hosts/h"), ("POST", "/registry/placements"),
    ("PUT", "/registry/tasks/t/resources"), ("POST", "/registry/tasks/t/kill"),
    ("POST", "/registry/tasks/t/end"), ("DELETE", "/registry/tasks/t"),
    ("PUT", "/registry/tasks/utilization")])
def test_every_mutating_endpoint_needs_the_token(
    client: FlaskClient, store: RedisStore, method: str, path: str
) -> None:
    register(client, "h")
    record(store, "t")
    assert place(client, "t", "h", 3, 100).status_code == 201
    before = snapshot(store)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = client.open(path, method=method, headers=headers, json={})
        assert response.status_code == 401 and response.get_json()["error"] == "unauthorized"
    assert snapshot(store) == before


def test_a_placement_is_refused_unless_the_manager_recorded_its_request(
    client: FlaskClient, store: RedisStore
) -> None:
    """DESIGN 9: a placement for a request the manager has no record of (or one that is over)
    is 409 and changes nothing, also with the registry on its own (``greenswarm registry``),
    which reads the records where the manager writes them. The audit placed such a record
    (201) and it stopped every later reconciliation."""
    register(client, "h")
    before = snapshot(store)
    refused = place(client, "x1", "h", 1, 2)
    assert refused.status_code == 409 and refused.get_json()["error"] == "conflict", \
        refused.get_json()
    assert "x1" in refused.get_json()["message"]
    records = store.sibling(RequestRecords)
    record(store, "done")
    records.update("done", Ended("ended: finished"),
                   status=RequestStatus.COMPLETED)
    over = place(client, "done", "h", 1, 2)
    assert over.status_code == 409 and "completed" in over.get_json()["message"]
    assert snapshot(store) == before
    record(store, "x1")
    assert place(client, "x1", "h", 1, 2).status_code == 201


def test_unknown_things_are_json_404s(client: FlaskClient) -> None:
    for path in ("/registry/hosts/nope", "/registry/tasks/nope", "/registry/hosts/nope/tasks",
                 "/no/such/route"):
        response = client.get(path, headers=AUTH)
        assert response.status_code == 404 and response.is_json, path
    assert client.post("/registry/tasks/nope/end", headers=node("h"),
                       json={"status": "failed"}).get_json()["ended"] is False


def test_utilization_is_dated_heartbeats_keep_values_and_the_watcher_lists_windows(
    client: FlaskClient, store: RedisStore
) -> None:
    import time

    register(client, "w", util=0.2)
    registered = store.host("w")
    assert registered.util_at is not None and abs(registered.util_at - time.time()) < 60
    assert client.get("/registry/watcher/w", headers=AUTH).status_code == 200
    windows = {"5m": {"cpu_mean": 0.3, "cpu_std": 0.05, "memory_mean": 0.1,
                      "memory_std": 0.0, "samples": 10}}
    now = time.time()
    response = client.put("/registry/hosts/w/utilization", headers=node("w"),
                          json={"cpu_util": 0.35, "measured_at": now - 30, "windows": windows})
    assert response.status_code == 200
    body = response.get_json()
    assert body["util_at"] == pytest.approx(now - 30) and body["windows"] == windows
    # a heartbeat: only the time (and windows); the values stay
    beat = client.put("/registry/hosts/w/utilization", headers=node("w"),
                      json={"measured_at": now - 5})
    assert beat.status_code == 200 and beat.get_json()["cpu_util"] == 0.35
    assert store.host("w").util_at == pytest.approx(now - 5)
    assert store.host("w").windows is not None  # kept when a heartbeat carries none
    # a clock ahead of the registry's is clamped to now: data never looks fresh forever
    client.put("/registry/hosts/w/utilization", headers=node("w"), json={"measured_at": now + 9e6})
    assert store.host("w").util_at is not None and store.host("w").util_at <= time.time()
    watcher = client.get("/registry/watcher", headers=AUTH).get_json()
    entry = watcher["data"]["w"]
    assert entry["windows"] == windows and entry["cpu_util"] == 0.35
    assert 0 <= entry["age_s"] < 60 and watcher["timestamp"] >= int(now)
    # bad windows: 400 naming the field, nothing changed
    before = snapshot(store)
    for bad, field in (
        ({"windows": {"5m": dict(windows["5m"], cpu_mean=1.5)}, "measured_at": now},
         "windows.5m.cpu_mean"),
        ({"windows": {"1h": windows["5m"]}, "measured_at": now}, "windows.1h"),
        ({"measured_at": "yesterday"}, "measured_at"),
        ({"power_w": 3}, "cpu_util"),
    ):
        answer = client.put("/registry/hosts/w/utilization", headers=node("w"), json=bad)
        assert answer.status_code == 400 and answer.get_json()["field"] == field, answer.json
    assert snapshot(store) == before
    assert client.get("/registry/watcher/nobody", headers=AUTH).status_code == 404
    assert client.get("/registry/watcher?x=1", headers=AUTH).status_code == 400
