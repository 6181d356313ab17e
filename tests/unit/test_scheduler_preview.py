"""Scheduler.preview and decide_one: the policy's decision for a new request, applied nowhere."""

from __future__ import annotations

from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import SERVICE, H, T, build, req


def test_the_preview_is_the_decision_submit_takes_with_nothing_applied() -> None:
    store = build(H("a", 0.6, [T("t1", 4, cpu=1200, mem=600)]))
    scheduler = Scheduler(store, make_policy("energy"))
    request = req(1, cpu=900, mem=100)  # only the kill pass places it: t1 must go
    before = (store.host("a"), store.tasks(), store.pending())
    preview = scheduler.preview(request, 0.0)
    assert preview.placed and preview.kills == ("t1",) and preview.host == "a"
    assert (store.host("a"), store.tasks(), store.pending()) == before
    outcome = scheduler.submit(request, 0.0)
    assert outcome.applied[0] == preview


def test_a_refusal_previewed_leaves_no_trace_either() -> None:
    store = build(H("a", 0.3, [T("t1", 1, cpu=1200, mem=600)]))
    scheduler = Scheduler(store, make_policy("energy"))
    preview = scheduler.preview(req(1, cpu=100, mem=100), 0.0)
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
