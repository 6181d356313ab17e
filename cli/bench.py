"""``greenswarm bench ...``: generate and convert traces, report on policy runs.

Wired into ``cli/main.py`` through :func:`register`. Actions::

    greenswarm bench generate --workload thesis|qos-validation-1|qos-validation-2 --seed N
                              --out trace.jsonl [--hosts SPEC] [--duration-s 3600]
                              [--arrival-rate R]
    greenswarm bench convert --format google2011|alibaba IN [IN ...] --out trace.jsonl
                             [--hosts SPEC | --nodes-file CSV [--nodes-sample N]
                             [--nodes-seed S]] [--window-start-s S]
                             [--window-end-s S | --duration-s S] [--limit N]
                             [--resource-scale F]
    greenswarm bench report DIR [--no-plots]
    greenswarm bench power-tables
    greenswarm bench simulate (--trace FILE | --workload thesis --seed N) --out DIR [...]
    greenswarm bench profile [--out FILE] [--docker URL] [...]
    greenswarm bench replay --trace FILE --manager URL --speedup K --policy-label NAME
                            --out DIR [...]

Every handler returns an exit code; errors of the project (``GreenSwarmError``) propagate to
``cli.main.main``, which prints them and exits with 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from cli.argtypes import non_negative_float, positive_float, positive_int
from cli.load_options import add_load_arguments
from cli.options import add_hosts_argument
from cli.profile import add_profile
from cli.replay import add_replay
from cli.simulate import THESIS_WORKLOAD, WORKLOADS, add_simulate
from domain.energy import DEFAULT_POWER_TABLE, POWER_TABLES

Subparsers = "argparse._SubParsersAction[argparse.ArgumentParser]"
ActionRegistrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


# ------------------------------------------------------------------ generate


def _add_generate(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from workloads.cluster import THESIS_HOSTS_SPEC
    from workloads.qos_validation import QOS_VALIDATION_HOSTS_SPEC

    parser = actions.add_parser(
        "generate", help="write a seeded workload trace",
        description="Write the thesis workload (DESIGN 7.1), or one of the QoS-driven paper's "
        "validation tests (DESIGN 7.5), as a JSON Lines trace. A name ending in .gz is "
        "compressed.",
    )
    parser.add_argument("--workload", choices=WORKLOADS, default=THESIS_WORKLOAD,
                        help="workload model (default: thesis); qos-validation-1: 80 class-1, "
                        "80 class-2 and 96 class-4 services in a seeded random order, "
                        "qos-validation-2: 221 class-2 services, one per second, on 20 hosts "
                        "of 4 cores and 3.75 GiB")
    parser.add_argument("--seed", type=int, required=True, help="random seed (an integer)")
    parser.add_argument("--out", required=True, metavar="PATH", help="trace file to write")
    parser.add_argument(
        "--hosts", default=None, metavar="SPEC",
        help="cluster as [COUNTx]CORESc MEMORY(m|g|t), groups joined by '+' (default: "
        f"{THESIS_HOSTS_SPEC}, the thesis cluster of 5 hosts of 8 cores and 12 GiB; for the "
        f"validation tests {QOS_VALIDATION_HOSTS_SPEC}, the paper's)",
    )
    parser.add_argument("--duration-s", type=positive_float, default=3600.0, metavar="S",
                        help="arrival window in seconds (default: 3600); the validation "
                        "tests' services run until its end")
    parser.add_argument(
        "--arrival-rate", type=positive_float, default=None, metavar="PER_S",
        help="thesis only: requests per second while sending (default: 2/s scaled with the "
        "cluster: 2 x hosts / 5 for thesis-sized hosts)",
    )
    add_load_arguments(parser)
    parser.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    from cli.load_options import refuse_load_arguments, thesis_config
    from domain.errors import ValidationError
    from workloads.cluster import THESIS_HOSTS_SPEC, parse_hosts_spec
    from workloads.qos_validation import (
        QOS_VALIDATION_HOSTS_SPEC,
        QosValidationConfig,
        QosValidationTest,
        iter_qos_validation_requests,
        qos_validation_header,
    )
    from workloads.thesis import iter_thesis_requests, thesis_header
    from workloads.trace_file import write_requests

    if args.workload != THESIS_WORKLOAD:
        if args.arrival_rate is not None:
            raise ValidationError("arrival-rate", "the validation tests submit one request per "
                                  "second")
        refuse_load_arguments(args, "the validation tests submit one request per second")
        test = QosValidationConfig(QosValidationTest(args.workload),
                                   hosts=parse_hosts_spec(args.hosts or QOS_VALIDATION_HOSTS_SPEC),
                                   duration_s=args.duration_s)
        head = qos_validation_header(test, args.seed)
        count = write_requests(args.out, head, iter_qos_validation_requests(args.seed, test))
        print(f"wrote {count} requests to {args.out} ({len(test.hosts)} hosts, "
              f"{test.duration_s:g} s, {args.workload}, seed {args.seed})")
        return 0
    config = thesis_config(args, parse_hosts_spec(args.hosts or THESIS_HOSTS_SPEC),
                           args.duration_s, args.arrival_rate)
    header = thesis_header(config, args.seed)
    # The generator numbers its ids: no need to remember millions of them.
    count = write_requests(
        args.out, header, iter_thesis_requests(args.seed, config), check_unique_ids=False
    )
    print(
        f"wrote {count} requests to {args.out} ({len(config.hosts)} hosts, "
        f"{config.duration_s:.10g} s, {config.effective_arrival_rate_per_s:g} requests/s, "
        f"seed {args.seed})"
    )
    return 0


# ------------------------------------------------------------------ convert


def _add_convert(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser(
        "convert", help="convert a public cluster trace",
        description="Convert Google 2011 task_events or Alibaba openb_pod_list CSV files "
        "(plain or .gz; '#' lines are comments) into a trace, with the data's arrival times; "
        "what never ran is left out, what still ran at the data's end is censored, and the "
        "trace's notes count both. Warnings (requests larger than every host, a window "
        "shorter than most makespans) go to stderr and into the notes. Mappings: see "
        "workloads/readers.py.",
    )
    parser.add_argument("--format", required=True, choices=["google2011", "alibaba"],
                        help="input format")
    parser.add_argument("inputs", nargs="+", metavar="IN",
                        help="input CSV file(s), read in order as one stream")
    parser.add_argument("--out", required=True, metavar="PATH", help="trace file to write")
    cluster = parser.add_mutually_exclusive_group()
    add_hosts_argument(cluster)
    cluster.add_argument(
        "--nodes-file", metavar="CSV", default=None,
        help="the cluster from an Alibaba node list (openb_node_list_*.csv: sn,cpu_milli,"
        "memory_mib,...; GPUs ignored): one host per node, named by its sn, instead of --hosts",
    )
    parser.add_argument("--nodes-sample", type=positive_int, default=None, metavar="N",
                        help="with --nodes-file: N nodes drawn at random (seeded by "
                        "--nodes-seed) instead of all of them")
    parser.add_argument("--nodes-seed", type=int, default=0, metavar="SEED",
                        help="seed of --nodes-sample (default: 0)")
    parser.add_argument(
        "--window-start-s", type=non_negative_float, default=0.0, metavar="S",
        help="start of the window on the data's clock, in seconds (default: 0): arrivals are "
        "rebased to it, and requests still queued or running at it arrive at t = 0 with "
        "their remaining time",
    )
    end = parser.add_mutually_exclusive_group()
    end.add_argument("--window-end-s", type=positive_float, default=None, metavar="S",
                     help="end of the window on the data's clock: later arrivals are left out "
                     "(default: the last arrival)")
    end.add_argument("--duration-s", type=positive_float, default=None, metavar="S",
                     help="the window's length: --window-end-s is --window-start-s + S")
    parser.add_argument("--limit", type=positive_int, default=None, metavar="N",
                        help="keep only the first N requests (of the window)")
    parser.add_argument(
        "--resource-scale", type=positive_float, default=None, metavar="F",
        help="alibaba only: multiply every pod's CPU and memory by F (default: 1)",
    )
    parser.set_defaults(handler=_convert)


def _convert(args: argparse.Namespace) -> int:
    from domain.errors import ValidationError
    from workloads.alibaba import convert_alibaba, read_node_list
    from workloads.cluster import parse_hosts_spec, sample_hosts
    from workloads.google2011 import convert_google2011
    from workloads.outfiles import OutFile
    from workloads.trace_file import write_trace

    OutFile(args.out)  # a --out that cannot be written is refused before the reading
    if args.nodes_sample is not None and args.nodes_file is None:
        raise ValidationError("nodes-sample", "samples the nodes of --nodes-file")
    if args.nodes_file is not None:
        hosts = read_node_list(args.nodes_file)
        hosts_note = f"Hosts: the {len(hosts)} nodes of {args.nodes_file}"
        if args.nodes_sample is not None:
            hosts = sample_hosts(hosts, args.nodes_sample, args.nodes_seed)
            hosts_note = (f"Hosts: {len(hosts)} nodes drawn (seed {args.nodes_seed}) from "
                          + hosts_note.removeprefix("Hosts: "))
        hosts_note += " (their GPUs ignored)."
    else:
        hosts = parse_hosts_spec(args.hosts)
        hosts_note = f"Hosts: {args.hosts}."
    start_s = args.window_start_s
    end_s = args.window_end_s
    if args.duration_s is not None:
        end_s = start_s + args.duration_s
    if args.format == "google2011":
        if args.resource_scale is not None:
            raise ValidationError(
                "resource-scale", "applies to alibaba only (Google sizes are fractions of the "
                "largest host of --hosts)"
            )
        conversion = convert_google2011(
            args.inputs, hosts, window_start_s=start_s, window_end_s=end_s, limit=args.limit,
            hosts_note=hosts_note,
        )
    else:
        conversion = convert_alibaba(
            args.inputs, hosts, resource_scale=args.resource_scale or 1.0,
            window_start_s=start_s, window_end_s=end_s, limit=args.limit,
            hosts_note=hosts_note,
        )
    write_trace(args.out, conversion.trace)
    print(f"wrote {len(conversion.trace.requests)} requests to {args.out} "
          f"({len(hosts)} hosts, {conversion.trace.header.duration_s:.10g} s)")
    print(conversion.trace.header.notes)
    for warning in conversion.warnings:
        print(f"greenswarm bench convert: warning: {warning}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ report


def _add_report(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser(
        "report", help="compare policy runs side by side",
        description="Read DIR/<policy>/result.json for every policy and write "
        "DIR/summary.json, DIR/summary.md and PNG plots.",
    )
    parser.add_argument("dir", metavar="DIR", help="directory holding one folder per policy")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from measure.report import write_report

    files = write_report(args.dir, plots=not args.no_plots)
    print(f"wrote {files.summary_json}")
    print(f"wrote {files.summary_md}")
    for plot in files.plots:
        print(f"wrote {plot}")
    return 0


# ------------------------------------------------------------------ power tables


def _add_power_tables(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser(
        "power-tables", help="list the SPECpower tables of the energy model",
        description="List the published power tables (watts at 0, 10, ..., 100 %% CPU load).",
    )
    parser.set_defaults(handler=_power_tables)


def _power_tables(args: argparse.Namespace) -> int:
    for name in sorted(POWER_TABLES):
        table = POWER_TABLES[name]
        default = " (default)" if name == DEFAULT_POWER_TABLE else ""
        watts = ", ".join(f"{w:g}" for w in table.watts)
        sys.stdout.write(f"{name}{default}: {table.server}\n    {watts} W\n")
    return 0


# ------------------------------------------------------------------ registration

# The actions of ``greenswarm bench``; the simulator's, the profiler's and the replay's live in
# cli/simulate.py, cli/profile.py and cli/replay.py and reuse add_power_table_argument
# (cli/options.py).
BENCH_ACTIONS: tuple[ActionRegistrar, ...] = (
    _add_generate,
    _add_convert,
    _add_report,
    _add_power_tables,
    add_simulate,
    add_profile,
    add_replay,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` and its actions to the ``greenswarm`` command line."""
    bench = subparsers.add_parser(
        "bench", help="benchmark traces and reports",
        description="Benchmark workloads: generate or convert traces, report on policy runs.",
    )
    actions = bench.add_subparsers(dest="bench_command", metavar="ACTION", required=True)
    for add in BENCH_ACTIONS:
        add(actions)
