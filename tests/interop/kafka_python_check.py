#!/usr/bin/env python3
"""kafka-python against a running weir broker.

Usage: kafka_python_check.py HOST:PORT

For each compression type (none, gzip, snappy, lz4, zstd) the default
producer (idempotent by default since kafka-python 3.0) writes records with
keys, headers, null keys/values and explicit timestamps into its own topic;
a consumer with manual assignment (no group, no commits) reads everything
back from the beginning and compares it field by field. The record batches
the consumer fetches are inspected too: they must carry the producer's
compression codec, producer id/epoch and sequence numbers. Then offset
lookups: beginning/end offsets and offsets_for_times (ListOffsets).

Consumer groups: two KafkaConsumers with one group_id split a topic's
partitions and receive every record exactly once; commit, close, and a new
consumer of the group resumes after the commits; KafkaAdminClient's
list_groups (with a state filter), describe_groups, list_group_offsets and
delete_groups (NonEmptyGroupError while members are active). These are the
kafka-python 3 names of list_consumer_groups, describe_consumer_groups,
list_consumer_group_offsets and delete_consumer_groups.
"""

import sys
import time

from interop_util import (
    CODEC_IDS,
    CODECS,
    CheckFailed,
    Checks,
    compare_records,
    bootstrap_from_argv,
    expect,
    expect_eq,
    expected_records,
)

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata
from kafka.record import memory_records

RECORDS_PER_CODEC = 30
TIMEOUT_MS = 15000

# Every record batch that the consumer parses, as the fetch response carried it.
SEEN_BATCHES = []


def _install_batch_recorder():
    """Wraps MemoryRecords.next_batch so that the batch headers returned by
    Fetch can be checked (codec, producer id, sequences). Returns False if
    this kafka-python version has no such hook."""
    original = getattr(memory_records.MemoryRecords, "next_batch", None)
    if original is None:
        return False

    def next_batch(self, *args, **kwargs):
        batch = original(self, *args, **kwargs)
        if batch is not None and hasattr(batch, "producer_id"):
            SEEN_BATCHES.append(
                {
                    "base_offset": batch.base_offset,
                    "last_offset": batch.last_offset,
                    "codec": batch.compression_type,
                    "producer_id": batch.producer_id,
                    "producer_epoch": batch.producer_epoch,
                    "base_sequence": batch.base_sequence,
                }
            )
        return batch

    memory_records.MemoryRecords.next_batch = next_batch
    return True


def make_producer(bootstrap, codec):
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        request_timeout_ms=TIMEOUT_MS,
        max_block_ms=TIMEOUT_MS,
        retries=3,
    )


def make_consumer(bootstrap):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=TIMEOUT_MS + 5000,
        fetch_max_wait_ms=200,
    )


def check_default_idempotence():
    default = KafkaProducer.DEFAULT_CONFIG.get("enable_idempotence")
    expect(
        default is True,
        f"kafka-python {kafka.__version__}: DEFAULT_CONFIG['enable_idempotence'] is {default!r}, "
        "expected True (the default since kafka-python 3.0)",
    )


def produce(bootstrap, topic, codec, records):
    producer = make_producer(bootstrap, codec)
    try:
        expect_eq(producer.config.get("enable_idempotence"), True, "producer enable_idempotence (left at default)")
        expect_eq(str(producer.config.get("acks")), "-1", "producer acks with idempotence")
        futures = [
            producer.send(topic, key=r["key"], value=r["value"], headers=r["headers"], timestamp_ms=r["timestamp"])
            for r in records
        ]
        producer.flush(timeout=TIMEOUT_MS / 1000)
        offsets = []
        for i, f in enumerate(futures):
            md = f.get(timeout=TIMEOUT_MS / 1000)
            expect_eq(md.partition, 0, f"record {i} partition")
            offsets.append(md.offset)
        expect_eq(offsets, list(range(len(records))), "offsets returned by produce")
        manager = getattr(producer, "_transaction_manager", None)
        expect(manager is not None, "producer has no transaction manager: idempotence did not take effect")
        pid = manager.producer_id_and_epoch
        expect(pid.producer_id >= 0, f"no producer id from InitProducerId: {pid.producer_id}")
        return pid.producer_id, pid.epoch
    finally:
        producer.close(timeout=5)


