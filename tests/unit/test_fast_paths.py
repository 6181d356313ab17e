"""The simulator's fast paths (DESIGN 8) against the plain code they stand for: each must give
exactly the same result, so the simulator's numbers stay the same."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction as F

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.books import contribution, cut_target
from domain.classes import CLASSES, ClassTable, OverbookingModel, after_cut, after_cut_ratio
from domain.decision import Decision, Pass
from domain.energy import EnergyMeter, PowerModel
from domain.model import HostSpec, Request, Task, TaskType
from domain.regions import RegionBounds
from domain.restore import _in_restore_order, restore_levels, restore_order
from domain.tally import COUNT, CPU, CUT_CPU, CUT_MEM, MEM, SVC4_CPU, SVC4_MEM, TALLY_SIZE, combine
from measure.host_time import HostTime, advance, host_series
from measure.recorder import MetricsRecorder
from measure.results import SERIES_COLUMNS
from sim.monitor_model import WindowAccumulator, instants_between

TABLES = [ClassTable(model) for model in OverbookingModel]
SPEC = HostSpec("h", 8192, 12 << 30)


def test_with_utilization_resized_and_timed_equal_replace() -> None:
    task = Task("t", "h", 3, TaskType.JOB, 700, 900, 800, 1000, F(1, 6), 0.25, 0.5, 3.0, 4.0,
                5.0, 2)
    assert task.with_utilization(0.125, 0.75) == replace(task, cpu_util=0.125,
                                                         memory_util=0.75)
    assert task.resized(600, 800, F(1, 3)) == replace(task, cpu_shares=600, memory=800,
                                                      cut_received=F(1, 3))
    decision = Decision(Request("r", 2, TaskType.SERVICE, 500, 600), True, "h", Pass.CUT, 450,
                        550, F(1, 12), (), ("k",), 2, "why", ("line",), "energy")
    timed = decision.timed(1.5)
    assert timed == replace(decision, decision_ms=1.5)
    assert timed.decision_ms == 1.5 and timed.explain == decision.explain


@given(st.lists(st.integers(-10**6, 10**6), min_size=2 * TALLY_SIZE,
                max_size=2 * TALLY_SIZE), st.sampled_from([1, -1, 2]))
def test_combine_is_the_sum_term_by_term(values: list[int], sign: int) -> None:
    a, b = tuple(values[:TALLY_SIZE]), tuple(values[TALLY_SIZE:])
    assert combine(a, b, sign) == tuple(x + sign * y for x, y in zip(a, b, strict=True))


@given(st.integers(1, 10**9), st.sampled_from(TABLES), st.sampled_from(CLASSES),
       st.sampled_from(CLASSES))
def test_integer_cuts_match_the_fractions(original: int, table: ClassTable, a: int,
                                          b: int) -> None:
    cut = table.request_cut(a, b)
    assert table.request_cut_ratio(a, b) == (cut.numerator, cut.denominator)
    assert after_cut_ratio(original, cut.numerator, cut.denominator) == after_cut(original, cut)
    steps = table.cut_steps(a)
    assert [s[0] for s in steps] == sorted({table.request_cut(a, c) for c in CLASSES})
    assert all((s[1], s[2]) == (s[0].numerator, s[0].denominator) for s in steps)


@given(st.sampled_from(TABLES), st.sampled_from(CLASSES),
       st.fractions(min_value=0, max_value=1, max_denominator=50))
def test_restore_levels_are_the_table_cuts_below_the_received_one(
    table: ClassTable, cls: int, received: F
) -> None:
    task = Task("t", "h", cls, TaskType.SERVICE, 100, 100, 100, 100, received)
    levels = {table.request_cut(cls, c) for c in CLASSES}
    assert restore_levels(task, table) == tuple(sorted(x for x in levels if x < received))


@given(st.lists(st.tuples(st.fractions(min_value=0, max_value=1, max_denominator=40),
                          st.sampled_from(CLASSES)), min_size=1, max_size=12))
def test_restore_order_in_integers_is_the_fraction_order(cuts: list[tuple[F, int]]) -> None:
    tasks = [Task(f"t{i}", "h", cls, TaskType.SERVICE, 10, 10, 10, 10, cut)
             for i, (cut, cls) in enumerate(cuts)]
    assert _in_restore_order(tasks) == sorted(tasks, key=restore_order)


def _advance_by_bins(host: HostTime, t: float, bounds: RegionBounds, t0_s: float,
                     step_s: float) -> None:
    """The bin loop alone, as ``advance`` had it before its one-bin fast path."""
    a = host.last_t
    if t - a <= 0:
        return
    power = host.model.power_w_unchecked(host.cpu, host.mem_bytes)
    values = (host.cpu, host.mem, host.cpu_alloc, host.mem_alloc, float(host.tasks), power,
              0.0 if host.tasks == 0 else power, 1.0)
    bins = host.bins
    start = a
    while start < t:
        index = math.floor((start - t0_s) / step_s)
        bin_end = min(t, t0_s + (index + 1) * step_s)
        if bin_end <= start:
            index += 1
            bin_end = min(t, t0_s + (index + 1) * step_s)
        piece = bin_end - start
        if len(bins[0]) <= index:
            for column in bins:
                column.extend([0.0] * (index + 1 - len(column)))
        for column, value in zip(bins, values, strict=True):
            column[index] += value * piece
        start = bin_end
    host.last_t = t


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 250.0), st.floats(0.0, 1.0), st.integers(0, 5)),
                min_size=1, max_size=30),
       st.sampled_from([(0.0, 60.0), (12.5, 7.0), (-3.0, 2.5)]))
def test_advance_fills_the_bins_as_the_bin_loop(
    steps: list[tuple[float, float, int]], grid: tuple[float, float]
) -> None:
    t0, step = grid
    bounds, model = RegionBounds(), PowerModel.named()
    fast, slow = HostTime(SPEC, model, t0), HostTime(SPEC, model, t0)
    t = t0
    for dt, util, tasks in steps:
        t += dt
        advance(fast, t, bounds, t0, step)
        _advance_by_bins(slow, t, bounds, t0, step)
        for host in (fast, slow):
            host.cpu, host.mem, host.mem_bytes, host.tasks = util, util / 2, util * 1e9, tasks
            host.power = model.power_w_unchecked(host.cpu, host.mem_bytes)
            host.cpu_alloc, host.mem_alloc = util / 3, util / 4
    assert fast.bins == slow.bins


def test_unchecked_host_state_records_the_same_as_the_checked_one() -> None:
    hosts = [SPEC, HostSpec("g", 4096, 6 << 30)]
    checked, unchecked = MetricsRecorder("p", hosts), MetricsRecorder("p", hosts)
    states = [(0.0, "h", 0.5, 0.25, 2, 3e9, 4096, 5 << 30), (7.5, "g", 1.5, 0.125, 0, 0.0, 0, 0),
              (7.5, "h", 0.75, 0.5, 1, 6e9, 2048, 1 << 30), (90.0, "h", 0.0, 0.0, 0, 0.0, 0, 0)]
    for t, host, cpu, mem, count, used, shares, booked in states:
        checked.on_host_state(t, host, cpu_util=cpu, memory_util=mem, task_count=count,
                              memory_in_use_bytes=used, cpu_allocated_shares=shares,
                              memory_allocated_bytes=booked)
        unchecked.on_host_state_unchecked(t, host, cpu, mem, count, used, shares, booked)
    assert checked.finish(100.0) == unchecked.finish(100.0)


def _host_series_by_bin(host: HostTime, n_bins: int) -> list[tuple[float, ...]]:
    """Each column's bin averages, bin by bin, as ``host_series`` had them."""
    coverage = host.bins[-1]
    rows = []
    for column in host.bins[:-1]:
        row = []
        for i in range(n_bins):
            covered = coverage[i] if i < len(coverage) else 0.0
            row.append(column[i] / covered if covered > 0 else 0.0)
        rows.append(tuple(row))
    return rows


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 90.0), st.floats(0.0, 1.0), st.integers(0, 3)),
                max_size=20),
       st.floats(1.0, 400.0))
