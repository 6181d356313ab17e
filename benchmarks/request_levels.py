"""What keeping every request's service level costs (``requests.jsonl``, DESIGN 3.10): the
simulator keeps one per request until the run ends, about ten million for a day on 1,000 hosts.

``--requests`` requests are admitted, placed and ended through the recorder's book
(measure/task_levels.py, compiled when the core is), with ids as the thesis workload names
them. It prints, per request kept: the bytes held once the book has handed its levels over
(the ids included: nothing else holds them then), the bytes of the levels pickled (how a policy
run's process hands them to the parent), and the time per request through the book.

    python -m benchmarks.request_levels --requests 1000000
"""

from __future__ import annotations

# ruff: noqa: E402 (an entry point: the compiled core is enabled before the imports below)
from native import loader

loader.enable()

import argparse
import gc
import pickle
import time
import tracemalloc

from benchmarks.memory import peak_mib
from domain.model import TaskType
from domain.slo import SloTable
from measure.service_levels import RequestStatus
from measure.task_levels import LevelBook, TaskRecord

ENDS = (RequestStatus.FINISHED, RequestStatus.STOPPED, RequestStatus.REFUSED,
        RequestStatus.FINISHED, RequestStatus.LOST)


def run(count: int, *, traced: bool) -> tuple[object, float]:
    """The levels of ``count`` requests, and the seconds per request through the book."""
    tasks: dict[str, TaskRecord] = {}
    book = LevelBook(tasks, SloTable(), 30.0, True, 0.0)
    started = time.perf_counter()
    for i in range(count):
        task = TaskRecord(1 + i % 4, TaskType.JOB if i % 3 else TaskType.SERVICE)
        t = i * 0.01
        book.admit(task, t)
        book.placed(task, t)
        book.over(f"thesis-1-{i:09d}", task, t + 5.0 + i % 7, ENDS[i % len(ENDS)])
    levels = book.levels()
    elapsed = time.perf_counter() - started
    del book
    if traced:
        gc.collect()
    return levels, elapsed / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    count = args.requests
    _, per_request_s = run(count, traced=False)
    tracemalloc.start()
    levels, _ = run(count, traced=True)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    pickled = len(pickle.dumps(levels, protocol=pickle.HIGHEST_PROTOCOL))
    print(f"requests kept: {count:,} ({type(levels).__name__}; core: {loader.core()})")
    print(f"held after the book: {held / count:7.1f} B per request "
          f"({held / 2**20:,.1f} MiB; x 10 M = {held / count * 1e7 / 2**30:.2f} GiB)")
    print(f"pickled:             {pickled / count:7.1f} B per request "
          f"({pickled / 2**20:,.1f} MiB)")
    print(f"through the book:    {per_request_s * 1e6:7.2f} us per request (untraced)")
    print(f"peak resident set:   {peak_mib():,.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
