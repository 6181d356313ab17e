"""Decision time of a policy on an in-memory cluster of N hosts x 20 tasks (DESIGN 8).

Run: ``python -m benchmarks.decision_bench [--hosts 5,1000,10000] [--decisions 2000]
[--store memory,redis --redis-url URL] [--sustained-s 10]``.

The cluster is random but seeded: hosts of 8 cores and 12 GiB, utilizations spread over the
three regions, 20 tasks per host in the thesis class mix, booked up to the host's class limit.
Each measured decision is preceded by a few utilization updates (which move hosts between
lists, as the monitor does), so stores cannot keep every shortcut warm. Requests that are
placed are applied and then ended again (untimed), keeping the cluster's state stationary.
Times are for ``policy.decide`` alone; "nothing fits" requests ask for a whole host.
"Sustained" counts full cycles per second for a while: decide, apply (the registry updates of
DESIGN 3.8), end the task again, on the usual request mix.
"""

from __future__ import annotations

# ruff: noqa: E402 (an entry point: the compiled core is enabled before the imports below)
from native import loader

loader.enable()

import argparse
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.memory import peak_mib
from domain.classes import ClassTable
from domain.model import HostSpec, Request, Task, TaskType
from domain.store import ClusterStore
from host_registry.memory import MemoryStore
from measure.stats import Stats
from scheduler.plugin import Policy
from scheduler.registry import make_policy
from workloads.thesis import ThesisWorkloadConfig

CPU_SHARES = 8 * 1024
MEMORY_BYTES = 12 * 2**30
TASKS_PER_HOST = 20
CLASS_WEIGHTS = ThesisWorkloadConfig().class_weights  # DESIGN 7.1's class mix


def draw_class(rng: random.Random) -> int:
    return rng.choices((1, 2, 3, 4), weights=CLASS_WEIGHTS)[0]


def populate(store: ClusterStore, hosts: int, seed: int) -> None:
    """Fill ``store`` with ``hosts`` hosts of 20 tasks each, within every class limit."""
    rng = random.Random(seed)
    classes = store.classes
    for index in range(hosts):
        host_id = f"host{index:05d}"
        util = rng.random()
        store.add_host(HostSpec(host_id, CPU_SHARES, MEMORY_BYTES), util, util * rng.random())
        task_classes = [draw_class(rng) for _ in range(TASKS_PER_HOST)]
        host_class = min(task_classes)
        fill = rng.uniform(0.5, 1.0) * float(classes.max_factor(host_class))
        cpu_each = int(CPU_SHARES * fill / TASKS_PER_HOST)
        memory_each = int(MEMORY_BYTES * fill / TASKS_PER_HOST)
        for number, cls in enumerate(task_classes):
            kind = TaskType.JOB if rng.random() < 0.5 else TaskType.SERVICE
            store.load_task(
                Task(
                    id=f"{host_id}-t{number}",
                    host=host_id,
                    cls=cls,
                    type=kind,
                    cpu_shares=cpu_each,
                    memory=memory_each,
                    original_cpu_shares=cpu_each,
                    original_memory=memory_each,
                    cpu_util=rng.random(),
                    memory_util=rng.random(),
                )
            )


def placeable_request(rng: random.Random, number: int) -> Request:
    kind = TaskType.JOB if rng.random() < 0.5 else TaskType.SERVICE
    return Request(
        f"req{number}",
        draw_class(rng),
        kind,
        rng.randint(204, 1024),
        rng.randint(256, 2048) * 2**20,
    )


def whole_host_request(rng: random.Random, number: int) -> Request:
    return Request(f"big{number}", draw_class(rng), TaskType.SERVICE, CPU_SHARES, MEMORY_BYTES)


@dataclass(frozen=True)
class Timing:
    label: str
    samples_ms: list[float]

    def row(self) -> str:
        stats = Stats.of(self.samples_ms)  # the percentiles every benchmark report uses
        return (
            f"{self.label:<44} n={stats.count:>5}  "
            f"p50={stats.p50:8.3f} ms  p99={stats.p99:8.3f} ms  "
            f"max={stats.max:8.3f} ms  mean={stats.mean:7.3f} ms"
        )


