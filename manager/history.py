"""The manager's own history of the cluster (DESIGN 11): one sample per interval, kept in a
capped Redis stream, for the dashboard's charts over time.

The manager's timer takes a sample every ``GREENSWARM_HISTORY_INTERVAL_S`` (10 s by default)
and the stream keeps ``GREENSWARM_HISTORY_KEEP_S`` of them (a day by default: 8,640 samples of
about 400 bytes, some 3.5 MB); the oldest is trimmed as each new one comes. ``GET /history``
reads them after a cursor, as ``GET /events`` reads events. Nothing here walks the requests:
a sample reads the hosts, the queue's length, the SLO tally and the metered energy.

=====================  =========================================================================
 key                    holds
=====================  =========================================================================
 ``{p}:history``        stream: one entry per sample, field ``sample`` (its JSON, below); the
                        entry ids are the cursors
=====================  =========================================================================

A sample: ``t`` (epoch s); ``hosts_on`` (hosts in the registry: the live manager switches none
off, DESIGN 3.15); ``estimated_w``, ``measured_w`` (null: no host measured) and the cluster's
``estimated_kwh``, ``measured_kwh`` since the manager started; ``cpu_util``, ``memory_util``
(the hosts' reported utilization, weighted by capacity), ``cpu_allocated``,
``memory_allocated`` (booked over capacity, the cluster's); ``queue`` (requests waiting);
``tasks``; ``slo`` (per class, the share of its requests that met or meet their objective,
null while it has none).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import redis

from domain.energy import ClusterEnergy
from domain.errors import ValidationError
from domain.model import HostView
from host_registry.redis_store import redis_errors
from manager.power import HostPower
from manager.slo_tally import ClassFulfilment


def build_sample(t: float, hosts: Iterable[HostView], powers: Mapping[str, HostPower],
                 energy: ClusterEnergy, queue: int,
                 slo: Iterable[ClassFulfilment]) -> dict[str, Any]:
    """The cluster at ``t`` as one sample (pure)."""
    listed = list(hosts)
    cpu_cap = sum(h.cpu_capacity for h in listed)
    mem_cap = sum(h.memory_capacity for h in listed)

    def share(part: float, whole: float) -> float:
        return round(part / whole, 6) if whole > 0 else 0.0

    measured = [p.measured_w for p in powers.values() if p.measured_w is not None]
    return {
        "t": round(t, 3),
        "hosts_on": len(listed),
        "estimated_w": round(sum(p.estimated_w for p in powers.values()), 3),
        "measured_w": round(sum(measured), 3) if measured else None,
        "estimated_kwh": round(energy.estimated_kwh, 9),
        "measured_kwh": round(energy.measured_kwh, 9),
        "cpu_util": share(sum(h.cpu_util * h.cpu_capacity for h in listed), cpu_cap),
        "memory_util": share(sum(h.memory_util * h.memory_capacity for h in listed), mem_cap),
        "cpu_allocated": share(sum(h.cpu_allocated for h in listed), cpu_cap),
        "memory_allocated": share(sum(h.memory_allocated for h in listed), mem_cap),
        "queue": queue,
        "tasks": sum(h.task_count for h in listed),
        "slo": {str(row.cls): None if row.fulfilment is None else round(row.fulfilment, 6)
                for row in slo},
    }


class History:
    def __init__(self, client: Any, prefix: str, interval_s: float, keep_s: float) -> None:
        self._redis = client
        self.key = f"{prefix}:history"
        self.interval_s = interval_s
        self.keep = max(1, math.ceil(keep_s / interval_s))  # samples kept
        self._next_s = 0.0

    def due(self, monotonic_s: float) -> bool:
        """Time for the next sample (the caller's monotonic clock); the one after is then an
        interval away."""
        if monotonic_s < self._next_s:
            return False
        self._next_s = monotonic_s + self.interval_s
        return True

    def record(self, sample: Mapping[str, Any]) -> None:
        with redis_errors():
            self._redis.xadd(self.key, {"sample": json.dumps(sample)}, maxlen=self.keep,
                             approximate=False)

    def read(self, since: str = "0", limit: int = 1000) -> tuple[list[dict[str, Any]], str]:
        """Samples after the cursor ``since`` (oldest first, at most ``limit``) and the cursor
        to ask from next ("0": from the oldest kept)."""
        start = "-" if since == "0" else f"({since}"
        with redis_errors():
            try:
                raw = self._redis.xrange(self.key, min=start, count=limit)
            except redis.ResponseError:
                raise ValidationError("since", "must be a cursor that GET /history gave, "
                                      "or 0") from None
        out = []
        for _, fields in raw:
            try:
                sample = json.loads(fields["sample"])
            except (KeyError, ValueError, TypeError):
                continue  # a damaged entry is skipped, never an error
            if isinstance(sample, dict):
                out.append(sample)
        return out, (raw[-1][0] if raw else since)
