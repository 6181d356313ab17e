"""Notes for ``--explain``: which candidates a pass looked at and why each was passed over."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from domain.model import HostView


def why_excluded(exclude: Collection[str], host_id: str, default: str = "excluded") -> str:
    """The note of an excluded host: the reason the exclusion carries (a mapping of host to
    reason, as the scheduler hands constraints and paused nodes), else ``default``."""
    if isinstance(exclude, Mapping):
        reason = exclude.get(host_id)
        if isinstance(reason, str) and reason:
            return f"excluded: {reason}"
    return default


class Notes:
    """Collects lines when enabled; costs one attribute check per call when disabled."""

    __slots__ = ("enabled", "lines")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.lines: list[str] = []

    def host(self, pass_name: str, host: HostView, verdict: str) -> None:
        if self.enabled:
            cls = host.host_class if host.host_class is not None else "empty"
            self.lines.append(
                f"{pass_name}: {host.id} ({host.region.value}, class {cls}, U={host.util:.2f}, "
                f"cpu {host.cpu_allocated}/{host.cpu_capacity}, "
                f"memory {host.memory_allocated}/{host.memory_capacity}): {verdict}"
            )
