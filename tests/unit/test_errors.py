"""One HTTP status per error family, both ways (domain/errors.py), and the clients that use it."""

from __future__ import annotations

import json
import socket

import pytest

from client.manager import ManagerClient
from domain.credentials import manager_word, node_credential
from domain.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    GreenSwarmError,
    NotFoundError,
    UnavailableError,
    ValidationError,
    error_body,
    error_from_answer,
    http_status,
)
from manager.agents import AgentClient
from monitor.client import HostRegistration, RegistryClient
from task_registry.agent import ManagerLink
from tests.support.scripted_http import Part, ScriptedServer

FAMILIES: list[tuple[GreenSwarmError, int]] = [
    (ValidationError("tasks[0].cpu_util", "must be between 0 and 1"), 400),
    (AuthError("a valid 'Authorization: Bearer <token>' header is required"), 401),
    (ForbiddenError("node n2 may write only its own host's values, not n1's"), 403),
    (NotFoundError("no request 'r1'"), 404),
    (ConflictError("a request named 'r1' already exists"), 409),
    (UnavailableError("Redis is unreachable"), 503),
]


@pytest.mark.parametrize(("exc", "status"), FAMILIES)
def test_every_family_survives_the_wire(exc: GreenSwarmError, status: int) -> None:
    assert http_status(exc) == status
    wire = json.loads(json.dumps(error_body(exc)))  # what a client decodes
    back = error_from_answer(http_status(exc), wire, "GET /requests/r1")
    assert type(back) is type(exc)
    if isinstance(exc, ValidationError):
        assert isinstance(back, ValidationError)
        assert (back.field, back.message) == (exc.field, exc.message)
        assert any("GET /requests/r1 -> HTTP 400" in note for note in back.__notes__)
    else:
        assert str(back) == f"GET /requests/r1 -> HTTP {status}: {exc}"


def test_the_root_is_a_500_and_comes_back_as_unavailable() -> None:
    exc = GreenSwarmError("the scheduler lost its books")
    assert http_status(exc) == 500
    assert error_body(exc) == {"error": "internal", "message": "the scheduler lost its books"}
    back = error_from_answer(500, error_body(exc), "POST /requests")
    assert type(back) is UnavailableError  # the server failed: for a client, a retry may help


def test_bodies_name_the_family() -> None:
    assert error_body(ValidationError("memory", "is required")) == {
        "error": "invalid", "field": "memory", "message": "is required"}
    assert [error_body(exc)["error"] for exc, _ in FAMILIES[1:]] == [
        "unauthorized", "forbidden", "not-found", "conflict", "unavailable"]


@pytest.mark.parametrize(("status", "family"), [
    (401, AuthError), (403, ForbiddenError), (404, NotFoundError), (409, ConflictError),
    (500, UnavailableError), (502, UnavailableError), (503, UnavailableError),
    (504, UnavailableError), (418, GreenSwarmError), (405, GreenSwarmError),
    (302, GreenSwarmError),
])
def test_statuses_map_to_families(status: int, family: type[GreenSwarmError]) -> None:
    error = error_from_answer(status, {"message": "no"}, "PUT /registry/hosts/n1/utilization")
    assert type(error) is family
    assert "PUT /registry/hosts/n1/utilization -> HTTP " + str(status) + ": no" in str(error)


@pytest.mark.parametrize(("payload", "said"), [
    (None, " with no JSON body"),
    ("", " with no JSON body"),
    ("<html>\n  <h1>502 Bad Gateway</h1>\n</html>", ": <html> <h1>502 Bad Gateway</h1> </html>"),
    (["not", "an", "object"], ": ['not', 'an', 'object']"),
    ({"error": "internal"}, ": {'error': 'internal'}"),
    ({"message": ""}, ": {'message': ''}"),
])
def test_answers_without_a_message_still_read_clearly(payload: object, said: str) -> None:
    error = error_from_answer(502, payload, "GET /hosts")
    assert type(error) is UnavailableError
    assert str(error) == "GET /hosts -> HTTP 502" + said


