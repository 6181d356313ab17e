"""When the agent reports an exited container of ours, and whether the kernel killed it out of
memory (DESIGN 4; issue 28 item 10). Pure: the agent hands in what Docker showed and the
monotonic time; the book answers "report now (out of memory or not)" or "wait so long".

Why there is anything to decide: Docker learns of an out-of-memory kill and of the exit by
separate paths (the kernel's OOM notice on the cgroup's eventfd, and the reaped process, which
containerd publishes independently). Docker 20.10 marks ``State.OOMKilled`` only when the notice
is handled before the exit; when the exit wins (seen under load on cgroup v1), the ``die`` event
and the container's state say nothing of memory, and the ``oom`` event follows the ``die``. And
once the container is removed, the late notice is dropped. So the book remembers ``oom`` events
per container until its exit is reported, and an exit that looks like the OOM killer's (SIGKILL,
exit code 137) with no notice yet waits ``grace_s`` from when the agent first saw it exited
before it is reported without one. Any other exit is reported at once.
"""

from __future__ import annotations

from dataclasses import dataclass

SIGKILL_EXIT_CODE = 137  # 128 + SIGKILL: the OOM killer's signal (and docker kill's)
DEFAULT_OOM_GRACE_S = 3.0
_FORGET_AFTER_S = 3600.0  # notices and exits of containers never reported (removed by hand)


@dataclass(frozen=True)
class ReportNow:
    exit_code: int
    oom: bool


@dataclass(frozen=True)
class WaitForOom:
    """No OOM notice yet for an exit that may have been one: look again in ``wait_s``."""

    wait_s: float


class ExitBook:
    """The OOM notices and first-seen exits of containers whose exit is not reported yet."""

    def __init__(self, grace_s: float = DEFAULT_OOM_GRACE_S) -> None:
        if grace_s < 0:
            raise ValueError("the OOM grace cannot be negative")
        self.grace_s = grace_s
        self._oom_at: dict[str, float] = {}
        self._exited_at: dict[str, float] = {}

    def oom_seen(self, container_id: str, now_s: float) -> None:
        """Docker's ``oom`` event for the container (before or after its ``die``)."""
        self._forget_older_than(now_s - _FORGET_AFTER_S)
        self._oom_at.setdefault(container_id, now_s)

    def decide(self, container_id: str, exit_code: int, oom_killed: bool,
               now_s: float) -> ReportNow | WaitForOom:
        """What to do with an exited container: ``oom_killed`` is Docker's State.OOMKilled."""
        if oom_killed or container_id in self._oom_at:
            return ReportNow(exit_code, True)
        if exit_code != SIGKILL_EXIT_CODE:
            return ReportNow(exit_code, False)
        first_s = self._exited_at.setdefault(container_id, now_s)
        left_s = self.grace_s - (now_s - first_s)
        if left_s > 0:
            return WaitForOom(left_s)
        return ReportNow(exit_code, False)

    def reported(self, container_id: str) -> None:
        """The exit is reported (or no longer ours to report): forget the container."""
        self._oom_at.pop(container_id, None)
        self._exited_at.pop(container_id, None)

    def _forget_older_than(self, limit_s: float) -> None:
        for book in (self._oom_at, self._exited_at):
            for container_id in [c for c, at in book.items() if at < limit_s]:
                del book[container_id]
