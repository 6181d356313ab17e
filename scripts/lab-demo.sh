#!/usr/bin/env bash
# The README's main command: greenswarm on a real 3-node Docker Swarm on this machine.
#
#   bash scripts/lab-demo.sh                 set up, start everything, run the demo
#   bash scripts/lab-demo.sh --down          stop the demo, the stack and the lab
#   bash scripts/lab-demo.sh --down --purge  ... and delete Redis' volume (every record)
#   bash scripts/lab-demo.sh --clusters 2    the federated demo (scripts/lab-demo-federation.sh)
#
# It runs scripts/setup.sh, starts the local lab (3 nodes of 1 CPU and 2 GiB, lab),
# the manager and Redis (docker-compose.yml), the agent and monitor on every node
# (docker-stack.yml + docker-stack.lab.yml), then submits a class mix that shows the three passes:
# placements (fullest LEE host first, empty hosts last), a cut, and a kill with a reschedule;
# then, with the power manager on (idle time shortened to 20 s for the demo), a host switched
# off for real once its last task ended, and on again when a request needs it.
# Idempotent: a second run stops the requests of the previous run and uses new names
# (demo<run>-...); the lab, the compose project and the stack are reused as they are.
set -euo pipefail
cd "$(dirname "$0")/.."

LAB_NAME=lab-demo
# shellcheck source=scripts/lab-lib.sh
source scripts/lab-lib.sh     # STATE_DIR, TOKEN_FILE, PROJECT, STACK, DOCKER, log, die, compose...
RUN_FILE="$STATE_DIR/demo-run"
show() { printf '  $ %s\n' "$*"; "$@"; }

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

for arg in "$@"; do
    if [ "$arg" = --clusters ]; then  # two Swarms, a greenswarm on each: its own script
        exec bash scripts/lab-demo-federation.sh "$@"
    fi
done
down=0
purge=0
for arg in "$@"; do
    case "$arg" in
        --down) down=1 ;;
        --purge) purge=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
if [ "$purge" = 1 ] && [ "$down" = 0 ]; then
    die "--purge goes with --down"
fi
[ "$(id -u)" -eq 0 ] || die "run it as root (sudo bash scripts/lab-demo.sh): the lab creates network namespaces, cgroups and daemons"

lab_demo_settings  # short monitor windows (scripts/lab-lib.sh)

# -- --down ------------------------------------------------------------------------------------
if [ "$down" = 1 ]; then
    [ -x .venv/bin/python ] || die "no .venv: nothing of the demo can be running"
    if [ -s "$TOKEN_FILE" ]; then
        GREENSWARM_TOKEN=$(cat "$TOKEN_FILE")
    else
        GREENSWARM_TOKEN="unset"  # compose needs a value to read its file; nothing is sent
    fi
    export GREENSWARM_TOKEN
    if helper alive; then
        log "stopping the demo's requests"
        helper reset --prefix demo --quiet || true
    fi
    # asked before the lab goes: the lab may stop the engine it started, and the volume with it
    volume_kept=0
    if [ "$purge" = 0 ] && "$DOCKER" volume inspect "${PROJECT}_redis-data" >/dev/null 2>&1; then
        volume_kept=1
    fi
    if [ "$purge" = 1 ]; then
        lab_take_down --purge
        rm -f "$RUN_FILE" "$IMAGE_FILE"
    else
        lab_take_down --keep
    fi
    kept="the token stays in $TOKEN_FILE"
    if [ "$volume_kept" = 1 ]; then
        kept="$kept, and Redis' volume ${PROJECT}_redis-data (every request record) is kept:"
        kept="$kept --down --purge deletes it"
    fi
    log "done; $kept"
    exit 0
fi

# -- 1. packages, lab, images ------------------------------------------------------------------
lab_up  # also activates .venv for the commands below
# the demo starts with every node on: an earlier run's power manager may have left one off
helper power-restore || die "could not switch on the nodes an earlier run left off"
# the manager starts without the power manager (step 5 restarts it with it)
export GREENSWARM_POWER=off
# step 3 shows a kill: its victim lacks only CPU, so by default (DESIGN 3.14) it would be
# paused in place instead; the demo turns pausing off to show the kill and the reschedule
export GREENSWARM_POLICY_OPTIONS=suspend=false

# -- 2. manager + Redis, then the per-node services --------------------------------------------
lab_stack_up

