//! Share groups (KIP-932): queues on the log. Records of a topic partition
//! are delivered to any member of a share group, one at a time, and each is
//! acknowledged on its own.
//!
//! [`SharePartition`] is the per-partition delivery state machine; the
//! group membership, the ShareFetch/ShareAcknowledge APIs and the
//! persistence of share-partition state in `__share_group_state` build on
//! it.

mod partition;

#[cfg(test)]
mod tests;

pub use partition::{
    AcknowledgeType, AcquiredRange, DeadLetter, DeadLetterReason, LogRecord, PersistedState,
    RecordState, ShareError, SharePartition, SharePartitionConfig, StateBatch,
};
