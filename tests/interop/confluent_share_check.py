"""Share groups (KIP-932) with confluent-kafka's ShareConsumer against weir.

Usage: python3 confluent_share_check.py HOST:PORT

Checks:
- Several share consumers of one partition each get records the others do
  not, and together all of them; a consumer joining later gets nothing the
  group acknowledged.
- A consumer killed with SIGKILL while holding acquired records: another
  member gets exactly those records once their lock expires
  (share.record.lock.duration.ms), and nothing acknowledged again.
- RELEASE redelivers a record with a higher delivery count; REJECT and
  reaching share.delivery.count.limit archive it (never delivered again).
- Dead letters (KIP-1191): a rejected record and one released until
  share.delivery.count.limit are written once each to the group's
  dead-letter topic, with their key, value and headers copied and the
  __dlq.errors.* headers naming topic, partition, offset, group, delivery
  count and reason; a dead letter its topic refuses (too few in-sync
  replicas) is retried, and written once when the topic takes it.
- share.isolation.level=read_committed: records of aborted transactions are
  never delivered, committed ones are.
- weir.share.release.backoff.ms (a Weir extension): a released record comes
  back only after the backoff.
- A topic with weir.delivery.delay.ms and a record with the weir-deliver-at
  header: nothing is delivered early, everything on time.
"""

import os
import subprocess
import sys
import time

import confluent_kafka
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from interop_util import Checks, bootstrap_from_argv, expect, expect_eq

LOCK_MS = 15000  # group.share.min.record.lock.duration.ms


