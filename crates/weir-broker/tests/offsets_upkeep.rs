//! Upkeep of `__consumer_offsets` on a broker opened in process: offsets of
//! groups without members expire after `offsets.retention.minutes`, a
//! checkpoint keeps the topic small without losing any live commit, and a
//! group is served only from a loaded partition.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::executor::block_on;

use weir_broker::groups::classic::Committer;
use weir_broker::groups::offsets::{OffsetChange, OFFSETS_TOPIC};
use weir_broker::{Broker, BrokerConfig};
use weir_coord::classic::{
    GroupError, GroupState, Heartbeat, JoinGroup, JoinResponse, LeaveGroup, LeavingMember,
    Protocol, SyncGroup,
};
use weir_coord::records::offsets::CommittedOffset;

fn open(dir: &std::path::Path) -> Arc<Broker> {
    open_with_clock(dir, Arc::new(weir_log::SystemClock))
}

fn open_with_clock(dir: &std::path::Path, clock: Arc<dyn weir_log::Clock>) -> Arc<Broker> {
    let values: BTreeMap<String, String> = [
        ("offsets.topic.num.partitions", "3"),
        ("group.initial.rebalance.delay.ms", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = BrokerConfig::new(
        1,
        dir.to_owned(),
        "127.0.0.1:9092".parse().unwrap(),
        None,
        "127.0.0.1:0".parse().unwrap(),
        &values,
    )
    .unwrap();
    let broker = Broker::open_with_clock(config, clock).unwrap();
    // Created by the first FindCoordinator, in the background; here at
    // once, and waited for until every partition is coordinated here.
    if broker.coordinator_of("").is_none() {
        broker.auto_create_topic(OFFSETS_TOPIC).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while broker.partitions_of(OFFSETS_TOPIC).len() != 3
        || !(0..3).all(|index| broker.offsets().hosts(index))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{OFFSETS_TOPIC} not created"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    broker
}

fn commit(broker: &Broker, group: &str, topic: &str, partition: i32, offset: i64, at_ms: i64) {
    let change = OffsetChange {
        topic: topic.to_owned(),
        partition,
        value: Some(CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: at_ms,
        }),
    };
    block_on(broker.commit_offsets(group, vec![change], at_ms)).unwrap();
}

const DAY_MS: u64 = 24 * 3600 * 1000;

#[test]
fn offsets_of_groups_without_members_expire_by_commit_time() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let now = broker.now_ms();
    commit(&broker, "old", "t", 0, 10, now - 8 * DAY_MS as i64);
    commit(&broker, "mixed", "t", 0, 20, now - 8 * DAY_MS as i64);
    commit(&broker, "mixed", "t", 1, 30, now);
    commit(&broker, "fresh", "t", 0, 40, now);
    let retention = 7 * DAY_MS;
    let expired = block_on(broker.groups().expire_offsets(retention, now as u64));
    assert_eq!(expired, 2);
    let offsets = broker.offsets();
    assert!(offsets.group_offsets("old").is_empty());
    assert_eq!(offsets.committed("mixed", "t", 0), None);
    assert_eq!(offsets.committed("mixed", "t", 1).unwrap().offset, 30);
    assert_eq!(offsets.committed("fresh", "t", 0).unwrap().offset, 40);
    assert_eq!(
        offsets.groups(),
        vec!["fresh".to_owned(), "mixed".to_owned()]
    );
    // Expiry is written as tombstones: a reopened broker agrees.
    broker.shutdown();
    drop(broker);
    let broker = open(dir.path());
    assert_eq!(
        broker.offsets().groups(),
        vec!["fresh".to_owned(), "mixed".to_owned()]
    );
    assert_eq!(broker.offsets().committed("mixed", "t", 0), None);
    // Nothing is due a second time.
    assert_eq!(
        block_on(broker.groups().expire_offsets(retention, now as u64)),
        0
    );
}

#[test]
fn a_checkpoint_drops_superseded_records_and_keeps_every_live_commit() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let now = broker.now_ms();
    for i in 0..2_000 {
        commit(&broker, "busy", "t", i % 4, i64::from(i), now);
    }
    commit(&broker, "quiet", "t", 0, 7, now);
    let mut before = 0;
    let mut after = 0;
    for partition in broker.partitions_of(OFFSETS_TOPIC) {
        let log = partition.log();
        before += log.log_end_offset() - log.log_start_offset();
        let live = broker.offsets().live_records(partition.index);
        let rewritten = block_on(broker.offsets().checkpoint(partition.index, now)).unwrap();
        assert_eq!(rewritten, live);
        after += log.log_end_offset() - log.log_start_offset();
    }
    assert_eq!(before, 2_001);
    assert_eq!(after, 5, "four partitions of busy and one of quiet");
    broker.shutdown();
    drop(broker);
    let broker = open(dir.path());
    for p in 0..4 {
        let committed = broker.offsets().committed("busy", "t", p).unwrap();
        assert_eq!(committed.offset, 1_996 + i64::from(p));
    }
    assert_eq!(
        broker.offsets().committed("quiet", "t", 0).unwrap().offset,
        7
    );
}

