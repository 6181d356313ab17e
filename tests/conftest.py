"""Session fixtures: real servers, started on demand and stopped by pid."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from lab.images import busybox_on
from lab.processes import RedisServer, redis_server
from tests.support.servers import docker_engine


def pytest_configure(config: pytest.Config) -> None:
    """``GREENSWARM_TEST_RUST_CHECK=FILE``: every room of the session computed by the Rust core
    and the Python reference alike (tests/support/rust_core.py; the differential test
    tests/integration/test_native_rust.py runs the decision tests so)."""
    report = os.environ.get("GREENSWARM_TEST_RUST_CHECK")
    if report:
        from tests.support.rust_core import install_check

        install_check(Path(report))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``engine`` every test that needs the machine's Docker engine: one that asks for the
    ``docker_socket`` fixture (directly or through another fixture), and every test marked
    ``lab`` (the lab fixture asks for it at run time) or ``docker``. The test command runs these
    one at a time, and the rest (``-m "not engine"``) beside them (scripts/test.sh)."""
    for item in items:
        if ("docker_socket" in getattr(item, "fixturenames", ())
                or item.get_closest_marker("lab") or item.get_closest_marker("docker")):
            item.add_marker(pytest.mark.engine)


@pytest.fixture(scope="session")
def redis_srv() -> Iterator[RedisServer]:
    """A real redis-server (append-only persistence) for the whole session."""
    with redis_server() as server:
        yield server


@pytest.fixture
def raw_redis(redis_srv: RedisServer) -> Iterator[redis.Redis]:
    """A connection of the test's own to the session's redis-server, to look at (or damage)
    what the code under test wrote."""
    client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture(scope="session")
def docker_socket() -> Iterator[str]:
    """A real Docker engine (the machine's; started for the session if it was not running).
    Refused in the test command's run beside the engine tier (``GREENSWARM_TEST_NO_ENGINE``):
    a test that reaches the engine without being marked ``engine`` would race the lab."""
    if os.environ.get("GREENSWARM_TEST_NO_ENGINE"):
        pytest.fail("a test not marked `engine` asked for the Docker engine: ask for the "
                    "docker_socket fixture by name, or mark it `lab` or `engine`")
    with docker_engine() as socket_path:
        yield socket_path


@pytest.fixture(scope="session")
def busybox_image(docker_socket: str) -> str:
    return busybox_on(docker_socket)
