//! A sealed segment as it stands, for a copy to remote storage, and the
//! lookups a reader of such a copy needs.
//!
//! A copy holds the `.log` bytes as they are, the offset and time indexes
//! in their file formats (see `index.rs`), the segment's aborted
//! transactions and the leader epochs up to its end. A reader of the copy
//! finds where an offset's batch starts with [`position_for_offset`]
//! and reads from there.

use std::sync::Arc;

use crate::epoch::EpochEntry;
use crate::index::{Entry, OffsetEntry, TimeEntry};
use crate::log::TimestampOffset;
use crate::storage::StorageFile;
use crate::txn::AbortedTxn;

/// A sealed segment of a log: every batch in it lies below the bound it was
/// taken under.
pub struct SealedSegment {
    pub base_offset: u64,
    /// One past its last offset: the next segment's base offset.
    pub next_offset: u64,
    /// Bytes of `.log` data.
    pub size: u64,
    pub max_timestamp: i64,
    /// The `.log` file, open: it stays readable while a copy runs, even if
    /// retention removes the segment meanwhile.
    pub log: Arc<dyn StorageFile>,
    /// The offset index, 8 bytes an entry.
    pub offset_index: Vec<u8>,
    /// The time index, 12 bytes an entry.
    pub time_index: Vec<u8>,
    /// The transactions aborted within the segment.
    pub aborted: Vec<AbortedTxn>,
    /// The leader epochs that start below `next_offset`: the log's
    /// leader-epoch checkpoint as of the segment's end.
    pub epochs: Vec<EpochEntry>,
}

impl SealedSegment {
    /// The leader epochs of the segment's records: each with the first
    /// offset it covers within the segment, ascending.
    pub fn segment_epochs(&self) -> Vec<(i32, u64)> {
        let mut epochs: Vec<(i32, u64)> = Vec::new();
        for entry in &self.epochs {
            let start = entry.start_offset.max(self.base_offset);
            if start >= self.next_offset {
                break;
            }
            // An epoch that starts at or before the base is cut to it; a
            // later one starting at the same offset replaces it.
            match epochs.last_mut() {
                Some(last) if last.1 == start => *last = (entry.epoch, start),
                _ => epochs.push((entry.epoch, start)),
            }
        }
        epochs
    }
}

/// The position in a segment's `.log` data at which to start reading for
/// `offset`: that of the last indexed batch at or below it (0 without one).
/// `index` is the segment's offset index as copied; entries past a torn end
/// are ignored.
pub fn position_for_offset(index: &[u8], base_offset: u64, offset: u64) -> u64 {
    let Some(relative) = offset.checked_sub(base_offset) else {
        return 0;
    };
    let entries: Vec<OffsetEntry> = index
        .chunks_exact(OffsetEntry::SIZE)
        .map(OffsetEntry::decode)
        .collect();
    let below = entries.partition_point(|e| u64::from(e.relative_offset) <= relative);
    below
        .checked_sub(1)
        .map_or(0, |i| u64::from(entries[i].position))
}

/// Where a search for the first record at or after `timestamp` starts, by
/// a segment's time index as copied: the batch after which records may
/// reach it (the segment's base offset if any may).
pub fn time_lookup_start(time_index: &[u8], base_offset: u64, timestamp: i64) -> u64 {
    let entries: Vec<TimeEntry> = time_index
        .chunks_exact(TimeEntry::SIZE)
        .map(TimeEntry::decode)
        .collect();
    let below = entries.partition_point(|e| e.timestamp < timestamp);
    below.checked_sub(1).map_or(base_offset, |i| {
        base_offset + u64::from(entries[i].relative_offset)
    })
}

/// The first record of `batch` (one whole batch) at or after `timestamp`
/// and at or above `log_start`: with LogAppendTime, the batch's first
/// offset and its time. Err: the records do not decode.
pub fn record_at_or_after(
    batch: bytes::Bytes,
    timestamp: i64,
    log_start: u64,
) -> Result<Option<TimestampOffset>, String> {
    let header = crate::batch::BatchHeader::parse(&batch, 0).map_err(|e| e.to_string())?;
    if header.is_log_append_time() {
        return Ok(Some(TimestampOffset {
            offset: (header.base_offset() as u64).max(log_start),
            timestamp: header.max_timestamp(),
        }));
    }
    let mut buf = batch;
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf)
        .map_err(|e| format!("cannot decode records: {e}"))?;
    Ok(set
        .records
        .iter()
        .find(|r| r.timestamp >= timestamp && r.offset >= log_start as i64)
        .map(|r| TimestampOffset {
            offset: r.offset as u64,
            timestamp: r.timestamp,
        }))
}

