"""POST /requests with offloading on (DESIGN 12; issue 29, item 4): a request that stays in its
own cluster is decided once, its preview applied; one no peer takes is decided here after all.

The real manager (its app, loop, scheduler, records) on a real Redis; the Swarm is the
in-memory stand-in of tests/support/standin_swarm.py (placing a service needs no engine to show
how often the policy decided). The peer is configured but never answers (nothing listens on its
port): only the request that does not fit here asks it anything.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.decision import Decision
from federation.peers import OffloadMode
from lab.processes import RedisServer, free_port
from tests.integration.test_reconcile_records import Cluster, make_cluster
from tests.support.standin_swarm import StandInSwarm

pytestmark = pytest.mark.redis
_numbers = itertools.count()


@pytest.fixture
def offloading(redis_srv: RedisServer, tmp_path: Path) -> Iterator[Cluster]:
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps([{"name": "b", "url": f"http://127.0.0.1:{free_port()}",
                                  "token": "peer-token", "latency_ms": 1,
                                  "bandwidth_mbit": 1000}]))
    swarm = StandInSwarm()
    swarm.add_node("n1", "h1", cpu=1024, memory=2**30)
    built = make_cluster(redis_srv.url, swarm, f"offl{next(_numbers)}", federation_name="a",
                         offload=OffloadMode.UNPLACED, peers_file=str(peers),
                         peer_timeout_s=0.5)
    built.sync()
    try:
        yield built
    finally:
        built.manager.loop.stop()
        built.store.flush()


def decisions(monkeypatch: pytest.MonkeyPatch, cluster: Cluster) -> list[str]:
    """The ids of the requests the manager's policy decides from now on, in order (the policy
    itself decides; this only notes each call)."""
    calls: list[str] = []
    policy = cluster.manager.scheduler.policy
    # (a policy that decides at a moment, the energy policy, is asked by decide_at)
    name = "decide_at" if hasattr(policy, "decide_at") else "decide"
    decide: Callable[..., Decision] = getattr(type(policy), name)

    def noting(self: Any, request: Any, *args: Any, **kwargs: Any) -> Decision:
        if self is policy:
            calls.append(request.id)
        return decide(self, request, *args, **kwargs)

    monkeypatch.setattr(type(policy), name, noting)  # (policies are frozen dataclasses)
    return calls


def test_a_request_that_stays_here_is_decided_once(
    offloading: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = decisions(monkeypatch, offloading)
    answer = offloading.submit("stays", cpu=100)
    assert calls == ["stays"]  # on integ: ["stays", "stays"] (the preview, then submit's)
    assert answer["request"]["status"] == "running" and answer["request"]["host"] == "n1"
    decision = answer["decision"]
    assert decision["placed"] and decision["host"] == "n1" and decision["decision_ms"] >= 0
    assert "cluster" not in decision
    history = [e["kind"] for e in offloading.record("stays")["history"]]
    assert "not-offloaded" not in history and "offloaded" not in history
    metrics = offloading.client.get("/metrics", headers={
        "Authorization": f"Bearer {offloading.manager.settings.token}"}).get_data(as_text=True)
    counted = [line for line in metrics.splitlines()
               if line.startswith("greenswarm_decisions_total{") and 'pass="simple"' in line]
    assert counted and float(counted[0].split()[-1]) == 1.0, counted


def test_a_request_no_peer_takes_is_decided_here_after_all(
    offloading: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Too large for this cluster's free room: offered to the peer, which does not answer, so
    it is decided here again (the loop let go of it meanwhile) and refused, saying why."""
    offloading.submit("filler", cls=1, cpu=1024)
    calls = decisions(monkeypatch, offloading)
    answer = offloading.submit("big", cls=2, cpu=1000)
    assert calls == ["big", "big"]
    assert answer["request"]["status"] == "rejected"
    assert "not offloaded: peer b is down" in answer["decision"]["reason"]
    history = offloading.record("big")["history"]
    assert [e["kind"] for e in history][-2:] == ["not-offloaded", "rejected"], history
