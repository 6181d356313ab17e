"""``spread``: classic Swarm's spread (DESIGN 3.9), the node with the lowest score."""

from __future__ import annotations

from scheduler.plugin import NoOptions, PolicyPlugin
from scheduler.policies.scored import ScoredPolicy

PLUGIN = PolicyPlugin(
    name="spread",
    summary="classic Swarm's spread: the qualifying node with the lowest CPU + memory score",
    options=NoOptions,
    build=lambda options, seed: ScoredPolicy("spread", highest=False),
)
