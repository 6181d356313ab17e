"""Deployments across clusters (DESIGN 12, federation/deploy.py; manager/spec.py's parsing):
from adverts to the placement's input, and the all-or-nothing creation, with a fake creator
that records its calls."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.energy import PowerModel
from domain.errors import UnavailableError, ValidationError
from domain.model import Request, TaskType
from domain.regions import Region
from federation.deploy import (
    Creation,
    Deployed,
    DeploymentSpec,
    Member,
    Site,
    Undone,
    deploy,
    federation_for,
    via_home,
)
from federation.offload import Advert
from federation.placement import ClusterLink, Federation, JobLink, Refusal
from manager.spec import parse_deployment

GIB = 2**30
POWER = PowerModel.named()


def advert(name: str, hosts: int = 1, cpu: int = 4096, memory: int = 8 * GIB,
           cpu_allocated: int = 0, memory_allocated: int = 0) -> Advert:
    """A cluster of ``hosts`` empty hosts of ``cpu`` shares and ``memory`` bytes, of which
    the given allocation is taken (so its room as a whole is what is left)."""
    return Advert(name, hosts, hosts * cpu, hosts * memory, cpu_allocated, memory_allocated,
                  0.0, 0.0, ((Region.LEE, hosts),), (), hosts, ((), (), (), ()),
                  ((cpu, memory),), 0.0, 0, POWER)


def member(name: str, cpu: int = 1024, memory: int = GIB, deployment: str = "d") -> Member:
    rid = f"{deployment}-{name}"
    return Member(name, Request(rid, 1, TaskType.SERVICE, cpu, memory),
                  {"name": rid, "cpu_shares": cpu, "memory": memory})


@dataclass
class FakeCreator:
    """Creates anything but the requests named in ``refuse``; records every call."""

    refuse: set[str] = field(default_factory=set)
    lost: bool = False  # a refusal whose answer was lost: the cluster may hold it
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (verb, name, cluster)

    def create(self, m: Member, cluster: str) -> Creation:
        self.calls.append(("create", m.name, cluster))
        if m.name in self.refuse:
            return Creation(False, reason=f"{cluster} refused {m.name}", maybe_held=self.lost)
        return Creation(True, "running", f"{cluster}-host")

    def remove(self, m: Member, cluster: str) -> str | None:
        self.calls.append(("remove", m.name, cluster))
        return None

    def running(self) -> set[tuple[str, str]]:
        """What the calls leave running: created and not removed."""
        up: set[tuple[str, str]] = set()
        for verb, name, cluster in self.calls:
            if verb == "create" and name not in self.refuse:
                up.add((name, cluster))
            elif verb == "remove":
                up.discard((name, cluster))
        return up


# -- the placement's input -----------------------------------------------------------------------


def test_the_federation_is_home_and_its_up_peers_linked_through_home() -> None:
    spec = DeploymentSpec("d", (member("x"),))
    federation = federation_for(spec, advert("home", cpu_allocated=1024), [
        Site(advert("b"), ClusterLink(3.0, 100.0)), Site(advert("c"), ClusterLink(4.0, 50.0))])
    assert [(c.id, c.cpu_shares, c.memory) for c in federation.clusters] == [
        ("home", 3072, 8 * GIB), ("b", 4096, 8 * GIB), ("c", 4096, 8 * GIB)]
    assert federation.link("home", "home") == ClusterLink.local()
    assert federation.link("home", "b") == ClusterLink(3.0, 100.0)
    # two peers: the path through this cluster, latencies added, the lower bandwidth
    assert federation.link("b", "c") == ClusterLink(7.0, 50.0)
    assert via_home(ClusterLink.local(), ClusterLink(2.0, 10.0)) == ClusterLink(2.0, 10.0)


def test_a_request_that_fits_no_host_of_a_cluster_is_never_placed_there() -> None:
    # b has room as a whole (two hosts of 1024 shares) but no host holds 1536 shares
    spec = DeploymentSpec("d", (member("big", cpu=1536),))
    federation = federation_for(spec, advert("home", cpu_allocated=4096),
                                [Site(advert("b", hosts=2, cpu=1024), ClusterLink(1.0, 100.0))])
    assert ("big", "b") in federation.unfit
    refusal = deploy(spec, federation, FakeCreator())
    assert isinstance(refusal, Refusal) and "fits no host of b" in refusal.reason


def test_three_services_split_across_clusters_when_none_holds_them_all() -> None:
    spec = DeploymentSpec("d", (member("web"), member("api"), member("db")),
                          (JobLink("web", "api", max_latency_ms=5.0),
                           JobLink("api", "db", min_bandwidth_mbit=100.0)))
    federation = federation_for(spec, advert("a", cpu_allocated=3072),
                                [Site(advert("b", cpu_allocated=2048), ClusterLink(1.0, 1000.0))])
    creator = FakeCreator()
    result = deploy(spec, federation, creator)
    assert isinstance(result, Deployed)
    where = {p.name: p.cluster for p in result.placed}
    assert sorted(where.values()) == ["a", "b", "b"]
    assert [c for c in creator.calls if c[0] == "remove"] == []


def test_a_constraint_the_link_cannot_carry_is_refused_whole_naming_it() -> None:
    spec = DeploymentSpec("d", (member("web"), member("api"), member("db")),
                          (JobLink("web", "api", max_latency_ms=0.5),
                           JobLink("api", "db", max_latency_ms=0.5)))
    federation = federation_for(spec, advert("a", cpu_allocated=3072),
                                [Site(advert("b", cpu_allocated=2048), ClusterLink(1.0, 1000.0))])
    creator = FakeCreator()
    result = deploy(spec, federation, creator)
    assert isinstance(result, Refusal)
    assert "within 0.5 ms" in result.reason and "1 ms" in result.reason
    assert creator.calls == []


def test_a_creation_that_fails_undoes_every_one_before_it_last_first() -> None:
    spec = DeploymentSpec("d", (member("x"), member("y"), member("z")))
    federation = federation_for(spec, advert("a"), [])
    creator = FakeCreator(refuse={"z"})
    result = deploy(spec, federation, creator)
    assert isinstance(result, Undone)
    assert (result.request, result.cluster, result.reason) == ("z", "a", "a refused z")
    assert creator.calls[-2:] == [("remove", "y", "a"), ("remove", "x", "a")]
    assert creator.running() == set()


def test_a_creation_whose_answer_was_lost_is_removed_too() -> None:
    spec = DeploymentSpec("d", (member("x"), member("y")))
    creator = FakeCreator(refuse={"y"}, lost=True)
    result = deploy(spec, federation_for(spec, advert("a"), []), creator)
    assert isinstance(result, Undone)
    assert creator.calls[2:] == [("remove", "y", "a"), ("remove", "x", "a")]


def test_a_creation_that_raises_is_undone_like_a_refusal() -> None:
    """An error of ours while creating (Redis gone, a peer's answer lost) is a failure whose
    request the cluster may hold: it and everything before it are removed."""

    class Failing(FakeCreator):
        def create(self, m: Member, cluster: str) -> Creation:
            if m.name == "y":
                self.calls.append(("create", m.name, cluster))
                raise UnavailableError("redis: connection refused")
            return super().create(m, cluster)

    spec = DeploymentSpec("d", (member("x"), member("y"), member("z")))
    creator = Failing()
    result = deploy(spec, federation_for(spec, advert("a"), []), creator)
    assert isinstance(result, Undone)
    assert (result.request, result.reason) == ("y", "redis: connection refused")
    assert creator.calls[2:] == [("remove", "y", "a"), ("remove", "x", "a")]


# -- properties -------------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[DeploymentSpec, Federation]:
    count = draw(st.integers(1, 6))
    members = tuple(member(f"m{i}", cpu=draw(st.sampled_from([256, 512, 1024, 2048])),
                           memory=draw(st.sampled_from([GIB // 4, GIB, 2 * GIB])))
                    for i in range(count))
    links = []
    for i in range(count):
        for j in range(i + 1, count):
            if draw(st.booleans()):
                links.append(JobLink(
                    f"m{i}", f"m{j}",
                    draw(st.none() | st.sampled_from([0.5, 2.0, 5.0, 20.0])),
                    draw(st.none() | st.sampled_from([10.0, 100.0, 1000.0]))))
    spec = DeploymentSpec("d", members, tuple(links))

    def cluster(name: str) -> Advert:
        cpu = draw(st.sampled_from([1024, 2048, 4096]))
        hosts = draw(st.integers(1, 3))
        return advert(name, hosts, cpu, 4 * GIB,
                      cpu_allocated=draw(st.integers(0, hosts * cpu)),
                      memory_allocated=draw(st.integers(0, hosts * 4 * GIB)))

    peers = [Site(cluster(f"p{i}"), ClusterLink(draw(st.sampled_from([0.2, 1.0, 3.0, 10.0])),
                                                draw(st.sampled_from([50.0, 200.0, 1000.0]))))
             for i in range(draw(st.integers(0, 3)))]
    return spec, federation_for(spec, cluster("home"), peers)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_a_placed_deployment_breaks_no_constraint_and_a_refused_one_creates_nothing(
    scenario: tuple[DeploymentSpec, Federation],
) -> None:
    spec, federation = scenario
    creator = FakeCreator()
    result = deploy(spec, federation, creator)
    if isinstance(result, Refusal):
        assert creator.calls == []
        return
    assert isinstance(result, Deployed)
    where = {p.name: p.cluster for p in result.placed}
    assert set(where) == {m.name for m in spec.members}
    for link in spec.links:
        between = federation.link(where[link.a], where[link.b])
        assert between is not None and link.carried_by(between)
        if link.max_latency_ms is not None:
            assert between.latency_ms <= link.max_latency_ms
        if link.min_bandwidth_mbit is not None:
            assert between.bandwidth_mbit >= link.min_bandwidth_mbit
    for cluster in federation.clusters:
        here = [m for m in spec.members if where[m.name] == cluster.id]
        assert sum(m.request.cpu_shares for m in here) <= cluster.cpu_shares
        assert sum(m.request.memory for m in here) <= cluster.memory
        assert all((m.name, cluster.id) not in federation.unfit for m in here)
    assert creator.running() == set(where.items())


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.data())
def test_a_deployment_undone_leaves_nothing_created(
    scenario: tuple[DeploymentSpec, Federation], data: st.DataObject
) -> None:
    spec, federation = scenario
    failing = data.draw(st.sampled_from([m.name for m in spec.members]))
    creator = FakeCreator(refuse={failing}, lost=data.draw(st.booleans()))
    result = deploy(spec, federation, creator)
    assert not isinstance(result, Deployed)
    if isinstance(result, Undone):
        assert result.request == failing and result.left == ()
    assert creator.running() == set()


# -- parsing POST /deployments ----------------------------------------------------------------

LIMITS: dict[str, Any] = {"max_cpu_shares": 4096, "max_memory": 8 * GIB}


def body(**change: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "shop",
        "requests": [{"name": n, "image": "greenswarm/busybox:latest", "class": 1,
                      "type": "service", "cpu_shares": 512, "memory": "64m"}
                     for n in ("web", "api")],
        "links": [{"a": "web", "b": "api", "max_latency_ms": 5, "min_bandwidth_mbit": 100}],
    }
    base.update(change)
    return base


def test_a_deployment_parses_with_ids_from_its_name() -> None:
    spec = parse_deployment(body(), **LIMITS)
    assert spec.name == "shop"
    assert [(m.name, m.request.id, m.spec["name"]) for m in spec.members] == [
        ("web", "shop-web", "shop-web"), ("api", "shop-api", "shop-api")]
    assert spec.links == (JobLink("web", "api", 5.0, 100.0),)


MEMBER = body()["requests"][0]


@pytest.mark.parametrize(("change", "field"), [
    ({"name": "-x"}, "name"),
    ({"extra": 1}, "extra"),
    ({"requests": []}, "requests"),
    ({"requests": [MEMBER] * 101}, "requests"),
    ({"requests": [MEMBER, MEMBER]}, "requests[1].name"),
    ({"requests": [{**MEMBER, "name": None}]}, "requests[0].name"),
    ({"requests": [{**MEMBER, "cpu_shares": 99_999}]}, "requests[0].cpu_shares"),
    ({"requests": [{**MEMBER, "queue": True}]}, "requests[0].queue"),
    ({"requests": [{**MEMBER, "forwarded_from": "x"}]}, "requests[0].forwarded_from"),
    ({"requests": [{**MEMBER, "name": "x" * 126}]}, "requests[0].name"),
    ({"requests": ["web"]}, "requests[0]"),
    ({"links": None}, "links"),
    ({"links": [{"a": "web", "b": "nope"}]}, "links[0].b"),
    ({"links": [{"a": "web", "b": "web"}]}, "links[0].b"),
    ({"links": [{"a": "web", "b": "api", "max_latency_ms": -1}]}, "links[0].max_latency_ms"),
    ({"links": [{"a": "web", "b": "api", "max_latency_ms": None}]}, "links[0].max_latency_ms"),
    ({"links": [{"a": "web", "b": "api", "min_bandwidth_mbit": 0}]},
     "links[0].min_bandwidth_mbit"),
    ({"links": [{"a": "web", "b": "api", "min_bandwidth_mbit": True}]},
     "links[0].min_bandwidth_mbit"),
    ({"links": [{"a": "web", "b": "api", "max_latency_ms": math.inf}]},
     "links[0].max_latency_ms"),
    ({"links": [{"a": "web", "b": "api", "why": 1}]}, "links[0].why"),
    ({"links": ["web-api"]}, "links[0]"),
])
def test_a_bad_deployment_is_refused_naming_its_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_deployment(body(**change), **LIMITS)
    assert caught.value.field == field


def test_a_deployment_body_must_be_an_object() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_deployment([], **LIMITS)
    assert caught.value.field == "body"
