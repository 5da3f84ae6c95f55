//! One segment: a `.log` file of batches back to back with its `.index` and
//! `.timeindex`, all named by the segment's 20-digit base offset.

use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, BatchHeader, Origin, HEADER_SIZE};
use crate::epoch::EpochEntry;
use crate::error::{IoContext, LogError};
use crate::index::{Index, OffsetEntry, TimeEntry};
use crate::recent::{RecentBatches, RecentRead};
use crate::storage::{Storage, StorageFile};
use crate::txn::{AbortedTxn, OpenTxn, TxnEvent, TxnIndex, TXN_INDEX_SUFFIX};

pub(crate) const LOG_SUFFIX: &str = "log";
pub(crate) const INDEX_SUFFIX: &str = "index";
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";
pub(crate) const DELETED_SUFFIX: &str = ".deleted";
/// A segment the cleaner is writing, not yet part of the log.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";
/// A cleaned segment committed to replace the segments it covers.
pub(crate) const SWAP_SUFFIX: &str = ".swap";

/// Kafka's "no timestamp".
pub(crate) const NO_TIMESTAMP: i64 = -1;

/// How much of a `.log` file recovery reads at a time.
const SCAN_CHUNK: usize = 1 << 20;

pub(crate) fn file_path(dir: &Path, base_offset: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}"))
}

/// `path` with `extra` appended to its file name (`x.log` → `x.log.swap`).
pub(crate) fn with_extra_suffix(path: &Path, extra: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(extra);
    PathBuf::from(name)
}

/// A batch ready to be written: its header already patched.
pub(crate) struct PreparedBatch<'a> {
    pub(crate) header: [u8; HEADER_SIZE],
    pub(crate) records: &'a [u8],
    pub(crate) base_offset: u64,
    pub(crate) last_offset: u64,
    pub(crate) max_timestamp: i64,
}

impl PreparedBatch<'_> {
    pub(crate) fn size(&self) -> u64 {
        (HEADER_SIZE + self.records.len()) as u64
    }
}

/// The first invalid batch found by a scan.
#[derive(Debug)]
pub(crate) struct InvalidBatch {
    pub(crate) position: u64,
    pub(crate) reason: String,
}

pub(crate) struct Segment {
    pub(crate) base_offset: u64,
    dir: PathBuf,
    /// Appended to every file name: empty for a segment of the log,
    /// [`CLEANED_SUFFIX`] or [`SWAP_SUFFIX`] while the cleaner swaps it in.
    name_suffix: &'static str,
    /// Built once: reads and appends name it only when they fail, and read
    /// results share it.
    log_path: Arc<Path>,
    pub(crate) log: Arc<dyn StorageFile>,
    offset_index: Index<OffsetEntry>,
    time_index: Index<TimeEntry>,
    /// Bytes of the `.log` file that belong to the segment.
    pub(crate) size: u64,
    /// One past the last offset stored (`base_offset` when empty).
    pub(crate) next_offset: u64,
    pub(crate) max_timestamp: i64,
    offset_of_max_timestamp: u64,
    bytes_since_index_entry: u64,
    /// Timestamp that `segment.ms` counts from.
    pub(crate) rolling_base_ms: Option<i64>,
    /// Position of a batch that failed validation; nothing from it on is served.
    pub(crate) corrupt_from: Option<InvalidBatch>,
    /// Appended since the last sync of the `.log` file.
    pub(crate) log_dirty: bool,
    /// Sealed, with index files not yet synced.
    pub(crate) indexes_dirty: bool,
    /// The aborted-transaction index, with the transactions open at the
    /// base offset.
    pub(crate) txn: TxnIndex,
    /// Where its last batches are, while it is active.
    recent: RecentBatches,
}

impl Segment {
    /// A new, empty segment.
    pub(crate) fn create(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: u64,
    ) -> Result<Self, LogError> {
        let path = file_path(dir, base_offset, LOG_SUFFIX);
        let log = storage.create(&path).context(&path)?;
        Ok(Self::empty(dir, base_offset, log))
    }

