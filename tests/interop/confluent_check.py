#!/usr/bin/env python3
"""confluent-kafka (librdkafka) against a running weir broker.

Usage: confluent_check.py HOST:PORT

- AdminClient: describe_cluster; create_topics (with configs, validate_only,
  and an already existing topic); list_topics; describe_configs for a topic
  and for the broker; create_partitions; delete_topics (and an unknown one).
- Producer with enable.idempotence=true for each compression type: keys,
  headers (including null header values), null keys/values, explicit
  timestamps; librdkafka's own debug log tells which codec and producer id
  went on the wire.
- Consumer with assign() from OFFSET_BEGINNING, auto commit off, reading to
  partition EOF and comparing every field; watermarks and offsets_for_times.
- A multi-partition topic made by the AdminClient, written per partition and
  read back from all partitions at once.
"""

import logging
import re
import sys
import time

from interop_util import (
    CODECS,
    Checks,
    bootstrap_from_argv,
    compare_records,
    expect,
    expect_eq,
    expected_records,
)

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

RECORDS_PER_CODEC = 30
TIMEOUT_S = 15
ADMIN_TOPIC = "ck-admin"


class CapturedLog(logging.Handler):
    """Collects librdkafka's log lines (delivered through poll/flush)."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def client_logger(name):
    logger = logging.getLogger(f"interop.{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = CapturedLog()
    logger.handlers = [handler]
    return logger, handler


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": TIMEOUT_S * 1000})


def wait_futures(futures):
    """{key: future} -> {key: None or the KafkaError it raised}."""
    out = {}
    for key, fut in futures.items():
        try:
            fut.result(timeout=TIMEOUT_S)
            out[key] = None
        except KafkaException as e:
            out[key] = e.args[0]
    return out


def error_code(err):
    return None if err is None else err.code()


# ---------------------------------------------------------------- admin


def check_describe_cluster(bootstrap):
    a = admin(bootstrap)
    desc = a.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    expect(desc.cluster_id, f"empty cluster id: {desc.cluster_id!r}")
    nodes = [(n.id, n.host, n.port) for n in desc.nodes]
    host, port = bootstrap.rsplit(":", 1)
    expect_eq(nodes, [(1, host, int(port))], "describe_cluster nodes")
    expect(desc.controller is not None and desc.controller.id == 1, f"controller: {desc.controller}")


def check_create_topics(bootstrap):
    a = admin(bootstrap)
    configs = {"retention.ms": "3600000", "retention.bytes": "1048576"}
    res = wait_futures(
        a.create_topics(
            [NewTopic(ADMIN_TOPIC, num_partitions=3, replication_factor=1, config=configs)],
            operation_timeout=TIMEOUT_S,
            request_timeout=TIMEOUT_S,
        )
    )
    expect_eq(res, {ADMIN_TOPIC: None}, "create_topics result")
    res = wait_futures(a.create_topics([NewTopic(ADMIN_TOPIC, num_partitions=3)], request_timeout=TIMEOUT_S))
    expect_eq(error_code(res[ADMIN_TOPIC]), KafkaError.TOPIC_ALREADY_EXISTS, "creating an existing topic again")
    res = wait_futures(
        a.create_topics([NewTopic("ck-validate-only", num_partitions=2)], validate_only=True, request_timeout=TIMEOUT_S)
    )
    expect_eq(res, {"ck-validate-only": None}, "create_topics validate_only result")
    # list_topics(topic) would auto-create it: list everything instead.
    topics = a.list_topics(timeout=TIMEOUT_S).topics
    expect("ck-validate-only" not in topics, "validate_only create_topics created the topic")


def check_list_topics(bootstrap):
    a = admin(bootstrap)
    md = a.list_topics(timeout=TIMEOUT_S)
    host, port = bootstrap.rsplit(":", 1)
    brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
    expect_eq(brokers, {1: (host, int(port))}, "brokers in metadata")
    expect(ADMIN_TOPIC in md.topics, f"{ADMIN_TOPIC} missing from list_topics: {sorted(md.topics)}")
    t = md.topics[ADMIN_TOPIC]
    expect(t.error is None, f"topic error: {t.error}")
    expect_eq(sorted(t.partitions), [0, 1, 2], f"partitions of {ADMIN_TOPIC}")
    for p in t.partitions.values():
        expect_eq((p.leader, list(p.replicas), list(p.isrs), p.error), (1, [1], [1], None), f"partition {p.id}")


def check_describe_configs(bootstrap):
    a = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, ADMIN_TOPIC)
    cfg = a.describe_configs([res], request_timeout=TIMEOUT_S)[res].result(timeout=TIMEOUT_S)
    for name, value in (("retention.ms", "3600000"), ("retention.bytes", "1048576")):
        expect(name in cfg, f"{name} missing from topic configs: {sorted(cfg)}")
        entry = cfg[name]
        expect_eq(entry.value, value, f"{name} value")
        expect_eq(entry.source, ConfigSource.DYNAMIC_TOPIC_CONFIG.value, f"{name} source")
        expect_eq(entry.is_default, False, f"{name} is_default")
    expect("segment.bytes" in cfg, "segment.bytes missing from topic configs")
    expect_eq(cfg["segment.bytes"].is_default, True, "segment.bytes (not set on the topic) is_default")
    broker = ConfigResource(ResourceType.BROKER, "1")
    bcfg = a.describe_configs([broker], request_timeout=TIMEOUT_S)[broker].result(timeout=TIMEOUT_S)
    for name in ("log.retention.ms", "log.segment.bytes"):
        expect(name in bcfg, f"{name} missing from broker 1 configs: {sorted(bcfg)}")


def check_create_partitions(bootstrap):
    a = admin(bootstrap)
    res = wait_futures(
        a.create_partitions([NewPartitions(ADMIN_TOPIC, 4)], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    )
    expect_eq(res, {ADMIN_TOPIC: None}, "create_partitions result")
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        parts = sorted(a.list_topics(timeout=TIMEOUT_S).topics[ADMIN_TOPIC].partitions)
        if parts == [0, 1, 2, 3] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    expect_eq(parts, [0, 1, 2, 3], f"partitions of {ADMIN_TOPIC} after create_partitions")


def check_delete_topics(bootstrap):
    a = admin(bootstrap)
    res = wait_futures(a.delete_topics([ADMIN_TOPIC], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S))
    expect_eq(res, {ADMIN_TOPIC: None}, "delete_topics result")
    deadline = time.monotonic() + TIMEOUT_S
    while ADMIN_TOPIC in a.list_topics(timeout=TIMEOUT_S).topics:
        expect(time.monotonic() < deadline, f"{ADMIN_TOPIC} still listed after delete_topics")
        time.sleep(0.2)
    res = wait_futures(a.delete_topics(["ck-never-created"], request_timeout=TIMEOUT_S))
    expect_eq(
        error_code(res["ck-never-created"]), KafkaError.UNKNOWN_TOPIC_OR_PART, "deleting a topic that does not exist"
    )


# ---------------------------------------------------------------- produce / consume


def make_consumer(bootstrap, errors):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            # Required by the client; no group protocol is used with assign()
            # and nothing is committed.
            "group.id": "weir-interop-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 200,
            "error_cb": lambda err: errors.append(str(err)),
        }
    )


def consume_to_eof(consumer, partitions):
    """Reads until every partition reported EOF; returns {partition: [records]}."""
    got = {p: [] for p in partitions}
    at_eof = set()
    deadline = time.monotonic() + TIMEOUT_S
    while at_eof != set(partitions):
        expect(time.monotonic() < deadline, f"no EOF within {TIMEOUT_S} s on partitions {set(partitions) - at_eof}")
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                at_eof.add(m.partition())
                continue
            raise KafkaException(m.error())
        _ts_type, ts = m.timestamp()
        got[m.partition()].append(
            {
                "offset": m.offset(),
                "key": m.key(),
                "value": m.value(),
                "headers": list(m.headers() or []),
                "timestamp": ts,
            }
        )
    return got


def produce_idempotent(bootstrap, topic, codec, records, partition=None):
    logger, log = client_logger(f"producer-{topic}")
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 20,
            "message.timeout.ms": TIMEOUT_S * 1000,
            "debug": "msg,eos",
            "logger": logger,
        }
    )
    reports = []
    for r in records:
        kwargs = {"partition": partition} if partition is not None else {}
        p.produce(
            topic,
            key=r["key"],
            value=r["value"],
            headers=r["headers"],
            timestamp=r["timestamp"],
            on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())),
            **kwargs,
        )
    remaining = p.flush(TIMEOUT_S)
    for _ in range(3):
        p.poll(0.05)  # drain log lines
    expect_eq(remaining, 0, "messages still queued after flush")
    errors = [e for e, _, _ in reports if e is not None]
    expect(not errors, f"delivery errors: {errors[:3]}")
    return reports, log.lines


def wire_batches(lines):
    """[(codec, pid)] of the Produce MessageSets in librdkafka's debug log."""
    out = []
    for line in lines:
        m = re.search(r"Produce MessageSet with \d+ message\(s\) .*?(PID\{[^}]*\}), (\w+)\)", line)
        if m:
            out.append((m.group(2), m.group(1)))
    return out


