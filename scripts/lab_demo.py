"""Helpers of scripts/lab-demo.sh: bounded waits on the manager's REST API and the final report.

Only GETs, except ``reset`` (DELETE of the demo's own requests, with GREENSWARM_TOKEN). Node
names come from the Swarm (``docker node ls`` through the main engine's socket), so the report
says gs-node2 rather than a Swarm node id. Exit status 0 = done, 1 = timed out or failed.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable

from client.manager import ManagerClient
from domain.errors import GreenSwarmError
from domain.events import EventKind, event_from_json
from domain.labels import LABEL_TASK
from domain.lifecycle import FINAL

DOCKER = os.environ.get("GREENSWARM_DOCKER_CLI", "/usr/bin/docker")


def node_names() -> dict[str, str]:
    """Swarm node id -> hostname (gs-node1 ...), from the main engine."""
    out = subprocess.run(
        [DOCKER, "node", "ls", "--format", "{{.ID}} {{.Hostname}}"],
        capture_output=True, text=True, timeout=30, check=False,
    ).stdout
    names = {}
    for line in out.splitlines():
        node_id, _, hostname = line.partition(" ")
        names[node_id] = hostname
    return names


def name_of(host_id: str | None, names: dict[str, str]) -> str:
    if not host_id:
        return "-"
    return next((n for i, n in names.items() if host_id.startswith(i) or i.startswith(host_id)),
                host_id[:12])


def wait(check: Callable[[], bool], timeout_s: float, what: str) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except (GreenSwarmError, KeyError):
            pass
        time.sleep(1.0)
    print(f"lab-demo: timed out after {timeout_s:.0f} s waiting for {what}", file=sys.stderr)
    return False


# -- subcommands ----------------------------------------------------------------------------


def cmd_alive(api: ManagerClient, args: argparse.Namespace) -> int:
    """Exit 0 when the manager answers /healthz with status ok."""
    return 0 if api.answers() else 1


def cmd_ready(api: ManagerClient, args: argparse.Namespace) -> int:
    """The manager answers, sees N hosts, and every host's monitor has reported."""
    def ready() -> bool:
        if not api.answers():
            return False
        hosts = api.get("/hosts")
        reported = [h for h in hosts if h["cpu_util"] > 0 or h["memory_util"] > 0]
        return bool(len(hosts) == args.hosts and len(reported) == args.hosts)
    return 0 if wait(ready, args.timeout_s, f"{args.hosts} hosts reported by their monitors") \
        else 1


def cmd_reset(api: ManagerClient, args: argparse.Namespace) -> int:
    """Stop every request of earlier demo runs that still runs or waits."""
    stopped = []
    for record in api.get("/requests"):
        if record["id"].startswith(args.prefix) and record["status"] not in FINAL:
            api.delete(f"/requests/{record['id']}")
            stopped.append(record["id"])
    print(f"stopped {len(stopped)} request(s) of earlier runs: {' '.join(stopped) or 'none'}")
    if args.quiet:  # shutting down: no placement follows that others could change
        return 0
    others = [r["id"] for r in api.get("/requests")
              if r["status"] not in FINAL and not r["id"].startswith(args.prefix)]
    if others:
        print(f"note: {len(others)} other request(s) still run ({' '.join(others[:5])}...): the "
              "placements below may differ from the explanation")
    return 0


def cmd_quiet(api: ManagerClient, args: argparse.Namespace) -> int:
    """Every host idle in the registry: no task of ours, and back in LEE."""
    def quiet() -> bool:
        return all(h["task_count"] == 0 and h["region"] == "LEE" for h in api.get("/hosts"))
    return 0 if wait(quiet, args.timeout_s, "every host to be empty and in LEE") else 1


def cmd_host(api: ManagerClient, args: argparse.Namespace) -> int:
    """Print the node name of a request's host."""
    record = api.get(f"/requests/{args.request}")
    print(name_of(record["host"], node_names()))
    return 0


def cmd_wait_region(api: ManagerClient, args: argparse.Namespace) -> int:
    """Wait until the host of a request is in one of the regions (as its monitor reports)."""
    host_id = api.get(f"/requests/{args.request}")["host"]

    def there() -> bool:
        return bool(api.get(f"/registry/hosts/{host_id}")["region"] in args.regions)
    return 0 if wait(there, args.timeout_s, f"the host of {args.request} to be "
                     f"{'/'.join(args.regions)}") else 1


