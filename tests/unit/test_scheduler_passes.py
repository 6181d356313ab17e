"""The energy policy, rule by rule (DESIGN 3.4-3.6). Hosts are 1200 shares x 1200 bytes, so
the class limits are 1200, 1400, 1600, 1800. Utilization < .5 is LEE, .5-.85 DEE, > .85 EED."""

from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.classes import ClassTable
from domain.decision import Pass
from domain.model import Task, TaskType
from domain.preemption import suspend, work_lost_s
from scheduler.policies.energy import EmptyHosts, EnergyPolicy
from scheduler.victims import VictimOrder
from tests.builders import JOB, SERVICE, H, T, build, host_tasks, req, task_strategy
from workloads.cluster import MIB

ENERGY = EnergyPolicy()
# The thesis's kill pass: victims by class, then utilization, every one killed.
THESIS_KILLS = EnergyPolicy(victims=VictimOrder.THESIS, suspend=False)


def host_of(store_hosts: tuple[H, ...], request_cls: int, **kw: object) -> str | None:
    decision = ENERGY.decide(req(request_cls, **kw), build(*store_hosts))  # type: ignore[arg-type]
    return decision.host


# -- simple pass: candidate order ------------------------------------------------------------

@pytest.mark.parametrize(("name", "hosts", "rc", "expected"), [
    ("LEE before DEE",
     (H("dee", 0.6, [T("a", 1)]), H("lee", 0.3, [T("b", 1)])), 4, "lee"),
    ("class ascending inside a region, before U",
     (H("c2", 0.45, [T("a", 2)]), H("c1", 0.1, [T("b", 1)])), 4, "c1"),
    ("U descending inside a class (LEE: climb to DEE)",
     (H("low", 0.2, [T("a", 2)]), H("high", 0.4, [T("b", 2)])), 4, "high"),
    ("U descending inside a class (DEE: best fit)",
     (H("d1", 0.55, [T("a", 3)]), H("d2", 0.8, [T("b", 3)])), 4, "d2"),
    ("hosts of a higher class than the request are not simple candidates",
     (H("c3", 0.3, [T("a", 3)]), H("empty", 0.0)), 2, "empty"),
    ("EED hosts are never simple candidates",
     (H("eed", 0.9, [T("a", 1)]), H("empty", 0.0)), 1, "empty"),
    ("empty hosts come after every LEE and DEE host",
     (H("empty", 0.0), H("dee", 0.7, [T("a", 2)])), 2, "dee"),
    ("a full host is skipped for the next candidate",
     (H("full", 0.4, [T("a", 1, cpu=1150)]), H("next", 0.3, [T("b", 1)])), 1, "next"),
    ("equal U: descending walk takes the larger id",
     (H("h1", 0.3, [T("a", 1)]), H("h2", 0.3, [T("b", 1)])), 1, "h2"),
])
def test_simple_pass_order(name: str, hosts: tuple[H, ...], rc: int, expected: str) -> None:
    decision = ENERGY.decide(req(rc), build(*hosts))
    assert decision.placed, name
    assert (decision.host, decision.pass_) == (expected, Pass.SIMPLE), name
    assert decision.cuts == () and decision.kills == ()


def test_empty_hosts_inside_lee_is_an_option() -> None:
    hosts = (H("empty", 0.0), H("dee", 0.7, [T("a", 2)]), H("lee", 0.2, [T("b", 2)]))
    assert ENERGY.decide(req(2), build(*hosts)).host == "lee"
    thesis_like = EnergyPolicy(empty_hosts=EmptyHosts.LEE)
    assert thesis_like.decide(req(2), build(*hosts)).host == "lee"  # classed LEE hosts first
    hosts = (H("empty", 0.0), H("dee", 0.7, [T("a", 2)]))
    assert ENERGY.decide(req(2), build(*hosts)).host == "dee"
    assert thesis_like.decide(req(2), build(*hosts)).host == "empty"


def test_empty_host_takes_any_class_and_becomes_that_class() -> None:
    for rc in (1, 2, 3, 4):
        decision = ENERGY.decide(req(rc, cpu=1200, mem=1200), build(H("e", 0.0)))
        assert decision.placed and decision.new_class == rc


