"""Per-record isolation (manager/faults.py) and what becomes of nodes that are Down, gone or
back under a new id (manager/nodes.py): pure, with a clock the test moves."""

from __future__ import annotations

import logging

import pytest

from domain.errors import NotFoundError, UnavailableError
from manager.faults import LOG_PER_PASS, RecordFaults
from manager.nodes import NodeSeen, NodeWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _boom(error: Exception) -> None:
    raise error


def test_a_failing_record_is_skipped_counted_every_time_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, counted = Clock(), []
    faults = RecordFaults(clock, lambda: counted.append(1))
    done = []
    caplog.set_level(logging.INFO, logger="manager.faults")
    for _ in range(3):
        faults.begin_pass()
        for record in ("a", "bad", "c"):
            ok = faults.attempt("task", record, lambda r=record: _boom(  # type: ignore[misc]
                NotFoundError(f"no request {r!r}")) if r == "bad" else done.append(r))
            assert ok is (record != "bad")
        faults.end_pass()
        clock.now += 5
    assert done == ["a", "c"] * 3  # the others went on, every pass
    assert len(counted) == faults.errors_total == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "task bad" in warnings[0].getMessage()
    [fault] = faults.failing()
    assert (fault.kind, fault.id, fault.error, fault.since) == ("task", "bad",
                                                               "no request 'bad'", 1000.0)
    assert fault.to_json() == {"id": "bad", "kind": "task", "error": "no request 'bad'",
                               "since": 1000.0}
    # it works again: no longer listed, and said so
    faults.begin_pass()
    assert faults.attempt("task", "bad", lambda: None)
    faults.end_pass()
    assert faults.failing() == []
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_any_exception_is_one_records_failure_and_a_new_error_is_logged_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    faults = RecordFaults(Clock())
    with caplog.at_level(logging.WARNING, logger="manager.faults"):
        assert not faults.attempt("service", "s", lambda: _boom(KeyError("spec")))
        assert not faults.attempt("service", "s", lambda: _boom(KeyError("spec")))
        assert not faults.attempt("service", "s", lambda: _boom(UnavailableError("engine")))
    assert len(caplog.records) == 2
    assert caplog.records[0].exc_info is not None  # not one of ours: with its traceback
    assert not caplog.records[1].exc_info
    assert faults.failing()[0].error == "engine"


def test_a_record_of_a_pass_goes_when_a_pass_does_not_fail_it_others_after_the_window() -> None:
    clock = Clock()
    faults = RecordFaults(clock, window_s=20.0)
    faults.begin_pass()
    faults.fail("task", "removed", "no record")
    faults.end_pass()
    faults.fail("request", "retried", "no record")  # a queue retry, between passes
    clock.now += 5
    faults.begin_pass()
    faults.end_pass()  # "removed" was not met in this pass: mended or gone
    assert [f.id for f in faults.failing()] == ["retried"]
    clock.now += 16
    faults.begin_pass()
    faults.end_pass()
    assert faults.failing() == []
    faults.fail("task", "gone", "x")
    faults.forget("gone")
    assert faults.failing() == []


def test_a_pass_logs_at_most_its_share_of_new_failures_one_by_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    faults = RecordFaults(Clock())
    with caplog.at_level(logging.WARNING, logger="manager.faults"):
        faults.begin_pass()
        for index in range(LOG_PER_PASS + 7):
            faults.fail("task", f"t{index}", "down")
        faults.end_pass()
    assert len(caplog.records) == LOG_PER_PASS + 1
    assert "7 more records" in caplog.records[-1].getMessage()
    assert len(faults.failing()) == 20 and faults.errors_total == LOG_PER_PASS + 7


NAMES = {"n1": "h1", "n2": "h2"}


def test_a_down_node_is_lost_after_the_grace_and_retired_once_gone() -> None:
    watch = NodeWatch(grace_s=15.0, gone_s=600.0)
    up = [NodeSeen("n1", "h1", True), NodeSeen("n2", "h2", True)]
    down = [NodeSeen("n1", "h1", False), NodeSeen("n2", "h2", True)]
    hosts = {"n1", "n2"}
    assert watch.lost(0.0, up, hosts, NAMES) == []
    assert watch.lost(10.0, down, hosts, NAMES) == []  # a blink keeps its tasks
    assert watch.retire(10.0, down, hosts, NAMES) == []
    assert [(d.id, d.name, d.since) for d in watch.down_now] == [("n1", "h1", 10.0)]
    assert watch.lost(25.0, down, hosts, NAMES) == [("n1", "is Down")]
    hosts.discard("n1")  # its tasks moved
    assert watch.retire(25.0, down, hosts, NAMES) == []  # still down, listed
    assert watch.retire(610.0, down, hosts, NAMES) == [
        ("n1", "it has been Down for more than 600 s")]
    assert watch.down_now == () and watch.retired == {"n1"}
    assert watch.lost(620.0, down, hosts, NAMES) == []  # retired: not down again
    watch.retire(620.0, down, hosts, NAMES)
    assert watch.down_now == ()
    watch.lost(630.0, up, hosts, NAMES)  # back under its own id
    assert watch.retired == set()


def test_a_removed_node_and_one_back_under_a_new_id_are_retired_at_once() -> None:
    watch = NodeWatch(grace_s=15.0, gone_s=600.0)
    hosts = {"n1", "n2"}
    rejoined = [NodeSeen("n1", "h1", False), NodeSeen("n2", "h2", True),
                NodeSeen("n9", "h1", True)]
    assert watch.lost(0.0, rejoined, hosts, NAMES) == [("n1", "rejoined the Swarm as n9")]
    hosts.discard("n1")
    assert watch.retire(0.0, rejoined, hosts, NAMES) == [
        ("n1", "it rejoined the Swarm as n9")]
    removed = [NodeSeen("n9", "h1", True)]
    assert watch.lost(1.0, removed, hosts, NAMES) == []  # n2 missing: within the grace
    assert watch.retire(1.0, removed, hosts, NAMES) == []  # its tasks have not moved yet
    assert watch.lost(16.0, removed, hosts, NAMES) == [("n2", "left the Swarm")]
    hosts.discard("n2")
    assert watch.retire(16.0, removed, hosts, NAMES) == [("n2", "it was removed from the Swarm")]


def test_a_drained_node_is_lost_at_once_and_is_not_down() -> None:
    watch = NodeWatch(grace_s=15.0, gone_s=600.0)
    drained = [NodeSeen("n1", "h1", True, drained=True), NodeSeen("n2", "h2", True)]
    assert watch.lost(0.0, drained, {"n1", "n2"}, NAMES) == [("n1", "drained")]
    watch.retire(0.0, drained, {"n2"}, NAMES)
    assert watch.down_now == ()


def test_a_node_down_that_was_a_host_is_listed_after_a_restart_one_never_known_is_not() -> None:
    watch = NodeWatch(grace_s=15.0, gone_s=600.0)
    listed = [NodeSeen("n1", "h1", False), NodeSeen("old", "h-old", False)]
    assert watch.lost(0.0, listed, set(), NAMES) == []
    watch.retire(0.0, listed, set(), NAMES)
    assert [d.id for d in watch.down_now] == ["n1"]
