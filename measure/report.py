"""Result files of policy runs, and the side-by-side report (JSON, Markdown, PNG plots).

Files of one policy run, written by :func:`save_result` (the simulator and the live replay call
it with what :meth:`measure.recorder.MetricsRecorder.finish` returned)::

    DIR/<policy>/result.json      PolicyResult.to_json(): format "greenswarm-policy-result",
                                  version 1; keys policy, t_start_s, t_end_s, trace,
                                  energy_model, region_bounds, metrics (flat numbers, see
                                  PolicyMetrics), decision_ms, scheduling_delay_ms (Stats),
                                  windows (meta), makespan_s, slowdown, response_ms,
                                  response_ms_by_rate, passes, by_class, hosts, series (meta)
    DIR/<policy>/host_series.csv  t_s,host_id,cpu_util,memory_util,cpu_allocated,
                                  memory_allocated,tasks,power_w,power_switch_off_w
                                  (bin averages; one row per host and bin)
    DIR/<policy>/windows.csv      start_s,end_s,count,mean,p50,p75,p90,p99,min,max: the
                                  scheduling delays (ms) of the new requests decided in each
                                  5-minute window, one row per window (a 149-day trace has
                                  43,000 of them, so they are kept out of the JSON files)

``greenswarm bench report DIR`` (:func:`write_report`) reads every ``DIR/*/result.json`` and
writes:

* ``DIR/summary.json``: ``{"format": "greenswarm-summary", "version": 1, "policies": {name:
  {...every PolicyMetrics key..., "windows_csv": "<policy>/windows.csv", "delay_windows":
  count, "response_ms": {...}, "response_ms_by_rate": {...}, "makespan_s": {...}, "slowdown":
  {...}, "passes": {...}, "by_class": {...}, "hosts": [...], "trace": {...}, "energy_model":
  {...}}}, "plots": [...]}``;
* ``DIR/summary.md``: Markdown tables, one column per policy; the per-window delays only for
  runs of at most :data:`MD_MAX_WINDOWS` windows (else where the CSV files are);
* PNG plots modelled on the thesis figures 5.1-5.8 (see :data:`PLOTS`).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.errors import ValidationError
from measure.results import (
    SERIES_COLUMNS,
    WINDOW_COLUMNS,
    HostSeries,
    PolicyResult,
    Stats,
    WindowStats,
    percentile,
)
from workloads.outfiles import open_text, out_directory, write_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes

SUMMARY_FORMAT = "greenswarm-summary"
RESULT_FILE = "result.json"
SERIES_FILE = "host_series.csv"
WINDOWS_FILE = "windows.csv"
MD_MAX_WINDOWS = 36  # 3 hours of 5-minute windows: longer runs' windows stay in the CSV files
_POLICY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PLOT_DPI = 110
MAX_HOST_LINES = 12  # more hosts than this: plot a band instead of one line per host
GIB = 1024**3
NA = "n/a"  # a value without data (an empty sample, a ratio without denominator)


# ------------------------------------------------------------------ result files


def check_policy_name(policy: str) -> str:
    if not _POLICY_NAME.match(policy):
        raise ValidationError(
            "policy", f"{policy!r} cannot name a directory: use letters, digits, '-', '_', '.'"
        )
    return policy


def save_result(result: PolicyResult, out_dir: str | Path) -> Path:
    """Write ``out_dir/<policy>/result.json`` and ``host_series.csv``; returns the directory."""
    directory = out_directory(out_directory(out_dir) / check_policy_name(result.policy))
    series = result.series
    with open_text(directory / SERIES_FILE) as handle:
        writer = csv.writer(handle)
        writer.writerow(["t_s", "host_id", *SERIES_COLUMNS])
        times = series.times_s()
        for h, host_id in enumerate(series.host_ids):
            for i, t in enumerate(times):
                writer.writerow(
                    [_num(t), host_id, *(_num(series.values[c][h][i]) for c in SERIES_COLUMNS)]
                )
    with open_text(directory / WINDOWS_FILE) as handle:
        writer = csv.writer(handle)
        writer.writerow(WINDOW_COLUMNS)
        for window in result.delay_windows:
            stats = window.delay_ms
            writer.writerow([  # every digit: the file is read back as it was
                repr(window.start_s), repr(window.end_s), stats.count,
                *("" if v is None else repr(v) for v in (
                    stats.mean, stats.p50, stats.p75, stats.p90, stats.p99, stats.min,
                    stats.max)),
            ])
    _write_json(directory / RESULT_FILE, _json_safe(result.to_json()))
    return directory


def _num(value: float) -> str:
    return f"{value:.6g}"


def _write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")


def load_result(policy_dir: str | Path) -> PolicyResult:
    """Read one ``DIR/<policy>/`` written by :func:`save_result`."""
    directory = Path(policy_dir)
    path = directory / RESULT_FILE
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValidationError(str(path), f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValidationError(str(path), "must hold a JSON object")
    try:
        meta = obj["series"]
        series = _read_series(directory / SERIES_FILE, float(meta["t0_s"]),
                              float(meta["step_s"]), int(meta["bins"]))
        windows = (None if "delay_windows" in obj  # written before windows.csv existed
                   else _read_windows(directory / WINDOWS_FILE, int(obj["windows"]["count"])))
        return PolicyResult.from_json(obj, series, windows)
    except ValidationError as exc:
        raise ValidationError(f"{path}: {exc.field}", exc.message) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(str(path), f"malformed result: {exc!r}") from None


def _read_windows(path: Path, count: int) -> list[WindowStats]:
    windows: list[WindowStats] = []
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            for line, record in enumerate(csv.DictReader(handle), start=2):
                try:
                    numbers = {k: None if record[k] == "" else float(record[k])
                               for k in WINDOW_COLUMNS[3:]}
                    windows.append(WindowStats(
                        float(record["start_s"]), float(record["end_s"]),
                        Stats(int(record["count"]), **numbers),
                    ))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ValidationError(f"{path} line {line}", f"bad row: {exc!r}") from None
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if len(windows) != count:
        raise ValidationError(str(path), f"{len(windows)} windows, expected {count}")
    return windows


def _read_series(path: Path, t0_s: float, step_s: float, bins: int) -> HostSeries:
    rows: dict[str, dict[str, list[float]]] = {}
    if bins == 0 and not path.exists():
        return HostSeries(t0_s, step_s, (), {c: () for c in SERIES_COLUMNS})
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            for line, record in enumerate(reader, start=2):
                try:
                    host = rows.setdefault(record["host_id"], {c: [] for c in SERIES_COLUMNS})
                    for column in SERIES_COLUMNS:
                        host[column].append(float(record[column]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ValidationError(f"{path} line {line}", f"bad row: {exc!r}") from None
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read: {exc.strerror or exc}") from None
    host_ids = tuple(rows)
    for host_id, columns in rows.items():
        if len(columns[SERIES_COLUMNS[0]]) != bins:
            raise ValidationError(
                str(path), f"host {host_id} has {len(columns[SERIES_COLUMNS[0]])} bins, "
                f"expected {bins}"
            )
    values = {c: tuple(tuple(rows[h][c]) for h in host_ids) for c in SERIES_COLUMNS}
    return HostSeries(t0_s, step_s, host_ids, values)


def load_results(directory: str | Path) -> list[PolicyResult]:
    """Every ``directory/<policy>/result.json``, sorted by policy name."""
    root = Path(directory)
    if not root.is_dir():
        raise ValidationError("dir", f"{root} is not a directory")
    results = [load_result(p.parent) for p in sorted(root.glob(f"*/{RESULT_FILE}"))]
    if not results:
        raise ValidationError("dir", f"no {root}/<policy>/{RESULT_FILE} found")
    return results


# ------------------------------------------------------------------ summary.json


def policy_summary(result: PolicyResult) -> dict[str, Any]:
    """One policy's object in summary.json: the flat metrics plus the nested details."""
    summary: dict[str, Any] = {"policy": result.policy}
    summary.update(result.metrics.to_json())
    summary["windows_csv"] = f"{result.policy}/{WINDOWS_FILE}"
    summary["delay_windows"] = len(result.delay_windows)
    summary["decision_ms"] = result.decision_ms.to_json()
    summary["scheduling_delay_ms"] = result.scheduling_delay_ms.to_json()
    summary["response_ms"] = {k: v.to_json() for k, v in result.response_ms.items()}
    summary["response_ms_by_rate"] = {
        k: v.to_json() for k, v in result.response_ms_by_rate.items()
    }
    summary["makespan_s"] = {k: v.to_json() for k, v in result.makespan_s.items()}
    summary["slowdown"] = {k: v.to_json() for k, v in result.slowdown.items()}
    summary["passes"] = dict(result.passes)
    summary["by_class"] = {k: dict(v) for k, v in result.by_class.items()}
    summary["hosts_detail"] = [h.to_json() for h in result.hosts]
    summary["trace"] = dict(result.trace)
    summary["energy_model"] = dict(result.energy_model)
    summary["region_bounds"] = {"lee_below": result.region_bounds[0],
                                "eed_above": result.region_bounds[1]}
    return summary


