"""What the live replay submits, when, and how (pure: no I/O).

Time compression by a factor ``K`` (``speedup``): a request of the trace at ``t`` seconds is
submitted ``t / K`` wall seconds after the start of the replay; a job gets ``MAKESPAN_S =
makespan / K`` (whole seconds, at least 1: the FFmpeg image counts in shell integers); a
service is stopped (``DELETE /requests/{id}``) ``makespan / K`` wall seconds after its latest
placement (a killed and rescheduled service starts its time again, as in the simulator);
a service's client sends a round of ``request_rate`` requests every ``10 / K`` wall seconds
(the thesis's rates are per 10 s of trace time). Everything the replay records is on the
trace's clock: ``trace_s = (wall - start) x K``.

How a request becomes a body of ``POST /requests`` (:func:`build_spec`): the workload's image
(lab/image_sources), CPU shares, memory, class and type as in the trace, and the sizing rule of
the profiler (sim/profiler.py) so that a container uses its allocation as the
simulator's profiles say: Redis is filled with ``REDIS_DATA_MB`` = half its memory, the
deep-learning job trains on ``DL_MEMORY_MB`` = half its memory. Services publish one port in
host mode, the same number inside and outside (``PORT`` / ``REDIS_PORT``), unique per request:
``port_base + k`` for the k-th service of the replay. ``generic`` requests (converted public
traces) run busybox: a job sleeps its makespan, a service idles; they get no client. With
``queue_new`` every body asks to queue (``"queue": true``, DESIGN 3.7): a request no pass places
waits in the manager's pending queue instead of being refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.errors import ValidationError
from domain.model import TaskType
from workloads.thesis import ROUND_INTERVAL_S, WORKLOAD_IMAGES, half_memory_mib
from workloads.trace import TraceRequest, Workload

DEFAULT_PORT_BASE = 20000
MAX_PORT = 65535

# PID 1 of a busybox container ignores SIGTERM unless it traps it.
_IDLE = ["sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait"]


def _sleep_command(seconds: int) -> list[str]:
    return ["sh", "-c", f"trap 'exit 143' TERM; sleep {seconds} & wait"]


@dataclass(frozen=True, slots=True)
class TraceClock:
    """Wall clock (epoch seconds) <-> the trace's clock, compressed by ``speedup``."""

    start_wall_s: float
    speedup: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speedup) and self.speedup > 0):
            raise ValidationError("speedup", f"must be a finite number > 0, got {self.speedup}")

    def trace_s(self, wall_s: float) -> float:
        """Trace time of a wall-clock instant (0 before the start)."""
        return max(0.0, (wall_s - self.start_wall_s) * self.speedup)

    def wall_s(self, trace_s: float) -> float:
        return self.start_wall_s + trace_s / self.speedup


@dataclass(frozen=True, slots=True)
class ReplayPlanConfig:
    speedup: float
    duration_s: float  # trace time: requests with t <= duration_s are submitted
    port_base: int = DEFAULT_PORT_BASE
    id_prefix: str = ""  # prepended to every trace id (a manager never sees an id twice)
    queue_new: bool = False  # ask the manager to queue what no pass places (DESIGN 3.7)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speedup) and self.speedup > 0):
            raise ValidationError("speedup", f"must be a finite number > 0, got {self.speedup}")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValidationError("duration_s", f"must be > 0, got {self.duration_s}")
        if not 1024 <= self.port_base <= MAX_PORT:
            raise ValidationError("port_base", f"must be a port in 1024..{MAX_PORT}")


