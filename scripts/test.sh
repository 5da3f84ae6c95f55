#!/usr/bin/env bash
# The whole test suite, on a fresh machine too.
#
#   bash scripts/test.sh [extra arguments for the test runner]
#
# The chaos tests' network faults need root, iproute2 and iptables: as
# root on Debian or Ubuntu they are installed here when missing (elsewhere
# those tests fail and say why). The S3 API server the tiered-storage tests
# use, s3s-fs, is installed with cargo when missing. Runs the tests with cargo-nextest when it
# is installed (each test in its own process, several at once), with
# `cargo test` otherwise: the same tests either way.
set -euo pipefail
cd "$(dirname "$0")/.."

if { ! command -v ip >/dev/null || ! command -v iptables >/dev/null; } &&
  [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq iproute2 iptables >/dev/null; } ||
    echo "scripts/test.sh: could not install iproute2 and iptables; the chaos tests' network faults will fail" >&2
fi

# The tiered-storage tests run against a real S3 API server, s3s-fs.
if ! command -v s3s-fs >/dev/null; then
  cargo install s3s-fs@0.14.1 --features binary --locked ||
    echo "scripts/test.sh: could not install s3s-fs; the tiered-storage tests against S3 will fail" >&2
fi

if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --release --no-fail-fast "$@"
fi
exec cargo test --workspace --release --no-fail-fast "$@"
