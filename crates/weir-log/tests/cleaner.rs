//! The log cleaner: what compaction keeps and drops, when it runs, and what
//! a crash at any step of it leaves behind. On the in-memory storage with a
//! manual clock; records are checked against a model of what was appended.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use proptest::prelude::*;
use weir_log::batch::{self, BatchHeader, Origin};
use weir_log::sim::{CrashMode, SimStorage};
use weir_log::storage::Storage;
use weir_log::testing::KeyedBatch;
use weir_log::{
    CleanOutcome, Cleaner, CleanerConfig, CleanupPolicy, Log, LogConfig, ManualClock,
    CLEANER_CHECKPOINT_FILE, RECOVERY_POINT_FILE,
};

use common::{open, split, try_open, DIR, T0};

/// One record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset: u64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    timestamp: i64,
}

/// A batch as read back: its header fields and records.
#[derive(Debug, Clone)]
struct ReadBatch {
    base: u64,
    last_offset_delta: i32,
    attributes: i16,
    producer: (i64, i16, i32),
    base_timestamp: i64,
    records: Vec<Rec>,
}

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        retention_ms: -1,
        cleanup_policy: CleanupPolicy::COMPACT,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 60_000,
        ..LogConfig::default()
    }
}

struct Harness {
    storage: SimStorage,
    clock: Arc<ManualClock>,
    config: LogConfig,
    log: Log,
    /// Every record appended, by offset.
    appended: BTreeMap<u64, Rec>,
    /// Every batch appended: base offset → (last offset delta, producer).
    batches: BTreeMap<u64, (i32, (i64, i16, i32))>,
}

impl Harness {
    fn new(config: LogConfig) -> Self {
        let storage = SimStorage::new();
        let clock = Arc::new(ManualClock::new(T0));
        let log = open(&storage, &config, &clock);
        Self {
            storage,
            clock,
            config,
            log,
            appended: BTreeMap::new(),
            batches: BTreeMap::new(),
        }
    }

    fn append(&mut self, batch: KeyedBatch) -> u64 {
        let bytes = batch.build();
        let info = self.log.append(&bytes, 0).unwrap();
        for rec in decode(&bytes).records {
            let offset = info.base_offset + rec.offset;
            self.appended.insert(offset, Rec { offset, ..rec });
        }
        let header = BatchHeader::parse(&bytes, 0).unwrap();
        self.batches.insert(
            info.base_offset,
            (
                header.last_offset_delta(),
                (
                    header.producer_id(),
                    header.producer_epoch(),
                    header.base_sequence(),
                ),
            ),
        );
        info.base_offset
    }

    /// Appends one record per (key, value), `per_batch` to a batch.
    fn append_records(&mut self, records: &[(&str, Option<&str>)], per_batch: usize) {
        for chunk in records.chunks(per_batch) {
            let mut batch = KeyedBatch::new().timestamp(self.clock_ms());
            for (key, value) in chunk {
                batch = batch.record(Some(key.as_bytes()), value.map(str::as_bytes));
            }
            self.append(batch);
        }
    }

    fn clock_ms(&self) -> i64 {
        use weir_log::Clock;
        self.clock.now_ms()
    }

    fn clean(&self) -> weir_log::CleanStats {
        let mut cleaner = Cleaner::new(CleanerConfig::default());
        cleaner.clean(&self.log, u64::MAX).unwrap()
    }

    fn reopen(&mut self) {
        self.log = open(&self.storage, &self.config, &self.clock);
    }

    /// The latest value of every key the model holds (tombstones: `None`).
    fn model(&self) -> BTreeMap<Bytes, Option<Bytes>> {
        latest(self.appended.values())
    }

    /// Checks the log against what was appended: every record it holds was
    /// appended at that offset, offsets increase, each batch keeps its base
    /// offset, lastOffsetDelta and producer fields, and the latest value of
    /// every key is the model's (a key whose latest record is a tombstone
    /// may be gone).
    fn check(&self) {
        check_log(&self.log, &self.appended, &self.batches);
    }
}