    /// A new, empty segment for the cleaner to fill: its files carry the
    /// [`CLEANED_SUFFIX`] until [`Segment::rename`] takes it off.
    pub(crate) fn create_cleaned(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: u64,
    ) -> Result<Self, LogError> {
        let path = with_extra_suffix(&file_path(dir, base_offset, LOG_SUFFIX), CLEANED_SUFFIX);
        let log = storage.create(&path).context(&path)?;
        let mut segment = Self::empty(dir, base_offset, log);
        segment.name_suffix = CLEANED_SUFFIX;
        segment.log_path = path.into();
        Ok(segment)
    }

    /// Renames the files of a sealed segment to carry `suffix` instead of
    /// their current one: the indexes first, the `.log` last, so that the
    /// `.log`'s name tells how far the rename got.
    pub(crate) fn rename(
        &mut self,
        storage: &dyn Storage,
        suffix: &'static str,
    ) -> Result<(), LogError> {
        for kind in [
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
            LOG_SUFFIX,
        ] {
            let from = self.path(kind);
            if kind == TXN_INDEX_SUFFIX && !storage.exists(&from) {
                continue;
            }
            let to = with_extra_suffix(&file_path(&self.dir, self.base_offset, kind), suffix);
            storage.rename(&from, &to).context(&from)?;
        }
        self.name_suffix = suffix;
        self.log_path = self.path(LOG_SUFFIX).into();
        Ok(())
    }

