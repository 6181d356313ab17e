"""Which victims give way, in which order, and which of them are paused rather than killed
(DESIGN 3.6, 3.11, 3.14). Shared by the energy policy's kill pass and the QoS-driven policy's
preemption.

* Order (the kill pass): class descending, then the work a kill would lose ascending (a service
  or a job not started yet loses nothing, a checkpointable job the time since its last
  checkpoint, a job that restarts from scratch its whole run since its last start), then
  utilization ascending; ``VictimOrder.THESIS`` keeps the thesis's class, then utilization.
* A victim that frees nothing the request still lacks is passed over: a suspended task holds
  memory only, so it is taken (killed) only while memory is short.
* Split: where what the request lacks on the host is CPU only, its memory fitting beside the
  victims, a suspendable victim (a job, or a class-4 service) is paused: it keeps its memory
  and place and books no CPU. Where memory is short too, victims are killed in order until
  the request's memory fits; the later ones are still paused when they may be.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from domain.model import Task
from domain.preemption import suspendable, work_lost_s


class VictimOrder(StrEnum):
    """How the kill pass orders the victims of one host class."""

    LOSS = "loss"  # class descending, the work a kill would lose ascending, utilization
    THESIS = "thesis"  # class descending, utilization ascending (the thesis's order)


def in_kill_order(tasks: Iterable[Task], order: VictimOrder, now: float) -> list[Task]:
    """``tasks`` (a host's, in the store's order: class descending, utilization, id) in the
    order the kill pass takes them."""
    listed = list(tasks)
    if order is VictimOrder.THESIS:
        return listed
    return sorted(listed, key=lambda t: (-t.cls, work_lost_s(t, now), t.util, t.id))


def helps(task: Task, cpu_short: bool, memory_short: bool) -> bool:
    """Whether taking ``task`` frees something the request still lacks."""
    return (cpu_short and task.cpu_shares > 0) or (memory_short and task.memory > 0)


def split(
    chosen: list[Task], memory_short_bytes: int, allow_suspend: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The chosen victims as (killed, suspended) ids: with ``memory_short_bytes`` the memory
    the request lacks beside every victim, the victims that must go are killed in order until
    it is freed; the rest are paused where they may be (DESIGN 3.14)."""
    if not allow_suspend:
        return tuple(task.id for task in chosen), ()
    short = memory_short_bytes
    must = [task for task in chosen if not suspendable(task)]
    for task in must:
        short -= task.memory
    killed: set[str] = {task.id for task in must}
    for task in chosen:
        if short <= 0:
            break
        if task.id not in killed:
            killed.add(task.id)
            short -= task.memory
    kills = tuple(task.id for task in chosen if task.id in killed)
    suspends = tuple(task.id for task in chosen if task.id not in killed)
    return kills, suspends
