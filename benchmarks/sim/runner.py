"""Several policies over the same trace, each with a fresh store (pure: no files written).

The trace is given as a header and a factory of fresh request streams, so a file of millions
of requests is streamed once per policy instead of being held in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from benchmarks.sim.engine import ProgressCallback, SimConfig, SimResult, simulate
from benchmarks.sim.profiles import Profiles
from benchmarks.trace import TraceHeader, TraceRequest
from benchmarks.workload import (
    ProbeConfig,
    ThesisWorkloadConfig,
    iter_probe_requests,
    iter_thesis_requests,
    thesis_header,
    with_probes,
)

DEFAULT_POLICIES: tuple[str, ...] = ("energy", "spread", "binpack", "random")
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


def requests_with_probes(
    requests: Iterable[TraceRequest], end_s: float, probes: ProbeConfig | None
) -> Iterator[tuple[TraceRequest, bool]]:
    """The trace's requests flagged False, merged with probe jobs (flagged True) if asked."""
    if probes is None:
        return ((request, False) for request in requests)
    return with_probes(requests, iter_probe_requests(end_s, probes))


def run_policies(
    trace: TraceInput,
    policies: Sequence[str],
    profiles: Profiles,
    config: SimConfig,
    *,
    probes: ProbeConfig | None = THESIS_PROBES,
    progress: Callable[[str], ProgressCallback | None] | None = None,
    arrivals_until_s: float | None = None,
) -> list[SimResult]:
    """Every policy of ``policies`` on the same trace, in order; ``config.policy`` is replaced.

    ``progress(policy)`` may return a callback that is told (simulated time, end time).
    ``arrivals_until_s``: no request or probe arrives after it; the run goes on to the end
    time (a drain: queued victims may still be placed).
    """
    results = []
    end_s = trace.header.duration_s if config.end_s is None else config.end_s
    arrivals_end_s = end_s if arrivals_until_s is None else min(arrivals_until_s, end_s)
    for policy in policies:
        requests: Iterable[TraceRequest] = trace.requests()
        if arrivals_until_s is not None:
            requests = itertools.takewhile(lambda r: r.t_s <= arrivals_end_s, requests)
        stream = requests_with_probes(requests, arrivals_end_s, probes)
        results.append(
            simulate(
                trace.header, stream, profiles, replace(config, policy=policy),
                progress=progress(policy) if progress is not None else None,
            )
        )
    return results
