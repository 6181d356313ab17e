"""The Rust core's host time accounting and energy meter (native/rust/src/host_time.rs,
energy.rs) against the Python reference (measure.host_time: HostTime, advance and
HostBook.record's steps; domain.energy._HostMeter): two books fed the same states and power
states hold the same integrals, bins, series, meters and energy, to the last bit.

The build comes from the cache the set-up fills (tests/support/rust_core.py); without it these
tests fail, saying how to build it, unless GREENSWARM_NATIVE_RUST=0 turns them off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import domain.energy
import measure.host_time
from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.model import HostSpec
from domain.power import PowerState
from domain.regions import RegionBounds
from measure.host_time import HostBook, HostTime, host_series
from tests.support.rust_core import load_rust, skipped

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

SPECS = (HostSpec("h1", 8192, 12 << 30), HostSpec("h2", 4096, 6 << 30),
         HostSpec("h3", 2048, 3 << 30))
FIELDS = ("cap_cpu", "cap_mem", "last_t", "cpu", "mem", "mem_bytes", "power", "cpu_alloc",
          "mem_alloc", "tasks", "used", "cpu_s", "mem_s", "cpu_busy_s", "mem_busy_s", "busy_s",
          "empty_s", "cpu_alloc_s", "mem_alloc_s", "of_busy_s", "region_s", "oom", "bins")
METER_FIELDS = ("last_t", "cpu_util", "memory", "watts", "empty", "joules", "joules_off",
                "empty_s", "state", "state_w", "drawn", "not_on_s")


@pytest.fixture(scope="module")
def native() -> ModuleType:
    return load_rust()


class Measured(PowerModel):
    """A model of its own (the Rust class asks it rather than computing a PowerModel's)."""

    def power_w_unchecked(self, cpu_util: float, memory_in_use_bytes: float) -> float:
        return 50.0 + cpu_util ** 0.5 * 70.0 + memory_in_use_bytes * 1e-9


def books(native: ModuleType, monkeypatch: pytest.MonkeyPatch, t0: float, step: float,
          hint: float | None) -> tuple[HostBook, HostBook]:
    """A book of the reference and one of the Rust class, alike: h1 and h2 with tables that
    the Rust class computes itself, h3 with a model it asks."""
    models = {"h1": PowerModel.named(), "h2": PowerModel.named("hp-ml110-g3", 0.3875),
              "h3": Measured(PowerModel.named().table)}
    bounds = RegionBounds(0.4, 0.8)
    monkeypatch.setattr(measure.host_time, "NativeHostTime", native.HostTime)
    monkeypatch.setattr(domain.energy, "NativeHostMeter", native.HostMeter)
    reference = HostBook(SPECS, models, bounds, t0, step, hint, reference=True)
    rust = HostBook(SPECS, models, bounds, t0, step, hint)
    assert all(type(h) is HostTime for h in reference.hosts.values())
    assert all(type(h) is native.HostTime for h in rust.hosts.values())
    assert all(type(m) is native.HostMeter for m in rust.energy._hosts.values())
    assert all(type(m) is domain.energy._HostMeter for m in reference.energy._hosts.values())
    return reference, rust


def same(reference: HostBook, rust: HostBook) -> None:
    same_objects(reference.hosts, rust.hosts, FIELDS)
    same_objects(reference.energy._hosts, rust.energy._hosts, METER_FIELDS)
    for host_id in reference.hosts:
        assert rust.energy.power_w(host_id) == reference.energy.power_w(host_id)
        assert rust.energy.drawn_w(host_id) == reference.energy.drawn_w(host_id)


def same_objects(reference: Mapping[str, Any], rust: Mapping[str, Any],
                 fields: tuple[str, ...]) -> None:
    """Each host's object of both kinds alike: the fields equal in value and type, the same
    power model."""
    for host_id, expected in reference.items():
        got = rust[host_id]
        for name in fields:
            value, wanted = getattr(got, name), getattr(expected, name)
            assert value == wanted, (host_id, name, value, wanted)
            assert type(value) is type(wanted), (host_id, name, type(value), type(wanted))
        assert got.model is expected.model


fraction = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))
state = st.tuples(
    st.one_of(st.just(0.0), st.floats(0.0, 30.0), st.floats(0.0, 400.0)),  # time since the last
    st.sampled_from(["h1", "h2", "h3"]), fraction, fraction,
    st.one_of(st.none(), st.floats(0.0, 2e10)),  # memory in use (None: util x capacity)
    st.integers(0, 6),
    st.one_of(st.none(), st.floats(0.0, 20000.0)), st.one_of(st.none(), st.floats(0.0, 3e10)),
    st.booleans(),  # an OOM kill on the host
    st.one_of(st.none(), st.sampled_from(PowerState)),  # the power state from then on
)
GRIDS = [(0.0, 60.0, None), (12.5, 7.0, 3600.0), (-3.0, 2.5, 40.0), (0.1, 0.3, 1.0)]


