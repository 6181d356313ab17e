#!/usr/bin/env bash
# The federated demo (DESIGN 12): two real Docker Swarms on this machine, a greenswarm on each,
# and a request that the first cannot place offloaded to the second.
#
#   bash scripts/lab-demo.sh --clusters 2          set up, start everything, show an offload
#   bash scripts/lab-demo.sh --clusters 2 --down   stop both greenswarms and the lab
#
# It runs scripts/setup.sh, starts the lab with two Swarms (`lab up --clusters 2`: one node of
# 1 CPU and 2 GiB each; cluster 2 has its own bridge and manager engine, 10 ms away), then per
# cluster Redis and the manager (docker-compose.yml; cluster 2's on its own manager engine, in
# its namespace) and the agent and monitor on its node (docker-stack.yml + docker-stack.lab.yml).
# The managers are a (cluster 1, offloads what it cannot place) and b, each the other's peer.
# It fills a's node, then submits to a what does not fit there: b runs it on its node.
# Idempotent: a second run stops the requests of the previous one and uses new names.
set -euo pipefail
cd "$(dirname "$0")/.."

LAB_NAME=lab-demo-federation
# shellcheck source=scripts/lab-lib.sh
source scripts/lab-lib.sh     # STATE_DIR, TOKEN_FILE, DOCKER, log, die, helper, lab_token...
NODES=1
NODE_CPUS=1
NODE_MEMORY=2g
LATENCY_MS=10
STATE_FILE=/run/greenswarm/lab/state.json
FED_DIR="$STATE_DIR/federation"
TOKEN_B_FILE="$STATE_DIR/token-b"
RUN_FILE="$STATE_DIR/fed-demo-run"
PROJECT_A=gsfed-a STACK_A=gsfed-a-node
PROJECT_B=gsfed-b STACK_B=gsfed-b-node
show() { printf '  $ %s\n' "$*"; "$@"; }

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

down=0
while [ $# -gt 0 ]; do
    case "$1" in
        --clusters) [ "${2:-}" = 2 ] || die "the federated demo has --clusters 2"; shift ;;
        --down) down=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" -eq 0 ] || die "run it as root (sudo bash scripts/lab-demo.sh --clusters 2): the lab creates network namespaces, cgroups and daemons"

lab_demo_settings  # short monitor windows (scripts/lab-lib.sh)
export GREENSWARM_PEER_REFRESH_S=3 GREENSWARM_PEER_TIMEOUT_S=2

# compose_on <a|b> ARGS...: compose of one cluster's manager and Redis, through its engine.
compose_on() {
    local which=$1 project
    shift
    project=$PROJECT_A
    [ "$which" = b ] && project=$PROJECT_B
    local files=(-f docker-compose.yml)
    [ -f "$FED_DIR/$which.override.yml" ] && files+=(-f "$FED_DIR/$which.override.yml")
    if [ -x /usr/bin/docker-compose ]; then
        docker-compose -p "$project" "${files[@]}" "$@"
    else
        "$DOCKER" compose -p "$project" "${files[@]}" "$@"
    fi
}

# c2 KEY...: one value of cluster 2's entry in the lab's state file (swarms[1]), e.g.
# `c2 nodes 0 name`; fails when the lab has no second Swarm.
c2() {
    .venv/bin/python - "$STATE_FILE" "$@" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))["swarms"][1]
for key in sys.argv[2:]:
    value = value[int(key)] if isinstance(value, list) else value[key]
print(value)
PY
}

