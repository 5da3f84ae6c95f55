#!/usr/bin/env bash
# One consumer of many partitions, with and without fetch sessions (KIP-227;
# see BENCHMARKS.md). The Java consumer of kafka-consumer-perf-test (which
# uses sessions when the broker offers them) reads a topic of
# BENCH_PARTITIONS partitions twice per broker setting:
#   backlog  BENCH_RECORDS records produced beforehand, read as fast as it can;
#   trickle  the same group again, caught up, while kafka-producer-perf-test
#            sends BENCH_RATE records/s for BENCH_SECONDS: each fetch finds a
#            few new records, the load of a consumer keeping up.
# The reference is a broker that keeps no sessions
# (max.incremental.fetch.session.cache.slots=0: every fetch names every
# partition and every response lists them all). The broker's CPU time
# (utime + stime of the weir process) is read around each consumer run.
#
#   bash scripts/bench-fetch-sessions.sh
#
# Environment (defaults in brackets):
#   BENCH_PARTITIONS   partitions of the topic                  [1000]
#   BENCH_RECORDS      records of the backlog                   [1000000]
#   BENCH_RECORD_SIZE  value size in bytes                      [100]
#   BENCH_RATE         records/s of the trickle                 [2000]
#   BENCH_SECONDS      seconds of the trickle                   [20]
#   BENCH_RUNS         runs of each setting                     [2]
#   BENCH_DIR          parent of the broker's temporary data dir [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1 use the release binaries already built
#   BENCH_WEIR         the weir binary to measure [target/release/weir]
#   KAFKA_TOOLS        a directory of kafka-tools jars [fetched with Maven into
#                      tests/interop/java/target/kafka-tools, as the interop check does]
set -euo pipefail
cd "$(dirname "$0")/.."

partitions=${BENCH_PARTITIONS:-1000}
records=${BENCH_RECORDS:-1000000}
size=${BENCH_RECORD_SIZE:-100}
rate=${BENCH_RATE:-2000}
seconds=${BENCH_SECONDS:-20}
runs=${BENCH_RUNS:-2}
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=${BENCH_WEIR:-target/release/weir}
bench=target/release/weir-bench
tools=${KAFKA_TOOLS:-tests/interop/java/target/kafka-tools}
if ! ls "$tools"/kafka-tools-*.jar >/dev/null 2>&1; then
  mvn -q -B -f tests/interop/java/pom.xml -P kafka-tools dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$PWD/$tools"
fi
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-sessions.XXXXXX")
weir_pid=
cleanup() {
  [[ -n "$weir_pid" ]] && kill "$weir_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

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

# The broker's CPU time so far, in clock ticks.
cpu_ticks() {
  awk '{ print $14 + $15 }' "/proc/$weir_pid/stat"
}

consumer() {
  java -cp "$tools/*" org.apache.kafka.tools.ConsumerPerformance \
    --bootstrap-server "127.0.0.1:$port" --topic wide --group readers \
    --num-records "$1" --timeout 60000 >"$work/consumed" 2>"$work/consumer.log" || true
}

# Runs a phase ("$@"); prints "<broker cpu seconds> <records read> <seconds>".
measure() {
  local before after start_ns end_ns read
  before=$(cpu_ticks)
  start_ns=$(date +%s%N)
  "$@"
  end_ns=$(date +%s%N)
  after=$(cpu_ticks)
  read=$(awk -F', ' '/^[0-9][0-9][0-9][0-9]-/ { print $5 }' "$work/consumed")
  echo "$(echo "($after - $before) / $(getconf CLK_TCK)" | bc -l) ${read:-0} $(echo "($end_ns - $start_ns) / 1000000000" | bc -l)"
}

# The caught-up consumer reads what a rate-limited producer sends.
trickle() {
  local count=$((rate * seconds))
  consumer "$count" &
  local reader=$!
  sleep 5 # joined and caught up
  java -cp "$tools/*" org.apache.kafka.tools.ProducerPerformance --topic wide \
    --num-records "$count" --record-size "$size" --throughput "$rate" \
    --command-property bootstrap.servers="127.0.0.1:$port" acks=1 >"$work/produced" 2>&1
  wait "$reader"
}

run() {
  local label=$1
  shift
  start "$@"
  "$weir" topic create wide --partitions "$partitions" --bootstrap "127.0.0.1:$port" >/dev/null
  "$bench" --bootstrap "127.0.0.1:$port" --json produce --topic wide \
    --records "$records" --record-size "$size" --keys $((partitions * 10)) >/dev/null
  local backlog trickled
  backlog=$(measure consumer "$records")
  trickled=$(measure trickle)
  python3 - "$label" "$backlog" "$trickled" <<'PY'
import sys
label = sys.argv[1]
def row(figures):
    cpu, n, secs = (float(x) for x in figures.split())
    per_million = cpu / n * 1e6 if n else float("nan")
    return f"{int(n):>9} {n / secs:>11,.0f} {cpu:>7.2f} {per_million:>9.2f}"
print(f"{label:<22} {row(sys.argv[2])}   {row(sys.argv[3])}")
PY
}

printf "%-22s %-39s   %s\n" "" "backlog" "trickle"
printf "%-22s %9s %11s %7s %9s   %9s %11s %7s %9s\n" setting records "records/s" "cpu s" \
  "cpu s/M" records "records/s" "cpu s" "cpu s/M"
for _ in $(seq "$runs"); do
  run "no sessions (slots=0)" --max-incremental-fetch-session-cache-slots 0
  run "sessions (default)"
done
