//! Step tests of the reconciliation state machine (the scenarios of Kafka's
//! CurrentAssignmentBuilderTest).

use std::collections::BTreeSet;

use uuid::Uuid;

use super::super::*;
use super::{parts, topic_id};

const T1: u128 = 1;
const T2: u128 = 2;

fn current(
    epoch: i32,
    previous: i32,
    state: MemberState,
    assigned: Assignment,
    pending: Assignment,
) -> CurrentAssignment {
    CurrentAssignment {
        member_epoch: epoch,
        previous_member_epoch: previous,
        state,
        assigned,
        pending_revocation: pending,
    }
}

/// One step with `others` owned by other members.
fn step(
    member: &CurrentAssignment,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    others: &Assignment,
) -> Result<CurrentAssignment, ConsumerGroupError> {
    let mine: BTreeSet<(Uuid, i32)> = member.owned().collect();
    reconcile(
        member,
        Target {
            epoch: target_epoch,
            assignment: target,
        },
        owned,
        |topic, partition| mine.contains(&(topic, partition)) || contains(others, topic, partition),
    )
}

#[test]
fn stable_to_stable_when_only_partitions_are_added() {
    let member = current(
        10,
        9,
        MemberState::Stable,
        parts(&[(T1, &[1, 2])]),
        Assignment::new(),
    );
    let target = parts(&[(T1, &[1, 2, 3]), (T2, &[0])]);
    let next = step(
        &member,
        11,
        &target,
        Some(&parts(&[(T1, &[1, 2])])),
        &Assignment::new(),
    )
    .unwrap();
    assert_eq!(
        next,
        current(11, 10, MemberState::Stable, target, Assignment::new())
    );
}

#[test]
fn stable_member_at_the_target_epoch_stays() {
    let member = current(
        11,
        10,
        MemberState::Stable,
        parts(&[(T1, &[1])]),
        Assignment::new(),
    );
    let next = step(&member, 11, &parts(&[(T1, &[1])]), None, &Assignment::new()).unwrap();
    assert_eq!(next, member);
}

#[test]
fn stable_to_unrevoked_when_partitions_must_go() {
    let member = current(
        10,
        9,
        MemberState::Stable,
        parts(&[(T1, &[1, 2, 3])]),
        Assignment::new(),
    );
    let target = parts(&[(T1, &[2, 3, 4])]);
    let next = step(
        &member,
        11,
        &target,
        Some(&parts(&[(T1, &[1, 2, 3])])),
        &Assignment::new(),
    )
    .unwrap();
    // Revoke first, at the same epoch; 4 is not given yet.
    assert_eq!(
        next,
        current(
            10,
            10,
            MemberState::UnrevokedPartitions,
            parts(&[(T1, &[2, 3])]),
            parts(&[(T1, &[1])])
        )
    );
}

#[test]
fn revocation_already_done_goes_straight_to_the_target() {
    // The member reports it no longer owns 1: nothing to wait for.
    let member = current(
        10,
        9,
        MemberState::Stable,
        parts(&[(T1, &[1, 2, 3])]),
        Assignment::new(),
    );
    let target = parts(&[(T1, &[2, 3, 4])]);
    let next = step(
        &member,
        11,
        &target,
        Some(&parts(&[(T1, &[2, 3])])),
        &Assignment::new(),
    )
    .unwrap();
    assert_eq!(
        next,
        current(11, 10, MemberState::Stable, target, Assignment::new())
    );
}

#[test]
fn unrevoked_stays_until_the_member_reports_the_revocation() {
    let member = current(
        10,
        10,
        MemberState::UnrevokedPartitions,
        parts(&[(T1, &[2, 3])]),
        parts(&[(T1, &[1])]),
    );
    let target = parts(&[(T1, &[2, 3, 4])]);
    for owned in [
        None,
        Some(parts(&[(T1, &[1, 2, 3])])),
        Some(parts(&[(T1, &[1])])),
    ] {
        let next = step(&member, 11, &target, owned.as_ref(), &Assignment::new()).unwrap();
        assert_eq!(next, member, "owned {owned:?}");
    }
}

#[test]
fn unrevoked_to_stable_once_revoked() {
    let member = current(
        10,
        10,
        MemberState::UnrevokedPartitions,
        parts(&[(T1, &[2, 3])]),
        parts(&[(T1, &[1])]),
    );
    let target = parts(&[(T1, &[2, 3, 4])]);
    let next = step(
        &member,
        11,
        &target,
        Some(&parts(&[(T1, &[2, 3])])),
        &Assignment::new(),
    )
    .unwrap();
    assert_eq!(
        next,
        current(11, 10, MemberState::Stable, target, Assignment::new())
    );
}

