"""Energy-efficiency regions of a host by its total utilization U = max(cpu, memory)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from domain.errors import ValidationError


class Region(StrEnum):
    LEE = "LEE"  # low energy efficiency: under-used, fill it
    DEE = "DEE"  # desired energy efficiency
    EED = "EED"  # energy efficiency degradation: over-used, relieve it


REGIONS: tuple[Region, ...] = (Region.LEE, Region.DEE, Region.EED)


@dataclass(frozen=True)
class RegionBounds:
    """LEE if U < lee_below; DEE if lee_below <= U <= eed_above; EED if U > eed_above."""

    lee_below: float = 0.50
    eed_above: float = 0.85

    def __post_init__(self) -> None:
        if not 0.0 < self.lee_below <= self.eed_above < 1.0:
            raise ValidationError("region_bounds", "need 0 < lee_below <= eed_above < 1")

    def classify(self, total_util: float) -> Region:
        if total_util < self.lee_below:
            return Region.LEE
        if total_util <= self.eed_above:
            return Region.DEE
        return Region.EED


def total_utilization(cpu_util: float, memory_util: float) -> float:
    """U = max(cpu, memory): the resource that constrains the host (or task) most."""
    return max(cpu_util, memory_util)
