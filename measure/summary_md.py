"""``DIR/summary.md``: Markdown tables of every policy's run side by side, one column per policy.

The service levels come first (DESIGN 3.10, 8: a policy is judged by what each request
receives), per class. The per-window delays only for runs of at most :data:`MD_MAX_WINDOWS`
windows (else where the CSV files are).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from domain.classes import CLASSES
from measure.result_files import REQUESTS_FILE, WINDOWS_FILE
from measure.results import WINDOW_COLUMNS, PolicyResult
from measure.service_levels import ClassLevels, ServiceSummary
from measure.stats import Stats

MD_MAX_WINDOWS = 36  # 3 hours of 5-minute windows: longer runs' windows stay in the CSV files
GIB = 1024**3
NA = "n/a"  # a value without data (an empty sample, a ratio without denominator)


def _short(value: float | None) -> str:
    """Three significant digits below 1000 (0.0123, 4.56, 789), whole numbers above."""
    if value is None:
        return NA
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def pct(value: float | None) -> str:
    return NA if value is None else f"{value * 100:.1f}%"


def _f(digits: int) -> Callable[[float | None], str]:
    def fmt(value: float | None) -> str:
        return NA if value is None else f"{value:,.{digits}f}"

    return fmt


def _int(value: float | None) -> str:
    return NA if value is None else f"{int(value):,}"


def _gib(value: float | None) -> str:
    return NA if value is None else f"{value / GIB:,.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


_Row = tuple[str, str, Callable[[float | None], str]]

_SECTIONS: tuple[tuple[str, tuple[_Row, ...]], ...] = (
    ("Allocations (thesis Table 5.1)", (
        ("requests", "requests", _int),
        ("successful", "successful", _int),
        ("failed", "failed", _int),
        ("success rate", "success_rate", pct),
        ("undecided at the end", "undecided", _int),
        ("new requests queued (their clients asked to)", "queued_requests", _int),
        ("of those, still waiting at the end", "queued_at_end", _int),
    )),
    ("Utilization (thesis Table 5.2) and regions", (
        ("average CPU utilization", "avg_cpu_util", pct),
        ("average memory utilization", "avg_memory_util", pct),
        ("average CPU utilization, hosts with tasks", "avg_cpu_util_busy", pct),
        ("average memory utilization, hosts with tasks", "avg_memory_util_busy", pct),
        ("CPU booked / capacity", "avg_cpu_allocated", pct),
        ("memory booked / capacity", "avg_memory_allocated", pct),
        ("overbooking factor, hosts with tasks", "avg_overbooking_busy", _f(3)),
        ("host-time in LEE (U < 50%)", "lee_share", pct),
        ("host-time in DEE", "dee_share", pct),
        ("host-time in EED (U > 85%)", "eed_share", pct),
        ("host-time empty", "empty_share", pct),
        ("hosts that could be off (mean)", "hosts_switchable_off_mean", _f(2)),
        ("hosts never used", "hosts_never_used", _int),
    )),
    ("Energy (DESIGN 7.4)", (
        ("energy as drawn (kWh)", "energy_kwh", _f(3)),
        ("energy, all hosts on (kWh)", "energy_kwh_all_on", _f(3)),
        ("energy, empty hosts off (kWh)", "energy_kwh_switch_off", _f(3)),
        ("hosts off (mean, DESIGN 3.15)", "hosts_off_mean", _f(2)),
        ("hosts switched on", "switches_on", _int),
        ("hosts switched off", "switches_off", _int),
        ("services moved (consolidation)", "moves", _int),
        ("requests that waited for a boot", "boot_waits", _int),
        ("their waits (s, in all)", "boot_wait_s", _f(0)),
        ("average power, as drawn (W)", "avg_power_w", _f(1)),
        ("average power, empty off (W)", "avg_power_w_switch_off", _f(1)),
        ("successful allocations per kWh", "successful_per_kwh", _f(1)),
        ("successful allocations per kWh, empty off", "successful_per_kwh_switch_off", _f(1)),
    )),
    ("Scheduler (thesis Table 5.3)", (
        ("decisions", "decisions", _int),
        ("decision time mean (ms)", "decision_ms_mean", _short),
        ("decision time p50 (ms)", "decision_ms_p50", _short),
        ("decision time p90 (ms)", "decision_ms_p90", _short),
        ("decision time p99 (ms)", "decision_ms_p99", _short),
        ("decision time max (ms)", "decision_ms_max", _short),
        ("scheduling delay mean (ms)", "scheduling_delay_ms_mean", _short),
        ("scheduling delay p50 (ms)", "scheduling_delay_ms_p50", _short),
        ("scheduling delay p90 (ms)", "scheduling_delay_ms_p90", _short),
        ("scheduling delay p99 (ms)", "scheduling_delay_ms_p99", _short),
    )),
    ("Jobs", (
        ("jobs finished", "jobs_finished", _int),
        ("makespan mean (s)", "job_makespan_s_mean", _f(1)),
        ("makespan p50 (s)", "job_makespan_s_p50", _f(1)),
        ("makespan p90 (s)", "job_makespan_s_p90", _f(1)),
        ("makespan p99 (s)", "job_makespan_s_p99", _f(1)),
        ("slowdown mean", "job_slowdown_mean", _f(3)),
        ("slowdown p50", "job_slowdown_p50", _f(3)),
        ("slowdown p90", "job_slowdown_p90", _f(3)),
        ("slowdown p99", "job_slowdown_p99", _f(3)),
        ("probe jobs submitted", "probes", _int),
        ("probe makespan mean (s)", "probe_makespan_s_mean", _f(1)),
        ("probe slowdown mean", "probe_slowdown_mean", _f(3)),
    )),
    ("Services (thesis Table 5.4)", (
        ("services stopped by their client", "services_stopped", _int),
        ("response rounds", "responses", _int),
        ("response time mean (ms)", "response_ms_mean", _f(1)),
        ("response time p50 (ms)", "response_ms_p50", _f(1)),
        ("response time p75 (ms)", "response_ms_p75", _f(1)),
        ("response time p90 (ms)", "response_ms_p90", _f(1)),
        ("response time p99 (ms)", "response_ms_p99", _f(1)),
    )),
    ("Cuts, kills and failures (thesis 5.2.5)", (
        ("cuts", "cuts", _int),
        ("CPU cut (shares)", "cut_cpu_shares", _int),
        ("memory cut (GiB)", "cut_memory_bytes", _gib),
        ("kills", "kills", _int),
        ("kills / successful allocations", "kills_share", pct),
        ("victims (distinct tasks killed)", "victims", _int),
        ("victims never rescheduled", "victims_lost", _int),
        ("victims never rescheduled / victims", "victims_lost_share", pct),
        ("of those, still waiting for a place at the end", "victims_waiting_at_end", _int),
        ("reschedule attempts", "reschedule_attempts", _int),
        ("reschedules placed", "reschedules_placed", _int),
        ("out-of-memory kills", "oom_kills", _int),
        ("tasks failed", "tasks_failed", _int),
    )),
)


def _availability_cell(levels: ClassLevels) -> str:
    values = (levels.availability_min, levels.availability_p10, levels.availability_median,
              levels.availability_mean)
    return NA if levels.requests == 0 else " / ".join(pct(v) for v in values)


def _class_rows(
    services: Sequence[ServiceSummary | None], label: str, cell: Callable[[ClassLevels], str]
) -> list[list[str]]:
    """One row per class: ``cell`` of each policy's levels of that class."""
    return [[f"class {c}: {label}",
             *(NA if s is None else cell(s.by_class[c]) for s in services)] for c in CLASSES]


