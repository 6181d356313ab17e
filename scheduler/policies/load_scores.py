"""The Trimaran KEP's two scores (DESIGN 3.12), as pure functions of numbers.

TargetLoadPacking: with U' the host's CPU utilization plus the request's share of its CPU, in
percent, and the target T (the KEP's 50 %), the score is T + (100 - T) x U' / T up to the target,
T x (100 - U') / (100 - T) above it up to 100, and 0 beyond. For T = 50 that is U' + 50, then
100 - U': hosts climb to the target, and past it the least loaded wins.

LoadVariationRiskBalancing: per resource i, with M_i and V_i the mean and standard deviation of
the host's utilization over the load window (fractions) and r_i the request's fraction of the
host, S_i = min(M_i + r_i + V_i, 1), and the host's score is min over i of (1 - S_i) x 100: a
host whose load varies is as risky as one that is full.
"""

from __future__ import annotations

MAX_SCORE = 100.0


def target_load_packing(utilization_pct: float, target_pct: float = 50.0) -> float:
    """The score of a host whose CPU would be at ``utilization_pct`` with the request (U')."""
    if not 0 < target_pct < 100:
        raise ValueError("the target must be in (0, 100)")
    if utilization_pct <= target_pct:
        return target_pct + (MAX_SCORE - target_pct) * utilization_pct / target_pct
    if utilization_pct <= MAX_SCORE:
        return target_pct * (MAX_SCORE - utilization_pct) / (MAX_SCORE - target_pct)
    return 0.0


def risk_balancing(
    means: tuple[float, ...], deviations: tuple[float, ...], requests: tuple[float, ...],
    margin: float = 1.0,
) -> float:
    """The score of a host from each resource's window mean, standard deviation (times the
    KEP's safe variance ``margin``) and the request's fraction of it."""
    scores = [
        (1.0 - min(mean + request + margin * deviation, 1.0)) * MAX_SCORE
        for mean, deviation, request in zip(means, deviations, requests, strict=True)
    ]
    return min(scores)
