"""The thesis workload (DESIGN 7.1, thesis section 5.1.1 and 5.1.3), as a seeded trace.

What the thesis fixes, and this generator follows exactly:

* type, uniformly among four workloads: FFmpeg (job), Redis (service), deep learning (job),
  time server (service);
* CPU shares: exponential, jobs 204..1024, services 2..1024; memory: exponential,
  256 MiB..2 GiB; makespan: exponential, 30 s..30 min;
* services get client requests every 10 s: 20 (memory < 500 MiB), 40 (< 1 GiB), 80 (else, up
  to 2 GiB) -- the thesis writes MB/GB for the same binary sizes it uses for memory;
* classes 1: 10 %, 2: 30 %, 3: 45 %, 4: 15 %;
* 2 requests per second until the CPU or the memory requested since the last pause reaches
  150 % of the cluster's capacity, then a pause as long as the mean makespan of the requests
  sent since the last pause, then on again; one hour; 5 hosts of 8 cores and 12 GiB.

What the thesis leaves open, and how it is decided here:

* "Exponential, truncated to [lo, hi]" is ``lo + E`` with ``E`` exponential of scale (mean)
  ``theta`` conditioned on ``E <= hi - lo``, drawn by inverting its CDF with one uniform
  number: ``E = -theta * ln(1 - u * (1 - exp(-(hi - lo) / theta)))``. Every value is inside
  the range, small values are the most frequent (the thesis's reason for the exponential), and
  each draw consumes exactly one random number, so traces are stable per seed.
* The scales are not in the thesis. Chosen here:

  - CPU: ``theta = 256`` shares (a quarter of the 1024-share maximum) for jobs and services;
    means about 426 shares (jobs) and 239 (services);
  - memory: ``theta = 512 MiB`` (a quarter of the 2 GiB maximum); mean about 712 MiB;
  - makespan: ``theta = 120 s``; mean about 150 s.

  The makespan scale sets how long the pauses are and so how many requests an hour holds:
  with 120 s a thesis hour holds about 2,150-2,300 requests (2,215 on average over seeds
  0-19), which matches the thesis's own runs (Table 5.1: Binpack handled 1256 + 967 = 2223
  requests, Spread 2133). With these sizes the memory limit is usually reached first, after
  about 130 requests (65 s).
* Sizes are whole units: CPU shares rounded to an integer, memory to a whole MiB, makespans
  to the millisecond.
* Timing: request k of a burst is sent at ``burst_start + k / rate``. The request that makes
  the cumulative CPU or memory reach the limit is sent; the next burst starts
  ``1 / rate + pause`` after it. Requests are generated while ``t < duration_s``.
* Draw order per request (fixed, for reproducibility): workload, class, CPU, memory, makespan.
* Ids are ``r000001``, ``r000002``, ... in arrival order.

Load as a knob (DESIGN 7.1): ``burst_limit_fraction`` is the peak F at which arrivals pause
(``--peak``, default 1.5: the thesis's 150 %); with ``diurnal`` the level follows a day,
F x (0.2 + 0.8 x (1 - cos(2 pi t / 24 h)) / 2), lowest at midnight (t = 0), F at noon; the
level of a request is the one at its own moment. ``checkpoint_share`` makes that share of the
jobs checkpointable (DESIGN 3.14), each saving its progress every ``checkpoint_interval_s``,
drawn from a random stream of their own: with a share of 0 the trace is the same as without.

Scaling to larger clusters: the limit is always 150 % of the configured cluster, and the
arrival rate, unless given, is ``2/s x cluster_scale`` where ``cluster_scale`` is the mean of
the cluster's CPU and memory capacity relative to the thesis cluster (40,960 shares, 60 GiB):
for N thesis-sized hosts that is ``2/s x N / 5`` (400 requests/s for 1,000 hosts). Bursts then
last as long as in the thesis and the cluster sees the same relative pressure; the request
count grows in proportion (about 2,200 x N / 5 per hour: some 10 million for 24 h on 1,000
hosts, so such traces are streamed, never held in memory; write them as ``.jsonl.gz``).
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from domain.errors import ValidationError
from domain.model import HostSpec, TaskType, check_checkpoint
from workloads.cluster import GIB, MIB, thesis_hosts
from workloads.trace import WORKLOAD_TYPE, Trace, TraceHeader, TraceRequest, TraceSource, Workload

THESIS_WORKLOADS: tuple[Workload, ...] = (
    Workload.FFMPEG,
    Workload.REDIS,
    Workload.DL,
    Workload.TIMESERVER,
)

# How the workloads are run, the same in the profiler (which measures them) and in the live
# replay (which runs them): their images, their data sets of half the allocation, and the
# client rounds every 10 s the thesis's services get.
WORKLOAD_IMAGES: Mapping[Workload, str] = {
    Workload.FFMPEG: "greenswarm/ffmpeg:latest",
    Workload.REDIS: "greenswarm/redis:latest",
    Workload.DL: "greenswarm/dl:latest",
    Workload.TIMESERVER: "greenswarm/timeserver:latest",
    Workload.GENERIC: "greenswarm/busybox:latest",
}
ROUND_INTERVAL_S = 10.0


def half_memory_mib(memory_bytes: int) -> int:
    """The data set of a workload allocated ``memory_bytes``: half of it in MiB (at least 1)."""
    return max(1, memory_bytes // MIB // 2)


THESIS_CLUSTER_CPU_SHARES = 5 * 8192
THESIS_CLUSTER_MEMORY_BYTES = 5 * 12 * GIB
THESIS_ARRIVAL_RATE_PER_S = 2.0
THESIS_DURATION_S = 3600.0
DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Range:
    """A closed range [low, high] with the scale of the exponential drawn inside it."""

    low: float
    high: float
    scale: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValidationError("range", f"need low <= high, got {self.low}..{self.high}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValidationError("range", f"the scale must be > 0, got {self.scale}")

    def draw(self, rng: random.Random) -> float:
        """One value of the truncated exponential (one uniform number consumed)."""
        return truncated_exponential(rng.random(), self.low, self.high, self.scale)

    def mean(self) -> float:
        """Mean of the truncated exponential (for documentation and tests)."""
        width = self.high - self.low
        if width == 0:
            return self.low
        return self.low + self.scale - width / math.expm1(width / self.scale)


def truncated_exponential(u: float, low: float, high: float, scale: float) -> float:
    """Inverse CDF of ``low + Exp(scale)`` conditioned on ``<= high``, at ``u`` in [0, 1)."""
    width = high - low
    if width <= 0:
        return low
    mass = -math.expm1(-width / scale)  # P(E <= width)
    excess = -scale * math.log1p(-u * mass)
    return min(high, low + excess)


@dataclass(frozen=True, slots=True)
class ThesisWorkloadConfig:
    """Every knob of the generator; the defaults are DESIGN 7.1 and the choices above."""

    hosts: tuple[HostSpec, ...] = field(default_factory=thesis_hosts)
    duration_s: float = THESIS_DURATION_S
    # None: 2/s scaled with the cluster (see the module docstring).
    arrival_rate_per_s: float | None = None
    burst_limit_fraction: float = 1.5
    job_cpu_shares: Range = Range(204, 1024, 256)
    service_cpu_shares: Range = Range(2, 1024, 256)
    memory_mib: Range = Range(256, 2048, 512)
    makespan_s: Range = Range(30, 1800, 120)
    class_weights: tuple[float, float, float, float] = (0.10, 0.30, 0.45, 0.15)
    # Service request rates by memory: (upper bound exclusive in bytes, requests per 10 s).
    request_rate_by_memory: tuple[tuple[int, int], ...] = (
        (500 * MIB, 20),
        (1 * GIB, 40),
    )
    request_rate_above: int = 80
    diurnal: bool = False  # the pause level follows a day (see the module docstring)
    checkpoint_share: float = 0.0  # of the jobs, checkpointable (DESIGN 3.14)
    checkpoint_interval_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ValidationError("hosts", "need at least one host")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValidationError("duration_s", f"must be > 0, got {self.duration_s}")
        rate = self.arrival_rate_per_s
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise ValidationError("arrival_rate_per_s", f"must be > 0, got {rate}")
        if not (math.isfinite(self.burst_limit_fraction) and self.burst_limit_fraction > 0):
            raise ValidationError("peak", "must be a number > 0")
        if not (math.isfinite(self.checkpoint_share) and 0 <= self.checkpoint_share <= 1):
            raise ValidationError("checkpoint_share", "must be in [0, 1]")
        if self.checkpoint_share > 0:
            check_checkpoint(self.checkpoint_interval_s, TaskType.JOB, "checkpoint_interval_s")
        if len(self.class_weights) != 4 or any(
            not (math.isfinite(w) and w >= 0) for w in self.class_weights
        ) or not sum(self.class_weights):
            raise ValidationError("class_weights",
                                  "need four finite non-negative weights, not all 0")

    @property
    def cluster_scale(self) -> float:
        """The cluster's size in thesis clusters: mean of the CPU and memory ratios."""
        cpu = sum(h.cpu_capacity for h in self.hosts) / THESIS_CLUSTER_CPU_SHARES
        memory = sum(h.memory_capacity for h in self.hosts) / THESIS_CLUSTER_MEMORY_BYTES
        return (cpu + memory) / 2

    @property
    def effective_arrival_rate_per_s(self) -> float:
        if self.arrival_rate_per_s is not None:
            return self.arrival_rate_per_s
        return THESIS_ARRIVAL_RATE_PER_S * self.cluster_scale

    @property
    def cpu_limit_shares(self) -> float:
        return self.burst_limit_fraction * sum(h.cpu_capacity for h in self.hosts)

    @property
    def memory_limit_bytes(self) -> float:
        return self.burst_limit_fraction * sum(h.memory_capacity for h in self.hosts)

    def level_at(self, t_s: float) -> float:
        """The fraction of the cluster requested at which arrivals pause, at ``t_s``."""
        if not self.diurnal:
            return self.burst_limit_fraction
        day = (1 - math.cos(2 * math.pi * t_s / DAY_S)) / 2
        return self.burst_limit_fraction * (0.2 + 0.8 * day)

    def request_rate_for(self, memory_bytes: int) -> int:
        for bound, rate in self.request_rate_by_memory:
            if memory_bytes < bound:
                return rate
        return self.request_rate_above


