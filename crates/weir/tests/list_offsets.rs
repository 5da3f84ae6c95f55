//! ListOffsets: earliest, latest, by timestamp and max timestamp.

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
    let response: ListOffsetsResponse = raw.call(
        ApiKey::ListOffsets,
        version,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
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
    for version in 1..=7 {
        assert_eq!(list_v(&mut raw, version, 0, -1), (0, -1, 6), "v{version}");
    }
    assert_eq!(
        list(&mut raw, 7, -1).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}
