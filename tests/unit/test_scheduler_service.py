"""Rescheduling of victims, the pending queue (DESIGN 3.7) and registry updates (3.8)."""

import random
from collections.abc import Collection, Iterable
from dataclasses import replace
from fractions import Fraction as F
from typing import Any

import pytest

from domain.classes import ClassTable
from domain.decision import Decision, Pass
from domain.errors import ConflictError, NotFoundError
from domain.model import HostSpec, HostView, Request, Task, TaskType
from domain.pending import PendingEntry, PendingReason
from domain.regions import Region
from domain.slo import SloTable
from domain.store import ClusterReader
from host_registry.memory import MemoryStore
from scheduler.policies.energy import EnergyPolicy
from scheduler.service import Scheduler
from tests.builders import JOB, SERVICE, H, T, build, req


def killing() -> EnergyPolicy:
    """The energy policy with every victim killed: these tests follow victims through
    rescheduling and the queue (DESIGN 3.6, 3.7); pausing them (3.14) is tested apart."""
    return EnergyPolicy(suspend=False)


def scheduler(*hosts: H) -> Scheduler:
    return Scheduler(build(*hosts), killing())


def test_victim_is_rescheduled_with_original_resources_elsewhere() -> None:
    # "big" cannot go to "spare" (memory), so it kills "victim" on the EED host "hot".
    sched = scheduler(
        H("hot", 0.9, [T("keep", 2, cpu=800, mem=100),
                       T("victim", 4, cpu=300, mem=50, orig_cpu=600, orig_mem=100, cut=F(1, 2))]),
        H("spare", 0.2, [T("other", 4, cpu=100, mem=900)]),
    )
    outcome = sched.submit(req(2, cpu=500, mem=1000, id="big"), now=100.0)
    first, second = outcome.applied
    assert (first.request.id, first.host, first.pass_, first.kills) == (
        "big", "hot", Pass.KILL, ("victim",))
    assert second.request.id == "victim" and second.host == "spare"
    moved = sched.store.task("victim")
    assert moved is not None and moved.host == "spare"
    assert (moved.cpu_shares, moved.memory, moved.cut_received) == (600, 100, 0)
    assert (moved.original_cpu_shares, moved.original_memory, moved.cls) == (600, 100, 4)
    assert [t.id for t in outcome.killed] == ["victim"]


def test_victim_never_returns_to_the_host_it_was_removed_from() -> None:
    # After "big" lands, "hot" still has room for the victim, but it must go elsewhere (or wait).
    sched = scheduler(H("hot", 0.9, [T("victim", 4, cpu=1700, mem=10)]))
    outcome = sched.submit(req(3, cpu=1000, mem=10, id="big"), now=50.0)
    assert [d.request.id for d in outcome.applied] == ["big"]
    assert [e.request.id for e in outcome.queued] == ["victim"]
    assert outcome.queued[0].reason is PendingReason.VICTIM
    assert sched.store.task("victim") is None


def test_unplaced_victim_waits_and_is_placed_when_room_frees_up() -> None:
    sched = scheduler(H("hot", 0.9, [T("victim", 4, cpu=1100, mem=10)]), H("small", 0.2,
                      [T("blocker", 1, cpu=1000, mem=10)]))
    outcome = sched.submit(req(3, cpu=1000, mem=10, id="big"), now=10.0)
    assert [e.request.id for e in outcome.queued] == ["victim"]
    _, retry = sched.task_ended("blocker", now=70.0)
    assert [d.request.id for d in retry.applied] == ["victim"]
    assert sched.store.pending() == []
    placed = sched.store.task("victim")
    assert placed is not None and placed.host == "small" and placed.cpu_shares == 1100
    # its 10 s of run thrown away by the kill (DESIGN 3.10), then its 60 s in the queue
    assert (placed.executed_s, placed.pending_s) == pytest.approx((0.0, 70.0))


