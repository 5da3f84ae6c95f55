#!/usr/bin/env bash
# Kafka's own command-line tools (org.apache.kafka:kafka-tools) against a
# running weir broker.
#
# Usage: kafka_tools_check.sh HOST:PORT
#
# Fetches kafka-tools and its dependencies with Maven (the kafka-tools
# profile of tests/interop/java/pom.xml, the same Kafka version as the Java
# client check; kept in tests/interop/java/target/kafka-tools) and runs each
# tool's main class with `java -cp`, as the kafka-*.sh scripts do. Prints one
# `PASS: name` or `FAIL: name: reason` line per check (and `NOTE: ...` lines
# that are not failures); exits 1 if any check failed. Each check reads the
# tool's output, not only its exit status.
#
# Tools checked (the script they stand for in Kafka's bin/):
#   kafka-topics            TopicCommand: --create (with --config, and with the
#                           broker's default counts), --list, --describe,
#                           --alter --partitions, --delete
#   kafka-configs           ConfigCommand: topics, brokers and client quotas,
#                           --describe, --alter --add-config / --delete-config
#   kafka-producer-perf-test ProducerPerformance (plain and transactional)
#   kafka-consumer-perf-test ConsumerPerformance
#   kafka-consumer-groups   ConsumerGroupCommand: --list, --describe (offsets,
#                           --state), --reset-offsets --execute, --delete
#   kafka-groups            GroupsCommand: --list
#   kafka-get-offsets       GetOffsetShell: latest, earliest, max timestamp, by time
#   kafka-delete-records    DeleteRecordsCommand
#   kafka-transactions      TransactionsCommand: list, describe
#   kafka-reassign-partitions ReassignPartitionsCommand: --list, --verify (and
#                           the replication throttles it clears), --generate,
#                           --execute (of a plan that keeps the replicas where
#                           they are; of one that moves a replica to the
#                           broker's other log directory, then --verify until
#                           the move is done)
#   kafka-log-dirs          LogDirsCommand: --describe (all topics, one topic)
#   kafka-leader-election   LeaderElectionCommand: preferred (all partitions,
#                           one partition, an unknown one), unclean
#   kafka-metadata-quorum   MetadataQuorumCommand: describe --status / --replication
#   kafka-broker-api-versions BrokerApiVersionsCommand
#   kafka-features          FeatureCommand: describe, upgrade (the finalized
#                           level, --dry-run; group.version 1, refused)
#   kafka-client-metrics    ClientMetricsCommand: --list, --describe (none)
set -uo pipefail

B=${1:?usage: kafka_tools_check.sh HOST:PORT}
here=$(cd "$(dirname "$0")" && pwd)
project=$here/java
T=60 # seconds allowed for any one tool invocation

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-kafka-tools.XXXXXX")
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
finish() {
  echo "kafka_tools_check: $passed checks passed, $failed failed in ${SECONDS} s"
  ((failed == 0))
  exit
}

# ---------------------------------------------------------------- the tools

# Fetches the tools (once) and defines `tool` and `expect`.
source "$here/kafka_tools_lib.sh"

TOPIC=kt-orders
TXN_TOPIC=kt-txn
GROUP=kt-perf
RECORDS=2000

# ---------------------------------------------------------------- kafka-topics

tool topics-create TopicCommand --bootstrap-server "$B" --create --topic "$TOPIC" \
  --partitions 3 --replication-factor 1 --config retention.ms=3600000
expect "kafka-topics --create --partitions 3 --replication-factor 1 --config" $? "^Created topic $TOPIC\.$"

# Neither count given: the tool sends -1 for both (the broker's num.partitions
# and default.replication.factor).
tool topics-create-defaults TopicCommand --bootstrap-server "$B" --create --topic kt-defaults
expect "kafka-topics --create with the broker's default counts" $? "^Created topic kt-defaults\.$"

tool topics-create-again TopicCommand --bootstrap-server "$B" --create --topic "$TOPIC" --partitions 3
status=$?
if ((status != 0)) && grep -q "Topic '$TOPIC' already exists" "$out"; then
  pass "kafka-topics --create of an existing topic fails: already exists"
else
  fail "kafka-topics --create of an existing topic fails: already exists" "exit status $status"
  show <"$out"
fi

tool topics-list TopicCommand --bootstrap-server "$B" --list
expect "kafka-topics --list" $? "^$TOPIC$" "^kt-defaults$"

