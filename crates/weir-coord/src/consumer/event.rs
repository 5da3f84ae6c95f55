//! What the coordinator feeds the engine: decoded ConsumerGroupHeartbeat
//! requests, fired timers and metadata changes, each carrying the time.

use uuid::Uuid;

use super::command::TimerKey;
use super::topics::Assignment;

/// An input to [`ConsumerGroupEngine::handle`](super::ConsumerGroupEngine::handle).
// Events are built per request and moved straight into the engine, never
// stored: boxing the request would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A ConsumerGroupHeartbeat request for this group.
    Heartbeat {
        now_ms: u64,
        request: HeartbeatRequest,
        /// Randomness for a member id, used only when a joining member sent
        /// none (`Uuid::new_v4()` in production, a counter in tests).
        fresh_member_id: Uuid,
    },
    /// A timer the engine scheduled fired. Stale timers (rescheduled,
    /// cancelled, or for a member that moved on) are ignored, so the
    /// coordinator need not be exact about cancellation.
    Timer { now_ms: u64, key: TimerKey },
    /// Topics were created, deleted or got partitions: the engine recomputes
    /// its subscription metadata and bumps the group epoch if it changed.
    /// Also feed it once after loading a group, since the topics may have
    /// changed while nobody hosted it.
    MetadataChanged { now_ms: u64 },
}

impl Event {
    pub fn now_ms(&self) -> u64 {
        match self {
            Event::Heartbeat { now_ms, .. }
            | Event::Timer { now_ms, .. }
            | Event::MetadataChanged { now_ms } => *now_ms,
        }
    }
}

/// A ConsumerGroupHeartbeat request, any version, plus what the request
/// context adds (client id and host). `None` fields were null on the wire,
/// which means "unchanged" after the first heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// Empty only in a first heartbeat of a client that lets the coordinator
    /// choose its member id.
    pub member_id: String,
    /// 0 to join, the current epoch to heartbeat, -1 to leave, -2 for a
    /// static member leaving for a while (it keeps its assignment for the
    /// session timeout).
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The subscription regex; `Some("")` clears it. The coordinator checks it
    /// compiles (INVALID_REGULAR_EXPRESSION) before the engine sees it; the
    /// [`TopicLookup`](super::TopicLookup) resolves it to topic names.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns (TopicPartitions), when it sent them.
    pub owned_partitions: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

impl Default for HeartbeatRequest {
    /// A request with every optional field null and epoch 0.
    fn default() -> Self {
        Self {
            member_id: String::new(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            owned_partitions: None,
            client_id: String::new(),
            client_host: String::new(),
        }
    }
}

impl HeartbeatRequest {
    /// Whether the member sent everything it would send on (re)joining; such a
    /// request always gets the full assignment back.
    pub fn is_full(&self) -> bool {
        self.member_epoch == 0
            || (self.rebalance_timeout_ms != -1
                && (self.subscribed_topic_names.is_some() || self.subscribed_topic_regex.is_some())
                && self.owned_partitions.is_some())
    }
}
