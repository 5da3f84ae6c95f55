# Sourced by benchmark scripts that drive one broker: builds weir (unless
# BENCH_SKIP_BUILD=1), starts it with a fresh data directory on free ports
# (extra `weir serve` flags as arguments) and waits until it serves; sets
# $kafka (its Kafka address) and $pid. The broker and its directory go when
# the script exits.
start_single_broker() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  if [[ "${BENCH_SKIP_BUILD:-}" != 1 ]]; then
    cargo build --release -p weir
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench.XXXXXX")
  pid=
  trap 'if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"' EXIT
  target/release/weir serve --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --controller-listen 127.0.0.1:0 "$@" >"$work/out" 2>&1 &
  pid=$!
  until grep -q "weir ready" "$work/out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$work/out"; exit 1; }
    sleep 0.2
  done
  kafka=$(sed -n 's/^weir ready: kafka=\([^ ]*\).*/\1/p' "$work/out")
}
