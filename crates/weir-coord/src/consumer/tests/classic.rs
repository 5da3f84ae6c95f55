//! Classic members in a consumer group, and the online upgrade and
//! downgrade between the two kinds of group.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_protocol_assignment, consumer_protocol_subscription, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::*;

const SESSION_MS: i32 = 10_000;

fn versioned(version: i16, encode: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::new();
    out.extend_from_slice(&version.to_be_bytes());
    encode(&mut out);
    out.freeze()
}

/// A ConsumerProtocolSubscription (v1) to `topics`, owning `owned`.
fn subscription(topics: &[&str], owned: &[(&str, &[i32])]) -> Bytes {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string((*t).to_owned()))
                .collect(),
        )
        .with_owned_partitions(
            owned
                .iter()
                .map(|(topic, partitions)| {
                    consumer_protocol_subscription::TopicPartition::default()
                        .with_topic(TopicName(StrBytes::from_string((*topic).to_owned())))
                        .with_partitions(partitions.to_vec())
                })
                .collect(),
        );
    versioned(1, |out| message.encode(out, 1).unwrap())
}

/// A ConsumerProtocolAssignment (v1) of `partitions` of foo.
fn foo_assignment(partitions: &[i32]) -> Bytes {
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
        consumer_protocol_assignment::TopicPartition::default()
            .with_topic(TopicName(StrBytes::from_static_str("foo")))
            .with_partitions(partitions.to_vec()),
    ]);
    versioned(1, |out| message.encode(out, 1).unwrap())
}

/// The partitions of foo in a ConsumerProtocolAssignment.
fn foo_partitions(assignment: &[u8]) -> Vec<i32> {
    let mut body = Bytes::copy_from_slice(&assignment[2..]);
    let version = i16::from_be_bytes([assignment[0], assignment[1]]);
    let decoded = ConsumerProtocolAssignment::decode(&mut body, version).unwrap();
    let mut partitions: Vec<i32> = decoded
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.0.as_str() == "foo")
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    partitions.sort_unstable();
    partitions
}

fn range(metadata: Bytes) -> Vec<ClassicProtocol> {
    vec![ClassicProtocol {
        name: "range".into(),
        metadata,
    }]
}

fn classic_member(member_id: &str, assigned: &[i32]) -> ClassicMemberImage {
    ClassicMemberImage {
        member_id: member_id.into(),
        instance_id: None,
        client_id: format!("client-{member_id}"),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: REBALANCE_MS,
        session_timeout_ms: SESSION_MS,
        protocols: range(subscription(&["foo"], &[])),
        assignment: foo_assignment(assigned),
    }
}

/// A stable classic group at generation 5: c1 has foo 0-2, c2 foo 3-5.
fn classic_group() -> ClassicGroupImage {
    ClassicGroupImage {
        generation_id: 5,
        protocol_type: Some(CONSUMER_PROTOCOL_TYPE.into()),
        protocol_name: Some("range".into()),
        members: vec![
            classic_member("c1", &[0, 1, 2]),
            classic_member("c2", &[3, 4, 5]),
        ],
    }
}

/// The consumer group the classic group becomes.
fn upgraded(config: ConsumerGroupConfig) -> Harness {
    let mut h = Harness::with_config(config.clone());
    let (engine, out) =
        ConsumerGroupEngine::from_classic("g", config, &classic_group(), &h.topics, h.now)
            .expect("the classic group upgrades");
    h.engine = engine;
    h.collect(out);
    h
}

impl Harness {
    fn classic_join(
        &mut self,
        member_id: &str,
        owned: &[(&str, &[i32])],
    ) -> Result<ClassicJoined, ConsumerGroupError> {
        let request = ClassicJoin {
            member_id: member_id.into(),
            instance_id: None,
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: REBALANCE_MS,
            protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
            protocols: range(subscription(&["foo"], owned)),
            require_known_member_id: true,
            client_id: format!("client-{member_id}"),
            client_host: "/127.0.0.1".into(),
        };
        self.next_uuid += 1;
        let (result, out) = self.engine.classic_join(
            self.now,
            &request,
            Uuid::from_u128(self.next_uuid),
            &self.topics,
        );
        self.collect(out);
        result
    }

