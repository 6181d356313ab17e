"""The monitor's pure core (windows, thresholds, utilization arithmetic, RAPL, back-off) and its
file readers on fake cgroup and powercap trees built in tmp_path (file layouts, not mocks)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationError
from monitor.cgroups import (
    CgroupDirs,
    CgroupVersion,
    detect_version,
    dirs_from_proc_cgroup,
    paths_from_proc_cgroup,
    read_cpu_counter,
    read_cpu_quota_us,
    read_memory,
    read_memory_limit_bytes,
)
from monitor.client import DryRunRegistry, HostRegistration
from monitor.core import (
    BackoffPolicy,
    CpuCounter,
    EnergyCounter,
    HostTracker,
    HostUpdate,
    Resource,
    Sent,
    TaskBatch,
    TaskTracker,
    TaskUtil,
    UtilSample,
    WindowSchedule,
    average,
    clamp_fraction,
    cores_used,
    cpu_util_of_cores,
    cpu_util_of_shares,
    decide_host_update,
    decide_task_batch,
    energy_delta_uj,
    memory_limit_or_host,
    memory_used_bytes,
    memory_used_from_stats,
    memory_util,
    moved,
    power_w,
    quota_cores,
    slots_per_window,
    task_memory_limit_bytes,
)
from monitor.host_sources import CgroupHostSource
from monitor.identity import identity_from_info
from monitor.rapl import RaplMeter, discover_zones
from monitor.settings import HostSourceKind, LogLevel, MonitorSettings, load_settings

GIB = 1024**3
fraction = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)

# --- thresholds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_cpu", "last_mem", "cpu", "mem", "threshold_pp", "expected"),
    [
        # the thesis' example (4.2.3): 31% sent, 42% is sent, 35% is not
        (0.31, 0.50, 0.42, 0.50, 10.0, (Resource.CPU,)),
        (0.31, 0.50, 0.35, 0.50, 10.0, ()),
        # exactly 10 p.p. counts (>=), also where floating point says 9.9999...
        (0.31, 0.50, 0.41, 0.50, 10.0, (Resource.CPU,)),
        (0.50, 0.50, 0.40, 0.50, 10.0, (Resource.CPU,)),
        (0.70, 0.20, 0.70, 0.30, 10.0, (Resource.MEMORY,)),
        # just under
        (0.31, 0.50, 0.4099, 0.50, 10.0, ()),
        (0.31, 0.50, 0.2101, 0.5999, 10.0, ()),
        # both moved: one message with both
        (0.10, 0.10, 0.30, 0.25, 10.0, (Resource.CPU, Resource.MEMORY)),
        (0.90, 0.90, 0.10, 0.10, 10.0, (Resource.CPU, Resource.MEMORY)),
        # only memory moved: only memory
        (0.10, 0.10, 0.15, 0.60, 10.0, (Resource.MEMORY,)),
        # custom thresholds
        (0.31, 0.50, 0.36, 0.50, 5.0, (Resource.CPU,)),
        (0.31, 0.50, 0.35, 0.50, 5.0, ()),
        (0.10, 0.10, 0.30, 0.10, 25.0, ()),
        (0.10, 0.10, 0.35, 0.10, 25.0, (Resource.CPU,)),
        (0.00, 0.00, 0.01, 0.00, 1.0, (Resource.CPU,)),
    ],
)
def test_host_decision_table(
    last_cpu: float, last_mem: float, cpu: float, mem: float, threshold_pp: float,
    expected: tuple[Resource, ...],
) -> None:
    decision = decide_host_update(UtilSample(cpu, mem), Sent(last_cpu, last_mem), threshold_pp,
                                  first_window=False)
    assert decision.resources == expected
    assert set(decision.payload()) == {f"{r.value}_util" for r in expected}
    if Resource.CPU in expected:
        assert decision.cpu_util == cpu
    if Resource.MEMORY in expected:
        assert decision.memory_util == mem


def test_first_window_is_always_sent_with_both() -> None:
    tracker = HostTracker(threshold_pp=10.0)
    tracker.registered(0.30, 0.40)  # registration carried the same values
    decision = tracker.window_closed(UtilSample(0.30, 0.40))
    assert decision.resources == (Resource.CPU, Resource.MEMORY)
    tracker.acknowledged(decision)
    assert tracker.window_closed(UtilSample(0.31, 0.41)).empty


def test_first_window_without_registration_is_sent() -> None:
    decision = decide_host_update(UtilSample(0.0, 0.0), None, 10.0, first_window=False)
    assert decision.resources == (Resource.CPU, Resource.MEMORY)


def test_threshold_is_against_the_last_value_sent_not_the_last_window() -> None:
    """Creeping by 4 p.p. per window: nothing until the sum reaches 10 p.p. since the last send."""
    tracker = HostTracker(threshold_pp=10.0)
    tracker.acknowledged(tracker.window_closed(UtilSample(0.30, 0.50)))
    sent = []
    for cpu in (0.34, 0.38, 0.42, 0.46, 0.50, 0.54):
        decision = tracker.window_closed(UtilSample(cpu, 0.50))
        if not decision.empty:
            tracker.acknowledged(decision)
            sent.append(decision.cpu_util)
    assert sent == [0.42, 0.54]


def test_unsent_update_is_replaced_by_the_latest_decision() -> None:
    tracker = HostTracker(threshold_pp=10.0)
    tracker.acknowledged(tracker.window_closed(UtilSample(0.30, 0.50)))
    first = tracker.window_closed(UtilSample(0.60, 0.50))  # registry down: not acknowledged
    assert tracker.pending == first
    second = tracker.window_closed(UtilSample(0.70, 0.65))
    assert tracker.pending == second
    assert second.resources == (Resource.CPU, Resource.MEMORY)
    # back near what the registry holds: the stale update is dropped, nothing is pending
    assert tracker.window_closed(UtilSample(0.33, 0.52)).empty
    assert tracker.pending is None


def test_power_rides_along_only_with_an_update() -> None:
    last = Sent(0.30, 0.50)
    quiet = decide_host_update(UtilSample(0.31, 0.50, power_w=99.0), last, 10.0, False)
    assert quiet.payload() == {}
    loud = decide_host_update(UtilSample(0.51, 0.50, power_w=99.0), last, 10.0, False)
    assert loud.payload() == {"cpu_util": 0.51, "power_w": 99.0}


def test_partial_update_keeps_the_other_last_sent_value() -> None:
    assert HostUpdate(cpu_util=0.7).applied_to(Sent(0.3, 0.4)) == Sent(0.7, 0.4)
    assert HostUpdate(memory_util=0.9).applied_to(Sent(0.3, 0.4)) == Sent(0.3, 0.9)
    with pytest.raises(ValueError):
        HostUpdate(cpu_util=0.7).applied_to(None)


@given(last=st.tuples(fraction, fraction), now=st.tuples(fraction, fraction),
       threshold_pp=st.floats(min_value=0.5, max_value=100.0))
def test_host_decision_property(
    last: tuple[float, float], now: tuple[float, float], threshold_pp: float
) -> None:
    decision = decide_host_update(UtilSample(*now), Sent(*last), threshold_pp, first_window=False)
    cpu_moved = abs(now[0] - last[0]) * 100 >= threshold_pp - 1e-6
    mem_moved = abs(now[1] - last[1]) * 100 >= threshold_pp - 1e-6
    assert (decision.cpu_util is not None) == cpu_moved
    assert (decision.memory_util is not None) == mem_moved


@settings(max_examples=200)
@given(
    windows=st.lists(st.tuples(fraction, fraction), min_size=1, max_size=40),
    delivered=st.lists(st.booleans(), min_size=40, max_size=40),
    threshold_pp=st.sampled_from([1.0, 5.0, 10.0, 20.0]),
)
def test_registry_view_stays_within_threshold_when_delivered(
    windows: list[tuple[float, float]], delivered: list[bool], threshold_pp: float
) -> None:
    """Whatever the outage pattern: at most one update is pending, the first window is always
    sent, and after a delivered window the registry holds values within the threshold."""
    tracker = HostTracker(threshold_pp)
    registry: Sent | None = None
    for index, (cpu, mem) in enumerate(windows):
        decision = tracker.window_closed(UtilSample(cpu, mem))
        if index == 0:
            assert decision.resources == (Resource.CPU, Resource.MEMORY)
        assert tracker.pending in (None, decision)
        if tracker.pending is not None and delivered[index]:
            registry = decision.applied_to(registry)
            tracker.acknowledged(decision)
            assert tracker.pending is None
        assert tracker.last_sent == registry
        if delivered[index] and registry is not None:
            assert not moved(cpu, registry.cpu_util, threshold_pp)
            assert not moved(mem, registry.memory_util, threshold_pp)


def test_task_batch_table() -> None:
    last = {"a": Sent(0.10, 0.10), "b": Sent(0.50, 0.50), "c": Sent(0.20, 0.20)}
    now = {
        "a": UtilSample(0.15, 0.12),  # quiet
        "b": UtilSample(0.50, 0.70),  # memory moved
        "c": UtilSample(0.05, 0.20),  # cpu moved (down by 15 p.p.)
        "d": UtilSample(0.00, 0.00),  # never sent: first window of this task
    }
    batch = decide_task_batch(now, last, threshold_pp=10.0)
    assert batch == TaskBatch((
        TaskUtil("b", 0.50, 0.70), TaskUtil("c", 0.05, 0.20), TaskUtil("d", 0.0, 0.0),
    ))
    assert batch.payload("h1") == {
        "host": "h1",
        "tasks": [
            {"id": "b", "cpu_util": 0.5, "memory_util": 0.7},
            {"id": "c", "cpu_util": 0.05, "memory_util": 0.2},
            {"id": "d", "cpu_util": 0.0, "memory_util": 0.0},
        ],
    }
    assert decide_task_batch(now, last, threshold_pp=30.0).tasks == (TaskUtil("d", 0.0, 0.0),)


def test_task_tracker_forgets_gone_tasks_and_resends_unknown_ones() -> None:
    tracker = TaskTracker(threshold_pp=10.0)
    first = tracker.window_closed({"a": UtilSample(0.1, 0.1), "b": UtilSample(0.2, 0.2)})
    assert [t.task_id for t in first.tasks] == ["a", "b"]
    tracker.acknowledged(first, unknown=["b"])
    assert set(tracker.last_sent) == {"a"}
    second = tracker.window_closed({"a": UtilSample(0.12, 0.1), "b": UtilSample(0.2, 0.2)})
    assert [t.task_id for t in second.tasks] == ["b"]  # unknown last time: sent again
    tracker.acknowledged(second)
    tracker.window_closed({"b": UtilSample(0.2, 0.2)})
    assert set(tracker.last_sent) == {"b"}  # "a" is gone
    # "a" comes back: it is new again, so it is sent
    assert [t.task_id for t in tracker.window_closed({"a": UtilSample(0.1, 0.1)}).tasks] == ["a"]


# --- re-sends: a wrong value cannot stand (DESIGN 9) ------------------------------------------


def test_the_host_values_are_sent_again_at_least_every_resend_s() -> None:
    """Nothing moves, yet both current values go again once resend_s passed since both were
    last sent, so whatever was written to the registry meanwhile is overwritten; one value
    moving alone does not reset that clock for the other."""
    tracker = HostTracker(threshold_pp=10.0, resend_s=60.0)
    tracker.registered(0.2, 0.3, at=0.0)
    quiet = UtilSample(0.22, 0.31, 40.0)
    first = tracker.window_closed(UtilSample(0.2, 0.3), 30.0)  # the first window always sends
    tracker.acknowledged(first)
    assert tracker.window_closed(quiet, 60.0).empty  # 30 s since both went: nothing due
    again = tracker.window_closed(quiet, 90.0)
    assert (again.cpu_util, again.memory_util, again.power_w, again.measured_at) == (
        0.22, 0.31, 40.0, 90.0)
    assert again.payload().keys() == {"cpu_util", "memory_util", "power_w", "measured_at"}
    tracker.acknowledged(again)
    moved = tracker.window_closed(UtilSample(0.5, 0.31), 120.0)  # CPU alone moved
    assert moved.resources == (Resource.CPU,)
    tracker.acknowledged(moved)
    both = tracker.window_closed(UtilSample(0.5, 0.31), 150.0)  # memory went last at 90
    assert both.resources == (Resource.CPU, Resource.MEMORY) and both.measured_at == 150.0
    unsent = tracker.window_closed(UtilSample(0.5, 0.31), 180.0)  # not acknowledged at 150
    assert unsent.has_values and tracker.pending == unsent


def test_without_resend_s_a_quiet_window_sends_only_a_heartbeat() -> None:
    """The simulator's model keeps the heartbeat (nothing else writes its registry)."""
    tracker = HostTracker(threshold_pp=10.0, heartbeat_s=60.0)
    tracker.registered(0.2, 0.3, at=0.0)
    tracker.acknowledged(tracker.window_closed(UtilSample(0.2, 0.3), 30.0))
    beat = tracker.window_closed(UtilSample(0.22, 0.31), 90.0)
    assert not beat.has_values and beat.measured_at == 90.0


