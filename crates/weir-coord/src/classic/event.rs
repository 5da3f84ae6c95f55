//! What the coordinator feeds the engine: requests (already decoded, any API
//! version mapped to these shapes) and timer expirations, each with the time.

use super::command::TimerKey;
use super::member::Protocol;

/// The coordinator's handle of one request; echoed in [`Command::Respond`](super::Command::Respond).
pub type RequestId = u64;

/// An input to [`GroupEngine::handle`](super::GroupEngine::handle).
#[derive(Debug, Clone)]
pub enum Event {
    Join {
        request_id: RequestId,
        now_ms: u64,
        request: JoinGroup,
        /// Randomness for a member id, should this join need one
        /// (`Uuid::new_v4()` in production, a counter in tests).
        fresh_uuid: uuid::Uuid,
    },
    Sync {
        request_id: RequestId,
        now_ms: u64,
        request: SyncGroup,
    },
    Heartbeat {
        request_id: RequestId,
        now_ms: u64,
        request: Heartbeat,
    },
    Leave {
        request_id: RequestId,
        now_ms: u64,
        request: LeaveGroup,
    },
    /// A timer the engine scheduled has fired. Stale or cancelled timers are
    /// ignored, so the coordinator need not be exact about cancellation.
    Timer { key: TimerKey, now_ms: u64 },
    /// The coordinator stops hosting the group (partition moved, group deleted):
    /// the group becomes Dead and every parked request is answered.
    Unload { now_ms: u64 },
}

impl Event {
    pub fn now_ms(&self) -> u64 {
        match self {
            Event::Join { now_ms, .. }
            | Event::Sync { now_ms, .. }
            | Event::Heartbeat { now_ms, .. }
            | Event::Leave { now_ms, .. }
            | Event::Timer { now_ms, .. }
            | Event::Unload { now_ms } => *now_ms,
        }
    }
}

/// A JoinGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroup {
    /// Empty for a member that has no id yet.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub protocol_type: String,
    /// In order of preference.
    pub protocols: Vec<Protocol>,
    pub session_timeout_ms: i32,
    /// For JoinGroup v0 the coordinator passes the session timeout here.
    pub rebalance_timeout_ms: i32,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394).
    pub require_known_member_id: bool,
    /// JoinGroup v9+: a rejoining static leader may be told to skip assignment (KIP-814).
    pub supports_skip_assignment: bool,
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroup {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_name: Option<String>,
    /// The leader's assignment, member id → assignment bytes; empty from followers.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// A Heartbeat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
}

/// A LeaveGroup request (v3+ shape; v0-2 carry one member).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroup {
    pub members: Vec<LeavingMember>,
}

/// One member in a LeaveGroup request. A static member may be named by its
/// instance id alone, with an empty member id (KIP-345 admin removal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}
