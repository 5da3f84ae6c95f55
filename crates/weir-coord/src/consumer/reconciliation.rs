//! The reconciliation of one member's current assignment towards its target
//! (Kafka's CurrentAssignmentBuilder).
//!
//! A member moves to a new target in at most two steps, so that no partition is
//! ever owned by two members:
//!
//! 1. **Revoke.** Partitions it owns that are not in its target are taken from
//!    its assignment and put *pending revocation*; it stays at its epoch in
//!    [`MemberState::UnrevokedPartitions`] until a heartbeat reports owned
//!    partitions without any of them (or its rebalance timeout fences it).
//! 2. **Assign.** Then it moves to the target epoch and gets the partitions of
//!    its target that nobody owns any more. Those still owned by another
//!    member (assigned or pending revocation there) are held back in
//!    [`MemberState::UnreleasedPartitions`] and given on a later heartbeat,
//!    once their owner has released them.
//!
//! ```text
//!            new target, something to revoke          owned partitions reported
//!  Stable ─────────────────────────────────► Unrevoked ───── without the revoked ones ──┐
//!    ▲  ▲                                                                              │
//!    │  └──────────── all of the target is free ◄───────────────────────────────────────┤
//!    │                                                                                  ▼
//!    └────────────────── the rest of the target is released ─────────────────── Unreleased
//! ```

use std::collections::BTreeSet;

use uuid::Uuid;

use super::error::ConsumerGroupError;
use super::topics::Assignment;

/// Where a member is in its reconciliation, with Kafka's persisted values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemberState {
    /// The member has all of its target assignment at the target epoch.
    #[default]
    Stable,
    /// The member must revoke partitions before it can move to the next epoch.
    UnrevokedPartitions,
    /// The member is at the target epoch but waits for partitions that other
    /// members still own.
    UnreleasedPartitions,
    /// A state persisted by a newer version; such a member is made to rejoin
    /// from scratch.
    Unknown,
}

impl MemberState {
    /// The value in ConsumerGroupCurrentMemberAssignmentValue.State.
    pub fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    /// The state persisted as `value`; values this version does not know are
    /// [`MemberState::Unknown`].
    pub fn from_value(value: i8) -> Self {
        match value {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }

    /// Kafka's name of the state, as ConsumerGroupDescribe shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
            MemberState::Unknown => "unknown",
        }
    }
}

/// A member's current assignment: exactly the content of Kafka's
/// ConsumerGroupCurrentMemberAssignmentValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    /// The epoch the member must send in its next heartbeat.
    pub member_epoch: i32,
    /// The epoch before the last bump: a member whose response with the bump
    /// was lost may still heartbeat with it.
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// The partitions the member is told to own.
    pub assigned: Assignment,
    /// The partitions the member must give up before it moves on.
    pub pending_revocation: Assignment,
}

