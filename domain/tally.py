"""Per-host sums over the tasks, kept by every store so each pass judges a host in O(1).

A tally is a tuple of ``TALLY_SIZE`` integers; a store adds a task's ``contribution`` when the
task is placed and subtracts it when the task ends or before it is changed (cut). Layout:

=========  =====================================================================
 index      meaning
=========  =====================================================================
 0..3       number of tasks of class 1..4
 4..7       current CPU shares of the tasks of class 1..4
 8..11      current memory bytes of the tasks of class 1..4
 12, 13     CPU shares and memory of class-4 services (kill victims for class-4 jobs)
 14..16     CPU shares that cuts could free if the host class became 1, 2, 3
 17..19     memory bytes that cuts could free if the host class became 1, 2, 3
=========  =====================================================================

The cut sums use exactly the rule of DESIGN 3.5 step 3 (each task cut by its whole allowance
t(tk) - t(nc) - cut_received, resources rounded up), so "the sum says it fits" and "cutting the
tasks one by one makes it fit" always agree.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from domain.classes import ClassTable, after_cut

if TYPE_CHECKING:  # the model imports this module's layout through domain.capacity
    from domain.model import Task

TALLY_SIZE = 20
COUNT, CPU, MEM = 0, 4, 8
SVC4_CPU, SVC4_MEM = 12, 13
CUT_CPU, CUT_MEM = 14, 17

TALLY_FIELDS: tuple[str, ...] = (
    *(f"count_{c}" for c in (1, 2, 3, 4)),
    *(f"cpu_{c}" for c in (1, 2, 3, 4)),
    *(f"memory_{c}" for c in (1, 2, 3, 4)),
    "service4_cpu",
    "service4_memory",
    *(f"cut_cpu_{n}" for n in (1, 2, 3)),
    *(f"cut_memory_{n}" for n in (1, 2, 3)),
)

EMPTY_TALLY: tuple[int, ...] = (0,) * TALLY_SIZE


def cut_target(task: Task, new_class: int, classes: ClassTable) -> tuple[Fraction, int, int] | None:
    """What task ``task`` becomes if its host class becomes ``new_class`` (DESIGN 3.5 step 3).

    Returns (total cut, new CPU shares, new memory), or None when the task may lose nothing more
    (its allowance t(tk) - t(nc) - cut_received is <= 0) or rounding leaves it unchanged.
    """
    if task.cls <= new_class:
        return None
    total = classes.request_cut(task.cls, new_class)  # t(tk) - t(nc), > 0 as tk > nc
    if total <= task.cut_received:
        return None
    cpu = min(task.cpu_shares, after_cut(task.original_cpu_shares, total))
    memory = min(task.memory, after_cut(task.original_memory, total))
    if cpu == task.cpu_shares and memory == task.memory:
        return None
    return total, cpu, memory


def contribution(task: Task, classes: ClassTable) -> tuple[int, ...]:
    """The tally of a host that runs only ``task``."""
    values = [0] * TALLY_SIZE
    index = task.cls - 1
    values[COUNT + index] = 1
    values[CPU + index] = task.cpu_shares
    values[MEM + index] = task.memory
    if task.cls == 4 and task.type == "service":
        values[SVC4_CPU] = task.cpu_shares
        values[SVC4_MEM] = task.memory
    for new_class in (1, 2, 3):
        target = cut_target(task, new_class, classes)
        if target is not None:
            values[CUT_CPU + new_class - 1] = task.cpu_shares - target[1]
            values[CUT_MEM + new_class - 1] = task.memory - target[2]
    return tuple(values)


def combine(tally: tuple[int, ...], delta: tuple[int, ...], sign: int = 1) -> tuple[int, ...]:
    return tuple(a + sign * b for a, b in zip(tally, delta, strict=True))