def test_host_series_are_the_bin_by_bin_averages(
    steps: list[tuple[float, float, int]], t_end: float
) -> None:
    model, bounds, step = PowerModel.named(), RegionBounds(), 7.0
    host = HostTime(SPEC, model, 0.0)
    t = 0.0
    for dt, util, tasks in steps:
        if t + dt > t_end:
            break
        t += dt
        advance(host, t, bounds, 0.0, step)
        host.cpu, host.mem, host.mem_bytes, host.tasks = util, util / 2, util * 1e9, tasks
        host.power = model.power_w_unchecked(host.cpu, host.mem_bytes)
    n_bins = math.ceil(t_end / step - 1e-9)
    series = host_series({"h": host}, 0.0, step, t_end)
    assert [series.values[name][0] for name in SERIES_COLUMNS] == _host_series_by_bin(host,
                                                                                     n_bins)


def test_recorded_energy_is_the_meter_s_own() -> None:
    """The recorder computes each state's watts once for its series and its energy meter; a
    meter fed the same states computes them itself."""
    hosts = [SPEC, HostSpec("g", 4096, 6 << 30)]
    recorder = MetricsRecorder("p", hosts)
    meter = EnergyMeter(["h", "g"])
    states = [(0.0, "h", 0.5, 2, 3e9), (7.5, "g", 1.0, 0, 0.0), (7.5, "h", 0.75, 1, 6e9),
              (30.0, "h", 0.75, 1, 6e9), (31.0, "g", 0.25, 3, 1e9), (90.0, "h", 0.0, 0, 0.0)]
    for t, host, cpu, count, used in states:
        recorder.on_host_state_unchecked(t, host, cpu, 0.5, count, used, 0, 0)
        meter.update(t, host, cpu, used, count == 0)
    report = meter.finish(100.0)
    result = recorder.finish(100.0)
    for summary in result.hosts:
        energy = report.host(summary.host_id)
        assert (summary.energy_kwh, summary.energy_kwh_switch_off) == (
            energy.energy_kwh, energy.energy_kwh_switch_off)


