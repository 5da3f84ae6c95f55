"""Shared helpers for the interop check scripts.

Every check prints one line that `run.sh` counts:

    PASS: <name>
    FAIL: <name>: <reason>

and notes that are not failures (a client-side limitation, for instance) as
`NOTE: ...`. A script exits 1 when any of its checks failed, and it is
bounded in time: past its deadline it prints a FAIL line and exits 2.
"""

import os
import signal
import sys
import time
import traceback

# Codec ids in a record batch's attributes (bits 0-2).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODECS = list(CODEC_IDS)


class CheckFailed(Exception):
    """A mismatch found by a check; its message is the reason printed."""


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def expect_eq(actual, expected, what):
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


class Checks:
    """Runs named checks, prints PASS/FAIL lines and keeps the counts."""

    def __init__(self, script, deadline_s):
        self.script = script
        self.passed = 0
        self.failed = 0
        self.started = time.monotonic()
        self.deadline_s = deadline_s
        signal.signal(signal.SIGALRM, self._timed_out)
        signal.alarm(deadline_s)
        self.current = None

    def _timed_out(self, _signum, _frame):
        name = self.current or self.script
        print(f"FAIL: {name}: timed out ({self.script} exceeded its {self.deadline_s} s budget)", flush=True)
        # Hard exit: client libraries may hold threads that block a normal one.
        os._exit(2)

    def run(self, name, fn, *args, **kwargs):
        """Runs fn; a CheckFailed or any exception fails the check. Returns fn's result or None."""
        self.current = name
        try:
            result = fn(*args, **kwargs)
        except CheckFailed as e:
            self.fail(name, str(e))
            return None
        except Exception as e:  # a client raising is a failure of this check, not of the script
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            self.fail(name, f"{detail}")
            traceback.print_exc(file=sys.stdout)
            return None
        finally:
            self.current = None
        self.ok(name)
        return result

    def ok(self, name):
        self.passed += 1
        print(f"PASS: {name}", flush=True)

    def fail(self, name, reason):
        self.failed += 1
        print(f"FAIL: {name}: {reason}", flush=True)

    @staticmethod
    def note(text):
        print(f"NOTE: {text}", flush=True)

    def finish(self):
        signal.alarm(0)
        took = time.monotonic() - self.started
        print(f"{self.script}: {self.passed} checks passed, {self.failed} failed in {took:.1f} s", flush=True)
        # Hard exit so that lingering client threads cannot hang the run.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1 if self.failed else 0)


def bootstrap_from_argv(script):
    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        print(f"usage: {script} HOST:PORT", file=sys.stderr)
        sys.exit(64)
    return sys.argv[1]


def expected_records(codec, count, base_ts):
    """The records a producer writes for one codec: keys, values and headers
    with edge cases (null key, null value, empty value, repeated and null
    header values). Values are long and repetitive so that every codec
    actually shrinks the batch."""
    records = []
    for i in range(count):
        key = f"key-{i}".encode()
        value = (f"value-{i}-{codec}-" * 20).encode()
        headers = [("trace", f"t-{i}".encode()), ("codec", codec.encode())]
        if i == 1:
            key = None
        if i == 2:
            value = None
        if i == 3:
            value = b""
        if i == 4:
            headers = [("dup", b"a"), ("dup", b"b"), ("empty", b"")]
        if i == 5:
            headers = []
        records.append({"key": key, "value": value, "headers": headers, "timestamp": base_ts + i})
    return records


def compare_records(got, expected, what):
    """got/expected: lists of dicts with offset/key/value/headers/timestamp."""
    expect_eq(len(got), len(expected), f"{what}: number of records read back")
    for i, (g, e) in enumerate(zip(got, expected)):
        for field in ("offset", "key", "value", "headers", "timestamp"):
            if field in e and field in g:
                expect_eq(g[field], e[field], f"{what}: record {i} {field}")


class SecuritySetup:
    """The secured listeners and credentials that run.sh hands the security
    checks, from the environment:

    INTEROP_SASL_SSL_BOOTSTRAP  HOST:PORT of the SASL_SSL listener
    INTEROP_SSL_BOOTSTRAP       HOST:PORT of the SSL listener (client certificates requested)
    INTEROP_CA_FILE             PEM of the CA that signed the broker's and the client's certificates
    INTEROP_CLIENT_CERT         PEM certificate for mutual TLS (extendedKeyUsage clientAuth)
    INTEROP_CLIENT_KEY          its unencrypted private key, PEM
    INTEROP_SCRAM_SHA512_USER   USER:PASSWORD of a SCRAM-SHA-512 user
    INTEROP_SCRAM_SHA256_USER   USER:PASSWORD of a SCRAM-SHA-256 user
    """

    VARS = (
        "INTEROP_SASL_SSL_BOOTSTRAP",
        "INTEROP_SSL_BOOTSTRAP",
        "INTEROP_CA_FILE",
        "INTEROP_CLIENT_CERT",
        "INTEROP_CLIENT_KEY",
        "INTEROP_SCRAM_SHA512_USER",
        "INTEROP_SCRAM_SHA256_USER",
    )

    def __init__(self, env):
        self.sasl_ssl = env["INTEROP_SASL_SSL_BOOTSTRAP"]
        self.ssl = env["INTEROP_SSL_BOOTSTRAP"]
        self.ca_file = env["INTEROP_CA_FILE"]
        self.client_cert = env["INTEROP_CLIENT_CERT"]
        self.client_key = env["INTEROP_CLIENT_KEY"]
        self.sha512_user, self.sha512_password = env["INTEROP_SCRAM_SHA512_USER"].split(":", 1)
        self.sha256_user, self.sha256_password = env["INTEROP_SCRAM_SHA256_USER"].split(":", 1)


def security_from_env(script):
    missing = [v for v in SecuritySetup.VARS if not os.environ.get(v)]
    if missing:
        print(f"{script}: set {', '.join(missing)} (tests/interop/run.sh does)", file=sys.stderr)
        sys.exit(64)
    return SecuritySetup(os.environ)
