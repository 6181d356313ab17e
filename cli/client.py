"""``greenswarm submit``, ``status`` and ``hosts``: a command-line client of the REST API.

The manager's address comes from --url or GREENSWARM_URL (default http://127.0.0.1:8080), the
token from GREENSWARM_TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from client.manager import DEFAULT_URL, ManagerClient
from domain.errors import ValidationError
from domain.lifecycle import FINAL
from domain.units import format_bytes


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = subparsers.add_parser(
        "submit",
        help="submit a container request",
        usage="greenswarm submit IMAGE --cpu-shares N --memory SIZE --class C --type T "
        "[options] [-- COMMAND ARGS...]",
    )
    submit.add_argument("image")
    submit.add_argument("--cpu-shares", type=int, required=True, help="1024 = one core")
    submit.add_argument("--memory", required=True, help="bytes or a size such as 512m")
    submit.add_argument("--class", dest="cls", type=int, required=True, choices=[1, 2, 3, 4])
    submit.add_argument("--type", required=True, choices=["job", "service"])
    submit.add_argument("--name", help="request id (default: generated)")
    submit.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    submit.add_argument("--port", action="append", default=[], metavar="PUBLISHED:TARGET")
    submit.add_argument("--constraint", action="append", default=[], metavar="EXPR",
                        help="placement constraint as Swarm's, e.g. node.labels.disk==ssd or "
                        "node.hostname!=gs-node2 (repeatable: every one must hold)")
    submit.add_argument("--queue", action="store_true", help="wait in the queue if nothing fits")
    submit.add_argument(
        "--wait",
        action="store_true",
        help="wait until it runs (service) or ends (job); exit 1 if it fails",
    )
    submit.add_argument("--timeout-s", type=float, default=600.0)
    submit.add_argument("--json", action="store_true", help="print the raw JSON answer")
    _common(submit)
    submit.set_defaults(handler=run_submit)

    status = subparsers.add_parser("status", help="show one request, or a table of requests")
    status.add_argument("id", nargs="?")
    status.add_argument("--status", dest="filter", help="only requests in this status")
    status.add_argument("--json", action="store_true")
    _common(status)
    status.set_defaults(handler=run_status)

    hosts = subparsers.add_parser("hosts", help="show hosts: region, class, use and allocation")
    hosts.add_argument("--json", action="store_true")
    _common(hosts)
    hosts.set_defaults(handler=run_hosts)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("GREENSWARM_URL", DEFAULT_URL),
                        help=f"the manager (default: GREENSWARM_URL, else {DEFAULT_URL})")
    parser.add_argument("--token-file", metavar="FILE",
                        help="read the bearer token from FILE (default: GREENSWARM_TOKEN, else "
                        "the file GREENSWARM_TOKEN_FILE names)")


def _token(args: argparse.Namespace) -> str | None:
    """The token of --token-file; None: the environment's (client.manager)."""
    if not args.token_file:
        return None
    try:
        with open(args.token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as exc:
        raise ValidationError("token_file", f"cannot read {args.token_file}: {exc.strerror}") \
            from None
    if not token:
        raise ValidationError("token_file", f"{args.token_file} is empty")
    return token


def run_submit(args: argparse.Namespace) -> int:
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValidationError("env", f"{item!r} is not KEY=VALUE")
        env[key] = value
    body: dict[str, Any] = {
        "image": args.image,
        "cpu_shares": args.cpu_shares,
        "memory": args.memory,
        "class": args.cls,
        "type": args.type,
        "queue": args.queue,
    }
    if args.trailing:
        body["command"] = args.trailing
    if env:
        body["env"] = env
    if args.port:
        body["ports"] = args.port
    if args.name:
        body["name"] = args.name
    if args.constraint:
        body["constraints"] = args.constraint
    api = ManagerClient(args.url, _token(args))
    answer = api.call("POST", "/requests", body)
    record = answer["request"]
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        decision = answer.get("decision") or {}
        print(
            f"{record['id']}: {record['status']}"
            + (f" on {record['host']}" if record.get("host") else "")
            + (f" ({decision.get('reason')})" if decision.get("reason") else "")
        )
    if not args.wait:
        return 1 if record["status"] == "rejected" else 0
    return _wait(api, record["id"], record["type"], args.timeout_s)


def _wait(api: ManagerClient, request_id: str, kind: str, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = api.get(f"/requests/{request_id}")
        status = record["status"]
        done = status in FINAL or (
            kind == "service" and status in {"running", "killed-and-rescheduled"}
        )
        if done:
            print(f"{request_id}: {status}")
            return 0 if status in {"completed", "running", "killed-and-rescheduled"} else 1
        time.sleep(1.0)
    print(f"{request_id}: still {status} after {timeout_s:.0f} s", file=sys.stderr)
    return 1


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _service_cells(service: dict[str, Any] | None) -> list[str]:
    """AVAIL, SLO, Q and PREEMPT of a request (DESIGN 3.10); dashes from an older manager."""
    if not service:
        return ["-", "-", "-", "-"]
    return [_pct(service["availability"]), _pct(service["slo"]), f"{service['q_s']:+.0f}s",
            str(service["preemptions"])]


def run_status(args: argparse.Namespace) -> int:
    api = ManagerClient(args.url, _token(args))
    if args.id:
        record = api.get(f"/requests/{args.id}")
        if args.json:
            print(json.dumps(record, indent=2))
            return 0
        print(
            f"{record['id']}  {record['status']}  class {record['class']} {record['type']}  "
            f"host {record['host'] or '-'}"
        )
        print(
            f"  image {record['image']}  cpu {record['current']['cpu_shares']}/"
            f"{record['original']['cpu_shares']} shares  memory "
            f"{format_bytes(record['current']['memory'])}/"
            f"{format_bytes(record['original']['memory'])}  cut {record['cut_received']}  "
            f"kills {record['kills']}"
        )
        service = record.get("service")
        if service:
            print(
                f"  availability {_pct(service['availability'])} (SLO {_pct(service['slo'])}, "
                f"{'met' if service['met_slo'] else 'missed'})  Q {service['q_s']:+.0f} s  "
                f"ran {service['executed_s']:.0f} s, waited {service['pending_s']:.0f} s  "
                f"preemptions {service['preemptions']}"
            )
        for event in record["history"]:
            stamp = time.strftime("%H:%M:%S", time.localtime(event["t"]))
            print(f"  {stamp}  {event['kind']:<12}  {event['reason']}")
        return 0
    path = "/requests" + (f"?status={args.filter}" if args.filter else "")
    records = api.get(path)
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    rows = [
        [
            r["id"],
            r["status"],
            str(r["class"]),
            r["type"],
            r["host"] or "-",
            f"{r['current']['cpu_shares']}/{r['original']['cpu_shares']}",
            format_bytes(r["current"]["memory"]),
            *_service_cells(r.get("service")),
            r["image"],
        ]
        for r in records
    ]
    print(_table(rows, ["ID", "STATUS", "CLASS", "TYPE", "HOST", "CPU", "MEMORY", "AVAIL",
                        "SLO", "Q", "PREEMPT", "IMAGE"]))
    return 0


def run_hosts(args: argparse.Namespace) -> int:
    hosts = ManagerClient(args.url, _token(args)).call("GET", "/hosts")
    if args.json:
        print(json.dumps(hosts, indent=2))
        return 0
    rows = [
        [
            h["id"][:12],
            h["region"],
            str(h["class"] or "empty"),
            f"{h['cpu_util']:.0%}",
            f"{h['memory_util']:.0%}",
            f"{h['cpu_allocated']}/{h['cpu_capacity']}",
            f"{format_bytes(h['memory_allocated'])}/{format_bytes(h['memory_capacity'])}",
            f"{h['overbooking_factor']:.2f}",
            str(h["task_count"]),
        ]
        for h in hosts
    ]
    print(
        _table(
            rows, ["HOST", "REGION", "CLASS", "CPU", "MEM", "CPU ALLOC", "MEM ALLOC", "OF", "TASKS"]
        )
    )
    return 0
