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
- Consumer groups (subscribe): two consumers of one group split a topic's
  partitions and receive every record exactly once (offsets committed when a
  rebalance takes partitions away); commit, close, and a new consumer of the
  group resumes after the commits; the AdminClient's list_consumer_groups
  (with state filters), describe_consumer_groups, list_consumer_group_offsets
  and delete_consumer_groups (NON_EMPTY_GROUP while members are active);
  three cooperative-sticky members at 2/2/2 of six partitions, and a fourth
  that gets what they give up, no partition left unowned; a
  cooperative-sticky static member (group.instance.id) that keeps its place
  across a restart.
- Delayed delivery (weir.delivery.delay.ms, a Weir extension): a group
  consumer gets every record, none before its timestamp plus the delay.
"""

import logging
import re
import sys
import time

from interop_util import (
    CODECS,
    CheckFailed,
    Checks,
    bootstrap_from_argv,
    compare_records,
    expect,
    expect_eq,
    expected_records,
)

import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
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
                    "confluent-kafka sent lz4 batches uncompressed: librdkafka < 2.11.1 enables lz4 only when the "
                    "broker accepts Produce v0 (#5130), and weir advertises Produce 3-11; "
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


# ---------------------------------------------------------------- consumer groups

# Short group timings: members learn of a rebalance from their next heartbeat
# (every 500 ms), and one that vanished is dropped after 6 s, the broker's
# smallest session timeout.
GROUP_TIMINGS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
GROUP_WAIT_S = 20  # bound for a group to settle and its records to arrive


_GROUP_ADMIN = {}


def group_admin(bootstrap):
    """One AdminClient for all group checks, alive until the script ends (an
    AdminClient destroyed right after a request may log about unserved
    events)."""
    if bootstrap not in _GROUP_ADMIN:
        _GROUP_ADMIN[bootstrap] = admin(bootstrap)
    return _GROUP_ADMIN[bootstrap]


def make_topic(bootstrap, topic, partitions):
    a = group_admin(bootstrap)
    res = wait_futures(
        a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)], request_timeout=TIMEOUT_S)
    )
    expect_eq(res, {topic: None}, f"create_topics({topic})")


def produce_values(bootstrap, topic, values):
    """values: {partition: [value, ...]}; returns {partition: {offset: value}} as delivered."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": TIMEOUT_S * 1000})
    reports = []
    for partition, vals in values.items():
        for v in vals:
            p.produce(
                topic,
                key=f"k-{v}".encode(),
                value=v.encode(),
                partition=partition,
                on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset(), msg.value())),
            )
    expect_eq(p.flush(TIMEOUT_S), 0, "messages still queued after flush")
    errors = [r[0] for r in reports if r[0] is not None]
    expect(not errors, f"delivery errors: {errors[:3]}")
    out = {partition: {} for partition in values}
    for _, partition, offset, value in reports:
        out[partition][offset] = value.decode()
    expect_eq(
        {partition: len(offs) for partition, offs in out.items()},
        {partition: len(vals) for partition, vals in values.items()},
        "records delivered per partition",
    )
    return out


def record_values(tag, partitions, count):
    return {p: [f"{tag}-p{p}-{i}" for i in range(count)] for p in range(partitions)}


