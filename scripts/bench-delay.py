"""Delayed delivery, measured (run through scripts/bench-delay.sh).

1. Accuracy. BENCH_RECORDS records are produced at BENCH_RATE per second to
   a LogAppendTime topic with weir.delivery.delay.ms = BENCH_DELAY_MS, read
   by a consumer assigned its one partition. A record is due at its
   timestamp (when the broker appended it) plus the delay; its lateness is
   when the consumer got it minus that. The same load on a topic without a
   delay gives the reference: when the consumer got a record minus its
   timestamp. Printed: p50, p99 and max of both, and how many records came
   early (there must be none).
2. Holding. BENCH_HELD records (100 bytes each) are produced to a topic
   with a delay of ten minutes, then a consumer polls it for five seconds:
   it must get nothing. Printed: the broker's resident memory before and
   after (the log is in the page cache, not the heap), and the CPU time
   the broker spent during the five seconds of polling.
"""

import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
BROKER_PID = int(sys.argv[2])
RECORDS = int(os.environ.get("BENCH_RECORDS", "20000"))
RATE = int(os.environ.get("BENCH_RATE", "2000"))
DELAY_MS = int(os.environ.get("BENCH_DELAY_MS", "2000"))
HELD = int(os.environ.get("BENCH_HELD", "1000000"))


def create(name, configs):
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=configs)])
    futures[name].result()


def consumer(topic):
    c = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": "bench-" + uuid.uuid4().hex,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    return c


def latencies(topic, delay_ms):
    """Produces RECORDS at RATE while consuming; returns received - due, ms."""
    c = consumer(topic)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 1})
    got = []
    sent = 0
    start = time.time()
    deadline = start + RECORDS / RATE + delay_ms / 1000 + 30
    while len(got) < RECORDS and time.time() < deadline:
        due_sent = min(RECORDS, int((time.time() - start) * RATE))
        while sent < due_sent:
            p.produce(topic, b"x" * 100)
            sent += 1
        p.poll(0)
        for m in c.consume(1000, 0.01):
            if m.error():
                continue
            now_ms = time.time() * 1000
            _, ts = m.timestamp()
            got.append(now_ms - (ts + delay_ms))
    p.flush()
    c.close()
    return got


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


create("reference", {"message.timestamp.type": "LogAppendTime"})
create(
    "delayed",
    {"message.timestamp.type": "LogAppendTime", "weir.delivery.delay.ms": str(DELAY_MS)},
)
reference = latencies("reference", 0)
delayed = latencies("delayed", DELAY_MS)
print(f"records {RECORDS} at {RATE}/s, delay {DELAY_MS} ms")
for name, values in [("no delay (received - appended)", reference), ("delayed (received - due)", delayed)]:
    early = sum(1 for v in values if v < -1)
    print(
        f"{name}: {len(values)} records, p50 {pct(values, 0.5):.1f} ms, "
        f"p99 {pct(values, 0.99):.1f} ms, max {max(values):.1f} ms, early {early}"
    )

create("held", {"weir.delivery.delay.ms": "600000"})
before = rss_kib(BROKER_PID)
p = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 20, "batch.size": 1 << 20})
for _ in range(HELD):
    while True:
        try:
            p.produce("held", b"y" * 100)
            break
        except BufferError:
            p.poll(0.01)
p.flush()
after = rss_kib(BROKER_PID)
c = consumer("held")
cpu_before = cpu_seconds(BROKER_PID)
received = 0
polls = 0
end = time.time() + 5
while time.time() < end:
    received += sum(1 for m in c.consume(1000, 0.5) if not m.error())
    polls += 1
cpu = cpu_seconds(BROKER_PID) - cpu_before
c.close()
print(
    f"holding {HELD} records for 10 min: broker RSS {before // 1024} MiB before producing, "
    f"{after // 1024} MiB after; a consumer polling 5 s ({polls} polls) got {received} records; "
    f"broker CPU meanwhile {cpu:.2f} s"
)
