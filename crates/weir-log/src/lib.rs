//! `weir-log`: the partition log of Weir.
//!
//! A partition is an append-only sequence of Kafka record batches (format
//! v2) with monotonically increasing offsets, stored as segments on disk:
//!
//! - [`batch`] reads and validates batch headers without decompressing;
//! - [`Log`] appends (assigning offsets), reads by offset or timestamp,
//!   rolls segments, recovers after a crash, flushes with group commit,
//!   enforces retention and truncates for replication;
//! - [`Cleaner`] compacts logs whose `cleanup.policy` includes `compact`,
//!   keeping the latest record of each key;
//! - [`storage`] is the narrow file interface all I/O goes through, and
//!   [`sim`] an in-memory one for crash and fault tests.
//!
//! The on-disk format and the durability guarantees are specified in
//! `DESIGN.md` next to this crate.

pub mod batch;
pub mod checkpoint;
mod cleaner;
mod config;
mod epoch;
mod error;
mod fd_cache;
mod index;
mod log;
mod recent;
pub mod records;
pub mod sealed;
mod segment;
pub mod sim;
mod slice;
pub mod storage;
pub mod testing;
mod txn;

pub use cleaner::{CleanOutcome, CleanStats, Cleanable, Cleaner, CleanerConfig};
pub use config::{CleanupPolicy, Clock, LogConfig, ManualClock, SystemClock, TimestampType};
pub use epoch::{
    format_checkpoint, parse_checkpoint, EpochEntry, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET,
};
pub use error::LogError;
pub use log::{
    AppendInfo, CorruptBatch, DirFault, FailureListener, Log, RetentionOutcome, TimestampOffset,
    UnsyncedLog, CLEANER_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
};
pub use slice::LogSlice;
pub use txn::{AbortedTxn, OpenTxn};
