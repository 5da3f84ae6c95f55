#!/usr/bin/env bash
# The standard broker benchmark (see BENCHMARKS.md): a fresh `weir serve`
# and a `weir-bench null-broker` side by side, the same librdkafka client
# against each, runs alternating between them.
#
#   bash scripts/bench.sh
#
# Environment (defaults in brackets):
#   BENCH_RECORDS_100B  records per produce run of 100-byte records [5000000]
#   BENCH_RECORDS_1K    records per produce run of 1 KiB records    [1000000]
#   BENCH_REPEAT        runs of each produce case per broker        [3]
#   BENCH_E2E_RATE      records/s of the open-loop e2e run          [50000]
#   BENCH_E2E_DURATION  its duration                                [30s]
#   BENCH_OUT           where the JSON of every run and the table go
#                       [target/bench/<UTC time>]
#   BENCH_DIR           parent of the broker's temporary data dir   [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1  use the release binaries already built
#   BENCH_WEIR          the weir binary to measure, e.g. an earlier build
#                       kept for a before/after comparison [target/release/weir]
#
# Broker CPU is utime+stime of the broker process from /proc/PID/stat
# before and after each run, per million records; RSS is VmRSS after the
# run and VmHWM (the peak since the broker started) from /proc/PID/status.
set -euo pipefail
cd "$(dirname "$0")/.."

records_100b=${BENCH_RECORDS_100B:-5000000}
records_1k=${BENCH_RECORDS_1K:-1000000}
repeat=${BENCH_REPEAT:-3}
e2e_rate=${BENCH_E2E_RATE:-50000}
e2e_duration=${BENCH_E2E_DURATION:-30s}
out=${BENCH_OUT:-target/bench/$(date -u +%Y%m%dT%H%M%SZ)}

if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=${BENCH_WEIR:-target/release/weir}
bench=target/release/weir-bench
mkdir -p "$out"
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-bench.XXXXXX")
weir_pid=
null_pid=

cleanup() {
  for pid in $weir_pid $null_pid; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $weir_pid $null_pid; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# wait_ready FILE PREFIX: the kafka= address of the ready line in FILE.
wait_ready() {
  local file=$1 prefix=$2 line
  for _ in $(seq 300); do
    line=$(grep -m1 "^$prefix" "$file" 2>/dev/null || true)
    if [[ -n "$line" ]]; then
      sed -n 's/.*kafka=\([^ ]*\).*/\1/p' <<<"$line"
      return
    fi
    sleep 0.1
  done
  echo "bench.sh: no ready line in $file" >&2
  cat "$file" "$file.err" >&2 || true
  exit 1
}

"$weir" serve --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --controller-listen 127.0.0.1:0 \
  >"$work/weir.out" 2>"$work/weir.out.err" &
weir_pid=$!
"$bench" null-broker --listen 127.0.0.1:0 >"$work/null.out" 2>"$work/null.out.err" &
null_pid=$!
weir_addr=$(wait_ready "$work/weir.out" "weir ready:")
null_addr=$(wait_ready "$work/null.out" "weir-bench null-broker ready:")

clk_tck=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime, fields 14 and 15 after the ")" of the command name
  sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}
status_kib() { # FIELD PID
  awk -v f="$1:" '$1 == f {print $2}' "/proc/$2/status"
}

# The load average, and the share of the last 10 s in which some runnable
# task waited for a CPU (Linux pressure stall information), if available.
load() {
  local psi
  psi=$(sed -n 's/^some avg10=\([^ ]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || true)
  echo "$(cut -d' ' -f1-3 /proc/loadavg)${psi:+, CPU pressure $psi %}"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates vendor Cargo.lock 2>/dev/null || echo ' (with uncommitted changes to the code)')"
  echo "nproc: $(nproc)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "memory: $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "load at start: $(load)"
} | tee "$out/machine.txt" >&2

printf 'name\tbroker\tcpu_s\trss_kib\thwm_kib\tfile\n' >"$out/runs.tsv"
run_number=0

# run NAME BROKER(weir|null) WEIR-BENCH-ARGS...
run() {
  local name=$1 broker=$2 pid addr
  shift 2
  case $broker in
    weir) pid=$weir_pid addr=$weir_addr ;;
    null) pid=$null_pid addr=$null_addr ;;
  esac
  run_number=$((run_number + 1))
  local file="$out/$(printf '%02d' "$run_number")-$name-$broker.json"
  local before after
  before=$(cpu_ticks "$pid")
  if ! "$bench" "$@" --bootstrap "$addr" --json >"$file"; then
    echo "bench.sh: $name on $broker failed: $(cat "$file")" >&2
    exit 1
  fi
  after=$(cpu_ticks "$pid")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$broker" \
    "$(awk -v t=$((after - before)) -v hz="$clk_tck" 'BEGIN {printf "%.2f", t / hz}')" \
    "$(status_kib VmRSS "$pid")" "$(status_kib VmHWM "$pid")" "$file" >>"$out/runs.tsv"
  python3 -c 'import json, sys
