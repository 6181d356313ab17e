"""``tlp``: the Trimaran KEP's TargetLoadPacking (DESIGN 3.12).

Among the hosts with the request unreserved (no overbooking, cuts or kills), each scores by its
CPU utilization with the request, U' (percent): the score climbs to 100 at the target T and
falls beyond it (``load_scores.target_load_packing``). The highest score wins; ties go to the
host with fewest tasks, then to the smallest id. Utilization is the expected one
(``scheduler.load``): measured, plus the tasks placed since, or by allocation when stale.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from domain.decision import Decision
from domain.errors import ValidationError
from domain.model import HostView, Request
from domain.store import ClusterReader
from scheduler.explain import Notes
from scheduler.plugin import PolicyPlugin
from scheduler.policies.load_scores import target_load_packing
from scheduler.policies.scored import highest_score, unreserved_fit


@dataclass(frozen=True)
class TlpOptions:
    target_pct: float = field(
        default=50.0,
        metadata={"help": "the CPU utilization (percent) hosts are packed up to (the KEP's 50)",
                  "metavar": "T"},
    )

    def __post_init__(self) -> None:
        if not 0 < self.target_pct < 100:
            raise ValidationError("target_pct", "must be in (0, 100)")


@dataclass(frozen=True)
class TargetLoadPacking:
    target_pct: float = 50.0
    name: str = "tlp"
    predicts_recent: bool = True

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        def used_pct(host: HostView) -> float:
            return (host.cpu_util + request.cpu_shares / host.cpu_capacity) * 100.0

        def score(host: HostView) -> float:
            return target_load_packing(used_pct(host), self.target_pct)

        def describe(host: HostView, value: float) -> str:
            return f"U' {used_pct(host):.1f} %, score {value:.1f}"

        return highest_score(request, view, exclude, Notes(explain), self.name, score,
                             describe)

    may_place = staticmethod(unreserved_fit)


PLUGIN = PolicyPlugin(
    name="tlp",
    summary="the Trimaran KEP's TargetLoadPacking (DESIGN 3.12): CPU utilization packed up to "
            "a target, no overbooking",
    options=TlpOptions,
    build=lambda options, seed: TargetLoadPacking(target_pct=options.target_pct),
)
