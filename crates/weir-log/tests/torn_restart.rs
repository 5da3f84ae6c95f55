//! A clean start that finds a torn batch in a flushed segment, then appends
//! and a crash. Recovery must not take the segment found torn for an
//! unflushed tail and cut the log there, or everything appended since the
//! start would go with it. After the crash the log must hold everything
//! appended since the start (process crash) or everything synced (power
//! loss), read back a prefix of what was appended, and never serve the torn
//! batch.

mod common;

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use weir_log::sim::{CrashMode, SimStorage};
use weir_log::storage::Storage;
use weir_log::{Log, LogConfig, LogError, ManualClock, RECOVERY_POINT_FILE};

use common::*;

/// How a flushed segment is damaged while the log is closed.
#[derive(Debug, Clone, Copy)]
enum Tear {
    /// The file ends inside its last batch: `keep` (reduced below the
    /// batch's size, at least 1) bytes of it remain.
    CutLastBatch { keep: u16 },
    /// `len` bytes of `byte` follow the last batch (never a valid header:
    /// the length field they make is 0 or far past the end of the file).
    Garbage { len: u8, byte: u8 },
}

#[derive(Debug, Clone, Copy)]
enum Crash {
    /// kill -9: everything written survives.
    Process,
    /// Power loss: what was synced survives, the rest as the mode says.
    Power(CrashMode),
}

#[derive(Debug, Clone)]
enum Step {
    Append(Vec<(usize, usize)>),
    /// What the broker's scheduler calls every half second.
    FlushIfDue,
    Flush,
}

/// A log closed cleanly and then torn, and what it must serve.
struct Torn {
    storage: SimStorage,
    clock: Arc<ManualClock>,
    config: LogConfig,
    /// Batches appended before the close that the tear left whole.
    kept: Vec<Stored>,
    /// The batch the tear damaged, if any: never served.
    torn: Option<Stored>,
    /// The log end the clean start finds: where appends continue.
    start_end: u64,
    next_ts: i64,
}

impl Torn {
    /// Appends `batches` (records, value size), closes the log cleanly and
    /// tears the segment `from_last` segments before the last one (the
    /// oldest if there are fewer). `forget_recovery_point` removes the
    /// recovery-point file too, as a lost hint may: recovery then scans
    /// from the first segment.
    fn new(
        config: LogConfig,
        batches: &[(usize, usize)],
        from_last: usize,
        tear: Tear,
        forget_recovery_point: bool,
    ) -> Self {
        let storage = SimStorage::new();
        let clock = Arc::new(ManualClock::new(T0));
        let log = open(&storage, &config, &clock);
        let mut next_ts = T0;
        let mut stored = Vec::new();
        for &(count, value_size) in batches {
            stored.push(append(&log, count, value_size, &mut next_ts));
        }
        let segments = log.segment_base_offsets();
        let log_end = log.log_end_offset();
        log.close().unwrap();

        let which = segments.len() - 1 - from_last.min(segments.len() - 1);
        let base = segments[which];
        let end = segments.get(which + 1).copied().unwrap_or(u64::MAX);
        let in_segment: Vec<usize> = (0..stored.len())
            .filter(|&i| stored[i].base >= base && stored[i].base < end)
            .collect();
        let path = segment_path(base, "log");
        let mut data = storage.contents(&path).unwrap();
        let mut torn = None;
        match tear {
            Tear::CutLastBatch { keep } => {
                let last = *in_segment.last().expect("a segment holds a batch");
                let size = stored[last].bytes.len();
                data.truncate(data.len() - size + 1 + usize::from(keep) % (size - 1));
                torn = Some(stored.remove(last));
            }
            Tear::Garbage { len, byte } => {
                let byte = if byte == 2 { 3 } else { byte };
                data.extend(std::iter::repeat_n(byte, usize::from(len).max(1)));
            }
        }
        storage.set_contents(&path, data);
        let recovery_point = Path::new(DIR).join(RECOVERY_POINT_FILE);
        if forget_recovery_point && storage.exists(&recovery_point) {
            storage.remove(&recovery_point).unwrap();
        }
        // A cut in the last segment takes the log end back to the torn batch.
        let start_end = match &torn {
            Some(batch) if which + 1 == segments.len() => batch.base,
            _ => log_end,
        };
        Self {
            storage,
            clock,
            config,
            kept: stored,
            torn,
            start_end,
            next_ts,
        }
    }

