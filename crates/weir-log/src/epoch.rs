//! The leader-epoch cache: for each leader epoch, the first offset written in
//! it (KIP-101), persisted in `leader-epoch-checkpoint` in Kafka's text format.
//! A new epoch is written to the file before the recovery point passes its
//! first offset, not at once (as Kafka does since KAFKA-15046): the first
//! append of every partition after a change of leader costs no fsync, and
//! recovery re-derives the epochs of the batches it scans.
//!
//!
//! ```text
//! 0            version
//! 2            number of entries
//! 0 0          epoch start-offset
//! 3 1500
//! ```

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::LogError;
use crate::storage::Storage;

pub(crate) const FILE_NAME: &str = "leader-epoch-checkpoint";

/// Kafka's "no epoch" and "no offset" answers to OffsetForLeaderEpoch.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: u64,
}

/// The checkpoint's text for `entries`: Kafka's format, also that of the
/// leader-epoch checkpoint a segment's remote copy carries.
pub fn format_checkpoint(entries: &[EpochEntry]) -> String {
    let mut text = format!("0\n{}\n", entries.len());
    for e in entries {
        text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    text
}

/// The entries of a checkpoint's text, or what is wrong with it.
pub fn parse_checkpoint(text: &str) -> Result<Vec<EpochEntry>, &'static str> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err("unknown version");
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("bad entry count")?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let line = lines.next().ok_or("missing entry")?;
        let mut fields = line.split_whitespace();
        let (Some(epoch), Some(start_offset)) = (
            fields.next().and_then(|f| f.parse().ok()),
            fields.next().and_then(|f| f.parse().ok()),
        ) else {
            return Err("bad entry");
        };
        entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    Ok(entries)
}

pub(crate) struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
    /// Entries were assigned since the file was last written.
    unpersisted: bool,
}

impl LeaderEpochCache {
    pub(crate) fn load(storage: &dyn Storage, dir: &Path) -> Result<Self, LogError> {
        let path = dir.join(FILE_NAME);
        let entries = match checkpoint::read(storage, &path)? {
            Some(text) => parse_checkpoint(&text).map_err(|reason| LogError::Corrupt {
                path: path.clone(),
                position: 0,
                reason: reason.to_owned(),
            })?,
            None => Vec::new(),
        };
        Ok(Self {
            path,
            entries,
            unpersisted: false,
        })
    }

    /// A cache of the epochs the log's batches carry, for a checkpoint
    /// file that could not be read: `starts` are the first offset of each
    /// run of batches with one leader epoch, in log order. It is written
    /// at once, replacing the damaged file.
    pub(crate) fn rebuilt(
        storage: &dyn Storage,
        dir: &Path,
        starts: impl IntoIterator<Item = EpochEntry>,
    ) -> Result<Self, LogError> {
        let mut cache = Self {
            path: dir.join(FILE_NAME),
            entries: Vec::new(),
            unpersisted: false,
        };
        for start in starts {
            cache.assign(start.epoch, start.start_offset);
        }
        cache.persist(storage)?;
        Ok(cache)
    }

    fn persist(&mut self, storage: &dyn Storage) -> Result<(), LogError> {
        checkpoint::write(storage, &self.path, &format_checkpoint(&self.entries))?;
        self.unpersisted = false;
        Ok(())
    }

