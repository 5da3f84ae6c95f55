#!/usr/bin/env python3
"""A rolling restart of a consumer group under a steady produce load, with the
classic protocol (range, cooperative-sticky) and the consumer protocol of
KIP-848, in one run against one broker.

For each protocol and each group size N: a topic of PARTITIONS partitions
gets RATE records/s (spread evenly); N consumers (one process each,
confluent-kafka) read it; once every partition flows, each consumer in turn
is closed and started again, waiting for the group to flow again before the
next. Measured per restart, from the close:

  pause  per partition, the time records of that partition did not flow
         beyond the normal gaps (a gap longer than GAP_MS counts, minus
         GAP_MS); summed over the restarts: the total consumption pause a
         partition suffered during the rolling restart
  stable the time until every partition flows again and the new member
         has partitions

Prints, per protocol and N: partitions paused at all, mean and max total
pause per partition, and the p50/max time to a stable group.

    python3 scripts/bench-rebalance.py BOOTSTRAP

Environment (defaults in brackets): BENCH_SIZES [3,12], BENCH_PARTITIONS
[24], BENCH_RATE [2000], BENCH_GAP_MS [200].
"""

import multiprocessing as mp
import os
import statistics
import sys
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

PROTOCOLS = [
    ("classic range", {"partition.assignment.strategy": "range"}),
    ("classic cooperative-sticky", {"partition.assignment.strategy": "cooperative-sticky"}),
    ("consumer protocol (uniform)", {"group.protocol": "consumer"}),
]
CLASSIC_TIMINGS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def consumer_process(bootstrap, group, topic, conf, events, stop, name):
    """One group member: reports (name, partition, time) per record and its
    assignment changes, until told to stop; then closes (leaves the group)."""
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
        "fetch.wait.max.ms": 50,
        **(CLASSIC_TIMINGS if "group.protocol" not in conf else {}),
        **conf,
    }
    consumer = Consumer(settings)

    def on_assign(c, partitions):
        if conf.get("partition.assignment.strategy") == "cooperative-sticky" or "group.protocol" in conf:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        events.put(("assign", name, [p.partition for p in partitions], time.monotonic()))

    def on_revoke(c, partitions):
        if conf.get("partition.assignment.strategy") == "cooperative-sticky" or "group.protocol" in conf:
            c.incremental_unassign(partitions)
        events.put(("revoke", name, [p.partition for p in partitions], time.monotonic()))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        messages = consumer.consume(500, 0.05)
        now = time.monotonic()
        seen = {m.partition() for m in messages if not m.error()}
        for p in seen:
            events.put(("record", name, p, now))
    consumer.close()
    events.put(("closed", name, None, time.monotonic()))


def producer_thread(bootstrap, topic, partitions, rate, stop):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    interval = 1.0 / rate
    i = 0
    next_at = time.monotonic()
    while not stop.is_set():
        producer.produce(topic, value=b"x" * 100, partition=i % partitions)
        i += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(10)


def run(bootstrap, label, conf, members, partitions, rate, gap):
    slug = "".join(c if c.isalnum() else "-" for c in label).strip("-")
    topic = f"rebalance-{slug}-{members}-{int(time.time())}"
    group = topic + "-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    stop_producing = threading.Event()
    producing = threading.Thread(target=producer_thread, args=(bootstrap, topic, partitions, rate, stop_producing))
    producing.start()
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    last = {}  # partition -> last time records arrived
    owners = {}  # partition -> member name

    def start(name):
        stop = ctx.Event()
        proc = ctx.Process(target=consumer_process, args=(bootstrap, group, topic, conf, events, stop, name))
        proc.start()
        return proc, stop

    def drain(until, pauses=None):
        while time.monotonic() < until:
            try:
                kind, name, what, at = events.get(timeout=0.05)
            except Exception:
                continue
            if kind == "record":
                if pauses is not None and what in last and at - last[what] > gap:
                    pauses[what] = pauses.get(what, 0.0) + (at - last[what] - gap)
                last[what] = at
            elif kind == "assign":
                for p in what:
                    owners[p] = name
            elif kind == "revoke":
                for p in what:
                    if owners.get(p) == name:
                        owners.pop(p)

    def flowing(since):
        return all(last.get(p, 0) > since for p in range(partitions))

    running = {f"m{i}": start(f"m{i}") for i in range(members)}
    deadline = time.monotonic() + 120
    while not flowing(time.monotonic() - 0.5):
        drain(time.monotonic() + 0.2)
        if time.monotonic() > deadline:
            raise SystemExit(f"{label}, N={members}: the group never flowed")
    drain(time.monotonic() + 2.0)
    pauses = {}
    stable = []
    for i in range(members):
        name = f"m{i}"
        proc, stop = running.pop(name)
        began = time.monotonic()
        stop.set()
        proc.join(30)
        new_name = f"m{i}b"
        running[new_name] = start(new_name)
        deadline = began + 120
        while True:
            now = time.monotonic()
            drain(now + 0.05, pauses)
            # Flowing again: every partition delivered after the close, and
            # the new member owns some.
            if (
                all(last.get(p, 0) > began for p in range(partitions))
                and any(o == new_name for o in owners.values())
                and now - max(last.values()) < gap / 1000
            ):
                stable.append(now - began)
                break
            if now > deadline:
                raise SystemExit(f"{label}, N={members}: no stable group after restarting {name}")
        drain(time.monotonic() + 1.0, pauses)
    for _, (proc, stop) in running.items():
        stop.set()
    for _, (proc, stop) in running.items():
        proc.join(30)
    stop_producing.set()
    producing.join()
    totals = [pauses.get(p, 0.0) for p in range(partitions)]
    return {
        "paused": sum(1 for t in totals if t > 0),
        "mean": statistics.mean(totals),
        "max": max(totals),
        "stable_p50": statistics.median(stable),
        "stable_max": max(stable),
    }


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    bootstrap = sys.argv[1]
    sizes = [int(n) for n in os.environ.get("BENCH_SIZES", "3,12").split(",")]
    partitions = int(os.environ.get("BENCH_PARTITIONS", "24"))
    rate = int(os.environ.get("BENCH_RATE", "2000"))
    gap = int(os.environ.get("BENCH_GAP_MS", "200")) / 1000
    print(f"rolling restart, {partitions} partitions, {rate} records/s; pause = time beyond {gap * 1000:.0f} ms gaps")
    print(f"| protocol | N | partitions paused | pause per partition, mean / max (s) | time to stable, p50 / max (s) |")
    print(f"|---|---:|---:|---:|---:|")
    for members in sizes:
        for label, conf in PROTOCOLS:
            r = run(bootstrap, label, conf, members, partitions, rate, gap)
            print(
                f"| {label} | {members} | {r['paused']}/{partitions} | {r['mean']:.2f} / {r['max']:.2f} "
                f"| {r['stable_p50']:.2f} / {r['stable_max']:.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