class GroupMember:
    """A subscribed Consumer that tracks its assignment through the rebalance
    callbacks, remembers which records it received (and whether their
    partition was assigned to it at the time), and commits what it consumed
    of a partition before giving the partition up, so that the next owner
    starts right after it."""

    def __init__(self, bootstrap, group, client_id, topic, **extra):
        self.name = client_id
        self.topic = topic
        self.errors = []
        self.callback_errors = []
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "error_cb": lambda err: self.errors.append(str(err)),
            # With the consumer protocol the broker sets the timings.
            **({} if extra.get("group.protocol") == "consumer" else GROUP_TIMINGS),
            **extra,
        }
        self.consumer = Consumer(conf)
        self.assignment = set()
        self.next_offset = {}  # partition -> offset after the last record received
        self.received = []  # (partition, offset, value, assigned at the time)
        self.closed = False
        self.consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def _on_assign(self, _consumer, partitions):
        self.assignment |= {tp.partition for tp in partitions}

    def _on_revoke(self, _consumer, partitions):
        revoked = {tp.partition for tp in partitions}
        try:
            self.commit_consumed(revoked)
        except Exception as e:  # reported by the check, not swallowed by librdkafka
            self.callback_errors.append(f"commit on revoke: {e}")
        self._give_up(revoked)

    def _on_lost(self, _consumer, partitions):
        self.callback_errors.append(f"partitions lost: {[tp.partition for tp in partitions]}")
        self._give_up({tp.partition for tp in partitions})

    def _give_up(self, partitions):
        # What this member read of them is the next owner's to commit now.
        self.assignment -= partitions
        for p in partitions:
            self.next_offset.pop(p, None)

    def commit_consumed(self, partitions=None):
        """Synchronously commits the offset after the last record received,
        for the given partitions or all those assigned."""
        parts = self.assignment if partitions is None else partitions
        parts = [p for p in parts if p in self.next_offset]
        offsets = [TopicPartition(self.topic, p, self.next_offset[p]) for p in sorted(parts)]
        if not offsets:
            return []
        done = self.consumer.commit(offsets=offsets, asynchronous=False)
        failed = [(tp.partition, str(tp.error)) for tp in done if tp.error is not None]
        expect(not failed, f"{self.name}: commit failed for {failed}")
        return offsets

    def poll_once(self, timeout):
        m = self.consumer.poll(timeout)
        if m is None:
            return
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                return
            raise KafkaException(m.error())
        self.received.append((m.partition(), m.offset(), m.value().decode(), m.partition() in self.assignment))
        self.next_offset[m.partition()] = m.offset() + 1

    def close(self):
        if not self.closed:
            self.closed = True
            self.consumer.close()

    def check_callbacks(self):
        expect(not self.callback_errors, f"{self.name}: {self.callback_errors[:3]}")


def pump(members, done, what, timeout_s=GROUP_WAIT_S):
    """Polls every member in turn until done() holds; fails after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not done():
        for m in members:
            m.check_callbacks()
        if time.monotonic() > deadline:
            state = "; ".join(
                f"{m.name}: assigned {sorted(m.assignment)}, {len(m.received)} records, errors {m.errors[:2]}"
                for m in members
            )
            raise CheckFailed(f"{what} not reached within {timeout_s} s ({state})")
        for m in members:
            m.poll_once(0.1)


def pump_for(members, seconds):
    """Polls every member for a while (to catch records delivered twice)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in members:
            m.poll_once(0.1)


def split_evenly(members, partitions):
    """Each member owns some partitions, no partition twice, all partitions owned."""
    sets = [m.assignment for m in members]
    return (
        all(sets)
        and sum(len(s) for s in sets) == len(set().union(*sets))
        and set().union(*sets) == set(partitions)
    )


def received_once(members, expected, what):
    """expected: {partition: {offset: value}}; every one received exactly once, nothing else."""
    got = {}
    for m in members:
        for partition, offset, value, assigned in m.received:
            expect(assigned, f"{m.name} received {partition}@{offset} without partition {partition} assigned")
            key = (partition, offset)
            expect(key not in got, f"{what}: record {partition}@{offset} received twice ({got.get(key)} and {m.name})")
            got[key] = m.name
            want = expected.get(partition, {}).get(offset)
            expect(want is not None, f"{what}: unexpected record {partition}@{offset} {value!r} ({m.name})")
            expect_eq(value, want, f"{what}: value of {partition}@{offset}")
    missing = sorted((p, o) for p, offs in expected.items() for o in offs if (p, o) not in got)
    expect(not missing, f"{what}: {len(missing)} records never received, first {missing[:5]}")


def merge_expected(*maps):
    out = {}
    for mp in maps:
        for p, offs in mp.items():
            out.setdefault(p, {}).update(offs)
    return out


def total(expected):
    return sum(len(offs) for offs in expected.values())


def check_group_split(bootstrap):
    topic, group, parts = "ck-group-split", "ck-split", range(4)
    make_topic(bootstrap, topic, 4)
    before = record_values("before", 4, 8)
    expected = produce_values(bootstrap, topic, before)
    members = [GroupMember(bootstrap, group, f"ck-split-{n}", topic) for n in ("a", "b")]
    try:
        pump(
            members,
            lambda: split_evenly(members, parts) and sum(len(m.received) for m in members) >= total(expected),
            "two members owning disjoint partitions that cover the topic, every record received",
        )
        # Records written once the group is settled: each member reads those of its own partitions.
        owners = {p: m.name for m in members for p in m.assignment}
        after = record_values("after", 4, 5)
        expected = merge_expected(expected, produce_values(bootstrap, topic, after))
        pump(
            members,
            lambda: sum(len(m.received) for m in members) >= total(expected),
            "the records written after the rebalance",
        )
        pump_for(members, 1.0)
        for m in members:
            m.check_callbacks()
        received_once(members, expected, "two members of one group")
        expect(split_evenly(members, parts), f"assignments changed: {[sorted(m.assignment) for m in members]}")
        for m in members:
            late = {p for p, _, v, _ in m.received if v.startswith("after-")}
            expect(late, f"{m.name} received none of the records written after the rebalance")
            expect(
                all(owners[p] == m.name for p in late),
                f"{m.name} received later records of partitions {sorted(late)}, owners were {owners}",
            )
    finally:
        for m in members:
            m.close()