def cmd_wait_status(api: ManagerClient, args: argparse.Namespace) -> int:
    def there() -> bool:
        record = api.get(f"/requests/{args.request}")
        return bool(record["status"] in args.statuses and record["kills"] >= args.kills)
    again = f" after {args.kills} kill(s)" if args.kills else ""
    return 0 if wait(there, args.timeout_s,
                     f"{args.request} to be {'/'.join(args.statuses)}{again}") else 1


def cmd_empty_host(api: ManagerClient, args: argparse.Namespace) -> int:
    """Print the name of a host on that holds no task (exit 1: none)."""
    for host in api.get("/hosts"):
        if host["task_count"] == 0 and host.get("power", {}).get("state", "on") == "on":
            print(host.get("name") or host["id"])
            return 0
    print("lab-demo: every host holds a task", file=sys.stderr)
    return 1


def cmd_wait_power(api: ManagerClient, args: argparse.Namespace) -> int:
    """Wait until the host named NODE is in the power state (GET /hosts, DESIGN 3.15)."""
    def there() -> bool:
        host = next(h for h in api.get("/hosts") if args.node in (h.get("name"), h["id"]))
        return bool(host.get("power", {}).get("state") == args.state)
    return 0 if wait(there, args.timeout_s, f"{args.node} to be {args.state}") else 1


def _lab(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *argv], capture_output=True, text=True,
                          timeout=300, check=False)


def _activate(node_id: str) -> bool:
    return subprocess.run([DOCKER, "node", "update", "--availability", "active", node_id],
                          capture_output=True, timeout=30, check=False).returncode == 0


def cmd_power_restore(api: ManagerClient, args: argparse.Namespace) -> int:
    """Switch on the lab nodes an earlier run's power manager left off, and make them active
    in the Swarm again (the demo starts with every node on; no manager needed)."""
    import json

    done = _lab("power", "status")
    if done.returncode != 0:
        print(f"lab-demo: lab power status failed: {done.stderr.strip()}", file=sys.stderr)
        return 1
    for line in done.stdout.splitlines():
        node = json.loads(line)
        if node["power"] != "off":
            continue
        print(f"switching {node['name']} on again (left off by an earlier run)")
        started = _lab("power", "on", node["name"])
        if started.returncode != 0:
            print(f"lab-demo: {started.stderr.strip()}", file=sys.stderr)
            return 1
        node_id = str(node.get("swarm_node_id") or "")
        if node_id and not wait(functools.partial(_activate, node_id), 120,
                                f"{node['name']} to be active in the Swarm"):
            return 1
    return 0


def _docker_resources(node: str, container_task: str) -> str:
    """CPU shares and memory limit of a task's container, read on its node's own engine."""
    socket = f"unix:///run/greenswarm/lab/{node}.sock"
    ids = subprocess.run(
        [DOCKER, "-H", socket, "ps", "-q", "--filter", f"label={LABEL_TASK}={container_task}"],
        capture_output=True, text=True, timeout=30, check=False,
    ).stdout.split()
    if not ids:
        return "no running container"
    out = subprocess.run(
        [DOCKER, "-H", socket, "inspect", "--format",
         "{{.HostConfig.CpuShares}} {{.HostConfig.Memory}}", ids[0]],
        capture_output=True, text=True, timeout=30, check=False,
    ).stdout.split()
    return f"container {ids[0][:12]}: CpuShares={out[0]} Memory={out[1]}" if out else "?"


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f}MiB"


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip())


# The history events the report lists.
SHOWN_KINDS = {EventKind.PLACED, EventKind.CUT, EventKind.RESTORED, EventKind.KILLED,
               EventKind.PREEMPTED, EventKind.HOST_LOST, EventKind.QUEUED, EventKind.ENDED}


