"""The simulator with several clusters (DESIGN 12): separate and federated Swarms on one trace.
Tiny hand-made traces whose outcome is known, and the thesis workload split in two."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from domain.errors import ValidationError
from domain.model import HostSpec, TaskType
from federation.offload import OffloadWhen
from sim.config import ClusterSetup, FederationMode, SimConfig, SimResult
from sim.engine import Simulation
from sim.profiles import DEFAULT_PROFILES
from sim.runner import requests_with_probes, thesis_input
from workloads.cluster import parse_hosts_spec
from workloads.thesis import ThesisWorkloadConfig
from workloads.trace import TraceHeader, TraceRequest, Workload

GIB = 1024**3
NONE, OFFLOAD = FederationMode.NONE, FederationMode.OFFLOAD


def job(t: float, rid: str, cls: int, cpu: int, makespan_s: float = 100.0) -> TraceRequest:
    return TraceRequest(t, rid, cls, TaskType.JOB, Workload.FFMPEG, cpu, GIB, makespan_s, None)


def two_clusters(
    requests: Sequence[TraceRequest],
    federation: FederationMode,
    when: OffloadWhen = OffloadWhen.UNPLACED,
    second_host_shares: int = 8192,
) -> Simulation:
    """h1 is cluster c1, h2 cluster c2; arrivals alternate c1, c2, c1, ..."""
    head = TraceHeader("test", 0, 1000.0, (HostSpec("h1", 8192, 12 * GIB),
                                           HostSpec("h2", second_host_shares, 24 * GIB)))
    config = SimConfig("energy", end_s=1000.0, check_invariants=True,
                       clusters=ClusterSetup((1, 1), federation, when))
    return Simulation(head, [(r, False) for r in requests], DEFAULT_PROFILES, config)


# A class-1 job fills h1 (c1); a small job runs on h2 (c2); then c1 gets another class-1 job
# of 4 cores: no pass of c1 can place it (class 1 is never cut, and kills nothing).
FULL_HOME = [job(0.0, "r0", 1, 8192), job(1.0, "r1", 3, 1024), job(2.0, "r2", 1, 4096)]


def test_separate_swarms_refuse_what_the_home_cluster_cannot_place() -> None:
    sim = two_clusters(FULL_HOME, NONE)
    result = sim.run()
    metrics = result.result.metrics
    assert (metrics.successful, metrics.failed) == (2, 1)
    c1, c2 = result.stats.clusters
    assert (c1.arrivals, c2.arrivals) == (2, 1)
    assert result.stats.offloads == 0 and c1.no_peer == 0


def test_a_federated_swarm_offloads_it_to_the_peer_with_room_and_it_runs_there() -> None:
    sim = two_clusters(FULL_HOME, OFFLOAD)
    seen: dict[str, str] = {}
    original = sim._start

    def start(host: Any, decision: Any, t: float) -> None:
        seen[decision.request.id] = host.id
        original(host, decision, t)

    sim._start = start  # type: ignore[method-assign]
    result = sim.run()
    metrics = result.result.metrics
    assert (metrics.successful, metrics.failed) == (3, 0)
    assert seen == {"r0": "h1", "r1": "h2", "r2": "h2"}
    assert metrics.jobs_finished == 3  # r2 ran to its end on h2
    c1, c2 = result.stats.clusters
    assert (c1.offloaded_out, c1.offloaded_in, c2.offloaded_out, c2.offloaded_in) == (1, 0, 0, 1)
    assert c2.offloaded_in_unplaced == 0
    assert result.stats.offloads == 1
    assert result.stats.to_json()["offloads"] == 1


def test_without_room_anywhere_the_request_stays_refused_at_home() -> None:
    # h2 is busy with a class-1 job of 6 cores: 4 more do not fit there either
    trace = [job(0.0, "r0", 1, 8192), job(1.0, "r1", 1, 6144), job(2.0, "r2", 1, 4096)]
    result = two_clusters(trace, OFFLOAD).run()
    assert (result.result.metrics.successful, result.result.metrics.failed) == (2, 1)
    c1, _ = result.stats.clusters
    assert (c1.offloaded_out, c1.no_peer) == (0, 1)


@pytest.mark.parametrize(("when", "kills", "offloads"), [
    (OffloadWhen.UNPLACED, 1, 0),  # placed at home by pausing the class-4 job (DESIGN 3.14)
    (OffloadWhen.KILLS, 0, 1),  # sent to c2 instead, where it takes nothing off its CPU
])
def test_offloading_what_only_a_kill_would_place_is_a_setting(
    when: OffloadWhen, kills: int, offloads: int
) -> None:
    # r0: a class-4 job on all of h1; r2: a class-1 job of 8 cores, which only the kill pass
    # places on h1, once its monitor has said h1 is busy (the kill pass leaves LEE hosts
    # alone). h2 (16 cores) has room for it beside r1.
    trace = [job(0.0, "r0", 4, 8192, 900.0), job(1.0, "r1", 3, 1024, 900.0),
             job(120.0, "r2", 1, 8192)]
    result = two_clusters(trace, OFFLOAD, when, second_host_shares=16384).run()
    metrics = result.result.metrics
    assert metrics.successful == 3
    assert (metrics.kills, metrics.suspensions) == (0, kills)  # only CPU was missing
    assert result.stats.offloads == offloads


def test_the_clusters_must_take_every_host() -> None:
    head = TraceHeader("test", 0, 10.0, (HostSpec("h1", 8192, GIB), HostSpec("h2", 8192, GIB)))
    with pytest.raises(ValidationError, match="take 3 hosts"):
        Simulation(head, [], DEFAULT_PROFILES, SimConfig("energy", clusters=ClusterSetup((1, 2))))
    with pytest.raises(ValidationError, match="at least one cluster"):
        ClusterSetup((2, 0))


# ------------------------------------------------------------------ the thesis workload


def _thesis(policy: str, setup: ClusterSetup | None, hosts: str = "5x8c12g",
            duration_s: float = 600.0, **config: Any) -> SimResult:
    trace = thesis_input(3, ThesisWorkloadConfig(hosts=parse_hosts_spec(hosts),
                                                 duration_s=duration_s))
    stream = requests_with_probes(trace.requests(), duration_s, None)
    return Simulation(trace.header, stream, DEFAULT_PROFILES,
                      SimConfig(policy, seed=3, clusters=setup, **config)).run()


def _deterministic(result: SimResult) -> dict[str, Any]:
    metrics = result.result.metrics.to_json()
    return {k: v for k, v in metrics.items() if "_ms" not in k}


@pytest.mark.parametrize("policy", ["energy", "random"])
def test_one_cluster_of_every_host_is_the_simulation_without_clusters(policy: str) -> None:
    plain = _thesis(policy, None)
    one = _thesis(policy, ClusterSetup((5,), OFFLOAD))
    assert _deterministic(one) == _deterministic(plain)
    assert one.result.series.values == plain.result.series.values
    assert one.stats.events == plain.stats.events
    assert one.stats.offloads == 0 and "clusters" not in plain.stats.to_json()


def test_two_federated_swarms_keep_their_books_and_place_nothing_twice() -> None:
    # check_books after every event: each cluster's store holds exactly the simulator's tasks
    # on its hosts, and no task is in two stores
    separate = _thesis("energy", ClusterSetup((5, 5), NONE), "10x8c12g", 300.0,
                       check_invariants=True)
    federated = _thesis("energy", ClusterSetup((5, 5), OFFLOAD), "10x8c12g", 300.0,
                        check_invariants=True)
    assert separate.stats.offloads == 0
    assert federated.stats.offloads > 0
    # the adverts speak for the energy policy's simple and cut passes: a peer places all it
    # was sent
    assert sum(c.offloaded_in_unplaced for c in federated.stats.clusters) == 0
    arrivals = [c.arrivals for c in federated.stats.clusters]
    assert arrivals == [c.arrivals for c in separate.stats.clusters]
    assert abs(arrivals[0] - arrivals[1]) <= 1  # round-robin
    for result in (separate, federated):
        metrics = result.result.metrics
        assert metrics.requests == sum(arrivals)
        assert sum(c.energy_kwh for c in result.stats.clusters) == pytest.approx(
            metrics.energy_kwh)
