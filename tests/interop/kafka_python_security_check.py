#!/usr/bin/env python3
"""kafka-python against weir's SASL_SSL listener.

Usage: kafka_python_security_check.py  (the listener, CA and credentials
come from the environment: see SecuritySetup in interop_util.py;
tests/interop/run.sh sets them)

- SASL_SSL with SCRAM-SHA-512 and with PLAIN (PLAIN checks the password
  against the user's SCRAM credentials; here a user with SCRAM-SHA-256
  credentials only): KafkaAdminClient creates a topic, the producer (idempotent
  by default) writes keyed records with headers, a consumer with manual
  assignment reads them back, and the cluster metadata lists the broker at
  the SASL_SSL address.
- A wrong password (SCRAM-SHA-512 and PLAIN) is refused: KafkaAdminClient
  and KafkaProducer give up within their bootstrap timeout, and what
  kafka-python got on each attempt is a SaslAuthenticationFailedError (the
  broker's SASL_AUTHENTICATION_FAILED answer to SaslAuthenticate).
"""

import logging
import re
import sys
import time

from interop_util import (
    CheckFailed,
    Checks,
    compare_records,
    expect,
    expect_eq,
    security_from_env,
)

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, SaslAuthenticationFailedError

TIMEOUT_MS = 15000
RECORDS = 20
# How long a client with a wrong password keeps trying to bootstrap.
BOOTSTRAP_TIMEOUT_S = 4


def sasl_conf(sec, mechanism, user, password):
    return {
        "bootstrap_servers": sec.sasl_ssl,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "ssl_cafile": sec.ca_file,
        "request_timeout_ms": TIMEOUT_MS,
    }


