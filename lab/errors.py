"""Errors of the local lab, all inside the project's one exception root.

Expected failures (a missing tool, a command that fails, a daemon that never answers, a lab in a
state that `up` cannot reconcile) are raised as these, so the CLI prints one line instead of a
traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.errors import ConflictError, GreenSwarmError, UnavailableError


class LabError(GreenSwarmError):
    """Root of the lab's own errors."""


class NotPrivilegedError(LabError):
    """The lab needs root (network namespaces, cgroups, daemons)."""


class LabConflictError(LabError, ConflictError):
    """The machine is in a state the lab refuses to change (e.g. a foreign swarm)."""


class LabUnavailableError(LabError, UnavailableError):
    """A tool, daemon or engine is missing, failed or did not answer in time."""


class CommandFailedError(LabUnavailableError):
    """An external command exited non-zero; the message carries the tail of its stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        tail = " | ".join(line for line in stderr.strip().splitlines()[-4:] if line.strip())
        super().__init__(f"`{' '.join(argv[:6])}{' ...' if len(argv) > 6 else ''}` "
                         f"exited with {returncode}: {tail or 'no error output'}")
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


class LabTimeoutError(LabUnavailableError):
    """A bounded wait ran out of attempts or time."""