def thesis_header(config: ThesisWorkloadConfig, seed: int) -> TraceHeader:
    rate = config.effective_arrival_rate_per_s
    level = f"{config.burst_limit_fraction:.0%}"
    if config.diurnal:
        level += " x (0.2 + 0.8 x (1 - cos(2 pi t / 24 h)) / 2)"
    notes = (
        "DESIGN 7.1 thesis workload; "
        f"{rate:g} requests/s until {level} of the cluster's CPU or "
        "memory is requested, then a pause of the mean makespan; "
        f"CPU scale {config.job_cpu_shares.scale:g}/{config.service_cpu_shares.scale:g} shares "
        f"(job/service), memory scale {config.memory_mib.scale:g} MiB, makespan scale "
        f"{config.makespan_s.scale:g} s"
        + (f"; {config.checkpoint_share:.0%} of the jobs checkpoint every "
           f"{config.checkpoint_interval_s:g} s" if config.checkpoint_share > 0 else "")
    )
    return TraceHeader(
        source=TraceSource.THESIS.value,
        seed=seed,
        duration_s=float(config.duration_s),
        hosts=config.hosts,
        notes=notes,
    )


def iter_thesis_requests(
    seed: int, config: ThesisWorkloadConfig | None = None
) -> Iterator[TraceRequest]:
    """The requests of the thesis workload, lazily, in time order (see the module docstring)."""
    config = config or ThesisWorkloadConfig()
    rng = random.Random(seed)
    # checkpointable jobs come from a stream of their own: the trace's draws stay the same
    checkpoints = random.Random(f"checkpoint-{seed}") if config.checkpoint_share > 0 else None
    interval_s = 1.0 / config.effective_arrival_rate_per_s
    cpu_capacity = sum(h.cpu_capacity for h in config.hosts)
    memory_capacity = sum(h.memory_capacity for h in config.hosts)
    cpu_limit = config.cpu_limit_shares
    memory_limit = config.memory_limit_bytes
    classes = (1, 2, 3, 4)
    cumulative_weights = []
    total = 0.0
    for weight in config.class_weights:
        total += weight
        cumulative_weights.append(total)
    # A class drawn as random.Random.choices draws it from cumulative weights (one random()
    # scaled by the total, bisected below the last index): the same draws, without the
    # interpreted call and its list for every request.
    last = len(classes) - 1

    burst_start = 0.0
    k = 0  # index inside the burst
    cpu_sum = 0
    memory_sum = 0
    makespan_sum = 0.0
    burst_count = 0
    number = 0
    while True:
        t = burst_start + k * interval_s
        if t >= config.duration_s:
            return
        workload = THESIS_WORKLOADS[math.floor(rng.random() * len(THESIS_WORKLOADS))]
        request_class = classes[bisect.bisect(cumulative_weights, rng.random() * total, 0, last)]
        task_type = WORKLOAD_TYPE[workload]
        cpu_range = (
            config.job_cpu_shares if task_type is TaskType.JOB else config.service_cpu_shares
        )
        cpu_shares = max(2, round(cpu_range.draw(rng)))
        memory_bytes = round(config.memory_mib.draw(rng)) * MIB
        makespan_s = round(config.makespan_s.draw(rng), 3)
        checkpoint_s = 0.0
        if (checkpoints is not None and task_type is TaskType.JOB
                and checkpoints.random() < config.checkpoint_share):
            checkpoint_s = config.checkpoint_interval_s
        number += 1
        yield TraceRequest(
            t_s=round(t, 6),
            id=f"r{number:06d}",
            request_class=request_class,
            type=task_type,
            workload=workload,
            cpu_shares=cpu_shares,
            memory_bytes=memory_bytes,
            makespan_s=makespan_s,
            request_rate=(
                config.request_rate_for(memory_bytes) if task_type is TaskType.SERVICE else None
            ),
            checkpoint_interval_s=checkpoint_s,
        )
        cpu_sum += cpu_shares
        memory_sum += memory_bytes
        makespan_sum += makespan_s
        burst_count += 1
        k += 1
        if config.diurnal:
            level = config.level_at(t)
            cpu_limit, memory_limit = level * cpu_capacity, level * memory_capacity
        if cpu_sum >= cpu_limit or memory_sum >= memory_limit:
            pause_s = makespan_sum / burst_count
            burst_start = t + interval_s + pause_s
            k = 0
            cpu_sum = 0
            memory_sum = 0
            makespan_sum = 0.0
            burst_count = 0


