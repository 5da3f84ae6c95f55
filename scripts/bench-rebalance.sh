#!/usr/bin/env bash
# A rolling restart of a consumer group under a steady produce load, classic
# (range, cooperative-sticky) against the consumer protocol (KIP-848), for
# groups of 3 and 12 consumers, in one run against one broker: the
# consumption pause each partition suffers, and the time to a stable group
# after each restart (scripts/bench-rebalance.py says how it measures).
# Both protocols heartbeat every 500 ms (classic: the consumers'
# heartbeat.interval.ms; consumer protocol: the broker's
# group.consumer.heartbeat.interval.ms), so neither waits longer to learn
# of a change.
#
#   bash scripts/bench-rebalance.sh
#
# Environment: BENCH_SIZES, BENCH_PARTITIONS, BENCH_RATE, BENCH_GAP_MS (see
# the Python script); BENCH_SKIP_BUILD=1 uses the release binary already
# built. Needs confluent-kafka (pip install confluent-kafka).
set -euo pipefail
source "$(dirname "$0")/single-broker.sh"
start_single_broker --group-consumer-heartbeat-interval-ms 500 --group-consumer-min-heartbeat-interval-ms 500
python3 scripts/bench-rebalance.py "$kafka"
