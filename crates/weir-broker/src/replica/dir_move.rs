//! Moving a replica to another of this broker's log directories while it
//! keeps serving (AlterReplicaLogDirs), as Kafka's future logs do.
//!
//! The partition's segments are copied into `<topic>-<partition>-future`
//! in the target directory while produce and fetch go on: twice, each time
//! after sealing the active segment, within
//! `replica.alter.log.dirs.io.max.bytes.per.second`. Then, while nothing
//! may change the log (fetches go on reading it), what changed since is
//! copied again, the copy is synced and marked complete, the old directory
//! is renamed away, the copy is renamed into place and the partition opens
//! it and serves from it. At start
//! ([`recover`]) a complete future directory is put in place and an
//! incomplete one removed, so a crash at any point leaves exactly one copy.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir_log::storage::Storage;
use weir_log::LogError;

use crate::partition::Partition;
use crate::quotas::replication::ReplicationQuota;
use crate::replica::directories::{partition_dir, partition_of};
use crate::replica::manager::ReplicaManager;

/// Ends the name of a partition's copy being made in its new directory.
pub const FUTURE_SUFFIX: &str = "-future";
/// Ends the name of a partition's old directory, renamed away once its copy
/// took over.
pub const DELETE_SUFFIX: &str = "-delete";
/// In a future directory: everything in it is synced and it is the
/// partition's current log.
const COMPLETE_FILE: &str = "move-complete";
/// What a throttled move copies between two looks at its rate.
const THROTTLED_CHUNK: u64 = 64 * 1024;
/// How long a throttled move waits before it looks at its rate again.
const THROTTLE_WAIT: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("the move was cancelled by a newer one")]
    Cancelled,
    #[error("the partition is no longer hosted here")]
    Gone,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
}

/// A move under way, as DescribeLogDirs reports it.
#[derive(Debug)]
pub struct Move {
    /// Index of the target in `log.dirs`.
    pub target: usize,
    pub future_dir: PathBuf,
    copied_end: AtomicU64,
    copied_bytes: AtomicU64,
    cancelled: AtomicBool,
}

impl Move {
    pub fn new(target: usize, future_dir: PathBuf) -> Self {
        Self {
            target,
            future_dir,
            copied_end: AtomicU64::new(0),
            copied_bytes: AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
        }
    }

    /// The end offset of what the copy holds so far.
    pub fn copied_end(&self) -> u64 {
        self.copied_end.load(Ordering::Acquire)
    }

    /// Bytes of log copied so far.
    pub fn copied_bytes(&self) -> u64 {
        self.copied_bytes.load(Ordering::Acquire)
    }

    /// Stops the move before it takes over; its copy is removed.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    fn check(&self) -> Result<(), MoveError> {
        if self.cancelled.load(Ordering::Acquire) {
            return Err(MoveError::Cancelled);
        }
        Ok(())
    }
}

/// The future directory of a partition in `dir`.
pub fn future_dir(dir: &Path, topic: &str, partition: i32) -> PathBuf {
    dir.join(format!("{topic}-{partition}{FUTURE_SUFFIX}"))
}

/// Runs the move to its end (or failure), on the calling thread: it copies
/// whole segments, so call it on a thread of its own.
pub(crate) fn run(replicas: &ReplicaManager, partition: &Arc<Partition>, job: &Move) {
    let (topic, index) = (partition.topic.clone(), partition.index);
    let result = copy_and_take_over(replicas, partition, job);
    let log_dirs = replicas.log_dirs();
    log_dirs.end_move(&topic, index, job);
    match result {
        Ok(old) => {
            tracing::info!(topic, partition = index, dir = %log_dirs.dirs()[job.target].display(), "replica moved to another log directory");
            // Through the storage: a fetch still reading the old log keeps
            // its files open.
            if let Err(error) = partition.storage().remove_dir_all(&old) {
                tracing::warn!(dir = %old.display(), %error, "cannot remove a moved replica's old directory; it is removed at the next start");
            }
        }
        Err(error) => {
            if !matches!(error, MoveError::Cancelled) {
                tracing::warn!(topic, partition = index, %error, "moving a replica to another log directory failed");
            }
            if let Err(error) = remove_if_present(&job.future_dir) {
                tracing::warn!(dir = %job.future_dir.display(), %error, "cannot remove an abandoned future log");
            }
        }
    }
}

