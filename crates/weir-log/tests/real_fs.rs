//! The log on the real file system (`Log::open`, system clock): a
//! multi-segment log through a clean close and reopen, and through an
//! unclean drop and reopen, including a torn tail.

mod common;

use std::fs;
use std::path::Path;

use weir_log::{Log, LogConfig, CLEAN_SHUTDOWN_FILE};

use common::*;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

/// Appends `n` batches of 1–5 records (producer timestamps from 2023, as a
/// mirror or a replay would carry).
fn fill(log: &Log, batches: &mut Vec<Stored>, n: usize) {
    for i in 0..n {
        let count = i % 5 + 1;
        let ts = T0 + 10 * batches.len() as i64;
        let producer = producer_batch(count, 20 + (i * 53) % 300, ts);
        let info = log.append(&producer, 0).unwrap();
        batches.push(Stored::new(&producer, info.base_offset, 0, ts));
    }
}

fn files(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

fn assert_holds(log: &Log, batches: &[Stored]) {
    assert_eq!(log.log_end_offset(), batches.last().unwrap().last + 1);
    assert_eq!(read_all(log, 0).unwrap(), as_pairs(batches));
    for b in batches.iter().step_by(7) {
        let found = log.offset_for_timestamp(b.first_ts).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp), (b.base, b.first_ts));
        let slice = log.read(b.last, 1, u64::MAX).unwrap();
        assert!(slice.as_fd().is_some());
        assert_eq!(
            split(&slice.to_bytes().unwrap()),
            vec![(b.base, b.bytes.clone())]
        );
    }
}

/// Segments roll by size: old producer timestamps do not make every append
/// roll a segment of its own.
fn assert_rolled_by_size(log: &Log, batches: &[Stored]) {
    let total: u64 = batches.iter().map(Stored::size).sum();
    let segments = log.segment_base_offsets().len() as u64;
    assert!(
        segments >= total / 4096 && segments <= 2 * total / 4096 + 1,
        "{segments} segments for {total} bytes"
    );
}

#[test]
fn a_multi_segment_log_survives_a_clean_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topic-0");
    let mut batches = Vec::new();
    let log = Log::open(&path, config()).unwrap();
    fill(&log, &mut batches, 150);
    assert_rolled_by_size(&log, &batches);
    let segments = log.segment_base_offsets();
    assert_holds(&log, &batches);
    log.close().unwrap();

    assert!(path.join(CLEAN_SHUTDOWN_FILE).exists());
    let logs = files(&path, ".log");
    assert_eq!(logs.len(), segments.len());
    assert_eq!(logs[1], format!("{:020}.log", segments[1]));
    // Every segment, the active one included, has its indexes after a close.
    assert_eq!(files(&path, ".index").len(), segments.len());
    assert_eq!(files(&path, ".timeindex").len(), segments.len());

    let log = Log::open(&path, config()).unwrap();
    assert!(!path.join(CLEAN_SHUTDOWN_FILE).exists());
    assert_eq!(log.segment_base_offsets(), segments);
    assert_holds(&log, &batches);
    fill(&log, &mut batches, 40);
    assert_holds(&log, &batches);
    log.close().unwrap();
    assert_holds(&Log::open(&path, config()).unwrap(), &batches);
}

#[test]
fn a_multi_segment_log_survives_an_unclean_drop_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topic-0");
    let mut batches = Vec::new();
    let log = Log::open(&path, config()).unwrap();
    fill(&log, &mut batches, 100);
    log.flush().unwrap();
    fill(&log, &mut batches, 30);
    let segments = log.segment_base_offsets();
    drop(log);

    // A process crash: everything written is in the page cache.
    let log = Log::open(&path, config()).unwrap();
    assert_eq!(log.segment_base_offsets(), segments);
    assert_holds(&log, &batches);
    assert!(log.verify().unwrap().is_empty());
    fill(&log, &mut batches, 10);
    drop(log);

    // A torn write: the last batch lost its end.
    let active = path.join(format!("{:020}.log", log_last_base(&path)));
    let len = fs::metadata(&active).unwrap().len();
    let file = fs::OpenOptions::new().write(true).open(&active).unwrap();
    file.set_len(len - 5).unwrap();
    drop(file);
    let log = Log::open(&path, config()).unwrap();
    batches.pop();
    assert_holds(&log, &batches);
    // The torn batch was cut off the file.
    assert_eq!(
        fs::metadata(&active).unwrap().len(),
        position_after(&log, &batches, &active)
    );
    fill(&log, &mut batches, 5);
    assert_holds(&log, &batches);
}

/// Base offset of the newest segment file in `dir`.
fn log_last_base(dir: &Path) -> u64 {
    files(dir, ".log").last().unwrap()[..20].parse().unwrap()
}

/// Size in bytes of the batches stored in the segment file `path`.
fn position_after(log: &Log, batches: &[Stored], path: &Path) -> u64 {
    let base: u64 = path.file_name().unwrap().to_str().unwrap()[..20]
        .parse()
        .unwrap();
    assert!(log.segment_base_offsets().contains(&base));
    batches
        .iter()
        .filter(|b| b.base >= base)
        .map(Stored::size)
        .sum()
}

/// Many multi-segment logs sharing eight descriptors: every file still
/// reads and appends, a clean close and reopen keeps everything, and a
/// slice being read keeps its file open past an eviction.
#[test]
fn many_logs_share_a_bounded_set_of_descriptors() {
    use std::sync::Arc;
    use weir_log::storage::FsStorage;
    use weir_log::SystemClock;

    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FsStorage::with_open_file_limit(8));
    let open = |i: usize| {
        Log::open_with(
            dir.path().join(format!("log-{i}")),
            config(),
            storage.clone(),
            Arc::new(SystemClock),
        )
        .unwrap()
    };
    let logs: Vec<Log> = (0..12).map(open).collect();
    let mut stored: Vec<Vec<Stored>> = vec![Vec::new(); logs.len()];
    for round in 0..6 {
        for (log, batches) in logs.iter().zip(&mut stored) {
            fill(log, batches, 5 + round);
        }
    }
    assert!(storage.open_files() <= 8, "{} open", storage.open_files());
    let held = logs[0].read(0, 1, u64::MAX).unwrap();
    for (log, batches) in logs.iter().zip(&stored) {
        assert!(files(log.dir(), ".log").len() > 1, "several segments");
        assert_holds(log, batches);
    }
    assert!(storage.open_files() <= 8, "{} open", storage.open_files());
    assert_eq!(split(&held.to_bytes().unwrap())[0].0, 0);

    for log in logs {
        log.close().unwrap();
    }
    let logs: Vec<Log> = (0..12).map(open).collect();
    for (log, batches) in logs.iter().zip(&stored) {
        assert_holds(log, batches);
    }
    assert!(storage.open_files() <= 8, "{} open", storage.open_files());
}