def consume_all(bootstrap, topic, count):
    consumer = make_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while len(got) < count and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                for m in msgs:
                    got.append(
                        {
                            "offset": m.offset,
                            "key": m.key,
                            "value": m.value,
                            "headers": [(k, v) for k, v in (m.headers or [])],
                            "timestamp": m.timestamp,
                        }
                    )
        # One more short poll: nothing beyond what was written may appear.
        for msgs in consumer.poll(timeout_ms=300).values():
            got.extend({"offset": m.offset} for m in msgs)
        return got
    finally:
        consumer.close(autocommit=False)


def roundtrip(bootstrap, codec, recorder_ok):
    topic = f"kp-{codec}"
    base_ts = int(time.time() * 1000) - 60000
    records = expected_records(codec, RECORDS_PER_CODEC, base_ts)
    pid, epoch = produce(bootstrap, topic, codec, records)
    SEEN_BATCHES.clear()
    got = consume_all(bootstrap, topic, len(records))
    expected = [dict(r, offset=i) for i, r in enumerate(records)]
    compare_records(got, expected, f"topic {topic}")
    if not recorder_ok:
        return
    batches = list(SEEN_BATCHES)
    expect(batches, "consumer parsed no record batch")
    want = CODEC_IDS[codec]
    for b in batches:
        expect_eq(b["codec"], want, f"codec of fetched batch at offset {b['base_offset']}")
        expect_eq(b["producer_id"], pid, f"producer id of batch at offset {b['base_offset']}")
        expect_eq(b["producer_epoch"], epoch, f"producer epoch of batch at offset {b['base_offset']}")
        # One idempotent producer per fresh topic: sequence numbers start at 0
        # with offset 0 and advance with the offsets.
        expect_eq(b["base_sequence"], b["base_offset"], f"base sequence of batch at offset {b['base_offset']}")
    covered = sorted({o for b in batches for o in range(b["base_offset"], b["last_offset"] + 1)})
    expect_eq(covered, list(range(len(records))), "offsets covered by fetched batches")


def offsets_lookup(bootstrap):
    topic = "kp-none"
    tp = TopicPartition(topic, 0)
    consumer = make_consumer(bootstrap)
    try:
        parts = consumer.partitions_for_topic(topic)
        expect_eq(parts, {0}, f"partitions_for_topic({topic})")
        expect_eq(consumer.beginning_offsets([tp], timeout_ms=TIMEOUT_MS), {tp: 0}, "beginning_offsets")
        expect_eq(consumer.end_offsets([tp], timeout_ms=TIMEOUT_MS), {tp: RECORDS_PER_CODEC}, "end_offsets")
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        first = None
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while first is None and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500, max_records=1).values():
                first = msgs[0]
        expect(first is not None, "no record to take a timestamp from")
        target = 7
        ts = first.timestamp + target  # records were written with timestamps base_ts + i
        found = consumer.offsets_for_times({tp: ts}, timeout_ms=TIMEOUT_MS)
        expect(found.get(tp) is not None, f"offsets_for_times({ts}) found nothing")
        expect_eq(found[tp].offset, target, f"offsets_for_times({ts}).offset")
        expect_eq(found[tp].timestamp, ts, f"offsets_for_times({ts}).timestamp")
        past = consumer.offsets_for_times({tp: ts + 10**9}, timeout_ms=TIMEOUT_MS)
        expect_eq(past.get(tp), None, "offsets_for_times past the last record")
    finally:
        consumer.close(autocommit=False)


# ---------------------------------------------------------------- consumer groups

GROUP_WAIT_S = 20  # bound for a group to settle and its records to arrive
# Each member polls this long in its turn. kafka-python 3.0.12 can lose a
# rebalance that completes while no poll() of the member runs (it then
# never takes its partitions). With 100 ms turns, against a broker it
# takes for Kafka 4.1, one member of each of two groups below lost it.
POLL_MS = 500


