"""The agent's exit book (task_registry/exits.py): Docker's oom and die events in either order
give one report that says "out of memory"; other exits are reported at once."""

from __future__ import annotations

import pytest

from task_registry.exits import SIGKILL_EXIT_CODE, ExitBook, ReportNow, WaitForOom


def test_docker_flag_or_an_earlier_oom_event_report_at_once() -> None:
    book = ExitBook(grace_s=3.0)
    assert book.decide("a", SIGKILL_EXIT_CODE, True, 10.0) == ReportNow(137, True)
    book.oom_seen("b", 10.0)  # oom, then die: Docker's flag may still be false
    assert book.decide("b", SIGKILL_EXIT_CODE, False, 10.1) == ReportNow(137, True)


def test_die_before_oom_waits_for_the_late_notice() -> None:
    """The race of issue 28 item 10: the die (exit 137, State.OOMKilled false) is handled
    before Docker's oom event; reported at once it said nothing of memory."""
    book = ExitBook(grace_s=3.0)
    assert book.decide("c", SIGKILL_EXIT_CODE, False, 20.0) == WaitForOom(3.0)
    assert book.decide("c", SIGKILL_EXIT_CODE, False, 21.0) == WaitForOom(2.0)
    book.oom_seen("c", 21.5)
    assert book.decide("c", SIGKILL_EXIT_CODE, False, 21.5) == ReportNow(137, True)


def test_a_sigkill_without_a_notice_is_reported_after_the_grace() -> None:
    book = ExitBook(grace_s=3.0)
    assert isinstance(book.decide("d", SIGKILL_EXIT_CODE, False, 0.0), WaitForOom)
    assert book.decide("d", SIGKILL_EXIT_CODE, False, 3.0) == ReportNow(137, False)
    book.reported("d")  # forgotten: a new first sighting would wait again
    assert isinstance(book.decide("d", SIGKILL_EXIT_CODE, False, 4.0), WaitForOom)


@pytest.mark.parametrize("exit_code", [0, 1, 2, 143, -1])
def test_other_exits_are_reported_at_once(exit_code: int) -> None:
    assert ExitBook().decide("e", exit_code, False, 0.0) == ReportNow(exit_code, False)


def test_notices_of_containers_never_reported_are_forgotten_after_an_hour() -> None:
    book = ExitBook(grace_s=3.0)
    book.oom_seen("old", 0.0)
    book.oom_seen("new", 4000.0)  # an hour later: "old" goes
    assert book.decide("old", 0, False, 4000.0) == ReportNow(0, False)
    assert book.decide("new", 0, False, 4000.0) == ReportNow(0, True)
    with pytest.raises(ValueError):
        ExitBook(grace_s=-1.0)
