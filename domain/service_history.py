"""One request's service level (DESIGN 3.10) from its typed history, as the manager serves it.

The manager keeps no clock per request: ``GET /requests/{id}`` replays the request's events
through a :class:`domain.slo.ServiceClock` when asked. What each event means to the clock:

* ``submitted``: admitted (the clock starts);
* ``placed``, ``swarm`` with a host, and ``offloaded`` with a host (a peer cluster placed it on
  its host, DESIGN 12): a host booked for it; the first placement's
  allocation time is free, as for every request, and when it is placed on its arrival (no
  ``queued`` before), the decision's own time since ``submitted`` is part of it;
* ``suspended``, ``resumed``: paused on its host and running again there (DESIGN 3.14): the
  pause is p, nothing is lost;
* ``started``: its container runs (the manager saw Swarm's task running, and dates the event
  when Swarm says it started): the allocation time is measured (DESIGN 3.11). A history with no
  ``started`` at all (written by a manager that did not report starts, or under the ``swarm``
  policy) takes each container to run ``alpha`` after its placement, or at the next event if
  one comes sooner;
* ``killed``, ``preempted``, ``host-lost``: taken off its host, waiting again (a preemption;
  a job loses its run since its last start, which moves from e to p, DESIGN 3.10; a
  checkpointable job only the part since its last checkpoint);
* ``start-failed``: its service could not be created: waiting again, no preemption;
* ``rejected``, ``ended``, ``stopped``, ``vanished``: over. A request refused at once received
  nothing: availability 0, an SLO miss (as in the reports);
* ``queued``: waiting (it was already, from its admission or its removal);
* the rest (``cut``, ``restored``, ``exited``, ``other``) change nothing: a cut task
  runs, and Swarm restarts an exited service's container in place.

Pure: the moment to evaluate at is given.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.events import Event, EventKind
from domain.slo import ServiceClock, ServiceLevel

_STOPS = frozenset({EventKind.KILLED, EventKind.PREEMPTED, EventKind.HOST_LOST})
_ENDS = frozenset({EventKind.REJECTED, EventKind.ENDED, EventKind.STOPPED, EventKind.VANISHED})


def service_level(
    history: Sequence[Event], *, now: float, objective: float, alpha_s: float, is_job: bool,
    checkpoint_interval_s: float = 0.0,
) -> ServiceLevel | None:
    """The request's figures at ``now`` (or at its end); None without a dated ``submitted``.
    ``checkpoint_interval_s``: a checkpointable job's (its spec's)."""
    events = sorted((e for e in history if e.t is not None), key=lambda e: e.t or 0.0)
    if not events or events[0].kind is not EventKind.SUBMITTED:
        return None
    first_t = events[0].t
    assert first_t is not None
    clock = ServiceClock(first_t, checkpoint_interval_s=checkpoint_interval_s if is_job else 0.0)
    measured = any(e.kind is EventKind.STARTED for e in events)
    placed_ever = False
    waited = False  # it waited in the queue (its first placement was not on its arrival)
    refused = False
    for event in events[1:]:
        t = event.t
        assert t is not None
        clock.settle(t)
        kind = event.kind
        if kind is EventKind.QUEUED or (kind is EventKind.SWARM and not event.host):
            waited = True  # in our queue, or in Swarm's (the 'swarm' policy)
        elif kind is EventKind.PLACED or (
                kind in (EventKind.SWARM, EventKind.OFFLOADED) and event.host):
            clock.placed(t, on_arrival=not waited, starts_after_s=None if measured else alpha_s)
            placed_ever = True
        elif kind is EventKind.STARTED:
            clock.running(t)
        elif kind is EventKind.SUSPENDED:
            clock.suspended(t)
        elif kind is EventKind.RESUMED:
            clock.resumed(t)
        elif kind in _STOPS or kind is EventKind.START_FAILED:
            clock.stopped(t, preempted=kind in _STOPS, work_lost=is_job)
        elif kind in _ENDS:
            refused = kind is EventKind.REJECTED and not placed_ever
            clock.ended(t)
            break
    clock.settle(now)
    level = clock.at(max(now, clock.since_s), objective, alpha_s)
    if refused:  # refused at once: it received nothing
        return ServiceLevel(0.0, level.pending_s, 0.0, objective, level.qos, 0.0, 0, 0.0)
    return level
