//! `replica.selector.class`: which of Kafka's replica selectors (KIP-392)
//! a leader uses to send consumers to another replica. What a selector
//! picks is `replica::selector`'s.

/// `replica.selector.class`: how a leader picks a consumer's read replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicaSelector {
    /// No selector (Kafka's default, or its `LeaderSelector`): consumers
    /// read from the leader.
    #[default]
    Leader,
    /// Kafka's `RackAwareReplicaSelector`.
    RackAware,
}

/// Kafka's rack-aware selector.
pub const RACK_AWARE_REPLICA_SELECTOR: &str =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";
/// Kafka's selector that always names the leader.
pub const LEADER_SELECTOR: &str = "org.apache.kafka.common.replica.LeaderSelector";

impl ReplicaSelector {
    /// The selector a `replica.selector.class` value names (empty: none).
    pub fn from_class_name(name: &str) -> Result<Self, String> {
        match name.trim() {
            "" | LEADER_SELECTOR => Ok(Self::Leader),
            RACK_AWARE_REPLICA_SELECTOR => Ok(Self::RackAware),
            other => Err(format!(
                "Class {other} cannot be found: Weir implements the replica selectors \
                 {RACK_AWARE_REPLICA_SELECTOR} and {LEADER_SELECTOR} (or none, the default)"
            )),
        }
    }

    /// Whether consumers may be sent to another replica at all.
    pub fn is_leader_only(self) -> bool {
        self == Self::Leader
    }
}
