//! Small text files replaced atomically: write a temporary file, sync it,
//! rename it over the old one, sync the directory.

use std::io::IoSlice;
use std::path::Path;

use crate::error::{IoContext, LogError};
use crate::storage::Storage;

/// The file's text, or `None` when it does not exist.
pub fn read(storage: &dyn Storage, path: &Path) -> Result<Option<String>, LogError> {
    if !storage.exists(path) {
        return Ok(None);
    }
    let file = storage.open(path).context(path)?;
    let mut buf = vec![0u8; file.len() as usize];
    file.read_exact_at(&mut buf, 0).context(path)?;
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| LogError::Corrupt {
            path: path.to_owned(),
            position: 0,
            reason: "not UTF-8 text".to_owned(),
        })
}

/// Replaces the file at `path` with `text`, durably: a crash leaves the
/// old text or the new, never a mix.
pub fn write(storage: &dyn Storage, path: &Path, text: &str) -> Result<(), LogError> {
    let tmp = path.with_extension("tmp");
    let file = storage.create(&tmp).context(&tmp)?;
    file.append(&[IoSlice::new(text.as_bytes())])
        .context(&tmp)?;
    file.sync().context(&tmp)?;
    storage.rename(&tmp, path).context(path)?;
    if let Some(dir) = path.parent() {
        storage.sync_dir(dir).context(dir)?;
    }
    Ok(())
}

/// Reads a file holding one decimal number, for hints whose loss is safe: a
/// missing or unreadable one gives `None`.
pub(crate) fn read_u64(storage: &dyn Storage, path: &Path) -> Option<u64> {
    match read(storage, path) {
        Ok(Some(text)) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Reads a file holding one decimal number that must not be lost: missing
/// gives `None`, unreadable is an error.
pub(crate) fn read_u64_strict(storage: &dyn Storage, path: &Path) -> Result<Option<u64>, LogError> {
    let Some(text) = read(storage, path)? else {
        return Ok(None);
    };
    text.trim()
        .parse()
        .map(Some)
        .map_err(|_| LogError::Corrupt {
            path: path.to_owned(),
            position: 0,
            reason: format!("expected an offset, found {:?}", text.trim()),
        })
}
