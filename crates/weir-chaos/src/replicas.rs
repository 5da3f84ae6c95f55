//! Replica divergence, checked on disk once the cluster is stopped: every
//! replica of a partition must hold the same batches (offsets and CRC, as
//! followers store the leader's batches unchanged) over the offsets they
//! all have.

use std::path::Path;

use weir_log::batch::BatchHeader;
use weir_log::{Log, LogConfig};

/// One batch: first and last offset, CRC.
type BatchId = (i64, i64, u32);

/// The batches of the log in `dir`, and its log end offset.
pub fn batches(dir: &Path) -> Result<(Vec<BatchId>, u64), String> {
    let log =
        Log::open(dir, LogConfig::default()).map_err(|e| format!("{}: {e}", dir.display()))?;
    let end = log.log_end_offset();
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < end {
        let slice = log
            .read(next, 1 << 20, u64::MAX)
            .map_err(|e| format!("{}: read at {next}: {e}", dir.display()))?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice
            .to_bytes()
            .map_err(|e| format!("{}: read at {next}: {e}", dir.display()))?;
        let mut position = 0;
        while position < bytes.len() {
            let header = BatchHeader::parse(&bytes[position..], position)
                .map_err(|e| format!("{}: batch at byte {position}: {e:?}", dir.display()))?;
            out.push((header.base_offset(), header.last_offset(), header.crc()));
            position += header.total_size();
            next = header.next_offset() as u64;
        }
    }
    let _ = log.close();
    Ok((out, end))
}

/// Compares the replicas of `partition` found under `data_dirs` (id,
/// directory); a sentence for each replica that differs from the first
/// over their common offsets.
pub fn compare(topic: &str, partition: i32, data_dirs: &[(i32, &Path)]) -> Vec<String> {
    let mut logs = Vec::new();
    let mut findings = Vec::new();
    for (id, dir) in data_dirs {
        let dir = dir.join(format!("{topic}-{partition}"));
        if !dir.exists() {
            continue;
        }
        match batches(&dir) {
            Ok((batches, end)) => logs.push((*id, batches, end)),
            Err(e) => findings.push(format!("partition {partition}, replica {id}: {e}")),
        }
    }
    let Some(common_end) = logs.iter().map(|(_, _, end)| *end).min() else {
        return findings;
    };
    let within = |batches: &[BatchId]| -> Vec<BatchId> {
        batches
            .iter()
            .copied()
            .filter(|(_, last, _)| *last < common_end as i64)
            .collect()
    };
    if let Some((first_id, first, _)) = logs.first() {
        let reference = within(first);
        for (id, batches, _) in &logs[1..] {
            let other = within(batches);
            if other == reference {
                continue;
            }
            let differing = reference.iter().zip(&other).filter(|(a, b)| a != b).count()
                + reference.len().abs_diff(other.len());
            let at = reference
                .iter()
                .zip(&other)
                .find(|(a, b)| a != b)
                .map_or_else(
                    || format!("{} batches against {}", reference.len(), other.len()),
                    |(a, b)| {
                        format!(
                            "offset {} (batch {}..={} crc {:#x} against {}..={} crc {:#x})",
                            a.0.min(b.0),
                            a.0,
                            a.1,
                            a.2,
                            b.0,
                            b.1,
                            b.2
                        )
                    },
                );
            findings.push(format!(
                "partition {partition}: replicas {first_id} and {id} differ below offset {common_end} in {differing} batches, first at {at}"
            ));
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_log::testing::BatchBuilder;

    fn log_of(dir: &Path, timestamps: &[i64]) {
        let log = Log::open(dir.join("t-0"), LogConfig::default()).unwrap();
        for t in timestamps {
            log.append(&BatchBuilder::new(2).timestamp(*t).build(), 0)
                .unwrap();
        }
        log.close().unwrap();
    }

    #[test]
    fn identical_replicas_and_a_replica_behind_do_not_differ() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        log_of(dirs[0].path(), &[1, 2, 3]);
        log_of(dirs[1].path(), &[1, 2, 3]);
        log_of(dirs[2].path(), &[1, 2]);
        let (batches, end) = batches(&dirs[0].path().join("t-0")).unwrap();
        assert_eq!(end, 6);
        assert_eq!(
            batches.iter().map(|b| (b.0, b.1)).collect::<Vec<_>>(),
            vec![(0, 1), (2, 3), (4, 5)]
        );
        let dirs: Vec<(i32, &Path)> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| (i as i32 + 1, d.path()))
            .collect();
        assert_eq!(compare("t", 0, &dirs), Vec::<String>::new());
    }

    #[test]
    fn replicas_with_other_batches_at_the_same_offsets_differ() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        log_of(dirs[0].path(), &[1, 2, 3, 4]);
        log_of(dirs[1].path(), &[1, 9, 3, 4]);
        log_of(dirs[2].path(), &[1, 2, 3]);
        let dirs: Vec<(i32, &Path)> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| (i as i32 + 1, d.path()))
            .collect();
        let findings = compare("t", 0, &dirs);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].starts_with(
                "partition 0: replicas 1 and 2 differ below offset 6 in 1 batches, first at offset 2"
            ),
            "{findings:?}"
        );
    }
}
