"""The report's PNG plots, modelled on the thesis figures 5.1-5.8 (see :data:`PLOTS`).

:func:`write_plots` draws every plot that has data into the report's directory (matplotlib, the
``bench`` extra, is imported only when plots are drawn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from measure.results import PolicyResult
from measure.stats import Stats, percentile
from measure.summary_md import pct, response_sort_key

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PLOT_DPI = 110
MAX_HOST_LINES = 12  # more hosts than this: plot a band instead of one line per host


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
    _bar_labels(ax, bars_ok, [f"{v}\n{pct(r.metrics.success_rate)}"
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

    keys = sorted({k for r in results for k in r.response_ms}, key=response_sort_key)
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


def _plot_availability(results: Sequence[PolicyResult], path: Path) -> bool:
    """Availability per class (DESIGN 3.10): a box per policy, the class's SLO dashed."""
    import matplotlib.pyplot as plt

    from domain.classes import CLASSES

    shown = [r for r in results if r.request_levels]
    if not shown:
        return False
    fig, axes = plt.subplots(1, len(CLASSES), figsize=(3.2 * len(CLASSES) + 1.0,
                                                        3.6 + 0.15 * len(shown)),
                             sharey=True, squeeze=False)
    for ax, cls in zip(axes[0], CLASSES, strict=True):
        samples = [[lv.availability * 100 for lv in r.request_levels if lv.cls == cls]
                   for r in shown]
        names = [r.policy for r in shown]
        ax.boxplot([values or [float("nan")] for values in samples],
                   whis=(0, 100), showmeans=True, widths=0.6)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=45, ha="right", fontsize=8)
        objectives = {r.service_levels.slo.objective(cls) for r in shown
                      if r.service_levels is not None}
        for objective in objectives:
            ax.axhline(objective * 100, color="#d62728", linewidth=0.9, linestyle="--")
        counts = ", ".join(str(len(v)) for v in samples)
        ax.set_title(f"class {cls} (n = {counts})", fontsize=9)
        ax.set_ylim(-3, 103)
    axes[0, 0].set_ylabel("availability (%)")
    fig.suptitle("Availability per request by class (box: quartiles, whiskers: min-max, "
                 "triangle: mean; dashed: SLO)", fontsize=10)
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
    PlotSpec("availability.png", "availability per request by class, against the SLO "
             "(DESIGN 3.10)", _plot_availability),
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
