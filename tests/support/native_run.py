"""Run in a subprocess by tests/integration/test_native_core.py: every simulated policy on a
short thesis workload, printed as one JSON object with the core that ran it.

    python tests/support/native_run.py [SECONDS]   # a script: not through tests/__init__

Wall-clock fields (names with ``wall``, ``_ms`` or ``time``) are left out: they differ by run.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from native import loader
from sim.config import SimConfig
from sim.profiles import load_shipped_profiles
from sim.runner import default_policies, run_policies, thesis_input
from workloads.thesis import ThesisWorkloadConfig

WALL = ("wall", "_ms", "time")


def without_wall(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): without_wall(v) for k, v in value.items()
                if not any(w in str(k) for w in WALL)}
    if isinstance(value, list | tuple):
        return [without_wall(v) for v in value]
    if isinstance(value, float):
        return repr(value)  # every bit
    return value


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    policies = default_policies()
    trace = thesis_input(1, ThesisWorkloadConfig(duration_s=seconds))
    results = run_policies(trace, policies, load_shipped_profiles(), SimConfig(policies[0]))
    print(json.dumps({
        "core": loader.core(),
        "modules": loader.loaded_modules(),
        "results": {policy: without_wall(dataclasses.asdict(run))
                    for policy, run in zip(policies, results, strict=True)},
    }, default=repr))


if __name__ == "__main__":
    main()
