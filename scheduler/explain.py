"""Notes for ``--explain``: which candidates a pass looked at and why each was passed over."""

from __future__ import annotations

from domain.model import HostView


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
