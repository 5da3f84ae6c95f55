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
"""

import sys
import time

from interop_util import (
    CODEC_IDS,
    CODECS,
    Checks,
    compare_records,
    bootstrap_from_argv,
    expect,
    expect_eq,
    expected_records,
)

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
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


def main():
    bootstrap = bootstrap_from_argv("kafka_python_check.py")
    checks = Checks("kafka_python_check.py", deadline_s=60)
    Checks.note(f"kafka-python {kafka.__version__}")
    recorder_ok = _install_batch_recorder()
    if not recorder_ok:
        Checks.note("this kafka-python has no MemoryRecords.next_batch: batch headers not inspected")
    checks.run("kafka-python: default producer is idempotent", check_default_idempotence)
    for codec in CODECS:
        checks.run(
            f"kafka-python: idempotent produce + assign/seek_to_beginning read-back, compression={codec}",
            roundtrip,
            bootstrap,
            codec,
            recorder_ok,
        )
    checks.run("kafka-python: beginning/end offsets and offsets_for_times (ListOffsets)", offsets_lookup, bootstrap)
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
