"""Options shared by several ``greenswarm bench`` actions (simulate, replay, generate)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from cli.argtypes import non_negative_float
from domain.energy import DEFAULT_POWER_TABLE, POWER_TABLES
from domain.errors import ValidationError
from domain.slo import DEFAULT_ALLOCATION_S, SloTable
from workloads.cluster import THESIS_HOSTS_SPEC

SLO_ENV = "GREENSWARM_SLO"


def add_hosts_argument(
    parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
    default: str = THESIS_HOSTS_SPEC,
) -> None:
    """``--hosts SPEC`` (see workloads.cluster); reusable by simulate and replay."""
    parser.add_argument(
        "--hosts", default=default, metavar="SPEC",
        help=f"cluster as [COUNTx]CORESc MEMORY(m|g|t), groups joined by '+' (default: "
        f"{default}, the thesis cluster: 5 hosts of 8 cores and 12 GiB)",
    )


def add_power_table_argument(parser: argparse.ArgumentParser) -> None:
    """``--power-table NAME``: for the simulate and replay actions (energy of the run)."""
    parser.add_argument(
        "--power-table", default=DEFAULT_POWER_TABLE, choices=sorted(POWER_TABLES),
        help=f"SPECpower table of the hosts (default: {DEFAULT_POWER_TABLE}; see "
        "'greenswarm bench power-tables')",
    )


def _slo(text: str) -> SloTable:
    try:
        return SloTable.parse(text)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def add_service_level_arguments(
    parser: argparse.ArgumentParser, *, measured: bool = False, decide: bool = False
) -> None:
    """``--slo C=V,...`` and ``--allocation-s S`` (DESIGN 3.10): what every request's service
    level is judged by; for the simulate, replay and decide actions."""
    parser.add_argument(
        "--slo", type=_slo, default=None, metavar="C=V,...",
        help="availability objective of each class named, e.g. 1=1,2=0.9,4=0.5; the others "
        "keep 1 - t(c) of the thesis model: 1, 5/6, 2/3, 1/2 (default: $" + SLO_ENV + ", else "
        "those)",
    )
    where = ("where the manager reports no container start (its 'started' events give the "
             "measured one)" if measured else "what the qos policy expects of its victims"
             if decide else "the simulator starts runs at once: charged in the accounting "
             "only; the queue's order and the qos policy expect it too")
    parser.add_argument(
        "--allocation-s", type=non_negative_float, default=DEFAULT_ALLOCATION_S, metavar="S",
        help="alpha: the time from a placement to a running container, charged to a request "
        f"as waiting on every placement after its first; {where} (default: "
        f"{DEFAULT_ALLOCATION_S:g}, the lab's measured maximum)",
    )


def slo_table(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> SloTable:
    """``--slo``, else ``$GREENSWARM_SLO`` (a bad value names it), else the defaults."""
    if args.slo is not None:
        table: SloTable = args.slo
        return table
    return SloTable.parse(environ.get(SLO_ENV, ""), SLO_ENV)
