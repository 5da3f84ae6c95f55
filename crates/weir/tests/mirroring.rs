//! Cluster mirroring (after KIP-1279) against the real binary: a mirror on
//! one Weir broker of another's topics, created with `weir mirror`, copying
//! them byte for byte and offset for offset, read-only until the mirror
//! goes.

mod common;

use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, BrokerId, EndTxnRequest,
    EndTxnResponse, FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use weir_log::batch::BatchHeader;
use weir_log::testing::BatchBuilder;

/// A batch of `count` records stamped now: older ones would fall to
/// retention (`retention.ms`, a week) at once.
fn records(count: usize) -> BatchBuilder {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    BatchBuilder::new(count).timestamp(now)
}

fn weir(args: &[&str]) -> common::cli::Out {
    common::cli::run(args, b"")
}

/// `weir mirror ARGS --bootstrap DESTINATION`.
fn mirror(destination: &str, args: &[&str]) -> common::cli::Out {
    let mut all = vec!["mirror"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--bootstrap", destination]);
    weir(&all)
}

fn wait_for(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A partition's bytes from offset 0, with each batch's partition leader
/// epoch (bytes 12..16, outside the CRC: each cluster stamps its own)
/// zeroed.
fn log_bytes(raw: &mut Raw, topic: &str, partition: i32) -> Vec<u8> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(64 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(64 << 20)])]);
    let response: FetchResponse = raw.call(ApiKey::Fetch, 11, &request);
    let data = &response.responses[0].partitions[0];
    assert_eq!(
        data.error_code, 0,
        "fetch of {topic}-{partition}: log start {}, high watermark {}",
        data.log_start_offset, data.high_watermark
    );
    let mut bytes = data.records.as_deref().unwrap_or_default().to_vec();
    let mut at = 0;
    while let Ok(header) = BatchHeader::parse(&bytes[at..], 0) {
        let size = header.total_size();
        bytes[at + 12..at + 16].fill(0);
        at += size;
    }
    assert_eq!(at, bytes.len(), "whole batches");
    bytes
}

fn batch_offsets(bytes: &[u8]) -> Vec<(i64, i64)> {
    let mut offsets = Vec::new();
    let mut rest = bytes;
    while let Ok(header) = BatchHeader::parse(rest, 0) {
        offsets.push((header.base_offset(), header.last_offset()));
        rest = &rest[header.total_size()..];
    }
    offsets
}

/// The partition's log end, `None` while it is not served.
fn latest_offset(raw: &mut Raw, topic: &str, partition: i32) -> Option<i64> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = raw.call(ApiKey::ListOffsets, 4, &request);
    let answer = &response.topics[0].partitions[0];
    (answer.error_code == 0).then_some(answer.offset)
}

/// Whether the broker has `topic`, asked without creating it.
fn exists(raw: &mut Raw, topic: &str) -> bool {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_owned())),
        ))]))
        .with_allow_auto_topic_creation(false);
    let metadata: MetadataResponse = raw.call(ApiKey::Metadata, 9, &request);
    metadata.topics[0].error_code == 0
        && metadata.topics[0]
            .partitions
            .iter()
            .all(|p| p.leader_id.0 >= 0)
}

fn topic_id(raw: &mut Raw, topic: &str) -> uuid::Uuid {
    raw.topic_metadata(topic).topics[0].topic_id
}

