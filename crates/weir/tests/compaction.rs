//! Log compaction on the real broker: topics with `cleanup.policy=compact`
//! keep each key's latest value at its offset, tombstones go after
//! `delete.retention.ms`, `__consumer_offsets` is compacted too, and a
//! broker killed while cleaning comes back with every key's latest value.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Weir;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// One record as a consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    offset: i64,
    key: String,
    value: Option<String>,
}

fn create_topic(bootstrap: &str, name: &str, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let mut topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = common::cli::block_on(admin.create_topics(
        &[topic],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
    ))
    .expect("create topics");
    for result in results {
        result.expect("topic created");
    }
}

fn producer(bootstrap: &str, compression: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("compression.type", compression)
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer")
}

/// Sends `records` (`None`: a tombstone) and waits until all are acknowledged.
fn produce(producer: &BaseProducer, topic: &str, records: &[(String, Option<String>)]) {
    for (key, value) in records {
        let mut record = BaseRecord::<str, str>::to(topic).key(key.as_str());
        if let Some(value) = value {
            record = record.payload(value.as_str());
        }
        common::send_queued(producer, record);
        producer.poll(Duration::ZERO);
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every record acknowledged");
}

/// Every record of partition 0 of `topic` from the start to the end.
fn read_from_start(bootstrap: &str, topic: &str) -> Vec<Seen> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "compaction-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no end of partition in 30 s");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => seen.push(Seen {
                offset: message.offset(),
                key: String::from_utf8_lossy(message.key().expect("keyed")).into_owned(),
                value: message
                    .payload()
                    .map(|v| String::from_utf8_lossy(v).into_owned()),
            }),
            Some(Err(KafkaError::PartitionEOF(_))) => return seen,
            Some(Err(error)) => panic!("consume: {error}"),
            None => {}
        }
    }
}

/// The latest value of every key, in order of production.
fn latest(records: &[(String, Option<String>)]) -> BTreeMap<String, Option<String>> {
    records.iter().cloned().collect()
}

/// Offsets increase, and the last value of every key is the expected one
/// (a key whose latest record is a tombstone may be gone).
fn check_latest(seen: &[Seen], expected: &BTreeMap<String, Option<String>>) {
    for pair in seen.windows(2) {
        assert!(pair[0].offset < pair[1].offset, "offsets must increase");
    }
    let mut last: BTreeMap<&str, &Option<String>> = BTreeMap::new();
    for record in seen {
        last.insert(&record.key, &record.value);
    }
    for (key, value) in expected {
        match value {
            Some(_) => assert_eq!(last.get(key.as_str()), Some(&value), "key {key}"),
            None => assert!(
                matches!(last.get(key.as_str()), None | Some(None)),
                "deleted key {key} is back"
            ),
        }
    }
}

/// Whether the log holds exactly one record per live key, its latest
/// value, and nothing else (no tombstones, no older values).
fn fully_compacted(seen: &[Seen], expected: &BTreeMap<String, Option<String>>) -> bool {
    let live: BTreeMap<&str, &str> = expected
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_deref()?)))
        .collect();
    let got: BTreeMap<&str, &str> = seen
        .iter()
        .filter_map(|r| Some((r.key.as_str(), r.value.as_deref()?)))
        .collect();
    seen.len() == live.len() && got == live
}

fn partition_dir(weir: &Weir, topic: &str) -> PathBuf {
    weir.data_dir.join(format!("{topic}-0"))
}

fn files_ending(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
                .count()
        })
        .unwrap_or(0)
}

/// `rounds` updates of `keys` keys, with about `size` bytes of values that
/// do not compress.
fn updates(keys: usize, rounds: usize, size: usize) -> Vec<(String, Option<String>)> {
    (0..rounds)
        .flat_map(|round| {
            (0..keys).map(move |k| {
                let mut state = (round * 1_000_003 + k) as u64;
                let noise: String = (0..size.div_ceil(16))
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        format!("{state:016x}")
                    })
                    .collect();
                (format!("k{k}"), Some(format!("k{k}-r{round}-{noise}")))
            })
        })
        .collect()
}

