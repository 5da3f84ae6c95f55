#!/usr/bin/env bash
# Produce and consume over many partitions (see BENCHMARKS.md): one broker,
# one topic per partition count, `weir-bench produce` spreading keyed
# records over every partition (ten keys per partition: keyless records
# would stick to a few partitions at a time), then `weir-bench consume` reading them all
# back. The first count is the reference the others are compared with; the
# last run repeats the widest topic with log.max.open.files well below its
# file count, so descriptors are closed and reopened all the time.
#
#   bash scripts/bench-many-partitions.sh
#
# Environment (defaults in brackets):
#   BENCH_PARTITIONS    partition counts, the reference first     [10 10000]
#   BENCH_RECORDS       records per run                           [1000000]
#   BENCH_RECORD_SIZE   value size in bytes                       [100]
#   BENCH_SMALL_CACHE   log.max.open.files of the last run        [2000]
#   BENCH_DIR           parent of the broker's temporary data dir [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1  use the release binaries already built
#   BENCH_WEIR          the weir binary to measure    [target/release/weir]
set -euo pipefail
cd "$(dirname "$0")/.."

counts=(${BENCH_PARTITIONS:-10 10000})
records=${BENCH_RECORDS:-1000000}
size=${BENCH_RECORD_SIZE:-100}
small_cache=${BENCH_SMALL_CACHE:-2000}
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=${BENCH_WEIR:-target/release/weir}
bench=target/release/weir-bench
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-wide.XXXXXX")
weir_pid=
cleanup() {
  [[ -n "$weir_pid" ]] && kill "$weir_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Starts a broker on a fresh data directory with extra arguments.
start() {
  [[ -n "$weir_pid" ]] && { kill "$weir_pid"; wait "$weir_pid" 2>/dev/null || true; }
  rm -rf "$work/data"
  port=$((20000 + RANDOM % 20000))
  "$weir" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
    --http-listen 127.0.0.1:0 --controller-listen 127.0.0.1:0 "$@" \
    >"$work/ready" 2>"$work/broker.log" &
  weir_pid=$!
  until grep -q "weir ready" "$work/ready" 2>/dev/null; do sleep 0.2; done
}

# One run: creates a topic of $1 partitions, produces, consumes; prints
# one line of figures.
run() {
  local partitions=$1 label=$2 topic="wide-$1"
  local created=$(date +%s.%N)
  "$weir" topic create "$topic" --partitions "$partitions" --bootstrap "127.0.0.1:$port" >/dev/null
  created=$(echo "$(date +%s.%N) - $created" | bc)
  local produced consumed
  produced=$("$bench" --bootstrap "127.0.0.1:$port" --json produce --topic "$topic" \
    --records "$records" --record-size "$size" --keys $((partitions * 10)))
  consumed=$("$bench" --bootstrap "127.0.0.1:$port" --json consume --topic "$topic" \
    --records "$records")
  local fds
  fds=$(ls "/proc/$weir_pid/fd" | wc -l)
  python3 - "$label" "$partitions" "$created" "$fds" "$produced" "$consumed" <<'PY'
import json, sys
label, partitions, created, fds = sys.argv[1:5]
p, c = json.loads(sys.argv[5]), json.loads(sys.argv[6])
latency = p.get("latency_ms") or {}
print(f"{label:<28} {partitions:>6} {float(created):8.1f} s {fds:>6} "
      f"{p['records_per_sec']:>12,.0f} {p['mb_per_sec']:7.1f} "
      f"{latency.get('p50', float('nan')):7.1f} {latency.get('p99', float('nan')):8.1f} "
      f"{c['records_per_sec']:>12,.0f} {c['mb_per_sec']:7.1f}")
PY
}

printf "%-28s %6s %10s %6s %12s %7s %7s %8s %12s %7s\n" run partitions create fds \
  "produce r/s" MB/s "p50 ms" "p99 ms" "consume r/s" MB/s
for partitions in "${counts[@]}"; do
  start
  run "$partitions" "log.max.open.files default"
done
start --log-max-open-files "$small_cache"
run "${counts[-1]}" "log.max.open.files=$small_cache"
