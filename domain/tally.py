"""Per-host sums over the tasks, kept by every store so each pass judges a host in O(1).

A tally is a tuple of ``TALLY_SIZE`` integers; a store adds a task's contribution
(domain.books.contribution) when the task is placed and subtracts it when the task ends or
before it is changed (cut). This module is the layout alone. Layout:

=========  =====================================================================
 index      meaning
=========  =====================================================================
 0..3       number of tasks of class 1..4
 4..7       current CPU shares of the tasks of class 1..4
 8..11      current memory bytes of the tasks of class 1..4
 12, 13     CPU shares and memory of class-4 services (kill victims for class-4 jobs)
 14..16     CPU shares that cuts could free if the host class became 1, 2, 3
 17..19     memory bytes that cuts could free if the host class became 1, 2, 3
=========  =====================================================================
"""

from __future__ import annotations

TALLY_SIZE = 20
COUNT, CPU, MEM = 0, 4, 8
SVC4_CPU, SVC4_MEM = 12, 13
CUT_CPU, CUT_MEM = 14, 17

TALLY_FIELDS: tuple[str, ...] = (
    *(f"count_{c}" for c in (1, 2, 3, 4)),
    *(f"cpu_{c}" for c in (1, 2, 3, 4)),
    *(f"memory_{c}" for c in (1, 2, 3, 4)),
    "service4_cpu",
    "service4_memory",
    *(f"cut_cpu_{n}" for n in (1, 2, 3)),
    *(f"cut_memory_{n}" for n in (1, 2, 3)),
)

EMPTY_TALLY: tuple[int, ...] = (0,) * TALLY_SIZE


def cpu_allocated(t: tuple[int, ...]) -> int:
    """Current CPU shares booked on the host: the sum over the four classes."""
    return t[CPU] + t[CPU + 1] + t[CPU + 2] + t[CPU + 3]


def memory_allocated(t: tuple[int, ...]) -> int:
    """Current memory bytes booked on the host."""
    return t[MEM] + t[MEM + 1] + t[MEM + 2] + t[MEM + 3]


def task_count(t: tuple[int, ...]) -> int:
    return t[COUNT] + t[COUNT + 1] + t[COUNT + 2] + t[COUNT + 3]


def host_class(t: tuple[int, ...]) -> int | None:
    """The lowest class among the host's tasks; None for an empty host."""
    for cls in (1, 2, 3, 4):
        if t[COUNT + cls - 1]:
            return cls
    return None


def combine(tally: tuple[int, ...], delta: tuple[int, ...], sign: int = 1) -> tuple[int, ...]:
    """``tally`` plus ``sign`` (1 or -1) times ``delta``, term by term (both the same size)."""
    size = len(tally)
    if size != len(delta):
        raise ValueError(f"tallies of {size} and {len(delta)} terms")
    # A task's contribution is zero in most terms: those keep the tally's own int (compiled,
    # only the changed terms make a new int object).
    terms = list(tally)
    for i in range(size):
        change = delta[i]
        if change:
            terms[i] += sign * change
    return tuple(terms)
