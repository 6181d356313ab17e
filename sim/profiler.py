"""``greenswarm bench profile``: measure the usage profiles from the real workload containers.

Each workload image (lab/image_sources) runs alone on a Docker engine (the main engine or a lab
node) with a known allocation: 1024 CPU shares (one core) and 1 GiB of memory by default. Its
cgroup CPU counter and memory use (without page cache, as the monitor reads them) are sampled
every second; jobs run a short makespan to the end, services run for a while under a client
that sends R requests every 10 s (the thesis's service load; one run per rate). The series are
compressed into a ramp and a plateau (``profiles.steps_from_series``); for services, the CPU
cost per request rate is the least-squares slope of the plateau over the rates and the idle
level its intercept, and each rate's median round time is kept as ``response_ms``.

How a workload is sized from its allocation (the same rule a live replay should use):
Redis is filled with ``REDIS_DATA_MB`` = half its memory in MiB, the deep-learning job trains
on ``DL_MEMORY_MB`` = half its memory; FFmpeg and the time server take no size.

Caveats that the file records: CPU fractions above 1 mean the task used idle cores beyond its
allocation, and are bounded by the cores of the machine that measured them; memory fractions of
workloads with a fixed footprint (FFmpeg, the time server) are relative to the 1 GiB used here.

Everything started is removed by container id, also on failure. Containers are labelled
``greenswarm.profile`` (not ``greenswarm.task``: a running monitor ignores them); ports are
published on 127.0.0.1 only.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.errors import GreenSwarmError, UnavailableError
from monitor.cgroups import (
    CgroupDirs,
    detect_version,
    dirs_from_proc_cgroup,
    read_cpu_counter,
    read_memory,
)
from monitor.core import CpuCounter, cores_used, memory_used_bytes, memory_used_from_stats
from sim.profiles import (
    DEFAULT_PROFILES,
    Profiles,
    ProfileSource,
    UsageProfile,
    steps_from_series,
)
from workloads.cluster import GIB, MIB
from workloads.thesis import ROUND_INTERVAL_S, WORKLOAD_IMAGES, half_memory_mib
from workloads.trace import Workload

PROFILE_LABEL = "greenswarm.profile"
DEFAULT_RATES: tuple[int, ...] = (20, 40, 80)

Log = Callable[[str], None]


@dataclass(frozen=True)
class Recipe:
    workload: Workload
    image: str
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None  # a service's port inside the container
    service: bool = False


def recipes(memory_bytes: int, makespan_s: float) -> dict[Workload, Recipe]:
    half_mib = str(half_memory_mib(memory_bytes))
    makespan = str(round(makespan_s))
    images = WORKLOAD_IMAGES
    return {
        Workload.FFMPEG: Recipe(Workload.FFMPEG, images[Workload.FFMPEG],
                                {"MAKESPAN_S": makespan}),
        Workload.DL: Recipe(Workload.DL, images[Workload.DL],
                            {"MAKESPAN_S": makespan, "DL_MEMORY_MB": half_mib}),
        Workload.REDIS: Recipe(Workload.REDIS, images[Workload.REDIS],
                               {"REDIS_DATA_MB": half_mib, "REDIS_PORT": "6379"},
                               port=6379, service=True),
        Workload.TIMESERVER: Recipe(Workload.TIMESERVER, images[Workload.TIMESERVER],
                                    {"PORT": "8080"}, port=8080, service=True),
    }


@dataclass(frozen=True)
class Series:
    """Per-second samples of one container: fractions of its allocation, and client rounds."""

    cpu_fractions: tuple[float, ...]
    memory_fractions: tuple[float, ...]
    round_ms: tuple[float, ...] = ()


class _Sampler:
    """Reads one container's usage from its cgroup files, or from the stats API."""

    def __init__(self, container: Any, cgroup_root: Path = Path("/sys/fs/cgroup")) -> None:
        self.container = container
        self.dirs: CgroupDirs | None = None
        pid = int(container.attrs["State"]["Pid"])
        version = detect_version(cgroup_root)
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text(encoding="ascii")
            dirs = dirs_from_proc_cgroup(text, cgroup_root, version)
            if dirs is not None and dirs.exists():
                self.dirs = dirs
        except (OSError, ValueError):
            self.dirs = None  # another machine's engine: ask Docker

    def read(self) -> tuple[CpuCounter, int] | None:
        if self.dirs is not None:
            try:
                counter = read_cpu_counter(self.dirs, time.monotonic())
                memory = read_memory(self.dirs)
                return counter, memory_used_bytes(memory.usage_bytes, memory.cache_bytes)
            except (OSError, ValueError, KeyError):
                return None  # it exited
        stats = self.container.client.api.stats(self.container.id, stream=False)
        memory_stats = stats.get("memory_stats") or {}
        if "usage" not in memory_stats:
            return None
        usage_ns = int(stats["cpu_stats"]["cpu_usage"]["total_usage"])
        read_at = dt.datetime.fromisoformat(str(stats["read"])).timestamp()
        return CpuCounter(usage_ns, read_at), memory_used_from_stats(memory_stats)


