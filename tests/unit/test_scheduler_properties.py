"""Property-based tests: random sequences of events never break the invariants of DESIGN 3.

Every step is driven through the real Scheduler and MemoryStore; after each step the store's
books (allocations, tallies, classes, region lists) are recomputed from its tasks and compared.
A twin scheduler on its own store takes the same steps with ``skip_unchanged=False`` (every
retry decided in full): the outcomes of both must be identical, step by step.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from domain.books import contribution
from domain.classes import ClassTable, after_cut
from domain.decision import Decision, Pass
from domain.model import HostSpec, Request, Task, TaskType
from domain.pending import PendingReason
from domain.preemption import resume_on, suspendable
from domain.regions import REGIONS
from domain.restore import plan_restores
from domain.slo import SloTable
from domain.tally import EMPTY_TALLY, combine
from host_registry.memory import MemoryStore
from scheduler.admission import AdmissionMode
from scheduler.registry import make_policy
from scheduler.service import Outcome, Scheduler
from tests.builders import outcome_key

utilization = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
classes_ = st.integers(min_value=1, max_value=4)
types_ = st.sampled_from([TaskType.JOB, TaskType.SERVICE])


class CheckedStore(MemoryStore):
    """The real in-memory store; each decision is checked against the state it was made on,
    just before it is applied."""

    def apply(
        self,
        decision: Decision,
        now: float,
        executed_s: float = 0.0,
        pending_s: float = 0.0,
        preemptions: int = 0,
    ) -> list[Task]:
        check_decision(self, decision)
        return super().apply(decision, now, executed_s, pending_s, preemptions)


def check_decision(store: MemoryStore, decision: Decision) -> None:
    classes, request = store.classes, decision.request
    assert decision.new_class is not None
    for cut in decision.cuts:
        task = store.task(cut.task)
        assert task is not None and task.host == decision.host
        assert task.cls != 1, "a class 1 task was cut"
        allowance = classes.tolerance(task.cls) - classes.tolerance(decision.new_class)
        assert task.cut_received < cut.cut_received <= allowance, "cut beyond the allowance"
    assert decision.cut_received <= classes.tolerance(request.cls)
    if request.cls == 1:
        assert decision.cut_received == 0, "a class 1 request was cut"
    assert not set(decision.kills) & set(decision.suspends), "a victim killed and paused"
    for victim_id in decision.suspends:  # paused: a job, or a class-4 service (DESIGN 3.14)
        victim = store.task(victim_id)
        assert victim is not None and suspendable(victim), "paused what may not be paused"
    for victim_id in decision.victims:
        victim = store.task(victim_id)
        assert victim is not None and victim.host == decision.host
        if decision.pass_ is Pass.PREEMPT:
            continue  # the QoS-driven policy preempts by Q, any class (test_qos_policy.py)
        if request.cls < 4:
            assert victim.cls > request.cls, "a kill hit a class that is not higher"
        else:
            assert request.type is TaskType.JOB
            assert victim.cls == 4 and victim.type is TaskType.SERVICE


class SchedulingMachine(RuleBasedStateMachine):
    policy_name = "energy"
    admission = AdmissionMode.NONE

    def __init__(self) -> None:
        super().__init__()
        self.classes = ClassTable()
        self.store = CheckedStore(self.classes)
        self.scheduler = Scheduler(self.store, make_policy(self.policy_name, seed=7),
                                   admission=self.admission)
        self.twin_store = MemoryStore(self.classes)
        self.twin = Scheduler(
            self.twin_store, make_policy(self.policy_name, seed=7), skip_unchanged=False,
            admission=self.admission,
        )
        self.now = 0.0
        self.next_id = 0
        self.host_count = 0
        self.admitted: set[str] = set()  # admitted and not over: running, paused or queued

    @initialize(sizes=st.lists(st.sampled_from([1024, 2048, 4096]), min_size=1, max_size=4))
    def hosts(self, sizes: list[int]) -> None:
        for cpu in sizes:
            self.add_host(cpu, 0.0)

    @rule(cpu=st.sampled_from([1024, 2048, 8192]), util=utilization)
    @precondition(lambda self: self.host_count < 8)
    def add_host(self, cpu: int, util: float) -> None:
        self.host_count += 1
        for store in (self.store, self.twin_store):
            store.add_host(HostSpec(f"h{self.host_count}", cpu, cpu * 1000), util, util / 2)

    @rule(cls=classes_, kind=types_, cpu=st.integers(2, 3000), mem_k=st.integers(1, 3000),
          queue=st.booleans())
    def submit(self, cls: int, kind: TaskType, cpu: int, mem_k: int, queue: bool) -> None:
        self.next_id += 1
        self.now += 1.0
        request = Request(f"r{self.next_id}", cls, kind, cpu, mem_k * 1000)
        outcome = self.scheduler.submit(request, self.now, queue=queue)
        self.check_outcome(outcome, self.twin.submit(request, self.now, queue=queue))
        if outcome.admission is not None:  # refused at the door: nothing of it anywhere
            assert self.store.task(request.id) is None
            assert not self.store.is_pending(request.id)
            assert not outcome.decisions and not outcome.applied
        elif not outcome.refused:
            self.admitted.add(request.id)

    @rule(data=st.data())
    @precondition(lambda self: bool(self.store.tasks()))
    def end_task(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.store.tasks()))
        self.now += 5.0
        self.admitted.discard(task.id)
        _, outcome = self.scheduler.task_ended(task.id, self.now)
        self.check_outcome(outcome, self.twin.task_ended(task.id, self.now)[1])
        # room grew there: no task stays cut that could take a step back (DESIGN 3.8), and
        # none stays paused that could run again (3.14)
        host = self.store.host(task.host)
        assert plan_restores(host, self.store.tasks_on(host.id), self.classes) == ()
        assert resume_on(host, self.store.tasks_on(host.id), self.now, SloTable(),
                         self.classes)[1] == ()

    @rule(data=st.data(), cpu=utilization, memory=utilization)
    def host_utilization(self, data: st.DataObject, cpu: float, memory: float) -> None:
        host = data.draw(st.sampled_from([h.id for h in self.store.all_hosts()]))
        for store in (self.store, self.twin_store):
            store.update_host_utilization(host, cpu, memory)

    @rule(data=st.data(), cpu=utilization, memory=utilization)
    @precondition(lambda self: bool(self.store.tasks()))
    def task_utilization(self, data: st.DataObject, cpu: float, memory: float) -> None:
        task = data.draw(st.sampled_from(self.store.tasks()))
        for store in (self.store, self.twin_store):
            store.update_task_utilization(task.id, cpu, memory)

    @rule()
    def retry(self) -> None:
        self.now += 1.0
        self.check_outcome(self.scheduler.retry_pending(self.now),
                           self.twin.retry_pending(self.now))

    @rule(data=st.data())
    @precondition(lambda self: len(list(self.store.all_hosts())) > 1)
    def lose_host(self, data: st.DataObject) -> None:
        host = data.draw(st.sampled_from([h.id for h in self.store.all_hosts()]))
        self.check_outcome(self.scheduler.host_lost(host, self.now),
                           self.twin.host_lost(host, self.now))

    # -- checks on each outcome ---------------------------------------------------------------

    def check_outcome(self, outcome: Outcome, twin: Outcome) -> None:
        assert outcome_key(outcome) == outcome_key(twin), "skipping a retry changed an outcome"
        pending = {entry.request.id: entry for entry in self.store.pending()}
        for restore in outcome.restored:  # made last: the store holds them as listed
            task = self.store.task(restore.task)
            assert task is not None and task.host == restore.host
            assert (task.cpu_shares, task.memory, task.cut_received) == (
                restore.cpu_shares, restore.memory, restore.cut_received)
            assert restore.cpu_returned >= 0 and restore.memory_returned >= 0
        killed = {victim.id for victim in outcome.killed}
        for paused in outcome.suspended:  # paused on its host, its memory still booked there,
            # unless a later decision of the event killed it (its memory was needed, 3.14)
            now = self.store.task(paused.id)
            assert (now is not None and now.host == paused.host) or paused.id in killed, (
                "a paused task was lost")
            assert paused.suspended and paused.cpu_shares == 0
        for resumed in outcome.resumed:
            assert not resumed.suspended and resumed.cpu_shares > 0
        for victim in outcome.killed:
            running = self.store.task(victim.id)
            assert running is not None or victim.id in pending, "a victim was lost"
            if running is not None:
                assert running.host != victim.host or running.started_at > victim.started_at
                assert running.original_cpu_shares == victim.original_cpu_shares
                assert running.cls == victim.cls
            else:
                assert pending[victim.id].reason is PendingReason.VICTIM

    # -- invariants on the store --------------------------------------------------------------

    @invariant()
    def books_match_tasks(self) -> None:
        tasks_by_host: dict[str, list[Task]] = {}
        for task in self.store.tasks():
            tasks_by_host.setdefault(task.host, []).append(task)
        seen: list[str] = []
        for region in REGIONS:
            for cls in (None, 1, 2, 3, 4):
                for host_id in self.store.group_members(region, cls):
                    seen.append(host_id)
                    host = self.store.host(host_id)
                    assert (host.region, host.host_class) == (region, cls)
        assert sorted(seen) == sorted(h.id for h in self.store.all_hosts()), "host lists"
        for host in self.store.all_hosts():
            tally = EMPTY_TALLY
            for task in tasks_by_host.get(host.id, []):
                tally = combine(tally, contribution(task, self.classes))
            assert host.tally == tally, f"books of {host.id} drifted"
            assert host.region is self.store.bounds.classify(host.util)
            expected = sorted(tasks_by_host.get(host.id, []), key=lambda t: (-t.cls, t.util, t.id))
            assert self.store.tasks_on(host.id) == expected
            # the store's index of cut tasks (restore_cuts reads only those), and of paused ones
            assert self.store._cut_tasks[host.id] == {
                t.id for t in tasks_by_host.get(host.id, []) if t.cut_received > 0}
            assert self.store._paused_tasks[host.id] == {
                t.id for t in tasks_by_host.get(host.id, []) if t.suspended}

    @invariant()
    def admitted_requests_are_never_refused_later(self) -> None:
        """DESIGN 3.13: once admitted, a request runs, is paused, or waits, until it ends."""
        running = {task.id for task in self.store.tasks()}
        waiting = {entry.request.id for entry in self.store.pending()}
        assert self.admitted <= running | waiting, "an admitted request disappeared"

    @invariant()
    def twin_has_the_same_books(self) -> None:
        assert self.store.tasks() == self.twin_store.tasks()
        assert self.store.pending() == self.twin_store.pending()

    @invariant()
    def no_host_beyond_its_class_limit(self) -> None:
        for host in self.store.all_hosts():
            if host.host_class is None:
                continue
            factor = self.classes.max_factor(host.host_class)
            assert host.cpu_allocated <= host.cpu_capacity * factor
            assert host.memory_allocated <= host.memory_capacity * factor
            if self.policy_name not in ("energy", "qos"):  # the policies that overbook
                assert host.cpu_allocated <= host.cpu_capacity
                assert host.memory_allocated <= host.memory_capacity

    @invariant()
    def tasks_within_their_allowance(self) -> None:
        for task in self.store.tasks():
            assert task.cut_received <= self.classes.tolerance(task.cls)
            cpu = task.cpu_shares
            if task.suspended:  # paused: no CPU booked, the CPU it resumes with kept
                assert cpu == 0 and suspendable(replace(task, suspended_cpu_shares=0))
                cpu = task.suspended_cpu_shares
            if task.cls == 1:
                assert task.cut_received == 0 and cpu == task.original_cpu_shares
            assert cpu >= after_cut(task.original_cpu_shares, task.cut_received)
            assert cpu <= task.original_cpu_shares
            assert cpu <= self.store.host(task.host).cpu_capacity

    @invariant()
    def pending_is_ordered_and_disjoint_from_running(self) -> None:
        entries = self.store.pending()
        keys = [e.order_key for e in entries]
        assert keys == sorted(keys)
        assert not {e.request.id for e in entries} & {t.id for t in self.store.tasks()}
        assert all(e.pending_s >= 0.0 and e.executed_s >= 0.0 for e in entries)


SETTINGS = settings(max_examples=200, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

TestEnergyMachine = SchedulingMachine.TestCase
TestEnergyMachine.settings = SETTINGS


class SpreadMachine(SchedulingMachine):
    policy_name = "spread"


class BinpackMachine(SchedulingMachine):
    policy_name = "binpack"


class RandomMachine(SchedulingMachine):
    policy_name = "random"


class QosMachine(SchedulingMachine):
    """The QoS-driven policy under the same invariants: never beyond M(class) x capacity, the
    books exact, no victim lost, the queue in order (DESIGN 3.11)."""

    policy_name = "qos"


class EnergyAdmissionMachine(SchedulingMachine):
    """Admission control on (DESIGN 3.13): every request that asks to queue is admitted first;
    an admitted one is never refused later."""

    admission = AdmissionMode.SLO


class QosAdmissionMachine(QosMachine):
    admission = AdmissionMode.SLO


TestEnergyAdmissionMachine = EnergyAdmissionMachine.TestCase
TestEnergyAdmissionMachine.settings = settings(SETTINGS, max_examples=60)
TestQosAdmissionMachine = QosAdmissionMachine.TestCase
TestQosAdmissionMachine.settings = settings(SETTINGS, max_examples=30)
TestQosMachine = QosMachine.TestCase
TestQosMachine.settings = settings(SETTINGS, max_examples=40)
TestSpreadMachine = SpreadMachine.TestCase
TestSpreadMachine.settings = settings(SETTINGS, max_examples=15)
TestBinpackMachine = BinpackMachine.TestCase
TestBinpackMachine.settings = settings(SETTINGS, max_examples=15)
TestRandomMachine = RandomMachine.TestCase
TestRandomMachine.settings = settings(SETTINGS, max_examples=15)
