"""The Rust core's list of hosts (native/rust/src/group.rs, ``HostGroup``) against the
reference (host_registry.memory._Group): the same blocks, walks, rooms and errors through long
random sequences of hosts joining and leaving, a walk's end when its list changes under it,
and the store keeping a list in Python when the Rust one refuses a host.

The build comes from the cache the set-up fills (tests/support/rust_core.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from types import ModuleType

import pytest

import host_registry.memory as memory_module
from domain.model import HostSpec, HostView, Task, TaskType
from domain.rooms import ROOM_INDEX, ROOM_KEYS
from domain.store import Segment
from host_registry.memory import MemoryStore, _Group
from tests.support.rust_core import load_rust, skipped
from tests.unit.test_memory_store import check_every_walk

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

# Few values of U, so that many hosts tie on it and their ids order them.
UTILS = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)
EVERY = 1 << 62  # a need every room holds once negated


@pytest.fixture(scope="module")
def native() -> ModuleType:
    return load_rust()


def view_pool(rng: random.Random, hosts: int, versions: int) -> list[list[HostView]]:
    """Per host, ``versions`` views of it (its books and U changing), as a store makes them."""
    store = MemoryStore()
    ids = [f"h{i:03d}" for i in range(hosts)]
    for host_id in ids:
        store.add_host(HostSpec(host_id, rng.choice((2048, 4096, 8192)),
                                rng.choice((4096, 8192, 16384))), rng.choice(UTILS), 0.0)
    pool: list[list[HostView]] = [[] for _ in ids]
    number = 0
    for _ in range(versions):
        for index, host_id in enumerate(ids):
            for _ in range(rng.randrange(3)):
                number += 1
                cpu, memory = rng.randint(50, 1500), rng.randint(50, 3000)
                store.load_task(Task(f"t{number}", host_id, rng.randint(1, 4),
                                     rng.choice(list(TaskType)), cpu, memory, cpu, memory))
            store.update_host_utilization(host_id, rng.choice(UTILS), rng.random() * 0.1)
            pool[index].append(store.host(host_id))
    return pool


def walk_ids(walk: Iterator[HostView] | None) -> list[int] | None:
    return None if walk is None else [id(view) for view in walk]


def same_lists(reference: _Group, rust: memory_module.HostList, rng: random.Random,
               pool: list[list[HostView]]) -> None:
    assert rust.size == reference.size
    assert rust.block_sizes() == reference.block_sizes()
    assert rust.host_ids() == reference.host_ids()
    for ascending in (True, False):
        assert ([id(v) for v in rust.views(ascending)]
                == [id(v) for v in reference.views(ascending)])
    views = [view for versions in pool for view in versions]
    for _ in range(6):
        index = rng.randrange(len(ROOM_KEYS))
        if rng.random() < 0.7:  # a need at a host's room: the edges of every comparison
            cpu, memory = rng.choice(views).rooms[index]
            need = (cpu + rng.choice((-1, 0, 0, 1)), memory + rng.choice((-1, 0, 0, 1)))
        else:
            need = (rng.randint(-2, 9000), rng.randint(-2, 1 << 14))
        ascending = rng.random() < 0.5
        assert (walk_ids(rust.walk(index, *need, ascending))
                == walk_ids(reference.walk(index, *need, ascending))), (index, need)


@pytest.mark.parametrize(("seed", "block_size"), [(1, 1), (2, 2), (3, 4), (4, 32)])
def test_the_rust_list_keeps_the_references_blocks_and_walks(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch, seed: int, block_size: int,
) -> None:
    monkeypatch.setattr(memory_module, "BLOCK_SIZE", block_size)
    rng = random.Random(seed)
    pool = view_pool(rng, max(120, 16 * block_size), 4)
    reference, rust = _Group(), native.HostGroup(block_size)
    present: dict[int, HostView] = {}  # host -> its view in both lists
    splits = fewer = 0  # inserts that split a block; removals that left fewer blocks
    for step in range(1500):
        host = rng.randrange(len(pool))
        blocks = len(reference.block_sizes())
        if host in present and rng.random() < 0.5:
            view = present.pop(host)
            reference.remove(view)
            rust.remove(view)
            fewer += len(reference.block_sizes()) < blocks
        elif host not in present:
            view = present[host] = rng.choice(pool[host])
            reference.insert(view)
            rust.insert(view)
            splits += len(reference.block_sizes()) > max(blocks, 1)
        else:  # the host changed: its old view leaves, a new one joins
            old, view = present[host], rng.choice(pool[host])
            reference.remove(old)
            rust.remove(old)
            reference.insert(view)
            rust.insert(view)
            present[host] = view
        if step % 10 == 0:
            same_lists(reference, rust, rng, pool)
            index = rng.randrange(len(ROOM_KEYS))
            assert rust.list_room(index) == reference.list_room(index)
    same_lists(reference, rust, rng, pool)
    hosts = list(present)
    rng.shuffle(hosts)
    for step, host in enumerate(hosts):  # then every host leaves
        blocks = len(reference.block_sizes())
        reference.remove(present[host])
        rust.remove(present[host])
        fewer += len(reference.block_sizes()) < blocks
        if step % 5 == 0:
            same_lists(reference, rust, rng, pool)
    assert rust.size == 0 and rust.block_sizes() == reference.block_sizes() == []
    for need in ((0, 0), (-EVERY, -EVERY)):  # an empty list: nothing to walk
        assert walk_ids(rust.walk(0, *need, True)) == walk_ids(reference.walk(0, *need, True))
    assert splits > 5 and fewer > 5, (splits, fewer)  # the blocks' shape did change


def test_a_missing_host_is_the_same_error(native: ModuleType) -> None:
    pool = view_pool(random.Random(5), 4, 2)
    reference, rust = _Group(), native.HostGroup(32)
    for versions in pool[:3]:
        reference.insert(versions[0])
        rust.insert(versions[0])
    for view in (pool[3][0], pool[0][1]):  # a host not there; an old view of one that is
        with pytest.raises(RuntimeError) as expected:
            reference.remove(view)
        with pytest.raises(RuntimeError) as got:
            rust.remove(view)
        assert str(got.value) == str(expected.value) == f"host {view.id} missing from its list"
    assert rust.host_ids() == reference.host_ids() and rust.size == 3


@pytest.mark.parametrize("change", ["insert", "remove"])
def test_a_walk_ends_when_its_list_changes_under_it(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch, change: str,
) -> None:
    monkeypatch.setattr(memory_module, "BLOCK_SIZE", 2)
    pool = view_pool(random.Random(6), 30, 1)
    views = [versions[0] for versions in pool]
    lists = [_Group(), native.HostGroup(2)]
    walked = []
    for group in lists:
        for view in views[:-1]:
            group.insert(view)
        walk = group.walk(0, -EVERY, -EVERY, True)  # every host fits
        assert walk is not None
        first = [next(walk), next(walk)]
        if change == "insert":
            group.insert(views[-1])
        else:
            group.remove(first[1])
        walked.append(([v.id for v in first], [v.id for v in walk]))
        assert [v.id for v in group.walk(0, -EVERY, -EVERY, True) or []] == group.host_ids()
    reference, rust = walked
    assert rust == reference and reference[1] == [] and len(reference[0]) == 2


def test_a_store_keeps_a_list_the_rust_core_refuses_in_python(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory_module, "NativeGroup", native.HostGroup)
    store = MemoryStore()
    rng = random.Random(7)
    for i in range(40):
        store.add_host(HostSpec(f"h{i:02d}", 4096, 8192), rng.choice(UTILS), 0.0)
    region = store.host("h00").region
    assert isinstance(store._groups[region, None], native.HostGroup)
    # rooms beyond 64 bits (the reference's ints are exact), then a U that is not a number
    store.add_host(HostSpec("huge", 1 << 70, 1 << 70), store.host("h00").util, 0.0)
    python = store._groups[region, None]
    members = [h for h in store.all_hosts() if (h.region, h.host_class) == (region, None)]
    members.sort(key=lambda h: (h.util, h.id))
    assert isinstance(python, _Group) and python.host_ids() == [h.id for h in members]
    assert "huge" in python.host_ids()
    key = ROOM_INDEX[ROOM_KEYS[0]]
    walk = python.walk(key, 1 << 69, 0, True)
    assert walk is not None and [v.id for v in walk] == ["huge"]
    check_every_walk(store, rng)
    store.add_host(HostSpec("nan", 4096, 8192), math.nan, 0.0)
    nan_region = store.host("nan").region
    assert isinstance(store._groups[nan_region, None], _Group)
    segment = Segment(nan_region, None, True)
    assert "nan" in [v.id for _, v in store.candidates([segment])]


def test_needs_beyond_64_bits_walk_as_the_reference(native: ModuleType) -> None:
    pool = view_pool(random.Random(8), 10, 1)
    reference, rust = _Group(), native.HostGroup(2)
    for versions in pool:
        reference.insert(versions[0])
        rust.insert(versions[0])
    for need in ((1 << 80, 0), (0, 1 << 130), (-(1 << 80), -(1 << 200)), (-(1 << 64), 0),
                 ((1 << 63) - 1, 0), (-(1 << 63), -(1 << 63))):
        for ascending in (True, False):
            expected = walk_ids(reference.walk(3, *need, ascending))
            assert walk_ids(rust.walk(3, *need, ascending)) == expected, need
