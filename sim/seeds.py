"""The same simulation over several seeds: per policy, each number's mean, spread and values.

One seed is one sample of the workload's randomness (and of the random policy's and the
monitors' phases); a comparison of policies means more as a mean over seeds with its range.
``bench simulate --seeds`` runs every seed as a single run of its own and sums them up here
(pure: no files).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from domain.classes import CLASSES
from measure.results import PolicyResult
from measure.service_levels import ClassLevels
from sim.config import SimResult
from sim.summary import THESIS_RESULTS, ThesisResult, num, pct

# The runs of one seed: (seed, the results of every policy, in the order asked).
SeedRun = tuple[int, Sequence[SimResult]]


def _count(value: float | None) -> str:
    """A count; its mean over seeds may have a fraction."""
    return num(0 if value is None or value == round(value) else 1)(value)


def _seconds(value: float | None) -> str:  # from milliseconds
    return num(1)(None if value is None else value / 1000.0)


@dataclass(frozen=True, slots=True)
class SeedMetric:
    """One number of a policy's run: its key (a flat metric of ``summary.json``, or one of a
    class's service levels, read by ``of_class``), its label, its format."""

    key: str
    label: str
    fmt: Callable[[float | None], str]
    thesis: Callable[[ThesisResult], float] | None = None
    queue_only: bool = False  # a row only when new requests queue
    cls: int | None = None
    of_class: Callable[[ClassLevels], float | None] | None = None

    def value(self, result: PolicyResult) -> float | None:
        if self.cls is not None and self.of_class is not None:
            service = result.service_levels
            return None if service is None else self.of_class(service.by_class[self.cls])
        value = getattr(result.metrics, self.key)
        return None if value is None else float(value)


def _fulfilment(levels: ClassLevels) -> float | None:
    return levels.fulfilment


def _availability_median(levels: ClassLevels) -> float | None:
    return levels.availability_median


def _availability_min(levels: ClassLevels) -> float | None:
    return levels.availability_min


SEED_METRICS: tuple[SeedMetric, ...] = (
    SeedMetric("slo_fulfilment", "requests meeting their SLO", pct),
    *(SeedMetric(f"slo_fulfilment_class_{c}", f"class {c} meeting its SLO", pct, cls=c,
                 of_class=_fulfilment) for c in CLASSES),
    *(SeedMetric(f"availability_median_class_{c}", f"class {c} availability, median", pct,
                 cls=c, of_class=_availability_median) for c in CLASSES),
    *(SeedMetric(f"availability_min_class_{c}", f"class {c} availability, min", pct, cls=c,
                 of_class=_availability_min) for c in CLASSES),
    SeedMetric("slo_met_per_kwh", "SLO met per kWh (as drawn)", num(0)),
    SeedMetric("preemptions_mean", "preemptions per request", num(2)),
    SeedMetric("preemptions_max", "preemptions of one request, max", _count),
    SeedMetric("work_lost_cpu_s", "work lost to kills (CPU-s)", num(0)),
    SeedMetric("work_lost_share", "work lost / CPU-s delivered", pct),
    SeedMetric("restores", "cuts given back", _count),
    SeedMetric("refused_at_admission", "refused at admission", _count),
    SeedMetric("suspensions", "suspensions", _count),
    SeedMetric("checkpoint_restarts", "checkpointed restarts", _count),
    SeedMetric("success_rate", "success rate", pct, lambda r: r.success_rate),
    SeedMetric("successful", "successful", _count),
    SeedMetric("failed", "failed", _count),
    SeedMetric("queued_at_end", "queued, still waiting at the end", _count, queue_only=True),
    SeedMetric("scheduling_delay_ms_p50", "scheduling delay p50 (s)", _seconds,
               queue_only=True),
    SeedMetric("scheduling_delay_ms_p99", "scheduling delay p99 (s)", _seconds,
               queue_only=True),
    SeedMetric("avg_cpu_util", "avg CPU utilization", pct, lambda r: r.avg_cpu_util),
    SeedMetric("avg_memory_util", "avg memory utilization", pct, lambda r: r.avg_memory_util),
    SeedMetric("cuts", "cuts", _count),
    SeedMetric("kills", "kills", _count),
    SeedMetric("victims_lost", "victims never rescheduled", _count),
    SeedMetric("oom_kills", "OOM kills", _count),
    SeedMetric("energy_kwh", "energy as drawn (kWh)", num(3)),
    SeedMetric("energy_kwh_all_on", "energy, all hosts on (kWh)", num(3)),
    SeedMetric("hosts_off_mean", "hosts off (mean)", num(2)),
    SeedMetric("switches_on", "hosts switched on", _count),
    SeedMetric("switches_off", "hosts switched off", _count),
    SeedMetric("moves", "services moved", _count),
    SeedMetric("boot_waits", "requests that waited for a boot", _count),
    SeedMetric("energy_kwh_switch_off", "energy, empty hosts off (kWh)", num(3)),
    SeedMetric("successful_per_kwh", "successful requests per kWh (as drawn)", num(0)),
    SeedMetric("decision_ms_p50", "decision p50 (ms)", num(3)),
    SeedMetric("decision_ms_p99", "decision p99 (ms)", num(3)),
)