def test_pending_queue_orders_by_time_to_violate_then_class() -> None:
    sched = scheduler(H("only", 0.2, [T("wall", 1, cpu=1200, mem=1200)]))
    for request_id, cls in (("q3", 3), ("q1", 1), ("q2", 2)):
        outcome = sched.submit(req(cls, cpu=500, mem=10, id=request_id), now=5.0, queue=True)
        assert outcome.queued and not outcome.refused
    # Same enqueue time, nothing executed: equal time-to-violate; class 1 first on ties.
    assert [e.request.id for e in sched.store.pending()] == ["q1", "q2", "q3"]
    # A service that ran 100 s with objective 1/2 may wait 100 s more: it goes after them. A
    # job that ran 100 s delivered nothing (it restarts from scratch, DESIGN 3.10): its 100 s
    # are p, its Q -100 s: it goes first.
    sched.reschedule([_task("ran", 4, started_at=0.0, task_type=SERVICE),
                      _task("restarts", 4, started_at=0.0)],
                     now=100.0, reason=PendingReason.VICTIM)
    sched.submit(req(2, cpu=500, mem=10, id="late"), now=150.0, queue=True)
    order = [e.request.id for e in sched.store.pending()]
    assert order == ["restarts", "q1", "q2", "q3", "late", "ran"]
    deadlines = {e.request.id: e.deadline for e in sched.store.pending()}
    assert deadlines["ran"] == pytest.approx(200.0) and deadlines["late"] == 150.0
    assert deadlines["restarts"] == pytest.approx(0.0)


def _task(task_id: str, cls: int, started_at: float, task_type: TaskType = JOB) -> Task:
    return Task(task_id, "gone", cls, task_type, 500, 10, 500, 10, started_at=started_at)


def test_new_request_is_refused_when_nothing_places_it_unless_queued() -> None:
    sched = scheduler(H("only", 0.2, [T("wall", 1, cpu=1200, mem=1200)]))
    outcome = sched.submit(req(1, cpu=100, id="no"), now=0.0)
    assert [d.request.id for d in outcome.refused] == ["no"] and not outcome.queued
    assert sched.store.pending() == []
    with pytest.raises(ConflictError):
        sched.submit(req(1, id="wall"), now=0.0)


def test_a_request_waiting_in_the_queue_cannot_be_submitted_again() -> None:
    sched = scheduler(H("only", 0.2, [T("wall", 1, cpu=1200, mem=1200)]))
    outcome = sched.submit(req(1, cpu=100, id="waits"), now=0.0, queue=True)
    assert [e.request.id for e in outcome.queued] == ["waits"]
    decision = outcome.decision_for("waits")  # why it waits, for the client's answer
    assert decision is not None and not decision.placed and decision.reason
    assert not outcome.refused
    assert sched.store.is_pending("waits") and not sched.store.is_pending("wall")
    with pytest.raises(ConflictError):
        sched.submit(req(1, cpu=100, id="waits"), now=1.0)
    assert [e.request.id for e in sched.store.pending()] == ["waits"]


def test_kill_chains_end_and_every_victim_is_accounted_for() -> None:
    hosts = [H(f"h{i}", 0.9, [T(f"t{i}", 4, cpu=900, mem=10, type=SERVICE),
                              T(f"u{i}", 3, cpu=700, mem=10)]) for i in range(3)]
    sched = scheduler(*hosts)
    outcome = sched.submit(req(1, cpu=1100, mem=10, id="strict"), now=0.0)
    victims = {t.id for t in outcome.killed}
    placed_again = {d.request.id for d in outcome.applied[1:]}
    queued = {e.request.id for e in outcome.queued}
    assert victims == placed_again | queued
    assert not placed_again & queued
    # worked by hand: 'strict' (class 1, 1100) fits only by killing both tasks of h0; the
    # class-3 victim u0 then kills the class-4 t1 on h1; t0 and t1 find no room and wait
    first = outcome.applied[0]
    assert (first.request.id, first.pass_, first.host, first.kills) == (
        "strict", Pass.KILL, "h0", ("t0", "u0"))
    assert victims == {"t0", "u0", "t1"} and placed_again == {"u0"} and queued == {"t0", "t1"}


# -- registry updates of 3.8 ------------------------------------------------------------------

