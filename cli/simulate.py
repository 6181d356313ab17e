"""``greenswarm bench simulate`` and ``greenswarm bench profile``: the simulator's I/O edge.

    greenswarm bench simulate (--trace FILE | --workload thesis|qos-validation-1|qos-validation-2)
        [--seed N | --seeds LIST] --out DIR
        [--policies energy,spread,binpack,random] [--hosts SPEC] [--duration-s S] [--drain-s S]
        [--power-table NAME] [--profiles FILE] [--no-probes] [--slo C=V,...] [--allocation-s S]
        [--overbooking-model thesis|label|none] [--empty-hosts last|lee] [--lee-below U]
        [--eed-above U] [--queue-new] [--clusters SIZES [--federation none|offload]
        [--offload-when unplaced|kills]] [--jobs N] [--no-plots] [--progress]
    greenswarm bench profile [--out FILE] [--docker URL] [--workloads ffmpeg,redis,dl,timeserver]
        [--makespan-s 30] [--service-s 40] [--rates 20,40,80]

``simulate`` writes ``DIR/<policy>/result.json`` + ``host_series.csv`` + ``requests.jsonl``
(every request's service level; measure.result_files),
``DIR/<policy>/simulation.json`` (the simulator's own counters), ``DIR/simulation.md`` (the
side-by-side table, with the thesis's numbers for the thesis workload; with ``--clusters``
the clusters' counters too), then the report
(``DIR/summary.md``, ``summary.json``, PNG plots). With ``--seeds`` each seed's run goes into
``DIR/seed-N/`` as above, and ``DIR/seeds.md`` and ``DIR/seeds.json`` hold every number's mean,
min and max over the seeds, per policy (sim.seeds).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cli.argtypes import cluster_sizes, positive_float, positive_int, seed_list
from domain.errors import ValidationError
from workloads.cluster import THESIS_HOSTS_SPEC
from workloads.outfiles import out_directory
from workloads.qos_validation import QOS_VALIDATION_HOSTS_SPEC, QosValidationTest

if TYPE_CHECKING:
    from domain.power import PowerSettings
    from measure.report import ReportFiles
    from sim.config import ClusterSetup, SimConfig, SimResult
    from sim.profiles import Profiles
    from sim.runner import TraceInput
    from workloads.trace import TraceHeader, TraceRequest

SIMULATION_FILE = "simulation.json"
SIMULATION_SUMMARY = "simulation.md"
SEEDS_SUMMARY = "seeds.md"
SEEDS_FILE = "seeds.json"
THESIS_WORKLOAD = "thesis"
# What --workload generates (DESIGN 7.1, 7.5).
WORKLOADS: tuple[str, ...] = (THESIS_WORKLOAD, *(test.value for test in QosValidationTest))


def _policies(text: str) -> list[str]:
    from scheduler import registry

    names = [p.strip() for p in text.split(",") if p.strip()]
    known = registry.names(simulated=True)
    bad = [p for p in names if p not in known]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"unknown policies {bad or text!r}; choose among {', '.join(known)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError("a policy is listed twice")
    return names


class ProgressBoard:
    """One line on a terminal for every policy of a run, rewritten at most ten times a second:
    a bar per policy and the wall time. Policies that run one after the other and side by side
    (``--jobs``) show the same way."""

    def __init__(
        self, stream: TextIO, labels: Sequence[str], width: int = 12, title: str = ""
    ) -> None:
        self.stream = stream
        self.width = width
        self.title = title
        self.fractions = dict.fromkeys(labels, 0.0)
        self.started = time.monotonic()
        self.shown = 0.0
        self.ended = False

    def callback(self, label: str) -> Callable[[float, float], None]:
        """The progress callback of one policy: told (simulated s, end s)."""
        if label not in self.fractions:
            raise ValueError(f"no policy {label!r} on this board")
        return functools.partial(self.update, label)

    def update(self, label: str, t_s: float, end_s: float) -> None:
        self.fractions[label] = min(1.0, t_s / end_s) if end_s > 0 else 1.0
        now = time.monotonic()
        done = all(f >= 1.0 for f in self.fractions.values())
        if self.ended or (not done and now - self.shown < 0.1):
            return
        self.shown = now
        cells = []
        for name, fraction in self.fractions.items():
            filled = round(fraction * self.width)
            cells.append(f"{name} [{'#' * filled}{'-' * (self.width - filled)}] {fraction:4.0%}")
        title = f"{self.title}  " if self.title else ""
        self.stream.write(f"\r{title}{'  '.join(cells)}  wall {now - self.started:,.1f} s")
        if done:
            self.ended = True
            self.stream.write("\n")
        self.stream.flush()


def _new_requests(args: argparse.Namespace) -> str:
    """What becomes of a new request no pass places, for a report's settings line."""
    from scheduler import registry

    door = ("; admission control (DESIGN 3.13) of those that would wait: "
            f"{args.admission.value}")
    if args.queue_new:
        return "wait in the queue" + door
    admitting = [p for p in args.policies if registry.plugin(p).admits_to_queue]
    if not admitting:
        return "are refused"
    return (f"are refused ({', '.join(admitting)}: wait in the queue, as the policy admits)"
            + door)