def service_section(results: Sequence[PolicyResult]) -> list[str]:
    """The service levels per class, one column per policy (DESIGN 3.10, 7.3)."""
    names = [r.policy for r in results]
    services = [r.service_levels for r in results]
    known = [s for s in services if s is not None]
    parts = ["## Service levels (DESIGN 3.10)", ""]
    if not known:
        return [*parts, "These runs were recorded before service levels.", ""]
    first = known[0]
    slos = {s.slo.describe() for s in known}
    parts.append(
        f"Availability A = time running / time admitted; SLO per class {' or '.join(sorted(slos))}"
        f"; allocation time alpha {first.allocation_s:g} s charged on every placement after a "
        "request's first. A request refused at once has A = 0. Fairness: the Gini of the "
        "availabilities of a class's requests active in each 10-minute interval, averaged. "
        f"One line per request in `<policy>/{REQUESTS_FILE}`."
    )
    parts.append("")
    metrics = [r.metrics for r in results]
    rows: list[list[str]] = [
        ["requests meeting their SLO", *(pct(m.slo_fulfilment) for m in metrics)],
        ["SLO met per kWh (as drawn)", *(_f(1)(m.slo_met_per_kwh) for m in metrics)],
        ["SLO met per kWh (empty off)",
         *(_f(1)(m.slo_met_per_kwh_switch_off) for m in metrics)],
    ]
    for label, cell in (
        ("met / requests", lambda v: f"{pct(v.fulfilment)} of {v.requests:,}"),
        ("availability min / p10 / median / mean", _availability_cell),
        ("QoS deficit of those that missed", lambda v: _f(3)(v.qos_deficit)),
        ("Gini of availabilities", lambda v: _f(3)(v.gini)),
    ):
        rows += _class_rows(services, label, cell)
    rows += [
        ["preemptions per request, mean / max",
         *(f"{_f(2)(m.preemptions_mean)} / {_int(m.preemptions_max)}" for m in metrics)],
        ["work lost to kills (CPU-s)", *(_f(0)(m.work_lost_cpu_s) for m in metrics)],
        ["work lost / CPU-s delivered", *(pct(m.work_lost_share) for m in metrics)],
        ["cuts given back", *(_int(m.restores) for m in metrics)],
        # overload (DESIGN 3.13, 3.14): refusals at the door are SLO misses, counted apart
        ["refused at admission (SLO misses)", *(_int(m.refused_at_admission) for m in metrics)],
        ["suspended / resumed / checkpointed restarts",
         *(" / ".join(_int(v) for v in (m.suspensions, m.resumes, m.checkpoint_restarts))
           for m in metrics)],
    ]
    for c in CLASSES:
        rows.append([f"class {c}: refused at admission / suspended / resumed / checkpointed "
                     "restarts", *(_overload_cell(r, c) for r in results)])
    parts.append(_table(["", *names], rows))
    parts.append("")
    return parts


