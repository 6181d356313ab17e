"""The in-memory store's lists: a walk yields exactly the hosts a full scan would, in order,
whatever the blocks (host_registry.memory._Group) look like after many changes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

import host_registry.memory as memory_module
from domain.model import HostSpec, Request, Task, TaskType
from domain.regions import REGIONS
from domain.rooms import ROOM_INDEX, ROOM_KEYS
from domain.slo import SloTable
from domain.store import Segment
from host_registry.memory import MemoryStore
from scheduler.policies.qos import QosPolicy
from scheduler.registry import make_policy


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
    assert len(group.block_sizes()) >= 5 and group.size == 40
    assert all(size <= 8 for size in group.block_sizes())
    region = store.host("h00").region
    key = ROOM_KEYS[0]

    def fitting(cpu: int, memory: int) -> list[str]:
        return [h.id for _, h in store.candidates([Segment(region, None, True, key, (cpu, memory))])]

    assert fitting(1037, 0) == ["h37", "h38", "h39"]
    assert fitting(1038, 1963) == []  # the largest CPU and memory rooms are on other hosts
    for i in range(39, 2, -1):  # the holders of the largest CPU rooms leave, one by one
        store.remove_host(f"h{i:02d}")
    assert group.size == 3 and len(group.block_sizes()) == 1  # small blocks were merged
    assert fitting(1002, 0) == ["h02"] and fitting(1003, 0) == []


def tasks_sorted_here(store: MemoryStore, host_id: str) -> list[Task]:
    """A host's tasks from every task, in tasks_on's order (class descending, U, id)."""
    return sorted((t for t in store.tasks() if t.host == host_id),
                  key=lambda t: (-t.cls, t.util, t.id))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_hosts_tasks_read_in_order_after_every_kind_of_change(seed: int) -> None:
    """tasks_on keeps each host's order until the host's tasks change: read after every
    change the store takes (placements with kills, cuts and pauses, cuts given back, pauses
    resumed, resizes, ends, utilization reports, a host leaving and coming back), it is the
    order sorted afresh from every task."""
    rng = random.Random(seed)
    store = MemoryStore()
    hosts = [f"h{i}" for i in range(3)]
    for host_id in hosts:
        store.add_host(HostSpec(host_id, 4096, 4096))
    policy = make_policy("qos")
    assert isinstance(policy, QosPolicy)
    changes = Counter[str]()
    for step in range(800):
        now = float(step)
        running = store.tasks()
        roll = rng.random()
        if roll < 0.3:
            request = Request(f"r{step}", rng.randint(1, 4), rng.choice(list(TaskType)),
                              rng.randint(300, 2000), rng.randint(100, 900))
            decision = policy.decide_waiting(request, store, q_s=rng.uniform(-60, 60), now=now,
                                             slo=SloTable(), alpha_s=0.0)
            if not decision.placed:
                continue
            store.apply(decision, now)
            changes[decision.pass_.value] += 1
            changes["pause"] += len(decision.suspends)
        elif roll < 0.45 and running:
            task = rng.choice(running)
            store.update_task_utilization(task.id, rng.random(), rng.random())
            changes["utilization"] += 1
        elif roll < 0.55 and running:
            store.end_task(rng.choice(running).id)
            changes["end"] += 1
        elif roll < 0.65 and running:
            task = rng.choice(running)
            if task.suspended:
                continue
            store.resize_task(task.id, max(1, task.cpu_shares // 2), task.memory)
            changes["resize"] += 1
        elif roll < 0.8:
            changes["restore"] += len(store.restore_cuts(rng.choice(hosts)))
        elif roll < 0.95:
            changes["resume"] += len(store.resume_suspended(rng.choice(hosts), now, SloTable()))
        else:
            host_id = rng.choice(hosts)
            store.remove_host(host_id)
            store.add_host(HostSpec(host_id, 4096, 4096))
            changes["host back"] += 1
        for host_id in hosts:
            assert store.tasks_on(host_id) == tasks_sorted_here(store, host_id), (step, host_id)
    # every kind of change happened
    assert set(+changes) >= {"simple", "cut", "preempt", "utilization", "end", "resize",
                            "pause", "restore", "resume", "host back"}, changes
