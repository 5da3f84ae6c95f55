//! Transactions as the log sees them: which producers have a transaction
//! open, and each segment's aborted-transaction index (`.txnindex`).
//!
//! Both follow from the batches alone: a transactional data batch opens a
//! transaction for its producer (unless one is open), a marker (a control
//! batch, [`crate::batch::marker_batch`]) closes it, and an abort marker
//! that closes an open transaction adds an [`AbortedTxn`] to the index of
//! the segment the marker is in. A marker for a producer with no open
//! transaction changes nothing, as in Kafka.
//!
//! Each `.txnindex` starts with the transactions open at its segment's base
//! offset, so a segment's index can be rebuilt by replaying the segment
//! alone, and the open transactions at any offset follow from the segment
//! holding it. See `DESIGN.md` for the format.

use std::collections::{BTreeSet, HashMap};
use std::io::IoSlice;
use std::path::Path;
use std::sync::Arc;

use crate::batch::{self, BatchHeader, ControlType, HEADER_SIZE};
use crate::error::{IoContext, LogError};
use crate::storage::{Storage, StorageFile};

pub(crate) const TXN_INDEX_SUFFIX: &str = "txnindex";

const MAGIC: &[u8; 4] = b"WTXI";
const VERSION: u16 = 1;
/// Magic, version and the count of open transactions.
const HEADER_FIXED: usize = 10;
const OPEN_TXN_SIZE: usize = 16;
const CRC_SIZE: usize = 4;
/// Kafka's 34-byte `AbortedTxn` and a CRC-32C of it.
pub(crate) const ENTRY_SIZE: usize = 34 + CRC_SIZE;
/// Kafka's `AbortedTxn` version.
const ENTRY_VERSION: i16 = 0;
/// The version field of a seal record.
const SEAL_VERSION: i16 = -1;

/// A transaction ended by an abort marker: `read_committed` consumers skip
/// its producer's transactional batches from `first_offset` up to the
/// marker at `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// The base offset of the transaction's first batch.
    pub first_offset: u64,
    /// The offset of the abort marker.
    pub last_offset: u64,
    /// The last stable offset once the transaction ended: the first offset
    /// of the earliest transaction still open, or `last_offset + 1`. A
    /// search for the aborted transactions below some offset can stop at
    /// the first entry whose last stable offset reaches it.
    pub last_stable_offset: u64,
}

/// A transaction in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpenTxn {
    pub producer_id: i64,
    /// The base offset of the transaction's first batch.
    pub first_offset: u64,
}

/// What a batch means to transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnEvent {
    /// A transactional data batch.
    Data { producer_id: i64, base_offset: u64 },
    /// A commit or abort marker.
    Marker {
        producer_id: i64,
        offset: u64,
        commit: bool,
    },
}

/// The event of a batch stored at `base_offset`, if any; `batch` holds
/// the whole batch when it is a control batch (only its header otherwise).
pub(crate) fn event_of(
    header: &BatchHeader<'_>,
    batch: &[u8],
    base_offset: u64,
) -> Option<TxnEvent> {
    let producer_id = header.producer_id();
    if producer_id < 0 || !header.is_transactional() {
        return None;
    }
    if !header.is_control() {
        return Some(TxnEvent::Data {
            producer_id,
            base_offset,
        });
    }
    let commit = match batch::control_type(batch)? {
        ControlType::Commit => true,
        ControlType::Abort => false,
        ControlType::Other(_) => return None,
    };
    Some(TxnEvent::Marker {
        producer_id,
        offset: base_offset,
        commit,
    })
}

/// The open transactions at some offset of the log, and the ones ended
/// recently enough that the high watermark may not have passed their
/// marker yet.
#[derive(Debug, Clone, Default)]
pub(crate) struct TxnState {
    open: HashMap<i64, u64>,
    by_first: BTreeSet<(u64, i64)>,
    /// (first offset, marker offset) of ended transactions whose marker
    /// the high watermark had not passed when last asked.
    unreplicated: Vec<(u64, u64)>,
}

impl TxnState {
    pub(crate) fn from_open(open: &[OpenTxn]) -> Self {
        let mut state = Self::default();
        for txn in open {
            state.open.insert(txn.producer_id, txn.first_offset);
            state.by_first.insert((txn.first_offset, txn.producer_id));
        }
        state
    }

