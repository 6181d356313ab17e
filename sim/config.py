"""A simulation's settings (:class:`SimConfig`) and what it gives back (:class:`SimResult`: the
recorder's result and the simulator's own counters, :class:`SimStats`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.classes import ClassTable
from domain.energy import PowerModel
from domain.regions import RegionBounds
from domain.slo import DEFAULT_ALLOCATION_S, SloTable
from measure.results import PolicyResult
from scheduler.load import Freshness
from sim.monitor_model import MonitorModelConfig

MIB = 1024**2
DEFAULT_MEMORY_CUT_MARGIN_BYTES = 32 * MIB


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

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class SimResult:
    result: PolicyResult
    stats: SimStats
