//! The durable Raft log of a controller: `raft.log` (entries) and
//! `raft.state` (vote and purge point) in the controller's directory.
//!
//! `raft.log` is a 16-byte header (magic `WEIRRLOG`, version, crc32c of
//! both) followed by records framed like `metadata.log`: length, crc32c,
//! one JSON entry. Entries are appended and fsynced before openraft is
//! told they are durable; a torn final record is cut on open. Truncating a
//! conflicting suffix shortens the file; purging a prefix first records the
//! purge point in `raft.state`, then rewrites the log without the purged
//! entries (temporary file, fsync, rename). `raft.state` is always
//! replaced whole (temporary file, fsync, rename, directory fsync);
//! `raft.committed` is a hint written without fsync. The entries that are
//! not purged are also kept in memory (the metadata log is small, and
//! snapshots bound it), where readers see them once they are durable. File
//! work runs on a blocking thread. See `DESIGN.md`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader, StorageIOError};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::disk::{remove_if_exists, sync_dir, write_synced};
use crate::error::{IoContext, MetaError};
use crate::log_file::{self, MAX_PAYLOAD_LEN};

use super::types::{Entry, LogId, StorageError, TypeConfig, Vote};

/// The log file's name.
pub(crate) const RAFT_LOG_FILE: &str = "raft.log";
/// The vote and purge point's file name.
pub(crate) const RAFT_STATE_FILE: &str = "raft.state";
/// The last known commit point's file name (a hint, never fsynced).
pub(crate) const RAFT_COMMITTED_FILE: &str = "raft.committed";
const RAFT_LOG_TMP: &str = "raft.log.tmp";
const RAFT_STATE_TMP: &str = "raft.state.tmp";
const RAFT_COMMITTED_TMP: &str = "raft.committed.tmp";
const MAGIC: &[u8; 8] = b"WEIRRLOG";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 16;

/// Index → (byte position in `raft.log`, entry), as loaded.
type Entries = BTreeMap<u64, (u64, Entry)>;

/// A freshly written `raft.log`.
struct Rewritten {
    /// Open for appending.
    file: File,
    len: u64,
    /// Index → byte position.
    positions: BTreeMap<u64, u64>,
}

/// What `raft.state` holds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
struct HardState {
    /// The last vote this node cast or granted.
    vote: Option<Vote>,
    /// Entries up to this id are gone (covered by a snapshot).
    purged: Option<LogId>,
}

/// The Raft log storage; clones share the same log (one serves as the
/// log reader of replication tasks).
///
/// Two locks: `mem` (what readers see) is only held briefly; `disk` is held
/// while files are written and synced, on a blocking thread, so neither
/// readers nor the async runtime wait for an fsync.
#[derive(Clone, Debug)]
pub(crate) struct LogStore {
    mem: Arc<Mutex<Mem>>,
    disk: Arc<Mutex<Disk>>,
}

/// The durable state as readers see it: only what is already on disk.
#[derive(Debug)]
struct Mem {
    /// The entries after `state.purged`.
    entries: BTreeMap<u64, Entry>,
    state: HardState,
    /// The last commit point openraft reported (a hint for restarts).
    committed: Option<LogId>,
}

/// The files.
#[derive(Debug)]
struct Disk {
    dir: PathBuf,
    log_path: PathBuf,
    state_path: PathBuf,
    /// `raft.log`, open for appending.
    file: File,
    /// The length of `raft.log` up to the end of the last entry.
    file_len: u64,
    /// Index → byte position in `raft.log` of the entries after the purge
    /// point.
    positions: BTreeMap<u64, u64>,
    /// What `raft.state` holds.
    state: HardState,
    /// Set when a write failed: what is on disk is uncertain, so nothing
    /// more is written until the log is reopened.
    failed: Option<String>,
}

