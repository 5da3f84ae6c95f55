//! The high watermark of every partition hosted here, in one file of the
//! data directory (Kafka's `replication-offset-checkpoint`, in its format:
//! a version line `0`, a count line, then `topic partition offset` lines).
//! One file rewritten every few seconds, not one per partition: with ten
//! thousand partitions, a file each costs the file system ten thousand
//! creations per checkpoint.
//!
//! The checkpoint is a hint: a partition opens at it, clamped to its log,
//! and learns the true high watermark from its leader.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use weir_log::storage::Storage;
use weir_log::{checkpoint, LogError};

pub const FILE: &str = "replication-offset-checkpoint";

/// The checkpoint file of a data directory, and what was last written to
/// it (so that an unchanged state is not written again).
pub struct HighWatermarks {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    written: Mutex<Vec<(String, i32, u64)>>,
    loaded: HashMap<(String, i32), u64>,
}

impl HighWatermarks {
    /// Reads the checkpoint of `data_dir`; a missing or unreadable file
    /// holds nothing (partitions then start from their own older files,
    /// or from their log start).
    pub fn load(storage: Arc<dyn Storage>, data_dir: &Path) -> Self {
        let path = data_dir.join(FILE);
        let loaded = match checkpoint::read(&*storage, &path) {
            Ok(Some(text)) => parse(&text).unwrap_or_else(|reason| {
                tracing::warn!(path = %path.display(), reason, "high watermark checkpoint unreadable; ignored");
                HashMap::new()
            }),
            Ok(None) => HashMap::new(),
            Err(error) => {
                tracing::warn!(%error, "high watermark checkpoint unreadable; ignored");
                HashMap::new()
            }
        };
        Self {
            storage,
            path,
            written: Mutex::new(Vec::new()),
            loaded,
        }
    }

    /// The checkpointed high watermark of a partition, as loaded at start.
    pub fn loaded(&self, topic: &str, partition: i32) -> Option<u64> {
        self.loaded.get(&(topic.to_owned(), partition)).copied()
    }

    /// Writes `entries` (every hosted partition) unless they are what was
    /// written last: to a temporary file, synced, renamed over the old one.
    pub fn write(&self, mut entries: Vec<(String, i32, u64)>) -> Result<(), LogError> {
        entries.sort_unstable();
        let mut written = self.written.lock();
        if *written == entries {
            return Ok(());
        }
        let mut text = format!("0\n{}\n", entries.len());
        for (topic, partition, offset) in &entries {
            text.push_str(&format!("{topic} {partition} {offset}\n"));
        }
        checkpoint::write(&*self.storage, &self.path, &text)?;
        *written = entries;
        Ok(())
    }
}

fn parse(text: &str) -> Result<HashMap<(String, i32), u64>, String> {
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err("unknown version".into());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no entry count")?;
    let mut entries = HashMap::with_capacity(count);
    for line in lines {
        let mut fields = line.split(' ');
        let (Some(topic), Some(partition), Some(offset), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("malformed line {line:?}"));
        };
        let partition = partition
            .parse()
            .map_err(|_| format!("bad partition in {line:?}"))?;
        let offset = offset
            .parse()
            .map_err(|_| format!("bad offset in {line:?}"))?;
        entries.insert((topic.to_owned(), partition), offset);
    }
    if entries.len() != count {
        return Err(format!(
            "{} entries, the header says {count}",
            entries.len()
        ));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(dir: &Path) -> HighWatermarks {
        HighWatermarks::load(Arc::new(weir_log::storage::FsStorage::default()), dir)
    }

    #[test]
    fn written_high_watermarks_load_again_in_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoint = load(dir.path());
        assert_eq!(checkpoint.loaded("t", 0), None);
        checkpoint
            .write(vec![
                ("t".into(), 1, 7),
                ("t".into(), 0, 42),
                ("u".into(), 0, 0),
            ])
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text, "0\n3\nt 0 42\nt 1 7\nu 0 0\n");
        let again = load(dir.path());
        assert_eq!(again.loaded("t", 0), Some(42));
        assert_eq!(again.loaded("t", 1), Some(7));
        assert_eq!(again.loaded("v", 0), None);
    }

    #[test]
    fn a_damaged_checkpoint_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        for damaged in [
            "",
            "1\n0\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt zero 1\n",
            "0\n1\nt 0 1 x\n",
        ] {
            std::fs::write(dir.path().join(FILE), damaged).unwrap();
            assert_eq!(load(dir.path()).loaded("t", 0), None, "{damaged:?}");
        }
    }
}
