"""``lvrb``: the Trimaran KEP's LoadVariationRiskBalancing (DESIGN 3.12).

Among the hosts with the request unreserved (no overbooking, cuts or kills), each resource i
(CPU, memory) of a host has M_i and V_i, the mean and standard deviation of its utilization over
the load window (5 minutes by default), and r_i, the request's fraction of the host; the host's
score is min over i of (1 - min(M_i + r_i + V_i, 1)) x 100 (``load_scores.risk_balancing``).
The highest score wins; ties go to the host with fewest tasks, then to the smallest id. A host
without a window yet uses its current utilization with no variation; utilization is the
expected one (``scheduler.load``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum

from domain.decision import Decision
from domain.model import HostView, Request
from domain.store import ClusterReader
from scheduler.explain import Notes
from scheduler.plugin import PolicyPlugin
from scheduler.policies.load_scores import risk_balancing
from scheduler.policies.scored import highest_score, unreserved_fit


class LoadWindowSpan(StrEnum):
    FIVE = "5m"
    TEN = "10m"
    FIFTEEN = "15m"

    @property
    def seconds(self) -> int:
        return int(self.value[:-1]) * 60


@dataclass(frozen=True)
class LvrbOptions:
    window: LoadWindowSpan = field(
        default=LoadWindowSpan.FIVE,
        metadata={"help": "the load window whose mean and deviation are scored"},
    )


def mean_and_deviation(host: HostView, span_s: int) -> tuple[tuple[float, float],
                                                             tuple[float, float]]:
    """((M_cpu, M_memory), (V_cpu, V_memory)) of ``host`` over the window of ``span_s``."""
    window = host.windows.get(span_s) if host.windows is not None else None
    if window is None:
        return (host.cpu_util, host.memory_util), (0.0, 0.0)
    return (window.cpu_mean, window.memory_mean), (window.cpu_std, window.memory_std)


@dataclass(frozen=True)
class LoadVariationRiskBalancing:
    window: LoadWindowSpan = LoadWindowSpan.FIVE
    name: str = "lvrb"
    predicts_recent: bool = True

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        span_s = self.window.seconds

        def score(host: HostView) -> float:
            means, deviations = mean_and_deviation(host, span_s)
            requests = (request.cpu_shares / host.cpu_capacity,
                        request.memory / host.memory_capacity)
            return risk_balancing(means, deviations, requests)

        def describe(host: HostView, value: float) -> str:
            means, deviations = mean_and_deviation(host, span_s)
            return (f"M {means[0]:.3f}/{means[1]:.3f}, V {deviations[0]:.3f}/"
                    f"{deviations[1]:.3f}, score {value:.1f}")

        return highest_score(request, view, exclude, Notes(explain), self.name, score,
                             describe)

    may_place = staticmethod(unreserved_fit)


PLUGIN = PolicyPlugin(
    name="lvrb",
    summary="the Trimaran KEP's LoadVariationRiskBalancing (DESIGN 3.12): the host whose load "
            "window, plus the request, is furthest from full",
    options=LvrbOptions,
    build=lambda options, seed: LoadVariationRiskBalancing(window=options.window),
)