def test_one_task_never_exceeds_the_machine() -> None:
    # M(4) would allow 1800 on this host, but no single task may be larger than the host.
    decision = ENERGY.decide(req(4, cpu=1201), build(H("e", 0.0), H("f", 0.3, [T("a", 4)])))
    assert not decision.placed


@pytest.mark.parametrize(("host_class", "allocated", "rc", "cpu", "fits"), [
    (4, 1700, 4, 100, True),     # 1800 = 1200 x 3/2
    (4, 1700, 4, 101, False),
    (3, 1500, 3, 100, True),     # 1600
    (3, 1500, 4, 100, True),     # class stays 3: limit 1600
    (3, 1500, 4, 101, False),
    (2, 1300, 2, 100, True),     # 1400
    (1, 1100, 1, 100, True),     # 1200
    (1, 1100, 4, 101, False),
])
def test_simple_fit_uses_the_new_host_class(
    host_class: int, allocated: int, rc: int, cpu: int, fits: bool
) -> None:
    store = build(H("h", 0.3, [T("a", host_class, cpu=allocated, mem=10)]))
    decision = ENERGY.decide(req(rc, cpu=cpu, mem=10), store)
    placed_simply = decision.placed and decision.pass_ is Pass.SIMPLE
    assert placed_simply is fits


# -- cut pass: the consequences listed at the end of DESIGN 3.5 --------------------------------

@pytest.mark.parametrize(("rc", "hc", "cut"), [
    (2, 1, F(1, 6)), (3, 1, F(1, 3)), (3, 2, F(1, 6)),
    (4, 1, F(1, 2)), (4, 2, F(1, 3)), (4, 3, F(1, 6))])
