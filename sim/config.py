"""A simulation's settings (:class:`SimConfig`) and what it gives back (:class:`SimResult`: the
recorder's result and the simulator's own counters, :class:`SimStats`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from domain.classes import ClassTable
from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.power import PowerSettings
from domain.regions import RegionBounds
from domain.slo import DEFAULT_ALLOCATION_S, SloTable
from federation.offload import OffloadWhen
from measure.results import PolicyResult
from scheduler.admission import AdmissionMode
from scheduler.load import Freshness
from sim.monitor_model import MonitorModelConfig

MIB = 1024**2
DEFAULT_MEMORY_CUT_MARGIN_BYTES = 32 * MIB


class FederationMode(StrEnum):
    """How several clusters of one simulation deal with a request its home cluster does not
    place (DESIGN 12)."""

    NONE = "none"  # separate Swarms: the home cluster's decision is final
    OFFLOAD = "offload"  # federated Swarms: it may go to a peer (federation.offload)


@dataclass(frozen=True)
class ClusterSetup:
    """The trace's hosts split into clusters, each with its own store and scheduler.

    ``sizes``: how many hosts each cluster takes, in the trace's host order (``(5, 5)``: the
    first five hosts are cluster c1, the next five c2). A request's home cluster is given
    round-robin in arrival order: the i-th arrival (counting from 0, trace requests and probes
    alike) belongs to cluster i mod N, the same in a separate and in a federated run."""

    sizes: tuple[int, ...]
    federation: FederationMode = FederationMode.NONE
    offload_when: OffloadWhen = OffloadWhen.UNPLACED
    # the marginal price of powering an empty host on counts its idle watts
    wake_counts_idle: bool = True

    def __post_init__(self) -> None:
        if not self.sizes or any(size < 1 for size in self.sizes):
            raise ValidationError("clusters", "need at least one cluster, each of >= 1 host")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f"c{index + 1}" for index in range(len(self.sizes)))

    def describe(self) -> str:
        split = " + ".join(f"{name}: {size} hosts" for name, size in
                           zip(self.names, self.sizes, strict=True))
        if self.federation is FederationMode.NONE:
            return f"{split}; separate (a request its home cluster does not place stays there)"
        what = ("does not place" if self.offload_when is OffloadWhen.UNPLACED
                else "does not place, or places only by killing,")
        return (f"{split}; federated: a request its home cluster {what} goes to the peer "
                "with the lowest marginal energy price that has room (federation.offload)")


@dataclass(frozen=True)
class SimConfig:
    """One policy run. ``end_s`` None: the trace's duration (its arrival window)."""

    policy: str
    seed: int = 0  # the random policy and the monitors' phases
    end_s: float | None = None
    monitor: MonitorModelConfig = field(default_factory=MonitorModelConfig)
    memory_cut_margin_bytes: int = DEFAULT_MEMORY_CUT_MARGIN_BYTES
    power_model: PowerModel | None = None
    # each policy's own options by policy name (scheduler.plugin); a policy not named here
    # runs with its defaults
    options: Mapping[str, object] = field(default_factory=dict)
    classes: ClassTable | None = None
    bounds: RegionBounds | None = None
    # staleness and prediction for load-aware policies (DESIGN 3.12); None: the defaults
    freshness: Freshness | None = None
    # New requests ask to queue (DESIGN 3.7): one no pass places waits in the pending queue
    # and is retried like a victim, instead of being refused (the thesis behaviour).
    queue_new: bool | None = None  # None: as the policy admits (the qos policy queues)
    # Admission control (DESIGN 3.13) of the requests that would wait in the queue: slo, the
    # rule of scheduler.admission; none, every such request waits.
    admission: AdmissionMode = AdmissionMode.SLO
    # Retries skip waiting requests no changed host could take (scheduler.service);
    # False decides every retry in full (same outcome, slower: for comparisons).
    skip_unchanged_retries: bool = True
    # Test aid: after every event, compare the simulator's books with the store (slow).
    check_invariants: bool = False
    # Service levels (DESIGN 3.10): the objective of every class (None: the defaults), and
    # alpha. The simulator starts a run at once; alpha is charged in the accounting only.
    slo: SloTable | None = None
    allocation_s: float = DEFAULT_ALLOCATION_S
    # One line per request in the result (requests.jsonl); a very long run may do without.
    keep_requests: bool = True
    # Several clusters over the trace's hosts (DESIGN 12); None: one cluster, as always.
    clusters: ClusterSetup | None = None
    # The power manager (DESIGN 3.15, sim/power.py): hosts switched off and on, consolidation
    # for energy and qos; None or not enabled: every host on, as always.
    power: PowerSettings | None = None

    @property
    def power_on(self) -> bool:
        return self.power is not None and self.power.enabled


@dataclass(frozen=True)
class SimStats:
    """What the simulator saw that the metrics recorder does not hold."""

    policy: str
    wall_s: float
    events: int
    decisions: int
    end_s: float
    memory_cuts: int  # task cuts that lowered memory
    memory_cuts_partial: int  # of those, limited by the task's use plus the margin
    memory_cut_unapplied_bytes: int  # what those could not take
    oom_host_kills: int  # a host's tasks used more than its memory: the largest was killed
    oom_limit_kills: int  # a task used more than its own (cut) limit
    oom_kills_by_workload: dict[str, int]  # "<workload> class <c>" -> OOM kills
    contended_host_share: float  # host-time with CPU demand above capacity
    monitor_host_pushes: int
    monitor_host_heartbeats: int  # dated monitors only (load-aware policies)
    monitor_task_pushes: int  # task values sent (one per task per batch)
    pending_max: int
    pending_at_end: int
    running_at_end: int
    # with several clusters (SimConfig.clusters): per cluster, its counters (ClusterStats)
    clusters: tuple[ClusterStats, ...] = ()

    @property
    def offloads(self) -> int:
        return sum(cluster.offloaded_out for cluster in self.clusters)

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if self.clusters:
            out["clusters"] = [cluster.to_json() for cluster in self.clusters]
            out["offloads"] = self.offloads
        else:
            del out["clusters"]  # one cluster: the file as it always was
        return out


@dataclass(frozen=True)
class ClusterStats:
    """One cluster of a run with several (SimConfig.clusters)."""

    name: str
    hosts: tuple[str, ...]
    arrivals: int  # new requests (and probes) whose home it is
    offloaded_out: int  # of those, forwarded to a peer
    offloaded_in: int  # requests of other homes forwarded here
    offloaded_in_unplaced: int  # of those, not placed here at once (refused, or queued)
    # its own requests it would have forwarded but no peer advertised room for: decided here
    no_peer: int
    energy_kwh: float  # its hosts' energy (all on)
    energy_kwh_switch_off: float  # an empty host switched off

    def to_json(self) -> dict[str, Any]:
        return {name: (list(value) if isinstance(value, tuple) else value)
                for name in self.__dataclass_fields__
                for value in (getattr(self, name),)}


@dataclass(frozen=True)
class SimResult:
    result: PolicyResult
    stats: SimStats
