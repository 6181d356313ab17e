"""The values the live replay's parts exchange (pure: no I/O).

:class:`ServiceTarget`: where the clients of a running service connect (the feed tells the
driver, which starts the clients); :class:`RoundResult`: one client round (the clients tell the
driver, which hands it to the feed); :class:`ReplayCounters`: what the replay saw beyond the
recorder's metrics (the feed counts, the driver writes replay.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from measure.stats import Stats
from workloads.trace import Workload


@dataclass(frozen=True, slots=True)
class ServiceTarget:
    """Where the clients of one running service connect."""

    request_id: str
    workload: Workload
    rate: int
    address: str
    port: int
    data_keys: int  # redis: keys key:0 .. key:N-1 exist once it is loaded


@dataclass(frozen=True, slots=True)
class RoundResult:
    """One client round: ``rate`` requests one after the other."""

    at_wall_s: float  # when the round started
    request_id: str
    rate: int
    response_ms: float
    ok: bool
    ready: bool = True  # False: the service did not answer yet (starting, loading its data)


@dataclass(frozen=True, slots=True)
class ReplayCounters:
    """What the replay saw beyond the recorder's metrics (written to replay.json)."""

    submitted: int
    refused_invalid: int  # 400 from the manager: counted as failed allocations
    refused_at_admission: int  # 503 naming the admission (DESIGN 3.13): failed, and SLO misses
    placed: int
    rejected: int
    # new requests the manager queued instead of refusing (--queue-new); probes are left out,
    # as the recorder leaves them out of queued_requests
    queued: int
    queued_placed: int  # of those, placed later by a retry
    client_rtt_ms: Stats
    server_decision_ms: Stats
    reschedules_placed: int
    reschedules_waiting: int
    kills_from_answers: int
    kills_from_history: int
    kills_unreported: int  # no decision made them (host left, kill on request)
    cuts_from_answers: int
    cuts_from_history: int
    cuts_unattributed: int  # seen in a history, never matched to a decision before the end
    jobs_completed: int
    jobs_failed: int
    oom_jobs: int
    oom_services: int
    service_exits: int  # service containers that exited (not 137) and were restarted
    services_stopped: int
    start_failures: int
    vanished: int
    rounds_ok: int
    rounds_failed: int
    rounds_not_ready: int
    rounds_unrecorded: int  # the service's recorded run had ended (OOM) or was unknown
    events: int
    events_after_end: int
    unknown_hosts: tuple[str, ...]
    starts: int = 0  # containers seen to run ('started' events): measured allocation times

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = value.to_json() if isinstance(value, Stats) else (
                list(value) if isinstance(value, tuple) else value
            )
        return out
