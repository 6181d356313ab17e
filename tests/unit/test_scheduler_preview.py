"""Scheduler.preview: the policy's decision for a new request, applied nowhere."""

from __future__ import annotations

from scheduler.registry import make_policy
from scheduler.service import Scheduler
from tests.builders import H, T, build, req


def test_the_preview_is_the_decision_submit_takes_with_nothing_applied() -> None:
    store = build(H("a", 0.6, [T("t1", 4, cpu=1200, mem=600)]))
    scheduler = Scheduler(store, make_policy("energy"))
    request = req(1, cpu=900, mem=100)  # only the kill pass places it: t1 must go
    before = (store.host("a"), store.tasks(), store.pending())
    preview = scheduler.preview(request, 0.0)
    assert preview.placed and preview.victims == ("t1",) and preview.host == "a"
    assert (store.host("a"), store.tasks(), store.pending()) == before
    outcome = scheduler.submit(request, 0.0)
    assert outcome.applied[0] == preview


def test_a_refusal_previewed_leaves_no_trace_either() -> None:
    store = build(H("a", 0.3, [T("t1", 1, cpu=1200, mem=600)]))
    scheduler = Scheduler(store, make_policy("energy"))
    preview = scheduler.preview(req(1, cpu=100, mem=100), 0.0)
    assert not preview.placed
    assert store.pending() == [] and [t.id for t in store.tasks()] == ["t1"]
