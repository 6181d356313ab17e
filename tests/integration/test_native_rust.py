"""The Rust core (native/rust) in use: the decision tests decided with both implementations,
the thesis workload simulated with both (identical results but wall-clock ones), and the loader
serving it only when the settings allow.

Each simulation runs in a subprocess with its own settings, pure Python both times (the mypyc
part off), once with the Rust core and once without, so the only difference is the Rust core.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from native import loader
from tests.integration.test_native_core import RUNNER, results
from tests.support.rust_core import CHECK_ENV, load_rust, skipped

pytestmark = pytest.mark.skipif(skipped(), reason="GREENSWARM_NATIVE_RUST=0")

ROOT = loader.ROOT
# The decision tests: every pass, policy and store scenario that makes host views.
DECISION_TESTS = ("tests/unit/test_scheduler_passes.py", "tests/unit/test_scheduler_properties.py",
                  "tests/unit/test_capacity.py", "tests/unit/test_energy.py",
                  "tests/unit/test_qos_policy.py", "tests/unit/test_memory_store.py",
                  "tests/unit/test_policy_plugins.py", "tests/unit/test_load_aware.py",
                  "tests/unit/test_restore.py", "tests/unit/test_fast_paths.py")


SWITCHES = ("GREENSWARM_NATIVE", "GREENSWARM_NATIVE_MYPYC", "GREENSWARM_NATIVE_RUST")


def env(**settings: str) -> dict[str, str]:
    """This process's environment (its cache setting too) with the native core's switches
    replaced by ``settings``."""
    out = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    out.update(settings, PYTHONPATH=str(ROOT))
    return out


@pytest.fixture(scope="module")
def built() -> None:
    load_rust()  # fails, saying how to build it, when it is not built


def test_the_decision_tests_decide_alike_with_both(built: None, tmp_path: Path) -> None:
    report = tmp_path / "compared"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *DECISION_TESTS],
        cwd=ROOT, env=env(**{CHECK_ENV: str(report)}), capture_output=True, text=True,
        timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rooms, group_reads = (int(n) for n in report.read_text().split())
    assert rooms > 10_000  # every view of those tests, with both
    assert group_reads > 10_000  # every change and read of the store's lists, with both


def simulate(out: Path, rust: str, seconds: str = "3600", *options: str) -> dict[str, Any]:
    settings = {"GREENSWARM_NATIVE": "auto", "GREENSWARM_NATIVE_MYPYC": "0",
                "GREENSWARM_NATIVE_RUST": rust}
    done = subprocess.run([sys.executable, str(RUNNER), str(out), seconds, *options], cwd=ROOT,
                          env=env(**settings), capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def same_results(tmp_path: Path) -> dict[str, Any]:
    """Every result file of the runs in ``tmp_path / "rust"`` and ``tmp_path / "python"``
    identical (but wall-clock values); the Python run's files."""
    rust_files, python_files = results(tmp_path / "rust"), results(tmp_path / "python")
    assert sorted(rust_files) == sorted(python_files)
    for rel, value in python_files.items():
        assert rust_files[rel] == value, rel
    return python_files


def test_thesis_seed_1_simulates_identically_with_and_without_rust(built: None,
                                                                   tmp_path: Path) -> None:
    with_rust = simulate(tmp_path / "rust", "1")
    without = simulate(tmp_path / "python", "0")
    parts = ("core", "rust", "rooms", "host_time", "sort", "groups", "events")
    assert tuple(with_rust[k] for k in parts) == ("pure", *["rust"] * 6)
    assert tuple(without[k] for k in parts) == ("pure", *["python"] * 6)
    python_files = same_results(tmp_path)
    policies = {rel.split("/")[0] for rel in python_files if "/" in rel}
    assert len(policies) >= 7, sorted(python_files)