def make_topic(bootstrap, topic, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result()


def set_group_configs(bootstrap, group, configs):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    for future in admin.incremental_alter_configs([ConfigResource("GROUP", group, incremental_configs=entries)]).values():
        future.result()


def produce(bootstrap, topic, values, headers=None, key=None, per_batch=None):
    """Produces the values; with per_batch, flushes after each that many so
    that each batch holds at most per_batch records."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values, 1):
        producer.produce(topic, key=key, value=v.encode(), headers=headers)
        if per_batch and i % per_batch == 0:
            expect_eq(producer.flush(10), 0, "records left unsent")
    expect_eq(producer.flush(10), 0, "records left unsent")


def share_consumer(bootstrap, group, topic, explicit=False):
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(conf)
    consumer.subscribe([topic])
    return consumer


def poll_values(consumer, timeout_s=1.0):
    got = []
    for m in consumer.poll(timeout_s):
        expect(m.error() is None, f"poll error: {m.error()}")
        got.append(m)
    return got


def check_consumers_share_a_partition(bootstrap):
    topic, group, count = "sh-split", "sh-split-group", 3000
    make_topic(bootstrap, topic)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    consumers = [share_consumer(bootstrap, group, topic) for _ in range(3)]
    for c in consumers:
        expect_eq(poll_values(c, 1.0), [], "records of an empty topic")
    # More than one fetch acquires (500 records, rounded up to the end of a
    # batch), while all three members are fetching. Batches of 100: a fetch
    # acquires a batch whole, so one batch of 3000 would go to one member.
    produce(bootstrap, topic, [f"r{i}" for i in range(count)], per_batch=100)
    got = [[] for _ in consumers]
    deadline = time.time() + 40
    while sum(len(g) for g in got) < count and time.time() < deadline:
        for c, g in zip(consumers, got):
            # Few records per poll, so that every member gets a share.
            g.extend(m.value().decode() for m in poll_values(c, 0.2))
    every = [v for g in got for v in g]
    expect_eq(len(every), count, "records delivered to the group")
    expect_eq(sorted(set(every)), sorted(f"r{i}" for i in range(count)), "distinct records delivered")
    busy = sum(1 for g in got if g)
    expect(busy >= 2, f"one partition, three members: records went to {busy} of them ({[len(g) for g in got]})")
    for c in consumers:
        # Implicit acknowledgements go with the next poll or commit
        # (librdkafka's close does not send those of the last poll).
        c.commit_sync()
        c.close()
    # Acknowledged: never again.
    late = share_consumer(bootstrap, group, topic)
    again = []
    end = time.time() + 4
    while time.time() < end:
        again.extend(m.value().decode() for m in poll_values(late, 0.5))
    late.commit_sync()
    late.close()
    expect(not again, f"{len(again)} records delivered again after they were acknowledged, from {again[:3]}")


HOLDER = r"""
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
held = []
end = time.time() + 20
while not held and time.time() < end:
    held = [m for m in c.poll(0.5) if m.error() is None]
print(" ".join(m.value().decode() for m in held), flush=True)
time.sleep(600)  # killed while holding them
"""


def check_killed_consumer_records_redelivered(bootstrap):
    topic, group = "sh-killed", "sh-killed-group"
    make_topic(bootstrap, topic)
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS)},
    )
    produce(bootstrap, topic, [f"k{i}" for i in range(20)])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, bootstrap, group, topic], stdout=subprocess.PIPE, text=True
    )
    held = holder.stdout.readline().split()
    holder.kill()
    holder.wait()
    killed_at = time.time()
    expect(held, "the holder acquired nothing")
    # A second member acknowledges what it gets; the held records come
    # back only once their lock expired.
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    got = {}
    deadline = killed_at + LOCK_MS / 1000 + 25
    while len(got) < 20 and time.time() < deadline:
        for m in poll_values(consumer, 0.5):
            value = m.value().decode()
            expect(value not in got, f"{value} delivered twice to the survivor")
            got[value] = time.time()
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
    consumer.close()
    expect_eq(sorted(got), sorted(f"k{i}" for i in range(20)), "records the survivor got")
    early = [v for v in held if got[v] < killed_at + LOCK_MS / 1000 - 1.5]
    expect(not early, f"held records redelivered before their lock expired: {early}")


def keep_reject_poison(bootstrap, group, topic):
    """Consumes `topic` in `group`, accepting "keep", rejecting "reject" and
    releasing anything else, until "poison" came three times (the delivery
    limit) and nothing more does; the values delivered, in order."""
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    seen = []
    deadline = time.time() + 30
    while time.time() < deadline:
        msgs = poll_values(consumer, 0.5)
        for m in msgs:
            value = m.value().decode()
            seen.append(value)
            kind = {"keep": AcknowledgeType.ACCEPT, "reject": AcknowledgeType.REJECT}.get(value, AcknowledgeType.RELEASE)
            consumer.acknowledge(m, kind)
        if msgs:
            consumer.commit_sync()
        if seen.count("poison") >= 3 and not msgs:
            break
    consumer.close()
    return seen


def check_release_reject_and_delivery_limit(bootstrap):
    topic, group = "sh-acks", "sh-acks-group"
    make_topic(bootstrap, topic)
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "3"},
    )
    produce(bootstrap, topic, ["keep", "reject", "poison"])
    seen = keep_reject_poison(bootstrap, group, topic)
    expect_eq(seen.count("keep"), 1, "deliveries of the accepted record")
    expect_eq(seen.count("reject"), 1, "deliveries of the rejected record")
    expect_eq(seen.count("poison"), 3, "deliveries of a record released each time (share.delivery.count.limit=3)")


def read_all(bootstrap, topic, partitions, settle_s=3.0, first_within_s=None):
    """Every record of `topic` from the beginning, polled until none came for
    settle_s (for first_within_s before the first one)."""
    first_within_s = first_within_s or settle_s
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, quiet_since = [], time.time()
    while time.time() - quiet_since < (settle_s if got else first_within_s):
        m = consumer.poll(0.2)
        if m is None:
            continue
        expect(m.error() is None, f"poll error: {m.error()}")
        got.append(m)
        quiet_since = time.time()
    consumer.close()
    return got


def check_dead_letters(bootstrap):
    topic, group, dlq = "sh-dead", "sh-dead-group", "dlq.sh-dead"
    make_topic(bootstrap, topic)
    make_topic(bootstrap, dlq, partitions=2, config={"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(
        bootstrap,
        group,
        {
            "share.auto.offset.reset": "earliest",
            "share.delivery.count.limit": "3",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true",
        },
    )
    produce(bootstrap, topic, ["keep"])
    produce(bootstrap, topic, ["reject"], key=b"k-reject", headers=[("trace", b"t-1")])
    produce(bootstrap, topic, ["poison"])
    seen = keep_reject_poison(bootstrap, group, topic)
    expect_eq(seen.count("poison"), 3, "deliveries of the poison record")
    letters = read_all(bootstrap, dlq, 2)
    by_value = {m.value().decode(): m for m in letters}
    expect_eq(sorted(m.value().decode() for m in letters), ["poison", "reject"], "dead letters (each once)")
    expect_eq(len({m.partition() for m in letters}), 1, "dead-letter partitions of one share-partition")
    for value, offset, count, reason in [("reject", 1, "1", "REJECTED"), ("poison", 2, "3", "DELIVERY_COUNT_LIMIT")]:
        headers = dict(by_value[value].headers())
        expect_eq(headers.get("__dlq.errors.topic"), topic.encode(), f"{value}: source topic header")
        expect_eq(headers.get("__dlq.errors.partition"), b"0", f"{value}: source partition header")
        expect_eq(headers.get("__dlq.errors.offset"), str(offset).encode(), f"{value}: source offset header")
        expect_eq(headers.get("__dlq.errors.group.id"), group.encode(), f"{value}: group header")
        expect_eq(headers.get("__dlq.errors.delivery.count"), count.encode(), f"{value}: delivery count header")
        expect_eq(headers.get("__dlq.errors.reason"), reason.encode(), f"{value}: reason header")
    expect_eq(by_value["reject"].key(), b"k-reject", "the copied key")
    expect_eq(dict(by_value["reject"].headers()).get("trace"), b"t-1", "the copied header")


def check_dead_letters_wait_for_their_topic(bootstrap):
    topic, group, dlq = "sh-dead-later", "sh-dead-later-group", "dlq.sh-dead-later"
    make_topic(bootstrap, topic)
    # One replica cannot satisfy min.insync.replicas=2: writes fail until it is lowered.
    make_topic(bootstrap, dlq, config={"errors.deadletterqueue.group.enable": "true", "min.insync.replicas": "2"})
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": dlq},
    )
    produce(bootstrap, topic, ["reject"])
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    deadline = time.time() + 20
    rejected = False
    while not rejected and time.time() < deadline:
        for m in poll_values(consumer, 0.5):
            consumer.acknowledge(m, AcknowledgeType.REJECT)
            consumer.commit_sync()
            rejected = True
    consumer.close()
    expect(rejected, "the record was never delivered")
    expect_eq(read_all(bootstrap, dlq, 1, settle_s=2.0), [], "dead letters while the topic refuses writes")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource("TOPIC", dlq, incremental_configs=[entry])]).values():
        future.result()
    letters = read_all(bootstrap, dlq, 1, settle_s=3.0, first_within_s=25.0)
    expect_eq([m.value() for m in letters], [None], "the dead letter, written once the topic takes it (no record copy)")
    expect_eq(dict(letters[0].headers()).get("__dlq.errors.offset"), b"0", "its source offset")


def check_read_committed(bootstrap):
    topic, group = "sh-txn", "sh-txn-group"
    make_topic(bootstrap, topic)
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "sh-txn-producer"})
    producer.init_transactions(10)
    for values, commit in [(["a1", "a2"], False), (["c1", "c2"], True), (["a3"], False)]:
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v.encode())
        producer.flush(10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    produce(bootstrap, topic, ["plain"])
    consumer = share_consumer(bootstrap, group, topic)
    got = []
    deadline = time.time() + 15
    while "plain" not in got and time.time() < deadline:
        got.extend(m.value().decode() for m in poll_values(consumer, 0.5))
    consumer.commit_sync()
    consumer.close()
    expect_eq(got, ["c1", "c2", "plain"], "records delivered to a read_committed share group")


def check_release_backoff(bootstrap):
    topic, group, backoff_ms = "sh-backoff", "sh-backoff-group", 2000
    make_topic(bootstrap, topic)
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "weir.share.release.backoff.ms": str(backoff_ms)},
    )
    produce(bootstrap, topic, ["again"])
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    deliveries = []
    deadline = time.time() + 30
    while len(deliveries) < 2 and time.time() < deadline:
        for m in poll_values(consumer, 0.2):
            deliveries.append(time.time())
            consumer.acknowledge(m, AcknowledgeType.RELEASE if len(deliveries) == 1 else AcknowledgeType.ACCEPT)
            consumer.commit_sync()
    consumer.close()
    expect_eq(len(deliveries), 2, "deliveries of the released record")
    gap = deliveries[1] - deliveries[0]
    expect(gap >= backoff_ms / 1000 - 0.3, f"redelivered {gap:.2f} s after its release, before the {backoff_ms} ms backoff")


def check_delayed_delivery(bootstrap):
    topic, group, delay_ms = "sh-delayed", "sh-delayed-group", 2000
    make_topic(bootstrap, topic, config={"weir.delivery.delay.ms": str(delay_ms)})
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    consumer = share_consumer(bootstrap, group, topic)
    poll_values(consumer, 1.0)  # joined before the records come
    at_ms = int(time.time() * 1000) + 4000
    produce(bootstrap, topic, [f"d{i}" for i in range(5)])
    produce(bootstrap, topic, ["deferred"], headers=[("weir-deliver-at", str(at_ms).encode())])
    got = []
    deadline = time.time() + 20
    while len(got) < 6 and time.time() < deadline:
        got.extend((m.value().decode(), m.timestamp()[1], time.time() * 1000) for m in poll_values(consumer, 0.2))
    consumer.close()
    expect_eq(sorted(v for v, _, _ in got), sorted([f"d{i}" for i in range(5)] + ["deferred"]), "records delivered")
    early = [v for v, ts, received in got if received < ts + delay_ms]
    expect(not early, f"records delivered before the topic's delay: {early}")
    deferred = [received for v, _, received in got if v == "deferred"]
    expect(deferred[0] >= at_ms, f"the weir-deliver-at record came {at_ms - deferred[0]:.0f} ms early")


def main():
    bootstrap = bootstrap_from_argv("confluent_share_check.py")
    checks = Checks("confluent_share_check.py", deadline_s=150)
    Checks.note(f"confluent-kafka {confluent_kafka.version()[0]}, librdkafka {confluent_kafka.libversion()[0]}")
    checks.run(
        "confluent-kafka share group: three ShareConsumers of one partition get disjoint records, all of them, none again",
        check_consumers_share_a_partition,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: RELEASE redelivers, REJECT and share.delivery.count.limit archive",
        check_release_reject_and_delivery_limit,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: rejected and over-delivered records land in the dead-letter topic once, with their headers",
        check_dead_letters,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: a dead letter the topic refuses is written, once, when it takes it",
        check_dead_letters_wait_for_their_topic,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: share.isolation.level=read_committed never delivers aborted records",
        check_read_committed,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: weir.share.release.backoff.ms holds a released record back",
        check_release_backoff,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: weir.delivery.delay.ms and weir-deliver-at deliver nothing early",
        check_delayed_delivery,
        bootstrap,
    )
    checks.run(
        "confluent-kafka share group: records of a consumer killed with SIGKILL come back after their lock, once",
        check_killed_consumer_records_redelivered,
        bootstrap,
    )
    checks.finish()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
