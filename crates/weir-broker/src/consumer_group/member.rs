//! One member of a consumer group: what it told the coordinator about itself
//! (persisted as ConsumerGroupMemberMetadataValue) and its current assignment
//! (ConsumerGroupCurrentMemberAssignmentValue).

use std::collections::BTreeSet;

use super::reconciliation::CurrentAssignment;

/// The member's self-description and subscription: exactly the content of
/// Kafka's ConsumerGroupMemberMetadataValue (without the classic-protocol
/// fields, which only members that joined through JoinGroup have).
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
}
