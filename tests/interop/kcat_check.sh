#!/usr/bin/env bash
# kcat (librdkafka) against a running weir broker.
#
# Usage: kcat_check.sh HOST:PORT [BROKER_LOG [WEIR_CLI]]
#
# Prints one `PASS: name` or `FAIL: name: reason` line per check (and
# `NOTE: ...` lines that are not failures); exits 1 if any check failed.
# BROKER_LOG, if given, is searched for panics to explain a failure.
# WEIR_CLI, the weir binary, creates the multi-partition topic for the group
# checks (default: target/release/weir of this checkout).
#
# Checks: `kcat -L` (text and JSON); `kcat -P` with keys (-K:), headers (-H)
# and every codec kcat has (-z none|gzip|snappy|lz4|zstd), read back with
# `kcat -C -e -p 0` and a -f format string showing key, value, headers and
# offset; the idempotent producer; a bulk write; reading from
# `-o beginning` and `-o -1`, which go through ListOffsets; and the balanced
# consumer `-G` (consumer group): it reads a multi-partition topic, commits
# on exit, and a later run in the same group resumes from the commits.
set -uo pipefail

B=${1:?usage: kcat_check.sh HOST:PORT [BROKER_LOG [WEIR_CLI]]}
BROKER_LOG=${2:-}
WEIR_CLI=${3:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/weir}
KCAT=${KCAT:-kcat}
T=30 # seconds allowed for any one kcat invocation

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-kcat.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
pass() {
  passed=$((passed + 1))
  echo "PASS: $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1: $2"
}
note() { echo "NOTE: $*"; }
# Indented evidence lines (not counted as checks).
show() { sed -e 's/^/    | /' | head -n "${1:-20}"; }

kcat_version=$("$KCAT" -V 2>&1 | grep -o 'librdkafka [0-9.]*' | head -n 1)
note "kcat: $("$KCAT" -V 2>&1 | grep -o '^Version [0-9.]*' | head -n 1) ($kcat_version)"

# Format for reading back: key|value|headers|offset
FMT='%k|%s|%h|%o\n'
HEADERS=(-H trace=abc-123 -H origin=kcat)
N=20

# Writes the producer input (key:value lines) and the expected consumer output.
make_input() {
  local codec=$1 i pad
  pad=$(printf 'x%.0s' $(seq 1 80))
  : >"$work/in-$codec"
  : >"$work/want-$codec"
  for ((i = 0; i < N; i++)); do
    printf 'key-%d:value-%d-%s-%s\n' "$i" "$i" "$codec" "$pad" >>"$work/in-$codec"
    printf 'key-%d|value-%d-%s-%s|trace=abc-123,origin=kcat|%d\n' "$i" "$i" "$codec" "$pad" "$i" >>"$work/want-$codec"
  done
}

# The codecs librdkafka says it put on the wire, one per Produce MessageSet.
wire_codecs() {
  grep -o 'Produce MessageSet with [0-9]* message(s) (.*)' "$1" | sed -e 's/.*, \([a-z0-9]*\))$/\1/' | sort -u | tr '\n' ' '
}

# Evidence for a failed read: the protocol exchange and any broker panic.
# Sets $culprit to the last request sent before the broker hung up, if any.
explain_read_failure() {
  local topic=$1 offset=$2
  timeout "$T" "$KCAT" -b "$B" -C -e -p 0 -o "$offset" -t "$topic" -f "$FMT" -d broker,protocol \
    >/dev/null 2>"$work/debug.log"
  culprit=$(sed -n '/Disconnected/q;s/.*Sent \([A-Za-z]*Request (v[0-9]*, [0-9]* bytes\).*/\1)/p' "$work/debug.log" | tail -n 1)
  echo "    kcat -d broker,protocol (requests and responses up to the failure):"
  grep -E 'Sent [A-Za-z]+Request|Received [A-Za-z]+Response|Disconnected|ERROR|Failed to parse|parse' "$work/debug.log" |
    sed -e 's/^%[0-9]|[0-9.]*|\([A-Z]*\)|[^ ]* \[thrd:[^]]*\]: /\1 /' | show 12
  if [[ -n "$BROKER_LOG" && -f "$BROKER_LOG" ]] && grep -q 'panicked at' "$BROKER_LOG"; then
    echo "    broker log ($(grep -c 'panicked at' "$BROKER_LOG") panics so far), first:"
    grep -A1 -m 1 'panicked at' "$BROKER_LOG" | show 2
  fi
}