#[tokio::test]
async fn offsets_of_an_empty_consumer_group_expire_once_it_has_been_empty_long_enough() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(weir_log::ManualClock::new(1_800_000_000_000));
    let broker = open_with_clock(dir.path(), clock.clone());
    use weir_log::Clock;
    let groups = broker.groups();
    let joined = join_alone(&broker, "app").await;
    let committer = Committer {
        member_id: &joined.member_id,
        generation_id: joined.generation_id,
        group_instance_id: None,
    };
    // The commit is old, but the group is active: nothing expires.
    let long_ago = broker.now_ms() - 30 * DAY_MS as i64;
    let change = OffsetChange {
        topic: "t".into(),
        partition: 0,
        value: Some(CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: long_ago,
        }),
    };
    groups
        .commit_offsets("app", committer, 9, vec![change], long_ago)
        .await
        .unwrap();
    let retention = 60_000;
    assert_eq!(
        groups
            .expire_offsets(retention, broker.now_ms() as u64 + retention)
            .await,
        0
    );
    let left = broker
        .consumer_groups()
        .leave(
            broker.group_coordinators(),
            "app",
            LeaveGroup {
                members: vec![LeavingMember {
                    member_id: joined.member_id.clone(),
                    group_instance_id: None,
                }],
            },
        )
        .await;
    assert_eq!(left.members[0].error, None);
    assert_eq!(groups.state("app"), Some(GroupState::Empty));
    // Retention counts from when the group became empty, not from the commit.
    // (on the broker's clock, which has not moved since)
    let emptied = clock.now_ms() as u64;
    assert_eq!(
        groups
            .expire_offsets(retention, emptied + retention - 1)
            .await,
        0
    );
    assert_eq!(
        groups.expire_offsets(retention, emptied + retention).await,
        1
    );
    // Empty and without offsets, the group itself goes, also from the log.
    assert_eq!(groups.state("app"), None);
    broker.shutdown();
    drop(broker);
    let broker = open(dir.path());
    assert_eq!(broker.groups().state("app"), None);
    assert!(broker.offsets().group_offsets("app").is_empty());
}

/// A transaction's offsets of `group`, pending: `(partition of "t", offset)`.
fn txn_commit(broker: &Broker, group: &str, producer_id: i64, offsets: &[(i32, i64)], at_ms: i64) {
    use weir_broker::groups::offsets::TxnProducer;
    let offsets = offsets
        .iter()
        .map(|&(p, offset)| {
            let value = CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: at_ms,
            };
            ("t".to_owned(), p, value)
        })
        .collect();
    let nobody = Committer {
        member_id: "",
        generation_id: -1,
        group_instance_id: None,
    };
    let producer = TxnProducer {
        id: producer_id,
        epoch: 0,
    };
    block_on(
        broker
            .groups()
            .commit_transactional_offsets(group, nobody, producer, offsets, at_ms),
    )
    .unwrap()
    .expect("written");
}

/// The `__consumer_offsets` partition of `group` ends the transaction of
/// `producer_id` at its log end, as a marker written there would.
fn end_transaction(broker: &Broker, group: &str, producer_id: i64, commit: bool) {
    let count = broker.partitions_of(OFFSETS_TOPIC).len() as i32;
    let index = weir_coord::records::offsets::partition_for(group, count);
    let partition = broker.partition(OFFSETS_TOPIC, index).unwrap();
    let offset = partition.log().log_end_offset();
    block_on(broker.on_offsets_marker(index, producer_id, commit, offset));
}