def default_jobs() -> int:
    """The processors this process may use."""
    return max(1, len(os.sched_getaffinity(0)))


# ------------------------------------------------------------------ simulate


def add_simulate(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cli import policy_options
    from cli.load_options import add_admission_argument, add_load_arguments
    from cli.options import add_power_table_argument, add_service_level_arguments

    parser = actions.add_parser(
        "simulate", help="replay a trace through the real scheduler in the simulator",
        description="Discrete-event simulation (DESIGN 7.2) of every policy on the same trace "
        "with the real scheduling code; writes results and the report into --out.",
    )
    _add_simulate_input(parser)
    add_power_table_argument(parser)
    parser.add_argument("--profiles", metavar="FILE", default=None,
                        help="usage profiles (default: sim/profiles.json as shipped)")
    add_service_level_arguments(parser)
    policy_options.add_policy_options(parser)
    add_load_arguments(parser)
    add_admission_argument(parser)
    parser.add_argument("--queue-new", action="store_true",
                        help="new requests ask to queue (DESIGN 3.7): one that no pass places "
                        "waits in the pending queue instead of being refused, and counts as "
                        "successful once placed, its wait in the scheduling delay; those still "
                        "waiting at the end are undecided (not in the success rate: see "
                        "'queued, still waiting at the end')")
    _add_simulate_clusters(parser)
    _add_simulate_power(parser)
    parser.add_argument("--no-probes", action="store_true",
                        help="do not add the probe jobs of known length every 5 minutes")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="run up to N policies at once, each in its own process (default: "
                        "the number of processors, here "
                        f"{default_jobs()}); the results are the same as with --jobs 1, "
                        "decision times aside: they are wall clock, and parallel runs share "
                        "the machine")
    parser.add_argument("--progress", action="store_true",
                        help="show a progress bar even when stderr is not a terminal")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.set_defaults(handler=run_simulate)


def _add_simulate_input(parser: argparse.ArgumentParser) -> None:
    """What is simulated: the trace or workload, its seeds, the policies, the hosts, how
    long."""
    from sim.runner import default_policies

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", metavar="FILE", help="a trace file (.jsonl or .jsonl.gz)")
    source.add_argument("--workload", choices=WORKLOADS,
                        help="generate the thesis workload (DESIGN 7.1), or one of the QoS-driven "
                        "paper's validation tests (DESIGN 7.5: run them with "
                        "--overbooking-model none --slo 1=1,2=0.9,4=0.5; no probes), with "
                        "--seed or --seeds")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None,
                       help="seed of the generated workload (--workload needs it or --seeds), "
                       "of the random policy and of the monitors' phases (default: the "
                       "trace's seed or 0)")
    seeds.add_argument("--seeds", type=seed_list, default=None, metavar="LIST",
                       help="one run per seed, e.g. 1-6 or 1,3,5: each into DIR/seed-N as a "
                       "run with --seed N, then every number's mean, min and max per policy "
                       f"into DIR/{SEEDS_SUMMARY} and DIR/{SEEDS_FILE}")
    parser.add_argument("--policies", type=_policies, default=default_policies(),
                        metavar="LIST", help="comma-separated policies (default: every "
                        f"policy the simulator runs: {','.join(default_policies())})")
    parser.add_argument(
        "--hosts", default=None, metavar="SPEC",
        help="cluster as [COUNTx]CORESc MEMORY(m|g|t), groups joined by '+'; with --trace it "
        "replaces the trace's own hosts (simulation.md says so); default: the trace's hosts, "
        f"or for --workload thesis {THESIS_HOSTS_SPEC} (the thesis cluster: 5 hosts of 8 cores "
        f"and 12 GiB), for the validation tests {QOS_VALIDATION_HOSTS_SPEC} (the paper's)",
    )
    parser.add_argument("--duration-s", type=positive_float, default=None, metavar="S",
                        help="simulated time; with --workload also the arrival window "
                        "(default: the trace's duration, 3600 for --workload)")
    parser.add_argument("--drain-s", type=positive_float, default=None, metavar="S",
                        help="after the arrival window, simulate S more seconds with no new "
                        "request or probe: victims still queued may be placed then (every "
                        "average then covers the longer run)")


