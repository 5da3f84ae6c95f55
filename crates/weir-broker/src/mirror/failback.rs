//! Failback (KIP-1279): a mirror takes back a writable topic that has the
//! source topic's id, because one of the two clusters once mirrored the
//! other. Below the failover's last mirrored offset both logs hold the same
//! batches; past it each took writes of its own. The taken-back partition
//! keeps what the two share and mirrors the rest, so the clusters swap
//! roles without copying everything again.
//!
//! Where the logs part is found by comparing batches, not by asking the
//! other cluster for its records of the failover: a batch keeps its base
//! offset, last offset and CRC when mirrored (the CRC leaves out the
//! partition leader epoch, the one field a mirror rewrites), so a batch
//! both logs hold at the same place is the same batch. Both logs agree up
//! to a point and differ from it on, so a binary search over offsets finds
//! that point with a few single-batch reads on each side ([`Agreement`]). The comparison
//! also catches what the failover's record cannot: records this cluster
//! lost in its outage, which the other one still has.

/// A batch as both clusters know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchId {
    pub base_offset: i64,
    pub last_offset: i64,
    pub crc: u32,
}

impl BatchId {
    /// The first batch of `records`, if they start with one.
    pub fn first_of(records: &[u8]) -> Option<Self> {
        let header = weir_log::batch::BatchHeader::parse(records, 0).ok()?;
        Some(Self {
            base_offset: header.base_offset(),
            last_offset: header.last_offset(),
            crc: header.crc(),
        })
    }
}

/// What the source holds from an offset on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceBatch {
    /// The batch holding the offset, or the first after it.
    Batch(BatchId),
    /// Nothing: the offset is at or past the source's readable end.
    None,
    /// Retention removed it there: nothing to compare, taken as shared.
    BelowLogStart,
}

/// The search for the offset below which the local log holds the
/// source's batches, sans I/O: the caller reads the batches it asks for.
/// Everything below `agreed` is shared; the local batch at `differs` is
/// not (or the log ends there).
#[derive(Debug)]
pub struct Agreement {
    agreed: u64,
    differs: u64,
}

/// What the search needs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The local batch holding this offset, or the first after it:
    /// [`Agreement::local`].
    ReadLocal(u64),
    /// What the source holds from this offset on, to compare with this
    /// local batch: [`Agreement::source`].
    ReadSource(u64, BatchId),
    /// Found: the logs agree below this offset.
    Done(u64),
}

impl Agreement {
    /// A search over the local log from `log_start` to `log_end`.
    pub fn new(log_start: u64, log_end: u64) -> Self {
        Self {
            agreed: log_start,
            differs: log_end.max(log_start),
        }
    }

    /// The first step.
    pub fn start(&self) -> Step {
        self.next()
    }

    fn next(&self) -> Step {
        if self.agreed < self.differs {
            Step::ReadLocal(self.agreed + (self.differs - self.agreed) / 2)
        } else {
            Step::Done(self.agreed)
        }
    }

    /// Takes the local batch read for [`Step::ReadLocal`]`(probe)`.
    pub fn local(&mut self, probe: u64, batch: Option<BatchId>) -> Step {
        let Some(batch) = batch else {
            self.differs = probe;
            return self.next();
        };
        let base = u64::try_from(batch.base_offset).unwrap_or(0);
        if base >= self.differs {
            // Nothing local starts between the probe and `differs`.
            self.differs = probe;
            return self.next();
        }
        Step::ReadSource(base.max(self.agreed), batch)
    }

