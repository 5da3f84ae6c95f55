//! Sparse per-segment indexes.
//!
//! The offset index maps a batch's base offset (relative to the segment's
//! base, 4 bytes) to its byte position in the `.log` file (4 bytes). The time
//! index maps a timestamp (8 bytes) to the relative base offset (4 bytes) of
//! the batch that first reached it: every record before that batch is older.
//! Both are sorted and big-endian. The active segment keeps its entries in
//! memory; a sealed segment's index is searched in its file.

use std::io::{self, IoSlice};
use std::sync::Arc;

use crate::storage::StorageFile;

/// One fixed-size index entry.
pub(crate) trait Entry: Copy {
    const SIZE: usize;
    fn decode(bytes: &[u8]) -> Self;
    fn encode(&self, out: &mut Vec<u8>);
}

/// Relative offset → position in the `.log` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    pub(crate) relative_offset: u32,
    pub(crate) position: u32,
}

impl Entry for OffsetEntry {
    const SIZE: usize = 8;
    fn decode(bytes: &[u8]) -> Self {
        Self {
            relative_offset: u32::from_be_bytes(bytes[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes")),
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
}

/// Timestamp → relative offset of the batch that first reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub(crate) timestamp: i64,
    pub(crate) relative_offset: u32,
}

impl Entry for TimeEntry {
    const SIZE: usize = 12;
    fn decode(bytes: &[u8]) -> Self {
        Self {
            timestamp: i64::from_be_bytes(bytes[0..8].try_into().expect("8 bytes")),
            relative_offset: u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes")),
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }
}

/// Sorted entries, in memory (active segment) or in a file (sealed segment).
pub(crate) enum Index<E: Entry> {
    Memory(Vec<E>),
    File {
        file: Arc<dyn StorageFile>,
        count: usize,
    },
}

impl<E: Entry> Index<E> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Index::Memory(entries) => entries.len(),
            Index::File { count, .. } => *count,
        }
    }

    pub(crate) fn get(&self, i: usize) -> io::Result<E> {
        match self {
            Index::Memory(entries) => Ok(entries[i]),
            Index::File { file, .. } => {
                let mut buf = [0u8; 16];
                let buf = &mut buf[..E::SIZE];
                file.read_exact_at(buf, (i * E::SIZE) as u64)?;
                Ok(E::decode(buf))
            }
        }
    }

    pub(crate) fn last(&self) -> io::Result<Option<E>> {
        match self.len() {
            0 => Ok(None),
            n => self.get(n - 1).map(Some),
        }
    }

    /// The last entry for which `is_at_or_below` holds, given that it holds
    /// for a prefix of the entries.
    pub(crate) fn floor(&self, is_at_or_below: impl Fn(&E) -> bool) -> io::Result<Option<E>> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if is_at_or_below(&self.get(mid)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            Ok(None)
        } else {
            self.get(lo - 1).map(Some)
        }
    }

    /// The entries in their file format.
    pub(crate) fn to_bytes(&self) -> io::Result<Vec<u8>> {
        match self {
            Index::Memory(entries) => {
                let mut bytes = Vec::with_capacity(entries.len() * E::SIZE);
                for entry in entries {
                    entry.encode(&mut bytes);
                }
                Ok(bytes)
            }
            Index::File { file, count } => {
                let mut bytes = vec![0; count * E::SIZE];
                file.read_exact_at(&mut bytes, 0)?;
                Ok(bytes)
            }
        }
    }

    /// Adds an entry; only the active (in-memory) index grows.
    pub(crate) fn push(&mut self, entry: E) {
        match self {
            Index::Memory(entries) => entries.push(entry),
            Index::File { .. } => unreachable!("a sealed index never grows"),
        }
    }

    /// Drops the entries for which `keep` fails, given that it holds for a
    /// prefix. A file-backed index is shortened in place.
    pub(crate) fn truncate_where(&mut self, keep: impl Fn(&E) -> bool) -> io::Result<()> {
        let mut kept = self.len();
        while kept > 0 && !keep(&self.get(kept - 1)?) {
            kept -= 1;
        }
        match self {
            Index::Memory(entries) => entries.truncate(kept),
            Index::File { file, count } => {
                file.truncate((kept * E::SIZE) as u64)?;
                *count = kept;
            }
        }
        Ok(())
    }

    /// Loads the entries of `file` into memory.
    pub(crate) fn load(file: &dyn StorageFile) -> io::Result<Vec<E>> {
        let count = file.len() as usize / E::SIZE;
        let mut buf = vec![0u8; count * E::SIZE];
        file.read_exact_at(&mut buf, 0)?;
        Ok(buf.chunks_exact(E::SIZE).map(E::decode).collect())
    }

    /// Replaces the contents of `file` with the entries of an in-memory
    /// index. The index stays in memory until [`Index::use_file`].
    pub(crate) fn write_to(&self, file: &dyn StorageFile) -> io::Result<()> {
        let bytes = self.encode_all()?;
        file.truncate(0)?;
        file.append(&[IoSlice::new(&bytes)])
    }

    /// Makes the index file-backed by `file`, which [`Index::write_to`] filled.
    pub(crate) fn use_file(&mut self, file: Arc<dyn StorageFile>) {
        if let Index::Memory(entries) = self {
            let count = entries.len();
            *self = Index::File { file, count };
        }
    }

    /// The encoded entries, to write out an in-memory index.
    pub(crate) fn encode_all(&self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.len() * E::SIZE);
        for i in 0..self.len() {
            self.get(i)?.encode(&mut bytes);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimStorage;
    use crate::storage::Storage;
    use std::path::Path;

    fn entries() -> Vec<OffsetEntry> {
        (0..100)
            .map(|i| OffsetEntry {
                relative_offset: i * 10,
                position: i * 4096,
            })
            .collect()
    }

    #[test]
    fn floor_finds_the_last_entry_at_or_below() {
        let index = Index::Memory(entries());
        let floor = |target: u32| {
            index
                .floor(|e| e.relative_offset <= target)
                .unwrap()
                .map(|e| e.relative_offset)
        };
        assert_eq!(floor(0), Some(0));
        assert_eq!(floor(9), Some(0));
        assert_eq!(floor(10), Some(10));
        assert_eq!(floor(995), Some(990));
        let empty: Index<OffsetEntry> = Index::Memory(vec![]);
        assert_eq!(empty.floor(|_| true).unwrap(), None);
    }

    #[test]
    fn sealed_index_answers_like_the_memory_one() {
        let storage = SimStorage::new();
        storage.create_dir_all(Path::new("/d")).unwrap();
        let file = storage.create(Path::new("/d/x.index")).unwrap();
        let mut index = Index::Memory(entries());
        let memory = Index::Memory(entries());
        index.write_to(&*file).unwrap();
        index.use_file(file.clone());
        assert!(matches!(index, Index::File { count: 100, .. }));
        for target in [0, 5, 10, 333, 989, 990, 5000] {
            assert_eq!(
                index.floor(|e| e.relative_offset <= target).unwrap(),
                memory.floor(|e| e.relative_offset <= target).unwrap()
            );
        }
        assert_eq!(Index::<OffsetEntry>::load(&*file).unwrap(), entries());
        index.truncate_where(|e| e.relative_offset < 500).unwrap();
        assert_eq!(index.len(), 50);
        assert_eq!(file.len(), 50 * 8);
    }
}
