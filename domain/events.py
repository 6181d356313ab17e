"""A request's history as typed events (DESIGN 10): what happened is data, the prose is for people.

Every entry of a request's history is one event of one kind, its own type with exactly the
fields that kind carries (a tagged union, as kopf's causes): :data:`Event` is the union, each
kind a frozen dataclass with a ``kind`` tag. Its ``reason`` is a sentence for people and nothing
parses it. The manager writes them (manager/records.py), the CLI, the replay, the dashboard and
the SLO tally read them.

JSON form: ``{"t": epoch seconds, "kind": ..., "reason": ..., <the kind's fields>}``, with only
the fields that are set; one codec (:meth:`EventBase.to_json`, :func:`event_from_json`) for
every kind, driven by the classes' fields. A field's JSON name is its Python name, but for
``pass_`` (JSON ``pass``: a Python keyword gets a trailing underscore, PEP 8's rule, the same as
``Decision.pass_``). The fields of the record that an entry changed (``status``, ``host``,
``service_id``, ``cpu_shares``, ``memory``, ``cut_received``, ``kills``, ``cluster``,
``host_name``) are fields of the kinds that change them: the records add them when they write
the entry (:func:`with_changes`).

An entry of a kind this version does not know (a later version's, or damaged) reads as
:class:`Other`, which keeps the object as it was: a history is read, never refused.

Adding a kind: a member of :class:`EventKind`, its class below (a ``kind`` tag and its fields,
each of a type the codec reads: see ``_READERS``), and its name in the :data:`Event` union, which
is the registration.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import Enum, StrEnum
from typing import Any, ClassVar, Literal, TypeAlias, get_args

from domain.lifecycle import RequestStatus


class EventKind(StrEnum):
    SUBMITTED = "submitted"
    QUEUED = "queued"
    PLACED = "placed"
    STARTED = "started"
    REJECTED = "rejected"
    START_FAILED = "start-failed"
    CUT = "cut"
    RESTORED = "restored"
    KILLED = "killed"
    PREEMPTED = "preempted"
    HOST_LOST = "host-lost"
    EXITED = "exited"
    ENDED = "ended"
    STOPPED = "stopped"
    VANISHED = "vanished"
    SWARM = "swarm"
    OFFLOADED = "offloaded"
    NOT_OFFLOADED = "not-offloaded"
    # a host's power (DESIGN 3.15): written to the event stream with the host, not a request
    SWITCHING_OFF = "switching-off"
    SWITCHED_OFF = "switched-off"
    SWITCHING_ON = "switching-on"
    SWITCHED_ON = "switched-on"
    SWITCH_FAILED = "switch-failed"
    SWITCH_ADVISED = "switch-advised"
    MOVE_STARTED = "move-started"
    MOVED = "moved"
    MOVE_UNDONE = "move-undone"
    # Overload (DESIGN 3.13, 3.14):
    REFUSED_AT_ADMISSION = "refused-at-admission"
    SUSPENDED = "suspended"
    RESUMED = "resumed"
    CHECKPOINT_RESTART = "checkpoint-restart"
    OTHER = "other"  # an entry whose kind is not known (never an error)


@dataclass(frozen=True, slots=True)
class EventBase:
    """What every kind has: a sentence for people, and when (None: the moment it is
    recorded)."""

    kind: ClassVar[EventKind]  # each kind's tag
    reason: str = ""
    _: KW_ONLY
    t: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.t, "kind": self.kind.value, "reason": self.reason}
        for name, key, _ in _CODEC[type(self)]:
            value = getattr(self, name)
            if value is None or value == ():
                continue
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Enum):
                value = value.value
            out[key] = value
        return out


# -- the kinds --------------------------------------------------------------------------------
# Fields that change the record: status (the request's status after it), cpu_shares and memory
# (its resources after it), cut_received (its total cut, an exact fraction such as "1/6"),
# kills (its kill count after it), service_id, host; each kind has those its writers set.


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted(EventBase):
    """Accepted and recorded."""

    kind: ClassVar[Literal[EventKind.SUBMITTED]] = EventKind.SUBMITTED


@dataclass(frozen=True, slots=True, kw_only=True)
class Queued(EventBase):
    """Waits in the pending queue, with its original resources again."""

    kind: ClassVar[Literal[EventKind.QUEUED]] = EventKind.QUEUED
    queue_reason: str | None = None  # queued (asked to), victim, host-lost (PendingReason)
    status: RequestStatus | None = None
    cpu_shares: int | None = None
    memory: int | None = None
    cut_received: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Placed(EventBase):
    """Booked on a host and its service created."""

    kind: ClassVar[Literal[EventKind.PLACED]] = EventKind.PLACED
    host: str | None = None
    pass_: str | None = None  # the energy policy's pass (JSON "pass")
    policy: str | None = None  # the policy that decided
    victims: tuple[str, ...] = ()  # the tasks killed to make room for it
    cuts: tuple[str, ...] = ()  # the tasks cut to make room for it
    service_id: str | None = None
    status: RequestStatus | None = None
    cpu_shares: int | None = None
    memory: int | None = None
    cut_received: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Started(EventBase):
    """Its container runs on the host it was placed on (``t``: when Swarm says it started)."""

    kind: ClassVar[Literal[EventKind.STARTED]] = EventKind.STARTED
    host: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected(EventBase):
    """Refused at once (no pass placed it, or Swarm could not, or a peer refused it)."""

    kind: ClassVar[Literal[EventKind.REJECTED]] = EventKind.REJECTED
    policy: str | None = None  # the policy that refused it
    cluster: str | None = None  # the peer cluster that refused it
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StartFailed(EventBase):
    """Booked, but its service could not be created."""

    kind: ClassVar[Literal[EventKind.START_FAILED]] = EventKind.START_FAILED
    host: str | None = None
    cluster: str | None = None  # in a peer cluster (mirrored, DESIGN 12)
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cut(EventBase):
    """Its resources shrank to make room for another request (or the node applied a booked
    cut later)."""

    kind: ClassVar[Literal[EventKind.CUT]] = EventKind.CUT
    host: str | None = None
    by: str | None = None  # the request it made room for
    applied: bool | None = None  # False: booked, the node has not applied it yet
    cpu_shares: int | None = None
    memory: int | None = None
    cut_received: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored(EventBase):
    """A cut given back (DESIGN 3.8)."""

    kind: ClassVar[Literal[EventKind.RESTORED]] = EventKind.RESTORED
    host: str | None = None
    applied: bool | None = None  # False: booked, the node has not applied it yet
    cpu_shares: int | None = None
    memory: int | None = None
    cut_received: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Killed(EventBase):
    """Taken off its host to make room (``by``), or on request; rescheduled."""

    kind: ClassVar[Literal[EventKind.KILLED]] = EventKind.KILLED
    host: str | None = None
    by: str | None = None  # the request it made room for
    kills: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Preempted(EventBase):
    """Taken off its host by the QoS-driven policy; back to the queue."""

    kind: ClassVar[Literal[EventKind.PREEMPTED]] = EventKind.PREEMPTED
    host: str | None = None
    by: str | None = None  # the request it made room for
    kills: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLost(EventBase):
    """Its host left the Swarm (Down, removed, drained, back under a new id); rescheduled."""

    kind: ClassVar[Literal[EventKind.HOST_LOST]] = EventKind.HOST_LOST
    host: str | None = None
    host_name: str | None = None  # its host's hostname (the host is gone after it)
    kills: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Exited(EventBase):
    """A service's container exited; Swarm restarts it."""

    kind: ClassVar[Literal[EventKind.EXITED]] = EventKind.EXITED
    exit_code: int | None = None
    oom: bool | None = None  # Docker's OOMKilled flag