def test_request_is_cut_by_the_class_difference(rc: int, hc: int, cut: F) -> None:
    limit = ClassTable().limit(1200, hc)  # memory in MiB here: above Docker's floor
    store = build(H("h", 0.3, [T("a", hc, cpu=limit - 90, mem=10 * MIB)], mem=1200 * MIB))
    decision = ENERGY.decide(req(rc, cpu=100, mem=60 * MIB), store)
    assert (decision.placed, decision.pass_, decision.cut_received) == (True, Pass.CUT, cut)
    assert decision.cpu_shares == -(-100 * (1 - cut) // 1)  # ceil: 84, 67 or 50
    assert decision.memory == -(-60 * MIB * (1 - cut) // 1)
    assert decision.new_class == hc  # the request does not lower the host class
    assert decision.cuts == ()


@pytest.mark.parametrize("hc", [1, 2, 3, 4])
def test_class_1_requests_are_never_cut(hc: int) -> None:
    limit = ClassTable().limit(1200, hc)
    store = build(H("h", 0.3, [T("a", hc, cpu=limit - 90, mem=10)]))
    decision = ENERGY.decide(req(1, cpu=100, mem=10), store)
    assert decision.cut_received == 0
    assert (decision.cpu_shares, decision.memory) == ((100, 10) if decision.placed else (0, 0))
    # On a class-1 host nothing can give way; on a looser host the *tasks* are cut instead.
    assert decision.placed is (hc > 1)
    assert all(c.task == "a" for c in decision.cuts)


@pytest.mark.parametrize("hc", [2, 3, 4])
def test_class_2_request_is_cut_only_on_a_class_1_host(hc: int) -> None:
    limit = ClassTable().limit(1200, hc)
    store = build(H("h", 0.3, [T("a", hc, cpu=limit - 90, mem=10, type=SERVICE)]))
    decision = ENERGY.decide(req(2, cpu=100, mem=10), store)
    assert decision.cut_received == 0


def test_nothing_is_cut_for_a_class_4_request_on_a_class_4_host() -> None:
    store = build(H("h", 0.3, [T("a", 4, cpu=900, mem=10, util=0.0),
                               T("b", 4, cpu=850, mem=10, util=0.1)]))
    decision = ENERGY.decide(req(4, cpu=100, mem=10), store)
    assert not decision.placed
    assert decision.cuts == ()


def test_tasks_are_cut_by_class_descending_then_utilization_ascending() -> None:
    # class-3 host, 1500 allocated; a class-2 request of 100 needs allocation <= 1300 (M(2)).
    tasks = [T("c3", 3, cpu=600, mem=10), T("busy4", 4, cpu=300, mem=10, util=0.5),
             T("idle4", 4, cpu=600, mem=10, util=0.1)]
    decision = ENERGY.decide(req(2, cpu=100, mem=10), build(H("h", 0.3, tasks)))
    assert decision.placed and decision.pass_ is Pass.CUT
    # idle4 (class 4, least used) alone frees 600 - ceil(600 x 2/3) = 200: enough.
    assert [(c.task, c.cpu_shares, c.cut_received) for c in decision.cuts] == [
        ("idle4", 400, F(1, 3))]
    assert decision.new_class == 2 and decision.cpu_shares == 100  # the request is not cut

    tasks[1].util, tasks[2].util = 0.1, 0.5  # now busy4 is the least used
    decision = ENERGY.decide(req(2, cpu=100, mem=10), build(H("h", 0.3, tasks)))
    assert [c.task for c in decision.cuts] == ["busy4", "idle4"]


def test_cut_counts_earlier_cuts_and_never_exceeds_the_allowance() -> None:
    # "old" was already cut by 1/6 (720 -> 600); for host class 2 its total may reach 1/3.
    tasks = [T("a", 3, cpu=800, mem=10, cut=F(1, 6), orig_cpu=960),  # 1/3 - 1/6 - 1/6 = 0
             T("old", 4, cpu=600, mem=10, orig_cpu=720, cut=F(1, 6))]
    decision = ENERGY.decide(req(2, cpu=100, mem=10), build(H("h", 0.3, tasks)))
    assert [(c.task, c.cpu_shares, c.cut_received) for c in decision.cuts] == [
        ("old", 480, F(1, 3))]  # ceil(720 x 2/3)


def test_cut_pass_never_uses_eed_hosts() -> None:
    tasks = [T("a", 4, cpu=1700, mem=10, util=0.1)]
    store = build(H("eed", 0.9, tasks), H("lee", 0.3, [T("b", 3, cpu=1000, mem=10),
                                                      T("c", 4, cpu=500, mem=10)]))
    decision = ENERGY.decide(req(2, cpu=100, mem=10), store)
    assert decision.pass_ is Pass.CUT and decision.host == "lee"


@pytest.mark.parametrize(("name", "hosts", "expected"), [
    ("LEE before DEE",
     (H("dee", 0.6, [T("a", 4, cpu=1700, mem=10)]), H("lee", 0.3, [T("b", 4, cpu=1700, mem=10)])),
     "lee"),
    ("class ascending",
     (H("c4", 0.4, [T("a", 4, cpu=1700, mem=10)]),
      H("c3", 0.1, [T("b", 3, cpu=1000, mem=10), T("c", 4, cpu=580, mem=10)])), "c3"),
    ("U descending",
     (H("low", 0.1, [T("a", 4, cpu=1700, mem=10)]), H("high", 0.4, [T("b", 4, cpu=1700, mem=10)])),
     "high"),
])
def test_cut_pass_order(name: str, hosts: tuple[H, ...], expected: str) -> None:
    decision = ENERGY.decide(req(3, cpu=100, mem=10), build(*hosts))
    assert (decision.pass_, decision.host) == (Pass.CUT, expected), name


def test_cut_pass_does_not_search_tasks_on_a_stricter_host() -> None:
    # "strict" (class 1) is first in order and holds a cuttable class-4 task, but a class-3
    # request that does not fit there after its own cut moves on to the next host.
    strict = H("strict", 0.45, [T("a", 1, cpu=700, mem=10), T("b", 4, cpu=480, mem=10)])
    loose = H("loose", 0.1, [T("c", 3, cpu=1000, mem=10), T("d", 4, cpu=580, mem=10)])
    decision = ENERGY.decide(req(3, cpu=100, mem=10), build(strict, loose))
    assert decision.host == "loose"
    assert [c.task for c in decision.cuts] == ["d"]


# -- kill pass ------------------------------------------------------------------------------

def full(id: str, util: float, *tasks: T) -> H:
    return H(id, util, list(tasks))


@pytest.mark.parametrize(("name", "hosts", "rc", "expected"), [
    ("EED before DEE",
     (full("dee", 0.7, T("a", 4, cpu=1800, mem=10)), full("eed", 0.95, T("b", 4, cpu=1800, mem=10))),
     3, "eed"),
    ("EED by U ascending (closest to DEE first)",
     (full("hot", 0.99, T("a", 4, cpu=1800, mem=10)), full("warm", 0.9, T("b", 4, cpu=1800, mem=10))),
     3, "warm"),
    ("DEE by U descending",
     (full("d1", 0.6, T("a", 4, cpu=1800, mem=10)), full("d2", 0.8, T("b", 4, cpu=1800, mem=10))),
     3, "d2"),
    ("host classes rc, rc+1, ..., 4, then rc-1, ..., 1 (rc=2: 2 before 3)",
     (full("c3", 0.9, T("a", 3, cpu=1600, mem=10)),
      full("c2", 0.99, T("b", 2, cpu=1000, mem=10), T("c", 4, cpu=400, mem=10))), 2, "c2"),
    ("rc=2: class 4 before class 1",
     (full("c1", 0.9, T("a", 1, cpu=1100, mem=10), T("b", 4, cpu=100, mem=10)),
      full("c4", 0.99, T("c", 4, cpu=1800, mem=10))), 2, "c4"),
    ("rc=3: 3, 4, then 2",
     (full("c2", 0.9, T("a", 2, cpu=1000, mem=10), T("b", 4, cpu=400, mem=10)),
      full("c4", 0.99, T("c", 4, cpu=1800, mem=10))), 3, "c4"),
    ("LEE hosts are never kill candidates",
     (full("lee", 0.3, T("a", 1, cpu=1200, mem=10)), full("eed", 0.9, T("b", 4, cpu=1800, mem=10))),
     3, "eed"),
])
def test_kill_pass_order(name: str, hosts: tuple[H, ...], rc: int, expected: str) -> None:
    # 400 shares: more than cutting the DEE hosts' tasks could free, so the cut pass fails.
    decision = ENERGY.decide(req(rc, cpu=400, mem=10), build(*hosts))
    assert (decision.pass_, decision.host) == (Pass.KILL, expected), name
    assert decision.victims, name


def test_victims_by_class_descending_then_utilization_ascending_until_it_fits() -> None:
    host = full("eed", 0.9, T("c1", 1, cpu=600, mem=10), T("c3", 3, cpu=200, mem=10, util=0.0),
                T("c4busy", 4, cpu=150, mem=10, util=0.9), T("c4idle", 4, cpu=250, mem=10, util=0.1))
    # class 2 request of 500; new class = 1 (c1 stays) -> limit 1200; allocated 1200.
    decision = THESIS_KILLS.decide(req(2, cpu=500, mem=10), build(host))
    assert decision.kills == ("c4idle", "c4busy", "c3")
    assert decision.new_class == 1
    decision = THESIS_KILLS.decide(req(2, cpu=250, mem=10), build(host))
    assert decision.kills == ("c4idle",)


def test_kills_only_hit_strictly_higher_classes() -> None:
    host = full("eed", 0.9, T("same", 2, cpu=1000, mem=10), T("higher", 3, cpu=300, mem=10))
    decision = ENERGY.decide(req(2, cpu=700, mem=10), build(host))
    assert not decision.placed  # killing "higher" frees 300: not enough, "same" is protected
    decision = ENERGY.decide(req(2, cpu=300, mem=10), build(host))
    assert decision.victims == ("higher",)


@pytest.mark.parametrize(("request_type", "kills"), [(JOB, ("svc",)), (SERVICE, None)])
def test_class_4_requests_kill_only_class_4_services_and_only_for_jobs(
    request_type: object, kills: tuple[str, ...] | None
) -> None:
    host = full("eed", 0.9, T("job", 4, cpu=1000, mem=10, util=0.0),
                T("svc", 4, cpu=800, mem=10, type=SERVICE, util=0.5))
    decision = ENERGY.decide(req(4, cpu=300, mem=10, type=request_type), build(host))  # type: ignore[arg-type]
    assert decision.victims == kills if kills else not decision.placed


def test_kill_pass_places_without_kills_when_an_eed_host_has_room() -> None:
    decision = ENERGY.decide(req(3, cpu=100, mem=10), build(full("eed", 0.9, T("a", 3, cpu=300))))
    assert (decision.pass_, decision.kills) == (Pass.KILL, ())


def test_exclusion_is_respected_by_every_pass() -> None:
    hosts = (H("a", 0.3, [T("x", 1)]), H("b", 0.2, [T("y", 1)]))
    decision = ENERGY.decide(req(1), build(*hosts), exclude={"a"})
    assert decision.host == "b"


def test_label_model_books_further() -> None:
    tasks = [T("a", 4, cpu=1800, mem=10)]
    assert not ENERGY.decide(req(4, cpu=100, mem=10), build(H("h", 0.3, tasks))).placed
    label = ClassTable(model=__import__("domain.classes").classes.OverbookingModel.LABEL)
    decision = ENERGY.decide(req(4, cpu=100, mem=10), build(H("h", 0.3, tasks), classes=label))
    assert decision.placed  # M(4) = 2 -> 2400


def test_explain_lists_every_candidate_and_why() -> None:
    hosts = (H("full", 0.4, [T("a", 1, cpu=1150)]), H("next", 0.3, [T("b", 1)]))
    decision = ENERGY.decide(req(1), build(*hosts), explain=True)
    assert decision.host == "next"
    assert any("full" in line and "does not fit" in line for line in decision.explain)
    assert any("next" in line and "takes it" in line for line in decision.explain)


# -- may_place: one host judged as the passes judge it -----------------------------------------

@settings(max_examples=400, deadline=None)
@given(
    util=st.sampled_from([0.2, 0.6, 0.9]),  # LEE, DEE, EED
    tasks=st.lists(task_strategy, max_size=6),
    rc=st.integers(1, 4),
    kind=st.sampled_from([JOB, SERVICE]),
    cpu=st.integers(2, 1300),
    mem=st.integers(1, 1300),
)
def test_may_place_is_exactly_whether_a_pass_places_on_that_host(
    util: float, tasks: list[T], rc: int, kind: TaskType, cpu: int, mem: int
) -> None:
    classes = ClassTable()
    store = build(H("h", util, host_tasks(tasks, classes)), classes=classes)
    policy = EnergyPolicy()
    request = req(rc, cpu=cpu, mem=mem, type=kind)
    placed = policy.decide(request, store).placed
    assert policy.may_place(request, [store.host("h")], classes) is placed
    assert policy.may_place(request, [], classes) is False


@settings(max_examples=200, deadline=None)
@given(
    hosts=st.lists(st.tuples(st.sampled_from([0.2, 0.6, 0.9]), st.lists(task_strategy, max_size=4)),
                   min_size=2, max_size=5),
    rc=st.integers(1, 4),
    kind=st.sampled_from([JOB, SERVICE]),
    cpu=st.integers(2, 1300),
    mem=st.integers(1, 1300),
)
def test_may_place_over_several_hosts_is_whether_a_pass_places_on_one(
    hosts: list[tuple[float, list[T]]], rc: int, kind: TaskType, cpu: int, mem: int
) -> None:
    """The request's cut sizes are worked out once per host class met: the same answer as
    judging each host on its own."""
    classes = ClassTable()
    stores = [build(H(f"h{i}", util, host_tasks(tasks, classes)), classes=classes)
              for i, (util, tasks) in enumerate(hosts)]
    policy = EnergyPolicy()
    request = req(rc, cpu=cpu, mem=mem, type=kind)
    views = [store.host(f"h{i}") for i, store in enumerate(stores)]
    assert policy.may_place(request, views, classes) is any(
        policy.decide(request, store).placed for store in stores)


# -- victims that lose least, paused where only CPU is missing (DESIGN 3.6, 3.14) ------------


def loaded(*tasks: Task) -> object:
    """An EED host (1200 shares, 1200 bytes) holding exactly ``tasks``."""
    store = build(full("eed", 0.9))
    for task in tasks:
        store.load_task(task)
    return store


def job_task(task_id: str, cls: int, *, started_at: float, cpu: int = 300, mem: int = 10,
             util: float = 0.5, kind: TaskType = JOB, checkpoint_s: float = 0.0) -> Task:
    return Task(task_id, "eed", cls, kind, cpu, mem, cpu, mem, cpu_util=util, memory_util=util,
                started_at=started_at, checkpoint_interval_s=checkpoint_s)


@pytest.mark.parametrize(("case", "victims", "expected"), [
    # the thesis took the least used first: here the old job; its kill loses 900 s
    ("loss: the young job before the old", VictimOrder.LOSS, ("young",)),
    ("thesis: the least used first", VictimOrder.THESIS, ("old",)),
])
def test_within_a_class_the_victim_whose_kill_loses_least_goes_first(
    case: str, victims: VictimOrder, expected: tuple[str, ...]
) -> None:
    """At t = 1000, a class-4 job started at 100 (lost if killed: 900 s) and one started at
    990 (10 s), both 300 shares; the old one uses less. A class-2 request of 300 needs one."""
    store = loaded(job_task("keep", 2, started_at=0.0, cpu=600, util=0.9),
                   job_task("old", 4, started_at=100.0, util=0.1),
                   job_task("young", 4, started_at=990.0, util=0.8))
    policy = EnergyPolicy(victims=victims, suspend=False)
    decision = policy.decide_at(req(2, cpu=300, mem=10), store, now=1000.0)  # type: ignore[arg-type]
    assert (decision.pass_, decision.kills) == (Pass.KILL, expected), case


@pytest.mark.parametrize(("case", "victim", "expected"), [
    ("a service loses nothing", job_task("v", 4, started_at=0.0, kind=SERVICE), 0),
    ("a job not started yet loses nothing", job_task("v", 4, started_at=1000.0), 0),
    ("a job from scratch loses its run", job_task("v", 4, started_at=100.0), 900),
    ("a checkpointed job loses the time since its last checkpoint",
     job_task("v", 4, started_at=100.0, checkpoint_s=400.0), 100),
])
def test_what_a_kill_would_lose(case: str, victim: Task, expected: float) -> None:
    assert work_lost_s(victim, 1000.0) == expected, case


@pytest.mark.parametrize(("case", "victim", "request_mem", "expected"), [
    # (the host, of class 2 (limit 1400), books 900 + 300 shares and 10 + 400 bytes; the
    # class-2 request wants 400 shares: 200 too many; and 1100 bytes: 110 too many)
    ("only CPU missing: a job is paused", JOB, 10, ((), ("v",))),
    ("only CPU missing: a class-4 service is paused", SERVICE, 10, ((), ("v",))),
    ("memory missing too: the job is killed", JOB, 1100, (("v",), ())),
])
def test_a_victim_is_paused_where_only_cpu_is_missing(
    case: str, victim: TaskType, request_mem: int, expected: tuple[tuple[str, ...], ...]
) -> None:
    store = loaded(job_task("keep", 2, started_at=0.0, cpu=900),
                   job_task("v", 4, started_at=0.0, mem=400, kind=victim))
    decision = ENERGY.decide_at(req(2, cpu=400, mem=request_mem), store, now=10.0)  # type: ignore[arg-type]
    assert decision.placed, case
    assert (decision.kills, decision.suspends) == expected, case
    off = EnergyPolicy(suspend=False).decide_at(req(2, cpu=400, mem=request_mem), store,  # type: ignore[arg-type]
                                                now=10.0)
    assert (off.kills, off.suspends) == (("v",), ()), case


def test_a_service_of_class_3_is_never_paused() -> None:
    store = loaded(job_task("keep", 1, started_at=0.0, cpu=900),
                   job_task("svc3", 3, started_at=0.0, kind=SERVICE))
    decision = ENERGY.decide_at(req(1, cpu=300, mem=10), store, now=10.0)  # type: ignore[arg-type]
    assert (decision.kills, decision.suspends) == (("svc3",), ())


def test_a_paused_task_is_taken_again_only_for_its_memory() -> None:
    """A paused job books no CPU: a request short of CPU only passes it over (killing it
    would free nothing it lacks); one short of memory kills it (DESIGN 3.14)."""
    paused = suspend(job_task("paused", 4, started_at=0.0, cpu=300, mem=600), 5.0)
    store = loaded(job_task("keep", 2, started_at=0.0, cpu=900), paused,
                   job_task("busy", 4, started_at=0.0, cpu=300, mem=10, util=0.9))
    cpu_only = EnergyPolicy(suspend=False).decide_at(req(2, cpu=400, mem=10), store,  # type: ignore[arg-type]
                                                     now=10.0)
    assert cpu_only.kills == ("busy",)
    memory_too = EnergyPolicy(suspend=False).decide_at(req(2, cpu=10, mem=900), store,  # type: ignore[arg-type]
                                                       now=10.0)
    assert memory_too.kills == ("paused",)