tool topics-describe TopicCommand --bootstrap-server "$B" --describe --topic "$TOPIC"
expect "kafka-topics --describe" $? \
  "^Topic: $TOPIC	TopicId: [A-Za-z0-9_-]{22}	PartitionCount: 3	ReplicationFactor: 1	Configs: min.insync.replicas=1,retention.ms=3600000$" \
  "Topic: $TOPIC	Partition: 0	Leader: 1	Replicas: 1	Isr: 1" \
  "Topic: $TOPIC	Partition: 2	Leader: 1	Replicas: 1	Isr: 1"

tool topics-describe-defaults TopicCommand --bootstrap-server "$B" --describe --topic kt-defaults
expect "kafka-topics --describe: the default counts (num.partitions 1, replication factor 1)" $? \
  "PartitionCount: 1	ReplicationFactor: 1"

tool topics-alter TopicCommand --bootstrap-server "$B" --alter --topic "$TOPIC" --partitions 4
status=$?
tool topics-describe-altered TopicCommand --bootstrap-server "$B" --describe --topic "$TOPIC"
if ((status == 0)); then
  expect "kafka-topics --alter --partitions 4" $? "PartitionCount: 4" "Partition: 3	Leader: 1	Replicas: 1	Isr: 1"
else
  fail "kafka-topics --alter --partitions 4" "exited $status"
  show <"$work/topics-alter.out"
fi

tool topics-delete TopicCommand --bootstrap-server "$B" --delete --topic kt-defaults
status=$?
tool topics-list-after-delete TopicCommand --bootstrap-server "$B" --list
if ((status != 0)); then
  fail "kafka-topics --delete" "exited $status"
  show <"$work/topics-delete.out"
elif grep -q '^kt-defaults$' "$out"; then
  fail "kafka-topics --delete" "kt-defaults still listed"
  show <"$out"
else
  pass "kafka-topics --delete"
fi

# ---------------------------------------------------------------- kafka-configs

tool configs-topic-alter ConfigCommand --bootstrap-server "$B" --entity-type topics --entity-name "$TOPIC" \
  --alter --add-config retention.ms=7200000,max.message.bytes=2000000
expect "kafka-configs --alter --add-config (topic)" $? "^Completed updating config for topic $TOPIC\.$"

tool configs-topic-describe ConfigCommand --bootstrap-server "$B" --entity-type topics --entity-name "$TOPIC" --describe
expect "kafka-configs --describe (topic): the values set, with their synonyms" $? \
  "^Dynamic configs for topic $TOPIC are:$" \
  "^  retention.ms=7200000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention.ms=7200000, DEFAULT_CONFIG:log.retention.ms=null, DEFAULT_CONFIG:log.retention.minutes=null, DEFAULT_CONFIG:log.retention.hours=168\}$" \
  "^  max.message.bytes=2000000 "

tool configs-topic-delete ConfigCommand --bootstrap-server "$B" --entity-type topics --entity-name "$TOPIC" \
  --alter --delete-config max.message.bytes
status=$?
tool configs-topic-describe-after ConfigCommand --bootstrap-server "$B" --entity-type topics --entity-name "$TOPIC" --describe
if ((status != 0)); then
  fail "kafka-configs --alter --delete-config (topic)" "exited $status"
  show <"$work/configs-topic-delete.out"
elif grep -q 'max.message.bytes' "$out" || ! grep -q '^  retention.ms=7200000 ' "$out"; then
  fail "kafka-configs --alter --delete-config (topic)" "max.message.bytes still set, or retention.ms lost"
  show <"$out"
else
  pass "kafka-configs --alter --delete-config (topic)"
fi

tool configs-broker-all ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-name 1 --describe --all
expect "kafka-configs --describe --all (broker 1)" $? \
  "^All configs for broker 1 are:$" \
  "^  log.retention.ms=null sensitive=false synonyms=\{DEFAULT_CONFIG:log.retention.ms=null, DEFAULT_CONFIG:log.retention.minutes=null, DEFAULT_CONFIG:log.retention.hours=168\}$" \
  "^  num.partitions=1 sensitive=false "

tool configs-broker-default-alter ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-default \
  --alter --add-config log.retention.ms=500000000
expect "kafka-configs --alter --entity-default (cluster-wide broker config)" $? \
  "^Completed updating default config for brokers in the cluster\.$"

tool configs-broker-default-describe ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-default --describe
expect "kafka-configs --describe --entity-default" $? \
  "^  log.retention.ms=500000000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=500000000\}$"