@dataclass(frozen=True, slots=True)
class Spread:
    """A number over the seeds that have it (None where a run had no value)."""

    by_seed: tuple[float | None, ...]

    @property
    def values(self) -> list[float]:
        return [v for v in self.by_seed if v is not None]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def low(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def high(self) -> float | None:
        return max(self.values) if self.values else None

    @property
    def stdev(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "min": self.low, "max": self.high, "stdev": self.stdev,
                "by_seed": list(self.by_seed)}


@dataclass(frozen=True)
class SeedSummary:
    """Every policy's numbers over the seeds, in the order the policies were asked."""

    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    spreads: dict[str, dict[str, Spread]]  # policy -> metric key -> spread
    queue_new: bool
    thesis: bool

    def metrics(self) -> tuple[SeedMetric, ...]:
        return tuple(m for m in SEED_METRICS if self.queue_new or not m.queue_only)

    def to_json(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "queue_new": self.queue_new,
            "policies": {
                policy: {m.key: self.spreads[policy][m.key].to_json() for m in self.metrics()}
                for policy in self.policies
            },
        }

    def render(self) -> str:
        """Markdown: mean (min - max) per policy and number, then the success rate per seed."""
        lines = [f"Each cell: the mean over the {len(self.seeds)} seeds (the lowest - the "
                 "highest).", "",
                 "| | " + " | ".join(self.policies) + " |",
                 "|---" * (len(self.policies) + 1) + "|"]
        for metric in self.metrics():
            cells = [self._cell(metric, policy) for policy in self.policies]
            lines.append(f"| {metric.label} | " + " | ".join(cells) + " |")
        lines += ["", "Success rate per seed:", "",
                  "| seed | " + " | ".join(self.policies) + " |",
                  "|---" * (len(self.policies) + 1) + "|"]
        for index, seed in enumerate(self.seeds):
            cells = [pct(self.spreads[p]["success_rate"].by_seed[index])
                     for p in self.policies]
            lines.append(f"| {seed} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def _cell(self, metric: SeedMetric, policy: str) -> str:
        spread = self.spreads[policy][metric.key]
        mean, low, high = spread.mean, spread.low, spread.high
        if mean is None or low is None or high is None:
            return "n/a"
        text = f"{metric.fmt(mean)} ({metric.fmt(low)} - {metric.fmt(high)})"
        if len(spread.values) < len(self.seeds):
            text += f" [{len(spread.values)} of {len(self.seeds)} seeds]"
        reference = THESIS_RESULTS.get(policy) if self.thesis else None
        if reference is not None and metric.thesis is not None and not self.queue_new:
            text += f" (thesis {pct(metric.thesis(reference))})"
        return text


def summarize_seeds(runs: Sequence[SeedRun], *, queue_new: bool, thesis: bool) -> SeedSummary:
    """The runs of every seed, each with the same policies in the same order."""
    if not runs:
        raise ValueError("no seed was run")
    policies = tuple(r.stats.policy for r in runs[0][1])
    for seed, results in runs:
        if tuple(r.stats.policy for r in results) != policies:
            raise ValueError(f"seed {seed} ran other policies than seed {runs[0][0]}")
    spreads = {
        policy: {
            metric.key: Spread(tuple(metric.value(results[index].result)
                                     for _, results in runs))
            for metric in SEED_METRICS
        }
        for index, policy in enumerate(policies)
    }
    return SeedSummary(tuple(seed for seed, _ in runs), policies, spreads, queue_new, thesis)