def build_summary(results: Sequence[PolicyResult], plots: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "format": SUMMARY_FORMAT,
        "version": 1,
        "policies": {r.policy: policy_summary(r) for r in results},
        "plots": list(plots),
    }


# ------------------------------------------------------------------ summary.md


def _short(value: float | None) -> str:
    """Three significant digits below 1000 (0.0123, 4.56, 789), whole numbers above."""
    if value is None:
        return NA
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _pct(value: float | None) -> str:
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
        ("success rate", "success_rate", _pct),
        ("undecided at the end", "undecided", _int),
        ("new requests queued (their clients asked to)", "queued_requests", _int),
        ("of those, still waiting at the end", "queued_at_end", _int),
    )),
    ("Utilization (thesis Table 5.2) and regions", (
        ("average CPU utilization", "avg_cpu_util", _pct),
        ("average memory utilization", "avg_memory_util", _pct),
        ("average CPU utilization, hosts with tasks", "avg_cpu_util_busy", _pct),
        ("average memory utilization, hosts with tasks", "avg_memory_util_busy", _pct),
        ("CPU booked / capacity", "avg_cpu_allocated", _pct),
        ("memory booked / capacity", "avg_memory_allocated", _pct),
        ("overbooking factor, hosts with tasks", "avg_overbooking_busy", _f(3)),
        ("host-time in LEE (U < 50%)", "lee_share", _pct),
        ("host-time in DEE", "dee_share", _pct),
        ("host-time in EED (U > 85%)", "eed_share", _pct),
        ("host-time empty", "empty_share", _pct),
        ("hosts that could be off (mean)", "hosts_switchable_off_mean", _f(2)),
        ("hosts never used", "hosts_never_used", _int),
    )),
    ("Energy (DESIGN 7.4)", (
        ("energy, all hosts on (kWh)", "energy_kwh", _f(3)),
        ("energy, empty hosts off (kWh)", "energy_kwh_switch_off", _f(3)),
        ("average power, all on (W)", "avg_power_w", _f(1)),
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
        ("kills / successful allocations", "kills_share", _pct),
        ("victims (distinct tasks killed)", "victims", _int),
        ("victims never rescheduled", "victims_lost", _int),
        ("victims never rescheduled / victims", "victims_lost_share", _pct),
        ("of those, still waiting for a place at the end", "victims_waiting_at_end", _int),
        ("reschedule attempts", "reschedule_attempts", _int),
        ("reschedules placed", "reschedules_placed", _int),
        ("out-of-memory kills", "oom_kills", _int),
        ("tasks failed", "tasks_failed", _int),
    )),
)


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
    first = results[0]
    trace = first.trace
    if trace:
        parts.append(
            f"Trace: source `{trace.get('source')}`, seed {trace.get('seed')}, "
            f"{trace.get('hosts')} hosts, {trace.get('duration_s')} s. "
            f"Run: {first.t_end_s - first.t_start_s:g} s. "
            f"Energy model: `{first.energy_model.get('table', 'per host')}` + "
            f"{first.energy_model.get('memory_w_per_gib')} W per GiB in use. "
            f"Regions: LEE < {first.region_bounds[0]:g} <= DEE <= {first.region_bounds[1]:g} "
            "< EED of U = max(cpu, memory)."
        )
        parts.append("")
    for title, rows in _SECTIONS:
        parts.append(f"## {title}")
        parts.append("")
        body = [[label, *(fmt(m.get(key)) for m in metrics)] for label, key, fmt in rows]
        parts.append(_table(["", *names], body))
        parts.append("")

    parts.append("## Scheduling delay per 5-minute window (ms: mean / p50 / p90 / p99)")
    parts.append("")
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

    parts.append("## Service response times by workload and rate (ms: mean / p50 / p75)")
    parts.append("")
    keys = sorted({k for r in results for k in r.response_ms}, key=_response_sort_key)
    if keys:
        parts.append(_table(
            ["workload-rate", *names],
            [[k, *(_stats_cell(r.response_ms.get(k), ("mean", "p50", "p75")) for r in results)]
             for k in keys],
        ))
    else:
        parts.append("No service response times were recorded.")
    parts.append("")

    parts.append("## Job makespans by kind (s: mean / p50 / p90 / p99)")
    parts.append("")
    kinds = sorted({k for r in results for k in r.makespan_s})
    if kinds:
        parts.append(_table(
            ["kind", *names],
            [[k, *(_stats_cell(r.makespan_s.get(k)) for r in results)] for k in kinds],
        ))
    else:
        parts.append("No job finished.")
    parts.append("")

    parts.append("## Placements per pass and allocations per class")
    parts.append("")
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

    if plots:
        parts.append("## Plots")
        parts.append("")
        parts += [f"![{Path(p).stem}]({p})" for p in plots]
        parts.append("")
    return "\n".join(parts)


