"""Load windows, dated utilization, prediction and staleness, and the tlp / lvrb policies
(DESIGN 3.12, 5)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from cli.scenario import load_scenario
from domain.decision import Decision
from domain.errors import ValidationError
from domain.load import (
    LoadWindow,
    LoadWindows,
    check_measured_at,
    is_stale,
    mean_std,
    windows_of,
)
from domain.model import HostSpec, Request, TaskType
from host_registry.memory import MemoryStore
from monitor.core import HostTracker, LoadHistory, UtilSample
from scheduler import registry
from scheduler.load import Freshness, LoadView, RecentPlacements
from scheduler.policies.energy import EnergyPolicy
from scheduler.policies.lvrb import LoadVariationRiskBalancing, LoadWindowSpan
from scheduler.policies.tlp import TargetLoadPacking
from scheduler.service import Scheduler

CORE = 1024
GIB = 1024**3


def request(rid: str, cpu: int = 512, memory: int = GIB // 4, cls: int = 4) -> Request:
    return Request(rid, cls, TaskType.JOB, cpu, memory)


# -- windows ----------------------------------------------------------------------------------


def test_windows_take_the_samples_of_their_span() -> None:
    samples = [(float(t), 0.1 * (t // 300), 0.5) for t in range(30, 901, 30)]  # 30 samples
    windows = windows_of(samples, 900.0)
    five, ten, fifteen = windows.windows
    assert (five.span_s, five.samples, ten.samples, fifteen.samples) == (300, 10, 20, 30)
    # the last 5 min: t in (600, 900]: 9 samples of 0.2 and t=900 with 0.3
    assert five.cpu_mean == pytest.approx((9 * 0.2 + 0.3) / 10)
    assert five.memory_std == pytest.approx(0.0)
    cpu = [s[1] for s in samples]
    mean = sum(cpu) / len(cpu)
    assert fifteen.cpu_std == pytest.approx(math.sqrt(sum((c - mean) ** 2 for c in cpu) / 30))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=80))
def test_the_monitors_history_equals_the_windows_of_its_samples(
    values: list[tuple[float, float]]
) -> None:
    history = LoadHistory()
    samples = []
    for index, (cpu, memory) in enumerate(values):
        at = 30.0 * (index + 1)
        history.add(at, UtilSample(cpu, memory))
        samples.append((at, cpu, memory))
    now = 30.0 * len(values)
    assert history.windows(now) == windows_of(samples, now)
    assert len(history.samples) <= 30  # 15 minutes of 30-s windows, no more


def test_mean_std_of_nothing_and_of_one() -> None:
    assert mean_std([]) == (0.0, 0.0)
    assert mean_std([0.4]) == (0.4, 0.0)


def test_windows_json_round_trip_and_clear_errors() -> None:
    windows = LoadWindows((LoadWindow(300, 0.25, 0.05, 0.5, 0.0, 10),
                           LoadWindow(900, 0.2, 0.1, 0.5, 0.01, 30)))
    assert LoadWindows.from_json(json.loads(json.dumps(windows.to_json()))) == windows
    bad = [
        ({"6m": {}}, "windows.6m"),
        ({"5m": []}, "windows.5m"),
        ({"5m": {"cpu_mean": 2, "cpu_std": 0, "memory_mean": 0, "memory_std": 0}},
         "windows.5m.cpu_mean"),
        ({"5m": {"cpu_mean": 0, "cpu_std": 0, "memory_mean": 0}}, "windows.5m.memory_std"),
        ({"5m": {"cpu_mean": 0, "cpu_std": 0, "memory_mean": 0, "memory_std": 0,
                 "samples": 0}}, "windows.5m.samples"),
        ({"5m": {"cpu_mean": 0, "cpu_std": 0, "memory_mean": 0, "memory_std": 0, "x": 1}},
         "windows.5m.x"),
        ([], "windows"),
    ]
    for raw, field in bad:
        with pytest.raises(ValidationError) as caught:
            LoadWindows.from_json(raw)
        assert caught.value.field == field


def test_measured_at_is_never_in_the_future_and_staleness_is_strict() -> None:
    assert check_measured_at(2000.0, now=1000.0) == 1000.0
    with pytest.raises(ValidationError):
        check_measured_at(-1, now=1000.0)
    with pytest.raises(ValidationError):
        check_measured_at(True, now=1000.0)
    assert is_stale(None, 0.0)
    assert not is_stale(700.0, 1000.0)  # exactly 300 s: still trusted
    assert is_stale(699.0, 1000.0)


# -- the monitor's heartbeat ------------------------------------------------------------------


def test_a_heartbeat_dates_the_values_when_nothing_moved_for_a_minute() -> None:
    tracker = HostTracker(threshold_pp=10.0, heartbeat_s=60.0)
    tracker.registered(0.2, 0.3, at=0.0)
    quiet = UtilSample(0.22, 0.3)
    first = tracker.window_closed(UtilSample(0.2, 0.3), 30.0)  # the first window always sends
    assert first.has_values and first.measured_at == 30.0
    tracker.acknowledged(first)
    assert tracker.window_closed(quiet, 60.0).empty  # 30 s since: nothing due
    beat = tracker.window_closed(quiet, 90.0)
    assert not beat.has_values and beat.measured_at == 90.0
    tracker.acknowledged(beat)
    assert tracker.last_sent is not None and tracker.last_sent.cpu_util == 0.2
    assert tracker.window_closed(quiet, 120.0).empty  # the clock restarted at 90
    moved = tracker.window_closed(UtilSample(0.5, 0.3), 100.0)
    assert moved.cpu_util == 0.5 and moved.memory_util is None and moved.measured_at == 100.0
    assert moved.payload().keys() == {"cpu_util", "measured_at"}


# -- the expected utilization -----------------------------------------------------------------


def two_hosts(**kwargs: float) -> MemoryStore:
    store = MemoryStore()
    for host_id in ("a", "b"):
        store.add_host(HostSpec(host_id, 4 * CORE, 8 * GIB))
        store.update_host_utilization(host_id, kwargs.get(host_id, 0.2), 0.1, util_at=100.0)
    return store


def place_on(store: MemoryStore, host: str, rid: str, cpu: int, at: float) -> None:
    store.apply(Decision(request=request(rid, cpu), placed=True, host=host, cpu_shares=cpu,
                         memory=GIB // 4, new_class=4), at)


def test_prediction_raises_a_just_used_hosts_u_until_its_next_update() -> None:
    store = two_hosts(a=0.2, b=0.3)
    recent = RecentPlacements()
    place_on(store, "a", "t1", 2 * CORE, 110.0)  # half of a's CPU, after a's measurement
    recent.placed("a", "t1", 110.0)
    view = LoadView(store, 120.0, recent, Freshness(), store.task)
    a = view.host("a")
    assert a.cpu_util == pytest.approx(0.2 + 0.5)
    assert view.basis("a") is not None and view.basis("a").predicted == 1  # type: ignore[union-attr]
    assert view.host("b").cpu_util == pytest.approx(0.3)
    # the task monitor measured t1 at 40 % of its allocation: that replaces the guess
    store.update_task_utilization("t1", 0.4, 0.5)
    assert LoadView(store, 120.0, recent, Freshness(), store.task).host("a").cpu_util == \
        pytest.approx(0.2 + 0.5 * 0.4)
    # a multiplier scales the guess for unmeasured tasks
    store.update_task_utilization("t1", 0.0, 0.0)
    half = LoadView(store, 120.0, recent, Freshness(predict_multiplier=0.5), store.task)
    assert half.host("a").cpu_util == pytest.approx(0.2 + 0.25)
    # the next measurement (or heartbeat) sees the task: no more prediction
    store.update_host_load("a", 130.0)
    assert LoadView(store, 140.0, recent, Freshness(), store.task).host("a").cpu_util == \
        pytest.approx(0.2)


def test_a_host_measured_too_long_ago_is_judged_by_its_allocation() -> None:
    store = two_hosts(a=0.9, b=0.1)
    place_on(store, "b", "t1", 3 * CORE, 50.0)  # b: 75 % allocated, measured at 10 %
    fresh = LoadView(store, 400.0, RecentPlacements(), Freshness(), store.task)
    assert fresh.host("a").cpu_util == pytest.approx(0.9)
    assert fresh.host("a").cpu_util == pytest.approx(0.9)
    store.update_host_load("a", 300.0)
    view = LoadView(store, 401.0, RecentPlacements(), Freshness(), store.task)
    b = view.host("b")  # measured at 100, 301 s ago
    assert (b.cpu_util, b.memory_util) == (pytest.approx(0.75), pytest.approx(1 / 32))
    assert b.windows is not None and b.windows.get(300) is not None
    assert b.windows.get(300).cpu_std == 0.0  # type: ignore[union-attr]
    assert view.host("a").cpu_util == pytest.approx(0.9)  # measured 101 s ago: trusted
    basis = view.basis("b")
    assert basis is not None and basis.by_allocation and "by allocation" in basis.describe()


def test_the_views_lists_put_each_host_where_its_expected_u_belongs() -> None:
    store = MemoryStore()
    for index, util in enumerate((0.1, 0.2, 0.3, 0.4)):
        store.add_host(HostSpec(f"h{index}", 4 * CORE, 8 * GIB))
        store.update_host_utilization(f"h{index}", util, 0.0, util_at=0.0)
    recent = RecentPlacements()
    place_on(store, "h0", "t", CORE, 10.0)  # h0: 0.1 + 0.25 = 0.35 expected
    recent.placed("h0", "t", 10.0)
    view = LoadView(store, 20.0, recent, Freshness(), store.task)
    from domain.regions import Region
    from domain.store import Segment
    lee_class_4 = [Segment(Region.LEE, None, True), Segment(Region.LEE, 4, True)]
    order = [(i, h.id) for i, h in view.candidates(lee_class_4)]
    assert order == [(0, "h1"), (0, "h2"), (0, "h3"), (1, "h0")]
    down = [h.id for _, h in view.candidates([Segment(Region.LEE, 4, False)])]
    assert down == ["h0"]


# -- the policies -----------------------------------------------------------------------------


def test_tlp_packs_up_to_the_target_then_takes_the_least_loaded() -> None:
    store = MemoryStore()
    # with the smallest request (2 shares), n2 is at exactly 50 %: the KEP's 75, 100, 25
    for host_id, util in (("n1", 0.25), ("n2", (2048 - 2) / 4096), ("n3", 0.75)):
        store.add_host(HostSpec(host_id, 4 * CORE, 8 * GIB))
        store.update_host_utilization(host_id, util, 0.1, util_at=0.0)
    zero = request("r", cpu=2)
    decision = TargetLoadPacking().decide(zero, store, explain=True)
    assert decision.host == "n2"
    assert any("n2" in line and "score 100.0" in line for line in decision.explain)
    assert any("n3" in line and "score 25.0" in line for line in decision.explain)
    # a 1-core request: U' 50 / 75 / 100: n1 reaches the target
    assert TargetLoadPacking().decide(request("s", cpu=CORE), store).host == "n1"
    # target 80: n3 (75 + 25 = 100) scores 0, n2 (~75) ~95, n1 (50) 87.5
    assert TargetLoadPacking(80.0).decide(request("s", cpu=CORE), store).host == "n2"


def test_tlp_never_overbooks_and_ties_go_to_fewest_tasks() -> None:
    store = two_hosts(a=0.2, b=0.2)
    place_on(store, "a", "t", 1024, 0.0)
    assert TargetLoadPacking().decide(request("r"), store).host == "b"
    big = request("big", cpu=4 * CORE)
    assert TargetLoadPacking().decide(big, store).host == "b"  # a lacks 1024 unreserved
    store2 = two_hosts()
    place_on(store2, "a", "x", 4 * CORE, 0.0)
    place_on(store2, "b", "y", 4 * CORE, 0.0)
    assert not TargetLoadPacking().decide(request("r"), store2).placed


def test_lvrb_prefers_the_steady_host_of_the_keps_example() -> None:
    store = MemoryStore()
    table = {"N1": (0.8, 1.6, 3.2, 4.8), "N2": (2.0, 6.4, 0.04, 0.004),
             "N3": (1.2, 3.2, 0.4, 0.4)}
    for name, (mc, mm, vc, vm) in table.items():
        store.add_host(HostSpec(name, 4 * CORE, 8 * GIB))
        windows = LoadWindows((LoadWindow(300, mc / 4, min(1.0, vc / 4), mm / 8, vm / 8, 10),))
        store.update_host_utilization(name, mc / 4, mm / 8, 0.0, windows)
    decision = LoadVariationRiskBalancing().decide(
        request("r", cpu=CORE // 2, memory=GIB), store, explain=True)
    assert decision.host == "N3"
    assert any("N3" in line and "score 42.5" in line for line in decision.explain)
    # over the 15-minute window nobody has a window: current utilization, no variation,
    # so N1 (the least used) wins
    assert LoadVariationRiskBalancing(LoadWindowSpan.FIFTEEN).decide(
        request("r", cpu=CORE // 2, memory=GIB), store).host == "N1"


def test_the_scheduler_remembers_its_placements_for_a_load_aware_policy() -> None:
    def two(policy: TargetLoadPacking) -> list[str | None]:
        scheduler = Scheduler(two_hosts(a=0.2, b=0.35), policy)
        hosts = [scheduler.submit(request(f"r{i}", cpu=CORE), 120.0 + i).applied[0].host
                 for i in range(2)]
        assert len(scheduler.recent) == (2 if policy.predicts_recent else 0)
        return hosts

    # a: U' 45 -> 95, b: 60 -> 90: a; then a is expected at 0.45: U' 70 -> 60: b
    assert two(TargetLoadPacking()) == ["a", "b"]
    # blind to its own placement, the second goes to a again (its monitor has not reported)
    assert two(TargetLoadPacking(predicts_recent=False)) == ["a", "a"]


def test_energy_with_prediction_sees_a_host_fill_before_its_monitor_does() -> None:
    # Two LEE hosts; the energy policy fills the most used LEE host first. Without prediction
    # a burst goes to the same host until its monitor reports; with it, the host's expected
    # U crosses into DEE and the walk moves on as it would with fresh measurements.
    def burst(predict: bool) -> list[str | None]:
        store = two_hosts(a=0.4, b=0.3)
        place_on(store, "a", "old-a", 256, 0.0)  # both hosts are of class 4, not empty
        place_on(store, "b", "old-b", 256, 0.0)
        scheduler = Scheduler(store, EnergyPolicy(predict_recent=predict))
        return [scheduler.submit(request(f"r{i}", cpu=CORE), 120.0 + i).applied[0].host
                for i in range(3)]

    # LEE by U descending: a (0.4) first. Blind, a stays at 0.4 and takes all three.
    assert burst(False) == ["a", "a", "a"]
    # Seeing its placements, a is expected at 0.65 (DEE): b, the fullest LEE host, is next
    # (0.55 after it), then DEE by U descending: a again.
    assert burst(True) == ["a", "b", "a"]


# -- decide's scenarios -------------------------------------------------------------------------


def test_scenarios_date_hosts_and_tasks_for_the_load_aware_policies(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    scenario = {
        "now": 1000,
        "hosts": [
            {"id": "n1", "cpu_capacity": 4096, "memory_capacity": 8 * GIB, "cpu_util": 0.25,
             "measured_at": 990, "tasks": [
                 {"id": "new", "class": 4, "type": "job", "cpu_shares": 2048,
                  "memory": GIB, "started_at": 995}]},
            {"id": "n2", "cpu_capacity": 4096, "memory_capacity": 8 * GIB, "cpu_util": 0.45,
             "measured_at": 990,
             "windows": {"5m": {"cpu_mean": 0.45, "cpu_std": 0.1, "memory_mean": 0.1,
                                "memory_std": 0.0, "samples": 10}}},
            {"id": "n3", "cpu_capacity": 4096, "memory_capacity": 8 * GIB, "cpu_util": 0.0,
             "measured_at": 100},
        ],
        "request": {"id": "r", "class": 4, "type": "job", "cpu_shares": 2, "memory": 1024},
    }
    loaded = load_scenario(scenario)
    assert loaded.now == 1000 and len(loaded.recent) == 1
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    assert main(["decide", "--scenario", str(path), "--policy", "tlp", "--explain"]) == 0
    answer = json.loads(capsys.readouterr().out)
    # n1 is expected at 25 % + 50 % (the new task): U' 75 -> 25; n2 at 45 -> 95; n3 is
    # stale: by allocation, 0 -> 50
    assert answer["host"] == "n2"
    text = "\n".join(answer["explain"])
    assert "1 recent task(s) predicted" in text and "by allocation" in text
    bad = dict(scenario, hosts=[dict(scenario["hosts"][0], measured_at=2000)])  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as caught:
        load_scenario(bad)
    assert caught.value.field == "hosts[0].measured_at"


def test_every_load_aware_policy_is_registered_and_simulated() -> None:
    for name in ("tlp", "lvrb"):
        plugin = registry.plugin(name, simulated=True)
        policy = plugin.make()
        assert getattr(policy, "predicts_recent", False)