#[test]
fn a_mirror_copies_topics_offset_for_offset_and_keeps_them_read_only() {
    let source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    weir(&[
        "topic",
        "create",
        "orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=86400000",
        "--bootstrap",
        &source.kafka,
    ])
    .ok();
    let mut on_source = Raw::connect(&source.kafka);
    // Batches of several sizes; partition 0's from an idempotent producer.
    let mut sequence = 0;
    for i in 0..30 {
        let count = 1 + i % 4;
        let batch = records(count).keys(&format!("k{i}"));
        let batch = if i % 3 == 0 {
            sequence += count as i32;
            batch.producer(7, 0, sequence - count as i32).build()
        } else {
            batch.build()
        };
        let (code, _) = on_source.produce("orders", (i % 3) as i32, batch);
        assert_eq!(code, 0);
    }

    let created = mirror(
        &destination.kafka,
        &[
            "create",
            "east",
            "--source-bootstrap",
            &source.kafka,
            "--topics",
            "ord.*",
        ],
    )
    .ok();
    assert!(
        created.stdout.contains("created mirror east"),
        "{}",
        created.stdout
    );
    let mut on_destination = Raw::connect(&destination.kafka);
    wait_for(30, "the mirror topic", || {
        exists(&mut on_destination, "orders")
    });
    wait_for(30, "the mirror to catch up", || {
        (0..3).all(|p| {
            latest_offset(&mut on_destination, "orders", p)
                == Some(on_source.latest_offset("orders", p))
        })
    });
    // The same topic id and partitions, the same config override.
    assert_eq!(
        topic_id(&mut on_destination, "orders"),
        topic_id(&mut on_source, "orders")
    );
    let configs = weir(&[
        "topic",
        "describe",
        "orders",
        "--bootstrap",
        &destination.kafka,
    ])
    .ok();
    assert!(
        configs.stdout.contains("retention.ms=86400000"),
        "{}",
        configs.stdout
    );
    // Every batch at the same offsets with the same bytes.
    for p in 0..3 {
        let mirrored = log_bytes(&mut on_destination, "orders", p);
        let original = log_bytes(&mut on_source, "orders", p);
        assert!(!original.is_empty());
        assert_eq!(batch_offsets(&mirrored), batch_offsets(&original));
        assert_eq!(mirrored, original, "partition {p}");
    }

    // Producers may not write to a mirror topic, and are told why.
    let refused = on_destination.produce_answer("orders", 0, records(1).build());
    assert_eq!(refused.error_code, 42, "INVALID_REQUEST");
    let message = refused
        .error_message
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert!(message.contains("mirror east"), "{message}");

    let listed = mirror(&destination.kafka, &["list"]).ok();
    let rows = listed.table("MIRROR");
    assert_eq!(
        rows[1][..5],
        ["east", source.kafka.as_str(), "ord.*", "-", "running"]
    );
    let described = mirror(&destination.kafka, &["describe", "east"]).ok();
    let rows = described.table("TOPIC");
    assert_eq!(rows.len(), 4, "{}", described.stdout);
    for row in &rows[1..] {
        assert_eq!(row[0], "orders");
        assert_eq!(row[2], row[3], "source end = mirrored: {row:?}");
        assert_eq!((row[4], row[6]), ("0", "mirroring"), "{row:?}");
    }
    let (_, metrics) = destination.http_get("/metrics");
    assert!(
        metrics
            .contains(r#"weir_mirror_lag_records{mirror="east",topic="orders",partition="0"} 0"#),
        "{metrics}"
    );

    // New records follow; paused, they wait.
    mirror(&destination.kafka, &["pause", "east"]).ok();
    wait_for(10, "the partitions to say paused", || {
        let out = mirror(&destination.kafka, &["describe", "east"]).ok();
        out.table("TOPIC")[1..].iter().all(|row| row[6] == "paused")
    });
    let before = on_destination.latest_offset("orders", 0);
    assert_eq!(on_source.produce("orders", 0, records(5).build()).0, 0);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(on_destination.latest_offset("orders", 0), before, "paused");
    mirror(&destination.kafka, &["resume", "east"]).ok();
    wait_for(30, "the mirror to catch up again", || {
        on_destination.latest_offset("orders", 0) == before + 5
    });

    // Deleted, the mirror stops and its topic takes writes.
    mirror(&destination.kafka, &["delete", "east"]).ok();
    let unknown = mirror(&destination.kafka, &["describe", "east"]).failed_with_one_line();
    assert!(unknown.contains("does not exist"), "{unknown}");
    wait_for(10, "the topic to take writes", || {
        on_destination.produce("orders", 0, records(1).build()).0 == 0
    });
}

#[test]
fn mirrors_are_refused_with_a_bad_name_a_bad_regex_or_a_taken_name() {
    let destination = Weir::start(&[]);
    let create = |name: &str, topics: &str| {
        mirror(
            &destination.kafka,
            &[
                "create",
                name,
                "--source-bootstrap",
                "127.0.0.1:1",
                "--topics",
                topics,
            ],
        )
    };
    create("east", ".*").ok();
    let taken = create("east", ".*").failed_with_one_line();
    assert!(taken.contains("already exists"), "{taken}");
    let bad_name = create("a/b", ".*").failed_with_one_line();
    assert!(bad_name.contains("mirror name"), "{bad_name}");
    let bad_regex = create("west", "(").failed_with_one_line();
    assert!(bad_regex.contains("regex"), "{bad_regex}");
    let bad_setting = mirror(
        &destination.kafka,
        &[
            "create",
            "west",
            "--source-bootstrap",
            "127.0.0.1:1",
            "--source-config",
            "security.protocol=CARRIER_PIGEON",
        ],
    )
    .failed_with_one_line();
    assert!(bad_setting.contains("security.protocol"), "{bad_setting}");
    // A source that cannot be reached is a state, not an error.
    let listed = mirror(&destination.kafka, &["list"]).ok();
    assert_eq!(listed.table("MIRROR").len(), 2);
}

/// A producer id from InitProducerId: idempotent, or transactional with
/// `transactional_id`.
fn init_producer(raw: &mut Raw, transactional_id: Option<&str>) -> (i64, i16) {
    if let Some(id) = transactional_id {
        assert_eq!(raw.find_coordinator(1, id).error_code, 0);
    }
    let request = InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_transaction_timeout_ms(60_000);
    let mut answer = None;
    wait_for(20, "a producer id", || {
        let r: InitProducerIdResponse = raw.call(ApiKey::InitProducerId, 5, &request);
        answer = (r.error_code == 0).then_some((r.producer_id.0, r.producer_epoch));
        answer.is_some()
    });
    answer.unwrap()
}

#[test]
fn a_failover_cuts_at_the_last_stable_offset_records_it_and_makes_the_topics_writable() {
    let source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    weir(&[
        "topic",
        "create",
        "payments",
        "--partitions",
        "2",
        "--bootstrap",
        &source.kafka,
    ])
    .ok();
    let mut on_source = Raw::connect(&source.kafka);
    // Partition 1: an idempotent producer's batches.
    let (producer_id, epoch) = init_producer(&mut on_source, None);
    for i in 0..5 {
        let batch = records(2).producer(producer_id, epoch, i * 2).build();
        assert_eq!(on_source.produce("payments", 1, batch).0, 0);
    }
    // Partition 0: three records, a transaction left open, two more.
    for _ in 0..3 {
        assert_eq!(on_source.produce("payments", 0, records(1).build()).0, 0);
    }
    let payer = init_producer(&mut on_source, Some("payer"));
    assert_eq!(
        on_source.produce_transactional("payer", payer, 0, "payments", 12),
        0
    );
    for _ in 0..2 {
        assert_eq!(on_source.produce("payments", 0, records(1).build()).0, 0);
    }
    assert_eq!(on_source.last_stable_offset("payments"), 3);

    mirror(
        &destination.kafka,
        &["create", "east", "--source-bootstrap", &source.kafka],
    )
    .ok();
    let mut on_destination = Raw::connect(&destination.kafka);
    wait_for(30, "the mirror topic", || {
        exists(&mut on_destination, "payments")
    });
    // Up to the source's last stable offset only.
    wait_for(30, "the mirror to catch up", || {
        latest_offset(&mut on_destination, "payments", 0) == Some(3)
            && latest_offset(&mut on_destination, "payments", 1) == Some(10)
    });
    assert_eq!(
        on_destination.produce("payments", 0, records(1).build()).0,
        42,
        "read-only before the failover"
    );
    // Nor does a transaction take it in: its marker would take an offset
    // of the source's records.
    let lender = init_producer(&mut on_destination, Some("lender"));
    assert_eq!(
        on_destination.produce_transactional("lender", lender, 0, "payments", 12),
        42
    );
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string("lender".into())))
        .with_v3_and_below_producer_id(ProducerId(lender.0))
        .with_v3_and_below_producer_epoch(lender.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_string("payments".into())))
            .with_partitions(vec![0])]);
    let added: AddPartitionsToTxnResponse =
        on_destination.call(ApiKey::AddPartitionsToTxn, 3, &add);
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        42
    );
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string("lender".into())))
        .with_producer_id(ProducerId(lender.0))
        .with_producer_epoch(lender.1)
        .with_committed(true);
    let _: EndTxnResponse = on_destination.call(ApiKey::EndTxn, 3, &end);

    let failed_over = mirror(&destination.kafka, &["failover", "east"]).ok();
    let rows = failed_over.table("TOPIC");
    assert_eq!(
        rows[1..],
        [["payments", "0", "3"], ["payments", "1", "10"]],
        "{}",
        failed_over.stdout
    );
    // Writable, from the last mirrored offset on; producer ids are handed
    // out above the mirrored producer's.
    assert_eq!(
        on_destination.produce("payments", 0, records(1).build()),
        (0, 3)
    );
    let (fresh, _) = init_producer(&mut on_destination, None);
    assert!(
        fresh > producer_id,
        "{fresh} after the mirrored {producer_id}"
    );
    // The source's records no longer come.
    assert_eq!(on_source.produce("payments", 1, records(1).build()).0, 0);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(latest_offset(&mut on_destination, "payments", 1), Some(10));
    let described = mirror(&destination.kafka, &["describe", "east"]).ok();
    let rows = described.table("TOPIC");
    assert_eq!(
        rows[1],
        ["payments", "0", "-", "3", "-", "-", "failed-over"],
        "{}",
        described.stdout
    );
}