    /// Takes what the source holds, read for [`Step::ReadSource`]`(at, ours)`.
    pub fn source(&mut self, at: u64, ours: BatchId, theirs: SourceBatch) -> Step {
        let shared = match theirs {
            SourceBatch::Batch(theirs) => theirs == ours,
            SourceBatch::None => false,
            SourceBatch::BelowLogStart => true,
        };
        if shared {
            self.agreed = u64::try_from(ours.last_offset).unwrap_or(0) + 1;
        } else {
            self.differs = at;
        }
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A log as batches of (base, last, crc), back to back.
    fn log(batches: &[(u64, u64, u32)]) -> Vec<BatchId> {
        batches
            .iter()
            .map(|&(base, last, crc)| BatchId {
                base_offset: base as i64,
                last_offset: last as i64,
                crc,
            })
            .collect()
    }

    fn holding(log: &[BatchId], offset: u64) -> Option<BatchId> {
        log.iter().copied().find(|b| b.last_offset as u64 >= offset)
    }

    /// The search run against in-memory logs: the offset found, and how
    /// many batches it read from the source.
    fn agreed(ours: &[BatchId], theirs: &[BatchId], their_start: u64) -> (u64, usize) {
        let end = ours.last().map_or(0, |b| b.last_offset as u64 + 1);
        let start = ours.first().map_or(0, |b| b.base_offset as u64);
        let mut search = Agreement::new(start, end);
        let mut step = search.start();
        let mut reads = 0;
        loop {
            step = match step {
                Step::ReadLocal(probe) => search.local(probe, holding(ours, probe)),
                Step::ReadSource(at, batch) => {
                    reads += 1;
                    let theirs = if at < their_start {
                        SourceBatch::BelowLogStart
                    } else {
                        holding(theirs, at).map_or(SourceBatch::None, SourceBatch::Batch)
                    };
                    search.source(at, batch, theirs)
                }
                Step::Done(offset) => return (offset, reads),
            };
        }
    }

    #[test]
    fn logs_that_took_different_writes_part_at_the_first_differing_batch() {
        let ours = log(&[(0, 4, 1), (5, 9, 2), (10, 10, 3), (11, 20, 40)]);
        let theirs = log(&[
            (0, 4, 1),
            (5, 9, 2),
            (10, 10, 3),
            (11, 12, 50),
            (13, 30, 51),
        ]);
        assert_eq!(agreed(&ours, &theirs, 0).0, 11);
        // This cluster lost its tail: the source holds more, all shared.
        assert_eq!(agreed(&ours[..2], &theirs, 0).0, 10);
        // Nothing shared.
        assert_eq!(agreed(&ours, &log(&[(0, 3, 9)]), 0).0, 0);
        // The source's retention passed the shared part.
        assert_eq!(agreed(&ours, &log(&[(11, 12, 50)]), 11).0, 11);
        // Nothing at the source at all.
        assert_eq!(agreed(&ours, &[], 0).0, 0);
    }

    proptest! {
        #[test]
        fn the_search_finds_the_end_of_the_shared_batches_in_few_reads(
            shared in proptest::collection::vec(1u64..50, 0..200),
            ours_after in proptest::collection::vec(1u64..50, 0..50),
            theirs_after in proptest::collection::vec(1u64..50, 0..50),
            gaps in proptest::collection::vec(0u64..3, 300),
        ) {
            // Batches of the given sizes back to back, with compaction's
            // gaps between some; each side's own batches have other CRCs.
            let build = |sizes: &[u64], from: u64, crc_base: u32, gap_from: usize| {
                let mut next = from;
                let mut out = Vec::new();
                for (i, size) in sizes.iter().enumerate() {
                    next += gaps[(gap_from + i) % gaps.len()];
                    out.push((next, next + size - 1, crc_base + i as u32));
                    next += size;
                }
                (out, next)
            };
            let (mut ours, end) = build(&shared, 0, 0, 0);
            let mut theirs = ours.clone();
            ours.extend(build(&ours_after, end, 10_000, 7).0);
            theirs.extend(build(&theirs_after, end, 20_000, 11).0);
            let (ours, theirs) = (log(&ours), log(&theirs));
            // The shared batches' end; the local log's start when none is.
            let start = ours.first().map_or(0, |b| b.base_offset as u64);
            let expected = if shared.is_empty() { start } else { end };
            let (found, reads) = agreed(&ours, &theirs, 0);
            prop_assert_eq!(found, expected);
            prop_assert!(reads <= 20, "{} reads", reads);
        }
    }
}