tool configs-broker-default-delete ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-default \
  --alter --delete-config log.retention.ms
status=$?
tool configs-broker-default-describe-after ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-default --describe
if ((status != 0)); then
  fail "kafka-configs --alter --delete-config --entity-default" "exited $status"
  show <"$work/configs-broker-default-delete.out"
elif grep -q 'log.retention.ms=' "$out"; then
  fail "kafka-configs --alter --delete-config --entity-default" "log.retention.ms still set"
  show <"$out"
else
  pass "kafka-configs --alter --delete-config --entity-default"
fi

# ---------------------------------------------------------------- client quotas
# (kafka-configs on users and clients: DescribeClientQuotas / AlterClientQuotas.
# A user without a client id is not described: the tool then also asks for
# the user's SCRAM credentials, DescribeUserScramCredentials, not served yet.)

tool configs-quota-alter ConfigCommand --bootstrap-server "$B" --entity-type users --entity-name alice \
  --entity-type clients --entity-name app --alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
expect "kafka-configs --alter (quotas of a user's client id)" $? "^Completed updating config for user alice\.$"

tool configs-quota-describe ConfigCommand --bootstrap-server "$B" --entity-type users --entity-name alice \
  --entity-type clients --entity-name app --describe
expect "kafka-configs --describe (quotas of a user's client id)" $? \
  "^Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2097152\.0, producer_byte_rate=1048576\.0$"

tool configs-quota-default ConfigCommand --bootstrap-server "$B" --entity-type clients --entity-default \
  --alter --add-config request_percentage=50
expect "kafka-configs --alter --entity-default (client quota)" $? \
  "^Completed updating default config for clients in the cluster\.$"

tool configs-quota-clients ConfigCommand --bootstrap-server "$B" --entity-type clients --describe
expect "kafka-configs --describe (client quotas)" $? \
  "^Quota configs for the default client-id are request_percentage=50\.0$"

# Removed again, so that the tools below run unthrottled.
tool configs-quota-default-delete ConfigCommand --bootstrap-server "$B" --entity-type clients --entity-default \
  --alter --delete-config request_percentage
status=$?
tool configs-quota-clients-after ConfigCommand --bootstrap-server "$B" --entity-type clients --describe
if ((status != 0)); then
  fail "kafka-configs --alter --delete-config (client quota)" "exited $status"
  show <"$work/configs-quota-default-delete.out"
elif grep -q 'request_percentage' "$out"; then
  fail "kafka-configs --alter --delete-config (client quota)" "request_percentage still set"
  show <"$out"
else
  pass "kafka-configs --alter --delete-config (client quota)"
fi

# ---------------------------------------------------------------- perf tests

tool producer-perf ProducerPerformance --topic "$TOPIC" --num-records "$RECORDS" --record-size 100 \
  --throughput -1 --command-property bootstrap.servers="$B" acks=all
expect "kafka-producer-perf-test: $RECORDS records, acks=all" $? "^$RECORDS records sent, [0-9.]+ records/sec"

# The log end offsets add up to what was sent.
tool offsets-latest GetOffsetShell --bootstrap-server "$B" --topic "$TOPIC"
status=$?
sum=$(awk -F: '/^'"$TOPIC"':[0-9]+:[0-9]+$/ { s += $3 } END { print s + 0 }' "$out")
if ((status == 0)) && ((sum == RECORDS)) && (($(grep -c "^$TOPIC:" "$out") == 4)); then
  pass "kafka-get-offsets (latest): the four partitions' end offsets add up to $RECORDS"
else
  fail "kafka-get-offsets (latest): the four partitions' end offsets add up to $RECORDS" "exit $status, sum $sum"
  show <"$out"
fi
# The partition holding the most records, for the offset checks below.
read -r P P_END < <(awk -F: '/^'"$TOPIC"':/ { if ($3 > m) { m = $3; p = $2 } } END { print p + 0, m + 0 }' "$out")

tool offsets-earliest GetOffsetShell --bootstrap-server "$B" --topic "$TOPIC" --time -2
expect "kafka-get-offsets --time -2 (earliest)" $? "^$TOPIC:0:0$" "^$TOPIC:3:0$"

tool offsets-max-timestamp GetOffsetShell --bootstrap-server "$B" --topic-partitions "$TOPIC:$P" --time -3
expect "kafka-get-offsets --time -3 (max timestamp)" $? "^$TOPIC:$P:[0-9]+$"

