"""A request's history events (``GET /requests/{id}``) as typed values (pure: no I/O).

The manager (manager/core.py) appends one event per change to a request's record: ``{"t":
epoch seconds, "event": text, ...fields}``, where the fields are those the change set
(``status``, ``host``, ``cpu_shares``, ``memory``, ``cut_received``, ``exit_code``, ``kills``).
:func:`classify` reads the kind from the text's fixed beginning and the values from the fields:

=========================================  ================  ==================================
 event text begins with                     kind              used for
=========================================  ================  ==================================
 ``submitted``                              SUBMITTED         server-side decision time
 ``placed: <pass> pass: ...`` (energy) /    PLACED            placements and reschedules
 ``placed: <policy>: host ...`` (baselines)
 ``cut to ...``                             CUT               cuts (new resources in fields)
 ``killed ... to make room for <id>``       KILLED            kills, and for whom
 ``killed`` (host left, on request)         KILLED            kills no decision reported
 ``waiting in the pending queue``           WAITING           a victim found no place
 ``ended: <status>``                        ENDED             job ends (``exit_code``)
 ``container exited (code N)``              EXITED            a service's container exited
                                                              (Swarm restarts it)
 ``stopped by the client``                  STOPPED           services stopped by the replay
 ``could not start on``                     START_FAILED      a placement Swarm refused
 ``its service disappeared``                VANISHED          a task lost outside our control
 anything else with status ``rejected``     REJECTED          a refused new request
=========================================  ================  ==================================

Out-of-memory kills (:func:`is_oom`): the event carries ``oom: true`` when the agent saw
Docker's ``OOMKilled`` flag (which also catches a child process the kernel killed); without it,
an exit code of 137 (SIGKILL) is read as one: a job that ended ``failed`` with ``exit_code``
137, or a service whose container exited with code 137.
Nothing else of ours sends SIGKILL to a task whose end the manager records: kills and stops
remove the service first, so the agent's report of that container is stale and dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

OOM_EXIT_CODE = 137  # 128 + SIGKILL: the kernel's OOM killer

_PLACED_PASS = re.compile(r"^placed: (\w+) pass:")
_PLACED_POLICY = re.compile(r"^placed: (\w+): ")
_ROOM_FOR = re.compile(r"to make room for (\S+)\s*$")
_EXIT_CODE = re.compile(r"\((?:exit )?code (-?\d+)\)")


class EventKind(StrEnum):
    SUBMITTED = "submitted"
    PLACED = "placed"
    CUT = "cut"
    KILLED = "killed"
    WAITING = "waiting"
    ENDED = "ended"
    EXITED = "exited"
    STOPPED = "stopped"
    START_FAILED = "start-failed"
    VANISHED = "vanished"
    REJECTED = "rejected"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    t_wall_s: float
    kind: EventKind
    text: str
    status: str | None = None
    host: str | None = None
    cpu_shares: int | None = None
    memory_bytes: int | None = None
    exit_code: int | None = None
    beneficiary: str | None = None  # KILLED: the request it made room for
    pass_name: str | None = None  # PLACED: "simple", "cut", "kill" or a baseline's name
    oom: bool = False  # the agent saw Docker's OOMKilled flag


# The beginning of an event's text and its kind, in the order of the table above.
_PREFIXES: tuple[tuple[str, EventKind], ...] = (
    ("placed", EventKind.PLACED),
    ("cut to", EventKind.CUT),
    ("killed", EventKind.KILLED),
    ("waiting in the pending queue", EventKind.WAITING),
    ("ended:", EventKind.ENDED),
    ("container exited", EventKind.EXITED),
    ("stopped by the client", EventKind.STOPPED),
    ("could not start", EventKind.START_FAILED),
    ("its service disappeared", EventKind.VANISHED),
)


def _int(value: object) -> int | None:
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


def classify(obj: Mapping[str, object]) -> HistoryEvent:
    """One history event as a value; unknown texts are OTHER (never an error)."""
    raw_t = obj.get("t")
    t = float(raw_t) if isinstance(raw_t, int | float) and not isinstance(raw_t, bool) else 0.0
    if not math.isfinite(t):
        t = 0.0
    text = str(obj.get("event", ""))
    status = _text(obj.get("status"))
    exit_code = _int(obj.get("exit_code"))
    beneficiary = None
    pass_name = None
    if text == "submitted":
        kind = EventKind.SUBMITTED
    else:
        kind = next((k for prefix, k in _PREFIXES if text.startswith(prefix)), EventKind.OTHER)
        if kind is EventKind.OTHER and status == "rejected":
            kind = EventKind.REJECTED
    if kind is EventKind.PLACED:
        match = _PLACED_PASS.match(text) or _PLACED_POLICY.match(text)
        pass_name = match.group(1) if match else None
    elif kind is EventKind.KILLED:
        room = _ROOM_FOR.search(text)
        beneficiary = room.group(1) if room else None
    if exit_code is None and kind in (EventKind.ENDED, EventKind.EXITED):
        found = _EXIT_CODE.search(text)
        exit_code = int(found.group(1)) if found else None
    return HistoryEvent(
        t_wall_s=t,
        kind=kind,
        text=text,
        status=status,
        host=_text(obj.get("host")),
        cpu_shares=_int(obj.get("cpu_shares")),
        memory_bytes=_int(obj.get("memory")),
        exit_code=exit_code,
        beneficiary=beneficiary,
        pass_name=pass_name,
        oom=obj.get("oom") is True,
    )


def is_oom(event: HistoryEvent) -> bool:
    """A task killed for lack of memory: the agent's OOMKilled flag, or else exit code 137
    (see the module docstring; the flag also catches a killed child process)."""
    return event.kind in (EventKind.ENDED, EventKind.EXITED) and (
        event.oom or event.exit_code == OOM_EXIT_CODE
    )
