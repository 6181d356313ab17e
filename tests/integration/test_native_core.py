"""The compiled core (native/): the same results as pure Python, and loaded only when built for
exactly the current sources.

Each case runs Python in a subprocess with its own ``GREENSWARM_NATIVE`` (the suite itself runs
pure, see tests/__init__.py). The build comes from the cache that the set-up fills; a session
without it builds once (about a minute on two cores). Without a C compiler the cases that need a
build are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native import build as native_build
from native import loader

ROOT = loader.ROOT
SUFFIX = str(sysconfig.get_config_var("EXT_SUFFIX"))
RUNNER = ROOT / "tests" / "support" / "native_run.py"
STALE_LINE = "the compiled core is stale"
# An entry point: the compiled core enabled first, then the simulator's engine imported.
CORE = ("import sys\npath = list(sys.path)\nfrom native import loader\nloader.enable()\n"
        "import sim.engine\nassert sys.path == path, sys.path\nprint(loader.core())\n")


def no_compiler() -> str | None:
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        return "no C compiler (gcc): the compiled core cannot be built here"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers ({headers}): the compiled core cannot be built here"
    return None


@pytest.fixture(scope="session")
def built() -> Path:
    """The compiled core of the current sources (from the cache, or built once)."""
    reason = no_compiler()
    if reason is not None:
        pytest.skip(reason)
    return native_build.build(report=False)


def run(
    setting: str, *args: str, root: Path = ROOT, cache: Path | None = None, script: Path = RUNNER,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GREENSWARM_NATIVE=setting, PYTHONPATH=str(root))
    if cache is not None:
        env["GREENSWARM_NATIVE_CACHE"] = str(cache)
    return subprocess.run([sys.executable, str(script), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


WALL = ("wall", "elapsed", "decision_time", "_ms", "time_s", "generated_at")


def without_wall(value: Any) -> Any:
    """A result file's value without its wall-clock fields (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: without_wall(v) for k, v in value.items() if not any(w in k for w in WALL)}
    if isinstance(value, list):
        return [without_wall(v) for v in value]
    return value


def results(out: Path) -> dict[str, Any]:
    """Every JSON, JSONL and CSV file a simulation wrote, by its path under ``out``."""
    files: dict[str, Any] = {}
    for path in sorted(out.rglob("*")):
        rel = str(path.relative_to(out))
        if path.suffix == ".json":
            files[rel] = without_wall(json.loads(path.read_text()))
        elif path.suffix == ".jsonl":
            files[rel] = [without_wall(json.loads(line)) for line in path.read_text().splitlines()]
        elif path.suffix == ".csv" and "window" not in path.name:  # windows: scheduling delays
            files[rel] = path.read_text()
    return files


def simulate(setting: str, out: Path) -> dict[str, Any]:
    done = run(setting, str(out), "600")
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_every_policy_simulates_identically_compiled_and_pure(built: Path, tmp_path: Path) -> None:
    compiled = simulate("1", tmp_path / "compiled")
    pure = simulate("0", tmp_path / "pure")
    assert compiled["core"] == "compiled" and pure["core"] == "pure"
    # The compiled run imported every compiled module it used from the build, as a .so ...
    assert len(compiled["modules"]) >= 30
    for name, path in compiled["modules"].items():
        assert path.startswith(str(built)) and path.endswith(SUFFIX), (name, path)
    # ... and the pure run none.
    assert all(path.endswith(".py") for path in pure["modules"].values())
    compiled_files, pure_files = results(tmp_path / "compiled"), results(tmp_path / "pure")
    assert sorted(compiled_files) == sorted(pure_files)
    policies = {rel.split("/")[0] for rel in pure_files if "/" in rel}
    assert len(policies) >= 7, sorted(pure_files)
    for rel, value in pure_files.items():
        assert compiled_files[rel] == value, rel