#[test]
fn offsets_of_open_transactions_do_not_expire_nor_let_their_group_go() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let groups = broker.groups();
    let long_ago = broker.now_ms() - 8 * DAY_MS as i64;
    commit(&broker, "copier", "t", 0, 10, long_ago);
    commit(&broker, "copier", "t", 1, 11, long_ago);
    txn_commit(&broker, "copier", 7, &[(1, 21)], long_ago);
    txn_commit(&broker, "pending-only", 8, &[(0, 5)], long_ago);
    let retention = 7 * DAY_MS;
    let now = broker.now_ms() as u64;
    // t-1 has a transactional commit pending: it stays, as Kafka keeps it.
    assert_eq!(block_on(groups.expire_offsets(retention, now)), 1);
    let offsets = broker.offsets();
    assert_eq!(offsets.committed("copier", "t", 0), None);
    assert_eq!(offsets.committed("copier", "t", 1).unwrap().offset, 11);
    assert!(offsets.has_pending("copier", "t", 1));
    assert_eq!(
        offsets.groups(),
        vec!["copier".to_owned(), "pending-only".to_owned()]
    );
    // Once the transaction aborts, the old commit expires.
    end_transaction(&broker, "copier", 7, false);
    assert_eq!(block_on(groups.expire_offsets(retention, now)), 1);
    assert!(offsets.group_offsets("copier").is_empty());
    assert_eq!(offsets.groups(), vec!["pending-only".to_owned()]);

    // DeleteGroups removes a group's pending offsets too, as Kafka's does,
    // so its transaction's commit later finds nothing.
    block_on(groups.delete(broker.group_coordinators(), "pending-only")).unwrap();
    assert!(!broker.offsets().has_open_transactions("pending-only"));
    end_transaction(&broker, "pending-only", 8, true);
    assert!(broker.offsets().group_offsets("pending-only").is_empty());
    broker.shutdown();
    drop(broker);
    let broker = open(dir.path());
    assert!(broker.offsets().groups().is_empty());
}

/// `group`'s only member, joined and synced: its assignment is written.
async fn join_alone(broker: &Arc<Broker>, group: &str) -> JoinResponse {
    let groups = broker.consumer_groups();
    let joined = groups
        .join(
            broker.group_coordinators(),
            group,
            JoinGroup {
                member_id: String::new(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                protocol_type: "consumer".into(),
                protocols: vec![Protocol::new("range", vec![])],
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 10_000,
                require_known_member_id: false,
                supports_skip_assignment: false,
            },
        )
        .await;
    assert_eq!(joined.error, None);
    let synced = groups
        .sync(
            broker.group_coordinators(),
            group,
            SyncGroup {
                member_id: joined.member_id.clone(),
                group_instance_id: None,
                generation_id: joined.generation_id,
                protocol_type: None,
                protocol_name: None,
                assignments: vec![(joined.member_id.clone(), vec![1])],
            },
        )
        .await;
    assert_eq!(synced.error, None);
    joined
}

#[tokio::test]
async fn a_group_is_served_only_once_its_partition_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let joined = join_alone(&broker, "app").await;
    let heartbeat = || Heartbeat {
        member_id: joined.member_id.clone(),
        group_instance_id: None,
        generation_id: joined.generation_id,
    };
    let (groups, classic) = (broker.consumer_groups(), broker.groups());
    assert_eq!(
        groups
            .classic_heartbeat(broker.group_coordinators(), "app", heartbeat())
            .await,
        Ok(())
    );
    let count = broker.partitions_of(OFFSETS_TOPIC).len() as i32;
    let index = weir_coord::records::offsets::partition_for("app", count);
    // The metadata names this node the leader but the partition is not
    // loaded: requests are refused rather than served from a state the load
    // would replace.
    broker.offsets().unload(index);
    assert_eq!(
        broker.check_coordinator("app"),
        Err(14),
        "COORDINATOR_LOAD_IN_PROGRESS"
    );
    assert_eq!(
        groups
            .classic_heartbeat(broker.group_coordinators(), "app", heartbeat())
            .await,
        Err(GroupError::NotCoordinator)
    );
    assert_eq!(classic.state("app"), None, "nothing made before the load");
    // Loaded from the log, the member is back with its generation.
    let partition = broker
        .partitions_of(OFFSETS_TOPIC)
        .into_iter()
        .find(|p| p.index == index)
        .unwrap();
    broker
        .coordinate_groups_of(partition, count, &broker.image())
        .unwrap();
    assert_eq!(broker.check_coordinator("app"), Ok(()));
    assert_eq!(classic.state("app"), Some(GroupState::Stable));
    assert_eq!(
        groups
            .classic_heartbeat(broker.group_coordinators(), "app", heartbeat())
            .await,
        Ok(())
    );
    broker.shutdown();
}