fn consumer(bootstrap: &str, group: &str) -> BaseConsumer {
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer")
}

fn commit(bootstrap: &str, group: &str, offset: i64) {
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("orders", 0, Offset::Offset(offset))
        .unwrap();
    consumer(bootstrap, group)
        .commit(&offsets, CommitMode::Sync)
        .unwrap();
}

fn committed(bootstrap: &str, group: &str) -> Offset {
    let mut partitions = TopicPartitionList::new();
    partitions.add_partition("orders", 0);
    consumer(bootstrap, group)
        .committed_offsets(partitions, Duration::from_secs(10))
        .unwrap()
        .find_partition("orders", 0)
        .unwrap()
        .offset()
}

#[test]
fn the_chosen_groups_offsets_follow_and_their_consumers_carry_on_after_a_failover() {
    let source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    weir(&["topic", "create", "orders", "--bootstrap", &source.kafka]).ok();
    let mut on_source = Raw::connect(&source.kafka);
    for _ in 0..10 {
        assert_eq!(on_source.produce("orders", 0, records(1).build()).0, 0);
    }
    commit(&source.kafka, "billing", 6);
    commit(&source.kafka, "audit", 2);
    mirror(
        &destination.kafka,
        &[
            "create",
            "east",
            "--source-bootstrap",
            &source.kafka,
            "--groups",
            "bill.*",
        ],
    )
    .ok();
    // The same offsets: nothing to translate.
    wait_for(30, "billing's offset on the destination", || {
        committed(&destination.kafka, "billing") == Offset::Offset(6)
    });
    commit(&source.kafka, "billing", 8);
    wait_for(30, "billing's new offset", || {
        committed(&destination.kafka, "billing") == Offset::Offset(8)
    });
    assert_eq!(
        committed(&destination.kafka, "audit"),
        Offset::Invalid,
        "not chosen"
    );

    // After the failover the group's consumer goes on where it was.
    mirror(&destination.kafka, &["failover", "east"]).ok();
    let reader = consumer(&destination.kafka, "billing");
    reader.subscribe(&["orders"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        assert!(Instant::now() < deadline, "no record");
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(200)) {
            break message.offset();
        }
    };
    assert_eq!(first, 8);
}

