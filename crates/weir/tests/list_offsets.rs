//! ListOffsets: earliest, latest, by timestamp and max timestamp, earliest
//! local and latest tiered (no remote tier), and for read_committed clients
//! nothing at or past the last stable offset.

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_log::testing::BatchBuilder;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("offsets"))
}

fn list(raw: &mut Raw, partition: i32, timestamp: i64) -> (i16, i64, i64) {
    list_v(raw, 7, partition, timestamp)
}

fn list_v(raw: &mut Raw, version: i16, partition: i32, timestamp: i64) -> (i16, i64, i64) {
    list_isolated(raw, version, partition, timestamp, READ_UNCOMMITTED)
}

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

fn list_isolated(
    raw: &mut Raw,
    version: i16,
    partition: i32,
    timestamp: i64,
    isolation_level: i8,
) -> (i16, i64, i64) {
    let response: ListOffsetsResponse = raw.call(
        ApiKey::ListOffsets,
        version,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation_level)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)])]),
    );
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.timestamp, p.offset)
}

#[test]
fn every_kind_of_lookup() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    // A metadata request creates the topic.
    raw.topic_metadata("offsets");
    assert_eq!(list(&mut raw, 0, -1), (0, -1, 0));
    assert_eq!(list(&mut raw, 0, -3), (0, -1, -1));
    for ts in [1_000, 5_000, 3_000] {
        let records = BatchBuilder::new(2).timestamp(ts).build();
        assert_eq!(raw.produce("offsets", 0, records).0, 0);
    }
    assert_eq!(list(&mut raw, 0, -2), (0, -1, 0));
    assert_eq!(list(&mut raw, 0, -1), (0, -1, 6));
    assert_eq!(list(&mut raw, 0, 1_001), (0, 1_001, 1));
    assert_eq!(list(&mut raw, 0, 2_000), (0, 5_000, 2));
    assert_eq!(list(&mut raw, 0, 9_999), (0, -1, -1));
    assert_eq!(list(&mut raw, 0, -3), (0, 5_001, 3));
    // Every advertised version answers (v1–v3 have no leader epoch field).
    for version in 1..=10 {
        assert_eq!(list_v(&mut raw, version, 0, -1), (0, -1, 6), "v{version}");
    }
    assert_eq!(
        list(&mut raw, 7, -1).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

fn partition_answer(
    raw: &mut Raw,
    version: i16,
    partitions: &[(i32, i64)],
) -> Vec<kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse> {
    let response: ListOffsetsResponse = raw.call(
        ApiKey::ListOffsets,
        version,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_timeout_ms(1_000)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(partition, timestamp)| {
                            ListOffsetsPartition::default()
                                .with_partition_index(partition)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )]),
    );
    response
        .topics
        .into_iter()
        .flat_map(|t| t.partitions)
        .collect()
}

