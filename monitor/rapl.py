"""Measured power from Intel RAPL (``/sys/class/powercap/intel-rapl:N``), where the machine has it.

Only top-level zones are summed (``intel-rapl:0``, ``intel-rapl:1``: one per package); their
sub-zones (``intel-rapl:0:0`` = cores, ...) are parts of them and would count twice. A "psys"
(platform) zone contains the packages, so it is used only on a machine without package zones.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from monitor.core import EnergyCounter, power_w

log = logging.getLogger(__name__)

DEFAULT_POWERCAP_ROOT = Path("/sys/class/powercap")
_TOP_LEVEL_ZONE = re.compile(r"^intel-rapl:\d+$")


@dataclass(frozen=True)
class RaplZone:
    directory: Path
    name: str
    max_energy_range_uj: int

    def read(self, at_s: float) -> EnergyCounter:
        with open(self.directory / "energy_uj", encoding="ascii") as handle:
            return EnergyCounter(int(handle.read().strip()), at_s)


def _zone(directory: Path) -> RaplZone | None:
    try:
        name = (directory / "name").read_text(encoding="ascii").strip()
        max_range = int((directory / "max_energy_range_uj").read_text(encoding="ascii").strip())
        with open(directory / "energy_uj", encoding="ascii") as handle:
            int(handle.read().strip())
    except (OSError, ValueError) as exc:
        log.debug("RAPL zone %s is not readable: %s", directory, exc)
        return None
    return RaplZone(directory, name, max_range)


def discover_zones(root: Path = DEFAULT_POWERCAP_ROOT) -> list[RaplZone]:
    """The readable top-level RAPL zones to sum; empty when the machine has none (or they are
    readable by root only and we are not root)."""
    try:
        candidates = sorted(p for p in root.iterdir() if _TOP_LEVEL_ZONE.match(p.name))
    except OSError:
        return []
    zones = [zone for zone in (_zone(path) for path in candidates) if zone is not None]
    packages = [zone for zone in zones if zone.name.startswith("package")]
    if packages:
        return packages
    platform = [zone for zone in zones if zone.name == "psys"]
    return platform or zones


class RaplMeter:
    """Average power since the previous reading, summed over the zones."""

    def __init__(self, zones: list[RaplZone]) -> None:
        self._zones = zones
        self._previous: dict[Path, EnergyCounter] = {}

    @classmethod
    def discover(cls, root: Path = DEFAULT_POWERCAP_ROOT) -> RaplMeter | None:
        zones = discover_zones(root)
        if not zones:
            return None
        log.info("RAPL power from %s", ", ".join(f"{z.directory.name} ({z.name})" for z in zones))
        return cls(zones)

    @property
    def zones(self) -> list[RaplZone]:
        return list(self._zones)

    def read_power_w(self, at_s: float) -> float | None:
        """Watts since the previous call (None on the first call or when a zone failed)."""
        total_w = 0.0
        complete = True
        for zone in self._zones:
            try:
                current = zone.read(at_s)
            except (OSError, ValueError) as exc:
                log.debug("RAPL zone %s: %s", zone.directory, exc)
                self._previous.pop(zone.directory, None)
                complete = False
                continue
            previous = self._previous.get(zone.directory)
            self._previous[zone.directory] = current
            watts = (
                None if previous is None
                else power_w(previous, current, zone.max_energy_range_uj)
            )
            if watts is None:
                complete = False
            else:
                total_w += watts
        return total_w if complete else None