@dataclass(frozen=True, slots=True, kw_only=True)
class Ended(EventBase):
    """Its run is over: a job finished or failed, or Swarm ended it."""

    kind: ClassVar[Literal[EventKind.ENDED]] = EventKind.ENDED
    host: str | None = None  # where Swarm ran or refused it (the 'swarm' policy, a refusal)
    exit_code: int | None = None
    oom: bool | None = None  # Docker's OOMKilled flag
    cluster: str | None = None  # in a peer cluster (mirrored, DESIGN 12)
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Stopped(EventBase):
    """Stopped by the client."""

    kind: ClassVar[Literal[EventKind.STOPPED]] = EventKind.STOPPED
    cluster: str | None = None  # the peer cluster it ran in
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Vanished(EventBase):
    """Its service disappeared from the Swarm."""

    kind: ClassVar[Literal[EventKind.VANISHED]] = EventKind.VANISHED
    cluster: str | None = None  # in a peer cluster (mirrored, DESIGN 12)
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Swarm(EventBase):
    """The 'swarm' policy: handed to Swarm's own scheduler (no host), or Swarm started it
    (``host``)."""

    kind: ClassVar[Literal[EventKind.SWARM]] = EventKind.SWARM
    host: str | None = None
    policy: str | None = None
    service_id: str | None = None
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Offloaded(EventBase):
    """Forwarded to a peer cluster, which placed it (or queued it: no host) (DESIGN 12)."""

    kind: ClassVar[Literal[EventKind.OFFLOADED]] = EventKind.OFFLOADED
    cluster: str | None = None  # the peer cluster it runs in
    host: str | None = None  # its host there
    host_name: str | None = None  # that host's name, as the peer said
    status: RequestStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NotOffloaded(EventBase):
    """Meant for a peer, but none took it; decided at home (DESIGN 12)."""

    kind: ClassVar[Literal[EventKind.NOT_OFFLOADED]] = EventKind.NOT_OFFLOADED
    peers_down: tuple[str, ...] = ()  # the peers that were down