/// The copy and the swap; returns the old directory, renamed away.
fn copy_and_take_over(
    replicas: &ReplicaManager,
    partition: &Arc<Partition>,
    job: &Move,
) -> Result<PathBuf, MoveError> {
    let future = &job.future_dir;
    remove_if_present(future).map_err(io_at(future))?;
    std::fs::create_dir_all(future).map_err(io_at(future))?;
    let (source, truncations) = {
        let log = partition.log();
        (log.dir().to_owned(), log.truncation_count())
    };
    // The segments, while the partition serves: twice, each time sealing
    // the active one first, so that what is left for the locked phase is
    // only what was appended during the second copy. A segment that
    // changed while it was copied (cleaned, deleted) is copied again then.
    let mut copied: HashMap<String, Stamp> = HashMap::new();
    for _ in 0..2 {
        partition.roll_log()?;
        let bases = partition.log().segment_base_offsets();
        job.copied_end
            .store(bases.first().copied().unwrap_or(0), Ordering::Release);
        let quota = replicas.log_dir_move_quota();
        copy_sealed(&source, future, &bases, &mut copied, quota, job)?;
    }
    let target_dir = replicas.log_dirs().dirs()[job.target].clone();
    let destination = partition_dir(&target_dir, &partition.topic, partition.index);
    let old = source.with_file_name(format!(
        "{}-{}.{}{DELETE_SUFFIX}",
        partition.topic,
        partition.index,
        uuid::Uuid::new_v4().simple()
    ));
    // Under the replica manager's reconciliation lock: a deletion of the
    // partition cannot remove its directory from under the swap.
    replicas
        .while_hosted(partition, || {
            partition.move_log(
                |log, storage| {
                    job.check()?;
                    if log.dir() != source {
                        return Err(MoveError::Cancelled);
                    }
                    if log.truncation_count() != truncations {
                        // A truncated segment may have regrown to its old size.
                        copied.clear();
                    }
                    finish_copy(&source, future, &copied)?;
                    let marker = future.join(COMPLETE_FILE);
                    std::fs::write(&marker, b"").map_err(io_at(&marker))?;
                    sync_file(&marker)?;
                    sync_file(future)?;
                    // From here on the copy is the log: a crash finishes the
                    // move. A failure goes back to the old directory, which the
                    // partition then keeps serving, so the copy must no longer
                    // count as complete.
                    if let Err(error) = storage.rename_dir(&source, &old) {
                        let _ = std::fs::remove_file(&marker);
                        return Err(io_at(&source)(error));
                    }
                    sync_quietly(source.parent().unwrap_or(&source));
                    if let Err(error) = storage.rename_dir(future, &destination) {
                        undo(storage, &source, &old, None, &marker);
                        return Err(io_at(future)(error));
                    }
                    // Syncs that fail from here on leave the marker, which
                    // finishes the move at the next start all the same.
                    sync_quietly(&target_dir);
                    let _ = std::fs::remove_file(destination.join(COMPLETE_FILE));
                    Ok(destination.clone())
                },
                |storage| {
                    undo(
                        storage,
                        &source,
                        &old,
                        Some((&destination, future)),
                        &future.join(COMPLETE_FILE),
                    )
                },
            )
        })
        .ok_or(MoveError::Gone)??;
    replicas
        .log_dirs()
        .moved(&partition.topic, partition.index, job.target);
    Ok(old)
}

/// Puts the old directory back after the copy failed to take over: the
/// copy back under its future name (if it was renamed into place already)
/// and no longer marked complete, so that a restart removes it.
fn undo(
    storage: &dyn Storage,
    source: &Path,
    old: &Path,
    placed: Option<(&Path, &Path)>,
    marker: &Path,
) {
    if let Some((destination, future)) = placed {
        if let Err(error) = storage.rename_dir(destination, future) {
            tracing::error!(dir = %destination.display(), %error, "cannot undo a failed replica move; remove this directory before restarting");
        }
    }
    let _ = std::fs::remove_file(marker);
    if let Err(error) = storage.rename_dir(old, source) {
        tracing::error!(dir = %old.display(), %error, "cannot undo a failed replica move; rename this directory back before restarting");
    }
    sync_quietly(source.parent().unwrap_or(source));
}

