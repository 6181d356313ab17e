"""What the lab tests count as the hosts' view having moved (tests/support/settle.py)."""

from __future__ import annotations

from typing import Any

from tests.support import settle


def hosts(*cpu: float, tasks: int = 0, region: str = "LEE") -> list[dict[str, Any]]:
    return [{"id": f"h{i}", "cpu_util": c, "memory_util": 0.08, "region": region,
             "task_count": tasks} for i, c in enumerate(cpu)]


def test_a_re_send_of_an_idle_hosts_values_is_not_a_move() -> None:
    # Logged on the lab (test_load_aware_lab, monitors re-sending every 9 s): an idle host's
    # value went from 0.0081 to 0.007 at its re-send, another's from 0.0087 to 0.0051.
    before = settle.view(hosts(0.0081, 0.0087, 0.0072))
    assert not settle.moved(before, settle.view(hosts(0.007, 0.0051, 0.0079)))


def test_a_task_ending_is_a_move() -> None:
    busy = settle.view(hosts(0.9976, 0.0087, 0.0072, tasks=1, region="EED"))
    assert settle.moved(busy, settle.view(hosts(0.5293, 0.0087, 0.0072, tasks=1, region="DEE")))
    assert settle.moved(busy, settle.view(hosts(0.9976, 0.0087, 0.0072, tasks=0, region="EED")))
    assert settle.moved(settle.view(hosts(0.10, 0.0)), settle.view(hosts(0.0081, 0.0)))


def test_a_drift_adds_up_against_where_the_quiet_began() -> None:
    reference = settle.view(hosts(0.10))
    assert not settle.moved(reference, settle.view(hosts(0.115)))
    assert settle.moved(reference, settle.view(hosts(0.125)))


def test_a_host_that_comes_or_goes_is_a_move_and_the_first_view_too() -> None:
    three = settle.view(hosts(0.0, 0.0, 0.0))
    assert settle.moved(three, settle.view(hosts(0.0, 0.0)))
    assert settle.moved(None, three)
    assert not settle.moved(three, settle.view(hosts(0.0, 0.0, 0.0)))
