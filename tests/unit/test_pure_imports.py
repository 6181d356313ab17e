"""Build concerns stay at the entry points (DESIGN 10): importing a pure package of ours, in a
fresh interpreter, reads none of our settings, touches no file of the compiled core's cache,
hashes no source, prints nothing and leaves ``sys.path``, ``sys.meta_path`` and the packages'
``__path__`` as they were, even with a build of these very sources in the cache (a fake one:
empty files where the extensions would be). Only an entry point's ``native.loader.enable()``
does that (tests/integration/test_native_core.py runs the real build through it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from native import loader
from tests.unit.test_native_cache import fake_build

ROOT = loader.ROOT

# Run with ``python -c``: watches the environment (a recording os.environ) and the files opened
# or listed (an audit hook), imports the module given, and prints what it saw as JSON.
PROBE = r"""
import json, os, sys

watched_env = []

class Watched(type(os.environ)):
    def __getitem__(self, key):
        watched_env.append(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        watched_env.append(key)
        return super().__contains__(key)

real = os.environ
os.environ = Watched(real._data, real.encodekey, real.decodekey, real.encodevalue,
                     real.decodevalue)
touched = []

def audit(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes)):
        touched.append((event, os.fsdecode(args[0])))

sys.addaudithook(audit)
path_before, meta_before = list(sys.path), [repr(f) for f in sys.meta_path]
error = None
try:
    __import__(sys.argv[1])
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
package_paths = {name: list(module.__path__) for name, module in sys.modules.items()
                 if name.split(".")[0] in sys.argv[2].split(",") and hasattr(module, "__path__")}
files = {os.path.realpath(m.__file__) for m in list(sys.modules.values())
         if getattr(m, "__file__", None)}
print(json.dumps({
    "error": error,
    "env": sorted({key for key in watched_env if key.startswith("GREENSWARM")}),
    "touched": sorted(set(touched)),  # (event, path)
    "files": sorted(files),
    "path_changed": sys.path != path_before,
    "meta_path_changed": [repr(f) for f in sys.meta_path] != meta_before,
    "package_paths": package_paths,
}))
"""


def source_of(opened: str) -> str:
    """The source a file the interpreter opened belongs to (a ``__pycache__`` entry's module)."""
    path = Path(opened)
    if path.parent.name == "__pycache__":
        return str((path.parent.parent / (path.name.split(".")[0] + ".py")).resolve())
    return str(path.resolve())


@pytest.mark.parametrize("module", ["domain", "scheduler", "host_registry.memory", "sim.engine",
                                    "monitor.core"])
def test_importing_a_pure_package_does_no_build_work(tmp_path: Path, module: str) -> None:
    cache = tmp_path / "cache"
    fake_build(cache, "built", loader.source_hash(), 1000.0)  # a "build" of these sources
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREENSWARM")}
    env.update(GREENSWARM_NATIVE_CACHE=str(cache), PYTHONPATH=str(ROOT))
    packages = sorted({name.split(".")[0] for name in loader.MODULES})
    done = subprocess.run([sys.executable, "-c", PROBE, module, ",".join(packages)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["env"] == [], "read our settings when imported"
    assert [p for _, p in seen["touched"] if p.startswith(str(cache))] == [], "touched the cache"
    assert seen["error"] is None, seen["error"]  # e.g. loaded the fake build's extension
    imported = set(seen["files"])
    ours = [source_of(p) for event, p in seen["touched"]
            if event == "open" and Path(p).resolve().is_relative_to(ROOT)]
    assert [p for p in ours if p not in imported] == [], "opened sources it did not import"
    assert not seen["path_changed"] and not seen["meta_path_changed"]
    for name, path in seen["package_paths"].items():
        assert path == [str(ROOT.joinpath(*name.split(".")))], name
    assert done.stderr == ""
