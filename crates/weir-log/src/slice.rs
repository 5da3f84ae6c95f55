//! The result of a read: a region of one segment file.

use std::io;
use std::os::unix::io::BorrowedFd;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::storage::StorageFile;

/// Whole batches, as a byte range of a segment's `.log` file. A server can
/// hand [`LogSlice::as_fd`] and the range to `sendfile`, or take the bytes
/// with [`LogSlice::to_bytes`]. The slice keeps the file open, so it stays
/// readable even if retention deletes the segment meanwhile.
#[derive(Clone)]
pub struct LogSlice {
    file: Option<(Arc<dyn StorageFile>, Arc<Path>)>,
    position: u64,
    len: u64,
    first_offset: u64,
}

impl std::fmt::Debug for LogSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSlice")
            .field("path", &self.path())
            .field("position", &self.position)
            .field("len", &self.len)
            .field("first_offset", &self.first_offset)
            .finish()
    }
}

impl Default for LogSlice {
    /// An empty slice.
    fn default() -> Self {
        Self::empty()
    }
}

impl LogSlice {
    pub(crate) fn empty() -> Self {
        Self {
            file: None,
            position: 0,
            len: 0,
            first_offset: 0,
        }
    }

    pub(crate) fn new(
        file: Arc<dyn StorageFile>,
        path: Arc<Path>,
        position: u64,
        len: u64,
        first_offset: u64,
    ) -> Self {
        Self {
            file: Some((file, path)),
            position,
            len,
            first_offset,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Byte position of the slice in its file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Base offset of the first batch (meaningless when empty).
    pub fn first_offset(&self) -> u64 {
        self.first_offset
    }

    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(_, p)| &**p)
    }

    /// The file descriptor for `sendfile`; `None` for an empty slice or a
    /// file that is not a real one.
    pub fn as_fd(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().and_then(|(f, _)| f.as_fd())
    }

    /// Reads the bytes of the slice.
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        let Some((file, _)) = &self.file else {
            return Ok(Bytes::new());
        };
        let mut buf = vec![0u8; self.len as usize];
        file.read_exact_at(&mut buf, self.position)?;
        Ok(Bytes::from(buf))
    }
}