def _add_simulate_clusters(parser: argparse.ArgumentParser) -> None:
    """Several clusters over the hosts, federated or not (DESIGN 12)."""
    parser.add_argument("--clusters", type=cluster_sizes, default=None, metavar="SIZES",
                        help="split the hosts into clusters (DESIGN 12), e.g. 5,5 with --hosts "
                        "10x8c12g: the first 5 hosts are cluster c1, the next 5 c2, each with its "
                        "own store and scheduler; the sizes must add up to the host count. A "
                        "request's home cluster is round-robin in arrival order (the i-th "
                        "arrival, probes included, belongs to cluster i mod N). The report's "
                        "numbers are over all clusters; simulation.md and "
                        "<policy>/simulation.json add each cluster's counters (default: one "
                        "cluster, as without federation)")
    parser.add_argument("--federation", choices=["none", "offload"], default="none",
                        help="with --clusters: none: separate Swarms, a request its home "
                        "cluster does not place is refused there (or queued there, as the policy "
                        "does); offload: federated Swarms, it goes to the peer whose advert says "
                        "it fits at the lowest marginal energy price (federation/offload.py), "
                        "and that peer's scheduler decides; never placed twice (default: none)")
    parser.add_argument("--offload-when", choices=["unplaced", "kills"], default="unplaced",
                        help="with --federation offload: unplaced: offload what the home "
                        "cluster does not place; kills: also what it would place only by "
                        "killing (default: unplaced)")


def _add_simulate_power(parser: argparse.ArgumentParser) -> None:
    """The power manager (DESIGN 3.15, sim/power.py)."""
    parser.add_argument("--power-manager", choices=("on", "off"), default=None,
                        help="on: hosts are switched off when idle and on when needed, every "
                        "policy alike (energy as drawn in energy_kwh, all hosts on in "
                        "energy_kwh_all_on); its knobs from GREENSWARM_POWER_IDLE_S, _BOOT_S, "
                        "_SHUTDOWN_S, _MIN_ON, ... (default: $GREENSWARM_POWER, else off: "
                        "every host on)")
    parser.add_argument("--consolidate", choices=("on", "off"), default=None,
                        help="with the power manager, energy and qos empty the least-allocated "
                        "host of its services every 60 s, make-before-break (default: "
                        "$GREENSWARM_POWER_CONSOLIDATE, else on)")


def _power_settings(args: argparse.Namespace) -> PowerSettings:
    """The power manager's settings: the environment's, and the command line's over them."""
    from domain.power import power_settings_from_env

    overrides: dict[str, object] = {}
    if args.power_manager is not None:
        overrides["enabled"] = args.power_manager == "on"
    if args.consolidate is not None:
        overrides["consolidate"] = args.consolidate == "on"
    return power_settings_from_env(os.environ, overrides)


def run_simulate(args: argparse.Namespace) -> int:
    from sim.profiles import load_shipped_profiles, read_profiles
    from workloads.cluster import parse_hosts_spec

    if args.workload is not None and args.seed is None and args.seeds is None:
        raise ValidationError("seed", f"--workload {args.workload} needs --seed N or --seeds LIST")
    if args.hosts is not None:
        parse_hosts_spec(args.hosts)  # a bad SPEC is refused before anything is written
    if args.workload != THESIS_WORKLOAD:
        from cli.load_options import refuse_load_arguments

        refuse_load_arguments(args, "a trace file and the validation tests keep their own")
    if args.clusters is None and (args.federation != "none" or args.offload_when != "unplaced"):
        raise ValidationError("federation", "--federation and --offload-when need --clusters")
    profiles = read_profiles(args.profiles) if args.profiles else load_shipped_profiles()
    out = out_directory(args.out, create=False)  # checked now, created once the run starts
    if args.seeds is None:
        run = _simulate_seed(args, args.seed, profiles, out)
        sys.stdout.write(run.text)
        print(f"wrote {run.files.summary_md}, {run.files.summary_json} and "
              f"{len(run.files.plots)} plots")
        return 0
    return _simulate_seeds(args, args.seeds, profiles, out)


@dataclass(frozen=True)
class _SeedRun:
    results: list[SimResult]
    text: str  # simulation.md
    files: ReportFiles
    thesis: bool


