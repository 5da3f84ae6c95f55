#!/usr/bin/env bash
# Produce and consume throughput over SASL_SSL next to PLAINTEXT, in one
# run against one broker: a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512,
# TLS with a certificate made here with openssl), weir-bench (librdkafka)
# producing BENCH_RECORDS records of BENCH_RECORD_SIZE bytes to a topic of
# its own per listener, then consuming them. Prints records/s, MB/s and the
# produce latency p50/p99 of each, and SASL_SSL as a ratio of PLAINTEXT.
# TLS responses cannot use sendfile: the consume ratio is the price of
# encrypting what PLAINTEXT sends from the page cache.
#
#   bash scripts/bench-security.sh
#
# Environment (defaults in brackets):
#   BENCH_RECORDS      records per run                 [2000000]
#   BENCH_RECORD_SIZE  value size in bytes             [100]
#   BENCH_RUNS         runs of each listener, in turns [2]
#   BENCH_DIR          parent of the temporary dir     [$TMPDIR or /tmp]
#   BENCH_SKIP_BUILD=1 use the release binaries already built
set -euo pipefail
cd "$(dirname "$0")/.."

records=${BENCH_RECORDS:-2000000}
size=${BENCH_RECORD_SIZE:-100}
runs=${BENCH_RUNS:-2}
if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
  cargo build --release -p weir -p weir-bench
fi
weir=target/release/weir
bench=target/release/weir-bench

work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/weir-bench-security.XXXXXX")
pid=
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# A CA and the broker's certificate for 127.0.0.1.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" \
  -days 2 -subj "/CN=weir bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/broker.key" -out "$work/broker.csr" \
  -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$work/ext"
openssl x509 -req -in "$work/broker.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -out "$work/broker.pem" -days 2 -extfile "$work/ext" 2>/dev/null
cat "$work/broker.key" "$work/broker.pem" >"$work/keystore.pem"

"$weir" serve --data-dir "$work/data" --http-listen 127.0.0.1:0 --controller-listen 127.0.0.1:0 \
  --listeners PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0 \
  --inter-broker-listener-name PLAINTEXT \
  --ssl-keystore-location "$work/keystore.pem" \
  --add-scram 'SCRAM-SHA-512=[name=bench,password=bench-secret]' >"$work/out" 2>&1 &
pid=$!
until grep -q "weir ready" "$work/out" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/out"; exit 1; }
  sleep 0.2
done
listeners=$(sed -n 's/^weir ready: .*listeners=\([^ ]*\).*/\1/p' "$work/out")
plain=$(tr ',' '\n' <<<"$listeners" | sed -n 's|^PLAINTEXT://||p')
secure=$(tr ',' '\n' <<<"$listeners" | sed -n 's|^SASL_SSL://||p')
sasl_ssl=(-X security.protocol=SASL_SSL -X "ssl.ca.location=$work/ca.pem"
  -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=bench -X sasl.password=bench-secret)

run() { # label bootstrap topic [properties...]
  local label=$1 bootstrap=$2 topic=$3
  shift 3
  "$bench" --bootstrap "$bootstrap" --json produce --topic "$topic" --records "$records" \
    --record-size "$size" "$@" >"$work/$label.produce.json"
  "$bench" --bootstrap "$bootstrap" --json consume --topic "$topic" --records "$records" \
    "$@" >"$work/$label.consume.json"
}
for i in $(seq 1 "$runs"); do
  run "plaintext-$i" "$plain" "bench-plain-$i"
  run "sasl_ssl-$i" "$secure" "bench-secure-$i" "${sasl_ssl[@]}"
done

python3 - "$work" "$runs" "$records" "$size" <<'PY'
import json, sys, statistics
work, runs, records, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(label, kind):
    return [json.load(open(f"{work}/{label}-{i}.{kind}.json")) for i in range(1, runs + 1)]
print(f"{records} records of {size} B, median of {runs} runs each")
print(f"{'':24}{'PLAINTEXT':>14}{'SASL_SSL':>14}{'ratio':>8}")
for kind in ("produce", "consume"):
    plain, secure = load("plaintext", kind), load("sasl_ssl", kind)
    rows = [("records/s", "records_per_sec"), ("MB/s", "mb_per_sec")]
    for name, key in rows:
        p = statistics.median(r[key] for r in plain)
        s = statistics.median(r[key] for r in secure)
        print(f"{kind + ' ' + name:24}{p:14.1f}{s:14.1f}{s / p:8.2f}")
    if kind == "produce":
        for q in ("p50", "p99"):
            p = statistics.median(r["latency_ms"][q] for r in plain)
            s = statistics.median(r["latency_ms"][q] for r in secure)
            print(f"{'produce ' + q + ' ms':24}{p:14.2f}{s:14.2f}{s / p:8.2f}")
PY
