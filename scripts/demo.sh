#!/usr/bin/env bash
# The README's main command, for now: where would these requests go, and why?
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
# shellcheck disable=SC1091
source .venv/bin/activate
for scenario in examples/*.json; do
    echo "== $scenario"
    greenswarm decide --scenario "$scenario" --explain
done
