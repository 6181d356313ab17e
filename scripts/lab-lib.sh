# shellcheck shell=bash
# Shared by scripts/lab-demo.sh and scripts/bench-live-replay.sh (sourced, never run): the local
# 3-node lab, the manager and Redis (docker-compose.yml, project "greenswarm") and the agent and
# monitor on every node (docker-stack.yml + docker-stack.lab.yml, stack "greenswarm-node"), as
# lab-demo.sh has always brought them up. The caller sets `set -euo pipefail`, cds to the
# repository, and exports the GREENSWARM_MONITOR_* / SYNC / RETRY settings it wants before
# lab_stack_up.
#
# Functions: log, die, compose, helper, lab_token, lab_up, lab_demo_settings, lab_redeploy,
# lab_stack_up, lab_take_down.

STATE_DIR=${GREENSWARM_STATE_DIR:-/var/lib/greenswarm}
TOKEN_FILE="$STATE_DIR/token"
NODE_SECRET_FILE="$STATE_DIR/node-secret"  # the nodes' secret: never the operator's token
IMAGE_FILE="$STATE_DIR/demo-image-id"
PROJECT=greenswarm            # docker-compose project
STACK=greenswarm-node         # docker stack of the per-node services
DOCKER=/usr/bin/docker        # Debian's client (the engine is 20.10)
NODES=3
NODE_CPUS=1
NODE_MEMORY=2g
MANAGER_PORT=8080
BRIDGE_ADDRESS=10.123.0.1     # the lab's bridge: where the nodes reach the manager
IMAGE=greenswarm/greenswarm:latest
LAB_NAME=${LAB_NAME:-lab-demo}  # how die() introduces itself
started=${started:-$(date +%s)}

log() { printf '[%4ss] %s\n' "$(($(date +%s) - started))" "$*"; }
die() { echo "$LAB_NAME: $*" >&2; exit 1; }

compose() {
    if [ -x /usr/bin/docker-compose ]; then
        docker-compose -p "$PROJECT" "$@"
    else
        "$DOCKER" compose -p "$PROJECT" "$@"
    fi
}

# -- settings shared by compose, the stack and the CLI ----------------------------------------
# new_secret FILE WHAT: a random secret in FILE (mode 0600), made once.
new_secret() {
    if [ ! -s "$1" ]; then
        (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(32))' \
            > "$1.tmp" && mv "$1.tmp" "$1")
        log "generated $2 in $1 (mode 0600)"
    fi
    chmod 0600 "$1"
}

# The operator's token (compose, the CLI) and the nodes' secret (compose and the stack: each
# node's agent and monitor derive their own credential from it; DESIGN 9).
lab_token() {
    install -d -m 0700 "$STATE_DIR"
    new_secret "$TOKEN_FILE" "a bearer token"
    new_secret "$NODE_SECRET_FILE" "the nodes' secret"
    GREENSWARM_TOKEN=$(cat "$TOKEN_FILE")
    GREENSWARM_NODE_SECRET=$(cat "$NODE_SECRET_FILE")
    export GREENSWARM_TOKEN GREENSWARM_NODE_SECRET
}
export GREENSWARM_URL="http://127.0.0.1:$MANAGER_PORT"          # CLI and helper
# The manager listens on this machine's loopback (the CLI) and on the lab's bridge (the nodes'
# agents and monitors), nowhere else.
export GREENSWARM_LISTEN_HOST="127.0.0.1,$BRIDGE_ADDRESS"
export GREENSWARM_LISTEN_PORT="$MANAGER_PORT"
export GREENSWARM_NODE_LABEL=greenswarm.lab.node                  # hosts: the lab nodes only
export GREENSWARM_MANAGER_URL="http://$BRIDGE_ADDRESS:$MANAGER_PORT"

helper() { .venv/bin/python scripts/lab_demo.py "$@"; }

# -- packages, lab, images ---------------------------------------------------------------------
lab_up() {
    log "setup (Debian packages, .venv)"
    bash scripts/setup.sh
    # shellcheck disable=SC1091
    source .venv/bin/activate
    lab_token
    log "lab: $NODES nodes of $NODE_CPUS CPU and $NODE_MEMORY (first run: builds the images, minutes)"
    .venv/bin/python -m lab up --nodes "$NODES" --node-cpus "$NODE_CPUS" \
        --node-memory "$NODE_MEMORY"
    # `lab up` builds the project image only when it is missing; this rebuilds it when the source
    # changed and loads it into the nodes (about 1 s when nothing changed).
    local images_report
    images_report=$(.venv/bin/python -m lab images)
    grep -E 'built|loading' <<<"$images_report" || true
}

# -- manager + Redis, then the per-node services -----------------------------------------------
# The demo's short monitor windows and loops, so that it sees regions change within seconds
# (defaults: 3 s samples, 30 s host and 45 s task windows).
lab_demo_settings() {
    export GREENSWARM_MONITOR_HOST_INTERVAL_S=1 GREENSWARM_MONITOR_HOST_WINDOW_S=5
    export GREENSWARM_MONITOR_TASK_INTERVAL_S=1 GREENSWARM_MONITOR_TASK_WINDOW_S=5
    export GREENSWARM_SYNC_INTERVAL_S=2 GREENSWARM_RETRY_INTERVAL_S=5
}

# The manager and Redis (compose) and the node services (stack), with the current environment.
lab_redeploy() {
    compose up -d
    "$DOCKER" stack deploy --resolve-image never -c docker-stack.yml -c docker-stack.lab.yml "$STACK"
}

lab_stack_up() {
    local image_id stack_existed=0
    image_id=$("$DOCKER" image inspect --format '{{.Id}}' "$IMAGE")
    if "$DOCKER" stack ls --format '{{.Name}}' | grep -qx "$STACK"; then
        stack_existed=1
    fi
    log "manager and Redis: docker-compose -p $PROJECT up -d (host network, port $MANAGER_PORT);"
    log "agent and monitor on every node: docker stack deploy $STACK"
    lab_redeploy
    # The services name the image by its tag, so a rebuilt image does not change their spec.
    if [ "$stack_existed" = 1 ] && [ "$(cat "$IMAGE_FILE" 2>/dev/null || true)" != "$image_id" ]; then
        log "the project image changed: restarting the node services on it"
        local service
        for service in agent monitor; do
            timeout 180 "$DOCKER" service update --force --quiet --detach=false \
                "${STACK}_$service" >/dev/null
        done
    fi
    echo "$image_id" > "$IMAGE_FILE"
    log "waiting for the manager to see the $NODES hosts, each reported by its own monitor"
    helper ready --hosts "$NODES" --timeout-s 180 || {
        compose logs --tail 20 manager >&2 || true
        die "the manager does not see $NODES reported hosts (see above, and: $DOCKER service logs ${STACK}_monitor)"
    }
}

# -- down: the stack, the manager and Redis, the lab -------------------------------------------
# lab_take_down --keep | --purge: --purge also deletes Redis' volume (every record).
lab_take_down() {
    if "$DOCKER" stack ls --format '{{.Name}}' 2>/dev/null | grep -qx "$STACK"; then
        log "removing the stack $STACK"
        "$DOCKER" stack rm "$STACK"
    fi
    log "stopping the manager and Redis (compose project $PROJECT)"
    if [ "$1" = --purge ]; then
        compose down -v --remove-orphans
    else
        compose down --remove-orphans
    fi
    log "taking the lab down"
    .venv/bin/python -m lab down
}
