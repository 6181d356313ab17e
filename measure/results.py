"""The result of one policy run, as pure values: what :class:`measure.recorder.MetricsRecorder`
computes and :mod:`measure.result_files` writes and reads (``DIR/<policy>/result.json``, format
``greenswarm-policy-result`` version 1, and ``host_series.csv``).

:class:`PolicyResult` holds the flat numbers (:class:`PolicyMetrics`), the decision time and
scheduling delay statistics (:class:`Stats`, overall and per window), makespans, slowdowns,
service response times, placements per pass, the numbers per class, each host's summary and the
binned per-host series for the plots (:class:`HostSeries`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from domain.errors import ValidationError
from measure.request_levels import RequestLevels
from measure.service_levels import ServiceSummary
from measure.stats import Stats

RESULT_FORMAT = "greenswarm-policy-result"
RESULT_VERSION = 1


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Scheduling delays (ms) of the new requests decided in [start_s, end_s)."""

    start_s: float
    end_s: float
    delay_ms: Stats

    def to_json(self) -> dict[str, Any]:
        return {"start_s": self.start_s, "end_s": self.end_s, "delay_ms": self.delay_ms.to_json()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> WindowStats:
        return cls(float(obj["start_s"]), float(obj["end_s"]), Stats.from_json(obj["delay_ms"]))


@dataclass(frozen=True, slots=True)
class HostSummary:
    host_id: str
    cpu_capacity_shares: int
    memory_capacity_bytes: int
    avg_cpu_util: float
    avg_memory_util: float
    lee_share: float
    dee_share: float
    eed_share: float
    empty_share: float
    energy_kwh: float
    energy_kwh_switch_off: float
    oom_kills: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> HostSummary:
        return cls(**{f.name: obj[f.name] for f in fields(cls)})


# The columns of a policy's windows file (one row per window): its bounds, then the Stats of
# the scheduling delays (ms) decided in it.
WINDOW_COLUMNS: tuple[str, ...] = (
    "start_s", "end_s", "count", "mean", "p50", "p75", "p90", "p99", "min", "max",
)


SERIES_COLUMNS: tuple[str, ...] = (
    "cpu_util",
    "memory_util",
    "cpu_allocated",
    "memory_allocated",
    "tasks",
    "power_w",
    "power_switch_off_w",
)


@dataclass(frozen=True, slots=True)
class HostSeries:
    """Per-host time series, averaged over bins of ``step_s`` starting at ``t0_s``.

    ``values[column][host_index][bin]`` for each column of :data:`SERIES_COLUMNS`:
    utilizations and allocations (as fractions of capacity), task count and power (W, all on /
    empty off). The last bin may be shorter than ``step_s`` (it ends at the end of the run).
    """

    t0_s: float
    step_s: float
    host_ids: tuple[str, ...]
    values: Mapping[str, tuple[tuple[float, ...], ...]]

    @property
    def bins(self) -> int:
        first = next(iter(self.values.values()), ())
        return len(first[0]) if first else 0

    def times_s(self) -> list[float]:
        """Start of every bin."""
        return [self.t0_s + i * self.step_s for i in range(self.bins)]

    def column(self, name: str) -> tuple[tuple[float, ...], ...]:
        return self.values[name]

    def mean_over_hosts(self, name: str) -> list[float]:
        rows = self.values[name]
        if not rows:
            return []
        return [math.fsum(r[i] for r in rows) / len(rows) for i in range(self.bins)]


@dataclass(frozen=True, slots=True)
class PolicyMetrics:
    """The flat numbers of one policy run (None where a ratio has no denominator)."""

    # the run
    duration_s: float
    hosts: int
    # allocations of new requests (probes excluded)
    requests: int
    successful: int
    failed: int
    undecided: int
    success_rate: float | None
    probes: int
    # cuts, kills, victims, OOM
    cuts: int
    cut_cpu_shares: int
    cut_memory_bytes: int
    kills: int
    kills_share: float | None  # kills / successful
    victims: int  # distinct tasks killed at least once
    victims_lost: int  # never placed again
    victims_lost_share: float | None  # of victims
    reschedule_attempts: int
    reschedules_placed: int
    oom_kills: int
    # task ends
    jobs_finished: int
    services_stopped: int
    tasks_failed: int
    ignored_events: int
    # scheduler speed (all decisions, reschedules included)
    decisions: int
    decision_ms_mean: float | None
    decision_ms_p50: float | None
    decision_ms_p90: float | None
    decision_ms_p99: float | None
    decision_ms_max: float | None
    # scheduling delay of new requests
    scheduling_delay_ms_mean: float | None
    scheduling_delay_ms_p50: float | None
    scheduling_delay_ms_p90: float | None
    scheduling_delay_ms_p99: float | None
    # utilization, time-weighted over all host-time ("busy": over host-time with tasks)
    avg_cpu_util: float
    avg_memory_util: float
    avg_cpu_util_busy: float | None
    avg_memory_util_busy: float | None
    avg_cpu_allocated: float  # booked CPU / capacity
    avg_memory_allocated: float
    avg_overbooking_busy: float | None  # OF = max(cpu, memory booked / capacity), busy hosts
    # regions of U = max(cpu_util, memory_util), shares of host-time (empty hosts are in LEE)
    lee_share: float
    dee_share: float
    eed_share: float
    empty_share: float
    hosts_switchable_off_mean: float  # time-average number of empty hosts
    hosts_never_used: int
    # energy
    energy_kwh: float
    energy_kwh_switch_off: float
    avg_power_w: float
    avg_power_w_switch_off: float
    successful_per_kwh: float | None
    successful_per_kwh_switch_off: float | None
    # jobs
    job_makespan_s_mean: float | None
    job_makespan_s_p50: float | None
    job_makespan_s_p90: float | None
    job_makespan_s_p99: float | None
    job_slowdown_mean: float | None
    job_slowdown_p50: float | None
    job_slowdown_p90: float | None
    job_slowdown_p99: float | None
    probe_makespan_s_mean: float | None
    probe_slowdown_mean: float | None
    # services
    responses: int
    response_ms_mean: float | None
    response_ms_p50: float | None
    response_ms_p75: float | None
    response_ms_p90: float | None
    response_ms_p99: float | None
    # of victims_lost: the victims still queued for a place when the run ended (killed shortly
    # before the end, typically), as opposed to given up; None in results written before it
    victims_waiting_at_end: int | None = None
    # new requests whose clients asked to queue and that waited in the pending queue (see
    # on_queued), and of those the ones still waiting at the end (they are undecided); None in
    # results written before them
    queued_requests: int | None = None
    queued_at_end: int | None = None
    # cuts given back (DESIGN 3.8); None in results written before restorations
    restores: int | None = None
    # service levels (DESIGN 3.10, measure.service_levels), over every request but probes;
    # None in results written before them
    slo_fulfilment: float | None = None  # share of the requests that met their class's SLO
    slo_met: int | None = None  # how many did: the "successful" of the service-level sense
    slo_met_per_kwh: float | None = None
    slo_met_per_kwh_switch_off: float | None = None
    preemptions_mean: float | None = None  # times taken off a host, per request
    preemptions_max: int | None = None
    work_lost_cpu_s: float | None = None  # killed jobs' runs x their requested cores
    work_lost_share: float | None = None  # of the CPU-seconds delivered (run time x cores)
    # the power manager (DESIGN 3.15): ``energy_kwh`` is what the hosts drew as switched, this
    # the same run with every host on (equal when no host was switched); the time-average
    # number of hosts not on; hosts switched on and off; services moved by consolidation;
    # requests that waited for a booting host, and their waits (s). None in results written
    # before them.
    energy_kwh_all_on: float | None = None
    hosts_off_mean: float | None = None
    switches_on: int | None = None
    switches_off: int | None = None
    moves: int | None = None
    boot_waits: int | None = None
    boot_wait_s: float | None = None
    # overload (DESIGN 3.13, 3.14): new requests refused at admission (SLO misses, and failed
    # allocations), tasks paused instead of killed and resumed, and kills of checkpointable
    # jobs that resumed from a checkpoint; None in results written before them
    refused_at_admission: int | None = None
    suspensions: int | None = None
    resumes: int | None = None
    checkpoint_restarts: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PolicyMetrics:
        required = [f for f in fields(cls) if f.default is MISSING]
        missing = [f.name for f in required if f.name not in obj]
        if missing:
            raise ValidationError("metrics", f"missing keys: {', '.join(missing)}")
        return cls(**{f.name: obj[f.name] for f in fields(cls) if f.name in obj})


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """Everything one policy run produced (pure values; JSON via to_json/from_json)."""

    policy: str
    t_start_s: float
    t_end_s: float
    trace: Mapping[str, Any]  # source, seed, duration_s, hosts (count), notes
    energy_model: Mapping[str, Any]
    region_bounds: tuple[float, float]
    metrics: PolicyMetrics
    decision_ms: Stats
    scheduling_delay_ms: Stats
    delay_windows: tuple[WindowStats, ...]
    makespan_s: Mapping[str, Stats]  # "jobs", "probes", one per workload
    slowdown: Mapping[str, Stats]  # same keys
    response_ms: Mapping[str, Stats]  # "<workload>-<rate>", e.g. "redis-20"
    response_ms_by_rate: Mapping[str, Stats]  # "20", "40", "80"
    passes: Mapping[str, int]  # placements per pass name
    by_class: Mapping[str, Mapping[str, int]]  # "1".."4" -> counts
    hosts: tuple[HostSummary, ...]
    series: HostSeries = field(repr=False)
    # per class (DESIGN 7.3); None in results written before service levels
    service_levels: ServiceSummary | None = None
    # one per request, in submission order (requests.jsonl; empty when not kept)
    request_levels: RequestLevels = field(default_factory=RequestLevels, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The content of ``result.json`` (the series and the delay windows go to CSV files of
        their own: a long run has tens of thousands of windows)."""
        return {
            "format": RESULT_FORMAT,
            "version": RESULT_VERSION,
            "policy": self.policy,
            "t_start_s": self.t_start_s,
            "t_end_s": self.t_end_s,
            "trace": dict(self.trace),
            "energy_model": dict(self.energy_model),
            "region_bounds": {"lee_below": self.region_bounds[0],
                              "eed_above": self.region_bounds[1]},
            "metrics": self.metrics.to_json(),
            "decision_ms": self.decision_ms.to_json(),
            "scheduling_delay_ms": self.scheduling_delay_ms.to_json(),
            "windows": {"count": len(self.delay_windows), "columns": list(WINDOW_COLUMNS)},
            "makespan_s": {k: v.to_json() for k, v in self.makespan_s.items()},
            "slowdown": {k: v.to_json() for k, v in self.slowdown.items()},
            "response_ms": {k: v.to_json() for k, v in self.response_ms.items()},
            "response_ms_by_rate": {k: v.to_json() for k, v in self.response_ms_by_rate.items()},
            "passes": dict(self.passes),
            "by_class": {k: dict(v) for k, v in self.by_class.items()},
            "hosts": [h.to_json() for h in self.hosts],
            "series": {"t0_s": self.series.t0_s, "step_s": self.series.step_s,
                       "bins": self.series.bins, "columns": list(SERIES_COLUMNS)},
            **({"service_levels": self.service_levels.to_json()}
               if self.service_levels is not None else {}),
        }

    @classmethod
    def from_json(
        cls, obj: Mapping[str, Any], series: HostSeries,
        delay_windows: Sequence[WindowStats] | None = None,
        request_levels: RequestLevels | None = None,
    ) -> PolicyResult:
        """``delay_windows`` None: from the object (a result written before they had a file
        of their own); ``request_levels``: the lines of requests.jsonl."""
        if obj.get("format") != RESULT_FORMAT or obj.get("version") != RESULT_VERSION:
            raise ValidationError(
                "format", f"not a {RESULT_FORMAT} version {RESULT_VERSION} document"
            )
        if delay_windows is None:
            delay_windows = [WindowStats.from_json(w) for w in obj["delay_windows"]]
        bounds = obj["region_bounds"]
        service = obj.get("service_levels")
        return cls(
            policy=str(obj["policy"]),
            t_start_s=float(obj["t_start_s"]),
            t_end_s=float(obj["t_end_s"]),
            trace=dict(obj.get("trace") or {}),
            energy_model=dict(obj.get("energy_model") or {}),
            region_bounds=(float(bounds["lee_below"]), float(bounds["eed_above"])),
            metrics=PolicyMetrics.from_json(obj["metrics"]),
            decision_ms=Stats.from_json(obj["decision_ms"]),
            scheduling_delay_ms=Stats.from_json(obj["scheduling_delay_ms"]),
            delay_windows=tuple(delay_windows),
            makespan_s={k: Stats.from_json(v) for k, v in obj["makespan_s"].items()},
            slowdown={k: Stats.from_json(v) for k, v in obj["slowdown"].items()},
            response_ms={k: Stats.from_json(v) for k, v in obj["response_ms"].items()},
            response_ms_by_rate={
                k: Stats.from_json(v) for k, v in obj["response_ms_by_rate"].items()
            },
            passes={str(k): int(v) for k, v in obj["passes"].items()},
            by_class={str(k): {str(a): int(b) for a, b in v.items()}
                      for k, v in obj["by_class"].items()},
            hosts=tuple(HostSummary.from_json(h) for h in obj["hosts"]),
            series=series,
            service_levels=(None if service is None
                            else ServiceSummary.from_json(service, obj["metrics"])),
            request_levels=RequestLevels() if request_levels is None else request_levels,
        )
