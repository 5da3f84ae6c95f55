//! The directories partition logs live in (`log.dirs`): each holds whole
//! partitions, `<topic>-<partition>/`, and a new replica goes to the one
//! with the fewest partitions, as Kafka's `LogManager.nextLogDirs` chooses.
//!
//! Where each partition lives is learnt once, at start, by listing every
//! directory; after that the broker itself is the only one to create or
//! delete partition directories, so it keeps the map up to date.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use weir_log::{DirFault, FailureListener};

use crate::replica::dir_move::{self, Move};

#[derive(Debug, thiserror::Error)]
pub enum LogDirsError {
    #[error("log directory {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "partition {topic}-{partition} is in two log directories, {first} and {second}; \
         remove the stale copy and start again"
    )]
    InTwoDirs {
        topic: String,
        partition: i32,
        first: String,
        second: String,
    },
    #[error("log.dirs names {0} twice")]
    Repeated(String),
}

/// The log directories and which of them holds each partition.
pub struct LogDirs {
    /// Absolute paths, in the order `log.dirs` gives them.
    dirs: Vec<PathBuf>,
    /// Partition → index in `dirs`: those found at start and those placed
    /// since, until their data is removed.
    placed: Mutex<HashMap<(String, i32), usize>>,
    /// Partitions being moved to another directory.
    moves: Mutex<HashMap<(String, i32), Arc<Move>>>,
    /// Partitions not hosted here that AlterReplicaLogDirs asked to be in
    /// a directory: a replica created later goes there (Kafka's preferred
    /// log dirs).
    preferred: Mutex<HashMap<(String, i32), usize>>,
    failures: Arc<Failures>,
}

/// The directories an I/O failure took offline or found full, shared with
/// the logs' failure listener: as in Kafka, a failure in one partition's
/// log takes every replica of its directory offline, and only those. A
/// full volume only refuses writes: its replicas give up their leaderships
/// and pause following, and come back once space is freed.
struct Failures {
    dirs: Vec<PathBuf>,
    /// Index in `dirs` → what failed there.
    failed: Mutex<HashMap<usize, String>>,
    /// Indexes in `dirs` of the full volumes.
    full: Mutex<BTreeSet<usize>>,
    /// Whether `full` holds any: the fetchers ask for every partition.
    any_full: AtomicBool,
    /// Woken when a directory fails or fills.
    changed: Notify,
}

impl Failures {
    fn note(&self, log_dir: &Path, fault: DirFault) {
        match fault {
            DirFault::Failed => self.fail(log_dir),
            DirFault::Full => self.fill(log_dir),
        }
    }

    fn fill(&self, log_dir: &Path) {
        let Some(index) = index_holding(&self.dirs, log_dir) else {
            return;
        };
        if self.failed.lock().contains_key(&index) || !self.full.lock().insert(index) {
            return;
        }
        self.any_full.store(true, Ordering::Release);
        let dir = self.dirs[index].display();
        tracing::error!(%dir, log = %log_dir.display(), "log directory full: its replicas hand their leaderships to in-sync replicas and stop following until space is freed");
        self.changed.notify_one();
    }

    fn is_full(&self, log_dir: &Path) -> bool {
        if !self.any_full.load(Ordering::Acquire) {
            return false;
        }
        index_holding(&self.dirs, log_dir).is_some_and(|index| self.full.lock().contains(&index))
    }

    fn fail(&self, log_dir: &Path) {
        let Some(index) = index_holding(&self.dirs, log_dir) else {
            return;
        };
        let mut failed = self.failed.lock();
        if failed.contains_key(&index) {
            return;
        }
        let dir = self.dirs[index].display();
        tracing::error!(%dir, log = %log_dir.display(), "log directory failed; every replica in it is offline until the broker restarts");
        failed.insert(
            index,
            format!(
                "log directory {dir} failed: an I/O error in {}",
                log_dir.display()
            ),
        );
        self.changed.notify_one();
    }
}

/// Whether a replica's directory takes writes, as the follower fetchers
/// ask it for every partition they follow.
#[derive(Clone)]
pub struct DirHealth(Arc<Failures>);

impl DirHealth {
    /// Whether the volume of the log in `log_dir` is full: a follower
    /// there fetches nothing, so that it neither retries a write that
    /// cannot succeed nor looks caught up to its leader.
    pub fn is_full(&self, log_dir: &Path) -> bool {
        self.0.is_full(log_dir)
    }
}