#[test]
fn unrevoked_to_unreleased_when_another_member_still_owns_a_partition() {
    let member = current(
        10,
        10,
        MemberState::UnrevokedPartitions,
        parts(&[(T1, &[2, 3])]),
        parts(&[(T1, &[1])]),
    );
    let target = parts(&[(T1, &[2, 3, 4, 5])]);
    let others = parts(&[(T1, &[4])]);
    let next = step(
        &member,
        11,
        &target,
        Some(&parts(&[(T1, &[2, 3])])),
        &others,
    )
    .unwrap();
    // Moves to the target epoch with what is free (5); waits for 4.
    assert_eq!(
        next,
        current(
            11,
            10,
            MemberState::UnreleasedPartitions,
            parts(&[(T1, &[2, 3, 5])]),
            Assignment::new()
        )
    );
}

#[test]
fn unreleased_waits_then_gets_the_released_partition() {
    let member = current(
        11,
        10,
        MemberState::UnreleasedPartitions,
        parts(&[(T1, &[2, 3])]),
        Assignment::new(),
    );
    let target = parts(&[(T1, &[2, 3, 4])]);
    let still = step(&member, 11, &target, None, &parts(&[(T1, &[4])])).unwrap();
    assert_eq!(still.state, MemberState::UnreleasedPartitions);
    assert_eq!(still.assigned, member.assigned);
    assert_eq!(still.member_epoch, 11);

    let next = step(&member, 11, &target, None, &Assignment::new()).unwrap();
    assert_eq!(
        next,
        current(11, 11, MemberState::Stable, target, Assignment::new())
    );
}

#[test]
fn unreleased_member_follows_a_newer_target() {
    // While waiting, a new target removes the awaited partition and one it has.
    let member = current(
        11,
        10,
        MemberState::UnreleasedPartitions,
        parts(&[(T1, &[2, 3])]),
        Assignment::new(),
    );
    let target = parts(&[(T1, &[2])]);
    let next = step(
        &member,
        12,
        &target,
        Some(&parts(&[(T1, &[2, 3])])),
        &parts(&[(T1, &[4])]),
    )
    .unwrap();
    assert_eq!(
        next,
        current(
            11,
            11,
            MemberState::UnrevokedPartitions,
            parts(&[(T1, &[2])]),
            parts(&[(T1, &[3])])
        )
    );
}

#[test]
fn a_partition_the_member_is_still_revoking_is_not_reassigned_to_it_early() {
    // Unrevoked with 1 pending; the newer target wants 1 back. Once the member
    // reports the revocation, 1 is still recorded as owned (by itself) at this
    // step, so it waits in Unreleased and gets 1 on the next step.
    let member = current(
        10,
        10,
        MemberState::UnrevokedPartitions,
        parts(&[(T1, &[2])]),
        parts(&[(T1, &[1])]),
    );
    let target = parts(&[(T1, &[1, 2])]);
    let next = step(
        &member,
        12,
        &target,
        Some(&parts(&[(T1, &[2])])),
        &Assignment::new(),
    )
    .unwrap();
    assert_eq!(next.state, MemberState::UnreleasedPartitions);
    assert_eq!(next.member_epoch, 12);
    assert_eq!(next.assigned, parts(&[(T1, &[2])]));
    assert!(next.pending_revocation.is_empty());
    let last = step(
        &next,
        12,
        &target,
        Some(&parts(&[(T1, &[2])])),
        &Assignment::new(),
    )
    .unwrap();
    assert_eq!(
        last,
        current(12, 12, MemberState::Stable, target, Assignment::new())
    );
}

#[test]
fn unknown_state_is_fenced_unless_the_member_owns_nothing() {
    let member = current(
        10,
        9,
        MemberState::Unknown,
        parts(&[(T1, &[1])]),
        Assignment::new(),
    );
    let target = parts(&[(T1, &[1, 2])]);
    assert_eq!(
        step(&member, 11, &target, None, &Assignment::new()),
        Err(ConsumerGroupError::FencedMemberEpoch)
    );
    assert_eq!(
        step(
            &member,
            11,
            &target,
            Some(&parts(&[(T1, &[1])])),
            &Assignment::new()
        ),
        Err(ConsumerGroupError::FencedMemberEpoch)
    );
    let next = step(
        &member,
        11,
        &target,
        Some(&Assignment::new()),
        &Assignment::new(),
    )
    .unwrap();
    assert_eq!(
        next,
        current(11, 10, MemberState::Stable, target, Assignment::new())
    );
}

#[test]
fn member_state_values_round_trip() {
    for state in [
        MemberState::Stable,
        MemberState::UnrevokedPartitions,
        MemberState::UnreleasedPartitions,
        MemberState::Unknown,
    ] {
        assert_eq!(MemberState::from_value(state.value()), state);
    }
    assert_eq!(MemberState::from_value(42), MemberState::Unknown);
    let _ = topic_id(0);
}
