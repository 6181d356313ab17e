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
# Two runs at once: the tests that need the machine's Docker engine (the lab tests and the
# live ones, marked `engine` by tests/conftest.py) one at a time, since they share the engine and
# one lab; beside them, in a second pytest, everything else (the unit tier and the integration
# tests on Redis alone). The engine tests mostly wait on containers, so the second run costs them
# little. Its output follows theirs. Extra arguments: one pytest run with exactly them.
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
rest_log=$(mktemp)
# A process group of its own (job control on), so that an interrupted run stops it and what it
# started, by its group id, with the SIGINT a background job would otherwise ignore.
set -m
(export GREENSWARM_TEST_NO_ENGINE=1; run_pytest -m "not engine" tests) > "$rest_log" 2>&1 &
rest_pid=$!
set +m
trap 'kill -INT -- "-$rest_pid" 2>/dev/null || true; wait "$rest_pid" 2>/dev/null || true
      rm -f "$rest_log"' EXIT
# Ctrl-C reaches the engine tier (the foreground group), not the rest: once the engine tier
# has stopped, the script exits, and the EXIT trap stops the rest and waits for its teardown.
trap 'exit 130' INT TERM
echo "== pytest: the engine tier (lab and live tests; the rest runs beside it, pid $rest_pid)" \
    "at ${SECONDS} s"
engine=0
run_pytest -m engine tests || engine=$?
rest=0
wait "$rest_pid" || rest=$?
trap 'rm -f "$rest_log"' EXIT
echo "== pytest: the rest (unit tier and integration tests on Redis), run beside the engine" \
    "tier; both done at ${SECONDS} s"
cat "$rest_log"
failed=0
for tier in engine rest; do
    status=${!tier}
    if [ "$status" -ne 0 ]; then
        echo "the $tier tier failed (exit $status): see its run above" >&2
        failed=$status
    fi
done
exit "$failed"
