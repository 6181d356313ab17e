"""``greenswarm bench profile``: the workloads' usage profiles measured from real containers
(sim/profiler.py), written for the simulator."""

from __future__ import annotations

import argparse

from cli.argtypes import positive_float
from domain.errors import ValidationError


def add_profile(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser(
        "profile", help="measure the workloads' usage profiles from real containers",
        description="Run each workload image alone on a Docker engine, sample its cgroup CPU "
        "and memory every second, and write the usage profiles the simulator uses.",
    )
    parser.add_argument("--out", default="profiles.json", metavar="FILE",
                        help="profiles file to write (default: profiles.json; the simulator "
                        "ships sim/profiles.json)")
    parser.add_argument("--docker", default="unix:///var/run/docker.sock", metavar="URL",
                        help="Docker engine (default: the main engine; a lab node's socket "
                        "works too)")
    parser.add_argument("--workloads", default="ffmpeg,redis,dl,timeserver", metavar="LIST",
                        help="workloads to measure (the others keep their defaults)")
    parser.add_argument("--makespan-s", type=positive_float, default=30.0, metavar="S",
                        help="makespan of the measured jobs (default: 30)")
    parser.add_argument("--service-s", type=positive_float, default=40.0, metavar="S",
                        help="how long each service run is sampled (default: 40)")
    parser.add_argument("--rates", default="20,40,80", metavar="LIST",
                        help="client requests per 10 s, one service run each (default: "
                        "20,40,80, the thesis's rates)")
    parser.set_defaults(handler=run_profile)


def run_profile(args: argparse.Namespace) -> int:
    import docker

    from sim.profiler import measure_profiles
    from sim.profiles import write_profiles
    from workloads.trace import Workload

    try:
        workloads = [Workload(w.strip()) for w in args.workloads.split(",") if w.strip()]
        rates = [int(r) for r in args.rates.split(",") if r.strip()]
    except ValueError as exc:
        raise ValidationError("workloads", str(exc)) from None
    if not rates or any(r < 1 for r in rates):
        raise ValidationError("rates", "need at least one rate >= 1")
    client = docker.DockerClient(base_url=args.docker)
    try:
        profiles = measure_profiles(client, workloads, makespan_s=args.makespan_s,
                                    service_s=args.service_s, rates=rates, engine=args.docker)
    finally:
        client.close()
    write_profiles(args.out, profiles)
    print(f"wrote {args.out}")
    for workload, profile in profiles.by_workload.items():
        steps = ", ".join(f"{s.at_s:g}s: cpu {s.cpu_fraction:.3f} mem {s.memory_fraction:.3f}"
                          for s in profile.steps)
        print(f"  {workload.value} ({profile.source.value}): {steps}; per rate "
              f"{profile.cpu_fraction_per_rate:.2e}")
    return 0
