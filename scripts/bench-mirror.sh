#!/usr/bin/env bash
# Cluster mirroring on this machine (BENCHMARKS.md, "Mirroring"): two
# `weir serve`, a source and a destination, over loopback, and:
#
#   throughput  MIRROR_GB of 1000 B records on the source's topic (4
#               partitions); a plain consumer (weir-bench consume) reads them
#               from the source, then a mirror on the destination copies
#               them from the start: MB/s of each, in one run;
#   lag         weir-bench e2e at MIRROR_RATE records/s for MIRROR_SECONDS,
#               produced on the source and consumed on the destination
#               through the mirror (--consume-bootstrap), next to the same
#               run produced and consumed on the source alone: p50 and p99
#               of each, and their difference, the mirror's latency.
#
#   bash scripts/bench-mirror.sh
#
# With MIRROR_DELAY_MS (as root), the destination runs in a network
# namespace of its own behind a veth pair whose two ends each delay what
# they send by half of it (tc netem; on a kernel without netem, each side
# holds what arrives from the other in an NFQUEUE instead, served by
# tests/interop/packet_delay.py, which needs iptables): a link between
# regions with that round trip. The plain consumer and the e2e runs then
# run there too, so that they cross the same link as the mirror.
#
# Environment (defaults in brackets):
#   MIRROR_DELAY_MS  round trip between source and destination, ms  [0: loopback]
#   MIRROR_GB        GB of the throughput topic                      [1]
#   MIRROR_RATE      records/s of the lag runs                       [20000]
#   MIRROR_SECONDS   seconds of each lag run                         [30]
#   BENCH_OUT        where the JSON of every run and the table go
#                    [target/bench/mirror-<UTC time>]
#   BENCH_DIR        parent of the temporary data dirs [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1  use the release binaries already built
set -euo pipefail
cd "$(dirname "$0")/.."

delay_ms=${MIRROR_DELAY_MS:-0}
gigabytes=${MIRROR_GB:-1}
rate=${MIRROR_RATE:-20000}
seconds=${MIRROR_SECONDS:-30}
out=${BENCH_OUT:-target/bench/mirror-$(date -u +%Y%m%dT%H%M%SZ)}

if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=target/release/weir
bench=target/release/weir-bench
mkdir -p "$out"
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-bench-mirror.XXXXXX")
netns=
cleanup() {
  # The brokers' pids: start() runs in a command substitution's subshell.
  local pid
  for pid in $(cat "$work/pids" 2>/dev/null); do
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  done
  if [[ -n "$netns" ]]; then
    iptables -D INPUT -i "wbm$$" -j NFQUEUE --queue-num 7300 2>/dev/null || true
    ip link delete "wbm$$" 2>/dev/null || true
    ip netns delete "$netns" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The destination's side: its own namespace behind a delayed link, or
# this one.
source_ip=127.0.0.1
destination_ip=127.0.0.1
link_how=
at_destination=()
if ((delay_ms > 0)); then
  [[ "$(id -u)" == 0 ]] || {
    echo "bench-mirror.sh: MIRROR_DELAY_MS needs root (network namespaces)" >&2
    exit 1
  }
  netns="weir-bench-mirror-$$"
  half="$(awk -v d="$delay_ms" 'BEGIN { printf "%.3f", d / 2 }')ms"
  ip netns add "$netns"
  ip link add "wbm$$" type veth peer name "wbm$$d"
  ip link set "wbm$$d" netns "$netns"
  ip addr add 10.203.0.1/30 dev "wbm$$"
  ip link set "wbm$$" up
  ip netns exec "$netns" ip addr add 10.203.0.2/30 dev "wbm$$d"
  ip netns exec "$netns" ip link set "wbm$$d" up
  ip netns exec "$netns" ip link set lo up
  if tc qdisc add dev "wbm$$" root netem delay "$half" limit 100000 2>/dev/null; then
    ip netns exec "$netns" tc qdisc add dev "wbm$$d" root netem delay "$half" limit 100000
    link_how="tc netem"
  else
    # No netem: each side delays what comes in from the other.
    queue=7300
    python3 tests/interop/packet_delay.py "$queue" "${half%ms}" >"$work/delay-here.out" 2>&1 &
    echo $! >>"$work/pids"
    ip netns exec "$netns" python3 tests/interop/packet_delay.py "$queue" "${half%ms}" \
      >"$work/delay-there.out" 2>&1 &
    echo $! >>"$work/pids"
    for _ in $(seq 100); do
      grep -q bound "$work/delay-here.out" && grep -q bound "$work/delay-there.out" && break
      sleep 0.1
    done
    iptables -I INPUT -i "wbm$$" -j NFQUEUE --queue-num "$queue"
    ip netns exec "$netns" iptables -A INPUT -i "wbm$$d" -j NFQUEUE --queue-num "$queue"
    link_how="NFQUEUE (tests/interop/packet_delay.py; this kernel has no netem)"
  fi
  source_ip=10.203.0.1
  destination_ip=10.203.0.2
  at_destination=(ip netns exec "$netns")
fi

# start NAME IP [COMMAND PREFIX...]: a broker in $work/NAME listening on
# IP; prints its Kafka address.
start() {
  local name=$1 ip=$2
  shift 2
  "$@" "$weir" serve --data-dir "$work/$name" --listen "$ip:0" --http-listen "$ip:0" \
    --controller-listen 127.0.0.1:0 >"$work/$name.out" 2>"$work/$name.log" &
  echo $! >>"$work/pids"
  local addr=
  for _ in $(seq 300); do
    addr=$(sed -n 's/^weir ready: kafka=\([^ ]*\).*/\1/p' "$work/$name.out")
    [[ -n "$addr" ]] && break
    sleep 0.1
  done
  [[ -n "$addr" ]] || {
    echo "bench-mirror.sh: $name did not start" >&2
    cat "$work/$name.log" >&2
    exit 1
  }
  echo "$addr"
}
source_addr=$(start source "$source_ip")
destination_addr=$(start destination "$destination_ip" "${at_destination[@]}")
now_ms() { date +%s%3N; }
# caught_up MIRROR TOPIC PARTITIONS: every partition of TOPIC at lag 0.
caught_up() {
  [[ $("${at_destination[@]}" "$weir" mirror describe "$1" --bootstrap "$destination_addr" 2>/dev/null |
    awk -v t="$2" '$1 == t && $5 == "0" && $4 > 0' | wc -l) == "$3" ]]
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates vendor Cargo.lock 2>/dev/null || echo ' (with uncommitted changes to the code)')"
  echo "nproc: $(nproc)"
  echo "throughput: $gigabytes GB of 1000 B records, 4 partitions; lag: $rate records/s for $seconds s"
  echo "link: $( ((delay_ms > 0)) && echo "$delay_ms ms round trip, half each way, by $link_how" || echo loopback)"
} | tee "$out/machine.txt" >&2

