"""Admission control (DESIGN 3.13): the rule per resource, who it applies to, what a refusal
says, and that an admitted request is never refused later. Hosts of 1200 shares and 1200 bytes
book, by class: 1200, 1400, 1600, 1800 (M = 1, 7/6, 4/3, 3/2); the objectives are the
thesis's: 1, 5/6, 2/3, 1/2."""

from __future__ import annotations

import pytest

from domain.model import Request, TaskType
from domain.slo import SloTable
from scheduler.admission import AdmissionLedger, AdmissionMode, Refusal, Resource
from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import H, build

SLO = SloTable()


def request(request_id: str, cls: int, cpu: int, mem: int = 10) -> Request:
    return Request(request_id, cls, TaskType.SERVICE, cpu, mem)


def ledger(*admitted: Request, hosts: int = 1) -> AdmissionLedger:
    book = AdmissionLedger()
    book.hosts_changed(build(*(H(f"h{i}", 0.3) for i in range(hosts))).all_hosts())
    for item in admitted:
        book.admit(item)
    return book


@pytest.mark.parametrize(("case", "admitted", "newcomer", "refusal"), [
    ("class 1: up to the capacity itself",
     [request("a", 1, 700)], request("n", 1, 500), None),
    ("class 1: one share beyond",
     [request("a", 1, 700)], request("n", 1, 501), (Resource.CPU, 1201, 1200)),
    # class 2: 700 + 5/6 x 840 = 1400 = 7/6 x 1200
    ("class 2: its own and the more important classes, weighted",
     [request("a", 1, 700)], request("n", 2, 840), None),
    ("class 2: beyond its room", [request("a", 1, 700)], request("n", 2, 846),
     (Resource.CPU, 700 + 5 / 6 * 846, 1400)),
    ("less important classes never block a more important one",
     [request("low", 4, 3000)], request("n", 1, 1200), None),
    # class 4: 1200 + 1/2 x 1200 = 1800 = 3/2 x 1200
    ("class 4: halves its own demand", [request("a", 1, 1200)], request("n", 4, 1200), None),
    ("memory is judged too", [request("a", 1, 10, mem=1000)], request("n", 1, 10, mem=201),
     (Resource.MEMORY, 1201, 1200)),
])
def test_the_rule_per_resource(
    case: str, admitted: list[Request], newcomer: Request,
    refusal: tuple[Resource, float, float] | None,
) -> None:
    got = ledger(*admitted).check(newcomer, SLO)
    if refusal is None:
        assert got is None, case
    else:
        assert got is not None, case
        assert (got.resource, got.demand, got.room) == pytest.approx(refusal), case


def test_the_room_is_every_hosts_and_a_request_leaves_it_when_it_ends() -> None:
    book = ledger(request("a", 1, 1200), hosts=2)
    assert book.check(request("n", 1, 1200), SLO) is None  # 2400 booked for class 1
    book.admit(request("n", 1, 1200))
    assert book.check(request("m", 1, 2), SLO) is not None
    book.release("a")
    assert book.check(request("m", 1, 1200), SLO) is None
    assert book.demand_by_class()[1] == (1200, 10)


def test_a_refusal_names_class_resource_and_demand_against_the_room() -> None:
    refusal = Refusal("n", 3, Resource.CPU, 1792.0, 1600.0)
    assert refusal.reason == "admission: class-3 CPU demand 1.12 x the bookable room"
    assert refusal.to_dict() == {"class": 3, "resource": "cpu", "demand": 1792.0,
                                 "room": 1600.0, "ratio": 1.12}


def test_retry_after_is_the_earliest_expected_end_of_a_class_at_least_as_low() -> None:
    book = ledger()
    book.admit(request("gold", 1, 100), expected_end_s=110.0)  # more important: not waited for
    book.admit(request("bronze", 4, 100), expected_end_s=160.0)
    book.admit(request("silver", 3, 100), expected_end_s=130.0)
    assert book.retry_after_s(2, 100.0, fallback_s=10.0) == 30.0
    assert book.retry_after_s(4, 100.0, fallback_s=10.0) == 60.0
    assert book.retry_after_s(4, 158.0, fallback_s=10.0) == 5.0  # at least 5 s
    assert ledger().retry_after_s(1, 0.0, fallback_s=12.0) == 12.0  # none known


def scheduler(policy: str = "qos", admission: AdmissionMode = AdmissionMode.SLO) -> Scheduler:
    store = build(H("h", 0.3, []))
    return Scheduler(store, make_policy(policy), admission=admission,
                     admits_to_queue=policy == "qos")


def test_qos_refuses_at_the_door_and_does_nothing_else() -> None:
    sched = scheduler()
    for name in ("a", "b"):
        assert not sched.submit(request(name, 1, 600), 0.0).admission
    refused = sched.submit(request("c", 1, 100), 1.0)
    assert refused.admission is not None and refused.admission.cls == 1
    assert (refused.decisions, refused.applied, refused.queued, refused.refused) == (
        [], [], [], [])
    assert sched.store.task("c") is None and not sched.store.is_pending("c")
    # without admission control it waits in the queue (the behaviour on main)
    open_door = scheduler(admission=AdmissionMode.NONE)
    for name in ("a", "b", "c"):
        open_door.submit(request(name, 1, 600 if name != "c" else 100), 0.0)
    assert open_door.store.is_pending("c")


def test_other_policies_admit_only_requests_that_ask_to_queue() -> None:
    sched = scheduler("energy")
    for name in ("a", "b"):
        sched.submit(request(name, 1, 600), 0.0)
    at_once = sched.submit(request("c", 1, 100), 1.0)  # refused at once, as the thesis did
    assert at_once.admission is None and at_once.refused
    queued = sched.submit(request("d", 1, 100), 1.0, queue=True)
    assert queued.admission is not None and not queued.queued


def test_an_admitted_request_waits_and_is_never_refused_later() -> None:
    """Admitted into the queue, a class-4 request waits for room (it is a victim of nothing),
    whatever arrives after it; then runs when room frees."""
    sched = scheduler()
    sched.submit(request("big", 1, 1200), 0.0)
    sched.submit(request("low", 4, 600), 1.0)
    assert sched.store.is_pending("low")
    for number in range(3):  # more important requests refused at the door: low stays
        sched.submit(request(f"g{number}", 1, 600), 2.0 + number)
        assert sched.store.is_pending("low")
    sched.task_ended("big", 10.0)
    assert sched.store.task("low") is not None