def _overload_cell(result: PolicyResult, cls: int) -> str:
    counts = result.by_class.get(str(cls), {})
    keys = ("refused_at_admission", "suspended", "resumed", "checkpoint_restarts")
    if not any(key in counts for key in keys):
        return NA  # a result recorded before them
    return " / ".join(_int(counts.get(key, 0)) for key in keys)


def _stats_cell(stats: Stats | None,
                keys: Sequence[str] = ("mean", "p50", "p90", "p99")) -> str:
    if stats is None or stats.count == 0:
        return NA
    return " / ".join(_short(getattr(stats, k)) for k in keys)


def render_markdown(results: Sequence[PolicyResult], plots: Sequence[str] = ()) -> str:
    """summary.md: one table per topic, one column per policy."""
    names = [r.policy for r in results]
    metrics = [r.metrics.to_json() for r in results]
    parts = ["# Benchmark report", ""]
    parts += _run_line(results[0])
    parts += service_section(results)
    for title, rows in _SECTIONS:
        parts.append(f"## {title}")
        parts.append("")
        body = [[label, *(fmt(m.get(key)) for m in metrics)] for label, key, fmt in rows]
        parts.append(_table(["", *names], body))
        parts.append("")
    parts += _windows_section(results, names)
    parts += _distributions_section(results, names)
    parts += _passes_section(results, names)
    if plots:
        parts.append("## Plots")
        parts.append("")
        parts += [f"![{Path(p).stem}]({p})" for p in plots]
        parts.append("")
    return "\n".join(parts)


