//! The metadata store of data directories written before the controller
//! quorum, read once when such a directory is imported.
//!
//! The directory holds `metadata.snapshot` (the image as of some applied
//! index) and `metadata.log` (the commands after the log's base index).
//! Reading loads the snapshot and replays the log records that come after
//! it; nothing is written. Formats are in `DESIGN.md`.

use std::fs;
use std::io;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::{info, warn};

use crate::error::MetaError;
use crate::image::MetadataImage;
use crate::log_file;

/// The command log's file name.
pub const LOG_FILE_NAME: &str = "metadata.log";
/// The snapshot's file name.
pub const SNAPSHOT_FILE_NAME: &str = "metadata.snapshot";
const SNAPSHOT_FORMAT: u32 = 1;

/// The snapshot file; `image` borrows its exact bytes, which the checksum
/// covers.
#[derive(Deserialize)]
struct SnapshotFile<'a> {
    format: u32,
    crc32c: u32,
    #[serde(borrow)]
    image: &'a RawValue,
}

/// The image stored in `dir`, or `None` when it holds neither file.
///
/// Loads the snapshot, then replays the log records after it. A torn
/// final record (a write a crash interrupted, never acknowledged) is
/// ignored; any other damage is a [`MetaError::Corrupt`] naming the file
/// and byte position.
pub fn read(dir: &Path) -> Result<Option<MetadataImage>, MetaError> {
    let log_path = dir.join(LOG_FILE_NAME);
    let snapshot = read_snapshot(&dir.join(SNAPSHOT_FILE_NAME))?;
    let image = match (snapshot, read_if_exists(&log_path)?) {
        (None, None) => return Ok(None),
        (Some(image), None) => {
            warn!(dir = %dir.display(), "legacy metadata snapshot without a command log; reading the snapshot alone");
            image
        }
        (snapshot, Some(bytes)) => replay(&log_path, &bytes, snapshot.unwrap_or_default())?,
    };
    info!(
        dir = %dir.display(),
        applied_index = image.applied_index(),
        topics = image.topic_count(),
        "legacy metadata store read"
    );
    Ok(Some(image))
}

fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, MetaError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MetaError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Replays the log in `bytes` onto `image`, the snapshot's (or the empty)
/// image, stopping before a torn final record.
fn replay(path: &Path, bytes: &[u8], mut image: MetadataImage) -> Result<MetadataImage, MetaError> {
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let snapshot_index = image.applied_index();
    let base = log_file::decode_header(bytes).map_err(corrupt)?;
    if base > snapshot_index {
        return Err(corrupt(format!(
            "the log starts after command {base} but the snapshot only holds {snapshot_index} commands: commands {}..={base} are missing",
            snapshot_index + 1
        )));
    }
    let scan = log_file::scan(bytes, path)?;
    for (k, (pos, cmd)) in scan.records.iter().enumerate() {
        let index = base + k as u64 + 1;
        if index <= snapshot_index {
            continue;
        }
        image.apply(cmd).map_err(|e| {
            corrupt(format!(
                "record {} at byte {pos} (command {index}) is rejected on replay: {e}",
                k + 1
            ))
        })?;
    }
    let end = base + scan.records.len() as u64;
    if end < snapshot_index {
        return Err(corrupt(format!(
            "the log ends at command {end} but the snapshot holds {snapshot_index} commands"
        )));
    }
    if let Some(what) = &scan.torn {
        warn!(
            path = %path.display(),
            valid_len = scan.valid_len,
            "ignoring a torn final record of the legacy metadata log: {what}"
        );
    }
    Ok(image)
}

fn read_snapshot(path: &Path) -> Result<Option<MetadataImage>, MetaError> {
    let Some(bytes) = read_if_exists(path)? else {
        return Ok(None);
    };
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| corrupt(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let file: SnapshotFile<'_> = serde_json::from_str(text).map_err(|e| {
        corrupt(format!(
            "unreadable JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ))
    })?;
    if file.format != SNAPSHOT_FORMAT {
        return Err(corrupt(format!(
            "unsupported snapshot format {} (this build reads {SNAPSHOT_FORMAT})",
            file.format
        )));
    }
    let image_json = file.image.get();
    let offset = image_json.as_ptr() as usize - text.as_ptr() as usize;
    let computed = crc32c::crc32c(image_json.as_bytes());
    if computed != file.crc32c {
        return Err(corrupt(format!(
            "checksum mismatch over the image at bytes {offset}..{} (stored {:#010x}, computed {computed:#010x})",
            offset + image_json.len(),
            file.crc32c
        )));
    }
    let image: MetadataImage = serde_json::from_str(image_json).map_err(|e| {
        corrupt(format!(
            "the image at byte {offset} does not decode (line {} column {}): {e}",
            e.line(),
            e.column()
        ))
    })?;
    Ok(Some(image))
}

#[cfg(test)]
mod tests;
