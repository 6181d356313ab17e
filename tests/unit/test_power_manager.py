"""The power manager (DESIGN 3.15, scheduler/power.py): which hosts are switched off and on, which
requests wait for a host not on yet. Table-driven cases, then properties over random clusters."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.classes import ClassTable
from domain.energy import PowerModel
from domain.model import HostSpec, Request, Task, TaskType
from domain.power import (
    HostPower,
    PowerAction,
    PowerBook,
    PowerReason,
    PowerSettings,
    PowerState,
    RecentRequests,
)
from domain.regions import RegionBounds
from host_registry.memory import MemoryStore
from scheduler.power import PowerHost, PowerManager

ON, OFF, BOOTING, SHUTTING = (PowerState.ON, PowerState.OFF, PowerState.BOOTING,
                              PowerState.SHUTTING_DOWN)
GIB = 1024**3
G3 = PowerModel.named("hp-ml110-g3")  # 105 W idle, 153 W at 70 %
G4 = PowerModel.named("hp-ml110-g4")  # 86 W idle, 108 W at 70 %
X5670 = PowerModel.named("ibm-x3550-x5670")  # 66 W idle, 191 W at 70 %
SVC = TaskType.SERVICE


@dataclass
class Spec:
    id: str
    state: PowerState = ON
    idle_since: float | None = 0.0  # None: holds something (a booking, a suspended task)
    tasks: list[tuple[int, int]] = field(default_factory=list)  # (cpu, memory) of class 2
    cpu: int = 4096
    memory: int = 8 * GIB
    model: PowerModel = G4
    since: float = 0.0


def hosts(*specs: Spec) -> list[PowerHost]:
    store = MemoryStore()
    out = []
    for spec in specs:
        store.add_host(HostSpec(spec.id, spec.cpu, spec.memory))
        for i, (cpu, memory) in enumerate(spec.tasks):
            store.load_task(Task(f"{spec.id}-t{i}", spec.id, 2, SVC, cpu, memory, cpu, memory))
        # idle_since as given, even beside tasks: a host with a task is never switched off,
        # whatever its caller says of it
        out.append(PowerHost(store.host(spec.id), HostPower(spec.state, spec.since),
                             spec.idle_since, spec.model))
    return out


def manager(**knobs: object) -> PowerManager:
    return PowerManager(PowerSettings(enabled=True, **knobs), ClassTable(), RegionBounds())  # type: ignore[arg-type]


def no_recent() -> RecentRequests:
    return RecentRequests()


def recent_of(*sizes: tuple[int, int], at: float = 0.0) -> RecentRequests:
    recent = RecentRequests()
    for cpu, memory in sizes:
        recent.record(at, cpu, memory)
    return recent


def request(cpu: int = 1024, memory: int = GIB, cls: int = 2, id: str = "r1") -> Request:
    return Request(id, cls, TaskType.JOB, cpu, memory)


# -- switching off ---------------------------------------------------------------------------------

BUSY = [(1024, GIB)]


@pytest.mark.parametrize(("case", "specs", "knobs", "recent", "now", "expected"), [
    ("an empty host idle for idle_s is switched off",
     [Spec("a", tasks=BUSY), Spec("b", idle_since=0.0)], {}, (), 300.0, ["b"]),
    ("not before idle_s",
     [Spec("a", tasks=BUSY), Spec("b", idle_since=10.0)], {}, (), 309.0, []),
    ("a host with a task never",
     [Spec("a", tasks=BUSY), Spec("b", tasks=BUSY)], {}, (), 10_000.0, []),
    ("a host with something booked or suspended (idle_since None) never",
     [Spec("a", tasks=BUSY), Spec("b", idle_since=None)], {}, (), 10_000.0, []),
    ("never below min_on: the most power-hungry of two idle hosts goes",
     [Spec("a", model=G4), Spec("b", model=G3)], {}, (), 1000.0, ["b"]),
    ("min_on 2 keeps both",
     [Spec("a"), Spec("b")], {"min_on": 2}, (), 1000.0, []),
    ("the spare room is kept: a's free 3072 shares are below the 1600 + 1600 asked for",
     [Spec("a", tasks=BUSY), Spec("b")], {}, [(1600, GIB)], 1000.0, []),
    ("the spare room the host on keeps allows it (1500 + 1500 shares, 2 GiB)",
     [Spec("a", tasks=BUSY), Spec("b")], {}, [(1500, GIB)], 1000.0, ["b"]),
    ("a host not on is not switched off",
     [Spec("a", tasks=BUSY), Spec("b", state=BOOTING), Spec("c", state=OFF)], {}, (), 1000.0,
     []),
    ("several idle hosts: the most power-hungry first, as long as the room lasts",
     [Spec("a", tasks=BUSY), Spec("g4"), Spec("g3", model=G3), Spec("x", model=X5670)], {},
     [(2000, GIB), (2000, GIB)], 1000.0, ["g3", "g4"]),
])
def test_switch_off(case, specs, knobs, recent, now, expected) -> None:
    plan = manager(**knobs).plan(hosts(*specs), recent_of(*recent), now)
    assert plan.switch_off() == expected, case
    assert all(d.reason is PowerReason.IDLE for d in plan.decisions
               if d.action is PowerAction.SWITCH_OFF)
    assert plan.switch_on() == []


# -- switching on ----------------------------------------------------------------------------------


def test_a_waiting_request_switches_on_the_most_efficient_off_host_that_takes_it() -> None:
    cluster = hosts(Spec("a", tasks=[(4096, GIB)]), Spec("g3", OFF, model=G3),
                    Spec("g4", OFF), Spec("big", OFF, cpu=8192), Spec("tiny", OFF, cpu=512,
                                                                          model=X5670))
    power = manager()
    plan = power.plan(cluster, no_recent(), 100.0, waiting=[request()])
    # watts per core at 70 %: g4 27, big 13.5, g3 38.25; tiny (382) is too small anyway
    [decision] = plan.decisions
    assert (decision.host, decision.action, decision.reason, decision.request) == (
        "big", PowerAction.SWITCH_ON, PowerReason.REQUEST, "r1")
    assert [(h.request, h.host) for h in plan.holds] == [("r1", "big")]
    assert power.held() == {"r1": "big"}


def test_ties_in_efficiency_go_to_the_larger_host() -> None:
    cluster = hosts(Spec("a", tasks=[(4096, GIB)]), Spec("small", OFF, memory=4 * GIB),
                    Spec("large", OFF, memory=16 * GIB))
    assert manager().would_take(request(), cluster) == "large"


def test_a_request_a_booting_host_takes_waits_for_it_and_switches_nothing_on() -> None:
    cluster = hosts(Spec("a", tasks=[(4096, GIB)]), Spec("boot", BOOTING, model=G3),
                    Spec("off", OFF))
    power = manager()
    hold = power.hold(request(), cluster, 50.0)
    assert hold is not None and (hold.host, hold.decision) == ("boot", None)
    # it is held: the next plan does not hold it again nor switch anything on for it
    plan = power.plan(cluster, no_recent(), 60.0, waiting=[request()])
    assert plan.decisions == () and plan.holds == ()
    assert power.release("boot") == ["r1"] and power.held() == {}


def test_held_requests_fill_a_booting_host_before_another_is_switched_on() -> None:
    cluster = hosts(Spec("a", tasks=[(4096, GIB)]), Spec("boot", BOOTING), Spec("off", OFF))
    power = manager()
    waiting = [request(3000, id="r1"), request(1000, id="r2"), request(1000, id="r3")]
    plan = power.plan(cluster, no_recent(), 10.0, waiting=waiting)
    assert power.held() == {"r1": "boot", "r2": "boot", "r3": "off"}
    assert plan.switch_on() == ["off"]
    assert [h.decision is None for h in plan.holds] == [True, True, False]


def test_a_request_no_host_not_on_would_take_is_not_held() -> None:
    cluster = hosts(Spec("a", tasks=[(4096, GIB)]), Spec("off", OFF))
    power = manager()
    assert power.would_take(request(8192), cluster) is None
    assert power.hold(request(8192), cluster, 1.0) is None
    assert power.would_take(request(), cluster, exclude={"off"}) is None  # its constraints
    assert power.plan(cluster, no_recent(), 1.0, waiting=[request(8192)]).decisions == ()


def test_the_spare_room_switches_on_the_most_efficient_hosts_until_it_is_kept() -> None:
    cluster = hosts(Spec("a", tasks=[(3072, GIB)]), Spec("g3", OFF, model=G3), Spec("g4", OFF),
                    Spec("x", OFF, model=X5670))
    plan = manager().plan(cluster, recent_of((3000, GIB), (2000, GIB)), 100.0)
    # need 3000 + 5000 CPU shares; a has 1024 free; g4 (27 W per core at 70 %), then g3
    # (38.25) give 9216; x (47.75) stays off
    assert plan.switch_on() == ["g4", "g3"]
    assert {d.reason for d in plan.decisions} == {PowerReason.SPARE_ROOM}
    assert plan.spare.kept and plan.spare.on == 3


def test_min_on_switches_a_host_on_when_every_host_is_off() -> None:
    cluster = hosts(Spec("a", OFF, model=G3), Spec("b", OFF))
    plan = manager().plan(cluster, no_recent(), 0.0)
    assert [(d.host, d.reason) for d in plan.decisions] == [("b", PowerReason.MIN_ON)]


def test_a_failed_switch_on_frees_its_requests() -> None:
    cluster = hosts(Spec("a", tasks=[(4096, GIB)]), Spec("off", OFF))
    power = manager()
    assert power.hold(request(), cluster, 0.0) is not None
    assert power.switch_failed("off") == ["r1"] and power.held() == {}


def test_holds_for_a_host_that_is_on_by_now_are_dropped_by_the_next_plan() -> None:
    power = manager()
    power.hold(request(), hosts(Spec("a", tasks=[(4096, GIB)]), Spec("b", BOOTING)), 0.0)
    power.plan(hosts(Spec("a", tasks=[(4096, GIB)]), Spec("b", ON, idle_since=0.0)),
               no_recent(), 1.0)
    assert power.held() == {}


# -- with the state machine: a whole cycle, timed --------------------------------------------------


def test_a_host_goes_off_after_idle_s_and_shutdown_s_and_comes_back_boot_s_after_a_request() -> None:
    settings_ = PowerSettings(enabled=True, idle_s=300.0, boot_s=120.0, shutdown_s=20.0)
    power = PowerManager(settings_, ClassTable(), RegionBounds())
    book = PowerBook.of(settings_, ["a", "b"])
    specs = {"a": Spec("a", tasks=[(4096, GIB)]), "b": Spec("b", idle_since=0.0)}

    def current() -> list[PowerHost]:
        for name, spec in specs.items():
            spec.state, spec.since = book.get(name).state, book.get(name).since
        return hosts(*specs.values())

    timeline = []
    for now in (0.0, 299.0, 300.0, 310.0, 320.0, 400.0):
        timeline += [(c.host, c.new, c.at) for c in book.tick(now)]
        plan = power.plan(current(), no_recent(), now,
                          waiting=[request()] if now == 400.0 else [])
        for decision in plan.decisions:
            timeline.append((decision.host, book.apply(decision, now).new, now))
    timeline += [(c.host, c.new, c.at) for c in book.tick(1000.0)]
    assert timeline == [("b", SHUTTING, 300.0), ("b", OFF, 320.0), ("b", BOOTING, 400.0),
                        ("b", ON, 520.0)]
    assert power.release("b") == ["r1"]


# -- properties ------------------------------------------------------------------------------------

MODELS = [G3, G4, X5670, PowerModel.named("ibm-x3250-x3470")]

spec_strategy = st.builds(
    Spec,
    id=st.just(""),
    state=st.sampled_from([ON, ON, ON, OFF, BOOTING, SHUTTING]),
    idle_since=st.one_of(st.none(), st.floats(0, 1000)),
    tasks=st.lists(st.tuples(st.integers(2, 2048), st.integers(1, 4 * GIB)), max_size=2),
    cpu=st.sampled_from([1024, 2048, 4096]),
    memory=st.sampled_from([2 * GIB, 4 * GIB, 8 * GIB]),
    model=st.sampled_from(MODELS),
)


def _free(host: PowerHost) -> tuple[int, int]:
    view = host.view
    return (max(0, view.cpu_capacity - view.cpu_allocated),
            max(0, view.memory_capacity - view.memory_allocated))


@settings(max_examples=300, deadline=None)
@given(st.lists(spec_strategy, min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(2, 4096), st.integers(1, 8 * GIB)), max_size=4),
       st.lists(st.tuples(st.integers(2, 4096), st.integers(1, 8 * GIB)), max_size=3),
       st.integers(1, 3), st.floats(0, 1500))
def test_plans_keep_min_on_and_the_spare_room_and_never_switch_off_what_holds_work(
        specs, recent_sizes, waiting_sizes, min_on, now) -> None:
    for i, spec in enumerate(specs):
        spec.id = f"h{i}"
        if spec.state is not ON:
            spec.tasks = []  # only hosts on hold work
    cluster = hosts(*specs)
    by_id = {h.id: h for h in cluster}
    recent = recent_of(*recent_sizes)
    waiting = [request(c, m, id=f"w{i}") for i, (c, m) in enumerate(waiting_sizes)]
    power = manager(min_on=min_on)
    plan = power.plan(cluster, recent, now, waiting=waiting)
    switched_off = plan.switch_off()
    switched_on = plan.switch_on()
    assert len(set(switched_on)) == len(switched_on)
    for host_id in switched_off:
        host = by_id[host_id]
        assert host.state is ON and host.view.task_count == 0
        assert host.idle_since is not None and now - host.idle_since >= 300.0
    for host_id in switched_on:
        assert by_id[host_id].state is OFF
    # holds only for hosts booting or switched on now; what is held for a host fits it
    sizes = {r.id: (r.cpu_shares, r.memory) for r in waiting}
    held_on: dict[str, list[tuple[int, int]]] = {}
    for request_id, host_id in power.held().items():
        assert by_id[host_id].state is BOOTING or host_id in switched_on
        held_on.setdefault(host_id, []).append(sizes[request_id])
    for host_id, held in held_on.items():
        view = by_id[host_id].view
        assert sum(c for c, _ in held) <= view.cpu_limits[3]
        assert sum(m for _, m in held) <= view.memory_limits[3]
    on_before = [h for h in cluster if h.state in (ON, BOOTING)]
    on_after = len(on_before) - len(switched_off) + len(switched_on)
    assert on_after == plan.spare.on
    if switched_off:  # a switch-off never breaks the rules
        assert on_after >= min_on
        assert plan.spare.kept
    if len(on_before) < min_on and any(h.state is OFF for h in cluster):
        assert switched_on
    # the switch-ons for room take the most efficient off hosts first
    room = [d.host for d in plan.decisions if d.reason in (PowerReason.SPARE_ROOM,
                                                           PowerReason.MIN_ON)]
    others = sorted((h for h in cluster if h.state is OFF and h.id not in switched_on),
                    key=lambda h: h.efficiency_key)
    for host_id in room:
        assert all(by_id[host_id].efficiency_key < h.efficiency_key for h in others)
    # free room after the plan is what the hosts on and booting have
    free_on = sum(_free(h)[0] for h in cluster if h.state is ON and h.id not in switched_off)
    assert plan.spare.free_cpu >= free_on


@settings(max_examples=200, deadline=None)
@given(st.lists(spec_strategy, min_size=1, max_size=6),
       st.tuples(st.integers(2, 4096), st.integers(1, 8 * GIB)), st.integers(1, 4))
def test_would_take_names_a_booting_host_before_any_off_host_and_the_most_efficient_off_one(
        specs, size, cls) -> None:
    for i, spec in enumerate(specs):
        spec.id = f"h{i}"
        spec.tasks = [] if spec.state is not ON else spec.tasks
    cluster = hosts(*specs)
    wanted = request(size[0], size[1], cls)
    chosen = manager().would_take(wanted, cluster)
    fitting = [h for h in cluster if h.state in (OFF, BOOTING)
               and size[0] <= h.view.cpu_capacity and size[1] <= h.view.memory_capacity]
    if not fitting:
        assert chosen is None
        return
    assert chosen is not None
    booting = [h for h in fitting if h.state is BOOTING]
    if booting:
        assert chosen in {h.id for h in booting}
    else:
        assert chosen == min(fitting, key=lambda h: h.efficiency_key).id
