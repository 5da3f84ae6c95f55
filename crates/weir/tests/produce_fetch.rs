//! Produce and fetch through librdkafka (the `rdkafka` crate) against the
//! real `weir` binary.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::cluster::wait_until;
use common::Weir;
use futures::executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

fn producer(weir: &Weir, settings: &[(&str, &str)]) -> FutureProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &weir.kafka)
        .set("message.timeout.ms", "30000")
        .set("linger.ms", "5");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    config.create().expect("producer")
}

fn create_topic(weir: &Weir, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .create()
        .expect("admin");
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let results = block_on(admin.create_topics([&topic], &AdminOptions::new())).expect("create");
    for result in results {
        result.expect("topic created");
    }
}

/// Sends every (key, value) and waits for all delivery reports; returns
/// (partition, offset) per record.
fn produce_all(
    producer: &FutureProducer,
    topic: &str,
    records: &[(Option<String>, String)],
) -> Vec<(i32, i64)> {
    let mut pending = Vec::with_capacity(records.len());
    for (key, value) in records {
        loop {
            let mut record = FutureRecord::to(topic).payload(value.as_str());
            if let Some(key) = key {
                record = record.key(key.as_str());
            }
            match producer.send_result(record) {
                Ok(delivery) => {
                    pending.push(delivery);
                    break;
                }
                Err((e, _)) => {
                    assert!(
                        matches!(
                            e,
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull
                            )
                        ),
                        "{e}"
                    );
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    pending
        .into_iter()
        .map(|d| {
            let delivered = block_on(d).expect("delivery future").expect("delivered");
            (delivered.partition, delivered.offset)
        })
        .collect()
}

/// Reads `count` records from every partition of `topic` from the start.
fn consume_all(
    weir: &Weir,
    topic: &str,
    partitions: i32,
    count: usize,
) -> Vec<(i32, i64, Option<String>, String)> {
    consume_from(weir, topic, partitions, Offset::Beginning, count)
}

/// Reads `count` records from every partition of `topic` from `from`.
fn consume_from(
    weir: &Weir,
    topic: &str,
    partitions: i32,
    from: Offset,
    count: usize,
) -> Vec<(i32, i64, Option<String>, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment.add_partition_offset(topic, p, from).unwrap();
    }
    consumer.assign(&assignment).expect("assign");
    let mut out = Vec::with_capacity(count);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while out.len() < count {
        assert!(
            std::time::Instant::now() < deadline,
            "consumed only {} of {count}",
            out.len()
        );
        if let Some(message) = consumer.poll(Duration::from_millis(500)) {
            let m = message.expect("fetch");
            out.push((
                m.partition(),
                m.offset(),
                m.key().map(|k| String::from_utf8(k.to_vec()).unwrap()),
                String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap(),
            ));
        }
    }
    out
}

#[test]
fn keyed_records_stay_in_order_on_one_partition() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "keyed", 6);
    let producer = producer(&weir, &[("acks", "1")]);
    let total = 100_000;
    let records: Vec<(Option<String>, String)> = (0..total)
        .map(|i| {
            let key = format!("key-{}", i % 500);
            (Some(key.clone()), format!("{key}:{i}"))
        })
        .collect();
    let delivered = produce_all(&producer, "keyed", &records);
    assert_eq!(delivered.len(), total);
    let consumed = consume_all(&weir, "keyed", 6, total);
    let mut partition_of: HashMap<String, i32> = HashMap::new();
    let mut last_seq: HashMap<String, i64> = HashMap::new();
    for (partition, _, key, value) in &consumed {
        let key = key.clone().unwrap();
        assert_eq!(
            *partition_of.entry(key.clone()).or_insert(*partition),
            *partition,
            "key {key} on two partitions"
        );
        let seq: i64 = value.rsplit(':').next().unwrap().parse().unwrap();
        let previous = last_seq.insert(key.clone(), seq).unwrap_or(-1);
        assert!(seq > previous, "key {key}: {seq} after {previous}");
    }
    assert_eq!(consumed.len(), total);
    let used: std::collections::HashSet<i32> = partition_of.values().copied().collect();
    assert_eq!(used.len(), 6, "500 keys spread over every partition");
}

