//! Share groups (KIP-932): queues on the log. Records of a topic partition
//! are delivered to any member of a share group, one at a time, and each is
//! acknowledged on its own.
//!
//! The engines, [`ShareGroupEngine`] (a group's membership) and
//! [`SharePartition`] (a share-partition's delivery state), are
//! `weir_coord::share`'s; this module hosts them: the share group
//! coordinator, the share-partition leader, the persistence of
//! share-partition state in `__share_group_state`, and dead letters.

pub mod dead_letters;
pub mod group_coordinator;
mod keyed_turns;
pub(crate) mod leader;
pub(crate) mod persister;
pub mod state_coordinator;

pub use weir_coord::share::{
    log_records, simple_assignment, AcknowledgeType, AcquiredRange, DeadLetter, DeadLetterReason,
    InFlightCounts, LogRecord, PersistedState, RecordState, SessionChange, ShareError,
    ShareGroupConfig, ShareGroupEngine, ShareGroupError, ShareGroupState, ShareHeartbeat,
    ShareHeartbeatResponse, ShareMember, ShareMemberMetadata, ShareOutput, SharePartition,
    SharePartitionConfig, ShareRecord, ShareSessionError, ShareSessions, StateBatch,
    TopicIdPartition, DELIVER_AT_HEADER, FINAL_SESSION_EPOCH, LEAVE_GROUP_MEMBER_EPOCH,
    OPEN_SESSION_EPOCH,
};