fn check_log(
    log: &Log,
    appended: &BTreeMap<u64, Rec>,
    batches: &BTreeMap<u64, (i32, (i64, i16, i32))>,
) {
    let read = read_batches(log);
    let records: Vec<Rec> = read.iter().flat_map(|b| b.records.clone()).collect();
    for pair in records.windows(2) {
        assert!(pair[0].offset < pair[1].offset, "offsets must increase");
    }
    for rec in &records {
        assert_eq!(
            Some(rec),
            appended.get(&rec.offset),
            "record at {}",
            rec.offset
        );
    }
    for b in &read {
        assert_eq!(
            batches.get(&b.base),
            Some(&(b.last_offset_delta, b.producer)),
            "batch at {}",
            b.base
        );
    }
    let expected = latest(appended.values());
    let actual = latest(records.iter());
    for (key, value) in &expected {
        match value {
            Some(_) => assert_eq!(actual.get(key), Some(value), "key {key:?}"),
            None => assert!(
                matches!(actual.get(key), None | Some(None)),
                "deleted key {key:?} is back: {:?}",
                actual.get(key)
            ),
        }
    }
    assert!(actual.keys().all(|k| expected.contains_key(k)));
}

fn latest<'a>(records: impl Iterator<Item = &'a Rec>) -> BTreeMap<Bytes, Option<Bytes>> {
    let mut map = BTreeMap::new();
    for rec in records {
        if let Some(key) = &rec.key {
            map.insert(key.clone(), rec.value.clone());
        }
    }
    map
}

fn decode(bytes: &[u8]) -> ReadBatch {
    let header = BatchHeader::parse(bytes, 0).unwrap();
    batch::validate(bytes, 0, Origin::Log, usize::MAX).expect("a valid batch");
    let mut buf = Bytes::copy_from_slice(bytes);
    let set = RecordBatchDecoder::decode(&mut buf).expect("decodable");
    assert_eq!(set.records.len(), header.record_count() as usize);
    ReadBatch {
        base: header.base_offset() as u64,
        last_offset_delta: header.last_offset_delta(),
        attributes: header.attributes(),
        producer: (
            header.producer_id(),
            header.producer_epoch(),
            header.base_sequence(),
        ),
        base_timestamp: header.base_timestamp(),
        records: set
            .records
            .into_iter()
            .map(|r| Rec {
                offset: r.offset as u64,
                key: r.key,
                value: r.value,
                timestamp: r.timestamp,
            })
            .collect(),
    }
}

/// Every batch from the log start on. Compaction may leave nothing between
/// the last batch read and the log end (in tests that roll explicitly), so
/// an empty read ends the scan.
fn read_batches(log: &Log) -> Vec<ReadBatch> {
    let mut out = Vec::new();
    let end = log.log_end_offset();
    let mut next = log.log_start_offset();
    while next < end {
        let slice = log.read(next, usize::MAX, u64::MAX).unwrap();
        if slice.is_empty() {
            break;
        }
        for (_, bytes) in split(&slice.to_bytes().unwrap()) {
            let batch = decode(&bytes);
            next = batch.base + batch.last_offset_delta as u64 + 1;
            out.push(batch);
        }
    }
    out
}

fn read_records(log: &Log) -> Vec<Rec> {
    read_batches(log)
        .into_iter()
        .flat_map(|b| b.records)
        .collect()
}

fn kv(n: usize, keys: usize) -> Vec<(String, Option<String>)> {
    (0..n)
        .map(|i| (format!("key-{}", i % keys), Some(format!("value-{i}"))))
        .collect()
}

fn refs(records: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
    records
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_deref()))
        .collect()
}

