//! Snapshots of a partition's idempotent-producer state (Kafka's
//! `ProducerStateManager` snapshots). Two kinds live in the partition's
//! directory:
//!
//! - `producer-state.json`, the state at the log end as of the last
//!   snapshot, so that a restart replays only the log after it;
//! - `<offset>.snapshot` (Kafka's name), taken when a segment rolled: the
//!   state at the end of the segment before `offset`. A segment's copy in
//!   remote storage carries it, and a replica whose leader's local log
//!   starts past its own end starts with it (KIP-405).
//!
//! A state at an offset without a snapshot of its own is the nearest
//! earlier one with the batches after it replayed; so is the state a
//! partition opens with, which thus remembers producers whose batches
//! retention removed even when the latest snapshot was lost with the
//! unsynced end of the log.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use weir_log::storage::Storage;
use weir_log::{Log, LogError};

use super::producer_state::ProducerStates;
use super::record_producer_batches;
use weir_log::batch::BatchHeader;

/// The latest snapshot, in the partition's directory.
pub const PRODUCER_SNAPSHOT_FILE: &str = "producer-state.json";

/// The suffix of the snapshots taken at a segment roll.
const SEGMENT_SNAPSHOT_SUFFIX: &str = ".snapshot";

/// The producer state after every batch below `offset`.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct ProducerSnapshot {
    /// The log end offset the snapshot covers.
    pub offset: u64,
    pub producers: ProducerStates,
}

impl ProducerSnapshot {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("producer state serializes")
    }

    /// A snapshot's text, `None` if it is not one.
    pub fn from_json(text: &[u8]) -> Option<Self> {
        serde_json::from_slice(text).ok()
    }
}

fn segment_snapshot_path(dir: &Path, offset: u64) -> PathBuf {
    dir.join(format!("{offset:020}{SEGMENT_SNAPSHOT_SUFFIX}"))
}

/// The offsets of the segment snapshots in `dir`, ascending.
fn segment_snapshot_offsets(storage: &dyn Storage, dir: &Path) -> Vec<u64> {
    let mut offsets: Vec<u64> = storage
        .list(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|name| name.strip_suffix(SEGMENT_SNAPSHOT_SUFFIX)?.parse().ok())
        .collect();
    offsets.sort_unstable();
    offsets
}

/// Writes the snapshot taken when a segment rolled at `snapshot.offset`.
pub fn write_segment_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    snapshot: &ProducerSnapshot,
) -> Result<(), LogError> {
    weir_log::checkpoint::write(
        storage,
        &segment_snapshot_path(dir, snapshot.offset),
        &snapshot.to_json(),
    )
}

/// Removes the segment snapshots outside `keep`: below the log start
/// (their segments are gone) or past the log end (a truncation dropped
/// what they describe).
pub fn remove_segment_snapshots_outside(
    storage: &dyn Storage,
    dir: &Path,
    keep: RangeInclusive<u64>,
) {
    for offset in segment_snapshot_offsets(storage, dir) {
        if keep.contains(&offset) {
            continue;
        }
        let path = segment_snapshot_path(dir, offset);
        if let Err(error) = storage.remove(&path) {
            tracing::debug!(path = %path.display(), %error, "cannot remove a producer snapshot");
        }
    }
}

/// The producer state after every batch of `log` below `offset` (a batch
/// boundary): the snapshot taken there, or the nearest earlier one with
/// the batches in between replayed, or a replay from the log start.
pub fn producer_state_at(
    storage: &dyn Storage,
    log: &Log,
    offset: u64,
) -> Result<ProducerSnapshot, LogError> {
    let (mut producers, from) = match latest_segment_snapshot(storage, log, offset) {
        Some(snapshot) => (snapshot.producers, snapshot.offset),
        None => (ProducerStates::default(), log.log_start_offset()),
    };
    replay(log, &mut producers, from, offset)?;
    Ok(ProducerSnapshot { offset, producers })
}