@dataclass(frozen=True, slots=True)
class Submission:
    """One ``POST /requests`` of the replay."""

    offset_wall_s: float  # seconds after the start of the replay
    request: TraceRequest
    probe: bool
    request_id: str  # the id the manager knows it by
    port: int | None  # a service's published port
    speedup: float
    body: Mapping[str, Any] = field(repr=False)  # of POST /requests

    @property
    def is_service(self) -> bool:
        return self.request.type is TaskType.SERVICE

    @property
    def job_makespan_wall_s(self) -> int | None:
        if self.request.type is not TaskType.JOB:
            return None
        return job_makespan_wall_s(self.request.makespan_s, self.speedup)

    @property
    def expected_makespan_s(self) -> float:
        """Trace seconds a job should take: its whole wall seconds x K (rounding included);
        for a service, the trace's makespan."""
        wall = self.job_makespan_wall_s
        return self.request.makespan_s if wall is None else wall * self.speedup

    def stop_due_wall_s(self, placed_wall_s: float) -> float:
        """When the client stops this service, given its latest placement (wall clock)."""
        return placed_wall_s + self.request.makespan_s / self.speedup

    @property
    def data_keys(self) -> int:
        """Redis: how many keys the image populates (``REDIS_DATA_MB`` MiB of 1 KiB values)."""
        env = self.body.get("env", {})
        return int(env.get("REDIS_DATA_MB", "0")) * 1024


def job_makespan_wall_s(makespan_s: float, speedup: float) -> int:
    """``MAKESPAN_S`` of a job: its makespan / K in whole seconds, at least 1."""
    return max(1, round(makespan_s / speedup))


def round_interval_wall_s(speedup: float) -> float:
    """Wall seconds between two client rounds of a service."""
    return ROUND_INTERVAL_S / speedup


def build_body(
    request: TraceRequest, speedup: float, *, request_id: str, port: int | None,
    queue: bool = False,
) -> dict[str, Any]:
    """The body of ``POST /requests`` for a trace request (see the module docstring)."""
    env: dict[str, str] = {}
    command: list[str] | None = None
    is_job = request.type is TaskType.JOB
    wall_makespan = job_makespan_wall_s(request.makespan_s, speedup) if is_job else None
    workload = request.workload
    if workload in (Workload.FFMPEG, Workload.DL):
        env["MAKESPAN_S"] = str(wall_makespan)
    if workload is Workload.DL:
        env["DL_MEMORY_MB"] = str(half_memory_mib(request.memory_bytes))
    if workload is Workload.REDIS:
        env["REDIS_DATA_MB"] = str(half_memory_mib(request.memory_bytes))
        env["REDIS_PORT"] = str(port)
    if workload is Workload.TIMESERVER:
        env["PORT"] = str(port)
    if workload is Workload.GENERIC:
        command = _sleep_command(wall_makespan) if wall_makespan is not None else list(_IDLE)
    body: dict[str, Any] = {
        "image": WORKLOAD_IMAGES[workload],
        "name": request_id,
        "class": request.request_class,
        "type": request.type.value,
        "cpu_shares": request.cpu_shares,
        "memory": request.memory_bytes,
    }
    if env:
        body["env"] = env
    if command is not None:
        body["command"] = command
    if port is not None and workload in (Workload.REDIS, Workload.TIMESERVER):
        body["ports"] = [f"{port}:{port}"]
    if queue:
        body["queue"] = True
    return body


def plan_submissions(
    requests: Iterable[tuple[TraceRequest, bool]], config: ReplayPlanConfig
) -> list[Submission]:
    """Every submission of the replay in time order (``(request, is_probe)`` in, as
    :func:`sim.runner.requests_with_probes` yields them)."""
    plan: list[Submission] = []
    services = 0
    for request, probe in requests:
        if request.t_s > config.duration_s:
            break
        port: int | None = None
        if request.type is TaskType.SERVICE and request.workload in (
            Workload.REDIS, Workload.TIMESERVER
        ):
            port = config.port_base + services
            services += 1
            if port > MAX_PORT:
                raise ValidationError(
                    "port_base", f"{services} services do not fit in ports {config.port_base}.."
                    f"{MAX_PORT}: choose a lower --port-base"
                )
        request_id = config.id_prefix + request.id
        plan.append(
            Submission(
                offset_wall_s=request.t_s / config.speedup,
                request=request,
                probe=probe,
                request_id=request_id,
                port=port,
                speedup=config.speedup,
                body=build_body(request, config.speedup, request_id=request_id, port=port,
                                queue=config.queue_new),
            )
        )
    return plan