def check_group_resume(bootstrap):
    topic, group = "ck-group-resume", "ck-resume"
    make_topic(bootstrap, topic, 4)
    first = record_values("first", 4, 6)
    expected_first = produce_values(bootstrap, topic, first)
    reader = GroupMember(bootstrap, group, "ck-resume-1", topic)
    try:
        pump([reader], lambda: len(reader.received) >= total(expected_first), "the first reader receiving every record")
        received_once([reader], expected_first, "first reader")
        committed = reader.commit_consumed()
        expect_eq(
            sorted((tp.partition, tp.offset) for tp in committed), [(p, 6) for p in range(4)], "offsets committed"
        )
        back = reader.consumer.committed([TopicPartition(topic, p) for p in range(4)], timeout=TIMEOUT_S)
        expect_eq(sorted((tp.partition, tp.offset) for tp in back), [(p, 6) for p in range(4)], "committed()")
    finally:
        reader.close()
    second = record_values("second", 4, 3)
    expected_second = produce_values(bootstrap, topic, second)
    resumed = GroupMember(bootstrap, group, "ck-resume-2", topic)
    try:
        pump(
            [resumed],
            lambda: len(resumed.received) >= total(expected_second),
            "the new member receiving the new records",
        )
        pump_for([resumed], 1.0)
        received_once([resumed], expected_second, "new member after the commit (nothing before the committed offsets)")
        expect_eq(sorted(resumed.assignment), [0, 1, 2, 3], "new member's assignment")
    finally:
        resumed.close()


def group_listing(a, group, **kwargs):
    res = a.list_consumer_groups(request_timeout=TIMEOUT_S, **kwargs).result(timeout=TIMEOUT_S)
    expect(not res.errors, f"list_consumer_groups errors: {res.errors}")
    return {g.group_id: g for g in res.valid}.get(group)


def committed_by_admin(a, group, partitions=None):
    req = ConsumerGroupTopicPartitions(group, partitions)
    res = a.list_consumer_group_offsets([req], request_timeout=TIMEOUT_S)[group].result(timeout=TIMEOUT_S)
    expect_eq(res.group_id, group, "list_consumer_group_offsets group id")
    for tp in res.topic_partitions:
        expect(tp.error is None, f"list_consumer_group_offsets {tp.topic}[{tp.partition}]: {tp.error}")
    return sorted((tp.topic, tp.partition, tp.offset) for tp in res.topic_partitions)


