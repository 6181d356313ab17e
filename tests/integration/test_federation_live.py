"""Live federation (DESIGN 12, offloading): two clusters, each its own real manager process,
Redis prefix and Swarm service names, sharing the single-node swarm of these tests. Cluster b
is the usual manager and agent; cluster a has b as its peer and GREENSWARM_OFFLOAD=unplaced,
and its one host is filled first (a class-1 service of all its 2048 shares: nothing of class 1
fits beside it, cuts nothing, kills nothing), so its own policy places no class-1 request.

Nothing is mocked. One fault cannot be produced for real here, a forward whose answer is lost
after the peer created the request: it is stood in for by creating the request at b first, as
a's forward would have (with ``forwarded_from: a``), then submitting it to a."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from cli.main import main as cli_main
from lab.processes import RedisServer
from tests.support.live import TOKEN, Live, federated_pair, poll

pytestmark = [pytest.mark.docker, pytest.mark.redis]
_numbers = itertools.count()


@pytest.fixture
def pair(
    node_id: str, redis_srv: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Live, Live]]:
    logs = Path(tmp_path_factory.mktemp("fed-logs"))
    with federated_pair(node_id, redis_srv.url, f"fd{next(_numbers)}", logs) as (a, b):
        filled = a.submit("fill", 1, "service", 2048, "64m")
        assert filled["request"]["status"] == "running", filled
        a.running("fill")
        poll(lambda: peer(a)["state"] == "up", 20, "a to see b up")
        yield a, b


def peer(a: Live) -> dict[str, Any]:
    found: dict[str, Any] = a.get("/federation/peers")["peers"][0]
    return found


def submit_to(cluster: Live, name: str, **extra: object) -> requests.Response:
    body = {"image": "greenswarm/busybox:latest", "name": name, "class": 1, "type": "service",
            "cpu_shares": 512, "memory": "64m", "command": ["sleep", "3600"], **extra}
    return cluster.post("/requests", body)


def services_named(cluster: Live, name: str) -> list[Any]:
    return [s for s in cluster.docker.services.list() if s.name == f"{cluster.prefix}-{name}"]


def test_a_full_cluster_offloads_to_its_peer_and_status_and_stop_work_through_it(
    pair: tuple[Live, Live], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    answer = submit_to(a, "x")
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["request"]["cluster"] == "b" and body["request"]["status"] == "running"
    assert body["decision"]["placed"] and body["decision"]["cluster"] == "b"
    # it runs as a container of b's, on b's node; a has no service of it
    b.running("x")
    assert a.containers("x") == [] and services_named(a, "x") == []
    assert b.request("x")["forwarded_from"] == "a"
    # through a: its status as b has it, with where it runs
    record = a.request("x")
    assert (record["cluster"], record["status"], record["host"]) == ("b", "running", b.node_id)
    hostname = b.docker.nodes.get(b.node_id).attrs["Description"]["Hostname"]
    assert record["host_name"] == hostname  # as b names it
    listed = next(r for r in a.get("/requests") if r["id"] == "x")
    assert listed["host_name"] == hostname  # a's own record of it
    assert [e["kind"] for e in record["history"]][:2] == ["submitted", "offloaded"]
    assert any(e.get("cluster") == "b" and e["kind"] == "placed" for e in record["history"])
    events = a.get("/events")["events"]
    assert any(e["request"] == "x" and e["kind"] == "offloaded" and e["cluster"] == "b"
               for e in events)
    # the CLI through a: a CLUSTER column, and the peers
    monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
    assert cli_main(["status", "--url", a.url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "CLUSTER" in table[0].split()
    assert any(line.split()[0] == "x" and "b" in line.split() for line in table[1:])
    assert cli_main(["peers", "--url", a.url]) == 0
    assert any(line.split()[:2] == ["b", "up"] for line in capsys.readouterr().out.splitlines())
    # stop through a: gone from b's node, stopped in both records
    stopped = a.delete("/requests/x")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "stopped"
    poll(lambda: not b.containers("x"), 60, "x's container on b to go")
    assert b.request("x")["status"] == "stopped"
    assert a.request("x")["status"] == "stopped"


def test_a_peer_down_is_skipped_with_a_clear_refusal_and_used_again_when_back(
    pair: tuple[Live, Live],
) -> None:
    a, b = pair
    b.stop_manager()
    poll(lambda: peer(a)["state"] == "down", 20, "a to mark b down")
    assert peer(a)["error"]
    answer = submit_to(a, "while-down")
    assert answer.status_code == 201, answer.text  # refused as a's own would be, not a 5xx
    body = answer.json()
    assert body["request"]["status"] == "rejected" and body["request"]["cluster"] is None
    assert "peer b is down" in body["decision"]["reason"]
    history = a.request("while-down")["history"]
    missed = [e for e in history if e["kind"] == "not-offloaded"]
    assert len(missed) == 1 and missed[0]["peers_down"] == ["b"]
    assert history[-1]["kind"] == "rejected"
    assert a.get("/healthz")["status"] == "ok"  # a works alone
    b.start_manager()
    poll(lambda: peer(a)["state"] == "up", 20, "a to see b up again")
    again = submit_to(a, "after")
    assert again.status_code == 201, again.text
    assert again.json()["request"]["cluster"] == "b"
    b.running("after")


def test_an_offloaded_request_is_read_and_stopped_with_a_503_naming_its_peer_when_down(
    pair: tuple[Live, Live],
) -> None:
    a, b = pair
    assert submit_to(a, "held").json()["request"]["cluster"] == "b"
    b.stop_manager()
    for answer in (requests.get(a.url + "/requests/held", headers=a.headers(), timeout=30),
                   a.delete("/requests/held")):
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"] == "unavailable" and "peer b" in answer.json()["message"]
    listed = {r["id"]: r for r in a.get("/requests")}  # the list answers from a's own records
    assert listed["held"]["cluster"] == "b" and listed["fill"]["cluster"] is None
    b.start_manager()
    assert a.delete("/requests/held").json()["status"] == "stopped"
    poll(lambda: not b.containers("held"), 60, "held's container on b to go")


def test_a_request_is_never_placed_twice_on_the_peer(pair: tuple[Live, Live]) -> None:
    a, b = pair
    # the same id twice at a: the second is a conflict at a, b has one service
    assert submit_to(a, "twice").json()["request"]["cluster"] == "b"
    assert submit_to(a, "twice").status_code == 409
    assert len(services_named(b, "twice")) == 1
    # a forward whose answer was lost (stand-in: b got it, a never heard): a's forward meets
    # b's 409 and adopts b's record, which a forwarded; nothing new is placed
    first = submit_to(b, "lost", forwarded_from="a")
    assert first.status_code == 201 and first.json()["request"]["status"] == "running"
    adopted = submit_to(a, "lost")
    assert adopted.status_code == 201, adopted.text
    assert adopted.json()["request"]["cluster"] == "b"
    assert adopted.json()["request"]["status"] == "running"
    assert len(services_named(b, "lost")) == 1
    assert len(b.get("/requests?status=running")) == 2
    # an id b holds for somebody else is not adopted: refused at a, naming why
    assert submit_to(b, "theirs").status_code == 201
    refused = submit_to(a, "theirs").json()
    assert refused["request"]["status"] == "rejected" and refused["request"]["cluster"] is None
    assert "already has a request named 'theirs'" in refused["decision"]["reason"]
    # a request b got from a is never forwarded again by b (b has no peers: it just decides)
    assert b.request("lost")["cluster"] is None