# -- --down ------------------------------------------------------------------------------------
if [ "$down" = 1 ]; then
    [ -x .venv/bin/python ] || die "no .venv: nothing of the demo can be running"
    GREENSWARM_TOKEN=$(cat "$TOKEN_FILE" 2>/dev/null || echo unset)
    export GREENSWARM_TOKEN
    if [ -f "$STATE_FILE" ] && B_SOCKET=$(c2 manager_socket 2>/dev/null); then
        B_ENGINE="unix://$B_SOCKET"
        log "cluster b: removing the stack $STACK_B and the manager and Redis ($PROJECT_B)"
        DOCKER_HOST=$B_ENGINE "$DOCKER" stack rm "$STACK_B" >/dev/null 2>&1 || true
        DOCKER_HOST=$B_ENGINE GREENSWARM_TOKEN=$(cat "$TOKEN_B_FILE" 2>/dev/null || echo unset) \
            compose_on b down -v --remove-orphans --timeout 5 || true
    fi
    log "cluster a: removing the stack $STACK_A and the manager and Redis ($PROJECT_A)"
    "$DOCKER" stack rm "$STACK_A" >/dev/null 2>&1 || true
    compose_on a down -v --remove-orphans --timeout 5 || true
    log "taking the lab down"
    .venv/bin/python -m lab down
    rm -rf "$FED_DIR"
    log "done"
    exit 0
fi

# -- 1. packages, lab with two Swarms, images --------------------------------------------------
log "setup (Debian packages, .venv)"
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
lab_token
TOKEN_A=$GREENSWARM_TOKEN
if [ ! -s "$TOKEN_B_FILE" ]; then
    (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(32))' \
        > "$TOKEN_B_FILE")
fi
TOKEN_B=$(cat "$TOKEN_B_FILE")
log "lab: 2 Swarms of $NODES node(s) of $NODE_CPUS CPU and $NODE_MEMORY, ${LATENCY_MS} ms apart"
.venv/bin/python -m lab up --clusters 2 --nodes "$NODES" --node-cpus "$NODE_CPUS" \
    --node-memory "$NODE_MEMORY" --inter-cluster-latency-ms "$LATENCY_MS"
.venv/bin/python -m lab images | grep -E 'built|loading' || true

B_SOCKET=$(c2 manager_socket)
B_ADDRESS=$(c2 manager_address)
B_NODE=$(c2 nodes 0 name)
B_NODE_SOCKET=$(c2 nodes 0 socket)
B_ENGINE="unix://$B_SOCKET"
URL_A="http://127.0.0.1:$MANAGER_PORT"              # from this machine
URL_B="http://$B_ADDRESS:$MANAGER_PORT"             # b's namespace: from here and from a
PEER_URL_A="http://$BRIDGE_ADDRESS:$MANAGER_PORT"   # a as b reaches it

# -- 2. peers files and compose overrides ------------------------------------------------------
install -d -m 0700 "$FED_DIR"
peer() {  # name url token
    printf '[{"name": "%s", "url": "%s", "token": "%s", "latency_ms": %s, "bandwidth_mbit": 1000}]\n' \
        "$1" "$2" "$3" "$LATENCY_MS"
}
(umask 077 && peer b "$URL_B" "$TOKEN_B" > "$FED_DIR/peers-a.json" \
    && peer a "$PEER_URL_A" "$TOKEN_A" > "$FED_DIR/peers-b.json")
cat > "$FED_DIR/a.override.yml" <<EOF
services:
  manager:
    volumes:
      - $FED_DIR/peers-a.json:/etc/greenswarm/peers.json:ro
EOF
cat > "$FED_DIR/b.override.yml" <<EOF
services:
  manager:
    volumes:
      - $B_SOCKET:/var/run/docker.sock
      - $FED_DIR/peers-b.json:/etc/greenswarm/peers.json:ro
EOF