def test_task_values_are_sent_again_at_least_every_resend_s() -> None:
    tracker = TaskTracker(threshold_pp=10.0, resend_s=60.0)
    a, b = UtilSample(0.1, 0.1), UtilSample(0.2, 0.2)
    first = tracker.window_closed({"a": a}, 0.0)
    tracker.acknowledged(first)
    second = tracker.window_closed({"a": a, "b": b}, 45.0)
    assert [t.task_id for t in second.tasks] == ["b"]  # new; a sent 45 s ago
    tracker.acknowledged(second)
    third = tracker.window_closed({"a": a, "b": b}, 90.0)
    assert third.tasks == (TaskUtil("a", 0.1, 0.1),)  # a: 90 s since; b: 45 s
    tracker.acknowledged(third, unknown=["a"])  # booked nowhere: not counted as sent
    fourth = tracker.window_closed({"a": a, "b": b}, 135.0)
    assert [t.task_id for t in fourth.tasks] == ["a", "b"]
    # undated windows (the simulator's) never re-send
    plain = TaskTracker(threshold_pp=10.0, resend_s=60.0)
    plain.acknowledged(plain.window_closed({"a": a}))
    assert plain.window_closed({"a": a}).empty


# --- windows ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ([], None),
        ([UtilSample(0.5, 0.2)], UtilSample(0.5, 0.2)),
        # the thesis' spike: one second of 90% in a 50% window barely moves the average
        ([UtilSample(0.5, 0.3)] * 9 + [UtilSample(0.9, 0.3)], UtilSample(0.54, 0.3)),
        ([UtilSample(0.0, 1.0), UtilSample(1.0, 0.0)], UtilSample(0.5, 0.5)),
        ([UtilSample(0.2, 0.2, 10.0), UtilSample(0.4, 0.4), UtilSample(0.6, 0.6, 30.0)],
         UtilSample(0.4, 0.4, 20.0)),
    ],
)
def test_window_average_table(samples: list[UtilSample], expected: UtilSample | None) -> None:
    result = average(samples)
    if expected is None:
        assert result is None
        return
    assert result is not None
    assert result.cpu_util == pytest.approx(expected.cpu_util)
    assert result.memory_util == pytest.approx(expected.memory_util)
    assert result.power_w == (None if expected.power_w is None else pytest.approx(expected.power_w))


