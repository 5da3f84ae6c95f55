#!/usr/bin/env bash
# Group commit through the broker (see BENCHMARKS.md): 8 producers send
# one-record batches to one partition of a topic with flush.messages=1,
# and strace counts the broker's fsyncs. With group commit one fsync covers
# the batches appended while the previous one ran, so fsyncs per batch fall
# below 1.
#
#   bash scripts/bench-group-commit.sh
#
# Environment (defaults in brackets):
#   BENCH_PRODUCERS     producers                                 [8]
#   BENCH_RECORDS       records in all, one per batch             [2400]
#   BENCH_DIR           parent of the broker's temporary data dir [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1  use the release binaries already built
#   BENCH_WEIR          the weir binary to measure [target/release/weir]
# Needs strace (apt-get install strace).
set -euo pipefail
cd "$(dirname "$0")/.."

producers=${BENCH_PRODUCERS:-8}
records=${BENCH_RECORDS:-2400}
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=${BENCH_WEIR:-target/release/weir}
bench=target/release/weir-bench
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-gc.XXXXXX")
weir_pid=
strace_pid=
cleanup() {
  [[ -n "$strace_pid" ]] && kill "$strace_pid" 2>/dev/null || true
  [[ -n "$weir_pid" ]] && kill "$weir_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))
"$weir" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
  --http-listen 127.0.0.1:0 --controller-listen 127.0.0.1:0 >"$work/ready" 2>"$work/broker.log" &
weir_pid=$!
until grep -q "weir ready" "$work/ready" 2>/dev/null; do sleep 0.2; done
http=$(sed -n 's/.*http=\([^ ]*\).*/\1/p' "$work/ready")
"$weir" topic create gc --partitions 1 --config flush.messages=1 \
  --bootstrap "127.0.0.1:$port" >/dev/null

strace -f -c -e trace=fdatasync,fsync -o "$work/strace" -p "$weir_pid" &
strace_pid=$!
sleep 1
requests_before=$(curl -s "http://$http/metrics" | awk '/^weir_requests_total\{api="Produce"\}/ {print $2}')
"$bench" --bootstrap "127.0.0.1:$port" produce --topic gc --records "$records" \
  --producers "$producers" --acks all --linger-ms 0 \
  -X batch.num.messages=1 -X max.in.flight.requests.per.connection=1
requests_after=$(curl -s "http://$http/metrics" | awk '/^weir_requests_total\{api="Produce"\}/ {print $2}')
kill -INT "$strace_pid"
wait "$strace_pid" 2>/dev/null || true
strace_pid=
syncs=$(awk '$NF ~ /^(fdatasync|fsync)$/ {n += $4} END {print n + 0}' "$work/strace")
batches=$(( ${requests_after%.*} - ${requests_before:-0} ))
echo "produce requests (one batch each): $batches"
echo "fsyncs: $syncs"
awk -v s="$syncs" -v b="$batches" 'BEGIN {printf "fsyncs per batch: %.3f\n", s / b}'
