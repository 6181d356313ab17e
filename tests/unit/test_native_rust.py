"""The Rust core's rooms (native/rust/src/rooms.rs) against the Python reference
(domain.rooms.compute_rooms_reference): identical on a fuzz corpus, on the edges of the tally,
and beyond 64 bits (where the dispatcher falls back to the reference).

The build comes from the cache the set-up fills (tests/support/rust_core.py); without it these
tests fail, saying how to build it, unless GREENSWARM_NATIVE_RUST=0 turns them off.
"""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import domain.rooms
from domain.classes import ClassTable
from domain.rooms import _ROOM_PLAN, ROOM_KEYS, compute_rooms, compute_rooms_reference
from domain.tally import TALLY_SIZE
from native import loader
from tests.support.rust_core import load_rust, skipped

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

I64 = 2**63 - 1


@pytest.fixture(scope="module")
def native() -> ModuleType:
    return load_rust()


def limits(capacity: int) -> tuple[int, ...]:
    """A host's class limits as the store computes them (floor(capacity x M(c)))."""
    classes = ClassTable()
    return tuple(int(capacity * classes.max_factor(c)) for c in (1, 2, 3, 4))


# Tallies as stores hold them (counts small, sums of CPU shares and bytes) and beyond: any
# term may be zero, negative (a corrupt or in-flight tally computes the same either way) or
# near the edge of 64 bits.
term = st.one_of(st.integers(0, 8), st.integers(0, 2**40), st.integers(-(2**40), 2**40),
                 st.integers(-(2**61), 2**61))
tally = st.lists(term, min_size=TALLY_SIZE, max_size=TALLY_SIZE).map(tuple)
capacity = st.one_of(st.integers(1, 2**20), st.integers(1, 2**40), st.integers(1, 2**62))


def test_the_plan_is_the_references(native: ModuleType) -> None:
    assert tuple(native.room_plan()) == _ROOM_PLAN
    assert len(ROOM_KEYS) == len(_ROOM_PLAN) == 13


@settings(max_examples=2000, deadline=None)
@given(t=tally, cpu=capacity, memory=capacity, data=st.data())
@example(t=(0,) * TALLY_SIZE, cpu=4096, memory=8 << 30, data=None)
@example(t=(0, 0, 0, 1, 0, 0, 0, 2048, 0, 0, 0, 1 << 30, 2048, 1 << 30, 0, 0, 0, 0, 0, 0),
         cpu=4096, memory=8 << 30, data=None)
def test_rooms_are_the_references(native: ModuleType, t: tuple[int, ...], cpu: int, memory: int,
                                  data: st.DataObject | None) -> None:
    if data is None:
        cpu_limits, memory_limits = limits(cpu), limits(memory)
    else:
        cpu_limits = data.draw(st.one_of(st.just(limits(cpu)),
                                         st.lists(term, min_size=4, max_size=4).map(tuple)))
        memory_limits = data.draw(st.one_of(st.just(limits(memory)),
                                            st.lists(term, min_size=4, max_size=4).map(tuple)))
    expected = compute_rooms_reference(t, cpu, memory, cpu_limits, memory_limits)
    got = native.compute_rooms(t, cpu, memory, cpu_limits, memory_limits)
    assert got == expected
    assert all(type(a) is int and type(b) is int for a, b in got)


def test_beyond_64_bits_the_rust_core_refuses_and_the_reference_decides(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = (1, 0, 0, 0, I64, I64, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)  # CPU sum > 2**63
    huge_capacity = 2**70
    cases = [
        (big, 4096, 4096, limits(4096), limits(4096)),
        ((0,) * TALLY_SIZE, huge_capacity, 4096, limits(huge_capacity), limits(4096)),
    ]
    monkeypatch.setattr(domain.rooms, "_native_rooms", native.compute_rooms)
    assert domain.rooms.rooms_implementation() == "rust"
    for args in cases:
        with pytest.raises(OverflowError):
            native.compute_rooms(*args)
        assert compute_rooms(*args) == compute_rooms_reference(*args)


def test_the_dispatcher_runs_the_rust_core_when_loaded(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def counted(*args: object) -> object:
        calls.append(1)
        return native.compute_rooms(*args)

    args = ((1,) + (0,) * 3 + (100,) + (0,) * 3 + (200,) + (0,) * 11, 1024, 2048,
            limits(1024), limits(2048))
    assert domain.rooms.rooms_implementation() == "python"  # the suite runs pure
    monkeypatch.setattr(domain.rooms, "_native_rooms", counted)
    assert compute_rooms(*args) == compute_rooms_reference(*args)
    assert calls == [1]


def test_a_short_tally_is_an_index_error_in_both(native: ModuleType) -> None:
    args = ((1, 0, 0), 1024, 1024, limits(1024), limits(1024))
    with pytest.raises(IndexError):
        compute_rooms_reference(*args)
    with pytest.raises(IndexError):
        native.compute_rooms(*args)


def test_every_module_that_imports_the_rust_core_is_a_rust_user() -> None:
    """The loader keeps the Rust core away when a module importing it was imported before
    enable() (native.loader.RUST_USERS): a module it does not know of would run its Python
    reference beside the other parts' Rust."""
    importers = set()
    packages = [top for top in loader.ROOT.iterdir()
                if (top / "__init__.py").is_file() and top.name != "tests"]
    for path in (path for package in packages for path in package.rglob("*.py")):
        relative = path.relative_to(loader.ROOT)
        if re.search(r"^\s*(from greenswarm_core import|import greenswarm_core)", path.read_text(),
                     re.MULTILINE):
            importers.add(".".join(relative.with_suffix("").parts))
    assert importers == set(loader.RUST_USERS)
