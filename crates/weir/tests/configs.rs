//! Changing topic and broker configs while the broker runs (AlterConfigs,
//! IncrementalAlterConfigs, `weir cluster alter-config`) and deleting
//! records (DeleteRecords).

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
    assert!(message
        .unwrap()
        .contains("Cannot update these configs dynamically"));
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

/// One config of a DescribeConfigs answer.
#[derive(Debug)]
struct Entry {
    value: String,
    source: i8,
    read_only: bool,
    /// (name, value, source) by precedence.
    synonyms: Vec<(String, String, i8)>,
}

/// The configs of one resource, by name, with synonyms; or the error code
/// and message.
fn describe(
    raw: &mut Raw,
    resource_type: i8,
    resource: &str,
) -> Result<std::collections::BTreeMap<String, Entry>, (i16, String)> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(resource))
            .with_configuration_keys(None)]);
    let r: DescribeConfigsResponse = raw.call(ApiKey::DescribeConfigs, 4, &request);
    let result = &r.results[0];
    if result.error_code != 0 {
        return Err((
            result.error_code,
            result
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        ));
    }
    Ok(result
        .configs
        .iter()
        .map(|c| {
            let entry = Entry {
                value: c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                source: c.config_source,
                read_only: c.read_only,
                synonyms: c
                    .synonyms
                    .iter()
                    .map(|y| {
                        (
                            y.name.to_string(),
                            y.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                            y.source,
                        )
                    })
                    .collect(),
            };
            (c.name.to_string(), entry)
        })
        .collect())
}

const TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Appends `count` batches of about 300 bytes stamped `timestamp`.
fn fill(raw: &mut Raw, topic: &str, count: usize, timestamp: i64) {
    for _ in 0..count {
        let batch = BatchBuilder::sized(1, 300).timestamp(timestamp).build();
        assert_eq!(raw.produce(topic, 0, batch).0, 0);
    }
}

/// Polls `condition` for up to 15 s.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Waits long enough for several retention checks (every 200 ms here).
fn a_few_retention_checks() {
    std::thread::sleep(std::time::Duration::from_millis(1500));
}

fn weir_cli(weir: &Weir, args: &[&str]) -> common::cli::Out {
    let mut all = vec!["cluster", "--bootstrap", weir.kafka.as_str()];
    all.extend_from_slice(args);
    common::cli::run(&all, b"")
}

#[test]
fn a_cluster_wide_retention_change_applies_live_to_topics_without_their_own_and_survives_restart() {
    let mut weir = Weir::start(&["--log-retention-check-interval-ms", "200"]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("plain");
    raw.topic_metadata("kept");
    // "kept" has its own retention.bytes: no size limit.
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "kept",
            &[("retention.bytes", SET, Some("-1"))],
            false
        ),
        (0, None)
    );
    // Small segments for every topic, set while the topics exist.
    weir_cli(&weir, &["alter-config", "--set", "log.segment.bytes=1024"]).ok();
    let (plain, kept) = (
        describe(&mut raw, TOPIC, "plain").unwrap(),
        describe(&mut raw, TOPIC, "kept").unwrap(),
    );
    assert_eq!(plain["segment.bytes"].value, "1024");
    assert_eq!(plain["segment.bytes"].source, DYNAMIC_DEFAULT_BROKER_CONFIG);
    assert_eq!(
        plain["segment.bytes"].synonyms,
        [
            (
                "log.segment.bytes".into(),
                "1024".into(),
                DYNAMIC_DEFAULT_BROKER_CONFIG
            ),
            (
                "log.segment.bytes".into(),
                "1073741824".into(),
                DEFAULT_CONFIG
            ),
        ]
    );
    assert_eq!(kept["retention.bytes"].source, TOPIC_CONFIG);
    for topic in ["plain", "kept"] {
        fill(&mut raw, topic, 30, now_ms());
    }
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "plain"), 0, "no limit yet");

    let out = weir_cli(
        &weir,
        &["alter-config", "--set", "log.retention.bytes=1024"],
    )
    .ok();
    assert_eq!(
        out.stdout.trim(),
        "Altered the cluster-wide dynamic broker configs"
    );
    eventually("plain drops its old segments", || {
        earliest(&mut raw, "plain") > 0
    });
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "kept"), 0, "its own override holds");
    let plain = describe(&mut raw, TOPIC, "plain").unwrap();
    assert_eq!(
        (
            plain["retention.bytes"].value.as_str(),
            plain["retention.bytes"].source
        ),
        ("1024", DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    let retention = &broker["log.retention.bytes"];
    assert_eq!(
        (
            retention.value.as_str(),
            retention.source,
            retention.read_only
        ),
        ("1024", DYNAMIC_DEFAULT_BROKER_CONFIG, false)
    );
    let out = weir_cli(&weir, &["describe-config"]).ok();
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["log.retention.bytes", "1024"])),
        "{}",
        out.stdout
    );

    weir.restart(true);
    let mut raw = Raw::connect(&weir.kafka);
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    assert_eq!(
        broker["log.retention.bytes"].value, "1024",
        "kept across a restart"
    );
    assert_eq!(
        broker["log.retention.bytes"].source,
        DYNAMIC_DEFAULT_BROKER_CONFIG
    );
    // ...and applied: new segments push the start further.
    let start = earliest(&mut raw, "plain");
    fill(&mut raw, "plain", 30, now_ms());
    eventually("retention still applies after the restart", || {
        earliest(&mut raw, "plain") > start
    });
    assert_eq!(earliest(&mut raw, "kept"), 0);
    // Back to the static default: no size limit.
    weir_cli(&weir, &["alter-config", "--delete", "log.retention.bytes"]).ok();
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    assert_eq!(
        (
            broker["log.retention.bytes"].value.as_str(),
            broker["log.retention.bytes"].source
        ),
        ("-1", DEFAULT_CONFIG)
    );
}