# -- 3. b, then a: manager and Redis, then the per-node services -------------------------------
log "cluster b: manager and Redis on its manager engine ($B_ENGINE, listening on $B_ADDRESS),"
log "           agent and monitor on $B_NODE: docker stack deploy $STACK_B"
(
    # b's nodes get b's own node secret (derived from b's token), never a's
    GREENSWARM_NODE_SECRET=$(GREENSWARM_NODE_SECRET='' GREENSWARM_TOKEN=$TOKEN_B \
        .venv/bin/python -m cli node-secret 2>/dev/null)
    export GREENSWARM_NODE_SECRET
    export DOCKER_HOST=$B_ENGINE GREENSWARM_TOKEN=$TOKEN_B GREENSWARM_FEDERATION_NAME=b
    export GREENSWARM_PEERS_FILE=/etc/greenswarm/peers.json GREENSWARM_OFFLOAD=off
    export GREENSWARM_LISTEN_HOST="127.0.0.1,$B_ADDRESS" GREENSWARM_MANAGER_URL=$URL_B
    compose_on b up -d
    "$DOCKER" stack deploy --resolve-image never -c docker-stack.yml -c docker-stack.lab.yml \
        "$STACK_B"
)
log "cluster a: manager and Redis on this machine's engine ($URL_A), agent and monitor on"
log "           its node: docker stack deploy $STACK_A; a offloads what it cannot place"
(
    export GREENSWARM_FEDERATION_NAME=a GREENSWARM_PEERS_FILE=/etc/greenswarm/peers.json
    export GREENSWARM_OFFLOAD=unplaced
    compose_on a up -d
    "$DOCKER" stack deploy --resolve-image never -c docker-stack.yml -c docker-stack.lab.yml \
        "$STACK_A"
)
log "waiting for each manager to see its host, reported by its own monitor"
GREENSWARM_TOKEN=$TOKEN_B helper --url "$URL_B" ready --hosts 1 --timeout-s 180 \
    || die "b does not see its host (DOCKER_HOST=$B_ENGINE $DOCKER service logs ${STACK_B}_monitor)"
helper --url "$URL_A" ready --hosts 1 --timeout-s 180 \
    || die "a does not see its host ($DOCKER service logs ${STACK_A}_monitor)"
export GREENSWARM_URL=$URL_A

# -- 4. the offload ----------------------------------------------------------------------------
run=$(( $(cat "$RUN_FILE" 2>/dev/null || echo 0) + 1 ))
p="fed$run"
helper reset --prefix fed
echo "$run" > "$RUN_FILE"
log "waiting for a to see b up (GET /federation/peers, refreshed every ${GREENSWARM_PEER_REFRESH_S} s)"
for _ in $(seq 30); do
    greenswarm peers 2>/dev/null | awk '$1 == "b" {print $2}' | grep -qx up && break
    sleep 1
done
show greenswarm peers

cat <<EOF

== Step 1: fill a. Its node has 1024 CPU shares; a class-1 service of 768 takes them, and
   class 1 is never overbooked, cut or killed: no class-1 request above 256 shares fits there.
EOF
show greenswarm submit greenswarm/busybox:latest --name "$p-fill" --class 1 --type service \
    --cpu-shares 768 --memory 128m -- sleep 1d

cat <<EOF

== Step 2: submit to a what a cannot place: a asks its peers' adverts, b has room (its node is
   empty) and takes it; b's own policy places it on b's node. The record at a says cluster b.
EOF
show greenswarm submit greenswarm/busybox:latest --name "$p-ledger" --class 1 --type service \
    --cpu-shares 512 --memory 128m -- sleep 1d
host=$(DOCKER_HOST=$B_ENGINE helper host "$p-ledger")
echo "   -> $p-ledger runs on $host, a node of cluster b"
show greenswarm status
echo
echo "   Its container, on $host's own engine:"
show "$DOCKER" -H "unix://$B_NODE_SOCKET" ps --filter "label=greenswarm.task=$p-ledger" \
    --format 'table {{.Names}}\t{{.Status}}'

echo
echo "== Look further (everything keeps running)"
look() { printf '  %-66s # %s\n' "$1" "$2"; }
look "export GREENSWARM_TOKEN=\$(cat $TOKEN_FILE)" "a's token (b's: $TOKEN_B_FILE)"
look "source .venv/bin/activate" "the greenswarm CLI"
look "greenswarm status $p-ledger" "its history through a: submitted, offloaded, placed at b"
look "greenswarm peers" "a's peers: b's state, last refresh, advert"
look "greenswarm stop $p-ledger" "stopped at b, through a"
look "GREENSWARM_TOKEN=\$(cat $TOKEN_B_FILE) greenswarm status --url $URL_B" \
    "b's own records (forwarded_from a)"
look "$DOCKER -H $B_ENGINE service ls" "cluster b's Swarm: the request's service"
look "$DOCKER -H unix://$B_NODE_SOCKET ps" "b's node's own engine"
look "python -m lab status" "both Swarms of the lab"
echo "Stop it all:  bash scripts/lab-demo.sh --clusters 2 --down"
log "demo done"
