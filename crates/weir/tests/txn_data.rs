//! The data side of transactions against the real `weir` binary:
//! transactional batches produced with a transactional id, commit and abort
//! markers written with WriteTxnMarkers, and what consumers see:
//! `read_committed` (librdkafka) only committed records, up to the last
//! stable offset, `read_uncommitted` everything; ListOffsets answers the
//! last stable offset for `read_committed`; a marker of an older producer
//! epoch is refused; the aborted-transaction index survives restarts.

mod common;

use std::time::{Duration, Instant};

use common::cli::block_on;
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use weir_client::{Client, TxnMarker};
use weir_log::testing::KeyedBatch;

const TOPIC: &str = "txn-data";

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn create_topic(raw: &mut Raw) {
    let created: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        5,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic_name())
            .with_num_partitions(1)
            .with_replication_factor(1)]),
    );
    assert_eq!(created.topics[0].error_code, 0);
}

/// A batch of `values`, from a producer if given, transactional or not.
fn batch(producer: Option<(i64, i16, i32)>, transactional: bool, values: &[&str]) -> Vec<u8> {
    let mut builder = KeyedBatch::new();
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.producer(id, epoch, sequence);
    }
    if transactional {
        builder = builder.transactional();
    }
    for value in values {
        builder = builder.record(Some(b"k"), Some(value.as_bytes()));
    }
    builder.build()
}

/// Produces one batch (acks=all), with a transactional id if given;
/// returns the error code and base offset.
fn produce(raw: &mut Raw, transactional_id: Option<&str>, records: Vec<u8>) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records.into()))])]);
    let response: ProduceResponse = raw.call(ApiKey::Produce, 9, &request);
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A transactional batch of `values` from producer `(id, epoch)` starting
/// at `sequence`; returns its base offset.
fn produce_txn(raw: &mut Raw, producer: (i64, i16), sequence: i32, values: &[&str]) -> i64 {
    let records = batch(Some((producer.0, producer.1, sequence)), true, values);
    let (code, offset) = produce(raw, Some("txn-data-app"), records);
    assert_eq!(code, 0, "transactional produce of {values:?}");
    offset
}

fn produce_plain(raw: &mut Raw, values: &[&str]) -> i64 {
    let (code, offset) = produce(raw, None, batch(None, false, values));
    assert_eq!(code, 0);
    offset
}

/// Writes one marker in the partition; returns the error code.
fn mark(kafka: &str, producer: (i64, i16), commit: bool) -> i16 {
    let marker = TxnMarker {
        producer_id: producer.0,
        producer_epoch: producer.1,
        commit,
        coordinator_epoch: 0,
        partitions: vec![(TOPIC.to_owned(), 0)],
    };
    let outcomes = block_on(async {
        let mut client = Client::connect(kafka).await.expect("connect");
        client
            .write_txn_markers(&[marker])
            .await
            .expect("WriteTxnMarkers")
    });
    assert_eq!(outcomes.len(), 1);
    assert_eq!(
        (outcomes[0].topic.as_str(), outcomes[0].partition),
        (TOPIC, 0)
    );
    outcomes[0].error_code
}

/// A raw read_committed fetch from offset 0: (last stable offset, aborted
/// transactions as (producer id, first offset)).
fn fetch_committed(raw: &mut Raw) -> (i64, Vec<(i64, i64)>) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = raw.call(ApiKey::Fetch, 12, &request);
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| (t.producer_id.0, t.first_offset))
        .collect();
    (p.last_stable_offset, aborted)
}

/// Everything a consumer with `isolation` reads from the start, waiting
/// `quiet` after the last record for more.
fn consume(weir: &Weir, isolation: &str, quiet: Duration) -> Vec<(i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", format!("txn-data-{isolation}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        assert!(
            Instant::now() < deadline,
            "still reading after 60 s: {out:?}"
        );
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let m = message.expect("fetch");
            let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            out.push((m.offset(), value));
            last = Instant::now();
        }
    }
    out
}

fn values(records: &[(i64, String)]) -> Vec<&str> {
    records.iter().map(|(_, v)| v.as_str()).collect()
}

