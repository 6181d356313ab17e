"""Host samplers: the whole machine through psutil, or one cgroup subtree (a lab node that shares
its kernel with others, whose dockerd runs with ``--cgroup-parent=<node cgroup>``).

Each source answers its capacity (reported on registration) and, on every call of ``sample``,
the utilization since the previous call (None on the first call, which only primes counters).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from domain.errors import UnavailableError, ValidationError
from monitor.cgroups import (
    CgroupDirs,
    CgroupVersion,
    detect_version,
    read_cpu_counter,
    read_cpu_quota_us,
    read_memory,
    read_memory_limit_bytes,
)
from monitor.core import (
    SHARES_PER_CORE,
    CpuCounter,
    UtilSample,
    cores_used,
    cpu_util_of_cores,
    memory_limit_or_host,
    memory_used_bytes,
    memory_util,
    quota_cores,
)

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class HostCapacity:
    cpu_shares: int
    memory_bytes: int


class HostSource(Protocol):
    def capacity(self) -> HostCapacity: ...

    def sample(self) -> UtilSample | None: ...


def machine_cpu_count() -> int:
    return psutil.cpu_count(logical=True) or 1


def machine_memory_bytes() -> int:
    return int(psutil.virtual_memory().total)


class PsutilHostSource:
    """The machine as a whole: CPU busy fraction over the interval, memory = (total - available)
    / total."""

    def __init__(self) -> None:
        self._primed = False

    def capacity(self) -> HostCapacity:
        return HostCapacity(machine_cpu_count() * SHARES_PER_CORE, machine_memory_bytes())

    def sample(self) -> UtilSample | None:
        cpu_percent = psutil.cpu_percent(interval=None)
        if not self._primed:
            self._primed = True
            return None
        memory = psutil.virtual_memory()
        used = max(0, int(memory.total) - int(memory.available))
        return UtilSample(cpu_util=cpu_percent / 100.0, memory_util=memory_util(used, memory.total))


class CgroupHostSource:
    """One cgroup subtree as the host: CPU = cpuacct delta / (interval x quota cores), memory =
    (usage - cache) / limit (the machine's memory when unlimited)."""

    def __init__(
        self,
        cgroup_path: str,
        root: Path = Path("/sys/fs/cgroup"),
        clock: Clock = time.monotonic,
        cpu_count: int | None = None,
        host_memory_bytes: int | None = None,
    ) -> None:
        version = detect_version(root)
        if version is CgroupVersion.NONE:
            raise ValidationError("cgroup_root", f"no cgroup hierarchy under {root}")
        self.dirs = CgroupDirs.under(root, version, cgroup_path)
        if not self.dirs.exists():
            raise ValidationError("cgroup", f"no cgroup {cgroup_path!r} under {root} ({version})")
        self._clock = clock
        self._cpu_count = cpu_count if cpu_count is not None else machine_cpu_count()
        self._host_memory_bytes = (
            host_memory_bytes if host_memory_bytes is not None else machine_memory_bytes()
        )
        self._previous: CpuCounter | None = None

    def quota_cores(self) -> float:
        quota_us, period_us = read_cpu_quota_us(self.dirs)
        return quota_cores(quota_us, period_us, self._cpu_count)

    def memory_limit_bytes(self) -> int:
        return memory_limit_or_host(read_memory_limit_bytes(self.dirs), self._host_memory_bytes)

    def capacity(self) -> HostCapacity:
        try:
            cores = self.quota_cores()
            memory = self.memory_limit_bytes()
        except (OSError, ValueError) as exc:
            raise UnavailableError(f"cannot read cgroup {self.dirs.cpu}: {exc}") from exc
        return HostCapacity(round(cores * SHARES_PER_CORE), memory)

    def sample(self) -> UtilSample | None:
        try:
            current = read_cpu_counter(self.dirs, self._clock())
            reading = read_memory(self.dirs)
            cores_allowed = self.quota_cores()
            limit = self.memory_limit_bytes()
        except (OSError, ValueError, KeyError) as exc:
            raise UnavailableError(f"cannot read cgroup {self.dirs.cpuacct}: {exc}") from exc
        previous, self._previous = self._previous, current
        if previous is None:
            return None
        cores = cores_used(previous, current)
        if cores is None:
            return None
        used = memory_used_bytes(reading.usage_bytes, reading.cache_bytes)
        return UtilSample(
            cpu_util=cpu_util_of_cores(cores, cores_allowed),
            memory_util=memory_util(used, limit),
        )
