"""A request's history events (``GET /requests/{id}``) as the replay reads them (pure: no I/O).

The manager records typed events (domain.events): ``{"t": epoch seconds, "kind": ..., "reason":
text for people, ...fields}``, the fields those the change set (``status``, ``host``,
``cpu_shares``, ``memory``, ``cut_received``, ``exit_code``, ``kills``) and those of the kind
(``pass``, ``policy``, ``by``, ``oom``, ...). :func:`classify` reads the kind and the fields;
nothing here reads the text:

=========================  ========================================================
 kind                       used for
=========================  ========================================================
 submitted                  server-side decision time
 placed                     placements and reschedules (``pass``, else ``policy``)
 started                    its container runs: the allocation time (DESIGN 3.10)
 cut                        cuts (new resources in the fields)
 killed, preempted,         kills, and for whom (``by``); a kill no decision
 host-lost                  reported (on request, its host left)
 queued                     a victim found no place
 ended                      job ends (``exit_code``, ``oom``)
 exited                     a service's container exited (Swarm restarts it)
 stopped                    services stopped by the replay
 start-failed, vanished     a placement Swarm refused, a task lost outside our control
=========================  ========================================================

Out-of-memory kills (:func:`is_oom`): the event carries ``oom: true`` when the agent saw
Docker's ``OOMKilled`` flag (which also catches a child process the kernel killed); without it,
an exit code of 137 (SIGKILL) is read as one: a job that ended ``failed`` with ``exit_code``
137, or a service whose container exited with code 137.
Nothing else of ours sends SIGKILL to a task whose end the manager records: kills and stops
remove the service first, so the agent's report of that container is stale and dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from domain.events import Event, EventKind

OOM_EXIT_CODE = 137  # 128 + SIGKILL: the kernel's OOM killer
# The manager's event when a placed request's container runs (a history from a manager that
# did not report it yet reads too: placements are then taken to run alpha later).
STARTED_KIND = EventKind.STARTED.value


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    t_wall_s: float
    kind: EventKind
    text: str  # the event's reason, for logs only
    status: str | None = None
    host: str | None = None
    cpu_shares: int | None = None
    memory_bytes: int | None = None
    exit_code: int | None = None
    beneficiary: str | None = None  # KILLED, PREEMPTED: the request it made room for
    pass_name: str | None = None  # PLACED: the policy's pass, else the policy's name
    oom: bool = False  # the agent saw Docker's OOMKilled flag
    started: bool = False  # its container runs (STARTED_KIND)


def classify(obj: Mapping[str, object]) -> HistoryEvent:
    """One history entry as a value; an unknown kind is OTHER (never an error)."""
    event = Event.from_json(obj)
    return HistoryEvent(
        t_wall_s=event.t if event.t is not None else 0.0,
        kind=event.kind,
        text=event.reason,
        status=event.status,
        host=event.host,
        cpu_shares=event.cpu_shares,
        memory_bytes=event.memory,
        exit_code=event.exit_code,
        beneficiary=event.by,
        pass_name=event.pass_ or event.policy,
        oom=event.oom is True,
        started=event.kind is EventKind.STARTED,
    )


def is_oom(event: HistoryEvent) -> bool:
    """A task killed for lack of memory: the agent's OOMKilled flag, or else exit code 137
    (see the module docstring; the flag also catches a killed child process)."""
    return event.kind in (EventKind.ENDED, EventKind.EXITED) and (
        event.oom or event.exit_code == OOM_EXIT_CODE
    )
