"""A new request's decision taken and applied nowhere (``Scheduler.preview``), which
``Scheduler.submit(..., preview=)`` applies instead of deciding again while it stands.

It stands while it is for the same request at the same moment and nothing the decision reads
changed since: no change made through the scheduler (a decision applied, a task ended, a host
lost, the closed hosts or the nodes' facts) and, for a store that logs its changes
(``domain.store.ChangeLog``), none in the store. A store other processes write (Redis) cannot
say: its caller previews and submits in one turn of its scheduling loop (what a decision reads
and then applies is no more atomic against those writers either). A round deciding a waiting
request never takes a preview: it decides as rounds do.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.decision import Decision
from domain.model import Request

# (changes made through the scheduler, the store's change mark when it logs its changes)
Stamp = tuple[int, int | None]


@dataclass(frozen=True)
class Preview:
    decision: Decision
    now: float
    stamp: Stamp

    def stands(self, request: Request, now: float, stamp: Stamp) -> bool:
        """Whether it is still the decision for ``request`` at ``now``, the scheduler's history
        at ``stamp``."""
        return self.decision.request == request and self.now == now and self.stamp == stamp
