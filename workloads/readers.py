"""Adapters from public cluster traces to the benchmark trace format (:mod:`workloads.trace`).

Both adapters read CSV (plain or ``.gz``), keep only what a placement benchmark needs (arrival
time, size, class, type, how long the task ran) and write ``workload: generic``,
``request_rate: null``. Every bad row is a :class:`~workloads.trace.TraceError` naming the file,
the line and the column. Times are rebased so the first arrival is at ``t = 0``; the header's
``duration_s`` is the arrival window (the last arrival, or ``--duration-s`` when given, which
also drops later arrivals).

Google cluster data 2011 (clusterdata-2011-2), ``task_events/part-*.csv.gz``
----------------------------------------------------------------------------
No header line; 13 columns: timestamp (us), missing info, job ID, task index, machine ID,
event type, user, scheduling class, priority, CPU request, memory request, disk request,
different-machine restriction. Event types: 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH,
5 KILL, 6 LOST, 7 UPDATE_PENDING, 8 UPDATE_RUNNING. Timestamp 0 means "before the trace
window", 2^63 - 1 "after it" (such events are ignored). Several part files are read in order as
one stream.

* one request per task (job ID, task index), id ``g<job>-<index>``, arriving at the task's
  first event (normally its first SUBMIT);
* size: the first non-empty CPU and memory request of the task (SUBMIT, else an UPDATE),
  which the trace normalises to the largest machine: ``cpu_shares = round(cpu x reference
  shares)`` (at least 2), ``memory = round(memory x reference bytes)`` (at least 6 MiB,
  Docker's smallest memory limit); the reference machine is the largest host of ``--hosts``;
* makespan: the length of the task's last run, from its last SCHEDULE to the EVICT, FAIL,
  FINISH, KILL or LOST that ended it (a run restarts from scratch after an eviction); a task
  still running when the data ends runs until the last timestamp of the data (censored,
  counted in the notes); a task that never ran has no makespan and is left out (counted);
  at least 1 s;
* class, from the priority (0-11) in the bands of Reiss et al., "Heterogeneity and dynamicity
  of clouds at scale" (2012): production 9-11 -> class 1 (never overbooked); middle 2-8 ->
  class 2 when latency-sensitive (scheduling class 2-3), else class 3; free 0-1 -> class 4;
* type: scheduling class 2-3 (latency-sensitive, serving) -> ``service``; 0-1 -> ``job``.

Alibaba ``openb_pod_list_*.csv`` (clusterdata cluster-trace-gpu-v2023)
--------------------------------------------------------------------
A header line; columns used: a name (``name``, or ``pod_name``, ``pod_id``, ``id``),
``cpu_milli``, ``memory_mib``, ``qos``, ``creation_time``, ``deletion_time`` (seconds) and,
when present, ``scheduled_time`` (seconds, empty for a pod that never ran). Other columns
(``num_gpu``, ``gpu_milli``, ``gpu_spec``, ``pod_phase``) are ignored: GPUs are out of scope.

* one request per row, id = the name, arriving at ``creation_time``;
* size: ``cpu_shares = round(cpu_milli x 1024 / 1000 x scale)`` (at least 2),
  ``memory = round(memory_mib x MiB x scale)`` (at least 6 MiB); ``scale`` defaults to 1
  (``--resource-scale`` shrinks the trace's machines-sized pods onto small hosts);
* makespan: ``deletion_time - scheduled_time`` (``creation_time`` when never scheduled: in the
  replay it may run, until the client deletes it), at least 1 s; rows without a deletion time
  are left out (counted);
* class from ``qos``: Guaranteed, LSR, LSE (reserved or exclusive cores) -> 1; LS (latency
  sensitive) -> 2; Burstable -> 3; BE (best effort) -> 4; case-insensitive, anything else is
  an error naming the value;
* type: Guaranteed, LSR, LSE, LS -> ``service``; Burstable, BE -> ``job``.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path
from typing import IO

from domain.errors import ValidationError
from domain.model import TaskType
from workloads.cluster import MIB
from workloads.trace import (
    MIN_CPU_SHARES,
    HostSpec,
    Trace,
    TraceError,
    TraceHeader,
    TraceRequest,
    TraceSource,
    Workload,
)

DOCKER_MIN_MEMORY_BYTES = 6 * MIB
MIN_MAKESPAN_S = 1.0
_AFTER_WINDOW_US = 2**63 - 1

GOOGLE_TASK_EVENT_COLUMNS: tuple[str, ...] = (
    "timestamp",
    "missing_info",
    "job_id",
    "task_index",
    "machine_id",
    "event_type",
    "user",
    "scheduling_class",
    "priority",
    "cpu_request",
    "memory_request",
    "disk_request",
    "different_machine",
)


class GoogleEvent(IntEnum):
    SUBMIT = 0
    SCHEDULE = 1
    EVICT = 2
    FAIL = 3
    FINISH = 4
    KILL = 5
    LOST = 6
    UPDATE_PENDING = 7
    UPDATE_RUNNING = 8


_RUN_ENDS = frozenset(
    {GoogleEvent.EVICT, GoogleEvent.FAIL, GoogleEvent.FINISH, GoogleEvent.KILL, GoogleEvent.LOST}
)


def google_class(priority: int, scheduling_class: int) -> int:
    """Overbooking class of a Google 2011 task (see the module docstring)."""
    if priority >= 9:
        return 1
    if priority >= 2:
        return 2 if scheduling_class >= 2 else 3
    return 4


def google_type(scheduling_class: int) -> TaskType:
    return TaskType.SERVICE if scheduling_class >= 2 else TaskType.JOB


ALIBABA_QOS: dict[str, tuple[int, TaskType]] = {
    "guaranteed": (1, TaskType.SERVICE),
    "lsr": (1, TaskType.SERVICE),
    "lse": (1, TaskType.SERVICE),
    "ls": (2, TaskType.SERVICE),
    "burstable": (3, TaskType.JOB),
    "be": (4, TaskType.JOB),
}
ALIBABA_NAME_COLUMNS = ("name", "pod_name", "pod_id", "id")


@dataclass(frozen=True, slots=True)
class ConversionStats:
    """What a conversion kept and left out; also written into the header's notes."""

    rows: int
    requests: int
    skipped_never_ran: int = 0
    skipped_no_end: int = 0
    censored_still_running: int = 0
    missing_size: int = 0
    outside_window: int = 0
    over_limit: int = 0


