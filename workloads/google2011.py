"""The reader of Google cluster data 2011 task events (:func:`convert_google2011`).

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

Read with the shared machinery of :mod:`workloads.readers` (window, counts, notes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

from domain.errors import ValidationError
from domain.model import HostSpec, TaskType
from workloads.readers import (
    Conversion,
    Run,
    Sizes,
    check_window,
    csv_rows,
    finish_conversion,
    optional_float,
    parse_int,
)
from workloads.trace import TraceError, TraceSource

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


def reference_host(hosts: Sequence[HostSpec]) -> HostSpec:
    """The largest host (by CPU, then memory): Google's sizes are fractions of it."""
    if not hosts:
        raise ValidationError("hosts", "need at least one host")
    return max(hosts, key=lambda h: (h.cpu_capacity, h.memory_capacity))


class _Event(NamedTuple):
    """One row of ``task_events``, read."""

    timestamp_us: int
    event: GoogleEvent
    job_id: str
    task_index: str
    cpu: float | None
    memory: float | None
    priority: int | None
    scheduling_class: int | None


def _read_event(row: Sequence[str]) -> _Event | None:
    """A row read and checked (ValidationError naming the column); None: after the window."""
    if len(row) != len(GOOGLE_TASK_EVENT_COLUMNS):
        raise ValidationError(
            "columns",
            f"expected {len(GOOGLE_TASK_EVENT_COLUMNS)} columns "
            f"({', '.join(GOOGLE_TASK_EVENT_COLUMNS)}), got {len(row)}",
        )
    timestamp = parse_int(row[0], "timestamp")
    if timestamp < 0:
        raise ValidationError("timestamp", f"must be >= 0, got {timestamp}")
    if timestamp >= _AFTER_WINDOW_US:
        return None
    code = parse_int(row[5], "event_type")
    try:
        event = GoogleEvent(code)
    except ValueError:
        raise ValidationError("event_type", f"must be 0..8, got {code}") from None
    job_id = row[2].strip()
    task_index = row[3].strip()
    if not job_id or not task_index:
        raise ValidationError("job_id", "job ID and task index are required")
    return _Event(
        timestamp, event, job_id, task_index,
        cpu=optional_float(row[9], "cpu_request"),
        memory=optional_float(row[10], "memory_request"),
        priority=parse_int(row[8], "priority") if row[8].strip() else None,
        scheduling_class=(parse_int(row[7], "scheduling_class") if row[7].strip()
                          else None),
    )


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

    def apply(self, e: _Event) -> None:
        """What an event says of the task: its first sizes, its priority and class as
        submitted (or as known before it ever ran), its runs."""
        if self.cpu is None and e.cpu is not None:
            self.cpu = e.cpu
        if self.memory is None and e.memory is not None:
            self.memory = e.memory
        if e.event is GoogleEvent.SUBMIT or self.run_start_us is None:
            if e.priority is not None:
                self.priority = e.priority
            if e.scheduling_class is not None:
                self.scheduling_class = e.scheduling_class
        if e.event is GoogleEvent.SCHEDULE:
            self.run_start_us = e.timestamp_us
        elif e.event in _RUN_ENDS and self.run_start_us is not None:
            self.last_run = (self.run_start_us, e.timestamp_us)
            self.run_start_us = None


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
        for line, row in csv_rows(path):
            rows += 1
            try:
                event = _read_event(row)
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=line, path=str(path)) from None
            if event is None:
                continue
            last_us = max(last_us, event.timestamp_us)
            key = (event.job_id, event.task_index)
            task = tasks.get(key)
            if task is None:
                task = _GoogleTask(first_us=event.timestamp_us, order=len(tasks))
                tasks[key] = task
            task.apply(event)
    sizes = Sizes()
    runs, never_ran, censored = _runs(tasks, last_us, reference, sizes)
    extra = (f"Sizes relative to {reference.id} ({reference.cpu_capacity} shares, "
             f"{reference.memory_capacity} bytes).")
    return finish_conversion(
        TraceSource.GOOGLE2011, "Google cluster data 2011 task_events", runs, hosts,
        rows=rows, start_s=window_start_s, end_s=window_end_s, limit=limit,
        data_end_s=last_us / 1e6, never_ran=never_ran, censored=censored, sizes=sizes,
        extra=" ".join(p for p in (extra, hosts_note) if p),
    )


def _runs(
    tasks: dict[tuple[str, str], _GoogleTask], last_us: int, reference: HostSpec, sizes: Sizes
) -> tuple[list[Run], int, int]:
    """Each task's last run (censored at ``last_us`` when still running), in order of first
    appearance; and how many never ran, and how many were censored."""
    runs: list[Run] = []
    never_ran = censored = 0
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
            None if task.cpu is None else task.cpu * reference.cpu_capacity,
            None if task.memory is None else task.memory * reference.memory_capacity,
        )
        runs.append(
            Run(
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
    return runs, never_ran, censored
