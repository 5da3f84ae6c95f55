//! The exclusive lock a node holds on each directory it writes, Kafka's
//! `.lock` file (`LogManager.lockLogDirs`): two processes writing one
//! directory destroy it, so the second one must refuse to start.
//!
//! The lock is an advisory `flock` on `<dir>/.lock`, taken before anything
//! in the directory is read and held until the [`DirLock`] is dropped. The
//! kernel releases it when the process dies, so a crash never leaves a
//! stale lock behind. A second lock of the same directory fails even from
//! the same process (each acquisition opens the file anew).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// Kafka's name for the lock file.
pub const LOCK_FILE: &str = ".lock";

/// Why a directory could not be locked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirLockError {
    /// Another process (or another node in this one) holds the lock.
    #[error("Failed to acquire lock on file {LOCK_FILE} in {}. A Weir instance in another process or thread is using this directory.", .dir.display())]
    Held {
        /// The directory, absolute.
        dir: PathBuf,
    },
    /// A file, not a directory, is where the directory should be.
    #[error("{} is a file, not a directory: give a directory (or a path that does not exist yet)", .dir.display())]
    NotADirectory {
        /// The path.
        dir: PathBuf,
    },
    /// The directory or its lock file could not be created or opened.
    /// (The cause is the error's source, shown after it.)
    #[error("cannot lock {}", .dir.display())]
    Io {
        /// The directory.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// An exclusive lock on one directory, held while this value lives.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    /// Holds the lock: closing the file releases it.
    _file: File,
}

impl DirLock {
    /// Creates `dir` if needed and locks it, without waiting: a directory
    /// already locked is [`DirLockError::Held`].
    pub fn acquire(dir: &Path) -> Result<Self, DirLockError> {
        let io_error = |source| DirLockError::Io {
            dir: dir.to_owned(),
            source,
        };
        if dir.is_file() {
            return Err(DirLockError::NotADirectory {
                dir: dir.to_owned(),
            });
        }
        std::fs::create_dir_all(dir).map_err(io_error)?;
        let dir = std::path::absolute(dir).map_err(io_error)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(io_error)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { dir, _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(DirLockError::Held { dir }),
            Err(std::fs::TryLockError::Error(source)) => Err(DirLockError::Io { dir, source }),
        }
    }

    /// Locks each of `dirs` once: the same directory named twice (as
    /// `DATA_DIR` and a log directory, say) is locked once.
    pub fn acquire_all<'a>(
        dirs: impl IntoIterator<Item = &'a Path>,
    ) -> Result<Vec<Self>, DirLockError> {
        let mut locks: Vec<Self> = Vec::new();
        for dir in dirs {
            let absolute = std::path::absolute(dir).map_err(|source| DirLockError::Io {
                dir: dir.to_owned(),
                source,
            })?;
            if locks.iter().all(|lock| lock.dir != absolute) {
                locks.push(Self::acquire(&absolute)?);
            }
        }
        Ok(locks)
    }

    /// The directory locked, absolute.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_directory_cannot_be_locked_again_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        let second = DirLock::acquire(dir.path()).unwrap_err();
        assert!(matches!(second, DirLockError::Held { .. }), "{second}");
        assert!(second
            .to_string()
            .contains(&dir.path().display().to_string()));
        drop(first);
        DirLock::acquire(dir.path()).expect("released with its holder");
    }

    #[test]
    fn a_directory_named_twice_is_locked_once() {
        let dir = tempfile::tempdir().unwrap();
        let dotted = dir.path().join(".");
        let locks = DirLock::acquire_all([dir.path(), dir.path()]).unwrap();
        assert_eq!(locks.len(), 1);
        // Another spelling of a locked directory is still refused.
        assert!(DirLock::acquire(&dotted).is_err());
    }
}
