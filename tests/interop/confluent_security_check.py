#!/usr/bin/env python3
"""confluent-kafka (librdkafka) against weir's secured listeners.

Usage: confluent_security_check.py  (the listeners, CA, client certificate
and credentials come from the environment: see SecuritySetup in
interop_util.py; tests/interop/run.sh sets them)

- SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (PLAIN checks the
  password against the user's SCRAM credentials): the AdminClient creates a
  topic and its metadata lists the broker at the SASL_SSL address; an
  idempotent producer writes keyed records with headers, and a consumer
  (assign from the beginning) reads them back to partition EOF.
- A wrong SCRAM password and a wrong PLAIN password: the client reports
  an authentication error (_AUTHENTICATION) within seconds, a message
  produced meanwhile fails, and nothing hangs.
- Mutual TLS on the SSL listener with a client certificate: the same
  produce and read-back.
"""

import logging
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

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 15
RECORDS = 20
# An authentication failure must be reported well within this.
AUTH_FAILURE_S = 10


def sasl_ssl_conf(sec, mechanism, user, password):
    return {
        "bootstrap.servers": sec.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": sec.ca_file,
        "socket.timeout.ms": TIMEOUT_S * 1000,
    }


def mtls_conf(sec):
    return {
        "bootstrap.servers": sec.ssl,
        "security.protocol": "SSL",
        "ssl.ca.location": sec.ca_file,
        "ssl.certificate.location": sec.client_cert,
        "ssl.key.location": sec.client_key,
        "socket.timeout.ms": TIMEOUT_S * 1000,
    }


def records_for(tag):
    base_ts = int(time.time() * 1000) - 60000
    return [
        {
            "key": f"{tag}-key-{i}".encode(),
            "value": f"{tag}-value-{i}".encode(),
            "headers": [("tag", tag.encode()), ("i", str(i).encode())],
            "timestamp": base_ts + i,
        }
        for i in range(RECORDS)
    ]


