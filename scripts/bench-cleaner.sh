#!/usr/bin/env bash
# The log cleaner's effect on produce latency (BENCHMARKS.md, "Compaction:
# the cleaner's effect on produce latency"). A fresh `weir serve`; an
# open-loop `weir-bench e2e` on a compacted topic, keyed, at a fixed rate,
# alternating between:
#
#   idle       the cleaner has nothing to do;
#   busy       the cleaner compacts a large dirty backlog in another topic
#              throughout the run, unthrottled;
#   throttled  the same with log.cleaner.io.max.bytes.per.second set, live,
#              to CLEANER_IO_LIMIT (only if that is set).
#
# For a busy run, a fresh backlog topic is filled with cleanup.policy=delete
# (so the cleaner leaves it alone), then switched to compact the moment the
# e2e run starts: the cleaner takes it up within log.cleaner.backoff.ms. The
# script waits for that pass to end before the next run, and reports how
# long it took and whether it covered the whole run.
#
#   bash scripts/bench-cleaner.sh
#
# Environment (defaults in brackets):
#   CLEANER_BACKLOG_RECORDS  records in each backlog                  [3000000]
#   CLEANER_BACKLOG_SIZE     their value size in bytes                [1000]
#   CLEANER_BACKLOG_KEYS     distinct keys among them                 [100000]
#   CLEANER_RATE             e2e records/s (100 B, acks=all)           [20000]
#   CLEANER_DURATION         e2e duration                             [10s]
#   CLEANER_KEYS             distinct keys of the e2e records         [1000]
#   CLEANER_REPEAT           runs of each case                        [3]
#   CLEANER_IO_LIMIT         bytes/s for the throttled case           [unset: no such case]
#
# A backlog takes its size in disk space (3 GB by default) until its run
# ends. The cleaner reads a backlog twice (once for its key map, once to
# rewrite it), so an unthrottled pass lasts about 2 × size / its read rate:
# size the backlog so that it covers the e2e run (the summary says how much
# of each run a pass covered).
#   BENCH_OUT                where the JSON of every run and the table go
#                            [target/bench/cleaner-<UTC time>]
#   BENCH_DIR                parent of the broker's temporary data dir [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1       use the release binaries already built
set -euo pipefail
cd "$(dirname "$0")/.."

backlog_records=${CLEANER_BACKLOG_RECORDS:-3000000}
backlog_size=${CLEANER_BACKLOG_SIZE:-1000}
backlog_keys=${CLEANER_BACKLOG_KEYS:-100000}
rate=${CLEANER_RATE:-20000}
duration=${CLEANER_DURATION:-10s}
keys=${CLEANER_KEYS:-1000}
repeat=${CLEANER_REPEAT:-3}
io_limit=${CLEANER_IO_LIMIT:-}
out=${BENCH_OUT:-target/bench/cleaner-$(date -u +%Y%m%dT%H%M%SZ)}

if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=target/release/weir
bench=target/release/weir-bench
mkdir -p "$out"
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-bench-cleaner.XXXXXX")
weir_pid=

cleanup() {
  if [[ -n "$weir_pid" ]]; then
    kill "$weir_pid" 2>/dev/null || true
    wait "$weir_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The cleaner looks for work every half second, so a busy run starts
# cleaning at once; its passes are logged at info level.
WEIR_LOG=info "$weir" serve --data-dir "$work/data" --listen 127.0.0.1:0 \
  --http-listen 127.0.0.1:0 --controller-listen 127.0.0.1:0 \
  --log-cleaner-backoff-ms 500 \
  >"$work/weir.out" 2>"$work/weir.log" &
weir_pid=$!
addr=
for _ in $(seq 300); do
  addr=$(sed -n 's/^weir ready: kafka=\([^ ]*\).*/\1/p' "$work/weir.out")
  [[ -n "$addr" ]] && break
  sleep 0.1
done
if [[ -z "$addr" ]]; then
  echo "bench-cleaner.sh: weir did not start" >&2
  cat "$work/weir.log" >&2
  exit 1
fi
cli() { "$weir" "$@" --bootstrap "$addr" >/dev/null; }

clk_tck=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime, fields 14 and 15 after the ")" of the command name
  sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}
load() {
  local psi
  psi=$(sed -n 's/^some avg10=\([^ ]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || true)
  echo "$(cut -d' ' -f1-3 /proc/loadavg)${psi:+, CPU pressure $psi %}"
}
now_ms() { date +%s%3N; }
# The log cleaner passes over TOPIC logged so far, one line each.
passes() { grep 'log cleaner pass' "$work/weir.log" | grep -F "topic=$1 " || true; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates vendor Cargo.lock 2>/dev/null || echo ' (with uncommitted changes to the code)')"
  echo "nproc: $(nproc)"
  echo "backlog: $backlog_records records of $backlog_size B, $backlog_keys keys; e2e: $rate records/s of 100 B, $keys keys, $duration, acks=all"
  echo "load at start: $(load)"
} | tee "$out/machine.txt" >&2

cli topic create live -p 1 -c cleanup.policy=compact
printf 'name\tcase\tcpu_s\tfile\tstart_ms\tend_ms\tpass\n' >"$out/runs.tsv"
run_number=0

