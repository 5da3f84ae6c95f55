#!/usr/bin/env bash
# A rolling restart of a consumer group under a steady produce load, classic
# (range, cooperative-sticky) against the consumer protocol (KIP-848), for
# groups of 3 and 12 consumers, in one run against one broker: the
# consumption pause each partition suffers, and the time to a stable group
# after each restart (scripts/bench-rebalance.py says how it measures).
# Both protocols heartbeat every 500 ms (classic: the consumers'
# heartbeat.interval.ms; consumer protocol: the broker's
# group.consumer.heartbeat.interval.ms), so neither waits longer to learn
# of a change.
#
#   bash scripts/bench-rebalance.sh
#
# Environment: BENCH_SIZES, BENCH_PARTITIONS, BENCH_RATE, BENCH_GAP_MS (see
# the Python script); BENCH_SKIP_BUILD=1 uses the release binary already
# built. Needs confluent-kafka (pip install confluent-kafka).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench-rebalance.XXXXXX")
pid=
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
target/release/weir serve --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --controller-listen 127.0.0.1:0 --group-consumer-heartbeat-interval-ms 500 \
  --group-consumer-min-heartbeat-interval-ms 500 >"$work/out" 2>&1 &
pid=$!
until grep -q "weir ready" "$work/out" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/out"; exit 1; }
  sleep 0.2
done
kafka=$(sed -n 's/^weir ready: kafka=\([^ ]*\).*/\1/p' "$work/out")
python3 scripts/bench-rebalance.py "$kafka"