#[test]
fn a_broker_override_beats_the_cluster_default() {
    use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::config::ClientConfig;

    let weir = Weir::start(&[
        "--log-retention-check-interval-ms",
        "200",
        "--log-retention-ms=-1",
    ]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("old");
    weir_cli(&weir, &["alter-config", "--set", "log.segment.bytes=1024"]).ok();
    // Records from 2023, kept by the static retention.ms=-1.
    fill(&mut raw, "old", 30, 1_700_000_000_000);
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "old"), 0);

    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .create()
        .unwrap();
    let options = AdminOptions::new();
    // This broker keeps everything, whatever the cluster-wide default.
    let results = common::cli::block_on(admin.alter_configs(
        [&AlterConfig::new(ResourceSpecifier::Broker(1)).set("log.retention.ms", "-1")],
        &options,
    ))
    .unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    weir_cli(
        &weir,
        &["alter-config", "--set", "log.retention.ms=3600000"],
    )
    .ok();
    let described =
        common::cli::block_on(admin.describe_configs([&ResourceSpecifier::Broker(1)], &options))
            .unwrap();
    let resource = described[0].as_ref().unwrap();
    let entries = resource.entry_map();
    let retention = entries["log.retention.ms"];
    assert_eq!(retention.value.as_deref(), Some("-1"));
    assert_eq!(
        retention.source,
        rdkafka::admin::ConfigSource::DynamicBroker
    );
    assert!(!retention.is_read_only);
    assert_eq!(
        entries["log.segment.bytes"].source,
        rdkafka::admin::ConfigSource::DynamicDefaultBroker
    );
    assert!(entries["num.partitions"].is_read_only);
    assert_eq!(
        entries["num.partitions"].source,
        rdkafka::admin::ConfigSource::Default
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    assert_eq!(
        broker["log.retention.ms"].synonyms,
        [
            (
                "log.retention.ms".into(),
                "-1".into(),
                DYNAMIC_BROKER_CONFIG
            ),
            (
                "log.retention.ms".into(),
                "3600000".into(),
                DYNAMIC_DEFAULT_BROKER_CONFIG
            ),
            ("log.retention.ms".into(), "-1".into(), STATIC_BROKER_CONFIG),
            // Kafka's defaults: null (shown "" here), null, and 168 hours.
            ("log.retention.ms".into(), "".into(), DEFAULT_CONFIG),
            ("log.retention.minutes".into(), "".into(), DEFAULT_CONFIG),
            ("log.retention.hours".into(), "168".into(), DEFAULT_CONFIG),
        ]
    );
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "old"), 0, "the broker's own -1 wins");

    // Without its own, the broker takes the cluster-wide hour.
    let out = weir_cli(
        &weir,
        &[
            "alter-config",
            "--broker",
            "1",
            "--delete",
            "log.retention.ms",
        ],
    )
    .ok();
    assert_eq!(out.stdout.trim(), "Altered the dynamic configs of broker 1");
    eventually("the old segments go", || earliest(&mut raw, "old") > 0);
    let out = weir_cli(&weir, &["describe-config", "--broker", "1"]).ok();
    let rows = out.table("NAME");
    let row = rows
        .iter()
        .find(|r| r[0] == "log.retention.ms")
        .expect("log.retention.ms row");
    assert_eq!(
        row[1..],
        ["3600000", "dynamic", "(cluster-wide)", "dynamic"]
    );
    let row = rows.iter().find(|r| r[0] == "num.partitions").unwrap();
    assert_eq!(row[1..], ["1", "default", "read-only"]);
}