def generate_thesis_trace(seed: int, config: ThesisWorkloadConfig | None = None) -> Trace:
    """The whole thesis trace in memory (for the default hour: a few thousand requests)."""
    config = config or ThesisWorkloadConfig()
    return Trace(thesis_header(config, seed), tuple(iter_thesis_requests(seed, config)))


# ------------------------------------------------------------------ probe jobs


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """Probe jobs of known length (DESIGN 7.3; thesis 5.1.2: "every 5 minutes ... alternating
    between the CPU-intensive job and CPU/Memory intensive job").

    Not part of the trace file: the driver merges them into the stream with
    :func:`with_probes` and records them with ``on_submit_request(request, probe=True)``, so
    their makespans and slowdowns are reported apart from the trace's own jobs. Their class
    defaults to 3, the most frequent class of the thesis workload, so a probe is treated like
    a typical request (cuts included).
    """

    interval_s: float = 300.0
    first_s: float = 150.0  # in the middle of the first 5-minute window
    makespan_s: float = 120.0
    cpu_shares: int = 512
    memory_bytes: int = 512 * MIB
    request_class: int = 3
    workloads: tuple[Workload, ...] = (Workload.FFMPEG, Workload.DL)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interval_s) and self.interval_s > 0):
            raise ValidationError("interval_s", "must be > 0")
        if not self.workloads or any(
            WORKLOAD_TYPE.get(w) is not TaskType.JOB for w in self.workloads
        ):
            raise ValidationError("workloads", "probes must be job workloads (ffmpeg, dl)")


