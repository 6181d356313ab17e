"""The scheduler's power gate (DESIGN 3.15, scheduler/service.py ``Scheduler.power``): a request
that no host on takes without a kill, but a host not on yet would, waits for that host instead
of killing (or being refused, even with ``queue: false``); the wait counts as pending.

The gate is the real power manager (scheduler/power.py) over the real MemoryStore, joined as the
manager's power control joins them (manager/switching.py), without its backend."""

from __future__ import annotations

from domain.decision import Pass
from domain.energy import PowerModel
from domain.model import Request
from domain.pending import PendingReason
from domain.power import (
    PowerAction,
    PowerBook,
    PowerDecision,
    PowerReason,
    PowerSettings,
    PowerState,
)
from domain.store import ClusterStore
from scheduler.power import PowerHost, PowerManager
from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import JOB, SERVICE, H, T, build, req

MODEL = PowerModel.named("hp-ml110-g4")


class Gate:
    """The power manager as the scheduler's gate: every host's power in a book, the switches
    it started in ``started``."""

    def __init__(self, store: ClusterStore, off: tuple[str, ...] = (),
                 booting: tuple[str, ...] = ()) -> None:
        self.store = store
        self.book = PowerBook([h.id for h in store.all_hosts()], timed=False)
        for host in (*off, *booting):
            self.book.settle(host, PowerState.OFF, 0.0)
        for host in booting:
            self.book.apply(PowerDecision(host, PowerAction.SWITCH_ON, PowerReason.REQUEST,
                                          "an earlier request"), 0.0)
        self.manager = PowerManager(PowerSettings(enabled=True), store.classes, store.bounds)
        self.started: list[PowerDecision] = []
        self.arrivals: list[str] = []
        self.ends: list[tuple[int, int, float]] = []

    def arrived(self, request: Request, now: float) -> None:
        self.arrivals.append(request.id)

    def ended(self, cpu_shares: int, memory: int, now: float) -> None:
        self.ends.append((cpu_shares, memory, now))

    def hold(self, request: Request, now: float) -> str | None:
        hosts = [PowerHost(view, self.book.get(view.id), None, MODEL)
                 for view in self.store.all_hosts()]
        held = self.manager.hold(request, hosts, now)
        if held is None:
            return None
        if held.decision is not None:
            self.book.apply(held.decision, now)
            self.started.append(held.decision)
        return held.host


def scheduler(gate_off: tuple[str, ...] = (), booting: tuple[str, ...] = (),
              with_gate: bool = True) -> tuple[Scheduler, Gate]:
    # "busy" (EED: no new work but by a kill) holds a class-4 service; "spare" (600 shares and
    # bytes) is not on (off or booting) and empty
    store = build(H("busy", 0.9, [T("victim", 4, cpu=1000, mem=600, type=SERVICE)]),
                  H("spare", 0.0, cpu=600, mem=600))
    sched = Scheduler(store, make_policy("energy"))
    gate = Gate(store, gate_off, booting)
    sched.set_closed_hosts(gate.book.closed())
    if with_gate:
        sched.power = gate
    return sched, gate


def test_without_the_gate_a_class_one_request_preempts_the_service() -> None:
    sched, _ = scheduler(("spare",), with_gate=False)
    # (the preemption pass pauses a class-4 service where only CPU is short, DESIGN 3.14)
    outcome = sched.submit(req(1, cpu=500, mem=500, id="big"), now=10.0)
    assert [(d.request.id, d.pass_, d.kills + d.suspends) for d in outcome.applied[:1]] == [
        ("big", Pass.KILL, ("victim",))]


def test_it_waits_for_an_off_host_which_is_switched_on_for_it() -> None:
    sched, gate = scheduler(("spare",))
    outcome = sched.submit(req(1, cpu=500, mem=500, id="big"), now=10.0)
    assert outcome.applied == [] and outcome.killed == []
    assert [e.request.id for e in outcome.queued] == ["big"]
    assert outcome.queued[0].reason is PendingReason.QUEUED
    assert "spare" in outcome.waiting[0].reason
    assert [(d.host, d.action, d.request) for d in gate.started] == [
        ("spare", PowerAction.SWITCH_ON, "big")]
    assert gate.book.state("spare") is PowerState.BOOTING
    assert gate.arrivals == ["big"]
    assert sched.store.task("victim") is not None


def test_it_waits_even_with_queue_false() -> None:
    sched, _ = scheduler(("spare",))
    outcome = sched.submit(req(1, cpu=500, mem=500, id="big"), now=10.0, queue=False)
    assert outcome.refused == [] and [e.request.id for e in outcome.queued] == ["big"]


def test_a_booting_host_is_waited_for_without_a_second_switch() -> None:
    sched, gate = scheduler(booting=("spare",))
    outcome = sched.submit(req(1, cpu=500, mem=500, id="big"), now=10.0)
    assert outcome.killed == [] and [e.request.id for e in outcome.queued] == ["big"]
    assert gate.started == []  # it boots already
    # the queue's retry does not kill for it either while the host boots
    retry = sched.retry_pending(now=20.0)
    assert retry.applied == [] and retry.killed == []
    assert sched.store.is_pending("big")


def test_a_request_no_host_off_would_take_is_decided_as_before() -> None:
    sched, gate = scheduler(("spare",))
    # larger than "spare" could ever take (600 shares): the kill on "busy" stands
    outcome = sched.submit(req(1, cpu=700, mem=500, id="huge"), now=10.0)
    assert gate.started == []
    assert [(d.request.id, d.host, d.kills + d.suspends) for d in outcome.applied[:1]] == [
        ("huge", "busy", ("victim",))]


def test_a_placement_without_a_kill_is_never_held() -> None:
    sched, gate = scheduler(("spare",))
    outcome = sched.submit(req(3, cpu=100, mem=100, id="small"), now=10.0)
    assert [(d.request.id, d.host) for d in outcome.applied] == [("small", "busy")]
    assert gate.started == []


def _job_scheduler(with_gate: bool) -> tuple[Scheduler, Gate]:
    # "busy" is short of CPU only: its class-4 job would be paused (DESIGN 3.14), its memory kept
    store = build(H("busy", 0.9, [T("victim", 4, cpu=1000, mem=100, type=JOB)]),
                  H("spare", 0.0, cpu=600, mem=600))
    sched = Scheduler(store, make_policy("energy"))
    gate = Gate(store, ("spare",))
    sched.set_closed_hosts(gate.book.closed())
    if with_gate:
        sched.power = gate
    return sched, gate


def test_a_request_waits_for_an_off_host_rather_than_pausing_a_job() -> None:
    sched, _ = _job_scheduler(with_gate=False)
    paused = sched.submit(req(1, cpu=500, mem=500, id="big"), now=10.0)
    assert [d.suspends for d in paused.applied[:1]] == [("victim",)]  # the pass without a gate
    sched, gate = _job_scheduler(with_gate=True)
    outcome = sched.submit(req(1, cpu=500, mem=500, id="big"), now=10.0)
    assert outcome.applied == [] and [e.request.id for e in outcome.queued] == ["big"]
    assert [(d.host, d.action) for d in gate.started] == [("spare", PowerAction.SWITCH_ON)]


def test_the_gate_is_told_of_an_end_with_the_tasks_original_resources() -> None:
    """The net spare rule (DESIGN 3.15's spare room, an experiment) frees what ended: the
    scheduler tells its gate of each end, the room the request asked for (not a cut)."""
    sched, gate = scheduler()
    sched.task_ended("victim", 5.0)
    assert gate.ends == [(1000, 600, 5.0)]
