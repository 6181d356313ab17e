"""The JSON forms of hosts and tasks, as every endpoint answers them, and their specs (the
OpenAPI document states them; tests read every answer with them)."""

from __future__ import annotations

from typing import Any

from domain.fields import Bool, Choice, Fields, Int, Named, Nullable, Num, Spec, Table, Text
from domain.load import WINDOWS
from domain.model import ID_TEXT, HostView, Task, TaskType
from domain.regions import Region

_INT, _NUMBER, _TEXT = Int(), Num(), Text()
TASK_TYPE_FORM = Choice(tuple(t.value for t in TaskType))
HOST_FIELDS: dict[str, Spec] = {
    "id": _TEXT, "address": _TEXT, "cpu_capacity": _INT, "memory_capacity": _INT,
    "cpu_util": _NUMBER, "memory_util": _NUMBER, "util": _NUMBER,
    "region": Choice(tuple(r.value for r in Region)), "class": Nullable(_INT),
    "cpu_allocated": _INT, "memory_allocated": _INT, "overbooking_factor": _NUMBER,
    "task_count": _INT, "util_at": Nullable(_NUMBER), "windows": WINDOWS}
HOST_REQUIRED = ("id", "cpu_capacity", "memory_capacity", "region", "class", "task_count")
HOST_FORM = Named("Host", Fields(HOST_FIELDS, HOST_REQUIRED, closed=False))
TASK_FORM = Named("Task", Fields(
    {"id": _TEXT, "host": _TEXT, "class": _INT, "type": TASK_TYPE_FORM, "cpu_shares": _INT,
     "memory": _INT, "original_cpu_shares": _INT, "original_memory": _INT,
     "cut_received": _NUMBER, "cut_received_exact": _TEXT, "cpu_util": _NUMBER,
     "memory_util": _NUMBER, "started_at": _NUMBER, "suspended": Bool(),
     "suspended_cpu_shares": _INT},
    ("id", "host", "class", "type", "cpu_shares", "memory"), closed=False))
WATCHER_FORM = Named("LoadWatcher", Fields(
    {"timestamp": _INT, "source": _TEXT,
     "data": Table(Fields({"cpu_util": _NUMBER, "memory_util": _NUMBER,
                           "measured_at": Nullable(_NUMBER), "age_s": Nullable(_NUMBER),
                           "windows": WINDOWS},
                          ("cpu_util", "memory_util", "measured_at", "age_s", "windows"),
                          closed=False), ID_TEXT)},
    ("timestamp", "source", "data"), closed=False))


def host_json(host: HostView) -> dict[str, Any]:
    return {
        "id": host.id,
        "address": host.address,
        "cpu_capacity": host.cpu_capacity,
        "memory_capacity": host.memory_capacity,
        "cpu_util": host.cpu_util,
        "memory_util": host.memory_util,
        "util": host.util,
        "region": host.region.value,
        "class": host.host_class,
        "cpu_allocated": host.cpu_allocated,
        "memory_allocated": host.memory_allocated,
        "overbooking_factor": round(host.overbooking_factor, 6),
        "task_count": host.task_count,
        "util_at": host.util_at,
        "windows": host.windows.to_json() if host.windows is not None else {},
    }


def watcher_json(host: HostView, now: float) -> dict[str, Any]:
    """One host in the load watcher's answer: its utilization, when it was measured and how
    old that is at ``now``, and the 5/10/15-minute windows (fractions in [0, 1])."""
    return {
        "cpu_util": host.cpu_util,
        "memory_util": host.memory_util,
        "measured_at": host.util_at,
        "age_s": None if host.util_at is None else round(max(0.0, now - host.util_at), 3),
        "windows": host.windows.to_json() if host.windows is not None else {},
    }


def task_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "host": task.host,
        "class": task.cls,
        "type": task.type.value,
        "cpu_shares": task.cpu_shares,
        "memory": task.memory,
        "original_cpu_shares": task.original_cpu_shares,
        "original_memory": task.original_memory,
        "cut_received": float(task.cut_received),
        "cut_received_exact": str(task.cut_received),
        "cpu_util": task.cpu_util,
        "memory_util": task.memory_util,
        "started_at": task.started_at,
        # paused on its host (DESIGN 3.14): no CPU booked, the shares it gets back on resume
        "suspended": task.suspended,
        "suspended_cpu_shares": task.suspended_cpu_shares,
    }
