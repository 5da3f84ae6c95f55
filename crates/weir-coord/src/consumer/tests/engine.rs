//! Scenario tests of the engine: joins, reconciliation through heartbeats,
//! leaves, static membership, timers, metadata changes, errors, replay.

use std::collections::BTreeSet;

use super::*;

const FOO: u128 = 1;
const BAR: u128 = 2;

fn all_foo() -> Assignment {
    parts(&[(FOO, &[0, 1, 2, 3, 4, 5])])
}

fn session(member_id: &str) -> TimerKey {
    TimerKey::Session {
        member_id: member_id.to_owned(),
    }
}

fn rebalance(member_id: &str) -> TimerKey {
    TimerKey::Rebalance {
        member_id: member_id.to_owned(),
    }
}

fn static_join(member_id: &str, instance: &str, topics: &[&str]) -> HeartbeatRequest {
    HeartbeatRequest {
        instance_id: Some(instance.to_owned()),
        ..join(member_id, topics)
    }
}

/// m1 alone on foo (6 partitions), stable at epoch 1.
fn one_member() -> Harness {
    let mut h = Harness::new();
    h.ok(join("m1", &["foo"]));
    h
}

/// m1 and m2 on foo, 3 partitions each, stable at epoch 2.
fn two_members() -> Harness {
    let mut h = one_member();
    h.ok(join("m2", &["foo"]));
    h.ok(beat("m1", 1, Some(all_foo())));
    h.ok(beat("m1", 1, Some(parts(&[(FOO, &[0, 1, 2])]))));
    h.ok(beat("m2", 2, Some(Assignment::new())));
    assert_eq!(h.engine.state(), ConsumerGroupState::Stable);
    h
}

#[test]
fn first_member_joins_and_gets_everything() {
    let mut h = Harness::new();
    let out = h.send(join("m1", &["foo"]));
    let response = out.response.clone().unwrap().unwrap();
    assert_eq!(
        response,
        HeartbeatResponse {
            member_id: "m1".into(),
            member_epoch: 1,
            heartbeat_interval_ms: 5_000,
            assignment: Some(all_foo()),
        }
    );
    let metadata = MemberMetadata {
        client_id: "client-m1".into(),
        client_host: "/127.0.0.1".into(),
        subscribed_topic_names: BTreeSet::from(["foo".to_owned()]),
        rebalance_timeout_ms: REBALANCE_MS,
        ..MemberMetadata::default()
    };
    assert_eq!(
        out.records,
        vec![
            Record::MemberMetadata {
                member_id: "m1".into(),
                metadata,
            },
            Record::PartitionMetadata {
                topics: vec![TopicMetadata {
                    id: topic_id(FOO),
                    name: "foo".into(),
                    partitions: 6,
                }],
            },
            Record::GroupMetadata { epoch: 1 },
            Record::TargetAssignmentMember {
                member_id: "m1".into(),
                assignment: all_foo(),
            },
            Record::TargetAssignmentMetadata {
                assignment_epoch: 1
            },
            Record::CurrentMemberAssignment {
                member_id: "m1".into(),
                assignment: CurrentAssignment {
                    member_epoch: 1,
                    previous_member_epoch: 0,
                    state: MemberState::Stable,
                    assigned: all_foo(),
                    pending_revocation: Assignment::new(),
                },
            },
        ]
    );
    assert_eq!(
        out.timers,
        vec![TimerCommand::Schedule {
            key: session("m1"),
            at_ms: 45_000,
        }]
    );
    assert_eq!(h.engine.state(), ConsumerGroupState::Stable);
    assert!(h.engine.exists());
    h.assert_replay_matches();
}

#[test]
fn a_member_without_an_id_gets_one() {
    let mut h = Harness::new();
    let response = h.ok(join("", &["foo"]));
    assert_eq!(response.member_id.len(), 22, "Kafka's base64 uuid form");
    assert!(h.engine.member(&response.member_id).is_some());
}

