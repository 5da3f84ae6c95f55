//! Damaged files: flipped bits and garbage in the unflushed tail (cut off by
//! recovery), flipped bits in flushed segments (reported by `verify`, never
//! served), and missing or truncated index files (rebuilt at open).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_log::sim::{CrashMode, SimStorage};
use weir_log::storage::Storage;
use weir_log::{Log, LogConfig, LogError, ManualClock};

use common::*;

/// A log on the in-memory storage with the batches appended to it.
struct Fixture {
    storage: SimStorage,
    clock: Arc<ManualClock>,
    config: LogConfig,
    batches: Vec<Stored>,
}

impl Fixture {
    /// `batches` batches of 1–4 records over several segments; the last
    /// `unflushed` of them appended after the final flush.
    fn new(batches: usize, unflushed: usize) -> (Self, Log) {
        let config = small_config();
        let storage = SimStorage::new();
        let clock = Arc::new(ManualClock::new(T0));
        let log = open(&storage, &config, &clock);
        let mut fixture = Self {
            storage,
            clock,
            config,
            batches: Vec::new(),
        };
        for i in 0..batches {
            if i + unflushed == batches {
                log.flush().unwrap();
            }
            fixture.append(&log, i % 4 + 1, 40 + (i * 37) % 150);
        }
        if unflushed == 0 {
            log.flush().unwrap();
        }
        (fixture, log)
    }

    fn append(&mut self, log: &Log, count: usize, value_size: usize) {
        let ts = T0 + 10 * self.batches.len() as i64;
        let producer = producer_batch(count, value_size, ts);
        let info = log.append(&producer, 0).unwrap();
        self.batches
            .push(Stored::new(&producer, info.base_offset, 0, ts));
    }

    fn open(&self) -> Log {
        open(&self.storage, &self.config, &self.clock)
    }

    /// The batches stored in the segment with base `base`.
    fn segment_batches(&self, segments: &[u64], base: u64) -> Vec<Stored> {
        let end = segments
            .iter()
            .find(|&&b| b > base)
            .copied()
            .unwrap_or(u64::MAX);
        self.batches
            .iter()
            .filter(|b| b.base >= base && b.base < end)
            .cloned()
            .collect()
    }

    fn modify(&self, path: &Path, change: impl FnOnce(&mut Vec<u8>)) {
        let mut data = self.storage.contents(path).expect("file exists");
        change(&mut data);
        self.storage.set_contents(path, data);
    }

    fn files(&self) -> Vec<String> {
        let mut names = self.storage.list(Path::new(DIR)).unwrap();
        names.sort();
        names
    }
}

/// Positions inside a batch that a flip must be detected at: the length
/// field, the magic byte and everything the CRC covers. (The base offset and
/// leader epoch lie outside the CRC, as in Kafka.)
fn checked_positions(size: usize) -> impl Iterator<Item = usize> {
    (8..12).chain(16..size)
}

fn assert_reads_exactly(log: &Log, batches: &[Stored]) {
    assert_eq!(
        log.log_start_offset(),
        batches.first().map_or(0, |b| b.base)
    );
    assert_eq!(
        log.log_end_offset(),
        batches.last().map_or(0, |b| b.last + 1)
    );
    assert_eq!(
        read_all(log, log.log_start_offset()).unwrap(),
        as_pairs(batches)
    );
}

#[test]
fn flipped_bits_in_the_unflushed_tail_are_cut_off_on_unclean_reopen() {
    let (fixture, log) = Fixture::new(30, 0);
    let segments = log.segment_base_offsets();
    assert!(segments.len() >= 3, "{segments:?}");
    drop(log);
    let active = *segments.last().unwrap();
    let path = segment_path(active, "log");
    let clean = fixture.storage.contents(&path).unwrap();
    let tail = fixture.segment_batches(&segments, active);

    let mut position = 0;
    for (i, batch) in tail.iter().enumerate() {
        for at in checked_positions(batch.bytes.len()).step_by(5) {
            for bit in [0, 7] {
                fixture.storage.set_contents(&path, clean.clone());
                fixture.modify(&path, |d| d[position + at] ^= 1 << bit);
                let log = fixture.open();
                let kept = fixture.batches.len() - tail.len() + i;
                assert_reads_exactly(&log, &fixture.batches[..kept]);
                assert_eq!(
                    fixture.storage.contents(&path).unwrap().len(),
                    position,
                    "the file is cut back to the last valid batch (flip at {})",
                    position + at
                );
                assert!(log.verify().unwrap().is_empty());
                drop(log);
            }
        }
        position += batch.bytes.len();
    }
}