def measure(
    store: ClusterStore,
    policy: Policy,
    make_request: Callable[[random.Random, int], Request],
    decisions: int,
    seed: int,
    label: str,
) -> list[Timing]:
    """Time ``decisions`` decisions; one Timing for those placed, one for those refused."""
    rng = random.Random(seed)
    host_ids = [host.id for host in store.all_hosts()]
    by_outcome: dict[bool, list[float]] = {True: [], False: []}
    for number in range(decisions):
        for _ in range(3):  # the monitor keeps moving hosts around
            util = rng.random()
            store.update_host_utilization(rng.choice(host_ids), util, util * rng.random())
        request = make_request(rng, number)
        start = time.perf_counter_ns()
        decision = policy.decide(request, store)
        by_outcome[decision.placed].append((time.perf_counter_ns() - start) / 1e6)
        if decision.placed:
            killed = store.apply(decision, now=float(number))
            store.end_task(request.id)
            for task in killed:  # put victims back where they were: keep the state stationary
                store.load_task(task)
    return [
        Timing(f"{label}: {'placed' if placed else 'nothing fits'}", samples)
        for placed, samples in by_outcome.items()
        if samples
    ]


def sustained(
    store: ClusterStore, policy: Policy, seconds: float, seed: int
) -> tuple[float, float]:
    """For ``seconds`` of decide + apply + end cycles on the usual mix, return (decisions per
    second counting only decide + apply, full cycles per second including the task's end)."""
    rng = random.Random(seed)
    cycles = 0
    deciding_s = 0.0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        request = placeable_request(rng, 10**7 + cycles)
        begin = time.perf_counter()
        decision = policy.decide(request, store)
        killed = store.apply(decision, now=float(cycles)) if decision.placed else []
        deciding_s += time.perf_counter() - begin
        if decision.placed:
            store.end_task(request.id)
            for task in killed:
                store.load_task(task)
        cycles += 1
    return cycles / deciding_s, cycles / (time.perf_counter() - started)


def make_store(kind: str, redis_url: str | None) -> ClusterStore:
    if kind == "memory":
        return MemoryStore(ClassTable())
    if redis_url is None:
        raise SystemExit("--store redis needs --redis-url (e.g. redis://127.0.0.1:6399/0)")
    from host_registry.redis_store import RedisStore  # I/O edge: only when asked for

    store = RedisStore.from_url(redis_url, ClassTable(), prefix="bench")
    store.flush()
    return store


def run(
    hosts: list[int],
    decisions: int,
    policy_name: str,
    seed: int,
    stores: list[str],
    redis_url: str | None = None,
    sustained_s: float = 0.0,
) -> list[Timing]:
    results = []
    for count in hosts:
        for kind in stores:
            store = make_store(kind, redis_url)
            started = time.perf_counter()
            populate(store, count, seed)
            build_s = time.perf_counter() - started
            policy = make_policy(policy_name, seed=seed)
            print(
                f"-- {kind} store, {count} hosts x {TASKS_PER_HOST} tasks "
                f"(built in {build_s:.1f} s)",
                flush=True,
            )
            for label, maker in (("usual", placeable_request), ("whole-host", whole_host_request)):
                for timing in measure(
                    store, policy, maker, decisions, seed + 1, f"{kind} {count} {label}"
                ):
                    print(timing.row(), flush=True)
                    results.append(timing)
            if sustained_s > 0:
                decisions_rate, cycle_rate = sustained(store, policy, sustained_s, seed + 2)
                print(
                    f"{kind} {count} sustained: {decisions_rate:,.0f} decisions per second "
                    f"(decide + apply); {cycle_rate:,.0f} cycles per second with the task's end",
                    flush=True,
                )
            print(f"{kind} {count} memory: this process's peak so far {peak_mib():.0f} MiB"
                  + (f", Redis's used memory {redis_used_mib(redis_url):.0f} MiB"
                     if kind == "redis" and redis_url else ""), flush=True)
    return results


def redis_used_mib(redis_url: str) -> float:
    """What the Redis server holds now (its books are the Redis store's whole cluster)."""
    import redis  # I/O edge: only when asked for

    client = redis.Redis.from_url(redis_url)
    try:
        return float(client.info("memory")["used_memory"]) / 2**20
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts", default="5,1000,10000")
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--policy", default="energy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", default="memory", help="memory, redis, or memory,redis")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument(
        "--sustained-s",
        type=float,
        default=0.0,
        help="also measure sustained cycles per second for this long",
    )
    args = parser.parse_args(argv)
    run(
        [int(n) for n in args.hosts.split(",")],
        args.decisions,
        args.policy,
        args.seed,
        args.store.split(","),
        args.redis_url,
        args.sustained_s,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
