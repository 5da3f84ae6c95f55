#!/usr/bin/env bash
# Share-group consume throughput with the Java client (kafka-clients 4.x):
# a classic KafkaConsumer of one partition, then share groups of 1, 4 and
# 16 KafkaShareConsumers (tests/interop/java/.../JavaShareBench.java says
# how it measures). BENCHMARKS.md says where the time goes.
#
#   bash scripts/bench-share-java.sh
#
# Environment: BENCH_RECORDS (1000000), BENCH_VALUE_BYTES (100),
# BENCH_CONSUMERS (1,4,16); BENCH_SKIP_BUILD=1 uses the release binary
# already built. Needs Java 17+ and Maven.
set -euo pipefail
source "$(dirname "$0")/single-broker.sh"
start_single_broker
(cd tests/interop/java && mvn -q -B package -DskipTests)
java -cp "tests/interop/java/target/weir-java-interop.jar:tests/interop/java/target/lib/*" \
  weir.interop.JavaShareBench "$kafka" 2>"$work/java.log"