before_ms=$(($(date +%s) * 1000 - 3600 * 1000))
tool offsets-by-time GetOffsetShell --bootstrap-server "$B" --topic-partitions "$TOPIC:$P" --time "$before_ms"
expect "kafka-get-offsets --time <an hour ago>: the first offset" $? "^$TOPIC:$P:0$"

tool consumer-perf ConsumerPerformance --bootstrap-server "$B" --topic "$TOPIC" --num-records "$RECORDS" \
  --group "$GROUP" --timeout 30000
status=$?
# start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ...
consumed=$(awk -F', ' '/^[0-9][0-9][0-9][0-9]-/ { print $5 }' "$out")
if ((status == 0)) && [[ "$consumed" == "$RECORDS" ]]; then
  pass "kafka-consumer-perf-test: a consumer group reads the $RECORDS records"
else
  fail "kafka-consumer-perf-test: a consumer group reads the $RECORDS records" "exit $status, consumed '${consumed}'"
  show <"$out"
fi

# ---------------------------------------------------------------- kafka-consumer-groups

G=consumer.group.ConsumerGroupCommand
tool groups-list "$G" --bootstrap-server "$B" --list --state
expect "kafka-consumer-groups --list --state" $? "^$GROUP +Empty *$"

tool groups-describe "$G" --bootstrap-server "$B" --describe --group "$GROUP"
status=$?
# GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
rows=$(awk -v g="$GROUP" -v t="$TOPIC" '$1 == g && $2 == t && $4 == $5 && $6 == 0 { n++ } END { print n + 0 }' "$out")
committed=$(awk -v g="$GROUP" -v t="$TOPIC" '$1 == g && $2 == t { s += $4 } END { print s + 0 }' "$out")
if ((status == 0)) && ((rows == 4)) && ((committed == RECORDS)); then
  pass "kafka-consumer-groups --describe: committed offsets at the log ends, no lag"
else
  fail "kafka-consumer-groups --describe: committed offsets at the log ends, no lag" \
    "exit $status, $rows of 4 partitions without lag, committed offsets add up to $committed"
  show <"$out"
fi

tool groups-describe-state "$G" --bootstrap-server "$B" --describe --group "$GROUP" --state
expect "kafka-consumer-groups --describe --state" $? "^$GROUP +[^ ]+ +\(1\) +- +Empty +0 *$"

tool groups-reset-earliest "$G" --bootstrap-server "$B" --reset-offsets --group "$GROUP" --topic "$TOPIC" \
  --to-earliest --execute
status=$?
zeros=$(awk -v g="$GROUP" -v t="$TOPIC" '$1 == g && $2 == t && $4 == 0 { n++ } END { print n + 0 }' "$out")
if ((status == 0)) && ((zeros == 4)); then
  pass "kafka-consumer-groups --reset-offsets --to-earliest --execute"
else
  fail "kafka-consumer-groups --reset-offsets --to-earliest --execute" "exit $status, $zeros of 4 partitions at 0"
  show <"$out"
fi

tool groups-reset-offset "$G" --bootstrap-server "$B" --reset-offsets --group "$GROUP" --topic "$TOPIC:$P" \
  --to-offset 5 --execute
expect "kafka-consumer-groups --reset-offsets --to-offset 5 --execute (one partition)" $? \
  "^$GROUP +$TOPIC +$P +5 *$"

tool groups-describe-after "$G" --bootstrap-server "$B" --describe --group "$GROUP" --offsets
expect "kafka-consumer-groups --describe after the resets: offset and lag" $? \
  "^$GROUP +$TOPIC +$P +5 +$P_END +$((P_END - 5)) "

tool groups-list-all GroupsCommand --bootstrap-server "$B" --list
expect "kafka-groups --list" $? "^$GROUP +Classic +consumer *$"

tool groups-delete "$G" --bootstrap-server "$B" --delete --group "$GROUP"
status=$?
tool groups-list-after-delete "$G" --bootstrap-server "$B" --list
if ((status != 0)) || ! grep -q "Deletion of requested consumer groups ('$GROUP') was successful" "$work/groups-delete.out"; then
  fail "kafka-consumer-groups --delete" "exit $status"
  show <"$work/groups-delete.out"
elif grep -q "^$GROUP$" "$out"; then
  fail "kafka-consumer-groups --delete" "$GROUP still listed"
  show <"$out"
else
  pass "kafka-consumer-groups --delete"
fi

# ---------------------------------------------------------------- kafka-delete-records

