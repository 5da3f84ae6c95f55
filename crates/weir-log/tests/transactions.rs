//! Transactions in the log: the open transactions and the aborted-transaction
//! index agree, after any sequence of appends, rolls, truncations, clean
//! reopens, crashes and damaged or lost index files, with a replay of the
//! batches the log holds.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use weir_log::batch::{self, BatchHeader, ControlType};
use weir_log::sim::{CrashMode, SimStorage};
use weir_log::storage::Storage;
use weir_log::testing::BatchBuilder;
use weir_log::{AbortedTxn, Log, LogConfig, ManualClock, OpenTxn};

use common::*;

fn txn_batch(producer_id: i64, count: usize) -> Vec<u8> {
    BatchBuilder::new(count)
        .producer(producer_id, 0, 0)
        .transactional()
        .build()
}

fn marker(producer_id: i64, commit: bool) -> Vec<u8> {
    batch::marker_batch(producer_id, 0, commit, 0, T0)
}

/// What the log should say, from a replay of its batches (offset 0 on).
fn replay(log: &Log) -> (Vec<AbortedTxn>, Vec<OpenTxn>) {
    let mut open: BTreeMap<i64, u64> = BTreeMap::new();
    let mut aborted = Vec::new();
    for (_, bytes) in read_all(log, 0).unwrap() {
        let header = BatchHeader::parse(&bytes, 0).unwrap();
        let (producer_id, base) = (header.producer_id(), header.base_offset() as u64);
        if producer_id < 0 || !header.is_transactional() {
            continue;
        }
        if !header.is_control() {
            open.entry(producer_id).or_insert(base);
            continue;
        }
        let Some(first_offset) = open.remove(&producer_id) else {
            continue;
        };
        if batch::control_type(&bytes) == Some(ControlType::Abort) {
            aborted.push(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: base,
                last_stable_offset: open.values().min().map_or(base + 1, |&f| f),
            });
        }
    }
    let mut open: Vec<OpenTxn> = open
        .into_iter()
        .map(|(producer_id, first_offset)| OpenTxn {
            producer_id,
            first_offset,
        })
        .collect();
    open.sort_by_key(|t| (t.first_offset, t.producer_id));
    (aborted, open)
}

fn check(log: &Log, context: &str) {
    let (aborted, open) = replay(log);
    assert_eq!(
        log.aborted_transactions(0, u64::MAX),
        aborted,
        "aborted transactions, {context}"
    );
    assert_eq!(
        log.open_transactions(),
        open,
        "open transactions, {context}"
    );
    assert_eq!(
        log.first_unstable_offset(u64::MAX),
        open.first().map(|t| t.first_offset),
        "{context}"
    );
}

#[derive(Debug, Clone)]
enum Damage {
    Remove,
    Flip(u16),
    Cut(u16),
}

#[derive(Debug, Clone)]
enum Op {
    Data {
        producer: i64,
        count: usize,
    },
    Plain,
    Marker {
        producer: i64,
        commit: bool,
    },
    Flush,
    Roll,
    CleanReopen,
    Crash(CrashMode),
    TruncateTo(u32),
    /// A clean close, a damaged index of one segment, and a reopen.
    DamageIndex {
        segment: u32,
        damage: Damage,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1i64..=4, 1usize..=4).prop_map(|(producer, count)| Op::Data { producer, count }),
        3 => Just(Op::Plain),
        5 => (1i64..=4, any::<bool>()).prop_map(|(producer, commit)| Op::Marker { producer, commit }),
        2 => Just(Op::Flush),
        2 => Just(Op::Roll),
        1 => Just(Op::CleanReopen),
        2 => prop_oneof![
            Just(CrashMode::DropUnsynced),
            any::<u64>().prop_map(|seed| CrashMode::Torn { seed }),
        ]
        .prop_map(Op::Crash),
        1 => any::<u32>().prop_map(Op::TruncateTo),
        1 => (
            any::<u32>(),
            prop_oneof![
                Just(Damage::Remove),
                any::<u16>().prop_map(Damage::Flip),
                any::<u16>().prop_map(Damage::Cut),
            ]
        )
            .prop_map(|(segment, damage)| Op::DamageIndex { segment, damage }),
    ]
}

