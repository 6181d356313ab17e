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
