"""One-off, versioned migrations of the request records in Redis, run by the manager at start.

=============================  ===================================================================
 key                            holds
=============================  ===================================================================
 ``{p}:schema``                 the records' schema version (absent: 1, the first)
 ``{p}:schema:unread``          set: ids of records a migration could not read (left as they
                                were; the manager logs them)
=============================  ===================================================================

Version 2 (typed events): a history entry written before typed events (``{"t", "event": text,
...the record's fields}``) becomes the typed event its text meant (domain.events), its text the
``reason``; the status ``killed-and-rescheduled`` (a request placed again after a kill, for
good: a status is what a request is now, its history says it was killed) becomes ``running`` in
the record, its status set, its history and the events stream. Reading that text here, once, is
the only place anything parses an event's prose.

:func:`migrate` runs before the manager's loop: once (the version is kept, and a database at
the current version is not read again), idempotent (a converted entry is left as it is), and
safe when two managers start at once: each record is rewritten in its own transaction, watched
(a record changed meanwhile is read again), and both reach the same result. A record that
cannot be read (an entry that is not a JSON object) is left whole and reported; nothing is
deleted. A manager of an earlier version must not run beside one that migrated.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from domain.errors import UnavailableError
from domain.events import EventKind, event_from_json
from domain.lifecycle import RequestStatus
from host_registry.requests import request_key

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
BATCH = 500  # records read per round trip
WRITE_TRIES = 20  # a record written by someone else meanwhile: read it again, this often

# Statuses written by earlier versions, and what they mean now.
LEGACY_STATUSES = {"killed-and-rescheduled": RequestStatus.RUNNING}

# Entries written before typed events: the kind from the text's fixed beginning.
_LEGACY_KINDS: tuple[tuple[str, EventKind], ...] = (
    ("submitted", EventKind.SUBMITTED),
    ("placed", EventKind.PLACED),
    ("cut to", EventKind.CUT),
    ("killed: its host", EventKind.HOST_LOST),
    ("killed", EventKind.KILLED),
    ("waiting in the pending queue", EventKind.QUEUED),
    ("ended", EventKind.ENDED),
    ("container exited", EventKind.EXITED),
    ("stopped by the client", EventKind.STOPPED),
    ("could not start", EventKind.START_FAILED),
    ("its service disappeared", EventKind.VANISHED),
    ("handed to Swarm", EventKind.SWARM),
    ("Swarm started it", EventKind.SWARM),
    ("Swarm refused it", EventKind.REJECTED),
    ("Swarm could not start it", EventKind.REJECTED),
)
_LEGACY_PASS = re.compile(r"^placed: (\w+) pass:")
_LEGACY_POLICY = re.compile(r"^placed: (\w+): ")
_LEGACY_FOR = re.compile(r"to make room for (\S+)\s*$")
_LEGACY_QUEUE = re.compile(r"^waiting in the pending queue \(([\w-]+)\)")
_LEGACY_EXIT = re.compile(r"\((?:exit )?code (-?\d+)")


@dataclass
class MigrationReport:
    from_version: int
    to_version: int
    records: int = 0  # records rewritten
    stream_entries: int = 0  # events stream entries rewritten
    unread: dict[str, str] = field(default_factory=dict)  # request id -> why it was left


class Unreadable(ValueError):
    """A record the migration cannot read: left as it is."""


def typed_entry(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An entry written before typed events, as the typed event it meant (JSON)."""
    text = str(obj.get("event", ""))
    kind = next((k for prefix, k in _LEGACY_KINDS if text.startswith(prefix)), None)
    if kind is None:
        kind = EventKind.REJECTED if obj.get("status") == "rejected" else EventKind.OTHER
    fields_ = {k: v for k, v in obj.items() if k != "event"}
    fields_.update(kind=kind.value, reason=text)
    if kind is EventKind.PLACED:
        found = _LEGACY_PASS.match(text)
        policy = _LEGACY_POLICY.match(text)
        fields_["pass"] = found.group(1) if found else None
        fields_["policy"] = policy.group(1) if policy and not found else None
    elif kind is EventKind.KILLED:
        room = _LEGACY_FOR.search(text)
        fields_["by"] = room.group(1) if room else None
    elif kind is EventKind.QUEUED:
        queue = _LEGACY_QUEUE.match(text)
        fields_["queue_reason"] = queue.group(1) if queue else None
    elif kind in (EventKind.ENDED, EventKind.EXITED) and fields_.get("exit_code") is None:
        code = _LEGACY_EXIT.search(text)
        fields_["exit_code"] = int(code.group(1)) if code else None
    if kind is EventKind.OTHER:
        return fields_  # kept as it was, with a kind and a reason
    return event_from_json(fields_).to_json()


def migrate_entry(raw: str) -> str | None:
    """One stored entry at the current version; None when it is already. Unreadable when it
    is not a JSON object."""
    try:
        obj = json.loads(raw)
    except ValueError:
        raise Unreadable(f"an entry is not JSON: {raw[:80]!r}") from None
    if not isinstance(obj, dict):
        raise Unreadable(f"an entry is not an object: {raw[:80]!r}")
    changed = False
    status = obj.get("status")
    if isinstance(status, str) and status in LEGACY_STATUSES:
        obj, changed = {**obj, "status": LEGACY_STATUSES[status].value}, True
    if "kind" not in obj and "event" in obj:
        obj, changed = typed_entry(obj), True
    return json.dumps(obj) if changed else None


