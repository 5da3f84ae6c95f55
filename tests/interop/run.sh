#!/usr/bin/env bash
# Interop checks: third-party Kafka clients against a real weir broker.
#
# Usage: bash tests/interop/run.sh
#
# Expects an already built target/release/weir (or WEIR_BIN) and the clients
# installed (kcat; python3 with kafka-python, confluent-kafka, lz4,
# python-snappy, zstandard; Java 17 and Maven, which fetches the Java client
# and Kafka's own tools; see .ci/run). Builds the Java client check
# (java/, with `mvn package`); makes a CA and certificates with openssl.
# Starts one broker on ephemeral ports in a temporary directory, with a
# PLAINTEXT, a SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and an SSL
# listener (client certificates requested), runs each client script against
# it (the *_security_check scripts against the secured listeners, which they
# find with the CA, the client certificate and the credentials in the
# INTEROP_* environment variables described in interop_util.py), stops
# the broker with SIGTERM and checks that it exits 0 and logged no panic.
# The console check (console_check.py) opens the web console in headless
# Chromium against a broker of its own, and keeps screenshots of its pages
# in target/console-screenshots.
# The README's tour (readme_tour.py) starts `weir serve` with no arguments,
# on the default ports, as the README does.
# The Java fetch-from-follower check (KIP-392) gets three more nodes of its
# own, in racks a, b and c, the tiered-storage check a broker with a
# remote tier, the mirroring check (mirror_check.sh) an Apache Kafka
# broker and a weir broker of its own, and the disaster-recovery drill
# (dr_drill.py --short) two three-node clusters in network namespaces of
# its own (it needs root, and fails saying so without it).
# Each script prints `PASS: name` / `FAIL: name: reason` per check; the
# totals end in `interop: N passed, M failed`, and the exit status is 1 if
# any check failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
weir=${WEIR_BIN:-$root/target/release/weir}
python=${PYTHON:-python3}
script_timeout=${INTEROP_SCRIPT_TIMEOUT:-120} # per client script, a backstop to their own limits
export PYTHONDONTWRITEBYTECODE=1 # leave no __pycache__ in the source tree

