#!/usr/bin/env bash
# Creating many topics (see BENCHMARKS.md): one broker on a fresh data
# directory, then, unless BENCH_CLUSTER=0, three nodes (each broker and
# controller) on fresh ones; `weir-bench create-topics` creates the topics
# through librdkafka's admin API and prints the time from the first
# CreateTopics request to the last answer. Each configuration runs
# BENCH_RUNS times, each on a new data directory.
#
#   bash scripts/bench-create-topics.sh
#
# Environment (defaults in brackets):
#   BENCH_TOPICS        topics to create                           [1000]
#   BENCH_PARTITIONS    partitions per topic                       [10]
#   BENCH_PER_REQUEST   topics per CreateTopics request            [all]
#   BENCH_RUNS          runs per configuration                     [3]
#   BENCH_TIMEOUT       the requests' timeout_ms, as weir-bench takes it [300s]
#   BENCH_CLUSTER=0     only the single broker
#   BENCH_DIR           parent of the brokers' temporary data dirs [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1  use the release binaries already built
#   BENCH_WEIR          the weir binary to measure    [target/release/weir]
set -euo pipefail
cd "$(dirname "$0")/.."

topics=${BENCH_TOPICS:-1000}
partitions=${BENCH_PARTITIONS:-10}
per_request=${BENCH_PER_REQUEST:-$topics}
runs=${BENCH_RUNS:-3}
timeout=${BENCH_TIMEOUT:-300s}
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=${BENCH_WEIR:-target/release/weir}
bench=target/release/weir-bench
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-create.XXXXXX")
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Starts `$1` nodes, each broker and controller, on fresh data directories;
# sets $bootstrap to the first node's Kafka listener.
start() {
  local nodes=$1 voters="" i
  stop_all
  rm -rf "$work"/node*
  local kafka=() controller=()
  for ((i = 1; i <= nodes; i++)); do
    kafka+=("$(free_port)")
    controller+=("$(free_port)")
    voters+="${voters:+,}$i@127.0.0.1:${controller[i - 1]}"
  done
  for ((i = 1; i <= nodes; i++)); do
    "$weir" serve --node-id "$i" --data-dir "$work/node$i" \
      --listen "127.0.0.1:${kafka[i - 1]}" --http-listen 127.0.0.1:0 \
      --controller-listen "127.0.0.1:${controller[i - 1]}" --controllers "$voters" \
      >"$work/ready$i" 2>"$work/broker$i.log" &
    pids+=($!)
  done
  for ((i = 1; i <= nodes; i++)); do
    until grep -q "weir ready" "$work/ready$i" 2>/dev/null; do sleep 0.2; done
  done
  bootstrap="127.0.0.1:${kafka[0]}"
}

# One configuration: `$1` nodes, replication factor `$2`.
measure() {
  local nodes=$1 replication=$2 run
  for ((run = 1; run <= runs; run++)); do
    start "$nodes"
    printf "%d node(s), replication factor %d, run %d: " "$nodes" "$replication" "$run"
    "$bench" --bootstrap "$bootstrap" create-topics --topics "$topics" \
      --partitions "$partitions" --replication-factor "$replication" \
      --per-request "$per_request" --operation-timeout "$timeout"
  done
}

measure 1 1
if [[ "${BENCH_CLUSTER:-1}" != 0 ]]; then
  measure 3 3
fi