fn damage(storage: &SimStorage, path: &Path, damage: &Damage) {
    let Some(mut bytes) = storage.contents(path) else {
        return;
    };
    match damage {
        Damage::Remove => storage.remove(path).unwrap(),
        Damage::Flip(at) if !bytes.is_empty() => {
            let at = usize::from(*at) % bytes.len();
            bytes[at] ^= 0x04;
            storage.set_contents(path, bytes);
        }
        Damage::Cut(len) => {
            bytes.truncate(usize::from(*len) % (bytes.len() + 1));
            storage.set_contents(path, bytes);
        }
        Damage::Flip(_) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_index_agrees_with_a_replay_of_the_log(ops in prop::collection::vec(op(), 1..60)) {
        let storage = SimStorage::new();
        let clock = Arc::new(ManualClock::new(T0));
        let config = LogConfig { segment_bytes: 700, index_interval_bytes: 128, ..small_config() };
        let mut log = Some(open(&storage, &config, &clock));
        for (step, op) in ops.iter().enumerate() {
            let current = log.as_ref().unwrap();
            match op {
                Op::Data { producer, count } => {
                    current.append(&txn_batch(*producer, *count), 0).unwrap();
                }
                Op::Plain => {
                    current.append(&BatchBuilder::new(2).build(), 0).unwrap();
                }
                Op::Marker { producer, commit } => {
                    current.append(&marker(*producer, *commit), 0).unwrap();
                }
                Op::Flush => current.flush().unwrap(),
                Op::Roll => current.roll().unwrap(),
                Op::CleanReopen => {
                    log.take().unwrap().close().unwrap();
                    log = Some(open(&storage, &config, &clock));
                }
                Op::Crash(mode) => {
                    storage.crash(*mode);
                    drop(log.take());
                    log = Some(open(&storage, &config, &clock));
                }
                Op::TruncateTo(sel) => {
                    let end = current.log_end_offset();
                    current.truncate_to(u64::from(*sel) % (end + 1)).unwrap();
                }
                Op::DamageIndex { segment, damage: how } => {
                    let bases = current.segment_base_offsets();
                    let base = bases[*segment as usize % bases.len()];
                    log.take().unwrap().close().unwrap();
                    damage(&storage, &segment_path(base, "txnindex"), how);
                    log = Some(open(&storage, &config, &clock));
                }
            }
            check(log.as_ref().unwrap(), &format!("after step {step}: {op:?}"));
        }
        // And once more from whatever is on disk.
        log.take().unwrap().close().unwrap();
        check(&open(&storage, &config, &clock), "after a final reopen");
    }
}

/// Producer 1's transaction spans three segments and aborts; producer 2
/// commits in between.
fn spanning_log(storage: &SimStorage, clock: &Arc<ManualClock>, config: &LogConfig) -> Log {
    let log = open(storage, config, clock);
    log.append(&txn_batch(1, 3), 0).unwrap(); // 0..=2
    log.roll().unwrap();
    log.append(&txn_batch(2, 2), 0).unwrap(); // 3..=4
    log.append(&txn_batch(1, 1), 0).unwrap(); // 5
    log.append(&marker(2, true), 0).unwrap(); // 6
    log.roll().unwrap();
    log.append(&BatchBuilder::new(1).build(), 0).unwrap(); // 7
    log.append(&marker(1, false), 0).unwrap(); // 8
    log.append(&txn_batch(3, 1), 0).unwrap(); // 9, still open
    log
}

const SPANNING_ABORT: AbortedTxn = AbortedTxn {
    producer_id: 1,
    first_offset: 0,
    last_offset: 8,
    last_stable_offset: 9,
};

#[test]
fn a_transaction_spanning_segments_is_indexed_with_its_first_offset() {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let config = small_config();
    let log = spanning_log(&storage, &clock, &config);
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 7]);
    assert_eq!(log.aborted_transactions(0, 10), vec![SPANNING_ABORT]);
    // Overlap: the marker at or after `from`, the first batch before the
    // bound.
    assert_eq!(log.aborted_transactions(8, 9), vec![SPANNING_ABORT]);
    assert_eq!(log.aborted_transactions(9, 10), vec![]);
    assert_eq!(log.aborted_transactions(3, 0), vec![]);
    assert_eq!(log.open_transaction(3), Some(9));
    assert_eq!(log.open_transaction(1), None);
    // The marker at 8 is above a high watermark of 8: producer 1's
    // transaction is not stable yet.
    assert_eq!(log.first_unstable_offset(8), Some(0));
    assert_eq!(log.first_unstable_offset(9), Some(9));

    // The segment holding the marker knows the transaction was open at its
    // base, so losing the others' indexes loses nothing.
    log.close().unwrap();
    for base in [0, 3] {
        storage.remove(&segment_path(base, "txnindex")).unwrap();
    }
    let log = open(&storage, &config, &clock);
    assert_eq!(log.aborted_transactions(0, 10), vec![SPANNING_ABORT]);
    assert_eq!(log.open_transaction(3), Some(9));

    // Losing the marker's segment's index too: rebuilt by replaying from
    // the first segment.
    log.close().unwrap();
    storage.remove(&segment_path(7, "txnindex")).unwrap();
    let log = open(&storage, &config, &clock);
    assert_eq!(log.aborted_transactions(0, 10), vec![SPANNING_ABORT]);
    // ...and written again, so the next open reads it.
    assert!(storage.exists(&segment_path(7, "txnindex")));
}