# -- a host's power (DESIGN 3.15) ---------------------------------------------------------------
# Host events: the event stream carries them with the host instead of a request
# (RequestRecords.host_event). ``power_reason`` is the power manager's (domain.power.PowerReason:
# idle, request, spare-room, min-on); a backend's result (exit status, output, how long) is in
# the event that ends the switch.


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchingOff(EventBase):
    """The power manager switches the host off: drained, then off (``shutting-down``)."""

    kind: ClassVar[Literal[EventKind.SWITCHING_OFF]] = EventKind.SWITCHING_OFF
    host: str | None = None
    host_name: str | None = None
    power_reason: str | None = None
    backend: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchedOff(EventBase):
    """The backend switched the host off (``off``)."""

    kind: ClassVar[Literal[EventKind.SWITCHED_OFF]] = EventKind.SWITCHED_OFF
    host: str | None = None
    host_name: str | None = None
    backend: str | None = None
    exit_status: int | None = None  # the command backend's
    output: str | None = None  # the command backend's (its end)
    duration_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchingOn(EventBase):
    """The power manager switches the host on (``booting``), for a waiting request or the
    spare room."""

    kind: ClassVar[Literal[EventKind.SWITCHING_ON]] = EventKind.SWITCHING_ON
    host: str | None = None
    host_name: str | None = None
    power_reason: str | None = None
    for_request: str | None = None  # the request that waits for it ("request" names the
    # request an entry of the event stream is of: empty for a host event)
    backend: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchedOn(EventBase):
    """The backend switched the host on and it takes work (``on``)."""

    kind: ClassVar[Literal[EventKind.SWITCHED_ON]] = EventKind.SWITCHED_ON
    host: str | None = None
    host_name: str | None = None
    backend: str | None = None
    exit_status: int | None = None
    output: str | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchFailed(EventBase):
    """A switch failed; the host is in the state the event's ``state`` says."""

    kind: ClassVar[Literal[EventKind.SWITCH_FAILED]] = EventKind.SWITCH_FAILED
    host: str | None = None
    host_name: str | None = None
    backend: str | None = None
    op: str | None = None  # on, off
    state: str | None = None  # the host's power state after it
    exit_status: int | None = None
    output: str | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchAdvised(EventBase):
    """The ``advise`` backend: the power manager would switch the host (nothing is done)."""

    kind: ClassVar[Literal[EventKind.SWITCH_ADVISED]] = EventKind.SWITCH_ADVISED
    host: str | None = None
    host_name: str | None = None
    action: str | None = None  # switch-on, switch-off
    power_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveStarted(EventBase):
    """Consolidation started to move a service make-before-break (DESIGN 3.15): booked on
    ``target`` from now, Swarm asked to start its new container there before the old one on
    ``host`` stops. A ``moved`` or a ``move-undone`` event ends it."""

    kind: ClassVar[Literal[EventKind.MOVE_STARTED]] = EventKind.MOVE_STARTED
    host: str | None = None  # the host it runs on until the move is done
    target: str | None = None  # the host it moves to
    cpu_shares: int | None = None
    memory: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved(EventBase):
    """A service moved make-before-break by consolidation (DESIGN 3.15): its new container ran
    before the old one stopped; it never stopped."""

    kind: ClassVar[Literal[EventKind.MOVED]] = EventKind.MOVED
    host: str | None = None  # the host it runs on now
    source: str | None = None  # the host it left
    cpu_shares: int | None = None
    memory: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveUndone(EventBase):
    """A consolidation move that did not happen (DESIGN 3.15): Swarm refused the new container
    or it did not run on ``target`` in time; the service stays on ``host``, where it ran all
    along."""

    kind: ClassVar[Literal[EventKind.MOVE_UNDONE]] = EventKind.MOVE_UNDONE
    host: str | None = None  # the host it stays on
    target: str | None = None  # the host it was to move to


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusedAtAdmission(EventBase):
    """Not admitted (DESIGN 3.13): no record is made, the events stream says it. Its class's
    SLO-weighted demand of ``resource`` (shares or bytes) against the room that class books."""

    kind: ClassVar[Literal[EventKind.REFUSED_AT_ADMISSION]] = EventKind.REFUSED_AT_ADMISSION
    resource: str | None = None  # "cpu" or "memory"
    demand: float | None = None
    room: float | None = None
    retry_after_s: float | None = None  # the Retry-After it was given


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspended(EventBase):
    """Paused on its host to make room (``docker pause``, DESIGN 3.14), its memory kept."""

    kind: ClassVar[Literal[EventKind.SUSPENDED]] = EventKind.SUSPENDED
    host: str | None = None
    by: str | None = None  # the request it made room for
    applied: bool | None = None  # False: booked, the node has not paused it yet


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed(EventBase):
    """Runs again on the host it was paused on (``docker unpause``), its work kept."""

    kind: ClassVar[Literal[EventKind.RESUMED]] = EventKind.RESUMED
    host: str | None = None
    applied: bool | None = None  # False: booked, the node has not unpaused it yet


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRestart(EventBase):
    """Killed, it runs again from its last checkpoint (DESIGN 3.14)."""

    kind: ClassVar[Literal[EventKind.CHECKPOINT_RESTART]] = EventKind.CHECKPOINT_RESTART
    host: str | None = None
    kept_s: float | None = None  # the running time its checkpoint kept