def _run_line(first: PolicyResult) -> list[str]:
    """What was run (from the first result): the trace, the energy model, the regions."""
    trace = first.trace
    if not trace:
        return []
    return [
        f"Trace: source `{trace.get('source')}`, seed {trace.get('seed')}, "
        f"{trace.get('hosts')} hosts, {trace.get('duration_s')} s. "
        f"Run: {first.t_end_s - first.t_start_s:g} s. "
        f"Energy model: `{first.energy_model.get('table', 'per host')}` + "
        f"{first.energy_model.get('memory_w_per_gib')} W per GiB in use. "
        f"Regions: LEE < {first.region_bounds[0]:g} <= DEE <= {first.region_bounds[1]:g} "
        "< EED of U = max(cpu, memory).",
        "",
    ]


def _windows_section(results: Sequence[PolicyResult], names: list[str]) -> list[str]:
    """The delays per window, side by side, or where to find them when there are many."""
    parts = ["## Scheduling delay per 5-minute window (ms: mean / p50 / p90 / p99)", ""]
    files = ", ".join(f"`{r.policy}/{WINDOWS_FILE}`" for r in results)
    most = max(len(r.delay_windows) for r in results)
    if most > MD_MAX_WINDOWS:
        parts.append(
            f"{most:,} windows per policy, more than the {MD_MAX_WINDOWS} shown here: one row "
            f"per window in {files} ({', '.join(WINDOW_COLUMNS)}); the overall delays are "
            "under Scheduler above."
        )
    else:
        window_rows: dict[tuple[float, float], list[str]] = {}
        for index, result in enumerate(results):
            for window in result.delay_windows:
                key = (window.start_s, window.end_s)
                row = window_rows.setdefault(key, [NA] * len(results))
                row[index] = _stats_cell(window.delay_ms)
        parts.append(_table(
            ["window (min)", *names],
            [[f"{a / 60:g}-{b / 60:g}", *cells]
             for (a, b), cells in sorted(window_rows.items())],
        ))
        parts.append("")
        parts.append(f"The same windows, with every statistic: {files}.")
    parts.append("")
    return parts


def _distributions_section(results: Sequence[PolicyResult], names: list[str]) -> list[str]:
    """Service response times by workload and rate, job makespans by kind."""
    parts = ["## Service response times by workload and rate (ms: mean / p50 / p75)", ""]
    keys = sorted({k for r in results for k in r.response_ms}, key=response_sort_key)
    if keys:
        parts.append(_table(
            ["workload-rate", *names],
            [[k, *(_stats_cell(r.response_ms.get(k), ("mean", "p50", "p75")) for r in results)]
             for k in keys],
        ))
    else:
        parts.append("No service response times were recorded.")
    parts += ["", "## Job makespans by kind (s: mean / p50 / p90 / p99)", ""]
    kinds = sorted({k for r in results for k in r.makespan_s})
    if kinds:
        parts.append(_table(
            ["kind", *names],
            [[k, *(_stats_cell(r.makespan_s.get(k)) for r in results)] for k in kinds],
        ))
    else:
        parts.append("No job finished.")
    parts.append("")
    return parts


def _passes_section(results: Sequence[PolicyResult], names: list[str]) -> list[str]:
    parts = ["## Placements per pass and allocations per class", ""]
    pass_names = sorted({p for r in results for p in r.passes})
    rows_out = [[f"placed by {p}", *(_int(r.passes.get(p, 0)) for r in results)]
                for p in pass_names]
    for cls in ("1", "2", "3", "4"):
        cells = []
        for r in results:
            counts = r.by_class.get(cls, {})
            cells.append(
                f"{counts.get('successful', 0)} ok / {counts.get('failed', 0)} failed / "
                f"{counts.get('cut', 0)} cut / {counts.get('killed', 0)} killed"
            )
        rows_out.append([f"class {cls}", *cells])
    parts.append(_table(["", *names], rows_out))
    parts.append("")
    return parts


def response_sort_key(key: str) -> tuple[str, int]:
    workload, _, rate = key.rpartition("-")
    return (workload, int(rate) if rate.isdigit() else 0)
