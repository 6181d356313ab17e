"""Swarm-style baselines (DESIGN 3.9): spread, binpack and random. None overbooks, cuts or kills.

Scores are classic Swarm's: cpu = (allocated + request) x 100 / capacity, the same for memory;
a node qualifies only when both are <= 100. Spread takes the lowest sum, binpack the highest;
ties go to the node with fewest containers, then to the smallest id.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field

from domain.classes import ClassTable
from domain.decision import Decision, Pass
from domain.model import HostView, Request
from domain.store import ClusterReader
from scheduler.explain import Notes


def _qualifying(
    request: Request, view: ClusterReader, exclude: Collection[str], notes: Notes, name: str
) -> Iterator[tuple[float, HostView]]:
    cpu, memory = request.cpu_shares, request.memory
    for host in view.all_hosts():
        if host.id in exclude:
            notes.host(name, host, "excluded")
            continue
        if host.cpu_allocated + cpu > host.cpu_capacity:
            notes.host(name, host, "CPU score over 100")
            continue
        if host.memory_allocated + memory > host.memory_capacity:
            notes.host(name, host, "memory score over 100")
            continue
        score = (host.cpu_allocated + cpu) * 100 / host.cpu_capacity + (
            host.memory_allocated + memory
        ) * 100 / host.memory_capacity
        notes.host(name, host, f"qualifies, score {score:.1f}")
        yield score, host


def _unreserved_fit(request: Request, hosts: Iterable[HostView], classes: ClassTable) -> bool:
    """A baseline's ``may_place``: exactly its own test, without overbooking."""
    cpu, memory = request.cpu_shares, request.memory
    return any(
        host.cpu_allocated + cpu <= host.cpu_capacity
        and host.memory_allocated + memory <= host.memory_capacity
        for host in hosts
    )


def _place(request: Request, host: HostView, name: str, why: str, notes: Notes) -> Decision:
    host_class = host.host_class
    new_class = request.cls if host_class is None else min(host_class, request.cls)
    return Decision(
        request=request,
        placed=True,
        host=host.id,
        pass_=Pass.SIMPLE,
        cpu_shares=request.cpu_shares,
        memory=request.memory,
        new_class=new_class,
        reason=f"{name}: host {host.id} {why}",
        explain=tuple(notes.lines),
    )


def _refuse(request: Request, name: str, notes: Notes) -> Decision:
    return Decision.refused(
        request,
        f"{name}: no node has {request.cpu_shares} CPU shares and "
        f"{request.memory} bytes unreserved",
        tuple(notes.lines),
    )


@dataclass(frozen=True)
class ScoredPolicy:
    """Spread (lowest score) or binpack (highest score)."""

    name: str
    highest: bool

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        notes = Notes(explain)
        best: tuple[float, int, str] | None = None
        best_host: HostView | None = None
        for score, host in _qualifying(request, view, exclude, notes, self.name):
            key = (-score if self.highest else score, host.task_count, host.id)
            if best is None or key < best:
                best, best_host = key, host
        if best_host is None or best is None:
            return _refuse(request, self.name, notes)
        score = -best[0] if self.highest else best[0]
        return _place(request, best_host, self.name, f"scores {score:.1f}", notes)

    may_place = staticmethod(_unreserved_fit)


SPREAD = ScoredPolicy("spread", highest=False)
BINPACK = ScoredPolicy("binpack", highest=True)


@dataclass
class RandomPolicy:
    """A uniformly random node among those the request fits without overbooking."""

    seed: int = 0
    name: str = "random"
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        notes = Notes(explain)
        hosts = [host for _, host in _qualifying(request, view, exclude, notes, self.name)]
        if not hosts:
            return _refuse(request, self.name, notes)
        host = self._rng.choice(hosts)
        return _place(request, host, self.name, f"drawn among {len(hosts)} that fit", notes)

    may_place = staticmethod(_unreserved_fit)
