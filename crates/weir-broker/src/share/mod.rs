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

use std::sync::Arc;

use weir_client::SecurityConfig;
use weir_meta::MetadataImage;

use crate::config::groups::ShareSettings;
use crate::coordinator::Environment;
use crate::metrics::Metrics;
use crate::partition::Partition;
use crate::replica::manager::NotServed;

/// What the hosts of share-partitions may reach of the broker they run in,
/// and nothing more: the coordinator environment, the partitions led here,
/// the local share-state coordinator, how to reach other brokers, and the
/// metrics they count into. The broker implements it.
pub(crate) trait ShareHost: Send + Sync + 'static {
    fn environment(&self) -> &Environment;

    /// The partition, if this node leads it.
    fn leader_partition(&self, topic: &str, index: i32) -> Result<Arc<Partition>, NotServed>;

    /// The share settings of `group`: the broker's, with the group's own
    /// configs over them.
    fn share_settings(&self, group: &str) -> ShareSettings;

    /// The share-state coordinator of the `__share_group_state`
    /// partitions led here.
    fn share_state(&self) -> &state_coordinator::ShareStateStore;

    /// The share-partitions led here.
    fn share_partitions(&self) -> &leader::SharePartitions;

    /// Asks for `__share_group_state` to be created, if it is not.
    fn create_share_state_topic(&self);

    /// How this node connects to other brokers.
    fn inter_broker_security(&self) -> &SecurityConfig;

    fn metrics(&self) -> &Metrics;

    fn node_id(&self) -> i32 {
        self.environment().node_id()
    }

    fn now_ms(&self) -> i64 {
        self.environment().now_ms()
    }

    fn image(&self) -> Arc<MetadataImage> {
        self.environment().image()
    }
}

pub use weir_coord::share::{
    log_records, simple_assignment, AcknowledgeType, AcquiredRange, DeadLetter, DeadLetterReason,
    InFlightCounts, LogRecord, PersistedState, RecordState, SessionChange, ShareError,
    ShareGroupConfig, ShareGroupEngine, ShareGroupError, ShareGroupState, ShareHeartbeat,
    ShareHeartbeatResponse, ShareMember, ShareMemberMetadata, ShareOutput, SharePartition,
    SharePartitionConfig, ShareRecord, ShareSessionError, ShareSessions, StateBatch,
    TopicIdPartition, DELIVER_AT_HEADER, FINAL_SESSION_EPOCH, LEAVE_GROUP_MEMBER_EPOCH,
    OPEN_SESSION_EPOCH,
};