#[test]
fn a_source_restarting_or_losing_a_topic_stops_nothing_else() {
    let mut source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    for topic in ["alpha", "beta"] {
        weir(&["topic", "create", topic, "--bootstrap", &source.kafka]).ok();
    }
    let mut on_source = Raw::connect(&source.kafka);
    for topic in ["alpha", "beta"] {
        assert_eq!(on_source.produce(topic, 0, records(3).build()).0, 0);
    }
    mirror(
        &destination.kafka,
        &[
            "create",
            "east",
            "--source-bootstrap",
            &source.kafka,
            "--topics",
            "alpha|beta",
        ],
    )
    .ok();
    let mut on_destination = Raw::connect(&destination.kafka);
    wait_for(30, "both topics mirrored", || {
        ["alpha", "beta"]
            .iter()
            .all(|t| latest_offset(&mut on_destination, t, 0) == Some(3))
    });

    // The source restarts: the mirror reconnects and goes on.
    source.restart(true);
    let mut on_source = Raw::connect(&source.kafka);
    assert_eq!(on_source.produce("alpha", 0, records(2).build()).0, 0);
    wait_for(30, "alpha after the source's restart", || {
        latest_offset(&mut on_destination, "alpha", 0) == Some(5)
    });
    assert_eq!(
        log_bytes(&mut on_destination, "alpha", 0),
        log_bytes(&mut on_source, "alpha", 0),
        "no batch twice or out of order"
    );

    // A source topic deleted: its partitions say so, the others go on.
    weir(&["topic", "delete", "beta", "--bootstrap", &source.kafka]).ok();
    wait_for(30, "beta's state", || {
        mirror(&destination.kafka, &["describe", "east"])
            .ok()
            .stdout
            .contains("source topic not found")
    });
    assert_eq!(on_source.produce("alpha", 0, records(1).build()).0, 0);
    wait_for(30, "alpha after beta's deletion", || {
        latest_offset(&mut on_destination, "alpha", 0) == Some(6)
    });
    assert_eq!(
        latest_offset(&mut on_destination, "beta", 0),
        Some(3),
        "what was mirrored stays"
    );
}