#[test]
fn truncation_below_a_marker_reopens_its_transaction() {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let config = small_config();
    let log = spanning_log(&storage, &clock, &config);
    log.truncate_to(8).unwrap();
    assert_eq!(log.aborted_transactions(0, 10), vec![]);
    assert_eq!(log.open_transaction(1), Some(0));
    assert_eq!(log.first_unstable_offset(8), Some(0));
    // A follower copying the leader's marker again indexes it again.
    log.append(&marker(1, false), 0).unwrap();
    assert_eq!(log.aborted_transactions(0, 10), vec![SPANNING_ABORT]);
    log.close().unwrap();
    let log = open(&storage, &config, &clock);
    assert_eq!(log.aborted_transactions(0, 10), vec![SPANNING_ABORT]);
}

#[test]
fn retention_deletes_the_index_with_its_segment() {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        file_delete_delay_ms: 0,
        ..small_config()
    };
    let log = spanning_log(&storage, &clock, &config);
    log.roll().unwrap();
    log.delete_records_before(10).unwrap();
    log.enforce_retention(u64::MAX).unwrap();
    log.remove_deleted_files();
    assert_eq!(log.segment_base_offsets(), vec![10]);
    for base in [0, 3, 7] {
        assert!(!storage.exists(&segment_path(base, "txnindex")), "{base}");
    }
    assert_eq!(log.aborted_transactions(0, u64::MAX), vec![]);
    // Producer 3's transaction is still open; its first offset is below
    // the log start now.
    assert_eq!(log.open_transaction(3), Some(9));
}

#[test]
fn a_log_from_before_transactions_gets_its_indexes() {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let config = small_config();
    let log = spanning_log(&storage, &clock, &config);
    log.close().unwrap();
    for base in [0, 3, 7] {
        storage.remove(&segment_path(base, "txnindex")).unwrap();
    }
    storage.set_contents(&Path::new(DIR).join("clean-shutdown"), Vec::new());
    let log = open(&storage, &config, &clock);
    assert_eq!(log.aborted_transactions(0, 10), vec![SPANNING_ABORT]);
    assert_eq!(log.open_transaction(3), Some(9));
}

fn keyed_txn(producer_id: i64, sequence: i32, records: &[(&str, &str)]) -> Vec<u8> {
    let mut batch = weir_log::testing::KeyedBatch::new()
        .producer(producer_id, 0, sequence)
        .transactional();
    for (key, value) in records {
        batch = batch.record(Some(key.as_bytes()), Some(value.as_bytes()));
    }
    batch.build()
}

fn keyed(records: &[(&str, &str)]) -> Vec<u8> {
    let mut batch = weir_log::testing::KeyedBatch::new();
    for (key, value) in records {
        batch = batch.record(Some(key.as_bytes()), Some(value.as_bytes()));
    }
    batch.build()
}

/// (offset, key, value) of every data record, and the offsets of the
/// control batches, from offset 0.
fn contents(log: &Log) -> (Vec<(u64, String, String)>, Vec<u64>) {
    let mut records = Vec::new();
    let mut markers = Vec::new();
    for (base, bytes) in read_all(log, 0).unwrap() {
        let header = BatchHeader::parse(&bytes, 0).unwrap();
        if header.is_control() {
            markers.push(base);
            continue;
        }
        let mut buf = bytes::Bytes::from(bytes);
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
        for r in set.records {
            let text = |b: Option<bytes::Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
            records.push((r.offset as u64, text(r.key), text(r.value)));
        }
    }
    (records, markers)
}

