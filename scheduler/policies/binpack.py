"""``binpack``: classic Swarm's binpack (DESIGN 3.9), the node with the highest score."""

from __future__ import annotations

from scheduler.plugin import NoOptions, PolicyPlugin
from scheduler.policies.scored import ScoredPolicy

PLUGIN = PolicyPlugin(
    name="binpack",
    summary="classic Swarm's binpack: the qualifying node with the highest CPU + memory score",
    options=NoOptions,
    build=lambda options, seed: ScoredPolicy("binpack", highest=True),
)
