//! Errors of the partition log.

use std::io;
use std::path::{Path, PathBuf};

use crate::batch::BatchError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The records handed to an append are not valid batches.
    #[error(transparent)]
    InvalidBatch(#[from] BatchError),
    #[error("no records to append")]
    EmptyAppend,
    /// A replicated append whose offsets do not continue the log.
    #[error("batch at offset {base_offset} does not follow the log end offset {log_end_offset}")]
    NonContiguous {
        base_offset: i64,
        log_end_offset: u64,
    },
    #[error("offset {offset} is outside the log [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },
    /// Stored data failed validation; it is never served.
    #[error("corrupt data in {} at byte {position}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An earlier I/O failure left the log in a state only a reopen (which
    /// runs recovery) can repair, or its directory failed; reads still
    /// work, appends do not.
    #[error("log {} is offline after an I/O failure: {reason}", dir.display())]
    Offline { dir: PathBuf, reason: String },
    #[error("invalid log config: {0}")]
    InvalidConfig(String),
}

impl LogError {
    /// True for failures of the disk rather than of the caller's input.
    pub fn is_storage_error(&self) -> bool {
        matches!(
            self,
            LogError::Io { .. } | LogError::Offline { .. } | LogError::Corrupt { .. }
        )
    }
}

/// Attaches a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn context(self, path: &Path) -> Result<T, LogError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, path: &Path) -> Result<T, LogError> {
        self.map_err(|source| LogError::Io {
            path: path.to_owned(),
            source,
        })
    }
}