/// The usable bytes a full volume of `total` bytes needs before its
/// replicas take writes again: enough that they do not fill it again at
/// once.
fn space_again(total: u64) -> u64 {
    const MIN: u64 = 16 << 20;
    (total / 100).max(MIN).min(total / 8)
}

/// What [`LogDirs::usage`] finds of one directory.
#[derive(Debug)]
pub struct DirUsage {
    pub path: PathBuf,
    /// The volume's total and usable bytes, or why the directory cannot be
    /// read.
    pub space: io::Result<(u64, u64)>,
}

impl LogDirs {
    /// Creates the directories that are missing and finds the partitions
    /// in them. A partition in two directories is an error: which copy is
    /// current cannot be told, and serving either could lose data.
    pub fn open(dirs: &[PathBuf]) -> Result<Self, LogDirsError> {
        let mut absolute: Vec<PathBuf> = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let path = std::path::absolute(dir).map_err(io_error(dir))?;
            if absolute.contains(&path) {
                return Err(LogDirsError::Repeated(path.display().to_string()));
            }
            absolute.push(path);
        }
        for dir in &absolute {
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        }
        // Before the partitions are found: a finished move puts its copy in
        // place of the old directory.
        dir_move::recover(&absolute).map_err(|source| LogDirsError::Io {
            path: "(moving replicas between log directories)".into(),
            source,
        })?;
        let mut placed: HashMap<(String, i32), usize> = HashMap::new();
        for (index, dir) in absolute.iter().enumerate() {
            for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
                let entry = entry.map_err(io_error(dir))?;
                let Some(key) = entry.file_name().to_str().and_then(partition_of) else {
                    continue;
                };
                if !entry.file_type().map_err(io_error(dir))?.is_dir() {
                    continue;
                }
                if let Some(first) = placed.insert(key.clone(), index) {
                    return Err(LogDirsError::InTwoDirs {
                        topic: key.0,
                        partition: key.1,
                        first: absolute[first].display().to_string(),
                        second: dir.display().to_string(),
                    });
                }
            }
        }
        Ok(Self {
            placed: Mutex::new(placed),
            moves: Mutex::new(HashMap::new()),
            preferred: Mutex::new(HashMap::new()),
            failures: Arc::new(Failures {
                dirs: absolute.clone(),
                failed: Mutex::new(HashMap::new()),
                full: Mutex::new(BTreeSet::new()),
                any_full: AtomicBool::new(false),
                changed: Notify::new(),
            }),
            dirs: absolute,
        })
    }

    /// The directories, absolute, in configured order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The directory that holds, or is to hold, the partition's log: where
    /// it was found, else the one AlterReplicaLogDirs asked for, else the
    /// directory with the fewest partitions (the first of those in
    /// `log.dirs` order on a tie), which is then counted as holding it.
    pub fn place(&self, topic: &str, partition: i32) -> PathBuf {
        let key = (topic.to_owned(), partition);
        let mut placed = self.placed.lock();
        if let Some(&index) = placed.get(&key) {
            return self.dirs[index].clone();
        }
        let preferred = self.preferred.lock().remove(&key);
        if let Some(index) = preferred.filter(|&i| self.failure(i).is_none()) {
            placed.insert(key, index);
            return self.dirs[index].clone();
        }
        let mut counts = vec![0usize; self.dirs.len()];
        for &index in placed.values() {
            counts[index] += 1;
        }
        // An offline or full directory gets nothing new while another
        // takes writes.
        let index = (0..self.dirs.len())
            .min_by_key(|&i| (self.failure(i).is_some(), counts[i]))
            .expect("log.dirs is never empty");
        placed.insert(key, index);
        self.dirs[index].clone()
    }

    /// Remembers that the partition, not hosted here, is to go to
    /// directory `target` when a replica of it is created.
    pub fn prefer(&self, topic: &str, partition: i32, target: usize) {
        self.preferred
            .lock()
            .insert((topic.to_owned(), partition), target);
    }

    /// The index in `log.dirs` of `dir`.
    pub fn index_of(&self, dir: &Path) -> Option<usize> {
        self.dirs.iter().position(|d| d == dir)
    }

    /// Records a move of the partition from directory `current` to
    /// `target`, unless there is nothing to do: it is there already, or on
    /// its way there. A move elsewhere still under way is cancelled, as
    /// Kafka drops a future log whose directory changed.
    pub fn begin_move(
        &self,
        topic: &str,
        partition: i32,
        current: usize,
        target: usize,
    ) -> Option<Arc<Move>> {
        let key = (topic.to_owned(), partition);
        let mut moves = self.moves.lock();
        if let Some(running) = moves.get(&key) {
            if running.target == target {
                return None;
            }
            running.cancel();
            moves.remove(&key);
        }
        if current == target {
            return None;
        }
        let job = Arc::new(Move::new(
            target,
            dir_move::future_dir(&self.dirs[target], topic, partition),
        ));
        moves.insert(key, job.clone());
        Some(job)
    }

    /// The move of the partition is over, done or not.
    pub fn end_move(&self, topic: &str, partition: i32, job: &Move) {
        let mut moves = self.moves.lock();
        let key = (topic.to_owned(), partition);
        if moves.get(&key).is_some_and(|m| std::ptr::eq(&**m, job)) {
            moves.remove(&key);
        }
    }

    /// The moves under way.
    pub fn moving(&self) -> Vec<((String, i32), Arc<Move>)> {
        let moves = self.moves.lock();
        moves.iter().map(|(k, m)| (k.clone(), m.clone())).collect()
    }

    /// The partition now lives in directory `target`.
    pub fn moved(&self, topic: &str, partition: i32, target: usize) {
        self.placed
            .lock()
            .insert((topic.to_owned(), partition), target);
    }

    /// Forgets the partition, whose data has been removed.
    pub fn forget(&self, topic: &str, partition: i32) {
        self.placed.lock().remove(&(topic.to_owned(), partition));
    }

    /// What the logs call when an I/O failure refuses a write: a
    /// directory in doubt fails, with every replica in it; a full one
    /// counts as full until [`LogDirs::take_back_freed`] finds space.
    pub fn failure_listener(&self) -> FailureListener {
        let failures = self.failures.clone();
        Arc::new(move |log_dir: &Path, fault| failures.note(log_dir, fault))
    }

    /// Why directory `index` takes no writes: it failed, or its volume is
    /// full.
    pub fn failure(&self, index: usize) -> Option<String> {
        if let Some(why) = self.failures.failed.lock().get(&index) {
            return Some(why.clone());
        }
        self.failures.full.lock().contains(&index).then(|| {
            format!(
                "log directory {} is full: no space left on device",
                self.dirs[index].display()
            )
        })
    }

    /// Whether the volume of the log in `log_dir` was found full and has
    /// not had space freed since.
    pub fn is_full(&self, log_dir: &Path) -> bool {
        self.failures.is_full(log_dir)
    }

    /// What the fetchers ask whether a replica may take writes.
    pub fn health(&self) -> DirHealth {
        DirHealth(self.failures.clone())
    }

    /// The indexes of the full directories.
    pub fn full(&self) -> Vec<usize> {
        self.failures.full.lock().iter().copied().collect()
    }

    /// Takes back the full directories whose volume has space again, and
    /// returns them. Reads the file system: call it off the runtime's
    /// workers.
    pub fn take_back_freed(&self) -> Vec<PathBuf> {
        let mut freed = Vec::new();
        for index in self.full() {
            let path = &self.dirs[index];
            let Ok((total, usable)) = space_of(path) else {
                continue;
            };
            if usable < space_again(total) {
                continue;
            }
            tracing::info!(dir = %path.display(), usable, "log directory has space again: its replicas follow their leaders and rejoin the ISR");
            self.failures.full.lock().remove(&index);
            freed.push(path.clone());
        }
        let full = self.failures.full.lock();
        self.failures
            .any_full
            .store(!full.is_empty(), Ordering::Release);
        freed
    }

    /// The failed directories, by index, with what failed there.
    pub fn failed(&self) -> Vec<(usize, String)> {
        let failed = self.failures.failed.lock();
        failed.iter().map(|(i, why)| (*i, why.clone())).collect()
    }

    /// Resolves once a directory failed since the last call returned (or
    /// since start).
    pub async fn failed_since(&self) {
        self.failures.changed.notified().await
    }

    /// The index of the directory holding the log in `log_dir`.
    pub fn index_holding(&self, log_dir: &Path) -> Option<usize> {
        index_holding(&self.dirs, log_dir)
    }

    /// Each directory's volume, or why it cannot be read. Reads the file
    /// system: call it off the runtime's workers.
    pub fn usage(&self) -> Vec<DirUsage> {
        self.dirs
            .iter()
            .map(|path| DirUsage {
                path: path.clone(),
                space: space_of(path),
            })
            .collect()
    }
}

