"""Dashboard sessions (DESIGN 9; issue 28, item 6) on the manager's real app and a real Redis
(its Swarm backend and agent client are built, never called; the manager is not started).

The cookie used to carry a signed fixed payload, valid 12 h whatever happened: logging out
only asked the browser to forget it. Now it is a random id of a session in Redis: logging out
ends it there, it expires after GREENSWARM_SESSION_MAX_AGE_S, a new token ends it, and the
cookie is HttpOnly, SameSite=Strict and, over TLS (a proxy's included), Secure."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from host_registry.redis_store import RedisStore
from lab.processes import RedisServer
from manager.agents import AgentClient
from manager.app import create_app
from manager.core import Manager
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.swarm import SwarmBackend

pytestmark = pytest.mark.redis
TOKEN = "session-token"
_numbers = itertools.count()


def manager_app(redis_url: str, prefix: str, token: str = TOKEN, **settings: object) -> Flask:
    config = ManagerSettings(token=token, redis_prefix=prefix, **settings)  # type: ignore[arg-type]
    store = RedisStore.from_url(redis_url, config.classes, config.bounds, prefix)
    manager = Manager(config, store, store.sibling(RequestRecords),
                      SwarmBackend(config.docker_url, f"{prefix}-"), AgentClient(token))
    return create_app(manager)


@pytest.fixture
def prefix(redis_srv: RedisServer) -> Iterator[str]:
    name = f"sess{next(_numbers)}"
    yield name
    client = redis.Redis.from_url(redis_srv.url)
    for key in client.scan_iter(f"{name}:*"):
        client.delete(key)


def log_in(client: FlaskClient, token: str = TOKEN, **kwargs: object) -> str:
    """Log in; the Set-Cookie header of the answer."""
    answer = client.post("/dashboard/login", json={"token": token}, **kwargs)  # type: ignore[arg-type]
    assert answer.status_code == 200, answer.get_json()
    return str(answer.headers["Set-Cookie"])


def session_cookie(client: FlaskClient) -> str:
    cookie = client.get_cookie("greenswarm_session")
    assert cookie is not None
    return cookie.value


def test_logging_out_ends_the_session_even_for_a_copy_of_its_cookie(
    redis_srv: RedisServer, prefix: str,
) -> None:
    app = manager_app(redis_srv.url, prefix)
    browser = app.test_client()
    assert browser.get("/hosts").status_code == 401
    header = log_in(browser)
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Secure" not in header
    value = session_cookie(browser)
    assert len(value) >= 40 and value != "dashboard"
    assert browser.get("/hosts").status_code == 200
    thief = app.test_client()
    thief.set_cookie("greenswarm_session", value)
    assert thief.get("/hosts").status_code == 200  # a copy works while the session is open
    assert browser.post("/dashboard/logout").status_code == 200
    assert browser.get("/hosts").status_code == 401
    assert thief.get("/hosts").status_code == 401  # ended in Redis, not just forgotten
    client = redis.Redis.from_url(redis_srv.url)
    assert not list(client.scan_iter(f"{prefix}:session:*"))
    # Redis holds a digest of the id, never the id itself
    log_in(browser)
    [key] = set(client.scan_iter(f"{prefix}:session:*"))  # SCAN may give a key twice
    assert session_cookie(browser).encode() not in key


def test_a_session_expires_after_its_max_age(redis_srv: RedisServer, prefix: str) -> None:
    app = manager_app(redis_srv.url, prefix, session_max_age_s=2.0)
    browser = app.test_client()
    header = log_in(browser)
    assert "Max-Age=2" in header
    value = session_cookie(browser)
    assert browser.get("/hosts").status_code == 200
    time.sleep(2.5)
    stale = app.test_client()
    stale.set_cookie("greenswarm_session", value)  # a browser that kept it past its age
    assert stale.get("/hosts").status_code == 401
    assert stale.get("/dashboard").headers["Location"].endswith("/dashboard/login")


def test_a_new_token_ends_every_session(redis_srv: RedisServer, prefix: str) -> None:
    before = manager_app(redis_srv.url, prefix)
    browser = before.test_client()
    log_in(browser)
    value = session_cookie(browser)
    other = manager_app(redis_srv.url, prefix)  # a second manager on the same Redis and token
    shared = other.test_client()
    shared.set_cookie("greenswarm_session", value)
    assert shared.get("/hosts").status_code == 200
    rotated = manager_app(redis_srv.url, prefix, token="rotated-token").test_client()
    rotated.set_cookie("greenswarm_session", value)
    assert rotated.get("/hosts").status_code == 401
    assert rotated.get("/hosts", headers={"Authorization": "Bearer rotated-token"}) \
        .status_code == 200


@pytest.mark.parametrize("headers, base_url", [
    ({}, "https://localhost"),  # TLS of its own
    ({"X-Forwarded-Proto": "https"}, "http://localhost"),  # a proxy's, as most say it
    ({"Forwarded": "for=10.0.0.9;proto=https"}, "http://localhost"),  # RFC 7239
])
def test_the_cookie_is_secure_over_tls_behind_a_proxy_too(
    redis_srv: RedisServer, prefix: str, headers: dict[str, str], base_url: str,
) -> None:
    browser = manager_app(redis_srv.url, prefix).test_client()
    header = log_in(browser, headers=headers, base_url=base_url)
    assert "Secure" in header and "HttpOnly" in header


def test_a_bad_max_age_is_refused_by_name() -> None:
    from domain.errors import ValidationError

    with pytest.raises(ValidationError) as refused:
        ManagerSettings.from_env({"GREENSWARM_SESSION_MAX_AGE_S": "0"})
    assert refused.value.field == "GREENSWARM_SESSION_MAX_AGE_S"