#[test]
fn garbage_after_the_last_batch_is_cut_off_on_unclean_reopen() {
    let (mut fixture, log) = Fixture::new(20, 3);
    let segments = log.segment_base_offsets();
    drop(log);
    let path = segment_path(*segments.last().unwrap(), "log");
    let clean = fixture.storage.contents(&path).unwrap();
    // Garbage of every kind: zeros, random bytes, a header that promises
    // more than is there, a whole batch with a bad CRC.
    let mut header_only = fixture.batches[0].bytes[..61].to_vec();
    header_only[0..8]
        .copy_from_slice(&(fixture.batches.last().unwrap().last as i64 + 1).to_be_bytes());
    let mut bad_crc = fixture.batches[1].bytes.clone();
    bad_crc[0..8].copy_from_slice(&header_only[0..8]);
    *bad_crc.last_mut().unwrap() ^= 0x40;
    let garbage: Vec<Vec<u8>> = vec![
        vec![0],
        vec![0; 100],
        (0..37u8).map(|i| i.wrapping_mul(113)).collect(),
        header_only,
        bad_crc,
    ];
    for junk in &garbage {
        fixture.storage.set_contents(&path, clean.clone());
        fixture.modify(&path, |d| d.extend_from_slice(junk));
        let log = fixture.open();
        assert_reads_exactly(&log, &fixture.batches);
        assert_eq!(fixture.storage.contents(&path).unwrap(), clean);
        drop(log);
    }
    // Appends continue after the recovered end and read back.
    let log = fixture.open();
    fixture.append(&log, 3, 20);
    assert_reads_exactly(&log, &fixture.batches);
}

/// With a clean-shutdown marker the active segment is trusted, so garbage
/// after its last batch is reported rather than cut off — but new appends
/// must still be readable.
#[test]
fn garbage_after_a_clean_close_does_not_swallow_new_appends() {
    let (mut fixture, log) = Fixture::new(12, 0);
    let active = *log.segment_base_offsets().last().unwrap();
    log.close().unwrap();
    fixture.modify(&segment_path(active, "log"), |d| {
        d.extend_from_slice(&[7; 90])
    });
    let log = fixture.open();
    assert_reads_exactly(&log, &fixture.batches);
    fixture.append(&log, 2, 30);
    fixture.append(&log, 1, 30);
    assert_reads_exactly(&log, &fixture.batches);
    log.close().unwrap();
    assert_reads_exactly(&fixture.open(), &fixture.batches);
}

/// Checks that `log` serves nothing of the segment `base` from the corrupt
/// batch `bad` on, and everything else.
fn assert_corrupt_batch_not_served(
    fixture: &Fixture,
    log: &Log,
    segments: &[u64],
    base: u64,
    bad: usize,
    path: &PathBuf,
    position: u64,
) {
    let in_segment = fixture.segment_batches(segments, base);
    let first = fixture.batches.iter().position(|b| b.base == base).unwrap();
    for (i, batch) in fixture.batches.iter().enumerate() {
        for offset in [batch.base, batch.last] {
            let result = log.read(offset, usize::MAX, u64::MAX);
            if i >= first + bad && i < first + in_segment.len() {
                match result {
                    Err(LogError::Corrupt {
                        path: p,
                        position: at,
                        ..
                    }) => {
                        assert_eq!((&p, at), (path, position), "read({offset})");
                    }
                    other => panic!("read({offset}) of a corrupt batch: {other:?}"),
                }
            } else {
                let got = split(&result.unwrap().to_bytes().unwrap());
                assert_eq!(got[0], (batch.base, batch.bytes.clone()));
                // A read that starts before the corrupt batch stops before it.
                let end = got.last().unwrap().0;
                assert!(
                    i >= first + bad || end < in_segment[bad].base,
                    "read({offset}) ran into the corrupt batch"
                );
            }
        }
    }
}