#[test]
fn broker_config_changes_are_validated() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let invalid = alter(
        &mut raw,
        BROKER,
        "",
        &[("log.retention.ms", SET, Some("-5"))],
        false,
    );
    assert_eq!(invalid.0, 40, "INVALID_CONFIG");
    let message = invalid.1.unwrap();
    assert!(
        message.starts_with("Invalid value -5 for configuration log.retention.ms: "),
        "{message}"
    );
    let (code, message) = alter(
        &mut raw,
        BROKER,
        "1",
        &[("log.cleanup.policy", SET, Some("shred"))],
        false,
    );
    assert_eq!(code, 40);
    assert!(message.unwrap().contains("log.cleanup.policy"));
    let (code, message) = alter(
        &mut raw,
        BROKER,
        "",
        &[
            ("num.partitions", SET, Some("3")),
            ("log.retention.ms", SET, Some("5")),
        ],
        false,
    );
    assert_eq!(
        (code, message.as_deref()),
        (
            42,
            Some("Cannot update these configs dynamically: Set(num.partitions)")
        ),
        "a read-only config"
    );
    let (code, message) = alter(
        &mut raw,
        BROKER,
        "",
        &[("log.retention.minutes.please", SET, Some("5"))],
        false,
    );
    assert_eq!(code, 40);
    assert!(message.unwrap().contains("log.retention.minutes.please"));
    // A broker resource names a registered broker, or "" for all.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "7",
            &[("log.retention.ms", SET, Some("5"))],
            false
        )
        .0,
        42
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "one",
            &[("log.retention.ms", SET, Some("5"))],
            false
        )
        .0,
        42
    );
    assert_eq!(describe(&mut raw, BROKER, "7").unwrap_err().0, 42);
    // validate_only checks and changes nothing.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("log.retention.ms", SET, Some("5000"))],
            true
        ),
        (0, None)
    );
    // Nothing refused above was stored: cluster-wide there is only the
    // min.insync.replicas the controller keeps while eligible leader
    // replicas are on (KIP-966), as Kafka 4.x's.
    let cluster_wide = describe(&mut raw, BROKER, "").unwrap();
    assert_eq!(
        cluster_wide.keys().map(String::as_str).collect::<Vec<_>>(),
        ["min.insync.replicas"]
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    assert!(broker.iter().all(|(name, e)| e.source == DEFAULT_CONFIG
        || e.source == STATIC_BROKER_CONFIG
        || (name == "min.insync.replicas" && e.source == DYNAMIC_DEFAULT_BROKER_CONFIG)));
    // APPEND and SUBTRACT work on list configs only, from the value in force.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "1",
            &[("log.cleanup.policy", APPEND, Some("compact"))],
            false
        ),
        (0, None)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    assert_eq!(
        (
            broker["log.cleanup.policy"].value.as_str(),
            broker["log.cleanup.policy"].source
        ),
        ("delete,compact", DYNAMIC_BROKER_CONFIG)
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "1",
            &[("log.retention.ms", APPEND, Some("1"))],
            false
        )
        .0,
        40
    );
    // The cluster-wide resource describes what is set there, and only that.
    alter(
        &mut raw,
        BROKER,
        "",
        &[("log.cleaner.backoff.ms", SET, Some("500"))],
        false,
    );
    let defaults = describe(&mut raw, BROKER, "").unwrap();
    assert_eq!(
        defaults.keys().map(String::as_str).collect::<Vec<_>>(),
        ["log.cleaner.backoff.ms", "min.insync.replicas"]
    );
    let backoff = &defaults["log.cleaner.backoff.ms"];
    assert_eq!(
        (backoff.value.as_str(), backoff.source, backoff.read_only),
        ("500", DYNAMIC_DEFAULT_BROKER_CONFIG, false)
    );
    // The CLI says what is wrong in one line.
    let error = weir_cli(
        &weir,
        &["alter-config", "--set", "log.retention.bytes=lots"],
    )
    .failed_with_one_line();
    assert!(error.contains("log.retention.bytes"), "{error}");
    let error = weir_cli(
        &weir,
        &["alter-config", "--broker", "1", "--set", "broker.rack=r1"],
    )
    .failed_with_one_line();
    assert!(
        error.contains("Cannot update these configs dynamically"),
        "{error}"
    );
}

