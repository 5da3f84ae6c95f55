//! What the engine asks the coordinator to do: answer requests, arm or disarm
//! timers, and persist the group's metadata.

use super::error::GroupError;
use super::event::RequestId;
use super::snapshot::GroupSnapshot;

/// An output of the engine. Commands are in order and must be executed in order:
/// a [`Command::Respond`] that follows a [`Command::PersistGroup`] must not be sent
/// before that metadata is durable in `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Answer a request.
    Respond {
        request_id: RequestId,
        response: Response,
    },
    /// Arm (or re-arm, replacing the previous deadline) the timer `key`; feed
    /// [`Event::Timer`](super::Event::Timer) when `at_ms` is reached.
    ScheduleTimer { key: TimerKey, at_ms: u64 },
    /// Disarm the timer `key` if armed.
    CancelTimer { key: TimerKey },
    /// Write the group metadata record (Kafka's GroupMetadataValue) for this group.
    PersistGroup(GroupSnapshot),
}

/// The timers of one group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKey {
    /// A member's (or pending member's) session.
    Heartbeat { member_id: String },
    /// End of the join phase (initial delay or rebalance timeout).
    Join,
    /// End of the wait for every member's SyncGroup after a join phase.
    PendingSync,
}

/// A response to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Join(JoinResponse),
    Sync(SyncResponse),
    Heartbeat(Result<(), GroupError>),
    Leave(LeaveResponse),
}

/// A JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's member id (empty when there is none).
    pub leader: String,
    pub member_id: String,
    /// Every member with its metadata for the selected protocol: for the leader only.
    pub members: Vec<JoinedMember>,
    /// KIP-814: a rejoining static leader keeps the current assignment.
    pub skip_assignment: bool,
}

/// One member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Vec<u8>,
}

/// A SyncGroup response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Vec<u8>,
}

/// A LeaveGroup response: a request-level error, or one result per member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveResponse {
    pub error: Option<GroupError>,
    pub members: Vec<LeftMember>,
}

/// The result for one member of a LeaveGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error: Option<GroupError>,
}

impl JoinResponse {
    pub(super) fn error(member_id: &str, error: GroupError) -> Self {
        Self {
            error: Some(error),
            generation_id: -1,
            member_id: member_id.to_owned(),
            ..Self::default()
        }
    }
}

impl SyncResponse {
    pub(super) fn error(error: GroupError) -> Self {
        Self {
            error: Some(error),
            ..Self::default()
        }
    }
}
