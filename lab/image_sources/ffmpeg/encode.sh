#!/bin/sh
# Encode a generated test video in rounds until MAKESPAN_S seconds are over, then exit 0.
# Each round encodes FFMPEG_CHUNK_S seconds of testsrc video; the last round is cut short by
# `timeout` so the job ends on time. SIGTERM (docker stop) ends the job at once with 143.
set -eu
: "${MAKESPAN_S:=60}" "${FFMPEG_SIZE:=1280x720}" "${FFMPEG_RATE:=25}" "${FFMPEG_CHUNK_S:=10}"
: "${FFMPEG_PRESET:=veryfast}" "${FFMPEG_THREADS:=0}"
[ "$#" -gt 0 ] && MAKESPAN_S=$1

rounds=0
child=""
stop() {
    [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
    echo "ffmpeg: stopped by signal after $rounds round(s)"
    exit 143
}
trap stop TERM INT

now_ms() { date +%s%3N; }
start=$(now_ms)
end=$((start + MAKESPAN_S * 1000))
echo "ffmpeg: encoding testsrc ${FFMPEG_SIZE}@${FFMPEG_RATE} (x264 ${FFMPEG_PRESET}) for ${MAKESPAN_S}s"
while :; do
    left=$((end - $(now_ms)))
    [ "$left" -gt 0 ] || break
    timeout -s INT "$((left / 1000)).$(printf %03d $((left % 1000)))" ffmpeg -nostdin -hide_banner -loglevel error \
        -f lavfi -i "testsrc=size=${FFMPEG_SIZE}:rate=${FFMPEG_RATE}" -t "$FFMPEG_CHUNK_S" \
        -c:v libx264 -preset "$FFMPEG_PRESET" -threads "$FFMPEG_THREADS" -f null - &
    child=$!
    status=0
    wait "$child" || status=$?
    child=""
    # 124: the round was cut by the makespan; 255: ffmpeg's own exit on SIGINT.
    case "$status" in
        0) rounds=$((rounds + 1)) ;;
        124|255) ;;
        *) echo "ffmpeg: round failed with status $status" >&2; exit "$status" ;;
    esac
done
echo "ffmpeg: done, $rounds full round(s), $((rounds * FFMPEG_CHUNK_S * FFMPEG_RATE)) frames in $(( ($(now_ms) - start) / 1000 ))s"
exit 0