passed=0
failed=0
failures=()
pass() {
  passed=$((passed + 1))
  echo "PASS: $1"
}
fail() {
  failed=$((failed + 1))
  failures+=("$1")
  echo "FAIL: $1${2:+: $2}"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-interop.XXXXXX")
broker_pid=
client_pid=
rack_pids=() # the extra nodes: the fetch-from-follower cluster, the tiered broker
cleanup() {
  if [[ -n "$client_pid" ]]; then
    kill -TERM "$client_pid" 2>/dev/null # timeout(1) passes it on to the client
    wait "$client_pid" 2>/dev/null
  fi
  if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
    kill -KILL "$broker_pid" 2>/dev/null
    wait "$broker_pid" 2>/dev/null
  fi
  for pid in "${rack_pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 143" INT TERM

summary() {
  echo
  if ((failed > 0)); then
    echo "failed checks:"
    printf '  - %s\n' "${failures[@]}"
  fi
  echo "interop: $passed passed, $failed failed"
}

broker_log_tail() {
  echo "    broker log (last lines):"
  tail -n "${1:-20}" "$work/broker.log" | sed -e 's/^/    | /'
}

# ---------------------------------------------------------------- broker

if [[ ! -x "$weir" ]]; then
  fail "weir binary present" "$weir not found; build it with: cargo build --release -p weir --bin weir"
  summary
  exit 1
fi

# The broker's own settings come from flags only: drop WEIR_* from the environment.
while read -r var; do unset "$var"; done < <(env | grep -o '^WEIR_[A-Z_]*' || true)

# Certificates for the TLS listeners, made with openssl: a CA; the broker's
# (CN=localhost, subjectAltName DNS:localhost and IP:127.0.0.1, serverAuth),
# given to the broker as one PEM of its key and certificate; a client's
# (clientAuth, for mutual TLS on the SSL listener). X.509 v3 all: the
# extensions come from -addext / -extfile.
certs=$work/certs
mkdir -p "$certs"
make_certs() {
  local d=$certs
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=weir-interop-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$d/ca.key" -out "$d/ca.pem" &&
    printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature,keyEncipherment \
      extendedKeyUsage=serverAuth subjectAltName=DNS:localhost,IP:127.0.0.1 >"$d/server.ext" &&
    openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$d/server.key" -out "$d/server.csr" &&
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$d/server.ext" -out "$d/server.pem" &&
    cat "$d/server.key" "$d/server.pem" >"$d/server-keystore.pem" &&
    printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature,keyEncipherment \
      extendedKeyUsage=clientAuth >"$d/client.ext" &&
    openssl req -newkey rsa:2048 -nodes -subj /CN=weir-interop-client -keyout "$d/client.key" -out "$d/client.csr" &&
    openssl x509 -req -in "$d/client.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$d/client.ext" -out "$d/client.pem"
}
if ! make_certs >"$work/openssl.out" 2>&1; then
  fail "TLS certificates made with openssl"
  tail -n 20 "$work/openssl.out" | sed -e 's/^/    | /'
  summary
  exit 1
fi

# SCRAM users the broker starts with (PLAIN checks passwords against them).
scram_sha512_user=admin:admin-secret
scram_sha256_user=alice:alice-secret

# Listeners: PLAINTEXT first (the address of the ready line's kafka=, which
# the plaintext checks use), then SASL_SSL (PLAIN, SCRAM-SHA-256,
# SCRAM-SHA-512) and SSL (client certificates requested, verified against
# the CA).
# No wait before a new group's first rebalance (Kafka's
# group.initial.rebalance.delay.ms, 3 s by default): the consumer group checks
# start many short-lived groups. Consumer-protocol groups may have sessions as
# short as 6 s, so that a killed member's partitions move within a check. Two log directories, so that Kafka's tools
# can move a replica from one to the other.
"$weir" serve --data-dir "$work/data" --http-listen 127.0.0.1:0 \
  --listeners PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0 \
  --ssl-keystore-location "$certs/server-keystore.pem" \
  --ssl-truststore-location "$certs/ca.pem" --ssl-client-auth requested \
  --add-scram "SCRAM-SHA-512=[name=${scram_sha512_user%%:*},password=${scram_sha512_user#*:}]" \
  --add-scram "SCRAM-SHA-256=[name=${scram_sha256_user%%:*},password=${scram_sha256_user#*:}]" \
  --controller-listen 127.0.0.1:0 --log-dirs "$work/logs-a,$work/logs-b" \
  --group-initial-rebalance-delay-ms 0 \
  --group-consumer-min-session-timeout-ms 6000 --group-consumer-min-heartbeat-interval-ms 500 \
  >"$work/broker.out" 2>"$work/broker.log" &
broker_pid=$!

ready=
for _ in $(seq 1 300); do # up to 30 s
  ready=$(grep -m 1 '^weir ready: ' "$work/broker.out" 2>/dev/null || true)
  [[ -n "$ready" ]] && break
  kill -0 "$broker_pid" 2>/dev/null || break
  sleep 0.1
done
kafka_addr=$(sed -n 's/^weir ready: .*kafka=\([^ ]*\).*/\1/p' <<<"$ready")
http_addr=$(sed -n 's/^weir ready: .*http=\([^ ]*\).*/\1/p' <<<"$ready")
listener_addr() { sed -n "s/^weir ready: .*listeners=\([^ ]*,\)\{0,1\}$1:\/\/\([^ ,]*\).*/\2/p" <<<"$ready"; }
sasl_ssl_addr=$(listener_addr SASL_SSL)
ssl_addr=$(listener_addr SSL)
if [[ -z "$kafka_addr" || -z "$http_addr" ]]; then
  if kill -0 "$broker_pid" 2>/dev/null; then
    why="no 'weir ready: kafka=... http=...' line within 30 s"
  else
    wait "$broker_pid"
    why="the broker exited with status $? before printing 'weir ready: kafka=... http=...'"
    broker_pid=
  fi
  fail "broker prints its ready line" "$why (stdout: $(head -c 300 "$work/broker.out"))"
  broker_log_tail
  summary
  exit 1
fi
pass "broker prints its ready line ($ready)"

if "$python" - "$http_addr" <<'EOF'; then
import sys, urllib.request
with urllib.request.urlopen(f"http://{sys.argv[1]}/ready", timeout=10) as r:
    sys.exit(0 if r.status == 200 else 1)
EOF
  pass "HTTP /ready answers 200"
else
  fail "HTTP /ready answers 200"
fi

# The secured listeners, their CA and the credentials, for the security checks.
if [[ -n "$sasl_ssl_addr" && -n "$ssl_addr" ]]; then
  pass "ready line lists the SASL_SSL and SSL listeners"
  export INTEROP_SASL_SSL_BOOTSTRAP=$sasl_ssl_addr
  export INTEROP_SSL_BOOTSTRAP=$ssl_addr
  export INTEROP_CA_FILE=$certs/ca.pem
  export INTEROP_CLIENT_CERT=$certs/client.pem
  export INTEROP_CLIENT_KEY=$certs/client.key
  export INTEROP_SCRAM_SHA512_USER=$scram_sha512_user
  export INTEROP_SCRAM_SHA256_USER=$scram_sha256_user
  secured=1
else
  fail "ready line lists the SASL_SSL and SSL listeners" "$ready"
  secured=
fi

# ---------------------------------------------------------------- clients

# Runs one client script; counts its PASS/FAIL lines. A script that exits
# non-zero without reporting a failure (a crash, a timeout) counts as one.
run_client() {
  local label=$1
  shift
  echo
  echo "== $label"
  local out=$work/$label.out rc
  # In the background so that a signal to this script is handled at once.
  timeout -k 10 "${client_timeout:-$script_timeout}" "$@" >"$out" 2>&1 &
  client_pid=$!
  wait "$client_pid"
  rc=$?
  client_pid=
  cat "$out"
  local p f
  p=$(grep -c '^PASS: ' "$out")
  f=$(grep -c '^FAIL: ' "$out")
  passed=$((passed + p))
  failed=$((failed + f))
  while IFS= read -r line; do failures+=("${line#FAIL: }"); done < <(grep '^FAIL: ' "$out")
  if ((rc != 0 && f == 0)); then
    if ((rc == 124 || rc == 137)); then
      fail "$label" "timed out after ${client_timeout:-$script_timeout} s"
    else
      fail "$label" "exited $rc without reporting a failed check"
    fi
  elif ((rc == 0 && f > 0)); then
    fail "$label" "reported failed checks but exited 0"
  fi
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    fail "broker still running after $label"
    broker_log_tail
  fi
}

# Fetch from follower (KIP-392) needs replicas in several racks: three more
# nodes (brokers and controllers) in racks a, b and c with Kafka's rack-aware
# replica selector, for JavaRackCheck; stopped with SIGTERM afterwards.
rack_cluster_check() {
  local ports=() voters= i
  for i in 1 2 3; do
    ports+=("$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')")
  done
  voters="1@127.0.0.1:${ports[0]},2@127.0.0.1:${ports[1]},3@127.0.0.1:${ports[2]}"
  local racks=(a b c)
  for i in 1 2 3; do
    "$weir" serve --node-id "$i" --roles broker,controller --controllers "$voters" \
      --controller-listen "127.0.0.1:${ports[i - 1]}" --data-dir "$work/rack-$i" \
      --listeners PLAINTEXT://127.0.0.1:0 --http-listen 127.0.0.1:0 \
      --broker-rack "${racks[i - 1]}" \
      --replica-selector-class org.apache.kafka.common.replica.RackAwareReplicaSelector \
      >"$work/rack-$i.out" 2>"$work/rack-$i.log" &
    rack_pids+=($!)
  done
  local kafka=() http=() ready
  for i in 1 2 3; do
    ready=
    for _ in $(seq 1 300); do # up to 30 s
      ready=$(grep -m 1 '^weir ready: ' "$work/rack-$i.out" 2>/dev/null || true)
      [[ -n "$ready" ]] && break
      sleep 0.1
    done
    kafka+=("$(sed -n 's/^weir ready: .*kafka=\([^ ]*\).*/\1/p' <<<"$ready")")
    http+=("$(sed -n 's/^weir ready: .*http=\([^ ]*\).*/\1/p' <<<"$ready")")
  done
  if [[ -z "${kafka[0]}" || -z "${kafka[1]}" || -z "${kafka[2]}" ]]; then
    fail "three nodes in racks a, b and c start" "$(tail -n 5 "$work"/rack-*.log)"
  else
    pass "three nodes in racks a, b and c start"
    run_client java-rack java -cp "$here/java/target/weir-java-interop.jar:$here/java/target/lib/*" \
      weir.interop.JavaRackCheck "${kafka[0]},${kafka[1]},${kafka[2]}" "${http[@]}"
  fi
  for i in "${rack_pids[@]}"; do kill -TERM "$i" 2>/dev/null; done
  for i in "${rack_pids[@]}"; do wait "$i" 2>/dev/null; done
  rack_pids=()
  if grep -q 'panicked at' "$work"/rack-*.log; then
    fail "rack nodes' logs have no panic"
  fi
}

# Tiered storage needs a broker with a remote tier: one more, with a
# file:// store and passes every 200 ms, for tiered_check.sh.
tiered_broker_check() {
  "$weir" serve --data-dir "$work/tiered" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --controller-listen 127.0.0.1:0 \
    --remote-log-storage-system-enable true --remote-storage-url "file://$work/remote-tier" \
    --remote-log-manager-task-interval-ms 200 --log-retention-check-interval-ms 200 \
    >"$work/tiered.out" 2>"$work/tiered.log" &
  rack_pids+=($!)
  local ready=
  for _ in $(seq 1 300); do # up to 30 s
    ready=$(grep -m 1 '^weir ready: ' "$work/tiered.out" 2>/dev/null || true)
    [[ -n "$ready" ]] && break
    sleep 0.1
  done
  local kafka
  kafka=$(sed -n 's/^weir ready: .*kafka=\([^ ]*\).*/\1/p' <<<"$ready")
  if [[ -z "$kafka" ]]; then
    fail "a broker with a remote tier starts" "$(tail -n 5 "$work/tiered.log")"
  else
    pass "a broker with a remote tier starts"
    client_timeout=300 run_client tiered-storage bash "$here/tiered_check.sh" "$kafka"
  fi
  for i in "${rack_pids[@]}"; do kill -TERM "$i" 2>/dev/null; done
  for i in "${rack_pids[@]}"; do wait "$i" 2>/dev/null; done
  rack_pids=()
  if grep -q 'panicked at' "$work/tiered.log"; then
    fail "the tiered broker's log has no panic"
  fi
}

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
"$python" -c 'import kafka, lz4, snappy, zstandard' 2>/dev/null || missing+=("python: kafka-python lz4 python-snappy zstandard")
"$python" -c 'import confluent_kafka' 2>/dev/null || missing+=("python: confluent-kafka")
have_java=
if java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then
  have_java=1
else
  missing+=("Java 17 or later")
fi
command -v mvn >/dev/null 2>&1 || missing+=(mvn)
if ((${#missing[@]} > 0)); then
  fail "client tools installed" "missing: ${missing[*]} (see .ci/run for the install steps)"
fi

if command -v kcat >/dev/null 2>&1; then
  run_client kcat bash "$here/kcat_check.sh" "$kafka_addr" "$work/broker.log" "$weir"
  [[ -n "$secured" ]] && run_client kcat-security bash "$here/kcat_security_check.sh"
fi
if "$python" -c 'import kafka, lz4, snappy, zstandard' 2>/dev/null; then
  run_client kafka-python "$python" "$here/kafka_python_check.py" "$kafka_addr"
  [[ -n "$secured" ]] && run_client kafka-python-security "$python" "$here/kafka_python_security_check.py"
fi
if "$python" -c 'import confluent_kafka' 2>/dev/null; then
  run_client confluent-kafka "$python" "$here/confluent_check.py" "$kafka_addr"
  run_client confluent-kafka-transactions "$python" "$here/eos_check.py" "$kafka_addr" classic
  run_client confluent-kafka-transactions-consumer-protocol "$python" "$here/eos_check.py" "$kafka_addr" consumer
  run_client confluent-kafka-share-groups "$python" "$here/confluent_share_check.py" "$kafka_addr"
  [[ -n "$secured" ]] && run_client confluent-kafka-security "$python" "$here/confluent_security_check.py"
  # The web console in headless Chromium, on a broker of its own.
  if "$python" -c 'import selenium' 2>/dev/null && command -v chromium >/dev/null 2>&1; then
    run_client console "$python" "$here/console_check.py" "$weir" "$root/target/console-screenshots"
  else
    fail "console check can run" "missing chromium, chromium-driver or selenium (see .ci/run)"
  fi
  # The README's tour, on a broker of its own on the default ports.
  command -v kcat >/dev/null 2>&1 && run_client readme-tour "$python" "$here/readme_tour.py" "$weir"
fi
if [[ -n "$have_java" ]] && command -v mvn >/dev/null 2>&1; then
  # Maven fetches the client into ~/.m2 on the first run; later runs take
  # it from there.
  echo
  echo "== java client (mvn package)"
  if (cd "$here/java" && timeout 300 mvn -q -B package) >"$work/mvn.out" 2>&1; then
    pass "java client check builds (mvn package)"
    run_client java-client java -cp "$here/java/target/weir-java-interop.jar:$here/java/target/lib/*" \
      weir.interop.JavaClientCheck "$kafka_addr"
    run_client java-share java -cp "$here/java/target/weir-java-interop.jar:$here/java/target/lib/*" \
      weir.interop.JavaShareCheck "$kafka_addr"
    [[ -n "$secured" ]] && run_client java-client-security java -cp "$here/java/target/weir-java-interop.jar:$here/java/target/lib/*" \
      weir.interop.JavaSecurityCheck
    rack_cluster_check
  else
    fail "java client check builds (mvn package)"
    tail -n 20 "$work/mvn.out" | sed -e 's/^/    | /'
  fi
  # A JVM per tool invocation, some 40 of them: more time than the others.
  client_timeout=300 run_client kafka-tools bash "$here/kafka_tools_check.sh" "$kafka_addr"
  command -v kcat >/dev/null 2>&1 && tiered_broker_check
  # Apache Kafka as a mirror's source: a Kafka broker and a weir broker of
  # its own.
  client_timeout=300 run_client mirror-from-kafka bash "$here/mirror_check.sh" "$weir"
fi
# Disaster recovery between two regions: a three-node source and a
# three-node mirror, the source killed, failover, failback (the short form).
if "$python" -c 'import confluent_kafka' 2>/dev/null; then
  client_timeout=240 run_client dr-drill "$python" "$here/dr_drill.py" --short --weir "$weir"
fi

# ---------------------------------------------------------------- shutdown

echo
echo "== broker"
if kill -0 "$broker_pid" 2>/dev/null; then
  kill -TERM "$broker_pid"
  rc=
  for _ in $(seq 1 300); do # up to 30 s
    if ! kill -0 "$broker_pid" 2>/dev/null; then
      wait "$broker_pid"
      rc=$?
      break
    fi
    sleep 0.1
  done
  if [[ -z "$rc" ]]; then
    fail "broker stops on SIGTERM" "still running 30 s after SIGTERM"
    broker_log_tail 5
    if command -v gdb >/dev/null 2>&1; then
      echo "    where its threads are (weir frames only):"
      timeout 60 gdb -p "$broker_pid" -batch -ex 'thread apply all bt 30' 2>/dev/null |
        grep -E '^Thread |in weir|weir_[a-z_]+::' | sed -e 's/ (.*) at / at /' -e 's/^/    | /' | cut -c1-200 | head -n 30
    fi
    kill -KILL "$broker_pid" 2>/dev/null
    wait "$broker_pid" 2>/dev/null
  elif ((rc == 0)); then
    pass "broker stops on SIGTERM with exit status 0"
  else
    fail "broker stops on SIGTERM" "exit status $rc"
    broker_log_tail
  fi
  broker_pid=
else
  wait "$broker_pid"
  fail "broker stops on SIGTERM" "it had already exited with status $? before SIGTERM"
  broker_log_tail
  broker_pid=
fi

panics=$(grep -c 'panicked at' "$work/broker.log")
if ((panics == 0)); then
  pass "broker log has no panic"
else
  fail "broker log has no panic" "$panics panics; first:"
  grep -m 1 -A1 'panicked at' "$work/broker.log" | sed -e 's/^/    | /'
fi

summary
((failed == 0))