def test_placement_grows_allocation_and_lowers_class() -> None:
    store = build(H("h", 0.3, [T("a", 3, cpu=300, mem=200)]))
    sched = Scheduler(store, killing())
    sched.submit(req(2, cpu=100, mem=50, id="n"), now=0.0)
    host = store.host("h")
    assert (host.cpu_allocated, host.memory_allocated, host.host_class) == (400, 250, 2)
    assert store.group_members(Region.LEE, 2) == ["h"] and store.group_members(Region.LEE, 3) == []


def test_cut_shrinks_allocation_but_not_class_or_region() -> None:
    store = build(H("h", 0.3, [T("c3", 3, cpu=1000, mem=10), T("c4", 4, cpu=500, mem=10)]))
    sched = Scheduler(store, killing())
    outcome = sched.submit(req(2, cpu=100, mem=10, id="n"), now=0.0)
    decision = outcome.applied[0]
    assert decision.pass_ is Pass.CUT and decision.cuts
    host = store.host("h")
    # by hand: c4 is cut by t(4) - t(2) = 1/3 -> ceil(500 * 2/3) = 334; c3 by t(3) - t(2) = 1/6
    # -> ceil(1000 * 5/6) = 834; plus the new 100
    assert {c.task: c.cpu_shares for c in decision.cuts} == {"c4": 334, "c3": 834}
    assert host.cpu_allocated == 334 + 834 + 100
    assert host.region is Region.LEE and host.host_class == 2
    for cut in decision.cuts:
        task = store.task(cut.task)
        assert task is not None and task.cpu_shares == cut.cpu_shares
        assert task.cut_received == cut.cut_received


def test_task_end_frees_and_recomputes_class() -> None:
    store = build(H("h", 0.3, [T("strict", 1, cpu=300, mem=10), T("loose", 4, cpu=200, mem=10)]))
    store.end_task("strict")
    host = store.host("h")
    assert (host.cpu_allocated, host.host_class) == (200, 4)
    assert store.group_members(Region.LEE, 4) == ["h"] and store.group_members(Region.LEE, 1) == []
    store.end_task("loose")
    assert store.host("h").host_class is None and store.group_members(Region.LEE, None) == ["h"]
    with pytest.raises(NotFoundError):
        store.end_task("loose")


def test_utilization_update_moves_region_only_when_a_bound_is_crossed() -> None:
    store = build(H("h", 0.3, [T("a", 2)]))
    store.update_host_utilization("h", 0.45, 0.2)
    assert store.group_members(Region.LEE, 2) == ["h"]
    store.update_host_utilization("h", 0.2, 0.7)  # U = max(cpu, memory)
    assert store.group_members(Region.DEE, 2) == ["h"] and store.group_members(Region.LEE, 2) == []
    store.update_host_utilization("h", 0.9, 0.1)
    assert store.host("h").region is Region.EED


def test_host_lost_reschedules_its_tasks_like_victims() -> None:
    store = build(H("gone", 0.3, [T("a", 2, cpu=300, mem=10)]), H("stay", 0.2, [T("b", 2)]))
    sched = Scheduler(store, killing())
    outcome = sched.host_lost("gone", now=5.0)
    assert [d.request.id for d in outcome.applied] == ["a"]
    task = store.task("a")
    assert task is not None and task.host == "stay"
    with pytest.raises(NotFoundError):
        store.host("gone")


def test_add_host_is_idempotent_and_keeps_tasks() -> None:
    store = build(H("h", 0.3, [T("a", 2, cpu=300, mem=10)]))
    store.add_host(HostSpec("h", 1200, 1200))
    assert store.host("h").cpu_allocated == 300 and store.host("h").util == 0.3


# -- retries skip what no changed host can take ----------------------------------------------

class CountingPolicy:
    """The real energy policy; counts the decisions it is asked for, by request id."""

    def __init__(self) -> None:
        self.inner = killing()
        self.name = self.inner.name
        self.calls: list[str] = []

    def decide(self, request: Request, view: ClusterReader, **kwargs: Any) -> Decision:
        self.calls.append(request.id)
        return self.inner.decide(request, view, **kwargs)

    def may_place(self, request: Request, hosts: Iterable[HostView], classes: ClassTable) -> bool:
        return self.inner.may_place(request, hosts, classes)