    /// SyncGroup; the partitions of foo it hands out.
    fn classic_sync(
        &mut self,
        member_id: &str,
        generation: i32,
    ) -> Result<Vec<i32>, ConsumerGroupError> {
        let request = crate::classic::SyncGroup {
            member_id: member_id.into(),
            group_instance_id: None,
            generation_id: generation,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.into()),
            protocol_name: Some("range".into()),
            assignments: Vec::new(),
        };
        let (result, out) = self.engine.classic_sync(self.now, &request, &self.topics);
        self.collect(out);
        result.map(|synced| foo_partitions(&synced.assignment))
    }

    fn classic_heartbeat(
        &mut self,
        member_id: &str,
        generation: i32,
    ) -> Result<(), ConsumerGroupError> {
        let (result, out) = self
            .engine
            .classic_heartbeat(self.now, member_id, None, generation);
        self.collect(out);
        result
    }

    /// A classic member's rejoin and sync, as a client does on
    /// REBALANCE_IN_PROGRESS: it reports what it owns; returns its new
    /// generation and partitions of foo.
    fn classic_rejoin(&mut self, member_id: &str, owned: &[i32]) -> (i32, Vec<i32>) {
        let joined = self
            .classic_join(member_id, &[("foo", owned)])
            .expect("the member rejoins");
        let partitions = self
            .classic_sync(member_id, joined.generation_id)
            .expect("the member syncs");
        (joined.generation_id, partitions)
    }
}

#[test]
fn an_upgraded_classic_group_keeps_its_members_and_their_partitions() {
    let h = upgraded(ConsumerGroupConfig::default());
    assert_eq!(h.engine.group_epoch(), 5);
    assert_eq!(h.engine.assignment_epoch(), 5);
    assert_eq!(h.engine.state(), ConsumerGroupState::Stable);
    for (member_id, partitions) in [("c1", &[0, 1, 2]), ("c2", &[3, 4, 5])] {
        let member = h.member(member_id);
        assert!(member.is_classic());
        assert_eq!(member.member_epoch(), 5);
        assert_eq!(member.current.assigned, parts(&[(1, partitions)]));
        assert_eq!(
            h.timers.get(&TimerKey::Session {
                member_id: member_id.into()
            }),
            Some(&(SESSION_MS as u64))
        );
    }
    h.assert_replay_matches();
    // A classic member heartbeats at its generation, unbothered.
    let mut h = h;
    assert_eq!(h.classic_heartbeat("c1", 5), Ok(()));
    assert_eq!(
        h.classic_heartbeat("c1", 4),
        Err(ConsumerGroupError::IllegalGeneration)
    );
    assert_eq!(h.classic_sync("c1", 5), Ok(vec![0, 1, 2]));
}

#[test]
fn classic_members_hand_partitions_to_a_consumer_member_one_rejoin_at_a_time() {
    let mut h = upgraded(ConsumerGroupConfig::default());
    let joined = h.ok(join("m3", &["foo"]));
    assert_eq!(h.engine.group_epoch(), 6);
    // m3's partitions are still held by the classic members.
    assert_eq!(joined.assignment, Some(Assignment::new()));
    let m3_target = h.engine.target_assignment("m3").unwrap().clone();
    assert_eq!(partition_count(&m3_target), 2);

    // Each classic member is told to rejoin, revokes what moves, rejoins
    // again owning the rest, and ends at the new epoch.
    for (member_id, owned) in [("c1", vec![0, 1, 2]), ("c2", vec![3, 4, 5])] {
        assert_eq!(
            h.classic_heartbeat(member_id, 5),
            Err(ConsumerGroupError::RebalanceInProgress)
        );
        let (generation, kept) = h.classic_rejoin(member_id, &owned);
        assert_no_partition_owned_twice(&h.engine);
        if kept.len() < owned.len() {
            // Partitions to revoke: the member keeps its generation and is
            // told to rejoin once it has given them up.
            assert_eq!(generation, 5);
            assert_eq!(
                h.classic_heartbeat(member_id, 5),
                Err(ConsumerGroupError::RebalanceInProgress)
            );
            let (generation, partitions) = h.classic_rejoin(member_id, &kept);
            assert_eq!((generation, partitions), (6, kept));
        }
        assert_eq!(h.member(member_id).member_epoch(), 6);
        assert_eq!(h.classic_heartbeat(member_id, 6), Ok(()));
    }
    // m3 now gets what the classic members released.
    let epoch = h.member("m3").member_epoch();
    let beat = h.ok(beat("m3", epoch, Some(Assignment::new())));
    assert_eq!(beat.assignment, Some(m3_target));
    assert_eq!(h.engine.state(), ConsumerGroupState::Stable);
    assert_no_partition_owned_twice(&h.engine);
    h.assert_replay_matches();
}

#[test]
fn the_last_consumer_member_leaving_turns_the_group_classic_again() {
    let mut h = upgraded(ConsumerGroupConfig::default());
    h.ok(join("m3", &["foo"]));
    let out = h.send(HeartbeatRequest {
        member_id: "m3".into(),
        member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
        ..HeartbeatRequest::default()
    });
    assert!(matches!(out.response, Some(Ok(_))), "{out:?}");
    let snapshot = out.downgraded.expect("the group is classic again");
    assert!(!h.engine.exists());
    assert!(
        !h.replayed().exists(),
        "the records delete the consumer group"
    );
    assert_eq!(snapshot.generation_id, 6);
    assert_eq!(snapshot.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(snapshot.protocol_name.as_deref(), Some("range"));
    assert_eq!(snapshot.leader.as_deref(), Some("c1"));
    let members: Vec<(&str, Vec<i32>)> = snapshot
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), foo_partitions(&m.assignment)))
        .collect();
    // Each classic member is described with its target assignment, which
    // no longer includes what m3 was to get; the classic group rebalances.
    assert_eq!(members.len(), 2);
    assert!(members.iter().all(|(id, _)| *id == "c1" || *id == "c2"));
    assert_eq!(snapshot.members[0].session_timeout_ms, SESSION_MS);
}

