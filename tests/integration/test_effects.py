"""Pushing a cut, or a cut given back, to a node's agent that cannot be reached: booked, not
yet applied, and recorded so (manager/effects.py), against a real redis-server. The agent's
address is a closed port on loopback: the connection is really refused."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from fractions import Fraction

import pytest

from domain.decision import TaskCut
from domain.events import Cut, Restored
from domain.restore import TaskRestore
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer, free_port
from manager.agents import AgentClient
from manager.effects import Effects
from manager.faults import RecordFaults
from manager.records import RequestRecords
from manager.swarm import SwarmBackend

pytestmark = pytest.mark.redis
_numbers = itertools.count()


@pytest.fixture
def effects(redis_srv: RedisServer) -> Iterator[Effects]:
    prefix = f"effects{next(_numbers)}"
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    records = store.sibling(RequestRecords)
    records.create("a", {"cpu_shares": 1024, "memory": 2**30})
    effects = Effects(store, records, SwarmBackend("unix:///nonexistent.sock", f"{prefix}-"),
                      AgentClient("token", timeout_s=2.0), room_freed=lambda host: None,
                      faults=RecordFaults(time.time))
    effects.agent_urls["h1"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    yield effects
    store.flush()


def test_a_cut_the_agent_cannot_take_is_booked_not_yet_applied(effects: Effects) -> None:
    effects.cut(TaskCut("a", "h1", 512, 2**29, Fraction(1, 2), 512, 2**29), "b")
    record = effects.records.get("a")
    assert (record.cpu_shares, record.memory, record.cut_received) == (512, 2**29, "1/2")
    event = record.history[-1]
    assert isinstance(event, Cut)
    assert (event.host, event.by, event.applied) == ("h1", "b", False)
    assert event.reason.startswith(
        f"cut to 512 shares and {2**29} bytes (total cut 1/2); booked, not yet applied (")


def test_a_cut_given_back_the_agent_cannot_take_is_booked_not_yet_applied(
    effects: Effects,
) -> None:
    effects.restore(TaskRestore("a", "h1", 768, 3 * 2**28, Fraction(1, 4), 256, 2**28))
    record = effects.records.get("a")
    assert (record.cpu_shares, record.memory, record.cut_received) == (768, 3 * 2**28, "1/4")
    event = record.history[-1]
    assert isinstance(event, Restored)
    assert (event.host, event.applied) == ("h1", False)
    assert event.reason.startswith(
        f"cut given back: 768 shares and {3 * 2**28} bytes (total cut 1/4); booked, not yet "
        "applied (")
