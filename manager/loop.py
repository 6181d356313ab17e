"""One scheduling loop: every decision and every change to the books runs on one thread.

REST handlers ``call`` work and wait for its result; timers and events ``post`` work and move
on. Serialising here is what guarantees that two requests can never double-book a host.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from domain.errors import UnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")
_STOP = object()


class SchedulingLoop:
    def __init__(self, name: str = "scheduling-loop", max_backlog: int = 10_000) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_backlog)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._started:
            self._queue.put(_STOP)
            self._thread.join(timeout=timeout_s)

    def call(self, work: Callable[[], T], timeout_s: float = 60.0) -> T:
        """Run ``work`` on the loop and return its result (or raise its exception)."""
        if threading.current_thread() is self._thread:
            return work()  # already on the loop
        future: Future[T] = Future()
        try:
            self._queue.put((work, future), timeout=timeout_s)
        except queue.Full:
            raise UnavailableError("the scheduler is overloaded; try again later") from None
        try:
            return future.result(timeout=timeout_s)
        except TimeoutError:
            raise UnavailableError(f"the scheduler did not answer within {timeout_s} s") from None

    def post(self, work: Callable[[], object]) -> None:
        """Queue ``work`` without waiting; failures are logged."""
        try:
            self._queue.put_nowait((work, None))
        except queue.Full:
            log.warning("scheduling loop backlog full; dropped %s", work)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            work, future = item
            if future is not None and not future.set_running_or_notify_cancel():
                continue
            try:
                result = work()
            except BaseException as exc:  # handed to the caller, or logged
                if future is not None:
                    future.set_exception(exc)
                else:
                    log.exception("background work failed")
            else:
                if future is not None:
                    future.set_result(result)
