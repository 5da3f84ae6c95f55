//! Committed offsets through librdkafka: commit, read back, survive
//! restarts, and go with a deleted topic.

mod common;

use std::time::Duration;

use common::Weir;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use weir_log::testing::BatchBuilder;

fn consumer(weir: &Weir, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer")
}

fn committed(weir: &Weir, group: &str, topic: &str, partitions: i32) -> Vec<Offset> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let found = consumer(weir, group)
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("committed offsets");
    (0..partitions)
        .map(|p| found.find_partition(topic, p).unwrap().offset())
        .collect()
}

fn commit(
    weir: &Weir,
    group: &str,
    offsets: &[(&str, i32, i64)],
) -> rdkafka::error::KafkaResult<()> {
    let consumer = consumer(weir, group);
    let mut tpl = TopicPartitionList::new();
    for &(topic, partition, offset) in offsets {
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync)
}

fn create_topic(weir: &Weir, topic: &str, partitions: usize) {
    let mut raw = common::raw::Raw::connect(&weir.kafka);
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        5,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_num_partitions(partitions as i32)
            .with_replication_factor(1)]),
    );
    assert_eq!(response.topics[0].error_code, 0);
    for p in 0..partitions as i32 {
        assert_eq!(raw.produce(topic, p, BatchBuilder::new(10).build()).0, 0);
    }
}

#[test]
fn commits_are_read_back_per_group_and_survive_restarts() {
    let mut weir = Weir::start(&[]);
    create_topic(&weir, "orders", 3);
    commit(&weir, "billing", &[("orders", 0, 4), ("orders", 2, 10)]).unwrap();
    commit(&weir, "audit", &[("orders", 0, 7)]).unwrap();
    commit(&weir, "billing", &[("orders", 0, 5)]).unwrap();
    let billing = vec![Offset::Offset(5), Offset::Invalid, Offset::Offset(10)];
    let audit = vec![Offset::Offset(7), Offset::Invalid, Offset::Invalid];
    assert_eq!(committed(&weir, "billing", "orders", 3), billing);
    assert_eq!(committed(&weir, "audit", "orders", 3), audit);
    // Offsets live in __consumer_offsets: a clean restart and a kill -9 both
    // rebuild them from there.
    weir.restart(true);
    assert_eq!(committed(&weir, "billing", "orders", 3), billing);
    commit(&weir, "audit", &[("orders", 1, 3)]).unwrap();
    weir.restart(false);
    assert_eq!(committed(&weir, "billing", "orders", 3), billing);
    assert_eq!(
        committed(&weir, "audit", "orders", 3),
        vec![Offset::Offset(7), Offset::Offset(3), Offset::Invalid]
    );
}

#[test]
fn a_consumer_resumes_from_its_committed_offset() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "resume", 1);
    commit(&weir, "reader", &[("resume", 0, 6)]).unwrap();
    let consumer = consumer(&weir, "reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("resume", 0, Offset::Stored)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let first = loop {
        if let Some(message) = consumer.poll(Duration::from_millis(500)) {
            break rdkafka::Message::offset(&message.unwrap());
        }
    };
    assert_eq!(first, 6);
}

#[test]
fn commits_to_unknown_partitions_fail_alone_and_deleted_topics_take_their_offsets() {
    let weir = Weir::start(&["--auto-create-topics-enable", "false"]);
    create_topic(&weir, "kept", 1);
    create_topic(&weir, "doomed", 1);
    let result = commit(&weir, "g", &[("kept", 0, 3), ("kept", 5, 1)]);
    assert!(
        result.is_err(),
        "a commit to a partition that does not exist must fail"
    );
    // The valid partition of the same request was committed.
    assert_eq!(committed(&weir, "g", "kept", 1), vec![Offset::Offset(3)]);
    commit(&weir, "g", &[("doomed", 0, 2)]).unwrap();
    let mut raw = common::raw::Raw::connect(&weir.kafka);
    use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let deleted: DeleteTopicsResponse = raw.call(
        ApiKey::DeleteTopics,
        5,
        &DeleteTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topic_names(vec![TopicName(StrBytes::from_static_str("doomed"))]),
    );
    assert_eq!(deleted.responses[0].error_code, 0);
    create_topic(&weir, "doomed", 1);
    assert_eq!(committed(&weir, "g", "doomed", 1), vec![Offset::Invalid]);
    assert_eq!(committed(&weir, "g", "kept", 1), vec![Offset::Offset(3)]);
}