# ---------------------------------------------------------------- metadata

name="kcat -L lists the broker"
if out=$(timeout "$T" "$KCAT" -b "$B" -L 2>&1); then
  if grep -q '^ 1 brokers:' <<<"$out" && grep -q "broker 1 at $B" <<<"$out"; then
    pass "$name"
  else
    fail "$name" "unexpected listing"
    show <<<"$out"
  fi
else
  fail "$name" "kcat exited non-zero"
  show <<<"$out"
fi

# ---------------------------------------------------------------- produce / read back per codec

for codec in none gzip snappy lz4 zstd; do
  name="kcat -P -K: -H -z $codec, then -C -e -p 0 -o 0 reads back keys, values, headers, offsets"
  topic="kc-$codec"
  make_input "$codec"
  if ! timeout "$T" "$KCAT" -b "$B" -P -t "$topic" -K: "${HEADERS[@]}" -z "$codec" -d msg \
    <"$work/in-$codec" 2>"$work/produce-$codec.log"; then
    fail "$name" "kcat -P exited non-zero"
    grep -v '|PRODUCE|\|MSGSET' "$work/produce-$codec.log" | show
    continue
  fi
  wire=$(wire_codecs "$work/produce-$codec.log")
  want_wire=$codec
  [[ $codec == none ]] && want_wire=uncompressed
  if [[ $wire != "$want_wire " ]]; then
    reason=$(grep -o 'Broker does not support compression type.*' "$work/produce-$codec.log" | head -n 1)
    case "$codec" in
      gzip | snappy | lz4)
        # librdkafka < 2.11.1 enables gzip/snappy/lz4 only if the broker
        # accepts Produce v0 exactly; weir (like Apache Kafka 4.0) starts at v3.
        note "kcat/$kcat_version sent $codec batches as '${wire% }': \"$reason\" (client bug fixed in librdkafka 2.11.1, #5130: it requires Produce v0, weir advertises Produce 3-11)"
        ;;
      *)
        fail "$name" "batches went on the wire as '${wire% }', expected $want_wire ${reason:+($reason)}"
        continue
        ;;
    esac
  fi
  if ! timeout "$T" "$KCAT" -b "$B" -C -e -p 0 -o 0 -t "$topic" -f "$FMT" \
    >"$work/got-$codec" 2>"$work/consume-$codec.log"; then
    fail "$name" "kcat -C exited non-zero"
    show <"$work/consume-$codec.log"
    explain_read_failure "$topic" 0
    continue
  fi
  if diff -u "$work/want-$codec" "$work/got-$codec" >"$work/diff-$codec"; then
    pass "$name"
  else
    fail "$name" "records read back differ from those written"
    show 15 <"$work/diff-$codec"
  fi
done

# ---------------------------------------------------------------- idempotent producer

name="kcat -P -X enable.idempotence=true (InitProducerId) writes, reads back"
topic=kc-idempotent
make_input idempotent
if ! timeout "$T" "$KCAT" -b "$B" -P -t "$topic" -K: "${HEADERS[@]}" -z zstd -X enable.idempotence=true -d eos,msg \
  <"$work/in-idempotent" 2>"$work/produce-idem.log"; then
  fail "$name" "kcat -P exited non-zero"
  grep -v '|PRODUCE|\|MSGSET' "$work/produce-idem.log" | show
elif ! grep -q 'Acquired PID{Id:[0-9]' "$work/produce-idem.log"; then
  fail "$name" "no 'Acquired PID' in the eos debug log"
  grep -E 'PID|IDEMP|ERROR|Failed' "$work/produce-idem.log" | show
elif grep 'Produce MessageSet' "$work/produce-idem.log" | grep -q 'PID{Invalid}'; then
  fail "$name" "a batch went out without a producer id"
elif ! timeout "$T" "$KCAT" -b "$B" -C -e -p 0 -o 0 -t "$topic" -f "$FMT" >"$work/got-idem" 2>"$work/consume-idem.log"; then
  fail "$name" "kcat -C exited non-zero"
  show <"$work/consume-idem.log"
elif ! diff -u "$work/want-idempotent" "$work/got-idem" >"$work/diff-idem"; then
  fail "$name" "records read back differ from those written"
  show 15 <"$work/diff-idem"
else
  pass "$name"
fi

# ---------------------------------------------------------------- bulk

