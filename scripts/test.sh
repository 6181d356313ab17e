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
echo "== pytest"
set +e
# the slowest tests are named at the end, so a run that grows slow says where
python -m pytest --durations=15 "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
    exit 1
fi
exit "$status"
