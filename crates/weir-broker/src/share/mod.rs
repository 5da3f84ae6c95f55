//! Share groups (KIP-932): queues on the log. Records of a topic partition
//! are delivered to any member of a share group, one at a time, and each is
//! acknowledged on its own.
//!
//! The engines, [`ShareGroupEngine`] (a group's membership) and
//! [`SharePartition`] (a share-partition's delivery state), are
//! `weir_coord::share`'s; this module hosts the share-partitions: their
//! leader, the persistence of their state in `__share_group_state`, and
//! dead letters. The groups' membership is hosted with the other groups of
//! `__consumer_offsets` (`groups::share`).

pub mod dead_letters;
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