def roundtrip(bootstrap, codec):
    topic = f"ck-{codec}"
    base_ts = int(time.time() * 1000) - 60000
    records = expected_records(codec, RECORDS_PER_CODEC, base_ts)
    records[6]["headers"] = [("nullval", None), ("k", b"v")]
    reports, lines = produce_idempotent(bootstrap, topic, codec, records)
    expect_eq(sorted(o for _, _, o in reports), list(range(len(records))), "offsets in delivery reports")

    acquired = [l for l in lines if "Acquired PID" in l]
    expect(acquired, "no 'Acquired PID' in the producer's eos log: InitProducerId did not succeed")
    batches = wire_batches(lines)
    expect(batches, "no 'Produce MessageSet' line in the producer's msg log")
    for wire_codec, pid in batches:
        expect("Id:-1" not in pid and "Invalid" not in pid, f"batch sent without a producer id: {pid}")
        if wire_codec != ("uncompressed" if codec == "none" else codec):
            unsupported = [l for l in lines if "does not support compression type" in l]
            if codec == "lz4" and unsupported:
                Checks.note(
                    "confluent-kafka sent lz4 batches uncompressed: librdkafka enables lz4 only when the broker "
                    "advertises FindCoordinator, which weir does not (no consumer groups yet); "
                    f"librdkafka said: {unsupported[0].split(': ', 1)[-1]}"
                )
            else:
                expect(False, f"batch went out as {wire_codec!r}, not {codec!r}; {unsupported[:1]}")

    errors = []
    c = make_consumer(bootstrap, errors)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = consume_to_eof(c, [0])[0]
        compare_records(got, [dict(r, offset=i) for i, r in enumerate(records)], f"topic {topic}")
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        expect_eq((low, high), (0, len(records)), "get_watermark_offsets")
        target = 11
        found = c.offsets_for_times([TopicPartition(topic, 0, base_ts + target)], timeout=TIMEOUT_S)
        expect_eq(found[0].offset, target, f"offsets_for_times({base_ts + target})")
    finally:
        c.close()
    if errors:
        Checks.note(f"consumer error_cb for {topic}: {errors[:3]}")


