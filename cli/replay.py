"""``greenswarm bench replay``: a trace replayed live against a manager (DESIGN 7.2).

    greenswarm bench replay --trace FILE --manager URL --speedup K --policy-label NAME
        --out DIR [--duration-s S] [--token-file F] [--no-probes] [--port-base 20000]
        [--id-prefix P] [--power-table NAME] [--wait-hosts-s 60] [--queue-new] [--progress]
        [--slo C=V,...] [--allocation-s S]

Writes ``DIR/<policy-label>/result.json`` and ``host_series.csv`` (measure/result_files.py, as
the simulator does, so ``greenswarm bench report DIR`` shows live and simulated runs side by
side), ``DIR/<policy-label>/requests.jsonl`` (every request's service level, DESIGN 3.10: its
availability from its history, judged by ``--slo``), ``DIR/<policy-label>/replay.json`` (what
the replay itself saw: submission lag, client round trips, errors, counters) and
``DIR/<policy-label>/histories.jsonl`` (every request's record with its history as the manager
had it at the end of the run, before the clean-up). The policy is the manager's own
(``GREENSWARM_POLICY``); the label only names the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from cli.argtypes import positive_float
from replay.driver import RECORDS_FILE, REPLAY_FILE

DEFAULT_SPEEDUP = 10.0


def _speedup(text: str) -> float:
    value = positive_float(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"must be in (0, 1000], got {text!r}")
    return value


def add_replay(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cli.options import add_power_table_argument, add_service_level_arguments
    from replay.plan import DEFAULT_PORT_BASE

    parser = actions.add_parser(
        "replay", help="replay a trace live through a manager's REST API",
        description="Replay a trace against a live manager with real containers, time "
        "compressed by --speedup (DESIGN 7.2); writes DIR/<policy-label>/result.json for "
        "'greenswarm bench report DIR'. The manager's own policy decides.",
    )
    parser.add_argument("--trace", required=True, metavar="FILE",
                        help="a trace file (.jsonl or .jsonl.gz)")
    parser.add_argument("--manager", default=os.environ.get("GREENSWARM_URL",
                                                            "http://127.0.0.1:8080"),
                        metavar="URL", help="the manager (default: $GREENSWARM_URL or "
                        "http://127.0.0.1:8080)")
    parser.add_argument("--speedup", type=_speedup, default=DEFAULT_SPEEDUP, metavar="K",
                        help=f"time compression: trace second t is wall second t/K (default: "
                        f"{DEFAULT_SPEEDUP:g})")
    parser.add_argument("--policy-label", required=True, metavar="NAME",
                        help="name of the run in the report, e.g. live-energy")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--duration-s", type=positive_float, default=None, metavar="S",
                        help="trace seconds to replay (default: the trace's duration)")
    parser.add_argument("--token-file", metavar="F", default=None,
                        help="file holding the bearer token (default: $GREENSWARM_TOKEN, else "
                        "the file $GREENSWARM_TOKEN_FILE names)")
    parser.add_argument("--no-probes", action="store_true",
                        help="do not add the probe jobs of known length every 5 minutes (the "
                        "simulator adds them by default)")
    parser.add_argument("--port-base", type=int, default=DEFAULT_PORT_BASE, metavar="PORT",
                        help=f"services publish PORT, PORT+1, ... on their node (default: "
                        f"{DEFAULT_PORT_BASE})")
    parser.add_argument("--id-prefix", default="", metavar="P",
                        help="prepended to every request id (default: none)")
    add_power_table_argument(parser)
    add_service_level_arguments(parser, measured=True)
    parser.add_argument("--wait-hosts-s", type=positive_float, default=60.0, metavar="S",
                        help="wait this long for the manager to know the trace's number of "
                        "hosts (default: 60)")
    parser.add_argument("--queue-new", action="store_true",
                        help="every request asks to queue (DESIGN 3.7): one no pass places "
                        "waits in the manager's pending queue instead of being refused, and "
                        "counts as successful once placed, its wait in the scheduling delay "
                        "(as bench simulate --queue-new)")
    parser.add_argument("--progress", action="store_true",
                        help="a progress line even when stderr is not a terminal (then one "
                        "line every 15 s)")
    parser.set_defaults(handler=run_replay)


def _token_from_file(path: str) -> str:
    """The token in ``--token-file``; errors name that option, not the environment."""
    from domain.errors import ValidationError
    from domain.settings import shared_token

    try:
        token = shared_token({"GREENSWARM_TOKEN_FILE": path})
    except ValidationError as exc:
        raise ValidationError("token_file", exc.message) from None
    if not token:
        raise ValidationError("token_file", f"{path} holds no token")
    return token


def run_replay(args: argparse.Namespace) -> int:
    from cli.options import slo_table
    from client.manager import ManagerClient
    from domain.energy import PowerModel
    from domain.errors import ValidationError
    from domain.settings import shared_token
    from measure.result_files import check_policy_name, save_result
    from replay.driver import Replay, ReplayOptions
    from replay.plan import ReplayPlanConfig, plan_submissions
    from sim.runner import THESIS_PROBES, requests_with_probes
    from workloads.outfiles import out_directory
    from workloads.trace_file import read_trace

    label = check_policy_name(args.policy_label)
    out_directory(args.out, create=False)  # refused before the replay, not after it
    slo = slo_table(args)
    if args.token_file:
        token = _token_from_file(args.token_file)
    else:
        token = shared_token(os.environ)
        if not token:
            raise ValidationError("token", "no bearer token: give --token-file, or set "
                                  "GREENSWARM_TOKEN or GREENSWARM_TOKEN_FILE")
    trace = read_trace(args.trace)
    duration = args.duration_s or trace.header.duration_s
    probes = None if args.no_probes else THESIS_PROBES
    plan = plan_submissions(
        requests_with_probes(trace.requests, duration, probes),
        ReplayPlanConfig(speedup=args.speedup, duration_s=duration, port_base=args.port_base,
                         id_prefix=args.id_prefix, queue_new=args.queue_new),
    )
    show = args.progress or sys.stderr.isatty()
    options = ReplayOptions(
        policy_label=label,
        speedup=args.speedup,
        duration_s=duration,
        power_model=PowerModel.named(args.power_table),
        wait_hosts_s=args.wait_hosts_s,
        progress=sys.stderr if show else None,
        progress_tty=sys.stderr.isatty(),
        slo=slo,
        allocation_s=args.allocation_s,
    )
    print(f"replaying {len(plan)} requests of {args.trace} ({duration:g} trace seconds) "
          f"against {args.manager} at speedup {args.speedup:g}: about "
          f"{duration / args.speedup:,.0f} s wall", flush=True)
    replay = Replay(ManagerClient(args.manager, token), trace.header, plan, options)
    result, report = replay.run()
    directory = save_result(result, args.out)
    (directory / REPLAY_FILE).write_text(json.dumps(report.to_json(), indent=2) + "\n",
                                         encoding="utf-8")
    with (directory / RECORDS_FILE).open("w", encoding="utf-8") as handle:
        for record in replay.records:
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")
    m = result.metrics
    c = report.counters
    print(f"wrote {directory}/result.json, requests.jsonl, {REPLAY_FILE} and {RECORDS_FILE} "
          f"({report.wall_s:,.0f} s wall)")
    print(f"  requests {m.requests}: {m.successful} placed, {m.failed} refused "
          f"(success {(m.success_rate or 0) * 100:.1f}%), cuts {m.cuts}, kills {m.kills}, "
          f"victims lost {m.victims_lost}, OOM kills {m.oom_kills}")
    if args.queue_new:
        print(f"  queued {c.queued} new request(s): {c.queued_placed} placed later, "
              f"{m.queued_at_end} still waiting at the end")
    print(f"  met their SLO ({slo.describe()}): {_pct(m.slo_fulfilment)} "
          f"({m.slo_met} of {m.requests}); preemptions per request {m.preemptions_mean or 0:.2f}"
          f", work lost {m.work_lost_cpu_s or 0:,.0f} CPU-s; containers seen starting "
          f"{c.starts}")
    print(f"  jobs finished {m.jobs_finished}, services stopped {m.services_stopped}, "
          f"response rounds {m.responses} (failed {c.rounds_failed}, not ready "
          f"{c.rounds_not_ready})")
    print(f"  POST round trip p50 {_ms(c.client_rtt_ms.p50)} p99 {_ms(c.client_rtt_ms.p99)}; "
          f"scheduler decision p50 {_ms(c.server_decision_ms.p50)} p99 "
          f"{_ms(c.server_decision_ms.p99)}; submission lag max "
          f"{report.submit_lag_s.max or 0:.2f} s")
    if report.cleanup_errors:
        print(f"  clean-up left {len(report.cleanup_errors)} request(s): see {REPLAY_FILE}")
        return 1
    return 0


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"