/// KIP-405's earliest local offset (-4, v8+) and KIP-1005's latest tiered
/// offset (-5, v9+) with no remote tier, as Kafka answers them with remote
/// storage disabled: the log start, and no offset (-1, leader epoch -1).
#[test]
fn earliest_local_and_latest_tiered_without_a_remote_tier() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("offsets");
    for ts in [1_000, 2_000, 3_000] {
        let records = BatchBuilder::new(2).timestamp(ts).build();
        assert_eq!(raw.produce("offsets", 0, records).0, 0);
    }
    assert_eq!(list_v(&mut raw, 8, 0, -4), (0, -1, 0));
    // The log start moves: the local log starts there too.
    let deleted: DeleteRecordsResponse = raw.call(
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic())
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(2)])]),
    );
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0);
    for version in 8..=10 {
        assert_eq!(list_v(&mut raw, version, 0, -4), (0, -1, 2), "v{version}");
        assert_eq!(list_v(&mut raw, version, 0, -2), (0, -1, 2), "v{version}");
    }
    for version in 9..=10 {
        let answer = &partition_answer(&mut raw, version, &[(0, -5)])[0];
        assert_eq!(
            (
                answer.error_code,
                answer.timestamp,
                answer.offset,
                answer.leader_epoch
            ),
            (0, -1, -1, -1),
            "v{version}"
        );
    }
    // Latest and by timestamp are unchanged at v10 (its timeout is for
    // remote reads only).
    assert_eq!(list_v(&mut raw, 10, 0, -1), (0, -1, 6));
    assert_eq!(list_v(&mut raw, 10, 0, 2_500), (0, 3_000, 4));
    assert_eq!(list_v(&mut raw, 10, 0, -3), (0, 3_001, 5));
    // A partition that is not there is an error for the new kinds too.
    assert_eq!(
        list_v(&mut raw, 10, 9, -5).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// As Kafka's broker: a special timestamp older than the request's version
/// (or unknown to any) is UNSUPPORTED_VERSION for that partition alone, and
/// a partition asked for twice is answered once, INVALID_REQUEST.
#[test]
fn special_timestamps_need_their_version_and_partitions_are_asked_once() {
    let weir = Weir::start(&["--num-partitions", "2"]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("offsets");
    assert_eq!(raw.produce("offsets", 0, BatchBuilder::new(3).build()).0, 0);
    let unsupported = ResponseError::UnsupportedVersion.code();
    for (version, timestamp) in [(6, -3), (7, -4), (8, -5), (10, -6), (10, -7)] {
        assert_eq!(
            list_v(&mut raw, version, 0, timestamp),
            (unsupported, -1, -1),
            "v{version} timestamp {timestamp}"
        );
    }
    let answers = partition_answer(&mut raw, 10, &[(0, -5), (1, -1), (0, -1)]);
    let got: Vec<_> = answers
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.offset))
        .collect();
    assert_eq!(
        got,
        vec![(0, ResponseError::InvalidRequest.code(), -1), (1, 0, 0)]
    );
}

#[test]
fn read_committed_lookups_end_at_the_last_stable_offset() {
    use std::time::{Duration, Instant};

    use rdkafka::producer::Producer;

    let timeout = Duration::from_secs(30);
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("offsets");
    // Offset 0: a record outside any transaction, at 1 000.
    let records = BatchBuilder::new(1).timestamp(1_000).build();
    assert_eq!(raw.produce("offsets", 0, records).0, 0);
    // Offset 1: a record of a transaction still open, at 5 000.
    let producer = common::open_transaction(&weir.kafka, "offsets-writer", "offsets", 5_000);

    let committed = |raw: &mut Raw, ts| list_isolated(raw, 7, 0, ts, READ_COMMITTED);
    let uncommitted = |raw: &mut Raw, ts| list_isolated(raw, 7, 0, ts, READ_UNCOMMITTED);
    // The open transaction's record is found only by read_uncommitted.
    assert_eq!(uncommitted(&mut raw, 5_000), (0, 5_000, 1));
    assert_eq!(committed(&mut raw, 5_000), (0, -1, -1));
    assert_eq!(uncommitted(&mut raw, 2_000), (0, 5_000, 1));
    assert_eq!(committed(&mut raw, 2_000), (0, -1, -1));
    // Records before it are found by both.
    assert_eq!(committed(&mut raw, 500), (0, 1_000, 0));
    assert_eq!(uncommitted(&mut raw, 500), (0, 1_000, 0));
    // The record with the largest timestamp is the open one: none for
    // read_committed (Kafka does not look for an earlier one).
    assert_eq!(uncommitted(&mut raw, -3), (0, 5_000, 1));
    assert_eq!(committed(&mut raw, -3), (0, -1, -1));
    // Latest is the last stable offset or the high watermark; earliest the
    // log start for both.
    assert_eq!(committed(&mut raw, -1), (0, -1, 1));
    assert_eq!(uncommitted(&mut raw, -1), (0, -1, 2));
    assert_eq!(committed(&mut raw, -2), (0, -1, 0));
    assert_eq!(uncommitted(&mut raw, -2), (0, -1, 0));

    // Once the transaction commits (its marker at offset 2), read_committed
    // finds the record too.
    producer.commit_transaction(timeout).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while committed(&mut raw, -1) != (0, -1, 3) {
        assert!(Instant::now() < deadline, "the commit marker never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(committed(&mut raw, 5_000), (0, 5_000, 1));
    assert_eq!(committed(&mut raw, 2_000), (0, 5_000, 1));
    assert_eq!(uncommitted(&mut raw, 5_000), (0, 5_000, 1));
}
