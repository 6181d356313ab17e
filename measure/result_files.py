"""Result files of one policy run: written by :func:`save_result`, read back by :func:`load_result`.

The simulator and the live replay call :func:`save_result` with what
:meth:`measure.recorder.MetricsRecorder.finish` returned::

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
    DIR/<policy>/requests.jsonl   one line per request, in submission order (DESIGN 3.10):
                                  {"id", "class", "type", "availability", "met_slo",
                                  "preemptions", "status"} (measure.service_levels); written
                                  when the run kept them
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.errors import ValidationError
from measure.request_levels import RequestLevels
from measure.results import (
    SERIES_COLUMNS,
    WINDOW_COLUMNS,
    HostSeries,
    PolicyResult,
    WindowStats,
)
from measure.service_levels import RequestLevel
from measure.stats import Stats
from workloads.outfiles import open_text, out_directory, write_text

RESULT_FILE = "result.json"
SERIES_FILE = "host_series.csv"
WINDOWS_FILE = "windows.csv"
REQUESTS_FILE = "requests.jsonl"
_POLICY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


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
    if result.request_levels:
        with open_text(directory / REQUESTS_FILE) as handle:
            for level in result.request_levels:
                handle.write(json.dumps(level.to_json(), separators=(",", ":")) + "\n")
    write_json(directory / RESULT_FILE, json_safe(result.to_json()))
    return directory


def read_request_levels(path: Path) -> RequestLevels:
    """The lines of a ``requests.jsonl``; none when there is no such file."""
    levels = RequestLevels()
    if not path.exists():
        return levels
    try:
        with path.open(encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    raise ValidationError(f"{path} line {line_number}", str(exc)) from None
                if line_number == 1 and isinstance(obj, dict) and "history" in obj:
                    return levels  # an older live replay's request records, not service levels
                if not isinstance(obj, dict):
                    raise ValidationError(f"{path} line {line_number}", "not a JSON object")
                try:
                    levels.append(RequestLevel.from_json(obj))
                except ValidationError as exc:
                    raise ValidationError(f"{path} line {line_number}", exc.message) from None
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read: {exc.strerror or exc}") from None
    return levels


def _num(value: float) -> str:
    return f"{value:.6g}"


def write_json(path: Path, obj: Any) -> None:
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
        return PolicyResult.from_json(obj, series, windows,
                                      read_request_levels(directory / REQUESTS_FILE))
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



def json_safe(obj: Any) -> Any:
    """Non-finite floats (which JSON cannot hold) become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj
