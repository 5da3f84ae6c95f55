//! The persisted state of one consumer group and how each record changes it.
//!
//! Everything here is derived from records only (no clock, no timers), so that
//! two engines that replayed the same records compare equal.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::member::Member;
use super::reconciliation::CurrentAssignment;
use super::record::Record;
use super::topics::{Assignment, TopicMetadata};

/// A record that does not fit the state it is replayed on (Kafka's
/// IllegalStateException while loading): the log is not one the engine wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot replay {record}: {reason}")]
pub struct ReplayError {
    pub record: &'static str,
    pub reason: String,
}

fn refuse(record: &'static str, reason: impl Into<String>) -> ReplayError {
    ReplayError {
        record,
        reason: reason.into(),
    }
}

/// The state of a group, as replayed from its records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct GroupState {
    /// Whether any record created the group (and no tombstone deleted it).
    pub(super) exists: bool,
    pub(super) group_epoch: i32,
    /// The epoch of `target`; behind `group_epoch` until the next target is
    /// computed.
    pub(super) assignment_epoch: i32,
    /// Subscribed topic name → its metadata when it was last computed.
    pub(super) subscription: BTreeMap<String, TopicMetadata>,
    pub(super) members: BTreeMap<String, Member>,
    /// Instance id → member id of the static members.
    pub(super) static_members: BTreeMap<String, String>,
    /// Member id → target assignment.
    pub(super) target: BTreeMap<String, Assignment>,
    /// Topic → partition → epoch of the member owning it (assigned or pending
    /// revocation). A partition is in here at most once: the invariant the
    /// reconciliation protects.
    pub(super) partition_epochs: BTreeMap<Uuid, BTreeMap<i32, i32>>,
}

impl GroupState {
    /// Whether some member owns `partition` of `topic`.
    pub(super) fn is_owned(&self, topic: Uuid, partition: i32) -> bool {
        self.partition_epochs
            .get(&topic)
            .is_some_and(|partitions| partitions.contains_key(&partition))
    }