/// A sync whose failure does not undo what it follows: logged only.
fn sync_quietly(dir: &Path) {
    if let Err(error) = sync_file(dir) {
        tracing::warn!(%error, "cannot sync a directory after moving a replica");
    }
}

/// Copies the files of the sealed segments (all of `bases` but the last,
/// the active one) not copied yet or changed since, oldest first; records
/// in `copied` those that did not change while they were copied.
fn copy_sealed(
    source: &Path,
    future: &Path,
    bases: &[u64],
    copied: &mut HashMap<String, Stamp>,
    quota: &ReplicationQuota,
    job: &Move,
) -> Result<(), MoveError> {
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(source).map_err(io_at(source))? {
        names.push(
            entry
                .map_err(io_at(source))?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    for pair in bases.windows(2) {
        let prefix = format!("{:020}.", pair[0]);
        for name in names.iter().filter(|name| is_segment_file(name, &prefix)) {
            job.check()?;
            let from = source.join(name);
            let Ok(before) = Stamp::of(&from) else {
                continue;
            };
            if copied.get(name) == Some(&before) {
                continue;
            }
            copy_throttled(&from, &future.join(name), quota, job)?;
            if Stamp::of(&from).ok() == Some(before) {
                copied.insert(name.clone(), before);
            }
            if name.ends_with(".log") {
                job.copied_bytes.fetch_add(before.len, Ordering::AcqRel);
            }
        }
        job.copied_end.store(pair[1], Ordering::Release);
    }
    Ok(())
}

/// Whether `name` is one of a segment's files (`prefix` is its base
/// offset and a dot), not one the log removes at its next open.
fn is_segment_file(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|suffix| !suffix.contains('.'))
}

/// Makes `future` hold what `source` holds: the segments copied before
/// and unchanged since are kept, everything else is copied (again), and
/// files gone from `source` are removed. Everything is synced.
fn finish_copy(
    source: &Path,
    future: &Path,
    copied: &HashMap<String, Stamp>,
) -> Result<(), MoveError> {
    let mut present = HashSet::new();
    for entry in std::fs::read_dir(source).map_err(io_at(source))? {
        let entry = entry.map_err(io_at(source))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let from = entry.path();
        // Files the log removes at its next open anyway.
        if name.ends_with(".deleted") || name.ends_with(".tmp") || name.ends_with(".cleaned") {
            continue;
        }
        if !entry.file_type().map_err(io_at(&from))?.is_file() {
            continue;
        }
        present.insert(name.clone());
        let unchanged = copied
            .get(&name)
            .is_some_and(|stamp| Stamp::of(&from).ok() == Some(*stamp));
        if !unchanged {
            copy_synced(&from, &future.join(&name))?;
        }
    }
    for entry in std::fs::read_dir(future).map_err(io_at(future))? {
        let entry = entry.map_err(io_at(future))?;
        if !present.contains(&*entry.file_name().to_string_lossy()) {
            std::fs::remove_file(entry.path()).map_err(io_at(&entry.path()))?;
        }
    }
    Ok(())
}

/// At start, in the directories of `log.dirs`: a complete future directory
/// takes the place of the partition's old one (wherever that is), an
/// incomplete one is removed, and old directories renamed away are removed.
pub fn recover(dirs: &[PathBuf]) -> io::Result<()> {
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let renamed_away = name
                .strip_suffix(DELETE_SUFFIX)
                .and_then(|rest| rest.rsplit_once('.'))
                .is_some_and(|(partition, _)| partition_of(partition).is_some());
            if renamed_away {
                tracing::info!(dir = %path.display(), "removing a moved replica's old directory");
                std::fs::remove_dir_all(&path)?;
                continue;
            }
            let Some(current) = name
                .strip_suffix(FUTURE_SUFFIX)
                .filter(|current| partition_of(current).is_some())
            else {
                continue;
            };
            if !path.join(COMPLETE_FILE).exists() {
                tracing::info!(dir = %path.display(), "removing an unfinished replica move");
                std::fs::remove_dir_all(&path)?;
                continue;
            }
            for other in dirs {
                let stale = other.join(current);
                if stale.exists() {
                    std::fs::remove_dir_all(&stale)?;
                    sync_file(other).map_err(into_io)?;
                }
            }
            let destination = dir.join(current);
            tracing::info!(dir = %destination.display(), "finishing a replica move");
            std::fs::rename(&path, &destination)?;
            sync_file(dir).map_err(into_io)?;
            std::fs::remove_file(destination.join(COMPLETE_FILE))?;
        }
    }
    Ok(())
}