#[test]
fn read_committed_sees_committed_records_up_to_the_last_stable_offset() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create_topic(&mut raw);
    let (a, b, c) = block_on(async {
        let mut client = Client::connect(&weir.kafka).await.expect("connect");
        let a = client.init_producer_id().await.expect("producer a");
        let b = client.init_producer_id().await.expect("producer b");
        let c = client.init_producer_id().await.expect("producer c");
        (a, b, c)
    });

    assert_eq!(produce_plain(&mut raw, &["plain-0"]), 0);
    // Transaction of A (to commit) and of B (to abort), interleaved.
    assert_eq!(produce_txn(&mut raw, a, 0, &["a-0", "a-1"]), 1);
    assert_eq!(produce_txn(&mut raw, b, 0, &["b-0"]), 3);
    assert_eq!(produce_txn(&mut raw, a, 2, &["a-2"]), 4);
    assert_eq!(produce_txn(&mut raw, b, 1, &["b-1"]), 5);
    // A's transaction ends with its epoch bumped (as a coordinator that
    // fences late requests does); B's is aborted.
    let a_next = (a.0, a.1 + 1);
    assert_eq!(mark(&weir.kafka, a_next, true), 0); // offset 6
    assert_eq!(mark(&weir.kafka, b, false), 0); // offset 7
                                                // C's transaction stays open for now; a plain record follows it.
    assert_eq!(produce_txn(&mut raw, c, 0, &["c-0"]), 8);
    assert_eq!(produce_plain(&mut raw, &["plain-1"]), 9);
    // A's next transaction, at its new epoch.
    assert_eq!(produce_txn(&mut raw, a_next, 0, &["a-3"]), 10);

    // A delayed abort of A's first transaction must not end the second.
    assert_eq!(
        mark(&weir.kafka, a, false),
        ResponseError::InvalidProducerEpoch.code()
    );
    // Nor may A write outside its transaction, or with its old epoch.
    let (code, _) = produce(
        &mut raw,
        None,
        batch(Some((a.0, a.1 + 1, 1)), false, &["x"]),
    );
    assert_eq!(code, ResponseError::InvalidTxnState.code());
    let (code, _) = produce(
        &mut raw,
        Some("txn-data-app"),
        batch(Some((a.0, a.1, 3)), true, &["x"]),
    );
    assert_eq!(code, ResponseError::InvalidProducerEpoch.code());
    // The transactional bit and the transactional id go together.
    let (code, _) = produce(&mut raw, None, batch(Some((c.0, c.1, 1)), true, &["x"]));
    assert_eq!(
        code,
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    let (code, _) = produce(&mut raw, Some("txn-data-app"), batch(None, false, &["x"]));
    assert_eq!(code, ResponseError::InvalidRecord.code());
    assert_eq!(mark(&weir.kafka, a_next, true), 0); // offset 11

    // C is open from offset 8: that is the last stable offset.
    assert_eq!(raw.latest_offset(TOPIC, 0), 12);
    assert_eq!(raw.last_stable_offset(TOPIC), 8);
    assert_eq!(fetch_committed(&mut raw), (8, vec![(b.0, 3)]));
    let committed = consume(&weir, "read_committed", Duration::from_secs(3));
    assert_eq!(values(&committed), ["plain-0", "a-0", "a-1", "a-2"]);
    let everything = consume(&weir, "read_uncommitted", Duration::from_secs(2));
    assert_eq!(
        values(&everything),
        ["plain-0", "a-0", "a-1", "b-0", "a-2", "b-1", "c-0", "plain-1", "a-3"]
    );

    // C commits: everything below the high watermark is stable.
    assert_eq!(mark(&weir.kafka, c, true), 0); // offset 12
    assert_eq!(raw.last_stable_offset(TOPIC), 13);
    let expected = ["plain-0", "a-0", "a-1", "a-2", "c-0", "plain-1", "a-3"];
    let committed = consume(&weir, "read_committed", Duration::from_secs(2));
    assert_eq!(values(&committed), expected);

    // The aborted-transaction index survives a crash and a clean restart.
    drop(raw);
    for clean in [false, true] {
        weir.restart(clean);
        let mut raw = Raw::connect(&weir.kafka);
        assert_eq!(raw.last_stable_offset(TOPIC), 13, "clean restart: {clean}");
        assert_eq!(fetch_committed(&mut raw), (13, vec![(b.0, 3)]));
        let committed = consume(&weir, "read_committed", Duration::from_secs(2));
        assert_eq!(values(&committed), expected, "clean restart: {clean}");
    }
}

#[test]
fn a_transaction_open_across_a_restart_keeps_the_last_stable_offset() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create_topic(&mut raw);
    let p = block_on(async {
        let mut client = Client::connect(&weir.kafka).await.expect("connect");
        client.init_producer_id().await.expect("producer")
    });
    assert_eq!(produce_plain(&mut raw, &["before"]), 0);
    assert_eq!(produce_txn(&mut raw, p, 0, &["t-0"]), 1);
    assert_eq!(produce_plain(&mut raw, &["after"]), 2);
    assert_eq!(raw.last_stable_offset(TOPIC), 1);
    drop(raw);
    for clean in [true, false] {
        weir.restart(clean);
        let mut raw = Raw::connect(&weir.kafka);
        assert_eq!(raw.last_stable_offset(TOPIC), 1, "clean restart: {clean}");
    }
    // Aborted after the restarts, by a marker at the producer's epoch.
    assert_eq!(mark(&weir.kafka, p, false), 0);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(raw.last_stable_offset(TOPIC), 4);
    let committed = consume(&weir, "read_committed", Duration::from_secs(2));
    assert_eq!(values(&committed), ["before", "after"]);
}
