//! Consumer groups, classic protocol: the membership state machine of one group.
//!
//! [`GroupEngine`] is sans-IO, like openraft's engine: the coordinator task that
//! owns the sockets, the timers and the `__consumer_offsets` partition feeds it
//! [`Event`]s (decoded requests, fired timers, each carrying the current time) and
//! executes the [`Command`]s it returns, in order:
//!
//! - [`Command::Respond`]: send the response to the request with that id. JoinGroup
//!   and SyncGroup requests are parked inside the engine and answered later, all
//!   members at once when a join phase or the leader's SyncGroup completes.
//! - [`Command::ScheduleTimer`] / [`Command::CancelTimer`]: one timer per
//!   [`TimerKey`]; a fired timer comes back as [`Event::Timer`]. Stale timers are
//!   ignored by the engine, so cancellation races are harmless.
//! - [`Command::PersistGroup`]: write the group metadata record; responses after it
//!   in the same batch wait until it is durable.
//!
//! Offsets are not part of the engine: the coordinator asks
//! [`GroupEngine::validate_offset_commit`] and reads the generation, members and
//! state through the engine's getters.
//!
//! The behaviour follows Apache Kafka's classic GroupCoordinator: states
//! Empty → PreparingRebalance → CompletingRebalance → Stable (and Dead), KIP-394
//! member ids, the initial rebalance delay, KIP-345 static membership with
//! fencing, KIP-814 skip-assignment for a rejoining static leader.

mod command;
mod engine;
mod error;
mod event;
mod member;
mod snapshot;
mod state;

#[cfg(test)]
mod tests;

pub use command::{
    Command, JoinResponse, JoinedMember, LeaveResponse, LeftMember, Response, SyncResponse,
    TimerKey,
};
pub use engine::{GroupConfig, GroupEngine};
pub use error::{error_code, GroupError};
pub use event::{Event, Heartbeat, JoinGroup, LeaveGroup, LeavingMember, RequestId, SyncGroup};
pub use member::{Member, Protocol};
pub use snapshot::{GroupSnapshot, MemberSnapshot};
pub use state::GroupState;