def _contribution_by_cut_target(task: Task, classes: ClassTable) -> tuple[int, ...]:
    """``contribution`` as it was, one ``cut_target`` per stricter class."""
    values = [0] * TALLY_SIZE
    index = task.cls - 1
    values[COUNT + index] = 1
    values[CPU + index] = task.cpu_shares
    values[MEM + index] = task.memory
    if task.cls == 4 and task.type == "service":
        values[SVC4_CPU] = task.cpu_shares
        values[SVC4_MEM] = task.memory
    for new_class in (1, 2, 3):
        target = cut_target(task, new_class, classes)
        if target is not None:
            values[CUT_CPU + new_class - 1] = task.cpu_shares - target[1]
            values[CUT_MEM + new_class - 1] = task.memory - target[2]
    return tuple(values)


@given(st.sampled_from(TABLES), st.sampled_from(CLASSES), st.sampled_from(list(TaskType)),
       st.integers(2, 4096), st.integers(1, 1 << 33),
       st.fractions(min_value=0, max_value=1, max_denominator=40),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_contribution_is_the_cut_targets(
    table: ClassTable, cls: int, task_type: TaskType, original_cpu: int, original_memory: int,
    received: F, cpu_part: float, memory_part: float
) -> None:
    cpu = max(2, round(original_cpu * cpu_part))
    memory = max(1, round(original_memory * memory_part))
    task = Task("t", "h", cls, task_type, cpu, memory, original_cpu, original_memory, received)
    assert contribution(task, table) == _contribution_by_cut_target(task, table)


@given(st.floats(0.0, 30.0), st.sampled_from([3.0, 0.7, 30.0]), st.floats(-50.0, 50.0),
       st.lists(st.tuples(st.floats(0.0, 20.0), st.floats(0.0, 1.0)), max_size=30))
def test_window_samples_are_the_instants_between_changes(
    phase: float, interval: float, start: float, changes: list[tuple[float, float]]
) -> None:
    """The accumulator keeps the instant count of its last change instead of working it out
    again: the same counts as instants_between over each stretch."""
    acc = WindowAccumulator(phase, interval, start)
    t, memory, samples, memory_sum = start, 0.0, 0, 0.0
    for dt, value in changes:
        n = instants_between(t, t + dt, phase, interval) if dt > 0 else 0
        samples += n
        if n:
            memory_sum += memory * n
        t += dt
        acc.set(t, value, value)
        memory = value
        assert (acc.samples, acc.memory_sum) == (samples, memory_sum)


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 90.0), st.floats(0.0, 1.0), st.integers(0, 3)),
                max_size=20),
       st.integers(0, 80))
def test_bins_made_at_once_give_the_same_series(
    steps: list[tuple[float, float, int]], made: int
) -> None:
    model, bounds, step, t_end = PowerModel.named(), RegionBounds(), 7.0, 400.0
    grown, ready = HostTime(SPEC, model, 0.0), HostTime(SPEC, model, 0.0, made)
    t = 0.0
    for dt, util, tasks in steps:
        t = min(t_end, t + dt)
        for host in (grown, ready):
            advance(host, t, bounds, 0.0, step)
            host.cpu, host.mem, host.mem_bytes, host.tasks = util, util / 2, util * 1e9, tasks
            host.power = model.power_w_unchecked(host.cpu, host.mem_bytes)
    assert host_series({"h": ready}, 0.0, step, t_end) == host_series({"h": grown}, 0.0, step,
                                                                        t_end)