def _response_sort_key(key: str) -> tuple[str, int]:
    workload, _, rate = key.rpartition("-")
    return (workload, int(rate) if rate.isdigit() else 0)


# ------------------------------------------------------------------ plots


def _time_axis(result: PolicyResult) -> tuple[float, str]:
    """Divisor and label for the x axis: minutes up to 6 h, hours beyond."""
    duration = result.t_end_s - result.t_start_s
    return (60.0, "time (min)") if duration <= 6 * 3600 else (3600.0, "time (h)")


def _bar_labels(ax: Axes, bars: Any, texts: Sequence[str]) -> None:
    for bar, text in zip(bars, texts, strict=False):
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 2),
                    textcoords="offset points")


def _plot_allocations(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    names = [r.policy for r in results]
    ok = [r.metrics.successful for r in results]
    failed = [r.metrics.failed for r in results]
    x = list(range(len(names)))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(names) + 2), 4))
    width = 0.38
    bars_ok = ax.bar([i - width / 2 for i in x], ok, width, label="successful", color="#2ca02c")
    bars_failed = ax.bar([i + width / 2 for i in x], failed, width, label="failed",
                         color="#d62728")
    _bar_labels(ax, bars_ok, [f"{v}\n{_pct(r.metrics.success_rate)}"
                              for v, r in zip(ok, results, strict=True)])
    _bar_labels(ax, bars_failed, [str(v) for v in failed])
    ax.set_xticks(x, names)
    ax.set_ylabel("allocations")
    ax.set_title("Successful and failed allocations (success rate)")
    ax.set_ylim(0, max([*ok, *failed, 1]) * 1.25)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _plot_host_util(results: Sequence[PolicyResult], column: str, label: str,
                    path: Path) -> bool:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(11, 2.6 * len(results) + 0.6),
                             sharex=True, squeeze=False)
    xlabel = ""
    for ax, result in zip(axes[:, 0], results, strict=True):
        divisor, xlabel = _time_axis(result)
        series = result.series
        times = [(t - result.t_start_s) / divisor for t in series.times_s()]
        rows = series.values[column]
        if len(rows) <= MAX_HOST_LINES:
            for host_id, row in zip(series.host_ids, rows, strict=True):
                ax.plot(times, [v * 100 for v in row], linewidth=1.0, label=host_id)
            if rows:
                ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        else:
            low, mid, high = [], [], []
            for i in range(len(times)):
                ordered = sorted(r[i] for r in rows)
                low.append(_q(ordered, 0.10) * 100)
                mid.append(_q(ordered, 0.50) * 100)
                high.append(_q(ordered, 0.90) * 100)
            ax.fill_between(times, low, high, alpha=0.3, label="hosts p10-p90")
            ax.plot(times, mid, linewidth=1.2, label="median host")
            ax.plot(times, [v * 100 for v in series.mean_over_hosts(column)], linewidth=1.0,
                    linestyle="--", label="mean")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        lee, eed = result.region_bounds
        ax.axhline(lee * 100, color="grey", linewidth=0.7, linestyle=":")
        ax.axhline(eed * 100, color="grey", linewidth=0.7, linestyle=":")
        ax.set_ylim(0, 105)
        ax.set_ylabel(f"{label} (%)")
        ax.set_title(f"{result.policy} - hosts {label} utilization", fontsize=10)
    axes[-1, 0].set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _q(ordered: Sequence[float], q: float) -> float:
    return percentile(ordered, q) if ordered else 0.0


