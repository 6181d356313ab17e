"""When the registry's view of the hosts has settled (the lab tests' ``Stack.wait_quiet``).

A monitor sends its host's values again every ``resend_s``, moved or not (DESIGN 9), and an
idle host's values are never exactly the same twice: 0.0072 then 0.0079. A view is settled once
nothing has *moved* for a while, where a move is what a task starting or ending does: a host
comes or goes, its region or task count changes, or a utilization moves by the tolerance or
more, as the monitor judges a move, against the view when the quiet began (so a slow drift
adds up and counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from monitor.core import moved as moved_by

# An idle lab node's values move by well under a point between windows; a task starting or
# ending moves them by several, and the monitor sends a move of 10 points at once.
TOLERANCE_PP = 2.0


@dataclass(frozen=True, slots=True)
class HostView:
    """A host as ``GET /hosts`` shows it, reduced to what settles."""

    cpu_util: float
    memory_util: float
    region: str
    task_count: int


def view(hosts: Iterable[Mapping[str, Any]]) -> dict[str, HostView]:
    return {h["id"]: HostView(h["cpu_util"], h["memory_util"], h["region"], h["task_count"])
            for h in hosts}


def moved(reference: Mapping[str, HostView] | None, seen: Mapping[str, HostView],
          tolerance_pp: float = TOLERANCE_PP) -> bool:
    """Whether ``seen`` moved from ``reference`` (None: nothing seen yet, so it did); a
    utilization moves as the monitor judges it (monitor.core.moved), by ``tolerance_pp``."""
    if reference is None or reference.keys() != seen.keys():
        return True
    for host_id, now in seen.items():
        before = reference[host_id]
        if (now.region != before.region or now.task_count != before.task_count
                or moved_by(now.cpu_util, before.cpu_util, tolerance_pp)
                or moved_by(now.memory_util, before.memory_util, tolerance_pp)):
            return True
    return False
