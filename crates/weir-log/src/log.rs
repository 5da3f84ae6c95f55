//! The partition log: an ordered run of segments with one active (last)
//! segment taking appends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::batch::{self, Batch, BatchError, BatchHeader, CheckedBatch, Origin, HEADER_SIZE};
use crate::checkpoint;
use crate::cleaner::Cleanable;
use crate::config::{Clock, LogConfig, SystemClock, TimestampType};
use crate::epoch::{EpochEntry, LeaderEpochCache};
use crate::error::{IoContext, LogError};
use crate::recent::RecentRead;
use crate::sealed::SealedSegment;
use crate::segment::{
    self, PreparedBatch, Segment, CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
};
use crate::slice::LogSlice;
use crate::storage::{FsStorage, Storage, StorageFile};
use crate::txn::{self, AbortedTxn, OpenTxn, TxnState, TXN_INDEX_SUFFIX};

/// Written by [`Log::close`]; its presence at open means every file was
/// synced, indexes included, so nothing needs scanning.
pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
/// Base offset of the first segment recovery must scan after a crash.
pub const RECOVERY_POINT_FILE: &str = "recovery-point";
/// The log start offset, when DeleteRecords moved it inside a segment.
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset";
/// The log cleaner's checkpoint: the first offset it has not cleaned.
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-checkpoint";

/// A log opened by [`Log::open_unsynced`]: the removal of its
/// clean-shutdown marker may not be durable yet, and a write reaching the
/// disk before it would be trusted as clean after a crash. So the log is
/// only handed out by [`Log::sync_opened`].
#[must_use = "the log is usable only through Log::sync_opened"]
pub struct UnsyncedLog {
    log: Log,
    /// The log was closed cleanly and its marker removed.
    marker_removed: bool,
}

impl UnsyncedLog {
    pub fn dir(&self) -> &Path {
        &self.log.dir
    }
}

impl std::fmt::Debug for UnsyncedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnsyncedLog")
            .field("dir", &self.log.dir)
            .field("marker_removed", &self.marker_removed)
            .finish()
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: u64,
    pub last_offset: u64,
    /// Largest timestamp among the appended batches.
    pub max_timestamp: i64,
    /// The broker's clock at the append.
    pub append_time_ms: i64,
    /// `Some(append_time_ms)` when the log stamped the batches itself
    /// (`message.timestamp.type = LogAppendTime`).
    pub log_append_time_ms: Option<i64>,
    pub batches: usize,
    pub records: u64,
    pub bytes: u64,
    /// The append started a new segment at `base_offset`.
    pub rolled: bool,
}

/// What a retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
    pub log_start_offset: u64,
}

/// A batch found by [`Log::verify`] to be corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptBatch {
    pub path: PathBuf,
    pub position: u64,
    pub reason: String,
}

/// Answer to [`Log::offset_for_timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub offset: u64,
    pub timestamp: i64,
}

struct PendingDelete {
    due_ms: i64,
    path: PathBuf,
}

struct State {
    config: LogConfig,
    segments: BTreeMap<u64, Segment>,
    log_start_offset: u64,
    /// Persisted in [`RECOVERY_POINT_FILE`].
    recovery_point: u64,
    /// Bumped by truncation, so a flush that raced with it keeps its hands
    /// off the recovery point.
    truncations: u64,
    epochs: LeaderEpochCache,
    unflushed_records: u64,
    /// A segment was sealed since the last flush: syncing it lets the
    /// recovery point move past it.
    rolled_since_flush: bool,
    oldest_unflushed_ms: Option<i64>,
    /// A segment file was created since the directory was last synced.
    dir_dirty: bool,
    pending_deletes: Vec<PendingDelete>,
    /// Set after an I/O failure that left the files in doubt.
    offline: Option<String>,
    /// First offset the cleaner has not cleaned; persisted in
    /// [`CLEANER_CHECKPOINT_FILE`]. Every segment that ends at or below it
    /// was rewritten by the cleaner and synced.
    cleaner_checkpoint: u64,
    /// The earliest delete horizon of a tombstone the last cleaning kept:
    /// from then on, cleaning again removes it.
    tombstone_horizon: Option<i64>,
    /// The transactions open at the log end.
    txn: TxnState,
}

impl State {
    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log has a segment")
    }
    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log has a segment")
    }
    fn log_end_offset(&self) -> u64 {
        self.active().next_offset
    }
}

/// Lock order: `state` may be held while taking `flush`, never the
/// reverse.
struct FlushState {
    durable_offset: u64,
    in_progress: bool,
    /// Bumped by truncation: a sync that started before one must not move
    /// the durable offset past the new log end.
    truncations: u64,
}

enum Mode<'a> {
    /// A leader's append: the log assigns offsets and this leader epoch.
    Leader(i32),
    /// A leader's append of a batch already checked: only its size limit
    /// is left to check.
    LeaderChecked(i32, &'a CheckedBatch),
    /// A follower's append: batches keep the offsets and epochs they carry.
    Replicated,
    /// A mirror leader's append of batches fetched from a source cluster:
    /// they keep their offsets (gaps and all) and bytes, and take this
    /// leader epoch, which lies outside their CRC.
    Mirrored(i32),
}

/// The batches of an append: one checked where it arrived, or a buffer's
/// checked as they are read.
enum Batches<'a, I> {
    Checked(Option<Result<Batch<'a>, BatchError>>),
    Unchecked(I),
}

impl<'a, I: Iterator<Item = Result<Batch<'a>, BatchError>>> Iterator for Batches<'a, I> {
    type Item = Result<Batch<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Checked(batch) => batch.take(),
            Self::Unchecked(batches) => batches.next(),
        }
    }
}

/// The log's state behind its lock, with what readers ask most published
/// as it stood when the lock was last released: readers of those never wait
/// for the lock, which an append holds across its write.
struct StateCell {
    state: Mutex<State>,
    log_start_offset: AtomicU64,
    log_end_offset: AtomicU64,
    offline: AtomicBool,
    /// No transaction open, and none ended whose marker the high watermark
    /// had not passed when last asked: the last stable offset is the high
    /// watermark.
    transactions_settled: AtomicBool,
}

impl StateCell {
    fn new(state: State) -> Self {
        let cell = Self {
            log_start_offset: AtomicU64::new(0),
            log_end_offset: AtomicU64::new(0),
            offline: AtomicBool::new(false),
            transactions_settled: AtomicBool::new(false),
            state: Mutex::new(state),
        };
        cell.publish(&cell.state.lock());
        cell
    }

    fn lock(&self) -> StateGuard<'_> {
        StateGuard {
            guard: self.state.lock(),
            cell: self,
        }
    }

    /// The state if nobody holds it now.
    fn try_lock(&self) -> Option<StateGuard<'_>> {
        Some(StateGuard {
            guard: self.state.try_lock()?,
            cell: self,
        })
    }

    fn publish(&self, state: &State) {
        self.log_start_offset
            .store(state.log_start_offset, Ordering::Release);
        self.log_end_offset
            .store(state.log_end_offset(), Ordering::Release);
        self.offline
            .store(state.offline.is_some(), Ordering::Release);
        self.transactions_settled
            .store(state.txn.is_settled(), Ordering::Release);
    }
}

/// The state, locked; publishes what [`StateCell`] keeps as it is released.
struct StateGuard<'a> {
    guard: parking_lot::MutexGuard<'a, State>,
    cell: &'a StateCell,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        self.cell.publish(&self.guard);
    }
}

/// One partition's log. All methods take `&self`: appends, reads and
/// maintenance serialize on an internal lock, while fsyncs run outside it so
/// that concurrent appenders share them (group commit).
/// What a log calls with its directory and the kind of fault when an I/O
/// failure refuses a write (see [`Log::on_failure`]).
pub type FailureListener = Arc<dyn Fn(&Path, DirFault) + Send + Sync>;

/// What an I/O failure says of a log's directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirFault {
    /// The directory is in doubt: its logs must not serve until reopened.
    Failed,
    /// The volume is full: writes are refused until space is freed, and
    /// what is there stays valid.
    Full,
}

pub struct Log {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    /// Told the log's directory when an I/O failure leaves it in doubt.
    failure_listener: std::sync::OnceLock<FailureListener>,
    state: StateCell,
    flush: Mutex<FlushState>,
    flushed: Condvar,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Opens (or creates) the log in `dir` on the real file system.
    pub fn open(dir: impl Into<PathBuf>, config: LogConfig) -> Result<Self, LogError> {
        Self::open_with(
            dir,
            config,
            Arc::new(FsStorage::default()),
            Arc::new(SystemClock),
        )
    }