impl LogStore {
    /// Opens (creating if needed) the log in `dir`, dropping a torn final
    /// record. Any other damage is [`MetaError::Corrupt`].
    pub(crate) fn open(dir: &Path) -> Result<LogStore, MetaError> {
        fs::create_dir_all(dir).context(dir)?;
        for leftover in [RAFT_LOG_TMP, RAFT_STATE_TMP, RAFT_COMMITTED_TMP] {
            remove_if_exists(&dir.join(leftover))?;
        }
        let log_path = dir.join(RAFT_LOG_FILE);
        let state_path = dir.join(RAFT_STATE_FILE);
        let state = read_state(&state_path)?.unwrap_or_default();
        let purged_index = state.purged.as_ref().map(|id| id.index);
        let committed = read_committed(&dir.join(RAFT_COMMITTED_FILE));

        let (file, file_len, loaded) = match fs::read(&log_path) {
            Ok(bytes) => {
                let (len, entries) = load_log(&log_path, &bytes, purged_index)?;
                let file = OpenOptions::new()
                    .append(true)
                    .open(&log_path)
                    .context(&log_path)?;
                (file, len, entries)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let file = write_log_file(dir, &[])?.file;
                (file, HEADER_LEN as u64, BTreeMap::new())
            }
            Err(source) => {
                return Err(MetaError::Io {
                    path: log_path,
                    source,
                })
            }
        };
        info!(
            dir = %dir.display(),
            entries = loaded.len(),
            purged = ?state.purged,
            vote = ?state.vote,
            committed = ?committed,
            "raft log opened"
        );
        let positions = loaded.iter().map(|(i, (pos, _))| (*i, *pos)).collect();
        let entries = loaded.into_iter().map(|(i, (_, e))| (i, e)).collect();
        Ok(LogStore {
            mem: Arc::new(Mutex::new(Mem {
                entries,
                state,
                committed,
            })),
            disk: Arc::new(Mutex::new(Disk {
                dir: dir.to_owned(),
                log_path,
                state_path,
                file,
                file_len,
                positions,
                state,
                failed: None,
            })),
        })
    }

    fn mem(&self) -> MutexGuard<'_, Mem> {
        // A panic while holding the lock leaves plain data behind; the
        // `failed` flag covers half-done writes.
        self.mem.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `op` on the files on a blocking thread. A failure makes the
    /// log refuse every later write.
    async fn on_disk<T, F>(&self, subject: ErrorSubject<u64>, op: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Disk) -> Result<T, MetaError> + Send + 'static,
    {
        let disk = Arc::clone(&self.disk);
        let task_subject = subject.clone();
        let task = tokio::task::spawn_blocking(move || {
            let mut disk = disk.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = disk.offline() {
                return Err(Box::new(e));
            }
            op(&mut disk).map_err(|e| Box::new(disk.fail(task_subject, e)))
        });
        match task.await {
            Ok(result) => result.map_err(|e| *e),
            Err(e) => Err(StorageIOError::new(subject, ErrorVerb::Write, &e).into()),
        }
    }
}

impl Mem {
    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .last_key_value()
            .map(|(_, e)| e.log_id)
            .or(self.state.purged)
    }
}

impl Disk {
    /// The error to return while the log refuses writes.
    fn offline(&self) -> Option<StorageError> {
        self.failed.as_ref().map(|reason| {
            storage_error(
                ErrorSubject::Logs,
                ErrorVerb::Write,
                &MetaError::Offline {
                    dir: self.dir.clone(),
                    reason: reason.clone(),
                },
            )
        })
    }

    fn fail(&mut self, subject: ErrorSubject<u64>, e: MetaError) -> StorageError {
        warn!(dir = %self.dir.display(), error = %e, "raft log write failed; the log refuses writes until reopened");
        self.failed = Some(e.to_string());
        storage_error(subject, ErrorVerb::Write, &e)
    }

    fn save_state(&mut self, state: HardState) -> Result<(), MetaError> {
        let json = serde_json::to_vec(&state).map_err(|e| MetaError::Corrupt {
            path: self.state_path.clone(),
            reason: format!("the raft state cannot be encoded: {e}"),
        })?;
        let tmp = self.dir.join(RAFT_STATE_TMP);
        write_synced(&tmp, &log_file::encode_record(&json))?;
        fs::rename(&tmp, &self.state_path).context(&self.state_path)?;
        sync_dir(&self.dir)?;
        self.state = state;
        Ok(())
    }