/// An empty `cleanup.policy` is valid, as in Kafka 4.2: neither policy
/// applies, so no retention limit removes a segment and DeleteRecords is
/// refused (POLICY_VIOLATION) as for a compacted topic. Describe shows the
/// empty value as the topic's own.
#[test]
fn an_empty_cleanup_policy_keeps_every_segment() {
    let weir = Weir::start(&["--log-retention-check-interval-ms", "200"]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("forever");
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "forever",
            &[
                ("cleanup.policy", SET, Some("")),
                ("segment.bytes", SET, Some("1024")),
                ("retention.ms", SET, Some("1")),
                ("retention.bytes", SET, Some("1024")),
            ],
            false
        ),
        (0, None)
    );
    assert_eq!(
        described(&mut raw, "forever", "cleanup.policy"),
        ("".into(), TOPIC_CONFIG)
    );
    fill(&mut raw, "forever", 20, now_ms() - 60_000);
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "forever"), 0, "nothing deleted");
    assert_eq!(
        delete_records(&mut raw, "forever", 0, 5).0,
        44,
        "POLICY_VIOLATION"
    );
    // SUBTRACT may empty the list too, and APPEND starts from it.
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "forever",
            &[("cleanup.policy", APPEND, Some("delete"))],
            false
        ),
        (0, None)
    );
    assert_eq!(described(&mut raw, "forever", "cleanup.policy").0, "delete");
    eventually("retention applies again", || {
        earliest(&mut raw, "forever") > 0
    });
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "forever",
            &[("cleanup.policy", SUBTRACT, Some("delete"))],
            false
        ),
        (0, None)
    );
    assert_eq!(described(&mut raw, "forever", "cleanup.policy").0, "");
}

/// A broker describes the static configs Kafka lists too — identity,
/// roles, listeners, quorum, data directory — with the value in force,
/// STATIC_BROKER_CONFIG when given at start and DEFAULT_CONFIG otherwise,
/// read-only; changing one is refused as Kafka refuses a static config.
#[test]
fn a_broker_describes_its_static_configs_read_only() {
    const STRING: i8 = 2;
    const INT: i8 = 3;
    const LIST: i8 = 7;
    let weir = Weir::start(&["--node-id", "7", "--advertised-addr", "kafka.example:9092"]);
    let mut raw = Raw::connect(&weir.kafka);
    let configs = describe(&mut raw, BROKER, "7").unwrap();
    let listeners = &configs["listeners"].value;
    let controller = listeners
        .strip_prefix(&format!("PLAINTEXT://{},CONTROLLER://", weir.kafka))
        .unwrap_or_else(|| panic!("{listeners}"));
    assert!(!controller.ends_with(":0"), "the bound port: {listeners}");
    let data_dir = weir.data_dir.display().to_string();
    for (name, value, source) in [
        ("node.id", "7", STATIC_BROKER_CONFIG),
        ("broker.id", "7", STATIC_BROKER_CONFIG),
        ("process.roles", "broker,controller", DEFAULT_CONFIG),
        ("listeners", listeners.as_str(), STATIC_BROKER_CONFIG),
        (
            "advertised.listeners",
            "PLAINTEXT://kafka.example:9092",
            STATIC_BROKER_CONFIG,
        ),
        ("controller.listener.names", "CONTROLLER", DEFAULT_CONFIG),
        (
            "controller.quorum.voters",
            &format!("7@{controller}"),
            DEFAULT_CONFIG,
        ),
        ("log.dirs", &data_dir, STATIC_BROKER_CONFIG),
        ("log.dir", "./weir-data", DEFAULT_CONFIG),
        (
            "weir.http.listener",
            &format!("http://{}", weir.http),
            STATIC_BROKER_CONFIG,
        ),
    ] {
        let entry = &configs[name];
        assert_eq!(
            (entry.value.as_str(), entry.source, entry.read_only),
            (value, source, true),
            "{name}"
        );
    }
    assert_eq!(
        configs["log.dirs"].synonyms,
        [
            ("log.dirs".into(), data_dir.clone(), STATIC_BROKER_CONFIG),
            ("log.dir".into(), "./weir-data".into(), DEFAULT_CONFIG),
        ]
    );
    // Kafka's config types.
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s("7"))
            .with_configuration_keys(Some(
                [
                    "node.id",
                    "process.roles",
                    "listeners",
                    "controller.quorum.voters",
                ]
                .map(s)
                .to_vec(),
            ))]);
    let r: DescribeConfigsResponse = raw.call(ApiKey::DescribeConfigs, 4, &request);
    let types: Vec<(String, i8)> = r.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.config_type))
        .collect();
    assert_eq!(
        types,
        [
            ("node.id".into(), INT),
            ("process.roles".into(), LIST),
            ("listeners".into(), STRING),
            ("controller.quorum.voters".into(), LIST),
        ]
    );

    // Read-only: refused by both kinds of AlterConfigs, for the broker and
    // for the cluster-wide default.
    for (resource, name) in [("7", "listeners"), ("7", "node.id"), ("", "log.dirs")] {
        assert_eq!(
            alter(&mut raw, BROKER, resource, &[(name, SET, Some("x"))], false),
            (
                42,
                Some(format!(
                    "Cannot update these configs dynamically: Set({name})"
                ))
            ),
            "{resource:?} {name}"
        );
    }
    let request = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s("7"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("advertised.listeners"))
                .with_value(Some(s("PLAINTEXT://elsewhere:9092")))]),
    ]);
    let r: AlterConfigsResponse = raw.call(ApiKey::AlterConfigs, 2, &request);
    assert_eq!(
        (
            r.responses[0].error_code,
            r.responses[0].error_message.as_deref()
        ),
        (
            42,
            Some("Cannot update these configs dynamically: Set(advertised.listeners)")
        )
    );

    // Not given at start: the defaults, null where Kafka's default is.
    let plain = Weir::start(&[]);
    let mut raw = Raw::connect(&plain.kafka);
    let configs = describe(&mut raw, BROKER, "1").unwrap();
    assert_eq!(
        (configs["node.id"].value.as_str(), configs["node.id"].source),
        ("1", DEFAULT_CONFIG)
    );
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s("1"))
            .with_configuration_keys(Some(vec![s("advertised.listeners")]))]);
    let r: DescribeConfigsResponse = raw.call(ApiKey::DescribeConfigs, 4, &request);
    let advertised = &r.results[0].configs[0];
    assert_eq!(
        (advertised.value.as_deref(), advertised.config_source),
        (None, DEFAULT_CONFIG)
    );
}