@dataclass(frozen=True, slots=True)
class Conversion:
    trace: Trace
    stats: ConversionStats


def reference_host(hosts: Sequence[HostSpec]) -> HostSpec:
    """The largest host (by CPU, then memory): Google's sizes are fractions of it."""
    if not hosts:
        raise ValidationError("hosts", "need at least one host")
    return max(hosts, key=lambda h: (h.cpu_capacity_shares, h.memory_capacity_bytes))


# ------------------------------------------------------------------ CSV plumbing


def _open_csv(path: Path) -> IO[str]:
    try:
        if path.name.endswith(".gz"):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
        return open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise TraceError("file", f"cannot open: {exc.strerror or exc}", path=str(path)) from None


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, row) of a CSV file; read errors become TraceError."""
    with _open_csv(path) as handle:
        reader = csv.reader(handle)
        try:
            for row in reader:
                if row and any(cell.strip() for cell in row):
                    yield reader.line_num, row
        except (csv.Error, OSError, UnicodeDecodeError, EOFError) as exc:
            raise TraceError("file", f"cannot read CSV: {exc}", line=reader.line_num + 1,
                             path=str(path)) from None


def _int(text: str, column: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValidationError(column, f"must be an integer, got {text!r}") from None


def _optional_float(text: str, column: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValidationError(column, f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValidationError(column, f"must be a finite number >= 0, got {text!r}")
    return value


def _window(
    requests: list[TraceRequest], duration_s: float | None, limit: int | None
) -> tuple[list[TraceRequest], float, int, int]:
    """Sort, cut to the window and the limit; returns (requests, duration, outside, over)."""
    requests.sort(key=lambda r: r.t_s)  # stable: ties keep input order
    outside = 0
    if duration_s is not None:
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise ValidationError("duration_s", f"must be > 0, got {duration_s}")
        kept = [r for r in requests if r.t_s <= duration_s]
        outside = len(requests) - len(kept)
        requests = kept
    over = 0
    if limit is not None:
        if limit < 1:
            raise ValidationError("limit", f"must be >= 1, got {limit}")
        over = max(0, len(requests) - limit)
        requests = requests[:limit]
    if duration_s is None:
        duration_s = max(1.0, requests[-1].t_s if requests else 1.0)
    return requests, duration_s, outside, over


def _notes(kind: str, stats: ConversionStats, extra: str) -> str:
    return (
        f"converted from {kind}: {stats.requests} requests of {stats.rows} rows; left out: "
        f"{stats.skipped_never_ran} never ran, {stats.skipped_no_end} without an end, "
        f"{stats.outside_window} after the window, {stats.over_limit} over the limit; "
        f"{stats.censored_still_running} still running at the end of the data (censored); "
        f"{stats.missing_size} with a missing size (set to the minimum). {extra}"
    )


# ------------------------------------------------------------------ Google 2011


@dataclass(slots=True)
class _GoogleTask:
    first_us: int
    order: int
    cpu: float | None = None
    memory: float | None = None
    priority: int = 0
    scheduling_class: int = 0
    run_start_us: int | None = None
    last_run_us: int | None = None  # length of the last finished run


def convert_google2011(
    paths: Sequence[str | Path],
    hosts: Sequence[HostSpec],
    *,
    duration_s: float | None = None,
    limit: int | None = None,
) -> Conversion:
    """Google 2011 ``task_events`` files -> a trace (mapping in the module docstring)."""
    reference = reference_host(hosts)
    tasks: dict[tuple[str, str], _GoogleTask] = {}
    rows = 0
    first_positive_us: int | None = None
    last_us = 0
    for raw_path in paths:
        path = Path(raw_path)
        for line, row in _rows(path):
            rows += 1
            try:
                if len(row) != len(GOOGLE_TASK_EVENT_COLUMNS):
                    raise ValidationError(
                        "columns",
                        f"expected {len(GOOGLE_TASK_EVENT_COLUMNS)} columns "
                        f"({', '.join(GOOGLE_TASK_EVENT_COLUMNS)}), got {len(row)}",
                    )
                timestamp = _int(row[0], "timestamp")
                if timestamp < 0:
                    raise ValidationError("timestamp", f"must be >= 0, got {timestamp}")
                if timestamp >= _AFTER_WINDOW_US:
                    continue
                code = _int(row[5], "event_type")
                try:
                    event = GoogleEvent(code)
                except ValueError:
                    raise ValidationError("event_type", f"must be 0..8, got {code}") from None
                job_id = row[2].strip()
                task_index = row[3].strip()
                if not job_id or not task_index:
                    raise ValidationError("job_id", "job ID and task index are required")
                cpu = _optional_float(row[9], "cpu_request")
                memory = _optional_float(row[10], "memory_request")
                priority = _int(row[8], "priority") if row[8].strip() else None
                scheduling_class = _int(row[7], "scheduling_class") if row[7].strip() else None
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=line, path=str(path)) from None
            if timestamp > 0 and (first_positive_us is None or timestamp < first_positive_us):
                first_positive_us = timestamp
            last_us = max(last_us, timestamp)
            key = (job_id, task_index)
            task = tasks.get(key)
            if task is None:
                task = _GoogleTask(first_us=timestamp, order=len(tasks))
                tasks[key] = task
            if task.cpu is None and cpu is not None:
                task.cpu = cpu
            if task.memory is None and memory is not None:
                task.memory = memory
            if event is GoogleEvent.SUBMIT or task.run_start_us is None:
                if priority is not None:
                    task.priority = priority
                if scheduling_class is not None:
                    task.scheduling_class = scheduling_class
            if event is GoogleEvent.SCHEDULE:
                task.run_start_us = timestamp
            elif event in _RUN_ENDS and task.run_start_us is not None:
                task.last_run_us = timestamp - task.run_start_us
                task.run_start_us = None

    origin_us = first_positive_us or 0
    requests: list[TraceRequest] = []
    never_ran = censored = missing = 0
    for (job_id, task_index), task in sorted(tasks.items(), key=lambda kv: kv[1].order):
        if task.run_start_us is not None:  # still running when the data ends
            run_us = last_us - task.run_start_us
            censored += 1
        elif task.last_run_us is not None:
            run_us = task.last_run_us
        else:
            never_ran += 1
            continue
        if task.cpu is None or task.memory is None:
            missing += 1
        cpu_shares = max(MIN_CPU_SHARES, round((task.cpu or 0.0) * reference.cpu_capacity_shares))
        memory_bytes = max(
            DOCKER_MIN_MEMORY_BYTES, round((task.memory or 0.0) * reference.memory_capacity_bytes)
        )
        requests.append(
            TraceRequest(
                t_s=max(0, task.first_us - origin_us) / 1e6,
                id=f"g{job_id}-{task_index}",
                request_class=google_class(task.priority, task.scheduling_class),
                type=google_type(task.scheduling_class),
                workload=Workload.GENERIC,
                cpu_shares=cpu_shares,
                memory_bytes=memory_bytes,
                makespan_s=max(MIN_MAKESPAN_S, run_us / 1e6),
            )
        )
    requests, window_s, outside, over = _window(requests, duration_s, limit)
    stats = ConversionStats(
        rows=rows,
        requests=len(requests),
        skipped_never_ran=never_ran,
        censored_still_running=censored,
        missing_size=missing,
        outside_window=outside,
        over_limit=over,
    )
    header = TraceHeader(
        source=TraceSource.GOOGLE2011.value,
        seed=None,
        duration_s=window_s,
        hosts=tuple(hosts),
        notes=_notes(
            "Google cluster data 2011 task_events",
            stats,
            f"Sizes relative to {reference.id} ({reference.cpu_capacity_shares} shares, "
            f"{reference.memory_capacity_bytes} bytes).",
        ),
    )
    return Conversion(Trace(header, tuple(requests)), stats)


# ------------------------------------------------------------------ Alibaba


def convert_alibaba(
    paths: Sequence[str | Path],
    hosts: Sequence[HostSpec],
    *,
    resource_scale: float = 1.0,
    duration_s: float | None = None,
    limit: int | None = None,
) -> Conversion:
    """Alibaba ``openb_pod_list`` files -> a trace (mapping in the module docstring)."""
    if not (math.isfinite(resource_scale) and resource_scale > 0):
        raise ValidationError("resource_scale", f"must be > 0, got {resource_scale}")
    pending: list[TraceRequest] = []
    rows = 0
    no_end = 0
    missing_sizes = 0
    seen: dict[str, tuple[str, int]] = {}
    for raw_path in paths:
        path = Path(raw_path)
        columns: dict[str, int] | None = None
        name_column = ""
        for line, row in _rows(path):
            if columns is None:
                columns = {name.strip().lower(): i for i, name in enumerate(row)}
                missing = [c for c in ("cpu_milli", "memory_mib", "qos", "creation_time",
                                       "deletion_time") if c not in columns]
                names = [c for c in ALIBABA_NAME_COLUMNS if c in columns]
                if missing or not names:
                    if not names:
                        missing.append("name (or " + ", ".join(ALIBABA_NAME_COLUMNS[1:]) + ")")
                    raise TraceError(
                        "columns", f"the header lacks {', '.join(missing)}; found "
                        f"{', '.join(columns) or 'nothing'}", line=line, path=str(path)
                    )
                name_column = names[0]
                continue
            rows += 1
            try:
                if len(row) != len(columns):
                    raise ValidationError(
                        "columns", f"expected {len(columns)} columns as in the header, "
                        f"got {len(row)}"
                    )
                name = row[columns[name_column]].strip()
                if not name:
                    raise ValidationError(name_column, "is empty")
                if name in seen:
                    other_path, other_line = seen[name]
                    raise ValidationError(
                        name_column, f"{name!r} also appears at {other_path} line {other_line}"
                    )
                seen[name] = (str(path), line)
                cpu_milli = _optional_float(row[columns["cpu_milli"]], "cpu_milli")
                memory_mib = _optional_float(row[columns["memory_mib"]], "memory_mib")
                qos_text = row[columns["qos"]].strip()
                if qos_text.lower() not in ALIBABA_QOS:
                    raise ValidationError(
                        "qos", f"unknown QoS {qos_text!r}; known: Guaranteed, LSR, LSE, LS, "
                        "Burstable, BE"
                    )
                request_class, task_type = ALIBABA_QOS[qos_text.lower()]
                created = _optional_float(row[columns["creation_time"]], "creation_time")
                if created is None:
                    raise ValidationError("creation_time", "is empty")
                deleted = _optional_float(row[columns["deletion_time"]], "deletion_time")
                scheduled = None
                if "scheduled_time" in columns:
                    scheduled = _optional_float(row[columns["scheduled_time"]], "scheduled_time")
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=line, path=str(path)) from None
            if deleted is None:
                no_end += 1
                continue
            start = scheduled if scheduled is not None else created
            if cpu_milli is None or memory_mib is None:
                missing_sizes += 1
            pending.append(
                TraceRequest(
                    t_s=created,  # rebased below
                    id=name,
                    request_class=request_class,
                    type=task_type,
                    workload=Workload.GENERIC,
                    cpu_shares=max(
                        MIN_CPU_SHARES, round((cpu_milli or 0.0) * 1024 / 1000 * resource_scale)
                    ),
                    memory_bytes=max(
                        DOCKER_MIN_MEMORY_BYTES, round((memory_mib or 0.0) * MIB * resource_scale)
                    ),
                    makespan_s=max(MIN_MAKESPAN_S, deleted - start),
                )
            )
        if columns is None:
            raise TraceError("header", "the file is empty; expected a CSV header line",
                             line=1, path=str(path))

    origin = min((r.t_s for r in pending), default=0.0)
    requests = [replace(r, t_s=r.t_s - origin) for r in pending]
    requests, window_s, outside, over = _window(requests, duration_s, limit)
    stats = ConversionStats(
        rows=rows,
        requests=len(requests),
        skipped_no_end=no_end,
        missing_size=missing_sizes,
        outside_window=outside,
        over_limit=over,
    )
    header = TraceHeader(
        source=TraceSource.ALIBABA.value,
        seed=None,
        duration_s=window_s,
        hosts=tuple(hosts),
        notes=_notes("Alibaba openb_pod_list", stats,
                     f"Resource scale {resource_scale:g}; GPUs ignored."),
    )
    return Conversion(Trace(header, tuple(requests)), stats)
