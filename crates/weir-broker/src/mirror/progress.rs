//! How far the mirror partitions a broker leads got: the source's log end
//! at the last fetch, the mirrored log end, the lag in records and in
//! seconds, and the state; what `GET /v1/mirrors/{name}` shows and the
//! `weir_mirror_lag_*` metrics publish.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use serde::Serialize;

/// One mirror partition, as its leader last saw it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionProgress {
    pub topic: String,
    pub partition: i32,
    /// The source's high watermark at the last fetch; `None` before one.
    pub source_end_offset: Option<u64>,
    /// The log end here: every offset below it is mirrored.
    pub mirrored_offset: u64,
    pub lag_records: u64,
    /// How long the partition has been behind its source (0: caught up).
    pub lag_seconds: f64,
    /// `mirroring`, `paused`, or what keeps it from mirroring.
    pub state: String,
}

#[derive(Default)]
struct Entry {
    progress: Option<PartitionProgress>,
    /// When the partition was last seen behind after being caught up.
    behind_since_ms: Option<i64>,
}

/// A mirror's partitions this broker leads, by (topic, partition).
type Partitions = BTreeMap<(String, i32), Entry>;

/// Per mirror, the partitions this broker leads.
#[derive(Default)]
pub struct MirrorProgress {
    mirrors: Mutex<BTreeMap<String, Partitions>>,
}

impl MirrorProgress {
    /// Records what a fetch (or its failure) showed of `topic`-`partition`
    /// at `now_ms`; returns the partition's progress.
    pub fn record(
        &self,
        mirror: &str,
        (topic, partition): (&str, i32),
        source_end_offset: Option<u64>,
        mirrored_offset: u64,
        state: &str,
        now_ms: i64,
    ) -> PartitionProgress {
        let mut mirrors = self.mirrors.lock();
        let entry = mirrors
            .entry(mirror.to_owned())
            .or_default()
            .entry((topic.to_owned(), partition))
            .or_default();
        let source_end =
            source_end_offset.or(entry.progress.as_ref().and_then(|p| p.source_end_offset));
        let lag_records = source_end.map_or(0, |end| end.saturating_sub(mirrored_offset));
        if lag_records == 0 {
            entry.behind_since_ms = None;
        } else if entry.behind_since_ms.is_none() {
            entry.behind_since_ms = Some(now_ms);
        }
        let lag_seconds = entry.behind_since_ms.map_or(0.0, |since| {
            now_ms.saturating_sub(since).max(0) as f64 / 1000.0
        });
        let progress = PartitionProgress {
            topic: topic.to_owned(),
            partition,
            source_end_offset: source_end,
            mirrored_offset,
            lag_records,
            lag_seconds,
            state: state.to_owned(),
        };
        entry.progress = Some(progress.clone());
        progress
    }

    /// Keeps, of `mirror`'s partitions, those `led` says this broker still
    /// leads; returns the ones dropped.
    pub fn retain(&self, mirror: &str, led: impl Fn(&str, i32) -> bool) -> Vec<(String, i32)> {
        let mut mirrors = self.mirrors.lock();
        let Some(partitions) = mirrors.get_mut(mirror) else {
            return Vec::new();
        };
        let dropped: Vec<(String, i32)> = partitions
            .keys()
            .filter(|(topic, partition)| !led(topic, *partition))
            .cloned()
            .collect();
        for key in &dropped {
            partitions.remove(key);
        }
        dropped
    }

    /// The partitions of `mirror` this broker leads, by topic and index.
    pub fn of(&self, mirror: &str) -> Vec<PartitionProgress> {
        self.mirrors
            .lock()
            .get(mirror)
            .map_or_else(Vec::new, |partitions| {
                partitions
                    .values()
                    .filter_map(|entry| entry.progress.clone())
                    .collect()
            })
    }

    /// Forgets a mirror that is gone; returns its partitions.
    pub fn forget(&self, mirror: &str) -> Vec<(String, i32)> {
        self.mirrors
            .lock()
            .remove(mirror)
            .map(|partitions| partitions.into_keys().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_in_seconds_counts_from_when_the_partition_fell_behind() {
        let progress = MirrorProgress::default();
        let at =
            |end, mirrored, now| progress.record("m", ("t", 0), end, mirrored, "mirroring", now);
        assert_eq!(at(Some(10), 10, 1_000).lag_seconds, 0.0);
        let behind = at(Some(15), 10, 2_000);
        assert_eq!((behind.lag_records, behind.lag_seconds), (5, 0.0));
        assert_eq!(at(Some(20), 12, 4_500).lag_seconds, 2.5);
        // A failed fetch keeps the last source end it saw.
        assert_eq!(at(None, 12, 5_000).source_end_offset, Some(20));
        assert_eq!(at(Some(20), 20, 6_000).lag_seconds, 0.0);
        assert_eq!(progress.of("m").len(), 1);
        assert_eq!(
            progress.retain("m", |_, _| false),
            vec![("t".to_owned(), 0)]
        );
        assert!(progress.of("m").is_empty());
    }
}
