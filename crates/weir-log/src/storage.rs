//! The narrow file-system interface every byte of the log goes through.
//!
//! [`FsStorage`] is the real thing; [`crate::sim::SimStorage`] keeps what was
//! written apart from what was synced, so tests can crash the log at any point
//! and inject I/O errors.

use std::fs::{self, File};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::fd_cache::{CachedFile, FdCache};

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
    /// Renames the directory `from`, and everything in it, to `to`. Files
    /// opened under `from` stay readable and writable, under their new
    /// names.
    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes `dir` and everything in it.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals inside `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// [`sync_dir`](Self::sync_dir) of every one of `dirs`, which a
    /// storage may do in fewer syncs than one per directory.
    fn sync_dirs(&self, dirs: &[PathBuf]) -> io::Result<()> {
        dirs.iter().try_for_each(|dir| self.sync_dir(dir))
    }
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
    /// The open file, for `sendfile`: it stays open for as long as the
    /// caller holds it, whatever the storage does with its descriptors
    /// meanwhile. `None` when the file is not a real one.
    fn descriptor(&self) -> io::Result<Option<Arc<File>>>;
    /// [`descriptor`](Self::descriptor) where that takes no system call:
    /// `None` when the file would have to be opened first.
    fn descriptor_if_open(&self) -> Option<io::Result<Option<Arc<File>>>> {
        Some(self.descriptor())
    }

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

/// The operating system's file system. Files open their descriptor on
/// demand, and at most `open_file_limit` stay open (see [`FdCache`]).
#[derive(Clone)]
pub struct FsStorage {
    cache: Arc<FdCache>,
}

impl Default for FsStorage {
    /// No limit on open descriptors: every file keeps its own.
    fn default() -> Self {
        Self {
            cache: FdCache::new(usize::MAX),
        }
    }
}

impl std::fmt::Debug for FsStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsStorage")
            .field("open_files", &self.cache.open_count())
            .finish()
    }
}

impl FsStorage {
    /// Keeps at most `limit` descriptors open, closing the least recently
    /// used ones (they reopen on their next use).
    pub fn with_open_file_limit(limit: usize) -> Self {
        Self {
            cache: FdCache::new(limit),
        }
    }

    /// Descriptors open now (not counting those callers hold past an
    /// eviction).
    pub fn open_files(&self) -> usize {
        self.cache.open_count()
    }
}

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
        Ok(Arc::new(FsFile(self.cache.open(path, false)?)))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(FsFile(self.cache.open(path, true)?)))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)?;
        self.cache.renamed(from, to);
        Ok(())
    }

    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)?;
        self.cache.renamed_dir(from, to);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.cache.removing(path);
        fs::remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        // Descriptors of the files go first: an open one would keep a
        // deleted file's space.
        for name in self.list(dir)? {
            self.cache.removing(&dir.join(name));
        }
        fs::remove_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    /// One `syncfs` per file system the directories are on, for more than
    /// a few of them: a directory fsync commits the file system's journal
    /// anyway, and thousands of them in a row cost thousands of commits.
    fn sync_dirs(&self, dirs: &[PathBuf]) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        if dirs.len() <= 2 {
            return dirs.iter().try_for_each(|dir| self.sync_dir(dir));
        }
        let mut synced = std::collections::BTreeSet::new();
        for dir in dirs {
            let file = File::open(dir)?;
            if synced.insert(file.metadata()?.dev()) {
                nix::unistd::syncfs(&file).map_err(io::Error::from)?;
            }
        }
        Ok(())
    }
}

/// A real file, its descriptor from the storage's cache.
struct FsFile(Arc<CachedFile>);

impl FsFile {
    fn with_path(&self, err: io::Error) -> io::Error {
        io::Error::new(err.kind(), format!("{}: {err}", self.0.path().display()))
    }

    fn file(&self) -> io::Result<Arc<File>> {
        self.0.descriptor().map_err(|e| self.with_path(e))
    }
}

impl StorageFile for FsFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.file()?
            .read_at(buf, position)
            .map_err(|e| self.with_path(e))
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let mut slices: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).copied().collect();
        let mut slices = &mut slices[..];
        let file = self.file()?;
        let mut file = &*file;
        let len = &self.0.len;
        // The descriptor's position is only moved by this writer, but the
        // descriptor may be new, or an earlier append failed half way:
        // start at the tracked end.
        let start = len.load(Ordering::Acquire);
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
                    len.store(start + written, Ordering::Release);
                    return Err(self.with_path(e));
                }
            }
        }
        len.store(start + written, Ordering::Release);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.0.len.load(Ordering::Acquire)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file()?.set_len(len).map_err(|e| self.with_path(e))?;
        self.0.len.store(len, Ordering::Release);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.file()?.sync_data().map_err(|e| self.with_path(e))
    }

    fn descriptor(&self) -> io::Result<Option<Arc<File>>> {
        self.file().map(Some)
    }

    fn descriptor_if_open(&self) -> Option<io::Result<Option<Arc<File>>>> {
        self.0.descriptor_if_open().map(|file| Ok(Some(file)))
    }
}