    /// Removes the segment's files, those that exist.
    pub(crate) fn remove_files(&self, storage: &dyn Storage) -> Result<(), LogError> {
        for kind in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let path = self.path(kind);
            if storage.exists(&path) {
                storage.remove(&path).context(&path)?;
            }
        }
        Ok(())
    }

    fn empty(dir: &Path, base_offset: u64, log: Arc<dyn StorageFile>) -> Self {
        Self {
            base_offset,
            dir: dir.to_owned(),
            name_suffix: "",
            log_path: file_path(dir, base_offset, LOG_SUFFIX).into(),
            log,
            offset_index: Index::Memory(Vec::new()),
            time_index: Index::Memory(Vec::new()),
            size: 0,
            next_offset: base_offset,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            bytes_since_index_entry: 0,
            rolling_base_ms: None,
            corrupt_from: None,
            log_dirty: false,
            indexes_dirty: false,
            txn: TxnIndex::default(),
            recent: RecentBatches::default(),
        }
    }

    /// Writes the segment's transaction index anew: the transactions open
    /// at its base offset and the aborted transactions it holds, sealed
    /// (complete for the segment as it is) if `sealed`.
    pub(crate) fn write_txn_index(
        &mut self,
        storage: &dyn Storage,
        open_at_base: Vec<OpenTxn>,
        entries: Vec<AbortedTxn>,
        sealed: bool,
    ) -> Result<(), LogError> {
        let path = self.path(TXN_INDEX_SUFFIX);
        let seal_at = sealed.then_some(self.next_offset);
        self.txn = TxnIndex::create(storage, &path, open_at_base, entries, seal_at)?;
        Ok(())
    }

    /// Marks the transaction index complete for the segment as it is.
    pub(crate) fn seal_txn_index(&mut self) -> Result<(), (LogError, bool)> {
        let path = self.path(TXN_INDEX_SUFFIX);
        self.txn.seal(&path, self.next_offset)
    }

    /// Reads the segment's transaction index file, if it is whole and
    /// consistent with the segment.
    pub(crate) fn load_txn_index(&self, storage: &dyn Storage) -> Option<TxnIndex> {
        TxnIndex::load(
            storage,
            &self.path(TXN_INDEX_SUFFIX),
            self.base_offset,
            self.next_offset,
        )
    }

    /// The transaction events of the segment's readable batches.
    pub(crate) fn txn_events(&self) -> Result<Vec<TxnEvent>, LogError> {
        crate::txn::scan_events(&*self.log, &self.log_path, self.readable_end())
    }

    /// The transaction index file, when written since its last sync.
    pub(crate) fn txn_file_to_sync(&self) -> Option<(PathBuf, Arc<dyn StorageFile>)> {
        let file = self.txn.file().filter(|_| self.txn.dirty)?;
        Some((self.path(TXN_INDEX_SUFFIX), file.clone()))
    }

    /// The offset and time indexes in their file formats.
    pub(crate) fn index_bytes(&self) -> Result<(Vec<u8>, Vec<u8>), LogError> {
        let offsets = self
            .offset_index
            .to_bytes()
            .context(&self.path(INDEX_SUFFIX))?;
        let times = self
            .time_index
            .to_bytes()
            .context(&self.path(TIME_INDEX_SUFFIX))?;
        Ok((offsets, times))
    }

    pub(crate) fn path(&self, suffix: &str) -> PathBuf {
        let path = file_path(&self.dir, self.base_offset, suffix);
        if self.name_suffix.is_empty() {
            path
        } else {
            with_extra_suffix(&path, self.name_suffix)
        }
    }

    pub(crate) fn log_path(&self) -> &Arc<Path> {
        &self.log_path
    }

    /// Names the file behind an I/O error, building the path only then.
    fn io_error(&self, suffix: &'static str) -> impl FnOnce(std::io::Error) -> LogError + '_ {
        move |source| LogError::Io {
            path: self.path(suffix),
            source,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Sealed segments keep their indexes in files; the active one in memory.
    pub(crate) fn is_sealed(&self) -> bool {
        matches!(self.offset_index, Index::File { .. })
    }

    pub(crate) fn index_entries(&self) -> usize {
        self.offset_index.len()
    }

    /// Opens an existing segment by scanning every batch (CRC included) and
    /// rebuilding its indexes. Returns the segment, valid up to the first
    /// invalid batch, and that batch if there is one.
    ///
    /// `epoch_starts` gets the first offset of each run of batches with one
    /// leader epoch, in order, for recovery to re-derive the epoch cache.
    pub(crate) fn recover(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
        epoch_starts: &mut Vec<EpochEntry>,
    ) -> Result<(Self, Option<InvalidBatch>), LogError> {
        let path = file_path(dir, base_offset, LOG_SUFFIX);
        let log = storage.open(&path).context(&path)?;
        let mut segment = Self::empty(dir, base_offset, log);
        let invalid = segment.scan(index_interval_bytes, epoch_starts)?;
        segment.size = invalid.as_ref().map_or(segment.log.len(), |i| i.position);
        Ok((segment, invalid))
    }

    /// The offset after the last valid batch of the segment file at `path`
    /// whose base offset is `base_offset` (the base offset when it holds
    /// none).
    pub(crate) fn scan_next_offset(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: u64,
        path: &Path,
    ) -> Result<u64, LogError> {
        let log = storage.open(path).context(path)?;
        let mut segment = Self::empty(dir, base_offset, log);
        segment.log_path = path.into();
        segment.scan(u64::MAX, &mut Vec::new())?;
        Ok(segment.next_offset)
    }

    fn scan(
        &mut self,
        index_interval_bytes: u64,
        epoch_starts: &mut Vec<EpochEntry>,
    ) -> Result<Option<InvalidBatch>, LogError> {
        let path = self.path(LOG_SUFFIX);
        let file_len = self.log.len();
        let mut chunk = Vec::new();
        let mut chunk_start = 0u64;
        let mut position = 0u64;
        while position < file_len {
            let remaining = file_len - position;
            if remaining < HEADER_SIZE as u64 {
                return Ok(Some(InvalidBatch {
                    position,
                    reason: format!("{remaining} trailing bytes, less than a batch header"),
                }));
            }
            let header_end = position + HEADER_SIZE as u64;
            if header_end > chunk_start + chunk.len() as u64 {
                chunk_start = position;
                chunk = read_chunk(&*self.log, position, SCAN_CHUNK.min(remaining as usize))
                    .context(&path)?;
            }
            let at = (position - chunk_start) as usize;
            let size = match BatchHeader::parse(&chunk[at..], position as usize) {
                Ok(header) => header.total_size() as u64,
                Err(e) => {
                    return Ok(Some(InvalidBatch {
                        position,
                        reason: e.to_string(),
                    }))
                }
            };
            if size > remaining {
                return Ok(Some(InvalidBatch {
                    position,
                    reason: format!("batch of {size} bytes runs past the end of the file"),
                }));
            }
            if position + size > chunk_start + chunk.len() as u64 {
                chunk_start = position;
                let want = SCAN_CHUNK.max(size as usize).min(remaining as usize);
                chunk = read_chunk(&*self.log, position, want).context(&path)?;
            }
            let at = (position - chunk_start) as usize;
            let batch =
                match batch::validate(&chunk[at..], position as usize, Origin::Log, usize::MAX) {
                    Ok(batch) => batch,
                    Err(e) => {
                        return Ok(Some(InvalidBatch {
                            position,
                            reason: e.to_string(),
                        }))
                    }
                };
            let header = batch.header;
            if header.base_offset() < self.next_offset as i64
                || header.last_offset() - self.base_offset as i64 > u32::MAX as i64
            {
                return Ok(Some(InvalidBatch {
                    position,
                    reason: format!(
                        "batch offsets {}..={} out of order (expected from {})",
                        header.base_offset(),
                        header.last_offset(),
                        self.next_offset
                    ),
                }));
            }
            let epoch = header.partition_leader_epoch();
            if epoch_starts.last().is_none_or(|last| last.epoch != epoch) {
                epoch_starts.push(EpochEntry {
                    epoch,
                    start_offset: header.base_offset() as u64,
                });
            }
            self.track_batch(
                position,
                header.base_offset() as u64,
                header.last_offset() as u64,
                header.max_timestamp(),
                size,
                index_interval_bytes,
            );
            self.size = position + size;
            position += size;
        }
        Ok(None)
    }

    /// Opens a segment whose data was durable and whose index files were
    /// written when it was sealed, checking the indexes cheaply and walking
    /// only the batches after the last index entry. Falls back to a full
    /// scan when anything looks wrong.
    pub(crate) fn open_trusted(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: u64,
        active: bool,
        index_interval_bytes: u64,
    ) -> Result<(Self, Option<InvalidBatch>), LogError> {
        let path = file_path(dir, base_offset, LOG_SUFFIX);
        let log = storage.open(&path).context(&path)?;
        let mut segment = Self::empty(dir, base_offset, log);
        segment.size = segment.log.len();
        match segment.load_indexes(storage, active) {
            Ok(true) => return Ok((segment, None)),
            Ok(false) => {}
            Err(e) => tracing::warn!(segment = %path.display(), error = %e, "index unreadable"),
        }
        tracing::info!(segment = %path.display(), "rebuilding missing or inconsistent indexes");
        // Trusted: its epochs are in the epoch file already.
        Self::recover(
            storage,
            dir,
            base_offset,
            index_interval_bytes,
            &mut Vec::new(),
        )
    }

    /// Loads index files and walks the tail; `Ok(false)` means "rebuild".
    fn load_indexes(&mut self, storage: &dyn Storage, active: bool) -> Result<bool, LogError> {
        let index_path = self.path(INDEX_SUFFIX);
        let time_path = self.path(TIME_INDEX_SUFFIX);
        if !storage.exists(&index_path) || !storage.exists(&time_path) {
            return Ok(self.size == 0);
        }
        let index_file = storage.open(&index_path).context(&index_path)?;
        let time_file = storage.open(&time_path).context(&time_path)?;
        if index_file.len() % 8 != 0 || time_file.len() % 12 != 0 {
            return Ok(false);
        }
        let (offset_index, time_index) = if active {
            (
                Index::Memory(Index::<OffsetEntry>::load(&*index_file).context(&index_path)?),
                Index::Memory(Index::<TimeEntry>::load(&*time_file).context(&time_path)?),
            )
        } else {
            let count = (index_file.len() / 8) as usize;
            let time_count = (time_file.len() / 12) as usize;
            (
                Index::File {
                    file: index_file,
                    count,
                },
                Index::File {
                    file: time_file,
                    count: time_count,
                },
            )
        };
        self.offset_index = offset_index;
        self.time_index = time_index;
        // An empty active segment was closed cleanly with empty indexes.
        if self.offset_index.len() == 0 {
            return Ok(self.size == 0);
        }
        let first = self.offset_index.get(0).context(&index_path)?;
        let last = self
            .offset_index
            .last()
            .context(&index_path)?
            .unwrap_or(first);
        // The first batch is indexed at position 0; its relative offset is 0
        // unless the cleaner removed the records at the segment's base.
        if first.position != 0 || u64::from(last.position) >= self.size {
            return Ok(false);
        }
        if let Some(entry) = self.time_index.last().context(&time_path)? {
            self.max_timestamp = entry.timestamp;
            self.offset_of_max_timestamp = self.base_offset + u64::from(entry.relative_offset);
        }
        // Walk from the last indexed batch to the end of the file.
        let mut position = u64::from(last.position);
        self.next_offset = self.base_offset + u64::from(last.relative_offset);
        self.bytes_since_index_entry = self.size - position;
        while position < self.size {
            let Ok(header) = self.read_header(position) else {
                return Ok(false);
            };
            let header = BatchHeader::parse(&header, 0).expect("checked by read_header");
            if header.base_offset() < self.next_offset as i64 {
                return Ok(false);
            }
            self.note_timestamp(header.max_timestamp(), header.base_offset() as u64);
            self.next_offset = header.next_offset() as u64;
            position += header.total_size() as u64;
        }
        if active {
            self.rolling_base_ms = Some(self.read_header(0).map_or(NO_TIMESTAMP, |h| {
                BatchHeader::parse(&h, 0).map_or(NO_TIMESTAMP, |h| h.max_timestamp())
            }));
        }
        Ok(true)
    }

    /// Reads and checks the header of the batch at `position`.
    pub(crate) fn read_header(&self, position: u64) -> Result<[u8; HEADER_SIZE], LogError> {
        let corrupt = |reason: String| LogError::Corrupt {
            path: self.log_path.to_path_buf(),
            position,
            reason,
        };
        if position + HEADER_SIZE as u64 > self.size {
            return Err(corrupt(
                "batch header runs past the end of the segment".into(),
            ));
        }
        let mut buf = [0u8; HEADER_SIZE];
        self.log
            .read_exact_at(&mut buf, position)
            .context(&self.log_path)?;
        let header =
            BatchHeader::parse(&buf, position as usize).map_err(|e| corrupt(e.to_string()))?;
        if position + header.total_size() as u64 > self.size {
            return Err(corrupt("batch runs past the end of the segment".into()));
        }
        Ok(buf)
    }

    /// Adds to `epoch_starts` the first offset of each run of batches with
    /// one leader epoch in the servable part of the segment, walking the
    /// batch headers (no CRC: the batches were validated when opened).
    pub(crate) fn epoch_starts(&self, epoch_starts: &mut Vec<EpochEntry>) -> Result<(), LogError> {
        let mut position = 0;
        while position < self.readable_end() {
            let buf = self.read_header(position)?;
            let header =
                BatchHeader::parse(&buf, position as usize).map_err(|e| LogError::Corrupt {
                    path: self.log_path.to_path_buf(),
                    position,
                    reason: e.to_string(),
                })?;
            let epoch = header.partition_leader_epoch();
            if epoch_starts.last().is_none_or(|last| last.epoch != epoch) {
                epoch_starts.push(EpochEntry {
                    epoch,
                    start_offset: header.base_offset() as u64,
                });
            }
            position += header.total_size() as u64;
        }
        Ok(())
    }

    /// Updates the indexes and bookkeeping for a batch written at `position`.
    fn track_batch(
        &mut self,
        position: u64,
        base_offset: u64,
        last_offset: u64,
        max_timestamp: i64,
        size: u64,
        index_interval_bytes: u64,
    ) {
        self.note_timestamp(max_timestamp, base_offset);
        if self.offset_index.len() == 0 || self.bytes_since_index_entry >= index_interval_bytes {
            let relative_offset = (base_offset - self.base_offset) as u32;
            self.offset_index.push(OffsetEntry {
                relative_offset,
                position: position as u32,
            });
            self.maybe_push_time_entry();
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += size;
        self.next_offset = last_offset + 1;
        self.recent.push(
            self.base_offset,
            base_offset,
            last_offset,
            position,
            position + size,
        );
    }

    fn note_timestamp(&mut self, max_timestamp: i64, base_offset: u64) {
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = base_offset;
        }
    }

    fn maybe_push_time_entry(&mut self) {
        let last = match self.time_index.last() {
            Ok(last) => last.map_or(NO_TIMESTAMP, |e| e.timestamp),
            Err(_) => return,
        };
        if self.max_timestamp > last {
            self.time_index.push(TimeEntry {
                timestamp: self.max_timestamp,
                relative_offset: (self.offset_of_max_timestamp - self.base_offset) as u32,
            });
        }
    }

    /// Appends prepared batches in one vectored write. On failure the file
    /// is cut back to its previous length; `Err(Some)` reports a failure to
    /// do even that, which leaves a torn tail behind.
    pub(crate) fn append(
        &mut self,
        batches: &[PreparedBatch<'_>],
        index_interval_bytes: u64,
        now_ms: i64,
    ) -> Result<(), (LogError, bool)> {
        let slices: Vec<IoSlice<'_>> = batches
            .iter()
            .flat_map(|b| [IoSlice::new(&b.header), IoSlice::new(b.records)])
            .collect();
        if let Err(e) = self.log.append(&slices) {
            let undone = self.log.truncate(self.size).is_ok();
            let path = self.log_path.to_path_buf();
            return Err((LogError::Io { path, source: e }, undone));
        }
        if self.rolling_base_ms.is_none() {
            // Not older than the append itself: producer timestamps from long
            // ago (a mirror, a replay) must not roll a segment per append.
            self.rolling_base_ms = Some(batches[0].max_timestamp.max(now_ms));
        }
        for b in batches {
            self.track_batch(
                self.size,
                b.base_offset,
                b.last_offset,
                b.max_timestamp,
                b.size(),
                index_interval_bytes,
            );
            self.size += b.size();
        }
        self.log_dirty = true;
        Ok(())
    }

    /// Position of the first batch whose last offset is at or above `offset`
    /// (`self.size` when there is none). Stops with an error at a corrupt
    /// batch.
    pub(crate) fn locate(&self, offset: u64) -> Result<u64, LogError> {
        let relative = offset.saturating_sub(self.base_offset).min(u32::MAX as u64) as u32;
        let start = self
            .offset_index
            .floor(|e| e.relative_offset <= relative)
            .map_err(self.io_error(INDEX_SUFFIX))?
            .map_or(0, |e| u64::from(e.position));
        let mut position = start;
        while position < self.readable_end() {
            let header = self.read_header(position)?;
            let header = BatchHeader::parse(&header, 0).expect("checked by read_header");
            if header.last_offset() >= offset as i64 {
                return Ok(position);
            }
            position += header.total_size() as u64;
        }
        Ok(position)
    }

    /// What [`RecentBatches::read`] says of a read of this segment; `None`
    /// also when part of the segment is corrupt.
    pub(crate) fn read_recent(
        &self,
        from: u64,
        bound: u64,
        max_bytes: usize,
    ) -> Option<RecentRead> {
        if self.corrupt_from.is_some() {
            return None;
        }
        self.recent.read(self.base_offset, from, bound, max_bytes)
    }

    /// End of the bytes that may be served.
    pub(crate) fn readable_end(&self) -> u64 {
        self.corrupt_from
            .as_ref()
            .map_or(self.size, |c| c.position.min(self.size))
    }

    /// The error for a read that reaches the corrupt part of the segment.
    pub(crate) fn corrupt_error(&self) -> Option<LogError> {
        self.corrupt_from.as_ref().map(|c| LogError::Corrupt {
            path: self.path(LOG_SUFFIX),
            position: c.position,
            reason: c.reason.clone(),
        })
    }

    /// The largest batch boundary at or below `limit`, walking forward from
    /// `from` (itself a boundary).
    pub(crate) fn boundary_at_or_below(&self, from: u64, limit: u64) -> Result<u64, LogError> {
        let indexed = self
            .offset_index
            .floor(|e| u64::from(e.position) <= limit)
            .map_err(self.io_error(INDEX_SUFFIX))?
            .map_or(0, |e| u64::from(e.position));
        let mut position = from.max(indexed);
        while position < limit {
            let header = self.read_header(position)?;
            let size = BatchHeader::parse(&header, 0)
                .expect("checked")
                .total_size() as u64;
            if position + size > limit {
                break;
            }
            position += size;
        }
        Ok(position)
    }

    /// Where to start scanning for the first record at or after
    /// `timestamp`: every record before the returned offset is older.
    pub(crate) fn time_lookup_start(&self, timestamp: i64) -> Result<u64, LogError> {
        let entry = self
            .time_index
            .floor(|e| e.timestamp < timestamp)
            .map_err(self.io_error(TIME_INDEX_SUFFIX))?;
        Ok(entry.map_or(self.base_offset, |e| {
            self.base_offset + u64::from(e.relative_offset)
        }))
    }

    /// Seals the segment: writes its index files (with a final time entry)
    /// and keeps them file-backed from now on.
    pub(crate) fn seal(&mut self, storage: &dyn Storage) -> Result<(), LogError> {
        if self.is_sealed() {
            return Ok(());
        }
        self.maybe_push_time_entry();
        let index_path = self.path(INDEX_SUFFIX);
        let time_path = self.path(TIME_INDEX_SUFFIX);
        // Both files are written before either index switches to its file:
        // a failure (ENOSPC) leaves the segment active with whole indexes.
        let index_file = storage.create(&index_path).context(&index_path)?;
        self.offset_index
            .write_to(&*index_file)
            .context(&index_path)?;
        let time_file = storage.create(&time_path).context(&time_path)?;
        self.time_index.write_to(&*time_file).context(&time_path)?;
        self.offset_index.use_file(index_file);
        self.time_index.use_file(time_file);
        self.indexes_dirty = true;
        self.recent.forget();
        Ok(())
    }

    /// Writes the active segment's index files for a clean shutdown, keeping
    /// the in-memory indexes.
    pub(crate) fn write_indexes(&mut self, storage: &dyn Storage) -> Result<(), LogError> {
        self.maybe_push_time_entry();
        for (suffix, bytes) in [
            (INDEX_SUFFIX, self.offset_index.encode_all()),
            (TIME_INDEX_SUFFIX, self.time_index.encode_all()),
        ] {
            let path = self.path(suffix);
            let bytes = bytes.context(&path)?;
            let file = storage.create(&path).context(&path)?;
            file.append(&[IoSlice::new(&bytes)]).context(&path)?;
            file.sync().context(&path)?;
        }
        Ok(())
    }

    /// Files to sync so that everything written to this segment is durable.
    pub(crate) fn files_to_sync(&self) -> Vec<(PathBuf, Arc<dyn StorageFile>)> {
        let mut files = Vec::new();
        if self.log_dirty {
            files.push((self.path(LOG_SUFFIX), self.log.clone()));
        }
        files.extend(self.txn_file_to_sync());
        if self.indexes_dirty {
            if let Index::File { file, .. } = &self.offset_index {
                files.push((self.path(INDEX_SUFFIX), file.clone()));
            }
            if let Index::File { file, .. } = &self.time_index {
                files.push((self.path(TIME_INDEX_SUFFIX), file.clone()));
            }
        }
        files
    }

    /// Cuts the segment back to `position` (a batch boundary) and makes it
    /// the active one again.
    pub(crate) fn truncate_to_position(
        &mut self,
        storage: &dyn Storage,
        position: u64,
    ) -> Result<(), LogError> {
        let path = self.path(LOG_SUFFIX);
        self.log.truncate(position).context(&path)?;
        self.log_dirty = true;
        let offsets = std::mem::replace(&mut self.offset_index, Index::Memory(Vec::new()));
        let times = std::mem::replace(&mut self.time_index, Index::Memory(Vec::new()));
        let mut offsets = Index::Memory(load_entries(offsets).context(&path)?);
        let mut times = Index::Memory(load_entries(times).context(&path)?);
        offsets
            .truncate_where(|e| u64::from(e.position) < position)
            .context(&path)?;
        // Index files, if any, describe the old contents: they are rewritten
        // when the segment is sealed again.
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let p = self.path(suffix);
            if storage.exists(&p) {
                storage.remove(&p).context(&p)?;
            }
        }
        self.indexes_dirty = false;
        self.size = position;
        self.recent.cut_at(position);
        if self
            .corrupt_from
            .as_ref()
            .is_some_and(|c| c.position >= position)
        {
            self.corrupt_from = None;
        }
        // Recompute what follows the last surviving index entry.
        let last = offsets.last().context(&path)?;
        let walk_from = last.map_or(0, |e| u64::from(e.position));
        self.next_offset = last.map_or(self.base_offset, |e| {
            self.base_offset + u64::from(e.relative_offset)
        });
        let mut headers = Vec::new();
        let mut p = walk_from;
        while p < position {
            let h = self.read_header(p)?;
            let header = BatchHeader::parse(&h, 0).expect("checked");
            headers.push((header.base_offset() as u64, header.max_timestamp()));
            self.next_offset = header.next_offset() as u64;
            p += header.total_size() as u64;
        }
        let next = self.next_offset;
        times
            .truncate_where(|e| self.base_offset + u64::from(e.relative_offset) < next)
            .context(&path)?;
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        if let Some(e) = times.last().context(&path)? {
            self.max_timestamp = e.timestamp;
            self.offset_of_max_timestamp = self.base_offset + u64::from(e.relative_offset);
        }
        for (base, ts) in headers {
            self.note_timestamp(ts, base);
        }
        self.offset_index = offsets;
        self.time_index = times;
        self.bytes_since_index_entry = position - walk_from;
        if position == 0 {
            self.rolling_base_ms = None;
        }
        Ok(())
    }

    /// Renames the segment's files with the `.deleted` suffix; returns the new
    /// names, to be removed later.
    pub(crate) fn mark_deleted(&self, storage: &dyn Storage) -> Result<Vec<PathBuf>, LogError> {
        let mut renamed = Vec::new();
        for suffix in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let path = self.path(suffix);
            if storage.exists(&path) {
                let mut deleted = path.clone().into_os_string();
                deleted.push(DELETED_SUFFIX);
                let deleted = PathBuf::from(deleted);
                storage.rename(&path, &deleted).context(&path)?;
                renamed.push(deleted);
            }
        }
        Ok(renamed)
    }

    /// Full CRC check of the segment, as recovery does it.
    pub(crate) fn verify(
        &self,
        index_interval_bytes: u64,
    ) -> Result<Option<InvalidBatch>, LogError> {
        let mut copy = Self::empty(&self.dir, self.base_offset, self.log.clone());
        let invalid = copy.scan(index_interval_bytes, &mut Vec::new())?;
        Ok(invalid.filter(|i| i.position < self.size))
    }
}

fn load_entries<E: crate::index::Entry>(index: Index<E>) -> std::io::Result<Vec<E>> {
    match index {
        Index::Memory(entries) => Ok(entries),
        Index::File { file, count } => {
            let mut entries = Index::<E>::load(&*file)?;
            entries.truncate(count);
            Ok(entries)
        }
    }
}

fn read_chunk(file: &dyn StorageFile, position: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, position)?;
    Ok(buf)
}
