"""A request's status, and how a task's run ends: one vocabulary for the agents, the manager,
its clients, the simulator and the reports."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EndStatus(StrEnum):
    FINISHED = "finished"  # exit code 0 (a job ran to its end)
    FAILED = "failed"  # non-zero exit code, or the engine gave up on it
    STOPPED = "stopped"  # the client or an operator stopped it
    KILLED = "killed"  # the scheduler killed it to make room
    OOM = "oom"  # the kernel killed it for lack of memory (the simulator's model)


# What a node agent may report (message 10): the OOM kill of a container is a "failed" exit with
# ``oom`` set, as Docker reports it.
REPORTED_END_STATUSES: tuple[EndStatus, ...] = (
    EndStatus.FINISHED,
    EndStatus.FAILED,
    EndStatus.STOPPED,
    EndStatus.KILLED,
)


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """A report that a task's container is done. ``service_id`` names the placement the
    container belonged to, so a late report cannot end a newer placement of the same task."""

    task_id: str
    status: EndStatus
    exit_code: int | None = None
    service_id: str | None = None
    oom: bool = False


class RequestStatus(StrEnum):
    PENDING = "pending"  # waiting in the pending queue (queued, or a victim without a place)
    RUNNING = "running"  # placed (again, after a kill: its history and kill count say so)
    COMPLETED = "completed"  # a job that exited 0
    FAILED = "failed"  # exited non-zero, or could not be started
    REJECTED = "rejected"  # no pass placed it and the client did not ask to queue
    STOPPED = "stopped"  # stopped by the client (DELETE /requests/{id})


# The statuses a request never leaves.
FINAL = frozenset(
    {RequestStatus.COMPLETED, RequestStatus.FAILED, RequestStatus.REJECTED, RequestStatus.STOPPED}
)
