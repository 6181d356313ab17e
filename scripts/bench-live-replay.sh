#!/usr/bin/env bash
# Live comparison of policies on the local lab (DESIGN 7.2), next to the simulator.
#
#   bash scripts/bench-live-replay.sh [--policies energy,spread,binpack] [--speedup 10]
#       [--duration-s 1800] [--seed 1] [--trace FILE] [--out DIR] [--queue-new] [--keep-lab]
#       [--keep-records]
#
# 1. the lab (3 nodes of 1 CPU and 2 GiB), the manager and Redis, an agent and a monitor on
#    every node, brought up as scripts/lab-demo.sh does (scripts/lab-lib.sh); the monitors'
#    windows are the design's 30 s / 45 s of trace time divided by the speedup;
# 2. a thesis trace sized for the lab (`greenswarm bench generate --hosts 3x1c2g`: the arrival
#    rate and the burst limit scale with the cluster), unless --trace is given;
# 3. per policy: the manager restarted with GREENSWARM_POLICY=<policy> on a fresh Redis key
#    prefix (an empty registry), the monitors restarted so that they register again, a wait
#    for three reported, idle hosts, then `greenswarm bench replay` into DIR/live-<policy>;
# 4. the simulator on the same trace into DIR/sim-<policy> (raw output in DIR/simulator);
# 5. `greenswarm bench report DIR`: DIR/summary.md, DIR/summary.json and the PNG plots.
# --queue-new: new requests ask to queue instead of being refused, live and simulated alike.
# At the end the manager and the monitors get the demo's settings back and the lab stays up if
# it was up before; otherwise everything is taken down again (unless --keep-lab). The replay's
# request records are deleted from Redis unless --keep-records.
# Defaults: energy, spread and binpack, speedup 10, 1800 trace seconds (about 4 minutes of wall
# time per policy, some 15 minutes in all with the lab already built).
set -euo pipefail
cd "$(dirname "$0")/.."

LAB_NAME=bench-live-replay
# shellcheck source=scripts/lab-lib.sh
source scripts/lab-lib.sh

usage() {
    sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
}

policies=energy,spread,binpack
speedup=10
duration=1800
seed=1
trace=""
out=""
keep_lab=0
keep_records=0
queue_new=()
while [ $# -gt 0 ]; do
    case "$1" in
        --policies) policies=$2; shift 2 ;;
        --speedup) speedup=$2; shift 2 ;;
        --duration-s) duration=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --trace) trace=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --queue-new) queue_new=(--queue-new); shift ;;
        --keep-lab) keep_lab=1; shift ;;
        --keep-records) keep_records=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "run it as root (sudo bash scripts/bench-live-replay.sh): the lab creates network namespaces, cgroups and daemons"
IFS=, read -r -a policy_list <<<"$policies"
bash scripts/setup.sh >/dev/null
# the policies the simulator also runs, from the registration table ('swarm' is not replayed)
mapfile -t known < <(.venv/bin/python -m cli policies --simulated --names)
for p in "${policy_list[@]}"; do
    [[ " ${known[*]} " == *" $p "* ]] || die "unknown policy '$p' (${known[*]}; 'swarm' is not replayed)"
done
stamp=$(date +%Y%m%d-%H%M%S)
out=${out:-bench-out/live-$stamp}
mkdir -p "$out"
out=$(cd "$out" && pwd)
REDIS_PORT=${GREENSWARM_REDIS_PORT:-6380}

# -- settings scaled to the speedup ------------------------------------------------------------
scaled() {  # scaled SECONDS: SECONDS / speedup, rounded up, at least 2
    awk -v s="$1" -v k="$speedup" 'BEGIN { v = s / k; r = int(v); if (r < v) r++; if (r < 2) r = 2; print r }'
}
export GREENSWARM_MONITOR_HOST_INTERVAL_S=1 GREENSWARM_MONITOR_TASK_INTERVAL_S=1
GREENSWARM_MONITOR_HOST_WINDOW_S=$(scaled 30)
GREENSWARM_MONITOR_TASK_WINDOW_S=$(scaled 45)
export GREENSWARM_MONITOR_HOST_WINDOW_S GREENSWARM_MONITOR_TASK_WINDOW_S
export GREENSWARM_SYNC_INTERVAL_S=1 GREENSWARM_RETRY_INTERVAL_S=1

# -- at the end, whatever happened: the demo's settings back, or the lab down -------------------
lab_was_up=0
if [ -x .venv/bin/python ] && .venv/bin/python -m lab status >/dev/null 2>&1; then
    lab_was_up=1
