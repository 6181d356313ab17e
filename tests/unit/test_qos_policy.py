"""The QoS-driven policy (DESIGN 3.11): eligibility, the cost tuple, rounds, admission."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

import scheduler.policies.qos as qos_module
from domain.classes import ClassTable, OverbookingModel
from domain.decision import Pass
from domain.model import HostSpec, Request, Task, TaskType
from domain.pending import PendingReason
from domain.preemption import restarts_from_scratch
from domain.slo import SloTable
from host_registry.memory import MemoryStore
from scheduler.policies.qos import (
    QosOptions,
    QosPolicy,
    _cost,
    _eligible,
    over_cap,
    task_overhead,
    task_q,
    task_q_after,
)
from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import H, build

SLO = SloTable.parse("1=1,2=0.9,4=0.5")
PHI = 10.0


def running(task_id: str, cls: int, *, ran_s: float, waited_s: float = 0.0,
            preemptions: int = 0, host: str = "h", cpu: int = 400) -> Task:
    """A task whose current run started ``ran_s`` before t = 0, after waiting ``waited_s``."""
    return Task(task_id, host, cls, TaskType.SERVICE, cpu, cpu, cpu, cpu, started_at=-ran_s,
                executed_s=0.0, pending_s=waited_s, preemptions=preemptions)


def eligible(q_j: float, j_cls: int, task: Task, now: float, *, cap: bool = True,
             alpha_s: float = 0.0, q_k: float | None = None) -> bool:
    """Whether ``task`` (of Q ``q_k``, by default its Q now) may be killed for a request."""
    if q_k is None:
        q_k = task_q(task, now, SLO, alpha_s)
    return _eligible(j_cls, q_j, task.cls, q_k, PHI,
                     capped=cap and over_cap(task, now, SLO, alpha_s),
                     destroys_work=restarts_from_scratch(task))


def test_a_running_tasks_q_and_overhead() -> None:
    k = running("k", 2, ran_s=0.0, waited_s=0.0, preemptions=2)
    # at t = 90 it ran 90 s (started at 0): Q = 90 / 0.9 - 90 - alpha 5 = 5
    assert task_q(k, 90.0, SLO, 5.0) == pytest.approx(5.0)
    assert task_overhead(k, 90.0, 5.0) == pytest.approx(10 / 100)  # 2 x 5 s over 90 + 10
    assert task_q(running("k", 2, ran_s=90.0), 0.0, SLO, 5.0) == pytest.approx(5.0)


@pytest.mark.parametrize(("case", "q_j", "j_cls", "k_cls", "k_ran_s", "k_waited_s", "expected"), [
    # Q_k >= phi: k may go when j is more urgent, whatever the classes
    ("slack, j more urgent", -5.0, 4, 1, 0.0, 0.0, None),  # class 1 SLO 1: Q_k = 0 < phi
    ("slack, j more urgent", 0.0, 2, 2, 900.0, 0.0, True),  # Q_k = 100
    ("slack, j less urgent", 150.0, 2, 2, 900.0, 0.0, False),  # Q_k = 100 < Q_j
    ("slack, j of a lower class", 0.0, 4, 2, 900.0, 0.0, True),  # importance aside
    # both below phi: only a more important class, or the same class more urgent
    ("both urgent, j more important", -20.0, 2, 4, 0.0, 5.0, True),  # Q_k = -5
    ("both urgent, j less important", -20.0, 4, 2, 0.0, 5.0, False),
    ("both urgent, same class, j worse", -20.0, 2, 2, 0.0, 5.0, True),
    ("both urgent, same class, j better", 0.0, 2, 2, 0.0, 5.0, False),
    # k below phi, j not: k is protected by the margin
    ("k in its margin, j is not", 20.0, 1, 4, 0.0, 5.0, False),
])
def test_eligibility_table(case: str, q_j: float, j_cls: int, k_cls: int, k_ran_s: float,
                           k_waited_s: float, expected: bool | None) -> None:
    k = running("k", k_cls, ran_s=k_ran_s, waited_s=k_waited_s)
    now = 0.0
    got = eligible(q_j, j_cls, k, now)
    if expected is None:  # a class-1 task never has slack (SLO 1): the margin protects it
        assert task_q(k, now, SLO, 0.0) < PHI
        assert got is (j_cls < k_cls and q_j < PHI)
    else:
        assert got is expected, case


def test_the_overhead_cap_protects_a_task_of_the_same_class_only() -> None:
    # ran 900 s with 30 preemptions of 5 s: C = 150 / 1050 > 1 - 0.9 for a silver task
    k = running("k", 2, ran_s=900.0, preemptions=30)
    assert task_overhead(k, 0.0, 5.0) > 0.1
    assert not eligible(-50.0, 2, k, 0.0, alpha_s=5.0)  # same class: capped
    assert eligible(-50.0, 2, k, 0.0, cap=False, alpha_s=5.0)  # without the cap it goes
    bronze = running("b", 4, ran_s=900.0, preemptions=30)
    assert task_overhead(bronze, 0.0, 5.0) < 0.5  # 1 - SLO 0.5: under the cap anyway
    assert eligible(-50.0, 2, bronze, 0.0, alpha_s=5.0)


def test_the_cost_tuple_orders_deeper_and_more_important_victims_first() -> None:
    qs = {"gold": -2.0, "silver": 3.0, "bronze": 8.0, "rich": 110.0, "richer": 510.0,
          "edge": PHI}
    tasks = {name: running(name, cls, ran_s=0.0) for name, cls in
             [("gold", 1), ("silver", 2), ("bronze", 4), ("rich", 2), ("richer", 2),
              ("edge", 2)]}

    def cost(*names: str) -> tuple[float, ...]:
        return _cost([tasks[n] for n in names], [qs[n] for n in names], PHI)

    assert cost("gold") == (12.0, 0.0, 0.0, 0.0, 0.0)
    assert cost("bronze") == (0.0, 0.0, 0.0, 2.0, 0.0)
    assert cost("rich") == (0.0, 0.0, 0.0, 0.0, pytest.approx(1 / 100))
    assert cost("edge") == (0.0, 0.0, 0.0, 0.0, 1000.0)  # no slack at all: 1 / 1 ms
    # lexicographic: any class-1 depth outweighs every class-4 depth; more slack costs less
    assert cost("bronze") < cost("silver") < cost("gold")
    assert cost("richer") < cost("rich") < cost("edge")
    assert cost("rich") < cost("bronze")


def full_host(*tasks: Task, host: str = "h", util: float = 0.3) -> MemoryStore:
    store = MemoryStore(ClassTable(OverbookingModel.NONE))
    build(H(host, util, [], cpu=1200, mem=1200), store=store, classes=store.classes)
    for task in tasks:
        store.load_task(replace(task, host=host))
    return store


def test_preemption_takes_the_most_slack_first_and_never_more_than_needed() -> None:
    # three silver services of 400 fill a 1200 host; a new silver request of 400 arrives
    store = full_host(running("young", 2, ran_s=0.0), running("old", 2, ran_s=2000.0),
                      running("mid", 2, ran_s=500.0))
    policy = QosPolicy(QosOptions(safety_margin_s=PHI))
    request = Request("new", 2, TaskType.SERVICE, 400, 400)
    decision = policy.decide_waiting(request, store, q_s=0.0, now=0.0, slo=SLO, alpha_s=0.0)
    assert decision.placed and decision.pass_ is Pass.PREEMPT
    assert decision.kills == ("old",)  # Q 222 > mid's 55.6 > young's 0: the richest goes
    urgent_but_rich = decision
    # a request with more slack than every running task preempts nothing
    lazy = policy.decide_waiting(request, store, q_s=500.0, now=0.0, slo=SLO, alpha_s=0.0)
    assert not lazy.placed and urgent_but_rich.new_class == 2


def test_among_feasible_hosts_the_smallest_cost_wins() -> None:
    store = MemoryStore(ClassTable(OverbookingModel.NONE))
    build(H("a", 0.3, [], cpu=400, mem=400), H("b", 0.3, [], cpu=400, mem=400), store=store,
          classes=store.classes)
    store.load_task(running("bronze-a", 4, ran_s=30.0, host="a"))
    store.load_task(running("silver-b", 2, ran_s=3000.0, host="b"))
    # bronze-a: Q = 30 / 0.5 - 30 = 30 (slack 20); silver-b: Q = 3000 / 0.9 - 3000 = 333
    request = Request("gold", 1, TaskType.SERVICE, 400, 400)
    decision = QosPolicy().decide_waiting(request, store, q_s=0.0, now=0.0, slo=SLO,
                                          alpha_s=0.0)
    assert (decision.host, decision.kills) == ("b", ("silver-b",))  # 1/323 < 1/20


def qos_scheduler(store: MemoryStore, alpha_s: float = 0.0) -> Scheduler:
    return Scheduler(store, make_policy("qos"), slo=SLO, alpha_s=alpha_s,
                     admits_to_queue=True)


def test_a_round_admits_every_request_and_victims_wait_with_their_own_q() -> None:
    store = full_host(running("a", 2, ran_s=2000.0), running("b", 2, ran_s=1000.0),
                      running("c", 2, ran_s=100.0))
    sched = qos_scheduler(store, alpha_s=2.0)
    outcome = sched.submit(Request("new", 2, TaskType.SERVICE, 400, 400), 0.0)
    [placed] = outcome.applied
    assert (placed.request.id, placed.pass_, placed.kills) == ("new", Pass.PREEMPT, ("a",))
    [victim] = store.pending()
    assert (victim.request.id, victim.reason, victim.preemptions) == (
        "a", PendingReason.VICTIM, 1)
    # its Q: ran 2000 s: 2000 / 0.9 - 2000 - 2 = 220.2 s from now
    assert victim.deadline == pytest.approx(2000 / 0.9 - 2000 - 2.0)
    assert [e.request.id for e in outcome.queued] == ["a"]  # "new" left the queue placed
    assert store.task("a") is None  # never back on the host it left, in the same round


def test_queue_false_keeps_the_thesis_behaviour() -> None:
    store = full_host(running("a", 1, ran_s=0.0), running("b", 1, ran_s=0.0),
                      running("c", 1, ran_s=0.0))
    sched = qos_scheduler(store)
    refused = sched.submit(Request("x", 4, TaskType.JOB, 400, 400), 0.0, queue=False)
    assert refused.refused and not store.pending()
    waiting = sched.submit(Request("y", 4, TaskType.JOB, 400, 400), 0.0)
    assert waiting.waiting and [e.request.id for e in store.pending()] == ["y"]


def test_rounds_share_a_full_cluster_so_every_request_nears_its_slo() -> None:
    """The paper's second validation test in small: one host of 3 slots, 4 silver services
    submitted together; rounds every 10 s for an hour. Everyone runs about 3/4 of the time
    (the priority scheduler would leave one at 0): availabilities close together, none 0."""
    store = MemoryStore(ClassTable(OverbookingModel.NONE))
    build(H("h", 0.3, [], cpu=1200, mem=1200), store=store, classes=store.classes)
    sched = Scheduler(store, make_policy("qos"), slo=SloTable.parse("2=0.75"), alpha_s=1.0,
                      admits_to_queue=True)
    from domain.slo import ServiceClock

    clocks = {f"s{i}": ServiceClock(admitted_s=float(i)) for i in range(4)}

    def follow(outcome: object, t: float) -> None:
        for decision in outcome.applied:  # type: ignore[attr-defined]
            for victim in decision.kills:
                clocks[victim].stopped(t, work_lost=False)  # a service served while it ran
            clocks[decision.request.id].placed(t)
            clocks[decision.request.id].running(t)

    for i in range(4):
        follow(sched.submit(Request(f"s{i}", 2, TaskType.SERVICE, 400, 400), float(i)), float(i))
    for step in range(1, 360):
        t = 3.0 + step * 10.0
        follow(sched.retry_pending(t), t)
    end = 3600.0
    levels = [clock.at(end, 0.75).availability for clock in clocks.values()]
    assert min(levels) > 0.5, levels
    assert max(levels) - min(levels) < 0.15, levels


# -- victims judged after the preemption (DESIGN 3.11, 3.10) ------------------------------------


def running_job(task_id: str, cls: int, *, ran_s: float, executed_s: float = 0.0,
                checkpoint_s: float = 0.0, host: str = "h", cpu: int = 400) -> Task:
    """A job whose current run started ``ran_s`` before t = 0, after ``executed_s`` kept."""
    return Task(task_id, host, cls, TaskType.JOB, cpu, cpu, cpu, cpu, started_at=-ran_s,
                executed_s=executed_s, checkpoint_interval_s=checkpoint_s)


@pytest.mark.parametrize(("case", "task", "q_after"), [
    # a service keeps its run: Q after = Q now = 900 / 0.9 - 900
    ("a service", running("k", 2, ran_s=900.0), 100.0),
    # a job that restarts from scratch: its 900 s go to p; e = 0: Q = -900
    ("a job from scratch", running_job("k", 2, ran_s=900.0), -900.0),
    # a job that ran before (e = 450 kept), then 900 s now: e = 450, p = 900
    ("a job, kept before", running_job("k", 2, ran_s=900.0, executed_s=450.0), 500 - 1350.0),
    # checkpoints every 400 s: 800 of its 900 s kept, 100 s to p: e = 800, p = 100
    ("a checkpointed job", running_job("k", 2, ran_s=900.0, checkpoint_s=400.0),
     800 / 0.9 - 900),
])
def test_a_victims_q_is_judged_right_after_its_preemption(
    case: str, task: Task, q_after: float
) -> None:
    assert task_q_after(task, 0.0, SLO, 0.0) == pytest.approx(q_after), case
    # paused instead (DESIGN 3.14), it would lose nothing: its Q now
    assert task_q_after(task, 0.0, SLO, 0.0, paused=True) == pytest.approx(
        task_q(task, 0.0, SLO, 0.0)), case


@pytest.mark.parametrize(("case", "j_cls", "expected"), [
    ("a request of its own class", 2, False),
    ("a less important class", 4, False),
    ("a more important class", 1, True),
])
def test_a_job_that_restarts_from_scratch_is_never_preempted_for_its_class_or_below(
    case: str, j_cls: int, expected: bool
) -> None:
    """A class-2 job 900 s into its run has Q now 100 s (slack the rule would hand out), but
    killed it restarts from scratch: judged after the preemption (Q = -900) and protected
    from its own class and the less important ones; a service with the same run is not."""
    job = running_job("k", 2, ran_s=900.0)
    q_k = task_q_after(job, 0.0, SLO, 0.0)
    assert eligible(-50.0, j_cls, job, 0.0, q_k=q_k) is expected, case
    service = running("s", 2, ran_s=900.0)
    q_s = task_q_after(service, 0.0, SLO, 0.0)
    assert eligible(-50.0, j_cls, service, 0.0, q_k=q_s), case


def test_qos_preempts_the_service_with_slack_and_spares_the_job_that_would_lose_its_run() -> None:
    """Two hosts, each full: one with a class-2 job 900 s into its run, one with a class-2
    service 900 s into its. A waiting class-2 request (Q = -50 s) takes the service's place:
    the job, judged after the preemption, is not eligible (on main it had the same Q as the
    service and its host came first)."""
    store = MemoryStore(ClassTable(OverbookingModel.NONE))
    build(H("a", 0.9, [], cpu=400, mem=400), H("b", 0.9, [], cpu=400, mem=400), store=store,
          classes=store.classes)
    store.load_task(running_job("job", 2, ran_s=900.0, host="a"))
    store.load_task(running("svc", 2, ran_s=900.0, host="b"))
    policy = QosPolicy(QosOptions(safety_margin_s=PHI))
    decision = policy.decide_waiting(Request("j", 2, TaskType.SERVICE, 400, 400), store,
                                     q_s=-50.0, now=0.0, slo=SLO, alpha_s=0.0)
    assert (decision.placed, decision.host, decision.kills) == (True, "b", ("svc",))


def test_a_round_always_tries_the_arrival_that_started_it() -> None:
    """A queue of 40 victims that fit nowhere (more than the 32 failures a round takes), then
    a class-1 arrival that fits at once: it is tried, and placed, in its own round (on main the
    round stopped before it, and a request of SLO 1 that waits has missed it)."""
    store = MemoryStore(ClassTable())
    build(H("big", 0.3, [], cpu=1200, mem=1200), store=store, classes=store.classes)
    sched = Scheduler(store, make_policy("qos"), slo=SLO, admits_to_queue=True)
    for number in range(40):
        sched.submit(Request(f"v{number:02d}", 3, TaskType.SERVICE, 5000, 100), float(number))
    assert len(store.pending()) == 40
    outcome = sched.submit(Request("gold", 1, TaskType.SERVICE, 400, 400), 100.0)
    assert [d.request.id for d in outcome.applied] == ["gold"]
    assert store.task("gold") is not None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_policy_that_judged_the_hosts_before_decides_as_a_fresh_one(seed: int) -> None:
    """The policy keeps each host's tasks judged at one moment (their order, Q and limits)
    until the host's tasks differ. Decisions at the same moment, with the cluster changing
    between them (placements with kills, cuts and pauses, ends, resizes, utilization
    reports), and across moments: each is the decision a policy that never judged a host
    before makes."""
    rng = random.Random(seed)
    store = MemoryStore()
    for host_id in ("a", "b", "c"):
        store.add_host(HostSpec(host_id, 4096, 4096))
    kept = QosPolicy()
    preempted = 0
    for step in range(600):
        now = float(step // 8)  # eight steps at each moment
        running_now = store.tasks()
        roll = rng.random()
        if roll < 0.6:
            request = Request(f"r{step}", rng.randint(1, 4), rng.choice(list(TaskType)),
                              rng.randint(300, 2000), rng.randint(100, 1500))
            q_s = rng.uniform(-60.0, 60.0)
            decision = kept.decide_waiting(request, store, q_s=q_s, now=now, slo=SLO,
                                           alpha_s=1.0, explain=True)
            fresh = QosPolicy().decide_waiting(request, store, q_s=q_s, now=now, slo=SLO,
                                               alpha_s=1.0, explain=True)
            assert decision == fresh, step
            if decision.placed:
                store.apply(decision, now)
                preempted += decision.pass_ is Pass.PREEMPT
        elif roll < 0.75 and running_now:
            task = rng.choice(running_now)
            store.update_task_utilization(task.id, rng.random(), rng.random())
        elif roll < 0.85 and running_now:
            store.end_task(rng.choice(running_now).id)
        elif running_now:
            task = rng.choice(running_now)
            if not task.suspended:
                store.resize_task(task.id, max(1, task.cpu_shares // 2), task.memory)
    assert preempted >= 10, preempted


@pytest.mark.parametrize("model", list(OverbookingModel))
@pytest.mark.parametrize("seed", [1, 2])
def test_the_quick_refusal_of_a_host_decides_as_the_walk_does(
    seed: int, model: OverbookingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host where even every eligible task preempted leaves the request short is refused
    without walking its tasks. Every decision (host, victims, cost, notes) is the one the walk
    alone makes, over tasks of every class and type, with and without checkpoints, paused,
    protected by the overhead cap, and requests of every class and Q around the margin; and
    the refusal spares most of the walk's steps."""
    rng = random.Random(seed)
    store = MemoryStore(ClassTable(model))
    for host_id in ("a", "b", "c", "d"):
        store.add_host(HostSpec(host_id, 4096, 4096))
    quick = QosPolicy()
    steps = {"quick": 0, "walk": 0}
    counted = qos_module.helps

    def counting(task: Task, cpu_short: bool, memory_short: bool) -> bool:
        steps[mode] += 1
        return counted(task, cpu_short, memory_short)

    monkeypatch.setattr(qos_module, "helps", counting)
    preempted = 0
    for step in range(500):
        now = 7.0 * (step // 4)
        running_now = store.tasks()
        if rng.random() < 0.15 and running_now:
            store.end_task(rng.choice(running_now).id)
            continue
        task_type = rng.choice(list(TaskType))
        checkpoint = rng.choice([0.0, 0.0, 30.0]) if task_type is TaskType.JOB else 0.0
        request = Request(f"r{step}", rng.randint(1, 4), task_type, rng.randint(300, 2500),
                          rng.randint(100, 2000), checkpoint_interval_s=checkpoint)
        q_s = rng.uniform(-40.0, 40.0)
        mode = "quick"
        decision = quick.decide_waiting(request, store, q_s=q_s, now=now, slo=SLO,
                                        alpha_s=2.0, explain=True)
        mode = "walk"
        with monkeypatch.context() as patched:
            patched.setattr(qos_module, "_ascending", lambda limits: False)  # never refuse early
            walked = QosPolicy().decide_waiting(request, store, q_s=q_s, now=now, slo=SLO,
                                                alpha_s=2.0, explain=True)
        assert decision == walked, step
        if decision.placed:
            store.apply(decision, now, executed_s=rng.uniform(0, 300), pending_s=0.0,
                        preemptions=rng.choice([0, 0, 5, 40]))
            preempted += decision.pass_ is Pass.PREEMPT
    assert preempted >= 10, preempted
    assert steps["quick"] < steps["walk"] / 2, steps
