#!/usr/bin/env bash
# Live latency benchmark on a single-node swarm of this machine's engine: starts the engine if it
# is not running, imports greenswarm/busybox if missing, starts Redis, the manager and an agent
# (all stopped by pid at the end), runs benchmarks.live_latency, and leaves the swarm again if
# it had to create it. Run it as root. Extra arguments go to the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
# shellcheck disable=SC1091
source .venv/bin/activate
work=$(mktemp -d)
pids=()
created_swarm=0
dockerd_pid=
DOCKER=/usr/bin/docker
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$created_swarm" = 1 ]; then $DOCKER swarm leave --force >/dev/null 2>&1 || true; fi
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" 2>/dev/null || true
        for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -rf "$work"
}
trap cleanup EXIT
if ! $DOCKER info >/dev/null 2>&1; then
    mkdir -p /var/log/greenswarm
    dockerd --pidfile /run/greenswarm-bench-dockerd.pid >>/var/log/greenswarm/dockerd-bench.log 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 120); do $DOCKER info >/dev/null 2>&1 && break; sleep 0.5; done
    $DOCKER info >/dev/null || { echo "dockerd did not start (/var/log/greenswarm/dockerd-bench.log)" >&2; exit 1; }
fi
python -c "from lab.images import busybox_on; busybox_on('/var/run/docker.sock')"
if [ "$($DOCKER info --format '{{.Swarm.LocalNodeState}}')" != "active" ]; then
    $DOCKER swarm init --advertise-addr 127.0.0.1 >/dev/null
    created_swarm=1
fi
node=$($DOCKER info --format '{{.Swarm.NodeID}}')
free_port() { python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port=$(free_port); manager_port=$(free_port); agent_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work" --appendonly yes --save "" \
    --daemonize no --logfile "$work/redis.log" & pids+=($!)
export GREENSWARM_TOKEN="bench-$RANDOM$RANDOM" GREENSWARM_NODE_SECRET="bench-nodes-$RANDOM$RANDOM"
export GREENSWARM_REDIS_URL="redis://127.0.0.1:$redis_port/0"
export GREENSWARM_NODES="$node" GREENSWARM_AGENT_URL="http://127.0.0.1:$agent_port"
export GREENSWARM_MANAGER_URL="http://127.0.0.1:$manager_port" GREENSWARM_SERVICE_PREFIX="bench-"
sleep 0.5
greenswarm manager --listen "127.0.0.1:$manager_port" >"$work/manager.log" 2>&1 & pids+=($!)
greenswarm agent --listen "127.0.0.1:$agent_port" --node-id "$node" >"$work/agent.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$manager_port/healthz" >/dev/null && break; sleep 0.2
done
python -m benchmarks.live_latency --url "http://127.0.0.1:$manager_port" "$@"
