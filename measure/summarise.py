"""Summarising one policy run: from what :class:`measure.recorder.MetricsRecorder` counted to a
:class:`measure.results.PolicyResult`. Pure: no I/O.

The recorder adds to a :class:`Tallies` as things happen; at the end it hands it to
:func:`summarise` with the hosts' time integrals, the energy report, the service levels and what
was left open (:class:`OpenEnds`). Every distribution becomes one :class:`measure.stats.Stats`,
built once; the flat numbers (:class:`measure.results.PolicyMetrics`) take their figures from
it by name (:meth:`Stats.flat`), grouped here by topic.

What the result holds (see :class:`measure.results.PolicyMetrics` for every field):
allocations and success rate, cuts and kills, victims lost, OOM kills, decision time and
scheduling delay percentiles (overall and per 5-minute window), time-weighted CPU/memory
utilization and booking, time share of host-time in LEE / DEE / EED (U = max(cpu, memory),
bounds of DESIGN 3.3) and empty, hosts that could be switched off, energy with all hosts on and
with empty hosts off (DESIGN 7.4), successful allocations per kWh, job makespans and slowdowns,
service response times, and per-host binned time series (``HostSeries``) for plots.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from domain.classes import MAX_CLASS, MIN_CLASS
from domain.energy import JOULES_PER_KWH, EnergyReport, PowerModel
from domain.regions import RegionBounds
from measure.host_time import AnyHostTime, host_series
from measure.request_levels import RequestLevels
from measure.results import HostSummary, PolicyMetrics, PolicyResult, WindowStats
from measure.service_levels import ServiceSummary
from measure.stats import Stats

# The figures of a distribution that PolicyMetrics holds flat, as ``<prefix>_<figure>``.
_CENTRAL = ("mean", "p50", "p90", "p99")
_MEAN = ("mean",)


class Tallies:
    """What a run counted and sampled as it went: the recorder adds, :func:`summarise` reads."""

    __slots__ = (
        "boot_wait_s",
        "boot_waits",
        "by_class",
        "checkpoint_restarts",
        "cut_cpu",
        "cut_memory",
        "cuts",
        "decision_ms",
        "delay_windows",
        "delays",
        "failed",
        "ignored",
        "jobs_finished",
        "kills",
        "makespans",
        "moves",
        "oom",
        "passes",
        "probes",
        "queued",
        "refused_admission",
        "reschedule_attempts",
        "reschedules_placed",
        "responses",
        "restores",
        "resumes",
        "services_stopped",
        "slowdowns",
        "submitted",
        "successful",
        "suspensions",
        "switch_off",
        "switch_on",
        "tasks_failed",
        "victims",
    )

    def __init__(self) -> None:
        # new requests (probes apart) and their first decisions
        self.submitted = 0
        self.probes = 0
        self.successful = 0
        self.failed = 0
        self.queued = 0
        self.by_class: dict[int, dict[str, int]] = {
            c: {"requests": 0, "successful": 0, "failed": 0, "cut": 0, "killed": 0,
                "refused_at_admission": 0, "suspended": 0, "resumed": 0,
                "checkpoint_restarts": 0}
            for c in range(MIN_CLASS, MAX_CLASS + 1)
        }
        # overload (DESIGN 3.13, 3.14): refused at the door, paused, resumed, checkpointed
        self.refused_admission = 0
        self.suspensions = 0
        self.resumes = 0
        self.checkpoint_restarts = 0
        self.passes: dict[str, int] = {}  # placements per pass name
        # cuts, kills and reschedules
        self.cuts = 0
        self.restores = 0
        self.cut_cpu = 0
        self.cut_memory = 0
        self.kills = 0
        self.victims: set[str] = set()  # distinct tasks killed at least once
        self.reschedule_attempts = 0
        self.reschedules_placed = 0
        # hosts switched on and off, services moved, requests that waited for a booting host
        # (DESIGN 3.15)
        self.switch_on = 0
        self.switch_off = 0
        self.moves = 0
        self.boot_waits = 0
        self.boot_wait_s = 0.0
        # task ends
        self.oom = 0
        self.jobs_finished = 0
        self.services_stopped = 0
        self.tasks_failed = 0
        self.ignored = 0
        # samples: decision times and delays (ms, the delays also per window index),
        # makespans and slowdowns ("jobs", "probes", per workload), responses per
        # (workload, rate)
        self.decision_ms = array("d")
        self.delays = array("d")
        self.delay_windows: dict[int, array[float]] = {}
        self.makespans: dict[str, array[float]] = {}
        self.slowdowns: dict[str, array[float]] = {}
        self.responses: dict[tuple[str, int], array[float]] = {}

    def decided(self, request_class: int, placed: bool, delay_ms: float, window: int) -> None:
        """The first decision on a new request (not a probe): placed or refused after
        ``delay_ms``, in the delay window ``window``."""
        self.submitted += 1
        counts = self.by_class[request_class]
        counts["requests"] += 1
        self.delays.append(delay_ms)
        self.delay_windows.setdefault(window, array("d")).append(delay_ms)
        if placed:
            self.successful += 1
            counts["successful"] += 1
        else:
            self.failed += 1
            counts["failed"] += 1

    def placed_by(self, pass_name: str | None) -> None:
        name = pass_name or "unknown"
        self.passes[name] = self.passes.get(name, 0) + 1

    def job_run(self, keys: tuple[str, ...], run_s: float, expected_s: float | None) -> None:
        """A job's run finished in ``run_s`` (expected: ``expected_s``), under ``keys``."""
        for key in keys:
            self.makespans.setdefault(key, array("d")).append(run_s)
            if expected_s:
                self.slowdowns.setdefault(key, array("d")).append(run_s / expected_s)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a run was: its policy, its span and how it was measured."""

    policy: str
    t_start_s: float
    t_end_s: float
    bounds: RegionBounds
    delay_window_s: float
    series_step_s: float
    trace_info: Mapping[str, Any]
    models: Mapping[str, PowerModel]

    @property
    def duration_s(self) -> float:
        return self.t_end_s - self.t_start_s


@dataclass(frozen=True, slots=True)
class OpenEnds:
    """What was still open when the run ended."""

    lost: int  # victims given up, and those still waiting for a place
    waiting: int  # of those, the ones still waiting
    undecided: int  # new requests never placed nor refused
    queued_at_end: int  # of those, the ones in the pending queue


@dataclass(frozen=True, slots=True)
class Distributions:
    """Every distribution of a run, summarised once."""

    decision_ms: Stats
    delay_ms: Stats
    makespan_s: dict[str, Stats]
    slowdown: dict[str, Stats]
    response_ms: dict[str, Stats]  # "<workload>-<rate>"
    response_ms_by_rate: dict[str, Stats]
    responses: Stats  # all of them

    @classmethod
    def of(cls, tallies: Tallies) -> Distributions:
        by_rate: dict[int, array[float]] = {}
        every = array("d")
        for (_, rate), values in tallies.responses.items():
            by_rate.setdefault(rate, array("d")).extend(values)
            every.extend(values)
        return cls(
            decision_ms=Stats.of(tallies.decision_ms),
            delay_ms=Stats.of(tallies.delays),
            makespan_s={k: Stats.of(v) for k, v in sorted(tallies.makespans.items())},
            slowdown={k: Stats.of(v) for k, v in sorted(tallies.slowdowns.items())},
            response_ms={f"{w}-{r}": Stats.of(v)
                         for (w, r), v in sorted(tallies.responses.items())},
            response_ms_by_rate={str(r): Stats.of(v) for r, v in sorted(by_rate.items())},
            responses=Stats.of(every),
        )

    def flat(self) -> dict[str, Any]:
        """The figures PolicyMetrics holds flat."""
        none = Stats(0)
        return {
            "decisions": self.decision_ms.count,
            **self.decision_ms.flat("decision_ms", (*_CENTRAL, "max")),
            **self.delay_ms.flat("scheduling_delay_ms", _CENTRAL),
            **self.makespan_s.get("jobs", none).flat("job_makespan_s", _CENTRAL),
            **self.slowdown.get("jobs", none).flat("job_slowdown", _CENTRAL),
            **self.makespan_s.get("probes", none).flat("probe_makespan_s", _MEAN),
            **self.slowdown.get("probes", none).flat("probe_slowdown", _MEAN),
            "responses": self.responses.count,
            **self.responses.flat("response_ms", ("mean", "p50", "p75", "p90", "p99")),
        }


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def summarise(
    run: RunInfo,
    tallies: Tallies,
    ends: OpenEnds,
    hosts: Mapping[str, AnyHostTime],
    energy: EnergyReport,
    service: ServiceSummary,
    levels: RequestLevels,
) -> PolicyResult:
    """The result of a run whose hosts are integrated up to ``run.t_end_s``."""
    dist = Distributions.of(tallies)
    metrics = PolicyMetrics(
        duration_s=run.duration_s,
        hosts=len(hosts),
        **_allocations(tallies, ends),
        **dist.flat(),
        **_host_time(hosts.values(), run.duration_s),
        **_energy(energy, run.duration_s, tallies.successful, service.met),
        **_service(service),
        **_power(tallies, energy, run.duration_s),
        **_overload(tallies),
    )
    return PolicyResult(
        policy=run.policy,
        t_start_s=run.t_start_s,
        t_end_s=run.t_end_s,
        trace=run.trace_info,
        energy_model=_energy_model(run.models),
        region_bounds=(run.bounds.lee_below, run.bounds.eed_above),
        metrics=metrics,
        decision_ms=dist.decision_ms,
        scheduling_delay_ms=dist.delay_ms,
        delay_windows=_windows(run, tallies.delay_windows),
        makespan_s=dist.makespan_s,
        slowdown=dist.slowdown,
        response_ms=dist.response_ms,
        response_ms_by_rate=dist.response_ms_by_rate,
        passes=dict(sorted(tallies.passes.items())),
        by_class={str(c): dict(v) for c, v in tallies.by_class.items()},
        hosts=_host_summaries(hosts, energy, run.duration_s),
        series=host_series(hosts, run.t_start_s, run.series_step_s, run.t_end_s),
        service_levels=service,
        request_levels=levels,
    )


def _allocations(tallies: Tallies, ends: OpenEnds) -> dict[str, Any]:
    """New requests and what became of them; cuts, kills, victims; task ends."""
    decided = tallies.successful + tallies.failed
    victims = len(tallies.victims)
    return {
        "requests": decided + ends.undecided,
        "successful": tallies.successful,
        "failed": tallies.failed,
        "undecided": ends.undecided,
        "success_rate": ratio(tallies.successful, decided),
        "probes": tallies.probes,
        "cuts": tallies.cuts,
        "restores": tallies.restores,
        "cut_cpu_shares": tallies.cut_cpu,
        "cut_memory_bytes": tallies.cut_memory,
        "kills": tallies.kills,
        "kills_share": ratio(tallies.kills, tallies.successful),
        "victims": victims,
        "victims_lost": ends.lost,
        "victims_lost_share": ratio(ends.lost, victims),
        "victims_waiting_at_end": ends.waiting,
        "queued_requests": tallies.queued,
        "queued_at_end": ends.queued_at_end,
        "reschedule_attempts": tallies.reschedule_attempts,
        "reschedules_placed": tallies.reschedules_placed,
        "oom_kills": tallies.oom,
        "jobs_finished": tallies.jobs_finished,
        "services_stopped": tallies.services_stopped,
        "tasks_failed": tallies.tasks_failed,
        "ignored_events": tallies.ignored,
    }


def _host_time(hosts: Collection[AnyHostTime], duration_s: float) -> dict[str, Any]:
    """Utilization, booking and regions, time-weighted over all host-time (and busy time)."""
    host_time = duration_s * len(hosts)

    def total(attr: str) -> float:
        return math.fsum(getattr(h, attr) for h in hosts)

    busy = total("busy_s")
    region = [math.fsum(h.region_s[i] for h in hosts) for i in range(3)]
    return {
        "avg_cpu_util": ratio(total("cpu_s"), host_time) or 0.0,
        "avg_memory_util": ratio(total("mem_s"), host_time) or 0.0,
        "avg_cpu_util_busy": ratio(total("cpu_busy_s"), busy),
        "avg_memory_util_busy": ratio(total("mem_busy_s"), busy),
        "avg_cpu_allocated": ratio(total("cpu_alloc_s"), host_time) or 0.0,
        "avg_memory_allocated": ratio(total("mem_alloc_s"), host_time) or 0.0,
        "avg_overbooking_busy": ratio(total("of_busy_s"), busy),
        "lee_share": ratio(region[0], host_time) or 0.0,
        "dee_share": ratio(region[1], host_time) or 0.0,
        "eed_share": ratio(region[2], host_time) or 0.0,
        "empty_share": ratio(total("empty_s"), host_time) or 0.0,
        "hosts_switchable_off_mean": ratio(total("empty_s"), duration_s) or 0.0,
        "hosts_never_used": sum(1 for h in hosts if not h.used),
    }


def _energy(
    energy: EnergyReport, duration_s: float, successful: int, slo_met: int
) -> dict[str, Any]:
    """Energy all hosts on and empty hosts off, and what it bought."""
    kwh = energy.energy_kwh
    kwh_off = energy.energy_kwh_switch_off
    return {
        "energy_kwh": kwh,
        "energy_kwh_switch_off": kwh_off,
        "avg_power_w": ratio(kwh * JOULES_PER_KWH, duration_s) or 0.0,
        "avg_power_w_switch_off": ratio(kwh_off * JOULES_PER_KWH, duration_s) or 0.0,
        "successful_per_kwh": ratio(successful, kwh),
        "successful_per_kwh_switch_off": ratio(successful, kwh_off),
        "slo_met_per_kwh": ratio(slo_met, kwh),
        "slo_met_per_kwh_switch_off": ratio(slo_met, kwh_off),
    }


def _power(tallies: Tallies, energy: EnergyReport, duration_s: float) -> dict[str, Any]:
    """The power manager's part (DESIGN 3.15): the energy with every host on beside the energy
    as drawn (``energy_kwh``; the same when no host was ever switched), switches, moves, and
    the requests that waited for a booting host."""
    return {
        "energy_kwh_all_on": energy.energy_kwh_all_on,
        "hosts_off_mean": ratio(math.fsum(h.off_s for h in energy.hosts), duration_s) or 0.0,
        "switches_on": tallies.switch_on,
        "switches_off": tallies.switch_off,
        "moves": tallies.moves,
        "boot_waits": tallies.boot_waits,
        "boot_wait_s": tallies.boot_wait_s,
    }


def _service(service: ServiceSummary) -> dict[str, Any]:
    """Service levels over every request but probes (DESIGN 3.10)."""
    return {
        "slo_fulfilment": service.fulfilment,
        "slo_met": service.met,
        "preemptions_mean": service.preemptions_mean,
        "preemptions_max": service.preemptions_max,
        "work_lost_cpu_s": service.work_lost_cpu_s,
        "work_lost_share": service.work_lost_share,
    }


def _overload(tallies: Tallies) -> dict[str, Any]:
    """Refused at admission, suspensions and checkpointed restarts (DESIGN 3.13, 3.14)."""
    return {
        "refused_at_admission": tallies.refused_admission,
        "suspensions": tallies.suspensions,
        "resumes": tallies.resumes,
        "checkpoint_restarts": tallies.checkpoint_restarts,
    }


def _host_summaries(
    hosts: Mapping[str, AnyHostTime], energy: EnergyReport, duration_s: float
) -> tuple[HostSummary, ...]:
    summaries: list[HostSummary] = []
    for host_id, host in hosts.items():
        host_energy = energy.host(host_id)
        summaries.append(
            HostSummary(
                host_id=host_id,
                cpu_capacity_shares=host.cap_cpu,
                memory_capacity_bytes=host.cap_mem,
                avg_cpu_util=ratio(host.cpu_s, duration_s) or 0.0,
                avg_memory_util=ratio(host.mem_s, duration_s) or 0.0,
                lee_share=ratio(host.region_s[0], duration_s) or 0.0,
                dee_share=ratio(host.region_s[1], duration_s) or 0.0,
                eed_share=ratio(host.region_s[2], duration_s) or 0.0,
                empty_share=ratio(host.empty_s, duration_s) or 0.0,
                energy_kwh=host_energy.energy_kwh,
                energy_kwh_switch_off=host_energy.energy_kwh_switch_off,
                oom_kills=host.oom,
            )
        )
    return tuple(summaries)


def _energy_model(models: Mapping[str, PowerModel]) -> dict[str, Any]:
    """The power model of every host, or of each when they differ."""
    first = next(iter(models.values()))
    if len(set(models.values())) > 1:
        return {
            "per_host": {h: m.table.name for h, m in models.items()},
            "memory_w_per_gib": first.memory_w_per_gib,
        }
    return first.describe()


def _windows(run: RunInfo, delays: Mapping[int, array[float]]) -> tuple[WindowStats, ...]:
    """The scheduling delays per window, from the run's start (every window to its end, and
    any window before its start that a delay fell in)."""
    duration = run.duration_s
    width = run.delay_window_s
    count = max(1, math.ceil(duration / width)) if duration > 0 else 0
    count = max(count, max(delays, default=-1) + 1)
    first = min(0, min(delays, default=0))
    result = []
    for index in range(first, count):
        start = run.t_start_s + index * width
        result.append(WindowStats(start_s=start, end_s=start + width,
                                  delay_ms=Stats.of(delays.get(index, ()))))
    return tuple(result)
