"""Cuts given back (DESIGN 3.8): the order and bounds of restorations with hand-worked numbers,
their maximality on random hosts, and the scheduler giving back where room grew.

Hosts are 1200 shares and 1200 bytes (tests.builders): the class limits are 1200, 1400, 1600
and 1800 (M = 1, 7/6, 4/3, 3/2).
"""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from domain.books import contribution
from domain.classes import MEMORY_FLOOR, ClassTable, after_cut
from domain.decision import Pass
from domain.model import HostView, Task
from domain.pending import PendingReason
from domain.restore import TaskRestore, plan_restores, restore_levels
from domain.tally import EMPTY_TALLY, combine
from host_registry.memory import MemoryStore
from scheduler.policies.energy import EnergyPolicy
from scheduler.service import Scheduler
from tests.builders import HOST_SIZE, SERVICE, H, T, build, req
from workloads.cluster import MIB

CLASSES = ClassTable()


def store_of(*tasks: T, util: float = 0.3, mem: int = HOST_SIZE) -> MemoryStore:
    store = build(H("h", util, list(tasks), mem=mem))
    assert isinstance(store, MemoryStore)
    return store


def cut_task(id: str, cls: int, cut: F, cpu: int, mem: int = 100) -> T:
    """A task of original ``cpu`` and ``mem`` that was cut by ``cut``."""
    return T(id, cls, cpu=after_cut(cpu, cut), mem=after_cut(mem, cut, MEMORY_FLOOR), orig_cpu=cpu,
             orig_mem=mem, cut=cut)


# -- order and bounds, by hand ----------------------------------------------------------------

def test_the_levels_are_the_cuts_of_the_class_table_below_the_task_s_own() -> None:
    task = Task("t", "h", 4, SERVICE, 300, 50, 600, 100, F(1, 2))
    assert restore_levels(task, CLASSES) == (F(0), F(1, 6), F(1, 3))
    assert restore_levels(Task("t", "h", 2, SERVICE, 5, 5, 6, 6, F(1, 6)), CLASSES) == (F(0),)


def test_a_host_with_room_gives_every_cut_back_in_full() -> None:
    # The class-1 task that caused the cuts has left: the host is class 3 (limit 1600), 700
    # booked. "a" (class 4, cut 1/2: 300 of 600) and "b" (class 3, cut 1/3: 400 of 600) both
    # get their originals back: 700 + 300 + 200 = 1200 <= 1600.
    store = store_of(cut_task("a", 4, F(1, 2), 600), cut_task("b", 3, F(1, 3), 600))
    restores = store.restore_cuts("h")
    # (their 100 bytes are below Docker's floor: never cut, nothing to give back)
    assert restores == [TaskRestore("a", "h", 600, 100, F(0), 300, 0),
                        TaskRestore("b", "h", 600, 100, F(0), 200, 0)]
    for task_id in ("a", "b"):
        task = store.task(task_id)
        assert task is not None
        assert (task.cpu_shares, task.memory, task.cut_received) == (600, 100, 0)
    assert store.host("h").cpu_allocated == 1200
    assert store.restore_cuts("h") == []  # nothing left to give back


def test_the_most_cut_first_then_the_smallest_cut_that_fits() -> None:
    # Class 3 host (limit 1600): "a" 300 (cut 1/2 of 600), "b" 400 (cut 1/3 of 600), "c" 800
    # uncut: 1500 booked, room 100. "a" is the most cut: back to 0 needs +300, to 1/6 +200
    # (ceil(600 x 5/6) = 500), to 1/3 +100 (400): it takes 1/3. No room is left for "b",
    # whose one step (to 1/6: 500, +100) would need 100 more.
    store = store_of(cut_task("a", 4, F(1, 2), 600, mem=10), cut_task("b", 3, F(1, 3), 600, mem=10),
                     T("c", 3, cpu=800, mem=10))
    restores = store.restore_cuts("h")
    assert [(r.task, r.cpu_shares, r.cut_received, r.cpu_returned) for r in restores] == [
        ("a", 400, F(1, 3), 100)]
    b = store.task("b")
    assert b is not None and (b.cpu_shares, b.cut_received) == (400, F(1, 3))
    assert store.host("h").cpu_allocated == 1600  # exactly the limit, never beyond


