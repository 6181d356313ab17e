"""Reading cgroup files: the layout (v1 per-controller mounts, or the v2 unified tree), CPU time,
memory use and limits, CPU quotas.

The readers raise ``OSError`` (a cgroup that vanished gives ENOENT or ENODEV) and ``ValueError``
(a file that does not parse); the samplers decide what that means.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

from monitor.core import CpuCounter

DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v1 writes "no limit" as LONG_MAX rounded down to a page; anything this big is unlimited.
_V1_UNLIMITED_BYTES = 1 << 62


class CgroupVersion(StrEnum):
    V1 = "v1"
    V2 = "v2"
    NONE = "none"


def detect_version(root: Path) -> CgroupVersion:
    """v2 when ``root`` is a unified hierarchy with controllers; v1 when it holds per-controller
    mounts (also the "hybrid" layout, whose v2 tree at root/unified has no controllers)."""
    if (root / "cgroup.controllers").is_file():
        return CgroupVersion.V2
    if any((root / name).is_dir() for name in ("cpuacct", "memory", "cpu,cpuacct")):
        return CgroupVersion.V1
    return CgroupVersion.NONE


def _v1_mount(root: Path, controller: str) -> Path:
    """The v1 mount of ``controller``: ``root/<controller>``, or a co-mount such as
    ``root/cpu,cpuacct`` where no per-controller symlink exists."""
    plain = root / controller
    if plain.is_dir() or controller not in ("cpu", "cpuacct"):
        return plain
    for joined in ("cpu,cpuacct", "cpuacct,cpu"):
        if (root / joined).is_dir():
            return root / joined
    return plain


def _relative(path: str) -> PurePosixPath:
    relative = PurePosixPath("/", path).relative_to("/")
    if ".." in relative.parts:
        raise ValueError(f"cgroup path {path!r} must not contain '..'")
    return relative


@dataclass(frozen=True)
class CgroupDirs:
    """The directories of one cgroup: under each v1 controller, or the one v2 directory."""

    version: CgroupVersion
    cpu: Path
    cpuacct: Path
    memory: Path

    @classmethod
    def under(cls, root: Path, version: CgroupVersion, path: str) -> CgroupDirs:
        """The cgroup at ``path`` (relative to each hierarchy's root, e.g. "docker/<id>")."""
        relative = _relative(path)
        if version is CgroupVersion.V2:
            directory = root / relative
            return cls(version, directory, directory, directory)
        return cls(
            version,
            _v1_mount(root, "cpu") / relative,
            _v1_mount(root, "cpuacct") / relative,
            _v1_mount(root, "memory") / relative,
        )

    def exists(self) -> bool:
        if self.version is CgroupVersion.V2:
            return (self.cpu / "cpu.stat").is_file() or (self.memory / "memory.current").is_file()
        return (self.cpuacct / "cpuacct.usage").is_file() and (
            self.memory / "memory.usage_in_bytes"
        ).is_file()


def _read_text(path: Path) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


def _read_int(path: Path) -> int:
    return int(_read_text(path).strip())


def _read_flat_keyed(path: Path) -> dict[str, int]:
    """A "key value" per line file (memory.stat, cpu.stat)."""
    values: dict[str, int] = {}
    for line in _read_text(path).splitlines():
        key, _, value = line.partition(" ")
        if value:
            try:
                values[key] = int(value)
            except ValueError:
                continue
    return values


def read_cpu_counter(dirs: CgroupDirs, at_s: float) -> CpuCounter:
    """Cumulative CPU time of the cgroup and its descendants."""
    if dirs.version is CgroupVersion.V2:
        usage_us = _read_flat_keyed(dirs.cpu / "cpu.stat")["usage_usec"]
        return CpuCounter(usage_ns=usage_us * 1000, at_s=at_s)
    return CpuCounter(usage_ns=_read_int(dirs.cpuacct / "cpuacct.usage"), at_s=at_s)


@dataclass(frozen=True)
class MemoryReading:
    usage_bytes: int
    cache_bytes: int


def read_memory(dirs: CgroupDirs) -> MemoryReading:
    """Memory charged to the cgroup (and descendants) and how much of it is page cache."""
    if dirs.version is CgroupVersion.V2:
        usage = _read_int(dirs.memory / "memory.current")
        stat = _read_flat_keyed(dirs.memory / "memory.stat")
        return MemoryReading(usage, stat.get("file", 0))
    usage = _read_int(dirs.memory / "memory.usage_in_bytes")
    stat = _read_flat_keyed(dirs.memory / "memory.stat")
    return MemoryReading(usage, stat.get("total_cache", stat.get("cache", 0)))


def read_memory_limit_bytes(dirs: CgroupDirs) -> int | None:
    """The cgroup's own memory limit; None when unlimited."""
    if dirs.version is CgroupVersion.V2:
        text = _read_text(dirs.memory / "memory.max").strip()
        return None if text == "max" else int(text)
    limit = _read_int(dirs.memory / "memory.limit_in_bytes")
    return None if limit >= _V1_UNLIMITED_BYTES else limit


def read_cpu_quota_us(dirs: CgroupDirs) -> tuple[int | None, int | None]:
    """(quota, period) in microseconds of the cgroup's CFS bandwidth; quota None when unlimited."""
    if dirs.version is CgroupVersion.V2:
        quota_text, _, period_text = _read_text(dirs.cpu / "cpu.max").strip().partition(" ")
        period = int(period_text) if period_text else 100_000
        return (None if quota_text == "max" else int(quota_text)), period
    quota = _read_int(dirs.cpu / "cpu.cfs_quota_us")
    period = _read_int(dirs.cpu / "cpu.cfs_period_us")
    return (None if quota < 0 else quota), period


def paths_from_proc_cgroup(text: str) -> dict[str, str]:
    """Controller -> cgroup path from a ``/proc/<pid>/cgroup`` file; the v2 entry is keyed ""."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            paths[""] = path
            continue
        for controller in controllers.split(","):
            paths[controller] = path
    return paths


def dirs_from_proc_cgroup(text: str, root: Path, version: CgroupVersion) -> CgroupDirs | None:
    """The cgroup directories of a process from its ``/proc/<pid>/cgroup`` text."""
    paths = paths_from_proc_cgroup(text)
    if version is CgroupVersion.V2:
        path = paths.get("")
        return None if path is None else CgroupDirs.under(root, version, path)
    if version is CgroupVersion.V1:
        cpu, cpuacct, memory = paths.get("cpu"), paths.get("cpuacct"), paths.get("memory")
        if cpu is None or cpuacct is None or memory is None:
            return None
        return CgroupDirs(
            version,
            _v1_mount(root, "cpu") / _relative(cpu),
            _v1_mount(root, "cpuacct") / _relative(cpuacct),
            _v1_mount(root, "memory") / _relative(memory),
        )
    return None