    /// Appends the entries (already checked to follow the log) with one
    /// write, then fsyncs.
    fn append(&mut self, entries: &[Entry]) -> Result<(), MetaError> {
        let mut buf = Vec::new();
        let mut placed = Vec::with_capacity(entries.len());
        for entry in entries {
            let payload = encode_entry(entry, &self.log_path)?;
            placed.push((entry.log_id.index, self.file_len + buf.len() as u64));
            buf.extend_from_slice(&log_file::encode_record(&payload));
        }
        self.file.write_all(&buf).context(&self.log_path)?;
        self.file.sync_data().context(&self.log_path)?;
        self.file_len += buf.len() as u64;
        self.positions.extend(placed);
        Ok(())
    }

    fn truncate(&mut self, since: u64) -> Result<(), MetaError> {
        let Some((_, pos)) = self.positions.range(since..).next() else {
            return Ok(());
        };
        let pos = *pos;
        self.file.set_len(pos).context(&self.log_path)?;
        self.file.sync_all().context(&self.log_path)?;
        self.file_len = pos;
        self.positions.split_off(&since);
        Ok(())
    }

    /// Records the purge point, then rewrites the log with `kept` (the
    /// entries after it).
    fn purge(&mut self, upto: LogId, kept: &[Entry]) -> Result<(), MetaError> {
        // The purge point first: should a crash leave the old file, the
        // entries it still holds up to `upto` are skipped on open.
        self.save_state(HardState {
            purged: Some(upto),
            ..self.state
        })?;
        let rewritten = write_log_file(&self.dir, kept)?;
        self.file = rewritten.file;
        self.file_len = rewritten.len;
        self.positions = rewritten.positions;
        Ok(())
    }
}

fn storage_error(subject: ErrorSubject<u64>, verb: ErrorVerb, e: &MetaError) -> StorageError {
    StorageIOError::new(subject, verb, e).into()
}

fn encode_entry(entry: &Entry, path: &Path) -> Result<Vec<u8>, MetaError> {
    let payload = serde_json::to_vec(entry).map_err(|e| MetaError::Corrupt {
        path: path.to_owned(),
        reason: format!("entry {} cannot be encoded: {e}", entry.log_id),
    })?;
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(MetaError::InvalidRequest(format!(
            "The entry takes {} bytes, more than the {MAX_PAYLOAD_LEN} a raft log record holds.",
            payload.len()
        )));
    }
    Ok(payload)
}

fn encode_header() -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_be_bytes());
    let crc = crc32c::crc32c(&header[..12]);
    header[12..].copy_from_slice(&crc.to_be_bytes());
    header
}

/// Writes `entries` as a fresh `raft.log` (temporary file, fsync, rename,
/// directory fsync); returns it open for appending, its length and each
/// entry's position.
fn write_log_file(dir: &Path, entries: &[Entry]) -> Result<Rewritten, MetaError> {
    let tmp = dir.join(RAFT_LOG_TMP);
    let path = dir.join(RAFT_LOG_FILE);
    let mut buf = encode_header().to_vec();
    let mut positions = BTreeMap::new();
    for entry in entries {
        positions.insert(entry.log_id.index, buf.len() as u64);
        buf.extend_from_slice(&log_file::encode_record(&encode_entry(entry, &path)?));
    }
    write_synced(&tmp, &buf)?;
    fs::rename(&tmp, &path).context(&path)?;
    sync_dir(dir)?;
    let file = OpenOptions::new().append(true).open(&path).context(&path)?;
    Ok(Rewritten {
        file,
        len: buf.len() as u64,
        positions,
    })
}

