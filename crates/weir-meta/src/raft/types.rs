//! The openraft type configuration of the controller quorum, and the
//! serializable result of applying one entry.
//!
//! Nothing here leaves the `raft` module: the rest of the crate, and the
//! broker, see only [`Command`], [`Applied`] and [`MetaError`].

use std::fmt;
use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::command::{Applied, Command};
use crate::error::MetaError;

openraft::declare_raft_types!(
    /// The controller quorum's Raft types: node ids are `u64`, a node is
    /// known by its controller address, entries carry [`Command`]s, and
    /// applying one yields an [`ApplyResult`].
    pub(crate) TypeConfig:
        D = Command,
        R = ApplyResult,
        NodeId = u64,
        Node = ControllerNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A Raft node id.
pub(crate) type NodeId = u64;
/// A log entry of the controller quorum.
pub(crate) type Entry = openraft::Entry<TypeConfig>;
/// A log id (term and index).
pub(crate) type LogId = openraft::LogId<NodeId>;
/// A vote.
pub(crate) type Vote = openraft::Vote<NodeId>;
/// What the log and the state machine return when the disk fails.
pub(crate) type StorageError = openraft::StorageError<NodeId>;
/// The membership (voters, learners and their addresses) with the id of the
/// entry that set it.
pub(crate) type StoredMembership = openraft::StoredMembership<NodeId, ControllerNode>;
/// The description of a snapshot.
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<NodeId, ControllerNode>;
/// A snapshot: its description and its bytes.
pub(crate) type Snapshot = openraft::Snapshot<TypeConfig>;
/// The Raft handle.
pub(crate) type Raft = openraft::Raft<TypeConfig>;

/// A member of the controller quorum as Raft knows it: where its
/// controller listener is (`host:port`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ControllerNode {
    /// The controller listener, `host:port`.
    pub(crate) addr: String,
}

impl fmt::Display for ControllerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addr)
    }
}

/// The result of applying one committed entry. A command that fails
/// validation is still applied (the log position is consumed, the image is
/// unchanged); its error travels back to the proposer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApplyResult(pub(crate) Result<Applied, Rejection>);

/// What the leader did with a proposed command: the answer to a local
/// write, and to one forwarded over the controller RPC.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// Committed and applied on the leader at this Raft log index, with
    /// this result (a rejection consumes its log position too).
    Committed {
        index: u64,
        result: Result<Applied, Rejection>,
    },
    /// The node is not the leader; nothing was proposed, so trying again
    /// elsewhere is safe.
    NotLeader,
    /// Raft stopped or refused; the command may or may not be committed.
    Unavailable(String),
    /// Not committed within the leader's submit timeout; it may still be.
    Timeout,
    /// Refused before it was proposed: the sender may not make the change.
    Denied(String),
}

/// What the leader did with a node's request to join as a learner.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) enum JoinOutcome {
    /// The node is a learner with this address, in a membership entry
    /// committed at or before `index`: once the learner has applied
    /// `index`, its image holds everything the leader had applied.
    Joined { index: u64 },
    /// The node asked is not the leader; nothing changed. The leader it
    /// knows of (id, controller address), if any.
    NotLeader { leader: Option<(u64, String)> },
    /// Refused for good: the id is a voter.
    Refused(String),
    /// Not done now (a membership change in progress, Raft stopping, no
    /// answer in time); asking again may succeed.
    Unavailable(String),
}

/// A [`MetaError`] from validation, in a form that serializes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rejection {
    TopicAlreadyExists(String),
    UnknownTopic(String),
    InvalidTopicName {
        name: String,
        reason: String,
    },
    InvalidPartitions(String),
    InvalidReplicationFactor(String),
    InvalidConfig {
        key: String,
        reason: String,
    },
    InvalidRequest(String),
    FencedLeaderEpoch(String),
    InvalidUpdateVersion(String),
    InvalidReplicaAssignment(String),
    NoReassignmentInProgress(String),
    ProducerIdsExhausted {
        next: i64,
        count: i64,
    },
    /// Anything else (apply never produces storage errors): the message.
    Other(String),
}

