"""Typed history events (DESIGN 10): every entry has a kind and structured fields."""

from __future__ import annotations

from typing import Any

import pytest

from domain.events import Event, EventKind


def test_an_event_round_trips_through_its_json_form_with_only_the_fields_it_has() -> None:
    placed = Event(EventKind.PLACED, "placed: kill pass: ...", t=12.5, host="n1", pass_="kill",
                   policy="energy", victims=("v1", "v2"), cuts=("c1",), status="running",
                   cpu_shares=512, memory=2**29, cut_received="1/6")
    form = placed.to_json()
    assert form == {"t": 12.5, "kind": "placed", "reason": "placed: kill pass: ...",
                    "host": "n1", "pass": "kill", "policy": "energy", "victims": ["v1", "v2"],
                    "cuts": ["c1"], "status": "running", "cpu_shares": 512,
                    "memory": 2**29, "cut_received": "1/6"}
    assert Event.from_json(form) == placed
    ended = Event(EventKind.ENDED, "ended: failed (out of memory)", t=3.0, exit_code=137,
                  oom=True)
    assert Event.from_json(ended.to_json()) == ended


@pytest.mark.parametrize(("entry", "expected"), [
    ({"t": 1.0, "kind": "teleported", "reason": "?"}, Event(EventKind.OTHER, "?", t=1.0)),
    ({"t": "soon", "kind": "cut", "cpu_shares": "170", "memory": True, "victims": "v1"},
     Event(EventKind.CUT, t=None, cpu_shares=170)),
    ({"kind": 3, "oom": "yes", "t": float("nan")}, Event(EventKind.OTHER)),
])
def test_a_malformed_entry_is_read_never_refused(entry: dict[str, Any], expected: Event) -> None:
    assert Event.from_json(entry) == expected


def test_every_kind_the_design_names_exists() -> None:
    named = {"submitted", "queued", "placed", "cut", "restored", "killed", "preempted", "ended",
             "stopped", "host-lost"}
    assert named <= {kind.value for kind in EventKind}
