"""The one HTTP client (web/client.py): answers mapped onto the exception root, and the retry
rule, table-driven against a real HTTP server on 127.0.0.1 that this test starts.

The server (tests/support/scripted_http.py) plays each call's part from a script: it answers a
status (with a body and headers), drops the connection without answering, or answers after a
pause. A connection that is never made is real too: a port that is bound but not yet listening
refuses it, and starts listening during the client's back-off when a case wants the retry to
succeed. Only a
connect *timeout* is not produced here (it needs an address that drops SYNs, which this
machine's network does not have); its rule is the refused connection's (Failure.NOT_CONNECTED).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import pytest

from client.manager import ManagerClient
from domain.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    GreenSwarmError,
    NotFoundError,
    UnavailableError,
    ValidationError,
    error_from_answer,
)
from tests.support.scripted_http import Part, ScriptedServer
from web.client import Failure, HttpClient, HttpSettings, retry_after_seconds

FAST = HttpSettings(connect_timeout_s=1.0, read_timeout_s=1.0, tries=3, backoff_s=0.01,
                    backoff_max_s=0.02, retry_after_max_s=2.0)


def answer(status: int, body: object = None, **headers: str) -> Part:
    return Part(status, body, headers=tuple((k.replace("_", "-"), v) for k, v in headers.items()))


DROP = Part(drop=True)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def start(*parts: Part, listening: bool = True) -> ScriptedServer:
        server = ScriptedServer(list(parts), listening=listening)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


class Pauses:
    """The client's sleep: records each pause (and may act during it)."""

    def __init__(self, during: Any = None) -> None:
        self.pauses: list[float] = []
        self.during = during

    def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        if self.during is not None:
            self.during()


# -- answers onto the exception root ---------------------------------------------------------

MAPPING: list[tuple[Part, type[GreenSwarmError], str]] = [
    (answer(400, {"error": "invalid", "field": "memory", "message": "too big"}), ValidationError,
     "memory: too big"),
    (Part(400, text="Bad Request"), ValidationError, "body: registry POST /x -> HTTP 400: Bad"),
    (answer(401, {"error": "unauthorized", "message": "a token is required"}), AuthError,
     "registry POST /x -> HTTP 401: a token is required"),
    (answer(403, {"error": "forbidden", "message": "not your host"}), ForbiddenError,
     "registry POST /x -> HTTP 403: not your host"),
    (answer(404, {"error": "not-found", "message": "no task 'a'"}), NotFoundError,
     "registry POST /x -> HTTP 404: no task 'a'"),
    (answer(409, {"error": "conflict", "message": "exists"}), ConflictError,
     "registry POST /x -> HTTP 409: exists"),
    (answer(413, {"error": "too-large", "field": "body", "message": "over 1 MiB"}),
     ValidationError, "body: over 1 MiB"),
    (answer(429, {"error": "busy", "message": "slow down"}, Retry_After="7"), UnavailableError,
     "registry POST /x -> HTTP 429: slow down"),
    (answer(503, {"error": "unavailable", "message": "Redis is down"}, Retry_After="120"),
     UnavailableError, "registry POST /x -> HTTP 503: Redis is down"),
    (Part(502, text="<h1>Bad Gateway</h1>"), UnavailableError,
     "registry POST /x -> HTTP 502: <h1>Bad Gateway</h1>"),
    (Part(200, text="not json"), UnavailableError, "registry POST /x: the answer is not JSON"),
    (answer(418, {"message": "short and stout"}), GreenSwarmError,
     "unexpected answer: registry POST /x -> HTTP 418: short and stout"),
]


@pytest.mark.parametrize(("part", "family", "text"), MAPPING)
def test_every_answer_maps_onto_the_root(serve: Any, part: Part, family: type[GreenSwarmError],
                                         text: str) -> None:
    server = serve(part)
    client = HttpClient(server.url, "registry", bearer="gsn1.n1.x", settings=FAST,
                        context="registry")
    with pytest.raises(GreenSwarmError) as caught:
        client.call("POST", "/x", {"a": 1})
    assert type(caught.value) is family
    assert str(caught.value).startswith(text)
    if isinstance(caught.value, ValidationError):
        assert caught.value.field == ("memory" if "memory" in text else "body")
    assert len(server.seen) == 1  # a POST that reached the server is never sent again
    assert server.seen[0].authorization == "Bearer gsn1.n1.x"  # the layer attaches it
    assert json.loads(server.seen[0].body) == {"a": 1}


@pytest.mark.parametrize(("headers", "kept"), [
    ({"Retry_After": "7"}, 7.0), ({"Retry_After": "0"}, 0.0), ({}, None),
    ({"Retry_After": "soon"}, None),
])
def test_retry_after_is_kept_on_the_error(serve: Any, headers: dict[str, str],
                                          kept: float | None) -> None:
    server = serve(answer(503, {"message": "busy"}, **headers))
    with pytest.raises(UnavailableError) as caught:
        HttpClient(server.url, "manager", settings=FAST).call("POST", "/requests", {})
    assert caught.value.retry_after_s == kept


