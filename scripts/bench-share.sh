#!/usr/bin/env bash
# Share-group consume throughput: 1, 4 and 16 ShareConsumers of one
# partition next to a classic consumer of it (scripts/bench-share.py says
# how it measures).
#
#   bash scripts/bench-share.sh
#
# Environment: BENCH_RECORDS, BENCH_VALUE_BYTES, BENCH_CONSUMERS (see the
# Python script); BENCH_SKIP_BUILD=1 uses the release binary already built.
# Needs confluent-kafka 2.15 or later (pip install confluent-kafka).
set -euo pipefail
source "$(dirname "$0")/single-broker.sh"
start_single_broker
python3 scripts/bench-share.py "$kafka"