#[test]
fn a_mirror_leader_killed_mid_fetch_writes_no_batch_twice_or_out_of_order() {
    let source = Weir::start(&[]);
    let mut destination = common::cluster::Cluster::start(&["--default-replication-factor", "3"]);
    let bootstrap = destination.bootstrap();
    weir(&["topic", "create", "orders", "--bootstrap", &source.kafka]).ok();
    mirror(
        &bootstrap,
        &["create", "east", "--source-bootstrap", &source.kafka],
    )
    .ok();
    // Records keep coming while the destination's leader dies.
    let source_kafka = source.kafka.clone();
    let producer = std::thread::spawn(move || {
        let mut raw = Raw::connect(&source_kafka);
        for i in 0..300 {
            assert_eq!(raw.produce("orders", 0, records(1 + i % 3).build()).0, 0);
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let leader =
        common::cluster::wait_until("the mirror topic's leader", Duration::from_secs(30), || {
            common::cluster::partitions(&bootstrap, "orders")
                .first()
                .map(|p| p.leader)
                .filter(|l| *l > 0)
        });
    let mut on_leader = Raw::connect(&destination.node(leader).kafka);
    wait_for(30, "records mirrored", || {
        latest_offset(&mut on_leader, "orders", 0).is_some_and(|end| end > 50)
    });
    destination.node_mut(leader).kill();
    producer.join().unwrap();
    let bootstrap = destination.bootstrap();
    let mut on_source = Raw::connect(&source.kafka);
    let end = on_source.latest_offset("orders", 0);
    let new_leader = common::cluster::wait_until("a new leader", Duration::from_secs(60), || {
        common::cluster::partitions(&bootstrap, "orders")
            .first()
            .map(|p| p.leader)
            .filter(|l| *l > 0 && *l != leader)
    });
    let mut on_new_leader = Raw::connect(&destination.node(new_leader).kafka);
    wait_for(60, "the new leader to mirror to the source's end", || {
        latest_offset(&mut on_new_leader, "orders", 0) == Some(end)
    });
    assert_eq!(
        log_bytes(&mut on_new_leader, "orders", 0),
        log_bytes(&mut on_source, "orders", 0),
        "every batch once, in order"
    );
}

#[test]
fn a_source_leader_change_is_followed_without_a_batch_twice_or_out_of_order() {
    let mut source = common::cluster::Cluster::start(&["--default-replication-factor", "3"]);
    let source_bootstrap = source.bootstrap();
    let destination = Weir::start(&[]);
    weir(&[
        "topic",
        "create",
        "orders",
        "--bootstrap",
        &source_bootstrap,
    ])
    .ok();
    let leader =
        common::cluster::wait_until("the source's leader", Duration::from_secs(30), || {
            common::cluster::partitions(&source_bootstrap, "orders")
                .first()
                .map(|p| p.leader)
                .filter(|l| *l > 0)
        });
    let mut on_leader = Raw::connect(&source.node(leader).kafka);
    for _ in 0..20 {
        assert_eq!(on_leader.produce("orders", 0, records(2).build()).0, 0);
    }
    mirror(
        &destination.kafka,
        &["create", "east", "--source-bootstrap", &source_bootstrap],
    )
    .ok();
    let mut on_destination = Raw::connect(&destination.kafka);
    wait_for(30, "the first records mirrored", || {
        latest_offset(&mut on_destination, "orders", 0) == Some(40)
    });
    // The source's leader stops; another takes over and takes more.
    assert!(source.node_mut(leader).stop().success());
    let source_bootstrap = source.bootstrap();
    let new_leader =
        common::cluster::wait_until("a new source leader", Duration::from_secs(60), || {
            common::cluster::partitions(&source_bootstrap, "orders")
                .first()
                .map(|p| p.leader)
                .filter(|l| *l > 0 && *l != leader)
        });
    let mut on_new_leader = Raw::connect(&source.node(new_leader).kafka);
    for _ in 0..10 {
        assert_eq!(on_new_leader.produce("orders", 0, records(1).build()).0, 0);
    }
    wait_for(60, "the records of the new source leader", || {
        latest_offset(&mut on_destination, "orders", 0) == Some(50)
    });
    assert_eq!(
        log_bytes(&mut on_destination, "orders", 0),
        log_bytes(&mut on_new_leader, "orders", 0),
        "every batch once, in order"
    );
}

#[test]
fn the_old_source_fails_back_from_the_new_primary_keeping_what_they_share() {
    let east = Weir::start(&[]);
    let west = Weir::start(&[]);
    weir(&[
        "topic",
        "create",
        "orders",
        "--partitions",
        "2",
        "--bootstrap",
        &east.kafka,
    ])
    .ok();
    let mut on_east = Raw::connect(&east.kafka);
    for _ in 0..3 {
        assert_eq!(on_east.produce("orders", 0, records(2).build()).0, 0);
    }
    for _ in 0..2 {
        assert_eq!(on_east.produce("orders", 1, records(2).build()).0, 0);
    }
    // West mirrors east.
    mirror(
        &west.kafka,
        &["create", "dr", "--source-bootstrap", &east.kafka],
    )
    .ok();
    let mut on_west = Raw::connect(&west.kafka);
    wait_for(30, "the mirror to catch up", || {
        latest_offset(&mut on_west, "orders", 0) == Some(6)
            && latest_offset(&mut on_west, "orders", 1) == Some(4)
    });
    // East takes a write the mirror never copies, then is lost: west fails
    // over and takes writes of its own at the same offsets.
    mirror(&west.kafka, &["pause", "dr"]).ok();
    wait_for(30, "the mirror to pause", || {
        let described = mirror(&west.kafka, &["describe", "dr"]).ok();
        described.table("TOPIC")[1..]
            .iter()
            .all(|row| row[6] == "paused")
    });
    assert_eq!(on_east.produce("orders", 0, records(2).build()), (0, 6));
    let failed_over = mirror(&west.kafka, &["failover", "dr"]).ok();
    assert_eq!(
        failed_over.table("TOPIC")[1..],
        [["orders", "0", "6"], ["orders", "1", "4"]],
        "{}",
        failed_over.stdout
    );
    assert_eq!(on_west.produce("orders", 0, records(3).build()), (0, 6));
    assert_eq!(on_west.produce("orders", 1, records(1).build()), (0, 4));

    // East comes back and mirrors west: its own topic, with west's topic
    // id, is taken back, cut where the two logs part, and fed from there.
    mirror(
        &east.kafka,
        &[
            "create",
            "back",
            "--source-bootstrap",
            &west.kafka,
            "--topics",
            "orders",
        ],
    )
    .ok();
    wait_for(30, "east to hold west's log", || {
        latest_offset(&mut on_east, "orders", 0) == Some(9)
            && latest_offset(&mut on_east, "orders", 1) == Some(5)
    });
    for partition in [0, 1] {
        let (here, there) = (
            log_bytes(&mut on_east, "orders", partition),
            log_bytes(&mut on_west, "orders", partition),
        );
        assert_eq!(
            batch_offsets(&here),
            batch_offsets(&there),
            "partition {partition}"
        );
        assert!(here == there, "partition {partition}: the same bytes");
    }
    assert_eq!(
        on_east.produce("orders", 0, records(1).build()).0,
        42,
        "read-only while it mirrors"
    );
    let described = mirror(&east.kafka, &["describe", "back"]).ok();
    let rows = described.table("TOPIC");
    assert_eq!(
        rows[1],
        ["orders", "0", "9", "9", "0", "0.0", "mirroring"],
        "{}",
        described.stdout
    );
    // West goes on; so does the mirror.
    assert_eq!(on_west.produce("orders", 0, records(1).build()), (0, 9));
    wait_for(30, "the new record on east", || {
        latest_offset(&mut on_east, "orders", 0) == Some(10)
    });

    // And the roles swap back: east fails over and takes writes again.
    let back = mirror(&east.kafka, &["failover", "back"]).ok();
    assert_eq!(
        back.table("TOPIC")[1..],
        [["orders", "0", "10"], ["orders", "1", "5"]],
        "{}",
        back.stdout
    );
    assert_eq!(on_east.produce("orders", 0, records(1).build()), (0, 10));
}

/// A topic's config overrides (DYNAMIC_TOPIC_CONFIG), by name.
fn topic_overrides(bootstrap: &str, topic: &str) -> std::collections::BTreeMap<String, String> {
    use rdkafka::admin::{AdminClient, AdminOptions, ConfigSource, ResourceSpecifier};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let described = common::cli::block_on(
        admin.describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new()),
    )
    .unwrap();
    let resource = described.into_iter().next().unwrap().unwrap();
    resource
        .entries
        .into_iter()
        .filter(|e| e.source == ConfigSource::DynamicTopic)
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

#[test]
fn a_mirror_keeps_topic_configs_in_step_but_not_the_destinations_own_settings() {
    let source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    weir(&[
        "topic",
        "create",
        "orders",
        "--config",
        "retention.ms=3600000",
        "--config",
        "segment.bytes=1048576",
        "--config",
        "min.insync.replicas=1",
        "--bootstrap",
        &source.kafka,
    ])
    .ok();
    mirror(
        &destination.kafka,
        &["create", "east", "--source-bootstrap", &source.kafka],
    )
    .ok();
    let mut on_destination = Raw::connect(&destination.kafka);
    wait_for(30, "the mirror topic", || {
        exists(&mut on_destination, "orders")
    });
    let created = topic_overrides(&destination.kafka, "orders");
    assert_eq!(
        created.get("retention.ms").map(String::as_str),
        Some("3600000")
    );
    assert!(
        !created.contains_key("min.insync.replicas"),
        "the destination's own durability rule: {created:?}"
    );
    // The destination sets its own; the source changes its configs.
    weir(&[
        "topic",
        "alter-config",
        "orders",
        "--set",
        "min.insync.replicas=1",
        "--bootstrap",
        &destination.kafka,
    ])
    .ok();
    weir(&[
        "topic",
        "alter-config",
        "orders",
        "--set",
        "retention.ms=7200000",
        "--set",
        "cleanup.policy=compact,delete",
        "--delete",
        "segment.bytes",
        "--bootstrap",
        &source.kafka,
    ])
    .ok();
    wait_for(60, "the source's config changes", || {
        let now = topic_overrides(&destination.kafka, "orders");
        now.get("retention.ms").map(String::as_str) == Some("7200000")
            && now.get("cleanup.policy").map(String::as_str) == Some("compact,delete")
            && !now.contains_key("segment.bytes")
    });
    assert_eq!(
        topic_overrides(&destination.kafka, "orders")
            .get("min.insync.replicas")
            .map(String::as_str),
        Some("1"),
        "kept"
    );
}

/// Joins share group `group` on `jobs` and leaves it at once: the group
/// exists, with no members.
fn touch_share_group(raw: &mut Raw, group: &str) {
    use kafka_protocol::messages::{
        GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    };
    let member = uuid::Uuid::new_v4().to_string();
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_member_id(StrBytes::from_string(member.clone()))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("jobs"))]));
    // Creates the offsets topic, where share groups live.
    wait_for(20, "the group coordinator", || {
        raw.find_coordinator(0, group).error_code == 0
    });
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r: ShareGroupHeartbeatResponse = raw.call(ApiKey::ShareGroupHeartbeat, 1, &join);
        if r.error_code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "joining {group}: {last:?}");
        last = Some(r);
        std::thread::sleep(Duration::from_millis(100));
    }
    let leave = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_member_id(StrBytes::from_string(member))
        .with_member_epoch(-1);
    let r: ShareGroupHeartbeatResponse = raw.call(ApiKey::ShareGroupHeartbeat, 1, &leave);
    assert_eq!(r.error_code, 0, "{r:?}");
}