#[test]
fn a_flipped_bit_in_a_flushed_segment_is_reported_and_never_served() {
    for clean_close in [false, true] {
        for at in [61 + 5, 30, 17, 9] {
            let (fixture, log) = Fixture::new(40, 2);
            let segments = log.segment_base_offsets();
            assert!(segments.len() >= 4, "{segments:?}");
            if clean_close {
                log.close().unwrap();
            } else {
                drop(log);
            }
            // The middle batch of the second segment.
            let base = segments[1];
            let in_segment = fixture.segment_batches(&segments, base);
            let bad = in_segment.len() / 2;
            let position: u64 = in_segment[..bad].iter().map(Stored::size).sum();
            let path = segment_path(base, "log");
            fixture.modify(&path, |d| d[position as usize + at] ^= 0x10);

            let log = fixture.open();
            let found = log.verify().unwrap();
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!((&found[0].path, found[0].position), (&path, position));
            assert_corrupt_batch_not_served(&fixture, &log, &segments, base, bad, &path, position);
            // Nothing was cut: the log still ends where it did, and takes appends.
            assert_eq!(
                log.log_end_offset(),
                fixture.batches.last().unwrap().last + 1
            );
            assert_eq!(
                fixture.storage.contents(&path).unwrap().len() as u64,
                in_segment.iter().map(Stored::size).sum::<u64>()
            );
            drop(log);
        }
    }
}

/// Corruption found by `verify` in the active segment: what was appended
/// before it stays readable, and so does what is appended after.
#[test]
fn corruption_in_the_active_segment_does_not_swallow_new_appends() {
    let (mut fixture, log) = Fixture::new(4, 0);
    assert_eq!(log.segment_base_offsets(), vec![0]);
    log.close().unwrap();
    let path = segment_path(0, "log");
    let position = fixture.batches[0].size();
    fixture.modify(&path, |d| d[position as usize + 70] ^= 1);
    let log = fixture.open();
    let found = log.verify().unwrap();
    assert_eq!((&found[0].path, found[0].position), (&path, position));
    fixture.append(&log, 2, 10);
    fixture.append(&log, 3, 10);
    let end = fixture.batches.last().unwrap().last + 1;
    assert_eq!(log.log_end_offset(), end);
    let got = split(
        &log.read(0, usize::MAX, u64::MAX)
            .unwrap()
            .to_bytes()
            .unwrap(),
    );
    assert_eq!(got, as_pairs(&fixture.batches[..1]));
    for batch in &fixture.batches[1..4] {
        assert!(matches!(
            log.read(batch.base, 1, u64::MAX),
            Err(LogError::Corrupt { .. })
        ));
    }
    for batch in &fixture.batches[4..] {
        let got = split(
            &log.read(batch.base, 1, u64::MAX)
                .unwrap()
                .to_bytes()
                .unwrap(),
        );
        assert_eq!(
            got,
            vec![(batch.base, batch.bytes.clone())],
            "new append at {}",
            batch.base
        );
    }
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Delete,
    /// Cut inside the last entry.
    CutPartialEntry,
    /// Drop the last whole entry.
    DropLastEntry,
    Empty,
}

