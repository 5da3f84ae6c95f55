//! The records a consumer group is made of in `__consumer_offsets`, in Kafka's
//! schema terms but as logical values: the engine emits them, the wiring encodes
//! them (key and value schemas, version 0) under the group's id.
//!
//! A group's state is exactly the replay of its records: the engine itself
//! changes only by replaying the records it emits, so a coordinator that loads
//! the partition and replays them continues where the previous one stopped.

use super::member::MemberMetadata;
use super::reconciliation::CurrentAssignment;
use super::topics::{Assignment, TopicMetadata};

/// One record of a consumer group. Every key also carries the group id; the
/// member-scoped ones carry the member id. A tombstone is the key with a null
/// value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// ConsumerGroupMetadataKey / ConsumerGroupMetadataValue: the group epoch.
    GroupMetadata { epoch: i32 },
    /// ConsumerGroupMetadataKey, null value: the group is deleted.
    GroupMetadataTombstone,
    /// ConsumerGroupPartitionMetadataKey / ConsumerGroupPartitionMetadataValue:
    /// the subscription metadata, the id and partition count of every topic
    /// some member subscribes to (sorted by name; the deprecated per-partition
    /// racks are written empty).
    PartitionMetadata { topics: Vec<TopicMetadata> },
    /// ConsumerGroupPartitionMetadataKey, null value.
    PartitionMetadataTombstone,
    /// ConsumerGroupMemberMetadataKey / ConsumerGroupMemberMetadataValue.
    MemberMetadata {
        member_id: String,
        metadata: MemberMetadata,
    },
    /// ConsumerGroupMemberMetadataKey, null value: the member is gone. Follows
    /// the member's current and target assignment tombstones.
    MemberMetadataTombstone { member_id: String },
    /// ConsumerGroupTargetAssignmentMemberKey / ConsumerGroupTargetAssignmentMemberValue.
    TargetAssignmentMember {
        member_id: String,
        assignment: Assignment,
    },
    /// ConsumerGroupTargetAssignmentMemberKey, null value.
    TargetAssignmentMemberTombstone { member_id: String },
    /// ConsumerGroupTargetAssignmentMetadataKey / ConsumerGroupTargetAssignmentMetadataValue:
    /// the epoch of the target assignment; written after the member records of
    /// that target.
    TargetAssignmentMetadata { assignment_epoch: i32 },
    /// ConsumerGroupTargetAssignmentMetadataKey, null value.
    TargetAssignmentMetadataTombstone,
    /// ConsumerGroupCurrentMemberAssignmentKey / ConsumerGroupCurrentMemberAssignmentValue.
    CurrentMemberAssignment {
        member_id: String,
        assignment: CurrentAssignment,
    },
    /// ConsumerGroupCurrentMemberAssignmentKey, null value.
    CurrentMemberAssignmentTombstone { member_id: String },
}

impl Record {
    /// The member id of a member-scoped record's key.
    pub fn member_id(&self) -> Option<&str> {
        match self {
            Record::MemberMetadata { member_id, .. }
            | Record::MemberMetadataTombstone { member_id }
            | Record::TargetAssignmentMember { member_id, .. }
            | Record::TargetAssignmentMemberTombstone { member_id }
            | Record::CurrentMemberAssignment { member_id, .. }
            | Record::CurrentMemberAssignmentTombstone { member_id } => Some(member_id),
            Record::GroupMetadata { .. }
            | Record::GroupMetadataTombstone
            | Record::PartitionMetadata { .. }
            | Record::PartitionMetadataTombstone
            | Record::TargetAssignmentMetadata { .. }
            | Record::TargetAssignmentMetadataTombstone => None,
        }
    }

    /// Whether the record is a tombstone (null value).
    pub fn is_tombstone(&self) -> bool {
        matches!(
            self,
            Record::GroupMetadataTombstone
                | Record::PartitionMetadataTombstone
                | Record::MemberMetadataTombstone { .. }
                | Record::TargetAssignmentMemberTombstone { .. }
                | Record::TargetAssignmentMetadataTombstone
                | Record::CurrentMemberAssignmentTombstone { .. }
        )
    }
}