/// `log.dirs` given (here as `WEIR_LOG_DIRS`): described as given, static,
/// with `log.dir`'s default as its synonym.
#[test]
fn log_dirs_given_are_described_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = format!(
        "{},{}",
        tmp.path().join("a").display(),
        tmp.path().join("b").display()
    );
    let weir = Weir::start_in(
        &tmp.path().join("data"),
        &[],
        None,
        &[("WEIR_LOG_DIRS", &dirs)],
    );
    let mut raw = Raw::connect(&weir.kafka);
    let configs = describe(&mut raw, BROKER, "1").unwrap();
    let entry = &configs["log.dirs"];
    assert_eq!(
        (entry.value.as_str(), entry.source, entry.read_only),
        (dirs.as_str(), STATIC_BROKER_CONFIG, true)
    );
    assert_eq!(
        entry.synonyms,
        [
            ("log.dirs".into(), dirs.clone(), STATIC_BROKER_CONFIG),
            ("log.dir".into(), "./weir-data".into(), DEFAULT_CONFIG),
        ]
    );
    assert!(tmp.path().join("a").is_dir() && tmp.path().join("b").is_dir());
}

/// The replication throttles (KIP-73) round-trip through
/// IncrementalAlterConfigs and DescribeConfigs with Kafka's names, types,
/// defaults and validation.
#[test]
fn replication_throttle_configs_round_trip_and_are_validated() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("moving");
    let unlimited = i64::MAX.to_string();
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    for name in [
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    ] {
        let entry = &broker[name];
        assert_eq!(
            (entry.value.as_str(), entry.source),
            (unlimited.as_str(), DEFAULT_CONFIG),
            "{name}"
        );
        assert!(!entry.read_only, "{name} is dynamic");
    }
    let topic = describe(&mut raw, TOPIC, "moving").unwrap();
    for name in [
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ] {
        assert_eq!(
            (topic[name].value.as_str(), topic[name].source),
            ("", DEFAULT_CONFIG),
            "{name}"
        );
    }

    // Set on the cluster default and on this broker; the broker's wins.
    let set = |raw: &mut Raw, resource: &str, name: &str, value: &str| {
        alter(raw, BROKER, resource, &[(name, SET, Some(value))], false)
    };
    assert_eq!(
        set(&mut raw, "", "leader.replication.throttled.rate", "2000000"),
        (0, None)
    );
    assert_eq!(
        set(
            &mut raw,
            "1",
            "leader.replication.throttled.rate",
            "1000000"
        ),
        (0, None)
    );
    assert_eq!(
        set(
            &mut raw,
            "1",
            "replica.alter.log.dirs.io.max.bytes.per.second",
            "0"
        ),
        (0, None)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    let entry = &broker["leader.replication.throttled.rate"];
    assert_eq!(
        (entry.value.as_str(), entry.source),
        ("1000000", DYNAMIC_BROKER_CONFIG)
    );
    let sources: Vec<i8> = entry
        .synonyms
        .iter()
        .map(|(_, _, source)| *source)
        .collect();
    assert_eq!(
        sources,
        [
            DYNAMIC_BROKER_CONFIG,
            DYNAMIC_DEFAULT_BROKER_CONFIG,
            DEFAULT_CONFIG
        ]
    );
    assert_eq!(
        broker["replica.alter.log.dirs.io.max.bytes.per.second"].value,
        "0"
    );
    // Kafka's range: at least 0, a whole number.
    for bad in ["-1", "1.5", "fast"] {
        let (code, message) = set(&mut raw, "1", "follower.replication.throttled.rate", bad);
        assert_eq!(code, 40, "{bad}: INVALID_CONFIG");
        assert!(
            message
                .unwrap()
                .contains("follower.replication.throttled.rate"),
            "{bad}"
        );
    }

    // The throttled replicas of a topic: `*` or partition:broker pairs.
    for value in ["*", "0:1,1:2", ""] {
        assert_eq!(
            alter(
                &mut raw,
                TOPIC,
                "moving",
                &[("leader.replication.throttled.replicas", SET, Some(value))],
                false
            ),
            (0, None)
        );
        assert_eq!(
            described(&mut raw, "moving", "leader.replication.throttled.replicas"),
            (value.to_owned(), TOPIC_CONFIG)
        );
    }
    for bad in ["0", "0:1:2", "*,0:1", "a:b"] {
        let (code, message) = alter(
            &mut raw,
            TOPIC,
            "moving",
            &[("follower.replication.throttled.replicas", SET, Some(bad))],
            false,
        );
        assert_eq!(code, 40, "{bad}: INVALID_CONFIG");
        assert_eq!(
            message.as_deref(),
            Some(
                format!(
                    "Invalid value {bad} for configuration follower.replication.throttled.replicas: \
                     follower.replication.throttled.replicas must be the literal '*' or a list of \
                     replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                )
                .as_str()
            )
        );
    }

    // What `kafka-reassign-partitions --verify` does once the moves are
    // done: DELETE every throttle, set or not.
    let clear: Vec<(&str, i8, Option<&str>)> = [
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    ]
    .into_iter()
    .map(|name| (name, DELETE, None))
    .collect();
    assert_eq!(alter(&mut raw, BROKER, "1", &clear, false), (0, None));
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "moving",
            &[
                ("leader.replication.throttled.replicas", DELETE, None),
                ("follower.replication.throttled.replicas", DELETE, None)
            ],
            false
        ),
        (0, None)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    let entry = &broker["leader.replication.throttled.rate"];
    assert_eq!(
        (entry.value.as_str(), entry.source),
        ("2000000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(
        broker["replica.alter.log.dirs.io.max.bytes.per.second"].value,
        unlimited
    );
    assert_eq!(
        described(&mut raw, "moving", "leader.replication.throttled.replicas"),
        (String::new(), DEFAULT_CONFIG)
    );
}

const GROUP: i8 = 32;
const GROUP_CONFIG: i8 = 8;

#[test]
fn kafka_broker_configs_without_effect_on_weir_are_accepted_validated_stored_and_described() {
    let weir = Weir::start(&["--zookeeper-connect", "zk:2181"]);
    let mut raw = Raw::connect(&weir.kafka);
    let relogin = "sasl.kerberos.min.time.before.relogin";
    // Per broker, as Kafka updates it.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "1",
            &[(relogin, SET, Some("120000"))],
            false
        ),
        (0, None)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    let entry = &broker[relogin];
    assert_eq!(
        (entry.value.as_str(), entry.source, entry.read_only),
        ("120000", DYNAMIC_BROKER_CONFIG, false)
    );
    assert_eq!(
        entry.synonyms,
        [
            (relogin.into(), "120000".into(), DYNAMIC_BROKER_CONFIG),
            (relogin.into(), "60000".into(), DEFAULT_CONFIG),
        ]
    );
    // Given at start, read-only.
    let zookeeper = &broker["zookeeper.connect"];
    assert_eq!(
        (
            zookeeper.value.as_str(),
            zookeeper.source,
            zookeeper.read_only
        ),
        ("zk:2181", STATIC_BROKER_CONFIG, true)
    );
    assert_eq!(
        (
            broker["num.io.threads"].value.as_str(),
            broker["num.io.threads"].source
        ),
        ("8", DEFAULT_CONFIG)
    );
    // Kafka's rules: a per-broker config is no cluster-wide default, a
    // read-only one is not changed while running, a value must fit.
    assert_eq!(
        alter(&mut raw, BROKER, "", &[(relogin, SET, Some("1000"))], false),
        (
            42,
            Some(format!(
                "Cannot update these configs at default cluster level, broker id must be specified: Set({relogin})"
            ))
        )
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("zookeeper.connect", SET, Some("zk:1"))],
            false
        ),
        (
            42,
            Some("Cannot update these configs dynamically: Set(zookeeper.connect)".to_owned())
        )
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "1",
            &[(relogin, SET, Some("soon"))],
            false
        ),
        (
            40,
            Some(format!(
                "Invalid value soon for configuration {relogin}: Not a number of type LONG"
            ))
        )
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("num.io.threads", SET, Some("0"))],
            false
        ),
        (
            40,
            Some(
                "Invalid value 0 for configuration num.io.threads: Value must be at least 1"
                    .to_owned()
            )
        )
    );
    // A cluster-wide one.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("num.io.threads", SET, Some("16"))],
            false
        ),
        (0, None)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    assert_eq!(
        (
            broker["num.io.threads"].value.as_str(),
            broker["num.io.threads"].source
        ),
        ("16", DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(broker[relogin].value, "120000", "unchanged by the refusals");
}

#[test]
fn kafka_group_configs_are_known_on_group_resources() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(
        alter(
            &mut raw,
            GROUP,
            "queue",
            &[
                ("share.partition.max.record.locks", SET, Some("500")),
                ("streams.session.timeout.ms", SET, Some("50000")),
                ("share.renew.acknowledge.enable", SET, Some("true")),
            ],
            false
        ),
        (0, None)
    );
    let group = describe(&mut raw, GROUP, "queue").unwrap();
    let locks = &group["share.partition.max.record.locks"];
    assert_eq!((locks.value.as_str(), locks.source), ("500", GROUP_CONFIG));
    assert_eq!(group["streams.session.timeout.ms"].value, "50000");
    // Unset, the broker's value.
    assert_eq!(
        (
            group["streams.num.standby.replicas"].value.as_str(),
            group["streams.num.standby.replicas"].source
        ),
        ("0", DEFAULT_CONFIG)
    );
    assert_eq!(
        alter(
            &mut raw,
            GROUP,
            "queue",
            &[("share.partition.max.record.locks", SET, Some("0"))],
            false
        ),
        (
            40,
            Some(
                "Invalid value 0 for configuration share.partition.max.record.locks: Value must be at least 1"
                    .to_owned()
            )
        )
    );
    assert_eq!(
        alter(
            &mut raw,
            GROUP,
            "queue",
            &[("share.lunch.break.ms", SET, Some("1"))],
            false
        )
        .0,
        40
    );
}

