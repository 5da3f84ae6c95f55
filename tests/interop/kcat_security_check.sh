#!/usr/bin/env bash
# kcat (librdkafka) against weir's SASL_SSL listener.
#
# Usage: kcat_security_check.sh, with INTEROP_SASL_SSL_BOOTSTRAP (HOST:PORT
# of the SASL_SSL listener), INTEROP_CA_FILE (PEM of the CA that signed the
# broker's certificate) and INTEROP_SCRAM_SHA512_USER (USER:PASSWORD) in the
# environment; tests/interop/run.sh sets them.
#
# Prints one `PASS: name` or `FAIL: name: reason` line per check (and
# `NOTE: ...` lines that are not failures); exits 1 if any check failed.
#
# Checks: `kcat -L` over SASL_SSL with SCRAM-SHA-512 lists the broker at the
# SASL_SSL address; `kcat -P` with keys and headers, read back with
# `kcat -C -e`; a wrong password makes kcat fail with an authentication
# error, in bounded time.
set -uo pipefail

for v in INTEROP_SASL_SSL_BOOTSTRAP INTEROP_CA_FILE INTEROP_SCRAM_SHA512_USER; do
  if [[ -z "${!v:-}" ]]; then
    echo "kcat_security_check.sh: set $v (tests/interop/run.sh does)" >&2
    exit 64
  fi
done
B=$INTEROP_SASL_SSL_BOOTSTRAP
user=${INTEROP_SCRAM_SHA512_USER%%:*}
password=${INTEROP_SCRAM_SHA512_USER#*:}
KCAT=${KCAT:-kcat}
T=30 # seconds allowed for any one kcat invocation

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-kcat-sec.XXXXXX")
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

note "kcat: $("$KCAT" -V 2>&1 | grep -o '^Version [0-9.]*' | head -n 1) ($("$KCAT" -V 2>&1 | grep -o 'librdkafka [0-9.]*' | head -n 1))"

# kcat's options for SASL_SSL with SCRAM-SHA-512 as $1:$2.
secured() {
  sec=(-b "$B" -X security.protocol=SASL_SSL -X sasl.mechanisms=SCRAM-SHA-512
    -X sasl.username="$1" -X sasl.password="$2" -X ssl.ca.location="$INTEROP_CA_FILE")
}

name="kcat -L over SASL_SSL SCRAM-SHA-512 ($user) lists the broker at the SASL_SSL address"
secured "$user" "$password"
if out=$(timeout "$T" "$KCAT" "${sec[@]}" -L 2>&1); then
  if grep -q "broker 1 at $B" <<<"$out"; then
    pass "$name"
  else
    fail "$name" "unexpected listing"
    show <<<"$out"
  fi
else
  fail "$name" "kcat exited non-zero"
  show <<<"$out"
fi

name="kcat -P -K: -H over SASL_SSL SCRAM-SHA-512 ($user), -C -e reads back keys, values, headers, offsets"
topic=kc-sec-scram
N=20
: >"$work/in"
: >"$work/want"
for ((i = 0; i < N; i++)); do
  printf 'key-%d:value-%d\n' "$i" "$i" >>"$work/in"
  printf 'key-%d|value-%d|origin=kcat-sasl|%d\n' "$i" "$i" "$i" >>"$work/want"
done
if ! timeout "$T" "$KCAT" "${sec[@]}" -P -t "$topic" -p 0 -K: -H origin=kcat-sasl \
  -X enable.idempotence=true <"$work/in" 2>"$work/produce.log"; then
  fail "$name" "kcat -P exited non-zero"
  show <"$work/produce.log"
elif ! timeout "$T" "$KCAT" "${sec[@]}" -C -e -p 0 -o beginning -t "$topic" -f '%k|%s|%h|%o\n' \
  >"$work/got" 2>"$work/consume.log"; then
  fail "$name" "kcat -C exited non-zero"
  show <"$work/consume.log"
elif ! diff -u "$work/want" "$work/got" >"$work/diff"; then
  fail "$name" "records read back differ from those written"
  show 15 <"$work/diff"
else
  pass "$name"
fi

name="kcat -L over SASL_SSL SCRAM-SHA-512 with a wrong password fails with an authentication error"
started=$SECONDS
secured "$user" not-the-password
timeout "$T" "$KCAT" "${sec[@]}" -L -m 5 >"$work/refused.out" 2>&1
rc=$?
took=$((SECONDS - started))
if ((rc == 0)); then
  fail "$name" "kcat -L succeeded"
  show <"$work/refused.out"
elif ((rc == 124)); then
  fail "$name" "kcat -L still running after $T s"
  show <"$work/refused.out"
elif ! grep -qi 'authenticat' "$work/refused.out"; then
  fail "$name" "kcat exited $rc without an authentication error"
  show <"$work/refused.out"
else
  note "kcat with a wrong password (exit $rc after ${took} s): $(grep -i -m 1 'authenticat' "$work/refused.out")"
  pass "$name"
fi

echo "kcat_security_check.sh: $passed checks passed, $failed failed"
((failed == 0))
