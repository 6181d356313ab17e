"""The typed-events migration's conversion of one entry (manager/record_migrations.py), by hand:
entries as the manager wrote them before typed events, including texts of versions older than
the fixture's (tests/integration/test_record_migrations.py migrates genuine records)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.events import (
    Cut,
    Ended,
    Exited,
    HostLost,
    Killed,
    Other,
    Placed,
    Queued,
    Rejected,
    StartFailed,
    Stopped,
    Submitted,
    Swarm,
    Vanished,
    event_from_json,
)
from domain.lifecycle import RequestStatus
from manager.record_migrations import Unreadable, migrate_entry, typed_entry

# {"t", "event": text, **the fields the change set}, as RequestRecords.update pushed them.
LEGACY: list[tuple[dict[str, Any], type, dict[str, Any]]] = [
    ({"event": "submitted"}, Submitted, {}),
    ({"event": "placed: kill pass: EED host n1 (class 3, U=0.90): fits once v is killed",
      "status": "running", "host": "n1", "service_id": "s1", "cpu_shares": 512,
      "memory": 268435456, "cut_received": "0"},
     Placed, {"pass_": "kill", "policy": None, "host": "n1", "cpu_shares": 512,
              "service_id": "s1", "status": RequestStatus.RUNNING}),
    ({"event": "placed: simple pass: LEE host n1 (class 3, U=0.05): fits unchanged",
      "status": "killed-and-rescheduled", "host": "n1", "cpu_shares": 256, "memory": 512},
     Placed, {"pass_": "simple", "memory": 512, "status": RequestStatus.RUNNING}),
    ({"event": "placed: spread: host n2 scores 40.0", "status": "running", "host": "n2"},
     Placed, {"policy": "spread", "pass_": None}),
    ({"event": "cut to 170 shares and 357913942 bytes (total cut 1/3)", "cpu_shares": "170",
      "memory": 357913942, "cut_received": "1/3"},
     Cut, {"cpu_shares": 170, "memory": 357913942, "cut_received": "1/3", "by": None}),
    ({"event": "killed on n1 to make room for r7", "kills": 1}, Killed, {"by": "r7", "kills": 1}),
    ({"event": "killed on n1 on request", "kills": 2}, Killed, {"by": None, "kills": 2}),
    ({"event": "killed: its host n3 left the Swarm", "kills": 3}, HostLost, {"kills": 3}),
    ({"event": "waiting in the pending queue (host-lost)", "status": "pending", "host": "",
      "service_id": ""}, Queued, {"queue_reason": "host-lost", "status": RequestStatus.PENDING}),
    ({"event": "waiting in the pending queue (victim)", "status": "pending"}, Queued,
     {"queue_reason": "victim"}),
    ({"event": "container exited (code 137, out of memory); Swarm restarts it", "oom": True},
     Exited, {"exit_code": 137, "oom": True}),
    ({"event": "container exited (code 137); Swarm restarts it"}, Exited,
     {"exit_code": 137, "oom": None}),
    ({"event": "ended: failed (out of memory)", "status": "failed", "exit_code": 137,
      "oom": True}, Ended, {"exit_code": 137, "oom": True, "status": RequestStatus.FAILED}),
    ({"event": "ended: finished (exit code 0)", "status": "completed"}, Ended, {"exit_code": 0}),
    ({"event": "ended: failed (exit code 137): task: non-zero exit (137)", "status": "failed",
      "exit_code": 137}, Ended, {"exit_code": 137}),
    ({"event": "stopped by the client", "status": "stopped"}, Stopped,
     {"status": RequestStatus.STOPPED}),
    ({"event": "could not start on n1: boom", "status": "failed", "host": ""}, StartFailed,
     {"host": None}),
    ({"event": "its service disappeared from the Swarm", "status": "failed"}, Vanished, {}),
    ({"event": "no host can take 9 CPU shares and 9 bytes of class 1, even with cuts and kills",
      "status": "rejected"}, Rejected, {"status": RequestStatus.REJECTED, "policy": None}),
    ({"event": "Swarm could not start it: no suitable node", "status": "rejected"}, Rejected,
     {}),
    ({"event": "handed to Swarm's own scheduler", "service_id": "s9"}, Swarm,
     {"service_id": "s9", "host": None}),
    ({"event": "Swarm started it", "host": "n1", "status": "running"}, Swarm, {"host": "n1"}),
]


@pytest.mark.parametrize(("entry", "cls", "fields"), LEGACY,
                         ids=[entry["event"][:32] for entry, _, _ in LEGACY])
def test_an_entry_written_before_typed_events_becomes_the_event_its_text_meant(
    entry: dict[str, Any], cls: type, fields: dict[str, Any],
) -> None:
    old = {"t": 12.5, **entry}
    new = migrate_entry(json.dumps(old))
    assert new is not None
    event = event_from_json(json.loads(new))
    assert type(event) is cls
    assert event.reason == entry["event"] and event.t == 12.5
    for name, value in fields.items():
        assert getattr(event, name) == value, name
    assert "event" not in json.loads(new)
    assert migrate_entry(new) is None  # converted once: at the current version


def test_a_text_no_version_wrote_is_kept_as_an_other_with_its_fields() -> None:
    new = migrate_entry(json.dumps({"t": 3.0, "event": "something new", "kills": 1}))
    assert new is not None
    event = event_from_json(json.loads(new))
    assert isinstance(event, Other)
    assert event.to_json() == {"t": 3.0, "kind": "other", "reason": "something new", "kills": 1}


def test_a_typed_entry_is_left_as_it_is_but_an_earlier_versions_status() -> None:
    typed = json.dumps({"t": 1.0, "kind": "placed", "reason": "placed", "status": "running"})
    assert migrate_entry(typed) is None
    assert migrate_entry(json.dumps({"t": 1.0, "kind": "later", "x": [1]})) is None
    old = json.dumps({"t": 1.0, "kind": "placed", "reason": "placed",
                      "status": "killed-and-rescheduled", "host": "n1"})
    assert json.loads(migrate_entry(old) or "") == {
        "t": 1.0, "kind": "placed", "reason": "placed", "status": "running", "host": "n1"}


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"', ""])
def test_an_entry_that_is_not_a_json_object_is_unreadable(raw: str) -> None:
    with pytest.raises(Unreadable):
        migrate_entry(raw)


def test_the_table_covers_every_kind_the_old_manager_wrote() -> None:
    kinds = {typed_entry({"t": 1.0, **entry})["kind"] for entry, _, _ in LEGACY}
    assert kinds == {"submitted", "placed", "cut", "killed", "host-lost", "queued", "exited",
                     "ended", "stopped", "start-failed", "vanished", "rejected", "swarm"}
