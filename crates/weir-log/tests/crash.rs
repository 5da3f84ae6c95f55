//! Crash tests: random appends, flushes, rolls, clean reopens, DeleteRecords
//! and truncations on the in-memory storage, cut off by a simulated power
//! loss (unsynced data dropped, or torn into garbage) at random points —
//! including in the middle of an append. After every crash the reopened log
//! must be a prefix of what was appended (same offsets, same bytes) holding
//! at least everything flushed, read back offset by offset, and take appends
//! at the offset where it ends.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use weir_log::sim::{CrashMode, SimStorage};
use weir_log::{Log, LogConfig, ManualClock};

use common::*;

#[derive(Debug, Clone)]
struct BatchSpec {
    count: usize,
    value_size: usize,
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        batches: Vec<BatchSpec>,
        new_epoch: bool,
    },
    Flush,
    /// Syncs segments sealed since the last flush (nothing is due).
    FlushIfDue,
    Roll,
    CleanReopen,
    DeleteRecordsBefore(u32),
    TruncateTo(u32),
    Crash(CrashMode),
    /// An append cut off by ENOSPC after `space` bytes, then a crash.
    CrashMidAppend {
        batches: Vec<BatchSpec>,
        new_epoch: bool,
        space: u16,
        mode: CrashMode,
    },
}

fn batch_spec() -> impl Strategy<Value = BatchSpec> {
    (1usize..=5, prop_oneof![3 => 1usize..64, 1 => 64usize..400])
        .prop_map(|(count, value_size)| BatchSpec { count, value_size })
}

fn crash_mode() -> impl Strategy<Value = CrashMode> {
    prop_oneof![
        Just(CrashMode::DropUnsynced),
        any::<u64>().prop_map(|seed| CrashMode::Torn { seed }),
    ]
}

fn batches() -> impl Strategy<Value = Vec<BatchSpec>> {
    prop::collection::vec(batch_spec(), 1..=3)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (batches(), prop::bool::weighted(0.15))
            .prop_map(|(batches, new_epoch)| Op::Append { batches, new_epoch }),
        3 => Just(Op::Flush),
        2 => Just(Op::FlushIfDue),
        2 => Just(Op::Roll),
        1 => Just(Op::CleanReopen),
        1 => any::<u32>().prop_map(Op::DeleteRecordsBefore),
        1 => any::<u32>().prop_map(Op::TruncateTo),
        2 => crash_mode().prop_map(Op::Crash),
        2 => (batches(), any::<bool>(), 0u16..3000, crash_mode()).prop_map(
            |(batches, new_epoch, space, mode)| Op::CrashMidAppend { batches, new_epoch, space, mode }
        ),
    ]
}

fn config() -> impl Strategy<Value = LogConfig> {
    (1024u64..=4096, 64u64..=512).prop_map(|(segment_bytes, index_interval_bytes)| LogConfig {
        segment_bytes,
        index_interval_bytes,
        retention_ms: -1,
        ..LogConfig::default()
    })
}

fn pick(sel: u32, lo: u64, hi: u64) -> u64 {
    lo + u64::from(sel) % (hi - lo + 1)
}