#[test]
fn the_migration_policy_can_forbid_either_direction() {
    let classic = classic_group();
    for (policy, upgrades, downgrades) in [
        (MigrationPolicy::Bidirectional, true, true),
        (MigrationPolicy::Upgrade, true, false),
        (MigrationPolicy::Downgrade, false, true),
        (MigrationPolicy::Disabled, false, false),
    ] {
        let config = ConsumerGroupConfig {
            migration_policy: policy,
            ..ConsumerGroupConfig::default()
        };
        assert_eq!(
            ConsumerGroupEngine::may_upgrade(&config, &classic),
            upgrades
        );
        let mut h = upgraded(config);
        h.ok(join("m3", &["foo"]));
        let out = h.send(HeartbeatRequest {
            member_id: "m3".into(),
            member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
            ..HeartbeatRequest::default()
        });
        assert_eq!(out.downgraded.is_some(), downgrades, "{policy:?}");
        assert_eq!(h.engine.exists(), !downgrades);
    }
    // A group of other clients (protocol type connect) never upgrades.
    let connect = ClassicGroupImage {
        protocol_type: Some("connect".into()),
        ..classic
    };
    assert!(!ConsumerGroupEngine::may_upgrade(
        &ConsumerGroupConfig::default(),
        &connect
    ));
}

#[test]
fn classic_requests_are_checked_as_kafka_checks_them() {
    let mut h = upgraded(ConsumerGroupConfig::default());
    // A new dynamic member is given a member id first.
    match h.classic_join("", &[]) {
        Err(ConsumerGroupError::MemberIdRequired(id)) => assert!(!id.is_empty()),
        other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
    }
    // A protocol none of the classic members speaks.
    let (result, out) = h.engine.classic_join(
        h.now,
        &ClassicJoin {
            member_id: "c9".into(),
            instance_id: None,
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: REBALANCE_MS,
            protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
            protocols: vec![ClassicProtocol {
                name: "roundrobin".into(),
                metadata: subscription(&["foo"], &[]),
            }],
            require_known_member_id: true,
            client_id: String::new(),
            client_host: String::new(),
        },
        Uuid::nil(),
        &h.topics,
    );
    assert_eq!(result, Err(ConsumerGroupError::InconsistentGroupProtocol));
    assert!(out.records.is_empty());
    assert_eq!(
        h.classic_sync("nobody", 5),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    assert_eq!(
        h.classic_sync("c1", 7),
        Err(ConsumerGroupError::IllegalGeneration)
    );
    // A consumer-protocol member is no classic member.
    h.ok(join("m3", &["foo"]));
    let epoch = h.member("m3").member_epoch();
    assert_eq!(
        h.classic_heartbeat("m3", epoch),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    // Offsets: a classic member commits with its generation, any version;
    // a consumer member needs v9.
    assert_eq!(h.engine.validate_offset_commit("c1", 5, 2), Ok(()));
    assert_eq!(
        h.engine.validate_offset_commit("c1", 4, 8),
        Err(ConsumerGroupError::IllegalGeneration)
    );
    assert_eq!(
        h.engine.validate_offset_commit("m3", epoch, 8),
        Err(ConsumerGroupError::UnsupportedVersion)
    );
}

#[test]
fn a_classic_member_that_does_not_rejoin_in_time_is_fenced() {
    let mut h = upgraded(ConsumerGroupConfig::default());
    h.ok(join("m3", &["foo"]));
    assert_eq!(
        h.classic_heartbeat("c1", 5),
        Err(ConsumerGroupError::RebalanceInProgress)
    );
    // c1 keeps heartbeating but never rejoins; c2 rejoins as told.
    for _ in 0..(REBALANCE_MS / 5_000) {
        h.advance(5_000);
        if h.engine.member("c1").is_none() {
            break;
        }
        assert_eq!(
            h.classic_heartbeat("c1", 5),
            Err(ConsumerGroupError::RebalanceInProgress)
        );
        let c2 = h.member("c2").clone();
        if h.classic_heartbeat("c2", c2.member_epoch()).is_err() {
            let owned: Vec<i32> = c2.current.assigned.values().flatten().copied().collect();
            h.classic_rejoin("c2", &owned);
        }
    }
    assert!(
        h.engine.member("c1").is_none(),
        "fenced at its rebalance timeout"
    );
    assert!(h.engine.member("c2").is_some());
    assert_no_partition_owned_twice(&h.engine);
    h.assert_replay_matches();
}