#[test]
fn a_steady_heartbeat_writes_nothing_and_sends_no_assignment() {
    let mut h = one_member();
    h.now = 5_000;
    let out = h.send(beat("m1", 1, None));
    assert!(out.records.is_empty());
    assert_eq!(
        out.response.unwrap().unwrap(),
        HeartbeatResponse {
            member_id: "m1".into(),
            member_epoch: 1,
            heartbeat_interval_ms: 5_000,
            assignment: None,
        }
    );
    assert_eq!(
        out.timers,
        vec![TimerCommand::Schedule {
            key: session("m1"),
            at_ms: 50_000,
        }]
    );
}

#[test]
fn a_full_heartbeat_gets_the_assignment_even_unchanged() {
    let mut h = one_member();
    let response = h.ok(HeartbeatRequest {
        rebalance_timeout_ms: REBALANCE_MS,
        subscribed_topic_names: Some(vec!["foo".into()]),
        ..beat("m1", 1, Some(all_foo()))
    });
    assert_eq!(response.assignment, Some(all_foo()));
}

#[test]
fn a_new_member_waits_for_the_revocation_of_its_partitions() {
    let mut h = one_member();

    // m2 joins: epoch 2, its target is owned by m1, so it gets nothing yet.
    let response = h.ok(join("m2", &["foo"]));
    assert_eq!(response.member_epoch, 2);
    assert_eq!(response.assignment, Some(Assignment::new()));
    assert_eq!(
        h.member("m2").current.state,
        MemberState::UnreleasedPartitions
    );
    assert_eq!(
        h.engine.target_assignment("m2"),
        Some(&parts(&[(FOO, &[3, 4, 5])]))
    );
    assert_eq!(h.engine.state(), ConsumerGroupState::Reconciling);

    // m1 is told to revoke 3, 4, 5 and stays at epoch 1 until it has.
    let out = h.send(beat("m1", 1, Some(all_foo())));
    let response = out.response.unwrap().unwrap();
    assert_eq!(response.member_epoch, 1);
    assert_eq!(response.assignment, Some(parts(&[(FOO, &[0, 1, 2])])));
    assert!(out.timers.contains(&TimerCommand::Schedule {
        key: rebalance("m1"),
        at_ms: REBALANCE_MS as u64,
    }));
    let m1 = h.member("m1");
    assert_eq!(m1.current.state, MemberState::UnrevokedPartitions);
    assert_eq!(m1.current.pending_revocation, parts(&[(FOO, &[3, 4, 5])]));

    // m2 still waits.
    let response = h.ok(beat("m2", 2, Some(Assignment::new())));
    assert_eq!(response.assignment, None);
    assert_eq!(
        h.member("m2").current.state,
        MemberState::UnreleasedPartitions
    );

    // m1 reports the revocation: epoch 2, same assignment, timer cancelled.
    let out = h.send(beat("m1", 1, Some(parts(&[(FOO, &[0, 1, 2])]))));
    let response = out.response.unwrap().unwrap();
    assert_eq!(response.member_epoch, 2);
    assert_eq!(response.assignment, None);
    assert!(out.timers.contains(&TimerCommand::Cancel {
        key: rebalance("m1")
    }));

    // m2 gets the released partitions.
    let response = h.ok(beat("m2", 2, Some(Assignment::new())));
    assert_eq!(response.assignment, Some(parts(&[(FOO, &[3, 4, 5])])));
    assert_eq!(h.engine.state(), ConsumerGroupState::Stable);
    assert_no_partition_owned_twice(&h.engine);
    h.assert_replay_matches();
}

