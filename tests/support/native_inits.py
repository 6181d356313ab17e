"""Run in a subprocess by tests/integration/test_native_core.py: the checks of
tests/unit/test_dataclass_inits.py that hold compiled too (a compiled ``__init__`` has no
signature to inspect, and its class cannot be patched), and a pickle round trip of each example
(``--jobs`` sends them between processes; the loader makes them picklable as it loads them, with
no call of ours). Prints one JSON line: the core and the classes.

    python tests/support/native_inits.py   # a script: GREENSWARM_NATIVE decides, not tests/
"""

from __future__ import annotations

import dataclasses
import json
import pickle

from native import loader

CORE = loader.enable().core  # an entry point: before tests/__init__ sets GREENSWARM_NATIVE=0

from tests.unit import test_dataclass_inits as checks  # noqa: E402


def main() -> None:
    for cls in checks.HAND_WRITTEN:
        checks.test_init_sets_every_field(cls)
        example = checks.EXAMPLES[cls]()
        back = pickle.loads(pickle.dumps(example))
        assert type(back) is cls and back == example, cls
        assert dataclasses.astuple(back) == dataclasses.astuple(example), cls
    print(json.dumps({"core": CORE, "classes": [checks.ids(c) for c in checks.HAND_WRITTEN]}))


if __name__ == "__main__":
    main()