    fn open(&self) -> Log {
        open(&self.storage, &self.config, &self.clock)
    }

    /// Runs `steps` on `log`; returns what was appended and what the log
    /// said was durable before the crash.
    fn run(&mut self, log: &Log, steps: &[Step]) -> (Vec<Stored>, u64) {
        let mut appended = Vec::new();
        for step in steps {
            match step {
                Step::Append(batches) => {
                    for &(count, value_size) in batches {
                        appended.push(append(log, count, value_size, &mut self.next_ts));
                    }
                }
                Step::FlushIfDue => log.flush_if_due().unwrap(),
                Step::Flush => log.flush().unwrap(),
            }
        }
        (appended, log.durable_offset())
    }

    fn crash(&self, log: Log, crash: Crash) {
        if let Crash::Power(mode) = crash {
            self.storage.crash(mode);
        }
        drop(log);
    }

    /// Checks the reopened log: the batches from before the start as they
    /// were, the torn one never served, and a prefix of `appended` holding
    /// at least everything below `must_keep`. Returns its length.
    fn check(&self, log: &Log, appended: &[Stored], must_keep: u64) -> usize {
        for batch in &self.kept {
            let got = split(
                &log.read(batch.base, 1, u64::MAX)
                    .unwrap()
                    .to_bytes()
                    .unwrap(),
            );
            assert_eq!(
                got,
                as_pairs(std::slice::from_ref(batch)),
                "batch at {}",
                batch.base
            );
        }
        if let Some(torn) = self.torn.as_ref().filter(|t| t.base < self.start_end) {
            for offset in [torn.base, torn.last] {
                let result = log.read(offset, usize::MAX, u64::MAX);
                assert!(
                    matches!(result, Err(LogError::Corrupt { .. })),
                    "read({offset}) of the torn batch: {:?}",
                    result.map(|s| s.to_bytes().map(|b| split(&b).len()))
                );
            }
        }
        let got = read_all(log, self.start_end).unwrap();
        assert!(
            got.len() <= appended.len() && got == as_pairs(&appended[..got.len()]),
            "not a prefix of what was appended since the start: {:?} vs {appended:?}",
            got.iter().map(|b| b.0).collect::<Vec<_>>()
        );
        let log_end = log.log_end_offset();
        let expected_end = match got.len() {
            0 => self.start_end,
            n => appended[n - 1].last + 1,
        };
        assert_eq!(log_end, expected_end);
        assert!(
            log_end >= must_keep,
            "lost records appended since the start: log end {log_end}, expected at least {must_keep} (start {})",
            self.start_end
        );
        got.len()
    }
}

fn append(log: &Log, count: usize, value_size: usize, next_ts: &mut i64) -> Stored {
    let ts = *next_ts;
    *next_ts += 10;
    let producer = producer_batch(count, value_size, ts);
    let info = log.append(&producer, 0).unwrap();
    Stored::new(&producer, info.base_offset, 0, ts)
}

/// Clean start on a torn log, `steps`, crash, reopen, check; then appends
/// continue after the recovered end.
fn torn_start_then_crash(mut torn: Torn, steps: &[Step], crash: Crash) {
    let log = torn.open();
    assert_eq!(log.log_end_offset(), torn.start_end);
    torn.check(&log, &[], 0);
    let (appended, durable) = torn.run(&log, steps);
    let end = appended.last().map_or(torn.start_end, |b| b.last + 1);
    assert_eq!(log.log_end_offset(), end);
    torn.crash(log, crash);
    let must_keep = match crash {
        Crash::Process => end,
        Crash::Power(_) => durable,
    };
    let log = torn.open();
    let kept = torn.check(&log, &appended, must_keep);
    let more = append(&log, 2, 10, &mut torn.next_ts);
    assert_eq!(more.base, log.log_end_offset() - 2);
    let mut expected = appended[..kept].to_vec();
    expected.push(more);
    torn.check(&log, &expected, 0);
}