#[test]
fn compaction_removes_aborted_records_then_their_markers() {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        cleanup_policy: weir_log::CleanupPolicy::COMPACT,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 60_000,
        ..small_config()
    };
    let log = open(&storage, &config, &clock);
    log.append(&keyed(&[("k1", "v1")]), 0).unwrap(); // 0
    log.append(&keyed_txn(1, 0, &[("k1", "aborted"), ("k2", "aborted")]), 0)
        .unwrap(); // 1..=2
    log.append(&keyed_txn(2, 0, &[("k3", "committed")]), 0)
        .unwrap(); // 3
    log.append(&marker(1, false), 0).unwrap(); // 4
    log.append(&marker(2, true), 0).unwrap(); // 5
    log.append(&keyed(&[("k4", "v4")]), 0).unwrap(); // 6
    log.roll().unwrap();
    let aborted = log.aborted_transactions(0, 7);
    assert_eq!(aborted.len(), 1);

    let mut cleaner = weir_log::Cleaner::new(weir_log::CleanerConfig::default());
    let stats = cleaner.clean(&log, u64::MAX).unwrap();
    assert_eq!(stats.aborted_batches_removed, 1);
    // The aborted "k1" no longer hides the committed one; both markers
    // stay for now (the abort's for delete.retention.ms).
    let expected = vec![
        (0, "k1".into(), "v1".into()),
        (3, "k3".into(), "committed".into()),
        (6, "k4".into(), "v4".into()),
    ];
    assert_eq!(contents(&log), (expected.clone(), vec![4, 5]));
    assert_eq!(log.aborted_transactions(0, 7), aborted);
    assert!(log.cleanable(u64::MAX).is_some_and(|c| !c.tombstones_due));

    // Past the horizon the abort marker goes, with its index entry; the
    // commit marker stays while its transaction's record does.
    clock.advance(60_000);
    assert!(log.cleanable(u64::MAX).unwrap().needs_cleaning());
    let stats = cleaner.clean(&log, u64::MAX).unwrap();
    assert_eq!(stats.markers_removed, 1);
    assert_eq!(contents(&log), (expected.clone(), vec![5]));
    assert_eq!(log.aborted_transactions(0, 7), vec![]);
    assert!(log.open_transactions().is_empty());

    // Once "k3" is superseded, the commit marker follows.
    log.append(&keyed(&[("k3", "later")]), 0).unwrap(); // 7
    log.roll().unwrap();
    cleaner.clean(&log, u64::MAX).unwrap();
    clock.advance(60_000);
    cleaner.clean(&log, u64::MAX).unwrap();
    let (records, markers) = contents(&log);
    assert_eq!(markers, Vec::<u64>::new());
    assert_eq!(records.last(), Some(&(7, "k3".into(), "later".into())));

    // What is on disk agrees, read as it is or rebuilt.
    log.close().unwrap();
    let log = open(&storage, &config, &clock);
    assert_eq!(log.aborted_transactions(0, 8), vec![]);
    assert!(log.open_transactions().is_empty());
    check(&log, "after compaction and a reopen");
}

#[test]
fn compaction_leaves_undecided_transactions_alone() {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let config = LogConfig {
        cleanup_policy: weir_log::CleanupPolicy::COMPACT,
        min_cleanable_dirty_ratio: 0.0,
        ..small_config()
    };
    let log = open(&storage, &config, &clock);
    log.append(&keyed(&[("k", "v0")]), 0).unwrap(); // 0
    log.roll().unwrap();
    log.append(&keyed_txn(1, 0, &[("k", "open")]), 0).unwrap(); // 1
    log.roll().unwrap();
    log.append(&keyed(&[("k", "v2")]), 0).unwrap(); // 2
    log.roll().unwrap();
    // Nothing from the open transaction's first offset on is cleanable.
    let cleanable = log.cleanable(u64::MAX).unwrap();
    assert_eq!(cleanable.first_uncleanable_offset, 1);
    let mut cleaner = weir_log::Cleaner::new(weir_log::CleanerConfig::default());
    cleaner.clean(&log, u64::MAX).unwrap();
    let (records, _) = contents(&log);
    assert_eq!(records.len(), 3, "{records:?}");
}
