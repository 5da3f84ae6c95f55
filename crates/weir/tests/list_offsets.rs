//! ListOffsets: earliest, latest, by timestamp and max timestamp.

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse,
    TopicName,
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
    let _: kafka_protocol::messages::MetadataResponse = raw.call(
        ApiKey::Metadata,
        9,
        &kafka_protocol::messages::MetadataRequest::default()
            .with_topics(Some(vec![
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(topic())),
            ]))
            .with_allow_auto_topic_creation(true),
    );
    assert_eq!(list(&mut raw, 0, -1), (0, -1, 0));
    assert_eq!(list(&mut raw, 0, -3), (0, -1, -1));
    for ts in [1_000, 5_000, 3_000] {
        let response: ProduceResponse = raw.call(
            ApiKey::Produce,
            9,
            &ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic())
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(
                            BatchBuilder::new(2).timestamp(ts).build().into(),
                        ))])]),
        );
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
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
