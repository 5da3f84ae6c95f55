//! The errors the group membership protocol answers with, as Kafka error codes.

/// Why a group request was refused. Each variant is one Kafka error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum GroupError {
    /// The group is dead (unloaded or deleted): the client should find the coordinator again.
    #[error("the group coordinator is not available; find the coordinator again and retry")]
    CoordinatorNotAvailable,
    /// This broker no longer hosts the group (its partition moved).
    #[error("this broker is not the coordinator of the group; find the coordinator again")]
    NotCoordinator,
    /// The request names a generation other than the group's current one.
    #[error("the generation id is not the group's current generation; rejoin the group")]
    IllegalGeneration,
    /// The protocol type (or every protocol) of the member does not match the group's.
    #[error("the member's protocol type or protocols do not match those of the group")]
    InconsistentGroupProtocol,
    /// The member id is not a member of the group.
    #[error("the member id is not known to the group; rejoin with an empty member id")]
    UnknownMemberId,
    /// The session timeout is outside the broker's allowed range.
    #[error(
        "the session timeout is outside group.min.session.timeout.ms..group.max.session.timeout.ms"
    )]
    InvalidSessionTimeout,
    /// The group is rebalancing: the member should rejoin.
    #[error("the group is rebalancing; rejoin the group")]
    RebalanceInProgress,
    /// A new dynamic member must rejoin with the member id handed back (KIP-394).
    #[error("the member must rejoin with the member id given in this response")]
    MemberIdRequired,
    /// The group already has `group.max.size` members.
    #[error("the group has reached group.max.size members")]
    GroupMaxSizeReached,
    /// Another member with the same group.instance.id has replaced this one.
    #[error("another member with the same group.instance.id has replaced this member")]
    FencedInstanceId,
}

impl GroupError {
    /// Kafka's error code for this error.
    pub fn code(self) -> i16 {
        match self {
            GroupError::CoordinatorNotAvailable => 15,
            GroupError::NotCoordinator => 16,
            GroupError::IllegalGeneration => 22,
            GroupError::InconsistentGroupProtocol => 23,
            GroupError::UnknownMemberId => 25,
            GroupError::InvalidSessionTimeout => 26,
            GroupError::RebalanceInProgress => 27,
            GroupError::MemberIdRequired => 79,
            GroupError::GroupMaxSizeReached => 81,
            GroupError::FencedInstanceId => 82,
        }
    }
}

/// The Kafka error code of an optional error: 0 (NONE) when there is none.
pub fn error_code(error: Option<GroupError>) -> i16 {
    error.map_or(0, GroupError::code)
}
