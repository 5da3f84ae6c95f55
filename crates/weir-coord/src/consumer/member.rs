//! One member of a consumer group: what it told the coordinator about itself
//! (persisted as ConsumerGroupMemberMetadataValue) and its current assignment
//! (ConsumerGroupCurrentMemberAssignmentValue).

use std::collections::BTreeSet;

use bytes::Bytes;

use super::reconciliation::CurrentAssignment;

/// The member's self-description and subscription: exactly the content of
/// Kafka's ConsumerGroupMemberMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    /// The subscription regex (RE2/J syntax); `None` when the member
    /// subscribes by names only.
    pub subscribed_topic_regex: Option<String>,
    /// How long the member has to revoke partitions; -1 until it said.
    pub rebalance_timeout_ms: i32,
    /// The server assignor the member asked for, if any.
    pub server_assignor: Option<String>,
    /// Set for a member that speaks the classic protocol (JoinGroup,
    /// SyncGroup, Heartbeat) in a consumer group: one that was in a classic
    /// group when it was upgraded, or joined the consumer group that way.
    pub classic: Option<ClassicMetadata>,
}

/// What a classic member told the coordinator in its JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMetadata {
    pub session_timeout_ms: i32,
    /// Its protocols (assignor names) with their ConsumerProtocolSubscription
    /// metadata, in its order of preference.
    pub protocols: Vec<ClassicProtocol>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicProtocol {
    pub name: String,
    pub metadata: Bytes,
}

impl Default for MemberMetadata {
    fn default() -> Self {
        Self {
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: -1,
            server_assignor: None,
            classic: None,
        }
    }
}

impl MemberMetadata {
    /// Whether the member subscribes to the same topics as `other` (the same
    /// names and the same regex): a change bumps the group epoch.
    pub fn same_subscription(&self, other: &MemberMetadata) -> bool {
        self.subscribed_topic_names == other.subscribed_topic_names
            && self.subscribed_topic_regex == other.subscribed_topic_regex
    }
}

/// A member of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    pub metadata: MemberMetadata,
    pub current: CurrentAssignment,
}

impl Member {
    /// A member the group has never seen: epoch 0, nothing assigned.
    pub fn new(member_id: impl Into<String>) -> Self {
        Self {
            member_id: member_id.into(),
            metadata: MemberMetadata::default(),
            current: CurrentAssignment::default(),
        }
    }

    pub fn member_epoch(&self) -> i32 {
        self.current.member_epoch
    }

    pub fn instance_id(&self) -> Option<&str> {
        self.metadata.instance_id.as_deref()
    }

    /// Whether the member speaks the classic protocol.
    pub fn is_classic(&self) -> bool {
        self.metadata.classic.is_some()
    }
}
