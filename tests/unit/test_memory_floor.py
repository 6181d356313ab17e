"""Docker's memory floor in the cut pass (DESIGN 3.5): no cut takes a task below 6 MiB (the
daemon refuses such a container: "Minimum memory limit allowed is 6MB"); a cut that would is
limited to it, and one that would free nothing is not taken. The audit's case: a class-4
request of 8 MiB cut by 1/2 got 4 MiB, and Swarm refused its container in a loop."""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.classes import MEMORY_FLOOR, ClassTable, after_cut
from domain.decision import Pass
from domain.units import MIN_MEMORY_BYTES
from host_registry.memory import MemoryStore
from scheduler.policies.energy import EnergyPolicy
from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import SERVICE, H, T, build, req

MIB = 2**20
ENERGY = EnergyPolicy()


def test_the_floor_is_dockers() -> None:
    assert MEMORY_FLOOR == MIN_MEMORY_BYTES == 6 * MIB


def test_a_request_cut_on_a_stricter_host_keeps_the_floor() -> None:
    # the audit's case: class 4 on a class-1 host is cut by 1/2; 8 MiB would become 4 MiB
    store = build(H("h", 0.3, [T("a", 1, cpu=1150, mem=100 * MIB)], mem=1200 * MIB))
    decision = ENERGY.decide(req(4, cpu=100, mem=8 * MIB), store)
    assert (decision.placed, decision.pass_, decision.cut_received) == (True, Pass.CUT, F(1, 2))
    assert decision.cpu_shares == 50
    assert decision.memory == 6 * MIB


def test_a_task_cut_to_make_room_keeps_the_floor() -> None:
    # a class-4 task of 8 MiB gives way to a class-1 request: its CPU is cut by 1/2, its
    # memory only down to 6 MiB
    store = build(H("h", 0.3, [T("t", 4, cpu=1000, mem=8 * MIB, type=SERVICE)],
                    mem=1200 * MIB))
    decision = ENERGY.decide(req(1, cpu=600, mem=10 * MIB), store)
    assert decision.placed and decision.pass_ is Pass.CUT
    assert [(c.task, c.cpu_shares, c.memory, c.memory_freed) for c in decision.cuts] == [
        ("t", 500, 6 * MIB, 2 * MIB)]


def test_a_task_at_the_floor_frees_no_memory_and_may_not_be_needed() -> None:
    # a 6 MiB task frees CPU only; where memory is what is short, cutting it is no help
    store = build(H("h", 0.3, [T("t", 4, cpu=100, mem=6 * MIB)], cpu=1200, mem=10 * MIB))
    decision = ENERGY.decide(req(1, cpu=100, mem=6 * MIB), store)
    assert not decision.placed or all(c.memory >= 6 * MIB for c in decision.cuts)
    assert not decision.placed  # 6 + 6 > 10 MiB, and the task's memory cannot shrink


def test_after_cut_is_limited_by_the_floor_never_raised_above_the_original() -> None:
    assert after_cut(8 * MIB, F(1, 2), MEMORY_FLOOR) == 6 * MIB
    assert after_cut(24 * MIB, F(1, 2), MEMORY_FLOOR) == 12 * MIB  # far above: unchanged
    assert after_cut(5 * MIB, F(1, 2), MEMORY_FLOOR) == 5 * MIB  # below it already: kept
    assert after_cut(7, F(1, 2)) == 4  # CPU shares and the like: no floor


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(2, 800),
                             st.integers(MIN_MEMORY_BYTES, 40 * MIB)), min_size=1, max_size=25),
    enders=st.lists(st.integers(0, 24), max_size=10),
)
def test_no_decision_nor_restoration_takes_memory_below_the_floor(
    sizes: list[tuple[int, int, int]], enders: list[int]
) -> None:
    """Requests of every class, cut and restored as the scheduler decides, on two small
    hosts: every task keeps at least 6 MiB at every step."""
    store = MemoryStore(ClassTable())
    build(H("a", 0.3, cpu=1200, mem=64 * MIB), H("b", 0.6, cpu=1200, mem=64 * MIB), store=store)
    scheduler = Scheduler(store, make_policy("energy"))
    for index, (cls, cpu, memory) in enumerate(sizes):
        scheduler.submit(req(cls, cpu=cpu, mem=memory, id=f"r{index}"), now=float(index))
        for host in ("a", "b"):
            for task in store.tasks_on(host):
                assert task.memory >= MIN_MEMORY_BYTES, task
    for step, index in enumerate(enders):
        if store.task(f"r{index}") is not None:
            scheduler.task_ended(f"r{index}", now=100.0 + step)
        for host in ("a", "b"):
            for task in store.tasks_on(host):
                assert task.memory >= MIN_MEMORY_BYTES, task
