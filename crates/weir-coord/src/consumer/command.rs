//! What the engine hands back for one event: the heartbeat response, the
//! records to persist, the timers to arm or disarm.

use super::error::ConsumerGroupError;
use super::record::Record;
use super::topics::Assignment;

/// The outcome of one event. Execute it in this order:
///
/// 1. Append `records` to the group's `__consumer_offsets` partition. The
///    engine has already applied them to itself.
/// 2. Apply `timers` (they are harmless if step 1 fails: a stale timer is
///    ignored).
/// 3. Once the records are committed, send `response`. If they cannot be
///    written, answer with an error instead (e.g. NOT_COORDINATOR) and rebuild
///    the engine from the partition by [`replay`](super::ConsumerGroupEngine::replay),
///    as a new coordinator would: the engine is ahead of the log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// The answer to a heartbeat; `None` for other events.
    pub response: Option<Result<HeartbeatResponse, ConsumerGroupError>>,
    pub records: Vec<Record>,
    pub timers: Vec<TimerCommand>,
    /// The group became a classic group again (its last consumer-protocol
    /// member left; `records` delete it as a consumer group): write this
    /// classic group with the records, in the same batch, and host it,
    /// rebalancing.
    pub downgraded: Option<crate::classic::GroupSnapshot>,
}

/// A successful ConsumerGroupHeartbeat response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub member_id: String,
    /// The epoch the member must send next; -1 or -2 after a leave.
    pub member_epoch: i32,
    /// 0 in the response to a leave.
    pub heartbeat_interval_ms: i32,
    /// The partitions the member should own, sent (non-null) only when they
    /// changed or the request was a full one (joining, or after an error).
    pub assignment: Option<Assignment>,
}

/// The timers of a group: one per key at most.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKey {
    /// The member's session: fenced when it fires
    /// (`group.consumer.session.timeout.ms` after its last heartbeat).
    Session { member_id: String },
    /// The member's revocation: fenced when it fires if it is still at the
    /// epoch it was asked to revoke partitions in (its rebalance timeout).
    Rebalance { member_id: String },
    /// A classic member told to rejoin: fenced when it fires if it has not
    /// (its rebalance timeout).
    ClassicJoin { member_id: String },
    /// A classic member that joined: fenced when it fires if it has not sent
    /// SyncGroup (its rebalance timeout).
    ClassicSync { member_id: String },
}

/// Arm or disarm a timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerCommand {
    /// Arm `key` (replacing its previous deadline); feed
    /// [`Event::Timer`](super::Event::Timer) once `at_ms` is reached.
    Schedule { key: TimerKey, at_ms: u64 },
    /// Disarm `key` if armed.
    Cancel { key: TimerKey },
}
