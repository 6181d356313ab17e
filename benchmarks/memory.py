"""Peak memory for the benchmarks' reports (DESIGN 8 asks it of every speed number)."""

from __future__ import annotations

import resource
import sys
from pathlib import Path


def peak_mib() -> float:
    """This process's peak resident set since it started its program, in MiB.

    On Linux, ``VmHWM`` of /proc/self/status: ``ru_maxrss`` would be no lower than the
    parent's resident set when it spawned this process (the kernel carries the old memory's
    high-water mark over ``exec``), so a small run started by a big process would report the
    big one. Elsewhere, ``ru_maxrss`` (KiB on Linux, bytes on macOS)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / (2**20 if sys.platform == "darwin" else 1024)
