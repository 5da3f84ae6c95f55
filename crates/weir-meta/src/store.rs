//! Local persistence of the metadata image: a command log plus snapshots.
//!
//! The directory holds `metadata.snapshot` (the image as of some applied
//! index) and `metadata.log` (the commands after the log's base index).
//! Opening loads the snapshot and replays the log records that come after
//! it. Formats and crash reasoning are in `DESIGN.md`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::{info, warn};

use crate::command::{Applied, Command};
use crate::error::{IoContext, MetaError};
use crate::image::MetadataImage;
use crate::log_file::{self, HEADER_LEN, MAX_PAYLOAD_LEN};

/// The command log's file name.
pub const LOG_FILE_NAME: &str = "metadata.log";
/// The snapshot's file name.
pub const SNAPSHOT_FILE_NAME: &str = "metadata.snapshot";
const LOG_TMP_NAME: &str = "metadata.log.tmp";
const SNAPSHOT_TMP_NAME: &str = "metadata.snapshot.tmp";
const SNAPSHOT_FORMAT: u32 = 1;

/// Settings of a [`MetaStore`].
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Take a snapshot (and start a fresh log) once this many commands were
    /// logged since the last one; 0 never snapshots automatically.
    pub snapshot_every: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            snapshot_every: 1000,
        }
    }
}

/// The metadata image together with its files.
///
/// Methods take `&mut self`; share it behind a `Mutex`. One store per
/// directory: two processes opening the same directory corrupt it.
#[derive(Debug)]
pub struct MetaStore {
    dir: PathBuf,
    log_path: PathBuf,
    snapshot_path: PathBuf,
    /// The open command log, positioned at its end.
    log: File,
    /// The number of commands before the first record of `log`.
    log_base: u64,
    /// The applied index of the snapshot on disk (0: none).
    snapshot_index: u64,
    image: MetadataImage,
    options: StoreOptions,
    /// Set when a write or fsync of the log failed.
    offline: Option<String>,
}

/// The snapshot file as written.
#[derive(Serialize)]
struct SnapshotOut<'a> {
    format: u32,
    /// crc32c of the exact bytes of `image`.
    crc32c: u32,
    image: &'a RawValue,
}

/// The snapshot file as read; `image` borrows its exact bytes.
#[derive(Deserialize)]
struct SnapshotIn<'a> {
    format: u32,
    crc32c: u32,
    #[serde(borrow)]
    image: &'a RawValue,
}

impl MetaStore {
    /// Opens (creating if needed) the store in `dir` with default options.
    pub fn open(dir: &Path) -> Result<MetaStore, MetaError> {
        Self::open_with(dir, StoreOptions::default())
    }

    /// Opens (creating if needed) the store in `dir`: loads the snapshot,
    /// replays the log after it, and drops a torn final record (a write
    /// that a crash interrupted, never acknowledged). Any other damage is a
    /// [`MetaError::Corrupt`] naming the file and byte position.
    pub fn open_with(dir: &Path, options: StoreOptions) -> Result<MetaStore, MetaError> {
        fs::create_dir_all(dir).context(dir)?;
        for leftover in [LOG_TMP_NAME, SNAPSHOT_TMP_NAME] {
            remove_if_exists(&dir.join(leftover))?;
        }
        let log_path = dir.join(LOG_FILE_NAME);
        let snapshot_path = dir.join(SNAPSHOT_FILE_NAME);

        let snapshot = read_snapshot(&snapshot_path)?;
        let has_snapshot = snapshot.is_some();
        let mut image = snapshot.unwrap_or_default();
        let snapshot_index = image.applied_index();

        let (log, log_base) = match fs::read(&log_path) {
            Ok(bytes) => {
                let base = replay(&log_path, &bytes, &mut image, snapshot_index)?;
                (
                    OpenOptions::new()
                        .append(true)
                        .open(&log_path)
                        .context(&log_path)?,
                    base,
                )
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if has_snapshot {
                    warn!(dir = %dir.display(), "metadata snapshot without a command log; starting a fresh log");
                }
                let log = create_log(dir, snapshot_index)?;
                sync_dir(dir)?;
                (log, snapshot_index)
            }
            Err(source) => {
                return Err(MetaError::Io {
                    path: log_path,
                    source,
                })
            }
        };
        info!(
            dir = %dir.display(),
            applied_index = image.applied_index(),
            snapshot_index,
            topics = image.topic_count(),
            "metadata store opened"
        );
        Ok(MetaStore {
            dir: dir.to_owned(),
            log_path,
            snapshot_path,
            log,
            log_base,
            snapshot_index,
            image,
            options,
            offline: None,
        })
    }

