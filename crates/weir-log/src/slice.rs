//! The result of a read: a region of one segment file.

use std::fs::File;
use std::io;
use std::os::unix::io::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::storage::StorageFile;

/// Whole batches, as a byte range of a segment's `.log` file. A server can
/// hand [`LogSlice::as_fd`] and the range to `sendfile`, or take the bytes
/// with [`LogSlice::to_bytes`]. The slice keeps the file open, so it stays
/// readable even if retention deletes the segment, or the storage closes
/// the segment's descriptor, meanwhile.
#[derive(Clone)]
pub struct LogSlice {
    file: Option<(Arc<dyn StorageFile>, Arc<Path>)>,
    /// The real file's open descriptor, held for `sendfile`.
    descriptor: Option<Arc<File>>,
    /// Bytes read from elsewhere (a remote tier), instead of a file.
    memory: Option<Bytes>,
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
            descriptor: None,
            memory: None,
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
    ) -> io::Result<Self> {
        Ok(Self {
            descriptor: file.descriptor()?,
            file: Some((file, path)),
            memory: None,
            position,
            len,
            first_offset,
        })
    }

    /// [`new`](Self::new) where that takes no system call; `None` when the
    /// file would have to be opened first.
    pub(crate) fn new_if_open(
        file: Arc<dyn StorageFile>,
        path: Arc<Path>,
        position: u64,
        len: u64,
        first_offset: u64,
    ) -> Option<io::Result<Self>> {
        let descriptor = match file.descriptor_if_open()? {
            Ok(descriptor) => descriptor,
            Err(error) => return Some(Err(error)),
        };
        Some(Ok(Self {
            descriptor,
            file: Some((file, path)),
            memory: None,
            position,
            len,
            first_offset,
        }))
    }

    /// Whole batches held in memory, starting with the batch whose base
    /// offset is `first_offset`: a read from the remote tier.
    pub fn from_bytes(bytes: Bytes, first_offset: u64) -> Self {
        Self {
            len: bytes.len() as u64,
            memory: Some(bytes),
            first_offset,
            ..Self::empty()
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
        self.descriptor.as_ref().map(|file| file.as_fd())
    }

    /// Reads the bytes of the slice.
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        if let Some(bytes) = &self.memory {
            return Ok(bytes.clone());
        }
        let mut buf = vec![0u8; self.len as usize];
        match (&self.descriptor, &self.file) {
            (Some(descriptor), _) => {
                use std::os::unix::fs::FileExt;
                descriptor.read_exact_at(&mut buf, self.position)?;
            }
            (None, Some((file, _))) => file.read_exact_at(&mut buf, self.position)?,
            (None, None) => return Ok(Bytes::new()),
        }
        Ok(Bytes::from(buf))
    }
}
