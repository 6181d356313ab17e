"""Node sizes as cgroup limits: each node's engine runs its containers under ``/<lab>/<node>``.

cgroup v1 (also the hybrid layout): ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` and
``memory.limit_in_bytes`` (plus ``memory.memsw.limit_in_bytes`` when swap accounting exists) on
``<mount of the controller>/<lab>/<node>``. cgroup v2: ``cpu.max`` and ``memory.max`` on
``/sys/fs/cgroup/<lab>/<node>`` after enabling the controllers down the tree.

A node's own usage is the sum of its subtree: v1 ``cpuacct.usage`` (ns) and
``memory.usage_in_bytes``; v2 ``cpu.stat`` ``usage_usec`` and ``memory.current``.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError, LabUnavailableError
from lab.mounts import unescape_mount_field
from lab.plan import cfs_quota_us
from monitor.cgroups import CgroupVersion

CFS_PERIOD_US = 100_000
V2_CONTROLLERS = ("cpuset", "cpu", "io", "memory", "pids")
UNLIMITED_V1 = "-1"


@dataclass(frozen=True)
class CgroupLayout:
    """The cgroup hierarchies mounted on this machine.

    ``mounts`` maps a hierarchy key to its mount point: for v1 the comma-joined controllers of
    the mount (``"cpu"``, ``"cpu,cpuacct"``, ``"memory"``, ``"name=systemd"``) and ``"unified"``
    for a cgroup2 mount; for v2 only ``"unified"``.
    """

    version: CgroupVersion
    mounts: dict[str, Path]

    def controller_mount(self, controller: str) -> Path | None:
        if self.version is CgroupVersion.V2:
            return self.mounts.get("unified")
        for key, mount in self.mounts.items():
            if controller in key.split(","):
                return mount
        return None

    def controller_dir(self, controller: str, rel: str) -> Path | None:
        mount = self.controller_mount(controller)
        return None if mount is None else mount / rel.strip("/")

    def all_dirs(self, rel: str) -> list[Path]:
        """``rel`` under every hierarchy (where Docker may have created directories)."""
        return [mount / rel.strip("/") for mount in self.mounts.values()]


@dataclass(frozen=True)
class CgroupUsage:
    cpu_usage_ns: int | None
    memory_bytes: int | None
    cpu_limit_cores: float | None
    memory_limit_bytes: int | None


def parse_layout(mountinfo: str) -> CgroupLayout:
    """The cgroup layout from the text of ``/proc/self/mountinfo`` (pure)."""
    v1: dict[str, Path] = {}
    unified: Path | None = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fstype = Path(unescape_mount_field(fields[4])), tail[0]
        if fstype == "cgroup2":
            unified = mount_point
        elif fstype == "cgroup":
            opts = [o for o in tail[2].split(",") if o not in ("rw", "ro")]
            controllers = [o for o in opts if "=" not in o or o.startswith("name=")]
            controllers = [o for o in controllers if o not in _MOUNT_OPTIONS]
            if controllers:
                v1[",".join(controllers)] = mount_point
    if v1:
        if unified is not None:
            v1["unified"] = unified
        return CgroupLayout(CgroupVersion.V1, v1)
    if unified is not None:
        return CgroupLayout(CgroupVersion.V2, {"unified": unified})
    raise LabUnavailableError("no cgroup file system is mounted; the lab needs cgroups")


_MOUNT_OPTIONS = {"nosuid", "nodev", "noexec", "relatime", "noatime", "clone_children",
                  "xattr", "nsdelegate", "memory_recursiveprot", "cpuset_v2_mode",
                  "noprefix", "favordynmods", "memory_localevents", "memory_hugetlb_accounting"}


def read_layout() -> CgroupLayout:
    return parse_layout(Path("/proc/self/mountinfo").read_text())


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise LabError(f"cannot write {value!r} to {path}: {exc.strerror}") from exc


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def ensure_node_cgroup(layout: CgroupLayout, rel: str, cpus: float,
                       memory_bytes: int) -> dict[str, str]:
    """Create the node's cgroup parent and apply its size; return controller -> directory."""
    if layout.version is CgroupVersion.V2:
        return _ensure_v2(layout, rel, cpus, memory_bytes)
    return _ensure_v1(layout, rel, cpus, memory_bytes)


def _ensure_v1(layout: CgroupLayout, rel: str, cpus: float, memory_bytes: int) -> dict[str, str]:
    dirs: dict[str, str] = {}
    for controller in ("cpu", "cpuacct", "memory"):
        path = layout.controller_dir(controller, rel)
        if path is None:
            raise LabUnavailableError(f"the cgroup v1 controller {controller!r} is not mounted")
        path.mkdir(parents=True, exist_ok=True)
        dirs[controller] = str(path)
    cpu = Path(dirs["cpu"])
    _write(cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US))
    _write(cpu / "cpu.cfs_quota_us", str(cfs_quota_us(cpus, CFS_PERIOD_US)))
    _set_memory_v1(Path(dirs["memory"]), memory_bytes)
    return dirs


