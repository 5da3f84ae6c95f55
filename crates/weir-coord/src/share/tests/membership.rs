//! Share group membership: members take their target at once, partitions
//! are shared only when members outnumber them.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::super::*;
use crate::consumer::{partition_count, TopicMetadata, TopicsImage};

struct Harness {
    engine: ShareGroupEngine,
    topics: TopicsImage,
    now: u64,
    log: Vec<ShareRecord>,
}

impl Harness {
    fn new() -> Self {
        let mut topics = TopicsImage::new();
        topics.insert("jobs", Uuid::from_u128(1), 4);
        Self {
            engine: ShareGroupEngine::new("q", ShareGroupConfig::default()),
            topics,
            now: 0,
            log: Vec::new(),
        }
    }

    fn send(&mut self, request: ShareHeartbeat) -> Result<ShareHeartbeatResponse, ShareGroupError> {
        let (result, out) = self.engine.heartbeat(self.now, &request, &self.topics);
        self.log.extend(out.records);
        result
    }

    fn join(&mut self, member: &str) -> ShareHeartbeatResponse {
        self.send(ShareHeartbeat {
            member_id: member.into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["jobs".into()]),
            ..ShareHeartbeat::default()
        })
        .expect("joins")
    }

    fn beat(
        &mut self,
        member: &str,
        epoch: i32,
    ) -> Result<ShareHeartbeatResponse, ShareGroupError> {
        self.send(ShareHeartbeat {
            member_id: member.into(),
            member_epoch: epoch,
            ..ShareHeartbeat::default()
        })
    }

    fn partitions(&self, member: &str) -> BTreeSet<i32> {
        self.engine.state().members[member]
            .assignment
            .values()
            .flatten()
            .copied()
            .collect()
    }

    fn assert_replay_matches(&self) {
        let mut replayed = ShareGroupEngine::new("q", ShareGroupConfig::default());
        for record in &self.log {
            replayed.replay(record);
        }
        assert_eq!(replayed.state(), self.engine.state());
    }
}

#[test]
fn members_take_their_share_at_once_and_share_partitions_only_when_outnumbering_them() {
    let mut h = Harness::new();
    let a = h.join("a");
    assert_eq!(a.member_epoch, 1);
    assert_eq!(partition_count(&a.assignment.unwrap()), 4);
    let b = h.join("b");
    assert_eq!(b.member_epoch, 2);
    // a learns its smaller share on its next heartbeat, at the new epoch,
    // with no revocation step: b may read a's partitions meanwhile.
    let a = h.beat("a", 1).unwrap();
    assert_eq!(a.member_epoch, 2);
    assert_eq!(h.partitions("a").len() + h.partitions("b").len(), 4);
    assert!(h.partitions("a").is_disjoint(&h.partitions("b")));
    // Six members on four partitions: every member reads one, and every
    // partition is read.
    for member in ["c", "d", "e", "f"] {
        h.join(member);
    }
    for member in ["a", "b", "c", "d", "e"] {
        let epoch = h.engine.state().members[member].member_epoch;
        h.beat(member, epoch).unwrap();
    }
    let all: Vec<BTreeSet<i32>> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|m| h.partitions(m))
        .collect();
    assert!(all.iter().all(|p| p.len() == 1), "{all:?}");
    let union: BTreeSet<i32> = all.iter().flatten().copied().collect();
    assert_eq!(union, (0..4).collect());
    h.assert_replay_matches();
}

#[test]
fn a_member_leaving_or_going_silent_is_removed_and_its_share_moves() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    let (left, out) = h.engine.heartbeat(
        0,
        &ShareHeartbeat {
            member_id: "b".into(),
            member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
            ..ShareHeartbeat::default()
        },
        &h.topics,
    );
    assert_eq!(left.unwrap().member_epoch, LEAVE_GROUP_MEMBER_EPOCH);
    assert_eq!(out.ended, vec!["b".to_owned()]);
    h.log.extend(out.records);
    // a is still at the epoch it joined with; it catches up to the group.
    let a = h.beat("a", 1).unwrap();
    assert_eq!(a.member_epoch, 3);
    assert_eq!(partition_count(&a.assignment.unwrap()), 4);
    // a goes silent: removed at its session timeout, not before.
    let out = h.engine.session_expired(44_999, "a", &h.topics);
    assert!(out.ended.is_empty());
    let out = h.engine.session_expired(45_000, "a", &h.topics);
    assert_eq!(out.ended, vec!["a".to_owned()]);
    h.log.extend(out.records);
    assert!(h.engine.state().members.is_empty());
    h.assert_replay_matches();
}

