"""Typed history events (DESIGN 10): every kind its own type with exactly its fields."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest

from domain import events
from domain.events import (
    Cut,
    Ended,
    Event,
    EventBase,
    EventKind,
    HostLost,
    Killed,
    NotOffloaded,
    Other,
    Placed,
    Rejected,
    Started,
    Stopped,
    Submitted,
    event_from_json,
    host_name_of,
    host_of,
    in_cluster,
    status_after,
    with_changes,
)
from domain.lifecycle import RequestStatus

ROOT = Path(__file__).resolve().parents[2]
KINDS = [cls for cls in typing.get_args(Event) if cls is not Other]


def test_an_event_round_trips_through_its_json_form_with_only_the_fields_it_has() -> None:
    placed = Placed("placed: kill pass: ...", t=12.5, host="n1", pass_="kill", policy="energy",
                    victims=("v1", "v2"), cuts=("c1",), status=RequestStatus.RUNNING,
                    cpu_shares=512, memory=2**29, cut_received="1/6")
    form = placed.to_json()
    assert form == {"t": 12.5, "kind": "placed", "reason": "placed: kill pass: ...",
                    "host": "n1", "pass": "kill", "policy": "energy", "victims": ["v1", "v2"],
                    "cuts": ["c1"], "status": "running", "cpu_shares": 512,
                    "memory": 2**29, "cut_received": "1/6"}
    assert type(form["status"]) is str  # plain JSON values, not enums
    assert event_from_json(form) == placed
    ended = Ended("ended: failed (out of memory)", t=3.0, exit_code=137, oom=True)
    assert event_from_json(ended.to_json()) == ended
    assert event_from_json(NotOffloaded("x", t=1.0, peers_down=("b",)).to_json()) == \
        NotOffloaded("x", t=1.0, peers_down=("b",))


@pytest.mark.parametrize("cls", KINDS, ids=lambda cls: cls.__name__)
def test_every_kind_round_trips_every_field(cls: type[EventBase]) -> None:
    """Each field set to a value of its type comes back from its JSON form as it was."""
    samples = {"str | None": "x", "int | None": 7, "bool | None": False, "float | None": 2.5,
               "tuple[str, ...]": ("a", "b"), "RequestStatus | None": RequestStatus.PENDING}
    values = {f.name: samples[str(f.type)] for f in dataclasses.fields(cls)
              if f.name not in ("reason", "t")}
    event = cls("why", t=5.0, **values)
    form = event.to_json()
    assert form["kind"] == cls.kind.value
    assert event_from_json(form) == event
    assert set(form) == {"t", "kind", "reason", *(name.removesuffix("_") for name in values)}


def test_each_kind_is_registered_once_and_every_kind_has_its_type() -> None:
    tags = [cls.kind for cls in KINDS]
    assert len(tags) == len(set(tags))
    assert set(tags) | {EventKind.OTHER} == set(EventKind)


@pytest.mark.parametrize(("entry", "expected"), [
    ({"t": "soon", "kind": "cut", "cpu_shares": "170", "memory": True, "victims": "v1"},
     Cut(t=None, cpu_shares=170)),
    ({"t": float("nan"), "kind": "placed", "victims": ["a", 3], "status": "sleeping",
      "reason": 5}, Placed(victims=("a",))),
    ({"kind": "killed", "host": "", "by": ["r"], "kills": "two", "oom": True}, Killed()),
])
def test_a_malformed_value_is_dropped_never_refused(entry: dict[str, Any],
                                                    expected: Event) -> None:
    assert event_from_json(entry) == expected


@pytest.mark.parametrize("entry", [
    {"t": 1.0, "kind": "teleported", "reason": "?", "to": "mars"},
    {"kind": 3, "oom": "yes"},
    {"t": 2.0, "event": "a text of an earlier version"},
    {"t": 3.0, "kind": "other", "reason": "in cluster b: ?", "cluster": "b"},
])
def test_an_unknown_kind_is_other_and_keeps_the_object_as_it_was(entry: dict[str, Any]) -> None:
    event = event_from_json(entry)
    assert isinstance(event, Other) and event.kind is EventKind.OTHER
    named = isinstance(entry.get("kind"), str)
    assert event.to_json() == (entry if named else {**entry, "kind": "other"})
    assert event.t == (entry["t"] if isinstance(entry.get("t"), float) else None)


def test_the_records_add_only_fields_of_the_kind() -> None:
    killed = with_changes(Killed("killed", host="n1", by="r2"), 9.0, {"kills": 2})
    assert killed == Killed("killed", t=9.0, host="n1", by="r2", kills=2)
    with pytest.raises(TypeError, match="killed event has no field status"):
        with_changes(Killed("killed"), 9.0, {"status": RequestStatus.RUNNING})
    other = with_changes(Other({"kind": "later", "x": 1}), 4.0,
                         {"status": RequestStatus.STOPPED})
    assert other.to_json() == {"kind": "later", "x": 1, "t": 4.0, "status": "stopped"}


def test_a_peer_clusters_final_event_is_mirrored_of_its_kind() -> None:
    assert in_cluster(EventKind.ENDED, "in cluster b: ended", "b") == \
        Ended("in cluster b: ended", cluster="b")
    assert in_cluster(EventKind.STOPPED, "s", "b") == Stopped("s", cluster="b")
    assert in_cluster(EventKind.OTHER, "?", "b").to_json() == \
        {"kind": "other", "reason": "?", "cluster": "b"}


def test_readers_ask_the_fields_a_kind_has() -> None:
    assert status_after(Rejected("no", status=RequestStatus.REJECTED)) is RequestStatus.REJECTED
    assert status_after(Started("runs", host="n1")) is None
    assert status_after(Other({"status": "running"})) is None
    assert host_of(HostLost("gone", host="n1", host_name="a")) == "n1"
    assert host_name_of(HostLost("gone", host="n1", host_name="a")) == "a"
    assert host_of(Submitted("submitted")) is None


def test_the_codec_refuses_a_field_of_a_type_it_cannot_read() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Odd(EventBase):
        kind: typing.ClassVar[EventKind] = EventKind.OTHER
        weight: complex | None = None

    with pytest.raises(TypeError, match=r"Odd\.weight"):
        events._codec(Odd)


def test_mypy_refuses_a_field_given_to_the_wrong_kind(tmp_path: Path) -> None:
    """The point of a type per kind: a writer cannot give a kind a field it does not have."""
    source = tmp_path / "writer.py"
    source.write_text(textwrap.dedent("""
        from domain.events import Placed, Stopped
        from domain.lifecycle import RequestStatus
        right = Placed("placed", host="n1", pass_="cut", status=RequestStatus.RUNNING)
        wrong = Stopped("stopped by the client", host="n1")
    """))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull,
         str(source)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "MYPYPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Unexpected keyword argument "host" for "Stopped"' in done.stdout
    assert "writer.py:5" in done.stdout and "writer.py:4" not in done.stdout