@pytest.mark.parametrize(("value", "seconds"), [
    ("5", 5.0), ("0", 0.0), (" 12 ", 12.0), ("", None), (None, None), ("soon", None),
    ("-3", None), ("1.5", None), (formatdate(1_000_030.0, usegmt=True), 30.0),
    (formatdate(999_000.0, usegmt=True), 0.0),
])
def test_retry_after_reads_seconds_and_dates(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, now=1_000_000.0) == seconds


def test_the_root_maps_429_to_unavailable_with_retry_after() -> None:
    """On main a 429 was "unexpected" (the root), so no caller could tell a busy server."""
    error = error_from_answer(429, {"message": "slow down"}, "POST /requests",
                              retry_after_s=3.0)
    assert type(error) is UnavailableError and error.retry_after_s == 3.0


# -- no answer ---------------------------------------------------------------------------------


def test_a_slow_server_is_unavailable_naming_the_target_and_never_asked_again(
        serve: Any) -> None:
    server = serve(Part(200, {"ok": True}, delay_s=1.0))
    pauses = Pauses()
    client = HttpClient(server.url, "agent of node n1", settings=FAST.but(read_timeout_s=0.2),
                        sleep=pauses)
    with pytest.raises(UnavailableError, match=r"^agent of node n1 did not answer within 0.2 s "
                       rf"\(GET {server.url}/agent/tasks\)$"):
        client.call("GET", "/agent/tasks")
    assert len(server.seen) == 1 and pauses.pauses == []


def test_nothing_listening_is_unavailable_naming_the_target(serve: Any) -> None:
    server = serve(answer(200, {}), listening=False)
    pauses = Pauses()
    client = HttpClient(server.url, "registry", settings=FAST, sleep=pauses)
    with pytest.raises(UnavailableError, match=rf"^registry unreachable \(PUT {server.url}/u\): "
                       "Connection refused$"):
        client.call("PUT", "/u", {})
    assert pauses.pauses == [0.01, 0.02]  # tries=3: two pauses, doubled, at most backoff_max_s


def test_a_body_that_is_not_strict_json_is_refused_before_sending(serve: Any) -> None:
    server = serve(answer(200, {}))
    with pytest.raises(ValidationError) as caught:
        HttpClient(server.url, "registry", settings=FAST).call("PUT", "/u", {"x": float("nan")})
    assert caught.value.field == "body" and server.seen == []


# -- the retry rule ------------------------------------------------------------------------------
# (method, what the server does first, then, attempts the server sees, the outcome):
# a connection never made is retried for every method; a dropped one and a soon Retry-After
# only for idempotent methods; a read timeout, a 5xx without Retry-After and a POST that reached
# the server never.

OK = answer(200, {"ok": True})
SOON = answer(503, {"message": "busy"}, Retry_After="0")
LATER = answer(503, {"message": "busy"}, Retry_After="30")
PLAIN_503 = answer(503, {"message": "Redis is down"})
SLOW = Part(200, {"ok": True}, delay_s=0.5)

RETRIES: list[tuple[str, list[Part], int, type[GreenSwarmError] | None]] = [
    ("GET", [DROP, OK], 2, None),
    ("PUT", [DROP, OK], 2, None),
    ("DELETE", [DROP, OK], 2, None),
    ("POST", [DROP, OK], 1, UnavailableError),
    ("GET", [DROP, DROP, DROP, OK], 3, UnavailableError),  # tries=3 in all
    ("GET", [SOON, OK], 2, None),
    ("PUT", [SOON, SOON, OK], 3, None),
    ("POST", [SOON, OK], 1, UnavailableError),
    ("GET", [LATER, OK], 1, UnavailableError),  # 30 s is the caller's to wait
    ("GET", [PLAIN_503, OK], 1, UnavailableError),
    ("GET", [answer(502, {}), OK], 1, UnavailableError),
    ("GET", [SLOW, OK], 1, UnavailableError),
    ("PUT", [answer(409, {}), OK], 1, ConflictError),
    ("GET", [answer(404, {}), OK], 1, NotFoundError),
]


@pytest.mark.parametrize(("method", "parts", "attempts", "raises"), RETRIES)
def test_the_retry_rule(serve: Any, method: str, parts: list[Part], attempts: int,
                        raises: type[GreenSwarmError] | None) -> None:
    server = serve(*parts)
    client = HttpClient(server.url, "manager", settings=FAST.but(read_timeout_s=0.25),
                        sleep=Pauses())
    if raises is None:
        assert client.call(method, "/thing", {} if method != "GET" else None) == {"ok": True}
    else:
        with pytest.raises(raises):
            client.call(method, "/thing", {} if method != "GET" else None)
    assert [seen.method for seen in server.seen] == [method] * attempts


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE"])
def test_a_connection_never_made_is_retried_for_every_method(serve: Any, method: str) -> None:
    """The server starts listening during the first pause: the second attempt gets through."""
    server = serve(OK, listening=False)
    pauses = Pauses(during=server.listen)
    client = HttpClient(server.url, "manager", settings=FAST, sleep=pauses)
    assert client.call(method, "/thing", {}) == {"ok": True}
    assert pauses.pauses == [0.01] and [s.method for s in server.seen] == [method]