const TEARS: [Tear; 4] = [
    Tear::CutLastBatch { keep: 30 },
    Tear::CutLastBatch { keep: 200 },
    Tear::Garbage { len: 90, byte: 7 },
    Tear::Garbage { len: 5, byte: 0 },
];

const CRASHES: [Crash; 4] = [
    Crash::Process,
    Crash::Power(CrashMode::DropUnsynced),
    Crash::Power(CrashMode::Torn { seed: 1 }),
    Crash::Power(CrashMode::Torn { seed: 2 }),
];

/// The reported loss: the torn segment was the active one at the close, the
/// broker then appended enough to roll several segments with its default
/// flush policy (only rolled segments are synced, by `flush_if_due`), and
/// was killed. The crash comes after every append in turn.
#[test]
fn records_appended_after_a_clean_start_on_a_torn_active_segment_survive_a_crash() {
    for tear in TEARS {
        for crash in CRASHES {
            for appends in 1..=24 {
                let torn = Torn::new(small_config(), &[(3, 100); 12], 0, tear, false);
                let steps: Vec<Step> = (0..appends)
                    .flat_map(|_| [Step::Append(vec![(3, 100)]), Step::FlushIfDue])
                    .collect();
                torn_start_then_crash(torn, &steps, crash);
            }
        }
    }
}

/// The same with the torn segment an older one, with the recovery-point
/// hint kept and lost (then recovery would scan from the first segment).
#[test]
fn records_appended_after_a_clean_start_on_a_torn_older_segment_survive_a_crash() {
    for tear in TEARS {
        for crash in CRASHES {
            for forget_recovery_point in [false, true] {
                for appends in 1..=16 {
                    let torn = Torn::new(
                        small_config(),
                        &[(3, 100); 16],
                        2,
                        tear,
                        forget_recovery_point,
                    );
                    let steps: Vec<Step> = (0..appends)
                        .flat_map(|_| [Step::Append(vec![(3, 100)]), Step::FlushIfDue])
                        .collect();
                    torn_start_then_crash(torn, &steps, crash);
                }
            }
        }
    }
}

fn batches(max: usize) -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec(
        (1usize..=5, prop_oneof![3 => 1usize..64, 1 => 64usize..400]),
        1..max,
    )
}

fn tear() -> impl Strategy<Value = Tear> {
    prop_oneof![
        any::<u16>().prop_map(|keep| Tear::CutLastBatch { keep }),
        (any::<u8>(), any::<u8>()).prop_map(|(len, byte)| Tear::Garbage { len, byte }),
    ]
}

fn crash() -> impl Strategy<Value = Crash> {
    prop_oneof![
        Just(Crash::Process),
        Just(Crash::Power(CrashMode::DropUnsynced)),
        any::<u64>().prop_map(|seed| Crash::Power(CrashMode::Torn { seed })),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => batches(4).prop_map(Step::Append),
        3 => Just(Step::FlushIfDue),
        1 => Just(Step::Flush),
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_crash_after_a_torn_tail_keeps_everything_acknowledged_since_the_start(
        config in config(),
        before in batches(40),
        from_last in 0usize..4,
        tear in tear(),
        forget_recovery_point in any::<bool>(),
        steps in prop::collection::vec(step(), 1..40),
        crash in crash(),
    ) {
        let torn = Torn::new(config, &before, from_last, tear, forget_recovery_point);
        torn_start_then_crash(torn, &steps, crash);
    }
}
