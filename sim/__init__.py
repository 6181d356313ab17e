"""The benchmark simulator (DESIGN 7.2): the project's real scheduler on a modelled cluster.

=====================  ========================================================================
module                 what
=====================  ========================================================================
sim/engine.py          the discrete-event loop: arrivals, decisions applied, task and monitor
                       events, the metrics recorder (one policy, one trace)
sim/config.py          a run's settings (SimConfig) and its result (SimResult, SimStats)
sim/model.py           the modelled cluster: a task's run and a host's runs and monitors; CPU
                       shared out, memory limits and OOM kills, the monitors' pushes
sim/routing.py         the clusters of a run and where a new request goes (federation)
sim/books.py           the simulator's books against the stores' (a test aid)
sim/contention.py      a host's cores shared by CPU shares (work-conserving water-filling)
sim/monitor_model.py   the monitor's 3 s / 30 s (45 s) / 10 p.p. behaviour, computed exactly
                       from piecewise-constant utilization, with monitor.core's threshold logic
sim/profiles.py        per-workload usage profiles (``sim/profiles.json``) and defaults
sim/profiler.py        ``greenswarm bench profile``: measures the profiles from real containers
sim/runner.py          several policies over the same trace (a fresh store each)
sim/seeds.py           the same simulation over several seeds, summed up
sim/summary.py         the side-by-side table, with the thesis's numbers
=====================  ========================================================================

``greenswarm bench simulate`` (cli/simulate.py) and ``greenswarm bench profile``
(cli/profile.py) are the I/O edge. Use from Python::

    from sim.profiles import load_shipped_profiles
    from sim.config import SimConfig
    from sim.runner import run_policies, thesis_input

    results = run_policies(thesis_input(seed=1), ["energy", "spread"],
                           load_shipped_profiles(), SimConfig("energy"))
    results[0].result.metrics.success_rate   # a measure.recorder.PolicyResult
    results[0].stats.oom_host_kills           # the simulator's own counters (SimStats)

Speed: ``python -m benchmarks.sim_speed``.
"""
