"""Requests' service levels held as columns (measure/request_levels.py): every level reads back
as it went in, in order, and the book's slots, filled in any order, hand over the filled ones."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.model import TaskType
from measure.request_levels import LevelSlots, RequestLevels
from measure.service_levels import RequestLevel, RequestStatus

LEVELS = st.builds(
    RequestLevel,
    # any text JSON can carry, lone surrogates ("\ud800") too
    id=st.text(st.characters() | st.characters(categories=["Cs"]), min_size=1, max_size=12),
    cls=st.integers(1, 4),
    type=st.sampled_from(TaskType),
    availability=st.floats(0.0, 1.0),
    met_slo=st.booleans(),
    preemptions=st.integers(0, 2**40),
    status=st.sampled_from(RequestStatus),
)


def level(request_id: str, cls: int = 2, availability: float = 0.5) -> RequestLevel:
    return RequestLevel(request_id, cls, TaskType.JOB, availability, True, 1,
                        RequestStatus.FINISHED)


@given(st.lists(LEVELS, max_size=30))
def test_every_level_reads_back_as_it_went_in_in_order(levels: list[RequestLevel]) -> None:
    held = RequestLevels(levels)
    assert len(held) == len(levels)
    assert list(held) == levels
    assert [held[i] for i in range(len(levels))] == levels
    assert [held[-i] for i in range(1, len(levels) + 1)] == levels[::-1]
    assert list(held[1::2]) == levels[1::2]
    assert held == levels and held == tuple(levels) and held == RequestLevels(levels)
    assert pickle.loads(pickle.dumps(held)) == held


def test_a_level_out_of_range_or_another_sequence_is_told_apart() -> None:
    held = RequestLevels([level("a"), level("b")])
    with pytest.raises(IndexError):
        held[2]
    with pytest.raises(IndexError):
        held[-3]
    assert held != [level("a")]
    assert held != [level("a"), level("b", availability=0.25)]
    assert held != RequestLevels([level("a"), level("c")])
    assert held != "ab"
    assert RequestLevels() == () and not RequestLevels()


def fill(slots: LevelSlots, index: int, filled: RequestLevel) -> None:
    slots.fill(index, filled.id, filled.cls, filled.type, filled.availability, filled.met_slo,
               filled.preemptions, filled.status)


def test_slots_filled_in_any_order_hand_over_the_filled_ones_in_order() -> None:
    slots = LevelSlots()
    for _ in range(4):
        slots.reserve()
    fill(slots, 2, level("c"))
    fill(slots, 0, level("é-a", cls=4))
    fill(slots, 3, level("d", availability=0.1))
    fill(slots, 3, level("d", availability=0.9))  # accounted again: the last one stands
    assert slots.levels() == [level("é-a", cls=4), level("c"), level("d", availability=0.9)]


def test_slots_all_filled_are_handed_over_whole() -> None:
    slots = LevelSlots()
    for _ in range(2):
        slots.reserve()
    fill(slots, 1, level("b"))
    fill(slots, 0, level("a"))
    assert slots.levels() == [level("a"), level("b")]
    assert slots.levels() == []
