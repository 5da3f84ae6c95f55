#!/usr/bin/env bash
# Delayed delivery (the topic config weir.delivery.delay.ms): how late
# records are delivered against when they were due, next to the end-to-end
# latency of the same load on a topic without a delay; and what holding a
# million delayed records costs the broker (scripts/bench-delay.py says how
# it measures).
#
#   bash scripts/bench-delay.sh
#
# Environment: BENCH_RECORDS, BENCH_RATE, BENCH_DELAY_MS, BENCH_HELD (see
# the Python script); BENCH_SKIP_BUILD=1 uses the release binary already
# built. Needs confluent-kafka (pip install confluent-kafka).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench-delay.XXXXXX")
pid=
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
target/release/weir serve --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --controller-listen 127.0.0.1:0 >"$work/out" 2>&1 &
pid=$!
until grep -q "weir ready" "$work/out" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/out"; exit 1; }
  sleep 0.2
done
kafka=$(sed -n 's/^weir ready: kafka=\([^ ]*\).*/\1/p' "$work/out")
python3 scripts/bench-delay.py "$kafka" "$pid"
