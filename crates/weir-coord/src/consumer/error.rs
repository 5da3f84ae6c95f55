//! The errors of the consumer group protocol, as Kafka error codes.

/// Why a ConsumerGroupHeartbeat (or an offset commit checked against the
/// group) was refused. Each variant is one Kafka error code; nothing in the
/// group changes when a request is refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ConsumerGroupError {
    /// The request is malformed (bad first heartbeat, bad epoch, empty ids).
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    /// The member asked for a server assignor the broker does not offer.
    #[error("the server assignor is not one of group.consumer.assignors")]
    UnsupportedAssignor,
    /// A heartbeat with a non-zero epoch (or a leave) for a group that does
    /// not exist.
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// The member id is not a member of the group (it was fenced or left).
    #[error("the member id is not known to the group; rejoin with member epoch 0")]
    UnknownMemberId,
    /// The member's epoch is not one the coordinator accepts: it must give up
    /// its partitions and rejoin with epoch 0.
    #[error("the member epoch is fenced; give up all partitions and rejoin with epoch 0")]
    FencedMemberEpoch,
    /// Another member with the same group.instance.id replaced this one.
    #[error("another member with the same group.instance.id replaced this member")]
    FencedInstanceId,
    /// The group.instance.id is still held by a member that did not leave
    /// (with epoch -2) first.
    #[error("the group.instance.id is still used by another member of the group")]
    UnreleasedInstanceId,
    /// The group already has group.consumer.max.size members.
    #[error("the group has reached group.consumer.max.size members")]
    GroupMaxSizeReached,
    /// An offset commit or fetch with an epoch other than the member's.
    #[error("the member epoch is stale; retry with the epoch of the last heartbeat response")]
    StaleMemberEpoch,
    /// The group cannot be deleted while it has members.
    #[error("the group is not empty")]
    NonEmptyGroup,
    /// A consumer-protocol member committed offsets below OffsetCommit v9.
    #[error("members of the consumer protocol commit offsets with OffsetCommit v9 or later")]
    UnsupportedVersion,
    /// A classic member's generation is not its member epoch.
    #[error("the generation id is not the member's current one")]
    IllegalGeneration,
    /// A classic member's protocol type or protocols do not fit the group.
    #[error("the member's protocol type or protocols are not supported by the group")]
    InconsistentGroupProtocol,
    /// A classic member must rejoin (JoinGroup) to catch up.
    #[error("the group is rebalancing; rejoin")]
    RebalanceInProgress,
    /// A classic member without a member id: rejoin with this one.
    #[error("a member id is required; rejoin with the one given")]
    MemberIdRequired(String),
}

impl ConsumerGroupError {
    /// Kafka's error code.
    pub fn code(&self) -> i16 {
        match self {
            ConsumerGroupError::IllegalGeneration => 22,
            ConsumerGroupError::InconsistentGroupProtocol => 23,
            ConsumerGroupError::UnknownMemberId => 25,
            ConsumerGroupError::UnsupportedVersion => 35,
            ConsumerGroupError::RebalanceInProgress => 27,
            ConsumerGroupError::MemberIdRequired(_) => 79,
            ConsumerGroupError::InvalidRequest(_) => 42,
            ConsumerGroupError::NonEmptyGroup => 68,
            ConsumerGroupError::GroupIdNotFound => 69,
            ConsumerGroupError::GroupMaxSizeReached => 81,
            ConsumerGroupError::FencedInstanceId => 82,
            ConsumerGroupError::FencedMemberEpoch => 110,
            ConsumerGroupError::UnreleasedInstanceId => 111,
            ConsumerGroupError::UnsupportedAssignor => 112,
            ConsumerGroupError::StaleMemberEpoch => 113,
        }
    }

    /// The error message for the response's ErrorMessage field.
    pub fn message(&self) -> String {
        self.to_string()
    }
}
