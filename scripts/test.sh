#!/usr/bin/env bash
# The test command of the README (and of CI): set-up, then linters, types, layer contracts and
# the test suite. Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate

echo "== ruff"
ruff check .
echo "== mypy --strict"
mypy
echo "== import-linter"
lint-imports --no-cache
# The unit tier is pure (no Redis, no Docker, no lab), so it runs on every core (up to four) with
# pytest-xdist; the integration and lab tiers share the machine's engine and one lab, so they run
# one test at a time. Extra arguments: one pytest run with exactly them, as before.
# The slowest tests are named at the end of each run, so a run that grows slow says where.
run_pytest() {
    set +e
    python -m pytest --durations=15 "$@"
    local status=$?
    set -e
    if [ "$status" -eq 5 ]; then
        echo "pytest collected no tests" >&2
        return 1
    fi
    return "$status"
}
if [ "$#" -gt 0 ]; then
    echo "== pytest"
    run_pytest "$@"  # a failure ends the script with its status (set -e)
    exit 0
fi
workers=$(nproc)
[ "$workers" -le 4 ] || workers=4
echo "== pytest: the unit tier ($workers workers)"
unit=0
run_pytest -n "$workers" tests/unit || unit=$?
echo "== pytest: the lab and integration tiers"
rest=0
run_pytest tests/e2e tests/integration || rest=$?
if [ "$unit" -ne 0 ]; then
    echo "the unit tier failed (exit $unit): see its run above" >&2
    exit "$unit"
fi
exit "$rest"
