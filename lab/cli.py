"""`greenswarm lab ...`: the local multi-node Swarm of DESIGN 6.

    greenswarm lab up [--nodes N] [--managers M] [--node-cpus C] [--node-memory M]
                      [--images all|minimal|none] [--clusters K] [--inter-cluster-latency-ms MS]
    greenswarm lab down [--purge]
    greenswarm lab status [--json]
    greenswarm lab images [--force] [--images all|minimal]
    greenswarm lab power serve|stop|on|off|status ...   (lab/power_server.py)

Wired into the main CLI by ``register(subparsers)``; also runnable as ``python -m lab``.
Heavy imports happen inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from lab.model import ImageSet

if TYPE_CHECKING:
    from lab.settings import LabSettings

DEFAULT_NODES = 3
DEFAULT_CPUS = "1"
DEFAULT_MEMORY = "2g"
DEFAULT_CLUSTERS = 1
DEFAULT_LATENCY_MS = 10.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lab = subparsers.add_parser(
        "lab", help="run a real multi-node Swarm on this machine (root)",
        description="A real multi-node Docker Swarm on one machine: one dockerd per node in its "
                    "own network namespace and cgroup (DESIGN 6).")
    commands = lab.add_subparsers(dest="lab_command", metavar="LAB_COMMAND", required=True)

    up = commands.add_parser("up", help="create or reconcile the lab (idempotent)")
    up.add_argument("--nodes", type=int, default=DEFAULT_NODES,
                    help=f"number of worker nodes (default {DEFAULT_NODES})")
    up.add_argument("--managers", type=int, default=0,
                    help="make nodes 1..M Swarm managers too, besides the main engine (3 for "
                         "the HA stack, DESIGN 13: raft keeps its quorum when one is lost); "
                         "default 0: every node a worker")
    up.add_argument("--node-cpus", default=DEFAULT_CPUS,
                    help=f"CPU cores per node, enforced by a CFS quota (default {DEFAULT_CPUS})")
    up.add_argument("--node-memory", default=DEFAULT_MEMORY,
                    help=f"memory per node, e.g. 512m, 2g (default {DEFAULT_MEMORY})")
    up.add_argument("--images", choices=[str(s) for s in ImageSet], default=str(ImageSet.ALL),
                    help="images to build and load into the nodes: all (default), minimal "
                         "(busybox only) or none")
    up.add_argument("--clusters", type=int, default=DEFAULT_CLUSTERS,
                    help="number of Swarms (default 1): cluster 1 is managed by the main engine, "
                         "each further one has its own bridge, manager engine and --nodes "
                         "workers (DESIGN 12)")
    up.add_argument("--inter-cluster-latency-ms", type=float, default=DEFAULT_LATENCY_MS,
                    help="delay each way between clusters, by netem on their bridges "
                         f"(default {DEFAULT_LATENCY_MS:g}; 0 for none)")
    up.set_defaults(handler=_up)

    down = commands.add_parser("down", help="remove everything the lab created")
    down.add_argument("--purge", action="store_true",
                      help="also delete the node data roots (the cache of loaded images)")
    down.set_defaults(handler=_down)

    status = commands.add_parser("status", help="show the nodes and their state")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(handler=_status)

    images = commands.add_parser("images", help="build the offline images (and load them into "
                                                "running nodes)")
    images.add_argument("--force", action="store_true",
                        help="rebuild from scratch (new debootstrap, no build cache)")
    images.add_argument("--images", choices=[str(ImageSet.ALL), str(ImageSet.MINIMAL)],
                        default=str(ImageSet.ALL),
                        help="all (default) or minimal (greenswarm/busybox only, seconds)")
    images.set_defaults(handler=_images)

    from lab.power_server import register as register_power  # `lab power ...` (DESIGN 3.15)

    register_power(commands)


def _report(line: str) -> None:
    print(line, flush=True)


def _settings() -> LabSettings:
    from lab.settings import settings_from_env

    return settings_from_env()


def _up(args: argparse.Namespace) -> int:
    from lab import lab, status
    from lab.settings import parse_cpus, parse_node_memory

    started = time.monotonic()
    settings = _settings().with_size(args.nodes, parse_cpus(args.node_cpus),
                                     parse_node_memory(args.node_memory))
    settings = settings.with_clusters(args.clusters, args.inter_cluster_latency_ms)
    settings = settings.with_managers(args.managers)
    lab.up(settings, ImageSet(args.images), _report)
    print(status.render(status.collect(settings)))
    print(f"lab: up in {time.monotonic() - started:.1f}s; state in {settings.paths.state_file}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from lab.down import down

    started = time.monotonic()
    down(_settings(), args.purge, _report)
    print(f"lab: down in {time.monotonic() - started:.1f}s")
    return 0


def _status(args: argparse.Namespace) -> int:
    from lab import status

    current = status.collect(_settings())
    if args.json:
        json.dump(current.to_dict(), sys.stdout, indent=2, sort_keys=True)
        print()
    else:
        print(status.render(current))
    if current.state is None:
        return 3  # no lab (as `systemctl status` does for an inactive unit)
    return 0 if current.up else 1


def _images(args: argparse.Namespace) -> int:
    from domain.units import format_bytes
    from lab import lab

    results = lab.images_command(_settings(), args.force, _report, ImageSet(args.images))
    width = max((len(r.tag) for r in results), default=0)
    for r in results:
        print(f"{r.tag.ljust(width)}  {r.image_id[7:19]}  {format_bytes(r.size_bytes):>9}  "
              f"{'built' if r.built else 'cached'} in {r.seconds:.1f}s")
    return 0
