//! What the metadata says of a partition's remote tier, kept with the
//! partition so that reads and retention need no image.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A partition's remote tier as last reconciled from the metadata.
#[derive(Debug)]
pub struct RemoteTier {
    /// `remote.storage.enable` on a broker with tiered storage.
    tiered: AtomicBool,
    /// The remote log start offset; `u64::MAX` without remote data.
    log_start: AtomicU64,
    /// Below it, every offset is in the remote tier or deleted from both.
    copied_below: AtomicU64,
    /// Below it, offsets are deleted from both tiers (retention,
    /// DeleteRecords).
    deleted_below: AtomicU64,
}

impl Default for RemoteTier {
    fn default() -> Self {
        Self {
            tiered: AtomicBool::new(false),
            log_start: AtomicU64::new(u64::MAX),
            copied_below: AtomicU64::new(0),
            deleted_below: AtomicU64::new(0),
        }
    }
}

impl RemoteTier {
    /// Takes what the metadata says of the partition's remote log now.
    pub fn set(&self, tiered: bool, remote: Option<&weir_meta::RemoteLog>) {
        let log_start = remote.and_then(|r| r.start_offset());
        let deleted_below = remote.map_or(0, |r| r.log_start_offset);
        let copied_below = remote
            .and_then(|r| r.highest_copied_offset())
            .map_or(0, |end| end + 1)
            .max(deleted_below);
        self.tiered.store(tiered, Ordering::Release);
        self.log_start
            .store(log_start.unwrap_or(u64::MAX), Ordering::Release);
        self.copied_below.store(copied_below, Ordering::Release);
        self.deleted_below.store(deleted_below, Ordering::Release);
    }

    /// Whether the partition copies to, and reads from, the remote tier.
    pub fn is_tiered(&self) -> bool {
        self.tiered.load(Ordering::Acquire)
    }

    /// The remote log start offset, `None` without remote data.
    pub fn log_start(&self) -> Option<u64> {
        Some(self.log_start.load(Ordering::Acquire)).filter(|&start| start != u64::MAX)
    }

    /// Below it every offset is copied to the remote tier or deleted from
    /// both (0: none): local segments below it may go by local retention.
    pub fn copied_below(&self) -> u64 {
        self.copied_below.load(Ordering::Acquire)
    }

    /// Below it offsets are deleted from both tiers: the log start that
    /// remote retention and DeleteRecords set.
    pub fn deleted_below(&self) -> u64 {
        self.deleted_below.load(Ordering::Acquire)
    }
}