def test_a_long_body_is_shortened() -> None:
    assert len(str(error_from_answer(500, "x" * 10_000, "GET /hosts"))) < 250


@pytest.mark.parametrize("payload", [None, "Bad Request", [1], {"error": "bad-request"}])
def test_a_400_without_field_or_message_names_the_body_and_the_call(payload: object) -> None:
    error = error_from_answer(400, payload, "POST /requests")
    assert isinstance(error, ValidationError)
    assert error.field == "body"
    assert error.message.startswith("POST /requests -> HTTP 400")


def test_a_400_keeps_the_servers_field_and_message() -> None:
    error = error_from_answer(400, {"error": "invalid", "field": "memory", "message": "too big"},
                              "POST /requests")
    assert isinstance(error, ValidationError)
    assert str(error) == "memory: too big"


def test_a_413_is_bad_input_naming_the_body() -> None:
    error = error_from_answer(413, {"error": "too-large", "field": "body",
                                    "message": "the body is larger than 1048576 bytes"},
                              "POST /requests")
    assert isinstance(error, ValidationError)
    assert str(error) == "body: the body is larger than 1048576 bytes"


def test_an_unexpected_status_says_so() -> None:
    error = error_from_answer(418, {"message": "short and stout"}, "GET /tea")
    assert type(error) is GreenSwarmError
    assert str(error) == "unexpected answer: GET /tea -> HTTP 418: short and stout"


# -- the clients, against a scripted HTTP server on 127.0.0.1 (tests/support/scripted_http.py)
# Each call gets the next scripted answer, and every one must be asked for. "Unreachable" is
# real: a loopback port with nothing listening.

Answer = Part


def Scripted(*answers: Part) -> ScriptedServer:
    return ScriptedServer(list(answers), strict=True)


