"""Run in a subprocess by tests/integration/test_native_core.py: the checks of
tests/unit/test_segments.py with the compiled core, where Segment and RoomKey's comparisons are
compiled code. Prints one JSON line: the core, and the file each of their modules came from.

    python tests/support/native_segments.py   # a script: GREENSWARM_NATIVE decides, not tests/
"""

from __future__ import annotations

import json

from native import loader

CORE = loader.enable().core  # an entry point: before tests/__init__ sets GREENSWARM_NATIVE=0

from tests.unit import test_segments as checks  # noqa: E402


def main() -> None:
    ran = []
    for name in dir(checks):
        if name.startswith("test_"):
            getattr(checks, name)()
            ran.append(name)
    modules = loader.loaded_modules()
    print(json.dumps({"core": CORE, "ran": len(ran),
                      "files": [modules["domain.segments"], modules["domain.rooms"]]}))


if __name__ == "__main__":
    main()