name="kcat -P 5000 records (several batches), -C -o 0 reads them all back in order"
topic=kc-bulk
seq 1 5000 | sed -e 's/^/bulk-record-/' >"$work/in-bulk"
if ! timeout "$T" "$KCAT" -b "$B" -P -t "$topic" -X batch.num.messages=700 <"$work/in-bulk" 2>"$work/produce-bulk.log"; then
  fail "$name" "kcat -P exited non-zero"
  show <"$work/produce-bulk.log"
elif ! timeout "$T" "$KCAT" -b "$B" -C -e -p 0 -o 0 -t "$topic" -X fetch.message.max.bytes=16384 -f '%s\n' \
  >"$work/got-bulk" 2>"$work/consume-bulk.log"; then
  fail "$name" "kcat -C exited non-zero"
  show <"$work/consume-bulk.log"
elif ! cmp -s "$work/in-bulk" "$work/got-bulk"; then
  fail "$name" "read back $(wc -l <"$work/got-bulk") lines, differing from the 5000 written"
  diff "$work/in-bulk" "$work/got-bulk" | show
else
  pass "$name"
fi

# ---------------------------------------------------------------- offsets via ListOffsets

# -o beginning and -o -N make librdkafka ask for the log start / end offset.
read_with_offset() {
  local offset=$1 want=$2
  local name="kcat -C -e -p 0 -o $offset (ListOffsets) reads back what was written"
  if ! timeout "$T" "$KCAT" -b "$B" -C -e -p 0 -o "$offset" -t kc-none -f "$FMT" \
    >"$work/got-o" 2>"$work/consume-o.log"; then
    explain_read_failure kc-none "$offset" >"$work/evidence"
    if [[ -n "$culprit" ]]; then
      fail "$name" "the broker closed the connection after kcat's $culprit; kcat: $(grep -m 1 'ERROR' "$work/consume-o.log")"
    else
      fail "$name" "kcat -C exited non-zero: $(grep -m 1 'ERROR' "$work/consume-o.log")"
    fi
    cat "$work/evidence"
  elif ! diff -u "$want" "$work/got-o" >"$work/diff-o"; then
    fail "$name" "records read back differ from those written"
    show 15 <"$work/diff-o"
  else
    pass "$name"
  fi
}
read_with_offset beginning "$work/want-none"
tail -n 1 "$work/want-none" >"$work/want-last"
read_with_offset -1 "$work/want-last"

# ---------------------------------------------------------------- balanced consumer (-G)

# kcat -G is librdkafka's KafkaConsumer: FindCoordinator, JoinGroup,
# SyncGroup, Heartbeat, OffsetFetch, OffsetCommit (auto commit, and on close)
# and LeaveGroup. auto.offset.reset=earliest everywhere, so that a run that
# reads nothing shows the committed offsets at work, not a reset to the end.
GROUP_TOPIC=kc-group
GROUP=kc-group-1
GROUP_PARTS=3
GROUP_FMT='%p|%o|%k|%s\n'
kcat_group() {
  timeout "$T" "$KCAT" -b "$B" -G "$GROUP" -X auto.offset.reset=earliest \
    -X session.timeout.ms=6000 -X heartbeat.interval.ms=500 -f "$GROUP_FMT" "$@" "$GROUP_TOPIC"
}

# Writes COUNT records to each partition, starting at FIRST; appends the
# lines kcat -G should print for them to $work/want-group.
produce_group() {
  local first=$1 count=$2 p i
  for ((p = 0; p < GROUP_PARTS; p++)); do
    : >"$work/in-group"
    for ((i = first; i < first + count; i++)); do
      printf 'p%d-key-%d:p%d-value-%d\n' "$p" "$i" "$p" "$i" >>"$work/in-group"
      printf '%d|%d|p%d-key-%d|p%d-value-%d\n' "$p" "$i" "$p" "$i" "$p" "$i" >>"$work/want-group"
    done
    timeout "$T" "$KCAT" -b "$B" -P -t "$GROUP_TOPIC" -p "$p" -K: <"$work/in-group" 2>>"$work/produce-group.log" || return 1
  done
}

# The topic needs several partitions: made with the weir CLI when it is at
# hand (kcat cannot create topics), else auto-created with the broker's
# default partition count.
if [[ ! -x "$WEIR_CLI" ]]; then
  why="no weir CLI at $WEIR_CLI"
elif ! "$WEIR_CLI" topic create "$GROUP_TOPIC" --partitions "$GROUP_PARTS" --bootstrap "$B" >/dev/null 2>"$work/create-group.log"; then
  why="weir topic create: $(head -c 200 "$work/create-group.log")"