@dataclass(frozen=True, slots=True)
class Other:
    """An entry whose kind this version does not know (a later version's, or damaged), kept as
    it was read: written back and served unchanged (but with a ``kind`` of ``other`` when it
    names none: every served event has a kind)."""

    kind: ClassVar[Literal[EventKind.OTHER]] = EventKind.OTHER
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def t(self) -> float | None:
        return _number(self.raw.get("t"))

    @property
    def reason(self) -> str:
        return _text(self.raw.get("reason")) or ""

    def to_json(self) -> dict[str, Any]:
        if isinstance(self.raw.get("kind"), str):
            return dict(self.raw)
        return {**self.raw, "kind": EventKind.OTHER.value}


# The registration: every kind is one member of this union.
Event: TypeAlias = (
    Submitted | Queued | Placed | Started | Rejected | StartFailed | Cut | Restored | Killed
    | Preempted | HostLost | Exited | Ended | Stopped | Vanished | Swarm | Offloaded
    | NotOffloaded | SwitchingOff | SwitchedOff | SwitchingOn | SwitchedOn | SwitchFailed
    | SwitchAdvised | MoveStarted | Moved | MoveUndone | RefusedAtAdmission | Suspended | Resumed
    | CheckpointRestart | Other
)
# The kinds of a host's power: host events, never in a request's history.
PowerEvent: TypeAlias = (
    SwitchingOff | SwitchedOff | SwitchingOn | SwitchedOn | SwitchFailed | SwitchAdvised)


