//! The group metadata Kafka keeps in `__consumer_offsets` (GroupMetadataValue),
//! as plain data: written on every completed generation, loaded back on failover.

/// The persisted part of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupSnapshot {
    pub protocol_type: Option<String>,
    pub generation_id: i32,
    /// The selected protocol; `None` when the group is empty.
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    /// When the group last changed state (Kafka's currentStateTimestamp).
    pub current_state_timestamp_ms: Option<u64>,
    pub members: Vec<MemberSnapshot>,
}

/// One member in a [`GroupSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSnapshot {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the selected protocol (its subscription).
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}
