"""lab.processes: waiting for a child to serve notices a child that exited."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from lab.processes import free_port, stop_child, wait_serving


def test_a_child_that_exits_before_answering_is_reported_at_once() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="the server exited with code 3 before answering"):
            wait_serving(process, f"http://127.0.0.1:{free_port()}/", 60.0, "the server")
        assert time.monotonic() - started < 30.0  # it did not wait out the 60 s
    finally:
        stop_child(process)
