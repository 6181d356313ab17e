"""Several policies over the same trace, each with a fresh store (pure: no files written).

The trace is given as a header and a factory of fresh request streams, so a file of millions
of requests is streamed once per policy instead of being held in memory.

With ``jobs`` above 1 the policies run side by side in worker processes (forked, so the trace's
factory and the profiles need not be picklable; only policy names, progress and results cross
the process boundary). A run is deterministic, so the results are the same as one after the
other, decision times aside: they are wall clock, and parallel runs share the machine. The
workers run the core their parent runs: forked, they inherit its choice and its imported modules
(the compiled core's values pickle both ways, see native.loader.make_picklable).
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing.queues import Queue

from scheduler import registry
from sim.config import SimConfig, SimResult
from sim.engine import ProgressCallback, simulate
from sim.profiles import Profiles
from workloads.qos_validation import (
    QosValidationConfig,
    iter_qos_validation_requests,
    qos_validation_header,
)
from workloads.thesis import (
    ProbeConfig,
    ThesisWorkloadConfig,
    iter_probe_requests,
    iter_thesis_requests,
    thesis_header,
    with_probes,
)
from workloads.trace import TraceHeader, TraceRequest


def default_policies() -> list[str]:
    """Every policy the simulator runs (the registration table's, live-only ones aside)."""
    return registry.names(simulated=True)


THESIS_PROBES = ProbeConfig()  # a probe job every 5 minutes (DESIGN 7.3)


@dataclass(frozen=True)
class TraceInput:
    """A trace: its header, and a function that streams its requests from the start."""

    header: TraceHeader
    requests: Callable[[], Iterable[TraceRequest]]


def thesis_input(seed: int, config: ThesisWorkloadConfig | None = None) -> TraceInput:
    """The generated thesis workload (DESIGN 7.1), regenerated identically for every policy."""
    config = config or ThesisWorkloadConfig()
    return TraceInput(thesis_header(config, seed), lambda: iter_thesis_requests(seed, config))


def qos_validation_input(seed: int, config: QosValidationConfig) -> TraceInput:
    """One of the QoS-driven paper's validation tests (DESIGN 7.5), the same for every policy."""
    return TraceInput(qos_validation_header(config, seed),
                      lambda: iter_qos_validation_requests(seed, config))


def requests_with_probes(
    requests: Iterable[TraceRequest], end_s: float, probes: ProbeConfig | None
) -> Iterator[tuple[TraceRequest, bool]]:
    """The trace's requests flagged False, merged with probe jobs (flagged True) if asked."""
    if probes is None:
        return ((request, False) for request in requests)
    return with_probes(requests, iter_probe_requests(end_s, probes))


ProgressFactory = Callable[[str], ProgressCallback | None]
# How often a worker process reports its progress at most (wall seconds).
WORKER_PROGRESS_EVERY_S = 0.1


@dataclass(frozen=True)
class _Job:
    """Everything a policy run needs but the policy's name."""

    trace: TraceInput
    profiles: Profiles
    config: SimConfig
    probes: ProbeConfig | None
    arrivals_until_s: float | None

    def run(self, policy: str, progress: ProgressCallback | None) -> SimResult:
        end_s = self.trace.header.duration_s if self.config.end_s is None else self.config.end_s
        arrivals_end_s = (end_s if self.arrivals_until_s is None
                          else min(self.arrivals_until_s, end_s))
        requests: Iterable[TraceRequest] = self.trace.requests()
        if self.arrivals_until_s is not None:
            requests = itertools.takewhile(lambda r: r.t_s <= arrivals_end_s, requests)
        stream = requests_with_probes(requests, arrivals_end_s, self.probes)
        return simulate(self.trace.header, stream, self.profiles,
                        replace(self.config, policy=policy), progress=progress)


def run_policies(
    trace: TraceInput,
    policies: Sequence[str],
    profiles: Profiles,
    config: SimConfig,
    *,
    probes: ProbeConfig | None = THESIS_PROBES,
    progress: ProgressFactory | None = None,
    arrivals_until_s: float | None = None,
    jobs: int = 1,
) -> list[SimResult]:
    """Every policy of ``policies`` on the same trace; ``config.policy`` is replaced. The
    results are in the order of ``policies``.

    ``progress(policy)`` may return a callback that is told (simulated time, end time); with
    ``jobs`` > 1 it is called in this process, from what the workers report.
    ``arrivals_until_s``: no request or probe arrives after it; the run goes on to the end
    time (a drain: queued victims may still be placed).
    ``jobs``: how many policies run at once, each in its own process (1: one after the other,
    in this process).
    """
    if jobs < 1:
        raise ValueError("jobs must be at least 1")
    job = _Job(trace, profiles, config, probes, arrivals_until_s)
    if jobs == 1 or len(policies) < 2:
        return [job.run(policy, progress(policy) if progress is not None else None)
                for policy in policies]
    return _run_in_workers(job, policies, min(jobs, len(policies)), progress)


# -- worker processes ----------------------------------------------------------------------

# Set in each worker by _start_worker (inherited through fork, never pickled).
_worker: tuple[_Job, Queue[tuple[str, float, float]] | None] | None = None


def _start_worker(job: _Job, reports: Queue[tuple[str, float, float]] | None) -> None:
    global _worker
    _worker = (job, reports)


def _run_in_worker(policy: str) -> SimResult:
    if _worker is None:
        raise RuntimeError("not a simulation worker")
    job, reports = _worker
    return job.run(policy, None if reports is None else _Reporter(policy, reports))


class _Reporter:
    """A worker's progress callback: (policy, simulated s, end s) to the parent, at most every
    ``WORKER_PROGRESS_EVERY_S``, and always at the end."""

    def __init__(self, policy: str, reports: Queue[tuple[str, float, float]]) -> None:
        self.policy = policy
        self.reports = reports
        self.sent = 0.0

    def __call__(self, t_s: float, end_s: float) -> None:
        now = time.monotonic()
        if t_s < end_s and now - self.sent < WORKER_PROGRESS_EVERY_S:
            return
        self.sent = now
        self.reports.put((self.policy, t_s, end_s))


def _run_in_workers(
    job: _Job, policies: Sequence[str], workers: int, progress: ProgressFactory | None
) -> list[SimResult]:
    context = multiprocessing.get_context("fork")
    callbacks = {policy: progress(policy) if progress is not None else None
                 for policy in policies}
    reports: Queue[tuple[str, float, float]] | None = (
        context.Queue() if any(c is not None for c in callbacks.values()) else None
    )
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(job, reports)) as pool:
        futures = [pool.submit(_run_in_worker, policy) for policy in policies]
        while reports is not None and not all(future.done() for future in futures):
            _forward(reports, callbacks, first_within_s=0.1)
    if reports is not None:
        _forward(reports, callbacks, first_within_s=0.0)  # what the workers sent last
    return [future.result() for future in futures]  # a worker's error is raised here


def _forward(
    reports: Queue[tuple[str, float, float]],
    callbacks: dict[str, ProgressCallback | None],
    first_within_s: float,
) -> None:
    """Hand what the workers reported so far to the callbacks, waiting ``first_within_s``
    for the first report."""
    timeout_s = first_within_s
    while True:
        try:
            policy, t_s, end_s = reports.get(timeout=timeout_s)
        except queue.Empty:
            return
        timeout_s = 0.0
        callback = callbacks[policy]
        if callback is not None:
            callback(t_s, end_s)