def roundtrip(conf, bootstrap, topic):
    """Creates topic, checks the advertised broker address, writes RECORDS
    records and reads them back, all through conf's listener and credentials."""
    errors = []
    a = AdminClient(dict(conf, error_cb=lambda err: errors.append(str(err))))
    fut = a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)], request_timeout=TIMEOUT_S)[topic]
    fut.result(timeout=TIMEOUT_S)
    md = a.list_topics(timeout=TIMEOUT_S)
    host, port = bootstrap.rsplit(":", 1)
    expect_eq(
        {b.id: (b.host, b.port) for b in md.brokers.values()},
        {1: (host, int(port))},
        "brokers in metadata (the address of the listener connected to)",
    )
    expect(topic in md.topics, f"{topic} missing from list_topics: {sorted(md.topics)}")

    records = records_for(topic)
    reports = []
    p = Producer(
        dict(
            conf,
            **{
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": TIMEOUT_S * 1000,
                "error_cb": lambda err: errors.append(str(err)),
            },
        )
    )
    for r in records:
        p.produce(
            topic,
            key=r["key"],
            value=r["value"],
            headers=r["headers"],
            timestamp=r["timestamp"],
            on_delivery=lambda err, msg: reports.append((err, msg.offset())),
        )
    remaining = p.flush(TIMEOUT_S)
    expect_eq(remaining, 0, f"messages not delivered within {TIMEOUT_S} s (client errors: {errors[:3]})")
    failed = [str(err) for err, _ in reports if err is not None]
    expect(not failed, f"delivery failed: {failed[:3]}")
    expect_eq(sorted(o for _, o in reports), list(range(RECORDS)), "offsets in the delivery reports")

    c = Consumer(
        dict(
            conf,
            **{
                "group.id": "weir-interop-unused",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 200,
                "error_cb": lambda err: errors.append(str(err)),
            },
        )
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            expect(time.monotonic() < deadline, f"no partition EOF within {TIMEOUT_S} s, {len(got)} records read")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise KafkaException(m.error())
            got.append(
                {
                    "offset": m.offset(),
                    "key": m.key(),
                    "value": m.value(),
                    "headers": list(m.headers() or []),
                    "timestamp": m.timestamp()[1],
                }
            )
    finally:
        c.close()
    compare_records(got, [dict(r, offset=i) for i, r in enumerate(records)], f"topic {topic}")


def check_sasl(sec, mechanism, user, password, topic):
    roundtrip(sasl_ssl_conf(sec, mechanism, user, password), sec.sasl_ssl, topic)


def check_wrong_password(sec, mechanism, user):
    """A producer with a wrong password: an _AUTHENTICATION error, the message
    it was given fails, and flush() returns."""
    started = time.monotonic()
    errors = []
    reports = []
    # librdkafka logs every refused reconnect: keep that out of the output.
    logger = logging.getLogger(f"interop.refused-{mechanism}")
    logger.propagate = False
    logger.handlers = [logging.NullHandler()]
    conf = dict(sasl_ssl_conf(sec, mechanism, user, "not-the-password"), logger=logger)
    p = Producer(
        dict(
            conf,
            **{
                "message.timeout.ms": AUTH_FAILURE_S * 1000,
                "error_cb": lambda err: errors.append(err),
            },
        )
    )
    p.produce("ck-sec-refused", value=b"never", on_delivery=lambda err, msg: reports.append(err))
    deadline = started + AUTH_FAILURE_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        p.poll(0.2)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    expect(
        auth,
        f"no _AUTHENTICATION error within {AUTH_FAILURE_S} s; errors: {[str(e) for e in errors[:3]]}",
    )
    Checks.note(f"{mechanism} with a wrong password: {auth[0].str()}")
    # The queued message must not be delivered; purge it and flush: flush must return at once.
    p.purge()
    remaining = p.flush(5)
    expect_eq(remaining, 0, "messages still queued after purge + flush(5)")
    expect_eq(len(reports), 1, "delivery reports for the one message produced")
    expect(reports[0] is not None, "the message produced with a wrong password was delivered")
    # An AdminClient with the same wrong password fails too, within its timeout.
    a = AdminClient(conf)
    try:
        a.list_topics(timeout=5)
        raise CheckFailed("AdminClient.list_topics succeeded with a wrong password")
    except KafkaException as e:
        Checks.note(f"AdminClient.list_topics with a wrong {mechanism} password: {e.args[0]}")
    finally:
        del a
    del p
    took = time.monotonic() - started
    expect(took < AUTH_FAILURE_S + 10, f"took {took:.1f} s")


def check_mtls(sec):
    roundtrip(mtls_conf(sec), sec.ssl, "ck-sec-mtls")


def main():
    sec = security_from_env("confluent_security_check.py")
    checks = Checks("confluent_security_check.py", deadline_s=100)
    Checks.note(f"confluent-kafka {getattr(confluent_kafka, '__version__', confluent_kafka.version()[0])}, librdkafka {confluent_kafka.libversion()[0]}")
    for mechanism, user, password in (
        ("SCRAM-SHA-256", sec.sha256_user, sec.sha256_password),
        ("SCRAM-SHA-512", sec.sha512_user, sec.sha512_password),
        ("PLAIN", sec.sha512_user, sec.sha512_password),
    ):
        checks.run(
            f"confluent-kafka SASL_SSL {mechanism} ({user}): create topic, idempotent produce, read back",
            check_sasl,
            sec,
            mechanism,
            user,
            password,
            f"ck-sec-{mechanism.lower()}",
        )
    for mechanism, user in (("SCRAM-SHA-256", sec.sha256_user), ("PLAIN", sec.sha512_user)):
        checks.run(
            f"confluent-kafka SASL_SSL {mechanism}: a wrong password gives an authentication error, nothing hangs",
            check_wrong_password,
            sec,
            mechanism,
            user,
        )
    checks.run(
        "confluent-kafka SSL with a client certificate (mutual TLS): create topic, idempotent produce, read back",
        check_mtls,
        sec,
    )
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