def _set_memory_v1(path: Path, memory_bytes: int) -> None:
    mem, memsw = path / "memory.limit_in_bytes", path / "memory.memsw.limit_in_bytes"
    current = int(_read(mem) or 0)
    has_memsw = memsw.exists()
    # memsw must stay >= mem: raise memsw first when growing, mem first when shrinking.
    if has_memsw and memory_bytes > current:
        _write(memsw, str(memory_bytes))
    _write(mem, str(memory_bytes))
    if has_memsw:
        _write(memsw, str(memory_bytes))


def _enable_v2_controllers(directory: Path) -> None:
    available = set((_read(directory / "cgroup.controllers") or "").split())
    enabled = set((_read(directory / "cgroup.subtree_control") or "").split())
    wanted = [c for c in V2_CONTROLLERS if c in available and c not in enabled]
    if wanted:
        _write(directory / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))


def _ensure_v2(layout: CgroupLayout, rel: str, cpus: float, memory_bytes: int) -> dict[str, str]:
    root = layout.mounts["unified"]
    path = root / rel.strip("/")
    current = root
    _enable_v2_controllers(current)
    for part in Path(rel.strip("/")).parts:
        current = current / part
        current.mkdir(exist_ok=True)
        _enable_v2_controllers(current)
    _write(path / "cpu.max", f"{cfs_quota_us(cpus, CFS_PERIOD_US)} {CFS_PERIOD_US}")
    _write(path / "memory.max", str(memory_bytes))
    if (path / "memory.swap.max").exists():
        _write(path / "memory.swap.max", "0")
    return {"unified": str(path)}


def read_usage(layout: CgroupLayout, rel: str) -> CgroupUsage:
    """A node's own CPU time and memory, summed over its subtree (its containers)."""
    if layout.version is CgroupVersion.V2:
        return _usage_v2(layout.mounts["unified"] / rel.strip("/"))
    cpu_dir = layout.controller_dir("cpu", rel)
    acct_dir = layout.controller_dir("cpuacct", rel)
    mem_dir = layout.controller_dir("memory", rel)
    usage_ns = _int_or_none(_read(acct_dir / "cpuacct.usage")) if acct_dir else None
    memory = _int_or_none(_read(mem_dir / "memory.usage_in_bytes")) if mem_dir else None
    limit = _int_or_none(_read(mem_dir / "memory.limit_in_bytes")) if mem_dir else None
    quota = _int_or_none(_read(cpu_dir / "cpu.cfs_quota_us")) if cpu_dir else None
    period = _int_or_none(_read(cpu_dir / "cpu.cfs_period_us")) if cpu_dir else None
    cores = quota / period if quota and period and quota > 0 else None
    return CgroupUsage(usage_ns, memory, cores, limit)


def _usage_v2(path: Path) -> CgroupUsage:
    usage_ns = None
    for line in (_read(path / "cpu.stat") or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec" and value.isdigit():
            usage_ns = int(value) * 1000
    quota, _, period = (_read(path / "cpu.max") or "max").partition(" ")
    cores = int(quota) / int(period) if quota.isdigit() and period.isdigit() else None
    return CgroupUsage(usage_ns, _int_or_none(_read(path / "memory.current")), cores,
                       _int_or_none(_read(path / "memory.max")))


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def tree_dirs(layout: CgroupLayout, rel: str) -> list[Path]:
    """Every directory of ``rel``'s subtree in every hierarchy, deepest first."""
    found: list[Path] = []
    for base in layout.all_dirs(rel):
        if not base.is_dir():
            continue
        for dirpath, _dirs, _files in os.walk(base, topdown=False):
            found.append(Path(dirpath))
    return found


def tree_pids(layout: CgroupLayout, rel: str) -> set[int]:
    """Processes still in ``rel``'s subtree (container processes that outlived their engine)."""
    pids: set[int] = set()
    for directory in tree_dirs(layout, rel):
        for line in (_read(directory / "cgroup.procs") or "").split():
            if line.isdigit():
                pids.add(int(line))
    return pids


def remove_tree(layout: CgroupLayout, rel: str, timeout_s: float = 10.0) -> list[str]:
    """rmdir ``rel``'s subtree in every hierarchy, deepest first, retrying while busy.

    Returns the directories that could not be removed (empty when all went).
    """
    deadline = time.monotonic() + timeout_s
    for _attempt in range(max(1, int(timeout_s / 0.2))):
        busy = [d for d in tree_dirs(layout, rel) if not _rmdir(d)]
        if not busy or time.monotonic() >= deadline:
            return [str(d) for d in busy]
        time.sleep(0.2)
    return [str(d) for d in tree_dirs(layout, rel)]


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
            return False
        raise LabError(f"cannot remove cgroup {path}: {exc.strerror}") from exc
    return True
