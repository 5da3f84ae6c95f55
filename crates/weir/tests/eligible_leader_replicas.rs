//! Eligible leader replicas (KIP-966) on a real cluster: one controller and
//! three brokers, a topic with replication factor 3 and
//! `min.insync.replicas` 2. The followers stop one after the other, then
//! the leader dies: with the feature on, a follower that left the ISR
//! below its minimum comes back and leads cleanly, losing nothing
//! acknowledged; with the feature off (Kafka 3) the partition stays
//! offline.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::{create_topic_with, send_acked, wait_until, Cluster, SESSION_TIMEOUT_MS};
use common::raw::Raw;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse, TopicName, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

const TOPIC: &str = "elr";
const ELR_FEATURE: &str = "eligible.leader.replicas.version";
const SAFE_DOWNGRADE: i8 = 2;

/// (leader, ISR, ELR, last known ELR) of the topic's partition, as
/// DescribeTopicPartitions reports it; the ELR lists sorted.
type Described = (i32, Vec<i32>, Vec<i32>, Vec<i32>);

fn describe(bootstrap: &str) -> Described {
    let mut raw = Raw::connect(bootstrap);
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            TopicRequest::default().with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        ])
        .with_response_partition_limit(10);
    let response: DescribeTopicPartitionsResponse =
        raw.call(ApiKey::DescribeTopicPartitions, 0, &request);
    let p = &response.topics[0].partitions[0];
    let ids = |list: &Option<Vec<kafka_protocol::messages::BrokerId>>| {
        let mut ids: Vec<i32> = list.iter().flatten().map(|b| b.0).collect();
        ids.sort_unstable();
        ids
    };
    (
        p.leader_id.0,
        p.isr_nodes.iter().map(|b| b.0).collect(),
        ids(&p.eligible_leader_replicas),
        ids(&p.last_known_elr),
    )
}

fn elr_level(bootstrap: &str) -> Option<i16> {
    let mut raw = Raw::connect(bootstrap);
    let response: ApiVersionsResponse =
        raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    response
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == ELR_FEATURE)
        .map(|f| f.max_version_level)
}

/// Every value in the topic's partition, read from the start once `count`
/// are there (or 20 s have passed).
fn read_all(bootstrap: &str, count: usize) -> BTreeSet<String> {
    use rdkafka::message::Message;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "elr-reader")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut values = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while values.len() < count && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            let value = message.payload().unwrap_or_default();
            values.insert(String::from_utf8_lossy(value).into_owned());
        }
    }
    values
}

/// Where the sequence stands once the leader is dead.
struct Sequence {
    cluster: Cluster,
    leader: i32,
    /// Stopped first, while the ISR kept its minimum: not eligible.
    first: i32,
    /// Stopped second, taking the ISR below its minimum: eligible.
    second: i32,
    acked: Vec<String>,
}