def make_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)


def make_topic(admin, topic, partitions):
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)], timeout_ms=TIMEOUT_MS)


def produce_values(bootstrap, topic, values):
    """values: {partition: [value, ...]}; returns {partition: {offset: value}}."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=TIMEOUT_MS, max_block_ms=TIMEOUT_MS)
    try:
        futures = [
            (v, producer.send(topic, key=f"k-{v}".encode(), value=v.encode(), partition=p))
            for p, vals in values.items()
            for v in vals
        ]
        producer.flush(timeout=TIMEOUT_MS / 1000)
        out = {p: {} for p in values}
        for v, f in futures:
            md = f.get(timeout=TIMEOUT_MS / 1000)
            out[md.partition][md.offset] = v
        return out
    finally:
        producer.close(timeout=5)


def record_values(tag, partitions, count):
    return {p: [f"{tag}-p{p}-{i}" for i in range(count)] for p in range(partitions)}


def merge_expected(*maps):
    out = {}
    for mp in maps:
        for p, offs in mp.items():
            out.setdefault(p, {}).update(offs)
    return out


def total(expected):
    return sum(len(offs) for offs in expected.values())


class GroupMember:
    """A KafkaConsumer subscribed in a group. Offsets are committed by the
    client's auto commit, which kafka-python also runs before a rebalance
    gives partitions up: the next owner starts right after the records this
    one received. Records are remembered with the assignment at the time."""

    def __init__(self, bootstrap, group, client_id, topic, **extra):
        self.name = client_id
        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            # 6000 ms is the broker's smallest session timeout.
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            fetch_max_wait_ms=100,
            request_timeout_ms=TIMEOUT_MS + 5000,
            **extra,
        )
        # Topic metadata before the first JoinGroup: kafka-python 3.0.12 loses
        # a completed rebalance when the leader joined without it (an empty
        # first assignment, then a rejoin for the metadata change that
        # finishes while poll() has already timed out: the member never takes
        # its partitions nor heartbeats again).
        expect(self.consumer.partitions_for_topic(topic), f"{client_id}: no metadata for {topic}")
        self.consumer.subscribe([topic])
        self.received = []  # (partition, offset, value, assigned at the time)
        self.closed = False

    @property
    def assignment(self):
        return {tp.partition for tp in self.consumer.assignment()}

    def poll_once(self, timeout_ms):
        batches = self.consumer.poll(timeout_ms=timeout_ms)
        assigned = self.assignment
        for tp, msgs in batches.items():
            for m in msgs:
                self.received.append((tp.partition, m.offset, m.value.decode(), tp.partition in assigned))

    def commit_positions(self):
        """Commits the position (the offset after the last record received) of every assigned partition."""
        offsets = {
            tp: OffsetAndMetadata(self.consumer.position(tp), "", -1) for tp in self.consumer.assignment()
        }
        self.consumer.commit(offsets)
        return {tp.partition: oam.offset for tp, oam in offsets.items()}

    def close(self):
        if not self.closed:
            self.closed = True
            self.consumer.close(autocommit=False, timeout_ms=TIMEOUT_MS)


def pump(members, done, what, timeout_s=GROUP_WAIT_S):
    """Polls every member in turn until done() holds; fails after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            state = "; ".join(f"{m.name}: assigned {sorted(m.assignment)}, {len(m.received)} records" for m in members)
            raise CheckFailed(f"{what} not reached within {timeout_s} s ({state})")
        for m in members:
            m.poll_once(POLL_MS)