/// The index in `dirs` of the one holding the log in `log_dir`.
fn index_holding(dirs: &[PathBuf], log_dir: &Path) -> Option<usize> {
    let parent = log_dir.parent()?;
    dirs.iter().position(|d| d == parent)
}

/// The directory of a partition's log in `dir`.
pub fn partition_dir(dir: &Path, topic: &str, partition: i32) -> PathBuf {
    dir.join(format!("{topic}-{partition}"))
}

/// The topic and partition a directory named `<topic>-<partition>` holds;
/// `None` for other names (the controller's directory, Kafka's `-delete`
/// and `-future` suffixes).
pub(crate) fn partition_of(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    // Digits only, without a leading zero, so that the name is the one
    // this partition's directory would get.
    let canonical = partition.bytes().all(|b| b.is_ascii_digit())
        && (partition == "0" || !partition.starts_with('0'));
    if topic.is_empty() || !canonical {
        return None;
    }
    Some((topic.to_owned(), partition.parse().ok()?))
}

/// The directory is readable, and its volume's total and usable bytes, as
/// Java's `FileStore.getTotalSpace` and `getUsableSpace` report them.
fn space_of(path: &Path) -> io::Result<(u64, u64)> {
    std::fs::read_dir(path)?;
    let stat = nix::sys::statvfs::statvfs(path).map_err(io::Error::from)?;
    let fragment = stat.fragment_size() as u64;
    Ok((
        (stat.blocks() as u64).saturating_mul(fragment),
        (stat.blocks_available() as u64).saturating_mul(fragment),
    ))
}

