//! Share groups (KIP-932): queues on the log. Records of a topic partition
//! are delivered to any member of a share group, one at a time, and each is
//! acknowledged on its own.
//!
//! [`ShareGroupEngine`] is a group's membership (ShareGroupHeartbeat),
//! [`SharePartition`] the per-partition delivery state machine and
//! [`ShareSessions`] a broker's share sessions, all sans-IO.

mod group;
mod partition;
mod session;

#[cfg(test)]
mod tests;

pub use group::{
    simple_assignment, ShareGroupConfig, ShareGroupEngine, ShareGroupError, ShareGroupState,
    ShareHeartbeat, ShareHeartbeatResponse, ShareMember, ShareMemberMetadata, ShareOutput,
    ShareRecord, LEAVE_GROUP_MEMBER_EPOCH,
};
pub use partition::{
    log_records, AcknowledgeType, AcquiredRange, DeadLetter, DeadLetterReason, InFlightCounts,
    LogRecord, PersistedState, RecordState, ShareError, SharePartition, SharePartitionConfig,
    StateBatch, DELIVER_AT_HEADER,
};
pub use session::{
    SessionChange, ShareSessionError, ShareSessions, TopicIdPartition, FINAL_SESSION_EPOCH,
    OPEN_SESSION_EPOCH,
};
