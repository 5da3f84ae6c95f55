//! Injected I/O failures: ENOSPC part-way through an append or a roll, EIO
//! on fsync and EIO on read. A failed operation reports an error and leaves
//! every acknowledged record readable; a flush that returned Ok survives a
//! crash; after a failed fsync the log refuses appends until reopened.

mod common;

use std::sync::Arc;

use weir_log::sim::{CrashMode, SimStorage};
use weir_log::{Log, LogConfig, LogError, ManualClock};

use common::*;

struct Fixture {
    storage: SimStorage,
    clock: Arc<ManualClock>,
    config: LogConfig,
    /// Acknowledged batches, oldest first.
    batches: Vec<Stored>,
    epoch: i32,
}

impl Fixture {
    /// A log with `batches` flushed batches of about 300 bytes.
    fn new(config: LogConfig, batches: usize) -> (Self, Log) {
        let storage = SimStorage::new();
        let clock = Arc::new(ManualClock::new(T0));
        let log = open(&storage, &config, &clock);
        let mut fixture = Self {
            storage,
            clock,
            config,
            batches: Vec::new(),
            epoch: 0,
        };
        for i in 0..batches {
            fixture
                .append(&log, &[(i % 3 + 1, 250 / (i % 3 + 1))])
                .unwrap();
        }
        log.flush().unwrap();
        (fixture, log)
    }

    fn open(&self) -> Log {
        open(&self.storage, &self.config, &self.clock)
    }

    /// The batches `specs` (record count, value size) as one append; on
    /// success they join the acknowledged ones, on failure they are returned.
    fn append(
        &mut self,
        log: &Log,
        specs: &[(usize, usize)],
    ) -> Result<(), (LogError, Vec<Stored>)> {
        let mut records = Vec::new();
        let mut stored = Vec::new();
        let mut base = log.log_end_offset();
        for &(count, value_size) in specs {
            let ts = T0 + 10 * (self.batches.len() + stored.len()) as i64;
            let producer = producer_batch(count, value_size, ts);
            let batch = Stored::new(&producer, base, self.epoch, ts);
            base = batch.last + 1;
            records.extend_from_slice(&producer);
            stored.push(batch);
        }
        match log.append(&records, self.epoch) {
            Ok(info) => {
                assert_eq!(info.base_offset, stored[0].base);
                self.batches.extend(stored);
                Ok(())
            }
            Err(e) => Err((e, stored)),
        }
    }

    /// The log holds exactly the acknowledged batches.
    fn check(&self, log: &Log) {
        assert_eq!(
            log.log_end_offset(),
            self.batches.last().map_or(0, |b| b.last + 1)
        );
        assert_eq!(read_all(log, 0).unwrap(), as_pairs(&self.batches));
    }

    /// After a crash: the log is a prefix of the acknowledged batches (and
    /// `maybe`) holding at least the first `durable`; the model follows it.
    fn check_prefix(&mut self, log: &Log, maybe: &[Stored], durable: usize) {
        let candidates: Vec<Stored> = self.batches.iter().chain(maybe).cloned().collect();
        let got = read_all(log, 0).unwrap();
        assert!(
            got.len() >= durable,
            "lost flushed batches: {} < {durable}",
            got.len()
        );
        assert_eq!(got, as_pairs(&candidates[..got.len()]));
        self.batches = candidates[..got.len()].to_vec();
        self.check(log);
    }

    /// Appends, rolls, flushes, a clean and an unclean reopen all work.
    fn exercise(&mut self, log: Log) {
        self.append(&log, &[(2, 40)]).unwrap();
        log.roll().unwrap();
        self.append(&log, &[(1, 40), (3, 40)]).unwrap();
        log.flush().unwrap();
        self.check(&log);
        drop(log);
        let log = self.open();
        self.check(&log);
        self.append(&log, &[(1, 10)]).unwrap();
        log.close().unwrap();
        self.check(&self.open());
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 200,
        ..small_config()
    }
}

fn is_enospc(e: &LogError) -> bool {
    match e {
        LogError::Io { source, .. } => source.raw_os_error() == Some(28),
        _ => false,
    }
}