/// Reads `raft.log`: checks the header, scans the records, cuts a torn
/// tail, and keeps the entries after `purged`, which must be contiguous.
fn load_log(path: &Path, bytes: &[u8], purged: Option<u64>) -> Result<(u64, Entries), MetaError> {
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    if bytes.len() < HEADER_LEN {
        return Err(corrupt(format!(
            "the file is {} bytes long, shorter than its {HEADER_LEN}-byte header",
            bytes.len()
        )));
    }
    if bytes[..HEADER_LEN] != encode_header() {
        return Err(corrupt(
            "bad header at byte 0: not a version 1 Weir raft log".to_owned(),
        ));
    }
    let scan = log_file::scan_records::<Entry>(bytes, HEADER_LEN, path)?;
    let mut entries = BTreeMap::new();
    let mut expected = purged.map(|p| p + 1);
    for (k, (pos, entry)) in scan.records.into_iter().enumerate() {
        let index = entry.log_id.index;
        if purged.is_some_and(|p| index <= p) {
            continue;
        }
        if expected.is_some_and(|e| e != index) {
            return Err(corrupt(format!(
                "record {} at byte {pos} holds entry {index} where entry {} belongs",
                k + 1,
                expected.unwrap_or_default()
            )));
        }
        expected = Some(index + 1);
        entries.insert(index, (pos, entry));
    }
    if let Some(what) = &scan.torn {
        warn!(
            path = %path.display(),
            valid_len = scan.valid_len,
            "dropping a torn final record of the raft log: {what}"
        );
        let file = OpenOptions::new().write(true).open(path).context(path)?;
        file.set_len(scan.valid_len).context(path)?;
        file.sync_all().context(path)?;
    }
    Ok((scan.valid_len, entries))
}

/// Writes the commit point to `raft.committed` (temporary file, rename, no
/// fsync). It only lets a restart apply what was committed before it
/// hears from a leader: losing it, or finding an older one, is harmless,
/// and every entry up to it is already durable in the log.
fn write_committed(dir: &Path, committed: &Option<LogId>) -> io::Result<()> {
    let json = serde_json::to_vec(committed).map_err(io::Error::other)?;
    let tmp = dir.join(RAFT_COMMITTED_TMP);
    fs::write(&tmp, log_file::encode_record(&json))?;
    fs::rename(&tmp, dir.join(RAFT_COMMITTED_FILE))
}

/// The commit point of `raft.committed`; `None` when absent or damaged.
fn read_committed(path: &Path) -> Option<LogId> {
    let bytes = fs::read(path).ok()?;
    match log_file::scan_records::<Option<LogId>>(&bytes, 0, path) {
        Ok(scan) if scan.torn.is_none() && scan.records.len() == 1 => {
            scan.records.into_iter().next().and_then(|(_, c)| c)
        }
        _ => {
            warn!(path = %path.display(), "ignoring an unreadable commit point");
            None
        }
    }
}

