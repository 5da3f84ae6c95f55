"""Share-group consume throughput, measured (run through scripts/bench-share.sh).

BENCH_RECORDS records of BENCH_VALUE_BYTES bytes are produced to a topic of
one partition. The reference is a classic consumer assigned that partition,
reading it from the start. Then, for each count in BENCH_CONSUMERS, a new
share group (share.auto.offset.reset=earliest) of that many ShareConsumers,
each in its own process, reads the partition until the group has received
every record; each record is acknowledged (implicitly, on the next poll)
and the last acknowledgements are committed. Printed per run: records/s,
MB/s, the ratio to the classic consumer, and how many records were
delivered more than once (there must be none).
"""

import multiprocessing
import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

BOOTSTRAP = sys.argv[1]
RECORDS = int(os.environ.get("BENCH_RECORDS", "1000000"))
VALUE_BYTES = int(os.environ.get("BENCH_VALUE_BYTES", "100"))
CONSUMERS = [int(n) for n in os.environ.get("BENCH_CONSUMERS", "1,4,16").split(",")]
TOPIC = "bench-share"


def produce():
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result()
    p = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, "batch.num.messages": 10000})
    value = b"x" * VALUE_BYTES
    for i in range(RECORDS):
        while True:
            try:
                p.produce(TOPIC, value=value, key=str(i).encode())
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0, "records left unsent"


def classic():
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "bench-" + uuid.uuid4().hex, "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    start = time.time()
    while got < RECORDS:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.time() - start
    c.close()
    return elapsed


def share_member(group, received, keys_seen, done):
    c = ShareConsumer({"bootstrap.servers": BOOTSTRAP, "group.id": group})
    c.subscribe([TOPIC])
    mine = []
    while not done.is_set():
        msgs = c.poll(0.2)
        n = 0
        for m in msgs:
            if m.error() is None:
                mine.append(int(m.key()))
                n += 1
        if n:
            with received.get_lock():
                received.value += n
    c.commit_sync()
    c.close()
    keys_seen.put(mine)


def share(count):
    group = f"bench-share-{count}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource("GROUP", group, incremental_configs=[entry])]).values():
        f.result()
    received = multiprocessing.Value("q", 0)
    keys_seen = multiprocessing.Queue()
    done = multiprocessing.Event()
    start = time.time()
    members = [multiprocessing.Process(target=share_member, args=(group, received, keys_seen, done)) for _ in range(count)]
    for m in members:
        m.start()
    deadline = start + 600
    while received.value < RECORDS and time.time() < deadline:
        time.sleep(0.01)
    elapsed = time.time() - start
    done.set()
    seen = []
    for _ in members:
        seen.extend(keys_seen.get(timeout=60))
    for m in members:
        m.join(60)
    return elapsed, len(seen) - len(set(seen)), len(set(seen))


def main():
    multiprocessing.set_start_method("fork")
    produce()
    mb = RECORDS * VALUE_BYTES / 1e6
    reference = classic()
    print(f"records: {RECORDS} x {VALUE_BYTES} B, one partition")
    print("| reader | records/s | MB/s (values) | vs classic | delivered twice |")
    print("|---|---:|---:|---:|---:|")
    print(f"| classic consumer | {RECORDS / reference:,.0f} | {mb / reference:.1f} | 1.00 | — |")
    for count in CONSUMERS:
        elapsed, twice, distinct = share(count)
        assert distinct == RECORDS, f"{count} share consumers received {distinct} of {RECORDS} records"
        print(
            f"| share group, {count} consumer{'s' if count > 1 else ''} | {RECORDS / elapsed:,.0f} | "
            f"{mb / elapsed:.1f} | {reference / elapsed:.2f} | {twice} |"
        )


if __name__ == "__main__":
    main()
