"""What applying a placed decision does to a host's tasks and tally (DESIGN 3.8), computed
once from the tasks as they are, so every store applies a decision the same way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from domain.books import contribution
from domain.classes import ClassTable
from domain.decision import Decision
from domain.errors import ValidationError
from domain.model import HostView, Task
from domain.preemption import suspend
from domain.tally import combine


@dataclass(frozen=True, init=False)
class Booking:
    host: HostView  # the host after the decision (new tally; region and utilization unchanged)
    killed: tuple[Task, ...]  # removed, as they were booked
    cut: tuple[Task, ...]  # the cut tasks as they are after the decision
    placed: Task  # the new task
    suspended: tuple[Task, ...] = ()  # paused on the host, as they are after the decision

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(self, host: HostView, killed: tuple[Task, ...], cut: tuple[Task, ...],
                 placed: Task, suspended: tuple[Task, ...] = ()) -> None:
        object.__setattr__(self, "host", host)
        object.__setattr__(self, "killed", killed)
        object.__setattr__(self, "cut", cut)
        object.__setattr__(self, "placed", placed)
        object.__setattr__(self, "suspended", suspended)


def book(
    decision: Decision,
    host: HostView,
    tasks: Mapping[str, Task],
    classes: ClassTable,
    now: float,
    executed_s: float = 0.0,
    pending_s: float = 0.0,
    preemptions: int = 0,
) -> Booking:
    """``tasks`` holds the host's current tasks by id; victims or cut tasks that are no longer
    there (they ended meanwhile) are skipped. Suspended victims stay, paused (DESIGN 3.14)."""
    if not decision.placed or decision.host != host.id:
        raise ValidationError("decision", f"not a placed decision for host {host.id}")
    request = decision.request
    tally = host.tally
    killed: list[Task] = []
    for task_id in decision.kills:
        victim = tasks.get(task_id)
        if victim is not None:
            tally = combine(tally, contribution(victim, classes), -1)
            killed.append(victim)
    suspended: list[Task] = []
    for task_id in decision.suspends:
        victim = tasks.get(task_id)
        if victim is not None and not victim.suspended:
            paused = suspend(victim, now)
            tally = combine(tally, contribution(victim, classes), -1)
            tally = combine(tally, contribution(paused, classes))
            suspended.append(paused)
    cut: list[Task] = []
    for task_cut in decision.cuts:
        before = tasks.get(task_cut.task)
        if (before is None or task_cut.task in decision.kills
                or task_cut.task in decision.suspends):
            continue
        after = before.resized(task_cut.cpu_shares, task_cut.memory, task_cut.cut_received)
        tally = combine(tally, contribution(before, classes), -1)
        tally = combine(tally, contribution(after, classes))
        cut.append(after)
    placed = Task(
        id=request.id,
        host=host.id,
        cls=request.cls,
        type=request.type,
        cpu_shares=decision.cpu_shares,
        memory=decision.memory,
        original_cpu_shares=request.cpu_shares,
        original_memory=request.memory,
        cut_received=decision.cut_received,
        started_at=now,
        executed_s=executed_s,
        pending_s=pending_s,
        preemptions=preemptions,
        constraints=request.constraints,
        checkpoint_interval_s=request.checkpoint_interval_s,
    )
    tally = combine(tally, contribution(placed, classes))
    return Booking(host.with_tally(tally), tuple(killed), tuple(cut), placed, tuple(suspended))