fn read_state(path: &Path) -> Result<Option<HardState>, MetaError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetaError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    // Written whole through a rename: anything but exactly one intact
    // record is damage, never a torn write.
    let scan = log_file::scan_records::<HardState>(&bytes, 0, path)?;
    match (scan.torn, scan.records.len()) {
        (None, 1) => Ok(scan.records.into_iter().next().map(|(_, s)| s)),
        _ => Err(MetaError::Corrupt {
            path: path.to_owned(),
            reason: "expected exactly one intact record".to_owned(),
        }),
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self
            .mem()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let mem = self.mem();
        Ok(LogState {
            last_purged_log_id: mem.state.purged,
            last_log_id: mem.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = *vote;
        self.on_disk(ErrorSubject::Vote, move |disk| {
            disk.save_state(HardState {
                vote: Some(vote),
                ..disk.state
            })
        })
        .await?;
        self.mem().state.vote = Some(vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.mem().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        {
            let mut mem = self.mem();
            if committed <= mem.committed {
                return Ok(());
            }
            mem.committed = committed;
        }
        // A hint: a failure is logged, never fatal.
        self.on_disk(ErrorSubject::Store, move |disk| {
            if let Err(e) = write_committed(&disk.dir, &committed) {
                warn!(dir = %disk.dir.display(), error = %e, "cannot record the commit point");
            }
            Ok(())
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let mem = self.mem();
        // Never past the log: what is not in it cannot be applied.
        Ok(mem.committed.min(mem.last_log_id()))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let mut next = self.mem().last_log_id().map(|id| id.index + 1);
        for entry in &entries {
            let index = entry.log_id.index;
            if let Some(expected) = next.filter(|n| *n != index) {
                let e = MetaError::InvalidRequest(format!(
                    "entry {index} appended where entry {expected} belongs"
                ));
                return Err(storage_error(ErrorSubject::Logs, ErrorVerb::Write, &e));
            }
            next = Some(index + 1);
        }
        let entries = self
            .on_disk(ErrorSubject::Logs, move |disk| {
                disk.append(&entries).map(|()| entries)
            })
            .await?;
        {
            let mut mem = self.mem();
            for entry in entries {
                mem.entries.insert(entry.log_id.index, entry);
            }
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let since = log_id.index;
        self.on_disk(ErrorSubject::Logs, move |disk| disk.truncate(since))
            .await?;
        self.mem().entries.split_off(&since);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let kept: Vec<Entry> = {
            let mem = self.mem();
            if mem.state.purged.is_some_and(|p| p.index >= log_id.index) {
                return Ok(());
            }
            mem.entries
                .range(log_id.index + 1..)
                .map(|(_, e)| e.clone())
                .collect()
        };
        self.on_disk(ErrorSubject::Logs, move |disk| disk.purge(log_id, &kept))
            .await?;
        let mut mem = self.mem();
        mem.state.purged = Some(log_id);
        mem.entries = mem.entries.split_off(&(log_id.index + 1));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftLogStorageExt;
    use openraft::testing::log_id;
    use openraft::{EntryPayload, Vote};

    use super::*;
    use crate::command::Command;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: log_id(term, 1, index),
            payload: EntryPayload::Normal(Command::AllocateProducerIds {
                count: index as i64 + 1,
            }),
        }
    }

    async fn all(store: &mut LogStore) -> Vec<Entry> {
        store.try_get_log_entries(..).await.unwrap()
    }

    fn indexes(entries: &[Entry]) -> Vec<(u64, u64)> {
        entries
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    #[tokio::test]
    async fn appended_entries_and_vote_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.get_log_state().await.unwrap(), LogState::default());
        store
            .blocking_append((1..=5).map(|i| entry(1, i)))
            .await
            .unwrap();
        let vote = Vote::new_committed(3, 2);
        store.save_vote(&vote).await.unwrap();
        drop(store);

        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.read_vote().await.unwrap(), Some(vote));
        let entries = all(&mut store).await;
        assert_eq!(entries, (1..=5).map(|i| entry(1, i)).collect::<Vec<_>>());
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(log_id(1, 1, 5)));
        assert_eq!(state.last_purged_log_id, None);
        let some = store.try_get_log_entries(2..4).await.unwrap();
        assert_eq!(indexes(&some), vec![(1, 2), (1, 3)]);
    }

    #[tokio::test]
    async fn the_commit_point_survives_reopen_but_never_passes_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store
            .blocking_append((1..=4).map(|i| entry(1, i)))
            .await
            .unwrap();
        store.save_committed(Some(log_id(1, 1, 3))).await.unwrap();
        // Older values never overwrite newer ones.
        store.save_committed(Some(log_id(1, 1, 2))).await.unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.read_committed().await.unwrap(), Some(log_id(1, 1, 3)));
        store.truncate(log_id(1, 1, 3)).await.unwrap();
        assert_eq!(store.read_committed().await.unwrap(), Some(log_id(1, 1, 2)));
        drop(store);

        // A damaged hint is ignored.
        fs::write(dir.path().join(RAFT_COMMITTED_FILE), b"garbage").unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.read_committed().await.unwrap(), None);
    }

    #[tokio::test]
    async fn truncate_drops_the_suffix_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store
            .blocking_append((1..=6).map(|i| entry(1, i)))
            .await
            .unwrap();
        store.truncate(log_id(1, 1, 4)).await.unwrap();
        store
            .blocking_append((4..=5).map(|i| entry(2, i)))
            .await
            .unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(
            indexes(&all(&mut store).await),
            vec![(1, 1), (1, 2), (1, 3), (2, 4), (2, 5)]
        );
    }

    #[tokio::test]
    async fn purge_drops_the_prefix_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store
            .blocking_append((0..=9).map(|i| entry(1, i)))
            .await
            .unwrap();
        store.purge(log_id(1, 1, 6)).await.unwrap();
        assert_eq!(
            indexes(&all(&mut store).await),
            vec![(1, 7), (1, 8), (1, 9)]
        );
        // Truncation after a purge uses the rewritten file's positions.
        store.truncate(log_id(1, 1, 9)).await.unwrap();
        store.blocking_append([entry(2, 9)]).await.unwrap();
        drop(store);

        let mut store = LogStore::open(dir.path()).unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(1, 1, 6)));
        assert_eq!(state.last_log_id, Some(log_id(2, 1, 9)));
        assert_eq!(
            indexes(&all(&mut store).await),
            vec![(1, 7), (1, 8), (2, 9)]
        );

        // Purging past the end (an installed snapshot) empties the log.
        store.purge(log_id(3, 1, 20)).await.unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(log_id(3, 1, 20)));
        store.blocking_append([entry(3, 21)]).await.unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&all(&mut store).await), vec![(3, 21)]);
    }

    #[tokio::test]
    async fn entries_before_the_purge_point_are_skipped_after_a_crash() {
        // A crash after `raft.state` recorded the purge but before the log
        // was rewritten leaves the old entries in the file.
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store
            .blocking_append((1..=5).map(|i| entry(1, i)))
            .await
            .unwrap();
        let old_log = fs::read(dir.path().join(RAFT_LOG_FILE)).unwrap();
        store.purge(log_id(1, 1, 3)).await.unwrap();
        drop(store);
        fs::write(dir.path().join(RAFT_LOG_FILE), old_log).unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&all(&mut store).await), vec![(1, 4), (1, 5)]);
    }

    #[tokio::test]
    async fn a_torn_final_record_is_cut_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RAFT_LOG_FILE);
        let mut store = LogStore::open(dir.path()).unwrap();
        store
            .blocking_append((1..=3).map(|i| entry(1, i)))
            .await
            .unwrap();
        drop(store);
        let full = fs::read(&path).unwrap();

        // Cut anywhere inside the last record: the first two survive.
        let second_end = {
            let scan = log_file::scan_records::<Entry>(&full, HEADER_LEN, &path).unwrap();
            scan.records[2].0 as usize
        };
        for cut in [second_end + 1, second_end + 8, full.len() - 1] {
            fs::write(&path, &full[..cut]).unwrap();
            let mut store = LogStore::open(dir.path()).unwrap();
            assert_eq!(indexes(&all(&mut store).await), vec![(1, 1), (1, 2)]);
            assert_eq!(fs::metadata(&path).unwrap().len(), second_end as u64);
            store.blocking_append([entry(1, 3)]).await.unwrap();
        }

        // A flipped byte inside an earlier record is corruption.
        let mut damaged = full.clone();
        damaged[HEADER_LEN + 12] ^= 0x20;
        fs::write(&path, &damaged).unwrap();
        assert!(matches!(
            LogStore::open(dir.path()),
            Err(MetaError::Corrupt { .. })
        ));
    }

    #[tokio::test]
    async fn a_damaged_state_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store.save_vote(&Vote::new(1, 1)).await.unwrap();
        drop(store);
        let path = dir.path().join(RAFT_STATE_FILE);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x01;
        fs::write(&path, bytes).unwrap();
        assert!(matches!(
            LogStore::open(dir.path()),
            Err(MetaError::Corrupt { .. })
        ));
    }

    /// What the log should hold: entry index → term, and the purge point.
    #[derive(Debug, Default)]
    struct Model {
        entries: BTreeMap<u64, u64>,
        purged: Option<(u64, u64)>,
        vote: Option<Vote<u64>>,
        term: u64,
    }

    impl Model {
        fn last(&self) -> Option<(u64, u64)> {
            self.entries
                .last_key_value()
                .map(|(i, t)| (*t, *i))
                .or(self.purged)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Append { count: u8, new_term: bool },
        Truncate { back: u8 },
        Purge { at: u8 },
        Vote { term: u8 },
        Reopen,
        TearLast { keep: u16 },
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1u8..5, any::<bool>()).prop_map(|(count, new_term)| Op::Append { count, new_term }),
            1 => any::<u8>().prop_map(|back| Op::Truncate { back }),
            1 => any::<u8>().prop_map(|at| Op::Purge { at }),
            1 => any::<u8>().prop_map(|term| Op::Vote { term }),
            1 => Just(Op::Reopen),
            1 => any::<u16>().prop_map(|keep| Op::TearLast { keep }),
        ]
    }

    async fn check(store: &mut LogStore, model: &Model) {
        let got: Vec<(u64, u64)> = all(store)
            .await
            .iter()
            .map(|e| (e.log_id.index, e.log_id.leader_id.term))
            .collect();
        let want: Vec<(u64, u64)> = model.entries.iter().map(|(i, t)| (*i, *t)).collect();
        assert_eq!(got, want);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(
            state.last_purged_log_id,
            model.purged.map(|(t, i)| log_id(t, 1, i))
        );
        assert_eq!(
            state.last_log_id,
            model.last().map(|(t, i)| log_id(t, 1, i))
        );
        assert_eq!(store.read_vote().await.unwrap(), model.vote);
    }

    async fn run_ops(ops: Vec<Op>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RAFT_LOG_FILE);
        let mut store = LogStore::open(dir.path()).unwrap();
        let mut model = Model {
            term: 1,
            ..Model::default()
        };
        for op in ops {
            match op {
                Op::Append { count, new_term } => {
                    if new_term {
                        model.term += 1;
                    }
                    let first = model.last().map_or(0, |(_, i)| i + 1);
                    let entries: Vec<Entry> = (first..first + u64::from(count))
                        .map(|i| entry(model.term, i))
                        .collect();
                    store.blocking_append(entries).await.unwrap();
                    for i in first..first + u64::from(count) {
                        model.entries.insert(i, model.term);
                    }
                }
                Op::Truncate { back } => {
                    let Some((&first, _)) = model.entries.first_key_value() else {
                        continue;
                    };
                    let len = model.entries.len() as u64;
                    let since = first + u64::from(back) % len;
                    let term = model.entries[&since];
                    store.truncate(log_id(term, 1, since)).await.unwrap();
                    model.entries.split_off(&since);
                }
                Op::Purge { at } => {
                    let Some((&first, _)) = model.entries.first_key_value() else {
                        continue;
                    };
                    let len = model.entries.len() as u64;
                    let upto = first + u64::from(at) % len;
                    let term = model.entries[&upto];
                    store.purge(log_id(term, 1, upto)).await.unwrap();
                    model.purged = Some((term, upto));
                    model.entries = model.entries.split_off(&(upto + 1));
                }
                Op::Vote { term } => {
                    let vote = Vote::new(u64::from(term), 2);
                    store.save_vote(&vote).await.unwrap();
                    model.vote = Some(vote);
                }
                Op::Reopen => {
                    drop(store);
                    store = LogStore::open(dir.path()).unwrap();
                }
                Op::TearLast { keep } => {
                    // A crash in the middle of the last append: a prefix
                    // of its record is on disk; recovery drops it.
                    let Some((&last, _)) = model.entries.last_key_value() else {
                        continue;
                    };
                    drop(store);
                    let bytes = fs::read(&path).unwrap();
                    let scan = log_file::scan_records::<Entry>(&bytes, HEADER_LEN, &path).unwrap();
                    let start = scan.records.last().unwrap().0 as usize;
                    let cut = start + usize::from(keep) % (bytes.len() - start);
                    fs::write(&path, &bytes[..cut]).unwrap();
                    store = LogStore::open(dir.path()).unwrap();
                    model.entries.remove(&last);
                }
            }
            check(&mut store, &model).await;
        }
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        check(&mut store, &model).await;
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any sequence of appends, truncations, purges, votes, reopens
        /// and torn final appends leaves the log equal to the model.
        #[test]
        fn the_log_matches_a_model(ops in proptest::collection::vec(op(), 1..40)) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(run_ops(ops));
        }
    }
}
