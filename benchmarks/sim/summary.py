"""The simulator's side-by-side table (Markdown), next to the thesis's one-hour results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.metrics import PolicyMetrics
from benchmarks.sim.engine import SimResult, SimStats


@dataclass(frozen=True, slots=True)
class ThesisResult:
    """Thesis Tables 5.1 and 5.2 (one hour, 5 hosts, means of three runs)."""

    success_rate: float
    avg_cpu_util: float
    avg_memory_util: float


THESIS_RESULTS: dict[str, ThesisResult] = {
    "energy": ThesisResult(0.837, 0.805, 0.557),
    "spread": ThesisResult(0.577, 0.749, 0.399),
    "binpack": ThesisResult(0.565, 0.723, 0.368),
}


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _num(digits: int) -> Callable[[float | None], str]:
    def format_(value: float | None) -> str:
        return "n/a" if value is None else f"{value:,.{digits}f}"

    return format_


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


_Getter = Callable[[PolicyMetrics, SimStats], float | None]
_ROWS: tuple[tuple[str, _Getter, Callable[[float | None], str]], ...] = (
    ("requests", lambda m, s: m.requests, _num(0)),
    ("success rate", lambda m, s: m.success_rate, _pct),
    ("queued, still waiting at the end", lambda m, s: m.queued_at_end, _num(0)),
    ("scheduling delay p50 / p99 (s)", lambda m, s: m.scheduling_delay_ms_p50, _num(1)),
    ("avg CPU utilization", lambda m, s: m.avg_cpu_util, _pct),
    ("avg memory utilization", lambda m, s: m.avg_memory_util, _pct),
    ("cuts", lambda m, s: m.cuts, _num(0)),
    ("memory cuts not fully applied", lambda m, s: s.memory_cuts_partial, _num(0)),
    ("kills", lambda m, s: m.kills, _num(0)),
    ("victims never rescheduled", lambda m, s: m.victims_lost, _num(0)),
    ("OOM kills (host full / own limit)", lambda m, s: m.oom_kills, _num(0)),
    ("energy, all hosts on (kWh)", lambda m, s: m.energy_kwh, _num(3)),
    ("energy, empty hosts off (kWh)", lambda m, s: m.energy_kwh_switch_off, _num(3)),
    ("successful requests per kWh (all on)", lambda m, s: m.successful_per_kwh, _num(0)),
    ("successful requests per kWh (empty off)",
     lambda m, s: m.successful_per_kwh_switch_off, _num(0)),
    ("decision p50 (ms)", lambda m, s: m.decision_ms_p50, _ms),
    ("decision p99 (ms)", lambda m, s: m.decision_ms_p99, _ms),
    ("job slowdown mean / p99", lambda m, s: m.job_slowdown_mean, _num(2)),
    ("host-time CPU-contended", lambda m, s: s.contended_host_share, _pct),
    ("host-time in LEE / DEE / EED", lambda m, s: m.lee_share, _pct),
    ("simulator wall time (s)", lambda m, s: s.wall_s, _num(2)),
)


def render_summary(results: Sequence[SimResult], *, thesis: bool) -> str:
    """One column per policy; with ``thesis``, the thesis's numbers in brackets."""
    names = [r.stats.policy for r in results]
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, get, fmt in _ROWS:
        cells = []
        for result in results:
            metrics, stats = result.result.metrics, result.stats
            cell = fmt(get(metrics, stats))
            if label.startswith("OOM"):
                cell = f"{metrics.oom_kills} ({stats.oom_host_kills} / {stats.oom_limit_kills})"
            elif label.startswith("victims never") and metrics.victims_lost:
                cell += f" ({metrics.victims_waiting_at_end} still waiting at the end)"
            elif label.startswith("queued"):
                cell = (f"{_num(0)(metrics.queued_at_end)} (of "
                        f"{_num(0)(metrics.queued_requests)} queued)")
            elif label.startswith("scheduling delay"):
                cell = " / ".join(
                    _num(1)(None if v is None else v / 1000.0)
                    for v in (metrics.scheduling_delay_ms_p50, metrics.scheduling_delay_ms_p99)
                )
            elif label.startswith("job slowdown"):
                cell = f"{_num(2)(metrics.job_slowdown_mean)} / {_num(2)(metrics.job_slowdown_p99)}"
            elif label.startswith("host-time in LEE"):
                cell = " / ".join(_pct(v) for v in (metrics.lee_share, metrics.dee_share,
                                                     metrics.eed_share))
            reference = THESIS_RESULTS.get(stats.policy) if thesis else None
            if label == "success rate" and metrics.queued_requests:
                # Queued requests are never refused: the rate of the decided ones is no
                # match for the thesis's; what matters is how many were placed in the run.
                placed = metrics.successful / metrics.requests if metrics.requests else None
                cell += f" of decided, {_pct(placed)} of all"
                reference = None
            if reference is not None:
                if label == "success rate":
                    cell += f" (thesis {_pct(reference.success_rate)})"
                elif label == "avg CPU utilization":
                    cell += f" (thesis {_pct(reference.avg_cpu_util)})"
                elif label == "avg memory utilization":
                    cell += f" (thesis {_pct(reference.avg_memory_util)})"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