#[test]
fn every_codec_round_trips() {
    let weir = Weir::start(&[]);
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        create_topic(&weir, &topic, 1);
        let producer = producer(&weir, &[("compression.codec", codec), ("linger.ms", "50")]);
        let records: Vec<(Option<String>, String)> = (0..2_000)
            .map(|i| (None, format!("{codec} record {i} {}", "x".repeat(i % 300))))
            .collect();
        produce_all(&producer, &topic, &records);
        let consumed = consume_all(&weir, &topic, 1, records.len());
        let values: Vec<&String> = consumed.iter().map(|c| &c.3).collect();
        let expected: Vec<&String> = records.iter().map(|r| &r.1).collect();
        assert_eq!(values, expected, "codec {codec}");
    }
}

#[test]
fn acks_levels_all_deliver() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "acks", 1);
    let mut expected = Vec::new();
    for acks in ["0", "1", "all"] {
        let producer = producer(&weir, &[("acks", acks)]);
        let records: Vec<(Option<String>, String)> = (0..500)
            .map(|i| (None, format!("acks={acks} {i}")))
            .collect();
        let delivered = produce_all(&producer, "acks", &records);
        if acks != "0" {
            assert!(delivered.iter().all(|(_, offset)| *offset >= 0));
        }
        expected.extend(records.into_iter().map(|r| r.1));
    }
    let consumed = consume_all(&weir, "acks", 1, expected.len());
    let values: Vec<String> = consumed.into_iter().map(|c| c.3).collect();
    assert_eq!(values, expected);
}

#[test]
fn headers_and_keys_survive() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "headers", 1);
    let producer = producer(&weir, &[]);
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "trace",
            value: Some("abc"),
        })
        .insert(Header {
            key: "empty",
            value: None::<&str>,
        });
    let delivery = producer
        .send_result(
            FutureRecord::to("headers")
                .key("k")
                .payload("v")
                .headers(headers),
        )
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    block_on(delivery).unwrap().unwrap();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", "unused")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("headers", 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let message = loop {
        if let Some(m) = consumer.poll(Duration::from_millis(500)) {
            break m.unwrap().detach();
        }
    };
    assert_eq!(message.key(), Some(&b"k"[..]));
    let headers = message.headers().unwrap();
    assert_eq!(headers.count(), 2);
    assert_eq!(headers.get(0).key, "trace");
    assert_eq!(headers.get(0).value, Some(&b"abc"[..]));
    assert_eq!(headers.get(1).value, None);
}