printf '{"partitions":[{"topic":"%s","partition":%d,"offset":3}],"version":1}\n' "$TOPIC" "$P" >"$work/delete.json"
tool delete-records DeleteRecordsCommand --bootstrap-server "$B" --offset-json-file "$work/delete.json"
expect "kafka-delete-records" $? "^partition: $TOPIC-$P	low_watermark: 3$"

tool offsets-earliest-after-delete GetOffsetShell --bootstrap-server "$B" --topic-partitions "$TOPIC:$P" --time -2
expect "kafka-get-offsets --time -2 after kafka-delete-records" $? "^$TOPIC:$P:3$"

# ---------------------------------------------------------------- kafka-transactions

tool topics-create-txn TopicCommand --bootstrap-server "$B" --create --topic "$TXN_TOPIC" --partitions 2 --replication-factor 1
tool producer-perf-txn ProducerPerformance --topic "$TXN_TOPIC" --num-records 500 --record-size 50 \
  --throughput -1 --transactional-id kt-writer --transaction-duration-ms 100 \
  --command-property bootstrap.servers="$B" transaction.timeout.ms=30000
expect "kafka-producer-perf-test --transactional-id: 500 records in transactions" $? "^500 records sent, "

tool txn-list TransactionsCommand --bootstrap-server "$B" list
expect "kafka-transactions list" $? "^kt-writer[[:space:]]+1[[:space:]]+[0-9]+[[:space:]]+CompleteCommit[[:space:]]*$"

tool txn-describe TransactionsCommand --bootstrap-server "$B" describe --transactional-id kt-writer
# CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState
# TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs TopicPartitions
expect "kafka-transactions describe" $? \
  "^1[[:space:]]+kt-writer[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+CompleteCommit[[:space:]]+30000[[:space:]]+None[[:space:]]+None[[:space:]]*$"

# The transactional producer, as the leaders of the topic's partitions
# remember it (the partition its records went to lists it).
status=0
producers=$work/txn-producers.all
: >"$producers"
for partition in 0 1; do
  tool "txn-producers-$partition" TransactionsCommand --bootstrap-server "$B" describe-producers \
    --topic "$TXN_TOPIC" --partition "$partition" || status=1
  cat "$out" >>"$producers"
done
out=$producers
# ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
# The Java producer runs transactions v2: the last marker bumped the epoch,
# which starts the sequences over, so LastSequence is -1 as on Kafka.
expect "kafka-transactions describe-producers" $status \
  "^[0-9]+[[:space:]]+[1-9][0-9]*[[:space:]]+-?[0-9]+[[:space:]]+-1[[:space:]]+[0-9]+[[:space:]]+None[[:space:]]*$"

# ---------------------------------------------------------------- kafka-reassign-partitions

tool reassign-list reassign.ReassignPartitionsCommand --bootstrap-server "$B" --list
expect "kafka-reassign-partitions --list" $? "^No partition reassignments found\.$"

# --verify of a plan that is already in place (one broker: the replicas stay),
# which also clears any replication throttles (broker and topic configs).
printf '{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[1]},{"topic":"%s","partition":1,"replicas":[1]}]}\n' \
  "$TOPIC" "$TOPIC" >"$work/plan.json"
tool reassign-verify reassign.ReassignPartitionsCommand --bootstrap-server "$B" --reassignment-json-file "$work/plan.json" \
  --verify
expect "kafka-reassign-partitions --verify" $? \
  "^Reassignment of partition $TOPIC-0 is completed\.$" "^Reassignment of partition $TOPIC-1 is completed\.$"

# --generate: the current assignment (with each replica's log directory,
# from DescribeLogDirs) and a proposal over broker 1, which --execute then
# applies: on one broker the replicas stay where they are.
printf '{"version":1,"topics":[{"topic":"%s"}]}\n' "$TOPIC" >"$work/move.json"
tool reassign-generate reassign.ReassignPartitionsCommand --bootstrap-server "$B" \
  --topics-to-move-json-file "$work/move.json" --broker-list 1 --generate
expect "kafka-reassign-partitions --generate" $? \
  "^Current partition replica assignment$" \
  "\{\"topic\":\"$TOPIC\",\"partition\":0,\"replicas\":\[1\],\"log_dirs\":\[\"/[^\"]+\"\]\}" \
  "^Proposed partition reassignment configuration$" \
  "\{\"topic\":\"$TOPIC\",\"partition\":2,\"replicas\":\[1\],\"log_dirs\":\[\"any\"\]\}"
