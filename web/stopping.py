"""A serving loop ended by SIGTERM as by Ctrl-C: the web edge's waitress server and the lab's
power endpoint (``lab power serve``) both serve in the main thread until told to stop.

Closing the server from the signal handler is not enough: a loop runs on as long as a client
holds a connection open (an agent reporting every 2 s kept a stopping manager up until it was
killed, its leadership unreleased), and ends only if the closed descriptors happen to fail its
next ``select``. So the handler raises :class:`Stopped` into the loop, which ends on it as on
Ctrl-C, and the caller closes the server afterwards. Standard library only.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(KeyboardInterrupt):
    """Raised by the signal handler, in the main thread, into the serving loop. A
    KeyboardInterrupt because the loops pass those on and keep any other exception to
    themselves: waitress's dispatch, and socketserver while it hands a request to its thread
    (it logs the error and serves on)."""


@contextlib.contextmanager
def stopped_by_signals(on_signal: Callable[[int], None] | None = None) -> Iterator[None]:
    """Inside the block, SIGTERM and SIGINT raise :class:`Stopped` (after ``on_signal(signum)``),
    and the block ends quietly on it, whether the loop had started or not. The caller's
    handlers come back on the way out, so a second signal acts as the caller had it. Call it
    from the main thread."""

    def stop(signum: int, frame: FrameType | None) -> None:
        if on_signal is not None:
            on_signal(signum)
        raise Stopped

    previous = {signum: signal.signal(signum, stop) for signum in SIGNALS}
    try:
        yield
    except Stopped:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
