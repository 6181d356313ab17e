"""Placement constraints in a decision (DESIGN 4): every policy filters hosts by them before its
passes. The scheduler (and ``greenswarm decide``) rule out the hosts a request's constraints
exclude, hand the policy the exclusions with their reasons (so ``--explain`` names the
constraint), and name the constraints in a refusal. Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from domain.constraints import NodeFacts, exclusions
from domain.decision import Decision
from domain.model import Request

JUST_LEFT = "the task was just removed from it"
PAUSED = "the node is paused: it keeps its tasks and takes no new ones"


def ruled_out(
    request: Request, host_ids: Iterable[str], facts: Mapping[str, NodeFacts]
) -> dict[str, str]:
    """The hosts the request's constraints exclude, each with the constraint it does not meet."""
    return exclusions(request.constraints, facts, host_ids)


def merged(
    exclude: Collection[str], reason: str, more: Mapping[str, str]
) -> Collection[str]:
    """``exclude`` (each for ``reason``) and ``more``, as one mapping of host to reason; the
    plain collection itself when there is nothing more (the common, cheap case)."""
    if not more:
        return exclude
    out = dict.fromkeys(exclude, reason) if not isinstance(exclude, Mapping) else dict(exclude)
    for host_id, why in more.items():
        out.setdefault(host_id, why)
    return out


def name_constraints(decision: Decision, excluded: Mapping[str, str], hosts: int) -> Decision:
    """A refusal that also says which constraints ruled out which hosts."""
    if decision.placed or not excluded:
        return decision
    by_reason: dict[str, list[str]] = {}
    for host_id, why in sorted(excluded.items()):
        by_reason.setdefault(why, []).append(host_id)
    summary = "; ".join(f"{why} on {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}"
                        for why, ids in by_reason.items())
    if len(excluded) >= hosts:
        reason = f"no host meets the request's constraints ({summary})"
    else:
        reason = f"{decision.reason} (ruled out before: {summary})"
    return Decision.refused(decision.request, reason, decision.explain, policy=decision.policy)