def _migrate_entries(raw: list[str]) -> list[str] | None:
    """A history at the current version; None when it is already."""
    out, changed = [], False
    for entry in raw:
        new = migrate_entry(entry)
        changed = changed or new is not None
        out.append(entry if new is None else new)
    return out if changed else None


class RecordMigration:
    """Brings the records under ``prefix`` to :data:`SCHEMA_VERSION` (see the module)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._redis: Any = client  # decode_responses=True
        self.prefix = prefix

    @property
    def version_key(self) -> str:
        return f"{self.prefix}:schema"

    @property
    def unread_key(self) -> str:
        return f"{self.prefix}:schema:unread"

    def version(self) -> int:
        raw = self._redis.get(self.version_key)
        return int(raw) if raw else 1

    def run(self) -> MigrationReport:
        report = MigrationReport(self.version(), SCHEMA_VERSION)
        if report.from_version >= SCHEMA_VERSION:
            if report.from_version > SCHEMA_VERSION:
                log.warning("the records are at schema version %d, later than this manager's "
                            "%d: a later version wrote them", report.from_version,
                            SCHEMA_VERSION)
            return report
        ids = list(self._redis.zrange(f"{self.prefix}:requests", 0, -1))
        for start in range(0, len(ids), BATCH):
            self._batch(ids[start:start + BATCH], report)
        self._status_sets(report)
        report.stream_entries = self._stream()
        if report.unread:
            self._redis.sadd(self.unread_key, *report.unread)
        # the version only ever rises (a later version's manager may have set it meanwhile)
        self._redis.eval("if (tonumber(redis.call('GET', KEYS[1])) or 1) < tonumber(ARGV[1]) "
                         "then redis.call('SET', KEYS[1], ARGV[1]) end", 1, self.version_key,
                         SCHEMA_VERSION)
        return report

    def _batch(self, ids: list[str], report: MigrationReport) -> None:
        """Read a batch in one round trip; rewrite, each in its own transaction, the records
        that need it."""
        reads = self._redis.pipeline(transaction=False)
        for request_id in ids:
            key = request_key(self.prefix, request_id)
            reads.hget(key, "status")
            reads.lrange(key + ":history", 0, -1)
        found = reads.execute()
        for i, request_id in enumerate(ids):
            status, history = found[2 * i], found[2 * i + 1]
            try:
                due = status in LEGACY_STATUSES or _migrate_entries(history) is not None
                if due and self._record(request_id):
                    report.records += 1
            except Unreadable as exc:
                report.unread[request_id] = str(exc)
                log.warning("record %s left as it was: %s", request_id, exc)

    def _record(self, request_id: str) -> bool:
        """Rewrite one record at the current version, watched; False when it already is."""
        key = request_key(self.prefix, request_id)
        history_key = key + ":history"
        with self._redis.pipeline(transaction=True) as pipe:
            for _ in range(WRITE_TRIES):
                try:
                    pipe.watch(key, history_key)
                    status = pipe.hget(key, "status")
                    entries = _migrate_entries(pipe.lrange(history_key, 0, -1))
                    now = LEGACY_STATUSES.get(status) if status is not None else None
                    if entries is None and now is None:
                        pipe.unwatch()
                        return False
                    pipe.multi()
                    if entries is not None:
                        pipe.delete(history_key)
                        pipe.rpush(history_key, *entries)
                    if now is not None:
                        pipe.hset(key, "status", now.value)
                        pipe.srem(f"{self.prefix}:requests:{status}", request_id)
                        pipe.sadd(f"{self.prefix}:requests:{now.value}", request_id)
                    pipe.execute()
                    return True
                except redis.WatchError:
                    continue
        raise UnavailableError(f"request {request_id!r} kept changing while it was migrated")

    def _status_sets(self, report: MigrationReport) -> None:
        """Ids left in an earlier version's status set (a record not in the index): moved to
        the status they mean now, their record's status with them."""
        for raw, status in LEGACY_STATUSES.items():
            old_key = f"{self.prefix}:requests:{raw}"
            for request_id in self._redis.smembers(old_key):
                if request_id in report.unread:
                    continue
                pipe = self._redis.pipeline(transaction=True)
                pipe.smove(old_key, f"{self.prefix}:requests:{status.value}", request_id)
                pipe.hset(request_key(self.prefix, request_id), "status", status.value)
                pipe.execute()
                report.records += 1

    def _stream(self) -> int:
        """The events stream's entries at the current version, under their ids (the cursors
        clients hold stay valid); how many changed. An entry that cannot be read is kept."""
        key = f"{self.prefix}:events"
        with self._redis.pipeline(transaction=True) as pipe:
            for _ in range(WRITE_TRIES):
                try:
                    pipe.watch(key)
                    entries = pipe.xrange(key)
                    rewritten, changed = [], 0
                    for entry_id, fields_ in entries:
                        try:
                            new = migrate_entry(fields_.get("event", ""))
                        except Unreadable:
                            new = None
                        if new is not None:
                            changed += 1
                            fields_ = {**fields_, "event": new}
                        rewritten.append((entry_id, fields_))
                    if not changed:
                        pipe.unwatch()
                        return 0
                    pipe.multi()
                    pipe.delete(key)
                    for entry_id, fields_ in rewritten:
                        pipe.xadd(key, fields_, id=entry_id)
                    pipe.execute()
                    return changed
                except redis.WatchError:
                    continue
        raise UnavailableError("the events stream kept changing while it was migrated")