impl Default for CurrentAssignment {
    /// A new member: epoch 0, previous epoch -1, nothing assigned (Kafka's
    /// ConsumerGroupMember defaults).
    fn default() -> Self {
        Self {
            member_epoch: 0,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

impl CurrentAssignment {
    /// Whether the member has all of the target of `assignment_epoch`.
    pub fn is_reconciled_to(&self, assignment_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == assignment_epoch
    }

    /// Every partition the member may still be consuming: assigned or
    /// pending revocation.
    pub fn owned(&self) -> impl Iterator<Item = (Uuid, i32)> + '_ {
        self.assigned
            .iter()
            .chain(&self.pending_revocation)
            .flat_map(|(topic, partitions)| partitions.iter().map(move |p| (*topic, *p)))
    }

    /// The (epoch, previous epoch) pair after moving to `epoch`. As in Kafka,
    /// the previous epoch becomes the current one even when the epoch stays.
    fn with_epoch(&self, epoch: i32) -> (i32, i32) {
        (epoch, self.member_epoch)
    }
}

/// The inputs of one reconciliation step besides the member's state.
pub struct Target<'a> {
    /// The group's assignment epoch.
    pub epoch: i32,
    /// The member's target assignment at that epoch.
    pub assignment: &'a Assignment,
}

/// One reconciliation step of a member (Kafka's CurrentAssignmentBuilder.build):
/// its next current assignment, equal to `current` when it cannot move yet.
///
/// `owned` is what the member reported in this heartbeat (`None` when the
/// heartbeat did not carry it). `is_owned(topic, partition)` tells whether any
/// member (this one included) still owns the partition, assigned or pending
/// revocation.
///
/// Fails with FENCED_MEMBER_EPOCH only for a member in
/// [`MemberState::Unknown`] that did not report owning nothing.
pub fn reconcile(
    current: &CurrentAssignment,
    target: Target<'_>,
    owned: Option<&Assignment>,
    is_owned: impl Fn(Uuid, i32) -> bool,
) -> Result<CurrentAssignment, ConsumerGroupError> {
    let step = Step {
        current,
        target,
        owned,
        is_owned: &is_owned,
    };
    match current.state {
        MemberState::Stable if current.member_epoch == step.target.epoch => Ok(current.clone()),
        MemberState::Stable | MemberState::UnreleasedPartitions => {
            Ok(step.next(current.member_epoch))
        }
        MemberState::UnrevokedPartitions => {
            if step.still_owns_any(&current.pending_revocation) {
                Ok(current.clone())
            } else {
                Ok(step.next(current.member_epoch + 1))
            }
        }
        MemberState::Unknown => {
            if owned.is_none_or(|owned| owned.values().any(|p| !p.is_empty())) {
                Err(ConsumerGroupError::FencedMemberEpoch)
            } else {
                Ok(step.next(step.target.epoch))
            }
        }
    }
}

struct Step<'a> {
    current: &'a CurrentAssignment,
    target: Target<'a>,
    owned: Option<&'a Assignment>,
    is_owned: &'a dyn Fn(Uuid, i32) -> bool,
}

impl Step<'_> {
    /// Whether the member still reports owning any of `revoked`; a heartbeat
    /// that does not say what it owns is taken to still own everything.
    fn still_owns_any(&self, revoked: &Assignment) -> bool {
        let Some(owned) = self.owned else {
            return true;
        };
        owned.iter().any(|(topic, partitions)| {
            revoked
                .get(topic)
                .is_some_and(|revoked| !revoked.is_disjoint(partitions))
        })
    }

    /// Kafka's computeNextAssignment, with `epoch` the member's epoch should
    /// it have to wait for revocations.
    fn next(&self, epoch: i32) -> CurrentAssignment {
        let target = self.target.assignment;
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut newly_assigned = Assignment::new();
        let mut unreleased = false;

        let topics: BTreeSet<&Uuid> = target.keys().chain(self.current.assigned.keys()).collect();
        for topic in topics {
            let wanted = target.get(topic);
            let had = self.current.assigned.get(topic);
            let keep: BTreeSet<i32> = match (had, wanted) {
                (Some(had), Some(wanted)) => had.intersection(wanted).copied().collect(),
                _ => BTreeSet::new(),
            };
            if let Some(had) = had {
                let revoke: BTreeSet<i32> = had.difference(&keep).copied().collect();
                if !revoke.is_empty() {
                    revoking.insert(*topic, revoke);
                }
            }
            if let Some(wanted) = wanted {
                let mut add = BTreeSet::new();
                for &partition in wanted.difference(&keep) {
                    if (self.is_owned)(*topic, partition) {
                        unreleased = true;
                    } else {
                        add.insert(partition);
                    }
                }
                if !add.is_empty() {
                    newly_assigned.insert(*topic, add);
                }
            }
            if !keep.is_empty() {
                assigned.insert(*topic, keep);
            }
        }

        if !revoking.is_empty() && self.still_owns_any(&revoking) {
            // Revoke first; the member stays at its epoch until it has.
            let (member_epoch, previous_member_epoch) = self.current.with_epoch(epoch);
            return CurrentAssignment {
                member_epoch,
                previous_member_epoch,
                state: MemberState::UnrevokedPartitions,
                assigned,
                pending_revocation: revoking,
            };
        }
        for (topic, partitions) in newly_assigned {
            assigned.entry(topic).or_default().extend(partitions);
        }
        let (member_epoch, previous_member_epoch) = self.current.with_epoch(self.target.epoch);
        CurrentAssignment {
            member_epoch,
            previous_member_epoch,
            state: if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            },
            assigned,
            pending_revocation: Assignment::new(),
        }
    }
}