    /// Writes the file if epochs were assigned since it was last written.
    pub(crate) fn persist_assigned(&mut self, storage: &dyn Storage) -> Result<(), LogError> {
        if self.unpersisted {
            self.persist(storage)?;
        }
        Ok(())
    }

    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than the
    /// latest epoch known; the file is written by
    /// [`persist_assigned`](Self::persist_assigned).
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: u64) {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return;
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.unpersisted = true;
    }

    /// The end offset of the largest epoch at or below `requested`, as
    /// OffsetForLeaderEpoch answers it: `(epoch, end offset)`.
    pub(crate) fn end_offset_for(&self, requested: i32, log_end_offset: u64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if requested == UNDEFINED_EPOCH {
            return undefined;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset as i64);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return undefined;
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset as i64),
            None => (requested, higher.start_offset as i64),
        }
    }

    /// Forgets epochs that start at or after `offset` (the log was truncated).
    pub(crate) fn truncate_from_end(
        &mut self,
        storage: &dyn Storage,
        offset: u64,
    ) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < offset);
        if self.entries.len() != before {
            self.persist(storage)?;
        }
        Ok(())
    }

    /// Moves the start of the log to `offset`: epochs wholly before it go, and
    /// the epoch that covers it now starts there.
    pub(crate) fn truncate_from_start(
        &mut self,
        storage: &dyn Storage,
        offset: u64,
    ) -> Result<(), LogError> {
        let covering = self.entries.iter().rposition(|e| e.start_offset <= offset);
        let Some(covering) = covering else {
            return Ok(());
        };
        if covering == 0 && self.entries[0].start_offset == offset {
            return Ok(());
        }
        self.entries.drain(..covering);
        self.entries[0].start_offset = offset;
        self.persist(storage)
    }

    /// Replaces every entry with `entries` (a replica restarting its log
    /// from a copy in remote storage) and writes the file.
    pub(crate) fn restore(
        &mut self,
        storage: &dyn Storage,
        entries: Vec<EpochEntry>,
    ) -> Result<(), LogError> {
        self.entries = entries;
        self.persist(storage)
    }

    /// Drops every entry (the log restarts empty).
    pub(crate) fn clear(&mut self, storage: &dyn Storage) -> Result<(), LogError> {
        if !self.entries.is_empty() {
            self.entries.clear();
            self.persist(storage)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimStorage;

    fn cache(entries: &[(i32, u64)]) -> (SimStorage, LeaderEpochCache) {
        let storage = SimStorage::new();
        storage.create_dir_all(Path::new("/p")).unwrap();
        let mut cache = LeaderEpochCache::load(&storage, Path::new("/p")).unwrap();
        for &(epoch, offset) in entries {
            cache.assign(epoch, offset);
        }
        (storage, cache)
    }

    #[test]
    fn end_offset_for_epoch_follows_kafka() {
        let (_, cache) = cache(&[(1, 0), (3, 100), (5, 250)]);
        let leo = 400;
        // (requested, expected) — table from KIP-101/KIP-279 semantics.
        let table = [
            (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),
            (0, (0, 0)),   // before the first epoch: its start
            (1, (1, 100)), // ends where epoch 3 starts
            (2, (1, 100)), // unknown epoch: the floor epoch's end
            (3, (3, 250)),
            (4, (3, 250)),
            (5, (5, 400)), // the latest epoch ends at the log end
            (6, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),
        ];
        for (requested, expected) in table {
            assert_eq!(
                cache.end_offset_for(requested, leo),
                expected,
                "epoch {requested}"
            );
        }
    }

    #[test]
    fn assign_ignores_old_epochs_and_persists_when_asked() {
        let (storage, mut cache) = cache(&[(2, 10)]);
        cache.assign(1, 20);
        cache.assign(2, 30);
        cache.assign(4, 40);
        let load = || LeaderEpochCache::load(&storage, Path::new("/p")).unwrap();
        assert!(load().entries().is_empty(), "nothing written yet");
        cache.persist_assigned(&storage).unwrap();
        let reloaded = load();
        assert_eq!(
            reloaded.entries(),
            &[
                EpochEntry {
                    epoch: 2,
                    start_offset: 10
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 40
                }
            ]
        );
    }

    #[test]
    fn truncation_from_both_ends() {
        let (storage, mut cache) = cache(&[(1, 0), (3, 100), (5, 250)]);
        cache.truncate_from_end(&storage, 250).unwrap();
        assert_eq!(cache.latest_epoch(), Some(3));
        cache.truncate_from_start(&storage, 120).unwrap();
        assert_eq!(
            cache.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 120
            }]
        );
        let reloaded = LeaderEpochCache::load(&storage, Path::new("/p")).unwrap();
        assert_eq!(reloaded.entries(), cache.entries());
    }
}
