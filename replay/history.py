"""A request's history events (``GET /requests/{id}``) as the replay reads them (pure: no I/O).

The manager records typed events (domain.events): ``{"t": epoch seconds, "kind": ..., "reason":
text for people, ...the kind's fields}``. The replay reads each entry as its kind's type
(``domain.events.event_from_json``) and its typed fields; nothing here reads the text:

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

from domain.events import Ended, Event, Exited

OOM_EXIT_CODE = 137  # 128 + SIGKILL: the kernel's OOM killer


def is_oom(event: Event) -> bool:
    """A task killed for lack of memory: the agent's OOMKilled flag, or else exit code 137
    (see the module docstring; the flag also catches a killed child process)."""
    return isinstance(event, Ended | Exited) and (
        event.oom is True or event.exit_code == OOM_EXIT_CODE
    )
