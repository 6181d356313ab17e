"""A host's rooms (domain.rooms.compute_rooms) against the rules of DESIGN 3.3-3.6, computed
here from the host's tasks one by one (with none of the tally's helpers) instead of from the
tally the view keeps."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.capacity import room
from domain.classes import ClassTable
from domain.model import HostView, Task
from domain.rooms import ROOM_KEYS, RoomKind
from domain.units import MIN_MEMORY_BYTES
from tests.builders import SERVICE, H, T, build, host_tasks, task_strategy


def reference_room(view: HostView, tasks: list[Task], kind: RoomKind, cls: int, job: bool,
                   classes: ClassTable) -> tuple[int, int]:
    """The largest request the pass could place: the limit of the new class, minus what stays
    booked after every allowed cut or kill, capped by the machine."""
    if not tasks:
        return view.cpu_capacity, view.memory_capacity
    host_class = min(task.cls for task in tasks)
    new_class = host_class if kind is RoomKind.SIMPLE else min(host_class, cls)
    cpu_booked = sum(task.cpu_shares for task in tasks)
    memory_booked = sum(task.memory for task in tasks)
    if kind is RoomKind.CUT:  # 3.5 step 3: each task of a class above nc loses its allowance
        for task in tasks:
            if task.cls <= new_class:
                continue
            total = classes.tolerance(task.cls) - classes.tolerance(new_class)
            if total <= task.cut_received:
                continue  # it was already cut that far
            # resources after a cut are rounded up, memory never goes below Docker's floor
            # (unless it was below already), and a task never grows back
            cpu_booked -= task.cpu_shares - min(
                task.cpu_shares, math.ceil(task.original_cpu_shares * (1 - total)))
            memory_left = max(math.ceil(task.original_memory * (1 - total)),
                              min(task.original_memory, MIN_MEMORY_BYTES))
            memory_booked -= task.memory - min(task.memory, memory_left)
    elif kind is RoomKind.KILL:
        for task in tasks:
            victim = task.cls > cls or (cls == 4 and job and task.cls == 4
                                        and task.type is SERVICE)
            if victim:
                cpu_booked -= task.cpu_shares
                memory_booked -= task.memory
    factor = classes.max_factor(new_class)
    cpu_limit = int(view.cpu_capacity * factor)
    memory_limit = int(view.memory_capacity * factor)
    return (min(view.cpu_capacity, cpu_limit - cpu_booked),
            min(view.memory_capacity, memory_limit - memory_booked))


@settings(max_examples=300, deadline=None)
@given(tasks=st.lists(task_strategy, max_size=6))
def test_every_room_follows_the_rules_from_the_tasks(tasks: list[T]) -> None:
    classes = ClassTable()
    store = build(H("h", 0.3, host_tasks(tasks, classes)), classes=classes)
    view = store.host("h")
    booked = store.tasks_on("h")
    assert len(view.rooms) == len(ROOM_KEYS)
    for key in ROOM_KEYS:
        expected = reference_room(view, booked, key.kind, key.cls, key.job, classes)
        assert room(view, key) == expected, key
