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
    /// One past the highest offset whose copy finished; 0 for none.
    copied_below: AtomicU64,
}

impl Default for RemoteTier {
    fn default() -> Self {
        Self {
            tiered: AtomicBool::new(false),
            log_start: AtomicU64::new(u64::MAX),
            copied_below: AtomicU64::new(0),
        }
    }
}

impl RemoteTier {
    /// Takes what the metadata says now.
    pub fn set(&self, tiered: bool, log_start: Option<u64>, copied_below: u64) {
        self.tiered.store(tiered, Ordering::Release);
        self.log_start
            .store(log_start.unwrap_or(u64::MAX), Ordering::Release);
        self.copied_below.store(copied_below, Ordering::Release);
    }

    /// Whether the partition copies to, and reads from, the remote tier.
    pub fn is_tiered(&self) -> bool {
        self.tiered.load(Ordering::Acquire)
    }

    /// The remote log start offset, `None` without remote data.
    pub fn log_start(&self) -> Option<u64> {
        Some(self.log_start.load(Ordering::Acquire)).filter(|&start| start != u64::MAX)
    }

    /// One past the highest offset copied to the remote tier (0: none):
    /// local segments below it may go by local retention.
    pub fn copied_below(&self) -> u64 {
        self.copied_below.load(Ordering::Acquire)
    }
}