rate = json.load(open(sys.argv[1]))["records_per_sec"]
print(f"bench.sh: {sys.argv[2]:<22} {sys.argv[3]:<4} {rate:>12,.0f} records/s", file=sys.stderr)' \
    "$file" "$name" "$broker"
}

for size in 100 1024; do
  records=$records_100b
  [[ $size == 1024 ]] && records=$records_1k
  label=${size}B
  [[ $size == 1024 ]] && label=1KiB
  for acks in 1 all; do
    for i in $(seq "$repeat"); do
      for broker in weir null; do
        run "produce-$label-acks$acks" "$broker" produce \
          --topic "produce-$label-acks$acks-$broker" --records "$records" \
          --record-size "$size" --acks "$acks"
      done
    done
  done
done
# Each produce topic of Weir holds repeat × records records; read them all.
run "consume-100B" weir consume --topic "produce-100B-acks1-weir" --records $((records_100b * repeat))
# The null broker serves an endless log of 100 B records: the client's ceiling.
run "consume-100B" null consume --topic "endless" --records $((records_100b * repeat))
run "consume-1KiB" weir consume --topic "produce-1KiB-acks1-weir" --records $((records_1k * repeat))
run "e2e-$((e2e_rate / 1000))k-acksall" weir e2e --topic e2e --rate "$e2e_rate" \
  --duration "$e2e_duration" --acks all --record-size 100
# The same without librdkafka's default linger.ms of 5, which sets most of
# the latency above.
run "e2e-$((e2e_rate / 1000))k-acksall-linger0" weir e2e --topic e2e --rate "$e2e_rate" \
  --duration "$e2e_duration" --acks all --record-size 100 --linger-ms 0

echo "load at end: $(load)" | tee -a "$out/machine.txt" >&2

python3 - "$out" <<'EOF' | tee "$out/summary.md"
import csv, json, os, statistics, sys

out = sys.argv[1]
with open(os.path.join(out, "runs.tsv")) as f:
    runs = list(csv.DictReader(f, delimiter="\t"))
for run in runs:
    with open(run["file"]) as f:
        run["report"] = json.load(f)

def ms(latency, key):
    return "–" if not latency else f"{latency[key]:.2f}"

print("| run | broker | records | records/s | MB/s | p50 ms | p99 ms | p99.9 ms | max ms "
      "| broker CPU s / M records | broker RSS / peak MiB | client CPU s |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for run in runs:
    r = run["report"]
    records = r.get("acked", r.get("received", r.get("consumed", 0)))
    latency = r.get("latency_ms")
    cpu = float(run["cpu_s"])
    per_million = cpu / records * 1e6 if records else 0.0
    name = run["name"]
    if r["mode"] == "e2e":
        name += " (end to end)"
    print(f"| {name} | {'Weir' if run['broker'] == 'weir' else 'null'} | {records:,} "
          f"| {r['records_per_sec']:,.0f} | {r['mb_per_sec']:.1f} "
          f"| {ms(latency, 'p50')} | {ms(latency, 'p99')} | {ms(latency, 'p999')} | {ms(latency, 'max')} "
          f"| {per_million:.2f} | {int(run['rss_kib']) / 1024:.0f} / {int(run['hwm_kib']) / 1024:.0f} "
          f"| {r.get('client_cpu_s') or 0:.2f} |")
    if r["mode"] == "e2e":
        p = r.get("produce_latency_ms")
        print(f"| {run['name']} (produce ack) | | | | | {ms(p, 'p50')} | {ms(p, 'p99')} "
              f"| {ms(p, 'p999')} | {ms(p, 'max')} | | | |")

print()
print("| produce | Weir records/s (median) | null records/s (median) | Weir / null "
      "| Weir p99 ms (median) | null p99 ms (median) |")
print("|---|--:|--:|--:|--:|--:|")
names = []
for run in runs:
    if run["report"]["mode"] == "produce" and run["name"] not in names:
        names.append(run["name"])
for name in names:
    def median(broker, field):
        values = [field(r["report"]) for r in runs if r["name"] == name and r["broker"] == broker]
        return statistics.median(values) if values else float("nan")
    weir = median("weir", lambda r: r["records_per_sec"])
    null = median("null", lambda r: r["records_per_sec"])
    weir_p99 = median("weir", lambda r: r["latency_ms"]["p99"])
    null_p99 = median("null", lambda r: r["latency_ms"]["p99"])
    print(f"| {name} | {weir:,.0f} | {null:,.0f} | {weir / null:.2f} | {weir_p99:.2f} | {null_p99:.2f} |")
EOF
echo "bench.sh: JSON of every run, runs.tsv and summary.md in $out" >&2
