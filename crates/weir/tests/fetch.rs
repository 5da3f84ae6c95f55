//! Fetch semantics: long-poll woken by appends, byte limits, offsets out of
//! range, and the log start offset in responses.

mod common;

use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_log::batch::BatchHeader;
use weir_log::testing::BatchBuilder;

const TOPIC: &str = "fetching";

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// Creates the topic with `partitions` partitions through CreateTopics.
fn create(raw: &mut Raw, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        5,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name())
            .with_num_partitions(partitions)
            .with_replication_factor(1)]),
    );
    assert_eq!(response.topics[0].error_code, 0);
}

fn produce(raw: &mut Raw, partition: i32, batch: Vec<u8>) -> i64 {
    let (code, base_offset) = raw.produce(TOPIC, partition, batch);
    assert_eq!(code, 0);
    base_offset
}

fn fetch_request(
    partitions: &[(i32, i64, i32)],
    max_bytes: i32,
    min_bytes: i32,
    max_wait_ms: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(partition, offset, partition_max)| {
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(partition_max)
                    })
                    .collect(),
            )])
}

fn batch_offsets(records: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut rest = records;
    while let Ok(header) = BatchHeader::parse(rest, 0) {
        out.push(header.base_offset());
        rest = &rest[header.total_size()..];
    }
    out
}

/// Waits until the broker's `weir_fetches_waiting` gauge reads `count`.
fn wait_for_waiting_fetches(weir: &Weir, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, metrics) = weir.http_get("/metrics");
        let waiting = metrics
            .lines()
            .find_map(|line| line.strip_prefix("weir_fetches_waiting "))
            .and_then(|value| value.trim().parse::<u64>().ok());
        if waiting == Some(count) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "weir_fetches_waiting is {waiting:?}, not {count}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_waiting_fetch_is_woken_by_an_append() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create(&mut raw, 1);
    let started = Instant::now();
    let id = raw.send(
        ApiKey::Fetch,
        11,
        &fetch_request(&[(0, 0, 1 << 20)], 1 << 20, 1, 30_000),
    );
    // The produce comes only once the fetch is parked, waiting for data.
    wait_for_waiting_fetches(&weir, 1);
    let mut producer = Raw::connect(&weir.kafka);
    produce(&mut producer, 0, BatchBuilder::new(2).build());
    let response: FetchResponse = raw.receive(ApiKey::Fetch, 11, id);
    let data = &response.responses[0].partitions[0];
    assert_eq!(batch_offsets(data.records.as_ref().unwrap()), vec![0]);
    assert_eq!(data.high_watermark, 2);
    // Woken by the append, not by the 30 s timeout.
    assert!(started.elapsed() < Duration::from_secs(20));
    wait_for_waiting_fetches(&weir, 0);
    // With nothing new, the fetch answers empty after max_wait_ms.
    let response: FetchResponse = raw.call(
        ApiKey::Fetch,
        11,
        &fetch_request(&[(0, 2, 1 << 20)], 1 << 20, 1, 200),
    );
    assert!(response.responses[0].partitions[0]
        .records
        .as_ref()
        .unwrap()
        .is_empty());
}

