"""Scheduler.preview and decide_one: the policy's decision for a new request, applied nowhere;
and a preview applied by submit while it stands (issue 29, item 4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from domain.decision import Decision
from scheduler.policies.energy import EnergyOptions
from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import SERVICE, H, T, build, req


def counted(monkeypatch: pytest.MonkeyPatch, scheduler: Scheduler) -> list[str]:
    """The ids of the requests the scheduler's policy decides, from now on, in order (the
    policy itself decides; this only notes each call)."""
    calls: list[str] = []
    policy = scheduler.policy
    # (a policy that decides at a moment, the energy policy, is asked by decide_at)
    name = "decide_at" if hasattr(policy, "decide_at") else "decide"
    decide: Callable[..., Decision] = getattr(type(policy), name)

    def noting(self: Any, request: Any, *args: Any, **kwargs: Any) -> Decision:
        if self is policy:
            calls.append(request.id)
        return decide(self, request, *args, **kwargs)

    monkeypatch.setattr(type(policy), name, noting)  # (policies are frozen dataclasses)
    return calls


def test_the_preview_is_the_decision_submit_takes_with_nothing_applied() -> None:
    store = build(H("a", 0.6, [T("t1", 4, cpu=1200, mem=600)]))
    scheduler = Scheduler(store, make_policy("energy"))
    request = req(1, cpu=900, mem=100)  # only the kill pass places it: t1 must go
    before = (store.host("a"), store.tasks(), store.pending())
    preview = scheduler.preview(request, 0.0).decision
    assert preview.placed and preview.victims == ("t1",) and preview.host == "a"
    assert (store.host("a"), store.tasks(), store.pending()) == before
    outcome = scheduler.submit(request, 0.0)
    assert outcome.applied[0] == preview


def test_a_refusal_previewed_leaves_no_trace_either() -> None:
    store = build(H("a", 0.3, [T("t1", 1, cpu=1200, mem=600)]))
    scheduler = Scheduler(store, make_policy("energy"))
    preview = scheduler.preview(req(1, cpu=100, mem=100), 0.0).decision
    assert not preview.placed
    assert store.pending() == [] and [t.id for t in store.tasks()] == ["t1"]


def test_decide_one_decides_as_a_round_decides_a_new_request() -> None:
    """Under a round policy (qos), decide_one is what submit's round decides for the request
    (Q = 0 at now, the scheduler's allocation time), with nothing applied: at now = 100 the
    full host's class-2 service has run 100 s, 100 / (5/6) - 100 - 1.2 = 18.8 s of slack, so
    it is preempted; at now = 0 it has none and is kept."""
    for now, kills in ((100.0, ("t1",)), (0.0, ())):
        store = build(H("a", 0.9, [T("t1", 2, cpu=1200, mem=1200, type=SERVICE, util=0.9)]))
        scheduler = Scheduler(store, make_policy("qos"), alpha_s=1.2, admits_to_queue=True)
        request = req(2, cpu=1200, mem=1200, type=SERVICE)
        before = (store.host("a"), store.tasks(), store.pending())
        one = scheduler.decide_one(request, now, explain=True)
        assert one.kills == kills and one.explain  # (explain: the policy's notes)
        assert (store.host("a"), store.tasks(), store.pending()) == before
        outcome = scheduler.submit(request, now)
        assert [d.kills for d in outcome.applied] == ([kills] if kills else [])
        assert outcome.decisions[0].placed == one.placed and outcome.decisions[0].host == one.host


def test_a_preview_that_stands_is_applied_without_deciding_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Previewed, then submitted with its preview at the same moment and nothing changed
    between: one decision, the previewed one, applied and listed once in the outcome."""
    store = build(H("a", 0.6, [T("t1", 4, cpu=1200, mem=600)]))
    # (killing, not pausing, its victim: DESIGN 3.14 would pause t1, whose memory fits)
    scheduler = Scheduler(store, make_policy("energy", EnergyOptions(suspend=False)))
    calls = counted(monkeypatch, scheduler)
    request = req(1, cpu=900, mem=100)
    preview = scheduler.preview(request, 5.0)
    outcome = scheduler.submit(request, 5.0, preview=preview)
    assert calls == [request.id, "t1"]  # then its victim's, which finds no other host
    assert outcome.decisions[0] is preview.decision and outcome.applied == [preview.decision]
    assert [t.id for t in outcome.killed] == ["t1"] and store.task(request.id) is not None


def test_a_random_policy_places_where_its_preview_said() -> None:
    """The random policy's one draw is the placement: the preview is not drawn again."""
    for seed in range(20):
        store = build(*(H(f"h{i}") for i in range(8)))
        scheduler = Scheduler(store, make_policy("random", seed=seed))
        request = req(2, cpu=100, mem=100)
        preview = scheduler.preview(request, 0.0)
        outcome = scheduler.submit(request, 0.0, preview=preview)
        assert outcome.applied[0].host == preview.decision.host


@pytest.mark.parametrize("between", ["another placement", "another moment", "a closed host",
                                     "another request"])
def test_a_preview_that_no_longer_stands_is_decided_again(
    monkeypatch: pytest.MonkeyPatch, between: str
) -> None:
    """Anything that may change the decision since the preview (a placement through the
    scheduler, another moment, the hosts it may use) or another request: decided again, as
    if there had been no preview. With a placement between, the preview's host is full."""
    store = build(H("a"), H("b", cpu=600, mem=600))
    scheduler = Scheduler(store, make_policy("binpack"))
    request = req(2, cpu=1000, mem=1000)  # only a can take it
    preview = scheduler.preview(request, 0.0)
    assert preview.decision.host == "a"
    now = 0.0
    if between == "another placement":
        other = req(2, cpu=700, mem=700, id="other")  # only a can take it too
        assert scheduler.submit(other, 0.0).applied[0].host == "a"
    elif between == "another moment":
        now = 1.0
    elif between == "a closed host":
        scheduler.set_closed_hosts(frozenset({"b"}))
    else:
        request = req(2, cpu=1000, mem=900, id="another")
    calls = counted(monkeypatch, scheduler)
    outcome = scheduler.submit(request, now, preview=preview)
    assert calls == [request.id]
    if between == "another placement":
        assert not outcome.decisions[0].placed and outcome.refused
    else:
        assert outcome.applied[0].host == "a" and outcome.applied[0].request == request


def test_a_preview_of_a_memory_store_stands_only_while_its_hosts_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store that logs its changes says when one was made outside the scheduler (a host's
    new utilization): the preview is decided again."""
    store = build(H("a"), H("b"))
    scheduler = Scheduler(store, make_policy("energy"))
    request = req(2, cpu=100, mem=100)
    preview = scheduler.preview(request, 0.0)
    store.update_host_utilization(preview.decision.host or "", 0.5, 0.5)
    calls = counted(monkeypatch, scheduler)
    scheduler.submit(request, 0.0, preview=preview)
    assert calls == [request.id]


def test_a_round_decides_a_waiting_request_whatever_its_preview() -> None:
    """Under a round policy a request that waits is decided by the round (its Q, the
    queue's order), never by a preview taken outside one."""
    store = build(H("a", 0.9, [T("t1", 2, cpu=1200, mem=1200, type=SERVICE, util=0.9)]))
    scheduler = Scheduler(store, make_policy("qos"), alpha_s=1.2, admits_to_queue=True)
    request = req(2, cpu=1200, mem=1200, type=SERVICE)
    preview = scheduler.preview(request, 100.0)
    outcome = scheduler.submit(request, 100.0, preview=preview)
    assert [d.kills for d in outcome.applied] == [("t1",)]
    assert outcome.decisions[0] is not preview.decision