#[test]
fn epoch_checks() {
    let mut h = Harness::new();
    assert_eq!(
        h.err(beat("m1", 3, None)),
        ConsumerGroupError::GroupIdNotFound
    );
    assert_eq!(
        h.err(beat("m1", -1, None)),
        ConsumerGroupError::GroupIdNotFound
    );

    let mut h = two_members();
    assert_eq!(
        h.err(beat("nobody", 2, None)),
        ConsumerGroupError::UnknownMemberId
    );
    assert_eq!(
        h.err(beat("m1", 3, None)),
        ConsumerGroupError::FencedMemberEpoch
    );
    // m1 is at epoch 2 (previous 1): the previous epoch is accepted while the
    // member owns no more than it is assigned (its last response was lost).
    assert_eq!(h.member("m1").current.previous_member_epoch, 1);
    let response = h.ok(beat("m1", 1, Some(parts(&[(FOO, &[0, 1])]))));
    assert_eq!(response.member_epoch, 2);
    assert_eq!(
        h.err(beat("m1", 1, Some(parts(&[(FOO, &[0, 5])])))),
        ConsumerGroupError::FencedMemberEpoch
    );
    assert_eq!(
        h.err(beat("m1", 1, None)),
        ConsumerGroupError::FencedMemberEpoch
    );
}

#[test]
fn a_fenced_member_rejoins_with_epoch_zero_and_its_id() {
    let mut h = two_members();
    let response = h.ok(join("m1", &["foo"]));
    assert_eq!(response.member_epoch, 2);
    assert_eq!(response.assignment, Some(parts(&[(FOO, &[0, 1, 2])])));
    assert_eq!(h.engine.group_epoch(), 2, "same subscription: no rebalance");
}

#[test]
fn invalid_requests() {
    let mut h = one_member();
    let invalid = |h: &mut Harness, request: HeartbeatRequest| match h.err(request) {
        ConsumerGroupError::InvalidRequest(_) => {}
        other => panic!("expected INVALID_REQUEST, got {other:?}"),
    };
    invalid(
        &mut h,
        HeartbeatRequest {
            rebalance_timeout_ms: -1,
            ..join("m9", &["foo"])
        },
    );
    invalid(
        &mut h,
        HeartbeatRequest {
            owned_partitions: None,
            ..join("m9", &["foo"])
        },
    );
    invalid(
        &mut h,
        HeartbeatRequest {
            owned_partitions: Some(parts(&[(FOO, &[0])])),
            ..join("m9", &["foo"])
        },
    );
    invalid(&mut h, join("m9", &[]));
    invalid(
        &mut h,
        HeartbeatRequest {
            subscribed_topic_names: None,
            ..join("m9", &["foo"])
        },
    );
    invalid(&mut h, beat("", 1, None));
    invalid(&mut h, beat("", -1, None));
    invalid(&mut h, beat("m1", -3, None));
    invalid(&mut h, beat("m1", -2, None));
    invalid(
        &mut h,
        HeartbeatRequest {
            instance_id: Some(String::new()),
            ..join("m9", &["foo"])
        },
    );
    invalid(
        &mut h,
        HeartbeatRequest {
            rack_id: Some(String::new()),
            ..join("m9", &["foo"])
        },
    );
    assert_eq!(
        h.err(HeartbeatRequest {
            server_assignor: Some("sticky".into()),
            ..join("m9", &["foo"])
        }),
        ConsumerGroupError::UnsupportedAssignor
    );
    // A regex alone is a subscription.
    h.ok(HeartbeatRequest {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("ba.*".into()),
        ..join("m9", &[])
    });
}

#[test]
fn the_group_size_is_capped() {
    let mut h = Harness::with_config(ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    });
    h.ok(join("m1", &["foo"]));
    assert_eq!(
        h.err(join("m2", &["foo"])),
        ConsumerGroupError::GroupMaxSizeReached
    );
    assert_eq!(
        h.err(join("", &["foo"])),
        ConsumerGroupError::GroupMaxSizeReached
    );
    h.ok(beat("m1", 1, None));
    h.ok(join("m1", &["foo"]));
}