#[test]
fn missing_or_truncated_index_files_are_rebuilt() {
    for clean_close in [false, true] {
        for suffix in ["index", "timeindex"] {
            for damage in [
                Damage::Delete,
                Damage::CutPartialEntry,
                Damage::DropLastEntry,
                Damage::Empty,
            ] {
                let (fixture, log) = Fixture::new(60, 0);
                let segments = log.segment_base_offsets();
                assert!(segments.len() >= 4, "{segments:?}");
                if clean_close {
                    log.close().unwrap();
                } else {
                    drop(log);
                }
                // Damage every index file of that kind (a clean close wrote
                // the active segment's too).
                for &base in &segments {
                    let path = segment_path(base, suffix);
                    let Some(data) = fixture.storage.contents(&path) else {
                        assert!(
                            !clean_close && base == *segments.last().unwrap(),
                            "{path:?} missing"
                        );
                        continue;
                    };
                    let entry = if suffix == "index" { 8 } else { 12 };
                    match damage {
                        Damage::Delete => fixture.storage.remove(&path).unwrap(),
                        Damage::CutPartialEntry if !data.is_empty() => {
                            fixture.modify(&path, |d| d.truncate(d.len() - 3))
                        }
                        Damage::DropLastEntry if !data.is_empty() => {
                            fixture.modify(&path, |d| d.truncate(d.len() - entry))
                        }
                        Damage::Empty => fixture.modify(&path, Vec::clear),
                        _ => {}
                    }
                }
                let context = format!("{damage:?} .{suffix}, clean close {clean_close}");
                let log = fixture.open();
                assert_eq!(log.segment_base_offsets(), segments, "{context}");
                assert_reads_exactly(&log, &fixture.batches);
                for batch in &fixture.batches {
                    let got = split(
                        &log.read(batch.last, 1, u64::MAX)
                            .unwrap()
                            .to_bytes()
                            .unwrap(),
                    );
                    assert_eq!(got, vec![(batch.base, batch.bytes.clone())], "{context}");
                    let found = log.offset_for_timestamp(batch.first_ts).unwrap().unwrap();
                    assert_eq!(
                        (found.offset, found.timestamp),
                        (batch.base, batch.first_ts),
                        "{context}"
                    );
                }
                assert!(log.verify().unwrap().is_empty(), "{context}");
                // Sealed segments have their index files again.
                for &base in &segments[..segments.len() - 1] {
                    for suffix in ["index", "timeindex"] {
                        let path = segment_path(base, suffix);
                        assert!(
                            fixture
                                .files()
                                .contains(&path.file_name().unwrap().to_str().unwrap().to_owned()),
                            "{context}: {path:?}"
                        );
                    }
                }
                log.close().unwrap();
                assert_reads_exactly(&fixture.open(), &fixture.batches);
            }
        }
    }
}

/// Index files rebuilt at open are made durable by the next flush, like a
/// rolled segment's, even when later segments needed nothing.
#[test]
fn rebuilt_index_files_are_synced_by_the_next_flush() {
    let (mut fixture, log) = Fixture::new(60, 0);
    let segments = log.segment_base_offsets();
    assert!(segments.len() >= 4, "{segments:?}");
    drop(log);
    fixture
        .storage
        .remove(&segment_path(segments[0], "index"))
        .unwrap();
    let log = fixture.open();
    fixture.append(&log, 1, 10);
    log.flush().unwrap();
    fixture.storage.crash(CrashMode::DropUnsynced);
    drop(log);
    for &base in &segments[..segments.len() - 1] {
        for suffix in ["index", "timeindex"] {
            let path = segment_path(base, suffix);
            let data = fixture.storage.contents(&path);
            assert!(data.is_some_and(|d| !d.is_empty()), "{path:?} lost");
        }
    }
    assert_reads_exactly(&fixture.open(), &fixture.batches);
}

#[test]
fn an_unreadable_log_start_offset_stops_the_open() {
    use std::sync::Arc;
    let storage = weir_log::sim::SimStorage::new();
    let clock = Arc::new(weir_log::ManualClock::new(0));
    let dir = std::path::Path::new("/logs/p-0");
    let open = || {
        weir_log::Log::open_with(
            dir,
            weir_log::LogConfig::default(),
            Arc::new(storage.clone()),
            clock.clone(),
        )
    };
    let log = open().unwrap();
    for _ in 0..3 {
        log.append(&weir_log::testing::BatchBuilder::new(2).build(), 0)
            .unwrap();
    }
    log.delete_records_before(3).unwrap();
    drop(log);
    storage.set_contents(&dir.join(weir_log::LOG_START_OFFSET_FILE), b"3x\n".to_vec());
    match open() {
        Err(weir_log::LogError::Corrupt { path, .. }) => {
            assert!(path.ends_with(weir_log::LOG_START_OFFSET_FILE))
        }
        other => panic!("expected a corrupt log start offset, got {other:?}"),
    }
}
