"""CPU contention: a host's cores shared by CPU shares, work-conserving (Linux CFS, roughly).

Each task wants ``demand`` cores and weighs ``weight`` (its CPU shares). When the demands fit in
the host's cores every task gets what it wants. Otherwise the cores are divided in proportion
to the weights, and what a task does not use (its demand is below its proportional part) goes
to the others, again by weight: water-filling. The result never exceeds a task's demand nor,
in total, the host's cores, and nothing is left idle while some task still wants more.
"""

from __future__ import annotations

from collections.abc import Sequence


def share_cpu(capacity_cores: float, demands: Sequence[float],
              weights: Sequence[int]) -> list[float]:
    """Cores served to each task (same order as ``demands``)."""
    total = 0.0
    for demand in demands:
        total += demand
    if total <= capacity_cores:
        return list(demands)
    # Water level L (cores per share): task i gets min(demand_i, L x weight_i). Tasks are
    # satisfied in order of demand / weight; the rest split what is left by weight.
    # (a paused task weighs nothing and wants nothing: it comes first, served 0)
    order = sorted(range(len(demands)),
                   key=lambda i: demands[i] / weights[i] if weights[i] else 0.0)
    served = [0.0] * len(demands)
    left = capacity_cores
    weight_left = 0
    for i in order:
        weight_left += weights[i]
    for position, i in enumerate(order):
        level = left / weight_left
        if demands[i] <= level * weights[i]:
            served[i] = demands[i]
            left -= demands[i]
            weight_left -= weights[i]
            continue
        # Nobody from here on is satisfied: they all get the level.
        for j in order[position:]:
            served[j] = level * weights[j]
        break
    return served
