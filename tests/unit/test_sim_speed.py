"""The speed benchmark's pace: marks every N simulated seconds, and the recent pace."""

from __future__ import annotations

from benchmarks.sim_speed import Pace


class StepClock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_marks_and_recent_pace_follow_a_slowing_run() -> None:
    clock = StepClock()
    lines: list[str] = []
    pace = Pace(every_s=900.0, clock=clock, report=lines.append)
    # Three simulated hours, a callback every 60 simulated seconds; the first hour costs
    # 1 wall second per simulated minute, the next two 3 and 6.
    for minute in range(1, 181):
        clock.now += 1.0 if minute <= 60 else 3.0 if minute <= 120 else 6.0
        pace(minute * 60.0, 3 * 3600.0)
    assert [sim for sim, _ in pace.marks] == [900.0 * k for k in range(1, 13)]
    assert pace.marks[3] == (3600.0, 60.0)
    assert pace.marks[-1] == (3 * 3600.0, 60.0 + 180.0 + 360.0)
    assert len(lines) == 12
    assert lines[0].endswith("the last 0.25 h at 60.0 s per simulated hour")
    assert "360.0 s per simulated hour" in lines[-1]
    # The last hour, not the average (200 s per simulated hour), is the recent pace.
    assert pace.recent_per_hour() == 360.0
    assert pace.recent_per_hour(2 * 3600.0) == (180.0 + 360.0) / 2


def test_the_end_is_marked_once_and_a_short_run_uses_all_of_it() -> None:
    clock = StepClock()
    pace = Pace(every_s=900.0, clock=clock)
    clock.now += 5.0
    pace(600.0, 1200.0)
    assert pace.marks == []
    clock.now += 5.0
    pace(1200.0, 1200.0)
    pace(1200.0, 1200.0)  # the engine's closing call, at the same time
    assert pace.marks == [(1200.0, 10.0)]
    assert pace.recent_per_hour() == 10.0 / 1200.0 * 3600.0
