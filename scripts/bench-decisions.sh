#!/usr/bin/env bash
# Decision-time benchmark, in-memory and Redis stores side by side in one run (DESIGN 8).
# Starts a private redis-server on a free loopback port and stops it by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
# shellcheck disable=SC1091
source .venv/bin/activate
port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --save "" \
    --daemonize no --logfile "$dir/redis.log" &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
python -m benchmarks.decision_bench --redis-url "redis://127.0.0.1:$port/0" "$@"