sed -n '/^Proposed partition reassignment configuration$/{n;p;}' "$out" >"$work/proposed.json"
tool reassign-execute reassign.ReassignPartitionsCommand --bootstrap-server "$B" \
  --reassignment-json-file "$work/proposed.json" --execute
expect "kafka-reassign-partitions --execute" $? \
  "^Successfully started partition reassignments? for $TOPIC-0,$TOPIC-1,$TOPIC-2,$TOPIC-3$"

# --execute --throttle: the tool sets throttles only where replicas move, and
# on one broker none do, so the throttles it would set (the rates on broker
# 1, the replicas copied from on the topic) are set with kafka-configs;
# --verify then removes them.
tool reassign-execute-throttle reassign.ReassignPartitionsCommand --bootstrap-server "$B" \
  --reassignment-json-file "$work/plan.json" --execute --throttle 1000000
expect "kafka-reassign-partitions --execute --throttle" $? \
  "^The inter-broker throttle limit was set to 1000000 B/s$" \
  "^Successfully started partition reassignments for $TOPIC-0,$TOPIC-1$"
tool reassign-throttle-broker ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-name 1 \
  --alter --add-config leader.replication.throttled.rate=1000000,follower.replication.throttled.rate=1000000
expect "kafka-configs --alter (replication throttle rates)" $? "^Completed updating config for broker 1\.$"
tool reassign-throttle-topic ConfigCommand --bootstrap-server "$B" --entity-type topics --entity-name "$TOPIC" \
  --alter --add-config 'leader.replication.throttled.replicas=[0:1,1:1]'
expect "kafka-configs --alter (throttled replicas)" $? "^Completed updating config for topic $TOPIC\.$"
tool reassign-throttled ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-name 1 --describe
expect "kafka-configs --describe (replication throttles set)" $? \
  "leader\.replication\.throttled\.rate=1000000" "follower\.replication\.throttled\.rate=1000000"
tool reassign-verify-clear reassign.ReassignPartitionsCommand --bootstrap-server "$B" \
  --reassignment-json-file "$work/plan.json" --verify
expect "kafka-reassign-partitions --verify (clears the throttles)" $? \
  "^Reassignment of partition $TOPIC-0 is completed\.$" \
  "^Clearing broker-level throttles on broker 1$" "^Clearing topic-level throttles on topic $TOPIC$"
tool reassign-unthrottled ConfigCommand --bootstrap-server "$B" --entity-type brokers --entity-name 1 --describe
status=$?
tool reassign-unthrottled-topic ConfigCommand --bootstrap-server "$B" --entity-type topics --entity-name "$TOPIC" --describe
status=$((status | $?))
if ((status != 0)); then
  fail "kafka-configs --describe (replication throttles removed)" "exited $status"
  show <"$work/reassign-unthrottled.out"
  show <"$out"
elif grep -q 'replication\.throttled' "$work/reassign-unthrottled.out" "$out"; then
  fail "kafka-configs --describe (replication throttles removed)" "a throttle is still set"
  show <"$work/reassign-unthrottled.out"
  show <"$out"
else
  pass "kafka-configs --describe (replication throttles removed)"
fi

# ---------------------------------------------------------------- kafka-log-dirs

# One line of JSON: per broker, each log directory (absolute) with its
# partitions' sizes (the producer's sticky partitioner may leave a
# partition empty: the one that got the most records, $P, is checked); the
# topic list filters on the tool's side.
tool log-dirs LogDirsCommand --bootstrap-server "$B" --describe
expect "kafka-log-dirs --describe" $? \
  "^Querying brokers for log directories information$" \
  "^Received log directory information from brokers 1$" \
  '"broker":1,"logDirs":\[' '"error":null' '"logDir":"/' \
  "\"partition\":\"$TOPIC-$P\",\"size\":[1-9][0-9]*,\"offsetLag\":0,\"isFuture\":false"
tool log-dirs-topic LogDirsCommand --bootstrap-server "$B" --describe --topic-list "$TXN_TOPIC"
status=$?
if ((status == 0)) && grep -q "\"partition\":\"$TXN_TOPIC-0\"" "$out" && ! grep -q "\"partition\":\"$TOPIC-" "$out"; then
  pass "kafka-log-dirs --describe --topic-list"
else
  fail "kafka-log-dirs --describe --topic-list" "exit $status, or other topics listed"
  show <"$out"
fi

# ---------------------------------------------------------------- moving a replica between log directories