def check_roundtrip(sec, mechanism, user, password, topic):
    conf = sasl_conf(sec, mechanism, user, password)
    admin = KafkaAdminClient(**conf)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)], timeout_ms=TIMEOUT_MS)
        cluster = admin.describe_cluster()
        host, port = sec.sasl_ssl.rsplit(":", 1)
        brokers = [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]]
        expect_eq(brokers, [(1, host, int(port))], "brokers in describe_cluster (the SASL_SSL listener's address)")
    finally:
        admin.close()

    base_ts = int(time.time() * 1000) - 60000
    records = [
        {
            "key": f"{topic}-key-{i}".encode(),
            "value": f"{topic}-value-{i}".encode(),
            "headers": [("i", str(i).encode())],
            "timestamp": base_ts + i,
        }
        for i in range(RECORDS)
    ]
    producer = KafkaProducer(linger_ms=5, max_block_ms=TIMEOUT_MS, **conf)
    try:
        futures = [
            producer.send(topic, key=r["key"], value=r["value"], headers=r["headers"], timestamp_ms=r["timestamp"])
            for r in records
        ]
        producer.flush(timeout=TIMEOUT_MS / 1000)
        offsets = [f.get(timeout=TIMEOUT_MS / 1000).offset for f in futures]
        expect_eq(offsets, list(range(RECORDS)), "offsets returned by produce")
    finally:
        producer.close(timeout=5)

    consumer = KafkaConsumer(
        group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200, **conf
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while len(got) < RECORDS and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(
                    {
                        "offset": m.offset,
                        "key": m.key,
                        "value": m.value,
                        "headers": list(m.headers or []),
                        "timestamp": m.timestamp,
                    }
                    for m in msgs
                )
    finally:
        consumer.close(autocommit=False)
    compare_records(got, [dict(r, offset=i) for i, r in enumerate(records)], f"topic {topic}")


class ConnectionFailures(logging.Handler):
    """Collects kafka-python's warnings about failed connections: with a
    refused password, the bootstrap loop logs the error of each attempt
    (`Bootstrap connection to ... failed: SaslAuthenticationFailedError: ...`)
    and retries until bootstrap_timeout_ms, then raises KafkaTimeoutError."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.lines = []

    def emit(self, record):
        message = record.getMessage()
        if "failed" in message:
            self.lines.append(message)


# The broker's connection.failed.authentication.delay.ms (run.sh keeps
# Kafka's default).
FAILED_AUTHENTICATION_DELAY_MS = 100


def cut_short_by_the_client(line):
    """Whether kafka-python gave up on an attempt sooner than the broker
    answers a failed login."""
    timed_out = re.search(r"RequestTimedOutError: Request timed out after (\d+) ms", line)
    return timed_out is not None and int(timed_out.group(1)) < FAILED_AUTHENTICATION_DELAY_MS


def refused(make, what, mechanism):
    """Runs make(), which must fail for want of authentication: raises
    CheckFailed unless it raised KafkaTimeoutError (kafka-python 3's answer
    once its bootstrap attempts ran out) or SaslAuthenticationFailedError,
    within bounded time, with kafka-python logging a
    SaslAuthenticationFailedError for the connection."""
    failures = ConnectionFailures()
    manager_log = logging.getLogger("kafka.net.manager")
    manager_log.addHandler(failures)
    started = time.monotonic()
    try:
        client = make()
    except (KafkaTimeoutError, SaslAuthenticationFailedError) as e:
        raised = e
    except KafkaError as e:
        raise CheckFailed(f"{what} raised {e!r}, expected KafkaTimeoutError or SaslAuthenticationFailedError")
    else:
        client.close()
        raise CheckFailed(f"{what} connected with a wrong password")
    finally:
        manager_log.removeHandler(failures)
    took = time.monotonic() - started
    expect(took < BOOTSTRAP_TIMEOUT_S + 5, f"{what} took {took:.1f} s to fail")
    auth = [line for line in failures.lines if "SaslAuthenticationFailedError" in line]
    # "Bootstrap failed: ..." closes the attempts; it is no connection. The
    # last attempt may get less time from kafka-python's own bootstrap
    # deadline than the broker takes to answer a failed login
    # (connection.failed.authentication.delay.ms, 100 ms by default, as in
    # Kafka): its request times out first, which is no fault of the broker.
    other = [
        line
        for line in failures.lines
        if "SaslAuthenticationFailedError" not in line
        and not line.startswith("Bootstrap failed")
        and not cut_short_by_the_client(line)
    ]
    # Each attempt must end on the broker's SASL_AUTHENTICATION_FAILED
    # answer. kafka-python drops bytes read together with the connection's
    # end, so a broker that closes right after that answer (instead of
    # waiting connection.failed.authentication.delay.ms, 100 ms in Kafka)
    # shows up here as `socket disconnected`.
    expect(
        (auth or isinstance(raised, SaslAuthenticationFailedError)) and not other,
        f"{what} raised {raised!r}; of the {len(failures.lines)} failed connections kafka-python logged, "
        f"{len(other)} ended without the SASL_AUTHENTICATION_FAILED answer, e.g. {other[:1]}",
    )
    Checks.note(f"kafka-python {what}, {mechanism} with a wrong password: {raised!r}; {(auth or [''])[0]}")


def check_wrong_password(sec, mechanism, user):
    """The admin client and the producer both give up, in bounded time,
    on an authentication error."""
    conf = sasl_conf(sec, mechanism, user, "not-the-password")
    conf["bootstrap_timeout_ms"] = BOOTSTRAP_TIMEOUT_S * 1000
    refused(lambda: KafkaAdminClient(**conf), "KafkaAdminClient", mechanism)
    refused(lambda: KafkaProducer(max_block_ms=BOOTSTRAP_TIMEOUT_S * 1000, **conf), "KafkaProducer", mechanism)


def main():
    sec = security_from_env("kafka_python_security_check.py")
    checks = Checks("kafka_python_security_check.py", deadline_s=90)
    Checks.note(f"kafka-python {kafka.__version__}")
    for mechanism, user, password in (
        ("SCRAM-SHA-512", sec.sha512_user, sec.sha512_password),
        ("PLAIN", sec.sha256_user, sec.sha256_password),
    ):
        checks.run(
            f"kafka-python SASL_SSL {mechanism} ({user}): create topic, produce, read back",
            check_roundtrip,
            sec,
            mechanism,
            user,
            password,
            f"kp-sec-{mechanism.lower()}",
        )
    for mechanism, user in (("SCRAM-SHA-512", sec.sha512_user), ("PLAIN", sec.sha256_user)):
        checks.run(
            f"kafka-python SASL_SSL {mechanism}: a wrong password is refused: authentication errors, no hang",
            check_wrong_password,
            sec,
            mechanism,
            user,
        )
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