/// A share group's start offset of `jobs`-0, as `weir share-group
/// describe` shows it.
fn share_start_offset(bootstrap: &str, group: &str) -> Option<String> {
    let described = common::cli::run(
        &["share-group", "describe", group, "--bootstrap", bootstrap],
        b"",
    );
    if described.code != Some(0) {
        return None;
    }
    let rows = described.table("TOPIC");
    rows.get(1).map(|row| row[2].to_owned())
}

/// Starts share group `workers` over at `offset` of `jobs`-0, once its
/// state is loaded.
fn reset_share_group(bootstrap: &str, offset: i64) {
    let offset = offset.to_string();
    wait_for(30, "the share group's reset", || {
        common::cli::run(
            &[
                "share-group",
                "reset-offsets",
                "workers",
                "--topic",
                "jobs",
                "--to-offset",
                &offset,
                "--bootstrap",
                bootstrap,
            ],
            b"",
        )
        .code
            == Some(0)
    });
}

#[test]
fn a_share_groups_start_offsets_follow_to_a_group_that_exists_on_the_destination() {
    let source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    weir(&["topic", "create", "jobs", "--bootstrap", &source.kafka]).ok();
    let mut on_source = Raw::connect(&source.kafka);
    assert_eq!(on_source.produce("jobs", 0, records(10).build()).0, 0);
    touch_share_group(&mut on_source, "workers");
    reset_share_group(&source.kafka, 4);
    mirror(
        &destination.kafka,
        &[
            "create",
            "east",
            "--source-bootstrap",
            &source.kafka,
            "--groups",
            "work.*",
        ],
    )
    .ok();
    let mut on_destination = Raw::connect(&destination.kafka);
    wait_for(30, "the mirror to catch up", || {
        latest_offset(&mut on_destination, "jobs", 0) == Some(10)
    });
    touch_share_group(&mut on_destination, "workers");
    wait_for(30, "the start offset on the destination", || {
        share_start_offset(&destination.kafka, "workers").as_deref() == Some("4")
    });
    reset_share_group(&source.kafka, 7);
    wait_for(30, "the new start offset", || {
        share_start_offset(&destination.kafka, "workers").as_deref() == Some("7")
    });
}

