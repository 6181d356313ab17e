"""The native core's parts side by side in one run (DESIGN 8, 10): what the Rust core
(native/rust) buys against the Python reference, and what the mypyc build buys on top.

    python -m benchmarks.native_core                     # rooms per call, then the first
                                                         # 15 min on 100 hosts x 4 cores
    python -m benchmarks.native_core --hosts 100 --hours 0.25 --repeat 3

1. Rooms per call (``domain.rooms.compute_rooms``, the Rust core's first part): the Python
   reference as this process runs it (compiled by mypyc when built, else pure), against the
   Rust core, over the rooms of a seeded cluster of ``--hosts`` hosts x 20 tasks (the decision
   benchmark's); then host states per call (``measure.host_time.HostBook.record``, its second
   part), 50,000 seeded states over ``--hosts`` hosts into a book of the Python reference and
   one of the Rust class (when this process loaded the Rust core); then the store's lists per
   call (``host_registry.memory``: ``_Group`` against ``HostGroup``, its third part): a host
   leaving and joining again, a walk that finds nothing (the list's largest room too small),
   the first host of a walk, and a whole walk, over the list of ``--hosts`` empty hosts.
2. The whole command ``python -m benchmarks.sim_speed --skip-thesis --large-hosts H
   --large-hours X`` (energy policy, thesis load scaled to the cluster) in four processes, one
   per core: pure Python, pure + Rust, mypyc, mypyc + Rust; the fastest of ``--repeat`` runs
   of each, as wall seconds and microseconds per simulated request, with the peak memory each
   process printed.
"""

from __future__ import annotations

# ruff: noqa: E402 (an entry point: the native core is enabled before the imports below)
from native import loader

loader.enable()

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import domain.rooms
import host_registry.memory
import measure.host_time
from benchmarks.decision_bench import populate
from cli.argtypes import positive_float, positive_int
from domain.model import HostSpec
from domain.regions import RegionBounds
from host_registry.memory import MemoryStore
from measure.host_time import HostBook
from native import rust

Args = tuple[tuple[int, ...], int, int, tuple[int, ...], tuple[int, ...]]
CORES = (  # (name, settings)
    ("pure", {"GREENSWARM_NATIVE": "0"}),
    ("pure+rust", {"GREENSWARM_NATIVE_MYPYC": "0", "GREENSWARM_NATIVE_RUST": "1"}),
    ("mypyc", {"GREENSWARM_NATIVE": "1", "GREENSWARM_NATIVE_RUST": "0"}),
    ("mypyc+rust", {"GREENSWARM_NATIVE": "1", "GREENSWARM_NATIVE_RUST": "1"}),
)
WALL = re.compile(r"^\s+wall ([0-9.]+) s")
REQUESTS = re.compile(r"energy policy: ([0-9,]+) requests")
PEAK = re.compile(r"peak memory of the process ([0-9.]+) MiB")


def corpus(hosts: int) -> list[Args]:
    store = MemoryStore()
    populate(store, hosts, seed=1)
    return [(v.tally, v.cpu_capacity, v.memory_capacity, v.cpu_limits, v.memory_limits)
            for v in store.all_hosts()]