def iter_probe_requests(
    duration_s: float, config: ProbeConfig | None = None
) -> Iterator[TraceRequest]:
    """Probe jobs at ``first_s``, ``first_s + interval_s``, ... while ``t < duration_s``;
    ids ``probe-0001``, ... (distinct from trace ids, which never start with ``probe-``)."""
    config = config or ProbeConfig()
    number = 0
    t = config.first_s
    while t < duration_s:
        workload = config.workloads[number % len(config.workloads)]
        number += 1
        yield TraceRequest(
            t_s=round(t, 6),
            id=f"probe-{number:04d}",
            request_class=config.request_class,
            type=TaskType.JOB,
            workload=workload,
            cpu_shares=config.cpu_shares,
            memory_bytes=config.memory_bytes,
            makespan_s=config.makespan_s,
        )
        t = config.first_s + number * config.interval_s


def with_probes(
    requests: Iterable[TraceRequest], probes: Iterable[TraceRequest]
) -> Iterator[tuple[TraceRequest, bool]]:
    """Trace requests and probes merged by time, each flagged ``True`` when it is a probe
    (at equal times the trace request comes first), both streams read as the merge goes."""
    yield from heapq.merge(_flagged(requests, False), _flagged(probes, True),
                           key=lambda x: x[0].t_s)


def _flagged(
    stream: Iterable[TraceRequest], probe: bool
) -> Iterator[tuple[TraceRequest, bool]]:
    """Each request of ``stream`` with ``probe``, read as it is asked for: a generator
    function, since mypyc compiles a generator expression as a list (fed those, the compiled
    merge read a day's whole trace, 10 M requests on 1,000 hosts, before its first)."""
    for request in stream:
        yield request, probe
