#!/usr/bin/env bash
# Delayed delivery (the topic config weir.delivery.delay.ms): how late
# records are delivered against when they were due, next to the end-to-end
# latency of the same load on a topic without a delay; and what holding a
# million delayed records costs the broker (scripts/bench-delay.py says how
# it measures).
#
#   bash scripts/bench-delay.sh
#
# Environment: BENCH_RECORDS, BENCH_RATE, BENCH_DELAY_MS, BENCH_HELD (see
# the Python script); BENCH_SKIP_BUILD=1 uses the release binary already
# built. Needs confluent-kafka (pip install confluent-kafka).
set -euo pipefail
source "$(dirname "$0")/single-broker.sh"
start_single_broker
python3 scripts/bench-delay.py "$kafka" "$pid"