/// What tells a file that changed from one that did not: a cleaned
/// segment is a new file, a truncated or appended one another size or
/// modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    inode: u64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            len: meta.len(),
            inode: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        })
    }
}

/// Copies a file and syncs the copy, in chunks counted against `quota`
/// (`replica.alter.log.dirs.io.max.bytes.per.second`), waiting while the
/// rate is over it.
fn copy_throttled(
    from: &Path,
    to: &Path,
    quota: &ReplicationQuota,
    job: &Move,
) -> Result<(), MoveError> {
    if !quota.is_limited() {
        return copy_synced(from, to);
    }
    let mut source = std::fs::File::open(from).map_err(io_at(from))?;
    let mut copy = std::fs::File::create(to).map_err(io_at(to))?;
    loop {
        while quota.is_exceeded() {
            job.check()?;
            std::thread::sleep(THROTTLE_WAIT);
        }
        let chunk =
            io::copy(&mut (&mut source).take(THROTTLED_CHUNK), &mut copy).map_err(io_at(from))?;
        if chunk == 0 {
            break;
        }
        quota.record(chunk as usize);
    }
    copy.sync_all().map_err(io_at(to))
}

fn copy_synced(from: &Path, to: &Path) -> Result<(), MoveError> {
    std::fs::copy(from, to).map_err(io_at(from))?;
    sync_file(to)
}

/// Syncs a file or a directory.
fn sync_file(path: &Path) -> Result<(), MoveError> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(io_at(path))
}

fn remove_if_present(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn io_at(path: &Path) -> impl Fn(io::Error) -> MoveError {
    let path = path.to_owned();
    move |source| MoveError::Io {
        path: path.clone(),
        source,
    }
}

fn into_io(error: MoveError) -> io::Error {
    match error {
        MoveError::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_future_replaces_the_old_directory_and_an_incomplete_one_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(a.join("t-0")).unwrap();
        std::fs::write(a.join("t-0/old"), b"").unwrap();
        std::fs::create_dir_all(b.join("t-0-future")).unwrap();
        std::fs::write(b.join("t-0-future/new"), b"").unwrap();
        std::fs::write(b.join("t-0-future").join(COMPLETE_FILE), b"").unwrap();
        std::fs::create_dir_all(a.join("t-1")).unwrap();
        std::fs::create_dir_all(b.join("t-1-future")).unwrap();
        std::fs::create_dir_all(a.join("t-2.0123abc-delete")).unwrap();
        recover(&[a.clone(), b.clone()]).unwrap();
        assert!(!a.join("t-0").exists());
        assert!(b.join("t-0/new").exists());
        assert!(!b.join("t-0").join(COMPLETE_FILE).exists());
        assert!(a.join("t-1").exists());
        assert!(!b.join("t-1-future").exists());
        assert!(!a.join("t-2.0123abc-delete").exists());
    }

    #[test]
    fn finishing_copies_what_changed_and_drops_what_went() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, future) = (tmp.path().join("s"), tmp.path().join("f"));
        std::fs::create_dir_all(&source).unwrap();
        std::fs::create_dir_all(&future).unwrap();
        std::fs::write(source.join("kept.log"), b"same").unwrap();
        std::fs::write(source.join("changed.log"), b"before").unwrap();
        std::fs::write(source.join("x.deleted"), b"").unwrap();
        let mut copied = HashMap::new();
        for name in ["kept.log", "changed.log"] {
            copy_synced(&source.join(name), &future.join(name)).unwrap();
            copied.insert(name.to_owned(), Stamp::of(&source.join(name)).unwrap());
        }
        std::fs::write(future.join("gone.log"), b"").unwrap();
        std::fs::write(source.join("changed.log"), b"after, longer").unwrap();
        std::fs::write(source.join("new.index"), b"i").unwrap();
        finish_copy(&source, &future, &copied).unwrap();
        let read = |name: &str| std::fs::read(future.join(name)).unwrap();
        assert_eq!(read("kept.log"), b"same");
        assert_eq!(read("changed.log"), b"after, longer");
        assert_eq!(read("new.index"), b"i");
        assert!(!future.join("gone.log").exists());
        assert!(!future.join("x.deleted").exists());
    }
}