#[test]
fn log_retention_hours_given_at_start_is_the_retention_of_topics_without_their_own() {
    let weir = Weir::start(&[
        "--log-retention-hours=1",
        "--log-retention-check-interval-ms",
        "200",
        "--log-segment-bytes",
        "1024",
    ]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("recent");
    raw.topic_metadata("kept");
    assert_eq!(
        alter(
            &mut raw,
            TOPIC,
            "kept",
            &[("retention.ms", SET, Some("-1"))],
            false
        ),
        (0, None)
    );
    // Two hours old: within Kafka's default week, past the hour given.
    let two_hours_ago = now_ms() - 2 * 3_600_000;
    fill(&mut raw, "recent", 30, two_hours_ago);
    fill(&mut raw, "kept", 30, two_hours_ago);
    eventually("the two-hour-old segments go", || {
        earliest(&mut raw, "recent") > 0
    });
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "kept"), 0, "its own retention.ms holds");
    // As Kafka describes it: log.retention.ms's synonyms from its null
    // default on (null shows as "" here), so DEFAULT_CONFIG, with the
    // hour's value.
    let topic = describe(&mut raw, TOPIC, "recent").unwrap();
    let retention = &topic["retention.ms"];
    assert_eq!(
        (retention.value.as_str(), retention.source),
        ("3600000", DEFAULT_CONFIG)
    );
    let defaults: [(String, String, i8); 3] = [
        ("log.retention.ms".into(), "".into(), DEFAULT_CONFIG),
        ("log.retention.minutes".into(), "".into(), DEFAULT_CONFIG),
        ("log.retention.hours".into(), "168".into(), DEFAULT_CONFIG),
    ];
    assert_eq!(retention.synonyms, defaults);
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    let hours = &broker["log.retention.hours"];
    assert_eq!(
        (hours.value.as_str(), hours.source, hours.read_only),
        ("1", STATIC_BROKER_CONFIG, true)
    );
    // Kafka's log.retention.ms is null unless set.
    assert_eq!(
        (
            broker["log.retention.ms"].value.as_str(),
            broker["log.retention.ms"].source
        ),
        ("", DEFAULT_CONFIG)
    );
    // Read-only in Kafka; log.retention.ms is the dynamic one, and wins.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("log.retention.hours", SET, Some("2"))],
            false
        ),
        (
            42,
            Some("Cannot update these configs dynamically: Set(log.retention.hours)".to_owned())
        )
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("log.retention.ms", SET, Some("soon"))],
            false
        ),
        (
            40,
            Some(
                "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"
                    .to_owned()
            )
        )
    );
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("log.retention.ms", SET, Some("86400000"))],
            false
        ),
        (0, None)
    );
    let topic = describe(&mut raw, TOPIC, "recent").unwrap();
    let retention = &topic["retention.ms"];
    assert_eq!(
        (retention.value.as_str(), retention.source),
        ("86400000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(
        retention.synonyms[..2],
        [
            (
                "log.retention.ms".into(),
                "86400000".into(),
                DYNAMIC_DEFAULT_BROKER_CONFIG
            ),
            (
                "log.retention.hours".into(),
                "1".into(),
                STATIC_BROKER_CONFIG
            ),
        ]
    );
    assert_eq!(retention.synonyms[2..], defaults);
    let start = earliest(&mut raw, "recent");
    fill(&mut raw, "recent", 30, two_hours_ago);
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "recent"), start, "a day keeps two hours");
}

