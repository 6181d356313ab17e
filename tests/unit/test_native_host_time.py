"""The Rust core's host time accounting (native/rust/src/host_time.rs) against the Python
reference (measure.host_time: HostTime, advance and HostBook.record's steps): two books fed the
same states hold the same integrals, bins, series and energy, to the last bit.

The build comes from the cache the set-up fills (tests/support/rust_core.py); without it these
tests fail, saying how to build it, unless GREENSWARM_NATIVE_RUST=0 turns them off.
"""

from __future__ import annotations

import math
from types import ModuleType

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import measure.host_time
from domain.energy import PowerModel
from domain.model import HostSpec
from domain.regions import RegionBounds
from measure.host_time import HostBook, HostTime, host_series
from tests.support.rust_core import load_rust, skipped

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

SPECS = (HostSpec("h1", 8192, 12 << 30), HostSpec("h2", 4096, 6 << 30),
         HostSpec("h3", 2048, 3 << 30))
FIELDS = ("cap_cpu", "cap_mem", "last_t", "cpu", "mem", "mem_bytes", "power", "cpu_alloc",
          "mem_alloc", "tasks", "used", "cpu_s", "mem_s", "cpu_busy_s", "mem_busy_s", "busy_s",
          "empty_s", "cpu_alloc_s", "mem_alloc_s", "of_busy_s", "region_s", "oom", "bins")


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
    monkeypatch.setattr(measure.host_time, "NativeHostTime", None)
    reference = HostBook(SPECS, models, bounds, t0, step, hint)
    monkeypatch.setattr(measure.host_time, "NativeHostTime", native.HostTime)
    rust = HostBook(SPECS, models, bounds, t0, step, hint)
    assert all(type(h) is HostTime for h in reference.hosts.values())
    assert all(type(h) is native.HostTime for h in rust.hosts.values())
    return reference, rust


def same(reference: HostBook, rust: HostBook) -> None:
    for host_id, expected in reference.hosts.items():
        got = rust.hosts[host_id]
        for name in FIELDS:
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
)
GRIDS = [(0.0, 60.0, None), (12.5, 7.0, 3600.0), (-3.0, 2.5, 40.0), (0.1, 0.3, 1.0)]


@settings(max_examples=400, deadline=None)
@given(states=st.lists(state, max_size=40), grid=st.sampled_from(GRIDS),
       tail=st.floats(0.0, 500.0))
@example(states=[(0.1 + 0.2, "h1", 0.5, 0.5, None, 1, 4096.0, None, False),
                 (0.3, "h1", 0.9, 0.1, 1e9, 0, None, 3e9, True)],
         grid=(0.1, 0.3, 1.0), tail=0.6)  # float edges of the bins
def test_a_book_accounts_alike_with_both(
    native: ModuleType, states: list[tuple[float, str, float, float, float | None, int,
                                           float | None, float | None, bool]],
    grid: tuple[float, float, float | None], tail: float,
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        t0, step, hint = grid
        reference, rust = books(native, monkeypatch, t0, step, hint)
    t = t0
    for dt, host_id, cpu, mem, in_use, tasks, cpu_alloc, mem_alloc, oom in states:
        t += dt
        for book in (reference, rust):
            host = book.host(host_id)
            mem_bytes = mem * host.cap_mem if in_use is None else in_use
            book.record(t, host_id, host, cpu, mem, mem_bytes, tasks, cpu_alloc, mem_alloc)
            if oom:
                host.oom += 1
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