# ------------------------------------------------------------ throughput
records=$((gigabytes * 1000000))
"$weir" topic create bulk -p 4 --bootstrap "$source_addr" >/dev/null
"$bench" produce --bootstrap "$source_addr" --json --topic bulk --records "$records" \
  --record-size 1000 --acks 1 >"$out/fill.json"
"${at_destination[@]}" "$bench" consume --bootstrap "$source_addr" --json --topic bulk \
  --records "$records" >"$out/consume.json"
started=$(now_ms)
"${at_destination[@]}" "$weir" mirror create bulk --source-bootstrap "$source_addr" --topics bulk \
  --bootstrap "$destination_addr" >/dev/null
until caught_up bulk bulk 4; do sleep 0.2; done
mirrored_ms=$(($(now_ms) - started))
python3 - "$out/consume.json" "$records" "$mirrored_ms" >"$out/throughput.tsv" <<'EOF'
import json, sys
consume = json.load(open(sys.argv[1]))
records, ms = int(sys.argv[2]), int(sys.argv[3])
mirror_mb = records * 1000 / 1e6 / (ms / 1000)
print("case\tMB_per_s\tratio")
print(f"plain consumer\t{consume['mb_per_sec']:.1f}\t1.00")
print(f"mirror (create to lag 0)\t{mirror_mb:.1f}\t{mirror_mb / consume['mb_per_sec']:.2f}")
EOF
cat "$out/throughput.tsv" >&2

# ------------------------------------------------------------ lag
"$weir" topic create steady -p 1 --bootstrap "$source_addr" >/dev/null
"${at_destination[@]}" "$weir" mirror create steady --source-bootstrap "$source_addr" \
  --topics steady --bootstrap "$destination_addr" >/dev/null
# The mirror topic exists (with nothing to mirror yet) before the consumer
# starts.
until "${at_destination[@]}" "$weir" mirror describe steady --bootstrap "$destination_addr" 2>/dev/null |
  awk '$1 == "steady" && $7 == "mirroring"' | grep -q .; do sleep 0.2; done
"${at_destination[@]}" "$bench" e2e --bootstrap "$source_addr" --json --topic steady \
  --rate "$rate" --duration "${seconds}s" --record-size 1000 >"$out/e2e-source.json"
"${at_destination[@]}" "$bench" e2e --bootstrap "$source_addr" --consume-bootstrap "$destination_addr" --json \
  --topic steady --rate "$rate" --duration "${seconds}s" --record-size 1000 >"$out/e2e-mirror.json"
python3 - "$out/e2e-source.json" "$out/e2e-mirror.json" >"$out/lag.tsv" <<'EOF'
import json, sys
alone, mirrored = (json.load(open(f))["latency_ms"] for f in sys.argv[1:3])
print("case\tp50_ms\tp99_ms")
print(f"source alone\t{alone['p50']:.1f}\t{alone['p99']:.1f}")
print(f"through the mirror\t{mirrored['p50']:.1f}\t{mirrored['p99']:.1f}")
print(f"the mirror's share\t{mirrored['p50'] - alone['p50']:.1f}\t{mirrored['p99'] - alone['p99']:.1f}")
EOF
cat "$out/lag.tsv" >&2
echo "bench-mirror.sh: results in $out" >&2
