"""The test command's two runs (scripts/test.sh): what needs the Docker engine is marked
``engine`` and runs one test at a time; the rest runs beside it, where the engine is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_lab_and_live_tests_are_marked_engine_and_redis_ones_are_not() -> None:
    files = ("tests/e2e/test_lab.py", "tests/integration/test_live_service.py",
             "tests/integration/test_records.py", "tests/unit/test_capacity.py")
    every = _collected(*files)
    engine = _collected("-m", "engine", *files)
    rest = _collected("-m", "not engine", *files)
    assert engine | rest == every and not engine & rest
    by_file = {f: {t for t in every if t.startswith(f + "::")} for f in files}
    assert all(by_file.values()), by_file
    assert by_file["tests/e2e/test_lab.py"] <= engine  # marked lab: the fixture asks at run time
    assert by_file["tests/integration/test_live_service.py"] <= engine  # docker_socket, by fixture
    assert by_file["tests/integration/test_records.py"] <= rest  # Redis alone
    assert by_file["tests/unit/test_capacity.py"] <= rest


def test_a_test_not_marked_engine_that_asks_for_the_engine_fails_beside_the_engine_tier(
    tmp_path: Path,
) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "def test_asks_late(request):\n"
        "    request.getfixturevalue('docker_socket')\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(probe)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "GREENSWARM_TEST_NO_ENGINE": "1",
             "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a test not marked `engine` asked for the Docker engine" in done.stdout