def waiting_victim(
    skip_unchanged: bool = True, store: MemoryStore | None = None
) -> tuple[Scheduler, CountingPolicy]:
    """"victim" (class 4, 1100 shares) waits: "small" and "other" have 200 shares free."""
    policy = CountingPolicy()
    sched = Scheduler(
        build(
            H("hot", 0.9, [T("victim", 4, cpu=1100, mem=10)]),
            H("small", 0.2, [T("blocker", 1, cpu=1000, mem=10)]),
            H("other", 0.2, [T("stays", 1, cpu=1000, mem=10)]),
            store=store,
        ),
        policy,
        skip_unchanged=skip_unchanged,
    )
    outcome = sched.submit(req(3, cpu=1000, mem=10, id="big"), now=10.0)
    assert [e.request.id for e in outcome.queued] == ["victim"]
    policy.calls.clear()
    return sched, policy


def test_retry_does_not_decide_when_no_changed_host_can_take_the_request() -> None:
    sched, policy = waiting_victim()
    sched.retry_pending(now=11.0)  # the first retry decides: nothing is known yet
    assert policy.calls == ["victim"]
    sched.store.update_host_utilization("other", 0.3, 0.3)  # changed, still 200 shares free
    outcome = sched.retry_pending(now=12.0)
    assert policy.calls == ["victim"], "decided although no changed host has room"
    assert outcome.applied == [] and [e.request.id for e in sched.store.pending()] == ["victim"]
    _, outcome = sched.task_ended("blocker", now=13.0)  # "small" now has room: decided, placed
    assert policy.calls == ["victim", "victim"]
    assert [d.request.id for d in outcome.applied] == ["victim"]
    placed = sched.store.task("victim")
    assert placed is not None and placed.host == "small"


class ShortLogStore(MemoryStore):
    """A store whose change log reaches back two changes only (as a third party's may): an
    older mark reads as "anything may have changed"."""

    def changed_since(self, mark: int) -> Collection[HostView] | None:
        if mark < self.change_mark() - 2:
            return None
        return super().changed_since(mark)


def test_retry_decides_in_full_without_the_skip_or_when_the_log_is_too_short() -> None:
    sched, policy = waiting_victim(skip_unchanged=False)
    for now in (11.0, 12.0, 13.0):
        sched.retry_pending(now)
    assert policy.calls == ["victim"] * 3
    sched, policy = waiting_victim(store=ShortLogStore())
    sched.retry_pending(now=11.0)
    for util in (0.3, 0.31, 0.32, 0.33):  # more changes than the log keeps
        sched.store.update_host_utilization("other", util, util)
    sched.retry_pending(now=12.0)
    assert policy.calls == ["victim", "victim"]


def test_change_log_lists_changed_hosts_as_they_are_now() -> None:
    store = build(H("a", 0.2, [T("t", 2)]), H("b", 0.2), H("c", 0.2))
    assert isinstance(store, MemoryStore)
    mark = store.change_mark()
    assert store.changed_since(mark) == []
    store.update_host_utilization("a", 0.6, 0.1)
    store.end_task("t")
    store.remove_host("b")
    changed = store.changed_since(mark)
    assert changed == [store.host("a")]  # once, current view; "b" left; "c" did not change
    assert changed is not None and changed[0].region is Region.DEE and changed[0].task_count == 0
    assert store.changed_since(store.change_mark()) == []


def test_change_log_reaches_back_to_any_mark_one_view_per_host() -> None:
    """However many changes were made since a mark (more than 2**16 here, which the log
    kept once), the hosts changed since are listed, each once, the last changed first."""
    store = build(H("a", 0.2), H("b", 0.2), H("c", 0.2))
    assert isinstance(store, MemoryStore)
    start = store.change_mark()
    store.update_host_utilization("c", 0.3, 0.3)
    middle = store.change_mark()
    for i in range(70_000):
        store.update_host_utilization("a", 0.2 + (i % 2) / 10, 0.2)
    store.update_host_utilization("c", 0.4, 0.4)
    assert store.changed_since(start) == [store.host("c"), store.host("a")]
    assert store.changed_since(middle) == [store.host("c"), store.host("a")]
    last = store.change_mark()
    store.update_host_utilization("a", 0.5, 0.5)
    assert store.changed_since(last) == [store.host("a")]
    assert store.change_mark() == last + 1


