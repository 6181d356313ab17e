"""``python -m lab ...``: the lab's commands without the main ``greenswarm`` CLI."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from domain.errors import GreenSwarmError
from lab.cli import register


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab")
    register(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(["lab", *(sys.argv[1:] if argv is None else argv)])
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except GreenSwarmError as exc:
        print(f"greenswarm lab {args.lab_command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
