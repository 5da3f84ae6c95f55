#!/usr/bin/env bash
# Tiered storage against a real S3 API server on this machine (BENCHMARKS.md,
# "Tiered storage"). One `weir serve` with a remote tier in an s3s-fs
# server over a local directory, and:
#
#   produce   weir-bench produce to a topic without tiered storage and to one
#             with it (16 MiB segments, 64 MiB kept locally), alternating,
#             TIERED_REPEAT times each: the tiered runs copy segments to the
#             store while they produce (copied_segments: during the run), and
#             the next run starts once the copies caught up;
#   upload    TIERED_GB of 1000 B records in a tiered topic with copying off
#             (remote.log.copy.disable), then turned on with one byte kept
#             locally: the time until the last copy, for the broker's copy
#             throughput of a backlog;
#   catch-up  weir-bench consume reads that topic from offset 0, all of it
#             from the remote tier, and the same records in a topic without
#             tiered storage from the local log (the page cache dropped
#             first where the kernel lets it);
#   the store curl PUTs and GETs of 64 MiB objects, one at a time, signed as
#             any S3 client signs them: the store's own throughput.
#
#   bash scripts/bench-tiered.sh
#
# Environment (defaults in brackets):
#   TIERED_RECORDS   records of each produce run (1000 B)            [2000000]
#   TIERED_REPEAT    produce runs of each kind                       [3]
#   TIERED_GB        GB of the catch-up topics                       [1]
#   BENCH_OUT        where the JSON of every run and the table go
#                    [target/bench/tiered-<UTC time>]
#   BENCH_DIR        parent of the temporary data and store dirs [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1  use the release binaries already built
#
# Needs s3s-fs (`cargo install s3s-fs@0.14.1 --features binary --locked`) and
# curl; takes about 3 × TIERED_GB + 2 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."

records=${TIERED_RECORDS:-2000000}
repeat=${TIERED_REPEAT:-3}
gigabytes=${TIERED_GB:-1}
out=${BENCH_OUT:-target/bench/tiered-$(date -u +%Y%m%dT%H%M%SZ)}

if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=target/release/weir
bench=target/release/weir-bench
command -v s3s-fs >/dev/null || {
  echo "bench-tiered.sh: needs s3s-fs: cargo install s3s-fs@0.14.1 --features binary --locked" >&2
  exit 1
}
mkdir -p "$out"
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-bench-tiered.XXXXXX")
weir_pid=
s3_pid=
cleanup() {
  for pid in $weir_pid $s3_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

export AWS_ACCESS_KEY_ID=weir-bench AWS_SECRET_ACCESS_KEY=weir-bench-secret
s3_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$work/s3/tier"
s3s-fs --host 127.0.0.1 --port "$s3_port" --access-key "$AWS_ACCESS_KEY_ID" \
  --secret-key "$AWS_SECRET_ACCESS_KEY" "$work/s3" >"$work/s3.log" 2>&1 &
s3_pid=$!
endpoint=http://127.0.0.1:$s3_port

WEIR_LOG=info "$weir" serve --data-dir "$work/data" --listen 127.0.0.1:0 \
  --http-listen 127.0.0.1:0 --controller-listen 127.0.0.1:0 \
  --remote-log-storage-system-enable true --remote-storage-url s3://tier/bench \
  --remote-storage-s3-endpoint "$endpoint" --remote-storage-s3-region us-east-1 \
  --remote-log-manager-task-interval-ms 200 --log-retention-check-interval-ms 1000 \
  >"$work/weir.out" 2>"$work/weir.log" &
weir_pid=$!
addr=
http=
for _ in $(seq 300); do
  addr=$(sed -n 's/^weir ready: kafka=\([^ ]*\).*/\1/p' "$work/weir.out")
  http=$(sed -n 's/^weir ready: .*http=\([^ ]*\).*/\1/p' "$work/weir.out")
  [[ -n "$addr" ]] && break
  sleep 0.1
done
if [[ -z "$addr" ]]; then
  echo "bench-tiered.sh: weir did not start" >&2
  cat "$work/weir.log" >&2
  exit 1
fi
cli() { "$weir" "$@" --bootstrap "$addr" >/dev/null; }
metric() { curl -s "http://$http/metrics" | awk -v name="$1" '$1 == name {print $2}'; }
now_ms() { date +%s%3N; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates vendor Cargo.lock 2>/dev/null || echo ' (with uncommitted changes to the code)')"
  echo "nproc: $(nproc)"
  echo "store: s3s-fs $(s3s-fs --version 2>/dev/null | awk '{print $2}') at $endpoint over $work/s3"
  echo "produce: $records records of 1000 B, acks=all, $repeat runs each; catch-up: $gigabytes GB"
} | tee "$out/machine.txt" >&2

# ------------------------------------------------------------ produce
cli topic create plain -p 1
cli topic create tiered -p 1 -c remote.storage.enable=true -c segment.bytes=16777216 \
  -c local.retention.bytes=67108864