def _simulate_seed(
    args: argparse.Namespace, seed: int | None, profiles: Profiles, out: Path,
    *, title: str = "",
) -> _SeedRun:
    """One run of every policy: results, ``simulation.md`` and the report into ``out``.
    ``seed`` None: the trace's own seed (or 0)."""
    from measure.report import write_report
    from measure.result_files import save_result
    from sim.runner import run_policies
    from workloads.thesis import ProbeConfig
    from workloads.trace import TraceSource

    trace, seed, hosts_note = _trace_input(args, seed)
    arrivals_s = args.duration_s or trace.header.duration_s
    sim_config = _sim_config(args, seed, arrivals_s, len(trace.header.hosts))
    # the validation tests are the paper's workloads alone: no probe jobs among them
    validation = args.workload not in (None, THESIS_WORKLOAD)
    board = (ProgressBoard(sys.stderr, args.policies, title=title)
             if args.progress or sys.stderr.isatty() else None)
    out = out_directory(out)
    results = run_policies(trace, args.policies, profiles, sim_config,
                           probes=None if args.no_probes or validation else ProbeConfig(),
                           progress=board.callback if board is not None else None,
                           arrivals_until_s=arrivals_s if args.drain_s else None,
                           jobs=args.jobs or default_jobs())
    for result in results:
        directory = save_result(result.result, out)
        (directory / SIMULATION_FILE).write_text(
            json.dumps(result.stats.to_json(), indent=2) + "\n", encoding="utf-8"
        )
    thesis = trace.header.source == TraceSource.THESIS.value
    text = _simulation_text(args, trace.header, hosts_note, arrivals_s, sim_config, profiles,
                            results, thesis)
    (out / SIMULATION_SUMMARY).write_text(text, encoding="utf-8")
    files = write_report(out, plots=not args.no_plots)
    return _SeedRun(results, text, files, thesis)


def _trace_input(args: argparse.Namespace, seed: int | None) -> tuple[TraceInput, int, str]:
    """The trace of --workload or --trace, its seed (``seed``, or the trace's own, or 0), and
    what to say of its hosts when --hosts replaced them."""
    from cli.load_options import thesis_config
    from sim.runner import TraceInput, qos_validation_input, thesis_input
    from workloads.cluster import format_hosts_spec, parse_hosts_spec
    from workloads.qos_validation import QosValidationConfig
    from workloads.trace_file import open_trace

    if args.workload == THESIS_WORKLOAD:
        assert seed is not None  # run_simulate checked
        config = thesis_config(args, parse_hosts_spec(args.hosts or THESIS_HOSTS_SPEC),
                               args.duration_s or 3600.0)
        return thesis_input(seed, config), seed, ""
    if args.workload is not None:
        assert seed is not None
        return qos_validation_input(seed, QosValidationConfig(
            QosValidationTest(args.workload),
            hosts=parse_hosts_spec(args.hosts or QOS_VALIDATION_HOSTS_SPEC),
            duration_s=args.duration_s or 3600.0)), seed, ""
    path = args.trace
    with open_trace(path) as reader:
        header = reader.header
    hosts_note = ""
    if args.hosts is not None:
        hosts = parse_hosts_spec(args.hosts)
        own = format_hosts_spec(header.hosts)
        hosts_note = (f" (from --hosts {args.hosts}, replacing the trace's "
                      f"{len(header.hosts)} hosts"
                      + (f", {own})" if len(own) <= 60 else ")"))
        header = replace(header, hosts=hosts)

    def stream() -> Iterator[TraceRequest]:
        with open_trace(path, check_unique_ids=False) as reader:
            yield from reader

    return (TraceInput(header, stream), seed if seed is not None else (header.seed or 0),
            hosts_note)


def _sim_config(args: argparse.Namespace, seed: int, arrivals_s: float, hosts: int) -> SimConfig:
    """The simulator's settings of the command line (the first policy's; the runner sets
    each policy's own)."""
    from cli import policy_options
    from cli.options import slo_table
    from domain.energy import PowerModel
    from sim.config import SimConfig

    setup = _cluster_setup(args, hosts)
    cluster = policy_options.cluster_options(args)
    return SimConfig(
        policy=args.policies[0],
        seed=seed,
        end_s=arrivals_s + args.drain_s if args.drain_s else args.duration_s,
        power_model=PowerModel.named(args.power_table),
        options=policy_options.policy_options(args),
        classes=cluster.classes(),
        bounds=cluster.bounds(),
        freshness=cluster.freshness(),
        queue_new=True if args.queue_new else None,  # None: as each policy admits
        admission=args.admission,
        slo=slo_table(args),
        allocation_s=args.allocation_s,
        clusters=setup,
        power=_power_settings(args),
    )