def nothing_listens() -> str:
    """A loopback URL where the connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


REGISTRATION = HostRegistration("n1", "10.0.0.2", 1024, 2**30, 0.25, 0.5)


def test_registry_client_families() -> None:
    with Scripted(
        Answer(400, {"error": "invalid", "field": "cpu_util", "message": "must be in [0, 1]"}),
        Answer(401, {"error": "unauthorized", "message": "a valid token is required"}),
        Answer(503, {"error": "unavailable", "message": "Redis is down"}),
    ) as server:
        client = RegistryClient(server.url, "t")
        with pytest.raises(ValidationError) as invalid:
            client.register_host(REGISTRATION)
        assert (invalid.value.field, invalid.value.message) == ("cpu_util", "must be in [0, 1]")
        with pytest.raises(AuthError, match="POST /registry/hosts -> HTTP 401"):
            client.register_host(REGISTRATION)
        with pytest.raises(UnavailableError, match="HTTP 503: Redis is down"):
            client.register_host(REGISTRATION)
    with pytest.raises(UnavailableError, match="registry unreachable"):
        RegistryClient(nothing_listens(), "t").register_host(REGISTRATION)


def test_agent_client_families() -> None:
    client = AgentClient("node-secret")
    with Scripted(
        Answer(404, {"error": "not-found", "message": "no running container of task 'a'"}),
        Answer(400, {"error": "invalid", "field": "memory", "message": "must be >= 4194304"}),
        Answer(500, text="<html>oops</html>"),
        Answer(200, text="not json"),
    ) as agent:
        with pytest.raises(NotFoundError, match="no running container of task 'a'"):
            client.cut("n1", agent.url, "a", 512, 2**30)
        with pytest.raises(ValidationError) as invalid:
            client.cut("n1", agent.url, "a", 512, 1)
        assert invalid.value.field == "memory"
        with pytest.raises(UnavailableError, match="HTTP 500: <html>oops</html>"):
            client.cut("n1", agent.url, "a", 512, 2**30)
        with pytest.raises(UnavailableError, match="not an object"):
            client.cut("n1", agent.url, "a", 512, 2**30)
        assert agent.calls[0] == ("PUT", "/agent/tasks/a/resources")
        # the manager's word for node n1 (DESIGN 9), never the operator's token
        word = manager_word(node_credential("node-secret", "n1"))
        assert agent.authorizations == [f"Bearer {word}"] * 4
    with pytest.raises(UnavailableError, match="unreachable"):
        client.cut("n1", nothing_listens(), "a", 512, 2**30)


def test_manager_link_reads_404_as_nothing_booked() -> None:
    with Scripted(
        Answer(404, {"error": "not-found", "message": "no task 'a'"}),
        Answer(200, {"host": "n1", "cpu_shares": 512, "memory": 2**30}),
        Answer(400, {"error": "invalid", "field": "exit_code", "message": "out of range"}),
        Answer(503, {"error": "unavailable", "message": "Redis is down"}),
    ) as manager:
        link = ManagerLink(manager.url, "t")
        assert link.desired("a") is None
        desired = link.desired("a")
        assert desired is not None and desired.host == "n1"
        with pytest.raises(ValidationError, match="exit_code: out of range"):
            link.report_end("a", 2**40, None)
        with pytest.raises(UnavailableError,
                           match="manager POST /registry/tasks/a/end -> HTTP 503"):
            link.report_end("a", 0, None)
    with pytest.raises(UnavailableError, match="unreachable"):
        ManagerLink(nothing_listens(), "t").report_resources("a", 512, 2**30)


def test_cli_api_families() -> None:
    with Scripted(
        Answer(400, {"error": "invalid", "field": "memory", "message": "is required"}),
        Answer(404, {"error": "not-found", "message": "no request 'r1'"}),
        Answer(502, text="Bad Gateway"),
        Answer(200, {"status": "ok"}),
    ) as manager:
        api = ManagerClient(manager.url)
        with pytest.raises(ValidationError) as invalid:
            api.call("POST", "/requests", {})
        assert str(invalid.value) == "memory: is required"  # what the CLI prints, as before
        with pytest.raises(NotFoundError,
                           match=r"^GET /requests/r1 -> HTTP 404: no request 'r1'$"):
            api.get("/requests/r1")
        assert not api.answers()  # a 502 from a proxy: not answering
        assert api.answers()
    assert not ManagerClient(nothing_listens()).answers()


def test_replay_api_keeps_its_special_cases() -> None:
    with Scripted(
        Answer(409, {"error": "conflict", "message": "a request named 'r1' already exists"}),
        Answer(503, {"error": "unavailable", "message": "Redis is down"}),
        Answer(404, {"error": "not-found", "message": "no request 'r1'"}),
        Answer(200, {"id": "r2", "status": "stopped"}),
        Answer(401, {"error": "unauthorized", "message": "a valid token is required"}),
        Answer(404, {"error": "not-found", "message": "no request 'r1'"}),
        Answer(503, text="Service Unavailable"),
        Answer(400, {"error": "invalid", "field": "request", "message": "Docker said no"}),
    ) as manager:
        _replay_api_calls(ManagerClient(manager.url, "t"))
        assert [path for _, path in manager.calls][:3] == ["/requests"] * 2 + ["/requests/r1"]


def _replay_api_calls(api: ManagerClient) -> None:
    assert api.submit({"name": "r1"}) == (409, {
        "error": "conflict", "message": "a request named 'r1' already exists"})
    assert api.submit({"name": "r1"})[0] == 503  # counted by the replay, not raised
    assert api.stop("r1") is None
    assert api.stop("r2") == {"id": "r2", "status": "stopped"}
    with pytest.raises(AuthError, match="HTTP 401: a valid token is required; give --token-file"):
        api.stop("r3")
    with pytest.raises(NotFoundError, match="GET /requests/r1 -> HTTP 404"):
        api.request("r1")
    with pytest.raises(UnavailableError, match="GET /hosts -> HTTP 503: Service Unavailable"):
        api.hosts()
    with pytest.raises(ValidationError, match="request: Docker said no"):
        api.stop("r4")