    /// Opens (or creates) the log in `dir`, recovering from an unclean
    /// shutdown: segments from the recovery point on are scanned, a torn
    /// tail is cut off, missing or inconsistent indexes are rebuilt.
    pub fn open_with(
        dir: impl Into<PathBuf>,
        config: LogConfig,
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, LogError> {
        let opened = Self::open_unsynced(dir, config, storage, clock)?;
        Self::sync_opened(vec![opened])
            .pop()
            .expect("one log in, one out")
    }

    /// [`open_with`](Self::open_with), but leaving the removal of the
    /// clean-shutdown marker to [`sync_opened`](Self::sync_opened), which
    /// makes the removals of many logs durable at once: opening thousands
    /// of logs then costs one sync, not one per log.
    pub fn open_unsynced(
        dir: impl Into<PathBuf>,
        config: LogConfig,
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
    ) -> Result<UnsyncedLog, LogError> {
        config.validate()?;
        let dir = dir.into();
        storage.create_dir_all(&dir).context(&dir)?;
        let names = storage.list(&dir).context(&dir)?;
        for name in &names {
            if name.ends_with(DELETED_SUFFIX)
                || name.ends_with(".tmp")
                || name.ends_with(CLEANED_SUFFIX)
            {
                let path = dir.join(name);
                storage.remove(&path).context(&path)?;
            }
        }
        // Segments a crash left half swapped in by the cleaner: trusted,
        // since they were synced before the swap was committed.
        let swapped = complete_swaps(&*storage, &dir, &names)?;
        let names = if names.iter().any(|n| n.ends_with(SWAP_SUFFIX)) {
            storage.list(&dir).context(&dir)?
        } else {
            names
        };
        let mut bases: Vec<u64> = names
            .iter()
            .filter_map(|n| n.strip_suffix(".log"))
            .filter(|stem| stem.len() == 20)
            .filter_map(|stem| stem.parse().ok())
            .collect();
        bases.sort_unstable();

        let clean_marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = storage.exists(&clean_marker);
        // The transactions open at the log end, written at a clean close.
        let saved_txns = if clean {
            checkpoint::read(&*storage, &clean_marker)
                .ok()
                .flatten()
                .and_then(|text| parse_saved_txns(&text))
        } else {
            None
        };
        let recovery_point =
            checkpoint::read_u64(&*storage, &dir.join(RECOVERY_POINT_FILE)).unwrap_or(0);
        let (cleaner_checkpoint, tombstone_horizon) =
            read_cleaner_checkpoint(&*storage, &dir.join(CLEANER_CHECKPOINT_FILE));
        // A scan cannot tell a gap the cleaner left at the end of a segment
        // from a tail lost in a crash, so cleaned segments must be trusted:
        // the cleaner syncs them and moves the recovery point past them
        // before the old segments go, and its checkpoint says the same.
        let trusted_below = recovery_point.max(cleaner_checkpoint);
        let interval = config.index_interval_bytes;

        let mut segments = BTreeMap::new();
        let mut first_scanned = None;
        let mut scanned = Vec::new();
        // Where each leader epoch starts in the scanned segments.
        let mut scanned_epochs = Vec::new();
        // The next offset of the previous segment, when it was scanned.
        let mut scanned_end = None;
        // Index in `bases` of the first segment recovery throws away.
        let mut drop_from = None;
        for (i, &base) in bases.iter().enumerate() {
            // A segment must start where the scanned one before it ends: if it
            // starts later, the crash lost the unflushed end of that segment
            // (its successor's directory entry reached the disk first), and
            // nothing after it was flushed either.
            if let Some(end) = scanned_end.filter(|&end| end != base) {
                tracing::warn!(
                    segment = %segment::file_path(&dir, base, LOG_SUFFIX).display(),
                    expected_base = end,
                    "dropping segments that follow a tail lost in an unclean shutdown"
                );
                drop_from = Some(i);
                break;
            }
            let last = i + 1 == bases.len();
            let trusted = clean
                || swapped.contains(&base)
                || bases.get(i + 1).is_some_and(|&next| next <= trusted_below);
            let (mut segment, invalid) = if trusted {
                Segment::open_trusted(&*storage, &dir, base, last, interval)?
            } else {
                first_scanned.get_or_insert(base);
                Segment::recover(&*storage, &dir, base, interval, &mut scanned_epochs)?
            };
            if !trusted {
                segment.log_dirty = true;
                scanned_end = Some(segment.next_offset);
                scanned.push(base);
            }
            if let Some(invalid) = invalid {
                if trusted {
                    tracing::error!(
                        segment = %segment.path(LOG_SUFFIX).display(),
                        position = invalid.position,
                        reason = %invalid.reason,
                        "corrupt batch in a flushed segment; it and what follows in the segment will not be served"
                    );
                    segment.size = segment.log.len();
                    segment.corrupt_from = Some(invalid);
                } else {
                    tracing::warn!(
                        segment = %segment.path(LOG_SUFFIX).display(),
                        position = invalid.position,
                        reason = %invalid.reason,
                        "truncating the unflushed tail of the log after an unclean shutdown"
                    );
                    let path = segment.path(LOG_SUFFIX);
                    segment.log.truncate(invalid.position).context(&path)?;
                    segments.insert(base, segment);
                    drop_from = Some(i + 1);
                    break;
                }
            }
            segments.insert(base, segment);
        }
        if let Some(i) = drop_from {
            for &base in &bases[i..] {
                remove_segment_files(&*storage, &dir, base)?;
            }
        }

        // Unlike the recovery point, a lost log start would expose deleted
        // records: an unreadable file stops the open.
        let persisted_start =
            checkpoint::read_u64_strict(&*storage, &dir.join(LOG_START_OFFSET_FILE))?;
        let recovered_end = segments.values().next_back().map(|s| s.next_offset);
        if let Some(start) = persisted_start.filter(|&s| recovered_end.is_some_and(|end| end < s)) {
            // DeleteRecords moved the log start past what survived the crash.
            // The offsets below it are gone for good and must not be handed
            // out again, so the log restarts empty there (as Kafka's does).
            tracing::warn!(dir = %dir.display(), log_start_offset = start, "log end recovered below the log start; restarting the log empty at the log start");
            for &base in segments.keys() {
                remove_segment_files(&*storage, &dir, base)?;
            }
            segments.clear();
        }
        let mut dir_dirty = false;
        if segments.is_empty() {
            let base = persisted_start.unwrap_or(0);
            segments.insert(base, Segment::create(&*storage, &dir, base)?);
            dir_dirty = true;
        }
        // Every segment but the last is sealed: its indexes live in files.
        let last_base = *segments.keys().next_back().expect("a segment");
        for segment in segments.values_mut() {
            if segment.base_offset != last_base && !segment.is_sealed() {
                segment.seal(&*storage)?;
                dir_dirty = true; // new index files
            }
        }
        let (txn, rewrote) = recover_transactions(&*storage, &mut segments, &scanned, saved_txns)?;
        dir_dirty |= rewrote;
        let first_base = *segments.keys().next().expect("a segment");
        let log_end_offset = segments[&last_base].next_offset;
        let log_start_offset = persisted_start
            .unwrap_or(first_base)
            .max(first_base)
            .min(log_end_offset);

        let mut epochs = match LeaderEpochCache::load(&*storage, &dir) {
            Ok(epochs) => epochs,
            // The epochs are in the batches themselves: a damaged file is
            // rebuilt from them rather than keeping the partition offline.
            Err(LogError::Corrupt { path, reason, .. }) => {
                tracing::warn!(file = %path.display(), %reason, "corrupt leader-epoch checkpoint; rebuilding it from the log's batches");
                let mut starts = Vec::new();
                for segment in segments.values() {
                    segment.epoch_starts(&mut starts)?;
                }
                LeaderEpochCache::rebuilt(&*storage, &dir, starts)?
            }
            Err(error) => return Err(error),
        };
        epochs.truncate_from_end(&*storage, log_end_offset)?;
        // The file holds every epoch that starts below the recovery point;
        // those of the scanned batches may be newer. (An empty log keeps
        // none: its scanned batches all lie below its start.)
        if log_start_offset < log_end_offset {
            for start in scanned_epochs
                .into_iter()
                .filter(|e| e.start_offset < log_end_offset)
            {
                epochs.assign(start.epoch, start.start_offset);
            }
        }
        // A tiered log's epochs below its local start describe its remote
        // segments; they go when the log start across both tiers passes
        // them (`forget_epochs_before`).
        if !config.remote_storage_enable {
            epochs.truncate_from_start(&*storage, log_start_offset)?;
        }

        if clean {
            // Appends that follow must not be mistaken for clean data: the
            // removal is made durable by `sync_opened`, before any write.
            storage.remove(&clean_marker).context(&clean_marker)?;
        }
        let durable_offset = match first_scanned {
            None => log_end_offset,
            Some(base) => base.min(log_end_offset),
        };
        let recovery_point = recovery_point.min(first_scanned.unwrap_or(u64::MAX));
        tracing::debug!(dir = %dir.display(), segments = segments.len(), log_start_offset, log_end_offset, clean, "log opened");
        let log = Self {
            dir,
            storage,
            clock,
            state: StateCell::new(State {
                config,
                segments,
                log_start_offset,
                recovery_point,
                truncations: 0,
                epochs,
                unflushed_records: 0,
                rolled_since_flush: false,
                oldest_unflushed_ms: None,
                dir_dirty,
                pending_deletes: Vec::new(),
                offline: None,
                cleaner_checkpoint,
                tombstone_horizon,
                txn,
            }),
            flush: Mutex::new(FlushState {
                durable_offset,
                in_progress: false,
                truncations: 0,
            }),
            flushed: Condvar::new(),
            failure_listener: std::sync::OnceLock::new(),
        };
        Ok(UnsyncedLog {
            log,
            marker_removed: clean,
        })
    }

    /// Makes what [`open_unsynced`](Self::open_unsynced) left undone
    /// durable, for all of `opened` together (one
    /// [`Storage::sync_dirs`] per storage), and hands out the logs, in the
    /// order given. A log whose directory could not be synced is an error
    /// (and closed: a reopen decides again).
    pub fn sync_opened(opened: Vec<UnsyncedLog>) -> Vec<Result<Self, LogError>> {
        // The logs of one storage share its batch; the thin address says
        // which storage a log has.
        let key = |log: &Log| Arc::as_ptr(&log.storage) as *const () as usize;
        let mut batches: BTreeMap<usize, (Arc<dyn Storage>, Vec<PathBuf>)> = BTreeMap::new();
        for o in opened.iter().filter(|o| o.marker_removed) {
            batches
                .entry(key(&o.log))
                .or_insert_with(|| (o.log.storage.clone(), Vec::new()))
                .1
                .push(o.log.dir.clone());
        }
        let mut failed: BTreeMap<usize, String> = BTreeMap::new();
        for (k, (storage, dirs)) in &batches {
            if let Err(error) = storage.sync_dirs(dirs) {
                tracing::error!(directories = dirs.len(), %error, "cannot sync the directories of opened logs");
                failed.insert(*k, error.to_string());
            }
        }
        opened
            .into_iter()
            .map(|o| {
                if let Some(reason) = failed.get(&key(&o.log)).filter(|_| o.marker_removed) {
                    return Err(LogError::Io {
                        path: o.log.dir.clone(),
                        source: std::io::Error::other(reason.clone()),
                    });
                }
                // It may roll: only now that the marker is gone for good.
                o.log.settle_corrupt_segments()?;
                Ok(o.log)
            })
            .collect()
    }

    /// Keeps a segment found corrupt though it was flushed (a trusted
    /// segment at open, or any segment `verify` checked) out of recovery's
    /// reach. Recovery scans the segments from the recovery point as an
    /// unflushed tail: it would cut such a segment at the corrupt batch and
    /// delete every later one, with the records appended since. So the
    /// active segment, if corrupt, is sealed (appends go to a new segment at
    /// its end), and the recovery point is moved past every corrupt segment,
    /// their files synced first.
    fn settle_corrupt_segments(&self) -> Result<(), LogError> {
        {
            let mut st = self.state.lock();
            if st.offline.is_some() {
                // Nothing can be synced; the reopen will decide.
                return Ok(());
            }
            let active = st.active();
            // With no valid batch there is no end to start a new segment at;
            // nothing of it is served and nothing follows it, so a cut by
            // recovery loses nothing (the next append replaces it).
            if active.corrupt_from.is_some() && active.next_offset > active.base_offset {
                let base = active.next_offset;
                tracing::info!(dir = %self.dir.display(), new_base = base, "sealing the corrupt active segment");
                self.roll_locked(&mut st, base)
                    .inspect_err(|error| self.note_failure(error))?;
            }
            let active_base = st.active().base_offset;
            let recovery_point = st.recovery_point;
            let exposed = st.segments.values().any(|s| {
                s.corrupt_from.is_some()
                    && s.base_offset != active_base
                    && s.base_offset >= recovery_point
            });
            if !exposed {
                return Ok(());
            }
        }
        // Whatever the durable offset says: the recovery point must move.
        self.sync_up_to(u64::MAX, false)
    }

    /// Has `listener` told, from now on, of the I/O failures that refuse
    /// a write: those that take the log offline and any other I/O error of
    /// an append, flush or roll ([`DirFault::Failed`]), and a full disk
    /// ([`DirFault::Full`], which only refuses the write until space is
    /// freed). Set once: a later listener is ignored. It may be called with the log's state
    /// locked: it must not call back into the log.
    pub fn on_failure(&self, listener: FailureListener) {
        let _ = self.failure_listener.set(listener);
    }

    /// Takes the log offline for `reason`, a failure outside it (its
    /// directory failed): it serves nothing until reopened.
    pub fn take_offline(&self, reason: &str) {
        let mut st = self.state.lock();
        if st.offline.is_none() {
            st.offline = Some(reason.to_owned());
        }
    }

    /// Whether the log is offline after a failure.
    pub fn is_offline(&self) -> bool {
        self.state.offline.load(Ordering::Acquire)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> LogConfig {
        self.state.lock().config.clone()
    }

    /// Applies new settings from the next operation on.
    pub fn set_config(&self, config: LogConfig) -> Result<(), LogError> {
        config.validate()?;
        self.state.lock().config = config;
        Ok(())
    }

    pub fn log_start_offset(&self) -> u64 {
        self.state.log_start_offset.load(Ordering::Acquire)
    }

    /// The offset the next appended record gets.
    pub fn log_end_offset(&self) -> u64 {
        self.state.log_end_offset.load(Ordering::Acquire)
    }

    /// Offset below which every record is on stable storage.
    pub fn durable_offset(&self) -> u64 {
        self.flush.lock().durable_offset
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.state.lock().segments.values().map(|s| s.size).sum()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<u64> {
        self.state.lock().segments.keys().copied().collect()
    }

    /// How many times the log has been truncated since it was opened: a
    /// copy of its files taken before a truncation may hold records that
    /// are gone.
    pub fn truncation_count(&self) -> u64 {
        self.state.lock().truncations
    }

    /// Appends producer batches as the leader: assigns offsets from the log
    /// end and stamps `leader_epoch`; the bytes are otherwise stored as they
    /// came (with LogAppendTime, the max timestamp and CRC are rewritten).
    /// All batches are validated before anything is written.
    pub fn append(&self, records: &[u8], leader_epoch: i32) -> Result<AppendInfo, LogError> {
        let (info, flush_due) = self.append_inner(records, Mode::Leader(leader_epoch))?;
        if flush_due {
            self.flush_to(info.last_offset + 1)?;
        }
        Ok(info)
    }

    /// [`append`](Self::append) without the flush that `flush.messages` or
    /// `flush.ms` may call for: returns whether one is due. The caller
    /// flushes with [`flush_to`](Self::flush_to) once it holds no lock of
    /// its own, so that concurrent appenders share one fsync (group commit).
    pub fn append_deferring_flush(
        &self,
        records: &[u8],
        leader_epoch: i32,
    ) -> Result<(AppendInfo, bool), LogError> {
        self.append_inner(records, Mode::Leader(leader_epoch))
    }

    /// [`append_deferring_flush`](Self::append_deferring_flush) for one
    /// batch checked where it arrived: its header and CRC are not read again
    /// under the log's lock.
    pub fn append_checked_deferring_flush(
        &self,
        batch: &CheckedBatch,
        leader_epoch: i32,
    ) -> Result<(AppendInfo, bool), LogError> {
        self.append_inner(&[], Mode::LeaderChecked(leader_epoch, batch))
    }

    /// Appends batches fetched from another cluster's log (a mirror):
    /// they keep their offsets, which must not go below the log end but may
    /// skip offsets (a compacted source), and their bytes but for the
    /// partition leader epoch, which becomes `leader_epoch`. The flush that
    /// `flush.messages` may call for is left to the caller, as in
    /// [`append_deferring_flush`](Self::append_deferring_flush).
    pub fn append_mirrored(
        &self,
        records: &[u8],
        leader_epoch: i32,
    ) -> Result<(AppendInfo, bool), LogError> {
        self.append_inner(records, Mode::Mirrored(leader_epoch))
    }

    /// Appends batches copied from a leader, keeping their offsets and epochs.
    pub fn append_replicated(&self, records: &[u8]) -> Result<AppendInfo, LogError> {
        let (info, flush_due) = self.append_inner(records, Mode::Replicated)?;
        if flush_due {
            self.flush_to(info.last_offset + 1)?;
        }
        Ok(info)
    }

    fn append_inner(&self, records: &[u8], mode: Mode) -> Result<(AppendInfo, bool), LogError> {
        self.append_locked(records, mode)
            .inspect_err(|error| self.note_failure(error))
    }

    fn append_locked(&self, records: &[u8], mode: Mode) -> Result<(AppendInfo, bool), LogError> {
        let now = self.clock.now_ms();
        let mut guard = self.state.lock();
        let st = &mut *guard;
        self.check_online(st)?;
        let origin = match mode {
            Mode::Leader(_) | Mode::LeaderChecked(..) => Origin::Client,
            Mode::Replicated | Mode::Mirrored(_) => Origin::Log,
        };
        let log_append_time = !matches!(mode, Mode::Replicated | Mode::Mirrored(_))
            && st.config.timestamp_type == TimestampType::LogAppendTime;
        let mut next_offset = st.log_end_offset();
        let mut prepared: Vec<PreparedBatch<'_>> = Vec::new();
        let mut epochs = Vec::new();
        let mut txn_events = Vec::new();
        let mut info = AppendInfo {
            base_offset: next_offset,
            last_offset: next_offset,
            max_timestamp: segment::NO_TIMESTAMP,
            append_time_ms: now,
            log_append_time_ms: log_append_time.then_some(now),
            batches: 0,
            records: 0,
            bytes: 0,
            rolled: false,
        };
        let max_message_bytes = st.config.max_message_bytes;
        let batches = match mode {
            Mode::LeaderChecked(_, checked) => {
                Batches::Checked(Some(checked).map(|checked| match checked.len() {
                    size if size > max_message_bytes => Err(BatchError::TooLarge {
                        position: 0,
                        size,
                        max: max_message_bytes,
                    }),
                    _ => Ok(checked.batch()),
                }))
            }
            _ => Batches::Unchecked(batch::batches(records, origin, max_message_bytes)),
        };
        for batch in batches {
            let batch = batch?;
            let h = batch.header;
            let mut header: [u8; HEADER_SIZE] =
                batch.bytes[..HEADER_SIZE].try_into().expect("header");
            let body = &batch.bytes[HEADER_SIZE..];
            let (base_offset, epoch) = match mode {
                Mode::Leader(epoch) | Mode::LeaderChecked(epoch, _) => {
                    batch::assign_offset(&mut header, next_offset as i64, epoch);
                    (next_offset, epoch)
                }
                Mode::Replicated => {
                    if h.base_offset() < next_offset as i64 {
                        return Err(LogError::NonContiguous {
                            base_offset: h.base_offset(),
                            log_end_offset: next_offset,
                        });
                    }
                    (h.base_offset() as u64, h.partition_leader_epoch())
                }
                Mode::Mirrored(epoch) => {
                    if h.base_offset() < next_offset as i64 {
                        return Err(LogError::NonContiguous {
                            base_offset: h.base_offset(),
                            log_end_offset: next_offset,
                        });
                    }
                    batch::assign_offset(&mut header, h.base_offset(), epoch);
                    (h.base_offset() as u64, epoch)
                }
            };
            let max_timestamp = if log_append_time {
                batch::set_log_append_time(&mut header, body, now);
                now
            } else {
                h.max_timestamp()
            };
            let last_offset = base_offset + h.last_offset_delta() as u64;
            txn_events.extend(txn::event_of(&h, batch.bytes, base_offset));
            if prepared.is_empty() {
                info.base_offset = base_offset;
            }
            info.last_offset = last_offset;
            info.max_timestamp = info.max_timestamp.max(max_timestamp);
            info.records += h.record_count() as u64;
            info.bytes += batch.bytes.len() as u64;
            epochs.push((epoch, base_offset));
            prepared.push(PreparedBatch {
                header,
                records: body,
                base_offset,
                last_offset,
                max_timestamp,
            });
            next_offset = last_offset + 1;
        }
        if prepared.is_empty() {
            return Err(LogError::EmptyAppend);
        }
        info.batches = prepared.len();

        // New epochs are recorded (in memory) before the batches are
        // written. An epoch whose batches then fail to be written starts at
        // the log end: harmless.
        for (epoch, offset) in epochs {
            st.epochs.assign(epoch, offset);
        }
        info.rolled = self.maybe_roll(st, &info, now)?;
        // Transactions: the state after these batches, and the aborted
        // transactions they end, indexed before the batches are written
        // (and cut back if that fails).
        let mut txn_next = None;
        let mut aborted = Vec::new();
        if !txn_events.is_empty() {
            let mut next = st.txn.clone();
            aborted.extend(txn_events.into_iter().filter_map(|e| next.apply(e)));
            txn_next = Some(next);
        }
        let active = st.active_mut();
        let indexed = active.txn.entries.len();
        if !aborted.is_empty() {
            let path = active.path(TXN_INDEX_SUFFIX);
            if let Err((error, undone)) = active.txn.append(&path, &aborted) {
                if !undone {
                    return Err(self.go_offline(st, error));
                }
                return Err(error);
            }
        }
        let interval = st.config.index_interval_bytes;
        let active = st.active_mut();
        if let Err((error, mut undone)) = active.append(&prepared, interval, now) {
            let path = active.path(TXN_INDEX_SUFFIX);
            undone &= active
                .txn
                .undo_append(&path, active.txn.entries.len() - indexed)
                .is_ok();
            if !undone {
                st.offline = Some(error.to_string());
                tracing::error!(dir = %self.dir.display(), %error, "append failed and could not be undone; log offline");
            }
            return Err(error);
        }
        if let Some(next) = txn_next {
            st.txn = next;
        }
        st.unflushed_records += info.records;
        let oldest = *st.oldest_unflushed_ms.get_or_insert(now);
        let flush_due = st.unflushed_records >= st.config.flush_messages
            || now.saturating_sub(oldest) >= st.config.flush_ms;
        Ok((info, flush_due))
    }

    fn check_online(&self, st: &State) -> Result<(), LogError> {
        match &st.offline {
            Some(reason) => Err(LogError::Offline {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Rolls the active segment if the append `info` would overfill or
    /// outlive it; whether it did.
    fn maybe_roll(&self, st: &mut State, info: &AppendInfo, now: i64) -> Result<bool, LogError> {
        let config = &st.config;
        let active = st.active();
        if active.is_empty() {
            return Ok(false);
        }
        // Kafka accepts a 4-byte index; it still holds the one entry a
        // segment always has.
        let max_index_entries = ((config.segment_index_bytes / 8) as usize).max(1);
        let too_big = active.size + info.bytes > config.segment_bytes;
        let too_old = active
            .rolling_base_ms
            .is_some_and(|base| now.saturating_sub(base) >= config.max_segment_ms());
        let index_full = active.index_entries() >= max_index_entries;
        let offsets_overflow = info.last_offset - active.base_offset > u64::from(u32::MAX);
        // Nothing after a corrupt batch is served, so appends go elsewhere.
        let corrupt = active.corrupt_from.is_some();
        let roll = too_big || too_old || index_full || offsets_overflow || corrupt;
        if roll {
            self.roll_locked(st, info.base_offset)?;
        }
        Ok(roll)
    }

    fn roll_locked(&self, st: &mut State, new_base: u64) -> Result<(), LogError> {
        // A crash must never keep the new segment and lose the file of an
        // older one: recovery could not tell that from a log starting
        // later. So the directory entries so far are made durable first.
        if st.dir_dirty {
            self.storage.sync_dir(&self.dir).context(&self.dir)?;
            st.dir_dirty = false;
        }
        // The new file first: if sealing then fails, the old segment stays
        // active (an active segment must not be sealed).
        let mut segment = Segment::create(&*self.storage, &self.dir, new_base)?;
        let sealed = segment
            .write_txn_index(&*self.storage, st.txn.open_txns(), Vec::new(), false)
            .and_then(|()| {
                // The transaction index first: if that fails the segment
                // stays active, as it must be with its indexes in memory.
                st.active_mut().seal_txn_index().map_err(|(error, undone)| {
                    if !undone {
                        self.go_offline(st, error)
                    } else {
                        error
                    }
                })
            })
            .and_then(|()| st.active_mut().seal(&*self.storage));
        if let Err(error) = sealed {
            if let Err(e) = segment.remove_files(&*self.storage) {
                tracing::warn!(segment = %segment.path(LOG_SUFFIX).display(), error = %e, "could not remove unused segment files");
            }
            return Err(error);
        }
        st.segments.insert(new_base, segment);
        st.dir_dirty = true;
        st.rolled_since_flush = true;
        tracing::debug!(dir = %self.dir.display(), new_base, "rolled segment");
        Ok(())
    }

    /// Starts a new segment now (if the active one holds anything).
    pub fn roll(&self) -> Result<(), LogError> {
        let mut st = self.state.lock();
        self.check_online(&st)?;
        if !st.active().is_empty() {
            let base = st.log_end_offset();
            self.roll_locked(&mut st, base)
                .inspect_err(|error| self.note_failure(error))?;
        }
        Ok(())
    }

    /// Reads whole batches starting with the one that contains
    /// `from_offset`, up to `max_bytes` (but at least one batch), never
    /// including a batch that reaches `upper_bound` (e.g. the high
    /// watermark). Reads stay within one segment.
    pub fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
        upper_bound: u64,
    ) -> Result<LogSlice, LogError> {
        let st = self.state.lock();
        let log_end_offset = st.log_end_offset();
        if from_offset < st.log_start_offset || from_offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: from_offset,
                log_start_offset: st.log_start_offset,
                log_end_offset,
            });
        }
        let bound = upper_bound.min(log_end_offset);
        if from_offset >= bound {
            return Ok(LogSlice::empty());
        }
        let first_base = st
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(0, |(&base, _)| base);
        for segment in st.segments.range(first_base..).map(|(_, s)| s) {
            if segment.base_offset >= bound {
                break;
            }
            let start = segment.locate(from_offset)?;
            let readable_end = segment.readable_end();
            if start >= readable_end {
                match segment.corrupt_error() {
                    Some(error) => return Err(error),
                    None => continue,
                }
            }
            let header = segment.read_header(start)?;
            let header = BatchHeader::parse(&header, 0).expect("checked by read_header");
            if header.last_offset() >= bound as i64 {
                break;
            }
            let first_end = start + header.total_size() as u64;
            let end_by_bound = if bound < segment.next_offset {
                segment.locate(bound)?.min(readable_end)
            } else {
                readable_end
            };
            let limit = start.saturating_add(max_bytes as u64);
            let end = if limit <= first_end {
                first_end
            } else if end_by_bound <= limit {
                end_by_bound
            } else {
                segment.boundary_at_or_below(first_end, limit)?
            };
            let path = segment.log_path();
            return LogSlice::new(
                segment.log.clone(),
                path.clone(),
                start,
                end - start,
                header.base_offset() as u64,
            )
            .context(path);
        }
        Ok(LogSlice::empty())
    }

    /// [`read`](Self::read) where it neither waits for the log's lock nor
    /// reads the disk: at the tail of the active segment, whose last
    /// batches' positions are in memory, or where there is nothing to read.
    /// `None` when it would have to do either; the caller reads where
    /// waiting is allowed then.
    pub fn try_read_in_memory(
        &self,
        from_offset: u64,
        max_bytes: usize,
        upper_bound: u64,
    ) -> Option<Result<LogSlice, LogError>> {
        let st = self.state.try_lock()?;
        let log_end_offset = st.log_end_offset();
        if from_offset < st.log_start_offset || from_offset > log_end_offset {
            return Some(Err(LogError::OffsetOutOfRange {
                offset: from_offset,
                log_start_offset: st.log_start_offset,
                log_end_offset,
            }));
        }
        let bound = upper_bound.min(log_end_offset);
        if from_offset >= bound {
            return Some(Ok(LogSlice::empty()));
        }
        let active = st.active();
        if from_offset < active.base_offset {
            return None;
        }
        match active.read_recent(from_offset, bound, max_bytes)? {
            RecentRead::Nothing => Some(Ok(LogSlice::empty())),
            RecentRead::Bytes {
                start,
                end,
                first_offset,
            } => {
                let path = active.log_path();
                let slice = LogSlice::new_if_open(
                    active.log.clone(),
                    path.clone(),
                    start,
                    end - start,
                    first_offset,
                )?;
                Some(slice.context(path))
            }
        }
    }

    /// The first batch from the one holding `from` on, below `upper`,
    /// whose newest timestamp is later than `cutoff_ms`: its base offset
    /// and that timestamp. `None` when every batch up to `upper` is at or
    /// before the cutoff. (A delivery delay's watermark: batches before it
    /// are old enough to be read.) Reads the batch headers on the way.
    pub fn first_batch_newer_than(
        &self,
        from: u64,
        upper: u64,
        cutoff_ms: i64,
    ) -> Result<Option<(u64, i64)>, LogError> {
        let st = self.state.lock();
        let bound = upper.min(st.log_end_offset());
        let from = from.max(st.log_start_offset);
        if from >= bound {
            return Ok(None);
        }
        let first_base = st
            .segments
            .range(..=from)
            .next_back()
            .map_or(0, |(&base, _)| base);
        for segment in st.segments.range(first_base..).map(|(_, s)| s) {
            if segment.base_offset >= bound {
                break;
            }
            let mut position = segment.locate(from)?;
            while position < segment.readable_end() {
                let raw = segment.read_header(position)?;
                let header = BatchHeader::parse(&raw, 0).expect("checked by read_header");
                let base = header.base_offset() as u64;
                if base >= bound {
                    return Ok(None);
                }
                if header.last_offset() as u64 >= from && header.max_timestamp() > cutoff_ms {
                    return Ok(Some((base, header.max_timestamp())));
                }
                position += header.total_size() as u64;
            }
        }
        Ok(None)
    }

    /// The first record whose timestamp is at or after `timestamp`, with its
    /// timestamp; `None` when every record is older.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let st = self.state.lock();
        let log_start = st.log_start_offset;
        for segment in st.segments.values() {
            if segment.max_timestamp < timestamp || segment.next_offset <= log_start {
                continue;
            }
            let from = segment.time_lookup_start(timestamp)?.max(log_start);
            let mut position = segment.locate(from)?;
            while position < segment.readable_end() {
                let raw = segment.read_header(position)?;
                let header = BatchHeader::parse(&raw, 0).expect("checked");
                let size = header.total_size() as u64;
                if header.max_timestamp() >= timestamp && header.last_offset() >= log_start as i64 {
                    if let Some(found) =
                        find_record_at_or_after(segment, position, size, timestamp, log_start)?
                    {
                        return Ok(Some(found));
                    }
                }
                position += size;
            }
        }
        Ok(None)
    }

    /// The first record carrying the largest timestamp in the log
    /// (ListOffsets with `MAX_TIMESTAMP`); `None` for a log without
    /// timestamps.
    pub fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>, LogError> {
        let max = {
            let st = self.state.lock();
            st.segments
                .values()
                .filter(|s| s.next_offset > st.log_start_offset)
                .map(|s| s.max_timestamp)
                .max()
        };
        match max {
            Some(timestamp) if timestamp >= 0 => self.offset_for_timestamp(timestamp),
            _ => Ok(None),
        }
    }

    /// Makes everything appended so far durable.
    pub fn flush(&self) -> Result<(), LogError> {
        let end = self.log_end_offset();
        self.flush_to(end)
    }

    /// Returns once every offset below `offset` is durable. Concurrent
    /// callers share fsyncs: one sync covers everything appended before it
    /// started (group commit).
    pub fn flush_to(&self, offset: u64) -> Result<(), LogError> {
        self.sync_up_to(offset, true)
    }

    /// Group commit up to `offset`; with `include_active` false only sealed
    /// segments are synced (which covers offsets below the active one).
    fn sync_up_to(&self, offset: u64, include_active: bool) -> Result<(), LogError> {
        self.sync_locked(offset, include_active)
            .inspect_err(|error| self.note_failure(error))
    }

    fn sync_locked(&self, offset: u64, include_active: bool) -> Result<(), LogError> {
        let mut flush = self.flush.lock();
        loop {
            if flush.durable_offset >= offset {
                return Ok(());
            }
            if flush.in_progress {
                self.flushed.wait(&mut flush);
                continue;
            }
            flush.in_progress = true;
            drop(flush);
            let online = self.check_online(&self.state.lock());
            let result = online.and_then(|()| self.sync_dirty(include_active));
            flush = self.flush.lock();
            flush.in_progress = false;
            self.flushed.notify_all();
            match result {
                // A truncation during the sync: the next one covers the rest.
                Ok((_, truncations)) if truncations != flush.truncations => {}
                Ok((synced_to, _)) => {
                    flush.durable_offset = flush.durable_offset.max(synced_to);
                    // This sync started after the call and covered the whole
                    // log: if that ends below `offset`, a truncation removed
                    // the rest, and there is nothing more to make durable.
                    if synced_to < offset {
                        return Ok(());
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// For a scheduler to call every so often: flushes if `flush.messages`
    /// or `flush.ms` says it is time, and otherwise syncs segments sealed
    /// since the last flush, so that a crash rescans only the active one.
    pub fn flush_if_due(&self) -> Result<(), LogError> {
        let (due, rolled, active_base) = {
            let st = self.state.lock();
            let now = self.clock.now_ms();
            let due = st.unflushed_records >= st.config.flush_messages
                || st
                    .oldest_unflushed_ms
                    .is_some_and(|oldest| now.saturating_sub(oldest) >= st.config.flush_ms);
            (due, st.rolled_since_flush, st.active().base_offset)
        };
        if due {
            self.flush()?;
        } else if rolled {
            self.sync_up_to(active_base, false)?;
        }
        Ok(())
    }

    /// Syncs every dirty file (but the active segment's unless
    /// `include_active`); returns the offset it made durable and the
    /// truncation count when it started.
    fn sync_dirty(&self, include_active: bool) -> Result<(u64, u64), LogError> {
        let (files, target, new_recovery_point, dir_dirty, truncations) = {
            let mut st = self.state.lock();
            let mut files = Vec::new();
            let active_base = st.active().base_offset;
            for segment in st.segments.values_mut().rev() {
                if segment.base_offset == active_base && !include_active {
                    // Its transaction index, whose header recovery needs
                    // once the recovery point reaches the segment.
                    files.extend(segment.txn_file_to_sync());
                    segment.txn.dirty = false;
                    continue;
                }
                let clean_sealed = segment.base_offset != active_base
                    && !segment.log_dirty
                    && !segment.indexes_dirty
                    && !segment.txn.dirty;
                if clean_sealed {
                    // Not a reason to stop: open may have rebuilt the
                    // indexes of an older segment.
                    continue;
                }
                files.extend(segment.files_to_sync());
                segment.log_dirty = false;
                segment.indexes_dirty = false;
                segment.txn.dirty = false;
                if segment.base_offset != active_base {
                    // Sealed: its transaction index is complete (the sync
                    // holds the file until it is done).
                    segment.txn.release_file();
                }
            }
            st.rolled_since_flush = false;
            let target = if include_active {
                st.unflushed_records = 0;
                st.oldest_unflushed_ms = None;
                st.log_end_offset()
            } else {
                active_base
            };
            let dir_dirty = std::mem::take(&mut st.dir_dirty);
            (files, target, active_base, dir_dirty, st.truncations)
        };
        let result: Result<(), LogError> = (|| {
            if dir_dirty {
                self.storage.sync_dir(&self.dir).context(&self.dir)?;
            }
            for (path, file) in &files {
                file.sync().context(path)?;
            }
            Ok(())
        })();
        let mut st = self.state.lock();
        if let Err(error) = result {
            // After a failed fsync the kernel may have dropped the dirty
            // pages: nothing written since the last good sync can be trusted.
            st.offline = Some(error.to_string());
            tracing::error!(dir = %self.dir.display(), %error, "fsync failed; log offline until reopened");
            return Err(error);
        }
        if st.truncations == truncations && new_recovery_point > st.recovery_point {
            self.write_recovery_point(&mut st, new_recovery_point)?;
        }
        Ok((target, truncations))
    }

    /// Persists the cleaner checkpoint `offset` with the tombstone horizon
    /// in force: `<offset>` or `<offset> <horizon ms>`.
    fn write_cleaner_checkpoint(&self, st: &mut State, offset: u64) -> Result<(), LogError> {
        let text = match st.tombstone_horizon {
            Some(horizon) => format!("{offset} {horizon}\n"),
            None => format!("{offset}\n"),
        };
        checkpoint::write(
            &*self.storage,
            &self.dir.join(CLEANER_CHECKPOINT_FILE),
            &text,
        )?;
        st.cleaner_checkpoint = offset;
        Ok(())
    }

    fn write_recovery_point(&self, st: &mut State, offset: u64) -> Result<(), LogError> {
        // Recovery scans only from the recovery point: the epochs that start
        // below it must be in their file first.
        st.epochs.persist_assigned(&*self.storage)?;
        checkpoint::write(
            &*self.storage,
            &self.dir.join(RECOVERY_POINT_FILE),
            &format!("{offset}\n"),
        )?;
        st.recovery_point = offset;
        Ok(())
    }

    /// Deletes segments by `retention.ms` (their newest timestamp),
    /// `retention.bytes` and the log start offset, oldest first, never the
    /// active segment nor one holding offsets at or above `upper_bound`.
    /// Files are renamed `.deleted` and removed after `file.delete.delay.ms`.
    pub fn enforce_retention(&self, upper_bound: u64) -> Result<RetentionOutcome, LogError> {
        self.delete_old_segments(upper_bound, true, |config| {
            (config.retention_ms, config.retention_bytes)
        })
    }

    /// Retention of the local segments of a log in tiered storage: as
    /// [`enforce_retention`](Self::enforce_retention), by
    /// `local.retention.ms` and `local.retention.bytes`, but only segments
    /// wholly below `copied_below` go: those whose copy in remote storage
    /// is complete. The log start offset this moves is the local one; the
    /// leader epochs of the segments deleted stay, as their copies do.
    pub fn enforce_local_retention(
        &self,
        upper_bound: u64,
        copied_below: u64,
    ) -> Result<RetentionOutcome, LogError> {
        self.delete_old_segments(
            upper_bound.min(copied_below),
            false,
            LogConfig::local_retention,
        )
    }

    /// Deletes old segments by the (time, size) limits `limits` reads from
    /// the config (-1: none), below `upper_bound`; their leader epochs go
    /// with them when `forget_epochs` is set.
    fn delete_old_segments(
        &self,
        upper_bound: u64,
        forget_epochs: bool,
        limits: impl Fn(&LogConfig) -> (i64, i64),
    ) -> Result<RetentionOutcome, LogError> {
        let now = self.clock.now_ms();
        let mut st = self.state.lock();
        self.remove_due_files(&mut st, now);
        let config = st.config.clone();
        let (retention_ms, retention_bytes) = limits(&config);
        let mut total: u64 = st.segments.values().map(|s| s.size).sum();
        let bases: Vec<u64> = st.segments.keys().copied().collect();
        let mut doomed = Vec::new();
        for pair in bases.windows(2) {
            let (base, next_base) = (pair[0], pair[1]);
            if next_base > upper_bound {
                break;
            }
            let segment = &st.segments[&base];
            // Without `delete` in cleanup.policy only DeleteRecords removes
            // segments.
            let delete = config.cleanup_policy.delete;
            let expired = delete
                && retention_ms >= 0
                && now.saturating_sub(segment.max_timestamp) > retention_ms;
            let oversize = delete
                && retention_bytes >= 0
                && total.saturating_sub(segment.size) >= retention_bytes as u64;
            let below_start = next_base <= st.log_start_offset;
            if !(expired || oversize || below_start) {
                break;
            }
            total -= segment.size;
            doomed.push(base);
        }
        let mut outcome = RetentionOutcome::default();
        for base in doomed {
            let segment = st.segments.remove(&base).expect("listed");
            outcome.deleted_segments += 1;
            outcome.deleted_bytes += segment.size;
            self.schedule_delete(&mut st, &segment, now)?;
        }
        if outcome.deleted_segments > 0 {
            let first_base = *st.segments.keys().next().expect("active stays");
            st.log_start_offset = st.log_start_offset.max(first_base);
            let start = st.log_start_offset;
            if forget_epochs {
                st.epochs.truncate_from_start(&*self.storage, start)?;
            } else {
                // Recovery could not find these epochs in the batches any
                // more: they are written now.
                st.epochs.persist_assigned(&*self.storage)?;
            }
            tracing::info!(dir = %self.dir.display(), segments = outcome.deleted_segments, bytes = outcome.deleted_bytes, log_start_offset = start, "retention deleted segments");
        }
        outcome.log_start_offset = st.log_start_offset;
        Ok(outcome)
    }

    /// The segments (how many, and their bytes) that hold offsets at or
    /// above `from` and lie wholly below `upper_bound`; the active segment
    /// counts only with `with_active`.
    pub fn segments_from(&self, from: u64, upper_bound: u64, with_active: bool) -> (u64, u64) {
        let st = self.state.lock();
        let active_base = st.active().base_offset;
        st.segments
            .values()
            .filter(|s| s.next_offset > from && s.size > 0)
            .filter(|s| {
                if s.base_offset == active_base {
                    with_active
                } else {
                    s.next_offset <= upper_bound
                }
            })
            .fold((0, 0), |(count, bytes), s| (count + 1, bytes + s.size))
    }

    /// The first sealed segment that holds offsets at or above `from` and
    /// lies wholly below `upper_bound`, for a copy to remote storage; `None`
    /// when there is none yet (the active segment is never one).
    pub fn sealed_segment_from(
        &self,
        from: u64,
        upper_bound: u64,
    ) -> Result<Option<SealedSegment>, LogError> {
        let st = self.state.lock();
        self.check_online(&st)?;
        let active_base = st.active().base_offset;
        let Some(segment) = st
            .segments
            .values()
            .take_while(|s| s.base_offset != active_base && s.next_offset <= upper_bound)
            .find(|s| s.next_offset > from && s.size > 0)
        else {
            return Ok(None);
        };
        // Sealed indexes are small and read once per copy.
        let (offset_index, time_index) = segment.index_bytes()?;
        let epochs = st
            .epochs
            .entries()
            .iter()
            .take_while(|e| e.start_offset < segment.next_offset)
            .copied()
            .collect();
        Ok(Some(SealedSegment {
            base_offset: segment.base_offset,
            next_offset: segment.next_offset,
            size: segment.size,
            max_timestamp: segment.max_timestamp,
            log: segment.log.clone(),
            offset_index,
            time_index,
            aborted: segment.txn.entries.clone(),
            epochs,
        }))
    }

    fn schedule_delete(&self, st: &mut State, segment: &Segment, now: i64) -> Result<(), LogError> {
        let due_ms = now.saturating_add(st.config.file_delete_delay_ms);
        for path in segment.mark_deleted(&*self.storage)? {
            // The cleaner may delete a segment of the same base offset
            // again before the first one's delay passed: one entry.
            st.pending_deletes.retain(|p| p.path != path);
            st.pending_deletes.push(PendingDelete { due_ms, path });
        }
        Ok(())
    }

    fn remove_due_files(&self, st: &mut State, now: i64) {
        st.pending_deletes.retain(|pending| {
            if pending.due_ms > now {
                return true;
            }
            if let Err(error) = self.storage.remove(&pending.path) {
                tracing::warn!(path = %pending.path.display(), %error, "could not remove deleted segment file");
            }
            false
        });
    }

    /// Removes `.deleted` files whose delay has passed.
    pub fn remove_deleted_files(&self) {
        let now = self.clock.now_ms();
        self.remove_due_files(&mut self.state.lock(), now);
    }

    /// Advances the log start offset to `offset` (DeleteRecords), deleting
    /// segments that fall wholly below it. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: u64) -> Result<u64, LogError> {
        let now = self.clock.now_ms();
        let mut st = self.state.lock();
        self.check_online(&st)?;
        let log_end_offset = st.log_end_offset();
        if offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: st.log_start_offset,
                log_end_offset,
            });
        }
        if offset <= st.log_start_offset {
            return Ok(st.log_start_offset);
        }
        checkpoint::write(
            &*self.storage,
            &self.dir.join(LOG_START_OFFSET_FILE),
            &format!("{offset}\n"),
        )?;
        st.log_start_offset = offset;
        st.epochs.truncate_from_start(&*self.storage, offset)?;
        let bases: Vec<u64> = st.segments.keys().copied().collect();
        for pair in bases.windows(2) {
            if pair[1] > offset {
                break;
            }
            let segment = st.segments.remove(&pair[0]).expect("listed");
            self.schedule_delete(&mut st, &segment, now)?;
        }
        Ok(offset)
    }

    /// Removes every record at and above `offset` (a follower discarding a
    /// divergent suffix). The batch containing `offset` goes entirely.
    pub fn truncate_to(&self, offset: u64) -> Result<(), LogError> {
        let now = self.clock.now_ms();
        let mut st = self.state.lock();
        self.check_online(&st)?;
        if offset >= st.log_end_offset() {
            return Ok(());
        }
        if offset < st.log_start_offset {
            drop(st);
            return self.truncate_fully_and_start_at(offset);
        }
        let keep_base = st
            .segments
            .range(..=offset)
            .next_back()
            .map_or(st.log_start_offset, |(&b, _)| b);
        // Reads and the recovery point first: until files change, a failure
        // leaves the log as it was. (Recovery scanning from an earlier
        // segment than needed is always safe.)
        let segment = &st.segments[&keep_base];
        let position = segment.locate(offset)?;
        let removed_base = if position < segment.size {
            let raw = segment.read_header(position)?;
            BatchHeader::parse(&raw, 0).expect("checked").base_offset() as u64
        } else {
            offset
        };
        if keep_base < st.recovery_point {
            self.write_recovery_point(&mut st, keep_base)?;
        }
        if st.cleaner_checkpoint > keep_base {
            self.write_cleaner_checkpoint(&mut st, keep_base)?;
        }
        // From here on the flush state hears of the truncation, whatever
        // happens.
        st.truncations += 1;
        let result = (|| -> Result<u64, LogError> {
            let later: Vec<u64> = st
                .segments
                .range(keep_base + 1..)
                .map(|(&b, _)| b)
                .collect();
            for base in later {
                let segment = st.segments.remove(&base).expect("listed");
                self.schedule_delete(&mut st, &segment, now)?;
            }
            let segment = st.segments.get_mut(&keep_base).expect("kept");
            segment.truncate_to_position(&*self.storage, position)?;
            segment.next_offset = segment.next_offset.max(offset.min(removed_base));
            let log_end_offset = segment.next_offset;
            // Aborted transactions whose markers went, and the open ones
            // at the new end: replayed from the segment's base.
            let kept = segment
                .txn
                .entries
                .iter()
                .take_while(|e| e.last_offset < log_end_offset)
                .count();
            let path = segment.path(TXN_INDEX_SUFFIX);
            segment.txn.truncate_entries(&*self.storage, &path, kept)?;
            let mut txn = TxnState::from_open(&segment.txn.open_at_base);
            for event in segment.txn_events()? {
                txn.apply(event);
            }
            st.txn = txn;
            if st.log_start_offset > log_end_offset {
                // The batch holding the log start went too: the log now starts
                // where it ends, also after a reopen.
                checkpoint::write(
                    &*self.storage,
                    &self.dir.join(LOG_START_OFFSET_FILE),
                    &format!("{log_end_offset}\n"),
                )?;
                st.log_start_offset = log_end_offset;
            }
            st.epochs
                .truncate_from_end(&*self.storage, log_end_offset)?;
            Ok(log_end_offset)
        })();
        let mut flush = self.flush.lock();
        flush.truncations = st.truncations;
        flush.durable_offset = flush.durable_offset.min(st.log_end_offset());
        // Half done, files and state disagree.
        let log_end_offset = result.map_err(|error| self.go_offline(&mut st, error))?;
        tracing::info!(dir = %self.dir.display(), offset, log_end_offset, "truncated log");
        Ok(())
    }

    /// Deletes everything and restarts the log empty at `offset` (a follower
    /// whose leader's log starts beyond its own end).
    pub fn truncate_fully_and_start_at(&self, offset: u64) -> Result<(), LogError> {
        let now = self.clock.now_ms();
        let mut st = self.state.lock();
        self.check_online(&st)?;
        // Until the new segment exists, a failure puts the old ones back
        // (still readable through their open files).
        let old = std::mem::take(&mut st.segments);
        let created = old
            .values()
            .try_for_each(|segment| self.schedule_delete(&mut st, segment, now))
            .and_then(|()| Segment::create(&*self.storage, &self.dir, offset))
            .and_then(|mut segment| {
                segment.write_txn_index(&*self.storage, Vec::new(), Vec::new(), false)?;
                Ok(segment)
            });
        let segment = match created {
            Ok(segment) => segment,
            Err(error) => {
                st.segments = old;
                return Err(self.go_offline(&mut st, error));
            }
        };
        st.segments.insert(offset, segment);
        st.dir_dirty = true;
        st.log_start_offset = offset;
        st.truncations += 1;
        st.txn = TxnState::default();
        {
            let mut flush = self.flush.lock();
            flush.truncations = st.truncations;
            flush.durable_offset = offset;
        }
        let result = (|| {
            checkpoint::write(
                &*self.storage,
                &self.dir.join(LOG_START_OFFSET_FILE),
                &format!("{offset}\n"),
            )?;
            self.write_recovery_point(&mut st, offset)?;
            self.write_cleaner_checkpoint(&mut st, offset)?;
            st.epochs.clear(&*self.storage)
        })();
        result.map_err(|error| self.go_offline(&mut st, error))
    }

    /// Takes the log offline after a failure that left files and state in
    /// doubt: only a reopen, which runs recovery, brings it back.
    fn go_offline(&self, st: &mut State, error: LogError) -> LogError {
        st.offline = Some(error.to_string());
        tracing::error!(dir = %self.dir.display(), %error, "log offline until reopened");
        if let Some(listener) = self.failure_listener.get() {
            listener(&self.dir, DirFault::Failed);
        }
        error
    }

    /// Tells the failure listener of an I/O error of a write.
    fn note_failure(&self, error: &LogError) {
        let LogError::Io { source, .. } = error else {
            return;
        };
        let fault = if source.kind() == std::io::ErrorKind::StorageFull {
            DirFault::Full
        } else {
            DirFault::Failed
        };
        if let Some(listener) = self.failure_listener.get() {
            listener(&self.dir, fault);
        }
    }

    /// Forgets the leader epochs wholly below `offset`, the log start
    /// across both tiers of a log in tiered storage.
    pub fn forget_epochs_before(&self, offset: u64) -> Result<(), LogError> {
        let mut st = self.state.lock();
        self.check_online(&st)?;
        let offset = offset.min(st.log_end_offset());
        st.epochs.truncate_from_start(&*self.storage, offset)
    }

    /// [`truncate_fully_and_start_at`](Self::truncate_fully_and_start_at)
    /// with the leader epochs of the log below `offset` as a copy in
    /// remote storage records them: a replica whose leader's local log
    /// starts past its own end.
    pub fn restart_at_with_epochs(
        &self,
        offset: u64,
        epochs: &[EpochEntry],
    ) -> Result<(), LogError> {
        self.truncate_fully_and_start_at(offset)?;
        let mut st = self.state.lock();
        let mut kept: Vec<EpochEntry> = Vec::with_capacity(epochs.len());
        for entry in epochs.iter().filter(|e| e.start_offset < offset) {
            // Only newer epochs, at later offsets, as an append assigns them.
            if kept.last().is_none_or(|last| {
                entry.epoch > last.epoch && entry.start_offset >= last.start_offset
            }) {
                kept.push(*entry);
            }
        }
        st.epochs
            .restore(&*self.storage, kept)
            .map_err(|error| self.go_offline(&mut st, error))
    }

    /// The latest leader epoch with its start offset.
    pub fn latest_epoch(&self) -> Option<EpochEntry> {
        self.state.lock().epochs.entries().last().copied()
    }

    /// The leader-epoch cache, oldest first.
    pub fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.state.lock().epochs.entries().to_vec()
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` and the
    /// offset where it ended (the log end for the latest epoch).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let st = self.state.lock();
        st.epochs.end_offset_for(epoch, st.log_end_offset())
    }

    /// The aborted transactions that overlap `[from, upper_bound)`: those
    /// whose marker is at or after `from` and whose first batch is before
    /// `upper_bound`, in marker order. This is what Fetch returns to
    /// `read_committed` consumers so they skip aborted records. The search
    /// starts at the segment holding `from` and stops at the first entry
    /// whose last stable offset reaches `upper_bound` (Kafka's rule: every
    /// transaction that began before it had ended by then).
    pub fn aborted_transactions(&self, from: u64, upper_bound: u64) -> Vec<AbortedTxn> {
        collect_aborted(&self.state.lock(), from, upper_bound)
    }

    /// [`aborted_transactions`](Self::aborted_transactions) if the log's
    /// lock is free now (they are in memory).
    pub fn try_aborted_transactions(&self, from: u64, upper_bound: u64) -> Option<Vec<AbortedTxn>> {
        let st = self.state.try_lock()?;
        Some(collect_aborted(&st, from, upper_bound))
    }

    /// The first offset `read_committed` consumers may not read: that of
    /// the earliest open transaction, or of an ended one whose marker is at
    /// or above `high_watermark` (not yet on every in-sync replica). `None`
    /// when there is neither; the last stable offset is then the high
    /// watermark.
    pub fn first_unstable_offset(&self, high_watermark: u64) -> Option<u64> {
        if self.state.transactions_settled.load(Ordering::Acquire) {
            // Settled when the lock was last released: a transaction begun
            // since starts at or above the log end then, which the high
            // watermark has not passed.
            return None;
        }
        let mut st = self.state.lock();
        st.txn.prune_replicated(high_watermark);
        st.txn.first_unstable_offset(high_watermark)
    }

    /// [`first_unstable_offset`](Self::first_unstable_offset) if that
    /// needs no wait for the log's lock; `None` when it would.
    pub fn try_first_unstable_offset(&self, high_watermark: u64) -> Option<Option<u64>> {
        if self.state.transactions_settled.load(Ordering::Acquire) {
            return Some(None);
        }
        let mut st = self.state.try_lock()?;
        st.txn.prune_replicated(high_watermark);
        Some(st.txn.first_unstable_offset(high_watermark))
    }

    /// The transactions open at the log end, oldest first.
    pub fn open_transactions(&self) -> Vec<OpenTxn> {
        self.state.lock().txn.open_txns()
    }

    /// The first offset of `producer_id`'s open transaction, if it has one.
    pub fn open_transaction(&self, producer_id: i64) -> Option<u64> {
        self.state.lock().txn.open_txn(producer_id)
    }

    /// Checks every batch of every segment (CRC included). Corrupt batches
    /// are reported and, from then on, never served.
    pub fn verify(&self) -> Result<Vec<CorruptBatch>, LogError> {
        let mut st = self.state.lock();
        let interval = st.config.index_interval_bytes;
        let mut found = Vec::new();
        for segment in st.segments.values_mut() {
            if let Some(invalid) = segment.verify(interval)? {
                found.push(CorruptBatch {
                    path: segment.path(LOG_SUFFIX),
                    position: invalid.position,
                    reason: invalid.reason.clone(),
                });
                segment.corrupt_from = Some(invalid);
            }
        }
        drop(st);
        if !found.is_empty() {
            self.settle_corrupt_segments()?;
        }
        Ok(found)
    }

    /// Shuts the log down cleanly: everything synced, indexes written, and a
    /// marker left so that the next open needs no scan.
    pub fn close(self) -> Result<(), LogError> {
        {
            let mut st = self.state.lock();
            self.check_online(&st)?;
            st.active_mut().write_indexes(&*self.storage)?;
            if let Err((error, undone)) = st.active_mut().seal_txn_index() {
                return Err(if undone {
                    error
                } else {
                    self.go_offline(&mut st, error)
                });
            }
        }
        self.flush()?;
        let mut st = self.state.lock();
        self.check_online(&st)?;
        let saved = format_saved_txns(st.log_end_offset(), &st.txn.open_txns());
        // A clean open scans nothing.
        st.epochs.persist_assigned(&*self.storage)?;
        checkpoint::write(&*self.storage, &self.dir.join(CLEAN_SHUTDOWN_FILE), &saved)?;
        let now = self.clock.now_ms();
        drop(st);
        let mut st = self.state.lock();
        self.remove_due_files(&mut st, now);
        Ok(())
    }
}

/// A sealed segment as the cleaner planned to clean it.
pub(crate) struct SegmentSnapshot {
    pub(crate) base_offset: u64,
    /// Base offset of the next segment: where this one's offsets end.
    pub(crate) end_offset: u64,
    pub(crate) file: Arc<dyn StorageFile>,
    pub(crate) path: Arc<Path>,
    /// Bytes of the `.log` file that belong to the segment.
    pub(crate) size: u64,
    /// One past the segment's last stored offset.
    pub(crate) next_offset: u64,
    pub(crate) index_entries: usize,
    /// The transactions open at the segment's base offset.
    pub(crate) txn_open_at_base: Vec<OpenTxn>,
    /// The aborted transactions whose markers the segment holds.
    pub(crate) txn_entries: Vec<AbortedTxn>,
}

/// What one cleaning pass may touch, taken under the log's lock.
pub(crate) struct CleanPlan {
    pub(crate) cleanable: Cleanable,
    /// The aborted transactions with records below `limit`.
    pub(crate) aborted: Vec<AbortedTxn>,
    /// The sealed segments from the first up to the first uncleanable
    /// offset (they all end at or below it).
    pub(crate) segments: Vec<SegmentSnapshot>,
    /// Where the cleanable segments end: a segment base offset.
    pub(crate) limit: u64,
    pub(crate) config: LogConfig,
    pub(crate) now_ms: i64,
    /// The log's truncation count when the plan was made.
    pub(crate) truncations: u64,
}

/// What [`Log::swap_cleaned`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Swap {
    Swapped,
    /// The segments changed since they were read (retention, truncation):
    /// the cleaned segment was thrown away.
    Stale,
}

/// The cleaner's side of the log.
impl Log {
    pub(crate) fn storage(&self) -> &dyn Storage {
        &*self.storage
    }

    /// Syncs the sealed segments below `offset` (and moves the recovery
    /// point past them), so that the cleaner only ever replaces durable
    /// segments.
    pub(crate) fn sync_sealed_below(&self, offset: u64) -> Result<(), LogError> {
        self.sync_up_to(offset, false)
    }

    /// How dirty the log is, for a log whose `cleanup.policy` includes
    /// `compact` (`None` otherwise). Only sealed segments wholly below
    /// `upper_bound` (the high watermark) may be cleaned.
    pub fn cleanable(&self, upper_bound: u64) -> Option<Cleanable> {
        let now = self.clock.now_ms();
        let st = self.state.lock();
        compute_cleanable(&st, upper_bound, now).map(|(cleanable, _)| cleanable)
    }

    /// The plan of a cleaning pass: how dirty the log is and the segments
    /// the pass may read and rewrite.
    pub(crate) fn plan_clean(&self, upper_bound: u64) -> Result<Option<CleanPlan>, LogError> {
        let now = self.clock.now_ms();
        let st = self.state.lock();
        self.check_online(&st)?;
        let Some((cleanable, limit)) = compute_cleanable(&st, upper_bound, now) else {
            return Ok(None);
        };
        let bases: Vec<u64> = st.segments.keys().copied().collect();
        let mut segments = Vec::new();
        for pair in bases.windows(2) {
            let (base, end) = (pair[0], pair[1]);
            if end > limit {
                break;
            }
            let segment = &st.segments[&base];
            if let Some(error) = segment.corrupt_error() {
                return Err(error);
            }
            segments.push(SegmentSnapshot {
                base_offset: base,
                end_offset: end,
                file: segment.log.clone(),
                path: segment.log_path().clone(),
                size: segment.size,
                next_offset: segment.next_offset,
                index_entries: segment.index_entries(),
                txn_open_at_base: segment.txn.open_at_base.clone(),
                txn_entries: segment.txn.entries.clone(),
            });
        }
        let first_base = segments.first().map_or(limit, |s| s.base_offset);
        Ok(Some(CleanPlan {
            cleanable,
            aborted: collect_aborted(&st, first_base, limit),
            segments,
            limit,
            config: st.config.clone(),
            now_ms: now,
            truncations: st.truncations,
        }))
    }

    /// Replaces the segments `old` with `cleaned` (a sealed, synced segment
    /// written under [`CLEANED_SUFFIX`] names, with the base offset of the
    /// first of them, possibly empty), unless one of them changed since it
    /// was read. The old segments must be durable.
    ///
    /// The protocol, each step safe to crash after (see DESIGN.md): rename
    /// the cleaned files to `.swap`, the `.log` last (the commit point);
    /// sync the directory; move the recovery point past the group; rename
    /// the old segments' files `.deleted`; rename the `.swap` files to
    /// their final names; sync the directory. Recovery at open finishes a
    /// swap whose `.log.swap` exists and throws away `.cleaned` files.
    pub(crate) fn swap_cleaned(
        &self,
        old: &[SegmentSnapshot],
        mut cleaned: Segment,
    ) -> Result<Swap, LogError> {
        let now = self.clock.now_ms();
        let storage = &*self.storage;
        let mut st = self.state.lock();
        let active_base = st.active().base_offset;
        let unchanged = st.offline.is_none()
            && old.iter().all(|o| {
                st.segments.get(&o.base_offset).is_some_and(|s| {
                    Arc::ptr_eq(&s.log, &o.file) && s.size == o.size && s.base_offset != active_base
                })
            });
        if !unchanged {
            drop(st);
            remove_cleaner_files(storage, &self.dir, cleaned.base_offset);
            return Ok(Swap::Stale);
        }
        let group_end = old.last().expect("a group has a segment").end_offset;
        if let Err(error) = cleaned.rename(storage, SWAP_SUFFIX) {
            // The `.log` rename is the commit; it did not happen.
            remove_cleaner_files(storage, &self.dir, cleaned.base_offset);
            return Err(error);
        }
        // Committed: from here on a reopen finishes the swap, so a failure
        // takes the log offline until then.
        let result = (|| {
            storage.sync_dir(&self.dir).context(&self.dir)?;
            self.raise_recovery_point(&mut st, group_end)?;
            for o in old {
                let segment = st.segments.remove(&o.base_offset).expect("checked");
                self.schedule_delete(&mut st, &segment, now)?;
            }
            cleaned.rename(storage, "")?;
            storage.sync_dir(&self.dir).context(&self.dir)
        })();
        match result {
            Ok(()) => {
                st.segments.insert(cleaned.base_offset, cleaned);
                Ok(Swap::Swapped)
            }
            Err(error) => Err(self.go_offline(&mut st, error)),
        }
    }

    /// Everything below `offset` is in synced segments the cleaner wrote:
    /// recovery need not (and, because of the gaps compaction leaves, must
    /// not) scan them.
    fn raise_recovery_point(&self, st: &mut State, offset: u64) -> Result<(), LogError> {
        if offset > st.recovery_point {
            self.write_recovery_point(st, offset)?;
        }
        Ok(())
    }

    /// Records the end of a cleaning pass: `first_dirty` becomes the
    /// cleaner checkpoint (unless a truncation ran meanwhile) and
    /// `tombstone_horizon` the time its oldest kept tombstone may go.
    pub(crate) fn finish_clean(
        &self,
        truncations: u64,
        first_dirty: u64,
        tombstone_horizon: Option<i64>,
    ) -> Result<(), LogError> {
        let mut st = self.state.lock();
        let unchanged =
            st.cleaner_checkpoint == first_dirty && st.tombstone_horizon == tombstone_horizon;
        st.tombstone_horizon = tombstone_horizon;
        if unchanged {
            return Ok(());
        }
        let offset = if st.truncations == truncations {
            first_dirty
        } else {
            // A truncation lowered the checkpoint meanwhile: it stays.
            st.cleaner_checkpoint.min(first_dirty)
        };
        self.write_cleaner_checkpoint(&mut st, offset)
    }

    /// The cleaner checkpoint: the first offset not yet cleaned.
    pub fn cleaner_checkpoint(&self) -> u64 {
        self.state.lock().cleaner_checkpoint
    }
}

/// How dirty the log is, and the offset below which segments may be
/// cleaned (`None` unless the log is compacted).
fn compute_cleanable(st: &State, upper_bound: u64, now: i64) -> Option<(Cleanable, u64)> {
    let config = &st.config;
    if !config.cleanup_policy.compact {
        return None;
    }
    // Nothing of an undecided transaction is cleaned: whether its records
    // are aborted is not known yet.
    let upper_bound = st
        .txn
        .first_unstable_offset(upper_bound)
        .map_or(upper_bound, |first| first.min(upper_bound));
    let log_start = st.log_start_offset;
    let active_base = st.active().base_offset;
    let mut first_dirty = st.cleaner_checkpoint;
    if first_dirty < log_start || first_dirty > active_base {
        first_dirty = log_start;
    }
    // The first offset that may not be cleaned: the active segment's base,
    // or the base of the first dirty segment that reaches the upper bound or
    // holds records younger than min.compaction.lag.ms.
    let mut limit = active_base;
    let mut clean_bytes = 0;
    let mut dirty = Vec::new();
    let bases: Vec<u64> = st.segments.keys().copied().collect();
    for pair in bases.windows(2) {
        let (base, end) = (pair[0], pair[1]);
        let segment = &st.segments[&base];
        if end <= first_dirty {
            clean_bytes += segment.size;
            continue;
        }
        let too_young = config.min_compaction_lag_ms > 0
            && segment.max_timestamp > now.saturating_sub(config.min_compaction_lag_ms);
        if end > upper_bound || too_young || segment.corrupt_from.is_some() {
            limit = base;
            break;
        }
        dirty.push(segment);
    }
    let first_uncleanable = limit.max(first_dirty);
    let dirty_bytes: u64 = dirty.iter().map(|s| s.size).sum();
    // max.compaction.lag.ms: how long ago the oldest dirty batch became due.
    let earliest = dirty
        .iter()
        .filter(|_| config.max_compaction_lag_ms < i64::MAX)
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.read_header(0).ok())
        .filter_map(|h| BatchHeader::parse(&h, 0).ok().map(|h| h.max_timestamp()))
        .filter(|&ts| ts > 0)
        .min();
    let due_at = now.saturating_sub(config.max_compaction_lag_ms);
    let max_compaction_delay_ms = earliest.map_or(0, |ts| due_at.saturating_sub(ts).max(0));
    let total = clean_bytes + dirty_bytes;
    let cleanable = Cleanable {
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: first_uncleanable,
        clean_bytes,
        dirty_bytes,
        dirty_ratio: if total == 0 {
            0.0
        } else {
            dirty_bytes as f64 / total as f64
        },
        min_cleanable_dirty_ratio: config.min_cleanable_dirty_ratio,
        max_compaction_delay_ms,
        tombstones_due: st.tombstone_horizon.is_some_and(|h| now >= h) && clean_bytes > 0,
    };
    Some((cleanable, limit))
}

/// [`Log::aborted_transactions`] under the log's lock.
fn collect_aborted(st: &State, from: u64, upper_bound: u64) -> Vec<AbortedTxn> {
    let first = st
        .segments
        .range(..=from)
        .next_back()
        .map_or(0, |(&base, _)| base);
    let mut found = Vec::new();
    for segment in st.segments.range(first..).map(|(_, s)| s) {
        for entry in &segment.txn.entries {
            if entry.last_offset >= from && entry.first_offset < upper_bound {
                found.push(*entry);
            }
            if entry.last_stable_offset >= upper_bound {
                return found;
            }
        }
    }
    found
}

/// What a clean close writes into [`CLEAN_SHUTDOWN_FILE`]: the log end
/// offset and the transactions open there, one `<producer id> <first
/// offset>` line each.
fn format_saved_txns(log_end_offset: u64, open: &[OpenTxn]) -> String {
    let mut text = format!("transactions {log_end_offset}\n");
    for txn in open {
        text.push_str(&format!("{} {}\n", txn.producer_id, txn.first_offset));
    }
    text
}

/// Reads [`format_saved_txns`]'s text; `None` if it is anything else.
fn parse_saved_txns(text: &str) -> Option<(u64, Vec<OpenTxn>)> {
    let mut lines = text.lines();
    let end = lines.next()?.strip_prefix("transactions ")?.parse().ok()?;
    let open = lines
        .map(|line| {
            let (producer_id, first_offset) = line.split_once(' ')?;
            Some(OpenTxn {
                producer_id: producer_id.parse().ok()?,
                first_offset: first_offset.parse().ok()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((end, open))
}

/// Loads every segment's transaction index and works out the transactions
/// open at the log end. An index is rebuilt, by replaying its segment from
/// the transactions open at its base, when it is missing or damaged, or
/// when recovery scanned the segment (a crash may have cut its log, or
/// left its index behind or ahead of it). The transactions open at a
/// segment's base come from its index header or, when that is lost, from
/// replaying the segment before it; the first segment's default to none
/// (a transaction begun below it then counts from its first batch here,
/// which is all that can be read of it). The open transactions at the end
/// come from `saved` (a clean close) or a replay of the last segment.
/// Returns them, and whether any file was written.
fn recover_transactions(
    storage: &dyn Storage,
    segments: &mut BTreeMap<u64, Segment>,
    scanned: &[u64],
    saved: Option<(u64, Vec<OpenTxn>)>,
) -> Result<(TxnState, bool), LogError> {
    let bases: Vec<u64> = segments.keys().copied().collect();
    // A loaded index's header (the transactions open at the base) is
    // usable even when its entries are not complete for the segment.
    let mut loaded: Vec<_> = bases
        .iter()
        .map(|base| segments[base].load_txn_index(storage))
        .collect();
    let log_end = segments.values().next_back().map(|s| s.next_offset);
    let saved = saved
        .filter(|(end, _)| Some(*end) == log_end)
        .map(|(_, open)| open);
    let mut carry: Option<TxnState> = None;
    let mut end_state = None;
    let mut wrote = false;
    for (i, &base) in bases.iter().enumerate() {
        let last = i + 1 == bases.len();
        let next_unknown = !last && loaded[i + 1].is_none();
        let index = loaded[i].take();
        let segment = segments.get_mut(&base).expect("listed");
        let at_base = match (&index, carry.take()) {
            (Some(index), _) => TxnState::from_open(&index.open_at_base),
            (None, Some(state)) => state,
            (None, None) => TxnState::default(),
        };
        let complete = index
            .as_ref()
            .is_some_and(|i| i.is_sealed_at(segment.next_offset));
        let rebuild = !complete || scanned.contains(&base);
        let need_end = next_unknown || (last && saved.is_none());
        if !rebuild && !need_end {
            segment.txn = index.expect("loaded");
            if !last {
                segment.txn.release_file();
            }
            continue;
        }
        let mut state = at_base.clone();
        let mut entries: Vec<AbortedTxn> = Vec::new();
        for event in segment.txn_events()? {
            entries.extend(state.apply(event));
        }
        let open_at_base = at_base.open_txns();
        match index {
            Some(index)
                if !rebuild
                    || (complete
                        && index.open_at_base == open_at_base
                        && index.entries == entries) =>
            {
                segment.txn = index;
                if !last {
                    segment.txn.release_file();
                }
            }
            _ => {
                // A new log's first segment has no index yet: nothing to say.
                if !scanned.contains(&base) && segment.next_offset > base {
                    tracing::info!(
                        segment = %segment.path(LOG_SUFFIX).display(),
                        aborted = entries.len(),
                        "rebuilding a missing or damaged transaction index"
                    );
                }
                segment.write_txn_index(storage, open_at_base, entries, true)?;
                wrote = true;
            }
        }
        if last {
            end_state = Some(state.clone());
        }
        carry = Some(state);
    }
    let state = end_state.unwrap_or_else(|| TxnState::from_open(&saved.unwrap_or_default()));
    Ok((state, wrote))
}

/// The cleaner checkpoint and tombstone horizon; a missing or unreadable
/// file means "nothing cleaned": the next pass cleans the whole log.
fn read_cleaner_checkpoint(storage: &dyn Storage, path: &Path) -> (u64, Option<i64>) {
    let Ok(Some(text)) = checkpoint::read(storage, path) else {
        return (0, None);
    };
    let mut fields = text.split_whitespace();
    let offset = fields.next().and_then(|f| f.parse().ok());
    let horizon = fields.next().and_then(|f| f.parse().ok());
    match offset {
        Some(offset) => (offset, horizon),
        None => (0, None),
    }
}

/// Finishes the swaps a crash interrupted (see [`Log::swap_cleaned`]):
/// for every `<base>.log.swap`, the segments it replaces (those with a
/// base offset in [base, its next offset)) are removed and it takes its
/// final name; its indexes are rebuilt. Leftover `.swap` indexes without
/// their `.log` belong to an uncommitted swap and go. Returns the base
/// offsets of the swapped-in segments.
fn complete_swaps(
    storage: &dyn Storage,
    dir: &Path,
    names: &[String],
) -> Result<Vec<u64>, LogError> {
    let log_swap = format!(".{LOG_SUFFIX}{SWAP_SUFFIX}");
    let swaps: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(&log_swap))
        .filter(|stem| stem.len() == 20)
        .filter_map(|stem| stem.parse().ok())
        .collect();
    let segments: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".log"))
        .filter(|stem| stem.len() == 20)
        .filter_map(|stem| stem.parse().ok())
        .collect();
    for &base in &swaps {
        let swap =
            segment::with_extra_suffix(&segment::file_path(dir, base, LOG_SUFFIX), SWAP_SUFFIX);
        let next = Segment::scan_next_offset(storage, dir, base, &swap)?;
        for &old in segments
            .iter()
            .filter(|&&b| b >= base && b < next.max(base + 1))
        {
            remove_segment_files(storage, dir, old)?;
        }
        // The indexes are rebuilt from the segment.
        remove_segment_files(storage, dir, base)?;
        for suffix in [segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX] {
            let path =
                segment::with_extra_suffix(&segment::file_path(dir, base, suffix), SWAP_SUFFIX);
            if storage.exists(&path) {
                storage.remove(&path).context(&path)?;
            }
        }
        // The cleaned transaction index was synced before the commit: it is
        // whole (and rebuilt from the segment before it if missing).
        let txn_swap = segment::with_extra_suffix(
            &segment::file_path(dir, base, TXN_INDEX_SUFFIX),
            SWAP_SUFFIX,
        );
        if storage.exists(&txn_swap) {
            let txn_target = segment::file_path(dir, base, TXN_INDEX_SUFFIX);
            storage.rename(&txn_swap, &txn_target).context(&txn_swap)?;
        }
        let target = segment::file_path(dir, base, LOG_SUFFIX);
        storage.rename(&swap, &target).context(&swap)?;
        tracing::info!(segment = %target.display(), replaced_up_to = next, "finished swapping in a cleaned segment");
    }
    let mut changed = !swaps.is_empty();
    for name in names.iter().filter(|n| n.ends_with(SWAP_SUFFIX)) {
        let path = dir.join(name);
        if storage.exists(&path) {
            storage.remove(&path).context(&path)?;
            changed = true;
        }
    }
    if changed {
        storage.sync_dir(dir).context(dir)?;
    }
    Ok(swaps)
}

/// Removes whatever the cleaner left of a cleaned segment of `base`
/// (`.cleaned` or `.swap` files), logging failures: a reopen removes them.
fn remove_cleaner_files(storage: &dyn Storage, dir: &Path, base: u64) {
    for kind in [
        LOG_SUFFIX,
        segment::INDEX_SUFFIX,
        segment::TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ] {
        for extra in [CLEANED_SUFFIX, SWAP_SUFFIX] {
            let path = segment::with_extra_suffix(&segment::file_path(dir, base, kind), extra);
            if storage.exists(&path) {
                if let Err(error) = storage.remove(&path) {
                    tracing::warn!(path = %path.display(), %error, "could not remove a cleaned segment file");
                }
            }
        }
    }
}

/// Removes a segment's files, those that exist.
fn remove_segment_files(storage: &dyn Storage, dir: &Path, base: u64) -> Result<(), LogError> {
    for suffix in [
        LOG_SUFFIX,
        segment::INDEX_SUFFIX,
        segment::TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ] {
        let path = segment::file_path(dir, base, suffix);
        if storage.exists(&path) {
            storage.remove(&path).context(&path)?;
        }
    }
    Ok(())
}

/// Scans the batch at `position` for its first record at or after
/// `timestamp` with an offset at or above `log_start`.
fn find_record_at_or_after(
    segment: &Segment,
    position: u64,
    size: u64,
    timestamp: i64,
    log_start: u64,
) -> Result<Option<TimestampOffset>, LogError> {
    let path = segment.path(LOG_SUFFIX);
    let mut bytes = vec![0u8; size as usize];
    segment
        .log
        .read_exact_at(&mut bytes, position)
        .context(&path)?;
    crate::sealed::record_at_or_after(Bytes::from(bytes), timestamp, log_start).map_err(|reason| {
        LogError::Corrupt {
            path: path.clone(),
            position,
            reason,
        }
    })
}
