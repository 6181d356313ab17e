"""The Task Registry's Redis layout and record codec.

=====================================  ===========================================================
 key                                    holds
=====================================  ===========================================================
 ``{p}:task:{id}``                      hash: one task (current and original resources, cut,
                                        class, type, utilization, QoS history,
                                        placement constraints)
 ``{p}:host:{host}:tasks:{class}``      sorted set: the host's tasks of one class, by utilization
 ``{p}:tasks``                          sorted set (score 0): every task id, for listing
=====================================  ===========================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction

from domain.constraints import Constraint, check_constraints, constraint_texts
from domain.model import Task, TaskType


class TaskKeys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.all = f"{prefix}:tasks"

    def task(self, task_id: str) -> str:
        return f"{self.prefix}:task:{task_id}"

    def by_class(self, host_id: str, cls: int) -> str:
        return f"{self.prefix}:host:{host_id}:tasks:{cls}"


def task_to_hash(task: Task) -> dict[str, str]:
    return {
        "id": task.id,
        "host": task.host,
        "class": str(task.cls),
        "type": task.type.value,
        "cpu_shares": str(task.cpu_shares),
        "memory": str(task.memory),
        "original_cpu_shares": str(task.original_cpu_shares),
        "original_memory": str(task.original_memory),
        "cut_received": str(task.cut_received),
        "cpu_util": repr(task.cpu_util),
        "memory_util": repr(task.memory_util),
        "started_at": repr(task.started_at),
        "executed_s": repr(task.executed_s),
        "pending_s": repr(task.pending_s),
        "preemptions": str(task.preemptions),
        "constraints": constraints_field(task.constraints),
        "checkpoint_interval_s": repr(task.checkpoint_interval_s),
        "suspended_cpu_shares": str(task.suspended_cpu_shares),
        "suspended_at": repr(task.suspended_at),
    }


def constraints_field(constraints: tuple[Constraint, ...]) -> str:
    """A hash field of constraints: their texts as a JSON list ('' for none)."""
    return json.dumps(constraint_texts(constraints)) if constraints else ""


def constraints_from_field(raw: str | None) -> tuple[Constraint, ...]:
    """Constraints as stored (they were checked when the request came in)."""
    if not raw:
        return ()
    return check_constraints(json.loads(raw))


def task_from_hash(fields: Mapping[str, str]) -> Task:
    return Task(
        id=fields["id"],
        host=fields["host"],
        cls=int(fields["class"]),
        type=TaskType(fields["type"]),
        cpu_shares=int(fields["cpu_shares"]),
        memory=int(fields["memory"]),
        original_cpu_shares=int(fields["original_cpu_shares"]),
        original_memory=int(fields["original_memory"]),
        cut_received=Fraction(fields["cut_received"]),
        cpu_util=float(fields["cpu_util"]),
        memory_util=float(fields["memory_util"]),
        started_at=float(fields["started_at"]),
        executed_s=float(fields["executed_s"]),
        pending_s=float(fields["pending_s"]),
        preemptions=int(fields.get("preemptions") or 0),  # absent from tasks booked before
        constraints=constraints_from_field(fields.get("constraints")),
        # absent from tasks booked before checkpoints and suspensions (DESIGN 3.14)
        checkpoint_interval_s=float(fields.get("checkpoint_interval_s") or 0.0),
        suspended_cpu_shares=int(fields.get("suspended_cpu_shares") or 0),
        suspended_at=float(fields.get("suspended_at") or 0.0),
    )