fn io_error(path: &Path) -> impl Fn(io::Error) -> LogDirsError {
    let path = path.display().to_string();
    move |source| LogDirsError::Io {
        path: path.clone(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names() {
        assert_eq!(partition_of("orders-0"), Some(("orders".into(), 0)));
        assert_eq!(partition_of("a-b-12"), Some(("a-b".into(), 12)));
        assert_eq!(partition_of("controller"), None);
        assert_eq!(partition_of("meta"), None);
        assert_eq!(partition_of("-3"), None);
        assert_eq!(partition_of("t-+3"), None);
        assert_eq!(partition_of("t-03"), None);
        assert_eq!(partition_of("t-0.abc-delete"), None);
    }

    #[test]
    fn new_replicas_go_to_the_directory_with_the_fewest_partitions() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(a.join("t-0")).unwrap();
        std::fs::create_dir_all(a.join("t-1")).unwrap();
        let dirs = LogDirs::open(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(dirs.place("t", 0), a);
        assert_eq!(dirs.place("u", 0), b);
        assert_eq!(dirs.place("u", 1), b);
        // Tied: the first in log.dirs order.
        assert_eq!(dirs.place("u", 2), a);
        dirs.forget("t", 0);
        dirs.forget("t", 1);
        assert_eq!(dirs.place("u", 3), a);
    }

    #[test]
    fn a_partition_in_two_directories_names_both() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(a.join("t-0")).unwrap();
        std::fs::create_dir_all(b.join("t-0")).unwrap();
        let error = LogDirs::open(&[a.clone(), b.clone()]).err().unwrap();
        let message = error.to_string();
        assert!(message.contains("t-0"), "{message}");
        assert!(message.contains(&a.display().to_string()), "{message}");
        assert!(message.contains(&b.display().to_string()), "{message}");
    }

    #[test]
    fn usage_reports_the_volume() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = LogDirs::open(&[tmp.path().join("a")]).unwrap();
        let usage = dirs.usage();
        let (total, usable) = usage[0].space.as_ref().copied().unwrap();
        assert!(total > 0 && usable <= total);
        std::fs::remove_dir(tmp.path().join("a")).unwrap();
        assert!(dirs.usage()[0].space.is_err());
    }
}