def check_group_admin(bootstrap):
    topic, group = "ck-group-admin", "ck-admin-group"
    make_topic(bootstrap, topic, 4)
    values = record_values("admin", 4, 5)
    expected = produce_values(bootstrap, topic, values)
    members = [GroupMember(bootstrap, group, f"ck-admin-{n}", topic) for n in ("a", "b")]
    a = group_admin(bootstrap)
    try:
        pump(
            members,
            lambda: split_evenly(members, range(4)) and sum(len(m.received) for m in members) >= total(expected),
            "two members sharing the topic, every record received",
        )
        received_once(members, expected, "admin group")
        for m in members:
            m.commit_consumed()
        want_offsets = [(topic, p, 5) for p in range(4)]

        listing = group_listing(a, group)
        expect(listing is not None, f"{group} missing from list_consumer_groups")
        expect_eq((listing.state, listing.is_simple_consumer_group), (ConsumerGroupState.STABLE, False), "listing")
        expect(
            group_listing(a, group, states={ConsumerGroupState.STABLE}) is not None,
            "list_consumer_groups(states={STABLE}) leaves out the group",
        )
        expect(
            group_listing(a, group, states={ConsumerGroupState.EMPTY}) is None,
            "list_consumer_groups(states={EMPTY}) lists the active group",
        )

        desc = describe_group(a, group)
        expect_eq(
            (desc.group_id, desc.state, desc.is_simple_consumer_group, desc.partition_assignor),
            (group, ConsumerGroupState.STABLE, False, "range"),
            "describe_consumer_groups (group, state, simple, assignor)",
        )
        expect(desc.coordinator is not None and desc.coordinator.id == 1, f"coordinator: {desc.coordinator}")
        described = {}
        for md in desc.members:
            expect(md.member_id.startswith(md.client_id + "-"), f"member id {md.member_id!r} (client {md.client_id!r})")
            expect(md.host, f"member {md.member_id} has no host")
            described[md.client_id] = sorted((tp.topic, tp.partition) for tp in md.assignment.topic_partitions)
        expect_eq(
            described,
            {m.name: sorted((topic, p) for p in m.assignment) for m in members},
            "described members (client id -> assigned partitions)",
        )

        expect_eq(committed_by_admin(a, group), want_offsets, "list_consumer_group_offsets (whole group)")
        some = [TopicPartition(topic, 1), TopicPartition(topic, 3)]
        expect_eq(
            committed_by_admin(a, group, some),
            [(topic, 1, 5), (topic, 3, 5)],
            "list_consumer_group_offsets (two partitions)",
        )

        res = wait_futures(a.delete_consumer_groups([group], request_timeout=TIMEOUT_S))
        expect_eq(error_code(res[group]), KafkaError.NON_EMPTY_GROUP, "delete_consumer_groups with active members")
        expect_eq(committed_by_admin(a, group), want_offsets, "offsets after the refused delete")
    finally:
        for m in members:
            m.close()

    # close() sent LeaveGroup: the group is Empty, with its offsets kept.
    deadline = time.monotonic() + TIMEOUT_S
    while (listing := group_listing(a, group)) is None or listing.state != ConsumerGroupState.EMPTY:
        expect(time.monotonic() < deadline, f"listing {TIMEOUT_S} s after the members closed: {listing}")
        time.sleep(0.2)
    desc = describe_group(a, group)
    expect_eq((desc.state, desc.members), (ConsumerGroupState.EMPTY, []), "describe_consumer_groups after close")
    res = wait_futures(a.delete_consumer_groups([group], request_timeout=TIMEOUT_S))
    expect_eq(res, {group: None}, "delete_consumer_groups once the members are closed")
    expect(group_listing(a, group) is None, f"{group} still listed after delete_consumer_groups")
    expect_eq(committed_by_admin(a, group), [], "list_consumer_group_offsets after delete")
    res = wait_futures(a.delete_consumer_groups([group], request_timeout=TIMEOUT_S))
    expect_eq(error_code(res[group]), KafkaError.GROUP_ID_NOT_FOUND, "deleting the deleted group again")


def describe_group(a, group):
    return a.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(timeout=TIMEOUT_S)


def check_group_fourth_member(bootstrap, topic, group, conf, what):
    """Three members split six partitions 2/2/2; a fourth joins and gets what
    the others give up: no partition is left without an owner and every
    record is read once. Cooperative-sticky (classic protocol), or the
    consumer protocol (KIP-848), whose broker-side assignor does the same."""
    make_topic(bootstrap, topic, 6)
    expected = produce_values(bootstrap, topic, record_values(topic, 6, 5))
    members = [GroupMember(bootstrap, group, f"{topic}-{n}", topic, **conf) for n in range(3)]
    try:
        pump(
            members,
            lambda: split_evenly(members, range(6)) and sorted(len(m.assignment) for m in members) == [2, 2, 2],
            "three members at 2/2/2",
        )
        members.append(GroupMember(bootstrap, group, f"{topic}-3", topic, **conf))
        pump(members, lambda: split_evenly(members, range(6)), "four members owning every partition once")
        more = record_values(f"{topic}-more", 6, 3)
        expected = merge_expected(expected, produce_values(bootstrap, topic, more))
        pump(
            members,
            lambda: sum(len(m.received) for m in members) >= total(expected),
            "every record, those written after the rebalance too",
        )
        pump_for(members, 1.0)
        for m in members:
            m.check_callbacks()
        expect(split_evenly(members, range(6)), f"assignments changed: {[sorted(m.assignment) for m in members]}")
        received_once(members, expected, what)
    finally:
        for m in members:
            m.close()