# -- the codec ------------------------------------------------------------------------------


def event_from_json(obj: Mapping[str, Any]) -> Event:
    """An entry as :meth:`EventBase.to_json` writes it (with the record's fields it changed);
    a malformed value is dropped, an unknown kind is :class:`Other`: read, never refused."""
    raw_kind = obj.get("kind")
    cls = _TYPES.get(raw_kind) if isinstance(raw_kind, str) else None
    if cls is None:
        return Other(dict(obj))
    values: dict[str, Any] = {"reason": _text(obj.get("reason")) or "",
                              "t": _number(obj.get("t"))}
    for name, key, read in _CODEC[cls]:
        value = read(obj.get(key))
        if value is not None:
            values[name] = value
    event: Event = cls(**values)
    return event


def with_changes(event: Event, t: float, changes: Mapping[str, Any]) -> Event:
    """The event as the records write it: dated ``t``, with the record's fields it changed
    (``changes``, by their field names). A field its kind does not have is a mistake of the
    writer: TypeError, before anything is written."""
    if isinstance(event, Other):
        plain = {k: v.value if isinstance(v, Enum) else v for k, v in changes.items()}
        return Other({**event.raw, "t": t, **plain})
    missing = set(changes) - {name for name, _, _ in _CODEC[type(event)]}
    if missing:
        raise TypeError(f"a {event.kind.value} event has no field {', '.join(sorted(missing))}")
    return dataclasses.replace(event, t=t, **changes)


def in_cluster(kind: EventKind, reason: str, cluster: str) -> Event:
    """A peer cluster's final event mirrored here (DESIGN 12): of its kind, in ``cluster``
    (a kind without a ``cluster`` field is kept as the object it would write)."""
    cls = _TYPES.get(kind.value)
    if cls is not None and any(name == "cluster" for name, _, _ in _CODEC[cls]):
        event: Event = cls(reason, cluster=cluster)
        return event
    return Other({"kind": kind.value, "reason": reason, "cluster": cluster})


def status_after(event: Event) -> RequestStatus | None:
    """The request's status after ``event``, when the event moved it (a kind that moves it
    has a ``status`` field)."""
    value = getattr(event, "status", None)
    return value if isinstance(value, RequestStatus) else None


def host_of(event: Event) -> str | None:
    """The host an event names (where it happened, or the host it left), when its kind has
    one."""
    value = getattr(event, "host", None)
    return value if isinstance(value, str) else None


def host_name_of(event: Event) -> str | None:
    """That host's name as the server gave it (a host that left, a peer's host), when its kind
    has one."""
    value = getattr(event, "host_name", None)
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
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


def _texts(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(item for item in value if isinstance(item, str))


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _status(value: object) -> RequestStatus | None:
    try:
        return RequestStatus(value) if isinstance(value, str) else None
    except ValueError:
        return None


# How a field of each type is read from JSON (by its annotation: the module's annotations are
# strings). A new kind may use these types; a new type needs its reader here.
_READERS: dict[str, Callable[[object], Any]] = {
    "str | None": _text,
    "int | None": _int,
    "float | None": _number,
    "bool | None": _flag,
    "tuple[str, ...]": _texts,
    "RequestStatus | None": _status,
}
_BASE_FIELDS = frozenset({"reason", "t"})


def _codec(cls: type) -> tuple[tuple[str, str, Callable[[object], Any]], ...]:
    """Each field of a kind but the common ones: its Python name, JSON name and reader."""
    out = []
    for item in dataclasses.fields(cls):
        if item.name in _BASE_FIELDS:
            continue
        read = _READERS.get(str(item.type))
        if read is None:
            raise TypeError(f"{cls.__name__}.{item.name}: no reader for {item.type}")
        out.append((item.name, item.name.removesuffix("_"), read))
    return tuple(out)


_KNOWN: tuple[type[EventBase], ...] = tuple(c for c in get_args(Event) if c is not Other)
_CODEC: dict[type, tuple[tuple[str, str, Callable[[object], Any]], ...]] = {
    cls: _codec(cls) for cls in _KNOWN}
_TYPES: dict[str, Any] = {cls.kind.value: cls for cls in _KNOWN}