# -- 3. the demo's requests --------------------------------------------------------------------
run=$(( $(cat "$RUN_FILE" 2>/dev/null || echo 0) + 1 ))
p="demo$run"
log "run $run: stopping what earlier runs left running (their records stay), new names $p-*"
helper reset --prefix demo
helper quiet --timeout-s 90 || die "the hosts did not become idle"
echo "$run" > "$RUN_FILE"

cat <<EOF

== Step 1: placements (simple pass). Nodes have 1024 CPU shares (1 core) and 2 GiB each.
   Class 4 tolerates 150% CPU booked, class 2 117%, class 1 none. The energy policy fills the
   fullest LEE host first and uses an empty host only when nothing else fits.
EOF
show greenswarm submit greenswarm/timeserver:latest --name "$p-web" --class 4 --type service \
    --cpu-shares 512 --memory 256m --env PORT=18080 --port 18080:18080
show greenswarm submit greenswarm/redis:latest --name "$p-cache" --class 4 --type service \
    --cpu-shares 256 --memory 256m --env REDIS_DATA_MB=32
show greenswarm submit greenswarm/busybox:latest --name "$p-worker" --class 4 --type service \
    --cpu-shares 256 --memory 64m -- sleep 1d
packed=$(helper host "$p-web")
echo "   -> web, cache and worker share $packed (1024/1024 shares booked): the first took an"
echo "      empty host, the others the fullest LEE host of a class they tolerate."
show greenswarm submit greenswarm/ffmpeg:latest --name "$p-encode" --class 2 --type job \
    --cpu-shares 320 --memory 384m --env MAKESPAN_S=60 --env FFMPEG_SIZE=640x360
show greenswarm submit greenswarm/busybox:latest --name "$p-ledger" --class 1 --type service \
    --cpu-shares 640 --memory 256m -- sleep 1d
hot=$(helper host "$p-encode")
strict=$(helper host "$p-ledger")
echo "   -> encode (class 2) and ledger (class 1) cannot join $packed, whose class-4 tasks"
echo "      would overbook them: each powers on an empty host ($hot, $strict)."
log "waiting for the monitor of $hot to report the encoder's load (region EED, U > 0.85)"
helper wait-region "$p-encode" EED --timeout-s 90 || die "$hot never became EED"
show greenswarm hosts

cat <<EOF

== Step 2: a cut. api (class 2, 480 shares) fits on no host as it is: $hot is EED (busy hosts
   get no new work and are never cut), $strict is class 1 (640 + 480 > 1024, even with api cut
   by 1/6), and no host is empty. The cut pass turns $packed into a class-2 host: its class-4
   tasks may give up t(4) - t(2) = 1/2 - 1/6 = 1/3 of their resources, least used first, until
   api fits: here all three are needed (1024 + 480 > 1194 = 1024 x 7/6).
EOF
show greenswarm submit greenswarm/busybox:latest --name "$p-api" --class 2 --type service \
    --cpu-shares 480 --memory 64m -- sleep 1d

cat <<EOF

== Step 3: a kill. urgent (class 1, 768 shares) fits nowhere, even with cuts ($packed's tasks
   may lose only 1/6 more). The kill pass looks at the busy hosts, EED then DEE ($hot is one of
   them while the encoder runs, whichever region its monitor reported last): on $hot the
   class-2 encoder is a tolerated victim. It is killed (pausing, the default for a victim that
   lacks only CPU, is off FOR THE DEMO), urgent takes its place, and the encoder is rescheduled
   with its original resources, never on the host it just left: $strict (class 1) has
   640 + 320 <= 1024 shares. The job starts again there.
EOF
show greenswarm submit greenswarm/busybox:latest --name "$p-urgent" --class 1 --type service \
    --cpu-shares 768 --memory 128m -- sleep 1d
helper wait-status "$p-encode" running --kills 1 --timeout-s 60 \
    || die "encode was not rescheduled"

cat <<EOF

== Step 4: a short job once $hot is calm again: train (DL, class 3) takes the first host, in
   region and class order, with room for it.
EOF
log "waiting for the monitor of $hot to report it idle again"
helper wait-region "$p-urgent" LEE --timeout-s 60 || true
show greenswarm submit greenswarm/dl:latest --name "$p-train" --class 3 --type job \
    --cpu-shares 256 --memory 512m --env MAKESPAN_S=30 --env DL_MEMORY_MB=128
log "waiting for the jobs to finish (encode restarted for 60 s, train 30 s)"
helper wait-status "$p-train" completed failed --timeout-s 120 || true
helper wait-status "$p-encode" completed failed --timeout-s 120 || true

# -- 4. power: a host switched off when idle, on when needed -----------------------------------
POWER_IDLE_S=20  # shortened for the demo: the default idle_s is 300 s
cat <<EOF