/// ENOSPC at every point of an append that rolls (sealing the old segment's
/// index files), writes three batches and records a new leader epoch.
#[test]
fn enospc_part_way_through_an_append_is_undone() {
    let spaces = (0..200).chain((200..1300).step_by(7));
    for space in spaces {
        for new_epoch in [false, true] {
            let (mut f, log) = Fixture::new(config(), 5);
            let before = log.segment_base_offsets();
            if new_epoch {
                f.epoch += 1;
            }
            f.storage.set_space_left(Some(space));
            let result = f.append(&log, &[(3, 100), (1, 300), (2, 120)]);
            f.storage.set_space_left(None);
            let context = format!("space {space}, new epoch {new_epoch}");
            match result {
                Ok(()) => assert!(log.segment_base_offsets().len() > before.len(), "{context}"),
                Err((e, _)) => assert!(is_enospc(&e), "{context}: {e:?}"),
            }
            f.check(&log);
            f.exercise(log);
        }
    }
}

/// ENOSPC while a roll writes the sealed segment's index files: the roll
/// fails as a whole and the log keeps working.
#[test]
fn enospc_part_way_through_a_roll_is_undone() {
    let config = LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 1,
        ..small_config()
    };
    for space in 0..200 {
        let (mut f, log) = Fixture::new(config.clone(), 6);
        f.storage.set_space_left(Some(space));
        let result = log.roll();
        f.storage.set_space_left(None);
        if let Err(e) = result {
            assert!(is_enospc(&e), "space {space}: {e:?}");
            assert_eq!(log.segment_base_offsets(), vec![0]);
        }
        f.append(&log, &[(1, 10)]).unwrap();
        f.append(&log, &[(2, 10)]).unwrap();
        f.check(&log);
        f.exercise(log);
    }
}

#[test]
fn a_failed_fsync_takes_the_log_offline_for_appends_but_not_reads() {
    for roll_first in [false, true] {
        let (mut f, log) = Fixture::new(config(), 8);
        let flushed = f.batches.len();
        f.append(&log, &[(2, 30)]).unwrap();
        if roll_first {
            log.roll().unwrap();
        }
        f.append(&log, &[(1, 30), (2, 30)]).unwrap();
        f.storage.fail_syncs(true);
        let error = log.flush().unwrap_err();
        assert!(matches!(error, LogError::Io { .. }), "{error:?}");
        assert!(matches!(
            f.append(&log, &[(1, 5)]),
            Err((LogError::Offline { .. }, _))
        ));
        assert!(matches!(log.flush(), Err(LogError::Offline { .. })));
        assert!(matches!(log.roll(), Err(LogError::Offline { .. })));
        // Reads go on, of everything acknowledged.
        f.check(&log);
        f.storage.fail_syncs(false);
        assert!(matches!(
            f.append(&log, &[(1, 5)]),
            Err((LogError::Offline { .. }, _))
        ));
        f.check(&log);
        // Only a reopen, which runs recovery, brings it back.
        f.storage.crash(CrashMode::DropUnsynced);
        drop(log);
        let log = f.open();
        f.check_prefix(&log, &[], flushed);
        f.exercise(log);
    }
}

#[test]
fn a_failed_fsync_at_close_leaves_a_recoverable_log() {
    let (mut f, log) = Fixture::new(config(), 8);
    let flushed = f.batches.len();
    f.append(&log, &[(3, 30)]).unwrap();
    f.storage.fail_syncs(true);
    assert!(log.close().is_err());
    f.storage.fail_syncs(false);
    f.storage.crash(CrashMode::Torn { seed: 7 });
    let log = f.open();
    f.check_prefix(&log, &[], flushed);
    f.exercise(log);
}

