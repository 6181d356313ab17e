"""Policy objects and how to pick one by name."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import StrEnum
from typing import Protocol

from domain.classes import ClassTable
from domain.decision import Decision
from domain.errors import ValidationError
from domain.model import HostView, Request
from domain.store import ClusterReader
from scheduler.policies.baselines import BINPACK, SPREAD, RandomPolicy
from scheduler.policies.energy import EmptyHosts, EnergyPolicy


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

    def may_place(
        self, request: Request, hosts: Iterable[HostView], classes: ClassTable
    ) -> bool:
        """False only when ``decide`` could place ``request`` on none of ``hosts`` as they are
        now, whatever the other hosts; judged from the hosts' views alone (cheap)."""
        ...


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