def _host_port(container: Any, port: int) -> int:
    container.reload()
    bindings = container.attrs["NetworkSettings"]["Ports"].get(f"{port}/tcp") or []
    for binding in bindings:
        if binding.get("HostIp") in ("127.0.0.1", ""):
            return int(binding["HostPort"])
    raise UnavailableError(f"port {port} of {container.short_id} is not published")


def _client_rounds(recipe: Recipe, host_port: int, rate: int, stop: threading.Event,
                   rounds_ms: list[float]) -> None:
    """Every 10 s, ``rate`` requests one after the other; the round's duration in ms."""
    if recipe.workload is Workload.REDIS:
        import redis

        conn = redis.Redis(host="127.0.0.1", port=host_port, socket_timeout=10)
        while not stop.is_set():  # wait until the data is loaded (PING answers after it)
            try:
                if conn.dbsize() > 0:
                    break
            except redis.RedisError:
                pass
            stop.wait(0.2)

        def one(i: int) -> None:
            key = f"key:{i}"
            conn.exists(key)
            conn.get(key)
    else:
        import requests

        session = requests.Session()
        url = f"http://127.0.0.1:{host_port}/"
        while not stop.is_set():
            try:
                session.get(url, timeout=2).raise_for_status()
                break
            except requests.RequestException:
                stop.wait(0.2)

        def one(i: int) -> None:
            session.get(url, timeout=10).raise_for_status()

    next_round = time.monotonic()
    number = 0
    while not stop.is_set():
        start = time.monotonic()
        for _ in range(rate):
            one(number)
            number += 1
        rounds_ms.append((time.monotonic() - start) * 1000.0)
        next_round += ROUND_INTERVAL_S
        stop.wait(max(0.0, next_round - time.monotonic()))


def measure(client: Any, recipe: Recipe, *, cpu_shares: int, memory_bytes: int,
            duration_s: float, rate: int = 0, log: Log = print) -> Series:
    """Run one container of ``recipe``, sample it every second for ``duration_s`` (or until a
    job exits), and remove it."""
    ports = {f"{recipe.port}/tcp": ("127.0.0.1", None)} if recipe.port is not None else None
    container = client.containers.run(
        recipe.image, detach=True, environment=recipe.env, cpu_shares=cpu_shares,
        mem_limit=memory_bytes, memswap_limit=memory_bytes, ports=ports,
        labels={PROFILE_LABEL: recipe.workload.value},
        name=f"gs-profile-{recipe.workload.value}-{os.getpid()}-{time.monotonic_ns() % 10**6}",
    )
    stop = threading.Event()
    rounds: list[float] = []
    thread: threading.Thread | None = None
    try:
        container.reload()
        sampler = _Sampler(container)
        if recipe.service and recipe.port is not None and rate > 0:
            port = _host_port(container, recipe.port)
            thread = threading.Thread(
                target=_client_rounds, args=(recipe, port, rate, stop, rounds), daemon=True
            )
            thread.start()
        cores = cpu_shares / 1024
        cpu: list[float] = []
        memory: list[float] = []
        previous = sampler.read()
        start = time.monotonic()
        while previous is not None and len(cpu) < math.ceil(duration_s):
            time.sleep(max(0.0, start + len(cpu) + 1 - time.monotonic()))
            current = sampler.read()
            if current is None:
                break  # the job exited
            used = cores_used(previous[0], current[0])
            cpu.append((used or 0.0) / cores)
            memory.append(current[1] / memory_bytes)
            previous = current
        log(f"  {recipe.workload.value}{f' rate {rate}' if rate else ''}: {len(cpu)} samples, "
            f"cpu mean {statistics.fmean(cpu) if cpu else 0:.3f}, memory max "
            f"{max(memory, default=0):.3f}, rounds {len(rounds)}")
        return Series(tuple(cpu), tuple(memory), tuple(rounds))
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=15)
        container.remove(force=True)


def _raw(series: Series) -> dict[str, list[float]]:
    return {"cpu_fraction": [round(v, 4) for v in series.cpu_fractions],
            "memory_fraction": [round(v, 4) for v in series.memory_fractions],
            "round_ms": [round(v, 2) for v in series.round_ms]}


