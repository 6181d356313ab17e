"""Consolidation (DESIGN 3.15, scheduler/consolidation.py): the least-allocated host of services
is emptied onto other on hosts by the simple pass, never turning one EED, never moving a job, a
service without slack or one moved in the last 30 min; one host at a time."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.model import HostSpec, Task, TaskType
from domain.power import PowerSettings
from domain.regions import Region
from domain.slo import SloTable
from host_registry.memory import MemoryStore
from scheduler.consolidation import Consolidator, MoveVerdict, plan_moves
from scheduler.load import predicted_use

SVC, JOB = TaskType.SERVICE, TaskType.JOB
NOW = 10_000.0  # tasks started at 0: a class-2 service has Q = 0.2 x 10,000 - alpha
ALPHA = 1.2
PHI = 10.0


@dataclass
class S:
    """A task: class, type, CPU shares, memory, utilization (of its allocation), start."""

    cls: int = 2
    type: TaskType = SVC
    cpu: int = 100
    mem: int = 100
    util: float = 0.5
    started: float = 0.0


@dataclass
class Hst:
    id: str
    util: float = 0.2
    tasks: list[S] = field(default_factory=list)
    cpu: int = 1000
    mem: int = 1000


def cluster(*hosts: Hst) -> MemoryStore:
    store = MemoryStore()
    for h in hosts:
        store.add_host(HostSpec(h.id, h.cpu, h.mem), h.util, h.util)
        for i, t in enumerate(h.tasks):
            store.load_task(Task(f"{h.id}.{i}", h.id, t.cls, t.type, t.cpu, t.mem, t.cpu,
                                 t.mem, cpu_util=t.util, memory_util=t.util,
                                 started_at=t.started))
    return store


def plan(store: MemoryStore, **kwargs: object):  # type: ignore[no-untyped-def]
    return plan_moves(store, kwargs.pop("now", NOW), slo=SloTable(), alpha_s=ALPHA,  # type: ignore[arg-type]
                      phi_s=PHI, **kwargs)  # type: ignore[arg-type]


def test_the_least_allocated_host_of_services_is_emptied_onto_the_fullest_host() -> None:
    store = cluster(Hst("low", tasks=[S(cpu=100), S(cpu=150)]),
                    Hst("mid", util=0.3, tasks=[S(cpu=400)]),
                    Hst("high", util=0.4, tasks=[S(cpu=500)]),
                    Hst("empty"))
    result = plan(store)
    assert result.verdict is MoveVerdict.PLANNED and result.host == "low"
    # the simple pass fills the fullest LEE host first; the empty host is never a target
    assert [(m.task, m.source, m.target) for m in result.moves] == [
        ("low.1", "low", "high"), ("low.0", "low", "high")]


# "high" holds a job: a target, never emptied itself
HIGH = S(cls=1, type=JOB, cpu=500)


@pytest.mark.parametrize(("case", "hosts", "verdict"), [
    ("a host with a job is never emptied, and jobs never move",
     [Hst("low", tasks=[S(), S(type=JOB)]), Hst("high", util=0.4, tasks=[HIGH])],
     MoveVerdict.NO_CANDIDATE),
    ("a class-1 service has no slack (its objective is 1)",
     [Hst("low", tasks=[S(cls=1)]), Hst("high", util=0.4, tasks=[HIGH])],
     MoveVerdict.NO_SLACK),
    ("a service that started 30 s ago has no slack yet (Q = 6 - alpha)",
     [Hst("low", tasks=[S(started=NOW - 30)]), Hst("high", util=0.4, tasks=[HIGH])],
     MoveVerdict.NO_SLACK),
    ("no room elsewhere",
     [Hst("low", tasks=[S(cpu=300)]), Hst("high", util=0.4, tasks=[S(cls=1, type=JOB,
                                                                     cpu=900)])],
     MoveVerdict.NO_ROOM),
    ("the only target would turn EED (0.6 + 0.3 x 1000 / 1000 > 0.85)",
     [Hst("low", tasks=[S(cpu=300, util=1.0)]), Hst("high", util=0.6, tasks=[HIGH])],
     MoveVerdict.NO_ROOM),
    ("an empty host is no target",
     [Hst("low", tasks=[S()]), Hst("empty")], MoveVerdict.NO_ROOM),
    ("a single host has nowhere to go", [Hst("low", tasks=[S()])], MoveVerdict.NO_ROOM),
])
def test_nothing_moves(case, hosts, verdict) -> None:
    result = plan(cluster(*hosts))
    assert result.verdict is verdict, (case, result.detail)
    assert result.moves == ()


def test_a_target_that_would_turn_eed_is_left_out_and_the_next_one_taken() -> None:
    store = cluster(Hst("low", tasks=[S(cpu=300, util=1.0)]),
                    Hst("hot", util=0.6, tasks=[S(cpu=500)]),  # would be 0.9: EED
                    Hst("cool", util=0.3, tasks=[S(cpu=450)]))
    result = plan(store)
    assert [(m.task, m.target) for m in result.moves] == [("low.0", "cool")]


def test_only_hosts_on_are_emptied_or_targets() -> None:
    store = cluster(Hst("low", tasks=[S()]), Hst("high", util=0.4, tasks=[S(cpu=500)]),
                    Hst("mid", util=0.3, tasks=[S(cpu=400)]))
    result = plan(store, on={"low", "mid"})
    assert [(m.task, m.target) for m in result.moves] == [("low.0", "mid")]
    assert plan(store, on={"high"}).verdict is MoveVerdict.NO_ROOM


def test_a_service_moved_in_the_last_30_minutes_stays_put_and_its_host_is_skipped() -> None:
    store = cluster(Hst("low", tasks=[S(cpu=100)]), Hst("mid", util=0.3, tasks=[S(cpu=200)]),
                    Hst("high", util=0.4, tasks=[S(cpu=500)]))
    pinned = plan(store, pins={"low.0": NOW - 60}, tries=1)
    assert pinned.verdict is MoveVerdict.PINNED and pinned.host == "low"
    result = plan(store, pins={"low.0": NOW - 60})
    assert result.host == "mid"  # the next host is tried
    assert plan(store, pins={"low.0": NOW - 1800}).host == "low"  # the pin is over


def test_the_consolidator_runs_every_60_s_and_empties_one_host_at_a_time() -> None:
    store = cluster(Hst("low", tasks=[S(cpu=100)]), Hst("mid", util=0.3, tasks=[S(cpu=200)]),
                    Hst("high", util=0.4, tasks=[S(cpu=500)]))
    consolidator = Consolidator(PowerSettings(enabled=True), SloTable(), ALPHA, PHI)
    first = consolidator.plan(store, NOW)
    assert first.planned and first.host == "low"
    consolidator.commit(first, NOW)
    assert consolidator.plan(store, NOW + 120).verdict is MoveVerdict.IN_FLIGHT
    consolidator.finished()
    assert consolidator.plan(store, NOW + 30).verdict is MoveVerdict.NOT_DUE
    again = consolidator.plan(store, NOW + 60)  # the store did not move it: pinned, skipped
    assert again.planned and again.host == "mid"


def test_constraints_rule_out_targets() -> None:
    store = cluster(Hst("low", tasks=[S()]), Hst("high", util=0.4, tasks=[S(cpu=500)]),
                    Hst("mid", util=0.3, tasks=[S(cpu=400)]))
    result = plan(store, excluded=lambda request: {"high"})
    assert [m.target for m in result.moves] == ["mid"]


# -- properties ------------------------------------------------------------------------------------

task_strategy = st.builds(
    S, cls=st.integers(1, 4), type=st.sampled_from([SVC, SVC, JOB]),
    cpu=st.integers(10, 400), mem=st.integers(10, 400), util=st.floats(0.0, 1.0),
    started=st.sampled_from([0.0, NOW - 30, NOW - 600]))
host_strategy = st.builds(Hst, id=st.just(""), util=st.floats(0.0, 0.8),
                          tasks=st.lists(task_strategy, max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.lists(host_strategy, min_size=1, max_size=7),
       st.sets(st.integers(0, 20), max_size=4), st.sets(st.integers(0, 6), max_size=2))
def test_plans_never_move_a_job_never_turn_a_host_eed_and_respect_pins(
        hosts, pinned, off) -> None:
    for i, h in enumerate(hosts):
        h.id = f"h{i}"
        if sum(t.cpu for t in h.tasks) > h.cpu or sum(t.mem for t in h.tasks) > h.mem:
            h.tasks = h.tasks[:1]
    store = cluster(*hosts)
    task_ids = sorted(t.id for h in store.all_hosts() for t in store.tasks_on(h.id))
    pins = {task_ids[i]: NOW - 60 for i in pinned if i < len(task_ids)}
    on = {h.id for i, h in enumerate(hosts) if i not in off}
    result = plan(store, on=on, pins=pins)
    if not result.planned:
        assert result.moves == ()
        return
    source = result.host
    assert source in on
    source_tasks = store.tasks_on(source)
    # the whole host, services only, none pinned, each with slack
    assert sorted(m.task for m in result.moves) == sorted(t.id for t in source_tasks)
    assert all(t.type is SVC for t in source_tasks)
    assert not any(t.id in pins for t in source_tasks)
    assert {m.source for m in result.moves} == {source}
    # targets: other hosts, on, not empty, not EED after every move planned onto them
    added: dict[str, list[Task]] = {}
    for move in result.moves:
        assert move.target != source and move.target in on
        target = store.host(move.target)
        assert target.task_count > 0
        added.setdefault(move.target, []).append(store.task(move.task))  # type: ignore[arg-type]
    bounds = store.bounds
    for target_id, tasks in added.items():
        target = store.host(target_id)
        cpu = target.cpu_util + sum(predicted_use(t, 1.0)[0] for t in tasks) / target.cpu_capacity
        memory = (target.memory_util
                  + sum(predicted_use(t, 1.0)[1] for t in tasks) / target.memory_capacity)
        assert bounds.classify(max(cpu, memory)) is not Region.EED
        # and they fit, under the host's class limits, with their original resources
        new_class = min([target.host_class or 4, *(t.cls for t in tasks)])
        assert (target.cpu_allocated + sum(t.original_cpu_shares for t in tasks)
                <= target.cpu_limits[new_class - 1])
