"""The in-memory store's lists: a walk yields exactly the hosts a full scan would, in order,
whatever the blocks (host_registry.memory._Group) look like after many changes."""

from __future__ import annotations

import random

import pytest

import host_registry.memory as memory_module
from domain.model import HostSpec, Task, TaskType
from domain.regions import REGIONS
from domain.rooms import ROOM_INDEX, ROOM_KEYS
from domain.store import Segment
from host_registry.memory import MemoryStore


def brute_force(store: MemoryStore, segment: Segment) -> list[str]:
    """The segment's hosts from every host, sorted and filtered here."""
    hosts = [h for h in store.all_hosts()
             if (h.region, h.host_class) == (segment.region, segment.host_class)]
    hosts.sort(key=lambda h: (h.util, h.id), reverse=not segment.ascending)
    if segment.room_key is not None:
        index = ROOM_INDEX[segment.room_key]
        hosts = [h for h in hosts if h.rooms[index][0] >= segment.need[0]
                 and h.rooms[index][1] >= segment.need[1]]
    return [h.id for h in hosts]


def random_task(rng: random.Random, number: int, host: str) -> Task:
    cpu, memory = rng.randint(50, 3000), rng.randint(50, 3000)
    return Task(f"t{number}", host, rng.randint(1, 4), rng.choice(list(TaskType)), cpu, memory,
                cpu, memory)


@pytest.mark.parametrize("seed", [1, 2])
def test_walks_match_a_full_scan_through_block_splits_and_merges(seed: int) -> None:
    rng = random.Random(seed)
    store = MemoryStore()
    hosts = [f"h{i:03d}" for i in range(400)]  # several blocks per list
    for host_id in hosts:
        store.add_host(HostSpec(host_id, 8192, 8192), rng.random(), rng.random())
    tasks: list[Task] = []
    for step in range(3000):
        roll = rng.random()
        if roll < 0.4 or not tasks:
            task = random_task(rng, step, rng.choice(hosts))
            store.load_task(task)
            tasks.append(task)
        elif roll < 0.7:
            store.end_task(tasks.pop(rng.randrange(len(tasks))).id)
        else:
            store.update_host_utilization(rng.choice(hosts), rng.random(), rng.random() * 0.6)
        if step % 100 == 0:
            check_every_walk(store, rng)
    check_every_walk(store, rng)


def check_every_walk(store: MemoryStore, rng: random.Random) -> None:
    for region in REGIONS:
        for host_class in (None, 1, 2, 3, 4):
            for ascending in (True, False):
                segments = [Segment(region, host_class, ascending)]
                for key in ROOM_KEYS:
                    need = (rng.randint(0, 9000), rng.randint(0, 9000))
                    segments.append(Segment(region, host_class, ascending, key, need))
                for segment in segments:
                    walked = [h.id for _, h in store.candidates([segment])]
                    assert walked == brute_force(store, segment), segment


def test_blocks_split_merge_and_skip_by_their_largest_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory_module, "BLOCK_SIZE", 4)  # split above 8 hosts, merge below 2
    store = MemoryStore()
    for i in range(40):
        store.add_host(HostSpec(f"h{i:02d}", 1000 + i, 2000 - i), 0.1 + i / 1000, 0.0)
    group = store._groups[store.host("h00").region, None]
    assert len(group.blocks) >= 5 and group.size == 40
    assert all(len(block) <= 8 for block in group.blocks)
    region = store.host("h00").region
    key = ROOM_KEYS[0]

    def fitting(cpu: int, memory: int) -> list[str]:
        return [h.id for _, h in store.candidates([Segment(region, None, True, key, (cpu, memory))])]

    assert fitting(1037, 0) == ["h37", "h38", "h39"]
    assert fitting(1038, 1963) == []  # the largest CPU and memory rooms are on other hosts
    for i in range(39, 2, -1):  # the holders of the largest CPU rooms leave, one by one
        store.remove_host(f"h{i:02d}")
    assert group.size == 3 and len(group.blocks) == 1  # small blocks were merged
    assert fitting(1002, 0) == ["h02"] and fitting(1003, 0) == []