def _least_squares(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the best line through ``points``."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = 0.0 if var == 0 else sum((x - mean_x) * (y - mean_y) for x, y in points) / var
    return mean_y - slope * mean_x, slope


def job_profile(workload: Workload, series: Series, note: str) -> UsageProfile:
    # The last sample may cover the job's exit: drop it when there are enough.
    cpu = series.cpu_fractions[:-1] if len(series.cpu_fractions) > 3 else series.cpu_fractions
    memory = (series.memory_fractions[:-1] if len(series.memory_fractions) > 3
              else series.memory_fractions)
    return UsageProfile(workload, steps_from_series(cpu, memory),
                        source=ProfileSource.MEASURED, note=note)


def service_profile(workload: Workload, by_rate: dict[int, Series], note: str) -> UsageProfile:
    """Steps of the lowest rate with the idle CPU level; the per-rate cost from the fit."""
    points = []
    for rate, series in sorted(by_rate.items()):
        plateau = series.cpu_fractions[len(series.cpu_fractions) // 2:]
        points.append((float(rate), statistics.fmean(plateau)))
    intercept, slope = _least_squares(points)
    lowest = by_rate[min(by_rate)]
    steps = steps_from_series(lowest.cpu_fractions, lowest.memory_fractions)
    idle = max(0.0, intercept)
    last = steps[-1]
    steps = (*steps[:-1], type(last)(last.at_s, idle, last.memory_fraction))
    response = {rate: statistics.median(s.round_ms) for rate, s in by_rate.items()
                if s.round_ms}
    return UsageProfile(workload, steps, cpu_fraction_per_rate=max(0.0, slope),
                        source=ProfileSource.MEASURED, note=note, response_ms=response)


def measure_profiles(
    client: Any,
    workloads: Sequence[Workload],
    *,
    cpu_shares: int = 1024,
    memory_bytes: int = GIB,
    makespan_s: float = 30.0,
    service_s: float = 40.0,
    rates: Sequence[int] = DEFAULT_RATES,
    engine: str = "",
    log: Log = print,
) -> Profiles:
    """Measure ``workloads``; the others keep their default profiles (marked as defaults)."""
    plan = recipes(memory_bytes, makespan_s)
    info = client.info()
    by_workload: dict[Workload, UsageProfile] = dict(DEFAULT_PROFILES.by_workload)
    raw: dict[str, dict[str, dict[str, list[float]]]] = {}
    for workload in workloads:
        recipe = plan.get(workload)
        if recipe is None:
            raise GreenSwarmError(f"no image measures the {workload.value} workload")
        env = " ".join(f"{k}={v}" for k, v in sorted(recipe.env.items()))
        note = (f"measured: {recipe.image} alone, {cpu_shares} CPU shares, "
                f"{memory_bytes // MIB} MiB, {env}")
        log(f"measuring {workload.value} ({recipe.image})")
        if recipe.service:
            by_rate = {
                rate: measure(client, recipe, cpu_shares=cpu_shares, memory_bytes=memory_bytes,
                              duration_s=service_s, rate=rate, log=log)
                for rate in rates
            }
            by_workload[workload] = service_profile(
                workload, by_rate, note + f", client rates {list(rates)} per 10 s")
            raw[workload.value] = {f"rate-{rate}": _raw(series)
                                   for rate, series in by_rate.items()}
        else:
            series = measure(client, recipe, cpu_shares=cpu_shares, memory_bytes=memory_bytes,
                             duration_s=makespan_s + 5, log=log)
            by_workload[workload] = job_profile(workload, series, note)
            raw[workload.value] = {"run": _raw(series)}
    measured = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine": engine,
        "docker_version": str(info.get("ServerVersion", "")),
        "machine_cpus": int(info.get("NCPU", 0)),
        "machine_memory_bytes": int(info.get("MemTotal", 0)),
        "kernel": platform.release(),
        "cpu_shares": cpu_shares,
        "memory_bytes": memory_bytes,
        "job_makespan_s": makespan_s,
        "service_s": service_s,
        "rates_per_10_s": list(rates),
        "workloads": [w.value for w in workloads],
        "caveat": (
            "CPU fractions are of the allocation (cpu_shares / 1024 cores); values above 1 used "
            "idle cores and are bounded by machine_cpus. Memory fractions of fixed-footprint "
            "workloads (ffmpeg, timeserver) are relative to memory_bytes. Workloads not listed "
            "keep their documented default profile."
        ),
        "series": raw,  # the 1 s samples the steps were made from
    }
    return Profiles(by_workload, measured)