struct Harness {
    storage: SimStorage,
    clock: Arc<ManualClock>,
    config: LogConfig,
    log: Option<Log>,
    /// Every acknowledged batch still in the log, oldest first.
    batches: Vec<Stored>,
    log_start: u64,
    log_end: u64,
    /// The log end at the last successful flush: what a crash must keep.
    flushed_end: u64,
    epoch: i32,
    next_ts: i64,
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
            log: Some(log),
            batches: Vec::new(),
            log_start: 0,
            log_end: 0,
            flushed_end: 0,
            epoch: 0,
            next_ts: T0,
        }
    }

    fn log(&self) -> &Log {
        self.log.as_ref().unwrap()
    }

    /// The producer bytes and the stored form of `specs` appended at the log end.
    fn prepare(&mut self, specs: &[BatchSpec], new_epoch: bool) -> (Vec<u8>, Vec<Stored>) {
        if new_epoch {
            self.epoch += 1;
        }
        let mut records = Vec::new();
        let mut stored = Vec::new();
        let mut base = self.log_end;
        for spec in specs {
            let ts = self.next_ts;
            self.next_ts += 10;
            let producer = producer_batch(spec.count, spec.value_size, ts);
            let batch = Stored::new(&producer, base, self.epoch, ts);
            base = batch.last + 1;
            records.extend_from_slice(&producer);
            stored.push(batch);
        }
        (records, stored)
    }

    fn append(&mut self, specs: &[BatchSpec], new_epoch: bool) {
        let (records, stored) = self.prepare(specs, new_epoch);
        let info = self.log().append(&records, self.epoch).unwrap();
        assert_eq!(info.base_offset, self.log_end);
        self.log_end = stored.last().unwrap().last + 1;
        assert_eq!(info.last_offset, self.log_end - 1);
        self.batches.extend(stored);
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append { batches, new_epoch } => self.append(batches, *new_epoch),
            Op::Flush => {
                self.log().flush().unwrap();
                self.flushed_end = self.log_end;
            }
            Op::FlushIfDue => self.log().flush_if_due().unwrap(),
            Op::Roll => self.log().roll().unwrap(),
            Op::CleanReopen => {
                self.log.take().unwrap().close().unwrap();
                self.flushed_end = self.log_end;
                self.log = Some(open(&self.storage, &self.config, &self.clock));
                self.check_epochs();
            }
            Op::DeleteRecordsBefore(sel) => {
                let offset = pick(*sel, self.log_start, self.log_end);
                self.log().delete_records_before(offset).unwrap();
                self.log_start = self.log_start.max(offset);
            }
            Op::TruncateTo(sel) => {
                let offset = pick(*sel, self.log_start, self.log_end);
                self.log().truncate_to(offset).unwrap();
                if offset < self.log_end {
                    let cut = self.batches.iter().position(|b| b.last >= offset).unwrap();
                    self.log_end = self.batches[cut].base;
                    self.batches.truncate(cut);
                    self.log_start = self.log_start.min(self.log_end);
                    self.flushed_end = self.flushed_end.min(self.log_end);
                }
            }
            Op::Crash(mode) => self.crash_and_recover(*mode, &[]),
            Op::CrashMidAppend {
                batches,
                new_epoch,
                space,
                mode,
            } => {
                let (records, stored) = self.prepare(batches, *new_epoch);
                self.storage.set_space_left(Some(u64::from(*space)));
                let result = self.log().append(&records, self.epoch);
                self.storage.set_space_left(None);
                let maybe = match result {
                    Ok(_) => {
                        self.log_end = stored.last().unwrap().last + 1;
                        self.batches.extend(stored);
                        Vec::new()
                    }
                    Err(_) => stored,
                };
                self.crash_and_recover(*mode, &maybe);
            }
        }
        // What the log says is durable must survive a crash.
        let durable = self.log().durable_offset();
        assert!(
            durable <= self.log_end,
            "durable offset {durable} past the end"
        );
        self.flushed_end = self.flushed_end.max(durable);
    }

    /// The leader-epoch cache tells where each epoch of the batches kept
    /// starts (the first one at the log start), whether its file or the
    /// batches recovery scanned told it.
    fn check_epochs(&self) {
        let mut expected: Vec<(i32, u64)> = Vec::new();
        for batch in &self.batches {
            let epoch = i32::from_be_bytes(batch.bytes[12..16].try_into().unwrap());
            if expected.last().is_none_or(|&(latest, _)| epoch > latest) {
                expected.push((epoch, batch.base));
            }
        }
        // As DeleteRecords left them, then as open cut them to the log end.
        let log_start = self.log().log_start_offset();
        let move_start = |expected: &mut Vec<(i32, u64)>| {
            if let Some(covering) = expected.iter().rposition(|&(_, start)| start <= log_start) {
                expected.drain(..covering);
                expected[0].1 = log_start;
            }
        };
        move_start(&mut expected);
        expected.retain(|&(_, start)| start < self.log().log_end_offset());
        move_start(&mut expected);
        let cached: Vec<(i32, u64)> = self
            .log()
            .epoch_entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(cached, expected, "leader epochs of {:?}", self.batches);
    }

    /// Crashes, reopens and checks the recovered log; `maybe` are batches of
    /// a failed append, which may or may not have survived.
    fn crash_and_recover(&mut self, mode: CrashMode, maybe: &[Stored]) {
        self.storage.crash(mode);
        drop(self.log.take());
        let log = open(&self.storage, &self.config, &self.clock);

        let log_start = log.log_start_offset();
        assert_eq!(log_start, self.log_start, "DeleteRecords is durable");
        let candidates: Vec<Stored> = self.batches.iter().chain(maybe).cloned().collect();
        let visible: Vec<Stored> = candidates
            .iter()
            .filter(|b| b.last >= log_start)
            .cloned()
            .collect();
        let got = read_all(&log, log_start).unwrap();
        assert!(
            got.len() <= visible.len() && got == as_pairs(&visible[..got.len()]),
            "recovered log is not a prefix of what was appended: {:?} vs {visible:?}",
            got.iter().map(|b| b.0).collect::<Vec<_>>()
        );
        let kept = &visible[..got.len()];
        let log_end = log.log_end_offset();
        assert_eq!(log_end, kept.last().map_or(log_start, |b| b.last + 1));
        assert!(
            log_end >= self.flushed_end,
            "lost flushed data: log end {log_end}, flushed up to {}",
            self.flushed_end
        );
        // Every offset reads back as the batch holding it.
        for offset in log_start..log_end {
            let slice = log.read(offset, 1, u64::MAX).unwrap();
            let batch = split(&slice.to_bytes().unwrap());
            let holder = kept.iter().find(|b| b.last >= offset).unwrap();
            assert_eq!(batch, vec![(holder.base, holder.bytes.clone())]);
        }

        self.batches = candidates
            .iter()
            .filter(|b| b.last < log_start)
            .chain(kept)
            .cloned()
            .collect();
        self.log_end = log_end;
        self.log = Some(log);
        self.check_epochs();
        // Appends continue where the recovered log ends.
        self.append(
            &[BatchSpec {
                count: 2,
                value_size: 10,
            }],
            false,
        );
        assert_eq!(
            read_all(self.log(), log_start).unwrap().len(),
            got.len() + 1
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn recovery_keeps_a_prefix_with_everything_flushed(
        config in config(),
        ops in prop::collection::vec(op(), 1..50),
    ) {
        let mut h = Harness::new(config);
        for op in &ops {
            h.apply(op);
        }
        h.crash_and_recover(CrashMode::DropUnsynced, &[]);
    }
}

fn batch(count: usize) -> BatchSpec {
    BatchSpec {
        count,
        value_size: 100,
    }
}

#[test]
fn crash_between_a_roll_and_the_next_flush() {
    for mode in [
        CrashMode::DropUnsynced,
        CrashMode::Torn { seed: 1 },
        CrashMode::Torn { seed: 2 },
        CrashMode::Torn { seed: 3 },
    ] {
        let mut h = Harness::new(small_config());
        for _ in 0..10 {
            h.append(&[batch(3)], false);
        }
        h.apply(&Op::Flush);
        h.append(&[batch(2), batch(1)], false);
        h.apply(&Op::Roll);
        h.append(&[batch(4)], false);
        h.crash_and_recover(mode, &[]);
    }
}

/// A new segment's directory entry kept by a crash that tore the previous
/// segment's tail: the recovered log must not skip the offsets that were
/// lost.
#[test]
fn crash_after_a_roll_whose_new_segment_became_durable_first() {
    for seed in 0..50 {
        let mut h = Harness::new(small_config());
        for _ in 0..5 {
            h.append(&[batch(3)], false);
        }
        h.apply(&Op::Flush);
        h.append(&[batch(2)], false);
        h.apply(&Op::Roll);
        h.append(&[batch(1)], true);
        h.crash_and_recover(CrashMode::Torn { seed }, &[]);
    }
}

/// The clean-shutdown marker of the previous close must not make recovery
/// trust a tail appended after the reopen.
#[test]
fn crash_after_a_clean_reopen_and_unflushed_appends() {
    for seed in 0..20 {
        let mut h = Harness::new(small_config());
        for _ in 0..6 {
            h.append(&[batch(2)], false);
        }
        h.apply(&Op::CleanReopen);
        h.append(&[batch(3), batch(1)], false);
        h.append(&[batch(2)], false);
        h.crash_and_recover(CrashMode::Torn { seed }, &[]);
    }
}

#[test]
fn crash_in_the_middle_of_an_append() {
    let mut h = Harness::new(small_config());
    for _ in 0..4 {
        h.append(&[batch(3)], false);
    }
    h.apply(&Op::Flush);
    for space in [0, 30, 61, 200, 500] {
        for mode in [CrashMode::DropUnsynced, CrashMode::Torn { seed: space }] {
            h.apply(&Op::CrashMidAppend {
                batches: vec![batch(3), batch(5)],
                new_epoch: false,
                space: space as u16,
                mode,
            });
        }
    }
}

/// DeleteRecords is durable when it returns, even past the flushed data: a
/// crash that loses the records below the new log start must not move the
/// log start back, nor let later appends reuse deleted offsets.
#[test]
fn delete_records_past_the_flushed_end_survives_a_crash() {
    let mut h = Harness::new(small_config());
    for _ in 0..4 {
        h.append(&[batch(3)], false);
    }
    h.apply(&Op::Flush);
    for _ in 0..4 {
        h.append(&[batch(3)], false);
    }
    let start = h.log_end - 2;
    h.log().delete_records_before(start).unwrap();
    h.log_start = start;
    h.crash_and_recover(CrashMode::DropUnsynced, &[]);
    assert_eq!(h.log().log_start_offset(), start);
    // A clean reopen after more appends keeps the same start.
    h.apply(&Op::CleanReopen);
    assert_eq!(h.log().log_start_offset(), start);
    assert_eq!(h.log().log_end_offset(), h.log_end);
}