    /// The open transactions, oldest first.
    pub(crate) fn open_txns(&self) -> Vec<OpenTxn> {
        self.by_first
            .iter()
            .map(|&(first_offset, producer_id)| OpenTxn {
                producer_id,
                first_offset,
            })
            .collect()
    }

    pub(crate) fn open_txn(&self, producer_id: i64) -> Option<u64> {
        self.open.get(&producer_id).copied()
    }

    /// Applies one batch's event; an abort marker that closes a
    /// transaction yields its index entry.
    pub(crate) fn apply(&mut self, event: TxnEvent) -> Option<AbortedTxn> {
        match event {
            TxnEvent::Data {
                producer_id,
                base_offset,
            } => {
                if let std::collections::hash_map::Entry::Vacant(v) = self.open.entry(producer_id) {
                    v.insert(base_offset);
                    self.by_first.insert((base_offset, producer_id));
                }
                None
            }
            TxnEvent::Marker {
                producer_id,
                offset,
                commit,
            } => {
                let first_offset = self.open.remove(&producer_id)?;
                self.by_first.remove(&(first_offset, producer_id));
                self.unreplicated.push((first_offset, offset));
                (!commit).then(|| AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset: offset,
                    last_stable_offset: self.by_first.first().map_or(offset + 1, |&(f, _)| f),
                })
            }
        }
    }

    /// Forgets ended transactions whose marker is below `high_watermark`.
    /// No transaction open, and none ended whose marker was unreplicated
    /// when last asked.
    pub(crate) fn is_settled(&self) -> bool {
        self.by_first.is_empty() && self.unreplicated.is_empty()
    }

    pub(crate) fn prune_replicated(&mut self, high_watermark: u64) {
        self.unreplicated
            .retain(|&(_, marker)| marker >= high_watermark);
    }

    /// The first offset that `read_committed` consumers may not read yet:
    /// the first offset of the earliest open transaction, or of a
    /// transaction whose marker is at or above `high_watermark`.
    pub(crate) fn first_unstable_offset(&self, high_watermark: u64) -> Option<u64> {
        let undecided = self.by_first.first().map(|&(f, _)| f);
        let unreplicated = self
            .unreplicated
            .iter()
            .filter(|&&(_, marker)| marker >= high_watermark)
            .map(|&(f, _)| f)
            .min();
        match (undecided, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A segment's `.txnindex`: the transactions open at the segment's base
/// offset, then the aborted transactions whose markers the segment holds,
/// in marker order, and seals. A seal, appended when the segment is sealed
/// (and at a clean close), counts the entries before it and names the
/// segment's end then: an index is complete for a segment only if it ends
/// with a seal naming the segment's end, so a file cut back anywhere, even
/// at an entry boundary, is never taken for a whole one.
#[derive(Default)]
pub(crate) struct TxnIndex {
    pub(crate) open_at_base: Vec<OpenTxn>,
    pub(crate) entries: Vec<AbortedTxn>,
    file: Option<Arc<dyn StorageFile>>,
    /// The file's length.
    len: u64,
    /// The end offset named by the seal the file ends with, if it does.
    sealed_at: Option<u64>,
    /// Written since the file was last synced.
    pub(crate) dirty: bool,
}

impl TxnIndex {
    /// Writes a new index file (replacing any) with these contents, sealed
    /// for a segment ending at `seal_at` if given.
    pub(crate) fn create(
        storage: &dyn Storage,
        path: &Path,
        open_at_base: Vec<OpenTxn>,
        entries: Vec<AbortedTxn>,
        seal_at: Option<u64>,
    ) -> Result<Self, LogError> {
        let file = storage.create(path).context(path)?;
        let mut bytes = encode_header(&open_at_base);
        for entry in &entries {
            bytes.extend_from_slice(&encode_entry(entry));
        }
        if let Some(end) = seal_at {
            bytes.extend_from_slice(&encode_seal(entries.len(), end));
        }
        file.append(&[IoSlice::new(&bytes)]).context(path)?;
        Ok(Self {
            open_at_base,
            entries,
            file: Some(file),
            len: bytes.len() as u64,
            sealed_at: seal_at,
            dirty: true,
        })
    }

    /// Reads the index file of the segment `[base_offset, next_offset)`;
    /// `None` when it is missing, or its header is damaged. Damaged or
    /// inconsistent entries leave the header (which recovery may still
    /// use) with no entries, unsealed.
    pub(crate) fn load(
        storage: &dyn Storage,
        path: &Path,
        base_offset: u64,
        next_offset: u64,
    ) -> Option<Self> {
        if !storage.exists(path) {
            return None;
        }
        let read = || -> std::io::Result<(Arc<dyn StorageFile>, Vec<u8>)> {
            let file = storage.open(path)?;
            let mut bytes = vec![0u8; file.len() as usize];
            file.read_exact_at(&mut bytes, 0)?;
            Ok((file, bytes))
        };
        let (file, bytes) = match read() {
            Ok(read) => read,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "transaction index unreadable");
                return None;
            }
        };
        let open_at_base = match decode_header(&bytes, base_offset) {
            Ok(open) => open,
            Err(reason) => {
                tracing::warn!(path = %path.display(), reason, "transaction index header invalid");
                return None;
            }
        };
        let body = &bytes[header_len(open_at_base.len()) as usize..];
        let (entries, sealed_at) = match decode_body(body, base_offset, next_offset) {
            Ok(decoded) => decoded,
            Err(reason) => {
                tracing::warn!(path = %path.display(), reason, "transaction index entries invalid");
                (Vec::new(), None)
            }
        };
        Some(Self {
            open_at_base,
            entries,
            len: bytes.len() as u64,
            file: Some(file),
            sealed_at,
            dirty: false,
        })
    }

    /// True when the file is complete for a segment ending at
    /// `next_offset`.
    pub(crate) fn is_sealed_at(&self, next_offset: u64) -> bool {
        self.sealed_at == Some(next_offset)
    }

    pub(crate) fn file(&self) -> Option<&Arc<dyn StorageFile>> {
        self.file.as_ref()
    }

    /// Closes the file of a sealed segment's index, which is not written
    /// again (a truncation that makes the segment active writes it anew).
    pub(crate) fn release_file(&mut self) {
        if !self.dirty {
            self.file = None;
        }
    }

    /// Appends bytes to the file; on failure cuts it back, and says
    /// whether that worked.
    fn append_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<(), (LogError, bool)> {
        let Some(file) = &self.file else {
            let source = std::io::Error::other("transaction index not open");
            let error = LogError::Io {
                path: path.to_owned(),
                source,
            };
            return Err((error, true));
        };
        if let Err(source) = file.append(&[IoSlice::new(bytes)]) {
            let undone = file.truncate(self.len).is_ok();
            let error = LogError::Io {
                path: path.to_owned(),
                source,
            };
            return Err((error, undone));
        }
        self.len += bytes.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// Appends entries to the file and to memory. On failure the file is
    /// cut back; `Err((_, false))` says even that failed.
    pub(crate) fn append(
        &mut self,
        path: &Path,
        entries: &[AbortedTxn],
    ) -> Result<(), (LogError, bool)> {
        let mut bytes = Vec::with_capacity(entries.len() * ENTRY_SIZE);
        for entry in entries {
            bytes.extend_from_slice(&encode_entry(entry));
        }
        self.append_bytes(path, &bytes)?;
        self.entries.extend_from_slice(entries);
        self.sealed_at = None;
        Ok(())
    }

    /// Undoes the last `count` entries appended.
    pub(crate) fn undo_append(&mut self, path: &Path, count: usize) -> Result<(), LogError> {
        if count == 0 {
            return Ok(());
        }
        let len = self.len - (count * ENTRY_SIZE) as u64;
        if let Some(file) = &self.file {
            file.truncate(len).context(path)?;
        }
        self.len = len;
        self.entries.truncate(self.entries.len() - count);
        Ok(())
    }

    /// Appends a seal for a segment ending at `next_offset` (nothing if the
    /// file already ends with that seal).
    pub(crate) fn seal(&mut self, path: &Path, next_offset: u64) -> Result<(), (LogError, bool)> {
        if self.is_sealed_at(next_offset) {
            return Ok(());
        }
        self.append_bytes(path, &encode_seal(self.entries.len(), next_offset))?;
        self.sealed_at = Some(next_offset);
        Ok(())
    }

    /// Keeps the first `count` entries, writing the file anew.
    pub(crate) fn truncate_entries(
        &mut self,
        storage: &dyn Storage,
        path: &Path,
        count: usize,
    ) -> Result<(), LogError> {
        let mut entries = std::mem::take(&mut self.entries);
        entries.truncate(count);
        let open = std::mem::take(&mut self.open_at_base);
        *self = Self::create(storage, path, open, entries, None)?;
        Ok(())
    }
}

fn header_len(open: usize) -> u64 {
    (HEADER_FIXED + open * OPEN_TXN_SIZE + CRC_SIZE) as u64
}

fn encode_header(open: &[OpenTxn]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(header_len(open.len()) as usize);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_be_bytes());
    bytes.extend_from_slice(&(open.len() as u32).to_be_bytes());
    for txn in open {
        bytes.extend_from_slice(&txn.producer_id.to_be_bytes());
        bytes.extend_from_slice(&txn.first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

fn encode_record(version: i16, fields: [u64; 4]) -> [u8; ENTRY_SIZE] {
    let mut bytes = [0u8; ENTRY_SIZE];
    bytes[0..2].copy_from_slice(&version.to_be_bytes());
    for (i, field) in fields.iter().enumerate() {
        bytes[2 + 8 * i..10 + 8 * i].copy_from_slice(&field.to_be_bytes());
    }
    let crc = crc32c::crc32c(&bytes[..34]);
    bytes[34..].copy_from_slice(&crc.to_be_bytes());
    bytes
}

fn encode_entry(entry: &AbortedTxn) -> [u8; ENTRY_SIZE] {
    encode_record(
        ENTRY_VERSION,
        [
            entry.producer_id as u64,
            entry.first_offset,
            entry.last_offset,
            entry.last_stable_offset,
        ],
    )
}

fn encode_seal(entries: usize, next_offset: u64) -> [u8; ENTRY_SIZE] {
    encode_record(SEAL_VERSION, [entries as u64, next_offset, 0, 0])
}

fn be_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes and checks the header: the transactions open at `base_offset`.
fn decode_header(bytes: &[u8], base_offset: u64) -> Result<Vec<OpenTxn>, String> {
    if bytes.len() < HEADER_FIXED || &bytes[..4] != MAGIC {
        return Err("no transaction index header".to_owned());
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        return Err(format!("unknown version {version}"));
    }
    let count = u32::from_be_bytes(bytes[6..10].try_into().expect("4 bytes")) as u64;
    let len = (HEADER_FIXED as u64)
        .saturating_add(count.saturating_mul(OPEN_TXN_SIZE as u64))
        .saturating_add(CRC_SIZE as u64);
    if (bytes.len() as u64) < len {
        return Err("header runs past the end of the file".to_owned());
    }
    let crc_at = len as usize - CRC_SIZE;
    let stored = u32::from_be_bytes(bytes[crc_at..crc_at + CRC_SIZE].try_into().expect("4"));
    if crc32c::crc32c(&bytes[..crc_at]) != stored {
        return Err("header CRC mismatch".to_owned());
    }
    let open: Vec<OpenTxn> = bytes[HEADER_FIXED..crc_at]
        .chunks_exact(OPEN_TXN_SIZE)
        .map(|c| OpenTxn {
            producer_id: be_u64(c, 0) as i64,
            first_offset: be_u64(c, 8),
        })
        .collect();
    if open.iter().any(|t| t.first_offset >= base_offset) {
        return Err("a transaction open at the base offset starts after it".to_owned());
    }
    Ok(open)
}

/// Decodes and checks the entries and seals after the header, against the
/// segment `[base_offset, next_offset)`: the entries, and the end offset
/// of the seal the file ends with, if it does.
fn decode_body(
    body: &[u8],
    base_offset: u64,
    next_offset: u64,
) -> Result<(Vec<AbortedTxn>, Option<u64>), String> {
    if !body.len().is_multiple_of(ENTRY_SIZE) {
        return Err(format!("{} trailing bytes", body.len() % ENTRY_SIZE));
    }
    let mut entries: Vec<AbortedTxn> = Vec::with_capacity(body.len() / ENTRY_SIZE);
    let mut sealed_at = None;
    for (i, chunk) in body.chunks_exact(ENTRY_SIZE).enumerate() {
        let stored = u32::from_be_bytes(chunk[34..].try_into().expect("4 bytes"));
        if crc32c::crc32c(&chunk[..34]) != stored {
            return Err(format!("record {i}: CRC mismatch"));
        }
        let version = i16::from_be_bytes([chunk[0], chunk[1]]);
        if version == SEAL_VERSION {
            let (count, end) = (be_u64(chunk, 2), be_u64(chunk, 10));
            if count != entries.len() as u64 || end < base_offset || end > next_offset {
                return Err(format!(
                    "record {i}: seal inconsistent with the entries before it"
                ));
            }
            sealed_at = Some(end);
            continue;
        }
        sealed_at = None;
        let entry = AbortedTxn {
            producer_id: be_u64(chunk, 2) as i64,
            first_offset: be_u64(chunk, 10),
            last_offset: be_u64(chunk, 18),
            last_stable_offset: be_u64(chunk, 26),
        };
        let ordered = entries
            .last()
            .is_none_or(|prev| prev.last_offset < entry.last_offset);
        let inside = entry.last_offset >= base_offset && entry.last_offset < next_offset;
        if version != ENTRY_VERSION || entry.first_offset > entry.last_offset || !ordered || !inside
        {
            return Err(format!(
                "record {i} inconsistent with the segment: {entry:?}"
            ));
        }
        entries.push(entry);
    }
    Ok((entries, sealed_at))
}

/// The transaction events of the batches in the first `size` bytes of a
/// segment's `.log` file (whole batches, already validated), in order.
pub(crate) fn scan_events(
    file: &dyn StorageFile,
    path: &Path,
    size: u64,
) -> Result<Vec<TxnEvent>, LogError> {
    const CHUNK: u64 = 1 << 20;
    let mut events = Vec::new();
    let mut chunk = Vec::new();
    let mut chunk_start = 0u64;
    let mut position = 0u64;
    while position + HEADER_SIZE as u64 <= size {
        let in_chunk = |len: u64, chunk: &Vec<u8>, start: u64| {
            position >= start && position + len <= start + chunk.len() as u64
        };
        if !in_chunk(HEADER_SIZE as u64, &chunk, chunk_start) {
            chunk_start = position;
            chunk = vec![0u8; CHUNK.min(size - position) as usize];
            file.read_exact_at(&mut chunk, position).context(path)?;
        }
        let at = (position - chunk_start) as usize;
        let header = BatchHeader::parse(&chunk[at..], position as usize)?;
        let total = header.total_size() as u64;
        let interesting = header.producer_id() >= 0 && header.is_transactional();
        if interesting && header.is_control() && !in_chunk(total, &chunk, chunk_start) {
            chunk_start = position;
            chunk = vec![0u8; CHUNK.max(total).min(size - position) as usize];
            file.read_exact_at(&mut chunk, position).context(path)?;
        }
        if interesting {
            let at = (position - chunk_start) as usize;
            let end = (at + total as usize).min(chunk.len());
            let header = BatchHeader::parse(&chunk[at..], position as usize)?;
            let base_offset = header.base_offset() as u64;
            if let Some(event) = event_of(&header, &chunk[at..end], base_offset) {
                events.push(event);
            }
        }
        position += total;
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimStorage;

    fn data(producer_id: i64, base_offset: u64) -> TxnEvent {
        TxnEvent::Data {
            producer_id,
            base_offset,
        }
    }

    fn marker(producer_id: i64, offset: u64, commit: bool) -> TxnEvent {
        TxnEvent::Marker {
            producer_id,
            offset,
            commit,
        }
    }

    #[test]
    fn first_batches_open_and_markers_close_transactions() {
        let mut state = TxnState::default();
        assert_eq!(state.apply(data(1, 10)), None);
        assert_eq!(state.apply(data(2, 12)), None);
        assert_eq!(state.apply(data(1, 14)), None, "still the same transaction");
        assert_eq!(state.open_txn(1), Some(10));
        assert_eq!(state.open_txns()[0].first_offset, 10);
        // Producer 1 commits: nothing to index; 2 is still open.
        assert_eq!(state.apply(marker(1, 16, true)), None);
        assert_eq!(state.first_unstable_offset(u64::MAX), Some(12));
        // Producer 2 aborts: indexed, stable up to its marker.
        assert_eq!(
            state.apply(marker(2, 17, false)),
            Some(AbortedTxn {
                producer_id: 2,
                first_offset: 12,
                last_offset: 17,
                last_stable_offset: 18,
            })
        );
        assert_eq!(state.first_unstable_offset(u64::MAX), None);
        // A marker without an open transaction changes nothing.
        assert_eq!(state.apply(marker(3, 18, false)), None);
        assert!(state.open_txns().is_empty());
    }

    #[test]
    fn an_abort_records_the_earliest_transaction_still_open() {
        let mut state = TxnState::default();
        state.apply(data(1, 5));
        state.apply(data(2, 7));
        state.apply(data(3, 9));
        let aborted = state.apply(marker(2, 11, false)).unwrap();
        assert_eq!(aborted.last_stable_offset, 5);
        let aborted = state.apply(marker(1, 12, false)).unwrap();
        assert_eq!(aborted.last_stable_offset, 9);
    }

    #[test]
    fn the_first_unstable_offset_waits_for_the_high_watermark_to_pass_markers() {
        let mut state = TxnState::default();
        state.apply(data(1, 10));
        state.apply(data(2, 20));
        assert_eq!(state.first_unstable_offset(0), Some(10));
        state.apply(marker(1, 30, true));
        // The marker at 30 is not replicated: 10 stays unstable.
        assert_eq!(state.first_unstable_offset(25), Some(10));
        assert_eq!(state.first_unstable_offset(30), Some(10));
        assert_eq!(state.first_unstable_offset(31), Some(20));
        state.apply(marker(2, 31, false));
        assert_eq!(state.first_unstable_offset(31), Some(20));
        assert_eq!(state.first_unstable_offset(32), None);
    }

    #[test]
    fn index_files_round_trip_and_refuse_damage() {
        let storage = SimStorage::new();
        let dir = Path::new("/p");
        storage.create_dir_all(dir).unwrap();
        let path = dir.join("00000000000000000100.txnindex");
        let open = vec![OpenTxn {
            producer_id: 7,
            first_offset: 90,
        }];
        let entry = |producer_id, first_offset, last_offset| AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
            last_stable_offset: last_offset + 1,
        };
        let mut index =
            TxnIndex::create(&storage, &path, open.clone(), vec![entry(7, 90, 120)], None).unwrap();
        index.seal(&path, 125).unwrap();
        index.append(&path, &[entry(8, 121, 130)]).unwrap();
        assert!(!index.is_sealed_at(200));
        index.seal(&path, 200).unwrap();
        index.seal(&path, 200).unwrap(); // once is enough
        let loaded = TxnIndex::load(&storage, &path, 100, 200).unwrap();
        assert_eq!(loaded.open_at_base, open);
        assert_eq!(loaded.entries, vec![entry(7, 90, 120), entry(8, 121, 130)]);
        assert!(loaded.is_sealed_at(200));
        // Sealed for a shorter segment than the one it is read for: not
        // complete.
        assert!(!TxnIndex::load(&storage, &path, 100, 300)
            .unwrap()
            .is_sealed_at(300));
        // An entry past the segment's end: not this segment's index.
        let loaded = TxnIndex::load(&storage, &path, 100, 125).unwrap();
        assert!(loaded.entries.is_empty() && !loaded.is_sealed_at(125));

        // Any flipped byte, and any shorter file (even one cut back to the
        // earlier seal), is never taken for a whole index of the segment.
        let bytes = storage.contents(&path).unwrap();
        let complete = |bytes: Vec<u8>| {
            storage.set_contents(&path, bytes);
            TxnIndex::load(&storage, &path, 100, 200).is_some_and(|i| i.is_sealed_at(200))
        };
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(!complete(damaged), "flip at {at}");
        }
        for len in 0..bytes.len() {
            assert!(!complete(bytes[..len].to_vec()), "cut at {len}");
        }
        assert!(complete(bytes));
        assert!(TxnIndex::load(&storage, &dir.join("missing.txnindex"), 0, 1).is_none());

        let mut index = TxnIndex::load(&storage, &path, 100, 200).unwrap();
        index.truncate_entries(&storage, &path, 1).unwrap();
        let loaded = TxnIndex::load(&storage, &path, 100, 125).unwrap();
        assert_eq!(loaded.entries, vec![entry(7, 90, 120)]);
        assert!(!loaded.is_sealed_at(125));
    }
}