/// `weir acl list` of a broker: its lines, sorted.
fn acl_lines(bootstrap: &str) -> Vec<String> {
    let listed = weir(&["acl", "list", "--bootstrap", bootstrap]).ok();
    let mut lines: Vec<String> = listed
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn a_mirror_syncing_acls_copies_the_sources_and_removes_what_the_source_removes() {
    let source = Weir::start(&[]);
    let destination = Weir::start(&[]);
    let acl = |action: &str, bootstrap: &str, principal: &str, operation: &str| {
        weir(&[
            "acl",
            action,
            "--topic",
            "orders",
            "--allow-principal",
            principal,
            "--operation",
            operation,
            "--bootstrap",
            bootstrap,
        ])
        .ok();
    };
    acl("create", &source.kafka, "User:alice", "Read");
    acl("create", &source.kafka, "User:bob", "Write");
    // The destination's own ACL.
    acl("create", &destination.kafka, "User:carol", "Describe");
    mirror(
        &destination.kafka,
        &[
            "create",
            "east",
            "--source-bootstrap",
            &source.kafka,
            "--sync-acls",
        ],
    )
    .ok();
    wait_for(30, "the source's ACLs on the destination", || {
        let here = acl_lines(&destination.kafka).join("\n");
        here.contains("User:alice") && here.contains("User:bob")
    });
    acl("delete", &source.kafka, "User:bob", "Write");
    wait_for(30, "the removed ACL to go", || {
        !acl_lines(&destination.kafka)
            .join("\n")
            .contains("User:bob")
    });
    let here = acl_lines(&destination.kafka).join("\n");
    assert!(here.contains("User:alice"), "{here}");
    assert!(here.contains("User:carol"), "its own stays: {here}");
    // Without the option, nothing is copied.
    let other = Weir::start(&[]);
    mirror(
        &other.kafka,
        &["create", "plain", "--source-bootstrap", &source.kafka],
    )
    .ok();
    std::thread::sleep(Duration::from_secs(7));
    assert!(
        !acl_lines(&other.kafka).join("\n").contains("User:alice"),
        "not synced without --sync-acls"
    );
}