def test_auto_runs_the_compiled_core_when_built(built: Path, tmp_path: Path) -> None:
    script = tmp_path / "core.py"
    script.write_text(CORE)
    done = run("auto", cache=built.parent, script=script, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "compiled" and done.stderr == ""


@pytest.fixture
def tree_copy(tmp_path: Path, built: Path) -> Iterator[tuple[Path, Path]]:
    """A copy of the sources, and a cache whose one entry is the real build (the copy's sources
    are the same), recorded as built for the copy."""
    copy = tmp_path / "tree"
    packages = {name.split(".")[0] for name in loader.MODULES} | {"native"}
    imported = packages | {"workloads", "federation", "monitor"}
    for package in sorted(imported):
        shutil.copytree(ROOT / package, copy / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(ROOT / loader.STUBS, copy / loader.STUBS)  # the build is of them too
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / built.name).symlink_to(built)
    marker = loader.root_marker(cache, copy.resolve())
    marker.parent.mkdir()
    marker.write_text("{}\n")
    yield copy, cache


def core_of(copy: Path, cache: Path, setting: str = "auto") -> subprocess.CompletedProcess[str]:
    script = copy / "core.py"
    script.write_text(CORE)
    return run(setting, root=copy, cache=cache, script=script, timeout=60)


def test_a_stale_build_is_not_loaded_and_says_so(tree_copy: tuple[Path, Path]) -> None:
    copy, cache = tree_copy
    before = core_of(copy, cache)
    assert before.returncode == 0, before.stderr
    assert before.stdout.strip() == "compiled"
    assert STALE_LINE not in before.stderr
    source = copy / "domain" / "units.py"
    source.write_text(source.read_text() + "\n# edited after the build\n")
    after = core_of(copy, cache)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "pure"
    assert STALE_LINE in after.stderr and "build-native.sh" in after.stderr
    assert len(after.stderr.strip().splitlines()) == 1
    demanded = core_of(copy, cache, "1")
    assert demanded.returncode != 0
    assert "GREENSWARM_NATIVE=1" in demanded.stderr and "stale" in demanded.stderr


def test_demanding_the_compiled_core_without_a_build_is_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "core.py"
    script.write_text(CORE)
    done = run("1", cache=tmp_path / "empty-cache", script=script, timeout=60)
    assert done.returncode != 0
    assert "NativeCoreError" in done.stderr
    assert "GREENSWARM_NATIVE=1 but the compiled core" in done.stderr
    assert "is not built" in done.stderr and "build-native.sh" in done.stderr
    pure = run("auto", cache=tmp_path / "empty-cache", script=script, timeout=60)
    assert pure.returncode == 0 and pure.stdout.strip() == "pure" and pure.stderr == ""


def test_builds_of_the_same_sources_reuse_the_cache_and_wait_for_each_other(built: Path) -> None:
    command = [sys.executable, "-m", "native.build", "--cache", str(built.parent)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    builds = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=60)[0] for process in builds]
    assert [process.returncode for process in builds] == [0, 0], outputs
    assert all(f"cached: {built}" in output for output in outputs), outputs
    assert not [entry for entry in built.parent.iterdir() if entry.name.startswith(".")
                and entry.is_dir()]  # no build left half-done


def test_enabling_after_an_import_of_the_core_runs_pure_and_says_so(
    built: Path, tmp_path: Path,
) -> None:
    script = tmp_path / "late.py"
    script.write_text("import domain.units\n" + CORE)  # and domain.errors, which it imports
    late = run("auto", cache=built.parent, script=script, timeout=60)
    assert late.returncode == 0, late.stderr
    assert late.stdout.strip() == "pure"
    assert late.stderr.strip().splitlines() == [
        "greenswarm: domain.errors, domain.units imported before the compiled core was "
        "enabled; running pure Python"]
    demanded = run("1", cache=built.parent, script=script, timeout=60)
    assert demanded.returncode != 0
    assert "GREENSWARM_NATIVE=1 but domain.errors, domain.units imported" in demanded.stderr


def test_a_bad_setting_is_an_error() -> None:
    with pytest.raises(loader.NativeCoreError, match="use auto, 0"):
        loader.decide("yes")


def test_hand_written_inits_hold_compiled_too(built: Path) -> None:
    """tests/unit/test_dataclass_inits.py runs pure; its checks that hold compiled, and a
    pickle round trip (mypyc's ``__new__`` calls a compiled ``__init__``), in the build."""
    from tests.unit.test_dataclass_inits import HAND_WRITTEN, ids

    done = run("1", script=ROOT / "tests" / "support" / "native_inits.py", timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"core": "compiled", "classes": [ids(cls) for cls in HAND_WRITTEN]}


def test_segments_and_room_keys_behave_alike_compiled(built: Path) -> None:
    """tests/unit/test_segments.py runs pure; the same checks with both classes compiled."""
    done = run("1", script=ROOT / "tests" / "support" / "native_segments.py", timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["core"] == "compiled" and report["ran"] == 4
    assert all(file.endswith(SUFFIX) for file in report["files"]), report["files"]


def test_the_probe_merge_stays_lazy_compiled(built: Path) -> None:
    """tests/unit/test_workload.py's merge checks with workloads.thesis compiled: the merge
    reads a request ahead, not the whole trace (it once read a day's 10 M requests first)."""
    done = run("1", script=ROOT / "tests" / "support" / "native_lazy.py", timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["core"] == "compiled" and len(report["ran"]) == 3
    assert report["file"].endswith(SUFFIX), report["file"]
