"""What taking a task off its CPU costs it, and what it keeps (DESIGN 3.10, 3.14).

Three kinds of victim, one rule each:

* a service served while it ran: a kill throws nothing away, its running time stays in e;
* a job that restarts from scratch delivered nothing for the time it ran since its last start:
  a kill moves that time from e to p and its CPU-seconds are work lost;
* a checkpointable job (``checkpoint_interval_s`` > 0) keeps what it ran up to its last
  checkpoint (taken every interval of running time since its last start) and loses the rest.

A suspended task (``Task.suspended``) is paused on its host: it keeps its memory, books no
CPU, loses nothing, and its paused time is p, not e; a kill while it is paused loses what it
had run since its last start, as for any kill. Only jobs and class-4 services may be
suspended: a paused service of a more important class answers nobody.

The scheduler judges victims with these (the kill pass's order, the QoS-driven policy's Q
after the preemption), and the accounting (domain.slo) applies the same rule to a request's
clock. Pure: every moment is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from domain.books import contribution
from domain.classes import ClassTable
from domain.model import HostView, Task, TaskType
from domain.slo import SloTable, qos_metric
from domain.tally import combine

SUSPENDABLE_SERVICE_CLASS = 4  # services of this class may be paused; those of 1-3 never


def kept_of_run_s(task_type: TaskType, checkpoint_interval_s: float, run_s: float) -> float:
    """Of a run of ``run_s`` seconds since the last start, what a kill keeps: all of it for a
    service, nothing for a job that restarts from scratch, the run up to its last checkpoint
    for a checkpointable job."""
    if run_s <= 0:
        return 0.0
    if task_type is not TaskType.JOB:
        return run_s
    if checkpoint_interval_s <= 0:
        return 0.0
    return math.floor(run_s / checkpoint_interval_s) * checkpoint_interval_s


def run_s(task: Task, now: float) -> float:
    """How long ``task`` has run since its last start: to ``now``, or to its suspension (its
    paused time is not running time; a resumed task's ``started_at`` moved by its pause)."""
    end = task.suspended_at if task.suspended_cpu_shares > 0 else now
    return end - task.started_at if end > task.started_at else 0.0


def paused_s(task: Task, now: float) -> float:
    """How long a suspended task has been paused by ``now`` (0 for a running one)."""
    if task.suspended_cpu_shares <= 0 or now <= task.suspended_at:
        return 0.0
    return now - task.suspended_at


def work_lost_s(task: Task, now: float) -> float:
    """The running time a kill at ``now`` would throw away (times its cores: work lost)."""
    ran = run_s(task, now)
    return ran - kept_of_run_s(task.type, task.checkpoint_interval_s, ran)


def times_now(task: Task, now: float) -> tuple[float, float]:
    """Its e and p at ``now`` as it is (running, or paused)."""
    return task.executed_s + run_s(task, now), task.pending_s + paused_s(task, now)


def times_after_kill(task: Task, now: float) -> tuple[float, float]:
    """Its e and p right after a kill (or a preemption to the queue) at ``now``: the running
    time the kill throws away moves from e to p."""
    ran = run_s(task, now)
    kept = kept_of_run_s(task.type, task.checkpoint_interval_s, ran)
    return task.executed_s + kept, task.pending_s + (ran - kept) + paused_s(task, now)


def restarts_from_scratch(task: Task) -> bool:
    """A job without checkpoints: a kill throws away everything it ran since its start."""
    return task.type is TaskType.JOB and task.checkpoint_interval_s <= 0


def suspendable(task: Task) -> bool:
    """Whether ``task`` may be paused instead of killed: a job, or a class-4 service; one
    already paused is not paused again (taking it means killing it)."""
    if task.suspended_cpu_shares > 0:
        return False
    return task.type is TaskType.JOB or task.cls >= SUSPENDABLE_SERVICE_CLASS


def suspend(task: Task, now: float) -> Task:
    """``task`` paused at ``now``: no CPU booked, its memory and place kept."""
    return Task(task.id, task.host, task.cls, task.type, 0, task.memory,
                task.original_cpu_shares, task.original_memory, task.cut_received,
                0.0, task.memory_util, task.started_at, task.executed_s, task.pending_s,
                task.preemptions, task.constraints, task.checkpoint_interval_s,
                task.cpu_shares, now)


def resume(task: Task, now: float) -> Task:
    """A paused ``task`` running again at ``now`` with the CPU shares it had: its pause goes to
    p, and its start moves by the pause, so its running time since its last start goes on
    where it stopped."""
    paused = paused_s(task, now)
    return Task(task.id, task.host, task.cls, task.type, task.suspended_cpu_shares,
                task.memory, task.original_cpu_shares, task.original_memory,
                task.cut_received, task.cpu_util, task.memory_util, task.started_at + paused,
                task.executed_s, task.pending_s + paused, task.preemptions, task.constraints,
                task.checkpoint_interval_s, 0, 0.0)


def resume_order(task: Task, now: float, slo: SloTable) -> tuple[float, int, str]:
    """The most urgent first: Q ascending (a pause costs no allocation to end), then class,
    then id."""
    executed, pending = times_now(task, now)
    return (qos_metric(executed, pending, slo.objective(task.cls), 0.0), task.cls, task.id)


def resume_on(
    host: HostView, tasks: Iterable[Task], now: float, slo: SloTable, classes: ClassTable
) -> tuple[HostView, tuple[Task, ...]]:
    """The host and the tasks it resumes at ``now`` (DESIGN 3.14): its suspended tasks, the
    most urgent first, each as soon as its CPU shares fit the host's CPU room under its class
    (its memory is still booked there); nothing when none fits. Every store resumes with this,
    so they keep the same books."""
    paused = [task for task in tasks if task.suspended_cpu_shares > 0]
    host_class = host.host_class
    if not paused or host_class is None:
        return host, ()
    paused.sort(key=lambda task: resume_order(task, now, slo))
    room = host.cpu_limits[host_class - 1] - host.cpu_allocated
    tally = host.tally
    resumed: list[Task] = []
    for task in paused:
        if task.suspended_cpu_shares <= room:
            running = resume(task, now)
            room -= task.suspended_cpu_shares
            tally = combine(tally, contribution(task, classes), -1)
            tally = combine(tally, contribution(running, classes))
            resumed.append(running)
    if not resumed:
        return host, ()
    return host.with_tally(tally), tuple(resumed)