#[test]
fn byte_limits_and_offset_errors() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create(&mut raw, 2);
    let batch = BatchBuilder::new(1).value_size(1000).build();
    let size = batch.len() as i32;
    for _ in 0..10 {
        produce(&mut raw, 0, batch.clone());
        produce(&mut raw, 1, batch.clone());
    }
    // Partition limit: whole batches within it.
    let response: FetchResponse = raw.call(
        ApiKey::Fetch,
        11,
        &fetch_request(&[(0, 0, size * 3 + 10), (1, 0, size * 2)], 1 << 20, 1, 0),
    );
    let parts = &response.responses[0].partitions;
    assert_eq!(
        batch_offsets(parts[0].records.as_ref().unwrap()),
        vec![0, 1, 2]
    );
    assert_eq!(
        batch_offsets(parts[1].records.as_ref().unwrap()),
        vec![0, 1]
    );
    // Response limit: the first partition still gets one batch beyond it,
    // later ones nothing that does not fit.
    let response: FetchResponse = raw.call(
        ApiKey::Fetch,
        11,
        &fetch_request(&[(0, 4, 1 << 20), (1, 4, 1 << 20)], 10, 1, 0),
    );
    let parts = &response.responses[0].partitions;
    assert_eq!(batch_offsets(parts[0].records.as_ref().unwrap()), vec![4]);
    assert!(parts[1].records.as_ref().unwrap().is_empty());
    // Past the end: OFFSET_OUT_OF_RANGE, with the offsets to reset to.
    let response: FetchResponse = raw.call(
        ApiKey::Fetch,
        11,
        &fetch_request(&[(0, 11, 1 << 20)], 1 << 20, 1, 0),
    );
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!((data.high_watermark, data.log_start_offset), (10, 0));
    // Unknown partition.
    let response: FetchResponse = raw.call(
        ApiKey::Fetch,
        11,
        &fetch_request(&[(5, 0, 1 << 20)], 1 << 20, 1, 0),
    );
    assert_eq!(
        response.responses[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[test]
fn deleting_a_topic_removes_its_data() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create(&mut raw, 2);
    produce(&mut raw, 1, BatchBuilder::new(1).build());
    assert!(weir.data_dir.join(format!("{TOPIC}-1")).exists());
    use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
    let response: DeleteTopicsResponse = raw.call(
        ApiKey::DeleteTopics,
        5,
        &DeleteTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topic_names(vec![name()]),
    );
    assert_eq!(response.responses[0].error_code, 0);
    assert!(!weir.data_dir.join(format!("{TOPIC}-0")).exists());
    assert!(!weir.data_dir.join(format!("{TOPIC}-1")).exists());
    let metadata: MetadataResponse = raw.call(
        ApiKey::Metadata,
        9,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name()))
            ]))
            .with_allow_auto_topic_creation(false),
    );
    assert_eq!(
        metadata.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// Creates a topic of one partition with `configs`.
fn create_with_configs(raw: &mut Raw, topic: &str, configs: &[(&str, &str)]) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        5,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(name, value)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string((*name).to_owned()))
                            .with_value(Some(StrBytes::from_string((*value).to_owned())))
                    })
                    .collect(),
            )]),
    );
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn a_delayed_topic_serves_a_batch_only_once_its_timestamp_is_old_enough() {
    const DELAYED: &str = "delayed";
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create_with_configs(&mut raw, DELAYED, &[("weir.delivery.delay.ms", "2000")]);
    let produce_to = |raw: &mut Raw, batch: Vec<u8>| {
        let (code, offset) = raw.produce(DELAYED, 0, batch);
        assert_eq!(code, 0);
        offset
    };
    let fetch_from = |raw: &mut Raw, offset: i64, max_wait_ms: i32| -> (Vec<i64>, i64) {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(DELAYED)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let response: FetchResponse = raw.call(ApiKey::Fetch, 11, &request);
        let data = &response.responses[0].partitions[0];
        assert_eq!(data.error_code, 0);
        (
            batch_offsets(data.records.as_deref().unwrap_or_default()),
            data.high_watermark,
        )
    };
    let produced_at = epoch_ms();
    // A record ten seconds old is served at once; a fresh batch is held
    // back, and so is an old one behind it (the watermark moves in order).
    assert_eq!(
        produce_to(
            &mut raw,
            BatchBuilder::new(1).timestamp(produced_at - 10_000).build()
        ),
        0
    );
    assert_eq!(
        produce_to(
            &mut raw,
            BatchBuilder::new(2).timestamp(produced_at).build()
        ),
        1
    );
    assert_eq!(
        produce_to(
            &mut raw,
            BatchBuilder::new(1).timestamp(produced_at - 10_000).build()
        ),
        3
    );
    assert_eq!(
        fetch_from(&mut raw, 0, 0),
        (vec![0], 4),
        "the high watermark counts every record"
    );
    assert_eq!(fetch_from(&mut raw, 1, 0).0, Vec::<i64>::new());
    // A waiting fetch is answered when the fresh batch is due, not before
    // and not at its deadline.
    let started = Instant::now();
    let (offsets, _) = fetch_from(&mut raw, 1, 20_000);
    assert_eq!(offsets, vec![1, 3]);
    assert!(
        epoch_ms() >= produced_at + 2_000,
        "a record was delivered before its delay"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the fetch waited for its deadline instead of the delay"
    );
}
