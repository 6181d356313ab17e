"""All-or-nothing placement across clusters (DESIGN 12), the federation thesis's heuristic."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.placement import (
    GIB,
    Cluster,
    ClusterLink,
    Deployment,
    Federation,
    Job,
    JobLink,
    Placement,
    Refusal,
    affinity,
    initial_costs,
    phi,
    place,
    sorted_jobs,
)

CORE = 1024


def job(name: str, cores: float, gib: float = 0.0) -> Job:
    return Job(name, round(cores * CORE), round(gib * GIB))


def test_sorted_jobs_on_the_theses_own_deployment() -> None:
    """Listing 6.1 of the thesis: five jobs and their links; SJ sorts by own demand plus the
    neighbours' (algorithm 1): n1 1398.12, n2 1272.05, n3 1241.28, n4 1138.11, n0 998.94."""
    demands = {"n0": 156.84, "n1": 456.02, "n2": 260.01, "n3": 399.18, "n4": 126.07}
    jobs = tuple(Job(name, round(d * 100), 0) for name, d in demands.items())  # 1/100 share
    edges = [("n3", "n4"), ("n4", "n1"), ("n3", "n2"), ("n2", "n1"), ("n3", "n1"),
             ("n1", "n0"), ("n0", "n4"), ("n2", "n0")]
    deployment = Deployment(jobs, tuple(JobLink(a, b, max_latency_ms=100.0) for a, b in edges))
    assert [j.id for j in sorted_jobs(deployment)] == ["n1", "n2", "n3", "n4", "n0"]


def test_phi_and_the_affinity() -> None:
    assert phi(-3.0) == phi(0.0) == 1.0
    assert phi(2.0, slope=0.5) == pytest.approx(math.exp(-1.0))
    a = job("a", 2)
    neighbours = [job("b", 2), job("c", 1)]
    assert affinity(a, neighbours, (6 * CORE, GIB)) == 1.0  # 5 cores of neighbourhood fit in 6
    assert affinity(a, neighbours, (3 * CORE, GIB)) == pytest.approx(math.exp(-2.0))
    assert affinity(a, neighbours, (1 * CORE, GIB)) == 0.0  # the job itself does not fit


def test_costs_start_at_demand_times_price() -> None:
    jobs = [job("a", 2, 1), job("b", 1)]
    clusters = [Cluster("A", 8 * CORE, 8 * GIB, 1.0), Cluster("B", 8 * CORE, 8 * GIB, 0.5)]
    assert initial_costs(jobs, clusters) == [[3.0, 1.5], [1.0, 0.5]]


def two_clusters(latency_ms: float = 20.0, room_b: float = 8.0) -> Federation:
    return Federation(
        (Cluster("A", 4 * CORE, 8 * GIB, 1.0), Cluster("B", round(room_b * CORE), 8 * GIB, 0.5)),
        {frozenset(("A", "B")): ClusterLink(latency_ms, 1000.0, price=0.1)},
    )


def test_the_cheapest_cluster_takes_what_fits_and_linked_jobs_follow_their_link() -> None:
    deployment = Deployment((job("web", 2), job("db", 2), job("batch", 3)),
                            (JobLink("web", "db", max_latency_ms=5.0),))
    result = place(deployment, two_clusters(latency_ms=20.0))
    assert isinstance(result, Placement)
    # web and db must share a cluster (20 ms > 5 ms); B is cheaper and has room for all
    assert result.assignment == {"web": "B", "db": "B", "batch": "B"}
    small_b = place(deployment, two_clusters(latency_ms=20.0, room_b=4.0))
    assert isinstance(small_b, Placement)
    assert small_b.assignment["web"] == small_b.assignment["db"]
    assert small_b.assignment["batch"] != small_b.assignment["web"]


def test_a_constraint_no_link_carries_refuses_the_whole_deployment() -> None:
    # web and db cannot share a cluster (4 cores each, the clusters have 4 and 4.5) and the
    # link between A and B is too slow for them
    deployment = Deployment((job("web", 3), job("db", 3)),
                            (JobLink("web", "db", max_latency_ms=5.0),))
    result = place(deployment, two_clusters(latency_ms=20.0, room_b=4.5))
    assert isinstance(result, Refusal)
    assert "web and db within 5 ms" in result.reason and "20 ms" in result.reason


def test_bandwidth_is_a_constraint_too() -> None:
    fed = Federation(
        (Cluster("A", 2 * CORE, GIB, 1.0), Cluster("B", 2 * CORE, GIB, 1.0)),
        {frozenset(("A", "B")): ClusterLink(1.0, 50.0)},
    )
    deployment = Deployment((job("a", 2), job("b", 2)),
                            (JobLink("a", "b", min_bandwidth_mbit=100.0),))
    refused = place(deployment, fed)
    assert isinstance(refused, Refusal) and "at least 100 Mbit/s" in refused.reason
    ok = place(Deployment((job("a", 2), job("b", 2)),
                          (JobLink("a", "b", min_bandwidth_mbit=40.0),)), fed)
    assert isinstance(ok, Placement) and set(ok.assignment.values()) == {"A", "B"}


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=6),
    rooms=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    latencies=st.lists(st.sampled_from([1.0, 10.0, 50.0]), min_size=6, max_size=6),
    links=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5),
                             st.sampled_from([2.0, 20.0, 100.0])), max_size=6),
)
def test_a_placement_never_breaks_a_constraint(
    sizes: list[int], rooms: list[int], latencies: list[float],
    links: list[tuple[int, int, float]],
) -> None:
    jobs = tuple(job(f"j{i}", s) for i, s in enumerate(sizes))
    clusters = tuple(Cluster(f"c{i}", r * CORE, 8 * GIB, 1.0 + i) for i, r in enumerate(rooms))
    cluster_links = {}
    k = 0
    for i in range(len(clusters)):
        for j in range(i + 1, len(clusters)):
            cluster_links[frozenset((f"c{i}", f"c{j}"))] = ClusterLink(latencies[k % 6], 1e3)
            k += 1
    job_links = []
    seen: set[frozenset[str]] = set()
    for a, b, limit in links:
        pair = frozenset((f"j{a}", f"j{b}"))
        if a != b and a < len(jobs) and b < len(jobs) and pair not in seen:
            seen.add(pair)
            job_links.append(JobLink(f"j{a}", f"j{b}", max_latency_ms=limit))
    deployment = Deployment(jobs, tuple(job_links))
    federation = Federation(clusters, cluster_links)
    result = place(deployment, federation)
    if isinstance(result, Refusal):
        assert result.job in {j.id for j in jobs} and result.reason
        return
    assert set(result.assignment) == {j.id for j in jobs}
    used: dict[str, int] = {}
    for j in jobs:
        used[result.assignment[j.id]] = used.get(result.assignment[j.id], 0) + j.cpu_shares
    for cluster in clusters:
        assert used.get(cluster.id, 0) <= cluster.cpu_shares
    for link in job_links:
        between = federation.link(result.assignment[link.a], result.assignment[link.b])
        assert between is not None and link.carried_by(between)
