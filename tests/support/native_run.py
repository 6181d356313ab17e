"""Run in a subprocess by tests/integration/test_native_core.py: ``greenswarm bench simulate``
of every simulated policy on a short thesis workload into OUT, in this process (the policies in
worker processes, ``--jobs 2``), then one JSON line: the core that ran it and where each
compiled module came from.

    python tests/support/native_run.py OUT [SECONDS]   # a script: not through tests/__init__
"""

from __future__ import annotations

import json
import sys

from cli.main import main as greenswarm
from native import loader


def main() -> None:
    out = sys.argv[1]
    seconds = sys.argv[2] if len(sys.argv) > 2 else "600"
    status = greenswarm(["bench", "simulate", "--workload", "thesis", "--seed", "1",
                         "--duration-s", seconds, "--out", out, "--no-plots", "--jobs", "2",
                         *sys.argv[3:]])
    if status:
        sys.exit(status)
    import domain.rooms
    import host_registry.memory
    import measure.host_time
    import measure.stats
    import sim.event_heap

    print(json.dumps({"core": loader.core(), "modules": loader.loaded_modules(),
                      "rust": loader.rust_core(), "rooms": domain.rooms.rooms_implementation(),
                      "host_time": measure.host_time.host_time_implementation(),
                      "sort": measure.stats.sort_implementation(),
                      "groups": host_registry.memory.groups_implementation(),
                      "events": sim.event_heap.events_implementation()}))


if __name__ == "__main__":
    main()
