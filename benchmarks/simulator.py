"""The benchmark simulator (DESIGN 7.2): the project's real scheduler on a modelled cluster.

The pieces live in ``benchmarks/sim/``:

=====================  ========================================================================
module                 what
=====================  ========================================================================
sim/engine.py          the discrete-event loop: arrivals, runs, CPU contention, memory and OOM
                       kills, the monitor model, the metrics recorder (one policy, one trace)
sim/contention.py      a host's cores shared by CPU shares (work-conserving water-filling)
sim/monitor_model.py   the monitor's 3 s / 30 s (45 s) / 10 p.p. behaviour, computed exactly
                       from piecewise-constant utilization, with monitor.core's threshold logic
sim/profiles.py        per-workload usage profiles (``benchmarks/profiles.json``) and defaults
sim/profiler.py        ``greenswarm bench profile``: measures the profiles from real containers
sim/runner.py          several policies over the same trace (a fresh store each)
sim/summary.py         the side-by-side table, with the thesis's numbers
sim/cli.py             ``greenswarm bench simulate`` / ``profile`` (the only I/O)
=====================  ========================================================================

Use from Python::

    from benchmarks.simulator import SimConfig, load_shipped_profiles, run_policies, thesis_input

    results = run_policies(thesis_input(seed=1), ["energy", "spread"],
                           load_shipped_profiles(), SimConfig("energy"))
    results[0].result.metrics.success_rate   # a benchmarks.metrics.PolicyResult
    results[0].stats.oom_host_kills           # the simulator's own counters (SimStats)

Speed: ``python -m benchmarks.sim_speed``.
"""

from __future__ import annotations

from benchmarks.sim.engine import SimConfig, SimResult, SimStats, Simulation, simulate
from benchmarks.sim.monitor_model import MonitorModelConfig
from benchmarks.sim.profiles import (
    DEFAULT_PROFILES,
    Profiles,
    Step,
    UsageProfile,
    load_shipped_profiles,
    read_profiles,
)
from benchmarks.sim.runner import (
    DEFAULT_POLICIES,
    TraceInput,
    requests_with_probes,
    run_policies,
    thesis_input,
)

__all__ = [
    "DEFAULT_POLICIES",
    "DEFAULT_PROFILES",
    "MonitorModelConfig",
    "Profiles",
    "SimConfig",
    "SimResult",
    "SimStats",
    "Simulation",
    "Step",
    "TraceInput",
    "UsageProfile",
    "load_shipped_profiles",
    "read_profiles",
    "requests_with_probes",
    "run_policies",
    "simulate",
    "thesis_input",
]