#[test]
fn a_leaving_member_is_removed_and_its_partitions_move() {
    let mut h = two_members();
    let out = h.send(beat("m2", -1, None));
    assert_eq!(
        out.response.unwrap().unwrap(),
        HeartbeatResponse {
            member_id: "m2".into(),
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    );
    assert_eq!(
        out.records,
        vec![
            Record::CurrentMemberAssignmentTombstone {
                member_id: "m2".into()
            },
            Record::TargetAssignmentMemberTombstone {
                member_id: "m2".into()
            },
            Record::MemberMetadataTombstone {
                member_id: "m2".into()
            },
            Record::GroupMetadata { epoch: 3 },
        ]
    );
    assert!(out
        .timers
        .contains(&TimerCommand::Cancel { key: session("m2") }));
    assert!(h.engine.member("m2").is_none());
    assert_eq!(h.engine.state(), ConsumerGroupState::Assigning);

    let response = h.ok(beat("m1", 2, Some(parts(&[(FOO, &[0, 1, 2])]))));
    assert_eq!(response.member_epoch, 3);
    assert_eq!(response.assignment, Some(all_foo()));
    assert_eq!(
        h.err(beat("m2", 2, None)),
        ConsumerGroupError::UnknownMemberId
    );
    assert_eq!(
        h.err(beat("m2", -1, None)),
        ConsumerGroupError::UnknownMemberId
    );

    // The last member leaves: the group is empty, its subscription too.
    let out = h.send(beat("m1", -1, None));
    assert!(out
        .records
        .contains(&Record::PartitionMetadata { topics: vec![] }));
    assert_eq!(h.engine.state(), ConsumerGroupState::Empty);
    h.assert_replay_matches();
}

#[test]
fn static_member_leaves_for_a_while_and_comes_back_with_its_partitions() {
    let mut h = Harness::new();
    h.ok(static_join("s1", "i1", &["foo"]));
    h.ok(static_join("s2", "i2", &["foo"]));
    h.ok(beat("s1", 1, Some(all_foo())));
    h.ok(beat("s1", 1, Some(parts(&[(FOO, &[0, 1, 2])]))));
    h.ok(beat("s2", 2, Some(Assignment::new())));
    assert_eq!(h.engine.state(), ConsumerGroupState::Stable);

    // The instance id is taken while s1 is active.
    assert_eq!(
        h.err(static_join("s1-new", "i1", &["foo"])),
        ConsumerGroupError::UnreleasedInstanceId
    );

    // s1 leaves for a while: no rebalance, it keeps its assignment.
    let out = h.send(HeartbeatRequest {
        instance_id: Some("i1".into()),
        ..beat("s1", -2, None)
    });
    assert_eq!(out.response.unwrap().unwrap().member_epoch, -2);
    assert_eq!(out.records.len(), 1);
    assert!(out.timers.is_empty(), "the session timer keeps running");
    assert_eq!(h.engine.group_epoch(), 2);
    assert_eq!(h.member("s1").current.member_epoch, -2);
    assert_eq!(h.member("s1").current.assigned, parts(&[(FOO, &[0, 1, 2])]));

    // It restarts under a new member id: same partitions, same epochs.
    h.now = 10_000;
    let out = h.send(static_join("s1-new", "i1", &["foo"]));
    let response = out.response.unwrap().unwrap();
    assert_eq!(response.member_id, "s1-new");
    assert_eq!(response.member_epoch, 2);
    assert_eq!(response.assignment, Some(parts(&[(FOO, &[0, 1, 2])])));
    assert_eq!(h.engine.group_epoch(), 2);
    assert!(h.engine.member("s1").is_none());
    assert_eq!(
        &out.records[..3],
        &[
            Record::CurrentMemberAssignmentTombstone {
                member_id: "s1".into()
            },
            Record::TargetAssignmentMemberTombstone {
                member_id: "s1".into()
            },
            Record::MemberMetadataTombstone {
                member_id: "s1".into()
            },
        ]
    );
    assert!(out
        .timers
        .contains(&TimerCommand::Cancel { key: session("s1") }));

    // The old incarnation is fenced by the new one.
    assert_eq!(
        h.err(HeartbeatRequest {
            instance_id: Some("i1".into()),
            ..beat("s1", 2, None)
        }),
        ConsumerGroupError::FencedInstanceId
    );
    assert_eq!(
        h.err(HeartbeatRequest {
            instance_id: Some("i9".into()),
            ..beat("s9", 2, None)
        }),
        ConsumerGroupError::UnknownMemberId
    );
    assert_no_partition_owned_twice(&h.engine);
    h.assert_replay_matches();
}

#[test]
fn a_static_member_that_does_not_come_back_expires() {
    let mut h = Harness::new();
    h.ok(static_join("s1", "i1", &["foo"]));
    h.ok(join("m2", &["foo"]));
    h.ok(beat("s1", 1, Some(parts(&[(FOO, &[0, 1, 2])]))));
    h.ok(beat("m2", 2, Some(Assignment::new())));
    h.ok(HeartbeatRequest {
        instance_id: Some("i1".into()),
        ..beat("s1", -2, None)
    });

    // m2 keeps heartbeating; s1's session (from its last heartbeat) runs out.
    for _ in 0..10 {
        h.advance(5_000);
        let epoch = h.member("m2").member_epoch();
        h.ok(beat("m2", epoch, None));
    }
    assert!(h.engine.member("s1").is_none());
    assert_eq!(h.engine.group_epoch(), 3);
    h.ok(beat("m2", 2, Some(parts(&[(FOO, &[3, 4, 5])]))));
    assert_eq!(h.member("m2").current.assigned, all_foo());
}

#[test]
fn a_member_that_stops_heartbeating_is_fenced_and_stale_timers_are_ignored() {
    let mut h = two_members();
    h.now = 40_000;
    h.ok(beat("m1", 2, None));
    // A session timer that fires late for m1 is stale: m1 heartbeated.
    h.event(Event::Timer {
        now_ms: 45_000,
        key: session("m1"),
    });
    assert!(h.engine.member("m1").is_some());
    // m2 did not heartbeat since its join at 0.
    h.advance(10_000);
    assert!(h.engine.member("m2").is_none());
    assert!(h.engine.member("m1").is_some());
    assert_eq!(h.engine.group_epoch(), 3);
    h.assert_replay_matches();
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_fenced() {
    let mut h = one_member();
    h.ok(join("m2", &["foo"]));
    h.ok(beat("m1", 1, Some(all_foo())));
    assert_eq!(
        h.member("m1").current.state,
        MemberState::UnrevokedPartitions
    );
    // m1 keeps heartbeating but never revokes.
    for _ in 0..5 {
        h.advance(5_000);
        h.ok(beat("m1", 1, Some(all_foo())));
        h.ok(beat("m2", 2, Some(Assignment::new())));
    }
    h.advance(5_001);
    assert!(
        h.engine.member("m1").is_none(),
        "fenced by the rebalance timeout"
    );
    assert_eq!(
        h.err(beat("m1", 1, Some(all_foo()))),
        ConsumerGroupError::UnknownMemberId
    );
    let response = h.ok(beat("m2", 2, Some(Assignment::new())));
    assert_eq!(response.assignment, Some(all_foo()));

    // A rebalance timer for an epoch the member left is ignored.
    let mut h = two_members();
    h.event(Event::Timer {
        now_ms: 1_000_000,
        key: rebalance("m1"),
    });
    assert!(h.engine.member("m1").is_some());
}

#[test]
fn new_partitions_and_deleted_topics_rebalance_the_group() {
    let mut h = Harness::new();
    h.ok(join("m1", &["foo", "bar"]));
    h.topics.insert("foo", topic_id(FOO), 8);
    let out = h.metadata_changed();
    assert_eq!(
        out.records.len(),
        2,
        "partition metadata and group epoch: {out:?}"
    );
    assert_eq!(h.engine.state(), ConsumerGroupState::Assigning);
    let response = h.ok(beat("m1", 1, None));
    assert_eq!(response.member_epoch, 2);
    assert_eq!(response.assignment.unwrap()[&topic_id(FOO)].len(), 8);

    // A second metadata event with nothing new changes nothing.
    assert!(h.metadata_changed().records.is_empty());

    h.topics.remove("bar");
    h.metadata_changed();
    let owned = h.member("m1").current.assigned.clone();
    let response = h.ok(beat("m1", 2, Some(owned)));
    assert_eq!(response.member_epoch, 2, "revoking bar first");
    assert!(!response.assignment.unwrap().contains_key(&topic_id(BAR)));
    let response = h.ok(beat(
        "m1",
        2,
        Some(parts(&[(FOO, &[0, 1, 2, 3, 4, 5, 6, 7])])),
    ));
    assert_eq!(response.member_epoch, 3);
    h.assert_replay_matches();
}

#[test]
fn a_regex_subscription_follows_new_topics() {
    let mut h = Harness::new();
    let response = h.ok(HeartbeatRequest {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("ba.*".into()),
        ..join("m1", &[])
    });
    assert_eq!(response.assignment, Some(parts(&[(BAR, &[0, 1, 2])])));
    h.topics.insert("baz", topic_id(3), 2);
    h.metadata_changed();
    let response = h.ok(beat("m1", 1, None));
    assert_eq!(response.member_epoch, 2);
    assert_eq!(
        response.assignment,
        Some(parts(&[(BAR, &[0, 1, 2]), (3, &[0, 1])]))
    );
    assert_eq!(
        h.engine.subscribed_topic_names().collect::<Vec<_>>(),
        vec!["bar", "baz"]
    );
    // Clearing the regex and naming foo instead.
    let response = h.ok(HeartbeatRequest {
        subscribed_topic_names: Some(vec!["foo".into()]),
        subscribed_topic_regex: Some(String::new()),
        ..beat("m1", 2, Some(parts(&[(BAR, &[0, 1, 2]), (3, &[0, 1])])))
    });
    assert_eq!(response.member_epoch, 2, "bar and baz to revoke first");
    assert_eq!(h.member("m1").metadata.subscribed_topic_regex, None);
    h.assert_replay_matches();
}

#[test]
fn members_choose_the_assignor() {
    let mut h = Harness::new();
    let range = |r: HeartbeatRequest| HeartbeatRequest {
        server_assignor: Some("range".into()),
        ..r
    };
    h.ok(range(join("m1", &["foo", "bar"])));
    assert_eq!(h.engine.preferred_assignor(), ServerAssignor::Range);
    h.ok(range(join("m2", &["foo", "bar"])));
    // Range: m1 gets the first half of each topic, m2 the second.
    assert_eq!(
        h.engine.target_assignment("m1"),
        Some(&parts(&[(FOO, &[0, 1, 2]), (BAR, &[0, 1])]))
    );
    assert_eq!(
        h.engine.target_assignment("m2"),
        Some(&parts(&[(FOO, &[3, 4, 5]), (BAR, &[2])]))
    );
    assert_eq!(h.engine.describe().assignor, ServerAssignor::Range);
    // A tie goes to the first configured assignor.
    let uniform = |r: HeartbeatRequest| HeartbeatRequest {
        server_assignor: Some("uniform".into()),
        ..r
    };
    h.ok(uniform(join("m3", &["foo"])));
    h.ok(uniform(join("m4", &["foo"])));
    assert_eq!(h.engine.preferred_assignor(), ServerAssignor::Uniform);
}

#[test]
fn offset_commit_validation() {
    let mut h = Harness::new();
    // An empty group takes commits from anyone with epoch -1.
    assert_eq!(h.engine.validate_offset_commit("", -1, 9), Ok(()));
    h.ok(join("m1", &["foo"]));
    assert_eq!(h.engine.validate_offset_commit("m1", 1, 9), Ok(()));
    assert_eq!(
        h.engine.validate_offset_commit("m1", 0, 9),
        Err(ConsumerGroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.engine.validate_offset_commit("m1", 2, 9),
        Err(ConsumerGroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.engine.validate_offset_commit("", -1, 9),
        Err(ConsumerGroupError::UnknownMemberId),
        "no simple commits while the group has members"
    );
    assert_eq!(
        h.engine.validate_offset_commit("m9", 1, 9),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    assert_eq!(h.engine.validate_offset_fetch(None, -1), Ok(()));
    assert_eq!(h.engine.validate_offset_fetch(Some("m1"), 1), Ok(()));
    assert_eq!(
        h.engine.validate_offset_fetch(Some("m1"), 3),
        Err(ConsumerGroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.engine.validate_offset_fetch(Some("m9"), 1),
        Err(ConsumerGroupError::UnknownMemberId)
    );
}

#[test]
fn txn_offset_commit_validation() {
    let mut h = Harness::new();
    assert_eq!(h.engine.validate_txn_offset_commit("", -1, None), Ok(()));
    h.ok(join("m1", &["foo"]));
    // The generation field carries the member epoch (KIP-848).
    assert_eq!(h.engine.validate_txn_offset_commit("m1", 1, None), Ok(()));
    assert_eq!(
        h.engine.validate_txn_offset_commit("m1", 0, None),
        Err(ConsumerGroupError::StaleMemberEpoch),
        "a zombie's commit is fenced"
    );
    assert_eq!(
        h.engine.validate_txn_offset_commit("m9", 1, None),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    // Before v3 the request names no member: taken as it is.
    assert_eq!(h.engine.validate_txn_offset_commit("", -1, None), Ok(()));
    assert_eq!(
        h.engine.validate_txn_offset_commit("", -1, Some("static")),
        Err(ConsumerGroupError::UnknownMemberId)
    );
}

#[test]
fn describe_shows_members_and_targets() {
    let mut h = one_member();
    h.ok(HeartbeatRequest {
        rack_id: Some("r1".into()),
        ..join("m2", &["foo"])
    });
    let description = h.engine.describe();
    assert_eq!(description.group_id, "g");
    assert_eq!(description.state, ConsumerGroupState::Reconciling);
    assert_eq!(
        (description.group_epoch, description.assignment_epoch),
        (2, 2)
    );
    assert_eq!(description.assignor, ServerAssignor::Uniform);
    let m2 = &description.members[1];
    assert_eq!(m2.member_id, "m2");
    assert_eq!(m2.rack_id.as_deref(), Some("r1"));
    assert_eq!(m2.client_id, "client-m2");
    assert_eq!(m2.subscribed_topic_names, vec!["foo".to_owned()]);
    assert_eq!(m2.assignment, Assignment::new());
    assert_eq!(m2.target_assignment, parts(&[(FOO, &[3, 4, 5])]));
    assert_eq!(m2.state, MemberState::UnreleasedPartitions);
    assert_eq!(description.members[0].assignment, all_foo());
}

#[test]
fn a_loaded_group_continues_where_the_log_left_off() {
    let mut h = one_member();
    h.ok(join("m2", &["foo"]));
    h.ok(beat("m1", 1, Some(all_foo())));

    let mut loaded = h.replayed();
    assert_eq!(loaded.persisted(), h.engine.persisted());
    assert_eq!(loaded.describe(), h.engine.describe());
    let out = loaded.on_loaded(100_000);
    assert_eq!(
        out.timers,
        vec![
            TimerCommand::Schedule {
                key: session("m1"),
                at_ms: 145_000
            },
            TimerCommand::Schedule {
                key: rebalance("m1"),
                at_ms: 130_000
            },
            TimerCommand::Schedule {
                key: session("m2"),
                at_ms: 145_000
            },
        ]
    );
    // The new coordinator carries on with the reconciliation.
    h.engine = loaded;
    h.now = 100_000;
    h.collect(out);
    h.ok(beat("m1", 1, Some(parts(&[(FOO, &[0, 1, 2])]))));
    let response = h.ok(beat("m2", 2, Some(Assignment::new())));
    assert_eq!(response.assignment, Some(parts(&[(FOO, &[3, 4, 5])])));
}

#[test]
fn replay_refuses_records_that_break_the_group() {
    let mut engine = ConsumerGroupEngine::new("g", ConsumerGroupConfig::default());
    let owned = |member: &str| Record::CurrentMemberAssignment {
        member_id: member.into(),
        assignment: CurrentAssignment {
            member_epoch: 1,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: parts(&[(FOO, &[0])]),
            pending_revocation: Assignment::new(),
        },
    };
    engine.replay(&owned("a")).unwrap();
    assert!(engine.replay(&owned("b")).is_err(), "foo-0 owned twice");
    assert!(engine
        .replay(&Record::MemberMetadataTombstone {
            member_id: "a".into()
        })
        .is_err());
    assert!(engine.replay(&Record::GroupMetadataTombstone).is_err());
}

#[test]
fn an_empty_group_can_be_deleted() {
    let mut h = one_member();
    assert_eq!(h.engine.delete(), Err(ConsumerGroupError::NonEmptyGroup));
    h.ok(beat("m1", -1, None));
    let records = h.engine.delete().unwrap();
    assert_eq!(
        records,
        vec![
            Record::TargetAssignmentMetadataTombstone,
            Record::PartitionMetadataTombstone,
            Record::GroupMetadataTombstone,
        ]
    );
    assert!(!h.engine.exists());
    h.log.extend(records);
    assert!(!h.replayed().exists());
    assert_eq!(
        h.err(beat("m1", 1, None)),
        ConsumerGroupError::GroupIdNotFound
    );
}

#[test]
fn a_static_member_can_come_back_under_the_same_member_id() {
    let mut h = Harness::new();
    h.ok(static_join("s1", "i1", &["foo"]));
    h.ok(HeartbeatRequest {
        instance_id: Some("i1".into()),
        ..beat("s1", -2, None)
    });
    let response = h.ok(static_join("s1", "i1", &["foo"]));
    assert_eq!(response.member_epoch, 1);
    assert_eq!(response.assignment, Some(all_foo()));
    assert_eq!(h.engine.group_epoch(), 1);
    h.assert_replay_matches();
}

#[test]
fn a_member_in_a_state_from_a_newer_version_must_rejoin_owning_nothing() {
    let mut h = one_member();
    let mut current = h.member("m1").current.clone();
    current.state = MemberState::from_value(42);
    let record = Record::CurrentMemberAssignment {
        member_id: "m1".into(),
        assignment: current,
    };
    h.engine.replay(&record).unwrap();
    h.log.push(record);
    assert_eq!(
        h.err(beat("m1", 1, Some(all_foo()))),
        ConsumerGroupError::FencedMemberEpoch
    );
    assert_eq!(
        h.err(beat("m1", 1, None)),
        ConsumerGroupError::FencedMemberEpoch
    );
    let response = h.ok(join("m1", &["foo"]));
    assert_eq!(response.member_epoch, 1);
    assert_eq!(h.member("m1").current.state, MemberState::Stable);
    assert_eq!(response.assignment, Some(all_foo()));
    h.assert_replay_matches();
}

#[test]
fn a_member_changing_only_its_client_details_does_not_rebalance() {
    let mut h = one_member();
    let out = h.send(HeartbeatRequest {
        client_host: "/10.0.0.2".into(),
        rack_id: Some("r2".into()),
        ..beat("m1", 1, None)
    });
    assert_eq!(out.records.len(), 1, "only the member's metadata: {out:?}");
    assert_eq!(h.engine.group_epoch(), 1);
    assert_eq!(h.member("m1").metadata.client_host, "/10.0.0.2");
    assert_eq!(h.member("m1").metadata.rack_id.as_deref(), Some("r2"));
}
