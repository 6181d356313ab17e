"""The energy policy's experiment settings as command-line options, shared by ``greenswarm
decide`` and ``greenswarm bench simulate``.

The manager takes the same settings from its environment (manager.settings); the defaults
here are the same ones.
"""

from __future__ import annotations

import argparse

from domain.classes import ClassTable, OverbookingModel
from domain.regions import RegionBounds
from scheduler.policies.energy import EmptyHosts

_DEFAULT_BOUNDS = RegionBounds()


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """``--overbooking-model``, ``--empty-hosts``, ``--lee-below`` and ``--eed-above``."""
    parser.add_argument(
        "--overbooking-model", default=OverbookingModel.THESIS.value,
        choices=[m.value for m in OverbookingModel],
        help="class table (DESIGN 3.2): thesis, M(c) = 1, 7/6, 4/3, 3/2 (default); or label, "
        "M(c) = 1, 1.2, 1.5, 2.0",
    )
    parser.add_argument(
        "--empty-hosts", default=EmptyHosts.LAST.value, choices=[e.value for e in EmptyHosts],
        help="energy policy: empty hosts after every LEE and DEE host (last, the default) or "
        "among the LEE hosts as in the thesis (lee)",
    )
    parser.add_argument(
        "--lee-below", type=float, default=_DEFAULT_BOUNDS.lee_below, metavar="U",
        help=f"a host is in LEE below this utilization (default {_DEFAULT_BOUNDS.lee_below:g})",
    )
    parser.add_argument(
        "--eed-above", type=float, default=_DEFAULT_BOUNDS.eed_above, metavar="U",
        help=f"a host is in EED above this utilization (default {_DEFAULT_BOUNDS.eed_above:g})",
    )


def class_table(args: argparse.Namespace) -> ClassTable:
    return ClassTable(OverbookingModel(args.overbooking_model))


def region_bounds(args: argparse.Namespace) -> RegionBounds:
    """Raises ValidationError (field ``region_bounds``) unless 0 < LEE <= EED < 1."""
    return RegionBounds(args.lee_below, args.eed_above)


def empty_hosts(args: argparse.Namespace) -> EmptyHosts:
    return EmptyHosts(args.empty_hosts)


def describe(args: argparse.Namespace) -> str:
    """One line for a report: which settings a run used."""
    return (
        f"overbooking model {args.overbooking_model}; empty hosts {args.empty_hosts}; "
        f"regions LEE < {args.lee_below:g} <= DEE <= {args.eed_above:g} < EED"
    )
