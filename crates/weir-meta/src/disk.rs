//! File operations the controller's files share: whole-file writes made
//! durable, directory syncs that make renames durable, and removal of
//! leftover temporary files.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::error::{IoContext, MetaError};

/// Writes `bytes` as the whole content of `path`, then fsyncs it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), MetaError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .context(path)?;
    file.write_all(bytes).context(path)?;
    file.sync_all().context(path)
}

pub(crate) fn remove_if_exists(path: &Path) -> Result<(), MetaError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(MetaError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Makes renames and creations in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), MetaError> {
    #[cfg(unix)]
    {
        fs::File::open(dir).and_then(|d| d.sync_all()).context(dir)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}