/// The latest readable segment snapshot of `log` at or below `offset` and
/// not below the log start.
fn latest_segment_snapshot(
    storage: &dyn Storage,
    log: &Log,
    offset: u64,
) -> Option<ProducerSnapshot> {
    let start = log.log_start_offset();
    segment_snapshot_offsets(storage, log.dir())
        .into_iter()
        .rev()
        .filter(|&at| at >= start && at <= offset)
        .find_map(|at| {
            let text = weir_log::checkpoint::read(storage, &segment_snapshot_path(log.dir(), at))
                .ok()??;
            ProducerSnapshot::from_json(text.as_bytes()).filter(|s| s.offset == at)
        })
}

/// Rebuilds producer state at open: the latest snapshot of either kind
/// within the log, then every batch after it (without one, the batches
/// from the log start). Also returns the offset of `producer-state.json`
/// when that was the one used.
pub fn load_producer_state(
    storage: &dyn Storage,
    log: &Log,
) -> Result<(ProducerStates, Option<u64>), LogError> {
    let path = log.dir().join(PRODUCER_SNAPSHOT_FILE);
    let log_end = log.log_end_offset();
    // A snapshot that cannot be read is rebuilt from the log.
    let latest = weir_log::checkpoint::read(storage, &path)
        .ok()
        .flatten()
        .and_then(|text| ProducerSnapshot::from_json(text.as_bytes()))
        .filter(|s| s.offset <= log_end && s.offset >= log.log_start_offset());
    let at_roll = latest_segment_snapshot(storage, log, log_end);
    let (snapshot, latest_used) = match (latest, at_roll) {
        (Some(latest), Some(at_roll)) if at_roll.offset > latest.offset => (Some(at_roll), false),
        (Some(latest), _) => (Some(latest), true),
        (None, at_roll) => (at_roll, false),
    };
    let snapshot_offset = snapshot.as_ref().map(|s| s.offset).filter(|_| latest_used);
    let (mut producers, offset) = match snapshot {
        Some(s) => (s.producers, s.offset),
        None => (ProducerStates::default(), log.log_start_offset()),
    };
    replay(log, &mut producers, offset, log_end)?;
    Ok((producers, snapshot_offset))
}

