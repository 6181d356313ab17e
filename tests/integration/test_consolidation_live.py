"""Consolidation in the live service (DESIGN 3.15, issue 31 item 2): the least-allocated host's
services move make-before-break, the booking with them, a typed ``moved`` event in each
request's history, and the emptied host is then switched off by the power manager's idle rule.

The real manager (app, loop, scheduler, reconciliation, power control, consolidation) on a real
Redis, with the ``command`` power backend running real scripts. The Swarm is the in-memory
stand-in of tests/support/standin_swarm.py: the fast suite has no Swarm with two nodes, and a
refused start-first update (the undo) cannot be produced on demand with a real one; the stand-in
keeps a moved service's new task pending until the test runs it, so the test sees the state
between the decision and Swarm's report. tests/e2e/test_consolidation_lab.py moves a real
service between two lab nodes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import manager.reconcile
from cli.client import _event_line
from domain.errors import UnavailableError
from domain.power import PowerSettings
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer
from manager.agents import AgentClient
from manager.answers import POWER
from manager.app import create_app
from manager.core import Manager
from manager.power_backends import BackendKind, PowerBackendSettings
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from tests.integration.test_power_switching import _calls, _commands, _until
from tests.integration.test_reconcile_records import AUTH, TOKEN, Cluster
from tests.support.standin_swarm import StandInSwarm

pytestmark = pytest.mark.redis
_numbers = itertools.count()


@pytest.fixture
def swarm() -> StandInSwarm:
    stand_in = StandInSwarm(move_pending=True)
    stand_in.add_node("n1", "h1")
    stand_in.add_node("n2", "h2")
    return stand_in


def _build(redis_srv: RedisServer, swarm: StandInSwarm, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch, backend: BackendKind = BackendKind.COMMAND,
           **power: Any) -> tuple[Cluster, Path]:
    monkeypatch.setattr(manager.reconcile, "NODE_GRACE_S", 0.0)
    commands, log = _commands(tmp_path)
    config = ManagerSettings(
        token=TOKEN, redis_prefix=f"mov{next(_numbers)}", node_gone_s=1.0, policy="energy",
        power_settings=PowerSettings(**{"enabled": True, "idle_s": 0.0, "min_on": 1, **power}),
        power_backend_settings=PowerBackendSettings(backend, commands_file=str(commands)))
    store = RedisStore.from_url(redis_srv.url, config.classes, config.bounds,
                                config.redis_prefix)
    clock = Clock(time.time())
    manager_ = Manager(config, store, store.sibling(RequestRecords), swarm,  # type: ignore[arg-type]
                       AgentClient(TOKEN), clock=clock)
    manager_.loop.start()
    built = Cluster(manager_, swarm, create_app(manager_).test_client(), store)
    built.sync()
    return built, log


class Clock:
    """The manager's clock, moved on by the test: a service has slack to move (its Q >= phi +
    alpha, DESIGN 3.15) only after it ran a while."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _later(cluster: Cluster, seconds: float) -> None:
    clock = cluster.manager.clock
    assert isinstance(clock, Clock)
    clock.now += seconds


@pytest.fixture
def built(redis_srv: RedisServer, swarm: StandInSwarm, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, Path]]:
    cluster, log = _build(redis_srv, swarm, tmp_path, monkeypatch)
    try:
        yield cluster, log
    finally:
        cluster.manager.loop.stop()
        cluster.store.flush()


def _place(cluster: Cluster, host: str, name: str, kind: str = "service") -> None:
    """Submit ``name`` onto ``host`` (the other node closed meanwhile)."""
    other = next(n for n in cluster.swarm.nodes_by_id if n != host)
    cluster.manager.scheduler.set_closed_hosts(frozenset({other}))
    assert cluster.submit(name, kind=kind)["request"]["host"] == host
    cluster.manager.scheduler.set_closed_hosts(frozenset())


def _services_ran(cluster: Cluster) -> None:
    """Two hours on: every service has slack (Q = e / sigma - e - p - alpha)."""
    _later(cluster, 7200.0)


def _round(cluster: Cluster) -> None:
    """A reconciliation pass, then the power round (switches, then consolidation)."""
    cluster.sync()
    cluster.manager.loop.call(cluster.manager.power_tick)


