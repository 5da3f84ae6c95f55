//! Changing topic configs while the broker runs (AlterConfigs,
//! IncrementalAlterConfigs) and deleting records (DeleteRecords).

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use weir_log::testing::BatchBuilder;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// One IncrementalAlterConfigs of `resource`: its error code and message.
fn alter(
    raw: &mut Raw,
    resource_type: i8,
    resource: &str,
    changes: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(resource))
            .with_configs(
                changes
                    .iter()
                    .map(|&(name, op, value)| {
                        AlterableConfig::default()
                            .with_name(s(name))
                            .with_config_operation(op)
                            .with_value(value.map(s))
                    })
                    .collect(),
            )]);
    let r: IncrementalAlterConfigsResponse = raw.call(ApiKey::IncrementalAlterConfigs, 1, &request);
    let result = &r.responses[0];
    (
        result.error_code,
        result.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// The value and source of one topic config.
fn described(raw: &mut Raw, topic: &str, name: &str) -> (String, i8) {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s(topic))
            .with_configuration_keys(Some(vec![s(name)]))]);
    let r: DescribeConfigsResponse = raw.call(ApiKey::DescribeConfigs, 4, &request);
    let entry = &r.results[0].configs[0];
    (
        entry.value.as_ref().unwrap().to_string(),
        entry.config_source,
    )
}

#[test]
fn incremental_changes_apply_at_once_and_are_validated() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("orders");
    // SET, then DELETE back to the default.
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "orders",
            &[("retention.ms", SET, Some("1000"))],
            false
        ),
        (0, None)
    );
    assert_eq!(
        described(&mut raw, "orders", "retention.ms"),
        ("1000".into(), 1)
    );
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "orders",
            &[("retention.ms", DELETE, None)],
            false
        )
        .0,
        0
    );
    assert_eq!(
        described(&mut raw, "orders", "retention.ms"),
        ("604800000".into(), 5),
        "back to the broker default"
    );
    // APPEND and SUBTRACT work on list configs, from the current value.
    alter(
        &mut raw,
        TOPIC,
        "orders",
        &[("cleanup.policy", APPEND, Some("compact"))],
        false,
    );
    assert_eq!(
        described(&mut raw, "orders", "cleanup.policy").0,
        "delete,compact"
    );
    alter(
        &mut raw,
        TOPIC,
        "orders",
        &[("cleanup.policy", SUBTRACT, Some("delete"))],
        false,
    );
    assert_eq!(described(&mut raw, "orders", "cleanup.policy").0, "compact");
    // ...and nowhere else.
    let (code, message) = alter(
        &mut raw,
        TOPIC,
        "orders",
        &[("retention.ms", APPEND, Some("1"))],
        false,
    );
    assert_eq!(code, 40, "INVALID_CONFIG");
    assert!(message.unwrap().contains("retention.ms"));
    // An invalid value names the key and why, and changes nothing.
    let (code, message) = alter(
        &mut raw,
        TOPIC,
        "orders",
        &[("retention.ms", SET, Some("-7"))],
        false,
    );
    assert_eq!(code, 40, "INVALID_CONFIG");
    assert!(message.unwrap().contains("retention.ms"));
    let (code, _) = alter(
        &mut raw,
        TOPIC,
        "orders",
        &[("no.such.config", SET, Some("1"))],
        false,
    );
    assert_eq!(code, 40);
    // validate_only checks and changes nothing.
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "orders",
            &[("retention.ms", SET, Some("5000"))],
            true
        )
        .0,
        0
    );
    assert_eq!(described(&mut raw, "orders", "retention.ms").1, 5);
    // Unknown topics and broker resources are refused with their reasons.
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "nope",
            &[("retention.ms", SET, Some("1"))],
            false
        )
        .0,
        3
    );
    let (code, message) = alter(
        &mut raw,
        BROKER,
        "1",
        &[("num.partitions", SET, Some("3"))],
        false,
    );
    assert_eq!(code, 42, "INVALID_REQUEST");
    assert!(message.unwrap().contains("restart"));
}