def test_one_try_is_never_retried(serve: Any) -> None:
    server = serve(DROP, OK)
    with pytest.raises(UnavailableError, match="dropped the connection"):
        HttpClient(server.url, "registry", settings=FAST.but(tries=1)).call("PUT", "/u", {})
    assert len(server.seen) == 1


def test_a_soon_retry_after_is_waited(serve: Any) -> None:
    server = serve(answer(429, {}, Retry_After="1"), OK)
    pauses = Pauses()
    assert HttpClient(server.url, "m", settings=FAST, sleep=pauses).call("GET", "/") == {
        "ok": True}
    assert pauses.pauses == [1.0]  # the server's word, not the back-off


@pytest.mark.parametrize(("settings", "attempt", "pause_s"), [
    (HttpSettings(backoff_s=0.2, backoff_max_s=2.0), 1, 0.2),
    (HttpSettings(backoff_s=0.2, backoff_max_s=2.0), 2, 0.4),
    (HttpSettings(backoff_s=0.2, backoff_max_s=2.0), 5, 2.0),
    (HttpSettings(backoff_s=0.0), 3, 0.0),
])
def test_back_off_doubles_up_to_its_cap(settings: HttpSettings, attempt: int,
                                        pause_s: float) -> None:
    assert settings.pause_s(attempt) == pytest.approx(pause_s)


@pytest.mark.parametrize(("method", "failure", "retry_after_s", "retried"), [
    (method, Failure.NOT_CONNECTED, None, True) for method in ("GET", "POST", "PATCH")
] + [
    ("GET", Failure.DROPPED, None, True), ("PUT", Failure.DROPPED, None, True),
    ("POST", Failure.DROPPED, None, False), ("PATCH", Failure.DROPPED, None, False),
    ("GET", Failure.TIMED_OUT, None, False), ("DELETE", Failure.TIMED_OUT, None, False),
    ("GET", Failure.BUSY, 5.0, True), ("GET", Failure.BUSY, 5.1, False),
    ("GET", Failure.BUSY, None, False), ("POST", Failure.BUSY, 0.0, False),
])
def test_which_failures_are_retried(method: str, failure: Failure, retry_after_s: float | None,
                                    retried: bool) -> None:
    assert HttpSettings().may_retry(method, failure, retry_after_s) is retried


@pytest.mark.parametrize(("changes", "name"), [
    ({"connect_timeout_s": 0}, "connect_timeout_s"),
    ({"read_timeout_s": float("nan")}, "read_timeout_s"),
    ({"read_timeout_s": 4000}, "read_timeout_s"),
    ({"tries": 0}, "tries"), ({"tries": 11}, "tries"), ({"tries": True}, "tries"),
    ({"backoff_s": -1}, "backoff_s"), ({"retry_after_max_s": float("inf")}, "retry_after_max_s"),
])
def test_bad_settings_name_the_field(changes: dict[str, Any], name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        HttpSettings(**changes)
    assert caught.value.field == name


# -- the clients on the layer: defects of main's wrappers ------------------------------------------


def test_the_cli_client_waits_out_a_manager_that_is_starting(serve: Any) -> None:
    """On main the CLI's client failed at once ("cannot reach the manager") when the manager
    was restarting; now a connection never made is asked again after a back-off."""
    server = serve(answer(200, [{"id": "n1"}]), listening=False)
    timer = threading.Timer(0.1, server.listen)
    timer.start()
    try:
        assert ManagerClient(server.url, "t").hosts() == [{"id": "n1"}]
    finally:
        timer.cancel()


def test_the_cli_client_keeps_a_forbidden_token_forbidden(serve: Any) -> None:
    """On main a 403 came back as a plain AuthError (the family lost); now ForbiddenError, with
    the hint on where the token comes from."""
    server = serve(answer(403, {"error": "forbidden", "message": "only nodes write this"}))
    with pytest.raises(ForbiddenError, match="only nodes write this; give --token-file"):
        ManagerClient(server.url, "t").call("PUT", "/registry/hosts/n1/utilization", {})


def test_the_cli_client_refuses_nan_before_sending(serve: Any) -> None:
    """On main ``requests`` sent NaN as a bare token the server rejects (a 400 about its own
    parser at best); now it is the caller's ValidationError and nothing is sent."""
    server = serve(answer(201, {}))
    with pytest.raises(ValidationError):
        ManagerClient(server.url, "t").submit({"cpu_shares": float("nan")})
    assert server.seen == []
