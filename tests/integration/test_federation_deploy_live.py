"""Live deployments across two clusters (DESIGN 12): the two real managers of
``federated_pair`` (a, with b as its peer at 1 ms and 1000 Mbit/s in its peers file).

How the split is made: a's one host (2048 shares) gets a class-1 service of 1024 shares first,
so a has room for one service of 768 shares and b (2048 shares, empty) for two: three of them
fit in neither cluster alone, so a deployment of three is placed across a and b, and its links
must hold over the a-b link (1 ms). Nothing is mocked."""

from __future__ import annotations

import itertools
import json
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
NAMES = ("web", "api", "db")


@pytest.fixture
def pair(
    node_id: str, redis_srv: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Live, Live]]:
    logs = Path(tmp_path_factory.mktemp("deploy-logs"))
    with federated_pair(node_id, redis_srv.url, f"dp{next(_numbers)}", logs,
                        offload="off") as (a, b):
        filled = a.submit("fill", 1, "service", 1024, "64m")
        assert filled["request"]["status"] == "running", filled
        poll(lambda: a.get("/federation/peers")["peers"][0]["state"] == "up", 20,
             "a to see b up")
        yield a, b


def deployment(name: str, **link: float) -> dict[str, Any]:
    return {
        "name": name,
        "requests": [{"name": n, "image": "greenswarm/busybox:latest", "class": 1,
                      "type": "service", "cpu_shares": 768, "memory": "64m",
                      "command": ["sleep", "3600"]} for n in NAMES],
        "links": [{"a": "web", "b": "api", **link}, {"a": "api", "b": "db", **link}],
    }


def services(cluster: Live, deployment_name: str) -> list[Any]:
    return [s for s in cluster.docker.services.list()
            if s.name.startswith(f"{cluster.prefix}-{deployment_name}-")]


def test_three_services_with_links_are_placed_across_both_clusters_and_stopped_together(
    pair: tuple[Live, Live], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = pair
    spec = tmp_path / "shop.json"
    spec.write_text(json.dumps(deployment("shop", max_latency_ms=5, min_bandwidth_mbit=100)))
    monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
    assert cli_main(["deploy", str(spec), "--url", a.url]) == 0
    printed = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in printed.splitlines()[2:]}
    assert set(rows) == set(NAMES), printed
    where = {name: rows[name][2] for name in NAMES}
    assert sorted(where.values()) == ["a", "b", "b"], printed
    # each runs as a container of the cluster it was placed on, and only there
    for name, cluster in where.items():
        here, there = (a, b) if cluster == "a" else (b, a)
        here.running(f"shop-{name}")
        assert there.containers(f"shop-{name}") == []
    record = a.get("/deployments/shop")
    assert record["status"] == "deployed"
    assert {r["name"]: (r["cluster"], r["status"]) for r in record["requests"]} == {
        n: (c, "running") for n, c in where.items()}
    assert [d["name"] for d in a.get("/deployments")] == ["shop"]
    on_b = [n for n, c in where.items() if c == "b"]
    assert all(b.request(f"shop-{n}")["forwarded_from"] == "a" for n in on_b)
    # a name is taken once
    again = a.post("/deployments", deployment("shop"))
    assert again.status_code == 409, again.text
    # undeploy: every service stops, on both sides
    assert cli_main(["undeploy", "shop", "--url", a.url]) == 0
    for name, cluster in where.items():
        holder = a if cluster == "a" else b
        poll(lambda h=holder, n=name: not h.containers(f"shop-{n}"), 60,
             f"shop-{name}'s container on {cluster} to go")
        assert holder.request(f"shop-{name}")["status"] == "stopped"
    assert services(a, "shop") == [] and services(b, "shop") == []
    gone = requests.get(a.url + "/deployments/shop", headers=a.headers(), timeout=30)
    assert gone.status_code == 404, gone.text  # deleted: its requests keep their records
    assert [d["name"] for d in a.get("/deployments")] == []


def test_a_deployment_whose_links_cannot_hold_is_refused_whole_leaving_nothing(
    pair: tuple[Live, Live], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = pair
    refused = a.post("/deployments", deployment("tight", max_latency_ms=0.5))
    assert refused.status_code == 409, refused.text
    body = refused.json()
    assert body["error"] == "conflict" and body["deployment"] == "tight"
    assert body["request"] in NAMES
    assert "within 0.5 ms" in body["reason"] and "1 ms" in body["reason"], body
    assert body["created"] == []
    # nothing created anywhere: no service, no request record, no deployment record
    assert services(a, "tight") == [] and services(b, "tight") == []
    for cluster in (a, b):
        ids = [r["id"] for r in cluster.get("/requests")]
        assert not [i for i in ids if i.startswith("tight-")], ids
    missing = a.post("/deployments", {"name": "x"})
    assert missing.status_code == 400 and missing.json()["field"] == "requests"
    assert [d["name"] for d in a.get("/deployments")] == []
    # the CLI: exit 1, with the failing constraint
    spec = tmp_path / "tight.json"
    spec.write_text(json.dumps(deployment("tight", max_latency_ms=0.5)))
    monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
    assert cli_main(["deploy", str(spec), "--url", a.url]) == 1
    assert "within 0.5 ms" in capsys.readouterr().err
