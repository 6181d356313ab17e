"""The lab's state file and its lock (one `lab up`/`down`/`images` at a time)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.errors import LabConflictError, LabError, NotPrivilegedError
from lab.model import LabState
from lab.settings import LabPaths


def require_root() -> None:
    if os.geteuid() != 0:
        raise NotPrivilegedError("the lab needs root (network namespaces, cgroups, dockerd)")


def load_state(paths: LabPaths) -> LabState | None:
    try:
        text = paths.state_file.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LabError(f"cannot read {paths.state_file}: {exc.strerror}") from exc
    try:
        return LabState.from_dict(json.loads(text))
    except json.JSONDecodeError as exc:
        raise LabError(f"{paths.state_file} is not valid JSON: {exc}") from exc


def save_state(paths: LabPaths, state: LabState) -> None:
    """Write atomically (temporary file + rename), readable by everyone."""
    paths.state_file.parent.mkdir(parents=True, exist_ok=True)
    partial = paths.state_file.with_suffix(".json.partial")
    partial.write_text(json.dumps(state.to_dict(), indent=2, sort_keys=True) + "\n")
    partial.chmod(0o644)
    partial.replace(paths.state_file)


def remove_state(paths: LabPaths) -> bool:
    try:
        paths.state_file.unlink()
    except FileNotFoundError:
        return False
    return True


@contextmanager
def lab_lock(paths: LabPaths) -> Iterator[None]:
    """Exclusive, non-blocking: a second concurrent lab command is refused, not queued."""
    lock_file: Path = paths.lock_file
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise LabConflictError(
                f"another `greenswarm lab` command is running (lock {lock_file})") from exc
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
