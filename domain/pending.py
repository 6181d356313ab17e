"""The pending queue's order: the QoS metric Q (QoS-driven scheduling, eq. 3-7; DESIGN 3.7, 3.10).

A task that has executed e seconds and waited p seconds, with availability objective sigma,
may wait V = e / sigma - (e + p) more seconds before its availability falls below sigma. While
it waits, V falls one second per second, so the absolute moment of violation,
``deadline = enqueued_at + V``, stays fixed: ordering the queue by deadline (then class, then
id) is ordering it by time-to-violate at any instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from domain.model import Request


class PendingReason(StrEnum):
    VICTIM = "victim"  # killed to make room, found no other host
    QUEUED = "queued"  # a new request whose client asked to wait rather than be refused
    HOST_LOST = "host-lost"  # its node left the cluster


def violation_deadline(
    enqueued_at: float,
    executed_s: float,
    pending_s: float,
    objective: Fraction | float,
    alpha_s: float = 0.0,
) -> float:
    """The moment (same clock as ``enqueued_at``) the task's QoS metric reaches 0: its
    availability drops below target, allowing ``alpha_s`` to start it again (DESIGN 3.10)."""
    if objective <= 0:
        raise ValueError("an availability objective must be positive")
    ttv = executed_s / float(objective) - (executed_s + pending_s) - alpha_s
    return enqueued_at + ttv


@dataclass(frozen=True, slots=True)
class PendingEntry:
    request: Request
    reason: PendingReason
    enqueued_at: float
    deadline: float
    executed_s: float = 0.0
    pending_s: float = 0.0
    preemptions: int = 0  # times it was taken off a host, this time included

    @property
    def order_key(self) -> tuple[float, int, str]:
        return (self.deadline, self.request.cls, self.request.id)

    def waited(self, now: float) -> float:
        """Total pending time if it leaves the queue at ``now``."""
        return self.pending_s + max(0.0, now - self.enqueued_at)
