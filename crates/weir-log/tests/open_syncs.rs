//! The syncs a log costs at open: logs closed cleanly reopen with one
//! directory sync for all of them (not one per log), and the removal of each
//! clean-shutdown marker is durable before the log takes a write.

use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use weir_log::sim::SimStorage;
use weir_log::storage::{FsStorage, Storage, StorageFile};
use weir_log::testing::BatchBuilder;
use weir_log::{Log, LogConfig, ManualClock, UnsyncedLog, CLEAN_SHUTDOWN_FILE};

/// What the log asked of the storage, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Remove(PathBuf),
    Append(PathBuf),
    SyncFile(PathBuf),
    SyncDir(PathBuf),
    SyncDirs(Vec<PathBuf>),
}

#[derive(Clone)]
struct Recording {
    inner: SimStorage,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl Recording {
    fn new() -> Self {
        Self {
            inner: SimStorage::new(),
            ops: Arc::default(),
        }
    }
    fn take(&self) -> Vec<Op> {
        std::mem::take(&mut self.ops.lock().unwrap())
    }
    fn wrap(&self, path: &Path, inner: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(RecordingFile {
            inner,
            path: path.to_owned(),
            ops: self.ops.clone(),
        })
    }
}

struct RecordingFile {
    inner: Arc<dyn StorageFile>,
    path: PathBuf,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl StorageFile for RecordingFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, position)
    }
    fn append(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<()> {
        self.ops.lock().unwrap().push(Op::Append(self.path.clone()));
        self.inner.append(bufs)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.inner.truncate(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.ops
            .lock()
            .unwrap()
            .push(Op::SyncFile(self.path.clone()));
        self.inner.sync()
    }
    fn descriptor(&self) -> std::io::Result<Option<Arc<std::fs::File>>> {
        Ok(None)
    }
}

impl Storage for Recording {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn open(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.open(path)?))
    }
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.create(path)?))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn rename_dir(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename_dir(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.ops.lock().unwrap().push(Op::Remove(path.to_owned()));
        self.inner.remove(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.remove_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.ops.lock().unwrap().push(Op::SyncDir(dir.to_owned()));
        self.inner.sync_dir(dir)
    }
    fn sync_dirs(&self, dirs: &[PathBuf]) -> std::io::Result<()> {
        self.ops.lock().unwrap().push(Op::SyncDirs(dirs.to_vec()));
        // The simulation syncs them one by one, unrecorded.
        dirs.iter().try_for_each(|dir| self.inner.sync_dir(dir))
    }
}

const LOGS: usize = 40;

fn dirs() -> Vec<PathBuf> {
    (0..LOGS)
        .map(|i| PathBuf::from(format!("/data/t-{i}")))
        .collect()
}

/// `LOGS` logs with a few records each, closed cleanly.
fn closed_logs(storage: &Recording) {
    let clock = Arc::new(ManualClock::new(1_000));
    for dir in dirs() {
        let log = Log::open_with(
            &dir,
            LogConfig::default(),
            Arc::new(storage.clone()),
            clock.clone(),
        )
        .unwrap();
        log.append(&BatchBuilder::new(3).build(), 0).unwrap();
        log.close().unwrap();
    }
    storage.take();
}

/// Every log of `dirs()` opened unsynced on one shared storage.
fn open_unsynced(storage: &Recording) -> Vec<UnsyncedLog> {
    let shared: Arc<dyn Storage> = Arc::new(storage.clone());
    let clock = Arc::new(ManualClock::new(2_000));
    dirs()
        .into_iter()
        .map(|dir| {
            Log::open_unsynced(dir, LogConfig::default(), shared.clone(), clock.clone()).unwrap()
        })
        .collect()
}

fn open_all(storage: &Recording) -> Vec<Log> {
    let unsynced = open_unsynced(storage);
    Log::sync_opened(unsynced)
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn cleanly_closed_logs_reopen_with_one_sync_for_all() {
    let storage = Recording::new();
    closed_logs(&storage);
    let logs = open_all(&storage);
    assert_eq!(logs.len(), LOGS);
    let syncs: Vec<Op> = storage
        .take()
        .into_iter()
        .filter(|op| !matches!(op, Op::Remove(_)))
        .collect();
    assert_eq!(syncs, vec![Op::SyncDirs(dirs())]);
    for (log, dir) in logs.iter().zip(dirs()) {
        assert_eq!(log.log_end_offset(), 3);
        assert!(!storage.exists(&dir.join(CLEAN_SHUTDOWN_FILE)));
    }
}

#[test]
fn logs_without_a_marker_reopen_without_a_sync() {
    let storage = Recording::new();
    closed_logs(&storage);
    // Reopened and dropped unclosed: the markers are gone for good.
    drop(open_all(&storage));
    storage.take();
    let logs = open_all(&storage);
    assert_eq!(logs.len(), LOGS);
    let ops = storage.take();
    assert!(
        ops.iter()
            .all(|op| !matches!(op, Op::SyncDir(_) | Op::SyncDirs(_) | Op::SyncFile(_))),
        "{ops:?}"
    );
}

/// Every marker removal is followed by a sync of its directory before a
/// write reaches any file of that directory: a crash must not leave the
/// marker vouching for files changed since.
fn assert_removal_synced_before_writes(ops: &[Op]) {
    let mut pending: Vec<PathBuf> = Vec::new();
    let mut removals = 0;
    for op in ops {
        match op {
            Op::Remove(path) if path.ends_with(CLEAN_SHUTDOWN_FILE) => {
                removals += 1;
                pending.push(path.parent().unwrap().to_owned());
            }
            Op::SyncDir(dir) => pending.retain(|d| d != dir),
            Op::SyncDirs(dirs) => pending.retain(|d| !dirs.contains(d)),
            Op::Append(path) => assert!(
                !pending.iter().any(|d| path.starts_with(d)),
                "{} written before the removal of its marker was synced: {ops:?}",
                path.display()
            ),
            _ => {}
        }
    }
    assert!(removals > 0, "no marker was removed: {ops:?}");
}

#[test]
fn a_marker_removal_is_durable_before_the_log_takes_a_write() {
    let storage = Recording::new();
    closed_logs(&storage);
    for log in open_all(&storage) {
        log.append(&BatchBuilder::new(2).build(), 1).unwrap();
        log.flush().unwrap();
    }
    assert_removal_synced_before_writes(&storage.take());

    // One log on its own, through `open_with`.
    let log = Log::open_with(
        "/data/t-0",
        LogConfig::default(),
        Arc::new(storage.clone()),
        Arc::new(ManualClock::new(3_000)),
    )
    .unwrap();
    log.append(&BatchBuilder::new(2).build(), 1).unwrap();
    log.close().unwrap();
    storage.take();
    let log = Log::open_with(
        "/data/t-0",
        LogConfig::default(),
        Arc::new(storage.clone()),
        Arc::new(ManualClock::new(4_000)),
    )
    .unwrap();
    log.append(&BatchBuilder::new(2).build(), 1).unwrap();
    assert_removal_synced_before_writes(&storage.take());
}

#[test]
fn a_failed_batch_sync_hands_out_no_log_of_the_batch() {
    let storage = Recording::new();
    closed_logs(&storage);
    let unsynced = open_unsynced(&storage);
    storage.inner.fail_syncs(true);
    let opened = Log::sync_opened(unsynced);
    assert_eq!(opened.len(), LOGS);
    assert!(opened.iter().all(Result::is_err));
}

#[test]
fn the_file_system_syncs_many_directories_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..5).map(|i| tmp.path().join(format!("d{i}"))).collect();
    for dir in &dirs {
        std::fs::create_dir(dir).unwrap();
    }
    let storage = FsStorage::default();
    storage.sync_dirs(&dirs).unwrap();
    // A directory that is not there is an error, as for one sync_dir.
    let mut missing = dirs.clone();
    missing.push(tmp.path().join("missing"));
    assert!(storage.sync_dirs(&missing).is_err());
}
