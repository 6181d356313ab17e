"""Per-class SLO fulfilment (DESIGN 3.10, 11), kept in Redis as records change.

Every write to a request record (manager/records.py) stages the request's new verdict in the
same transaction: its history replayed once (domain.service_history.slo_outlook) gives whether
it met its objective (it is over) or meets it now, and the moments at which that changes if
nothing else happens (A falls while a request waits, rises while it runs). So a scrape or the
dashboard reads a few counters and counts the changes due by now, whatever the number of
requests, and never walks a history.

=====================================  ========================================================
 key                                    holds
=====================================  ========================================================
 ``{p}:slo:tally``                      hash: ``{class}:{state}`` -> how many requests are in
                                        it as of their last event (states: met, missed for the
                                        requests that are over; meeting, missing for the rest)
                                        ``{class}:{kind}`` -> how many events of that kind
                                        (suspended, resumed, checkpoint-restart: DESIGN 3.14)
                                        its requests' histories hold
 ``{p}:slo:flip:{class}:{state}:{n}``   sorted set: active requests counted in ``state``
                                        (meeting or missing) by the moment of their n-th change
                                        (n = 1, 2)
 ``{p}:slo:basis``                      string: the objectives and alpha the tally was made
                                        with; another basis rebuilds it from the records
 ``{p}:request:{id}`` field ``slo``     the ``{class}:{state}`` it is counted in
=====================================  ========================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.classes import CLASSES
from domain.events import Event, EventKind
from domain.model import TaskType
from domain.service_history import SloOutlook, checkpoint_interval_of, slo_outlook
from domain.slo import SloTable

TALLY_VERSION = 2  # 2: the preemption events counted per class
# kinds counted per class (DESIGN 3.14: shown on the dashboard beside the SLO)
COUNTED_KINDS = (EventKind.SUSPENDED, EventKind.RESUMED, EventKind.CHECKPOINT_RESTART)


class SloState(StrEnum):
    MET = "met"  # over, and it met its objective
    MISSED = "missed"  # over, and it did not
    MEETING = "meeting"  # active, meeting it now
    MISSING = "missing"  # active, not meeting it now


_ACTIVE = (SloState.MEETING, SloState.MISSING)


@dataclass(frozen=True, slots=True)
class ClassFulfilment:
    """One class's requests by state, now."""

    cls: int
    objective: float
    met: int
    missed: int
    meeting: int
    missing: int
    suspensions: int = 0  # its requests paused on their hosts (DESIGN 3.14)
    resumes: int = 0
    checkpoint_restarts: int = 0  # placed again after a kill, from a checkpoint

    @property
    def total(self) -> int:
        return self.met + self.missed + self.meeting + self.missing

    @property
    def fulfilment(self) -> float | None:
        """The share of its requests that met, or are meeting, their objective (None: none)."""
        return (self.met + self.meeting) / self.total if self.total else None

    def to_json(self) -> dict[str, Any]:
        share = self.fulfilment
        return {"class": self.cls, "objective": self.objective, "met": self.met,
                "missed": self.missed, "meeting": self.meeting, "missing": self.missing,
                "requests": self.total,
                "fulfilment": None if share is None else round(share, 6),
                "suspensions": self.suspensions, "resumes": self.resumes,
                "checkpoint_restarts": self.checkpoint_restarts}


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where one request is counted: its class, its state and its changes to come."""

    cls: int
    state: SloState
    flips: tuple[float, ...]

    @property
    def bucket(self) -> str:
        return f"{self.cls}:{self.state.value}"


class SloTally:
    def __init__(self, client: Any, prefix: str, slo: SloTable, alpha_s: float) -> None:
        self._redis = client
        self.prefix = prefix
        self.slo = slo
        self.alpha_s = alpha_s

    @property
    def tally_key(self) -> str:
        return f"{self.prefix}:slo:tally"

    @property
    def basis_key(self) -> str:
        return f"{self.prefix}:slo:basis"

    def flip_key(self, cls: int, state: SloState, n: int) -> str:
        return f"{self.prefix}:slo:flip:{cls}:{state.value}:{n}"

    @property
    def basis(self) -> str:
        return json.dumps({"version": TALLY_VERSION, "slo": self.slo.as_dict(),
                           "alpha_s": self.alpha_s}, sort_keys=True)

    # -- one request -------------------------------------------------------------------------

    def verdict(self, spec: Mapping[str, Any], history: Iterable[Event]) -> Verdict | None:
        """The request's verdict after ``history``; None for a record that has none (no class,
        no dated submission), which is not counted."""
        cls = spec.get("class")
        if not isinstance(cls, int) or isinstance(cls, bool) or cls not in CLASSES:
            return None
        outlook: SloOutlook | None = slo_outlook(
            list(history), objective=self.slo.objective(cls), alpha_s=self.alpha_s,
            is_job=spec.get("type") == TaskType.JOB.value,
            checkpoint_interval_s=checkpoint_interval_of(spec))
        if outlook is None:
            return None
        if outlook.final:
            return Verdict(cls, SloState.MET if outlook.meets else SloState.MISSED, ())
        return Verdict(cls, SloState.MEETING if outlook.meets else SloState.MISSING,
                       outlook.flips)

    def stage(self, pipe: Any, request_id: str, record_key: str, old_bucket: str | None,
              new: Verdict | None) -> None:
        """Move the request from ``old_bucket`` to its new verdict, on ``pipe`` (the record's
        own transaction)."""
        if old_bucket:
            pipe.hincrby(self.tally_key, old_bucket, -1)
            cls = old_bucket.partition(":")[0]
            if cls.isdigit():
                for state in _ACTIVE:
                    for n in (1, 2):
                        pipe.zrem(self.flip_key(int(cls), state, n), request_id)
        if new is None:
            pipe.hset(record_key, "slo", "")
            return
        pipe.hincrby(self.tally_key, new.bucket, 1)
        for n, moment in enumerate(new.flips, start=1):
            pipe.zadd(self.flip_key(new.cls, new.state, n), {request_id: moment})
        pipe.hset(record_key, "slo", new.bucket)

    def count_events(self, pipe: Any, spec: Mapping[str, Any], events: Iterable[Event]) -> None:
        """Count, on ``pipe``, the events of ``COUNTED_KINDS`` among ``events`` (written to a
        record of ``spec``) in its class."""
        cls = spec.get("class")
        if not isinstance(cls, int) or isinstance(cls, bool) or cls not in CLASSES:
            return
        for event in events:
            kind = getattr(event, "kind", None)
            if kind in COUNTED_KINDS:
                pipe.hincrby(self.tally_key, f"{cls}:{kind}", 1)

    # -- reading ---------------------------------------------------------------------------

    def classes(self, now: float) -> list[ClassFulfilment]:
        """Each class's requests by state at ``now`` (one round trip)."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self.tally_key)
        for cls in CLASSES:
            for state in _ACTIVE:
                for n in (1, 2):
                    pipe.zcount(self.flip_key(cls, state, n), "-inf", now)
        tally, *due = pipe.execute()
        out = []
        for i, cls in enumerate(CLASSES):
            meet_1, meet_2, miss_1, miss_2 = (int(n) for n in due[4 * i: 4 * i + 4])
            # a request whose first change is due and its second is not has changed state
            stopped = meet_1 - meet_2  # counted meeting, no longer
            started = miss_1 - miss_2  # counted missing, meeting now
            count = {state: int(tally.get(f"{cls}:{state.value}", 0)) for state in SloState}
            events = [int(tally.get(f"{cls}:{kind}", 0)) for kind in COUNTED_KINDS]
            out.append(ClassFulfilment(
                cls, self.slo.objective(cls), count[SloState.MET], count[SloState.MISSED],
                count[SloState.MEETING] - stopped + started,
                count[SloState.MISSING] + stopped - started, *events))
        return out

    # -- (re)building ----------------------------------------------------------------------

    def is_current(self) -> bool:
        return bool(self._redis.get(self.basis_key) == self.basis)

    def clear(self, pipe: Any) -> None:
        pipe.delete(self.tally_key, *(self.flip_key(c, s, n) for c in CLASSES
                                      for s in _ACTIVE for n in (1, 2)))
        pipe.set(self.basis_key, self.basis)
