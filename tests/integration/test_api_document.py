"""The served OpenAPI document and the server agree (DESIGN 9): the six places where the audit's
schemathesis run (2,176 cases, stateful phase on) found the document looser than the server, on
the real manager app over a real Redis (its Swarm backend is built, never called: every call
here is answered before one would be). Each request is judged by the document with the JSON
Schema validator schemathesis uses, then sent: schema-valid must not be a 400, and a 400 must
be schema-invalid."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from flask import Flask
from flask.testing import FlaskClient

from domain.credentials import node_credential
from domain.model import HostSpec
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer
from tests.integration.test_http_edge import AUTH, NODE_SECRET, build_apps

pytestmark = pytest.mark.redis
GIB = 2**30
# what only a node reports, it reports for its own host with its own credential (DESIGN 9)
NODE_H1 = {"Authorization": f"Bearer {node_credential(NODE_SECRET, 'h1')}"}


def caller(path: str) -> dict[str, str]:
    return NODE_H1 if path.endswith("/utilization") and "{host_id}" in path else AUTH


@pytest.fixture
def manager_app(redis_srv: RedisServer) -> Iterator[tuple[Flask, RedisStore]]:
    apps, store = build_apps(redis_srv.url)
    store.add_host(HostSpec("h1", 2048, 4 * GIB), 0.2, 0.2)  # the largest host: the bounds
    yield apps["manager"], store
    store.flush()


def stated_valid(doc: dict[str, Any], schema: dict[str, Any], value: object) -> bool:
    root = {**schema, "components": doc["components"]}
    return bool(jsonschema_rs.Draft4Validator(root).is_valid(value))


def body_schema(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    schema: dict[str, Any] = (
        doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"])
    return schema


def query_valid(doc: dict[str, Any], path: str, args: dict[str, str]) -> bool:
    params = {p["name"]: p for p in doc["paths"][path]["get"].get("parameters", [])
              if p["in"] == "query"}
    return all(name in params and stated_valid(doc, params[name]["schema"], value)
               for name, value in args.items())


def agree(stated: bool, status: int) -> bool:
    return stated is (status != 400)


REQUEST = {"image": "redis:7", "cpu_shares": 100, "type": "job", "class": 2}
PLACEMENT = {"request": {"id": "p1", "class": 2, "type": "job", "cpu_shares": 10,
                         "memory": 6 * 2**20}, "host": "h1"}


@pytest.mark.parametrize(("path", "args"), [
    ("/events", {"since": "99999999999999999999-0"}),  # a cursor past any stream id
    ("/events", {"since": "18446744073709551615-18446744073709551615"}),
    ("/registry/hosts", {"class": "2"}),  # class without region
    ("/registry/hosts", {"order": "asc"}),  # order without region
])
def test_a_query_the_document_takes_is_answered(manager_app: tuple[Flask, RedisStore],
                                                path: str, args: dict[str, str]) -> None:
    client: FlaskClient = manager_app[0].test_client()
    doc = client.get("/openapi.json", headers=AUTH).get_json()
    answer = client.get(path, query_string=args, headers=AUTH)
    assert query_valid(doc, path, args), (path, args)
    assert answer.status_code == 200, answer.get_json()


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/requests", {**REQUEST, "memory": "0"}),  # the audit's
    ("post", "/requests", {**REQUEST, "memory": "4m"}),  # below Docker's floor
    ("post", "/requests", {**REQUEST, "memory": 4 * GIB + 1}),  # above the largest host
    ("post", "/requests", {**REQUEST, "memory": "1g", "cpu_shares": 2049}),
    ("post", "/requests", {**REQUEST, "memory": "1g", "image": "NaN"}),
    ("post", "/registry/placements", {**PLACEMENT, "cut_received": ""}),  # the audit's
    ("post", "/registry/placements", {**PLACEMENT, "cut_received": "2/3"}),
    ("put", "/registry/hosts/{host_id}/utilization", {"cpu_util": 0.5, "power_w": 1e308}),  # audit
    ("put", "/registry/hosts/{host_id}/utilization", {"cpu_util": 0.5, "power_w": 100_001}),
])
def test_a_body_the_server_refuses_is_one_the_document_refuses(
    manager_app: tuple[Flask, RedisStore], method: str, path: str, body: dict[str, Any]
) -> None:
    client: FlaskClient = manager_app[0].test_client()
    doc = client.get("/openapi.json", headers=AUTH).get_json()
    stated = stated_valid(doc, body_schema(doc, method, path), body)
    answer = client.open(path.replace("{host_id}", "h1"), method=method.upper(), json=body,
                         headers=caller(path))
    assert answer.status_code == 400, answer.get_json()
    assert agree(stated, answer.status_code), ("the document takes it", body)


def test_the_document_takes_what_the_server_takes(
    manager_app: tuple[Flask, RedisStore],
) -> None:
    """The other side, where the server answers without the Swarm: a heartbeat with power and
    a placement with a cut of the table."""
    client: FlaskClient = manager_app[0].test_client()
    doc = client.get("/openapi.json", headers=AUTH).get_json()
    path = "/registry/hosts/{host_id}/utilization"
    for body in ({"measured_at": 1.0, "power_w": 95.5}, {"cpu_util": 0.4, "power_w": 0}):
        assert stated_valid(doc, body_schema(doc, "put", path), body), body
        answer = client.put("/registry/hosts/h1/utilization", json=body, headers=NODE_H1)
        assert answer.status_code == 200, answer.get_json()


def test_a_deleted_deployment_is_gone(manager_app: tuple[Flask, RedisStore]) -> None:
    """The stateful phase's find: DELETE /deployments/{name} answered 200, and so did every GET
    of it afterwards. Now the answer is its last state, and then it is 404 (its requests keep
    their records; the name is free again)."""
    app, _ = manager_app
    client: FlaskClient = app.test_client()
    manager = app.extensions["greenswarm.manager"]
    records = manager.deployments.deployment_records
    records.reserve("1e30")  # a deployment none of whose requests was created
    assert client.get("/deployments/1e30", headers=AUTH).status_code == 200
    deleted = client.delete("/deployments/1e30", headers=AUTH)
    assert deleted.status_code == 200 and deleted.get_json()["name"] == "1e30"
    gone = client.get("/deployments/1e30", headers=AUTH)
    assert gone.status_code == 404, gone.get_json()
    assert client.delete("/deployments/1e30", headers=AUTH).status_code == 404
    assert [d["name"] for d in client.get("/deployments", headers=AUTH).get_json()] == []
    records.reserve("1e30")  # the name can be taken again
