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

The readers: :mod:`workloads.google2011` (Google cluster data 2011) and :mod:`workloads.alibaba`
(Alibaba cluster-trace-gpu-v2023, with its node list). This module holds what they share: the CSV
plumbing, the runs as the data has them, the window, the counts (:class:`ConversionStats`) and
the notes.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from domain.errors import ValidationError
from domain.model import HostSpec, TaskType
from workloads.cluster import MIB
from workloads.trace import (
    MIN_CPU_SHARES,
    Trace,
    TraceError,
    TraceHeader,
    TraceRequest,
    TraceSource,
    Workload,
)

DOCKER_MIN_MEMORY_BYTES = 6 * MIB
MIN_MAKESPAN_S = 1.0


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


# ------------------------------------------------------------------ CSV plumbing


def _open_csv(path: Path) -> IO[str]:
    try:
        if path.name.endswith(".gz"):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
        return open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise TraceError("file", f"cannot open: {exc.strerror or exc}", path=str(path)) from None


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
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


def parse_int(text: str, column: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValidationError(column, f"must be an integer, got {text!r}") from None


def optional_float(text: str, column: str) -> float | None:
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
class Run:
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
class Sizes:
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


def _cut(runs: list[Run], start_s: float, end_s: float | None,
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
    shapes = {(h.cpu_capacity, h.memory_capacity) for h in hosts}
    return sum(
        1 for r in requests
        if not any(r.cpu_shares <= cpu and r.memory_bytes <= memory for cpu, memory in shapes)
    )


def finish_conversion(
    source: TraceSource, kind: str, runs: list[Run], hosts: Sequence[HostSpec], *,
    rows: int, start_s: float, end_s: float | None, limit: int | None, data_end_s: float,
    never_ran: int, censored: int, sizes: Sizes, gpu_requests: int = 0, extra: str = "",
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