def _plot_avg_util(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, column, label in ((axes[0], "cpu_util", "CPU"), (axes[1], "memory_util", "memory")):
        for result in results:
            divisor, xlabel = _time_axis(result)
            times = [(t - result.t_start_s) / divisor for t in result.series.times_s()]
            mean = result.metrics.avg_cpu_util if column == "cpu_util" else (
                result.metrics.avg_memory_util)
            ax.plot(times, [v * 100 for v in result.series.mean_over_hosts(column)],
                    linewidth=1.2, label=f"{result.policy} (mean {mean * 100:.1f}%)")
            ax.set_xlabel(xlabel)
        ax.set_title(f"Average hosts {label} utilization")
        ax.set_ylim(0, 105)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("utilization (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _plot_regions(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    names = [r.policy for r in results]
    fig, ax = plt.subplots(figsize=(9, 0.7 * len(names) + 1.8))
    left = [0.0] * len(names)
    colors = {"LEE": "#9ecae1", "DEE": "#31a354", "EED": "#e6550d"}
    for region, attr in (("LEE", "lee_share"), ("DEE", "dee_share"), ("EED", "eed_share")):
        shares = [getattr(r.metrics, attr) * 100 for r in results]
        bars = ax.barh(names, shares, left=left, color=colors[region], label=region)
        for bar, share in zip(bars, shares, strict=True):
            if share >= 6:
                ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2,
                        f"{share:.0f}%", ha="center", va="center", fontsize=8)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    for i, result in enumerate(results):
        ax.text(101, i, f"empty {result.metrics.empty_share * 100:.0f}%", va="center",
                fontsize=8)
    ax.set_xlim(0, 118)
    ax.set_xlabel("share of host-time (%)")
    ax.set_title("Time per host in LEE / DEE / EED")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _plot_delays(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    if not any(w.delay_ms.count for r in results for w in r.delay_windows):
        return False
    fig, ax = plt.subplots(figsize=(11, 4))
    for result in results:
        divisor, xlabel = _time_axis(result)
        windows = [w for w in result.delay_windows if w.delay_ms.count]
        mids = [((w.start_s + w.end_s) / 2 - result.t_start_s) / divisor for w in windows]
        p50 = [_positive(w.delay_ms.p50) for w in windows]
        p99 = [_positive(w.delay_ms.p99) for w in windows]
        line = ax.plot(mids, p50, marker="o", markersize=3, label=f"{result.policy} p50")[0]
        ax.plot(mids, p99, marker="^", markersize=3, linestyle="--", color=line.get_color(),
                label=f"{result.policy} p99")
        ax.set_xlabel(xlabel)
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("scheduling delay (ms, log)")
    ax.set_title("Scheduling delay per 5-minute window (p50 solid, p99 dashed)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _positive(value: float | None) -> float:
    return max(value or 0.0, 1e-3)


def _grouped_bars(ax: Axes, groups: Sequence[str], results: Sequence[PolicyResult],
                  values: Callable[[PolicyResult, str], float | None],
                  label_format: str | None = None) -> None:
    width = 0.8 / max(1, len(results))
    top = 0.0
    for j, result in enumerate(results):
        xs = [i + (j - (len(results) - 1) / 2) * width for i in range(len(groups))]
        heights = [values(result, g) or 0.0 for g in groups]
        top = max([top, *heights])
        bars = ax.bar(xs, heights, width, label=result.policy)
        if label_format is not None:
            _bar_labels(ax, bars, [format(h, label_format) for h in heights])
    ax.set_xticks(range(len(groups)), groups)
    if label_format is not None:
        ax.set_ylim(0, max(top, 1.0) * 1.15)


def _plot_makespans(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    if not any(r.metrics.jobs_finished for r in results):
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    stats_names = ["mean", "p50", "p90", "p99"]

    def makespan(result: PolicyResult, stat: str) -> float | None:
        value: float | None = getattr(result.makespan_s.get("jobs", Stats(0)), stat)
        return value

    def slowdown(result: PolicyResult, stat: str) -> float | None:
        value: float | None = getattr(result.slowdown.get("jobs", Stats(0)), stat)
        return value

    _grouped_bars(axes[0], stats_names, results, makespan)
    axes[0].set_ylabel("job makespan (s)")
    axes[0].set_title("Job makespans")
    axes[0].legend(fontsize=8)
    _grouped_bars(axes[1], stats_names, results, slowdown)
    axes[1].axhline(1.0, color="grey", linewidth=0.7, linestyle=":")
    axes[1].set_ylabel("makespan / expected")
    axes[1].set_title("Job slowdown")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _plot_responses(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    keys = sorted({k for r in results for k in r.response_ms}, key=_response_sort_key)
    if not keys:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(max(10.0, 1.2 * len(keys) + 6), 4))

    def mean(result: PolicyResult, key: str) -> float | None:
        return result.response_ms.get(key, Stats(0)).mean

    def p75(result: PolicyResult, key: str) -> float | None:
        return result.response_ms.get(key, Stats(0)).p75

    for ax, getter, title in ((axes[0], mean, "mean"), (axes[1], p75, "75th percentile")):
        _grouped_bars(ax, keys, results, getter)
        ax.set_ylabel("response time (ms)")
        ax.set_title(f"Service response times, {title}")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _plot_energy(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    names = [r.policy for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x = list(range(len(names)))
    width = 0.38
    on = [r.metrics.energy_kwh for r in results]
    off = [r.metrics.energy_kwh_switch_off for r in results]
    bars_on = axes[0].bar([i - width / 2 for i in x], on, width, label="all hosts on")
    bars_off = axes[0].bar([i + width / 2 for i in x], off, width, label="empty hosts off")
    _bar_labels(axes[0], bars_on, [f"{v:.3f}" for v in on])
    _bar_labels(axes[0], bars_off, [f"{v:.3f}" for v in off])
    axes[0].set_xticks(x, names)
    axes[0].set_ylabel("energy (kWh)")
    axes[0].set_ylim(0, max([*on, *off, 1e-9]) * 1.2)
    axes[0].set_title("Estimated energy")
    axes[0].legend(fontsize=8)
    per_on = [r.metrics.successful_per_kwh or 0.0 for r in results]
    per_off = [r.metrics.successful_per_kwh_switch_off or 0.0 for r in results]
    bars_on = axes[1].bar([i - width / 2 for i in x], per_on, width, label="all hosts on")
    bars_off = axes[1].bar([i + width / 2 for i in x], per_off, width, label="empty hosts off")
    _bar_labels(axes[1], bars_on, [f"{v:.0f}" for v in per_on])
    _bar_labels(axes[1], bars_off, [f"{v:.0f}" for v in per_off])
    axes[1].set_xticks(x, names)
    axes[1].set_ylabel("successful allocations per kWh")
    axes[1].set_ylim(0, max([*per_on, *per_off, 1e-9]) * 1.2)
    axes[1].set_title("Work per kWh")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


def _plot_cuts_kills(results: Sequence[PolicyResult], path: Path) -> bool:
    import matplotlib.pyplot as plt

    groups = {"cuts": "cuts", "kills": "kills", "victims lost": "victims_lost",
              "OOM kills": "oom_kills"}
    if not any(getattr(r.metrics, attr) for r in results for attr in groups.values()):
        return False
    fig, ax = plt.subplots(figsize=(9, 4))

    def count(result: PolicyResult, label: str) -> float | None:
        return float(getattr(result.metrics, groups[label]))

    _grouped_bars(ax, list(groups), results, count, label_format=",.0f")
    ax.set_ylabel("count")
    ax.set_title("Cuts, kills, victims never rescheduled, out-of-memory kills")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return True


@dataclass(frozen=True, slots=True)
class PlotSpec:
    file: str
    description: str
    draw: Callable[[Sequence[PolicyResult], Path], bool]


PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("allocations.png", "successful / failed allocations (Table 5.1)", _plot_allocations),
    PlotSpec("cpu_util_hosts.png", "CPU utilization per host over time (Fig. 5.1-5.3)",
             lambda rs, p: _plot_host_util(rs, "cpu_util", "CPU", p)),
    PlotSpec("memory_util_hosts.png", "memory utilization per host over time (Fig. 5.5-5.7)",
             lambda rs, p: _plot_host_util(rs, "memory_util", "memory", p)),
    PlotSpec("avg_util.png", "average CPU and memory utilization (Fig. 5.4, 5.8)",
             _plot_avg_util),
    PlotSpec("regions.png", "share of host-time in LEE / DEE / EED", _plot_regions),
    PlotSpec("scheduling_delay.png", "scheduling delay per 5-minute window (Table 5.3)",
             _plot_delays),
    PlotSpec("makespans.png", "job makespans and slowdown", _plot_makespans),
    PlotSpec("response_times.png", "service response times per rate (Table 5.4)",
             _plot_responses),
    PlotSpec("energy.png", "energy and successful allocations per kWh", _plot_energy),
    PlotSpec("cuts_kills.png", "cuts, kills, victims lost, OOM kills", _plot_cuts_kills),
)


def write_plots(results: Sequence[PolicyResult], out_dir: Path) -> list[str]:
    """Draw every plot that has data; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    written = []
    for spec in PLOTS:
        if spec.draw(results, out_dir / spec.file):
            written.append(spec.file)
    return written


# ------------------------------------------------------------------ the report


@dataclass(frozen=True, slots=True)
class ReportFiles:
    summary_json: Path
    summary_md: Path
    plots: tuple[Path, ...]


def write_report(directory: str | Path, *, plots: bool = True) -> ReportFiles:
    """Read every policy under ``directory``; write summary.json, summary.md and the plots."""
    root = Path(directory)
    results = load_results(root)
    plot_files = write_plots(results, root) if plots else []
    summary_json = root / "summary.json"
    _write_json(summary_json, _json_safe(build_summary(results, plot_files)))
    summary_md = root / "summary.md"
    write_text(summary_md, render_markdown(results, plot_files))
    return ReportFiles(summary_json, summary_md, tuple(root / p for p in plot_files))


def _json_safe(obj: Any) -> Any:
    """Non-finite floats (which JSON cannot hold) become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    return obj