impl From<&MetaError> for Rejection {
    fn from(e: &MetaError) -> Self {
        match e {
            MetaError::TopicAlreadyExists(n) => Rejection::TopicAlreadyExists(n.clone()),
            MetaError::UnknownTopic(n) => Rejection::UnknownTopic(n.clone()),
            MetaError::InvalidTopicName { name, reason } => Rejection::InvalidTopicName {
                name: name.clone(),
                reason: reason.clone(),
            },
            MetaError::InvalidPartitions(m) => Rejection::InvalidPartitions(m.clone()),
            MetaError::InvalidReplicationFactor(m) => {
                Rejection::InvalidReplicationFactor(m.clone())
            }
            MetaError::InvalidConfig { key, reason } => Rejection::InvalidConfig {
                key: key.clone(),
                reason: reason.clone(),
            },
            MetaError::InvalidRequest(m) => Rejection::InvalidRequest(m.clone()),
            MetaError::FencedLeaderEpoch(m) => Rejection::FencedLeaderEpoch(m.clone()),
            MetaError::InvalidReplicaAssignment(m) => {
                Rejection::InvalidReplicaAssignment(m.clone())
            }
            MetaError::NoReassignmentInProgress(m) => {
                Rejection::NoReassignmentInProgress(m.clone())
            }
            MetaError::InvalidUpdateVersion(m) => Rejection::InvalidUpdateVersion(m.clone()),
            MetaError::ProducerIdsExhausted { next, count } => Rejection::ProducerIdsExhausted {
                next: *next,
                count: *count,
            },
            other => Rejection::Other(other.to_string()),
        }
    }
}

impl From<Rejection> for MetaError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::TopicAlreadyExists(n) => MetaError::TopicAlreadyExists(n),
            Rejection::UnknownTopic(n) => MetaError::UnknownTopic(n),
            Rejection::InvalidTopicName { name, reason } => {
                MetaError::InvalidTopicName { name, reason }
            }
            Rejection::InvalidPartitions(m) => MetaError::InvalidPartitions(m),
            Rejection::InvalidReplicationFactor(m) => MetaError::InvalidReplicationFactor(m),
            Rejection::InvalidConfig { key, reason } => MetaError::InvalidConfig { key, reason },
            Rejection::InvalidRequest(m) | Rejection::Other(m) => MetaError::InvalidRequest(m),
            Rejection::FencedLeaderEpoch(m) => MetaError::FencedLeaderEpoch(m),
            Rejection::InvalidReplicaAssignment(m) => MetaError::InvalidReplicaAssignment(m),
            Rejection::NoReassignmentInProgress(m) => MetaError::NoReassignmentInProgress(m),
            Rejection::InvalidUpdateVersion(m) => MetaError::InvalidUpdateVersion(m),
            Rejection::ProducerIdsExhausted { next, count } => {
                MetaError::ProducerIdsExhausted { next, count }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejection_round_trip_keeps_code_and_message() {
        let errors = [
            MetaError::TopicAlreadyExists("a".into()),
            MetaError::UnknownTopic("b".into()),
            MetaError::InvalidTopicName {
                name: "..".into(),
                reason: "bad".into(),
            },
            MetaError::InvalidPartitions("p".into()),
            MetaError::InvalidReplicationFactor("r".into()),
            MetaError::InvalidConfig {
                key: "k".into(),
                reason: "v".into(),
            },
            MetaError::InvalidRequest("x".into()),
            MetaError::ProducerIdsExhausted { next: 5, count: 7 },
        ];
        for e in errors {
            let wire = serde_json::to_string(&ApplyResult(Err(Rejection::from(&e)))).unwrap();
            let back: ApplyResult = serde_json::from_str(&wire).unwrap();
            let back = MetaError::from(back.0.unwrap_err());
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.kafka_error_code(), e.kafka_error_code());
        }
    }
}
