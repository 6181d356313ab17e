"""``greenswarm policies``: the registration table of the placement policies, as the manager,
``decide``, ``bench simulate`` and the replay see it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from scheduler import registry
from scheduler.plugin import ClusterOptions, PlacedBy, option_fields


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "policies",
        help="list the placement policies and their options",
        description="Every registered policy (scheduler/registry.py) with its options; "
        "GREENSWARM_POLICY and --policy/--policies take these names.",
    )
    parser.add_argument("--simulated", action="store_true",
                        help="only the policies the simulator runs (leave out the live-only)")
    parser.add_argument("--names", action="store_true", help="only the names, one per line")
    parser.add_argument("--json", action="store_true", help="the table as JSON")
    parser.set_defaults(handler=run)


def table(*, simulated: bool) -> list[dict[str, Any]]:
    return [
        {
            "name": plugin.name,
            "summary": plugin.summary,
            "simulated": plugin.simulated,
            "placed_by": plugin.placed_by.value,
            "passes": list(plugin.passes),
            "options": [
                {"name": o.name, "flag": o.flag, "default": str(o.default), "help": o.help,
                 "choices": o.choices}
                for o in option_fields(plugin.options)
            ],
        }
        for plugin in registry.plugins(simulated=True if simulated else None)
    ]


def run(args: argparse.Namespace) -> int:
    rows = table(simulated=args.simulated)
    if args.names:
        sys.stdout.write("".join(f"{row['name']}\n" for row in rows))
        return 0
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        live = "" if row["simulated"] else " (live only)"
        by = " (Swarm places it)" if row["placed_by"] == PlacedBy.SWARM else ""
        print(f"{row['name']}{live}{by}: {row['summary']}")
        for option in row["options"]:
            print(f"    {option['flag']} (default {option['default']}): {option['help']}")
    print("every policy:")
    for option in option_fields(ClusterOptions):
        print(f"    {option.flag} (default {option.default}): {option.help}")
    return 0
