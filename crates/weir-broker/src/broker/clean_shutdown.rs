//! The clean-shutdown marker: proof, at the next start, that the previous
//! process closed and synced every log before it exited (KIP-966; Kafka's
//! `CleanShutdownFileHandler` and the `previousBrokerEpoch` of its broker
//! registration).
//!
//! A broker that stops cleanly writes its incarnation to `clean-shutdown`
//! in its data directory once every partition is closed. The next process
//! reads the file and removes it before it registers, and names that
//! incarnation in its registration: the controller keeps the broker among
//! the eligible leader replicas only when it is the incarnation it last
//! registered. A process that crashed wrote no file, so its successor
//! proves nothing and leaves the ELRs, as it may have lost records it had
//! not synced. Any failure to read or remove the file counts as unclean.

use std::io::Write;
use std::path::Path;

use uuid::Uuid;

/// The marker's file name in the data directory.
pub(crate) const FILE: &str = "clean-shutdown";

/// The incarnation the previous process recorded at its clean stop, if it
/// did; the marker is gone afterwards, so a crash of this process leaves
/// none behind. `None` when there is no marker, or it cannot be read or
/// removed.
pub(crate) fn take(data_dir: &Path) -> Option<Uuid> {
    let path = data_dir.join(FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    if let Err(error) = std::fs::remove_file(&path).and_then(|()| sync_dir(data_dir)) {
        tracing::warn!(%error, path = %path.display(), "cannot remove the clean-shutdown marker; the restart counts as unclean");
        return None;
    }
    Uuid::parse_str(text.trim()).ok()
}

/// Records that `incarnation` stopped cleanly: every log is closed and
/// synced.
pub(crate) fn record(data_dir: &Path, incarnation: Uuid) -> std::io::Result<()> {
    let path = data_dir.join(FILE);
    let mut file = std::fs::File::create(&path)?;
    file.write_all(incarnation.to_string().as_bytes())?;
    file.sync_all()?;
    sync_dir(data_dir)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_read_once_and_a_missing_one_proves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(take(dir.path()), None);
        let incarnation = Uuid::from_u128(42);
        record(dir.path(), incarnation).unwrap();
        assert_eq!(take(dir.path()), Some(incarnation));
        assert_eq!(
            take(dir.path()),
            None,
            "a crash after this start proves nothing"
        );
    }
}
