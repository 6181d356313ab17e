"""Run in a subprocess by tests/integration/test_native_core.py: the checks of
tests/unit/test_workload.py that the probe merge reads its streams as it goes, with the
compiled core (mypyc compiles a generator expression as a list, so laziness can hold pure and
fail compiled). Prints one JSON line: the core, the checks run, and the merge's module file.

    python tests/support/native_lazy.py   # a script: GREENSWARM_NATIVE decides, not tests/
"""

from __future__ import annotations

import json

from native import loader

CORE = loader.enable().core  # an entry point: before tests/__init__ sets GREENSWARM_NATIVE=0

from tests.unit import test_workload as checks  # noqa: E402

CHECKS = ("test_probes_merge_reads_the_trace_as_it_goes",
          "test_probes_merge_puts_the_trace_first_at_equal_times",
          "test_probes_merge_into_the_trace_in_time_order")


def main() -> None:
    for name in CHECKS:
        getattr(checks, name)()
    modules = loader.loaded_modules()
    print(json.dumps({"core": CORE, "ran": list(CHECKS), "file": modules["workloads.thesis"]}))


if __name__ == "__main__":
    main()