def test_equal_cuts_go_by_class_ascending_then_id() -> None:
    # Class-1 host (limit 1200): "keep" (class 1) 100, "x" (class 2) and "y" (class 4) both
    # cut by 1/6 of 600 (500 each): 1100 booked, room 100. Each one's only step is back to 0
    # (+100): the class-2 task gets it; "y", though its id comes later anyway, would have had
    # to wait for class alone: "a" (class 4, same cut) loses to "x" too.
    store = store_of(T("keep", 1, cpu=100, mem=10), cut_task("y", 4, F(1, 6), 600, mem=6),
                     cut_task("x", 2, F(1, 6), 600, mem=6))
    restores = store.restore_cuts("h")
    assert [(r.task, r.cpu_shares, r.cut_received) for r in restores] == [("x", 600, F(0))]
    store = store_of(T("keep", 1, cpu=100, mem=10), cut_task("a", 4, F(1, 6), 600, mem=6),
                     cut_task("x", 2, F(1, 6), 600, mem=6))
    assert [r.task for r in store.restore_cuts("h")] == ["x"]
    # same cut and class: by id
    store = store_of(T("keep", 1, cpu=100, mem=10), cut_task("q", 2, F(1, 6), 600, mem=6),
                     cut_task("p", 2, F(1, 6), 600, mem=6))
    assert [r.task for r in store.restore_cuts("h")] == ["p"]


def test_a_class_1_host_never_restores_into_overbooking() -> None:
    # "k" (class 1, 600) keeps the host at class 1 (limit = capacity, 1200). "c" (class 4,
    # cut 1/2 of 1000: 500) would need +167 for its nearest step (1/3: 667); 1100 booked.
    store = store_of(T("k", 1, cpu=600, mem=10), cut_task("c", 4, F(1, 2), 1000, mem=10))
    assert store.restore_cuts("h") == []
    assert store.host("h").cpu_allocated == 1100
    # With 67 more shares free (the class-1 task now books 533), the step fits exactly.
    store = store_of(T("k", 1, cpu=533, mem=10), cut_task("c", 4, F(1, 2), 1000, mem=10))
    restores = store.restore_cuts("h")
    assert [(r.task, r.cpu_shares, r.cut_received) for r in restores] == [("c", 667, F(1, 3))]
    assert store.host("h").cpu_allocated == HOST_SIZE  # 533 + 667: not one share beyond


def test_never_above_the_original_nor_the_machine() -> None:
    # "big" asked for 1400 shares, more than this host has, and was placed cut by 1/6 (1167)
    # on it when it was class 1. Now class 2 (limit 1400): the room would allow its original,
    # but one task never exceeds the machine: it stays cut.
    store = store_of(cut_task("big", 2, F(1, 6), 1400, mem=10))
    assert store.restore_cuts("h") == []
    big = store.task("big")
    assert big is not None and big.cpu_shares == 1167


def test_memory_the_node_kept_is_never_taken_back() -> None:
    # "a" was cut by 1/2 (600 -> 300 shares, 600 -> 300 MiB), but the node kept 450 MiB (the
    # task used them): the books say 450. Restored fully, its memory is 600; restored to 1/3
    # it would be max(450, 400) = 450, never 400. (Memory in MiB: above Docker's floor.)
    a = T("a", 4, cpu=300, mem=450 * MIB, orig_cpu=600, orig_mem=600 * MIB, cut=F(1, 2))
    store = store_of(a, T("c", 3, cpu=900, mem=100 * MIB), mem=HOST_SIZE * MIB)
    # class 3, limit 1600: booked 1200 CPU, room 400 -> back to 0 (+300 CPU, +150 MiB)
    assert store.restore_cuts("h") == [
        TaskRestore("a", "h", 600, 600 * MIB, F(0), 300, 150 * MIB)]
    store = store_of(a, T("c", 3, cpu=1200, mem=100 * MIB), mem=HOST_SIZE * MIB)
    # room 100 CPU: the step to 1/3 (400 shares), memory stays at the 450 the node kept
    assert store.restore_cuts("h") == [TaskRestore("a", "h", 400, 450 * MIB, F(1, 3), 100, 0)]


def test_a_host_without_cut_tasks_is_left_alone() -> None:
    store = store_of(T("a", 4, cpu=300, mem=10), T("b", 2, cpu=300, mem=10))
    mark = store.change_mark()
    assert store.restore_cuts("h") == []
    assert store.change_mark() == mark  # not even logged as changed: retries skip as before


# -- maximality on random hosts ---------------------------------------------------------------

@st.composite
def cut_tasks(draw: st.DrawFn) -> T:
    cls = draw(st.integers(1, 4))
    cut = draw(st.sampled_from(sorted({CLASSES.request_cut(cls, c) for c in (1, 2, 3, 4)})))
    # mostly tasks a few of which fill a host; now and then one larger than the host
    # (placed cut on it, it may never get all of it back)
    size = st.one_of(st.integers(20, 600), st.integers(1000, 1400))
    orig_cpu, orig_mem = draw(size), draw(size)
    cpu, mem = after_cut(orig_cpu, cut), after_cut(orig_mem, cut, MEMORY_FLOOR)
    kept = draw(st.integers(0, orig_mem - mem)) if draw(st.booleans()) else 0  # a partial cut
    return T("", cls, cpu=cpu, mem=mem + kept, orig_cpu=orig_cpu, orig_mem=orig_mem, cut=cut)


