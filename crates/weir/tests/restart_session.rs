//! A node restarting with thousands of partitions keeps its session with
//! the controller while it opens their logs: its own controller does not
//! fence it for the silence, and it serves every partition afterwards.

mod common;

use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "many";
/// Enough that opening their logs outlasts the session below many times
/// over when nothing heartbeats meanwhile.
const PARTITIONS: i32 = 4_000;
/// The session is short, so that the test is; heartbeats come ten times
/// as often.
const SESSION_MS: &str = "1000";
const HEARTBEAT_MS: &str = "100";
const STEP: Duration = Duration::from_secs(60);

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// The leader epoch of every partition, led by node 1, or `None` while
/// one has no leader.
fn leader_epochs(raw: &mut Raw) -> Option<Vec<i32>> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name())),
    ]));
    let response: MetadataResponse = raw.call(ApiKey::Metadata, 12, &request);
    let topic = &response.topics[0];
    if topic.error_code != 0 || topic.partitions.len() != PARTITIONS as usize {
        return None;
    }
    let mut partitions = topic.partitions.clone();
    partitions.sort_by_key(|p| p.partition_index);
    partitions
        .iter()
        .map(|p| (p.error_code == 0 && p.leader_id.0 == 1).then_some(p.leader_epoch))
        .collect()
}

/// Whether every partition answers ListOffsets (its log is open here).
fn serving(raw: &mut Raw) -> bool {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name())
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let response: ListOffsetsResponse = raw.call(ApiKey::ListOffsets, 7, &request);
    response.topics[0].partitions.len() == PARTITIONS as usize
        && response.topics[0]
            .partitions
            .iter()
            .all(|p| p.error_code == 0)
}

/// The leader epochs once every partition is led here and serving.
fn wait_serving(weir: &Weir) -> Vec<i32> {
    let deadline = Instant::now() + STEP;
    let mut raw = Raw::connect(&weir.kafka);
    loop {
        if let Some(epochs) = leader_epochs(&mut raw).filter(|_| serving(&mut raw)) {
            return epochs;
        }
        assert!(
            Instant::now() < deadline,
            "not every partition served after {STEP:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_restart_with_thousands_of_partitions_keeps_the_session() {
    let mut weir = Weir::start(&[
        "--broker-session-timeout-ms",
        SESSION_MS,
        "--broker-heartbeat-interval-ms",
        HEARTBEAT_MS,
    ]);
    let partitions = PARTITIONS.to_string();
    common::cli::run(
        &[
            "topic",
            "create",
            TOPIC,
            "-p",
            &partitions,
            "--bootstrap",
            &weir.kafka,
        ],
        b"",
    )
    .ok();
    let mut epochs = wait_serving(&weir);
    for clean in [true, false] {
        weir.restart(clean);
        let after = wait_serving(&weir);
        // A restart moves the leadership of a single-replica partition
        // away and back: two elections (at the controlled shutdown or, after
        // kill -9, at the new registration; then when it is unfenced). A
        // fence for a silence while the logs open would add two more.
        let moved: Vec<i32> = after.iter().zip(&epochs).map(|(a, b)| a - b).collect();
        assert!(
            moved.iter().all(|&m| m == 2),
            "leader epochs moved by {:?} in a restart (clean: {clean})",
            moved
                .iter()
                .fold(std::collections::BTreeMap::new(), |mut counts, m| {
                    *counts.entry(*m).or_insert(0) += 1;
                    counts
                })
        );
        epochs = after;
    }
}
