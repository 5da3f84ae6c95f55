//! The narrow file-system interface every byte of the log goes through.
//!
//! [`FsStorage`] is the real thing; [`crate::sim::SimStorage`] keeps what was
//! written apart from what was synced, so tests can crash the log at any point
//! and inject I/O errors.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A directory tree of files.
pub trait Storage: Send + Sync + 'static {
    /// Creates the directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the files directly inside `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens an existing file for reading and appending.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Creates a file, truncating any existing one.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    fn exists(&self, path: &Path) -> bool;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals inside `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// One open file. Writes only ever append; `truncate` shortens.
pub trait StorageFile: Send + Sync + 'static {
    /// Reads up to `buf.len()` bytes at `position`; fewer only at the end.
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize>;
    /// Appends all of `bufs` at the end of the file. On error the file may
    /// hold a prefix of them; the caller truncates it back.
    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()>;
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn truncate(&self, len: u64) -> io::Result<()>;
    /// Makes everything appended so far durable (fdatasync).
    fn sync(&self) -> io::Result<()>;
    /// The descriptor, for `sendfile`; `None` when the file is not a real one.
    fn as_fd(&self) -> Option<BorrowedFd<'_>>;

    /// Reads exactly `buf.len()` bytes at `position`.
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], position + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read past the end of the file at {}",
                        position + done as u64
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsStorage;

impl Storage for FsStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_owned());
                }
            }
        }
        Ok(names)
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(FsFile::new(file, path)?))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Arc::new(FsFile::new(file, path)?))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// A real file. The length is tracked here: appends come from one writer at a
/// time (the log holds its lock), reads from anywhere.
struct FsFile {
    file: File,
    path: PathBuf,
    len: std::sync::atomic::AtomicU64,
}

impl FsFile {
    fn new(file: File, path: &Path) -> io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self {
            file,
            path: path.to_owned(),
            len: len.into(),
        })
    }

    fn with_path(&self, err: io::Error) -> io::Error {
        io::Error::new(err.kind(), format!("{}: {err}", self.path.display()))
    }
}

impl StorageFile for FsFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.file
            .read_at(buf, position)
            .map_err(|e| self.with_path(e))
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        let mut slices: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).copied().collect();
        let mut slices = &mut slices[..];
        let mut file = &self.file;
        // The descriptor's position is only moved by this writer; keep it at
        // the tracked end in case an earlier append failed half way.
        let start = self.len.load(Ordering::Acquire);
        io::Seek::seek(&mut file, io::SeekFrom::Start(start)).map_err(|e| self.with_path(e))?;
        let mut written = 0u64;
        while !slices.is_empty() {
            match file.write_vectored(slices) {
                Ok(0) => {
                    return Err(self.with_path(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "write returned zero",
                    )))
                }
                Ok(n) => {
                    written += n as u64;
                    IoSlice::advance_slices(&mut slices, n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.len.store(start + written, Ordering::Release);
                    return Err(self.with_path(e));
                }
            }
        }
        self.len.store(start + written, Ordering::Release);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len).map_err(|e| self.with_path(e))?;
        self.len.store(len, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data().map_err(|e| self.with_path(e))
    }

    fn as_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }
}