def check_group_static_cooperative(bootstrap):
    topic, group, instance = "ck-group-static", "ck-static", "ck-static-instance-1"
    make_topic(bootstrap, topic, 3)
    values = record_values("static", 3, 5)
    expected = produce_values(bootstrap, topic, values)
    conf = {"partition.assignment.strategy": "cooperative-sticky", "group.instance.id": instance}
    a = group_admin(bootstrap)
    m = GroupMember(bootstrap, group, "ck-static", topic, **conf)
    try:
        pump([m], lambda: len(m.received) >= total(expected), "the static member receiving every record")
        pump_for([m], 0.5)
        m.check_callbacks()
        received_once([m], expected, "static cooperative member")
        expect_eq(sorted(m.assignment), [0, 1, 2], "assignment")
        desc = describe_group(a, group)
        expect_eq(
            (desc.state, desc.partition_assignor),
            (ConsumerGroupState.STABLE, "cooperative-sticky"),
            "group state, assignor",
        )
        expect_eq([md.group_instance_id for md in desc.members], [instance], "group.instance.id of the members")
        first_member_id = desc.members[0].member_id
        m.commit_consumed()
    finally:
        m.close()

    # A static member does not leave the group on close: it keeps its place
    # (until its session times out), and the same instance rejoining takes it
    # over under a new member id, with the same partitions and the committed
    # offsets.
    desc = describe_group(a, group)
    expect_eq(
        (desc.state, [(md.member_id, md.group_instance_id) for md in desc.members]),
        (ConsumerGroupState.STABLE, [(first_member_id, instance)]),
        "group right after the static member closed",
    )
    more = record_values("static-more", 3, 2)
    expected_more = produce_values(bootstrap, topic, more)
    again = GroupMember(bootstrap, group, "ck-static", topic, **conf)
    try:
        pump(
            [again],
            lambda: len(again.received) >= total(expected_more),
            "the rejoined static member receiving the new records",
        )
        pump_for([again], 0.5)
        again.check_callbacks()
        received_once([again], expected_more, "rejoined static member (nothing before the committed offsets)")
        expect_eq(sorted(again.assignment), [0, 1, 2], "assignment after rejoining")
        desc = describe_group(a, group)
        members = [
            (md.group_instance_id, sorted(tp.partition for tp in md.assignment.topic_partitions)) for md in desc.members
        ]
        expect_eq((desc.state, members), (ConsumerGroupState.STABLE, [(instance, [0, 1, 2])]), "group after the rejoin")
        expect(
            desc.members[0].member_id != first_member_id, f"rejoined member kept the old member id {first_member_id}"
        )
    finally:
        again.close()


def check_delayed_delivery(bootstrap):
    """A topic with weir.delivery.delay.ms: a group consumer gets each record
    no earlier than its timestamp plus the delay, and gets all of them."""
    topic, delay_ms, count = "ck-delayed", 2000, 10
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"weir.delivery.delay.ms": str(delay_ms)})])[topic].result()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ck-delayed-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"later-{i}".encode())
    producer.flush(10)
    got = []
    deadline = time.time() + 20
    while len(got) < count and time.time() < deadline:
        m = consumer.poll(0.1)
        if m is None or m.error():
            continue
        got.append((m.value().decode(), m.timestamp()[1], time.time() * 1000))
    consumer.close()
    expect_eq(sorted(v for v, _, _ in got), sorted(f"later-{i}" for i in range(count)), "records of the delayed topic")
    early = [(v, received - (ts + delay_ms)) for v, ts, received in got if received < ts + delay_ms]
    expect(not early, f"records delivered before their delay: {early}")


def main():
    bootstrap = bootstrap_from_argv("confluent_check.py")
    checks = Checks("confluent_check.py", deadline_s=150)
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
    checks.run(
        "confluent-kafka group: two consumers split a 4-partition topic, every record consumed exactly once",
        check_group_split,
        bootstrap,
    )
    checks.run(
        "confluent-kafka group: commit, close, a new consumer resumes after the committed offsets",
        check_group_resume,
        bootstrap,
    )
    checks.run(
        "confluent-kafka admin: list/describe consumer groups, list offsets, delete (NON_EMPTY_GROUP while active)",
        check_group_admin,
        bootstrap,
    )
    checks.run(
        "confluent-kafka group: cooperative-sticky, a fourth member gets what three give up",
        check_group_fourth_member,
        bootstrap,
        "ck-group-coop4",
        "ck-coop4",
        {"partition.assignment.strategy": "cooperative-sticky"},
        "four cooperative-sticky members",
    )
    checks.run(
        "confluent-kafka group: consumer protocol (KIP-848), a fourth member gets what three give up",
        check_group_fourth_member,
        bootstrap,
        "ck-group-modern4",
        "ck-modern4",
        {"group.protocol": "consumer"},
        "four members of the consumer protocol",
    )
    checks.run(
        "confluent-kafka group: cooperative-sticky static member (group.instance.id)",
        check_group_static_cooperative,
        bootstrap,
    )
    checks.run(
        "confluent-kafka group: a topic with weir.delivery.delay.ms delivers nothing early and everything",
        check_delayed_delivery,
        bootstrap,
    )
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