# The broker has two log directories (run.sh): a plan naming the other one
# for $TOPIC-0 starts the move (AlterReplicaLogDirs) and --verify reports it
# done once DescribeLogDirs shows the replica there and no future copy.
tool log-dirs-before-move LogDirsCommand --bootstrap-server "$B" --describe
# One line per directory: its partitions, then its path.
per_dir='"partitions":\[[^]]*\],"error":null,"logDir":"[^"]*"'
dirs=$(grep -o "$per_dir" "$out")
from=$(grep "\"partition\":\"$TOPIC-0\"" <<<"$dirs" | sed 's/.*"logDir":"\([^"]*\)"$/\1/')
to=$(grep -v "\"partition\":\"$TOPIC-0\"" <<<"$dirs" | head -n 1 | sed 's/.*"logDir":"\([^"]*\)"$/\1/')
if [[ -z "$from" || -z "$to" ]]; then
  fail "kafka-reassign-partitions to another log directory" "the broker does not have two log directories"
  show <"$out"
else
  printf '{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[1],"log_dirs":["%s"]}]}\n' \
    "$TOPIC" "$to" >"$work/dir-plan.json"
  tool reassign-dir-execute reassign.ReassignPartitionsCommand --bootstrap-server "$B" \
    --reassignment-json-file "$work/dir-plan.json" --execute
  expect "kafka-reassign-partitions --execute (to another log directory)" $? \
    "^Successfully started moving log directory to $to for replica $TOPIC-0 with broker 1 ?$"
  for _ in $(seq 1 30); do
    tool reassign-dir-verify reassign.ReassignPartitionsCommand --bootstrap-server "$B" \
      --reassignment-json-file "$work/dir-plan.json" --verify --preserve-throttles
    status=$?
    grep -q "completed successfully" "$out" && break
    sleep 1
  done
  expect "kafka-reassign-partitions --verify (to another log directory)" $status \
    "^Reassignment of partition $TOPIC-0 is completed\.$" \
    "^Reassignment of replica $TOPIC-0-1 completed successfully\.$"
  tool log-dirs-after-move LogDirsCommand --bootstrap-server "$B" --describe --topic-list "$TOPIC"
  status=$?
  if ((status == 0)) && grep -o "$per_dir" "$out" |
    grep "\"partition\":\"$TOPIC-0\"" | grep -q "\"logDir\":\"$to\"$"; then
    pass "kafka-log-dirs --describe: the moved replica in its new directory"
  else
    fail "kafka-log-dirs --describe: the moved replica in its new directory" "exit $status, or $TOPIC-0 elsewhere"
    show <"$out"
  fi
fi

# ---------------------------------------------------------------- kafka-leader-election

# One broker: every partition is led by its preferred (only) replica.
# Asked for every partition, Kafka's controller leaves out those that need
# no election, so the tool has nothing to print.
L=LeaderElectionCommand
tool elect-preferred-all "$L" --bootstrap-server "$B" --election-type preferred --all-topic-partitions
status=$?
if ((status == 0)) && ! grep -Eq 'Successfully completed|Valid replica already elected|Error completing' "$out"; then
  pass "kafka-leader-election --election-type preferred --all-topic-partitions: nothing to elect"
else
  fail "kafka-leader-election --election-type preferred --all-topic-partitions: nothing to elect" "exit $status"
  show <"$out"
fi

tool elect-preferred-one "$L" --bootstrap-server "$B" --election-type preferred --topic "$TOPIC" --partition 0
expect "kafka-leader-election --election-type preferred --topic --partition" $? \
  "^Valid replica already elected for partitions $TOPIC-0$"

tool elect-unclean-one "$L" --bootstrap-server "$B" --election-type unclean --topic "$TOPIC" --partition 1
expect "kafka-leader-election --election-type unclean: the partition has a leader" $? \
  "^Valid replica already elected for partitions $TOPIC-1$"

tool elect-unknown "$L" --bootstrap-server "$B" --election-type preferred --topic "$TOPIC" --partition 9
status=$?
if ((status != 0)) && grep -Eq "^Error completing leader election \(PREFERRED\) for partition: $TOPIC-9: org\.apache\.kafka\.common\.errors\.UnknownTopicOrPartitionException: No such partition as $TOPIC-9$" "$out"; then
  pass "kafka-leader-election of an unknown partition fails: no such partition"
else
  fail "kafka-leader-election of an unknown partition fails: no such partition" "exit $status"
  show <"$out"