/// A controller (node 1) and brokers 2, 3 and 4, the feature lowered to
/// 0 first when `elr` is false; the topic written to while its followers
/// stop cleanly one after the other, then its leader killed.
fn followers_stop_then_the_leader_dies(elr: bool) -> Sequence {
    let mut cluster = Cluster::start_with(&["controller", "broker", "broker", "broker"], &[]);
    let any = cluster.node(2).kafka.clone();
    assert_eq!(elr_level(&any), Some(1), "a new cluster has the feature on");
    if !elr {
        let mut raw = Raw::connect(&any);
        let request = UpdateFeaturesRequest::default()
            .with_timeout_ms(10_000)
            .with_feature_updates(vec![FeatureUpdateKey::default()
                .with_feature(StrBytes::from_static_str(ELR_FEATURE))
                .with_max_version_level(0)
                .with_upgrade_type(SAFE_DOWNGRADE)]);
        let response: UpdateFeaturesResponse = raw.call(ApiKey::UpdateFeatures, 1, &request);
        assert_eq!(response.error_code, 0, "{:?}", response.error_message);
        wait_until("the feature to be off", Duration::from_secs(10), || {
            (elr_level(&any).is_none()).then_some(())
        });
    }
    create_topic_with(&any, TOPIC, 1, 3, &[("min.insync.replicas", "2")]);
    let (leader, isr, _, _) = wait_until("a leader", Duration::from_secs(10), || {
        Some(describe(&any)).filter(|d| d.0 > 0 && d.1.len() == 3)
    });
    let followers: Vec<i32> = isr.iter().copied().filter(|r| *r != leader).collect();
    let (first, second) = (followers[0], followers[1]);
    let mut acked = send_acked(&cluster.bootstrap(), TOPIC, "all-three", 200);
    assert_eq!(acked.len(), 200);

    assert!(cluster.node_mut(first).stop().success());
    let bootstrap = cluster.node(leader).kafka.clone();
    wait_until(
        "the first follower to leave the ISR",
        Duration::from_secs(20),
        || (describe(&bootstrap).1.len() == 2).then_some(()),
    );
    // Two in sync, the minimum: acks=all still succeeds, and `first`
    // lacks these records.
    let after_first = send_acked(&bootstrap, TOPIC, "two-left", 200);
    assert_eq!(after_first.len(), 200);
    acked.extend(after_first);

    assert!(cluster.node_mut(second).stop().success());
    let below_min = wait_until("the ISR below its minimum", Duration::from_secs(20), || {
        Some(describe(&bootstrap)).filter(|d| d.1 == [leader])
    });
    let expected_elr = if elr { vec![second] } else { vec![] };
    assert_eq!(below_min, (leader, vec![leader], expected_elr, vec![]));

    cluster.node_mut(leader).kill();
    Sequence {
        cluster,
        leader,
        first,
        second,
        acked,
    }
}

#[test]
fn a_replica_that_left_an_isr_below_its_minimum_leads_cleanly_once_the_leader_is_gone() {
    let Sequence {
        mut cluster,
        leader,
        first,
        second,
        acked,
    } = followers_stop_then_the_leader_dies(true);
    // The controller fences the dead leader: the ISR empties into the ELR.
    cluster.node_mut(second).restart(false);
    let view = cluster.node(second).kafka.clone();
    let mut eligible = vec![leader, second];
    eligible.sort_unstable();
    let elected = wait_until(
        "the eligible replica to lead",
        Duration::from_millis(SESSION_TIMEOUT_MS + 20_000),
        || Some(describe(&view)).filter(|d| d.0 == second),
    );
    assert_eq!(
        elected,
        (second, vec![second], vec![leader], vec![]),
        "elected from the ELR {eligible:?}, alone in the ISR; the dead leader stays eligible"
    );

    // The other follower comes back, catches up from the new leader and
    // brings the ISR back to its minimum: the high watermark moves on.
    cluster.node_mut(first).restart(false);
    wait_until("the ISR at its minimum", Duration::from_secs(30), || {
        Some(describe(&view)).filter(|d| d.1.len() == 2)
    });
    let read = read_all(&view, acked.len());
    let lost: Vec<&String> = acked.iter().filter(|v| !read.contains(*v)).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    let (_, isr, elr, last_known) = describe(&view);
    assert_eq!(
        (isr.len(), elr, last_known),
        (2, vec![], vec![]),
        "ELR cleared"
    );
    let more = send_acked(&view, TOPIC, "after", 50);
    assert_eq!(more.len(), 50, "writable again");
}

#[test]
fn without_eligible_leader_replicas_the_partition_stays_offline_when_the_leader_dies() {
    let Sequence {
        mut cluster,
        leader,
        second,
        ..
    } = followers_stop_then_the_leader_dies(false);
    cluster.node_mut(second).restart(false);
    let view = cluster.node(second).kafka.clone();
    wait_until(
        "the dead leader to be fenced",
        Duration::from_millis(SESSION_TIMEOUT_MS + 20_000),
        || Some(describe(&view)).filter(|d| d.0 == -1),
    );
    // Long enough for the returning replica's registration and a few
    // preferred-leader rounds: it never leads, the last ISR member stays.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(describe(&view), (-1, vec![leader], vec![], vec![]));
}