else
  why=
fi
if [[ -n "$why" ]]; then
  note "could not create $GROUP_TOPIC with $GROUP_PARTS partitions ($why); using an auto-created topic"
  GROUP_PARTS=$(timeout "$T" "$KCAT" -b "$B" -L -t "$GROUP_TOPIC" 2>/dev/null | grep -c '^ *partition ')
  ((GROUP_PARTS > 0)) || GROUP_PARTS=1
fi

N_GROUP=$((4 * GROUP_PARTS))
name="kcat -G (balanced consumer) -c $N_GROUP reads every record of a $GROUP_PARTS-partition topic once, then exits"
: >"$work/want-group"
if ! produce_group 0 4; then
  fail "$name" "kcat -P exited non-zero"
  show <"$work/produce-group.log"
elif ! kcat_group -c "$N_GROUP" >"$work/got-group" 2>"$work/consume-group.log"; then
  fail "$name" "kcat -G exited non-zero or was still running after $T s"
  show <"$work/consume-group.log"
elif ! diff -u <(sort "$work/want-group") <(sort "$work/got-group") >"$work/diff-group"; then
  fail "$name" "records read differ from those written"
  show 15 <"$work/diff-group"
elif ! grep -q "assigned: .*$GROUP_TOPIC \[$((GROUP_PARTS - 1))\]" "$work/consume-group.log"; then
  fail "$name" "kcat did not report the assignment of every partition"
  show <"$work/consume-group.log"
else
  pass "$name"
fi

name="kcat -G -e again in the same group: nothing already consumed (offsets committed on close)"
if ! kcat_group -e >"$work/got-group2" 2>"$work/consume-group2.log"; then
  fail "$name" "kcat -G -e exited non-zero or was still running after $T s"
  show <"$work/consume-group2.log"
elif [[ -s "$work/got-group2" ]]; then
  fail "$name" "read $(wc -l <"$work/got-group2") records again"
  show 5 <"$work/got-group2"
elif ! grep -q 'Reached end of topic' "$work/consume-group2.log"; then
  fail "$name" "kcat exited without reaching the end of the partitions"
  show <"$work/consume-group2.log"
else
  pass "$name"
fi

name="kcat -G -e after more writes: exactly the new records, from the committed offsets"
: >"$work/want-group"
if ! produce_group 4 2; then
  fail "$name" "kcat -P exited non-zero"
  show <"$work/produce-group.log"
elif ! kcat_group -e >"$work/got-group3" 2>"$work/consume-group3.log"; then
  fail "$name" "kcat -G -e exited non-zero or was still running after $T s"
  show <"$work/consume-group3.log"
elif ! diff -u <(sort "$work/want-group") <(sort "$work/got-group3") >"$work/diff-group3"; then
  fail "$name" "records read differ from the ones written since the last run"
  show 15 <"$work/diff-group3"
else
  pass "$name"
fi

# ---------------------------------------------------------------- metadata, JSON

name="kcat -L -J lists the written topics, one partition led by broker 1"
if ! out=$(timeout "$T" "$KCAT" -b "$B" -L -J 2>"$work/list.log"); then
  fail "$name" "kcat exited non-zero"
  show <"$work/list.log"
elif why=$(python3 - "$B" "$out" <<'EOF'
import json, sys
bootstrap, text = sys.argv[1], sys.argv[2]
md = json.loads(text)
problems = []
if md.get("brokers") != [{"id": 1, "name": bootstrap}]:
    problems.append(f"brokers: {md.get('brokers')}")
topics = {t["topic"]: t for t in md.get("topics", [])}
for name in ["kc-none", "kc-gzip", "kc-snappy", "kc-lz4", "kc-zstd", "kc-idempotent", "kc-bulk"]:
    t = topics.get(name)
    if t is None:
        problems.append(f"{name} missing")
        continue
    parts = [(p["partition"], p["leader"], p.get("replicas"), p.get("isrs")) for p in t["partitions"]]
    if parts != [(0, 1, [{"id": 1}], [{"id": 1}])] or t.get("error"):
        problems.append(f"{name}: {parts} {t.get('error', '')}")
print("; ".join(problems))
sys.exit(1 if problems else 0)
EOF
); then
  pass "$name"
else
  fail "$name" "$why"
fi

echo "kcat_check.sh: $passed checks passed, $failed failed"
[[ $failed -eq 0 ]]
