"""Mounts a node's engine leaves behind (data root, overlays, netns files, the UTS namespace).

The node engines share the host's mount namespace, so their mounts are visible in
``/proc/self/mountinfo``; `down` unmounts everything under the lab's directories, deepest first.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lab.proc import run


def unescape_mount_field(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as three octal digits."""
    out, i = [], 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mount_points(mountinfo: str) -> list[Path]:
    points: list[Path] = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            points.append(Path(unescape_mount_field(fields[4])))
    return points


def mounts_under(prefixes: Iterable[Path], mountinfo: str | None = None) -> list[Path]:
    """Mount points at or below any of ``prefixes``, deepest first, without duplicates."""
    text = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    roots = [p.resolve() if p.exists() else p for p in prefixes]
    found = {
        point for point in parse_mount_points(text)
        if any(point == root or root in point.parents for root in roots)
    }
    return sorted(found, key=lambda p: (len(p.parts), str(p)), reverse=True)


def unmount_all(prefixes: Iterable[Path], attempts: int = 3) -> list[Path]:
    """Unmount everything under ``prefixes`` (lazily when busy); return what is still mounted."""
    prefixes = list(prefixes)
    for _ in range(attempts):
        points = mounts_under(prefixes)
        if not points:
            return []
        for point in points:
            if run(["umount", str(point)], check=False).returncode != 0:
                run(["umount", "-l", str(point)], check=False)
    return mounts_under(prefixes)