def test_a_victim_carries_its_preemptions_and_waits_in_q_order() -> None:
    """The queue's order is the QoS metric (DESIGN 3.10): each class's objective from the SLO
    table, the allocation time it needs to run again; the preemptions travel with the task."""
    store = build(H("hot", 0.9, [T("victim", 4, cpu=1100, mem=10)]))
    loaded = store.task("victim")
    assert loaded is not None
    store.end_task("victim")
    store.load_task(replace(loaded, started_at=0.0, executed_s=40.0, pending_s=10.0,
                            preemptions=2))
    sched = Scheduler(store, killing(), slo=SloTable.parse("4=0.25"), alpha_s=5.0)
    outcome = sched.submit(req(3, cpu=1000, mem=10, id="big"), now=100.0)
    [entry] = outcome.queued
    assert (entry.request.id, entry.preemptions) == ("victim", 3)
    # e = 40, p = 10 + 100 (its run here, thrown away by the kill: DESIGN 3.10):
    # Q = 40 / 0.25 - 150 - 5 = 5 s from now
    assert (entry.executed_s, entry.pending_s) == (40.0, 110.0)
    assert entry.deadline == pytest.approx(100.0 + 5.0)
    new = sched.submit(req(1, cpu=5000, mem=10, id="late"), now=120.0, queue=True)
    assert new.queued[0].deadline == 120.0  # a new request starts at Q = 0: no alpha
    assert [e.request.id for e in store.pending()] == ["victim", "late"]


@pytest.mark.parametrize("seed", range(6))
def test_a_retry_tries_in_order_what_no_smaller_failure_rules_out(seed: int) -> None:
    """The retry's walk (``Scheduler._retry_in_order``) against a plain statement of its
    rule: in the queue's order, an entry is skipped when one of the same class and type, at
    most as large in both CPU and memory, failed earlier in the same retry; at most
    ``retry_limit`` are tried. Nothing fits here, so every entry tried fails."""
    rng = random.Random(seed)
    policy = CountingPolicy()
    sched = Scheduler(build(H("full", 0.9, [T("stays", 1, cpu=4000, mem=4000)])), policy,
                      skip_unchanged=False, retry_limit=rng.choice([8, 32, 1000]))
    for i in range(300):
        request = Request(f"r{i}", rng.randint(1, 4), rng.choice([JOB, SERVICE]),
                          rng.randint(1, 40) * 100_000, rng.randint(1, 40) * 100_000)
        sched.store.push_pending(PendingEntry(request, PendingReason.QUEUED, 0.0,
                                              deadline=rng.uniform(0, 100)))
    expected: list[str] = []
    failed: list[Request] = []
    for entry in sched.store.pending():
        if len(expected) >= sched.retry_limit:
            break
        r = entry.request
        if any(f.cls == r.cls and f.type == r.type and f.cpu_shares <= r.cpu_shares
               and f.memory <= r.memory for f in failed):
            continue
        expected.append(r.id)
        failed.append(r)
    outcome = sched.retry_pending(now=1.0)
    assert outcome.applied == []
    assert policy.calls == expected
    assert len(expected) < 300  # (some were skipped)


def test_a_read_of_the_queue_is_a_snapshot() -> None:
    """The store lends its queue to a reader: a later change never shows in what was read."""
    store = MemoryStore()
    first = PendingEntry(req(2, id="a"), PendingReason.QUEUED, 0.0, deadline=5.0)
    store.push_pending(first)
    read = store.pending()
    assert store.pending() == read == [first]
    second = PendingEntry(req(2, id="b"), PendingReason.QUEUED, 0.0, deadline=1.0)
    store.push_pending(second)
    assert read == [first] and store.pending() == [second, first]
    again = store.pending()
    assert store.remove_pending("a")
    assert again == [second, first] and store.pending() == [second]
