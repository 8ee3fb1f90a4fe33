#!/usr/bin/env bash
# The dashboard service: follow the Collector's file-exporter output into the store, and serve
# the dashboard on it with trace links to Jaeger. The Dockerfile runs this script; so do
# tests/deploy/test_services_run.py and test_dashboard_entrypoint.py, with paths and ports in a temp dir.
set -euo pipefail

TRACES_FILE="${TRACES_FILE:-/var/lib/otel/traces.jsonl}"
DB="${OTEL_REPEAT_GUARD_DB:-/var/lib/repeat-guard/repeat-guard.db}"
HOST="${DASHBOARD_HOST:-0.0.0.0}"
PORT="${DASHBOARD_PORT:-8501}"
TRACE_URL="${OTEL_REPEAT_GUARD_TRACE_URL:-http://localhost:16686/trace/{trace_id}}"

# On the way out, stop both and wait for them: in the container this script is PID 1, and when it
# exits the kernel kills whatever is left at once, mid-write. They get TERM, which each takes as
# Ctrl+C; SIGINT would not do, since commands started with & here ignore it. So INT and TERM
# (docker stop, `docker compose kill -s INT`, Ctrl+C on `docker run -it`) end the script the same way.
# A SIGINT ignored when the script starts (`nohup`, `script &` from another script) stays ignored, as
# bash must (that caller asked for it; a container's PID 1 starts with it at its default): TERM still stops it.
ingest=
dashboard=
stop_both() {
  trap '' INT TERM
  kill -TERM ${ingest:+"$ingest"} ${dashboard:+"$dashboard"} 2>/dev/null || true
  wait || true
}
trap stop_both EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

otel-repeat-guard ingest --follow --quiet --db "$DB" "$TRACES_FILE" &
ingest=$!

# ingest creates the store before it waits for the first trace; on a loaded machine its
# start-up takes seconds, so wait for as long as it lives rather than for a fixed time.
until [ -f "$DB" ]; do
  kill -0 "$ingest" 2>/dev/null || { wait "$ingest"; exit $?; }
  sleep 0.1
done

otel-repeat-guard dashboard --db "$DB" --host "$HOST" --port "$PORT" --trace-url "$TRACE_URL" &
dashboard=$!

# If either process dies, exit (stopping the other) so the container restarts (restart: unless-stopped).
wait -n "$ingest" "$dashboard"
