//! What ConsumerGroupDescribe (and ListGroups) show of a group.

use super::assignor::ServerAssignor;
use super::reconciliation::MemberState;
use super::topics::Assignment;

/// The state of a consumer group, as Kafka derives it from its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch moved past the assignment epoch: a new target
    /// assignment is due (on the next heartbeat).
    Assigning,
    /// Some member is not yet at the target assignment.
    Reconciling,
    /// Every member has its target assignment.
    Stable,
}

impl ConsumerGroupState {
    /// Kafka's name of the state, as ConsumerGroupDescribe reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

impl std::fmt::Display for ConsumerGroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: ConsumerGroupState,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// The assignor the next target assignment will use.
    pub assignor: ServerAssignor,
    /// By member id.
    pub members: Vec<MemberDescription>,
}

/// One member in a [`GroupDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub state: MemberState,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// The partitions the member is told to own now.
    pub assignment: Assignment,
    /// The partitions the member is reconciling towards.
    pub target_assignment: Assignment,
    /// Whether it speaks the classic protocol (a member of a classic group
    /// that was upgraded, or one that joined with JoinGroup).
    pub classic: bool,
}
