"""A request's history as typed events (DESIGN 10): what happened is data, the prose is for people.

Every entry of a request's history has a ``kind`` and the structured fields that kind needs; its
``reason`` is a sentence for people and nothing parses it. The manager writes them
(manager/records.py), the CLI and the replay read them, the dashboard shows them.

JSON form: ``{"t": epoch seconds, "kind": ..., "reason": ..., <fields>}``, with only the fields
that are set; the record's own fields that the change set (``status``, ``host``, ``cpu_shares``,
``memory``, ``cut_received``, ``kills``, ``exit_code``) are added by the records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    SUBMITTED = "submitted"  # the request was accepted and recorded
    QUEUED = "queued"  # waits in the pending queue (asked to queue, a victim, its host left)
    PLACED = "placed"  # booked on a host and its service created
    STARTED = "started"  # its container runs on the host it was placed on (t: when Swarm says)
    REJECTED = "rejected"  # refused at once (no pass placed it, or Swarm could not)
    START_FAILED = "start-failed"  # booked, but its service could not be created
    CUT = "cut"  # its resources shrank to make room for another request
    RESTORED = "restored"  # a cut given back (DESIGN 3.8)
    KILLED = "killed"  # taken off its host to make room, or on request; rescheduled
    PREEMPTED = "preempted"  # taken off its host by the QoS-driven policy; back to the queue
    HOST_LOST = "host-lost"  # its host left the Swarm; rescheduled
    EXITED = "exited"  # a service's container exited; Swarm restarts it
    ENDED = "ended"  # its run is over: a job finished or failed, or Swarm ended it
    STOPPED = "stopped"  # stopped by the client
    VANISHED = "vanished"  # its service disappeared from the Swarm
    SWARM = "swarm"  # the 'swarm' policy: handed to Swarm's own scheduler, or Swarm started it
    # (its host and status say which)
    OFFLOADED = "offloaded"  # forwarded to a peer cluster (federation), which placed it there
    NOT_OFFLOADED = "not-offloaded"  # meant for a peer, but none took it; decided at home
    # Overload (DESIGN 3.13, 3.14):
    REFUSED_AT_ADMISSION = "refused-at-admission"  # not admitted: no record, the events stream
    # only (resource, demand, room: its class's SLO-weighted demand against the bookable room)
    SUSPENDED = "suspended"  # paused on its host to make room (docker pause), memory kept
    RESUMED = "resumed"  # runs again on the host it was paused on (docker unpause)
    CHECKPOINT_RESTART = "checkpoint-restart"  # killed, it runs again from its last checkpoint
    # (kept_s: the running time the checkpoint kept)
    OTHER = "other"  # an entry whose kind is not known (never an error)


# The fields an event may carry, besides t, kind and reason.
_FIELDS = ("host", "pass", "policy", "by", "victims", "cuts", "service_id", "status",
           "cpu_shares", "memory", "cut_received", "kills", "exit_code", "oom", "applied",
           "queue_reason", "cluster", "peers_down", "resource", "demand", "room",
           "retry_after_s", "kept_s")


@dataclass(frozen=True, slots=True)
class Event:
    """One history entry. ``t`` None: the moment it is recorded."""

    kind: EventKind
    reason: str = ""
    t: float | None = None
    host: str | None = None
    pass_: str | None = None  # PLACED: the energy policy's pass (JSON "pass")
    policy: str | None = None  # PLACED, REJECTED: the policy that decided
    by: str | None = None  # CUT, KILLED, PREEMPTED: the request it made room for
    victims: tuple[str, ...] = ()  # PLACED: the tasks killed to make room for it
    cuts: tuple[str, ...] = ()  # PLACED: the tasks cut to make room for it
    service_id: str | None = None
    status: str | None = None  # the request's status after it
    cpu_shares: int | None = None  # its resources after it
    memory: int | None = None
    cut_received: str | None = None  # an exact fraction, e.g. "1/6"
    kills: int | None = None  # the record's kill count after it
    exit_code: int | None = None
    oom: bool | None = None  # ENDED, EXITED: Docker's OOMKilled flag
    applied: bool | None = None  # CUT, RESTORED: False when the node has not applied it yet
    queue_reason: str | None = None  # QUEUED: victim, queued or host-lost
    cluster: str | None = None  # OFFLOADED: the peer cluster it runs in (and the record's)
    peers_down: tuple[str, ...] = ()  # NOT_OFFLOADED: the peers that were down
    resource: str | None = None  # REFUSED_AT_ADMISSION: "cpu" or "memory"
    demand: float | None = None  # REFUSED_AT_ADMISSION: SLO-weighted demand (shares, bytes)
    room: float | None = None  # REFUSED_AT_ADMISSION: what its class may book
    retry_after_s: float | None = None  # REFUSED_AT_ADMISSION: the Retry-After it was given
    kept_s: float | None = None  # CHECKPOINT_RESTART: the running time its checkpoint kept

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.t, "kind": self.kind.value, "reason": self.reason}
        for name in _FIELDS:
            value = getattr(self, "pass_" if name == "pass" else name)
            if value is None or value == ():
                continue
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Event:
        """An entry as written by :meth:`to_json` (plus the record's fields); malformed values
        are dropped, an unknown kind is OTHER: a history is read, never refused."""
        raw_kind = obj.get("kind")
        try:
            kind = EventKind(raw_kind) if isinstance(raw_kind, str) else EventKind.OTHER
        except ValueError:
            kind = EventKind.OTHER
        return cls(
            kind=kind,
            reason=_text(obj.get("reason")) or "",
            t=_time(obj.get("t")),
            host=_text(obj.get("host")),
            pass_=_text(obj.get("pass")),
            policy=_text(obj.get("policy")),
            by=_text(obj.get("by")),
            victims=_texts(obj.get("victims")),
            cuts=_texts(obj.get("cuts")),
            service_id=_text(obj.get("service_id")),
            status=_text(obj.get("status")),
            cpu_shares=_int(obj.get("cpu_shares")),
            memory=_int(obj.get("memory")),
            cut_received=_text(obj.get("cut_received")),
            kills=_int(obj.get("kills")),
            exit_code=_int(obj.get("exit_code")),
            oom=obj.get("oom") if isinstance(obj.get("oom"), bool) else None,
            applied=obj.get("applied") if isinstance(obj.get("applied"), bool) else None,
            queue_reason=_text(obj.get("queue_reason")),
            cluster=_text(obj.get("cluster")),
            peers_down=_texts(obj.get("peers_down")),
            resource=_text(obj.get("resource")),
            demand=_time(obj.get("demand")),
            room=_time(obj.get("room")),
            retry_after_s=_time(obj.get("retry_after_s")),
            kept_s=_time(obj.get("kept_s")),
        )


def _time(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: object) -> int | None:
    """An integer field; the records keep numbers as text in their hash, so "42" is 42."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))
