"""One bad record never stops the machinery (DESIGN 9).

The reconciliation with the Swarm, the queue's retries and node-loss handling run each record
(a node, a Swarm service, a booked task, what a decision does to one request) through
:meth:`RecordFaults.attempt`: a record that fails is skipped and the others go on. A failing
record is

* logged once, with its id: when it starts failing (or fails with another error), not on every
  pass; at most ``LOG_PER_PASS`` such lines a pass, the rest summed up in one;
* counted on every failure (``greenswarm_reconcile_errors_total``: its rate says that something
  keeps failing);
* listed while it keeps failing (:meth:`RecordFaults.failing`, the manager's health and the
  dashboard's warning), by kind, id, error and since when.

A record stops being listed when it succeeds again, or when it no longer fails: a record that
failed in a reconciliation pass is dropped at the end of the next pass it did not fail in (it
was mended or removed); one that failed elsewhere (a queue retry, an agent's report, a host
removed through the API) after ``window_s`` without failing again.

Runs on the manager's scheduling loop; :meth:`failing` and :attr:`errors_total` are read from
the REST threads (under the lock).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.errors import GreenSwarmError

log = logging.getLogger(__name__)
LOG_PER_PASS = 20  # new failures logged one by one in a pass; the rest in one line
MAX_LISTED = 20  # failing records listed by the health check and the dashboard


@dataclass(frozen=True)
class RecordFault:
    kind: str  # node, service, task or request
    id: str
    error: str
    since: float  # when it started failing (epoch s)
    last: float  # when it last failed
    in_pass: bool  # it last failed during a reconciliation pass

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "error": self.error, "since": self.since}


class RecordFaults:
    def __init__(self, clock: Callable[[], float], counted: Callable[[], None] = lambda: None,
                 window_s: float = 60.0) -> None:
        self._clock = clock
        self._counted = counted  # told of every failure (the Prometheus counter)
        self._window_s = window_s
        self._lock = threading.Lock()
        self._faults: dict[tuple[str, str], RecordFault] = {}
        self._pass_started: float | None = None
        self._logged_in_pass = 0
        self._unlogged = 0
        self._errors_total = 0

    @property
    def errors_total(self) -> int:
        with self._lock:
            return self._errors_total

    def attempt(self, kind: str, record_id: str, action: Callable[[], object]) -> bool:
        """Run ``action`` for one record; False (and the failure noted) when it raised.

        Any exception counts, not only the project's own: a record the code cannot read (a
        damaged hash, a value of the wrong type) must not stop the others either."""
        try:
            action()
        except Exception as exc:  # one record's failure, whatever it is
            self.fail(kind, record_id, str(exc) or type(exc).__name__,
                      unexpected=not isinstance(exc, GreenSwarmError))
            return False
        self.ok(kind, record_id)
        return True

    def fail(self, kind: str, record_id: str, error: str, *, unexpected: bool = False) -> None:
        """Note that one record failed (also for a record found broken without an error)."""
        now = self._clock()
        key = (kind, record_id)
        with self._lock:
            self._errors_total += 1
            known = self._faults.get(key)
            self._faults[key] = RecordFault(kind, record_id, error,
                                            known.since if known else now, now,
                                            self._pass_started is not None)
            first = known is None or known.error != error
            if first and self._logged_in_pass >= LOG_PER_PASS:
                self._unlogged += 1
                first = False
            elif first:
                self._logged_in_pass += 1
        self._counted()
        if first:
            log.warning("%s %s failed, skipped (logged once while it keeps failing): %s",
                        kind, record_id, error, exc_info=unexpected)

    def ok(self, kind: str, record_id: str) -> None:
        with self._lock:
            known = self._faults.pop((kind, record_id), None)
        if known is not None:
            log.info("%s %s works again (it failed since %.0f)", kind, record_id, known.since)

    def forget(self, record_id: str, kind: str | None = None) -> None:
        """The record is gone (removed through the API): nothing of it (of ``kind``, or of any
        kind) is failing any more."""
        with self._lock:
            for key in [k for k in self._faults
                        if k[1] == record_id and kind in (None, k[0])]:
                del self._faults[key]

    def begin_pass(self) -> None:
        with self._lock:
            self._pass_started = self._clock()
            self._logged_in_pass = 0

    def end_pass(self) -> None:
        """Drop what no longer fails: a pass's record that did not fail in this pass, another
        after the window."""
        now = self._clock()
        with self._lock:
            started = self._pass_started if self._pass_started is not None else now
            for key, fault in list(self._faults.items()):
                if (fault.last < started) if fault.in_pass else (fault.last < now
                                                                  - self._window_s):
                    del self._faults[key]
            self._pass_started = None
            unlogged, self._unlogged = self._unlogged, 0
        if unlogged:
            log.warning("%d more records started failing in this pass (not logged one by one; "
                        "the health check lists them)", unlogged)

    def failing(self, limit: int = MAX_LISTED) -> list[RecordFault]:
        """The records failing now, the longest-failing first (at most ``limit``)."""
        with self._lock:
            faults = sorted(self._faults.values(), key=lambda f: (f.since, f.kind, f.id))
        return faults[:limit]