#[test]
fn consume_from_a_timestamp() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "times", 1);
    let producer = producer(&weir, &[]);
    // 2023-11-14: past, as producers' timestamps are.
    let base = 1_700_000_000_000i64;
    let mut pending = Vec::new();
    for i in 0..100i64 {
        let value = format!("t{i}");
        pending.push(
            producer
                .send_result(
                    FutureRecord::<(), _>::to("times")
                        .payload(&value)
                        .timestamp(base + i * 1000),
                )
                .unwrap(),
        );
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    for d in pending {
        block_on(d).unwrap().unwrap();
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", "unused")
        .create()
        .unwrap();
    let mut query = TopicPartitionList::new();
    query
        .add_partition_offset("times", 0, Offset::Offset(base + 42_500))
        .unwrap();
    let found = consumer
        .offsets_for_times(query, Duration::from_secs(10))
        .unwrap();
    let offset = found.find_partition("times", 0).unwrap().offset();
    assert_eq!(offset, Offset::Offset(43));
    let mut beyond = TopicPartitionList::new();
    beyond
        .add_partition_offset("times", 0, Offset::Offset(base + 1_000_000))
        .unwrap();
    let found = consumer
        .offsets_for_times(beyond, Duration::from_secs(10))
        .unwrap();
    assert_eq!(
        found.find_partition("times", 0).unwrap().offset(),
        Offset::End
    );
}

/// With `flush.messages=1` every batch is synced before it is answered;
/// the sync runs off the request path, shared by the appends that arrive
/// while it runs. Eight producers, one record per batch: every batch is
/// answered once, in each producer's order, and reads back.
#[test]
fn flush_messages_1_answers_concurrent_producers_in_order() {
    let weir = Weir::start(&[]);
    common::cluster::create_topic_with(&weir.kafka, "synced", 1, 1, &[("flush.messages", "1")]);
    let producers = 8;
    let per_producer = 200;
    let delivered: Vec<Vec<(i64, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let weir = &weir;
                scope.spawn(move || {
                    // Half idempotent with acks=all, half acks=1 with one
                    // request in flight: both keep their order.
                    let (acks, idempotent, in_flight) = if p % 2 == 0 {
                        ("all", "true", "5")
                    } else {
                        ("1", "false", "1")
                    };
                    let producer = producer(
                        weir,
                        &[
                            ("acks", acks),
                            ("enable.idempotence", idempotent),
                            ("max.in.flight.requests.per.connection", in_flight),
                            ("linger.ms", "0"),
                            ("batch.num.messages", "1"),
                        ],
                    );
                    let records: Vec<(Option<String>, String)> = (0..per_producer)
                        .map(|i| (None, format!("p{p}-{i}")))
                        .collect();
                    let offsets = produce_all(&producer, "synced", &records);
                    offsets
                        .into_iter()
                        .zip(records)
                        .map(|((_, offset), (_, value))| (offset, value))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total = producers * per_producer;
    let consumed = consume_all(&weir, "synced", 1, total);
    let by_offset: HashMap<i64, String> = consumed.into_iter().map(|c| (c.1, c.3)).collect();
    assert_eq!(by_offset.len(), total, "every batch once");
    for records in delivered {
        assert!(
            records.windows(2).all(|w| w[0].0 < w[1].0),
            "a producer's batches in its order"
        );
        for (offset, value) in records {
            assert_eq!(by_offset.get(&offset), Some(&value), "offset {offset}");
        }
    }
}

#[test]
fn a_clean_restart_keeps_everything() {
    let mut weir = Weir::start(&[]);
    create_topic(&weir, "durable", 3);
    let producer_handle = producer(&weir, &[("acks", "all")]);
    let records: Vec<(Option<String>, String)> = (0..3_000)
        .map(|i| (Some(format!("k{}", i % 7)), format!("v{i}")))
        .collect();
    produce_all(&producer_handle, "durable", &records);
    drop(producer_handle);
    weir.restart(true);
    let consumed = consume_all(&weir, "durable", 3, records.len());
    assert_eq!(consumed.len(), records.len());
    // And appends continue after the restart.
    let producer_handle = producer(&weir, &[]);
    let more = produce_all(&producer_handle, "durable", &[(None, "after".into())]);
    assert!(more[0].1 >= 0);
}

#[test]
fn kill_9_under_acks_all_loses_no_acknowledged_record() {
    let mut weir = Weir::start(&[]);
    create_topic(&weir, "crash", 1);
    let producer_handle = producer(&weir, &[("acks", "all"), ("message.timeout.ms", "5000")]);
    let mut acknowledged = Vec::new();
    let mut pending = Vec::new();
    for i in 0..20_000 {
        let value = format!("r{i}");
        if let Ok(d) =
            producer_handle.send_result(FutureRecord::<(), _>::to("crash").payload(&value))
        {
            pending.push((value, d));
        }
        if i == 10_000 {
            producer_handle.flush(Duration::from_secs(10)).unwrap();
            weir.kill();
        }
    }
    let _ = producer_handle.flush(Duration::from_secs(10));
    for (value, d) in pending {
        if let Ok(Ok(delivered)) = block_on(d) {
            acknowledged.push((delivered.offset, value));
        }
    }
    drop(producer_handle);
    assert!(acknowledged.len() > 10_000);
    weir.restart(false);
    let consumed = consume_all(&weir, "crash", 1, acknowledged.len());
    let by_offset: HashMap<i64, String> = consumed.into_iter().map(|c| (c.1, c.3)).collect();
    for (offset, value) in acknowledged {
        assert_eq!(
            by_offset.get(&offset),
            Some(&value),
            "acknowledged record at {offset}"
        );
    }
}

/// A clean start that finds a torn batch at the end of a flushed segment
/// reports it and carries on; a kill -9 after that must not take the
/// segment for an unflushed tail, cut the log there and delete the records
/// acknowledged since the start.
#[test]
fn records_acknowledged_after_a_clean_start_on_a_torn_segment_survive_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let mut weir = Weir::start_in(&data_dir, &[], None, &[]);
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .create()
        .expect("admin");
    // Small segments, so that the appends after the start roll several.
    let topic = NewTopic::new("torn", 1, TopicReplication::Fixed(1)).set("segment.bytes", "4096");
    for result in block_on(admin.create_topics([&topic], &AdminOptions::new())).expect("create") {
        result.expect("topic created");
    }
    drop(admin);
    let producer_handle = producer(&weir, &[("acks", "all")]);
    // In waves, so that the segment holds several batches and the tear
    // leaves whole ones before it.
    for wave in 0..5 {
        let before: Vec<(Option<String>, String)> = (0..10)
            .map(|i| (None, format!("before-{wave}-{i}")))
            .collect();
        produce_all(&producer_handle, "torn", &before);
    }
    drop(producer_handle);
    assert!(weir.stop().success(), "clean stop must exit 0");

    // Tear the last batch of the last segment: its final bytes never
    // reached the disk.
    let dir = data_dir.join("torn-0");
    let last = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .expect("a segment");
    let file = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    let len = file.metadata().unwrap().len();
    assert!(len > 20, "{} holds a batch", last.display());
    file.set_len(len - 7).unwrap();
    drop(file);

    let mut weir = Weir::start_in(&data_dir, &[], None, &[]);
    let producer_handle = producer(&weir, &[("acks", "all")]);
    let after: Vec<(Option<String>, String)> = (0..600)
        .map(|i| (None, format!("after-{i}-{}", "x".repeat(64))))
        .collect();
    let offsets = produce_all(&producer_handle, "torn", &after);
    drop(producer_handle);
    weir.restart(false);

    let first = offsets.iter().map(|&(_, offset)| offset).min().unwrap();
    let last = offsets.iter().map(|&(_, offset)| offset).max().unwrap();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .create()
        .expect("consumer");
    let (_, high) = consumer
        .fetch_watermarks("torn", 0, Duration::from_secs(30))
        .expect("watermarks");
    assert!(high > last, "log ends at {high}, acknowledged up to {last}");
    let consumed = consume_from(&weir, "torn", 1, Offset::Offset(first), after.len());
    let by_offset: HashMap<i64, String> = consumed.into_iter().map(|c| (c.1, c.3)).collect();
    for ((_, offset), (_, value)) in offsets.iter().zip(&after) {
        assert_eq!(
            by_offset.get(offset),
            Some(value),
            "acknowledged record at {offset}"
        );
    }
}

#[test]
fn unknown_topics_are_auto_created_only_when_enabled() {
    let weir = Weir::start(&[
        "--auto-create-topics-enable",
        "false",
        "--num-partitions",
        "2",
    ]);
    let producer_handle = producer(&weir, &[("message.timeout.ms", "2000")]);
    let delivery = producer_handle
        .send_result(FutureRecord::<(), _>::to("nope").payload("x"))
        .unwrap();
    let result = block_on(delivery).unwrap();
    assert!(result.is_err(), "produce to an unknown topic must fail");
    let weir = Weir::start(&["--num-partitions", "2"]);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("allow.auto.create.topics", "true")
        .create()
        .unwrap();
    // Created in the background, as in Kafka: the first answer says the
    // topic is unknown, a later one has it with the default partitions.
    let partitions = wait_until(
        "the topic to be auto-created",
        Duration::from_secs(10),
        || {
            let metadata = consumer
                .fetch_metadata(Some("auto"), Duration::from_secs(10))
                .unwrap();
            let partitions = metadata.topics()[0].partitions().len();
            (partitions > 0).then_some(partitions)
        },
    );
    assert_eq!(partitions, 2);
}

/// As Kafka, a CreateTime topic refuses records timestamped more than
/// `message.timestamp.after.max.ms` (an hour by default) ahead of the
/// broker's clock: the batch is answered INVALID_TIMESTAMP with an error
/// per record (KIP-467), and nothing of it is appended.
#[test]
fn records_timestamped_too_far_ahead_are_refused_one_by_one() {
    use rdkafka::types::RDKafkaErrorCode;
    use weir_log::testing::BatchBuilder;
    const HOUR_MS: i64 = 3_600_000;
    let weir = Weir::start(&[]);
    create_topic(&weir, "clocks", 1);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let mut raw = common::raw::Raw::connect(&weir.kafka);

    let ahead = BatchBuilder::new(2).timestamp(now() + 2 * HOUR_MS).build();
    let answer = raw.produce_answer("clocks", 0, ahead.clone());
    assert_eq!(answer.error_code, 32, "INVALID_TIMESTAMP: {answer:?}");
    assert_eq!(
        answer.error_message.as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );
    let refused: Vec<i32> = answer.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(refused, [0, 1]);
    let why = answer.record_errors[0]
        .batch_index_error_message
        .as_deref()
        .unwrap_or_default();
    assert!(
        why.starts_with("Timestamp ") && why.contains(" is out of range."),
        "{why}"
    );

    let (code, base) = raw.produce("clocks", 0, BatchBuilder::new(1).timestamp(now()).build());
    assert_eq!(
        (code, base),
        (0, 0),
        "nothing of the refused batch was appended"
    );

    // With room for two hours ahead, the same batch is taken.
    common::cli::block_on(async {
        let mut client = weir_client::Client::connect(&weir.kafka).await.unwrap();
        client
            .alter_topic_configs(
                "clocks",
                &[(
                    "message.timestamp.after.max.ms".to_owned(),
                    (3 * HOUR_MS).to_string(),
                )],
                &[],
            )
            .await
            .unwrap();
    });
    assert_eq!(raw.produce("clocks", 0, ahead), (0, 1));

    // librdkafka hears of it as Kafka's clients do.
    let producer = producer(&weir, &[]);
    let sent = block_on(
        producer.send(
            FutureRecord::<str, str>::to("clocks")
                .payload("late")
                .timestamp(now() + 4 * HOUR_MS),
            Duration::from_secs(30),
        ),
    );
    assert_eq!(
        sent.map(|_| ()).map_err(|(error, _)| error),
        Err(rdkafka::error::KafkaError::MessageProduction(
            RDKafkaErrorCode::InvalidTimestamp
        ))
    );
}

#[test]
fn a_garbage_leader_epoch_checkpoint_is_rebuilt_and_the_partition_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let mut weir = Weir::start_in(&data_dir, &[], None, &[]);
    let producer_handle = producer(&weir, &[("acks", "all")]);
    let records: Vec<(Option<String>, String)> =
        (0..20).map(|i| (None, format!("epoch-{i}"))).collect();
    produce_all(&producer_handle, "epochs", &records);
    drop(producer_handle);
    assert!(weir.stop().success(), "clean stop must exit 0");
    std::fs::write(
        data_dir.join("epochs-0").join("leader-epoch-checkpoint"),
        b"\x00\xffnot a checkpoint",
    )
    .unwrap();
    let weir = Weir::start_in(&data_dir, &[], None, &[]);
    let consumed = consume_from(&weir, "epochs", 1, Offset::Beginning, records.len());
    let values: Vec<&String> = consumed.iter().map(|c| &c.3).collect();
    let expected: Vec<&String> = records.iter().map(|(_, v)| v).collect();
    assert_eq!(values, expected);
    let producer_handle = producer(&weir, &[("acks", "all")]);
    produce_all(&producer_handle, "epochs", &[(None, "after".to_owned())]);
}
