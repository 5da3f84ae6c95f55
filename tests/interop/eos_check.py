"""Exactly-once consume-transform-produce with confluent-kafka transactions.

A worker process reads `eos-in-PROTOCOL` in a consumer group
(read_committed) of that group protocol (`classic`, or `consumer`: KIP-848,
where TxnOffsetCommit carries the member epoch), writes one output record per
input to `eos-out-PROTOCOL` and commits its consumer offsets in the same
transaction (send_offsets_to_transaction). It is killed with SIGKILL in the
middle of its work and started again; the restarted worker fences the dead
one's transactional id, its open transaction is aborted, and it resumes from
the offsets committed with the last committed transaction. A read_committed
reader must then see every input exactly once in the output.

Usage: eos_check.py HOST:PORT PROTOCOL            (the check)
       eos_check.py HOST:PORT PROTOCOL --worker   (one worker, run by the check)

A consumer-protocol group's session is the broker's: the check sets the
group's consumer.session.timeout.ms to 6 s (the broker must allow it, with
group.consumer.min.session.timeout.ms), so that the killed worker's
partitions go to the restarted one within the check's time.
"""

import collections
import os
import signal
import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from interop_util import Checks, expect, expect_eq

PARTITIONS = 3
INPUTS = 3000
# The worker stops after this long without new input.
IDLE_EXIT_S = 4.0


class Names:
    """The topics, group and transactional id of one protocol's run."""

    def __init__(self, protocol):
        self.input = f"eos-in-{protocol}"
        self.output = f"eos-out-{protocol}"
        self.group = f"eos-loop-{protocol}"
        self.transactional_id = f"eos-loop-worker-{protocol}"


def worker(bootstrap, protocol):
    names = Names(protocol)
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": names.group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    if protocol == "classic":
        # A consumer-protocol group's session is set on the group instead.
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer = Consumer(conf)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": names.transactional_id,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    consumer.subscribe([names.input])
    idle_since = time.monotonic()
    done = 0
    while time.monotonic() - idle_since < IDLE_EXIT_S:
        messages = consumer.consume(num_messages=50, timeout=0.5)
        messages = [m for m in messages if m.error() is None]
        if not consumer.assignment():
            # Idle only counts once the group has given this worker its
            # partitions (the killed worker's membership lingers a while).
            idle_since = time.monotonic()
        if not messages:
            continue
        idle_since = time.monotonic()
        producer.begin_transaction()
        for message in messages:
            producer.produce(names.output, key=message.key(), value=b"out-" + message.value())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        done += len(messages)
        print(f"committed {done}", flush=True)
    consumer.close()
    return 0


def create_topics(bootstrap, names):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in (names.input, names.output)]
    )
    for future in futures.values():
        future.result(30)


def shorten_group_session(bootstrap, group):
    """A consumer-protocol group's session timeout is a group config."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry("consumer.session.timeout.ms", "6000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("consumer.heartbeat.interval.ms", "500", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def produce_inputs(bootstrap, topic):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(INPUTS):
        producer.produce(topic, key=f"k{i % 97}".encode(), value=f"in-{i:05}".encode())
        if i % 1000 == 999:
            producer.poll(0)
    expect_eq(producer.flush(30), 0, "inputs left unsent")


def start_worker(bootstrap, protocol):
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), bootstrap, protocol, "--worker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def committed_by(process, at_least, timeout_s):
    """Reads the worker's progress lines until it has committed `at_least`
    inputs; returns how many it reported."""
    deadline = time.monotonic() + timeout_s
    done = 0
    while done < at_least and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("committed "):
            done = int(line.split()[1])
    return done


def read_output(bootstrap, topic):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eos-reader-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values = []
    at_end = set()
    deadline = time.monotonic() + 30
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == -191:  # _PARTITION_EOF
                at_end.add(message.partition())
                continue
            raise KafkaException(message.error())
        values.append(message.value().decode())
    consumer.close()
    return values


def check_exactly_once_across_a_kill(bootstrap, protocol):
    names = Names(protocol)
    create_topics(bootstrap, names)
    if protocol == "consumer":
        shorten_group_session(bootstrap, names.group)
    produce_inputs(bootstrap, names.input)
    first = start_worker(bootstrap, protocol)
    reached = committed_by(first, INPUTS // 3, 40)
    first.send_signal(signal.SIGKILL)
    first.wait()
    expect(0 < reached < INPUTS, f"the first worker was killed midway (it had committed {reached})")
    second = start_worker(bootstrap, protocol)
    try:
        output, _ = second.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        second.kill()
        raise
    expect_eq(second.returncode, 0, f"the restarted worker's exit status (output: {output[-500:]!r})")
    values = read_output(bootstrap, names.output)
    counts = collections.Counter(values)
    duplicates = sorted(v for v, n in counts.items() if n > 1)
    expected = {f"out-in-{i:05}" for i in range(INPUTS)}
    missing = sorted(expected - set(counts))
    expect(not duplicates, f"{len(duplicates)} inputs written twice, e.g. {duplicates[:5]}")
    expect(not missing, f"{len(missing)} inputs never written, e.g. {missing[:5]}")
    expect_eq(len(values), INPUTS, "records in the output")


def main():
    if len(sys.argv) == 4 and sys.argv[3] == "--worker":
        return worker(sys.argv[1], sys.argv[2])
    if len(sys.argv) != 3 or sys.argv[2] not in ("classic", "consumer"):
        print(__doc__, file=sys.stderr)
        return 64
    protocol = sys.argv[2]
    checks = Checks(f"eos_check.py ({protocol})", 115)
    checks.run(
        f"confluent-kafka transactions, group.protocol={protocol}: consume-transform-produce killed "
        "with -9 and restarted writes every input exactly once",
        check_exactly_once_across_a_kill,
        sys.argv[1],
        protocol,
    )
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
