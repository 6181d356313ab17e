"""The Flask edge every greenswarm service shares (web/edge.py), on the three real
apps: the manager's (on a real Redis; its Swarm backend and agent client are built but never
called, the manager is not started), the standalone registry's, and the node agent's (its
Docker client is built, never called).

Hostile bodies are bounded before any handler reads them (DESIGN 9): size (413), nesting depth
and string lengths (400 naming the field, or "body"), never a 500."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from flask import Flask

from domain.credentials import manager_word, node_credential
from domain.errors import ValidationError
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer, free_port, stop_child, wait_serving
from manager import dashboard
from manager.agents import AgentClient
from manager.app import create_app
from manager.core import Manager
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.swarm import SwarmBackend
from task_registry.agent import Agent, AgentSettings, ManagerLink
from task_registry.agent_app import create_agent_app
from task_registry.standalone import create_registry_app
from web.access import Access

pytestmark = pytest.mark.redis
TOKEN = "edge-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}
NODE_SECRET = "edge-node-secret"
# node x's credential: the routes only nodes write, with their path variables filled with 'x'
NODE_X = {"Authorization": f"Bearer {node_credential(NODE_SECRET, 'x')}"}
# the only token the agent takes: the manager's word for its node (DESIGN 9)
AGENT = {"Authorization": f"Bearer {manager_word(node_credential(NODE_SECRET, 'edge-node'))}"}
_numbers = itertools.count()


def build_apps(redis_url: str, **limits: int) -> tuple[dict[str, Flask], RedisStore]:
    prefix = f"edge{next(_numbers)}"
    settings = ManagerSettings(token=TOKEN, node_secret=NODE_SECRET, redis_prefix=prefix,
                               **limits)
    store = RedisStore.from_url(redis_url, settings.classes, settings.bounds, prefix)
    manager = Manager(
        settings,
        store,
        store.sibling(RequestRecords),
        SwarmBackend(settings.docker_url, f"{prefix}-"),
        AgentClient(NODE_SECRET),
    )
    agent_settings = AgentSettings(node_secret=NODE_SECRET, node_id="edge-node", **limits)
    agent = Agent(agent_settings, ManagerLink("http://127.0.0.1:9", "unused"))
    registry_app = create_registry_app(store, TOKEN, settings.body_limits, node_secret=NODE_SECRET)
    apps = {"manager": create_app(manager), "registry": registry_app,
            "agent": create_agent_app(agent)}
    return apps, store


@pytest.fixture
def apps(redis_srv: RedisServer) -> Iterator[dict[str, Flask]]:
    built, store = build_apps(redis_srv.url)
    yield built
    store.flush()


def body_routes(app: Flask) -> list[tuple[str, str]]:
    """(method, path) of every route that may carry a body, its variables filled with 'x'.
    The edge reads any body sent with such a method, whether the handler wants one or not."""
    adapter = app.url_map.bind("localhost")
    found = []
    for rule in app.url_map.iter_rules():
        for method in sorted((rule.methods or set()) & {"POST", "PUT", "PATCH", "DELETE"}):
            path = adapter.build(rule.endpoint, dict.fromkeys(rule.arguments, "x"), method=method)
            found.append((method, path))
    return found


def every_body_route(apps: dict[str, Flask]) -> Iterator[tuple[str, Flask, str, str]]:
    for name, app in apps.items():
        for method, path in body_routes(app):
            yield name, app, method, path


def auth(name: str, app: Flask, method: str, path: str, *, json: bool = False) -> dict[str, str]:
    """The credential a route takes: the agent's takes the manager's word, a route only nodes
    write takes node x's credential, every other the operator's token."""
    if name == "agent":
        found = AGENT
    else:
        endpoint, _ = app.url_map.bind("localhost").match(path, method=method)
        kind = getattr(app.view_functions[endpoint], "greenswarm_access", Access.OPERATOR)
        found = NODE_X if kind is Access.NODES_ONLY else AUTH
    return {**found, "Content-Type": "application/json"} if json else found


# -- item 2: size, depth, strings ---------------------------------------------------------------


def test_every_json_route_refuses_deep_nesting_with_400_naming_the_body(
    apps: dict[str, Flask],
) -> None:
    """The audit's bodies (arrays 50,000 deep; an object 100,000 deep under a field) and one
    just past the default depth: each answers 400 naming the body, never 500."""
    deep_array = "[" * 50_000 + "]" * 50_000
    deep_object = '{"env": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}"
    just_too_deep = '{"x": ' + "[" * 40 + "]" * 40 + "}"
    routes = list(every_body_route(apps))
    assert len(routes) >= 10
    for name, app, method, path in routes:
        client = app.test_client()
        for body in (deep_array, deep_object, just_too_deep):
            response = client.open(path, method=method, data=body,
                                   headers=auth(name, app, method, path, json=True))
            assert response.status_code == 400, (name, method, path, response.status_code)
            answer = response.get_json()
            assert answer["error"] == "invalid" and answer["field"] == "body", answer
            assert "deep" in answer["message"], answer


def test_a_body_over_the_size_limit_is_413_with_a_json_error(apps: dict[str, Flask]) -> None:
    big = '{"x": "' + "a" * (2**20) + '"}'  # just over the default 1 MiB
    for name, app, method, path in every_body_route(apps):
        response = app.test_client().open(path, method=method, data=big,
                                          headers=auth(name, app, method, path, json=True))
        assert response.status_code == 413, (name, method, path, response.status_code)
        answer = response.get_json()
        assert answer["error"] == "too-large" and answer["field"] == "body", answer
        assert "1048576" in answer["message"]


def test_a_long_string_is_400_naming_its_field(apps: dict[str, Flask]) -> None:
    """A 100,000-character env value: today's manager took it (the audit saw 201, then the
    Swarm refused the service); the edge names the field."""
    body = {"image": "greenswarm/busybox:latest", "cpu_shares": 100, "memory": "16m",
            "type": "job", "class": 2, "env": {"BIG": "v" * 100_000}}
    response = apps["manager"].test_client().post("/requests", headers=AUTH, json=body)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["field"] == "env.BIG"
    nested = {"host": "h", "tasks": [{"id": "t", "cpu_util": 0.1, "memory_util": "m" * 70_000}]}
    response = apps["registry"].test_client().put("/registry/tasks/utilization",
                                                  headers=NODE_X, json=nested)
    assert response.status_code == 400
    assert response.get_json()["field"] == "tasks[0].memory_util"
    long_key = {"k" * 70_000: 1}
    for name, app, method, path in every_body_route(apps):
        response = app.test_client().open(path, method=method, json=long_key,
                                          headers=auth(name, app, method, path))
        assert response.status_code == 400, (name, path)
        assert response.get_json()["field"] == "body", "a too long key is not echoed back"


def test_the_limits_are_settings(redis_srv: RedisServer) -> None:
    """Smaller limits from the settings (GREENSWARM_MAX_BODY_BYTES and its siblings, the
    agent's GREENSWARM_AGENT_...) reach every app."""
    apps, store = build_apps(redis_srv.url, max_body_bytes=200, max_json_depth=3,
                             max_json_string_chars=10)
    try:
        for name, app, method, path in every_body_route(apps):
            client = app.test_client()
            headers = auth(name, app, method, path)
            answer = client.open(path, method=method, data='{"x": "' + "a" * 300 + '"}',
                                 headers=auth(name, app, method, path, json=True))
            assert answer.status_code == 413 and "200 bytes" in answer.get_json()["message"], name
            answer = client.open(path, method=method, headers=headers, json={"x": [[["deep"]]]})
            assert answer.status_code == 400 and answer.get_json()["field"] == "body", name
            answer = client.open(path, method=method, headers=headers, json={"x": "a" * 11})
            assert (answer.status_code, answer.get_json()["field"]) == (400, "x"), name
    finally:
        store.flush()
    environ = {"GREENSWARM_TOKEN": "t", "GREENSWARM_MAX_BODY_BYTES": "5000",
               "GREENSWARM_MAX_JSON_DEPTH": "8", "GREENSWARM_MAX_JSON_STRING_CHARS": "99"}
    limits = ManagerSettings.from_env(environ).body_limits
    assert (limits.max_body_bytes, limits.max_json_depth, limits.max_json_string_chars) == (
        5000, 8, 99)


@pytest.mark.parametrize("body", [
    b'{"x": ' + b"1" * 5000 + b"}",  # more digits than Python turns into an int
    b'{"x": "\xff\xfe"}',  # not UTF-8
    b"\x00" * 10,
    b'"just a string"',
    b"[1, 2, 3]",
    b"{not json",
], ids=["long-int", "not-utf8", "nul-bytes", "string", "array", "broken"])
def test_malformed_bodies_are_400_naming_the_body(apps: dict[str, Flask], body: bytes) -> None:
    for name, app, method, path in every_body_route(apps):
        response = app.test_client().open(path, method=method, data=body,
                                          headers=auth(name, app, method, path, json=True))
        assert response.status_code == 400, (name, path, response.status_code)
        assert response.get_json()["field"] == "body"


def test_a_route_that_reads_a_body_wants_one(apps: dict[str, Flask]) -> None:
    for name, path, headers in (("manager", "/requests", AUTH),
                                ("registry", "/registry/hosts", NODE_X)):
        response = apps[name].test_client().post(path, headers=headers)
        assert response.status_code == 400 and response.get_json()["field"] == "body"
    response = apps["agent"].test_client().put("/agent/tasks/x/resources", headers=AGENT,
                                               data='{"cpu_shares": 2}')  # no Content-Type
    assert response.status_code == 400 and "application/json" in response.get_json()["message"]


# -- item 4: every endpoint but /healthz takes the token -----------------------------------------

# DESIGN 9: load balancers and health checks carry no secret; a browser must reach the
# dashboard's login form (its page shell redirects there without a session)
DASHBOARD_PAGES = dashboard.PUBLIC_RULES
PUBLIC = {"/healthz", *DASHBOARD_PAGES}


def every_route(app: Flask) -> Iterator[tuple[str, str, str]]:
    """(rule, method, path) for every method of every rule of ``app.url_map``, HEAD and
    OPTIONS included, the variables filled with 'x'."""
    adapter = app.url_map.bind("localhost")
    for rule in app.url_map.iter_rules():
        for method in sorted(rule.methods or ()):
            path = adapter.build(rule.endpoint, dict.fromkeys(rule.arguments, "x"), method=method)
            yield rule.rule, method, path


def test_every_route_but_healthz_answers_401_without_the_token(apps: dict[str, Flask]) -> None:
    walked = set()
    for name, app in apps.items():
        client = app.test_client()
        routes = [*every_route(app), ("(none)", "GET", "/no/such/route")]
        for rule, method, path in routes:
            walked.add((name, method, rule))
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                response = client.open(path, method=method, headers=headers)
                if rule in PUBLIC:
                    assert response.status_code != 401, (name, method, path)
                    continue
                assert response.status_code == 401, (name, method, path, response.status_code)
                assert response.headers["WWW-Authenticate"] == "Bearer"
                if method != "HEAD":
                    assert response.get_json()["error"] == "unauthorized", (name, method, path)
    assert ("manager", "GET", "/requests") in walked
    assert ("manager", "GET", "/requests/<request_id>") in walked
    assert ("manager", "GET", "/dashboard") in walked
    assert ("agent", "GET", "/agent/tasks") in walked
    assert ("registry", "GET", "/registry/tasks/<task_id:task_id>") in walked
    assert len(walked) > 50


def test_the_dashboards_public_routes_give_nothing_away(apps: dict[str, Flask]) -> None:
    """The login form, the page shell and their script and style are served without the
    token (a browser must get to the form); the shell redirects to the form without a
    session, and none of them carries data. A wrong token at the form is a 401."""
    client = apps["manager"].test_client()
    for path in ("/", "/dashboard"):
        answer = client.get(path)
        assert answer.status_code == 303, path
        assert answer.headers["Location"].endswith(("/dashboard", "/dashboard/login"))
    form = client.get("/dashboard/login")
    assert form.status_code == 200 and b'id="token"' in form.data
    assert client.get("/dashboard/static/dashboard.js").status_code == 200
    assert client.get("/dashboard/static/secret.txt").status_code == 404
    refused = client.post("/dashboard/login", json={"token": "wrong"})
    assert refused.status_code == 401 and "Set-Cookie" not in refused.headers
    accepted = client.post("/dashboard/login", json={"token": TOKEN})
    assert accepted.status_code == 200 and "HttpOnly" in accepted.headers["Set-Cookie"]
    assert client.get("/dashboard").status_code == 200  # the session now opens the page
    assert client.get("/requests").status_code == 200  # and the reads
    assert client.post("/requests", json={}).status_code == 401  # never a change


def test_reads_with_the_token_still_answer(apps: dict[str, Flask]) -> None:
    manager = apps["manager"].test_client()
    assert manager.get("/requests", headers=AUTH).get_json() == []
    assert manager.get("/requests/nope", headers=AUTH).status_code == 404
    assert manager.get("/openapi.json", headers=AUTH).get_json()["openapi"].startswith("3.")
    assert apps["registry"].test_client().get("/registry/hosts", headers=AUTH).get_json() == []
    assert apps["agent"].test_client().get("/healthz").get_json()["node"] == "edge-node"


# -- as served: waitress, several listen addresses ------------------------------------------------


@pytest.fixture
def served_registry(redis_srv: RedisServer, tmp_path: Path) -> Iterator[list[str]]:
    """``greenswarm registry`` as a real process (waitress), told to listen on two loopback
    addresses (GREENSWARM_LISTEN_HOST is a comma-separated list); yields both URLs."""
    port = free_port()
    env = {**os.environ, "GREENSWARM_TOKEN": TOKEN, "GREENSWARM_NODE_SECRET": NODE_SECRET,
           "GREENSWARM_REDIS_URL": redis_srv.url,
           "GREENSWARM_REDIS_PREFIX": f"edge{next(_numbers)}",
           "GREENSWARM_LISTEN_HOST": "127.0.0.1, 127.0.0.2", "GREENSWARM_LISTEN_PORT": str(port)}
    with open(tmp_path / "registry.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "cli.main", "registry"], env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
    urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.2:{port}"]
    try:
        for url in urls:
            wait_serving(process, url + "/healthz", 30.0, "the registry")
        yield urls
    finally:
        stop_child(process)


# A served app whose SIGTERM handler, once serve's has run, takes the descriptors it closed, as
# any other thread opening a file or a connection at that moment does (the manager's Redis and
# Docker clients): a stand-in for a race that cannot be made to happen on demand.
ROOT = Path(__file__).resolve().parents[2]
_SERVED = """
import os, signal, sys
from flask import Flask
from web.edge import serve

app = Flask("edge-test")
app.get("/healthz")(lambda: "ok")
held = []
install = signal.signal

def wrapping(signum, handler):
    def handle(number, frame):
        try:
            handler(number, frame)
        finally:
            held.extend(os.pipe() for _ in range(8))
    return install(signum, handle if callable(handler) else handler)

signal.signal = wrapping
serve(app, sys.argv[1], int(sys.argv[2]), 4)
print("served to the end")
"""


@pytest.mark.parametrize("hosts", ["127.0.0.1", "127.0.0.1, 127.0.0.2"])
def test_a_served_app_ends_on_sigterm_while_a_client_keeps_its_connection(
    tmp_path: Path, hosts: str
) -> None:
    """A kept-alive connection in use (an agent reporting) does not hold a stopping process:
    waitress's loop ran on while one was open, so a manager told to stop outlived its grace
    (SIGKILL after 15 s in the tests, 10 s under Swarm) and never gave up its leadership; the
    next manager then waited for the lease to expire."""
    port = free_port()
    script = tmp_path / "served.py"
    script.write_text(_SERVED)
    log_path = tmp_path / "served.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, str(script), hosts, str(port)],
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        wait_serving(process, url, 30.0, "the app")
        with requests.Session() as client:  # keeps its connection alive between requests
            assert client.get(url, timeout=10).status_code == 200
            process.terminate()
            code = None
            for _ in range(40):  # as an agent reports: a request every 0.2 s, for 8 s at most
                code = process.poll()
                if code is not None:
                    break
                with contextlib.suppress(requests.RequestException):
                    client.get(url, timeout=2)
                time.sleep(0.2)
        assert code == 0, log_path.read_text()
        assert "served to the end" in log_path.read_text()
    finally:
        stop_child(process)


def test_the_served_registry_listens_on_each_address_and_bounds_bodies(
    served_registry: list[str],
) -> None:
    for url in served_registry:
        assert requests.get(url + "/healthz", timeout=10).json() == {"status": "ok"}
        refused = requests.get(url + "/registry/hosts", timeout=10)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
        assert requests.get(url + "/registry/hosts", headers=AUTH, timeout=10).json() == []
    url = served_registry[0] + "/registry/hosts"
    node = {**NODE_X, "Content-Type": "application/json"}  # a monitor's route
    # the served registry takes GREENSWARM_NODE_SECRET's credentials, and refuses the token
    assert requests.post(url, json={}, headers=AUTH, timeout=30).status_code == 403
    deep = "[" * 50_000 + "]" * 50_000
    answer = requests.post(url, data=deep, headers=node, timeout=30)
    assert (answer.status_code, answer.json()["field"]) == (400, "body")
    big = b'{"id": "' + b"a" * 2**21 + b'"}'
    answer = requests.post(url, data=big, headers=node, timeout=30)
    assert answer.status_code == 413 and answer.json()["error"] == "too-large"
    chunked = requests.post(url, data=iter([big[: 2**20], big[2**20 :]]), headers=node,
                            timeout=30)  # a generator body goes chunked: no length declared
    assert chunked.status_code == 413 and chunked.json()["error"] == "too-large"
    huge = requests.post(url, data=b"a" * (4 * 2**20 + 1), headers=node, timeout=30)
    # waitress itself, unread, in plain text (as the document says: the fuzz run found a
    # deployment body of 6 MB answered so, while the document listed JSON only)
    assert huge.status_code == 413 and huge.headers["Content-Type"].startswith("text/plain")


def test_listen_addresses() -> None:
    from web.edge import listen_addresses

    assert listen_addresses("127.0.0.1", 8080) == "127.0.0.1:8080"
    assert listen_addresses("127.0.0.1, 10.123.0.1", 80) == "127.0.0.1:80 10.123.0.1:80"
    assert listen_addresses("::1,0.0.0.0", 1) == "[::1]:1 0.0.0.0:1"
    with pytest.raises(ValidationError):
        ManagerSettings(listen_host=" , ").validate()


# -- item 7: the document and the server say the same thing -------------------------------------

UNSUPPORTED = ("PATCH", "TRACE")


def test_an_unsupported_method_is_405_with_allow(apps: dict[str, Flask]) -> None:
    """Every route, with the token: a method it does not serve answers 405, a JSON body and
    an Allow header that lists exactly the methods of the rules of its path; OPTIONS lists
    the same."""
    for name, app in apps.items():
        client = app.test_client()
        by_path: dict[str, set[str]] = {}
        for rule in app.url_map.iter_rules():
            by_path.setdefault(rule.rule, set()).update(rule.methods or ())
        for rule in app.url_map.iter_rules():
            path = app.url_map.bind("localhost").build(
                rule.endpoint, dict.fromkeys(rule.arguments, "x"),
                method=sorted(rule.methods or ())[0])
            allowed = by_path[rule.rule]
            for method in UNSUPPORTED:
                if method in allowed:
                    continue
                response = client.open(path, method=method,
                                       headers=AGENT if name == "agent" else AUTH)
                assert response.status_code == 405, (name, method, path)
                assert response.get_json()["error"] == "method-not-allowed"
                assert set(response.headers["Allow"].split(", ")) == allowed, (name, path)
            options = client.open(path, method="OPTIONS",
                                  headers=AGENT if name == "agent" else AUTH)
            assert set(options.headers["Allow"].split(", ")) == allowed, (name, path)


def test_utilization_is_no_task_id(apps: dict[str, Flask]) -> None:
    """/registry/tasks/utilization is the batch route only: GET and DELETE there are 405, not
    a read or a removal of a task named 'utilization' (which cannot be submitted either)."""
    client = apps["registry"].test_client()
    for method in ("GET", "DELETE"):
        response = client.open("/registry/tasks/utilization", method=method, headers=AUTH)
        assert response.status_code == 405
        assert set(response.headers["Allow"].split(", ")) == {"PUT", "OPTIONS"}
    placement = {"request": {"id": "utilization", "class": 2, "type": "job", "cpu_shares": 10,
                             "memory": 10}, "host": "h"}
    response = client.post("/registry/placements", headers=AUTH, json=placement)
    assert (response.status_code, response.get_json()["field"]) == (400, "request.id")


def test_an_id_that_ends_the_path_early_gets_a_documented_answer(
    apps: dict[str, Flask],
) -> None:
    """An id with '#' ends the path there (an HTTP client drops the fragment): the call then
    names another resource, which may not take the method (405). Found by the fuzz run: a
    generated task id '[[...#...' made POST /registry/tasks/{task_id}/kill a POST on
    /registry/tasks/{task_id}, answered 405, which the document did not list for /kill."""
    client = apps["manager"].test_client()
    document = client.get("/openapi.json", headers=AUTH).get_json()
    calls = [("post", "/registry/tasks/{task_id}/kill", None),
             ("post", "/registry/tasks/{task_id}/end", {"status": "failed"}),
             ("put", "/registry/tasks/{task_id}/resources", {"cpu_shares": 2, "memory": 1}),
             ("put", "/registry/hosts/{host_id}/utilization", {"cpu_util": 0.5})]
    for method, path, body in calls:
        truncated = path.split("{")[0] + "x"  # what arrives of ".../x#y/kill"
        answer = client.open(truncated, method=method.upper(), headers=AUTH, json=body)
        assert answer.status_code == 405, (path, answer.status_code)
        assert str(answer.status_code) in document["paths"][path][method]["responses"], path


def test_ending_an_unknown_task_is_404_and_a_null_service_id_is_taken(
    apps: dict[str, Flask],
) -> None:
    client = apps["registry"].test_client()
    assert client.delete("/registry/tasks/nope", headers=AUTH).status_code == 404
    ended = client.post("/registry/tasks/nope/end", headers=NODE_X,
                        json={"status": "failed", "exit_code": None, "service_id": None})
    assert ended.status_code == 200 and ended.get_json() == {"task": "nope", "ended": False}
    for status in ({}, [], 3, None):
        refused = client.post("/registry/tasks/nope/end", headers=NODE_X,
                              json={"status": status})
        assert (refused.status_code, refused.get_json()["field"]) == (400, "status"), status
    for cuts in (5, "all", {"task": "t"}):
        refused = client.post("/registry/placements", headers=AUTH, json={
            "request": {"id": "n", "class": 2, "type": "job", "cpu_shares": 10, "memory": 10},
            "host": "h", "cuts": cuts})
        assert (refused.status_code, refused.get_json()["field"]) == (400, "cuts"), cuts


def test_the_document_lists_exactly_the_managers_routes(apps: dict[str, Flask]) -> None:
    """Every method of every route of the manager's app is an operation of /openapi.json and
    back (HEAD and OPTIONS are the framework's); each operation lists the error answers the
    edge can give it, with the error schema: 401 but on /healthz, 400 and 413 on every method
    that may carry a body."""
    client = apps["manager"].test_client()
    document = client.get("/openapi.json", headers=AUTH).get_json()
    documented = {(method.upper(), path) for path, methods in document["paths"].items()
                  for method in methods}
    served = set()
    for rule in apps["manager"].url_map.iter_rules():
        if rule.rule in DASHBOARD_PAGES:  # pages for a browser (manager/dashboard.py)
            continue
        path = rule.rule.replace("<", "{").replace(">", "}")
        path = path.replace("{task_id:task_id}", "{task_id}")
        served |= {(m, path) for m in (rule.methods or ()) if m not in ("HEAD", "OPTIONS")}
    assert documented == served
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            codes = set(operation["responses"])
            if path != "/healthz":
                assert {"401", "403"} <= codes, path  # 403: DESIGN 9's node identity
                assert operation["security"] == [{"bearer": []}], path
                headers = operation["responses"]["401"]["headers"]
                assert headers["WWW-Authenticate"]["required"] is True
            if method in ("post", "put", "delete"):
                assert {"400", "413"} <= codes, (method, path)
                assert "text/plain" in operation["responses"]["413"]["content"], (method, path)
            for code in codes - {"200", "201", "202"}:
                schema = operation["responses"][code]["content"]["application/json"]["schema"]
                assert schema in (document["components"]["schemas"]["Error"],
                                  {"$ref": "#/components/schemas/Error"}) or path == "/healthz"
    end = document["paths"]["/registry/tasks/{task_id}/end"]["post"]
    body = end["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/TaskEnd"}
    body = document["components"]["schemas"]["TaskEnd"]
    assert body["properties"]["service_id"]["nullable"] is True
    assert set(document["paths"]["/registry/tasks/{task_id}"]["delete"]["responses"]) >= {
        "202", "404"}
