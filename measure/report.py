"""The side-by-side report of policy runs (summary JSON, Markdown, PNG plots).

Files of one policy run are written and read by :mod:`measure.result_files`.

``greenswarm bench report DIR`` (:func:`write_report`) reads every ``DIR/*/result.json`` and
writes:

* ``DIR/summary.json`` (:func:`build_summary`): ``{"format": "greenswarm-summary", "version":
  1, "policies": {name: {...every PolicyMetrics key (``slo_fulfilment``, ``preemptions_mean``,
  ``preemptions_max``, ``work_lost_cpu_s``, ``work_lost_share``, ``restores``,
  ``slo_met_per_kwh`` among them)..., the service levels per class (DESIGN 7.3:
  ``slo_fulfilment_by_class``, ``availability_by_class`` ({"min", "p10", "median", "mean"}),
  ``qos_deficit_by_class``, ``gini_by_class``, keys "1".."4"; null for a run recorded before
  them) with the ``slo`` and ``allocation_s`` they were measured with,
  "windows_csv": "<policy>/windows.csv",
  "delay_windows": count, "response_ms": {...}, "response_ms_by_rate": {...}, "makespan_s":
  {...}, "slowdown": {...}, "passes": {...}, "by_class": {...}, "hosts": [...], "trace": {...},
  "energy_model": {...}}}, "plots": [...]}``;
* ``DIR/summary.md``: Markdown tables, one column per policy (:mod:`measure.summary_md`);
* PNG plots modelled on the thesis figures 5.1-5.8 (:mod:`measure.plots`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure.plots import write_plots
from measure.result_files import WINDOWS_FILE, json_safe, load_results, write_json
from measure.results import PolicyResult
from measure.service_levels import ServiceSummary
from measure.summary_md import render_markdown
from workloads.outfiles import write_text

SUMMARY_FORMAT = "greenswarm-summary"


# ------------------------------------------------------------------ summary.json


def policy_summary(result: PolicyResult) -> dict[str, Any]:
    """One policy's object in summary.json: the flat metrics plus the nested details."""
    summary: dict[str, Any] = {"policy": result.policy}
    summary.update(result.metrics.to_json())
    summary.update(service_levels_json(result.service_levels))
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


def service_levels_json(service: ServiceSummary | None) -> dict[str, Any]:
    """The per-class keys of summary.json; every one null for a run without them."""
    if service is not None:
        return service.to_json()
    return {key: None for key in ("slo", "allocation_s", "requests_by_class",
                                  "slo_met_by_class", "slo_fulfilment_by_class",
                                  "availability_by_class", "qos_deficit_by_class",
                                  "gini_by_class", "delivered_cpu_s")}


def build_summary(results: Sequence[PolicyResult], plots: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "format": SUMMARY_FORMAT,
        "version": 1,
        "policies": {r.policy: policy_summary(r) for r in results},
        "plots": list(plots),
    }



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
    write_json(summary_json, json_safe(build_summary(results, plot_files)))
    summary_md = root / "summary.md"
    write_text(summary_md, render_markdown(results, plot_files))
    return ReportFiles(summary_json, summary_md, tuple(root / p for p in plot_files))