    /// The member holding `instance_id`, if any.
    pub(super) fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.static_members
            .get(instance_id)
            .and_then(|id| self.members.get(id))
    }

    /// Applies one record. On error nothing changed.
    pub(super) fn replay(&mut self, record: &Record) -> Result<(), ReplayError> {
        match record {
            Record::GroupMetadata { epoch } => {
                self.exists = true;
                self.group_epoch = *epoch;
            }
            Record::GroupMetadataTombstone => {
                if !self.members.is_empty() || !self.target.is_empty() {
                    return Err(refuse(
                        "ConsumerGroupMetadata tombstone",
                        "the group still has members or a target assignment",
                    ));
                }
                *self = GroupState::default();
            }
            Record::PartitionMetadata { topics } => {
                self.exists = true;
                self.subscription = topics.iter().map(|t| (t.name.clone(), t.clone())).collect();
            }
            Record::PartitionMetadataTombstone => self.subscription.clear(),
            Record::MemberMetadata {
                member_id,
                metadata,
            } => {
                self.exists = true;
                let member = self
                    .members
                    .entry(member_id.clone())
                    .or_insert_with(|| Member::new(member_id.clone()));
                if let Some(old) = member.metadata.instance_id.take() {
                    if self.static_members.get(&old) == Some(member_id) {
                        self.static_members.remove(&old);
                    }
                }
                member.metadata = metadata.clone();
                if let Some(instance_id) = &metadata.instance_id {
                    self.static_members
                        .insert(instance_id.clone(), member_id.clone());
                }
            }
            Record::MemberMetadataTombstone { member_id } => {
                let Some(member) = self.members.get(member_id) else {
                    return Ok(());
                };
                if member.current.member_epoch != -1 {
                    return Err(refuse(
                        "ConsumerGroupMemberMetadata tombstone",
                        format!("member {member_id} has no current assignment tombstone"),
                    ));
                }
                if self.target.contains_key(member_id) {
                    return Err(refuse(
                        "ConsumerGroupMemberMetadata tombstone",
                        format!("member {member_id} has no target assignment tombstone"),
                    ));
                }
                let member = self.members.remove(member_id).expect("checked above");
                if let Some(instance_id) = member.metadata.instance_id {
                    if self.static_members.get(&instance_id) == Some(member_id) {
                        self.static_members.remove(&instance_id);
                    }
                }
            }
            Record::TargetAssignmentMember {
                member_id,
                assignment,
            } => {
                self.exists = true;
                self.target.insert(member_id.clone(), assignment.clone());
            }
            Record::TargetAssignmentMemberTombstone { member_id } => {
                self.target.remove(member_id);
            }
            Record::TargetAssignmentMetadata { assignment_epoch } => {
                self.exists = true;
                self.assignment_epoch = *assignment_epoch;
            }
            Record::TargetAssignmentMetadataTombstone => {
                if !self.target.is_empty() {
                    return Err(refuse(
                        "ConsumerGroupTargetAssignmentMetadata tombstone",
                        "the target assignment still has members",
                    ));
                }
                self.assignment_epoch = -1;
            }
            Record::CurrentMemberAssignment {
                member_id,
                assignment,
            } => {
                self.exists = true;
                let old = self
                    .members
                    .get(member_id)
                    .map(|m| m.current.clone())
                    .unwrap_or_default();
                self.move_partitions(member_id, &old, assignment)?;
                self.members
                    .entry(member_id.clone())
                    .or_insert_with(|| Member::new(member_id.clone()))
                    .current = assignment.clone();
            }
            Record::CurrentMemberAssignmentTombstone { member_id } => {
                let Some(member) = self.members.get(member_id) else {
                    return Ok(());
                };
                let old = member.current.clone();
                let gone = CurrentAssignment {
                    member_epoch: -1,
                    previous_member_epoch: -1,
                    state: old.state,
                    assigned: Assignment::new(),
                    pending_revocation: Assignment::new(),
                };
                self.move_partitions(member_id, &old, &gone)?;
                self.members
                    .get_mut(member_id)
                    .expect("checked above")
                    .current = gone;
            }
        }
        Ok(())
    }

    /// Moves the partition epochs of a member from its `old` to its `new`
    /// current assignment, refusing a partition another member owns.
    fn move_partitions(
        &mut self,
        member_id: &str,
        old: &CurrentAssignment,
        new: &CurrentAssignment,
    ) -> Result<(), ReplayError> {
        const RECORD: &str = "ConsumerGroupCurrentMemberAssignment";
        for (topic, partition) in old.owned() {
            let epoch = self
                .partition_epochs
                .get(&topic)
                .and_then(|p| p.get(&partition));
            if epoch != Some(&old.member_epoch) {
                return Err(refuse(
                    RECORD,
                    format!(
                        "{topic}-{partition} of member {member_id} is at epoch {epoch:?}, not {}",
                        old.member_epoch
                    ),
                ));
            }
        }
        for (topic, partition) in new.owned() {
            let mine = old
                .assigned
                .get(&topic)
                .into_iter()
                .chain(old.pending_revocation.get(&topic))
                .any(|p| p.contains(&partition));
            if !mine && self.is_owned(topic, partition) {
                return Err(refuse(
                    RECORD,
                    format!(
                        "{topic}-{partition} is still owned by another member than {member_id}"
                    ),
                ));
            }
        }
        for (topic, partition) in old.owned() {
            if let Some(partitions) = self.partition_epochs.get_mut(&topic) {
                partitions.remove(&partition);
                if partitions.is_empty() {
                    self.partition_epochs.remove(&topic);
                }
            }
        }
        for (topic, partition) in new.owned() {
            self.partition_epochs
                .entry(topic)
                .or_default()
                .insert(partition, new.member_epoch);
        }
        Ok(())
    }
}
