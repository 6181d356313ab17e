"""Simulator speed (DESIGN 8): the thesis hour per policy, and a large cluster with the energy
policy, in wall-clock seconds.

    python -m benchmarks.sim_speed                       # thesis hour x 4 policies, then
                                                         # 1,000 hosts for 1 h, extrapolated
    python -m benchmarks.sim_speed --large-hours 24      # the full target run (long)
    python -m benchmarks.sim_speed --skip-thesis --large-hours 0.25 --profile 25
    python -m benchmarks.sim_speed --skip-thesis --large-hours 24 --large-rate 2

Targets: the thesis hour (5 hosts) < 10 s per policy; 24 h on 1,000 hosts < 10 min. The large
run generates the thesis workload scaled to the cluster on the fly (2 requests/s per 5 hosts,
about 440,000 requests per hour on 1,000 hosts), so its time includes generating the requests;
the generation alone is timed too. ``--large-rate R`` sets the arrival rate instead (R
requests/s in the bursts; ``--large-rate 2`` is DESIGN 7.1's rate read literally, a lightly
loaded cluster at 1,000 hosts). With ``--large-hours`` below 24 the time is extrapolated
linearly to 24 h (the work per simulated hour is stationary once the cluster has filled up,
after a few minutes). ``--profile N`` prints the N most expensive functions (cProfile) of the
large run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from benchmarks.argtypes import positive_float
from benchmarks.cluster import parse_hosts_spec
from benchmarks.sim.engine import SimConfig, SimResult, simulate
from benchmarks.sim.profiles import load_shipped_profiles
from benchmarks.sim.runner import DEFAULT_POLICIES, requests_with_probes
from benchmarks.workload import (
    ProbeConfig,
    ThesisWorkloadConfig,
    iter_thesis_requests,
    thesis_header,
)

THESIS_TARGET_S = 10.0
LARGE_TARGET_S = 600.0


def run_one(policy: str, config: ThesisWorkloadConfig, seed: int) -> SimResult:
    header = thesis_header(config, seed)
    stream = requests_with_probes(iter_thesis_requests(seed, config), config.duration_s,
                                  ProbeConfig())
    return simulate(header, stream, load_shipped_profiles(), SimConfig(policy, seed=seed))


def thesis_hour(seed: int) -> None:
    print("thesis hour (5 hosts x 8 cores x 12 GiB, --workload thesis --seed "
          f"{seed}), target < {THESIS_TARGET_S:g} s per policy")
    for policy in DEFAULT_POLICIES:
        start = time.perf_counter()
        result = run_one(policy, ThesisWorkloadConfig(), seed)
        wall = time.perf_counter() - start
        m = result.result.metrics
        print(f"  {policy:<8} {wall:6.2f} s wall  {m.requests:>6} requests  "
              f"{result.stats.events:>7} events  {result.stats.decisions:>6} decisions  "
              f"{'ok' if wall < THESIS_TARGET_S else 'OVER TARGET'}")


def large(hosts: int, hours: float, seed: int, profile_top: int, rate: float | None) -> None:
    config = ThesisWorkloadConfig(hosts=parse_hosts_spec(f"{hosts}x8c12g"),
                                  duration_s=hours * 3600.0, arrival_rate_per_s=rate)
    start = time.perf_counter()
    generated = sum(1 for _ in iter_thesis_requests(seed, config))
    generation_s = time.perf_counter() - start
    rate_note = "scaled with the cluster" if rate is None else f"{rate:g} requests/s"
    print(f"\n{hosts} hosts, {hours:g} h, arrivals {rate_note}, energy policy: "
          f"{generated:,} requests "
          f"(generating them alone: {generation_s:.1f} s)")
    profiler = cProfile.Profile() if profile_top else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = run_one("energy", config, seed)
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - start
    m, s = result.result.metrics, result.stats
    per_hour = wall / hours
    note = " under cProfile" if profiler is not None else ""
    print(f"  wall {wall:.1f} s ({per_hour:.1f} s per simulated hour{note}); "
          f"{s.events:,} events, {s.decisions:,} decisions, {m.successful:,} placed, "
          f"{m.failed:,} refused, decision p50 {m.decision_ms_p50 or 0:.3f} ms p99 "
          f"{m.decision_ms_p99 or 0:.3f} ms")
    estimate = per_hour * 24
    verdict = "ok" if estimate < LARGE_TARGET_S else "OVER TARGET"
    label = "measured" if hours >= 24 else "extrapolated"
    print(f"  24 h on {hosts} hosts: {estimate:.0f} s {label} (target < {LARGE_TARGET_S:.0f} s): "
          f"{verdict}")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile_top)
        print(out.getvalue())
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(profile_top)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-thesis", action="store_true")
    parser.add_argument("--large-hosts", type=int, default=1000)
    parser.add_argument("--large-hours", type=float, default=1.0,
                        help="simulated hours of the large run (0: skip it; default 1)")
    parser.add_argument("--large-rate", type=positive_float, default=None, metavar="R",
                        help="arrival rate of the large run in requests/s (default: 2/s per "
                        "5 hosts, scaled with the cluster)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the N most expensive functions of the large run")
    args = parser.parse_args()
    if not args.skip_thesis:
        thesis_hour(args.seed)
    if args.large_hours > 0:
        large(args.large_hosts, args.large_hours, args.seed, args.profile, args.large_rate)


if __name__ == "__main__":
    main()