def cmd_report(api: ManagerClient, args: argparse.Namespace) -> int:
    names = node_names()
    records = [api.get(f"/requests/{r['id']}") for r in api.get("/requests")
               if r["id"].startswith(args.prefix)]
    records.sort(key=lambda r: r["created_at"])
    rows = [["REQUEST", "IMAGE", "CLASS", "TYPE", "NODE", "STATUS", "CPU now/asked",
             "MEMORY now/asked", "CUT"]]
    for r in records:
        cur, orig = r["current"], r["original"]
        rows.append([r["id"], r["image"], str(r["class"]), r["type"], name_of(r["host"], names),
                     r["status"], f"{cur['cpu_shares']}/{orig['cpu_shares']}",
                     f"{_mib(cur['memory'])}/{_mib(orig['memory'])}", r["cut_received"]])
    _table(rows)
    print()
    print("What the manager did, in order (from each request's history):")
    events = []
    for r in records:
        for entry in r["history"]:
            event = event_from_json(entry)
            if event.kind in SHOWN_KINDS:
                text = event.reason
                for host_id, name in names.items():
                    text = text.replace(host_id, name)
                events.append((event.t or 0.0, r["id"], text))
    for stamp, request_id, text in sorted(events):
        print(f"  {time.strftime('%H:%M:%S', time.localtime(stamp))}  {request_id:<14}{text}")
    print()
    rows = [["NODE", "REGION", "CLASS", "U cpu", "U mem", "CPU booked", "OF", "TASKS"]]
    for h in sorted(api.get("/hosts"), key=lambda h: name_of(h["id"], names)):
        rows.append([name_of(h["id"], names), h["region"], str(h["class"] or "empty"),
                     f"{h['cpu_util']:.2f}", f"{h['memory_util']:.2f}",
                     f"{h['cpu_allocated']}/{h['cpu_capacity']}",
                     f"{h['overbooking_factor']:.2f}",
                     " ".join(sorted(t["id"] for t in h["tasks"]))])
    _table(rows)
    if args.evidence:
        print()
        print("Seen on the nodes' own engines (docker -H unix:///run/greenswarm/lab/<node>.sock"
              " inspect):")
        for request_id in args.evidence:
            record = next((r for r in records if r["id"] == request_id), None)
            if record is None or not record["host"]:
                continue
            node = name_of(record["host"], names)
            print(f"  {request_id:<18}on {node}: {_docker_resources(node, request_id)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lab_demo.py", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("GREENSWARM_URL",
                                                        "http://127.0.0.1:8080"))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("alive")
    ready = sub.add_parser("ready")
    ready.add_argument("--hosts", type=int, required=True)
    ready.add_argument("--timeout-s", type=float, default=120.0)
    reset = sub.add_parser("reset")
    reset.add_argument("--prefix", required=True)
    reset.add_argument("--quiet", action="store_true",
                       help="say nothing of other requests (when the demo shuts down)")
    quiet = sub.add_parser("quiet")
    quiet.add_argument("--timeout-s", type=float, default=60.0)
    host = sub.add_parser("host")
    host.add_argument("request")
    region = sub.add_parser("wait-region")
    region.add_argument("request")
    region.add_argument("regions", nargs="+")
    region.add_argument("--timeout-s", type=float, default=90.0)
    status = sub.add_parser("wait-status")
    status.add_argument("request")
    status.add_argument("statuses", nargs="+")
    status.add_argument("--kills", type=int, default=0,
                        help="and taken off a host at least this often (running again)")
    status.add_argument("--timeout-s", type=float, default=90.0)
    sub.add_parser("empty-host")
    power = sub.add_parser("wait-power")
    power.add_argument("node")
    power.add_argument("state", choices=["on", "shutting-down", "off", "booting"])
    power.add_argument("--timeout-s", type=float, default=120.0)
    sub.add_parser("power-restore")
    report = sub.add_parser("report")
    report.add_argument("--prefix", required=True)
    report.add_argument("--evidence", nargs="*", default=[])
    args = parser.parse_args(argv)
    api = ManagerClient(args.url)
    handlers: dict[str, Callable[[ManagerClient, argparse.Namespace], int]] = {
        "alive": cmd_alive, "ready": cmd_ready, "reset": cmd_reset, "quiet": cmd_quiet,
        "host": cmd_host,
        "wait-region": cmd_wait_region, "wait-status": cmd_wait_status, "report": cmd_report,
        "empty-host": cmd_empty_host, "wait-power": cmd_wait_power,
        "power-restore": cmd_power_restore,
    }
    try:
        return handlers[args.command](api, args)
    except GreenSwarmError as exc:
        print(f"lab-demo: the manager at {args.url} failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
