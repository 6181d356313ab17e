"""Fixtures for tests against the live service on a single-node swarm."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.processes import RedisServer
from tests.support.live import Live, single_node_swarm

_numbers = itertools.count()


LAB_STATE = Path("/run/greenswarm/lab/state.json")


@pytest.fixture(scope="session")
def node_id(docker_socket: str, busybox_image: str) -> Iterator[str]:
    if LAB_STATE.exists():
        pytest.skip("a local lab is up (greenswarm lab down first): these tests need the "
                    "machine's engine in a swarm of its own")
    with single_node_swarm(docker_socket) as node:
        yield node


@pytest.fixture
def live(
    node_id: str, redis_srv: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    """A fresh manager and agent (own Redis prefix and service names) for one test."""
    logs = Path(tmp_path_factory.mktemp("live-logs"))
    service = Live(node_id, redis_srv.url, f"lt{next(_numbers)}", logs)
    try:
        service.start_manager()
        service.start_agent()
        yield service
    finally:
        service.close()
