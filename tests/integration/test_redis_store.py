"""The Redis store against a real redis-server: the updates of DESIGN 3.8, list moves, a
differential run against the in-memory store, concurrency, and a restart with nothing lost."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from fractions import Fraction

import pytest
import redis

from domain.books import contribution
from domain.classes import ClassTable
from domain.energy import PowerReading
from domain.errors import ConflictError, NotFoundError
from domain.model import HostSpec, Request, TaskType
from domain.pending import PendingReason
from domain.regions import Region
from domain.restore import TaskRestore
from domain.rooms import ROOM_KEYS
from domain.store import ClusterStore, Segment
from domain.tally import EMPTY_TALLY, combine
from host_registry.keys import host_to_hash
from host_registry.memory import MemoryStore
from host_registry.power import RedisPowerReadings
from host_registry.redis_store import RedisStore
from host_registry.redis_tx import CAS_LUA, Batch
from lab.processes import RedisServer
from scheduler.policies.energy import EnergyPolicy
from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import H, T, build, outcome_key, req

pytestmark = pytest.mark.redis

_counter = iter(range(10**6))


@pytest.fixture
def store(redis_srv: RedisServer) -> Iterator[RedisStore]:
    """A Redis store under a fresh key prefix (tests share one redis-server)."""
    redis_store = RedisStore.from_url(redis_srv.url, prefix=f"t{next(_counter)}")
    yield redis_store
    redis_store.flush()


def lists_of(store: RedisStore) -> dict[str, tuple[Region, int | None]]:
    where: dict[str, tuple[Region, int | None]] = {}
    for key, members in store.list_members().items():
        for host_id in members:
            assert host_id not in where, f"{host_id} is in two lists"
            where[host_id] = key
    return where


def assert_books(store: ClusterStore) -> None:
    tasks = {}
    for task in store.tasks():
        tasks.setdefault(task.host, []).append(task)
    for host in store.all_hosts():
        tally = EMPTY_TALLY
        for task in tasks.get(host.id, []):
            tally = combine(tally, contribution(task, store.classes))
        assert host.tally == tally, host.id
        assert host.region is store.bounds.classify(host.util)


# -- the updates of DESIGN 3.8 ----------------------------------------------------------------

def test_placement_cut_and_end_update_books_and_lists(store: RedisStore) -> None:
    build(H("h", 0.3, [T("c3", 3, cpu=1000, mem=10), T("c4", 4, cpu=500, mem=10)]), store=store)
    assert lists_of(store) == {"h": (Region.LEE, 3)}
    scheduler = Scheduler(store, make_policy("energy"))
    outcome = scheduler.submit(req(2, cpu=100, mem=10, id="n"), now=1.0)
    decision = outcome.applied[0]
    assert decision.cuts, "the class-2 request should cut the class-3/4 tasks"
    host = store.host("h")
    assert host.host_class == 2 and lists_of(store) == {"h": (Region.LEE, 2)}
    # by hand: c4 to ceil(500 * 2/3) = 334, c3 to ceil(1000 * 5/6) = 834, plus the new 100
    assert host.cpu_allocated == 334 + 834 + 100
    for cut in decision.cuts:
        task = store.task(cut.task)
        assert task is not None
        assert (task.cpu_shares, task.cut_received) == (cut.cpu_shares, cut.cut_received)
    store.end_task("n")
    assert store.host("h").host_class == 3 and lists_of(store) == {"h": (Region.LEE, 3)}
    store.end_task("c3")
    store.end_task("c4")
    assert store.host("h").tally == EMPTY_TALLY and lists_of(store) == {"h": (Region.LEE, None)}
    assert store.tasks() == []


def test_utilization_updates_move_regions(store: RedisStore, raw_redis: redis.Redis) -> None:
    build(H("a", 0.1, [T("x", 2)]), H("b", 0.9), store=store)
    assert lists_of(store) == {"a": (Region.LEE, 2), "b": (Region.EED, None)}
    store.update_host_utilization("a", 0.2, 0.6)
    store.update_host_utilization("b", 0.5, 0.1)
    assert lists_of(store) == {"a": (Region.DEE, 2), "b": (Region.DEE, None)}
    store.update_task_utilization("x", 0.3, 0.9)
    task = store.task("x")
    assert task is not None and task.util == 0.9
    assert raw_redis.zscore(store.task_keys.by_class("a", 2), "x") == 0.9


def test_kill_removes_victims_and_reschedules(store: RedisStore) -> None:
    build(H("hot", 0.9, [T("keep", 2, cpu=800, mem=100),
                         T("victim", 4, cpu=300, mem=50, orig_cpu=600, orig_mem=100,
                           cut=Fraction(1, 2))]),
          H("spare", 0.2, [T("other", 4, cpu=100, mem=900)]), store=store)
    # (only CPU is missing: victims are killed here, as the thesis did; paused below)
    outcome = Scheduler(store, EnergyPolicy(suspend=False)).submit(
        req(2, cpu=500, mem=1000, id="big"), now=100.0)
    assert [d.request.id for d in outcome.applied] == ["big", "victim"]
    moved = store.task("victim")
    assert moved is not None and moved.host == "spare" and moved.cpu_shares == 600
    assert [t.id for t in store.tasks_on("hot")] == ["big", "keep"]  # same class and util: by id
    assert_books(store)


def test_pending_queue_survives_and_keeps_order(store: RedisStore) -> None:
    build(H("only", 0.2, [T("wall", 1, cpu=1200, mem=1200)]), store=store)
    scheduler = Scheduler(store, make_policy("energy"))
    for request_id, cls in (("q3", 3), ("q1", 1), ("q2", 2)):
        scheduler.submit(req(cls, cpu=500, mem=10, id=request_id), now=5.0, queue=True)
    assert [e.request.id for e in store.pending()] == ["q1", "q2", "q3"]
    assert store.is_pending("q1") and store.is_pending("q2")
    assert store.remove_pending("q2") and not store.remove_pending("q2")
    assert not store.is_pending("q2") and store.is_pending("q3")
    store.end_task("wall")
    outcome = scheduler.retry_pending(now=9.0)
    assert [d.request.id for d in outcome.applied] == ["q1", "q3"]
    assert store.pending() == []
    placed = store.task("q1")
    assert placed is not None and placed.pending_s == pytest.approx(4.0)


def test_host_lost_and_re_registration(store: RedisStore) -> None:
    build(H("gone", 0.3, [T("a", 2, cpu=300, mem=10)]), H("stay", 0.2, [T("b", 2)]), store=store)
    outcome = Scheduler(store, make_policy("energy")).host_lost("gone", now=3.0)
    assert [d.request.id for d in outcome.applied] == ["a"]
    assert set(lists_of(store)) == {"stay"}
    view = store.add_host(HostSpec("stay", 2400, 2400, address="10.123.0.11"))
    assert view.cpu_allocated == 400 and view.address == "10.123.0.11"
    assert store.host("stay").cpu_limits[3] == 3600


def test_cuts_given_back_alike_in_both_stores(store: RedisStore) -> None:
    """DESIGN 3.8: "c4" is cut by 1/2 for the class-1 "cutter"; "w" waits. When the cutter
    ends, "w" is placed first, then "c4" takes the largest step back that fits (to 1/6:
    667 shares; its 100 bytes, below Docker's floor, were never cut); both stores give the
    same back and keep the same books."""
    seen = []
    for target in (store, MemoryStore()):
        build(H("h", 0.3, [T("c4", 4, cpu=800, mem=100)]), store=target)
        scheduler = Scheduler(target, make_policy("energy"))
        scheduler.submit(req(1, cpu=600, mem=100, id="cutter"), now=1.0)
        scheduler.submit(req(4, cpu=1100, mem=100, id="w"), now=2.0, queue=True)
        _, outcome = scheduler.task_ended("cutter", now=3.0)
        assert outcome.restored == [TaskRestore("c4", "h", 667, 100, Fraction(1, 6), 267, 0)]
        assert target.restore_cuts("h") == []  # nothing more: and nothing written
        seen.append((outcome_key(outcome), target.tasks(), list(target.all_hosts())))
    assert seen[0] == seen[1]
    restored = store.task("c4")
    assert restored is not None and (restored.cpu_shares, restored.cut_received) == (
        667, Fraction(1, 6))
    assert lists_of(store) == {"h": (Region.LEE, 4)}
    assert_books(store)


# -- differential: identical decisions, step by step ------------------------------------------

def random_steps(seed: int, count: int) -> Iterator[tuple[str, tuple[object, ...]]]:
    rng = random.Random(seed)
    for number in range(count):
        roll = rng.random()
        if roll < 0.55:
            yield "submit", (Request(f"r{number}", rng.choice([1, 2, 2, 3, 3, 3, 4]),
                                     rng.choice([TaskType.JOB, TaskType.SERVICE]),
                                     rng.randint(100, 3000), rng.randint(1, 3000) * 10**6),
                             rng.random() < 0.3)
        elif roll < 0.75:
            yield "end", (rng.random(),)
        elif roll < 0.9:
            yield "host_util", (rng.random(), rng.random(), rng.random())
        elif roll < 0.97:
            yield "task_util", (rng.random(), rng.random(), rng.random())
        else:
            yield "retry", ()


def run_step(scheduler: Scheduler, step: str, args: tuple[object, ...], now: float) -> object:
    store = scheduler.store
    if step == "submit":
        request, queue = args
        assert isinstance(request, Request) and isinstance(queue, bool)
        return outcome_key(scheduler.submit(request, now, queue=queue))
    if step == "end":
        tasks = store.tasks()
        if not tasks:
            return None
        pick = tasks[int(float(args[0]) * len(tasks))]  # type: ignore[arg-type]
        return outcome_key(scheduler.task_ended(pick.id, now)[1])
    if step == "host_util":
        hosts = [h.id for h in store.all_hosts()]
        host = hosts[int(float(args[0]) * len(hosts))]  # type: ignore[arg-type]
        return store.update_host_utilization(host, float(args[1]), float(args[2]))  # type: ignore[arg-type]
    if step == "task_util":
        tasks = store.tasks()
        if not tasks:
            return None
        pick = tasks[int(float(args[0]) * len(tasks))]  # type: ignore[arg-type]
        return store.update_task_utilization(pick.id, float(args[1]), float(args[2]))  # type: ignore[arg-type]
    return outcome_key(scheduler.retry_pending(now))


def test_differential_memory_and_redis_decide_identically(store: RedisStore) -> None:
    memory = MemoryStore(ClassTable())
    schedulers = [Scheduler(s, make_policy("energy")) for s in (memory, store)]
    rng = random.Random(4)
    for number in range(12):
        spec = HostSpec(f"h{number:02d}", rng.choice([2048, 4096, 8192]),
                        rng.choice([4, 8, 12]) * 10**9)
        util = rng.random()
        for scheduler in schedulers:
            scheduler.store.add_host(spec, util, util / 2)
    steps = restores = paused = 0
    passes: set[str] = set()
    for index, (step, args) in enumerate(random_steps(seed=11, count=3000)):
        results = [run_step(s, step, args, now=float(index)) for s in schedulers]
        assert results[0] == results[1], f"step {index} ({step}) differs"
        steps += 1
        if isinstance(results[0], tuple):  # an outcome: which passes placed something
            passes.update(str(applied["pass"]) for applied, _ in results[0][0])
            restores += len(results[0][4])  # the cuts it gave back
            paused += len(results[0][5])  # the tasks it paused (DESIGN 3.14)
        if index % 500 == 0:
            assert list(memory.all_hosts()) == list(store.all_hosts())
    assert steps == 3000
    assert list(memory.all_hosts()) == list(store.all_hosts())
    assert memory.tasks() == store.tasks()
    assert memory.pending() == store.pending()
    assert {host.id: host.tally for host in memory.all_hosts()} == {
        host.id: host.tally for host in store.all_hosts()}
    assert_books(store)
    assert passes == {"simple", "cut", "kill"}, "the sequence must exercise every pass"
    assert restores > 10, "the sequence must give cuts back"
    assert paused > 0, "the sequence must pause victims"


# -- concurrency ------------------------------------------------------------------------------

def test_concurrent_writers_never_show_a_host_twice_or_not_at_all(store: RedisStore) -> None:
    hosts = [f"h{i}" for i in range(20)]
    for host_id in hosts:
        store.add_host(HostSpec(host_id, 8192, 8 * 2**30), 0.3, 0.3)
    scheduler = Scheduler(store, make_policy("energy"))
    stop = threading.Event()
    errors: list[BaseException] = []
    snapshots = [0]

    def monitor(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(300):
                util = rng.random()
                store.update_host_utilization(rng.choice(hosts), util, rng.random() * util)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def submitter() -> None:
        rng = random.Random(99)
        try:
            for number in range(200):
                scheduler.submit(req(rng.randint(1, 4), cpu=rng.randint(100, 2000),
                                     mem=rng.randint(1, 1000) * 2**20, id=f"c{number}"),
                                 now=float(number), queue=True)
                tasks = store.tasks()
                if tasks and rng.random() < 0.4:
                    scheduler.task_ended(rng.choice(tasks).id, now=float(number))
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                assert sorted(lists_of(store)) == sorted(hosts)
                snapshots[0] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=monitor, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=submitter))
    watcher = threading.Thread(target=reader)
    watcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    stop.set()
    watcher.join(timeout=10)
    assert not errors, errors[0]
    assert snapshots[0] > 10
    assert_books(store)
    for host in store.all_hosts():
        if host.host_class is not None:
            assert host.cpu_allocated <= host.cpu_limits[host.host_class - 1]


# -- restart ----------------------------------------------------------------------------------

def test_redis_restart_loses_nothing(redis_srv: RedisServer) -> None:
    store = RedisStore.from_url(redis_srv.url, prefix="restart")
    try:
        for number in range(4):
            store.add_host(HostSpec(f"n{number}", 4096, 4 * 2**30), 0.2 * number, 0.1)
        scheduler = Scheduler(store, make_policy("energy"))
        for number in range(40):
            scheduler.submit(req(1 + number % 4, cpu=700, mem=600 * 2**20, id=f"q{number}"),
                             now=float(number), queue=True)
        before = (list(store.all_hosts()), store.tasks(), store.pending(), store.list_members())
        assert before[1] and before[2], "the scenario should leave tasks and pending entries"
        redis_srv.restart()  # SIGTERM: redis fsyncs its append-only file and exits
        after_store = RedisStore.from_url(redis_srv.url, prefix="restart")
        after = (list(after_store.all_hosts()), after_store.tasks(), after_store.pending(),
                 after_store.list_members())
        assert after == before
        outcome = Scheduler(after_store, make_policy("energy")).submit(
            req(4, cpu=10, mem=10, id="later"), now=100.0, queue=True)
        assert outcome.applied or outcome.queued
        assert any(e.reason is PendingReason.QUEUED for e in after_store.pending())
    finally:
        RedisStore.from_url(redis_srv.url, prefix="restart").flush()


def test_preemptions_travel_with_tasks_and_pending_entries(store: RedisStore) -> None:
    """A victim's preemptions are kept where it waits and where it runs again (both stores
    agree: the memory store's twin gives the same figures)."""
    for target in (store, MemoryStore()):
        build(H("hot", 0.9, [T("victim", 4, cpu=1100, mem=10)]), store=target)
        scheduler = Scheduler(target, EnergyPolicy(suspend=False))  # killed, not paused
        queued = scheduler.submit(req(3, cpu=1000, mem=10, id="big"), now=10.0).queued
        assert [(e.request.id, e.preemptions) for e in target.pending()] == [("victim", 1)]
        assert queued[0].preemptions == 1
        target.update_host_utilization("hot", 0.1, 0.1)  # calm: it takes work again
        scheduler.task_ended("big", now=20.0)
        moved = target.task("victim")
        assert moved is not None and moved.preemptions == 1
        # its 10 s of run thrown away by the kill (DESIGN 3.10), then 10 s waiting
        assert moved.pending_s == pytest.approx(20.0)


def test_a_paused_task_is_booked_and_resumed_alike_in_both_stores(store: RedisStore) -> None:
    """DESIGN 3.14 in both stores: "victim" (class 4, 600 shares) is paused for "big" (only CPU
    is missing on "hot"): it keeps its memory there and books no CPU; when "big" ends it
    resumes there with its 600 shares, its pause in p; the books of both stores agree."""
    outcomes = []
    for target in (store, MemoryStore()):
        build(H("hot", 0.9, [T("keep", 2, cpu=800, mem=100), T("victim", 4, cpu=600, mem=300)]),
              store=target)
        scheduler = Scheduler(target, make_policy("energy"))
        placed = scheduler.submit(req(2, cpu=500, mem=100, id="big"), now=10.0)
        assert placed.applied[0].suspends == ("victim",) and not placed.killed
        paused = target.task("victim")
        assert paused is not None and (paused.cpu_shares, paused.memory, paused.host) == (
            0, 300, "hot")
        host = target.host("hot")
        assert (host.cpu_allocated, host.memory_allocated) == (1300, 500)
        _, ended = scheduler.task_ended("big", now=40.0)
        resumed = target.task("victim")
        assert resumed is not None and (resumed.cpu_shares, resumed.pending_s) == (600, 30.0)
        assert [t.id for t in ended.resumed] == ["victim"]
        outcomes.append((outcome_key(placed), outcome_key(ended), target.tasks()))
    assert outcomes[0] == outcomes[1]
    assert_books(store)


def test_constraints_and_load_fields_survive_the_round_trip(store: RedisStore) -> None:
    from domain.constraints import check_constraints
    from domain.decision import Decision
    from domain.load import LoadWindow, LoadWindows
    from domain.pending import PendingEntry

    constraints = check_constraints(["node.labels.disk==ssd", "node.hostname!=gs-node2"])
    store.add_host(HostSpec("h", 4096, 2**30, labels=(("disk", "ssd"),)))
    windows = LoadWindows((LoadWindow(300, 0.2, 0.05, 0.3, 0.0, 10),))
    store.update_host_utilization("h", 0.25, 0.3, 1234.5, windows)
    host = store.host("h")
    assert (host.util_at, host.windows) == (1234.5, windows)
    store.update_host_load("h", 1300.0)
    assert store.host("h").util_at == 1300.0 and store.host("h").windows == windows
    request = Request("c", 3, TaskType.JOB, 512, 2**20, constraints)
    store.apply(Decision(request=request, placed=True, host="h", cpu_shares=512,
                         memory=2**20, new_class=3), 5.0)
    task = store.task("c")
    assert task is not None and task.constraints == constraints
    assert task.as_request() == request
    store.push_pending(PendingEntry(Request("w", 2, TaskType.SERVICE, 64, 2**20, constraints),
                                    PendingReason.QUEUED, 1.0, 99.0))
    assert store.pending()[0].request.constraints == constraints


# -- what the round-trip savings must not change ----------------------------------------------

def stored_hosts(store: RedisStore, raw_redis: redis.Redis) -> dict[str, dict[str, str]]:
    """Every host hash as stored, without its stamp."""
    hashes = {}
    for host in store.all_hosts():
        fields = raw_redis.hgetall(store.host_keys.host(host.id))
        fields.pop("stamp")
        hashes[host.id] = fields
    return hashes


def test_host_hashes_hold_every_field_after_partial_writes(store: RedisStore,
                                                           raw_redis: redis.Redis) -> None:
    """Writes send only the fields that changed; the hash still equals the whole record."""
    build(H("h", 0.3, [T("c3", 3, cpu=1000, mem=10), T("c4", 4, cpu=500, mem=10)]),
          H("e", 0.6), store=store)
    scheduler = Scheduler(store, make_policy("energy"))
    scheduler.submit(req(2, cpu=100, mem=10, id="n"), now=1.0)
    store.update_host_utilization("e", 0.1, 0.2)
    store.resize_task("c4", 300, 10)
    store.end_task("n")
    store.restore_cuts("h")
    for host_id, fields in stored_hosts(store, raw_redis).items():
        assert fields == host_to_hash(store.host(host_id)), host_id


def test_apply_after_the_host_changed_since_the_decision(
    store: RedisStore, redis_srv: RedisServer
) -> None:
    """apply first writes from the hashes the decision read; when one changed meanwhile (here
    the host's utilization, by another process) it reads again: the result is the same as
    the memory store's, and a task booked meanwhile by another process is still a conflict."""
    other = RedisStore.from_url(redis_srv.url, prefix=store.host_keys.prefix)
    results = []
    for target, writer in ((store, other), (MemoryStore(), None)):
        build(H("h", 0.3, [T("c4", 4, cpu=800, mem=100)]), H("g", 0.5, cpu=100, mem=100),
              store=target)
        policy = make_policy("energy")
        decision = policy.decide(req(1, cpu=600, mem=100, id="cutter"), target)
        assert decision.host == "h" and decision.cuts
        (writer or target).update_host_utilization("h", 0.45, 0.2)
        target.apply(decision, now=1.0)
        second = policy.decide(req(2, cpu=100, mem=10, id="twice"), target)
        (writer or target).apply(second, now=2.0)
        with pytest.raises(ConflictError):
            target.apply(second, now=3.0)
        results.append((target.tasks(), list(target.all_hosts())))
    assert results[0] == results[1]
    assert set(lists_of(store)) == {"h", "g"}
    assert_books(store)


def test_raise_bounds_raises_known_bounds_only(store: RedisStore, raw_redis: redis.Redis) -> None:
    bound = store.host_keys.bound(Region.LEE, 2)
    raw_redis.hset(bound, mapping={"room_simple_cpu": "10", "room_simple_memory": "5"})
    batch = Batch()
    batch.raise_bounds(bound, {"room_simple_cpu": "7", "room_simple_memory": "9",
                               "room_cut1_cpu": "3"})
    cas = raw_redis.register_script(CAS_LUA)
    assert cas(keys=[store.host_keys.stamp_counter], args=[batch.to_json()]) == 1
    assert raw_redis.hgetall(bound) == {"room_simple_cpu": "10", "room_simple_memory": "9"}


def test_candidates_walk_long_filtered_lists_like_the_memory_store(store: RedisStore) -> None:
    """Lists longer than any read of ids, filtered by room, in both directions and pages."""
    memory = MemoryStore()
    rng = random.Random(7)
    for target in (store, memory):
        for i in range(300):
            spec = HostSpec(f"h{i:03d}", 1000 + (i * 37) % 500, 1000 + (i * 11) % 700)
            target.add_host(spec, 0.05 + (i % 97) / 1000, 0.0)
    region = memory.host("h000").region
    for _ in range(12):
        need = (rng.randint(1000, 1500), rng.randint(1000, 1700))
        segments = [Segment(region, None, ascending, ROOM_KEYS[0], need)
                    for ascending in (True, False)]
        walked = [(i, h) for i, h in store.candidates(segments)]
        assert walked == list(memory.candidates(segments)), need


def test_end_and_resize_read_the_task_and_its_host_together(store: RedisStore,
                                                           raw_redis: redis.Redis) -> None:
    """One script reads a task and its host; the errors are those of two separate reads."""
    build(H("h", 0.3, [T("a", 2, cpu=300, mem=10), T("b", 3, cpu=200, mem=10)]), store=store)
    with pytest.raises(NotFoundError, match="no task 'nope'"):
        store.end_task("nope")
    with pytest.raises(NotFoundError, match="no task 'nope'"):
        store.resize_task("nope", 1, 1)
    resized = store.resize_task("a", 250, 8)
    assert (resized.cpu_shares, resized.memory, resized.host) == (250, 8, "h")
    assert store.end_task("b").id == "b"
    assert [t.id for t in store.tasks_on("h")] == ["a"]
    assert_books(store)
    raw_redis.delete(store.host_keys.host("h"))  # a task left without its host's hash
    with pytest.raises(NotFoundError, match="no host 'h'"):
        store.end_task("a")


def test_a_sibling_registry_shares_the_stores_connection_and_prefix(
    store: RedisStore, raw_redis: redis.Redis
) -> None:
    """What the manager keeps beside the hosts (here the power readings) is made by the store,
    on its connection and under its prefix: flushing the store clears it too."""
    readings = store.sibling(RedisPowerReadings)
    readings.record("h1", PowerReading(42.0, 1.0))
    assert set(raw_redis.hgetall(f"{store.host_keys.prefix}:host-power")) == {"h1"}
    assert readings.readings() == {"h1": PowerReading(42.0, 1.0)}
    store.flush()
    assert readings.readings() == {}
