"""``greenswarm decide``: where would this request go, and why (a dry run, nothing applied).

The scheduler decides, as it would decide the request submitted at the scenario's ``now``
(``Scheduler.decide_one``): any policy of the registration table, round policies included."""

from __future__ import annotations

import argparse
import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from cli.argtypes import read_json_file
from cli.options import add_service_level_arguments, slo_table
from cli.policy_options import add_policy_options, cluster_options, policy_options
from cli.scenario import load_scenario
from domain.classes import ClassTable
from domain.errors import ValidationError
from domain.regions import RegionBounds
from domain.store import ClusterStore
from scheduler import registry
from scheduler.service import Scheduler


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "decide",
        help="dry-run a placement decision for a scenario file",
        description="Read a scenario (or a JSON list of scenarios) and print the decision(s) "
        "as JSON. Nothing is applied anywhere.",
    )
    parser.add_argument("--scenario", required=True, help="JSON file, or - for standard input")
    parser.add_argument(
        "--policy", default="energy", choices=registry.names(simulated=True),
        help="the policy that decides (default: energy)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="add the candidates each pass looked at and why each was passed over",
    )
    add_policy_options(parser)
    add_service_level_arguments(parser, decide=True)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random policy")
    parser.add_argument(
        "--store",
        choices=["memory", "redis"],
        default="memory",
        help="decide against the in-memory store or the Redis store",
    )
    parser.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/0",
        help="with --store redis; the scenario is loaded under a private key "
        "prefix that is removed afterwards",
    )
    parser.set_defaults(handler=run)


def decide_all(document: object, args: argparse.Namespace) -> dict[str, Any] | list[Any]:
    cluster = cluster_options(args)
    classes, bounds = cluster.classes(), cluster.bounds()
    options = policy_options(args)[args.policy]
    slo = slo_table(args)
    single = not isinstance(document, list)
    scenarios = [document] if single else document
    assert isinstance(scenarios, list)
    results: list[dict[str, Any]] = []
    for index, raw in enumerate(scenarios):
        with _store(args, classes, bounds) as store:
            try:
                scenario = load_scenario(raw, classes, bounds, store)
            except ValidationError as exc:
                if single:
                    raise
                raise ValidationError(f"[{index}].{exc.field}", exc.message) from None
            policy = registry.make_policy(args.policy, options, seed=args.seed)
            scheduler = Scheduler(scenario.store, policy, slo=slo, alpha_s=args.allocation_s,
                                  freshness=cluster.freshness(), recent=scenario.recent)
            scheduler.set_node_facts(scenario.facts)
            decision = scheduler.decide_one(scenario.request, scenario.now, explain=args.explain)
        results.append(decision.to_dict(with_explain=args.explain))
    return results[0] if single else results


@contextlib.contextmanager
def _store(
    args: argparse.Namespace, classes: ClassTable, bounds: RegionBounds
) -> Iterator[ClusterStore | None]:
    """None (a fresh in-memory store per scenario), or a Redis store under its own prefix."""
    if args.store == "memory":
        yield None
        return
    from host_registry.redis_store import RedisStore  # the I/O edge, only when asked for

    prefix = f"decide-{uuid.uuid4().hex[:12]}"
    store = RedisStore.from_url(args.redis_url, classes, bounds, prefix)
    try:
        yield store
    finally:
        store.flush()


def run(args: argparse.Namespace) -> int:
    result = decide_all(read_json_file(args.scenario, "scenario"), args)
    print(json.dumps(result, indent=2))
    return 0