fi

# ---------------------------------------------------------------- cluster

tool quorum-status MetadataQuorumCommand --bootstrap-server "$B" describe --status
expect "kafka-metadata-quorum describe --status" $? \
  "^ClusterId: +[A-Za-z0-9_-]{22}$" "^LeaderId: +1$" '^CurrentVoters: +\[\{"id": 1, '

tool quorum-replication MetadataQuorumCommand --bootstrap-server "$B" describe --replication
# NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status:
# the leader's own timestamps are the time of the answer, as in Kafka.
expect "kafka-metadata-quorum describe --replication" $? \
  "^1[[:space:]]+[A-Za-z0-9_-]{22}[[:space:]]+[0-9]+[[:space:]]+0[[:space:]]+[0-9]{13}[[:space:]]+[0-9]{13}[[:space:]]+Leader[[:space:]]*$"

tool api-versions BrokerApiVersionsCommand --bootstrap-server "$B"
expect "kafka-broker-api-versions" $? \
  "^$B \(id: 1 rack: null isFenced: false\) -> \($" \
  "^	Produce\(0\): [0-9]+ to [0-9]+ \[usable: [0-9]+\]," \
  "^	Fetch\(1\): [0-9]+ to [0-9]+ \[usable: [0-9]+\],"

# ---------------------------------------------------------------- kafka-features

# Weir supports and finalizes metadata.version 4.0-IV3 and, as Kafka 4.1+
# on a new cluster, eligible.leader.replicas.version 1 and
# transaction.version 2; the features at level 0 are left out of
# ApiVersions, so describe lists only those three.
tool features-describe FeatureCommand --bootstrap-server "$B" describe
status=$?
if expect "kafka-features describe" $status \
  "^Feature: eligible.leader.replicas.version[[:space:]]+SupportedMinVersion: 0[[:space:]]+SupportedMaxVersion: 1[[:space:]]+FinalizedVersionLevel: 1[[:space:]]+Epoch: [0-9]+[[:space:]]*$" \
  "^Feature: metadata.version[[:space:]]+SupportedMinVersion: 4.0-IV3[[:space:]]+SupportedMaxVersion: 4.0-IV3[[:space:]]+FinalizedVersionLevel: 4.0-IV3[[:space:]]+Epoch: [0-9]+[[:space:]]*$" \
  "^Feature: transaction.version[[:space:]]+SupportedMinVersion: 0[[:space:]]+SupportedMaxVersion: 2[[:space:]]+FinalizedVersionLevel: 2[[:space:]]+Epoch: [0-9]+[[:space:]]*$" &&
  (($(grep -c '^Feature:' "$out") != 3)); then
  fail "kafka-features describe: metadata.version, eligible.leader.replicas.version and transaction.version alone" "$(grep -c '^Feature:' "$out") features listed"
  show <"$out"
fi

tool features-upgrade-dry-run FeatureCommand --bootstrap-server "$B" upgrade --feature metadata.version=25 --dry-run
expect "kafka-features upgrade --dry-run to the finalized metadata.version" $? "^metadata.version can be upgraded to 25\.$"

tool features-upgrade-refused FeatureCommand --bootstrap-server "$B" upgrade --feature group.version=1
status=$?
if ((status != 0)) &&
  grep -Eq "^Could not upgrade group.version to 1\. .*Invalid update version 1 for feature group.version\. Local controller 1 does not support this feature\.$" "$out" &&
  grep -q "^1 out of 1 operation(s) failed\.$" "$out"; then
  pass "kafka-features upgrade --feature group.version=1 is refused"
else
  fail "kafka-features upgrade --feature group.version=1 is refused" "exit status $status"
  show <"$out"
fi

# ---------------------------------------------------------------- kafka-client-metrics

# Weir has no client-metrics subscriptions: both list nothing.
for action in list describe; do
  tool "client-metrics-$action" ClientMetricsCommand --bootstrap-server "$B" "--$action"
  status=$?
  if ((status == 0)) && ! grep -q '[^[:space:]]' "$out"; then
    pass "kafka-client-metrics --$action: no subscriptions"
  else
    fail "kafka-client-metrics --$action: no subscriptions" "exit status $status"
    show <"$out"
  fi
done

# ---------------------------------------------------------------- clean up

tool topics-delete-all TopicCommand --bootstrap-server "$B" --delete --topic "$TOPIC|$TXN_TOPIC"
expect "kafka-topics --delete (a regular expression)" $?

finish
