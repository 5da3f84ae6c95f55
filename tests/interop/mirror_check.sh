#!/usr/bin/env bash
# Cluster mirroring from Apache Kafka: a Kafka broker (org.apache.kafka:
# kafka_2.13 from Maven Central, the version of java/pom.xml, in KRaft
# combined mode) as the source of a mirror on a weir broker.
#
# Usage: mirror_check.sh WEIR_BIN
#
# Starts both. On Kafka: a topic of 3 partitions, 3000 records written with
# `weir produce`, a group committing an offset. On weir: `weir mirror
# create` of the topic and the group. Checks: the mirror topic has Kafka's
# topic id; every partition is mirrored to Kafka's end (`weir mirror
# describe`: lag 0) with the same records in the same order; the group's
# offset is copied; `weir mirror failover` makes the topic writable at
# Kafka's end offsets. Prints `PASS: name` / `FAIL: name: reason` per
# check; exits 1 if any failed.
set -uo pipefail

weir=${1:?usage: mirror_check.sh WEIR_BIN}
here=$(cd "$(dirname "$0")" && pwd)
project=$here/java
T=120 # seconds allowed for any one wait

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-mirror.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

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
  echo "mirror_check: $passed checks passed, $failed failed in ${SECONDS} s"
  ((failed == 0))
  exit
}

# until SECONDS COMMAND...: runs COMMAND every 0.5 s until it succeeds.
until_ok() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$project/pom.xml")
lib=$project/target/kafka-broker
if [[ ! -f "$lib/kafka_2.13-$version.jar" ]]; then
  rm -rf "$lib"
  if ! mvn -q -B -f "$project/pom.xml" -P kafka-broker dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$lib" >"$work/mvn.log" 2>&1; then
    fail "fetch org.apache.kafka:kafka_2.13:$version" "mvn dependency:copy-dependencies failed"
    show <"$work/mvn.log"
    finish
  fi
fi
note "Apache Kafka $version ($(ls "$lib" | wc -l) jars)"

kafka_port=$(free_port)
controller_port=$(free_port)
K=127.0.0.1:$kafka_port
cat >"$work/server.properties" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://$K,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://$K
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$work/kafka-logs
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPERTIES
java_opts=(-Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1)
cluster_id=$(java "${java_opts[@]}" -cp "$lib/*" kafka.tools.StorageTool random-uuid 2>/dev/null)
if ! java "${java_opts[@]}" -cp "$lib/*" kafka.tools.StorageTool format -t "$cluster_id" \
  -c "$work/server.properties" >"$work/format.log" 2>&1; then
  fail "format Apache Kafka's storage" "StorageTool format failed"
  show <"$work/format.log"
  finish
fi
java "${java_opts[@]}" -cp "$lib/*" kafka.Kafka "$work/server.properties" >"$work/kafka.log" 2>&1 &
pids+=($!)
if until_ok "$T" "$weir" topic list --bootstrap "$K"; then
  pass "Apache Kafka $version starts"
else
  fail "Apache Kafka $version starts" "not serving within $T s"
  tail -n 20 "$work/kafka.log" | show
  finish
fi

"$weir" serve --data-dir "$work/weir" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --controller-listen 127.0.0.1:0 >"$work/weir.out" 2>"$work/weir.log" &
pids+=($!)
until_ok 30 grep -q '^weir ready: ' "$work/weir.out"
W=$(sed -n 's/^weir ready: .*kafka=\([^ ]*\).*/\1/p' "$work/weir.out")
if [[ -z "$W" ]]; then
  fail "weir starts" "$(tail -n 5 "$work/weir.log")"
  finish
fi

TOPIC=orders
if "$weir" topic create "$TOPIC" -p 3 --bootstrap "$K" >"$work/create.out" 2>&1 &&
  seq -f 'order %g' 1 3000 | "$weir" produce "$TOPIC" --bootstrap "$K" >"$work/produce.out" 2>&1; then
  pass "3000 records on Apache Kafka"