def test_hosts_switched_off_and_on_simulate_identically_with_and_without_rust(
    built: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The power manager on (DESIGN 3.15), on twice the thesis's hosts with a short idle time,
    so that hosts are switched off and on: each host's energy meter changes power state too."""
    monkeypatch.setenv("GREENSWARM_POWER_IDLE_S", "20")
    power = ("--power-manager", "on", "--policies", "energy,spread", "--hosts", "10x8c12g")
    with_rust = simulate(tmp_path / "rust", "1", "1800", *power)
    without = simulate(tmp_path / "python", "0", "1800", *power)
    assert (with_rust["host_time"], without["host_time"]) == ("rust", "python")
    energy = same_results(tmp_path)["summary.json"]["policies"]["energy"]
    assert energy["switches_off"] >= 1 and energy["hosts_off_mean"] > 0, energy


def test_a_federated_run_of_another_seed_simulates_identically_with_and_without_rust(
    built: None, tmp_path: Path,
) -> None:
    """Issue 33's differential runs: a federated run (two clusters, each with its own store
    and scheduler; a request its home does not place, or would place only by killing, goes to
    the peer, DESIGN 12) of every built-in policy, on another seed of the thesis workload, busy
    enough that every policy offloads."""
    federated = ("--seed", "2", "--peak", "1.5", "--hosts", "10x8c12g", "--clusters", "5,5",
                 "--federation", "offload", "--offload-when", "kills")
    with_rust = simulate(tmp_path / "rust", "1", "1800", *federated)
    without = simulate(tmp_path / "python", "0", "1800", *federated)
    assert (with_rust["groups"], without["groups"]) == ("rust", "python")
    files = same_results(tmp_path)
    policies = {rel.split("/")[0] for rel in files if "/" in rel}
    assert len(policies) >= 7, sorted(files)
    offloads = {p: files[f"{p}/simulation.json"]["offloads"] for p in policies}
    assert all(n > 0 for n in offloads.values()), sorted(offloads.items())


# Every module that imports greenswarm_core when it is imported, and how it tells which it uses.
RUST_PARTS = {"domain.rooms": "domain.rooms.rooms_implementation()",
              "domain.energy": "'python' if domain.energy.NativeHostMeter is None else 'rust'",
              "host_registry.memory": "host_registry.memory.groups_implementation()",
              "measure.host_time": "measure.host_time.host_time_implementation()",
              "measure.stats": "measure.stats.sort_implementation()",
              "sim.event_heap": "sim.event_heap.events_implementation()"}
# The loader's choice, then each part's.
CORE = ("from native import loader\nloader.enable()\n"
        f"import {', '.join(RUST_PARTS)}\n"
        f"print(loader.rust_core(), {', '.join(RUST_PARTS.values())})\n")
ALL_RUST, ALL_PYTHON = (" ".join([core] * (1 + len(RUST_PARTS))) for core in ("rust", "python"))


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, ALL_RUST),
    ({"GREENSWARM_NATIVE_RUST": "1", "GREENSWARM_NATIVE_MYPYC": "0"}, ALL_RUST),
    ({"GREENSWARM_NATIVE": "0"}, ALL_PYTHON),
    ({"GREENSWARM_NATIVE_RUST": "0"}, ALL_PYTHON),
])
def test_the_loader_serves_the_rust_core_only_when_allowed(
    built: None, settings: dict[str, str], expected: str,
) -> None:
    done = subprocess.run([sys.executable, "-c", CORE], cwd=ROOT, env=env(**settings),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_a_missing_rust_core_is_an_error_only_when_demanded(built: None, tmp_path: Path) -> None:
    empty = {"GREENSWARM_NATIVE_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CORE], cwd=ROOT, env=env(**empty),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == ALL_PYTHON, done.stderr
    demanded = env(**empty, GREENSWARM_NATIVE_RUST="1")
    done = subprocess.run([sys.executable, "-c", CORE], cwd=ROOT, env=demanded,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "GREENSWARM_NATIVE_RUST=1" in done.stderr


def test_a_failed_build_says_so_in_one_line(tmp_path: Path) -> None:
    """No cargo on the PATH: the build stops before compiling, in one line, and exits 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = subprocess.run([str(bin_dir / "python"), "-m", "native.rust_build", "--cache",
                           str(tmp_path / "cache")], cwd=ROOT,
                          env=dict(env(), PATH=str(bin_dir)), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "native: WARNING: the Rust core is not built (cargo is not installed (Debian: "
        "apt-get install cargo)); its parts run in Python"]


def test_the_benchmark_measures_both_parts_against_their_references(built: None) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.native_core", "--skip-sim",
                           "--hosts", "10"], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for part in ("rooms per call", "host states per call"):
        at = next(i for i, line in enumerate(lines) if line.startswith(part))
        assert re.search(r"rust +\d+ ns +ratio [0-9.]+x$", lines[at + 1]), lines[at:at + 2]


@pytest.mark.parametrize("early", sorted(RUST_PARTS))
def test_a_part_imported_before_enable_keeps_the_whole_rust_core_away(
    built: None, early: str,
) -> None:
    """A module that took its Python reference for good, imported before the entry point
    enabled the native core, makes the loader run every part in Python, and name it."""
    script = f"import {early}\n{CORE}print(loader.rust_reason())\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    parts, said = done.stdout.strip().splitlines()
    assert parts == ALL_PYTHON, parts
    assert early in said and "before enable()" in said, said
