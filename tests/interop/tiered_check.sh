#!/usr/bin/env bash
# Tiered storage against a running weir broker with a remote tier: Kafka's
# tools, kcat and the Java consumer.
#
# Usage: tiered_check.sh HOST:PORT
#
# The broker must have remote.log.storage.system.enable, a remote tier, and
# short remote.log.manager.task.interval.ms and
# log.retention.check.interval.ms (run.sh starts one so). Checks:
# kafka-topics creates a tiered topic (remote.storage.enable=true, 1 MiB
# segments, the least Kafka 4 takes, local.retention.bytes=1); kcat writes
# 25000 records; once the local log starts past offset 1000,
# kafka-get-offsets reads earliest (-2, still 0), earliest-local (-4) and
# latest-tiered (-5); kcat and the Java consumer (kafka-console-consumer)
# read every record from offset 0, the first ones from the remote tier.
# Prints `PASS: name` / `FAIL: name: reason` per check; exits 1 if any
# failed.
set -uo pipefail

B=${1:?usage: tiered_check.sh HOST:PORT}
here=$(cd "$(dirname "$0")" && pwd)
project=$here/java
KCAT=${KCAT:-kcat}
T=60 # seconds allowed for any one tool invocation

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-tiered.XXXXXX")
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
show() { sed -e 's/^/    | /' | head -n "${1:-20}"; }
finish() {
  echo "tiered_check: $passed checks passed, $failed failed in ${SECONDS} s"
  ((failed == 0))
  exit
}

source "$here/kafka_tools_lib.sh"

TOPIC=tiered-interop
RECORDS=25000

tool create TopicCommand --bootstrap-server "$B" --create --topic "$TOPIC" \
  --partitions 1 --replication-factor 1 --config remote.storage.enable=true \
  --config segment.bytes=1048576 --config local.retention.bytes=1
expect "kafka-topics --create --config remote.storage.enable=true" $? "Created topic $TOPIC"

seq -f "tiered-%06g-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" 0 $((RECORDS - 1)) |
  timeout "$T" "$KCAT" -P -b "$B" -t "$TOPIC" -p 0 -X batch.size=4096 -X linger.ms=5 2>"$work/produce.err"
if (($? == 0)); then
  pass "kcat -P writes $RECORDS records to the tiered topic"
else
  fail "kcat -P writes $RECORDS records to the tiered topic" "$(head -c 300 "$work/produce.err")"
  finish
fi

# offset SPEC: the partition's offset by kafka-get-offsets --time SPEC.
offset() {
  tool "offsets$1" GetOffsetShell --bootstrap-server "$B" --topic-partitions "$TOPIC:0" --time "$1" &&
    sed -n "s/^$TOPIC:0:\([0-9-]*\)$/\1/p" "$out"
}
local_start=0
for _ in $(seq 1 60); do
  local_start=$(offset -4)
  [[ "${local_start:-0}" -gt 1000 ]] && break
  sleep 1
done
if [[ "${local_start:-0}" -gt 1000 ]]; then
  pass "kafka-get-offsets --time -4 (earliest local): the local log starts at $local_start"
else
  fail "kafka-get-offsets --time -4 (earliest local) passes 1000" "it says ${local_start:-nothing}"
  show <"$out"
fi
tiered=$(offset -5)
if [[ -n "$tiered" && "$tiered" -ge $((local_start - 1)) && "$tiered" -lt "$RECORDS" ]]; then
  pass "kafka-get-offsets --time -5 (latest tiered): offset $tiered is in the remote tier"
else
  fail "kafka-get-offsets --time -5 (latest tiered)" "it says ${tiered:-nothing}, the local log starts at $local_start"
  show <"$out"
fi
earliest=$(offset -2)
if [[ "$earliest" == 0 ]]; then
  pass "kafka-get-offsets --time -2 (earliest): still 0"
else
  fail "kafka-get-offsets --time -2 (earliest): still 0" "it says ${earliest:-nothing}"
fi

# every_record FILE LABEL: FILE holds the records in order, one per line.
every_record() {
  local lines first last
  lines=$(wc -l <"$1")
  first=$(head -n 1 "$1")
  last=$(tail -n 1 "$1")
  if [[ "$lines" == "$RECORDS" && "$first" == tiered-000000-* && "$last" == "tiered-$(printf %06d $((RECORDS - 1)))-"* ]] &&
    seq -f "tiered-%06g-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" 0 $((RECORDS - 1)) | cmp -s - "$1"; then
    pass "$2"
  else
    fail "$2" "$lines lines, first ${first:0:20}, last ${last:0:20}"
  fi
}

timeout "$T" "$KCAT" -C -b "$B" -t "$TOPIC" -p 0 -o beginning -e -q >"$work/kcat.out" 2>"$work/kcat.err"
every_record "$work/kcat.out" "kcat -C -o beginning reads all $RECORDS records, the first ones from the remote tier"

tool console-consumer consumer.ConsoleConsumer --bootstrap-server "$B" --topic "$TOPIC" \
  --from-beginning --max-messages "$RECORDS" --timeout-ms 30000
grep '^tiered-' "$out" >"$work/java.out"
every_record "$work/java.out" "the Java consumer (kafka-console-consumer --from-beginning) reads all $RECORDS records"

finish