/// Waits `segment.ms` and sends one record with a key of its own: the
/// segment before it rolls, so everything else becomes cleanable, and the
/// active segment holds only this record (the only one of its key: the
/// active segment is never cleaned).
fn roll_with_marker(
    producer: &BaseProducer,
    topic: &str,
    segment_ms: u64,
    records: &mut Vec<(String, Option<String>)>,
) {
    std::thread::sleep(Duration::from_millis(segment_ms + 100));
    let marker = vec![(
        format!("zz-marker-{}", records.len()),
        Some("end".to_owned()),
    )];
    produce(producer, topic, &marker);
    records.extend(marker);
}

#[test]
fn a_compacted_topic_keeps_each_keys_latest_value_and_drops_tombstones_later() {
    let weir = Weir::start(&["--log-cleaner-backoff-ms", "100"]);
    let topic = "compacted";
    let delete_retention = Duration::from_millis(3000);
    create_topic(
        &weir.kafka,
        topic,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "2048"),
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "3000"),
        ],
    );
    let producer = producer(&weir.kafka, "none");
    let mut records = updates(20, 30, 10);
    produce(&producer, topic, &records);
    let tombstones: Vec<(String, Option<String>)> =
        (0..5).map(|k| (format!("k{k}"), None)).collect();
    produce(&producer, topic, &tombstones);
    let tombstoned_at = Instant::now();
    records.extend(tombstones);
    roll_with_marker(&producer, topic, 1000, &mut records);
    let expected = latest(&records);

    // First the duplicates go (tombstones stay, for now)...
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tombstones_seen = false;
    let seen = loop {
        let seen = read_from_start(&weir.kafka, topic);
        check_latest(&seen, &expected);
        let tombstones = seen.iter().filter(|r| r.value.is_none()).count();
        tombstones_seen |= tombstones > 0;
        if fully_compacted(&seen, &expected) {
            break seen;
        }
        assert!(
            Instant::now() < deadline,
            "not compacted in time: {} records, {tombstones} tombstones",
            seen.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // ...and the tombstones only after delete.retention.ms.
    assert!(tombstones_seen, "the tombstones were never served");
    assert!(tombstoned_at.elapsed() >= delete_retention);

    // Every live key once, with its latest value, at the offset it was
    // written at: offsets increase, with gaps where records went.
    assert_eq!(seen.len(), 16); // 20 keys, 5 deleted, 1 marker
    let keys: Vec<&str> = seen.iter().map(|r| r.key.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len(), "one record per key: {keys:?}");
    for record in &seen {
        let index = records.iter().rposition(|(k, _)| *k == record.key).unwrap();
        assert_eq!(record.offset, index as i64, "{record:?}");
    }
    assert!(seen.windows(2).any(|p| p[1].offset > p[0].offset + 1));

    let (status, metrics) = weir.http_get("/metrics");
    assert_eq!(status, 200);
    let bytes_cleaned = metrics
        .lines()
        .find_map(|l| l.strip_prefix("weir_log_cleaner_bytes_cleaned_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("weir_log_cleaner_bytes_cleaned_total");
    assert!(bytes_cleaned > 0.0);

    // New updates after compaction are compacted in turn.
    let more = updates(3, 5, 10);
    produce(&producer, topic, &more);
    records.extend(more);
    roll_with_marker(&producer, topic, 1000, &mut records);
    let expected = latest(&records);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = read_from_start(&weir.kafka, topic);
        if fully_compacted(&seen, &expected) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "second round not compacted: {seen:?} in {:?}",
            std::fs::read_dir(partition_dir(&weir, topic))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_broker_killed_while_cleaning_comes_back_with_every_keys_latest_value() {
    // A slow cleaner, so that kills land in the middle of its passes.
    let mut weir = Weir::start(&[
        "--log-cleaner-backoff-ms",
        "100",
        "--log-cleaner-io-max-bytes-per-second",
        "500000",
    ]);
    let topic = "crashy";
    create_topic(
        &weir.kafka,
        topic,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "16384"),
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let producer = producer(&weir.kafka, "lz4");
    let mut records = Vec::new();
    let dir = partition_dir(&weir, topic);
    for round in 0..4u64 {
        let mut batch = updates(100, 8, 100);
        if round == 1 {
            // Some keys deleted, some deleted and written again.
            batch.extend((0..20).map(|k| (format!("k{k}"), None)));
            batch.extend((10..15).map(|k| (format!("k{k}"), Some(format!("k{k}-reborn")))));
        }
        produce(&producer, topic, &batch);
        records.extend(batch);
        roll_with_marker(&producer, topic, 1000, &mut records);
        // Kill -9 once the cleaner writes a cleaned segment, at a different
        // moment each round.
        let deadline = Instant::now() + Duration::from_secs(20);
        // (or, on a fast machine, once it has already swapped them in)
        while files_ending(&dir, ".cleaned") == 0 && files_ending(&dir, ".deleted") == 0 {
            assert!(
                Instant::now() < deadline,
                "round {round}: no cleaning seen in {:?}: checkpoint {:?}",
                std::fs::read_dir(&dir)
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .collect::<Vec<_>>(),
                std::fs::read_to_string(dir.join("cleaner-checkpoint"))
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(round * 70));
        weir.kill();
        weir.restart(false);
        // The reopened log holds every key's latest value.
        check_latest(&read_from_start(&weir.kafka, topic), &latest(&records));
    }
    drop(producer);
    let expected = latest(&records);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = read_from_start(&weir.kafka, topic);
        check_latest(&seen, &expected);
        // Tombstones stay for a day (delete.retention.ms' default).
        let live_and_deleted = expected.len();
        if seen.len() == live_and_deleted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not compacted: {} records",
            seen.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(files_ending(&dir, ".cleaned"), 0);
    assert_eq!(files_ending(&dir, ".swap"), 0);
}

#[test]
fn consumer_offsets_are_compacted_and_survive_a_restart() {
    let mut weir = Weir::start(&["--log-cleaner-backoff-ms", "100"]);
    let topic = "source";
    create_topic(&weir.kafka, topic, &[]);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", "compacting-group")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let commit = |offset: i64| {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(topic, 0, Offset::Offset(offset))
            .unwrap();
        consumer.commit(&offsets, CommitMode::Sync).expect("commit");
    };
    commit(1);
    // Small segments for __consumer_offsets, so that commits fill sealed
    // segments the cleaner may compact.
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["topic", "alter-config", "--bootstrap", &weir.kafka])
        .args(["--set", "segment.bytes=1024"])
        .args(["--set", "min.cleanable.dirty.ratio=0.01"])
        .arg("__consumer_offsets")
        .status()
        .expect("weir topic alter-config");
    assert!(status.success());
    for offset in 2..=400 {
        commit(offset);
    }
    // The group's partition of __consumer_offsets shrinks to a few records.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let compacted = (0..50).any(|p| {
            let dir = weir.data_dir.join(format!("__consumer_offsets-{p}"));
            std::fs::read_to_string(dir.join("cleaner-checkpoint"))
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
                .is_some_and(|c| c > 100)
        });
        if compacted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "__consumer_offsets never cleaned"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(consumer);
    weir.restart(false);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", "compacting-group")
        .create()
        .expect("consumer");
    let mut partitions = TopicPartitionList::new();
    partitions.add_partition(topic, 0);
    let committed = consumer
        .committed_offsets(partitions, Duration::from_secs(20))
        .expect("committed offsets");
    assert_eq!(
        committed.find_partition(topic, 0).unwrap().offset(),
        Offset::Offset(400)
    );
}

/// Sends one record and returns how the broker answered it.
fn send_one(bootstrap: &str, topic: &str, key: Option<&str>) -> Result<(), KafkaError> {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.type", "zstd")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    let mut record = FutureRecord::<str, str>::to(topic).payload("value");
    if let Some(key) = key {
        record = record.key(key);
    }
    common::cli::block_on(producer.send(record, Duration::from_secs(20)))
        .map(|_| ())
        .map_err(|(error, _)| error)
}

#[test]
fn a_compacted_topic_refuses_records_without_a_key() {
    use rdkafka::types::RDKafkaErrorCode;
    let weir = Weir::start(&[]);
    create_topic(&weir.kafka, "keyed-only", &[("cleanup.policy", "compact")]);
    create_topic(&weir.kafka, "anything-goes", &[]);

    // Compressed, so the broker must inflate the batch to see the key.
    assert_eq!(
        send_one(&weir.kafka, "keyed-only", None),
        Err(KafkaError::MessageProduction(
            RDKafkaErrorCode::InvalidRecord
        ))
    );
    send_one(&weir.kafka, "keyed-only", Some("k")).expect("a keyed record is accepted");
    send_one(&weir.kafka, "anything-goes", None).expect("a delete topic takes keyless records");

    let seen = read_from_start(&weir.kafka, "keyed-only");
    assert_eq!(
        seen,
        vec![Seen {
            offset: 0,
            key: "k".into(),
            value: Some("value".into())
        }],
        "the refused record was not appended"
    );
}