def multi_partition(bootstrap):
    a = admin(bootstrap)
    topic = "ck-multi"
    res = wait_futures(a.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)], request_timeout=TIMEOUT_S))
    expect_eq(res, {topic: None}, "create_topics result")
    per_partition = {}
    base_ts = int(time.time() * 1000) - 60000
    for p in range(4):
        recs = expected_records(f"p{p}", 5 + p, base_ts)
        per_partition[p] = recs
        reports, _ = produce_idempotent(bootstrap, topic, "zstd", recs, partition=p)
        expect_eq(sorted((part, off) for _, part, off in reports), [(p, i) for i in range(len(recs))], f"partition {p} deliveries")
    errors = []
    c = make_consumer(bootstrap, errors)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
        got = consume_to_eof(c, list(range(4)))
        for p in range(4):
            compare_records(got[p], [dict(r, offset=i) for i, r in enumerate(per_partition[p])], f"{topic}[{p}]")
    finally:
        c.close()


def main():
    bootstrap = bootstrap_from_argv("confluent_check.py")
    checks = Checks("confluent_check.py", deadline_s=60)
    Checks.note(f"confluent-kafka {getattr(confluent_kafka, '__version__', confluent_kafka.version())}, librdkafka {confluent_kafka.libversion()[0]}")
    checks.run("confluent-kafka admin: describe_cluster", check_describe_cluster, bootstrap)
    checks.run("confluent-kafka admin: create_topics (configs, existing topic, validate_only)", check_create_topics, bootstrap)
    checks.run("confluent-kafka admin: list_topics", check_list_topics, bootstrap)
    checks.run("confluent-kafka admin: describe_configs (topic, broker)", check_describe_configs, bootstrap)
    checks.run("confluent-kafka admin: create_partitions", check_create_partitions, bootstrap)
    checks.run("confluent-kafka admin: delete_topics (existing, unknown)", check_delete_topics, bootstrap)
    for codec in CODECS:
        checks.run(
            f"confluent-kafka: idempotent produce + assign(OFFSET_BEGINNING) read-back, compression={codec}",
            roundtrip,
            bootstrap,
            codec,
        )
    checks.run("confluent-kafka: 4-partition topic, produce per partition, read all partitions", multi_partition, bootstrap)
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