def room_left(host: HostView) -> tuple[int, int]:
    cls = host.host_class
    assert cls is not None
    return (host.cpu_limits[cls - 1] - host.cpu_allocated,
            host.memory_limits[cls - 1] - host.memory_allocated)


@settings(max_examples=300)
@given(tasks=st.lists(cut_tasks(), min_size=1, max_size=8), gone=st.lists(st.booleans()))
def test_after_restoration_fits_holds_and_no_task_could_take_one_more_step(
    tasks: list[T], gone: list[bool]
) -> None:
    # a host within the limit of its class, as every store keeps one: the tasks drawn, in
    # order, as long as they fit ...
    kept: list[T] = []
    for i, t in enumerate(tasks):
        limit = CLASSES.limit(HOST_SIZE, min(k.cls for k in (*kept, t)))
        if (t.cpu <= HOST_SIZE and t.mem <= HOST_SIZE
                and sum(k.cpu for k in kept) + t.cpu <= limit
                and sum(k.mem for k in kept) + t.mem <= limit):
            kept.append(T(f"t{i}", t.cls, t.cpu, t.mem, orig_cpu=t.orig_cpu,
                          orig_mem=t.orig_mem, cut=t.cut))
    # ... then room grows: some tasks leave (the class may rise)
    staying = [t for i, t in enumerate(kept) if i >= len(gone) or not gone[i]]
    assume(staying)
    store = store_of(*staying)
    before = {t.id: t for t in store.tasks_on("h")}
    restores = store.restore_cuts("h")
    host = store.host("h")
    after = {t.id: t for t in store.tasks_on("h")}
    event("restored" if restores else "nothing restored")
    event("some stay cut" if any(t.cut_received for t in after.values()) else "none stays cut")

    cpu_room, memory_room = room_left(host)
    assert cpu_room >= 0 and memory_room >= 0, "fits no longer holds for the host's class"
    if host.host_class == 1:
        assert host.cpu_allocated <= HOST_SIZE and host.memory_allocated <= HOST_SIZE
    assert [r.task for r in restores] == [  # the most cut first, then class, then id
        t.id for t in sorted((before[r.task] for r in restores),
                             key=lambda t: (-t.cut_received, t.cls, t.id))]
    for restore in restores:
        old, new = before[restore.task], after[restore.task]
        assert restore.cut_received in restore_levels(old, CLASSES)
        assert (new.cpu_shares, new.memory, new.cut_received) == (
            restore.cpu_shares, restore.memory, restore.cut_received)
        assert new.cpu_shares == max(old.cpu_shares,
                                     after_cut(old.original_cpu_shares, new.cut_received))
        assert new.memory == max(old.memory, after_cut(old.original_memory, new.cut_received,
                                                       MEMORY_FLOOR))
        assert new.cpu_shares <= new.original_cpu_shares and new.memory <= new.original_memory
        assert new.cpu_shares <= HOST_SIZE and new.memory <= HOST_SIZE  # within the machine
        assert (restore.cpu_returned, restore.memory_returned) == (
            new.cpu_shares - old.cpu_shares, new.memory - old.memory)
    for task in after.values():  # maximality: every further step breaks fits
        for level in restore_levels(task, CLASSES):
            cpu = max(task.cpu_shares, after_cut(task.original_cpu_shares, level))
            memory = max(task.memory, after_cut(task.original_memory, level, MEMORY_FLOOR))
            assert (cpu - task.cpu_shares > cpu_room or memory - task.memory > memory_room
                    or cpu > HOST_SIZE or memory > HOST_SIZE), f"{task.id} could take {level}"
    tally = EMPTY_TALLY
    for task in after.values():
        tally = combine(tally, contribution(task, CLASSES))
    assert host.tally == tally, "the books drifted"
    assert plan_restores(host, after.values(), CLASSES) == ()
    assert store.restore_cuts("h") == []


# -- the scheduler gives back where room grew -------------------------------------------------

def energy(store: MemoryStore) -> Scheduler:
    """The energy policy whose victims are killed (a paused one keeps its memory, 3.14)."""
    return Scheduler(store, EnergyPolicy(suspend=False))