#[test]
fn keeps_the_latest_record_of_each_key_at_its_offset() {
    let mut h = Harness::new(compact_config());
    let records = kv(300, 10);
    h.append_records(&refs(&records), 5);
    h.log.roll().unwrap();
    let end = h.log.log_end_offset();
    let segments_before = h.log.segment_base_offsets().len();
    let size_before = h.log.size_bytes();
    let stats = h.clean();
    assert_eq!(stats.outcome, CleanOutcome::Cleaned);
    assert_eq!(stats.end_offset, end);
    assert_eq!(stats.records_removed, 290);
    assert_eq!(stats.keys, 10);
    assert!(stats.bytes_written < stats.bytes_read / 10);
    h.check();
    let read = read_records(&h.log);
    assert_eq!(read.len(), 10);
    // The survivors are the last ten records, at their own offsets.
    let offsets: Vec<u64> = read.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (290..300).collect::<Vec<_>>());
    assert_eq!(h.log.log_end_offset(), end);
    assert_eq!(h.log.log_start_offset(), 0);
    // Segments are grouped by their size before cleaning (as Kafka does):
    // these were full, so each got its own, now nearly empty, copy.
    assert_eq!(h.log.segment_base_offsets().len(), segments_before);
    assert!(h.log.size_bytes() < size_before / 10);
    assert_eq!(h.log.cleaner_checkpoint(), end);
    // Reads from any offset, gaps included, find the next record.
    let slice = h.log.read(5, 1, u64::MAX).unwrap();
    assert_eq!(decode(&slice.to_bytes().unwrap()).records[0].offset, 290);
    // Nothing more to do until new records come.
    assert!(!h.log.cleanable(u64::MAX).unwrap().needs_cleaning());
    assert_eq!(h.clean().outcome, CleanOutcome::NothingToClean);
    // The next pass merges the small segments.
    h.append_records(&[("key-1", Some("again"))], 1);
    h.log.roll().unwrap();
    h.clean();
    assert!(h.log.segment_base_offsets().len() <= 3);
    h.check();
}

#[test]
fn gaps_survive_later_passes_and_reopens() {
    let mut h = Harness::new(compact_config());
    for round in 0..4 {
        let records: Vec<(String, Option<String>)> = (0..60)
            .map(|i| {
                (
                    format!("k{}", (i * 7 + round) % 13),
                    Some(format!("r{round}-{i}")),
                )
            })
            .collect();
        h.append_records(&refs(&records), 4);
        h.log.roll().unwrap();
        h.clean();
        h.check();
        if round % 2 == 0 {
            h.log.flush().unwrap();
            h.storage.crash(CrashMode::DropUnsynced);
        }
        h.reopen();
        h.check();
    }
    // Old keys appear once each; appends continue at the log end.
    let read = read_records(&h.log);
    assert_eq!(read.len(), 13);
    let end = h.log.log_end_offset();
    assert_eq!(
        h.append(KeyedBatch::new().record(Some(b"new"), Some(b"v"))),
        end
    );
}

#[test]
fn records_without_a_key_are_dropped() {
    let mut h = Harness::new(compact_config());
    h.append(
        KeyedBatch::new()
            .record(None, Some(b"lost"))
            .record(Some(b"a"), Some(b"kept"))
            .record(None, Some(b"lost too")),
    );
    h.log.roll().unwrap();
    let stats = h.clean();
    assert_eq!(stats.records_removed, 2);
    let read = read_batches(&h.log);
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].records.len(), 1);
    assert_eq!(read[0].records[0].offset, 1);
    // The batch still spans its three offsets.
    assert_eq!((read[0].base, read[0].last_offset_delta), (0, 2));
    h.check();
}

