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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain.events import Event, EventKind, Offloaded, Placed, Queued, Swarm
from domain.slo import Phase, ServiceClock, ServiceLevel

_STOPS = frozenset({EventKind.KILLED, EventKind.PREEMPTED, EventKind.HOST_LOST})
_ENDS = frozenset({EventKind.REJECTED, EventKind.ENDED, EventKind.STOPPED, EventKind.VANISHED})


def checkpoint_interval_of(spec: Mapping[str, Any]) -> float:
    """A request spec's checkpoint interval (DESIGN 3.14), 0 when it does not checkpoint."""
    value = spec.get("checkpoint_interval_s")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return 0.0
    return float(value)


def service_level(
    history: Sequence[Event], *, now: float, objective: float, alpha_s: float, is_job: bool,
    checkpoint_interval_s: float = 0.0,
) -> ServiceLevel | None:
    """The request's figures at ``now`` (or at its end); None without a dated ``submitted``.
    ``checkpoint_interval_s``: a checkpointable job's (its spec's)."""
    replayed = _replay(history, alpha_s=alpha_s, is_job=is_job,
                       checkpoint_interval_s=checkpoint_interval_s)
    if replayed is None:
        return None
    clock, refused, _ = replayed
    clock.settle(now)
    level = clock.at(max(now, clock.since_s), objective, alpha_s)
    if refused:  # refused at once: it received nothing
        return ServiceLevel(0.0, level.pending_s, 0.0, objective, level.qos, 0.0, 0, 0.0)
    return level


@dataclass(frozen=True, slots=True)
class SloOutlook:
    """Whether a request meets its objective (A >= sigma) as of its last event, and the moments
    after it when that changes if nothing else happens: A falls while it waits and rises while
    it runs, so a waiting request stops meeting it and a running one may start to. At most two
    changes: an allocation that is not measured falls, then rises once its start is due."""

    final: bool  # it is over: its verdict is for good
    meets: bool
    flips: tuple[float, ...]

    def meets_at(self, t: float) -> bool:
        return self.meets != (sum(1 for f in self.flips if f <= t) % 2 == 1)


def slo_outlook(
    history: Sequence[Event], *, objective: float, alpha_s: float, is_job: bool,
    checkpoint_interval_s: float = 0.0,
) -> SloOutlook | None:
    """The request's verdict from its history (DESIGN 3.10: it met its SLO if A >= sigma when
    it ended; a request refused at once missed it); None without a dated ``submitted``.
    What :func:`service_level` says at any later moment, from its last event on."""
    replayed = _replay(history, alpha_s=alpha_s, is_job=is_job,
                       checkpoint_interval_s=checkpoint_interval_s)
    if replayed is None:
        return None
    clock, refused, last_t = replayed
    if refused:
        return SloOutlook(True, False, ())
    level = clock.at(max(last_t, clock.since_s), objective, alpha_s)
    meets = level.availability >= objective
    if clock.phase is Phase.DONE:
        return SloOutlook(True, meets, ())
    # g = e - sigma (e + p): A >= sigma while g >= 0; it moves at a constant rate per phase
    g = level.executed_s - objective * (level.executed_s + level.pending_s)
    segments: list[tuple[float, float, float]] = []  # (from, to, rate of g)
    start = max(last_t, clock.since_s)
    if clock.phase is Phase.ALLOCATING and clock.starts_at_s is not None:
        due = max(start, clock.starts_at_s)
        segments.append((start, due, _rate(clock, Phase.ALLOCATING, objective)))
        segments.append((due, math.inf, 1.0 - objective))
    else:
        segments.append((start, math.inf, _rate(clock, clock.phase, objective)))
    flips: list[float] = []
    now_meets = g >= 0
    for begin, end, rate in segments:
        if (now_meets and rate < 0) or (not now_meets and rate > 0):
            at = begin + (-g / rate if rate else math.inf)
            if at < end:
                flips.append(at)
                now_meets = not now_meets
        if end < math.inf:
            g += rate * (end - begin)
    return SloOutlook(False, meets, tuple(flips))


def _rate(clock: ServiceClock, phase: Phase, objective: float) -> float:
    """How fast e - sigma (e + p) moves in ``phase``: e grows while it runs, p while it waits
    (and while a placement after its first allocates); nothing moves in its first allocation."""
    if phase is Phase.RUNNING:
        return 1.0 - objective
    if phase in (Phase.NEW, Phase.WAITING, Phase.SUSPENDED) or (
            phase is Phase.ALLOCATING and clock.placements > 1):
        return -objective
    return 0.0


def _replay(
    history: Sequence[Event], *, alpha_s: float, is_job: bool, checkpoint_interval_s: float = 0.0,
) -> tuple[ServiceClock, bool, float] | None:
    """The request's clock after its events (time order), whether it was refused at once, and
    its last event's moment; None without a dated ``submitted`` first."""
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
    last_t = first_t
    for event in events[1:]:
        t = event.t
        assert t is not None
        last_t = t
        clock.settle(t)
        kind = event.kind
        if isinstance(event, Queued) or (isinstance(event, Swarm) and not event.host):
            waited = True  # in our queue, or in Swarm's (the 'swarm' policy)
        elif isinstance(event, Placed) or (isinstance(event, (Swarm, Offloaded)) and event.host):
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
    clock.settle(last_t)
    return clock, refused, last_t