def test_a_task_ends_and_its_cut_neighbour_gets_its_resources_back() -> None:
    # "c4" (class 4, 800 shares, 100 bytes) is cut by 1/2 to make room for the class-1
    # "cutter" (600): 400 + 600 = 1000 <= 1200 (its 100 bytes, below Docker's floor, stay).
    # When the cutter ends the host is class 4 again (limit 1800) and "c4" gets its 800
    # shares back.
    store = store_of(T("c4", 4, cpu=800, mem=100))
    sched = energy(store)
    placed = sched.submit(req(1, cpu=600, mem=100, id="cutter"), now=1.0)
    assert placed.applied[0].pass_ is Pass.CUT and placed.restored == []
    cut = store.task("c4")
    assert cut is not None and (cut.cpu_shares, cut.memory, cut.cut_received) == (400, 100, F(1, 2))
    _, outcome = sched.task_ended("cutter", now=2.0)
    assert outcome.restored == [TaskRestore("c4", "h", 800, 100, F(0), 400, 0)]
    back = store.task("c4")
    assert back is not None and (back.cpu_shares, back.memory, back.cut_received) == (800, 100, 0)


def test_waiting_requests_take_the_room_first_then_the_cut_tasks_get_the_rest() -> None:
    # As above, and "w" (class 4, 1100 shares) waits: on the class-1 host it fits in no pass.
    # When the cutter ends, "w" is placed first (400 + 1100 = 1500 <= 1800); then "c4" takes
    # the largest step that still fits: to 1/6 (667, +267: 1767 <= 1800), not back to 800.
    # Giving back first would have left "w" waiting (800 + 1100 > 1800, and nothing is cut
    # on a class-4 host for a class-4 request).
    store = store_of(T("c4", 4, cpu=800, mem=100))
    sched = energy(store)
    sched.submit(req(1, cpu=600, mem=100, id="cutter"), now=1.0)
    waiting = sched.submit(req(4, cpu=1100, mem=100, id="w"), now=2.0, queue=True)
    assert [e.request.id for e in waiting.queued] == ["w"]
    _, outcome = sched.task_ended("cutter", now=3.0)
    assert [d.request.id for d in outcome.applied] == ["w"]
    assert outcome.restored == [TaskRestore("c4", "h", 667, 100, F(1, 6), 267, 0)]
    assert store.host("h").cpu_allocated == 1767


def test_a_kill_gives_the_room_its_victims_leave_back_to_the_cut_tasks() -> None:
    # EED host of class 2 (limit 1400): "keep" 400, "c3" (class 3, cut 1/6 of 400: 334),
    # "victim" (class 4) 600: 1334 booked. The class-2 request (300) kills "victim" (734 +
    # 300 = 1034); the 366 shares left give "c3" its 400 back (+66).
    store = store_of(T("keep", 2, cpu=400, mem=10), cut_task("c3", 3, F(1, 6), 400, mem=12),
                     T("victim", 4, cpu=600, mem=10), util=0.9)
    outcome = energy(store).submit(req(2, cpu=300, mem=10, id="new"), now=1.0)
    assert outcome.applied[0].kills == ("victim",)
    assert outcome.restored == [TaskRestore("c3", "h", 400, 12, F(0), 66, 0)]  # 12 bytes: uncut


def test_a_task_killed_on_request_gives_its_room_back_and_a_lost_host_is_skipped() -> None:
    store = store_of(T("c4", 4, cpu=800, mem=100))
    sched = energy(store)
    sched.submit(req(1, cpu=600, mem=100, id="cutter"), now=1.0)
    cutter = store.end_task("cutter")  # the manager's kill: off its host, then rescheduled
    outcome = sched.reschedule([cutter], now=2.0, reason=PendingReason.VICTIM)
    assert [e.request.id for e in outcome.queued] == ["cutter"]  # never back on its host
    assert [r.task for r in outcome.restored] == ["c4"]
    lost = sched.host_lost("h", now=3.0)
    assert lost.restored == [] and [e.request.id for e in lost.queued] == ["c4"]


def test_restorations_in_every_outcome_are_in_the_store() -> None:
    """What an outcome lists is what the store holds (the simulator and the manager apply
    the list, not the store)."""
    store = store_of(T("c4", 4, cpu=800, mem=100), T("c3", 3, cpu=300, mem=100))
    sched = energy(store)
    sched.submit(req(1, cpu=300, mem=100, id="cutter"), now=1.0)
    _, outcome = sched.task_ended("cutter", now=2.0)
    assert outcome.restored
    for restore in outcome.restored:
        task = store.task(restore.task)
        assert task is not None
        assert (task.cpu_shares, task.memory, task.cut_received) == (
            restore.cpu_shares, restore.memory, restore.cut_received)