/// Whatever an operation that hit a failed fsync reported, a later flush
/// that returns Ok has made everything before it durable.
#[test]
fn a_flush_that_succeeds_after_a_failed_fsync_is_durable() {
    type Step = fn(&mut Fixture, &Log) -> Result<(), LogError>;
    let steps: [(&str, Step); 5] = [
        ("truncate_to", |f, log| log.truncate_to(f.batches[2].last)),
        ("truncate_fully_and_start_at", |_, log| {
            log.truncate_fully_and_start_at(3)
        }),
        ("delete_records_before", |f, log| {
            log.delete_records_before(f.batches[3].base).map(drop)
        }),
        ("append in a new epoch", |f, log| {
            f.epoch += 1;
            f.append(log, &[(2, 20)]).map_err(|(e, _)| e)
        }),
        ("roll", |_, log| log.roll()),
    ];
    for (name, step) in steps {
        let (mut f, log) = Fixture::new(config(), 8);
        f.storage.fail_syncs(true);
        let result = step(&mut f, &log);
        f.storage.fail_syncs(false);
        if result.is_ok() {
            continue;
        }
        // The model cannot know what the failed step did; read it back.
        let now = read_all(&log, log.log_start_offset()).unwrap();
        match f.append(&log, &[(1, 11)]) {
            Err((LogError::Offline { .. }, _)) => {
                // Offline until a reopen, which must find a readable log.
                drop(log);
                let log = f.open();
                read_all(&log, log.log_start_offset()).unwrap();
                continue;
            }
            Err((e, _)) => panic!("{name}: append after the failure: {e:?}"),
            Ok(()) => {}
        }
        let appended = f.batches.last().unwrap().clone();
        match log.flush() {
            Err(LogError::Offline { .. }) => continue,
            Err(e) => panic!("{name}: flush after the failure: {e:?}"),
            Ok(()) => {}
        }
        let start = log.log_start_offset();
        f.storage.crash(CrashMode::DropUnsynced);
        drop(log);
        let log = f.open();
        let mut expected = now;
        expected.push((appended.base, appended.bytes));
        assert_eq!(read_all(&log, start).unwrap(), expected, "{name}");
    }
}

/// A truncation whose files changed before an fsync failed leaves the log
/// offline; a reopen finds it consistent.
#[test]
fn a_truncation_that_fails_half_way_takes_the_log_offline() {
    let (mut f, log) = Fixture::new(config(), 8);
    f.epoch = 1;
    f.append(&log, &[(2, 20)]).unwrap();
    log.flush().unwrap();
    let cut = f.batches.pop().unwrap().base;
    // Truncating the active segment needs no new recovery point, but the
    // leader-epoch checkpoint must drop epoch 1: that write fails.
    f.storage.fail_syncs(true);
    let result = log.truncate_to(cut);
    f.storage.fail_syncs(false);
    assert!(matches!(result, Err(LogError::Io { .. })), "{result:?}");
    assert!(matches!(
        f.append(&log, &[(1, 5)]),
        Err((LogError::Offline { .. }, _))
    ));
    f.check(&log);
    drop(log);
    let log = f.open();
    f.check(&log);
    assert_eq!(log.latest_epoch().map(|e| e.epoch), Some(0));
    f.exercise(log);
}

#[test]
fn a_failed_read_reports_an_error_and_damages_nothing() {
    let (mut f, log) = Fixture::new(config(), 12);
    f.append(&log, &[(2, 30)]).unwrap();
    let segments = log.segment_base_offsets();
    assert!(segments.len() >= 3, "{segments:?}");
    f.storage.fail_reads(true);
    for batch in &f.batches {
        match log.read(batch.base, usize::MAX, u64::MAX) {
            Err(LogError::Io { .. }) => {}
            Ok(slice) => assert!(slice.to_bytes().is_err()),
            Err(e) => panic!("read({}): {e:?}", batch.base),
        }
    }
    assert!(matches!(
        log.offset_for_timestamp(T0),
        Err(LogError::Io { .. })
    ));
    assert!(matches!(log.verify(), Err(LogError::Io { .. })));
    // Appends need no reads.
    f.append(&log, &[(1, 30)]).unwrap();
    drop(log);
    assert!(try_open(&f.storage, &f.config, &f.clock).is_err());
    f.storage.fail_reads(false);
    let log = f.open();
    f.check(&log);
    assert!(log.verify().unwrap().is_empty());
    assert_eq!(log.segment_base_offsets(), segments);
    f.exercise(log);
}