@given(st.lists(st.tuples(fraction, fraction), min_size=1, max_size=50))
def test_window_average_is_between_min_and_max(values: list[tuple[float, float]]) -> None:
    result = average([UtilSample(c, m) for c, m in values])
    assert result is not None
    cpus, mems = [c for c, _ in values], [m for _, m in values]
    assert min(cpus) - 1e-12 <= result.cpu_util <= max(cpus) + 1e-12
    assert min(mems) - 1e-12 <= result.memory_util <= max(mems) + 1e-12


@pytest.mark.parametrize(
    ("interval_s", "window_s", "slots"),
    [(3.0, 30.0, 10), (3.0, 45.0, 15), (0.5, 1.0, 2), (3.0, 3.0, 1), (3.0, 1.0, 1), (3.0, 31.0, 10)],
)
def test_slots_per_window(interval_s: float, window_s: float, slots: int) -> None:
    assert slots_per_window(interval_s, window_s) == slots


def test_window_schedule_on_time_and_late() -> None:
    schedule = WindowSchedule(start_s=100.0, interval_s=3.0, slots=10)
    closed_at = []
    now = 100.0
    for _ in range(25):
        now = schedule.next_due_s
        assert schedule.due(now)
        if schedule.advance(now):
            closed_at.append(now)
    assert closed_at == [130.0, 160.0]
    assert not schedule.due(now + 2.9)
    # the loop was stuck for 40 s: the missed slots are skipped, the window still closes
    assert schedule.advance(now + 40.0)
    assert schedule.slot == 38 and schedule.windows == 3
    assert schedule.next_due_s == 100.0 + 39 * 3.0