/// Records in `producers` the batches of `log` from `from` up to `to`.
fn replay(
    log: &Log,
    producers: &mut ProducerStates,
    mut from: u64,
    to: u64,
) -> Result<(), LogError> {
    while from < to {
        let slice = log.read(from, 1 << 20, to)?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_bytes().map_err(|source| LogError::Io {
            path: slice.path().map(Path::to_owned).unwrap_or_default(),
            source,
        })?;
        record_producer_batches(producers, &bytes);
        let mut rest = &bytes[..];
        while let Ok(header) = BatchHeader::parse(rest, 0) {
            from = header.next_offset() as u64;
            rest = &rest[header.total_size().min(rest.len())..];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use weir_log::testing::BatchBuilder;
    use weir_log::{EpochEntry, LogConfig};

    use super::*;
    use crate::partition::Partition;

    fn open(dir: &Path, config: LogConfig) -> Partition {
        let partition = Partition::open(dir, "t", uuid::Uuid::nil(), 0, config).unwrap();
        partition.lead_for_tests(&[1], 0, 1);
        partition
    }

    /// Segments of a few batches.
    fn small_segments() -> LogConfig {
        LogConfig {
            segment_bytes: 600,
            remote_storage_enable: true,
            ..LogConfig::default()
        }
    }

    fn batch(producer_id: i64, sequence: i32) -> Vec<u8> {
        BatchBuilder::sized(2, 100)
            .producer(producer_id, 0, sequence)
            .build()
    }

    fn sequences(snapshot: &ProducerSnapshot) -> Vec<(i64, i32)> {
        snapshot
            .producers
            .active()
            .iter()
            .map(|p| (p.producer_id, p.last_sequence))
            .collect()
    }

    #[test]
    fn a_segment_roll_keeps_the_producer_state_at_the_new_segments_base() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), small_segments());
        for i in 0..16 {
            p.append_in_place(&batch(7 + i64::from(i % 2), i / 2 * 2), 0)
                .unwrap();
        }
        let log = p.read_log();
        let bases = log.segment_base_offsets();
        assert!(bases.len() > 2, "{bases:?}");
        let taken = segment_snapshot_offsets(&*p.storage, log.dir());
        assert_eq!(taken, bases[1..].to_vec(), "one snapshot per roll");
        // Each says what the batches below its offset say, as a replay
        // from the log start does.
        for &base in &bases[1..] {
            let text =
                weir_log::checkpoint::read(&*p.storage, &segment_snapshot_path(log.dir(), base))
                    .unwrap()
                    .unwrap();
            let at_roll = ProducerSnapshot::from_json(text.as_bytes()).unwrap();
            let mut replayed = ProducerStates::default();
            replay(&log, &mut replayed, 0, base).unwrap();
            let replayed = ProducerSnapshot {
                offset: base,
                producers: replayed,
            };
            assert_eq!(sequences(&at_roll), sequences(&replayed), "at {base}");
            assert_eq!(
                sequences(&p.producer_state_at(base).unwrap()),
                sequences(&replayed)
            );
        }
        // Past the last roll: the last snapshot and the batches after it.
        let end = log.log_end_offset();
        assert_eq!(
            sequences(&p.producer_state_at(end).unwrap()),
            vec![(7, 15), (8, 15)]
        );
    }

    #[test]
    fn a_partition_reopened_without_its_latest_snapshot_remembers_producers_below_its_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), small_segments());
        p.append_in_place(&batch(7, 0), 0).unwrap();
        for i in 0..16 {
            p.append_in_place(&batch(8, i * 2), 0).unwrap();
        }
        let bases = p.read_log().segment_base_offsets();
        p.delete_records_before(bases[2]).unwrap();
        let storage = p.storage.clone();
        let latest = p.read_log().dir().join(PRODUCER_SNAPSHOT_FILE);
        drop(p);
        // As if the crash took the latest snapshot with the log's end.
        let _ = storage.remove(&latest);
        let p = open(dir.path(), small_segments());
        let retried = p.append_in_place(&batch(7, 0), 0).unwrap();
        assert!(retried.duplicate, "producer 7 is remembered");
    }

    #[test]
    fn a_truncation_removes_the_snapshots_past_the_new_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), small_segments());
        for i in 0..16 {
            p.append_in_place(&batch(7, i * 2), 0).unwrap();
        }
        let bases = p.read_log().segment_base_offsets();
        p.truncate_to(bases[1]).unwrap();
        let left = segment_snapshot_offsets(&*p.storage, p.read_log().dir());
        assert_eq!(left, vec![bases[1]]);
    }

    #[test]
    fn a_replica_restarted_from_a_remote_copy_answers_a_retry_below_its_log_as_a_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), small_segments());
        // The copy's producer state: producer 7 wrote sequences 0..=1 at
        // offsets 98..=99, before the leader's local log start, 100.
        let mut copied = batch(7, 0);
        // A batch's base offset is its first field, outside its CRC.
        copied[..8].copy_from_slice(&98i64.to_be_bytes());
        let mut remote = ProducerStates::default();
        record_producer_batches(&mut remote, &copied);
        let epochs = [
            EpochEntry {
                epoch: 0,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 2,
                start_offset: 60,
            },
        ];
        p.restart_from_remote(100, &epochs, Some(remote)).unwrap();
        assert_eq!(p.read_log().log_start_offset(), 100);
        assert_eq!(p.read_log().end_offset_for_epoch(0), (0, 60));
        drop(p);
        // Also after a restart of the broker.
        let p = open(dir.path(), small_segments());
        let retried = p.append_in_place(&batch(7, 0), 0).unwrap();
        assert!(retried.duplicate);
        assert_eq!(retried.base_offset, 98);
        assert_eq!(p.read_log().epoch_entries().len(), 2);
    }
}