fi
prefixes=()
finish() {
    local status=$?
    set +e
    trap - EXIT
    if [ "$keep_records" = 0 ] && [ ${#prefixes[@]} -gt 0 ] && command -v redis-cli >/dev/null; then
        for prefix in "${prefixes[@]}"; do
            redis-cli -p "$REDIS_PORT" --scan --pattern "$prefix:*" \
                | xargs -r -n 500 redis-cli -p "$REDIS_PORT" DEL >/dev/null
        done
        log "deleted the replays' records from Redis (prefixes ${prefixes[*]})"
    fi
    if [ "$lab_was_up" = 1 ] || [ "$keep_lab" = 1 ]; then
        log "giving the manager and the monitors the demo's settings back"
        unset GREENSWARM_POLICY GREENSWARM_REDIS_PREFIX GREENSWARM_SERVICE_PREFIX
        lab_demo_settings
        lab_redeploy >/dev/null 2>&1
    else
        lab_take_down --keep
    fi
    log "finished (exit $status) after $(($(date +%s) - started)) s; results in $out"
    exit "$status"
}
trap finish EXIT

# -- 1. lab, manager, node services ------------------------------------------------------------
lab_up
first=${policy_list[0]}
export GREENSWARM_POLICY=$first GREENSWARM_REDIS_PREFIX="bench-$stamp-$first"
export GREENSWARM_SERVICE_PREFIX="gsb-$first-"
lab_stack_up
log "monitors: 1 s samples, host window ${GREENSWARM_MONITOR_HOST_WINDOW_S} s, task window" \
    "${GREENSWARM_MONITOR_TASK_WINDOW_S} s (30 s and 45 s of trace time at speedup $speedup)"

# -- 2. the trace ------------------------------------------------------------------------------
if [ -z "$trace" ]; then
    trace="$out/trace.jsonl"
    greenswarm bench generate --workload thesis --seed "$seed" --hosts 3x1c2g \
        --duration-s "$duration" --out "$trace"
else
    cp "$trace" "$out/trace.jsonl"
    trace="$out/trace.jsonl"
fi

# -- 3. one live replay per policy -------------------------------------------------------------
declare -A took
for p in "${policy_list[@]}"; do
    t0=$(date +%s)
    export GREENSWARM_POLICY=$p GREENSWARM_REDIS_PREFIX="bench-$stamp-$p"
    export GREENSWARM_SERVICE_PREFIX="gsb-$p-"
    prefixes+=("$GREENSWARM_REDIS_PREFIX")
    log "== $p: manager on an empty registry (prefix $GREENSWARM_REDIS_PREFIX), monitors restarted"
    compose up -d
    timeout 300 "$DOCKER" service update --force --quiet --detach=false "${STACK}_monitor" >/dev/null
    helper ready --hosts "$NODES" --timeout-s 180 || die "the manager does not see $NODES reported hosts"
    helper quiet --timeout-s 180 || die "the hosts did not become empty and idle"
    log "== $p: replaying at speedup $speedup"
    greenswarm bench replay --trace "$trace" --manager "$GREENSWARM_URL" --speedup "$speedup" \
        --policy-label "live-$p" --out "$out" --token-file "$TOKEN_FILE" --progress \
        "${queue_new[@]}"
    leftovers=$("$DOCKER" service ls -q --filter "name=$GREENSWARM_SERVICE_PREFIX")
    if [ -n "$leftovers" ]; then
        log "removing $(wc -w <<<"$leftovers") service(s) the replay left behind"
        # shellcheck disable=SC2086
        "$DOCKER" service rm $leftovers >/dev/null
    fi
    took[$p]=$(($(date +%s) - t0))
    log "== $p: done in ${took[$p]} s"
done

# -- 4. the simulator on the same trace --------------------------------------------------------
log "simulator: the same trace, policies $policies"
greenswarm bench simulate --trace "$trace" --policies "$policies" --out "$out/simulator" \
    --no-plots "${queue_new[@]}" >/dev/null
.venv/bin/python - "$out" "${policy_list[@]}" <<'EOF'
import dataclasses
import sys

from measure.result_files import load_result, save_result

out, policies = sys.argv[1], sys.argv[2:]
for policy in policies:
    result = load_result(f"{out}/simulator/{policy}")
    save_result(dataclasses.replace(result, policy=f"sim-{policy}"), out)
EOF

# -- 5. the report -----------------------------------------------------------------------------
greenswarm bench report "$out"
for p in "${policy_list[@]}"; do
    log "live $p: ${took[$p]} s (restart, settle, replay, clean-up)"
done
log "report: $out/summary.md"