def _history(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = cluster.record(name)["history"]
    return history


def _booked(cluster: Cluster, name: str) -> str | None:
    task = cluster.store.task(name)
    return None if task is None else task.host


def test_a_service_moves_make_before_break_and_its_host_is_switched_off(
        built: tuple[Cluster, Path]) -> None:
    cluster, log = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")
    _place(cluster, "n2", "c")
    assert cluster.manager.consolidation is not None

    _services_ran(cluster)
    _round(cluster)  # the decision: n1 (the least allocated, services only) is emptied
    assert cluster.swarm.moves == [("lone", "n2")]  # the service update, start-first
    assert _booked(cluster, "lone") == "n2"  # booked on decision: the target's room is held
    assert cluster.manager.scheduler.closed_hosts >= {"n1"}  # no pass refills the source
    assert not [e for e in _history(cluster, "lone") if e["kind"] == "moved"]

    _round(cluster)  # Swarm's new task still pending: the move waits, the request lives on
    assert cluster.record("lone")["status"] == "running"
    # n1 holds no booking now, but the old container runs there until the new one does: the
    # power manager leaves it on
    time.sleep(0.3)  # a switch would run its command on a thread of its own
    assert _calls(log) == [] and cluster.manager.switching is not None
    assert cluster.manager.switching.state_of("n1").value == "on"
    assert not [e for e in _history(cluster, "lone") if e["kind"] == "moved"]

    cluster.swarm.run_moved("lone")
    _round(cluster)  # Swarm reports it running on n2: the move is done
    moved = [e for e in _history(cluster, "lone") if e["kind"] == "moved"]
    assert len(moved) == 1, _history(cluster, "lone")
    assert moved[0]["host"] == "n2" and moved[0]["source"] == "n1"
    assert "h1" in moved[0]["reason"] and "h2" in moved[0]["reason"]
    record = cluster.record("lone")
    assert record["host"] == "n2" and record["status"] == "running"
    assert "n1" not in cluster.manager.consolidation.emptying()

    power = cluster.client.get("/power", headers=AUTH).get_json()
    POWER.read(power, "power")  # the answer is what the OpenAPI document says
    assert power["switching"]["moves"] == {"started": 1, "moved": 1, "undone": 0}
    assert power["switching"]["hosts"]["on"] == 2, power["switching"]  # both still on
    metrics = cluster.client.get("/metrics", headers=AUTH).get_data(as_text=True)
    assert 'greenswarm_consolidation_moves_total{result="started"} 1.0' in metrics
    assert 'greenswarm_consolidation_moves_total{result="moved"} 1.0' in metrics
    assert 'greenswarm_consolidation_moves_total{result="undone"} 0.0' in metrics

    _round(cluster)  # n1 is empty: the power manager's idle rule switches it off
    _until("n1 switched off", lambda: "off n1 h1" in _calls(log), cluster)
    assert {t.host for t in cluster.store.tasks()} == {"n2"}
    assert cluster.swarm.moves == [("lone", "n2")]  # moved once, not back


def test_a_move_swarm_refuses_is_undone_and_the_service_stays(
        built: tuple[Cluster, Path]) -> None:
    cluster, _ = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")

    _services_ran(cluster)
    _round(cluster)
    assert cluster.swarm.moves == [("lone", "n2")]
    cluster.swarm.refuse("lone", "no such image on h2")
    _round(cluster)  # refused on the target: booking and pin back on n1, the request lives
    assert _booked(cluster, "lone") == "n1"
    assert cluster.swarm.moves == [("lone", "n2"), ("lone", "n1")]
    record = cluster.record("lone")
    assert record["status"] == "running" and record["host"] == "n1"
    kinds = [e["kind"] for e in record["history"]]
    assert [k for k in kinds if "move" in k] == ["move-started", "move-undone"], kinds
    assert "n1" not in cluster.manager.scheduler.closed_hosts


def test_a_move_swarm_rolls_back_is_undone_at_once(built: tuple[Cluster, Path]) -> None:
    cluster, _ = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")
    _services_ran(cluster)
    _round(cluster)
    assert cluster.swarm.moves == [("lone", "n2")]
    cluster.swarm.roll_back("lone")  # the new task failed on n2: Swarm runs it on n1 again
    _round(cluster)  # seen at the next round, not after the move's timeout
    assert _booked(cluster, "lone") == "n1"
    record = cluster.record("lone")
    kinds = [e["kind"] for e in record["history"] if "move" in e["kind"]]
    assert kinds == ["move-started", "move-undone"], record["history"]
    assert "rolled the update back" in record["history"][-1]["reason"]
    assert "n1" not in cluster.manager.scheduler.closed_hosts


def _successor(cluster: Cluster, redis_url: str) -> Cluster:
    """A second manager on the same Redis and Swarm that takes the books over, as a new leader
    does when the lease passes to it (DESIGN 13: ``_take_over``, which ``_lead`` posts on the
    loop of an elected manager; these managers are driven by hand)."""
    first = cluster.manager
    assert isinstance(first.clock, Clock)
    store = RedisStore.from_url(redis_url, first.settings.classes, first.settings.bounds,
                                first.settings.redis_prefix)
    second = Manager(first.settings, store, store.sibling(RequestRecords), cluster.swarm,  # type: ignore[arg-type]
                     AgentClient(TOKEN), clock=Clock(first.clock.now))
    second.loop.start()
    second.loop.call(second._take_over)
    return Cluster(second, cluster.swarm, create_app(second).test_client(), store)


@pytest.mark.parametrize("swarm_answer", ["runs it on the target", "refuses it"])
def test_a_move_under_way_is_followed_by_the_next_leader(
        built: tuple[Cluster, Path], redis_srv: RedisServer, swarm_answer: str) -> None:
    """The leader that started a move dies before Swarm ran the new task: the next leader
    takes the move over at its take-over (its record said the source, and a refused update
    was never undone, before), keeps the source closed, and ends the move either way."""
    cluster, _ = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")
    _services_ran(cluster)
    _round(cluster)
    assert cluster.swarm.moves == [("lone", "n2")] and _booked(cluster, "lone") == "n2"
    cluster.manager.loop.stop()  # the leader is gone; its move is under way

    after = _successor(cluster, redis_srv.url)
    try:
        consolidation = after.manager.consolidation
        assert consolidation is not None
        assert consolidation.moving() == frozenset({"lone"})
        assert consolidation.emptying() == frozenset({"n1"})
        assert "n1" in after.manager.scheduler.closed_hosts  # no pass refills the source
        if swarm_answer == "runs it on the target":
            after.swarm.run_moved("lone")
            _round(after)
            record = after.record("lone")
            assert record["host"] == "n2" and record["status"] == "running"
            kinds = [e["kind"] for e in record["history"] if "move" in e["kind"]]
            assert kinds == ["move-started", "moved"], record["history"]
            assert consolidation.consolidator.pins.keys() >= {"lone"}  # not moved again soon
        else:
            after.swarm.refuse("lone", "no such image on h2")
            _round(after)
            assert _booked(after, "lone") == "n1"
            assert after.swarm.moves == [("lone", "n2"), ("lone", "n1")]
            record = after.record("lone")
            assert record["host"] == "n1" and record["status"] == "running"
        assert consolidation.moving() == frozenset() and consolidation.emptying() == frozenset()
        assert "n1" not in after.manager.scheduler.closed_hosts
    finally:
        after.manager.loop.stop()


def test_a_host_with_a_job_is_never_emptied(built: tuple[Cluster, Path]) -> None:
    cluster, _ = built
    _place(cluster, "n1", "job", kind="job")
    _place(cluster, "n2", "b")
    _place(cluster, "n2", "c")
    _services_ran(cluster)
    _round(cluster)
    # n1 (with the job) is not emptied; n2 holds only services but is the fuller host and
    # its services fit on n1: the planner may empty it, never n1
    assert all(task != "job" for task, _ in cluster.swarm.moves)
    assert _booked(cluster, "job") == "n1"


def test_consolidate_off_moves_nothing(redis_srv: RedisServer, swarm: StandInSwarm,
                                       tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, _ = _build(redis_srv, swarm, tmp_path, monkeypatch, consolidate=False)
    try:
        assert cluster.manager.consolidation is None
        _place(cluster, "n1", "lone")
        _place(cluster, "n2", "b")
        _services_ran(cluster)
        _round(cluster)
        assert cluster.swarm.moves == [] and _booked(cluster, "lone") == "n1"
    finally:
        cluster.manager.loop.stop()
        cluster.store.flush()


@pytest.mark.parametrize("setting", ["power manager off", "backend advise"])
def test_without_switching_nothing_moves(redis_srv: RedisServer, swarm: StandInSwarm,
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         setting: str) -> None:
    """DESIGN 3.15: consolidation runs with the power manager (default on with it); a lab
    without it, or whose backend switches nothing (advise, the default outside the lab), never
    sees its services move: an emptied host would not be switched off."""
    if setting == "power manager off":
        cluster, _ = _build(redis_srv, swarm, tmp_path, monkeypatch, enabled=False)
    else:
        cluster, _ = _build(redis_srv, swarm, tmp_path, monkeypatch, backend=BackendKind.ADVISE)
    try:
        assert cluster.manager.consolidation is None
        _place(cluster, "n1", "lone")
        _place(cluster, "n2", "b")
        _services_ran(cluster)
        for _ in range(3):
            cluster.sync()
            if cluster.manager.switching is not None:
                cluster.manager.loop.call(cluster.manager.power_tick)
            _later(cluster, 120.0)
        assert cluster.swarm.moves == [] and _booked(cluster, "lone") == "n1"
        power = cluster.client.get("/power", headers=AUTH).get_json()
        assert (power["switching"] or {}).get("moves") is None
    finally:
        cluster.manager.loop.stop()
        cluster.store.flush()


def test_the_events_stream_lists_the_move(built: tuple[Cluster, Path]) -> None:
    cluster, _ = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")
    _services_ran(cluster)
    _round(cluster)
    cluster.swarm.run_moved("lone")
    _round(cluster)
    events = cluster.client.get("/events?limit=1000", headers=AUTH).get_json()["events"]
    moves = [e for e in events if e["request"] == "lone" and "move" in e["kind"]]
    assert [e["kind"] for e in moves] == ["move-started", "moved"], moves
    assert (moves[0]["host"], moves[0]["target"]) == ("n1", "n2")
    assert (moves[1]["host"], moves[1]["source"]) == ("n2", "n1")
    # `greenswarm events` prints each with its kind, the host by its name, and its sentence
    lines = [_event_line(e, {"n1": "h1", "n2": "h2"}) for e in moves]
    assert "move-started" in lines[0] and "on h1" in lines[0] and "to h2" in lines[0], lines
    assert "moved" in lines[1] and "on h2" in lines[1] and "from h1" in lines[1], lines


def test_a_move_swarm_does_not_take_leaves_the_booking_where_it_was(
        built: tuple[Cluster, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, log = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")
    _services_ran(cluster)

    def refuse_update(task_id: str, node_id: str) -> None:
        raise UnavailableError("the engine does not answer the service update")

    monkeypatch.setattr(cluster.swarm, "move", refuse_update)
    _round(cluster)
    assert _booked(cluster, "lone") == "n1" and _booked(cluster, "b") == "n2"
    consolidation = cluster.manager.consolidation
    assert consolidation is not None
    assert consolidation.moving() == frozenset() and consolidation.emptying() == frozenset()
    assert consolidation.counts == {"started": 1, "moved": 0, "undone": 1}
    record = cluster.record("lone")
    assert record["status"] == "running" and record["host"] == "n1"
    undone = [e for e in record["history"] if e["kind"] == "move-undone"]
    assert len(undone) == 1 and "does not answer" in undone[0]["reason"], record["history"]
    assert _calls(log) == []


def test_the_dashboard_counts_the_moves(built: tuple[Cluster, Path], tmp_path: Path) -> None:
    """In a real headless Chromium, against the manager app served over HTTP: the summary
    line gives the services moved beside the switching (as the simulator's reports do)."""
    import threading

    from selenium.webdriver.common.by import By
    from werkzeug.serving import make_server

    from tests.support.watchers import artefacts_dir, chromium, log_in, wait

    cluster, _ = built
    _place(cluster, "n1", "lone")
    _place(cluster, "n2", "b")
    _services_ran(cluster)
    _round(cluster)
    cluster.swarm.run_moved("lone")
    _round(cluster)
    server = make_server("127.0.0.1", 0, create_app(cluster.manager), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with chromium() as browser:
            browser.get(f"http://127.0.0.1:{server.port}/dashboard")
            log_in(browser, TOKEN)
            summary = wait(browser, lambda d: [e for e in d.find_elements(By.ID, "watts")
                                               if "with switching" in e.text], "the kWh")[0]
            assert "1 service moved;" in summary.text, summary.text
            browser.save_screenshot(str(artefacts_dir(tmp_path) / "dashboard-moves.png"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
