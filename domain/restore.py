"""Cuts given back (DESIGN 3.8): which cut tasks of a host get resources back, and how much.

A cut is an overbooking measure, not a punishment: whenever room grows on a host (a task ends
or leaves it, its class rises), its cut tasks get their resources back as far as ``fits`` holds
for the host's class.

The step rule. A task is restored in whole steps of the class table: its cut only ever takes
one of the values t(its class) - t(c) for a host class c (for a class-4 task of the thesis
model: 1/2, 1/3, 1/6, 0), exactly the cuts the cut pass gives (DESIGN 3.5). So

* ``cut_received`` stays an exact fraction of the table, and the resources stay
  ``after_cut(original, cut_received)`` (rounded up, as every cut), so the tally's cut sums
  (domain.books) keep meaning what the cut pass reads from them;
* a task is restored fully when the room allows, else to the smallest cut of the table that
  fits, else not at all. A finer restoration (to any fraction that fills the room exactly)
  would leave cuts such as 1095/4096, and the next cut pass would cut such a task by a
  fraction no class stands for.

Order: the most cut first (``cut_received`` descending), then class ascending, then id; each
task takes the largest restoration that keeps the host within capacity x M(host class) in both
dimensions (and alone within the machine), from the room the earlier ones left. Room only
shrinks along the way, so when it ends no cut task can take one more step (maximality).

A task whose memory the node could only cut in part (it books more than ``after_cut`` of its
cut) never loses memory here: a restoration raises, never lowers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from domain.books import contribution
from domain.classes import MEMORY_FLOOR, ClassTable, after_cut_ratio
from domain.model import HostView, Task
from domain.tally import combine


@dataclass(frozen=True, slots=True)
class TaskRestore:
    """A cut task given resources back: its new resources, its new (lower) total cut, and what
    it got back."""

    task: str
    host: str
    cpu_shares: int
    memory: int
    cut_received: Fraction
    cpu_returned: int
    memory_returned: int


def restore_levels(task: Task, classes: ClassTable) -> tuple[Fraction, ...]:
    """The cuts below ``task``'s own that the step rule allows, smallest (most restored)
    first: t(its class) - t(c) for every class c, 0 included."""
    return tuple(level for level, _, _ in _restore_steps(task, classes))


def _restore_steps(task: Task, classes: ClassTable) -> list[tuple[Fraction, int, int]]:
    """``restore_levels`` with each level's numerator and denominator; compared with the cut
    received in integers (denominators > 0): exact, and much cheaper than Fraction's
    operators."""
    received = task.cut_received
    rn, rd = received.numerator, received.denominator
    return [step for step in classes.cut_steps(task.cls) if step[1] * rd < rn * step[2]]


def restore_order(task: Task) -> tuple[Fraction, int, str]:
    """The most cut first, then class ascending, then id."""
    return (-task.cut_received, task.cls, task.id)


def _in_restore_order(tasks: list[Task]) -> list[Task]:
    """``sorted(tasks, key=restore_order)``, with each cut as a whole number of the common
    denominator's units instead of a Fraction: the same order, exactly, in integers."""
    ratios = [(task.cut_received.numerator, task.cut_received.denominator) for task in tasks]
    common = math.lcm(*(d for _, d in ratios))
    keyed = sorted(
        ((-(n * (common // d)), task.cls, task.id, position)
         for position, ((n, d), task) in enumerate(zip(ratios, tasks, strict=True))),
    )
    return [tasks[key[3]] for key in keyed]


def plan_restores(
    host: HostView, tasks: Iterable[Task], classes: ClassTable
) -> tuple[TaskRestore, ...]:
    """The restorations to make on ``host`` (its books as they are now: ``tasks`` are all its
    tasks, and ``host.tally`` their sums), in order; empty when no cut task can take a step.
    Only the cut tasks count, in no particular order: ``tasks`` may be just those. A suspended
    task is given nothing back while it is paused (DESIGN 3.14): it books no CPU."""
    cut = [task for task in tasks
           if task.cut_received.numerator > 0 and task.suspended_cpu_shares <= 0]
    host_class = host.host_class
    if not cut or host_class is None:
        return ()
    if len(cut) > 1:
        cut = _in_restore_order(cut)
    cpu_room = host.cpu_limits[host_class - 1] - host.cpu_allocated
    memory_room = host.memory_limits[host_class - 1] - host.memory_allocated
    restores: list[TaskRestore] = []
    for task in cut:
        for level, n, d in _restore_steps(task, classes):
            cpu = max(task.cpu_shares, after_cut_ratio(task.original_cpu_shares, n, d))
            memory = max(task.memory,
                         after_cut_ratio(task.original_memory, n, d, MEMORY_FLOOR))
            cpu_more, memory_more = cpu - task.cpu_shares, memory - task.memory
            if (
                cpu_more <= cpu_room
                and memory_more <= memory_room
                and cpu <= host.cpu_capacity
                and memory <= host.memory_capacity
            ):
                restores.append(
                    TaskRestore(task.id, host.id, cpu, memory, level, cpu_more, memory_more)
                )
                cpu_room -= cpu_more
                memory_room -= memory_more
                break
    return tuple(restores)


def apply_restores(
    host: HostView,
    tasks: Mapping[str, Task],
    restores: Iterable[TaskRestore],
    classes: ClassTable,
) -> tuple[HostView, tuple[Task, ...]]:
    """The host and the restored tasks once ``restores`` are made (``tasks``: the host's tasks
    by id); every store applies restorations with this, so they keep the same books."""
    tally = host.tally
    restored: list[Task] = []
    for restore in restores:
        before = tasks[restore.task]
        after = before.resized(restore.cpu_shares, restore.memory, restore.cut_received)
        tally = combine(tally, contribution(before, classes), -1)
        tally = combine(tally, contribution(after, classes))
        restored.append(after)
    return host.with_tally(tally), tuple(restored)
