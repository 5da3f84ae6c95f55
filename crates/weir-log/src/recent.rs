//! Where the newest batches of the active segment are, kept in memory: a
//! read at the tail of the log (a follower's, or a consumer's that keeps
//! up) finds its slice without reading a batch header from the disk, so it
//! can be answered where waiting is not allowed.

use std::collections::VecDeque;

/// Batches remembered per segment: enough for the followers and consumers
/// that keep up, small (16 bytes each) so that many partitions cost little.
const REMEMBERED: usize = 32;

/// One batch: its offsets relative to the segment's base offset, and the
/// bytes it takes in the segment's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    base: u32,
    last: u32,
    position: u32,
    end: u32,
}

/// The last batches of a segment, contiguous in its file.
#[derive(Debug, Default)]
pub(crate) struct RecentBatches {
    spans: VecDeque<Span>,
}

/// What the remembered batches say of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecentRead {
    /// The batch holding the offset reaches the bound: nothing to read.
    Nothing,
    /// Whole batches in `start..end` of the file, the first with base
    /// offset `first_offset`.
    Bytes {
        start: u64,
        end: u64,
        first_offset: u64,
    },
}

impl RecentBatches {
    /// Notes a batch written at `position`. A batch that does not follow
    /// the last one remembered starts the memory anew, so that what is
    /// remembered always lies end to end in the file.
    pub(crate) fn push(
        &mut self,
        segment_base: u64,
        base: u64,
        last: u64,
        position: u64,
        end: u64,
    ) {
        let relative = |offset: u64| u32::try_from(offset - segment_base).ok();
        let span = match (
            relative(base),
            relative(last),
            u32::try_from(position),
            u32::try_from(end),
        ) {
            (Some(base), Some(last), Ok(position), Ok(end)) => Span {
                base,
                last,
                position,
                end,
            },
            // Beyond what 32 bits hold: such reads find their way on disk.
            _ => return self.forget(),
        };
        if self
            .spans
            .back()
            .is_some_and(|previous| previous.end != span.position)
        {
            self.spans.clear();
        }
        if self.spans.len() == REMEMBERED {
            self.spans.pop_front();
        }
        self.spans.push_back(span);
    }

    /// The segment was cut back to `position`: batches past it are gone.
    pub(crate) fn cut_at(&mut self, position: u64) {
        while self
            .spans
            .back()
            .is_some_and(|span| u64::from(span.end) > position)
        {
            self.spans.pop_back();
        }
    }

    /// Forgets every batch, and the memory they took.
    pub(crate) fn forget(&mut self) {
        self.spans = VecDeque::new();
    }

    /// Whole batches from the one holding `from` on, none of which reaches
    /// `bound`, within `max_bytes` but at least one: what
    /// [`Log::read`](crate::Log::read) would answer. `None` when the
    /// remembered batches do not reach back to `from`.
    pub(crate) fn read(
        &self,
        segment_base: u64,
        from: u64,
        bound: u64,
        max_bytes: usize,
    ) -> Option<RecentRead> {
        let absolute = |relative: u32| segment_base + u64::from(relative);
        if absolute(self.spans.front()?.base) > from {
            return None;
        }
        let first = self
            .spans
            .iter()
            .position(|span| absolute(span.last) >= from)?;
        let mut spans = self.spans.range(first..);
        let head = *spans.next().expect("found above");
        if absolute(head.last) >= bound {
            return Some(RecentRead::Nothing);
        }
        let start = u64::from(head.position);
        let limit = start.saturating_add(max_bytes as u64);
        let mut end = u64::from(head.end);
        for span in spans {
            if absolute(span.last) >= bound || u64::from(span.end) > limit {
                break;
            }
            end = u64::from(span.end);
        }
        Some(RecentRead::Bytes {
            start,
            end,
            first_offset: absolute(head.base),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches of `records` offsets and `size` bytes each, from offset 100
    /// of a segment based at 100.
    fn remembered(batches: u64, records: u64, size: u64) -> RecentBatches {
        let mut recent = RecentBatches::default();
        for i in 0..batches {
            let base = 100 + i * records;
            recent.push(100, base, base + records - 1, i * size, (i + 1) * size);
        }
        recent
    }

    fn bytes(start: u64, end: u64, first_offset: u64) -> Option<RecentRead> {
        Some(RecentRead::Bytes {
            start,
            end,
            first_offset,
        })
    }

    #[test]
    fn reads_whole_batches_from_the_one_holding_the_offset() {
        let recent = remembered(4, 10, 50);
        // Offset 115 is in the second batch; the bound cuts the fourth.
        assert_eq!(recent.read(100, 115, 135, 1000), bytes(50, 150, 110));
        // Within the byte limit, but never less than one batch.
        assert_eq!(recent.read(100, 115, 140, 120), bytes(50, 150, 110));
        assert_eq!(recent.read(100, 115, 140, 1), bytes(50, 100, 110));
        // The batch holding the offset reaches the bound.
        assert_eq!(recent.read(100, 131, 135, 1000), Some(RecentRead::Nothing));
    }

    #[test]
    fn remembers_the_last_batches_only() {
        let recent = remembered(REMEMBERED as u64 + 5, 1, 10);
        assert_eq!(recent.read(100, 104, 1000, 10), None);
        assert_eq!(recent.read(100, 105, 1000, 10), bytes(50, 60, 105));
    }

    #[test]
    fn a_cut_forgets_what_follows_it_and_a_gap_forgets_everything() {
        let mut recent = remembered(4, 10, 50);
        recent.cut_at(100);
        assert_eq!(recent.read(100, 100, 1000, 1000), bytes(0, 100, 100));
        // Written at 100 again: follows on.
        recent.push(100, 120, 124, 100, 130);
        assert_eq!(recent.read(100, 100, 1000, 1000), bytes(0, 130, 100));
        // Not where the last one ended.
        recent.push(100, 125, 125, 200, 210);
        assert_eq!(recent.read(100, 120, 1000, 1000), None);
        assert_eq!(recent.read(100, 125, 1000, 1000), bytes(200, 210, 125));
    }

    #[test]
    fn offsets_between_batches_read_from_the_next() {
        // A replicated log may skip offsets between batches.
        let mut recent = RecentBatches::default();
        recent.push(0, 0, 4, 0, 10);
        recent.push(0, 10, 14, 10, 20);
        assert_eq!(recent.read(0, 7, 100, 100), bytes(10, 20, 10));
    }
}