    /// Validates `cmd` against the image; if it applies, appends it to the
    /// log and fsyncs before applying it and returning. A command that
    /// fails validation writes nothing.
    ///
    /// An [`MetaError::Io`] means the outcome is unknown (the record may or
    /// may not survive a crash); the store then goes offline until reopened.
    pub fn submit(&mut self, cmd: Command) -> Result<Applied, MetaError> {
        self.check_online()?;
        self.image.validate(&cmd)?;
        let payload = serde_json::to_vec(&cmd).map_err(|e| {
            MetaError::InvalidRequest(format!("The command cannot be encoded: {e}"))
        })?;
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(MetaError::InvalidRequest(format!(
                "The command takes {} bytes, more than the {MAX_PAYLOAD_LEN} a metadata record holds.",
                payload.len()
            )));
        }
        let record = log_file::encode_record(&payload);
        if let Err(source) = self
            .log
            .write_all(&record)
            .and_then(|()| self.log.sync_data())
        {
            return Err(self.go_offline(&self.log_path.clone(), source));
        }
        let applied = self.image.execute(&cmd);
        let every = self.options.snapshot_every;
        if every > 0 && self.image.applied_index() - self.snapshot_index >= every {
            if let Err(e) = self.snapshot() {
                warn!(error = %e, "automatic metadata snapshot failed; the log keeps growing");
            }
        }
        Ok(applied)
    }

    /// The current image.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The applied index of the latest snapshot on disk (0: none yet).
    pub fn snapshot_index(&self) -> u64 {
        self.snapshot_index
    }

    /// The number of commands before the first record of the current log.
    pub fn log_base(&self) -> u64 {
        self.log_base
    }

    /// Writes the image to `metadata.snapshot` atomically (temporary file,
    /// fsync, rename, directory fsync), then starts a fresh log. A crash at
    /// any point leaves a snapshot and a log that together hold every
    /// acknowledged command.
    pub fn snapshot(&mut self) -> Result<(), MetaError> {
        self.check_online()?;
        let index = self.image.applied_index();
        let bytes = encode_snapshot(&self.image).map_err(|e| MetaError::Corrupt {
            path: self.snapshot_path.clone(),
            reason: format!("the image cannot be encoded: {e}"),
        })?;
        let tmp = self.dir.join(SNAPSHOT_TMP_NAME);
        write_synced(&tmp, &bytes)?;
        fs::rename(&tmp, &self.snapshot_path).context(&self.snapshot_path)?;
        sync_dir(&self.dir)?;
        self.snapshot_index = index;

        // The old log may still be in place after a crash from here on:
        // its base index lets `open` skip what the snapshot already holds.
        let fresh = create_log(&self.dir, index)?;
        self.log = fresh;
        self.log_base = index;
        if let Err(source) = sync_dir_io(&self.dir) {
            return Err(self.go_offline(&self.dir.clone(), source));
        }
        info!(dir = %self.dir.display(), applied_index = index, "metadata snapshot written");
        Ok(())
    }

    fn check_online(&self) -> Result<(), MetaError> {
        match &self.offline {
            Some(reason) => Err(MetaError::Offline {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn go_offline(&mut self, path: &Path, source: io::Error) -> MetaError {
        warn!(path = %path.display(), error = %source, "metadata store write failed; offline until reopened");
        self.offline = Some(format!("{}: {source}", path.display()));
        MetaError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Replays the log in `bytes` onto `image` (which holds the snapshot at
/// `snapshot_index`), truncating a torn tail. Returns the log's base index.
fn replay(
    path: &Path,
    bytes: &[u8],
    image: &mut MetadataImage,
    snapshot_index: u64,
) -> Result<u64, MetaError> {
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
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
            "dropping a torn final record of the metadata log: {what}"
        );
        let file = OpenOptions::new().write(true).open(path).context(path)?;
        file.set_len(scan.valid_len).context(path)?;
        file.sync_all().context(path)?;
    }
    debug_assert!(scan.valid_len >= HEADER_LEN as u64);
    Ok(base)
}

/// Creates an empty log with this base index as `metadata.log`, through a
/// temporary file, and returns it open for appending. The caller syncs the
/// directory.
fn create_log(dir: &Path, base: u64) -> Result<File, MetaError> {
    let tmp = dir.join(LOG_TMP_NAME);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .context(&tmp)?;
    file.write_all(&log_file::encode_header(base))
        .context(&tmp)?;
    file.sync_all().context(&tmp)?;
    let path = dir.join(LOG_FILE_NAME);
    fs::rename(&tmp, &path).context(&path)?;
    Ok(file)
}

fn encode_snapshot(image: &MetadataImage) -> serde_json::Result<Vec<u8>> {
    let raw = RawValue::from_string(serde_json::to_string(image)?)?;
    serde_json::to_vec(&SnapshotOut {
        format: SNAPSHOT_FORMAT,
        crc32c: crc32c::crc32c(raw.get().as_bytes()),
        image: &raw,
    })
}

fn read_snapshot(path: &Path) -> Result<Option<MetadataImage>, MetaError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetaError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| corrupt(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let file: SnapshotIn<'_> = serde_json::from_str(text).map_err(|e| {
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

pub(crate) fn sync_dir(dir: &Path) -> Result<(), MetaError> {
    sync_dir_io(dir).context(dir)
}

/// Makes renames and creations in `dir` durable.
fn sync_dir_io(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}
