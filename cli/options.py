"""Options shared by several ``greenswarm bench`` actions (simulate, replay, generate)."""

from __future__ import annotations

import argparse

from measure.energy import DEFAULT_POWER_TABLE, POWER_TABLES
from workloads.cluster import THESIS_HOSTS_SPEC


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
