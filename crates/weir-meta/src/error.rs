//! Errors of the metadata state machine and of its files.

use std::io;
use std::path::{Path, PathBuf};

/// Why a command was rejected, or why the files could not be read or
/// written.
///
/// The validation variants carry a message worded like Kafka's, ready to be
/// sent to a client as the error message of a response; use
/// [`MetaError::kafka_error_code`] for the matching protocol error code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    /// A partition change from a leader that is not (or no longer) the
    /// leader, or from an older leader epoch.
    #[error("{0}")]
    FencedLeaderEpoch(String),
    /// A partition change computed from a partition state that has changed
    /// since.
    #[error("{0}")]
    InvalidUpdateVersion(String),
    /// A manual replica assignment (of a new topic, new partitions or a
    /// reassignment) that cannot be used: a replica list that is empty,
    /// repeats a broker, names an unregistered or fenced broker, or whose
    /// length differs from the other partitions'.
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// Cancelling a reassignment that is not in progress.
    #[error("{0}")]
    NoReassignmentInProgress(String),
    /// `CreateTopic` for a name that is already taken.
    #[error("Topic '{0}' already exists.")]
    TopicAlreadyExists(String),
    /// The command names a topic that does not exist.
    #[error("Topic '{0}' does not exist.")]
    UnknownTopic(String),
    /// The topic name breaks Kafka's naming rules, or collides with an
    /// existing name once '.' and '_' are considered equal.
    #[error("{reason}")]
    InvalidTopicName {
        /// The rejected name.
        name: String,
        /// What is wrong with it, in Kafka's words.
        reason: String,
    },
    /// A partition count that is not positive, or that would not grow the
    /// topic.
    #[error("{0}")]
    InvalidPartitions(String),
    /// A replication factor the live brokers cannot hold when placing
    /// replicas, or one that is not positive.
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// An unknown topic config name or an invalid value.
    #[error("{reason}")]
    InvalidConfig {
        /// The config name.
        key: String,
        /// A complete sentence, e.g. "Invalid value -2 for configuration
        /// retention.ms: Value must be at least -1".
        reason: String,
    },
    /// A command that is malformed in a way the other variants do not cover
    /// (a nil or duplicate topic id, a non-positive producer id count, a key
    /// both set and deleted, an invalid broker registration).
    #[error("{0}")]
    InvalidRequest(String),
    /// The controller refused the command: the principal of the peer
    /// that sent it may not make the change (see `raft/permission.rs`).
    #[error("{0}")]
    ClusterAuthorizationFailed(String),
    /// `AllocateProducerIds` would go past the largest producer id.
    #[error(
        "cannot allocate {count} producer ids: the next producer id is {next} and ids end at {}",
        i64::MAX
    )]
    ProducerIdsExhausted {
        /// The next producer id the image would hand out.
        next: i64,
        /// How many were asked for.
        count: i64,
    },
    /// A file operation failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A stored file failed validation; the reason names the byte position.
    #[error("corrupt metadata file {}: {reason}", path.display())]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong and where (byte offset, record number).
        reason: String,
    },
    /// An earlier write or fsync of the Raft log failed, so what is on
    /// disk is uncertain; the log refuses further writes until the
    /// controller restarts (which runs recovery).
    #[error("metadata log in {} is offline after an I/O failure ({reason}); restart the controller", dir.display())]
    Offline {
        /// The log's directory.
        dir: PathBuf,
        /// The failure that took it offline.
        reason: String,
    },
}

impl MetaError {
    /// The Kafka protocol error code a broker should answer with.
    ///
    /// Storage failures map to `UNKNOWN_SERVER_ERROR` (-1): the client did
    /// nothing wrong and may retry.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            MetaError::UnknownTopic(_) => 3, // UNKNOWN_TOPIC_OR_PARTITION
            MetaError::InvalidTopicName { .. } => 17, // INVALID_TOPIC_EXCEPTION
            MetaError::TopicAlreadyExists(_) => 36, // TOPIC_ALREADY_EXISTS
            MetaError::InvalidPartitions(_) => 37, // INVALID_PARTITIONS
            MetaError::InvalidReplicationFactor(_) => 38, // INVALID_REPLICATION_FACTOR
            MetaError::InvalidConfig { .. } => 40, // INVALID_CONFIG
            MetaError::InvalidRequest(_) => 42, // INVALID_REQUEST
            MetaError::FencedLeaderEpoch(_) => 74, // FENCED_LEADER_EPOCH
            MetaError::InvalidReplicaAssignment(_) => 39, // INVALID_REPLICA_ASSIGNMENT
            MetaError::NoReassignmentInProgress(_) => 85, // NO_REASSIGNMENT_IN_PROGRESS
            MetaError::InvalidUpdateVersion(_) => 108, // INVALID_UPDATE_VERSION
            MetaError::ClusterAuthorizationFailed(_) => 31, // CLUSTER_AUTHORIZATION_FAILED
            MetaError::ProducerIdsExhausted { .. }
            | MetaError::Io { .. }
            | MetaError::Corrupt { .. }
            | MetaError::Offline { .. } => -1, // UNKNOWN_SERVER_ERROR
        }
    }

    /// True for failures of the disk rather than of the command.
    pub fn is_storage_error(&self) -> bool {
        matches!(
            self,
            MetaError::Io { .. } | MetaError::Corrupt { .. } | MetaError::Offline { .. }
        )
    }
}

/// Attaches a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn context(self, path: &Path) -> Result<T, MetaError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, path: &Path) -> Result<T, MetaError> {
        self.map_err(|source| MetaError::Io {
            path: path.to_owned(),
            source,
        })
    }
}