@settings(max_examples=400, deadline=None)
@given(states=st.lists(state, max_size=40), grid=st.sampled_from(GRIDS),
       tail=st.floats(0.0, 500.0))
@example(states=[(0.1 + 0.2, "h1", 0.5, 0.5, None, 1, 4096.0, None, False, None),
                 (0.3, "h1", 0.9, 0.1, 1e9, 0, None, 3e9, True, PowerState.OFF)],
         grid=(0.1, 0.3, 1.0), tail=0.6)  # float edges of the bins
def test_a_book_accounts_alike_with_both(
    native: ModuleType, states: list[tuple[float, str, float, float, float | None, int,
                                           float | None, float | None, bool,
                                           PowerState | None]],
    grid: tuple[float, float, float | None], tail: float,
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        t0, step, hint = grid
        reference, rust = books(native, monkeypatch, t0, step, hint)
    t = t0
    for dt, host_id, cpu, mem, in_use, tasks, cpu_alloc, mem_alloc, oom, power in states:
        t += dt
        for book in (reference, rust):
            host = book.host(host_id)
            mem_bytes = mem * host.cap_mem if in_use is None else in_use
            book.record(t, host_id, host, cpu, mem, mem_bytes, tasks, cpu_alloc, mem_alloc)
            if oom:
                host.oom += 1
            if power is not None:
                book.energy.set_power_state(t, host_id, power)
        same(reference, rust)
    end = t + tail
    for book in (reference, rust):
        book.close(end)
    same(reference, rust)
    assert host_series(rust.hosts, t0, step, end) == host_series(reference.hosts, t0, step, end)
    assert rust.energy.finish(end) == reference.energy.finish(end)


def test_a_book_grows_its_bins_beyond_those_made_at_once(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference, rust = books(native, monkeypatch, 0.0, 10.0, 30.0)
    assert len(rust.hosts["h1"].bins[0]) == 4  # 30 s of 10 s bins, and one more
    for t, cpu in ((5.0, 0.5), (95.0, 0.9), (1000.5, 0.25)):
        for book in (reference, rust):
            book.record(t, "h1", book.host("h1"), cpu, cpu, cpu * 1e9, 2, 100.0, 1e9)
    for book in (reference, rust):
        book.close(2000.0)
    same(reference, rust)
    assert len(rust.hosts["h1"].bins[0]) == 200
    assert math.isclose(sum(rust.hosts["h1"].bins[-1]), 2000.0)


def test_a_time_before_the_first_bin_is_refused_not_written_elsewhere(
    native: ModuleType,
) -> None:
    host = native.HostTime(4096, 1 << 30, PowerModel.named(), -5.0, 0, 0.5, 0.85, 0.0, 1.0)
    with pytest.raises(ValueError, match="out of range"):
        host.advance(1.0)


def test_a_meter_sums_its_pieces_as_the_reference_past_4096(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many short states: each list of pieces is summed into one when it passes 4,096, with
    Python's fsum, as the reference does (the same float at each summing, so the same end)."""
    reference, rust = books(native, monkeypatch, 0.0, 60.0, 20_000.0)
    t = 0.0
    for i in range(9_000):
        t += 0.1 + (i % 7) * 0.37
        cpu = (i * 37 % 101) / 100
        for book in (reference, rust):
            if i == 3_000:
                book.energy.set_power_state(t, "h2", PowerState.SHUTTING_DOWN)
            book.record(t, "h2", book.host("h2"), cpu, cpu / 2, cpu * 1e9, i % 3, None, None)
    assert len(reference.energy._hosts["h2"].joules) < 4096 < 9_000  # summed at least once
    same(reference, rust)
    assert rust.energy.finish(t + 1) == reference.energy.finish(t + 1)


def test_a_meter_refuses_a_time_before_its_last_as_the_reference(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference, rust = books(native, monkeypatch, 0.0, 60.0, None)
    errors = []
    for book in (reference, rust):
        book.energy.update(12.5, "h1", 0.5, 1e9, False)
        with pytest.raises(ValidationError) as caught:
            book.energy.update(3.0, "h1", 0.5, 1e9, False)
        errors.append((caught.value.field, str(caught.value)))
    assert errors[0] == errors[1] == ("t", "t: 3.0 is before the last state of h1 at 12.5")
    same(reference, rust)