/// Encodes aborted transactions for a copy: 32 bytes each, big-endian
/// producer id, first offset, last offset, last stable offset.
pub fn encode_aborted(aborted: &[AbortedTxn]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(aborted.len() * 32);
    for txn in aborted {
        bytes.extend_from_slice(&txn.producer_id.to_be_bytes());
        for offset in [txn.first_offset, txn.last_offset, txn.last_stable_offset] {
            bytes.extend_from_slice(&offset.to_be_bytes());
        }
    }
    bytes
}

/// Decodes what [`encode_aborted`] wrote; `None` for a length that is not
/// a whole number of entries.
pub fn decode_aborted(bytes: &[u8]) -> Option<Vec<AbortedTxn>> {
    if !bytes.len().is_multiple_of(32) {
        return None;
    }
    let word = |chunk: &[u8], i: usize| {
        u64::from_be_bytes(chunk[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    };
    Some(
        bytes
            .chunks_exact(32)
            .map(|chunk| AbortedTxn {
                producer_id: word(chunk, 0) as i64,
                first_offset: word(chunk, 1),
                last_offset: word(chunk, 2),
                last_stable_offset: word(chunk, 3),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_starts_at_the_last_indexed_batch_at_or_below_the_offset() {
        let mut index = Vec::new();
        for (relative_offset, position) in [(0, 0), (10, 4096), (25, 8192)] {
            OffsetEntry {
                relative_offset,
                position,
            }
            .encode(&mut index);
        }
        assert_eq!(position_for_offset(&index, 100, 99), 0);
        assert_eq!(position_for_offset(&index, 100, 109), 0);
        assert_eq!(position_for_offset(&index, 100, 110), 4096);
        assert_eq!(position_for_offset(&index, 100, 124), 4096);
        assert_eq!(position_for_offset(&index, 100, 500), 8192);
        // A torn last entry is ignored.
        assert_eq!(position_for_offset(&index[..20], 100, 500), 4096);
        assert_eq!(position_for_offset(&[], 100, 500), 0);
    }

    #[test]
    fn a_search_by_time_starts_after_the_last_entry_below_the_time() {
        let mut index = Vec::new();
        for (timestamp, relative_offset) in [(1_000, 0), (2_000, 10), (3_000, 25)] {
            TimeEntry {
                timestamp,
                relative_offset,
            }
            .encode(&mut index);
        }
        assert_eq!(time_lookup_start(&index, 100, 500), 100);
        assert_eq!(time_lookup_start(&index, 100, 1_000), 100);
        assert_eq!(time_lookup_start(&index, 100, 1_001), 100);
        assert_eq!(time_lookup_start(&index, 100, 2_500), 110);
        assert_eq!(time_lookup_start(&index, 100, 9_000), 125);
        assert_eq!(time_lookup_start(&[], 100, 9_000), 100);
    }

    #[test]
    fn aborted_transactions_round_trip() {
        let aborted = vec![AbortedTxn {
            producer_id: 7,
            first_offset: 10,
            last_offset: 20,
            last_stable_offset: 21,
        }];
        let bytes = encode_aborted(&aborted);
        assert_eq!(decode_aborted(&bytes), Some(aborted));
        assert_eq!(decode_aborted(&bytes[..31]), None);
    }

    #[test]
    fn a_segment_has_the_epochs_that_cover_its_records() {
        use crate::storage::Storage;
        let storage = crate::sim::SimStorage::new();
        let dir = std::path::Path::new("/sealed");
        storage.create_dir_all(dir).unwrap();
        let log = storage.create(&dir.join("0.log")).unwrap();
        let segment = |epochs: &[(i32, u64)]| SealedSegment {
            base_offset: 100,
            next_offset: 200,
            size: 0,
            max_timestamp: 0,
            log: log.clone(),
            offset_index: Vec::new(),
            time_index: Vec::new(),
            aborted: Vec::new(),
            epochs: epochs
                .iter()
                .map(|&(epoch, start_offset)| EpochEntry {
                    epoch,
                    start_offset,
                })
                .collect(),
        };
        assert_eq!(
            segment(&[(0, 0), (3, 150), (4, 200)]).segment_epochs(),
            vec![(0, 100), (3, 150)]
        );
        assert_eq!(
            segment(&[(0, 0), (1, 100)]).segment_epochs(),
            vec![(1, 100)]
        );
    }
}