#[test]
fn tombstones_stay_for_delete_retention_ms_then_go() {
    let mut h = Harness::new(compact_config());
    h.append_records(&[("a", Some("1")), ("b", Some("2"))], 2);
    h.append_records(&[("a", None)], 1);
    h.log.roll().unwrap();
    let cleaned_at = h.clock_ms();
    h.clean();
    h.check();
    let read = read_batches(&h.log);
    let tombstone_batch = read.last().unwrap();
    assert_eq!(tombstone_batch.records.len(), 1);
    assert_eq!(tombstone_batch.records[0].value, None);
    // The delete horizon is in the batch: baseTimestamp, with the flag.
    assert_ne!(tombstone_batch.attributes & 0x40, 0);
    assert_eq!(tombstone_batch.base_timestamp, cleaned_at + 60_000);
    // The record keeps its own timestamp.
    assert_eq!(tombstone_batch.records[0].timestamp, T0);
    assert_eq!(
        read_records(&h.log)
            .iter()
            .map(|r| r.key.clone().unwrap())
            .collect::<Vec<_>>(),
        vec![Bytes::from("b"), Bytes::from("a")]
    );

    // The horizon is remembered across a restart, with the checkpoint.
    h.reopen();
    // Cleaning again before the horizon keeps it.
    h.append_records(&[("c", Some("3"))], 1);
    h.log.roll().unwrap();
    h.clock.advance(59_999);
    assert!(!h.log.cleanable(u64::MAX).unwrap().tombstones_due);
    h.clean();
    assert!(read_records(&h.log).iter().any(|r| r.value.is_none()));

    // At the horizon the tombstone is due, and the next pass removes it
    // even without new dirty records.
    h.clock.advance(1);
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert!(cleanable.tombstones_due && cleanable.needs_cleaning());
    let stats = h.clean();
    assert_eq!(stats.tombstones_removed, 1);
    let keys: Vec<Bytes> = read_records(&h.log)
        .iter()
        .map(|r| r.key.clone().unwrap())
        .collect();
    assert_eq!(keys, vec![Bytes::from("b"), Bytes::from("c")]);
    assert!(!h.log.cleanable(u64::MAX).unwrap().tombstones_due);
    h.check();
}

#[test]
fn the_tombstone_horizon_survives_a_restart() {
    let mut h = Harness::new(compact_config());
    h.append_records(&[("a", Some("1")), ("a", None)], 2);
    h.log.roll().unwrap();
    h.clean();
    h.reopen();
    h.clock.advance(60_000);
    assert!(h.log.cleanable(u64::MAX).unwrap().tombstones_due);
    h.clean();
    assert!(read_records(&h.log).is_empty());
}

#[test]
fn min_compaction_lag_leaves_young_segments_alone() {
    let mut h = Harness::new(LogConfig {
        min_compaction_lag_ms: 10_000,
        ..compact_config()
    });
    h.append_records(&refs(&kv(40, 4)), 4);
    h.log.roll().unwrap();
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert_eq!(cleanable.first_uncleanable_offset, 0);
    assert_eq!(cleanable.dirty_bytes, 0);
    assert_eq!(h.clean().outcome, CleanOutcome::NothingToClean);
    assert_eq!(read_records(&h.log).len(), 40);
    // Once the newest record of a segment is older than the lag, it may be
    // cleaned; younger segments after it may not.
    h.clock.advance(10_010);
    h.append_records(&refs(&kv(8, 4)), 4);
    h.log.roll().unwrap();
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert_eq!(cleanable.first_uncleanable_offset, 40);
    h.clean();
    let read = read_records(&h.log);
    // Four keys' latest below 40, plus the eight young records.
    assert_eq!(read.len(), 12);
    h.check();
}

#[test]
fn max_compaction_lag_forces_cleaning_and_rolls_the_active_segment() {
    let config = LogConfig {
        segment_bytes: 1 << 20,
        min_cleanable_dirty_ratio: 0.99,
        max_compaction_lag_ms: 5_000,
        ..compact_config()
    };
    let mut h = Harness::new(config);
    h.append_records(&refs(&kv(20, 2)), 2);
    h.log.roll().unwrap();
    h.clean();
    h.append_records(&refs(&kv(4, 2)), 2);
    // The active segment rolls once its first record is max.compaction.lag.ms
    // old, even though segment.ms is a week.
    h.clock.advance(5_010);
    let before = h.log.segment_base_offsets().len();
    h.append_records(&[("x", Some("y"))], 1);
    assert_eq!(h.log.segment_base_offsets().len(), before + 1);
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert!(cleanable.dirty_ratio < 0.99);
    assert!(cleanable.max_compaction_delay_ms > 0 || cleanable.dirty_bytes == 0);
    assert!(cleanable.needs_cleaning());
    h.clean();
    h.check();
    let keys: Vec<Bytes> = read_records(&h.log)
        .into_iter()
        .filter_map(|r| r.key)
        .collect();
    assert_eq!(keys, ["key-0", "key-1", "x"].map(Bytes::from));
}

