"""One bad record never stops the machinery; nodes that are Down, gone or back under a new id
(DESIGN 4, 9; issue 28, items 1, 2, 4 and 5): the real manager (its app, loop, scheduler,
reconciliation) on a real Redis.

The Swarm is the in-memory stand-in of tests/support/standin_swarm.py: a node's loss cannot be
produced in the fast suite (the lab needs root and minutes); tests/e2e/test_node_loss_lab.py
does it for real. The bad records are real Redis records: a task booked without a request
record, written through the registry's own code path (``RedisStore.apply``, what
``POST /registry/placements`` did before it checked the request: the audit made one that way);
since that endpoint now refuses such a placement (409), nothing else can make one any more.
Each pass is run on the manager's loop by the test (the manager's timer is not started), so
that what a pass did is known when it returns.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient
from werkzeug.serving import make_server

import manager.reconcile
from cli.main import main
from domain.decision import Decision, Pass
from domain.model import Request, TaskType
from domain.pending import PendingEntry, PendingReason
from host_registry.redis_store import RedisStore
from host_registry.requests import request_key
from lab.processes import RedisServer, free_port
from manager.agents import AgentClient
from manager.app import create_app
from manager.core import Manager
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.slo_tally import SloState
from tests.support.standin_swarm import StandInSwarm

pytestmark = pytest.mark.redis
TOKEN = "reconcile-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
_numbers = itertools.count()


@dataclass
class Cluster:
    manager: Manager
    swarm: StandInSwarm
    client: FlaskClient
    store: RedisStore

    def sync(self) -> None:
        """One reconciliation pass, on the manager's loop, as its timer runs it."""
        self.manager.loop.call(self.manager.swarm.sync)

    def submit(self, name: str, cls: int = 3, kind: str = "service", cpu: int = 100,
               **extra: object) -> dict[str, Any]:
        response = self.client.post("/requests", headers=AUTH, json={
            "image": "busybox", "name": name, "class": cls, "type": kind, "cpu_shares": cpu,
            "memory": "32m", **extra})
        assert response.status_code == 201, response.get_json()
        answer: dict[str, Any] = response.get_json()
        return answer

    def record(self, name: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.get(f"/requests/{name}", headers=AUTH).get_json()
        return answer

    def health(self, *, token: bool = True) -> dict[str, Any]:
        """GET /healthz; with the token (its details), or as anyone may."""
        answer: dict[str, Any] = self.client.get("/healthz",
                                                 headers=AUTH if token else {}).get_json()
        return answer

    def orphan(self, task_id: str, host: str) -> None:
        """A task booked on ``host`` that no request record holds (see the module's doc)."""
        request = Request(task_id, 1, TaskType.JOB, 2, 1)
        self.store.apply(Decision(request=request, placed=True, host=host, pass_=Pass.SIMPLE,
                                  cpu_shares=2, memory=1, cut_received=Fraction(0)), time.time())


def make_cluster(redis_url: str, swarm: StandInSwarm, prefix: str,
                 **settings: Any) -> Cluster:
    config = ManagerSettings(token=TOKEN, redis_prefix=prefix, **settings)
    store = RedisStore.from_url(redis_url, config.classes, config.bounds, prefix)
    manager_ = Manager(config, store, store.sibling(RequestRecords), swarm,  # type: ignore[arg-type]
                       AgentClient(TOKEN))
    manager_.loop.start()
    return Cluster(manager_, swarm, create_app(manager_).test_client(), store)


@pytest.fixture
def swarm() -> StandInSwarm:
    stand_in = StandInSwarm()
    stand_in.add_node("n1", "h1")
    stand_in.add_node("n2", "h2")
    return stand_in


@pytest.fixture
def cluster(redis_srv: RedisServer, swarm: StandInSwarm,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    # a node is lost on the first pass that misses it (the manager waits 15 s for a blink)
    monkeypatch.setattr(manager.reconcile, "NODE_GRACE_S", 0.0)
    built = make_cluster(redis_srv.url, swarm, f"rec{next(_numbers)}")
    built.sync()
    try:
        yield built
    finally:
        built.manager.loop.stop()
        built.store.flush()


def _on(cluster: Cluster, host: str, names: list[str]) -> None:
    """Submit ``names`` onto ``host`` (the other node paused meanwhile)."""
    other = next(n for n in cluster.swarm.nodes_by_id if n != host)
    cluster.manager.scheduler.set_closed_hosts(frozenset({other}))
    for name in names:
        assert cluster.submit(name)["request"]["host"] == host
    cluster.manager.scheduler.set_closed_hosts(frozenset())


def test_an_orphan_record_does_not_stop_node_loss_handling(cluster: Cluster) -> None:
    """The audit's case: a task booked without a request record on a node whose engine then
    died. Every one of the node's real tasks moves to the other node in the pass that finds
    the node Down; the orphan is dropped with its host, logged, counted and listed."""
    _on(cluster, "n1", ["a", "b", "c"])
    cluster.orphan("x1", "n1")
    cluster.sync()  # the orphan fails on its own; the pass goes on
    cluster.swarm.set_down("n1")
    cluster.sync()
    for name in ("a", "b", "c"):
        record = cluster.record(name)
        assert (record["status"], record["host"]) == ("running", "n2"), record
        lost = [e for e in record["history"] if e["kind"] == "host-lost"]
        assert lost and lost[-1]["host"] == "n1" and lost[-1]["host_name"] == "h1", lost
        assert "h1" in lost[-1]["reason"]
    assert {p.task_id: p.node_id for p in cluster.swarm.created[-3:]} == \
        {"a": "n2", "b": "n2", "c": "n2"}
    assert cluster.store.task("x1") is None  # dropped with its host: nothing could start it
    hosts = cluster.client.get("/hosts", headers=AUTH).get_json()
    assert [h["id"] for h in hosts] == ["n2"]
    health = cluster.health()
    assert health["status"] == "ok"
    assert health["reconcile"]["ok"] is False
    assert [(f["id"], f["kind"]) for f in health["reconcile"]["failing"]] == [("x1", "task")]
    assert "without a request record" in health["reconcile"]["failing"][0]["error"]
    assert health["reconcile"]["errors_total"] >= 2
    assert [(d["id"], d["name"]) for d in health["nodes_down"]] == [("n1", "h1")]
    metrics = cluster.client.get("/metrics", headers=AUTH).get_data(as_text=True)
    counted = [line for line in metrics.splitlines()
               if line.startswith("greenswarm_reconcile_errors_total ")]
    assert counted and float(counted[0].split()[1]) >= 2, counted
    cluster.sync()  # the orphan is gone: nothing fails any more
    assert cluster.health()["reconcile"] == {
        "ok": True, "errors_total": health["reconcile"]["errors_total"], "failing_count": 0,
        "failing": []}


def test_healthz_tells_anyone_only_its_checks_and_counts(cluster: Cluster) -> None:
    """DESIGN 9: /healthz is public, so it names no record, node or error to a caller without
    the token (a wrong token or an ended session included): its checks and counts only. The
    token or an open dashboard session (the dashboard's warning reads it so) sees which
    records fail and which nodes are down, by name."""
    _on(cluster, "n1", ["a"])
    cluster.orphan("x1", "n2")
    cluster.swarm.set_down("n1")
    cluster.sync()
    anyone = cluster.health(token=False)
    assert anyone == {
        "status": "ok", "details": False, "redis": True, "docker": True, "hosts": 1,
        "pending": 0, "reconcile": {"ok": False, "errors_total": 1, "failing_count": 1},
        "nodes_down_count": 1}, anyone
    wrong = cluster.client.get("/healthz", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 200 and wrong.get_json() == anyone
    known = cluster.health()
    assert known["details"] is True and known["policy"] == "energy"
    assert [f["id"] for f in known["reconcile"]["failing"]] == ["x1"]
    assert known["reconcile"]["failing_count"] == 1
    assert [(d["id"], d["name"]) for d in known["nodes_down"]] == [("n1", "h1")]
    browser = cluster.client.application.test_client()
    assert browser.post("/dashboard/login", json={"token": TOKEN}).status_code == 200
    seen = browser.get("/healthz").get_json()
    assert seen["details"] is True and seen["nodes_down"] == known["nodes_down"]
    assert browser.post("/dashboard/logout").status_code == 200
    assert browser.get("/healthz").get_json() == anyone  # the session ended


def test_a_failing_record_is_logged_once_listed_and_removed_through_the_api(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.submit("fine")
    refused = cluster.client.post("/registry/placements", headers=AUTH, json={
        "request": {"id": "x2", "class": 1, "type": "job", "cpu_shares": 2, "memory": 1},
        "host": "n2"})
    assert refused.status_code == 409  # the manager's registry refuses it, as the audit's
    cluster.orphan("x2", "n2")
    assert cluster.client.get("/registry/tasks/x2", headers=AUTH).status_code == 200
    with caplog.at_level(logging.WARNING):
        for _ in range(4):
            cluster.sync()
    about = [r for r in caplog.records if "x2" in r.getMessage()]
    assert len(about) == 1, [r.getMessage() for r in about]  # once, not on every pass
    reconcile = cluster.health()["reconcile"]
    assert reconcile["ok"] is False and reconcile["errors_total"] == 4
    failing = reconcile["failing"]
    assert [f["id"] for f in failing] == ["x2"] and failing[0]["since"] <= time.time()
    assert "DELETE /registry/tasks/x2" in failing[0]["error"]
    # every task record the API shows can be removed through it
    assert cluster.client.delete("/registry/tasks/x2", headers=AUTH).status_code == 202
    assert cluster.client.get("/registry/tasks/x2", headers=AUTH).status_code == 404
    assert cluster.store.host("n2").task_count == 1  # fine's booking is untouched
    cluster.sync()
    assert cluster.health()["reconcile"]["failing"] == []
    assert cluster.record("fine")["status"] == "running"


def test_a_booking_whose_request_is_over_can_be_removed_without_changing_the_record(
    cluster: Cluster,
) -> None:
    cluster.submit("over")
    records = cluster.manager.records
    from domain.events import Ended
    from domain.lifecycle import RequestStatus
    records.update("over", Ended("ended: finished"),
                   status=RequestStatus.COMPLETED)  # its booking left behind by mistake
    assert cluster.client.delete("/registry/tasks/over", headers=AUTH).status_code == 202
    assert cluster.store.task("over") is None
    assert cluster.record("over")["status"] == "completed"


def test_a_queue_retry_goes_on_past_a_request_without_a_record(cluster: Cluster) -> None:
    """The pending queue holds an entry no record stands for, more urgent than a real one:
    the retry places the real one all the same, and undoes the orphan's booking."""
    now = time.time()
    cluster.manager.records.create("waiting", {"image": "busybox", "class": 4,
                                               "type": "service", "cpu_shares": 100,
                                               "memory": 2**25})
    for request, deadline in ((Request("ghost", 1, TaskType.SERVICE, 100, 2**25), now - 100),
                              (Request("waiting", 4, TaskType.SERVICE, 100, 2**25), now + 100)):
        cluster.store.push_pending(PendingEntry(request, PendingReason.QUEUED, now, deadline))
    cluster.manager.loop.call(cluster.manager._retry)
    record = cluster.record("waiting")
    assert record["status"] == "running" and "waiting" in cluster.swarm.services_by_task
    assert cluster.store.task("ghost") is None and not cluster.store.pending()
    assert [f["id"] for f in cluster.health()["reconcile"]["failing"]] == ["ghost"]


def test_a_node_back_under_a_new_id_retires_the_old_host_which_keeps_its_name(
    cluster: Cluster, redis_srv: RedisServer
) -> None:
    _on(cluster, "n1", ["moved"])
    cluster.swarm.set_down("n1")
    cluster.swarm.add_node("n1b", "h1")  # the same machine, joined anew
    cluster.sync()
    record = cluster.record("moved")
    assert record["host"] in ("n1b", "n2") and record["status"] == "running"
    lost = [e for e in record["history"] if e["kind"] == "host-lost"][-1]
    assert "rejoined the Swarm as n1b" in lost["reason"] and lost["host_name"] == "h1"
    assert cluster.health()["nodes_down"] == []  # retired at once, not down
    hosts = {h["id"] for h in cluster.client.get("/hosts", headers=AUTH).get_json()}
    assert hosts == {"n1b", "n2"}
    assert cluster.manager.views.host_name("n1") == "h1"
    # the name outlives the manager: a new one on the same Redis still knows it
    again = make_cluster(redis_srv.url, cluster.swarm, cluster.store.host_keys.prefix)
    try:
        assert again.manager.views.host_name("n1") == "h1"
        again.sync()
        assert again.health()["nodes_down"] == []  # retired stays retired
    finally:
        again.manager.loop.stop()


def test_a_down_node_is_listed_until_gone_then_retired_and_a_removed_one_at_once(
    redis_srv: RedisServer, swarm: StandInSwarm, monkeypatch: pytest.MonkeyPatch
) -> None:
    swarm.add_node("n3", "h3")
    built = make_cluster(redis_srv.url, swarm, f"rec{next(_numbers)}", node_gone_s=0.5)
    try:
        built.sync()
        swarm.set_down("n1")
        swarm.set_down("n3")
        built.sync()  # within the grace: down, its tasks still there
        down = built.health()["nodes_down"]
        assert [(d["id"], d["name"]) for d in down] == [("n1", "h1"), ("n3", "h3")]
        assert {h["id"] for h in built.client.get("/hosts", headers=AUTH).get_json()} == \
            {"n1", "n2", "n3"}
        swarm.remove_node("n3")
        monkeypatch.setattr(built.manager.swarm.watch, "grace_s", 0.0)
        built.sync()  # n3 removed from the Swarm: lost and retired; n1 lost, still down
        assert [d["id"] for d in built.health()["nodes_down"]] == ["n1"]
        time.sleep(0.6)
        built.sync()  # n1 Down past GREENSWARM_NODE_GONE_S
        assert built.health()["nodes_down"] == []
        assert built.manager.views.host_name("n3") == "h3"
        swarm.states["n1"] = "ready"  # it came back under its own id after all
        built.sync()
        assert {h["id"] for h in built.client.get("/hosts", headers=AUTH).get_json()} == \
            {"n1", "n2"}
    finally:
        built.manager.loop.stop()
        built.store.flush()


def test_a_container_swarm_refuses_fails_its_request_with_swarms_reason(
    cluster: Cluster,
) -> None:
    """Swarm refused the containers (task state ``rejected``): the service does not stay
    running while Swarm tries again and again, the job does not end 'failed (exit code 0)'."""
    service = cluster.submit("svc", kind="service")["request"]["host"]
    job = cluster.submit("job", kind="job")["request"]["host"]
    cluster.swarm.refuse("svc", "No such image: greenswarm/missing:1")
    cluster.swarm.refuse("job", "Error response from daemon: Minimum memory limit allowed is "
                                "6MB")
    cluster.sync()
    for name, host, why in (("svc", service, "No such image: greenswarm/missing:1"),
                            ("job", job, "Minimum memory limit allowed is 6MB")):
        record = cluster.record(name)
        assert record["status"] == "failed", record
        ended = record["history"][-1]
        assert ended["kind"] == "ended" and why in ended["reason"], ended
        assert "refused" in ended["reason"] and "exit code" not in ended["reason"], ended
        assert cluster.store.task(name) is None  # its room is free
        assert name not in cluster.swarm.services_by_task
        assert f"on {cluster.manager.views.host_name(host)}:" in ended["reason"], ended


def test_a_down_node_takes_no_new_task_while_its_own_wait_out_the_grace(
        redis_srv: RedisServer, swarm: StandInSwarm) -> None:
    """A node Swarm calls Down keeps its tasks for NODE_GRACE_S (a blink), but no new task is
    placed there meanwhile: the HA chaos test's leader's node, stopped, took the new leader's
    placements until the grace ran out."""
    built = make_cluster(redis_srv.url, swarm, f"rec{next(_numbers)}")
    built.sync()
    try:
        _on(built, "n1", ["a"])  # the fuller host: the one energy would fill next
        built.swarm.set_down("n1")
        built.sync()
        assert (built.record("a")["status"], built.record("a")["host"]) == ("running", "n1")
        assert built.submit("b")["request"]["host"] == "n2"
        assert built.manager.scheduler.closed_hosts == frozenset({"n1"})
        built.swarm.set_ready("n1")  # back within the grace: open again, its task kept
        built.sync()
        assert built.manager.scheduler.closed_hosts == frozenset()
        assert built.record("a")["host"] == "n1"
    finally:
        built.manager.loop.stop()
        built.store.flush()


def test_a_damaged_record_keeps_its_checkpoint_directory_and_the_sweep_goes_on(
    redis_srv: RedisServer, swarm: StandInSwarm, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sweep of checkpoint directories (DESIGN 3.14) after each sync pass: a request over
    (stopped, or without a record) loses its directory, a running one keeps it, and one whose
    record is damaged (a status that is no status, or none) keeps it too, is listed as failing,
    and stops nothing: neither a take-over, nor the pass, nor the directories after it. The
    requests' list leaves out a record it cannot read, and GET of it is a 500 that says so.
    The damage is written into Redis by hand (the manager's own code never writes a record
    without a status: a stand-in for a record damaged otherwise)."""
    built = make_cluster(redis_srv.url, swarm, f"rec{next(_numbers)}",
                         checkpoint_dir=str(tmp_path))
    try:
        built.sync()
        for name in ("bad", "damaged", "done", "running"):
            built.submit(name)
        assert built.client.delete("/requests/done", headers=AUTH).status_code == 200
        assert built.record("done")["status"] == "stopped"
        root = tmp_path / built.manager.settings.redis_prefix
        for name in ("bad", "damaged", "done", "running", "zz-gone"):  # swept in this order
            (root / name).mkdir(parents=True)
        damage = redis.Redis.from_url(redis_srv.url, decode_responses=True)
        prefix = built.manager.settings.redis_prefix
        damage.hset(request_key(prefix, "bad"), "status", "half-written")
        damage.hdel(request_key(prefix, "damaged"), "status")
        damage.close()
        with caplog.at_level(logging.WARNING):
            # a manager's take-over, as at its start (strict: a failure stops the start),
            # runs a sync pass and the sweep; then the timer's passes
            built.manager.loop.call(lambda: built.manager._take_over(strict=True))
            for _ in range(2):
                built.manager.loop.call(built.manager._sync_logged)
        assert sorted(path.name for path in root.iterdir()) == ["bad", "damaged", "running"]
        # the sweep says so once (the reconciliation, which reads the status too, skips the
        # request's service as failing on its own)
        about = sorted(r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage())
        assert [line.split(" failed")[0] for line in about] == ["request bad",
                                                                "request damaged"], about
        failing = {(f["kind"], f["id"]) for f in built.health()["reconcile"]["failing"]}
        assert {("request", "bad"), ("request", "damaged")} <= failing, failing
        # the API lists the others; the damaged one answers a 500 that names it
        listed = built.client.get("/requests", headers=AUTH)
        assert listed.status_code == 200, listed.get_json()
        assert sorted(r["id"] for r in listed.get_json()) == ["done", "running"]
        one = built.client.get("/requests/bad", headers=AUTH)
        assert one.status_code == 500 and one.get_json()["error"] == "internal"
        assert "request 'bad': its record cannot be read" in one.get_json()["message"]
    finally:
        built.manager.loop.stop()
        built.store.flush()


def test_a_record_mended_while_it_is_deleted_is_stopped_and_kept(
    cluster: Cluster, redis_srv: RedisServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A record found damaged by DELETE but mended by hand before its removal (an operator
    fixing it at the same moment) is stopped as any other, its record and history kept, not
    removed. The race's timing cannot be produced on demand: the mend is made by a wrapper
    around the freeing step, which runs between the read that finds the damage and the
    removal; the damage and the mend are written into Redis by hand."""
    view = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    placed = cluster.submit("placed")["request"]
    assert placed["status"] == "running", placed
    prefix = cluster.manager.settings.redis_prefix
    view.hset(request_key(prefix, "placed"), "status", "half-written")
    assert cluster.client.get("/requests/placed", headers=AUTH).status_code == 500
    endings = cluster.manager.endings
    free = endings._free

    def free_then_mended(request_id: str) -> bool:
        pending = free(request_id)
        view.hset(request_key(prefix, request_id), "status", "running")  # the operator's mend
        return pending

    monkeypatch.setattr(endings, "_free", free_then_mended)
    answer = cluster.client.delete("/requests/placed", headers=AUTH)
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert "removed" not in body, body
    assert body["status"] == "stopped" and body["spec"]["name"] == "placed", body
    kinds = [e["kind"] for e in body["history"]]
    assert kinds[0] == "submitted" and kinds[-1] == "stopped" and len(kinds) > 2, kinds
    assert cluster.record("placed")["status"] == "stopped"
    assert "placed" not in cluster.swarm.services_by_task
    assert cluster.store.task("placed") is None
    failing = {(f["kind"], f["id"]) for f in cluster.health()["reconcile"]["failing"]}
    assert ("request", "placed") not in failing, failing


def test_a_damaged_deployment_is_left_out_of_the_list_named_and_removed_through_the_api(
    cluster: Cluster, redis_srv: RedisServer,
) -> None:
    """GET /deployments lists the others past a deployment record it cannot read (listed as
    failing), and GET /deployments/{name} names a member whose request record it cannot read
    instead of failing whole. The damage is written into Redis by hand, as above."""
    body = {"name": "shop", "requests": [
        {"name": name, "image": "busybox", "class": 3, "type": "service", "cpu_shares": 100,
         "memory": "32m"} for name in ("web", "db")]}
    created = cluster.client.post("/deployments", headers=AUTH, json=body)
    assert created.status_code == 201, created.get_json()
    prefix = cluster.manager.settings.redis_prefix
    cluster.manager.deployments.deployment_records.reserve("torn")
    damage = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    damage.set(f"{prefix}:deployment:torn", '{"name": "torn", "requests": [')
    db = next(m["id"] for m in created.get_json()["requests"] if m["name"] == "db")
    damage.hset(request_key(prefix, db), "status", "half-written")
    damage.close()
    listed = cluster.client.get("/deployments", headers=AUTH)
    assert listed.status_code == 200, listed.get_json()
    assert [d["name"] for d in listed.get_json()] == ["shop"]
    failing = {(f["kind"], f["id"]) for f in cluster.health()["reconcile"]["failing"]}
    assert ("deployment", "torn") in failing, failing
    shop = cluster.client.get("/deployments/shop", headers=AUTH)
    assert shop.status_code == 200, shop.get_json()
    members = {m["name"]: m for m in shop.get_json()["requests"]}
    assert members["web"]["status"] == "running"
    assert members["db"]["status"] is None
    assert f"request {db!r}: its record cannot be read" in members["db"]["error"]
    torn = cluster.client.get("/deployments/torn", headers=AUTH)
    assert torn.status_code == 500 and "deployment 'torn'" in torn.get_json()["message"]
    # DESIGN 9: each can be removed through the API. DELETE of the deployment stops web, and
    # stops and removes db, whose record cannot be read; DELETE of the torn one removes it
    stopped = cluster.client.delete("/deployments/shop", headers=AUTH)
    assert stopped.status_code == 200, stopped.get_json()
    members = {m["name"]: m for m in stopped.get_json()["requests"]}
    assert members["web"]["status"] == "stopped" and "error" not in members["web"]
    assert members["db"]["status"] == "stopped"
    assert "could not be read and was removed" in members["db"]["error"]
    assert cluster.client.get(f"/requests/{db}", headers=AUTH).status_code == 404
    assert cluster.record(members["web"]["id"])["status"] == "stopped"
    removed = cluster.client.delete("/deployments/torn", headers=AUTH)
    assert removed.status_code == 200, removed.get_json()
    assert removed.get_json()["requests"] == []
    assert "deployment 'torn': its record cannot be read" in removed.get_json()["removed"]
    for name in ("shop", "torn"):
        assert cluster.client.get(f"/deployments/{name}", headers=AUTH).status_code == 404
    assert cluster.client.get("/deployments", headers=AUTH).get_json() == []
    failing = {(f["kind"], f["id"]) for f in cluster.health()["reconcile"]["failing"]}
    assert not {("deployment", "torn"), ("request", db)} & failing, failing


def test_a_damaged_record_is_stopped_and_removed_through_the_api(
    cluster: Cluster, redis_srv: RedisServer, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DESIGN 9: a failing record can be removed through the API. DELETE /requests/{id} of a
    record that cannot be read stops what runs under its id (its Swarm service and booking, or
    its place in the queue), removes the record whole (hash, history, lists, SLO tally), says
    why in the answer and in the events stream, keeps its fields in the log, and it is listed
    as failing no more; the others are untouched. The damage is written into Redis by hand, as
    above."""
    cluster.manager.loop.call(cluster.manager._prepare_records)  # as at a take-over: a tally
    tally = cluster.manager.slo_tally
    view = redis.Redis.from_url(redis_srv.url, decode_responses=True)

    def tallied() -> int:
        """The requests the SLO tally counts (in a bucket "class:state")."""
        states = {state.value for state in SloState}
        return sum(int(count) for bucket, count in view.hgetall(tally.tally_key).items()
                   if bucket.partition(":")[2] in states)

    placed = cluster.submit("placed")["request"]
    kept = cluster.submit("kept")["request"]
    assert placed["host"] and cluster.store.task("placed") is not None
    cluster.manager.scheduler.set_closed_hosts(frozenset(cluster.swarm.nodes_by_id))
    queued = cluster.submit("queued", queue=True)["request"]
    cluster.manager.scheduler.set_closed_hosts(frozenset())
    assert queued["status"] == "pending", queued
    assert tallied() == 3
    prefix = cluster.manager.settings.redis_prefix
    view.hset(request_key(prefix, "placed"), "status", "half-written")
    view.hset(request_key(prefix, "queued"), "spec", "[1, 2")
    listed = cluster.client.get("/requests", headers=AUTH).get_json()
    assert [r["id"] for r in listed] == ["kept"]
    failing = {(f["kind"], f["id"]) for f in cluster.health()["reconcile"]["failing"]}
    assert {("request", "placed"), ("request", "queued")} <= failing, failing
    with caplog.at_level(logging.WARNING):
        answer = cluster.client.delete("/requests/placed", headers=AUTH)
        # and `greenswarm stop`, over HTTP: the manager's app served on 127.0.0.1
        server = make_server("127.0.0.1", 0, create_app(cluster.manager), threaded=True)
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        try:
            monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
            stopped = main(["stop", "queued", "--url", f"http://127.0.0.1:{server.server_port}"])
        finally:
            server.shutdown()
            serving.join(timeout=10)
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert body["id"] == "placed" and body["status"] == "stopped" and body["spec"] == {}
    assert "request 'placed': its record cannot be read" in body["removed"]
    assert [e["kind"] for e in body["history"]] == ["stopped"]
    assert stopped == 0
    assert capsys.readouterr().out.startswith(
        "queued: stopped; removed: stopped by the client; its record could not be read and was "
        "removed (request 'queued': its record cannot be read (JSONDecodeError")
    for name in ("placed", "queued"):
        assert cluster.client.get(f"/requests/{name}", headers=AUTH).status_code == 404
        assert not [k for k in view.scan_iter(f"{prefix}:*") if name in k.split(":")[-2:]]
        assert not [s for s in view.scan_iter(f"{prefix}:requests:*")
                    if view.sismember(s, name)]
    # what ran under the ids is stopped: the service, the booking, the queue's entry
    assert "placed" not in cluster.swarm.services_by_task
    assert cluster.store.task("placed") is None
    assert "queued" not in {entry.request.id for entry in cluster.store.pending()}
    # the other request runs on, alone in the lists and the tally
    assert cluster.record("kept")["status"] == kept["status"] == "running"
    assert cluster.store.task("kept") is not None
    assert [r["id"] for r in cluster.client.get("/requests", headers=AUTH).get_json()] == [
        "kept"]
    assert tallied() == 1
    failing = {(f["kind"], f["id"]) for f in cluster.health()["reconcile"]["failing"]}
    assert not {("request", "placed"), ("request", "queued")} & failing, failing
    events = cluster.client.get("/events", headers=AUTH).get_json()["events"]
    removed = [e for e in events if e["kind"] == "stopped" and "removed" in e["reason"]]
    assert sorted(e["request"] for e in removed) == ["placed", "queued"]
    logged = [r.getMessage() for r in caplog.records if "removed through the API" in r.getMessage()]
    assert len(logged) == 2 and any("half-written" in line for line in logged), logged
    view.close()


def test_a_damaged_record_of_a_request_offloaded_is_stopped_at_its_peer_first(
    redis_srv: RedisServer, tmp_path: Path,
) -> None:
    """A record that cannot be read still says, in its ``cluster`` field alone, which peer runs
    the request: DELETE stops it there first. While the peer does not answer: a 503 naming it,
    and nothing is removed here (a deployment's other members are stopped, the answer names
    the member and its peer); once it answers, the peer's own record is stopped and this one
    removed. Two real managers, b's app served over HTTP on 127.0.0.1; the damage is
    written into Redis by hand, as above."""
    port = free_port()
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps([{"name": "b", "url": f"http://127.0.0.1:{port}",
                                  "token": TOKEN, "latency_ms": 1, "bandwidth_mbit": 1000}]))
    b_swarm = StandInSwarm()
    b_swarm.add_node("nb", "hb")
    b = make_cluster(redis_srv.url, b_swarm, f"rec{next(_numbers)}", federation_name="b")
    a_swarm = StandInSwarm()
    a_swarm.add_node("na", "ha")
    a = make_cluster(redis_srv.url, a_swarm, f"rec{next(_numbers)}", federation_name="a",
                     peers_file=str(peers), peer_timeout_s=1.0)
    server = None
    try:
        b.sync()
        assert b.submit("away")["request"]["status"] == "running"
        a.manager.records.create("away", {"image": "busybox", "class": 3, "type": "service",
                                          "cpu_shares": 100, "memory": 32 * 2**20})
        damage = redis.Redis.from_url(redis_srv.url, decode_responses=True)
        key = request_key(a.manager.settings.redis_prefix, "away")
        damage.hset(key, mapping={"cluster": "b", "status": "half-written"})
        unanswered = a.client.delete("/requests/away", headers=AUTH)
        assert unanswered.status_code == 503, unanswered.get_json()
        assert "peer b" in unanswered.get_json()["message"]
        assert damage.hget(key, "status") == "half-written"  # nothing changed here
        # a deployment's member alike: the others are stopped, the answer names it and its peer
        a.sync()
        body = {"name": "shop", "requests": [
            {"name": name, "image": "busybox", "class": 3, "type": "service",
             "cpu_shares": 100, "memory": "32m"} for name in ("db", "web")]}
        created = a.client.post("/deployments", headers=AUTH, json=body)
        assert created.status_code == 201, created.get_json()
        ids = {m["name"]: m["id"] for m in created.get_json()["requests"]}
        damage.hset(request_key(a.manager.settings.redis_prefix, ids["db"]),
                    mapping={"cluster": "b", "status": "half-written"})
        stopping = a.client.delete("/deployments/shop", headers=AUTH)
        assert stopping.status_code == 503, stopping.get_json()
        assert "not stopped: db: " in stopping.get_json()["message"]
        assert "peer b" in stopping.get_json()["message"]
        assert a.record(ids["web"])["status"] == "stopped"
        server = make_server("127.0.0.1", port, create_app(b.manager), threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        removed = a.client.delete("/requests/away", headers=AUTH)
        assert removed.status_code == 200, removed.get_json()
        assert "its record cannot be read" in removed.get_json()["removed"]
        assert not damage.exists(key)
        assert b.record("away")["status"] == "stopped"
        assert "away" not in b_swarm.services_by_task
        stopped = a.client.delete("/deployments/shop", headers=AUTH)  # b knows no db: done
        assert stopped.status_code == 200, stopped.get_json()
        assert a.client.get(f"/requests/{ids['db']}", headers=AUTH).status_code == 404
        damage.close()
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        for built in (a, b):
            built.manager.loop.stop()
            built.store.flush()
