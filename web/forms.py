"""The JSON forms of hosts and tasks, as every endpoint answers them."""

from __future__ import annotations

from typing import Any

from domain.model import HostView, Task


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
    }
