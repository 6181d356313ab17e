#!/bin/sh
# redis-server filled with REDIS_DATA_MB MiB of values, answering on REDIS_PORT (all addresses).
# Data is generated inside redis with DEBUG POPULATE (allowed from localhost only), so filling
# 1 GiB takes seconds. No persistence: the data set is rebuilt on every start.
set -eu
: "${REDIS_PORT:=6379}" "${REDIS_DATA_MB:=64}" "${REDIS_VALUE_BYTES:=1024}"

redis-server --port "$REDIS_PORT" --bind 0.0.0.0 --protected-mode no --save "" \
    --appendonly no --enable-debug-command local --logfile "" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null; wait "$server"; exit 0' TERM INT

tries=0
until [ "$(redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 200 ] || ! kill -0 "$server" 2>/dev/null; then
        echo "redis: server did not start" >&2
        exit 1
    fi
    sleep 0.05
done

keys=$((REDIS_DATA_MB * 1048576 / REDIS_VALUE_BYTES))
redis-cli -p "$REDIS_PORT" DEBUG POPULATE "$keys" key "$REDIS_VALUE_BYTES" >/dev/null
echo "redis: ready on port $REDIS_PORT with $keys keys of $REDIS_VALUE_BYTES bytes" \
     "($(redis-cli -p "$REDIS_PORT" info memory | sed -n 's/^used_memory_human://p' | tr -d '\r'))"
wait "$server"
