"""Fit checks (DESIGN 3.3) and a host's room for a pass, on a host's view."""

from __future__ import annotations

from domain.model import HostView
from domain.rooms import ROOM_INDEX, RoomKey


def fits(host: HostView, cpu: int, memory: int, new_class: int) -> bool:
    """DESIGN 3.3: one task never exceeds the machine, and the host stays within M(new_class)."""
    return (
        cpu <= host.cpu_capacity
        and memory <= host.memory_capacity
        and host.cpu_allocated + cpu <= host.cpu_limits[new_class - 1]
        and host.memory_allocated + memory <= host.memory_limits[new_class - 1]
    )


def room(host: HostView, key: RoomKey) -> tuple[int, int]:
    """The room of ``host`` for the pass named by ``key`` (computed with the view)."""
    return host.rooms[ROOM_INDEX[key]]
