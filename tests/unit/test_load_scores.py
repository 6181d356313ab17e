"""The Trimaran KEP's worked examples (DESIGN 3.12), recomputed."""

from __future__ import annotations

import math

import pytest

from scheduler.policies.load_scores import risk_balancing, target_load_packing


def test_target_load_packing_the_keps_three_nodes() -> None:
    """Nodes of 4 cores at 1, 2 and 3 cores used, a request of 0 cores: 75, 100, 25."""
    assert [target_load_packing(u) for u in (25.0, 50.0, 75.0)] == [75.0, 100.0, 25.0]


@pytest.mark.parametrize(("utilization", "target", "score"), [
    (0.0, 50.0, 50.0),  # an idle host: the target itself
    (50.0, 50.0, 100.0),  # U' = T: the best
    (100.0, 50.0, 0.0),  # U' = 100: the worst that still fits
    (120.0, 50.0, 0.0),  # U' > 100
    (20.0, 40.0, 70.0),  # T = 40: 40 + 60 x 20 / 40
    (40.0, 40.0, 100.0),
    (70.0, 40.0, 20.0),  # 40 x 30 / 60
    (80.0, 80.0, 100.0),
    (90.0, 80.0, 40.0),  # 80 x 10 / 20
])
def test_target_load_packing_at_other_targets_and_at_the_bounds(
    utilization: float, target: float, score: float
) -> None:
    assert target_load_packing(utilization, target) == pytest.approx(score)


def test_load_variation_risk_balancing_the_keps_safe_balancing_example() -> None:
    """Nodes of 4 cores and 8 GB; a request of 0.5 cores and 1 GB (r = 1/8 of each). The
    KEP's table (means and deviations in cores and GB) gives scores 0, 7 and 43: N3 wins."""
    nodes = {  # (mean cpu, mean mem, stdev cpu, stdev mem), as the KEP lists them
        "N1": (0.8, 1.6, 3.2, 4.8),
        "N2": (2.0, 6.4, 0.04, 0.004),
        "N3": (1.2, 3.2, 0.4, 0.4),
    }
    scores = {}
    for name, (mc, mm, vc, vm) in nodes.items():
        scores[name] = risk_balancing((mc / 4, mm / 8), (vc / 4, vm / 8), (0.5 / 4, 1 / 8))
    assert scores["N1"] == pytest.approx(0.0)  # CPU 0.325 + 0.8 > 1: capped, nothing left
    assert scores["N2"] == pytest.approx((1 - (6.4 / 8 + 1 / 8 + 0.004 / 8)) * 100)  # memory
    assert scores["N3"] == pytest.approx(42.5)  # memory: 1 - (0.4 + 0.125 + 0.05)
    # the KEP rounds to whole scores (half up): 0, 7, 43
    assert [math.floor(s + 0.5 + 1e-9) for s in scores.values()] == [0, 7, 43]
    assert max(scores, key=scores.__getitem__) == "N3"
