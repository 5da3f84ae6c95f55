//! One member of a classic group: what it told us when it joined, what it was
//! assigned, and which of its requests are parked waiting for the group.

use super::event::RequestId;

/// One protocol a member supports (e.g. an assignor name for consumers) with the
/// member's metadata for it (e.g. its subscription). Members list them in order of
/// preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Vec<u8>,
}

impl Protocol {
    pub fn new(name: impl Into<String>, metadata: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            metadata: metadata.into(),
        }
    }
}

/// A member of the group.
///
/// The public fields describe the member; the rest is the engine's bookkeeping of
/// parked requests and timers.
#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    /// `group.instance.id` of a static member (KIP-345).
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// Supported protocols in order of preference.
    pub protocols: Vec<Protocol>,
    /// The assignment of the current generation (empty until the leader's SyncGroup).
    pub assignment: Vec<u8>,
    /// The JoinGroup request parked until the join phase completes.
    pub(super) awaiting_join: Option<RequestId>,
    /// The SyncGroup request parked until the leader's assignment arrives.
    pub(super) awaiting_sync: Option<RequestId>,
    /// Joined during the current rebalance: may expire even while awaiting join.
    pub(super) is_new: bool,
    /// When the member's session expires unless it heartbeats.
    pub(super) heartbeat_deadline_ms: u64,
}

impl Member {
    /// Whether a JoinGroup of this member is parked.
    pub fn is_awaiting_join(&self) -> bool {
        self.awaiting_join.is_some()
    }

    /// Whether a SyncGroup of this member is parked.
    pub fn is_awaiting_sync(&self) -> bool {
        self.awaiting_sync.is_some()
    }

    /// The member's metadata for `protocol`, empty if it does not support it.
    pub fn metadata(&self, protocol: &str) -> &[u8] {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map_or(&[][..], |p| &p.metadata)
    }

    pub(super) fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    /// The member's most preferred protocol among `candidates` (Kafka's vote).
    pub(super) fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))
    }

    /// A missed heartbeat is forgiven while the member waits in a rebalance,
    /// unless it joined in this rebalance (then it must make it in time).
    pub(super) fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.is_awaiting_join() || self.is_awaiting_sync())
    }
}