def per_call_ns(function: Callable[..., object], calls: list[Args], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for args in calls:
            function(*args)
        best = min(best, time.perf_counter() - start)
    return best / len(calls) * 1e9


def rooms_per_call(hosts: int) -> None:
    native = domain.rooms._native_rooms
    if native is None:  # this process runs Python's rooms: load the Rust core beside them
        build = rust.find_build(loader.cache_root(), rust.source_hash(), loader.python_tag(),
                                loader.ext_suffix())
        if build is None:
            print(f"rooms per call: the Rust core is not built ({loader.REBUILD_HINT})")
            return
        native = rust.load(rust.extension_file(build, loader.ext_suffix())).compute_rooms
    calls = corpus(hosts)
    for args in calls:  # the same rooms, or nothing is measured
        assert native(*args) == domain.rooms.compute_rooms_reference(*args)
    rounds = max(3, 200_000 // len(calls))
    reference = per_call_ns(domain.rooms.compute_rooms_reference, calls, rounds)
    fast = per_call_ns(native, calls, rounds)
    print(f"rooms per call over {len(calls)} hosts' tallies, best of {rounds} rounds:")
    print(f"  python reference ({loader.core()}) {reference:8.0f} ns   rust {fast:8.0f} ns   "
          f"ratio {reference / fast:.1f}x")


State = tuple[float, str, float, float, float, int, float, float]


def host_states(hosts: int, count: int = 50_000) -> tuple[list[HostSpec], list[State]]:
    """A seeded stream of host states as the simulator records them, in time order."""
    rng = random.Random(1)
    specs = [HostSpec(f"h{i:04d}", 4096, 8 << 30) for i in range(hosts)]
    states: list[State] = []
    t = 0.0
    for _ in range(count):
        t += rng.expovariate(2.0 * hosts / 5)  # the thesis load scaled: 2 changes/s per 5 hosts
        cpu, mem = rng.random(), rng.random()
        states.append((t, specs[rng.randrange(hosts)].id, cpu, mem, mem * (8 << 30),
                       rng.randrange(8), rng.random() * 4096, rng.random() * (8 << 30)))
    return specs, states


def record_all(book: HostBook, states: list[State]) -> float:
    """Seconds to record ``states`` into ``book`` (as the recorder does, host looked up)."""
    hosts = book.hosts
    start = time.perf_counter()
    for t, host_id, cpu, mem, mem_bytes, tasks, cpu_alloc, mem_alloc in states:
        book.record(t, host_id, hosts[host_id], cpu, mem, mem_bytes, tasks, cpu_alloc,
                    mem_alloc)
    return time.perf_counter() - start


def host_states_per_call(hosts: int, rounds: int = 3) -> None:
    if measure.host_time.host_time_implementation() != "rust":
        print(f"host states per call: the Rust core is not loaded ({loader.rust_reason()})")
        return
    specs, states = host_states(hosts)
    end = states[-1][0] + 1.0
    made: dict[bool, HostBook] = {}
    best = {True: float("inf"), False: float("inf")}
    for _ in range(rounds):
        for reference in (True, False):
            book = HostBook(specs, None, RegionBounds(), 0.0, 60.0, end, reference=reference)
            best[reference] = min(best[reference], record_all(book, states))
            book.close(end)
            made[reference] = book
    python, rust_book = made[True], made[False]
    for host_id, host in python.hosts.items():  # the same accounting, or nothing is measured
        assert host.bins == rust_book.hosts[host_id].bins
    assert python.energy.finish(end) == rust_book.energy.finish(end)
    reference_ns, rust_ns = (best[r] / len(states) * 1e9 for r in (True, False))
    print(f"host states per call ({len(states)} over {hosts} hosts, HostBook.record, the energy "
          f"meter's update included), best of {rounds}:")
    print(f"  python reference ({loader.core()}) {reference_ns:8.0f} ns   rust {rust_ns:8.0f} ns"
          f"   ratio {reference_ns / rust_ns:.1f}x")


def list_ops(group: host_registry.memory.HostList, index: int, rounds: int,
             ) -> dict[str, float]:
    """ns per call of each operation on ``group`` (the best of ``rounds``)."""
    views = group.views(True)
    middle = views[len(views) // 2]

    def rejoin() -> None:
        group.remove(middle)
        group.insert(middle)

    def none() -> None:
        group.walk(index, 1 << 60, 1 << 60, True)

    def first() -> None:
        walk = group.walk(index, 0, 0, True)
        assert walk is not None
        next(walk)

    def whole() -> None:
        walk = group.walk(index, 0, 0, True)
        assert walk is not None
        for _ in walk:
            pass

    out: dict[str, float] = {}
    for name, call, count in (("leave and join", rejoin, 20_000), ("walk, nothing", none, 50_000),
                              ("walk, first host", first, 50_000),
                              (f"walk, all {len(views)}", whole, 200)):
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(count):
                call()
            best = min(best, time.perf_counter() - start)
        out[name] = best / count * 1e9
    return out


def lists_per_call(hosts: int, rounds: int = 3) -> None:
    if host_registry.memory.groups_implementation() != "rust":
        print(f"lists per call: the Rust core is not loaded ({loader.rust_reason()})")
        return
    store = MemoryStore()
    for i in range(hosts):
        store.add_host(HostSpec(f"h{i:05d}", 4096, 8 << 30), 0.0, 0.0)
    views = list(store.all_hosts())
    reference, rust_group = host_registry.memory._Group(), host_registry.memory._new_group()
    for view in views:
        reference.insert(view)
        rust_group.insert(view)
    assert rust_group.host_ids() == reference.host_ids()  # the same list, or nothing is measured
    index = 0  # the simple pass's room
    python_ns, rust_ns = list_ops(reference, index, rounds), list_ops(rust_group, index, rounds)
    print(f"lists per call (one list of {hosts} hosts, a method call each), best of {rounds}:")
    for name, reference_ns in python_ns.items():
        print(f"  {name:<18} python reference ({loader.core()}) {reference_ns:9.0f} ns   "
              f"rust {rust_ns[name]:9.0f} ns   ratio {reference_ns / rust_ns[name]:.1f}x")


def sim_speed(hosts: int, hours: float, repeat: int) -> None:
    print(f"\nthe first {hours:g} h on {hosts} hosts (python -m benchmarks.sim_speed "
          f"--skip-thesis --large-hosts {hosts} --large-hours {hours:g}), best of {repeat}:")
    command = [sys.executable, "-m", "benchmarks.sim_speed", "--skip-thesis", "--large-hosts",
               str(hosts), "--large-hours", str(hours), "--pace-every", str(hours)]
    switches = ("GREENSWARM_NATIVE", "GREENSWARM_NATIVE_MYPYC", "GREENSWARM_NATIVE_RUST")
    base = {k: v for k, v in os.environ.items() if k not in switches}  # the cache stays
    results: dict[str, float] = {}
    for name, settings in CORES:
        walls, cpus, peaks = [], [], []
        requests = 0
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(command, env=dict(base, **settings), capture_output=True,
                                  text=True, check=False)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            wall = [WALL.match(line) for line in done.stdout.splitlines()]
            found = [float(m.group(1)) for m in wall if m]
            count = REQUESTS.search(done.stdout)
            peak = PEAK.search(done.stdout)
            if done.returncode != 0 or not found or count is None or peak is None:
                print(f"  {name:<11} failed: {done.stderr.strip().splitlines()[-1:]}")
                break
            walls.append(found[0])
            peaks.append(float(peak.group(1)))
            requests = int(count.group(1).replace(",", ""))
        if walls:
            results[name] = min(cpus)
            print(f"  {name:<11} {min(walls):6.1f} s wall  {min(cpus):7.2f} s CPU  "
                  f"{min(cpus) / requests * 1e6:7.1f} us CPU per request ({requests} requests)"
                  f"  peak {max(peaks):5.0f} MiB", flush=True)
    pairs = (("pure", "pure+rust", "the Rust core, pure"),
             ("mypyc", "mypyc+rust", "the Rust core, compiled"),
             ("pure+rust", "mypyc+rust", "the mypyc build, with the Rust core"),
             ("pure", "mypyc", "the mypyc build, without the Rust core"))
    for slow, fast, what in pairs:
        if slow in results and fast in results:
            print(f"  {what}: {results[slow] / results[fast]:.2f}x CPU ({slow} / {fast})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=positive_int, default=100)
    parser.add_argument("--hours", type=positive_float, default=0.25)
    parser.add_argument("--repeat", type=positive_int, default=1)
    parser.add_argument("--skip-sim", action="store_true", help="the per-call parts only")
    args = parser.parse_args(argv)
    print(f"core: {loader.core()}, rust: {loader.rust_core()} ({loader.rust_reason()})")
    rooms_per_call(args.hosts)
    host_states_per_call(args.hosts)
    lists_per_call(args.hosts)
    if not args.skip_sim:
        sim_speed(args.hosts, args.hours, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