else
  fail "3000 records on Apache Kafka" "$(cat "$work/create.out" "$work/produce.out" | tail -n 3)"
  finish
fi
group_set=0
set_offset() {
  "$weir" group reset-offsets billing --topic "$TOPIC" --to-offset 5 --bootstrap "$K" \
    >"$work/group.out" 2>&1
}
# Kafka answers NOT_COORDINATOR while it creates and loads
# __consumer_offsets on first use.
if until_ok 60 set_offset; then
  group_set=1
else
  fail "a group's offset set on Apache Kafka" "$(tail -n 3 "$work/group.out")"
fi

if "$weir" mirror create from-kafka --source-bootstrap "$K" --topics "$TOPIC" --groups billing \
  --bootstrap "$W" >"$work/mirror.out" 2>&1; then
  pass "weir mirror create of an Apache Kafka source"
else
  fail "weir mirror create of an Apache Kafka source" "$(tail -n 3 "$work/mirror.out")"
  finish
fi

caught_up() {
  "$weir" mirror describe from-kafka --bootstrap "$W" >"$work/describe.out" 2>&1 || return 1
  # Three partitions, each at lag 0 with something mirrored.
  [[ $(awk '$1 == "'"$TOPIC"'" && $5 == "0" && $4 > 0 && $3 == $4' "$work/describe.out" | wc -l) == 3 ]]
}
if until_ok "$T" caught_up; then
  pass "every partition mirrored to Kafka's end offset (lag 0)"
else
  fail "every partition mirrored to Kafka's end offset (lag 0)" "$(cat "$work/describe.out" | tail -n 5)"
  finish
fi

id_of() { "$weir" topic describe "$TOPIC" --bootstrap "$1" | sed -n 's/^Topic ID: *//p'; }
kafka_id=$(id_of "$K")
weir_id=$(id_of "$W")
if [[ -n "$kafka_id" && "$kafka_id" == "$weir_id" ]]; then
  pass "the mirror topic has Kafka's topic id"
else
  fail "the mirror topic has Kafka's topic id" "Kafka $kafka_id, weir $weir_id"
fi

same=1
for p in 0 1 2; do
  "$weir" consume "$TOPIC" -p "$p" --exit-at-end --bootstrap "$K" >"$work/kafka-$p.txt" 2>&1
  "$weir" consume "$TOPIC" -p "$p" --exit-at-end --bootstrap "$W" >"$work/weir-$p.txt" 2>&1
  if ! cmp -s "$work/kafka-$p.txt" "$work/weir-$p.txt"; then
    same=0
    fail "partition $p holds Kafka's records in Kafka's order" \
      "$(wc -l <"$work/kafka-$p.txt") lines on Kafka, $(wc -l <"$work/weir-$p.txt") on weir"
  fi
done
((same)) && pass "every partition holds Kafka's records in Kafka's order"

if ((group_set)); then
  copied() {
    "$weir" group describe billing --bootstrap "$W" 2>/dev/null | awk '$1 == "'"$TOPIC"'" && $3 == "5"' | grep -q .
  }
  if until_ok 30 copied; then
    pass "the group's committed offset is copied"
  else
    fail "the group's committed offset is copied" "$("$weir" group describe billing --bootstrap "$W" 2>&1 | tail -n 4)"
  fi
fi

if "$weir" mirror failover from-kafka --bootstrap "$W" >"$work/failover.out" 2>&1 &&
  echo "after the failover" | "$weir" produce "$TOPIC" -p 0 --bootstrap "$W" >"$work/after.out" 2>&1; then
  pass "weir mirror failover makes the topic writable"
else
  fail "weir mirror failover makes the topic writable" "$(cat "$work/failover.out" "$work/after.out" | tail -n 3)"
fi

if grep -q 'panicked at' "$work/weir.log"; then
  fail "weir's log has no panic" "$(grep -m 1 'panicked at' "$work/weir.log")"
fi
finish
