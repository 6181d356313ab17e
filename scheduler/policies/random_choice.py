"""``random``: a uniformly random node among those the request fits without overbooking
(DESIGN 3.9)."""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field

from domain.decision import Decision
from domain.model import Request
from domain.store import ClusterReader
from scheduler.explain import Notes
from scheduler.plugin import NoOptions, PolicyPlugin
from scheduler.policies.scored import place, qualifying, refuse, unreserved_fit


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
        hosts = [host for _, host in qualifying(request, view, exclude, notes, self.name)]
        if not hosts:
            return refuse(request, self.name, notes)
        host = self._rng.choice(hosts)
        return place(request, host, self.name, f"drawn among {len(hosts)} that fit", notes)

    may_place = staticmethod(unreserved_fit)


PLUGIN = PolicyPlugin(
    name="random",
    summary="a node drawn at random among those the request fits without overbooking",
    options=NoOptions,
    build=lambda options, seed: RandomPolicy(seed=seed),
)
