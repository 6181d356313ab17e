"""Adapters from public cluster traces to the benchmark trace format (:mod:`workloads.trace`).

Both adapters read CSV (plain or ``.gz``; lines starting with ``#`` are comments and skipped),
keep only what a placement benchmark needs (arrival time, size, class, type, how long the task
ran) and write ``workload: generic``, ``request_rate: null``. Every bad row is a
:class:`~workloads.trace.TraceError` naming the file, the line and the column.

Read faithfully (DESIGN 7.5): a pod or task that never ran is not a request (left out,
counted); a run still going when the data ends is censored (it runs until the data's last
timestamp; counted and said); the arrival times are the data's own clock (seconds; Google's
microseconds / 10^6), not rebased to the first arrival.

The window (``window_start_s``, ``window_end_s`` on the data's clock; default: all of it)
cuts the data: arrivals are rebased to the window's start (``t = arrival - start``); a request
that arrived before the start and is still queued or running at it arrives at ``t = 0`` with its
remaining time as makespan (counted as alive at the start); one that ended before the start is
left out, as is one arriving after the end (both counted). The header's ``duration_s`` is the
window's length (without an end: the last arrival, at least 1 s). ``limit`` keeps the first N.

What the notes say (and :class:`ConversionStats` counts): requests that never ran, censored
runs, missing or zero sizes, sizes raised to the minimum (2 shares, 6 MiB: Docker's smallest
memory limit), requests larger than every host (warned about: no host can ever place them),
requests still running at the window's end, and a warning when most requests run longer than
the whole window (a simulation of the window sees few of them end).

Google cluster data 2011 (clusterdata-2011-2), ``task_events/part-*.csv.gz``
----------------------------------------------------------------------------
No header line; 13 columns: timestamp (us), missing info, job ID, task index, machine ID,
event type, user, scheduling class, priority, CPU request, memory request, disk request,
different-machine restriction. Event types: 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH,
5 KILL, 6 LOST, 7 UPDATE_PENDING, 8 UPDATE_RUNNING. Timestamp 0 means "before the trace
window" (such a task arrives at ``t = 0``), 2^63 - 1 "after it" (such events are ignored).
Several part files are read in order as one stream.

* one request per task (job ID, task index), id ``g<job>-<index>``, arriving at the task's
  first event (normally its first SUBMIT), ``t = timestamp / 10^6``;
* size: the first non-empty CPU and memory request of the task (SUBMIT, else an UPDATE),
  which the trace normalises to the largest machine: ``cpu_shares = round(cpu x reference
  shares)`` (at least 2), ``memory = round(memory x reference bytes)`` (at least 6 MiB);
  the reference machine is the largest host of the cluster;
* makespan: the length of the task's last run, from its last SCHEDULE to the EVICT, FAIL,
  FINISH, KILL or LOST that ended it (a run restarts from scratch after an eviction); a task
  still running when the data ends is censored (until the last timestamp of the data); a task
  that never ran is left out; at least 1 s;
* class, from the priority (0-11) in the bands of Reiss et al., "Heterogeneity and dynamicity
  of clouds at scale" (2012): production 9-11 -> class 1 (never overbooked); middle 2-8 ->
  class 2 when latency-sensitive (scheduling class 2-3), else class 3; free 0-1 -> class 4;
* type: scheduling class 2-3 (latency-sensitive, serving) -> ``service``; 0-1 -> ``job``.

Alibaba ``openb_pod_list_*.csv`` (clusterdata cluster-trace-gpu-v2023)
--------------------------------------------------------------------
A header line; columns used: a name (``name``, or ``pod_name``, ``pod_id``, ``id``),
``cpu_milli``, ``memory_mib``, ``qos``, ``creation_time``, ``deletion_time`` (seconds) and,
when present, ``scheduled_time`` (seconds, empty for a pod that never ran), ``pod_phase``,
``num_gpu`` and ``gpu_milli``. GPUs are out of scope: pods asking for them are counted and
their GPUs ignored (``gpu_spec`` is not read).

* one request per pod that ran, id = the name, arriving at ``creation_time``; a pod without a
  ``scheduled_time`` (``pod_phase`` Pending) never ran and is left out (counted);
* size: ``cpu_shares = round(cpu_milli x 1024 / 1000 x scale)`` (at least 2),
  ``memory = round(memory_mib x MiB x scale)`` (at least 6 MiB); ``scale`` defaults to 1
  (``--resource-scale`` shrinks the trace's machines-sized pods onto small hosts);
* makespan: ``deletion_time - scheduled_time`` (``creation_time`` when the file has no
  ``scheduled_time``), at least 1 s; censored (counted) when there is no deletion time, or the
  pod is still Running at the data's last timestamp (the largest time in the files), which the
  data gives as its deletion time: it runs until that timestamp;
* class from ``qos``: Guaranteed, LSR, LSE (reserved or exclusive cores) -> 1; LS (latency
  sensitive) -> 2; Burstable -> 3; BE (best effort) -> 4; case-insensitive, anything else is
  an error naming the value;
* type: Guaranteed, LSR, LSE, LS -> ``service``; Burstable, BE -> ``job``.

Alibaba ``openb_node_list_*.csv`` (:func:`read_node_list`): the cluster the pods ran on, one
host per row (columns ``sn``, ``cpu_milli``, ``memory_mib``; ``gpu`` and ``model`` are ignored):
id = ``sn``, ``cpu_shares = round(cpu_milli x 1024 / 1000)``, ``memory = memory_mib MiB``.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
    censored_still_running: int = 0
    missing_size: int = 0  # a CPU or memory size empty or 0 (set to the minimum)
    raised_to_minimum: int = 0  # CPU or memory below the minimum, raised (missing ones too)
    before_window: int = 0  # ended before the window's start
    alive_at_start: int = 0  # arrived before the window's start, still there: arrive at it
    outside_window: int = 0  # arrived after the window's end
    over_limit: int = 0
    too_large: int = 0  # larger than every host: no host can ever place it
    ends_after_window: int = 0  # still running at the window's end
    gpu_requests: int = 0  # Alibaba pods asking for GPUs (ignored)


@dataclass(frozen=True, slots=True)
class Conversion:
    trace: Trace
    stats: ConversionStats
    warnings: tuple[str, ...] = ()  # also in the notes; the command prints them on stderr


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
    """(line number, row) of a CSV file, without blank and comment (``#``) lines; read errors
    become TraceError."""
    with _open_csv(path) as handle:
        reader = csv.reader(handle)
        try:
            for row in reader:
                if not row or not any(cell.strip() for cell in row):
                    continue
                if row[0].lstrip().startswith("#"):
                    continue
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


# ------------------------------------------------------------------ runs, window, notes


@dataclass(slots=True)
class _Run:
    """A request as the data has it, on the data's clock (seconds)."""

    arrival_s: float
    start_s: float  # when its (last) run began
    end_s: float  # when it ended (the data's last timestamp when censored)
    id: str
    request_class: int
    type: TaskType
    cpu_shares: int
    memory_bytes: int


@dataclass(slots=True)
class _Sizes:
    """Turns the data's sizes into shares and bytes, counting what was missing or raised."""

    missing: int = 0
    raised: int = 0

    def size(self, cpu_shares: float | None, memory_bytes: float | None) -> tuple[int, int]:
        if not cpu_shares or not memory_bytes:  # empty or 0
            self.missing += 1
        cpu = round(cpu_shares or 0.0)
        memory = round(memory_bytes or 0.0)
        if cpu < MIN_CPU_SHARES or memory < DOCKER_MIN_MEMORY_BYTES:
            self.raised += 1
        return max(MIN_CPU_SHARES, cpu), max(DOCKER_MIN_MEMORY_BYTES, memory)


@dataclass(frozen=True, slots=True)
class _Cut:
    requests: list[TraceRequest]
    duration_s: float
    before: int
    alive: int
    after: int
    over: int


def check_window(start_s: float, end_s: float | None) -> None:
    if not (math.isfinite(start_s) and start_s >= 0):
        raise ValidationError("window_start_s", f"must be >= 0, got {start_s}")
    if end_s is not None and not (math.isfinite(end_s) and end_s > start_s):
        raise ValidationError(
            "window_end_s", f"must be after the window's start ({start_s:g} s), got {end_s:g}"
        )


def _cut(runs: list[_Run], start_s: float, end_s: float | None,
         limit: int | None) -> _Cut:
    """Sort by arrival, cut to the window (see the module docstring) and the limit."""
    if limit is not None and limit < 1:
        raise ValidationError("limit", f"must be >= 1, got {limit}")
    runs.sort(key=lambda r: r.arrival_s)  # stable: ties keep input order
    requests: list[TraceRequest] = []
    before = alive = after = 0
    for run in runs:
        if end_s is not None and run.arrival_s > end_s:
            after += 1
            continue
        if run.arrival_s < start_s:
            if run.end_s <= start_s:
                before += 1
                continue
            alive += 1
            t_s = 0.0
            makespan_s = run.end_s - max(start_s, run.start_s)
        else:
            t_s = run.arrival_s - start_s
            makespan_s = run.end_s - run.start_s
        requests.append(
            TraceRequest(
                t_s=t_s,
                id=run.id,
                request_class=run.request_class,
                type=run.type,
                workload=Workload.GENERIC,
                cpu_shares=run.cpu_shares,
                memory_bytes=run.memory_bytes,
                makespan_s=max(MIN_MAKESPAN_S, makespan_s),
            )
        )
    over = 0
    if limit is not None:
        over = max(0, len(requests) - limit)
        requests = requests[:limit]
    if end_s is not None:
        duration_s = end_s - start_s
    else:
        duration_s = max(1.0, requests[-1].t_s if requests else 1.0)
    return _Cut(requests, duration_s, before, alive, after, over)


def _too_large(requests: Sequence[TraceRequest], hosts: Sequence[HostSpec]) -> int:
    """How many requests no host can hold (CPU and memory on the same host)."""
    shapes = {(h.cpu_capacity_shares, h.memory_capacity_bytes) for h in hosts}
    return sum(
        1 for r in requests
        if not any(r.cpu_shares <= cpu and r.memory_bytes <= memory for cpu, memory in shapes)
    )


def _finish(
    source: TraceSource, kind: str, runs: list[_Run], hosts: Sequence[HostSpec], *,
    rows: int, start_s: float, end_s: float | None, limit: int | None, data_end_s: float,
    never_ran: int, censored: int, sizes: _Sizes, gpu_requests: int = 0, extra: str = "",
) -> Conversion:
    """Window, count, warn, and build the trace (common to both readers)."""
    cut = _cut(runs, start_s, end_s, limit)
    requests = cut.requests
    too_large = _too_large(requests, hosts)
    ends_after = sum(1 for r in requests if r.t_s + r.makespan_s > cut.duration_s)
    stats = ConversionStats(
        rows=rows,
        requests=len(requests),
        skipped_never_ran=never_ran,
        censored_still_running=censored,
        missing_size=sizes.missing,
        raised_to_minimum=sizes.raised,
        before_window=cut.before,
        alive_at_start=cut.alive,
        outside_window=cut.after,
        over_limit=cut.over,
        too_large=too_large,
        ends_after_window=ends_after,
        gpu_requests=gpu_requests,
    )
    warnings: list[str] = []
    if too_large:
        warnings.append(
            f"{too_large} of {len(requests)} requests are larger than every host (CPU or "
            f"memory): no host can place them; give a cluster of larger hosts (--hosts, "
            "--nodes-file) or shrink them (--resource-scale)"
        )
    if requests:
        makespans = sorted(r.makespan_s for r in requests)
        median_s = makespans[len(makespans) // 2]
        if median_s > cut.duration_s:
            warnings.append(
                f"the window ({cut.duration_s:g} s) is shorter than most requests' makespans "
                f"(median {median_s:g} s; {ends_after} of {len(requests)} still run at its "
                "end): a simulation of the window sees few of them end; simulate longer "
                "(bench simulate --duration-s or --drain-s) or convert a longer window"
            )
    header = TraceHeader(
        source=source.value,
        seed=None,
        duration_s=cut.duration_s,
        hosts=tuple(hosts),
        notes=_notes(kind, stats, start_s, end_s, data_end_s, extra, warnings),
    )
    return Conversion(Trace(header, tuple(requests)), stats, tuple(warnings))


def _notes(
    kind: str, stats: ConversionStats, start_s: float, end_s: float | None, data_end_s: float,
    extra: str, warnings: Sequence[str],
) -> str:
    window = (f"window {start_s:.10g}-{end_s:.10g} s of the data's clock" if end_s is not None
              else f"window from {start_s:.10g} s of the data's clock to its end")
    text = (
        f"converted from {kind}: {stats.requests} requests of {stats.rows} rows; {window}, "
        f"arrivals rebased to its start, {stats.alive_at_start} alive at its start arriving at "
        f"it with their remaining time; left out: {stats.skipped_never_ran} never ran, "
        f"{stats.before_window} ended before the window, {stats.outside_window} after the "
        f"window, {stats.over_limit} over the limit; {stats.censored_still_running} still "
        f"running at the end of the data (censored: they run until its last timestamp, "
        f"{data_end_s:.10g} s); {stats.missing_size} with a missing or zero size, "
        f"{stats.raised_to_minimum} raised to the minimum size ({MIN_CPU_SHARES} shares, "
        f"{DOCKER_MIN_MEMORY_BYTES // MIB} MiB); {stats.too_large} larger than every host; "
        f"{stats.ends_after_window} still running at the window's end."
    )
    if extra:
        text += " " + extra
    for warning in warnings:
        text += f" Warning: {warning}."
    return text


# ------------------------------------------------------------------ Google 2011


@dataclass(slots=True)
class _GoogleTask:
    first_us: int
    order: int
    cpu: float | None = None
    memory: float | None = None
    priority: int = 0
    scheduling_class: int = 0
    run_start_us: int | None = None  # the run going on
    last_run: tuple[int, int] | None = None  # (start, end) of the last finished run


def convert_google2011(
    paths: Sequence[str | Path],
    hosts: Sequence[HostSpec],
    *,
    window_start_s: float = 0.0,
    window_end_s: float | None = None,
    limit: int | None = None,
    hosts_note: str = "",
) -> Conversion:
    """Google 2011 ``task_events`` files -> a trace (mapping in the module docstring)."""
    check_window(window_start_s, window_end_s)
    reference = reference_host(hosts)
    tasks: dict[tuple[str, str], _GoogleTask] = {}
    rows = 0
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
                task.last_run = (task.run_start_us, timestamp)
                task.run_start_us = None

    runs: list[_Run] = []
    never_ran = censored = 0
    sizes = _Sizes()
    for (job_id, task_index), task in sorted(tasks.items(), key=lambda kv: kv[1].order):
        if task.run_start_us is not None:  # still running when the data ends
            run_us = (task.run_start_us, last_us)
            censored += 1
        elif task.last_run is not None:
            run_us = task.last_run
        else:
            never_ran += 1
            continue
        cpu_shares, memory_bytes = sizes.size(
            None if task.cpu is None else task.cpu * reference.cpu_capacity_shares,
            None if task.memory is None else task.memory * reference.memory_capacity_bytes,
        )
        runs.append(
            _Run(
                arrival_s=task.first_us / 1e6,
                start_s=run_us[0] / 1e6,
                end_s=run_us[1] / 1e6,
                id=f"g{job_id}-{task_index}",
                request_class=google_class(task.priority, task.scheduling_class),
                type=google_type(task.scheduling_class),
                cpu_shares=cpu_shares,
                memory_bytes=memory_bytes,
            )
        )
    extra = (f"Sizes relative to {reference.id} ({reference.cpu_capacity_shares} shares, "
             f"{reference.memory_capacity_bytes} bytes).")
    return _finish(
        TraceSource.GOOGLE2011, "Google cluster data 2011 task_events", runs, hosts,
        rows=rows, start_s=window_start_s, end_s=window_end_s, limit=limit,
        data_end_s=last_us / 1e6, never_ran=never_ran, censored=censored, sizes=sizes,
        extra=" ".join(p for p in (extra, hosts_note) if p),
    )


# ------------------------------------------------------------------ Alibaba


@dataclass(slots=True)
class _Pod:
    run: _Run
    deleted_s: float | None
    running: bool  # pod_phase Running


def convert_alibaba(
    paths: Sequence[str | Path],
    hosts: Sequence[HostSpec],
    *,
    resource_scale: float = 1.0,
    window_start_s: float = 0.0,
    window_end_s: float | None = None,
    limit: int | None = None,
    hosts_note: str = "",
) -> Conversion:
    """Alibaba ``openb_pod_list`` files -> a trace (mapping in the module docstring)."""
    if not (math.isfinite(resource_scale) and resource_scale > 0):
        raise ValidationError("resource_scale", f"must be > 0, got {resource_scale}")
    check_window(window_start_s, window_end_s)
    pods: list[_Pod] = []
    rows = never_ran = gpus = 0
    data_end_s = 0.0
    sizes = _Sizes()
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
                phase = row[columns["pod_phase"]].strip().lower() if "pod_phase" in columns else ""
                gpu = any(
                    _optional_float(row[columns[c]], c) for c in ("num_gpu", "gpu_milli")
                    if c in columns
                )
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=line, path=str(path)) from None
            data_end_s = max(data_end_s, created, deleted or 0.0, scheduled or 0.0)
            if scheduled is None and ("scheduled_time" in columns or phase == "pending"):
                never_ran += 1
                continue
            gpus += gpu
            cpu_shares, memory_bytes = sizes.size(
                None if cpu_milli is None else cpu_milli * 1024 / 1000 * resource_scale,
                None if memory_mib is None else memory_mib * MIB * resource_scale,
            )
            start = scheduled if scheduled is not None else created
            run = _Run(created, start, deleted if deleted is not None else start, name,
                       request_class, task_type, cpu_shares, memory_bytes)
            pods.append(_Pod(run, deleted, phase == "running"))
        if columns is None:
            raise TraceError("header", "the file is empty; expected a CSV header line",
                             line=1, path=str(path))

    censored = 0
    for pod in pods:
        if pod.deleted_s is None or (pod.running and pod.deleted_s >= data_end_s):
            pod.run.end_s = data_end_s
            censored += 1
    extra = (f"Resource scale {resource_scale:g}; {gpus} of the pods that ran ask for GPUs: "
             "their GPUs were ignored (only CPU and memory are placed).")
    return _finish(
        TraceSource.ALIBABA, "Alibaba openb_pod_list", [p.run for p in pods], hosts,
        rows=rows, start_s=window_start_s, end_s=window_end_s, limit=limit,
        data_end_s=data_end_s, never_ran=never_ran, censored=censored, sizes=sizes,
        gpu_requests=gpus, extra=" ".join(p for p in (extra, hosts_note) if p),
    )


# ------------------------------------------------------------------ Alibaba node list

ALIBABA_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib")


def read_node_list(path: str | Path) -> tuple[HostSpec, ...]:
    """The hosts of an Alibaba ``openb_node_list`` file, in file order (see the docstring)."""
    source = Path(path)
    hosts: list[HostSpec] = []
    columns: dict[str, int] | None = None
    for line, row in _rows(source):
        if columns is None:
            columns = {name.strip().lower(): i for i, name in enumerate(row)}
            missing = [c for c in ALIBABA_NODE_COLUMNS if c not in columns]
            if missing:
                raise TraceError("columns", f"the header lacks {', '.join(missing)}; found "
                                 f"{', '.join(columns)}", line=line, path=str(source))
            continue
        try:
            if len(row) != len(columns):
                raise ValidationError("columns", f"expected {len(columns)} columns as in the "
                                      f"header, got {len(row)}")
            cpu_milli = _optional_float(row[columns["cpu_milli"]], "cpu_milli")
            memory_mib = _optional_float(row[columns["memory_mib"]], "memory_mib")
            if not cpu_milli:
                raise ValidationError("cpu_milli", "a node needs more than 0 CPU")
            if not memory_mib:
                raise ValidationError("memory_mib", "a node needs more than 0 memory")
            hosts.append(HostSpec(row[columns["sn"]].strip(), round(cpu_milli * 1024 / 1000),
                                  round(memory_mib * MIB)))
        except ValidationError as exc:
            field = "sn" if exc.field.startswith("hosts.") else exc.field
            raise TraceError(field, exc.message, line=line, path=str(source)) from None
    if not hosts:
        raise TraceError("file", "no node listed; expected a header line (sn,cpu_milli,"
                         "memory_mib,...) and one line per node", path=str(source))
    ids = [h.id for h in hosts]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})[:3]
        raise TraceError("sn", f"node names appear twice: {', '.join(twice)}", path=str(source))
    return tuple(hosts)
