"""``swarm``: Swarm's own scheduler places each service (DESIGN 3.9), live only.

The manager creates the service with reservations equal to the request and no node constraint
but the hosts', and books it where Swarm started it. The few decisions the scheduler still takes
(a booked task whose node left) use spread, Swarm's own strategy.
"""

from __future__ import annotations

from scheduler.plugin import NoOptions, PlacedBy, PolicyPlugin
from scheduler.policies.scored import ScoredPolicy

PLUGIN = PolicyPlugin(
    name="swarm",
    summary="Swarm's own scheduler, reservations equal to the request",
    options=NoOptions,
    build=lambda options, seed: ScoredPolicy("spread", highest=False),
    placed_by=PlacedBy.SWARM,
    simulated=False,
)