#[test]
fn dirty_ratio_decides_when_a_log_needs_cleaning() {
    let mut h = Harness::new(LogConfig {
        min_cleanable_dirty_ratio: 0.5,
        segment_bytes: 4096,
        ..compact_config()
    });
    let distinct: Vec<(String, Option<String>)> = (0..40)
        .map(|i| (format!("k{i}"), Some(format!("v{i}"))))
        .collect();
    h.append_records(&refs(&distinct), 4);
    h.log.roll().unwrap();
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert_eq!(cleanable.dirty_ratio, 1.0);
    assert!(cleanable.needs_cleaning());
    h.clean();
    // A little dirt: below the ratio.
    h.append_records(&refs(&distinct[..8]), 4);
    h.log.roll().unwrap();
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert!(cleanable.dirty_bytes > 0 && cleanable.clean_bytes > 0);
    let ratio =
        cleanable.dirty_bytes as f64 / (cleanable.dirty_bytes + cleanable.clean_bytes) as f64;
    assert_eq!(cleanable.dirty_ratio, ratio);
    assert!(ratio < 0.5 && !cleanable.needs_cleaning());
    // More: above it.
    h.append_records(&refs(&distinct), 4);
    h.log.roll().unwrap();
    let cleanable = h.log.cleanable(u64::MAX).unwrap();
    assert!(cleanable.dirty_ratio >= 0.5 && cleanable.needs_cleaning());
    h.clean();
    h.check();
    assert_eq!(read_records(&h.log).len(), 40);
}

#[test]
fn a_delete_only_log_is_not_cleaned_and_compact_only_logs_keep_old_segments() {
    let mut h = Harness::new(LogConfig {
        cleanup_policy: CleanupPolicy::DELETE,
        ..compact_config()
    });
    h.append_records(&refs(&kv(20, 2)), 2);
    h.log.roll().unwrap();
    assert!(h.log.cleanable(u64::MAX).is_none());
    assert_eq!(h.clean().outcome, CleanOutcome::NothingToClean);

    // retention.ms deletes segments only with `delete` in the policy.
    for (policy, deleted) in [
        (CleanupPolicy::COMPACT, false),
        (CleanupPolicy::COMPACT_DELETE, true),
    ] {
        let mut h = Harness::new(LogConfig {
            cleanup_policy: policy,
            retention_ms: 1_000,
            ..compact_config()
        });
        h.append_records(&refs(&kv(20, 2)), 2);
        h.log.roll().unwrap();
        h.clock.advance(2_000);
        let outcome = h.log.enforce_retention(u64::MAX).unwrap();
        assert_eq!(outcome.deleted_segments > 0, deleted, "{policy:?}");
    }
}

#[test]
fn compressed_batches_are_recompressed_with_their_own_codec() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut h = Harness::new(LogConfig {
            segment_bytes: 64 * 1024,
            ..compact_config()
        });
        for round in 0..5 {
            let mut batch = KeyedBatch::new().compression(codec).timestamp(T0 + round);
            for i in 0..20 {
                let value = format!("{codec:?}-{round}-{i}-{}", "x".repeat(40));
                batch = batch.record(
                    Some(format!("k{}", i % 7).as_bytes()),
                    Some(value.as_bytes()),
                );
            }
            h.append(batch);
        }
        h.log.roll().unwrap();
        let stats = h.clean();
        assert_eq!(stats.records_removed, 100 - 7, "{codec:?}");
        h.check();
        let read = read_batches(&h.log);
        for b in &read {
            assert_eq!(
                b.attributes & 0x07,
                codec as i16,
                "{codec:?} batch at {}",
                b.base
            );
        }
        assert_eq!(read.iter().map(|b| b.records.len()).sum::<usize>(), 7);
    }
}

