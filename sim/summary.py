"""The simulator's side-by-side table (Markdown), next to the thesis's one-hour results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from measure.results import PolicyMetrics, PolicyResult
from sim.config import SimResult, SimStats


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


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def num(digits: int) -> Callable[[float | None], str]:
    def format_(value: float | None) -> str:
        return "n/a" if value is None else f"{value:,.{digits}f}"

    return format_


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# A cell from a policy's metrics, its simulator statistics, and the thesis's results for that
# policy (None when there are none, or the table is not of the thesis workload).
_Cell = Callable[[PolicyMetrics, SimStats, ThesisResult | None], str]


def _value(
    get: Callable[[PolicyMetrics, SimStats], float | None],
    fmt: Callable[[float | None], str],
    thesis_value: Callable[[ThesisResult], float] | None = None,
) -> _Cell:
    """One number, with the thesis's own in brackets when ``thesis_value`` reads it."""

    def cell(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
        text = fmt(get(m, s))
        if reference is not None and thesis_value is not None:
            text += f" (thesis {pct(thesis_value(reference))})"
        return text

    return cell


_REFUSING_SUCCESS_RATE = _value(lambda m, s: m.success_rate, pct, lambda r: r.success_rate)


def _success_rate(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    if not m.queued_requests:
        return _REFUSING_SUCCESS_RATE(m, s, reference)
    # Queued requests are never refused: the rate of the decided ones is no match for the
    # thesis's; what matters is how many were placed in the run.
    placed = m.successful / m.requests if m.requests else None
    return f"{pct(m.success_rate)} of decided, {pct(placed)} of all"


def _queued(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return f"{num(0)(m.queued_at_end)} (of {num(0)(m.queued_requests)} queued)"


def _delay(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return " / ".join(num(1)(None if v is None else v / 1000.0)
                      for v in (m.scheduling_delay_ms_p50, m.scheduling_delay_ms_p99))


def _victims(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    text = num(0)(m.victims_lost)
    if m.victims_lost:
        text += f" ({m.victims_waiting_at_end} still waiting at the end)"
    return text


def _oom(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return f"{m.oom_kills} ({s.oom_host_kills} / {s.oom_limit_kills})"


def _slowdown(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return f"{num(2)(m.job_slowdown_mean)} / {num(2)(m.job_slowdown_p99)}"


def _regions(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return " / ".join(pct(v) for v in (m.lee_share, m.dee_share, m.eed_share))


def _preemptions(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return f"{num(2)(m.preemptions_mean)} / {num(0)(m.preemptions_max)}"


def _work_lost(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return f"{num(0)(m.work_lost_cpu_s)} ({pct(m.work_lost_share)})"


def _power(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return (f"{num(2)(m.hosts_off_mean)} / {num(0)(m.switches_on)} / "
            f"{num(0)(m.switches_off)}")


def _moves(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return f"{num(0)(m.moves)} / {num(0)(m.boot_waits)} ({num(0)(m.boot_wait_s)})"
def _overload(m: PolicyMetrics, s: SimStats, reference: ThesisResult | None) -> str:
    return " / ".join(num(0)(v) for v in (m.suspensions, m.resumes, m.checkpoint_restarts))


def fulfilment_by_class(result: PolicyResult) -> str:
    """Per class, the share of its requests that met their SLO: "1: 100% 2: 97.3% ..."."""
    service = result.service_levels
    if service is None:
        return "n/a"
    return " ".join(f"{c}: {pct(levels.fulfilment)}" for c, levels in service.by_class.items())


_ROWS: tuple[tuple[str, _Cell], ...] = (
    ("requests meeting their SLO (DESIGN 3.10)", _value(lambda m, s: m.slo_fulfilment, pct)),
    ("SLO met per kWh (as drawn)", _value(lambda m, s: m.slo_met_per_kwh, num(0))),
    ("preemptions per request mean / max", _preemptions),
    ("work lost to kills, CPU-s (of delivered)", _work_lost),
    ("cuts given back", _value(lambda m, s: m.restores, num(0))),
    ("refused at admission (DESIGN 3.13)", _value(lambda m, s: m.refused_at_admission, num(0))),
    ("suspended / resumed / checkpointed restarts (3.14)", _overload),
    ("requests", _value(lambda m, s: m.requests, num(0))),
    ("success rate", _success_rate),
    ("queued, still waiting at the end", _queued),
    ("scheduling delay p50 / p99 (s)", _delay),
    ("avg CPU utilization", _value(lambda m, s: m.avg_cpu_util, pct, lambda r: r.avg_cpu_util)),
    ("avg memory utilization",
     _value(lambda m, s: m.avg_memory_util, pct, lambda r: r.avg_memory_util)),
    ("cuts", _value(lambda m, s: m.cuts, num(0))),
    ("memory cuts not fully applied", _value(lambda m, s: s.memory_cuts_partial, num(0))),
    ("kills", _value(lambda m, s: m.kills, num(0))),
    ("victims never rescheduled", _victims),
    ("OOM kills (host full / own limit)", _oom),
    ("energy as drawn (kWh)", _value(lambda m, s: m.energy_kwh, num(3))),
    ("energy, all hosts on (kWh)", _value(lambda m, s: m.energy_kwh_all_on, num(3))),
    ("energy, empty hosts off (kWh)", _value(lambda m, s: m.energy_kwh_switch_off, num(3))),
    ("successful requests per kWh (as drawn)",
     _value(lambda m, s: m.successful_per_kwh, num(0))),
    ("successful requests per kWh (empty off)",
     _value(lambda m, s: m.successful_per_kwh_switch_off, num(0))),
    ("hosts off (mean) / switched on / off (DESIGN 3.15)", _power),
    ("services moved / boot waits (s in all)", _moves),
    ("decision p50 (ms)", _value(lambda m, s: m.decision_ms_p50, _ms)),
    ("decision p99 (ms)", _value(lambda m, s: m.decision_ms_p99, _ms)),
    ("job slowdown mean / p99", _slowdown),
    ("host-time CPU-contended", _value(lambda m, s: s.contended_host_share, pct)),
    ("host-time in LEE / DEE / EED", _regions),
    ("simulator wall time (s)", _value(lambda m, s: s.wall_s, num(2))),
)


def render_summary(results: Sequence[SimResult], *, thesis: bool) -> str:
    """One column per policy; with ``thesis``, the thesis's numbers in brackets."""
    names = [r.stats.policy for r in results]
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, cell in _ROWS:
        cells = [
            cell(r.result.metrics, r.stats,
                 THESIS_RESULTS.get(r.stats.policy) if thesis else None)
            for r in results
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        if label.startswith("requests meeting their SLO"):
            lines.append("| of each class | " + " | ".join(
                fulfilment_by_class(r.result) for r in results) + " |")
    return "\n".join(lines) + "\n"


def render_clusters(results: Sequence[SimResult]) -> str:
    """Per policy, each cluster's counters (a run with several clusters, DESIGN 12): the
    report's other numbers are over all of them."""
    lines = ["", "Clusters (the numbers above are over all of them):", "",
             "| policy | cluster | hosts | arrivals (home) | offloaded out | offloaded in "
             "| of those not placed there | no peer had room | kWh (all on) | kWh (empty off) |",
             "|---" * 10 + "|"]
    for result in results:
        for c in result.stats.clusters:
            lines.append(
                f"| {result.stats.policy} | {c.name} | {len(c.hosts)} | {c.arrivals:,} "
                f"| {c.offloaded_out:,} | {c.offloaded_in:,} | {c.offloaded_in_unplaced:,} "
                f"| {c.no_peer:,} | {c.energy_kwh:.3f} | {c.energy_kwh_switch_off:.3f} |"
            )
    return "\n".join(lines) + "\n"
