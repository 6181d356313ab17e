"""The policies' typed options (scheduler.plugin) as command-line options, for ``greenswarm
decide`` and ``greenswarm bench simulate``.

Every field of ``ClusterOptions`` and of every registered policy's options dataclass becomes
``--dashed-name``; the manager reads the same fields from ``GREENSWARM_<NAME>``
(manager/settings.py). Nothing here names a policy: a new plugin's options appear by themselves.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from domain.errors import ValidationError
from scheduler import registry
from scheduler.plugin import ClusterOptions, LoadAware, OptionField, build_options, option_fields


def _argument_type(option: OptionField) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            return option.parse(text, option.flag)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    parse.__name__ = option.kind.__name__  # argparse names the type in its error
    return parse


def _add(group: argparse._ArgumentGroup, option: OptionField, owner: str) -> None:
    where = f"{owner}: " if owner else ""
    if option.kind is bool:
        group.add_argument(option.flag, action=argparse.BooleanOptionalAction,
                           default=option.default, help=f"{where}{option.help}")
        return
    choices = option.choices
    metavar = "{" + ",".join(choices) + "}" if choices else (option.metavar or "VALUE")
    group.add_argument(option.flag, type=_argument_type(option), default=option.default,
                       metavar=metavar,
                       help=f"{where}{option.help} (default: {option.default})")


def add_policy_options(parser: argparse.ArgumentParser, *, simulated: bool = True) -> None:
    """The cluster's options, then each policy's (a name several policies share once)."""
    group = parser.add_argument_group(
        "policy options", "the class table and region bounds, and each policy's own options")
    seen: dict[str, OptionField] = {}
    for option in option_fields(ClusterOptions):
        _add(group, option, "")
        seen[option.name] = option
    for plugin in registry.plugins(simulated=True if simulated else None):
        for option in option_fields(plugin.options):
            earlier = seen.get(option.name)
            if earlier is not None:
                if (earlier.kind, earlier.default) != (option.kind, option.default):
                    raise TypeError(f"policy {plugin.name}: option {option.name} differs from "
                                    "another policy's option of the same name")
                continue
            _add(group, option, plugin.name)
            seen[option.name] = option


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """Raises ValidationError (field ``region_bounds``) unless 0 < LEE <= EED < 1."""
    return build_options(ClusterOptions, vars(args))


def policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """Each registered policy's options, by policy name, from the command line."""
    values = vars(args)
    return {plugin.name: build_options(plugin.options, values)
            for plugin in registry.plugins()}


def describe(args: argparse.Namespace, policies: list[str]) -> str:
    """One line for a report: the settings a run used (the policies' own options in the
    middle, each once)."""
    cluster = cluster_options(args)
    parts = [f"overbooking model {cluster.overbooking_model}"]
    for name in policies:
        for option in option_fields(registry.plugin(name).options):
            part = f"{option.name.replace('_', ' ')} {getattr(args, option.name)}"
            if part not in parts:
                parts.append(part)
    parts.append(f"regions LEE < {cluster.lee_below:g} <= DEE <= {cluster.eed_above:g} < EED")
    options = policy_options(args)
    if any(isinstance(policy, LoadAware) and policy.predicts_recent
           for policy in (registry.plugin(name).make(options[name]) for name in policies)):
        parts.append(f"stale after {cluster.stale_after_s:g} s; predicted use of unmeasured "
                     f"tasks {cluster.predict_multiplier:g} x allocation")
    return "; ".join(parts)