== Step 5: power (DESIGN 3.15). The manager restarts with the power manager on:
   GREENSWARM_POWER=on, backend lab (the lab's power endpoint, python -m lab power serve,
   stops and starts a node's engine, like a machine's BMC), and idle_s SHORTENED TO
   ${POWER_IDLE_S} s FOR THE DEMO (the default is 300 s). The ledger service is stopped: its
   host then holds no task, and once it has been empty for ${POWER_IDLE_S} s (the hosts left
   on keeping the spare room) it is drained in Swarm and its engine is stopped for real.
EOF
log "the lab's power endpoint (python -m lab power serve --detach, port 8089)"
python -m lab power serve --detach
export GREENSWARM_POWER=on GREENSWARM_POWER_BACKEND=lab GREENSWARM_POWER_IDLE_S=$POWER_IDLE_S
log "restarting the manager with GREENSWARM_POWER=on (docker-compose -p $PROJECT up -d)"
compose up -d
helper ready --hosts "$NODES" --timeout-s 180 || die "the manager did not come back"
show greenswarm stop "$p-ledger"
idle=$(helper empty-host) || die "no host became empty"
log "waiting for $idle to be switched off (${POWER_IDLE_S} s idle, then drained, engine stopped)"
helper wait-power "$idle" off --timeout-s 180 || die "$idle was not switched off"
show greenswarm hosts
show python -m lab status
cat <<EOF

   -> $idle is off: its engine is stopped (lab status: off); the manager keeps it as a host
      switched off (POWER off), not as a lost node. Now big (class 1, 768 shares): no host on
      takes it without a kill ($packed's class-4 tasks would be its victims); the host that
      is off would. It waits for $idle (pending, nothing killed), which is switched on for
      it: engine started, node Ready, then active; big is placed there.
EOF
show greenswarm submit greenswarm/busybox:latest --name "$p-big" --class 1 --type service \
    --cpu-shares 768 --memory 128m -- sleep 1d
helper wait-power "$idle" on --timeout-s 180 || die "$idle was not switched on again"
helper wait-status "$p-big" running --timeout-s 120 || die "big was not placed"
echo "   -> big runs on $(helper host "$p-big"); nothing was killed for it."
show python -m lab status

# -- 5. what happened --------------------------------------------------------------------------
echo
echo "== What happened (greenswarm status / greenswarm hosts, with node names)"
helper report --prefix "$p-" --evidence "$p-web" "$p-cache" "$p-worker" "$p-api" "$p-urgent" \
    "$p-big"
web_node=$(helper host "$p-web")
web_address=$("$DOCKER" node inspect --format '{{.Status.Addr}}' "$web_node" 2>/dev/null || echo "?")

echo
echo "== Look further (the services keep running; the jobs are done)"
look() { printf '  %-62s # %s\n' "$1" "$2"; }
look "$GREENSWARM_URL/dashboard" "the dashboard: log in with the token in $TOKEN_FILE"
look "export GREENSWARM_TOKEN=\$(cat $TOKEN_FILE)" "every call but /healthz takes it"
look "$NODE_SECRET_FILE" "the nodes' secret: each agent and monitor reports with its own credential"
look "source .venv/bin/activate" "the greenswarm CLI"
look "greenswarm status" "every request (greenswarm status $p-encode: its history)"
look "greenswarm hosts" "regions, classes, use and bookings"
look "greenswarm events --follow" "every request's events as they happen"
look "curl -H \"Authorization: Bearer \$GREENSWARM_TOKEN\" $GREENSWARM_URL/hosts" "REST: /requests, /requests/<id>, /openapi.json"
look "curl http://$web_address:18080/" "the web service (timeserver) on $web_node"
look "$DOCKER service ls" "requests are Swarm services (gs-$p-...)"
look "$DOCKER stack ps $STACK" "the agent and monitor of every node"
look "$DOCKER -H unix:///run/greenswarm/lab/$packed.sock ps" "a node's own engine"
look "GREENSWARM_TOKEN=\$(cat $TOKEN_FILE) docker-compose -p $PROJECT logs manager" \
    "the manager's log (compose reads the token)"
look "python -m lab status" "the lab's nodes (and which are switched off)"
look "python -m lab power status" "each node's power, as the power endpoint sees it"
echo "Run it again: bash scripts/lab-demo.sh  (stops this run's requests, starts demo$((run + 1))-*)"
echo "Stop it all:  bash scripts/lab-demo.sh --down   (--down --purge also drops the records)"
log "demo done"