# --- utilization arithmetic -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        (CpuCounter(0, 0.0), CpuCounter(3_000_000_000, 3.0), 1.0),
        (CpuCounter(10**9, 1.0), CpuCounter(10**9 + 1_500_000_000, 4.0), 0.5),
        (CpuCounter(0, 0.0), CpuCounter(6_000_000_000, 3.0), 2.0),
        (CpuCounter(5, 1.0), CpuCounter(5, 4.0), 0.0),
        (CpuCounter(5, 1.0), CpuCounter(4, 4.0), None),  # counter went back: cgroup recreated
        (CpuCounter(5, 1.0), CpuCounter(9, 1.0), None),  # no time elapsed
    ],
)
def test_cores_used(previous: CpuCounter, current: CpuCounter, expected: float | None) -> None:
    assert cores_used(previous, current) == expected


@pytest.mark.parametrize(
    ("cores", "shares", "expected"),
    [
        (1.0, 512, 1.0),  # `yes` on a 512-share task: 2x its allocation, capped
        (0.25, 512, 0.5),
        (0.5, 1024, 0.5),
        (0.5, 0, 0.5),  # CpuShares 0 = the default 1024
        (1.5, 2048, 0.75),
        (0.0, 2, 0.0),
        (0.01, 2, 1.0),
        (-0.1, 1024, 0.0),
    ],
)
def test_cpu_util_of_shares(cores: float, shares: int, expected: float) -> None:
    assert cpu_util_of_shares(cores, shares) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("quota_us", "period_us", "cpus", "cores"),
    [(50_000, 100_000, 2, 0.5), (None, 100_000, 2, 2.0), (-1, 100_000, 4, 4.0),
     (400_000, 100_000, 2, 2.0), (150_000, 100_000, 8, 1.5)],
)
def test_quota_cores(quota_us: int | None, period_us: int, cpus: int, cores: float) -> None:
    assert quota_cores(quota_us, period_us, cpus) == cores


