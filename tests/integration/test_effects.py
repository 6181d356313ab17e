"""Pushing a cut, or a cut given back, to a node's agent that cannot be reached: booked, not
yet applied, and recorded so (manager/effects.py), against a real redis-server. The agent's
address is a closed port on loopback: the connection is really refused."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from fractions import Fraction

import pytest

from domain.decision import Decision, Pass, TaskCut
from domain.events import Cut, Placed, Restored, Resumed, Suspended
from domain.lifecycle import RequestStatus
from domain.model import Request, Task, TaskType
from domain.restore import TaskRestore
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer, free_port
from manager.agents import AgentClient
from manager.effects import Effects
from manager.faults import RecordFaults
from manager.records import RequestRecords
from manager.swarm import SwarmBackend
from scheduler.service import Outcome

pytestmark = pytest.mark.redis
_numbers = itertools.count()


@pytest.fixture
def effects(redis_srv: RedisServer) -> Iterator[Effects]:
    prefix = f"effects{next(_numbers)}"
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    records = store.sibling(RequestRecords)
    records.create("a", {"cpu_shares": 1024, "memory": 2**30})
    records.update("a", Placed("placed"), status=RequestStatus.RUNNING, host="h1")
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


def test_a_suspension_and_its_resume_are_pushed_and_recorded_in_order(effects: Effects) -> None:
    """A decision that pauses a victim (DESIGN 3.14) and an outcome that resumes it: both go to
    the node's agent and into the victim's history, the pause before the newcomer starts. The
    agent is unreachable here, so both are booked, not yet applied (the agent's reconciliation
    applies the registry's booking later)."""
    newcomer = Request("b", 1, TaskType.SERVICE, 512, 2**28)
    decision = Decision(newcomer, True, "h1", Pass.KILL, 512, 2**28, suspends=("a",))
    resumed = Task("a", "h1", 4, TaskType.JOB, 1024, 2**30, 1024, 2**30)
    effects.carry_out(Outcome(applied=[decision], resumed=[resumed]))
    history = effects.records.get("a").history
    paused = [e for e in history if isinstance(e, (Suspended, Resumed))]
    assert [type(e) for e in paused] == [Suspended, Resumed], history
    suspended, back = paused
    assert (suspended.host, suspended.by, suspended.applied) == ("h1", "b", False)
    assert suspended.reason.startswith("suspended on h1 to make room for b; booked, not yet "
                                       "applied (")
    assert (back.host, back.applied) == ("h1", False)
    assert back.reason.startswith("resumed on h1 with 1024 shares; booked, not yet applied (")
    assert effects.records.get("a").status is RequestStatus.RUNNING  # still placed, paused
