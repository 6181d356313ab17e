"""The ``greenswarm`` command line: one entry point, one subcommand per job.

Each subcommand lives next to the code it drives and exposes ``register(subparsers)``; the heavy
imports happen inside the handlers so ``greenswarm --help`` stays fast.

The process's entry point (every service runs through it: ``greenswarm manager``, ``agent``,
``monitor``, and the simulator's ``bench simulate`` with its worker processes, forked after it):
:func:`main` enables the compiled core before anything else of ours is imported, so this module
imports nothing of ours at its top but the loader.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from native.loader import NativeCoreError, enable

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _registrars() -> list[Registrar]:
    from cli import bench, client, decide, policies, services
    from lab import cli as lab
    from monitor import cli as monitor

    return [
        services.register,
        client.register,
        decide.register,
        policies.register,
        monitor.register,
        lab.register,
        bench.register,
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="greenswarm",
        description="Energy-aware placement, overbooking, cuts and kills for Docker Swarm.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in _registrars():
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Everything after the first ``--`` is handed to the command as ``args.trailing`` (e.g.
    the command of ``greenswarm submit IMAGE [options] -- CMD ARGS...``)."""
    try:
        enable()  # the compiled core, when built for these sources (README, The compiled core)
    except NativeCoreError as exc:
        print(f"greenswarm: error: {exc}", file=sys.stderr)
        return 2
    from domain.errors import GreenSwarmError

    words = list(sys.argv[1:] if argv is None else argv)
    trailing: list[str] = []
    if "--" in words:
        cut = words.index("--")
        words, trailing = words[:cut], words[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(words)
    args.trailing = trailing
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except GreenSwarmError as exc:
        print(f"greenswarm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
