"""Segment (domain.segments) and RoomKey's hand-written comparisons: a compiled class each
(native.loader.MODULES), which must behave as the named tuple and the generated dataclass
methods they replace: equal by fields, hashed by them, one key per room in ROOM_INDEX."""

from __future__ import annotations

import dataclasses
import itertools

from domain.regions import Region
from domain.rooms import ROOM_INDEX, ROOM_KEYS, SIMPLE_ROOM, RoomKey, RoomKind
from domain.segments import Segment
from domain.store import Segment as ReExported


def test_a_segment_keeps_its_fields_and_defaults() -> None:
    key = RoomKey(RoomKind.CUT, 2)
    segment = Segment(Region.DEE, 3, False, key, (512, 1 << 30))
    assert (segment.region, segment.host_class, segment.ascending, segment.room_key,
            segment.need) == (Region.DEE, 3, False, key, (512, 1 << 30))
    bare = Segment(Region.LEE, None, True)
    assert (bare.room_key, bare.need) == (None, (0, 0))
    assert ReExported is Segment


def test_segments_are_equal_and_hashed_by_every_field() -> None:
    fields = [(Region.LEE, Region.EED), (None, 1), (True, False),
              (None, SIMPLE_ROOM, RoomKey(RoomKind.KILL, 4, True)), ((0, 0), (1, 0), (0, 1))]
    segments = [Segment(*values) for values in itertools.product(*fields)]
    copies = [Segment(*values) for values in itertools.product(*fields)]
    for one, copy in zip(segments, copies, strict=True):
        assert one == copy and hash(one) == hash(copy) and one is not copy
    assert len(set(segments)) == len(segments)  # any field told apart
    assert Segment(Region.LEE, 1, True) != (Region.LEE, 1, True, None, (0, 0))
    assert "host_class=1" in repr(Segment(Region.LEE, 1, True))


def test_every_host_drops_the_room_and_keeps_the_list() -> None:
    segment = Segment(Region.EED, 4, True, RoomKey(RoomKind.KILL, 2, False), (9, 9))
    assert segment.every_host() == Segment(Region.EED, 4, True)


def test_room_keys_compare_and_hash_as_the_generated_methods_would() -> None:
    generated = dataclasses.make_dataclass(
        "Generated", [("kind", RoomKind), ("cls", int), ("job", bool)], frozen=True)
    for one, other in itertools.product(ROOM_KEYS, repeat=2):
        made = RoomKey(one.kind, one.cls, one.job)  # a new object: found by equality
        assert ROOM_INDEX[made] == ROOM_KEYS.index(one)
        assert (made == other) == (one is other)
        assert hash(made) == hash(generated(one.kind, one.cls, one.job))
    assert RoomKey(RoomKind.CUT, 1).__eq__((RoomKind.CUT, 1, False)) is NotImplemented
