"""Policy objects and how to pick one by name."""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import Protocol

from domain.decision import Decision
from domain.errors import ValidationError
from domain.model import Request
from domain.store import ClusterReader
from manager.scheduler.baselines import BINPACK, SPREAD, RandomPolicy
from manager.scheduler.energy import EmptyHosts, EnergyPolicy


class PolicyName(StrEnum):
    ENERGY = "energy"
    SPREAD = "spread"
    BINPACK = "binpack"
    RANDOM = "random"


class Policy(Protocol):
    @property
    def name(self) -> str: ...

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision: ...


def make_policy(name: str, *, empty_hosts: EmptyHosts = EmptyHosts.LAST, seed: int = 0) -> Policy:
    try:
        which = PolicyName(name)
    except ValueError:
        choices = ", ".join(p.value for p in PolicyName)
        raise ValidationError("policy", f"unknown policy {name!r} (choose {choices})") from None
    if which is PolicyName.ENERGY:
        return EnergyPolicy(empty_hosts=empty_hosts)
    if which is PolicyName.SPREAD:
        return SPREAD
    if which is PolicyName.BINPACK:
        return BINPACK
    return RandomPolicy(seed=seed)