#[test]
fn lag_is_exported_without_any_client() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "lagging", 2);
    commit(&weir, "slow", &[("lagging", 0, 4), ("lagging", 1, 10)]).unwrap();
    let (status, metrics) = weir.http_get("/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains(
            "weir_consumer_group_lag{group=\"slow\",topic=\"lagging\",partition=\"0\"} 6"
        ),
        "{metrics}"
    );
    assert!(metrics
        .contains("weir_consumer_group_lag{group=\"slow\",topic=\"lagging\",partition=\"1\"} 0"));
    // The records were stamped in 2023: the oldest unconsumed one is old.
    let seconds: f64 = metrics
        .lines()
        .find(|l| {
            l.starts_with(
                "weir_consumer_group_lag_seconds{group=\"slow\",topic=\"lagging\",partition=\"0\"}",
            )
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("lag seconds of partition 0");
    assert!(seconds > 86_400.0, "{seconds}");
    let (status, body) = weir.http_get("/v1/groups");
    assert_eq!(status, 200);
    assert!(body.contains("\"group\":\"slow\""), "{body}");
    assert!(body.contains("\"lag\":6"), "{body}");
    let (status, body) = weir.http_get("/v1/groups/slow");
    assert_eq!(status, 200);
    assert!(
        body.contains("\"committed_offset\":4") && body.contains("\"log_end_offset\":10"),
        "{body}"
    );
    assert_eq!(weir.http_get("/v1/groups/nobody").0, 404);
}

#[test]
fn groups_are_listed_described_and_deleted() {
    let weir = Weir::start(&[]);
    create_topic(&weir, "listed", 1);
    commit(&weir, "alpha", &[("listed", 0, 1)]).unwrap();
    commit(&weir, "beta", &[("listed", 0, 2)]).unwrap();
    let consumer = consumer(&weir, "observer");
    let list = consumer
        .fetch_group_list(None, Duration::from_secs(10))
        .expect("group list");
    let mut names: Vec<(String, String)> = list
        .groups()
        .iter()
        .map(|g| (g.name().to_owned(), g.state().to_owned()))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ("alpha".into(), "Empty".into()),
            ("beta".into(), "Empty".into())
        ]
    );
    // DeleteGroups removes the group and its offsets.
    let mut raw = common::raw::Raw::connect(&weir.kafka);
    use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
    use kafka_protocol::protocol::StrBytes;
    let deleted: DeleteGroupsResponse = raw.call(
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_static_str("alpha"))]),
    );
    assert_eq!(deleted.results[0].error_code, 0);
    assert_eq!(
        committed(&weir, "alpha", "listed", 1),
        vec![Offset::Invalid]
    );
    assert_eq!(
        committed(&weir, "beta", "listed", 1),
        vec![Offset::Offset(2)]
    );
}

#[test]
fn records_deleted_before_a_group_read_them_are_flagged_as_lost() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let weir = Weir::start(&[]);
    create_topic(&weir, "expiring", 1);
    commit(&weir, "late", &[("expiring", 0, 4)]).unwrap();
    let mut raw = common::raw::Raw::connect(&weir.kafka);
    let response: DeleteRecordsResponse = raw.call(
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default().with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("expiring")))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(7)])]),
    );
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
    let (_, metrics) = weir.http_get("/metrics");
    assert!(
        metrics.contains(
            "weir_consumer_group_lost_to_retention{group=\"late\",topic=\"expiring\",partition=\"0\"} 3"
        ),
        "{metrics}"
    );
    let (_, body) = weir.http_get("/v1/groups/late");
    assert!(body.contains("\"lost_to_retention\":3"), "{body}");
    assert!(body.contains("\"lag\":6"), "{body}");
}