# e2e CASE BACKLOG: one e2e run; with a BACKLOG topic, switched to compact
# as it starts.
e2e() {
  local case=$1 backlog=$2
  run_number=$((run_number + 1))
  local file="$out/$(printf '%02d' "$run_number")-$case.json"
  local before after start end pass= flip=
  before=$(cpu_ticks "$weir_pid")
  start=$(now_ms)
  if [[ -n "$backlog" ]]; then
    # e2e starts sending after a second of consumer warm-up; the cleaner
    # looks for work every half second.
    (sleep 0.7 && cli topic alter-config "$backlog" --set cleanup.policy=compact) &
    flip=$!
  fi
  if ! "$bench" e2e --bootstrap "$addr" --json --topic live --rate "$rate" \
    --duration "$duration" --keys "$keys" --acks all --record-size 100 >"$file"; then
    echo "bench-cleaner.sh: $case run failed: $(cat "$file")" >&2
    exit 1
  fi
  end=$(now_ms)
  after=$(cpu_ticks "$weir_pid")
  [[ -n "$flip" ]] && wait "$flip"
  if [[ -n "$backlog" ]]; then
    # The pass may still be running: wait for its log line.
    for _ in $(seq 1200); do
      pass=$(passes "$backlog" | tail -1)
      [[ -n "$pass" ]] && break
      sleep 0.5
    done
    [[ -z "$pass" ]] && { echo "bench-cleaner.sh: no cleaner pass over $backlog" >&2; exit 1; }
    cli topic delete "$backlog"
    sleep 2
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run_number" "$case" \
    "$(awk -v t=$((after - before)) -v hz="$clk_tck" 'BEGIN {printf "%.2f", t / hz}')" \
    "$file" "$start" "$end" "$pass" >>"$out/runs.tsv"
  python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["latency_ms"]
print("bench-cleaner.sh: %-9s e2e p50 %.2f p99 %.2f p99.9 %.2f ms"
      % (sys.argv[2], e["p50"], e["p99"], e["p999"]), file=sys.stderr)' \
    "$file" "$case"
}

# fill NAME: a backlog topic the cleaner leaves alone until it is compacted.
fill() {
  cli topic create "$1" -p 1 -c cleanup.policy=delete -c segment.bytes=67108864
  "$bench" produce --bootstrap "$addr" --json --topic "$1" --records "$backlog_records" \
    --record-size "$backlog_size" --keys "$backlog_keys" --acks 1 >"$out/fill-$1.json"
  # Its writeback would otherwise land in the next run.
  sync
}

# Warm up the topic and the client.
"$bench" e2e --bootstrap "$addr" --json --topic live --rate "$rate" --duration 3s \
  --keys "$keys" --acks all --record-size 100 >"$out/warm-up.json"

for i in $(seq "$repeat"); do
  e2e idle ""
  fill "backlog-$i"
  e2e busy "backlog-$i"
  if [[ -n "$io_limit" ]]; then
    cli cluster alter-config --set "log.cleaner.io.max.bytes.per.second=$io_limit"
    fill "backlog-$i-throttled"
    e2e throttled "backlog-$i-throttled"
    cli cluster alter-config --delete log.cleaner.io.max.bytes.per.second
  fi
done

echo "load at end: $(load)" | tee -a "$out/machine.txt" >&2

python3 - "$out" <<'EOF' | tee "$out/summary.md"
import csv, datetime, json, os, re, statistics, sys

out = sys.argv[1]
with open(os.path.join(out, "runs.tsv")) as f:
    runs = list(csv.DictReader(f, delimiter="\t"))

def field(line, name):
    m = re.search(rf"\b{name}=([^ ]+)", line)
    return m.group(1).strip('"') if m else None

def logged_ms(line):
    """The time of a log line (RFC 3339, UTC), in ms since the epoch."""
    stamp = line.split()[0].replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp).timestamp() * 1000

print("| run | cleaner | e2e p50 ms | p99 ms | p99.9 ms | max ms | produce ack p50 / p99 / p99.9 ms "
      "| broker CPU s | cleaner pass: MB read, s, MB/s | pass covered the run |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
by_case = {}
for run in runs:
    with open(run["file"]) as f:
        r = json.load(f)
    e, p = r["latency_ms"], r["produce_latency_ms"]
    by_case.setdefault(run["case"], []).append(r)
    pass_text, covered = "–", "–"
    if run["pass"]:
        mb = int(field(run["pass"], "bytes_in")) / 1e6
        seconds = int(field(run["pass"], "duration_ms")) / 1e3
        pass_text = f"{mb:,.0f}, {seconds:.1f}, {mb / seconds:.0f}"
        # e2e sends for duration_s after a second of consumer warm-up.
        send_from = int(run["start_ms"]) + 1000
        send_to = send_from + r["duration_s"] * 1000
        pass_to = logged_ms(run["pass"])
        pass_from = pass_to - seconds * 1000
        overlap = max(0.0, min(send_to, pass_to) - max(send_from, pass_from))
        covered = f"{overlap / (send_to - send_from):.0%}"
    print(f"| {run['name']} | {run['case']} | {e['p50']:.2f} | {e['p99']:.2f} | {e['p999']:.2f} "
          f"| {e['max']:.2f} | {p['p50']:.2f} / {p['p99']:.2f} / {p['p999']:.2f} | {run['cpu_s']} "
          f"| {pass_text} | {covered} |")

print()
print("| cleaner | runs | e2e p50 ms | e2e p99 ms | e2e p99.9 ms | produce ack p99 ms (medians) |")
print("|---|--:|--:|--:|--:|--:|")
for case, reports in by_case.items():
    med = lambda f: statistics.median(f(r) for r in reports)
    print(f"| {case} | {len(reports)} | {med(lambda r: r['latency_ms']['p50']):.2f} "
          f"| {med(lambda r: r['latency_ms']['p99']):.2f} | {med(lambda r: r['latency_ms']['p999']):.2f} "
          f"| {med(lambda r: r['produce_latency_ms']['p99']):.2f} |")
EOF
echo "bench-cleaner.sh: JSON of every run, runs.tsv and summary.md in $out" >&2