def test_cpu_util_of_cores_and_memory() -> None:
    assert cpu_util_of_cores(0.5, 0.5) == 1.0
    assert cpu_util_of_cores(0.25, 2.0) == 0.125
    assert cpu_util_of_cores(3.0, 2.0) == 1.0
    assert cpu_util_of_cores(1.0, 0.0) == 0.0
    assert memory_used_bytes(100, 30) == 70
    assert memory_used_bytes(100, 300) == 0
    # the stats API's cache field by cgroup layout: v1 total_cache (or cache), v2 file
    assert memory_used_from_stats({"usage": 100, "stats": {"total_cache": 30, "cache": 5}}) == 70
    assert memory_used_from_stats({"usage": 100, "stats": {"cache": 40}}) == 60
    assert memory_used_from_stats({"usage": 100, "stats": {"file": 25}}) == 75
    assert memory_used_from_stats({"usage": 100}) == 100
    assert memory_util(GIB // 4, GIB) == 0.25
    assert memory_util(2 * GIB, GIB) == 1.0
    assert memory_util(5, 0) == 0.0
    assert memory_limit_or_host(None, 8 * GIB) == 8 * GIB
    assert memory_limit_or_host(9223372036854771712, 8 * GIB) == 8 * GIB
    assert memory_limit_or_host(2 * GIB, 8 * GIB) == 2 * GIB
    assert task_memory_limit_bytes(0, 8 * GIB) == 8 * GIB
    assert task_memory_limit_bytes(256 * 1024**2, 8 * GIB) == 256 * 1024**2
    assert clamp_fraction(math.nan) == 0.0


@given(cores=st.floats(min_value=0, max_value=64, allow_nan=False),
       shares=st.integers(min_value=0, max_value=262_144))
def test_cpu_util_is_a_fraction(cores: float, shares: int) -> None:
    assert 0.0 <= cpu_util_of_shares(cores, shares) <= 1.0


# --- RAPL -------------------------------------------------------------------------------------

MAX_RANGE_UJ = 262_143_328_850  # a real package's max_energy_range_uj


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        (1_000, 5_000, 4_000),
        (5_000, 5_000, 0),
        (MAX_RANGE_UJ - 1_000, 2_000, 3_000),  # wrapped
        (MAX_RANGE_UJ, 0, 0),
        (MAX_RANGE_UJ - 10, MAX_RANGE_UJ, 10),
    ],
)
def test_energy_delta_wraps(previous: int, current: int, expected: int) -> None:
    assert energy_delta_uj(previous, current, MAX_RANGE_UJ) == expected


def test_power_w() -> None:
    assert power_w(EnergyCounter(0, 0.0), EnergyCounter(30_000_000, 3.0), MAX_RANGE_UJ) == 10.0
    wrapped = power_w(EnergyCounter(MAX_RANGE_UJ - 5_000_000, 10.0),
                      EnergyCounter(25_000_000, 13.0), MAX_RANGE_UJ)
    assert wrapped == pytest.approx(10.0)
    assert power_w(EnergyCounter(0, 1.0), EnergyCounter(5, 1.0), MAX_RANGE_UJ) is None


@given(start=st.integers(min_value=0, max_value=MAX_RANGE_UJ),
       used=st.integers(min_value=0, max_value=MAX_RANGE_UJ))
def test_energy_delta_recovers_any_use_below_one_range(start: int, used: int) -> None:
    current = (start + used) % MAX_RANGE_UJ
    assert energy_delta_uj(start, current, MAX_RANGE_UJ) == used % MAX_RANGE_UJ