printf 'case\trun\trecords_per_s\tmb_per_s\tp50_ms\tp99_ms\tcopied_segments\n' >"$out/produce.tsv"
for run in $(seq "$repeat"); do
  for case in plain tiered; do
    before=$(metric weir_remote_copy_segments_total)
    file="$out/produce-$case-$run.json"
    "$bench" produce --bootstrap "$addr" --json --topic "$case" --records "$records" \
      --record-size 1000 --acks all >"$file"
    after=$(metric weir_remote_copy_segments_total)
    # The next run starts once the copies are done: nothing left to copy,
    # and no copy for two seconds.
    quiet=0
    last=$after
    for _ in $(seq 1200); do
      sleep 0.5
      now=$(metric weir_remote_copy_segments_total)
      lag=$(metric "weir_remote_copy_lag_segments{topic=\"tiered\",partition=\"0\"}")
      if [[ "$now" == "$last" && "${lag:-0}" == 0 ]]; then
        quiet=$((quiet + 1))
        ((quiet >= 4)) && break
      else
        quiet=0
      fi
      last=$now
    done
    python3 - "$file" "$case" "$run" "$((${after%.*} - ${before%.*}))" >>"$out/produce.tsv" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r.get("latency_ms", {})
print("\t".join([sys.argv[2], sys.argv[3], f'{r["records_per_sec"]:.0f}', f'{r["mb_per_sec"]:.1f}',
                 f'{lat.get("p50", float("nan")):.2f}', f'{lat.get("p99", float("nan")):.2f}', sys.argv[4]]))
EOF
  done
done

# ------------------------------------------------------------ catch-up
catchup_records=$((gigabytes * 1000000))
# Filled with copying off (which Kafka allows only with local retention as
# long as the total), then copied at once: the copy throughput of a backlog.
cli topic create remote1g -p 1 -c remote.storage.enable=true -c segment.bytes=67108864 \
  -c remote.log.copy.disable=true
cli topic create local1g -p 1 -c segment.bytes=67108864
"$bench" produce --bootstrap "$addr" --json --topic local1g --records "$catchup_records" \
  --record-size 1000 --acks 1 >"$out/fill-local.json"
"$bench" produce --bootstrap "$addr" --json --topic remote1g --records "$catchup_records" \
  --record-size 1000 --acks 1 >"$out/fill-remote.json"
copied_before=$(metric weir_remote_copy_bytes_total)
copy_start=$(now_ms)
cli topic alter-config remote1g --set remote.log.copy.disable=false --set local.retention.bytes=1
# Until every sealed segment is copied: the time of the last copy.
last_change=$copy_start
copied=$copied_before
quiet=0
for _ in $(seq 3000); do
  sleep 0.2
  now=$(metric weir_remote_copy_bytes_total)
  left=$(metric 'weir_remote_copy_lag_segments{topic="remote1g",partition="0"}')
  if [[ "$now" != "$copied" ]]; then
    copied=$now
    last_change=$(now_ms)
    quiet=0
  elif [[ "${left:-1}" == 0 ]]; then
    quiet=$((quiet + 1))
    ((quiet >= 10)) && break
  fi
done
copy_bytes=$(python3 -c "print(int(float('$copied') - float('$copied_before')))")
copy_ms=$((last_change - copy_start))
sleep 3 # local retention removes the copied segments
local_left=$(curl -s "http://$http/v1/topics/remote1g/remote-log" |
  python3 -c 'import json,sys; p=json.load(sys.stdin)["partitions"][0]; print(p["local"]["log_start_offset"], p["local"]["size_bytes"], p["remote"]["size_bytes"])')
echo "catch-up topic: local log start, local bytes, remote bytes: $local_left" | tee -a "$out/machine.txt" >&2
printf 'case\trecords_per_s\tmb_per_s\n' >"$out/catchup.tsv"
for case in remote1g local1g; do
  # Cold page cache for both: the local log would otherwise be read from memory.
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  "$bench" consume --bootstrap "$addr" --json --topic "$case" --records "$catchup_records" \
    >"$out/consume-$case.json"
  python3 - "$out/consume-$case.json" "$case" >>"$out/catchup.tsv" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("\t".join([sys.argv[2], f'{r["records_per_sec"]:.0f}', f'{r["mb_per_sec"]:.1f}']))
EOF
done

# ------------------------------------------------------------ the store alone
# curl PUTs and GETs of 64 MiB objects, one at a time as the broker's copies
# go, signed as any S3 client signs them.
head -c $((64 << 20)) /dev/urandom >"$work/object"
s3() {
  curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}
count=8
put_start=$(now_ms)
for i in $(seq "$count"); do s3 -T "$work/object" "$endpoint/tier/raw/object-$i" >/dev/null; done
put_ms=$(($(now_ms) - put_start))
get_start=$(now_ms)
for i in $(seq "$count"); do s3 -o /dev/null "$endpoint/tier/raw/object-$i"; done
get_ms=$(($(now_ms) - get_start))
rate() { python3 -c "print(f'{$1 / 1e6 / max($2, 1) * 1000:.1f}')"; }
{
  printf 'what\tbytes\tms\tmb_per_s\n'
  printf 'weir copies a 1 GB backlog\t%s\t%s\t%s\n' "$copy_bytes" "$copy_ms" "$(rate "$copy_bytes" "$copy_ms")"
  printf 'curl PUT of 64 MiB objects\t%s\t%s\t%s\n' "$((count << 26))" "$put_ms" "$(rate $((count << 26)) "$put_ms")"
  printf 'curl GET of 64 MiB objects\t%s\t%s\t%s\n' "$((count << 26))" "$get_ms" "$(rate $((count << 26)) "$get_ms")"
} >"$out/upload.tsv"

for table in produce catchup upload; do
  echo
  echo "== $table"
  column -t -s $'\t' "$out/$table.tsv"
done | tee "$out/summary.txt"