#[test]
fn heartbeats_are_checked_as_kafka_checks_them() {
    let mut h = Harness::new();
    assert_eq!(
        h.send(ShareHeartbeat {
            member_id: "a".into(),
            member_epoch: 0,
            ..ShareHeartbeat::default()
        }),
        Err(ShareGroupError::InvalidRequest(
            "SubscribedTopicNames must be set in first request."
        ))
    );
    assert!(matches!(
        h.send(ShareHeartbeat::default()),
        Err(ShareGroupError::InvalidRequest(_))
    ));
    assert_eq!(h.beat("a", 3), Err(ShareGroupError::UnknownMemberId));
    h.join("a");
    assert_eq!(h.beat("a", 7), Err(ShareGroupError::FencedMemberEpoch));
    let mut full = Harness::new();
    full.engine.set_config(ShareGroupConfig {
        max_size: 1,
        ..ShareGroupConfig::default()
    });
    full.join("a");
    assert_eq!(
        full.send(ShareHeartbeat {
            member_id: "b".into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["jobs".into()]),
            ..ShareHeartbeat::default()
        }),
        Err(ShareGroupError::GroupMaxSizeReached)
    );
}

#[test]
fn a_new_partition_reaches_the_members() {
    let mut h = Harness::new();
    h.join("a");
    h.topics.insert("jobs", Uuid::from_u128(1), 6);
    let out = h.engine.metadata_changed(&h.topics);
    h.log.extend(out.records);
    let a = h.beat("a", 1).unwrap();
    assert_eq!(a.member_epoch, 2);
    assert_eq!(partition_count(&a.assignment.unwrap()), 6);
    h.assert_replay_matches();
}

/// The log as compaction leaves it: the latest record of each key, in the
/// order they were written.
fn compacted(log: &[ShareRecord]) -> Vec<ShareRecord> {
    let keys: Vec<_> = log
        .iter()
        .map(|r| crate::records::share_group::encode("q", r).0)
        .collect();
    log.iter()
        .enumerate()
        .filter(|(i, _)| !keys[i + 1..].contains(&keys[*i]))
        .map(|(_, r)| r.clone())
        .collect()
}

#[test]
fn the_topics_a_group_has_state_on_outlive_its_members_and_compaction() {
    let mut h = Harness::new();
    h.topics.insert("other", Uuid::from_u128(2), 2);
    h.join("a");
    assert!(h.log.iter().any(|r| matches!(
        r,
        ShareRecord::StatePartitionMetadata { topics } if topics.len() == 1
    )));
    h.beat("a", LEAVE_GROUP_MEMBER_EPOCH).unwrap();
    assert!(h.engine.state().subscription.is_empty());
    // Offsets altered on a topic never subscribed to count too.
    let other = TopicMetadata {
        id: Uuid::from_u128(2),
        name: "other".into(),
        partitions: 2,
    };
    let out = h.engine.state_topics_changed(vec![other.clone()], &[]);
    h.log.extend(out.records);
    let mut reloaded = ShareGroupEngine::new("q", ShareGroupConfig::default());
    for record in compacted(&h.log) {
        reloaded.replay(&record);
    }
    let names: Vec<&String> = reloaded.state().state_topics.keys().collect();
    assert_eq!(names, ["jobs", "other"]);
    h.assert_replay_matches();

    // Deleting the offsets of a topic forgets it; the same change again
    // writes nothing.
    let out = h
        .engine
        .state_topics_changed(Vec::new(), &["jobs".to_owned()]);
    assert_eq!(out.records.len(), 1);
    h.log.extend(out.records);
    let again = h
        .engine
        .state_topics_changed(Vec::new(), &["jobs".to_owned()]);
    assert!(again.records.is_empty());
    let mut reloaded = ShareGroupEngine::new("q", ShareGroupConfig::default());
    for record in compacted(&h.log) {
        reloaded.replay(&record);
    }
    assert_eq!(
        reloaded.state().state_topics.values().collect::<Vec<_>>(),
        [&other]
    );

    // Deleting the group deletes the list with it.
    let out = h.engine.delete().unwrap();
    assert!(out
        .records
        .contains(&ShareRecord::StatePartitionMetadataTombstone));
}