#[test]
fn producer_fields_and_the_last_offset_survive() {
    let mut h = Harness::new(compact_config());
    h.append(
        KeyedBatch::new()
            .producer(42, 3, 100)
            .record(Some(b"a"), Some(b"1"))
            .record(Some(b"b"), Some(b"1"))
            .record(Some(b"c"), Some(b"1")),
    );
    h.append(
        KeyedBatch::new()
            .producer(42, 3, 103)
            .record(Some(b"c"), Some(b"2")),
    );
    h.log.roll().unwrap();
    h.clean();
    let read = read_batches(&h.log);
    assert_eq!(read[0].producer, (42, 3, 100));
    // Offset 2 went, yet the batch still ends there: the producer's last
    // sequence (base + lastOffsetDelta) is unchanged.
    assert_eq!(read[0].last_offset_delta, 2);
    assert_eq!(read[0].records.len(), 2);
    assert_eq!(read[1].producer, (42, 3, 103));
    h.check();
}

#[test]
fn a_full_offset_map_cleans_up_to_the_offset_it_covers() {
    let mut h = Harness::new(LogConfig {
        segment_bytes: 600,
        ..compact_config()
    });
    // 60 distinct keys, twice, in small segments.
    let records: Vec<(String, Option<String>)> = (0..120)
        .map(|i| (format!("k{}", i % 60), Some(format!("v{i}"))))
        .collect();
    h.append_records(&refs(&records), 3);
    h.log.roll().unwrap();
    let end = h.log.log_end_offset();
    // A map of 40 slots takes 36 keys.
    let mut cleaner = Cleaner::new(CleanerConfig {
        dedupe_buffer_size: 24 * 40,
        ..CleanerConfig::default()
    });
    let mut passes = 0;
    let mut checkpoints = Vec::new();
    while h.log.cleaner_checkpoint() < end {
        let stats = cleaner.clean(&h.log, u64::MAX).unwrap();
        assert_eq!(stats.outcome, CleanOutcome::Cleaned);
        assert!(stats.keys <= 36);
        checkpoints.push(stats.end_offset);
        // The checkpoint is a segment boundary.
        assert!(
            h.log.segment_base_offsets().contains(&stats.end_offset),
            "{} not in {:?}",
            stats.end_offset,
            h.log.segment_base_offsets()
        );
        h.check();
        passes += 1;
        assert!(passes < 20, "no progress: {checkpoints:?}");
    }
    assert!(passes > 2, "the map should fill: {checkpoints:?}");
    // The map only deduplicates what it covers: a last pass over the whole
    // log with a large map leaves one record per key.
    h.append_records(&refs(&records[60..]), 3);
    h.log.roll().unwrap();
    h.clean();
    assert_eq!(read_records(&h.log).len(), 60);
    h.check();
}

#[test]
fn the_upper_bound_keeps_unreplicated_segments_out() {
    let mut h = Harness::new(compact_config());
    h.append_records(&refs(&kv(120, 2)), 4);
    let bases = h.log.segment_base_offsets();
    assert!(bases.len() > 3);
    // A high watermark inside the third segment: only the first two may go.
    let bound = bases[2] + 1;
    let stats = Cleaner::new(CleanerConfig::default())
        .clean(&h.log, bound)
        .unwrap();
    assert_eq!(stats.end_offset, bases[2]);
    let records = read_records(&h.log);
    assert!(records.iter().filter(|r| r.offset >= bases[2]).count() as u64 == 120 - bases[2]);
    h.check();
}

#[test]
fn appends_and_reads_continue_while_cleaning() {
    let mut h = Harness::new(compact_config());
    h.append_records(&refs(&kv(400, 20)), 5);
    h.log.roll().unwrap();
    let log = &h.log;
    let mut appended = Vec::new();
    std::thread::scope(|scope| {
        let cleaner = scope.spawn(|| {
            Cleaner::new(CleanerConfig::default())
                .clean(log, u64::MAX)
                .unwrap()
        });
        for i in 0..100 {
            let batch = KeyedBatch::new().record(Some(b"live"), Some(format!("{i}").as_bytes()));
            let bytes = batch.build();
            let info = log.append(&bytes, 0).unwrap();
            appended.push((info.base_offset, bytes));
            read_records(log);
        }
        assert_eq!(cleaner.join().unwrap().outcome, CleanOutcome::Cleaned);
    });
    for (offset, bytes) in appended {
        let rec = &decode(&bytes).records[0];
        h.appended.insert(
            offset,
            Rec {
                offset,
                ..rec.clone()
            },
        );
        h.batches.insert(offset, (0, (-1, -1, -1)));
    }
    h.check();
}