def _zone(root: Path, name: str, label: str, energy_uj: int, max_uj: int = MAX_RANGE_UJ) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "name").write_text(label + "\n")
    (directory / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (directory / "energy_uj").write_text(f"{energy_uj}\n")
    return directory


def test_rapl_meter_on_a_fake_powercap_tree(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    package0 = _zone(root, "intel-rapl:0", "package-0", MAX_RANGE_UJ - 10_000_000)
    _zone(root, "intel-rapl:0:0", "core", 0)  # a sub-zone: part of package-0, not summed
    package1 = _zone(root, "intel-rapl:1", "package-1", 1_000_000)
    (root / "intel-rapl").mkdir()  # the control type directory, no counters
    meter = RaplMeter.discover(root)
    assert meter is not None
    assert [zone.name for zone in meter.zones] == ["package-0", "package-1"]
    assert meter.read_power_w(at_s=100.0) is None  # first reading primes
    (package0 / "energy_uj").write_text("20000000\n")  # wrapped: 10 J + 20 J = 30 J
    (package1 / "energy_uj").write_text("31000000\n")  # 30 J
    assert meter.read_power_w(at_s=103.0) == pytest.approx(20.0)  # 60 J in 3 s
    (package1 / "energy_uj").unlink()  # a zone that cannot be read: no number, no crash
    assert meter.read_power_w(at_s=106.0) is None


def test_rapl_absent_or_unreadable(tmp_path: Path) -> None:
    assert RaplMeter.discover(tmp_path / "no-such-dir") is None
    assert RaplMeter.discover(tmp_path) is None
    broken = _zone(tmp_path / "pc", "intel-rapl:0", "package-0", 5)
    (broken / "energy_uj").write_text("not a number\n")
    assert discover_zones(tmp_path / "pc") == []


def test_rapl_psys_only_when_no_package(tmp_path: Path) -> None:
    _zone(tmp_path / "a", "intel-rapl:0", "package-0", 5)
    _zone(tmp_path / "a", "intel-rapl:1", "psys", 5)
    assert [z.name for z in discover_zones(tmp_path / "a")] == ["package-0"]
    _zone(tmp_path / "b", "intel-rapl:1", "psys", 5)
    assert [z.name for z in discover_zones(tmp_path / "b")] == ["psys"]


# --- back-off ---------------------------------------------------------------------------------


def test_backoff_table() -> None:
    policy = BackoffPolicy(base_s=1.0, cap_s=60.0, jitter=0.5)
    assert [policy.delay_s(n, 0.0) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert policy.delay_s(3, 0.999999) == pytest.approx(4.0, rel=1e-5)
    assert policy.delay_s(10_000, 0.0) == 60.0
    with pytest.raises(ValueError):
        BackoffPolicy(base_s=5.0, cap_s=1.0)


@given(attempt=st.integers(min_value=0, max_value=10_000),
       rand=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
       base=st.floats(min_value=0.01, max_value=5.0), cap=st.floats(min_value=5.0, max_value=600.0))
def test_backoff_bounded(attempt: int, rand: float, base: float, cap: float) -> None:
    policy = BackoffPolicy(base_s=base, cap_s=cap, jitter=0.5)
    delay = policy.delay_s(attempt, rand)
    ceiling = min(cap, base * 2**min(attempt, 62))
    assert ceiling * 0.5 - 1e-9 <= delay <= ceiling + 1e-9 <= cap + 1e-9


def test_backoff_jitter_spreads_retries() -> None:
    policy = BackoffPolicy()
    rng = random.Random(7)
    delays = {round(policy.delay_s(4, rng.random()), 3) for _ in range(20)}
    assert len(delays) > 10


# --- cgroup readers on fake trees -------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _fake_v1(root: Path, group: str, usage_ns: int, quota_us: int = 50_000,
             limit: int = 2 * GIB, usage_bytes: int = GIB, cache: int = GIB // 4) -> None:
    _write(root / "cpuacct" / group / "cpuacct.usage", f"{usage_ns}\n")
    _write(root / "cpu" / group / "cpu.cfs_quota_us", f"{quota_us}\n")
    _write(root / "cpu" / group / "cpu.cfs_period_us", "100000\n")
    _write(root / "memory" / group / "memory.usage_in_bytes", f"{usage_bytes}\n")
    _write(root / "memory" / group / "memory.limit_in_bytes", f"{limit}\n")
    _write(root / "memory" / group / "memory.stat",
           f"cache 1\nrss 2\ntotal_cache {cache}\ntotal_rss {usage_bytes - cache}\n")


def _fake_v2(root: Path, group: str, usage_us: int, cpu_max: str = "50000 100000",
             memory_max: str = "2147483648", current: int = GIB, file: int = GIB // 4) -> None:
    _write(root / "cgroup.controllers", "cpu memory\n")
    _write(root / group / "cpu.stat", f"usage_usec {usage_us}\nuser_usec 1\nsystem_usec 2\n")
    _write(root / group / "cpu.max", cpu_max + "\n")
    _write(root / group / "memory.current", f"{current}\n")
    _write(root / group / "memory.max", memory_max + "\n")
    _write(root / group / "memory.stat", f"anon 5\nfile {file}\nkernel 7\n")


def test_cgroup_v1_readers(tmp_path: Path) -> None:
    _fake_v1(tmp_path, "lab/node1", usage_ns=123_000)
    assert detect_version(tmp_path) is CgroupVersion.V1
    dirs = CgroupDirs.under(tmp_path, CgroupVersion.V1, "/lab/node1")
    assert dirs.exists()
    assert read_cpu_counter(dirs, 5.0) == CpuCounter(123_000, 5.0)
    reading = read_memory(dirs)
    assert (reading.usage_bytes, reading.cache_bytes) == (GIB, GIB // 4)
    assert read_memory_limit_bytes(dirs) == 2 * GIB
    assert read_cpu_quota_us(dirs) == (50_000, 100_000)
    _write(tmp_path / "memory/lab/node1/memory.limit_in_bytes", "9223372036854771712\n")
    _write(tmp_path / "cpu/lab/node1/cpu.cfs_quota_us", "-1\n")
    assert read_memory_limit_bytes(dirs) is None
    assert read_cpu_quota_us(dirs) == (None, 100_000)


def test_cgroup_v2_readers(tmp_path: Path) -> None:
    _fake_v2(tmp_path, "lab/node1", usage_us=7)
    assert detect_version(tmp_path) is CgroupVersion.V2
    dirs = CgroupDirs.under(tmp_path, CgroupVersion.V2, "lab/node1")
    assert dirs.exists()
    assert read_cpu_counter(dirs, 1.0) == CpuCounter(7_000, 1.0)
    reading = read_memory(dirs)
    assert (reading.usage_bytes, reading.cache_bytes) == (GIB, GIB // 4)
    assert read_memory_limit_bytes(dirs) == 2 * GIB
    assert read_cpu_quota_us(dirs) == (50_000, 100_000)
    _write(tmp_path / "lab/node1/cpu.max", "max 100000\n")
    _write(tmp_path / "lab/node1/memory.max", "max\n")
    assert read_cpu_quota_us(dirs) == (None, 100_000)
    assert read_memory_limit_bytes(dirs) is None


def test_cgroup_v1_co_mounted_cpu_and_cpuacct(tmp_path: Path) -> None:
    _write(tmp_path / "cpu,cpuacct" / "node1" / "cpuacct.usage", "42\n")
    _write(tmp_path / "memory" / "node1" / "memory.usage_in_bytes", "1\n")
    dirs = CgroupDirs.under(tmp_path, detect_version(tmp_path), "node1")
    assert dirs.cpu == dirs.cpuacct == tmp_path / "cpu,cpuacct" / "node1"
    assert dirs.exists()
    assert read_cpu_counter(dirs, 0.0).usage_ns == 42


def test_no_cgroup_hierarchy(tmp_path: Path) -> None:
    assert detect_version(tmp_path) is CgroupVersion.NONE
    with pytest.raises(ValueError):
        CgroupDirs.under(tmp_path, CgroupVersion.V1, "../etc")


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2])
def test_cgroup_host_source_arithmetic(tmp_path: Path, version: CgroupVersion) -> None:
    """Half a core of quota, 0.75 core-seconds used over 3 s = 0.25 cores = 50% of the node;
    memory (1 GiB - 1/4 GiB cache) / 2 GiB limit = 37.5%."""
    now = [10.0]
    if version is CgroupVersion.V1:
        _fake_v1(tmp_path, "node1", usage_ns=1_000_000_000)
    else:
        _fake_v2(tmp_path, "node1", usage_us=1_000_000)
    source = CgroupHostSource("node1", root=tmp_path, clock=lambda: now[0], cpu_count=2,
                              host_memory_bytes=16 * GIB)
    capacity = source.capacity()
    assert (capacity.cpu_shares, capacity.memory_bytes) == (512, 2 * GIB)
    assert source.sample() is None
    now[0] = 13.0
    if version is CgroupVersion.V1:
        _fake_v1(tmp_path, "node1", usage_ns=1_750_000_000)
    else:
        _fake_v2(tmp_path, "node1", usage_us=1_750_000)
    sample = source.sample()
    assert sample is not None
    assert sample.cpu_util == pytest.approx(0.5)
    assert sample.memory_util == pytest.approx(0.375)


def test_cgroup_host_source_refuses_a_missing_cgroup(tmp_path: Path) -> None:
    _fake_v1(tmp_path, "node1", usage_ns=0)
    with pytest.raises(ValidationError):
        CgroupHostSource("node2", root=tmp_path)
    with pytest.raises(ValidationError):
        CgroupHostSource("node1", root=tmp_path / "empty")


def test_proc_cgroup_parsing(tmp_path: Path) -> None:
    cid = "c85285436027de4530cab5379a0929add8019007bc02712df7a06b6a0422fbd0"
    v1 = (f"9:name=systemd:/docker/{cid}\n4:memory:/docker/{cid}\n"
          f"2:cpu,cpuacct:/lab/node1/{cid}\n0::/docker/{cid}\n")
    paths = paths_from_proc_cgroup(v1)
    assert paths["cpu"] == paths["cpuacct"] == f"/lab/node1/{cid}"
    assert paths[""] == f"/docker/{cid}"
    dirs = dirs_from_proc_cgroup(v1, tmp_path, CgroupVersion.V1)
    assert dirs is not None
    assert dirs.cpuacct == tmp_path / "cpuacct" / "lab" / "node1" / cid
    assert dirs.memory == tmp_path / "memory" / "docker" / cid
    v2 = dirs_from_proc_cgroup(f"0::/system.slice/docker-{cid}.scope\n", tmp_path, CgroupVersion.V2)
    assert v2 is not None and v2.cpu == tmp_path / "system.slice" / f"docker-{cid}.scope"
    assert dirs_from_proc_cgroup("0::/\n", tmp_path, CgroupVersion.V1) is None


# --- settings, identity, messages -------------------------------------------------------------


def test_settings_from_environment_and_overrides() -> None:
    environ = {
        "GREENSWARM_REGISTRY_URL": "http://10.123.0.1:8080",
        "GREENSWARM_TOKEN": "the operator's: never read by a node",
        "GREENSWARM_NODE_SECRET": " s3cret ",
        "GREENSWARM_MONITOR_HOST_WINDOW_S": "60",
        "GREENSWARM_MONITOR_SOURCE": "cgroup",
        "GREENSWARM_MONITOR_CGROUP": "lab/node1",
        "DOCKER_HOST": "/run/node1.sock",
    }
    settings = load_settings(environ, {"threshold_pp": 5.0, "host_window_s": None,
                                       "log_level": "debug"})
    assert settings.registry_url == "http://10.123.0.1:8080"
    assert settings.node_secret == "s3cret" and settings.node_credential == ""
    assert "s3cret" not in repr(settings) and "operator" not in repr(settings)
    assert settings.resend_s == 60.0  # the default re-send period (DESIGN 9)
    assert settings.host_window_s == 60.0
    assert settings.threshold_pp == 5.0
    assert settings.source is HostSourceKind.CGROUP
    assert settings.log_level is LogLevel.DEBUG
    assert settings.docker_url == "unix:///run/node1.sock"
    settings.require_credential()


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"host_interval_s": 0.0}, "host_interval_s"),
        ({"host_window_s": 1.0}, "host_window_s"),
        ({"task_interval_s": 10.0, "task_window_s": 5.0}, "task_window_s"),
        ({"threshold_pp": 0.0}, "threshold_pp"),
        ({"threshold_pp": 150.0}, "threshold_pp"),
        ({"source": HostSourceKind.CGROUP}, "cgroup"),
        ({"registry_url": "redis://x"}, "registry_url"),
    ],
)
def test_settings_refused(values: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        MonitorSettings(**values)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_settings_bad_environment_value_names_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        load_settings({"GREENSWARM_MONITOR_THRESHOLD_PP": "ten"})
    assert caught.value.field == "threshold_pp"
    with pytest.raises(ValidationError) as caught:  # a typo is refused, not read as "no"
        load_settings({"GREENSWARM_MONITOR_INSECURE_NO_TOKEN": "ture"})
    assert caught.value.field == "insecure_no_token"
    assert load_settings({"GREENSWARM_MONITOR_INSECURE_NO_TOKEN": "on"}).insecure_no_token


def test_no_node_secret_is_refused_unless_insecure() -> None:
    """The operator's token is no credential of a node: with only it, the monitor refuses."""
    with pytest.raises(ValidationError) as caught:
        load_settings({"GREENSWARM_TOKEN": "t", "GREENSWARM_NODE_SECRET": ""}).require_credential()
    assert caught.value.field == "node_secret"
    load_settings({}, {"insecure_no_token": True}).require_credential()
    load_settings({"GREENSWARM_NODE_CREDENTIAL": "gsn1.n.x"}).require_credential()


@pytest.mark.parametrize(
    ("info", "host_id", "address", "expected"),
    [
        ({"Swarm": {"NodeID": "n1", "NodeAddr": "10.123.0.2"}}, None, None, ("n1", "10.123.0.2")),
        ({"Swarm": {"NodeID": "", "NodeAddr": "", "LocalNodeState": "inactive"}}, None, None,
         ("box", "box")),
        (None, None, None, ("box", "box")),
        ({"Swarm": {"NodeID": "n1", "NodeAddr": "10.123.0.2"}}, "h9", "1.2.3.4", ("h9", "1.2.3.4")),
        ({"Swarm": {"NodeID": "n1", "NodeAddr": ""}}, None, None, ("n1", "box")),
    ],
)
def test_identity(info: dict[str, object] | None, host_id: str | None, address: str | None,
                  expected: tuple[str, str]) -> None:
    identity = identity_from_info(info, "box", host_id, address)
    assert (identity.host_id, identity.address) == expected


def test_message_payloads() -> None:
    registration = HostRegistration("n1", "10.0.0.2", 2048, 8 * GIB, 0.123456, 0.5)
    assert registration.payload() == {
        "id": "n1", "address": "10.0.0.2", "cpu_capacity": 2048, "memory_capacity": 8 * GIB,
        "cpu_util": 0.1235, "memory_util": 0.5,
    }
    dry = DryRunRegistry()
    assert dry.register_host(registration)
    dry.update_host("n/1", HostUpdate(memory_util=0.25, power_w=80.0))
    result = dry.update_tasks("n1", TaskBatch((TaskUtil("t1", 0.5, 0.25),)))
    assert result.updated == ("t1",)
    assert [m["message"] for m in dry.messages] == [11, 12, 13]
    assert dry.messages[1] == {"message": 12, "method": "PUT",
                               "path": "/registry/hosts/n%2F1/utilization",
                               "body": {"memory_util": 0.25, "power_w": 80.0}}