#[test]
fn a_lowered_max_message_bytes_refuses_larger_batches_at_once_and_survives_restart() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("events");
    let big = BatchBuilder::sized(1, 4000).build();
    assert_eq!(raw.produce("events", 0, big.clone()).0, 0);
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "events",
            &[("max.message.bytes", SET, Some("2000"))],
            false
        )
        .0,
        0
    );
    assert_eq!(
        raw.produce("events", 0, big.clone()).0,
        10,
        "MESSAGE_TOO_LARGE"
    );
    weir.restart(true);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(raw.produce("events", 0, big).0, 10, "MESSAGE_TOO_LARGE");
}

#[test]
fn alter_configs_replaces_every_override() {
    use kafka_protocol::messages::alter_configs_request as legacy;
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("ledger");
    alter(
        &mut raw,
        TOPIC,
        "ledger",
        &[("retention.ms", SET, Some("1000"))],
        false,
    );
    let request =
        AlterConfigsRequest::default().with_resources(vec![legacy::AlterConfigsResource::default(
        )
        .with_resource_type(TOPIC)
        .with_resource_name(s("ledger"))
        .with_configs(vec![legacy::AlterableConfig::default()
            .with_name(s("segment.bytes"))
            .with_value(Some(s("1048576")))])]);
    let r: AlterConfigsResponse = raw.call(ApiKey::AlterConfigs, 2, &request);
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(
        described(&mut raw, "ledger", "segment.bytes"),
        ("1048576".into(), 1)
    );
    assert_eq!(
        described(&mut raw, "ledger", "retention.ms").1,
        5,
        "dropped"
    );
}

fn delete_records(raw: &mut Raw, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
    let r: DeleteRecordsResponse = raw.call(ApiKey::DeleteRecords, 2, &request);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

fn earliest(raw: &mut Raw, topic: &str) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(TopicName(s(topic)))
        .with_partitions(vec![ListOffsetsPartition::default()
            .with_partition_index(0)
            .with_timestamp(-2)])]);
    let r: ListOffsetsResponse = raw.call(ApiKey::ListOffsets, 7, &request);
    r.topics[0].partitions[0].offset
}

#[test]
fn delete_records_moves_the_log_start_for_good() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("trail");
    for _ in 0..3 {
        assert_eq!(raw.produce("trail", 0, BatchBuilder::new(10).build()).0, 0);
    }
    assert_eq!(delete_records(&mut raw, "trail", 0, 15), (0, 15));
    assert_eq!(earliest(&mut raw, "trail"), 15);
    assert_eq!(
        delete_records(&mut raw, "trail", 0, 31),
        (1, -1),
        "past the end"
    );
    assert_eq!(
        delete_records(&mut raw, "trail", 7, 1).0,
        3,
        "no such partition"
    );
    weir.restart(false);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(earliest(&mut raw, "trail"), 15, "kept across a kill -9");
    // -1 deletes up to the high watermark.
    assert_eq!(delete_records(&mut raw, "trail", 0, -1), (0, 30));
    assert_eq!(earliest(&mut raw, "trail"), 30);
    // A compacted topic's start is the cleaner's to move.
    raw.topic_metadata("state");
    alter(
        &mut raw,
        TOPIC,
        "state",
        &[("cleanup.policy", SET, Some("compact"))],
        false,
    );
    assert_eq!(
        delete_records(&mut raw, "state", 0, 0).0,
        44,
        "POLICY_VIOLATION"
    );
}

#[test]
fn acks_all_needs_min_insync_replicas_in_the_isr() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("guarded");
    assert_eq!(raw.produce("guarded", 0, BatchBuilder::new(1).build()).0, 0);
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "guarded",
            &[("min.insync.replicas", SET, Some("2"))],
            false
        )
        .0,
        0
    );
    // One replica cannot satisfy two: refused before anything is written.
    let (code, _) = raw.produce("guarded", 0, BatchBuilder::new(1).build());
    assert_eq!(code, 19, "NOT_ENOUGH_REPLICAS");
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let latest: ListOffsetsResponse = raw.call(
        ApiKey::ListOffsets,
        7,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(s("guarded")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]),
    );
    assert_eq!(latest.topics[0].partitions[0].offset, 1, "nothing appended");
}