#[test]
fn a_reopened_log_trusts_cleaned_segments_even_without_its_recovery_point() {
    let mut h = Harness::new(compact_config());
    h.append_records(&refs(&kv(200, 7)), 3);
    h.log.roll().unwrap();
    h.append_records(&refs(&kv(10, 3)), 2);
    h.clean();
    h.log.flush().unwrap();
    let before = read_records(&h.log);
    // The cleaner checkpoint alone says the cleaned segments are whole: a
    // scan could not tell their trailing gaps from lost tails.
    h.storage.crash(CrashMode::DropUnsynced);
    h.storage
        .remove(&std::path::Path::new(DIR).join(RECOVERY_POINT_FILE))
        .unwrap();
    h.reopen();
    assert_eq!(read_records(&h.log), before);
    h.check();
    // And the checkpoint survives a clean shutdown.
    let checkpoint = h.log.cleaner_checkpoint();
    let log = std::mem::replace(
        &mut h.log,
        open(&SimStorage::new(), &compact_config(), &h.clock),
    );
    log.close().unwrap();
    h.reopen();
    assert_eq!(h.log.cleaner_checkpoint(), checkpoint);
    assert!(h
        .storage
        .exists(&std::path::Path::new(DIR).join(CLEANER_CHECKPOINT_FILE)));
}

#[test]
fn truncation_below_the_checkpoint_lowers_it() {
    let mut h = Harness::new(compact_config());
    h.append_records(&refs(&kv(100, 5)), 5);
    h.log.roll().unwrap();
    h.clean();
    let checkpoint = h.log.cleaner_checkpoint();
    assert_eq!(checkpoint, 100);
    h.log.truncate_to(97).unwrap();
    assert!(h.log.cleaner_checkpoint() <= 97);
    h.log.truncate_fully_and_start_at(500).unwrap();
    assert_eq!(h.log.cleaner_checkpoint(), 500);
}

/// Crashes a clean after every possible number of file-system changes: the
/// reopened log always holds every key's latest value, and a later pass
/// finishes the job.
#[test]
fn a_crash_at_any_step_of_a_clean_loses_nothing() {
    let config = LogConfig {
        segment_bytes: 700,
        ..compact_config()
    };
    let mut records: Vec<(String, Option<String>)> = kv(150, 9);
    records.push(("key-3".into(), None));
    records.push(("key-5".into(), None));
    let mut steps = 0;
    // Crash points that left a committed swap, or cleaned files not yet
    // committed, for recovery to deal with.
    let (mut committed_swaps, mut uncommitted) = (0, 0);
    for modes in [CrashMode::DropUnsynced, CrashMode::Torn { seed: 7 }] {
        for changes in 0.. {
            let mut h = Harness::new(config.clone());
            h.append_records(&refs(&records), 4);
            h.log.roll().unwrap();
            h.append_records(&[("tail", Some("t"))], 1);
            // A first pass, so that the crashing one also replaces cleaned
            // segments and may remove tombstones.
            if changes % 2 == 1 {
                h.clean();
                h.clock.advance(120_000);
                h.append_records(&refs(&kv(30, 4)), 3);
                h.log.roll().unwrap();
            }
            h.log.flush().unwrap();
            h.storage.fail_changes_after(Some(changes));
            let result = Cleaner::new(CleanerConfig::default()).clean(&h.log, u64::MAX);
            let finished = h.storage.changes_left() != Some(0);
            h.storage.fail_changes_after(None);
            h.storage.crash(modes);
            let names = h.storage.list(std::path::Path::new(DIR)).unwrap();
            if names.iter().any(|n| n.ends_with(".log.swap")) {
                committed_swaps += 1;
            }
            if names.iter().any(|n| n.ends_with(".cleaned")) {
                uncommitted += 1;
            }
            h.log = match try_open(&h.storage, &h.config, &h.clock) {
                Ok(log) => log,
                Err(error) => panic!("reopen after {changes} changes ({result:?}): {error}"),
            };
            h.check();
            // What is left to do gets done.
            h.clean();
            h.check();
            steps += 1;
            if finished && changes % 2 == 1 {
                result.expect("a clean within its budget succeeds");
                break;
            }
            assert!(changes < 500, "the clean never finished");
        }
    }
    assert!(steps > 20, "only {steps} crash points");
    assert!(
        committed_swaps > 0 && uncommitted > 0,
        "{committed_swaps} {uncommitted}"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        records: Vec<(u8, Option<u8>)>,
        codec: u8,
    },
    Roll,
    Clean,
    Advance(u16),
    Crash(CrashMode),
    CrashMidClean {
        changes: u8,
        mode: CrashMode,
    },
    CleanReopen,
}

