"""What a task adds to its host's tally (domain.tally) and what a cut would leave of it.

The cut sums use exactly the rule of DESIGN 3.5 step 3 (each task cut by its whole allowance
t(tk) - t(nc) - cut_received, resources rounded up), so "the sum says it fits" and "cutting the
tasks one by one makes it fit" always agree.
"""

from __future__ import annotations

from fractions import Fraction

from domain.classes import MEMORY_FLOOR, ClassTable, after_cut_ratio
from domain.model import Task
from domain.tally import COUNT, CPU, CUT_CPU, CUT_MEM, MEM, SVC4_CPU, SVC4_MEM, TALLY_SIZE


def cut_target(task: Task, new_class: int, classes: ClassTable) -> tuple[Fraction, int, int] | None:
    """What task ``task`` becomes if its host class becomes ``new_class`` (DESIGN 3.5 step 3).

    Returns (total cut, new CPU shares, new memory), or None when the task may lose nothing more
    (its allowance t(tk) - t(nc) - cut_received is <= 0) or rounding leaves it unchanged, or
    when it is suspended (paused: DESIGN 3.14; it books no CPU and is not cut).
    """
    if task.cls <= new_class or task.suspended_cpu_shares > 0:
        return None
    sizes = _cut_sizes(task, new_class, classes)
    if sizes is None:
        return None
    return classes.request_cut(task.cls, new_class), sizes[0], sizes[1]


def _cut_sizes(task: Task, new_class: int, classes: ClassTable) -> tuple[int, int] | None:
    """``cut_target``'s new CPU shares and memory (``new_class`` below the task's class),
    without the total cut: a store sums these on every change of a task."""
    # total = t(tk) - t(nc) = n/d, > 0 as tk > nc; compared with the cut received in integers
    # (denominators > 0), which is exact and much cheaper than Fraction's operators
    n, d = classes.request_cut_ratio(task.cls, new_class)
    received = task.cut_received
    if n * received.denominator <= received.numerator * d:
        return None
    cpu = min(task.cpu_shares, after_cut_ratio(task.original_cpu_shares, n, d))
    memory = min(task.memory, after_cut_ratio(task.original_memory, n, d, MEMORY_FLOOR))
    if cpu == task.cpu_shares and memory == task.memory:
        return None
    return cpu, memory


def contribution(task: Task, classes: ClassTable) -> tuple[int, ...]:
    """The tally of a host that runs only ``task`` (its cut sums: ``cut_target``'s, for each
    stricter host class)."""
    values = [0] * TALLY_SIZE
    cls = task.cls
    cpu_shares, memory = task.cpu_shares, task.memory
    index = cls - 1
    values[COUNT + index] = 1
    values[CPU + index] = cpu_shares
    values[MEM + index] = memory
    if cls == 4 and task.type == "service":
        values[SVC4_CPU] = cpu_shares
        values[SVC4_MEM] = memory
    if task.suspended_cpu_shares > 0:  # paused: never cut (DESIGN 3.14)
        return tuple(values)
    for new_class in range(1, min(cls, 4)):  # only a stricter host class (1-3) cuts it
        sizes = _cut_sizes(task, new_class, classes)
        if sizes is not None:
            values[CUT_CPU + new_class - 1] = cpu_shares - sizes[0]
            values[CUT_MEM + new_class - 1] = memory - sizes[1]
    return tuple(values)