#[test]
fn retention_in_ms_wins_over_minutes_which_win_over_hours_in_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("weir.toml");
    std::fs::write(
        &file,
        "\"log.retention.hours\" = 1\n\"log.retention.minutes\" = 600\n\"log.roll.hours\" = 2\n",
    )
    .unwrap();
    let weir = Weir::start(&[
        "--config",
        file.to_str().unwrap(),
        "--log-retention-check-interval-ms",
        "200",
        "--log-segment-bytes",
        "1024",
    ]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("t");
    let topic = describe(&mut raw, TOPIC, "t").unwrap();
    let retention = &topic["retention.ms"];
    // The minutes' value; DEFAULT_CONFIG as Kafka says it (the synonyms
    // start at log.retention.ms's null default).
    assert_eq!(
        (retention.value.as_str(), retention.source),
        ("36000000", DEFAULT_CONFIG)
    );
    assert_eq!(
        (
            topic["segment.ms"].value.as_str(),
            topic["segment.ms"].source
        ),
        ("7200000", DEFAULT_CONFIG)
    );
    let broker = describe(&mut raw, BROKER, "1").unwrap();
    let minutes = &broker["log.retention.minutes"];
    assert_eq!(
        (minutes.value.as_str(), minutes.source, minutes.read_only),
        ("600", STATIC_BROKER_CONFIG, true)
    );
    assert_eq!(
        minutes.synonyms[0],
        (
            "log.retention.minutes".into(),
            "600".into(),
            STATIC_BROKER_CONFIG
        )
    );
    // Ten hours (the minutes) keep two-hour-old records; the hour does not
    // count.
    fill(&mut raw, "t", 30, now_ms() - 2 * 3_600_000);
    a_few_retention_checks();
    assert_eq!(earliest(&mut raw, "t"), 0);
    // Half an hour in milliseconds beats both.
    assert_eq!(
        alter(
            &mut raw,
            BROKER,
            "",
            &[("log.retention.ms", SET, Some("1800000"))],
            false
        ),
        (0, None)
    );
    eventually("the ms setting applies", || earliest(&mut raw, "t") > 0);
}