fn op() -> impl Strategy<Value = Op> {
    let record = (0u8..12, prop::option::weighted(0.85, any::<u8>()));
    let mode = prop_oneof![
        Just(CrashMode::DropUnsynced),
        any::<u64>().prop_map(|seed| CrashMode::Torn { seed }),
    ];
    prop_oneof![
        8 => (prop::collection::vec(record, 1..6), 0u8..5)
            .prop_map(|(records, codec)| Op::Append { records, codec }),
        2 => Just(Op::Roll),
        3 => Just(Op::Clean),
        2 => (0u16..40_000).prop_map(Op::Advance),
        1 => mode.clone().prop_map(Op::Crash),
        2 => (any::<u8>(), mode).prop_map(|(changes, mode)| Op::CrashMidClean { changes, mode }),
        1 => Just(Op::CleanReopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random appends (keys 0–11, tombstones, key 11 without a key), rolls,
    /// cleans, clock moves, crashes and crashes in the middle of a clean:
    /// after each step the log agrees with the model of everything flushed.
    #[test]
    fn compaction_agrees_with_the_model(ops in prop::collection::vec(op(), 1..40)) {
        let config = LogConfig {
            segment_bytes: 600,
            index_interval_bytes: 100,
            delete_retention_ms: 30_000,
            ..compact_config()
        };
        let mut h = Harness::new(config);
        let codecs = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ];
        for op in ops {
            match op {
                Op::Append { records, codec } => {
                    let mut batch = KeyedBatch::new()
                        .compression(codecs[codec as usize])
                        .timestamp(h.clock_ms());
                    for (key, value) in records {
                        let key = (key < 11).then(|| vec![b'k', key]);
                        let value = value.map(|v| vec![v; 3]);
                        batch = batch.record(key.as_deref(), value.as_deref());
                    }
                    h.append(batch);
                    // Crashes below keep only synced data: the model is what
                    // was flushed.
                    h.log.flush().unwrap();
                }
                Op::Roll => h.log.roll().unwrap(),
                Op::Clean => {
                    h.clean();
                }
                Op::Advance(ms) => h.clock.advance(ms as i64),
                Op::Crash(mode) => {
                    h.storage.crash(mode);
                    h.reopen();
                }
                Op::CrashMidClean { changes, mode } => {
                    h.storage.fail_changes_after(Some(changes as u64));
                    let _ = Cleaner::new(CleanerConfig::default()).clean(&h.log, u64::MAX);
                    h.storage.fail_changes_after(None);
                    h.storage.crash(mode);
                    h.reopen();
                }
                Op::CleanReopen => {
                    let log = std::mem::replace(
                        &mut h.log,
                        open(&SimStorage::new(), &compact_config(), &h.clock),
                    );
                    log.close().unwrap();
                    h.reopen();
                }
            }
            h.check();
        }
        h.log.roll().unwrap();
        h.clean();
        h.clock.advance(31_000);
        h.clean();
        h.check();
        // Fully cleaned, past every horizon: one record per live key, no
        // tombstones, nothing without a key.
        let records = read_records(&h.log);
        let live = h.model().values().filter(|v| v.is_some()).count();
        prop_assert_eq!(records.len(), live);
    }
}
