"""Processes: run commands, wait with bounds, start daemons, stop them by pid.

Commands are argument lists (never a shell). Every wait is bounded in attempts and in time.
Processes are only ever signalled by pid, after checking that the pid still runs the program we
started (its command line names our pid file), so a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

from lab.errors import CommandFailedError, LabTimeoutError, LabUnavailableError

T = TypeVar("T")


def run(
    argv: Sequence[str],
    *,
    timeout_s: float = 120.0,
    check: bool = True,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion; raise a lab error when it is missing, hangs or fails."""
    try:
        done = subprocess.run(
            list(argv),
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=None if env is None else dict(env),
        )
    except FileNotFoundError as exc:
        raise LabUnavailableError(f"{argv[0]} is not installed (needed by the lab)") from exc
    except subprocess.TimeoutExpired as exc:
        raise LabTimeoutError(f"`{' '.join(argv[:4])} ...` did not finish in {timeout_s:.0f}s") \
            from exc
    if check and done.returncode != 0:
        raise CommandFailedError(argv, done.returncode, done.stderr or done.stdout)
    return done


def run_logged(argv: Sequence[str], log: Path, *, timeout_s: float,
               env: Mapping[str, str] | None = None, cwd: Path | None = None,
               stdin: IO[bytes] | None = None) -> None:
    """Run a long command with its output appended to ``log``; errors quote the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                  stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                  timeout=timeout_s, check=False, cwd=cwd,
                                  env=None if env is None else dict(env))
        except FileNotFoundError as exc:
            raise LabUnavailableError(f"{argv[0]} is not installed (needed by the lab)") from exc
        except subprocess.TimeoutExpired as exc:
            raise LabTimeoutError(f"`{' '.join(argv[:3])} ...` did not finish in "
                                  f"{timeout_s:.0f}s; see {log}") from exc
    if done.returncode != 0:
        raise CommandFailedError(argv, done.returncode, f"{tail(log)} (full log: {log})")


def tail(path: Path, lines: int = 4) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def wait_until(
    probe: Callable[[], T | None],
    *,
    what: str,
    timeout_s: float,
    interval_s: float = 0.25,
) -> T:
    """Call ``probe`` until it returns something other than None; bounded in time and count."""
    deadline = time.monotonic() + timeout_s
    attempts = max(1, math.ceil(timeout_s / interval_s) + 1)
    for _ in range(attempts):
        value = probe()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    raise LabTimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def pids_mentioning(path: str) -> list[int]:
    """Processes whose command line names ``path`` (a directory only the lab uses, such as a
    node's exec root: its containerd and container shims), never this process."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            pid = int(entry.name)
            if any(path in arg for arg in cmdline(pid)) and pid_alive(pid):
                found.append(pid)
    return sorted(found)


def read_pidfile(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def owns_pidfile(pid: int, pidfile: Path) -> bool:
    """True when process ``pid`` was started with ``--pidfile <pidfile>`` (it is ours)."""
    args = cmdline(pid)
    return any(
        (a == "--pidfile" and i + 1 < len(args) and args[i + 1] == str(pidfile))
        or a == f"--pidfile={pidfile}"
        for i, a in enumerate(args)
    )


def daemon_pid(pidfile: Path) -> int | None:
    """The live pid recorded in ``pidfile`` if that process is the daemon that wrote it."""
    pid = read_pidfile(pidfile)
    if pid is None or not pid_alive(pid) or not owns_pidfile(pid, pidfile):
        return None
    return pid


def spawn_daemon(argv: Sequence[str], log: Path, env: Mapping[str, str]) -> int:
    """Start a long-running daemon detached from us (own session), output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     close_fds=True, env=dict(env))
        except FileNotFoundError as exc:
            raise LabUnavailableError(f"{argv[0]} is not installed (needed by the lab)") from exc
    return child.pid


def reap(pid: int) -> None:
    """Collect ``pid`` if it is our own exited child (no zombie left behind)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def signal_pid(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def wait_exit(pids: Sequence[int], timeout_s: float, interval_s: float = 0.1) -> list[int]:
    """Wait (bounded) for ``pids`` to exit; return those still alive."""
    deadline = time.monotonic() + timeout_s
    attempts = max(1, math.ceil(timeout_s / interval_s) + 1)
    alive = list(pids)
    for _ in range(attempts):
        for pid in alive:
            reap(pid)
        alive = [pid for pid in alive if pid_alive(pid)]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    return alive


def stop_pids(pids: Sequence[int], timeout_s: float) -> list[int]:
    """SIGTERM, wait, then SIGKILL what is left and wait again; return pids that survived."""
    for pid in pids:
        signal_pid(pid, signal.SIGTERM)
    alive = wait_exit(pids, timeout_s)
    for pid in alive:
        signal_pid(pid, signal.SIGKILL)
    return wait_exit(alive, 10.0)