def pump_for(members, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in members:
            m.poll_once(POLL_MS)


def split_evenly(members, partitions):
    sets = [m.assignment for m in members]
    return all(sets) and sum(len(s) for s in sets) == len(set().union(*sets)) and set().union(*sets) == set(partitions)


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


def check_group_split(bootstrap):
    topic, group, parts = "kp-group-split", "kp-split", range(4)
    admin = make_admin(bootstrap)
    try:
        make_topic(admin, topic, 4)
    finally:
        admin.close()
    expected = produce_values(bootstrap, topic, record_values("before", 4, 8))
    members = [GroupMember(bootstrap, group, f"kp-split-{n}", topic) for n in ("a", "b")]
    try:
        pump(
            members,
            lambda: split_evenly(members, parts) and sum(len(m.received) for m in members) >= total(expected),
            "two members owning disjoint partitions that cover the topic, every record received",
        )
        owners = {p: m.name for m in members for p in m.assignment}
        expected = merge_expected(expected, produce_values(bootstrap, topic, record_values("after", 4, 5)))
        pump(
            members,
            lambda: sum(len(m.received) for m in members) >= total(expected),
            "the records written after the rebalance",
        )
        pump_for(members, 1.0)
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
    topic, group = "kp-group-resume", "kp-resume"
    admin = make_admin(bootstrap)
    try:
        make_topic(admin, topic, 4)
    finally:
        admin.close()
    first = produce_values(bootstrap, topic, record_values("first", 4, 6))
    reader = GroupMember(bootstrap, group, "kp-resume-1", topic)
    try:
        pump([reader], lambda: len(reader.received) >= total(first), "the first reader receiving every record")
        received_once([reader], first, "first reader")
        expect_eq(reader.commit_positions(), {p: 6 for p in range(4)}, "positions committed")
        for p in range(4):
            tp = TopicPartition(topic, p)
            expect_eq(reader.consumer.committed(tp, timeout_ms=TIMEOUT_MS), 6, f"committed({tp})")
    finally:
        reader.close()
    second = produce_values(bootstrap, topic, record_values("second", 4, 3))
    resumed = GroupMember(bootstrap, group, "kp-resume-2", topic)
    try:
        pump([resumed], lambda: len(resumed.received) >= total(second), "the new member receiving the new records")
        pump_for([resumed], 1.0)
        received_once([resumed], second, "new member after the commit (nothing before the committed offsets)")
        expect_eq(sorted(resumed.assignment), [0, 1, 2, 3], "new member's assignment")
    finally:
        resumed.close()


def listed(admin, group, **kwargs):
    return {g["group_id"]: g for g in admin.list_groups(**kwargs)}.get(group)


def check_group_admin(bootstrap):
    topic, group = "kp-group-admin", "kp-admin-group"
    admin = make_admin(bootstrap)
    members = []
    try:
        make_topic(admin, topic, 4)
        expected = produce_values(bootstrap, topic, record_values("admin", 4, 5))
        members = [GroupMember(bootstrap, group, f"kp-admin-{n}", topic) for n in ("a", "b")]
        pump(
            members,
            lambda: split_evenly(members, range(4)) and sum(len(m.received) for m in members) >= total(expected),
            "two members sharing the topic, every record received",
        )
        received_once(members, expected, "admin group")
        for m in members:
            m.commit_positions()
        want_offsets = {TopicPartition(topic, p): 5 for p in range(4)}

        g = listed(admin, group)
        expect(g is not None, f"{group} missing from list_groups()")
        expect_eq((g.get("protocol_type"), g.get("group_state")), ("consumer", "Stable"), "list_groups() entry")
        expect(
            listed(admin, group, states_filter=["Stable"]) is not None,
            "list_groups(states_filter=[Stable]) leaves out the group",
        )
        expect(
            listed(admin, group, states_filter=["Empty"]) is None,
            "list_groups(states_filter=[Empty]) lists the active group",
        )

        desc = admin.describe_groups([group])[group]
        expect_eq(desc.get("error"), None, "describe_groups error")
        expect_eq(
            (desc["group_state"], desc["protocol_type"], desc["protocol_data"]),
            ("Stable", "consumer", "range"),
            "describe_groups state, protocol type, assignor",
        )
        described = {}
        for md in desc["members"]:
            expect(md["client_host"], f"member {md['member_id']} has no host")
            expect(
                md["member_id"].startswith(md["client_id"] + "-"),
                f"member id {md['member_id']!r} (client {md['client_id']!r})",
            )
            # kafka-python decodes the ConsumerProtocol subscription and assignment.
            expect_eq(md["member_metadata"]["topics"], [topic], f"{md['client_id']} subscription")
            described[md["client_id"]] = sorted(
                (t["topic"], p) for t in md["member_assignment"]["assigned_partitions"] for p in t["partitions"]
            )
        expect_eq(described, {m.name: sorted((topic, p) for p in m.assignment) for m in members}, "described members")

        offsets = admin.list_group_offsets(group)[group]
        expect_eq({tp: oam.offset for tp, oam in offsets.items()}, want_offsets, "list_group_offsets (whole group)")
        some = [TopicPartition(topic, 0), TopicPartition(topic, 2)]
        offsets = admin.list_group_offsets({group: some})[group]
        expect_eq(
            {tp: oam.offset for tp, oam in offsets.items()},
            {tp: 5 for tp in some},
            "list_group_offsets (two partitions)",
        )

        expect_eq(admin.delete_groups([group]), {group: "NonEmptyGroupError"}, "delete_groups with active members")

        for m in members:
            m.close()
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while (g := listed(admin, group)) is None or g.get("group_state") != "Empty":
            expect(time.monotonic() < deadline, f"list_groups() entry after the members closed: {g}")
            time.sleep(0.2)
        desc = admin.describe_groups([group])[group]
        expect_eq((desc["group_state"], desc["members"]), ("Empty", []), "describe_groups after close")
        offsets = admin.list_group_offsets(group)[group]
        expect_eq({tp: oam.offset for tp, oam in offsets.items()}, want_offsets, "list_group_offsets after close")

        expect_eq(admin.delete_groups([group]), {group: "OK"}, "delete_groups once the members are closed")
        expect(listed(admin, group) is None, f"{group} still listed after delete_groups")
        expect_eq(admin.list_group_offsets(group)[group], {}, "list_group_offsets after delete")
        expect_eq(admin.delete_groups([group]), {group: "GroupIdNotFoundError"}, "deleting the deleted group again")
    finally:
        for m in members:
            m.close()
        admin.close()


def check_inferred_version(bootstrap):
    """kafka-python infers the broker's version from its ApiVersions: Produce
    v13 (topic ids) and the rest of Kafka 4.1's versions make it Kafka 4.1."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        inferred = admin._client.check_version()
    finally:
        admin.close()
    assert tuple(inferred[:2]) >= (4, 1), f"kafka-python takes the broker for Kafka {inferred}"


def main():
    bootstrap = bootstrap_from_argv("kafka_python_check.py")
    checks = Checks("kafka_python_check.py", deadline_s=60)
    Checks.note(f"kafka-python {kafka.__version__}")
    recorder_ok = _install_batch_recorder()
    if not recorder_ok:
        Checks.note("this kafka-python has no MemoryRecords.next_batch: batch headers not inspected")
    checks.run("kafka-python: default producer is idempotent", check_default_idempotence)
    checks.run("kafka-python: infers Kafka 4.1 from ApiVersions", check_inferred_version, bootstrap)
    for codec in CODECS:
        checks.run(
            f"kafka-python: idempotent produce + assign/seek_to_beginning read-back, compression={codec}",
            roundtrip,
            bootstrap,
            codec,
            recorder_ok,
        )
    checks.run("kafka-python: beginning/end offsets and offsets_for_times (ListOffsets)", offsets_lookup, bootstrap)
    checks.run(
        "kafka-python group: two consumers split a 4-partition topic, every record consumed exactly once",
        check_group_split,
        bootstrap,
    )
    checks.run(
        "kafka-python group: commit, close, a new consumer resumes after the committed offsets",
        check_group_resume,
        bootstrap,
    )
    checks.run(
        "kafka-python admin: list_groups/describe_groups/list_group_offsets/delete_groups (NonEmptyGroup while active)",
        check_group_admin,
        bootstrap,
    )
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