def _simulation_text(
    args: argparse.Namespace, header: TraceHeader, hosts_note: str, arrivals_s: float,
    config: SimConfig, profiles: Profiles, results: list[SimResult], thesis: bool,
) -> str:
    """``simulation.md``: what was simulated, how, and the side-by-side table."""
    from cli import policy_options
    from sim.summary import render_clusters, render_summary

    setup = config.clusters
    slo = config.slo
    assert slo is not None  # slo_table gives one
    sources = ", ".join(f"{w.value}: {p.source.value}"
                        for w, p in profiles.by_workload.items())
    return (
        "# Simulation\n\n"
        f"Trace: {header.source}, seed {header.seed}, {len(header.hosts)} hosts{hosts_note}, "
        f"arrivals until {arrivals_s:.10g} s; simulated {results[0].stats.end_s:.10g} s; "
        f"power table {args.power_table}; usage profiles ({sources}).\n\n"
        + (f"Trace notes: {header.notes}\n\n" if header.notes else "")
        + f"Scheduling: {policy_options.describe(args, args.policies)}; new requests no pass "
        f"places {_new_requests(args)}.\n\n"
        + (f"Clusters (DESIGN 12): {setup.describe()}.\n\n" if setup is not None else "")
        + f"Service levels (DESIGN 3.10): SLO {slo.describe()}; allocation time "
        f"{args.allocation_s:g} s charged on every placement after a request's first; per "
        "class in summary.md, one line per request in <policy>/requests.jsonl.\n\n"
        + render_summary(results, thesis=thesis)
        + (render_clusters(results) if setup is not None else "")
    )


def _cluster_setup(args: argparse.Namespace, hosts: int) -> ClusterSetup | None:
    """The clusters of --clusters over ``hosts`` hosts (None: one cluster, as always)."""
    from federation.offload import OffloadWhen
    from sim.config import ClusterSetup, FederationMode

    if args.clusters is None:
        return None
    if sum(args.clusters) != hosts:
        raise ValidationError("clusters", f"--clusters {','.join(map(str, args.clusters))} "
                              f"takes {sum(args.clusters)} hosts, the cluster has {hosts} "
                              "(see --hosts)")
    return ClusterSetup(args.clusters, FederationMode(args.federation),
                        OffloadWhen(args.offload_when))


def _simulate_seeds(
    args: argparse.Namespace, seeds: Sequence[int], profiles: Profiles, out: Path
) -> int:
    """Every seed as a run of its own into ``out/seed-N``, then the numbers over the seeds."""
    from cli import policy_options
    from cli.options import slo_table
    from sim.seeds import summarize_seeds

    runs: list[tuple[int, Sequence[SimResult]]] = []
    thesis = False
    for count, seed in enumerate(seeds, start=1):
        run = _simulate_seed(args, seed, profiles, out / f"seed-{seed}",
                             title=f"seed {seed} ({count}/{len(seeds)})")
        thesis = run.thesis
        runs.append((seed, run.results))
        rates = ", ".join(f"{r.stats.policy} {_rate(r)}" + _offloads(r) for r in run.results)
        print(f"seed {seed}: success rate {rates}; wrote {out / f'seed-{seed}'}", flush=True)
    summary = summarize_seeds(runs, queue_new=args.queue_new, thesis=thesis)
    source = (f"the {args.workload} workload, generated with each seed"
              if args.workload is not None
              else f"{args.trace}, the same for every seed"
              + (f", on the hosts of --hosts {args.hosts}" if args.hosts else ""))
    text = (
        f"# Simulation over {len(seeds)} seeds\n\n"
        f"Trace: {source}; seeds {', '.join(str(s) for s in seeds)}; one run per seed in "
        f"seed-N/ (its {SIMULATION_SUMMARY} and report).\n\n"
        f"Scheduling: {policy_options.describe(args, args.policies)}; new requests no pass places "
        f"{_new_requests(args)}.\n\n"
        f"Service levels (DESIGN 3.10): SLO {slo_table(args).describe()}; allocation time "
        f"{args.allocation_s:g} s.\n\n"
        + summary.render()
    )
    (out / SEEDS_SUMMARY).write_text(text, encoding="utf-8")
    (out / SEEDS_FILE).write_text(json.dumps(summary.to_json(), indent=2) + "\n",
                                  encoding="utf-8")
    sys.stdout.write("\n" + text)
    print(f"wrote {out / SEEDS_SUMMARY} and {out / SEEDS_FILE}")
    return 0


def _offloads(result: SimResult) -> str:
    return f" ({result.stats.offloads} offloaded)" if result.stats.clusters else ""


def _rate(result: SimResult) -> str:
    rate = result.result.metrics.success_rate
    return "n/a" if rate is None else f"{rate * 100:.1f}%"
