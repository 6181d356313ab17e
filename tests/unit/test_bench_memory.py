"""The benchmarks' peak memory: a process's own, whatever the size of the one that started it
(CI's pytest process, over 200 MiB, made a 1 MiB child's ``ru_maxrss`` 211 MiB)."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.memory import peak_mib

# pages written, so resident (a zeroed allocation may be mapped lazily)
CHILD = ("from benchmarks.memory import peak_mib; block = b'x' * ({mib} * 2**20); "
         "print(round(peak_mib()))")


def child_peak(mib: int) -> int:
    done = subprocess.run([sys.executable, "-c", CHILD.format(mib=mib)], capture_output=True,
                          text=True, check=True)
    return int(done.stdout)


def test_a_childs_peak_is_its_own_not_its_parents() -> None:
    held = b"x" * (300 * 2**20)  # this process is big when it starts the small one
    assert peak_mib() >= 300
    assert child_peak(1) < 100
    assert child_peak(300) >= 300
    del held
