//! The log cleaner: compaction of logs whose `cleanup.policy` includes
//! `compact`, as Kafka's LogCleaner does it.
//!
//! A pass over one log:
//!
//! 1. Plan, under the log's lock: the dirty range runs from the cleaner
//!    checkpoint to the first uncleanable offset (the active segment, the
//!    first segment reaching the high watermark, or the first one holding
//!    records younger than `min.compaction.lag.ms`). The sealed segments
//!    are snapshotted (open file, size) and synced.
//! 2. Build an [`OffsetMap`] key → latest offset over the dirty range,
//!    whole segments at a time while they fit in
//!    `log.cleaner.dedupe.buffer.size`; where it fills, the pass ends.
//! 3. Rewrite the segments from the first up to that end, in groups that
//!    fit in one segment, keeping a record when it is the latest of its key
//!    and, for a tombstone, while its delete horizon has not passed. Each
//!    group becomes one `.cleaned` segment, synced, then swapped in under the
//!    lock (see [`Log::swap_cleaned`]).
//! 4. Write the checkpoint: the end of the range the map covered.
//!
//! Reads and appends continue meanwhile: the cleaner reads sealed segments
//! through their open files, and a group whose segments changed (retention,
//! truncation) is not swapped in.
//!
//! Offsets never change: a rewritten batch keeps its base offset, its
//! lastOffsetDelta and its producer fields, and its records their offset
//! deltas, so compaction leaves gaps; a batch left without records goes.
//! Transactions: nothing of an undecided one is cleaned; the batches of
//! aborted ones go (they never enter the offset map, so they hide nothing);
//! a marker stays while its transaction has records in the log, then
//! `delete.retention.ms` longer, as Kafka keeps it (see [`filter_batch`]).
//! The cleaned segment's `.txnindex` keeps the group's aborted transactions
//! but those whose markers went.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::ops::{ControlFlow, Range};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batch::{self, Batch, BatchHeader, Compression, Origin, HEADER_SIZE};
use crate::config::LogConfig;
use crate::error::{IoContext, LogError};
use crate::log::{CleanPlan, Log, SegmentSnapshot, Swap};
use crate::records::{
    self, compress, encode_record, parse_records, RecordView, MAX_INFLATED_BATCH_BYTES,
};
use crate::segment::{PreparedBatch, Segment};
use crate::txn::AbortedTxn;

/// Kafka's `log.cleaner.io.buffer.load.factor`: how full the offset map
/// may get.
const LOAD_FACTOR: f64 = 0.9;
/// A slot of the offset map: a 128-bit hash of the key and an offset.
const BYTES_PER_ENTRY: usize = 24;
/// How much of a segment is read at a time.
const READ_CHUNK: usize = 1 << 20;
/// How much cleaned data is buffered before it is written.
const WRITE_CHUNK: usize = 1 << 20;

/// Settings of the cleaner, named after Kafka's broker configs.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// `log.cleaner.dedupe.buffer.size`: memory for the key → offset map,
    /// 24 bytes a key.
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.max.bytes.per.second`: read and write bytes a second
    /// (`f64::MAX`: no limit).
    pub io_max_bytes_per_second: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            dedupe_buffer_size: 128 * 1024 * 1024,
            io_max_bytes_per_second: f64::MAX,
        }
    }
}

/// How dirty a compacted log is ([`Log::cleanable`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cleanable {
    /// Where the dirty part starts: the cleaner checkpoint, or the log
    /// start.
    pub first_dirty_offset: u64,
    /// Where the cleanable part ends.
    pub first_uncleanable_offset: u64,
    /// Bytes of the segments below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments in the cleanable dirty range.
    pub dirty_bytes: u64,
    /// `dirty_bytes / (clean_bytes + dirty_bytes)`.
    pub dirty_ratio: f64,
    /// The log's `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// How long ago the oldest dirty record passed `max.compaction.lag.ms`
    /// (0: none has).
    pub max_compaction_delay_ms: i64,
    /// The last cleaning kept a tombstone whose delete horizon has passed.
    pub tombstones_due: bool,
}

impl Cleanable {
    /// Whether the log should be cleaned now: enough of it is dirty, a
    /// dirty record waited `max.compaction.lag.ms`, or tombstones are due.
    pub fn needs_cleaning(&self) -> bool {
        let dirty = self.dirty_bytes > 0
            && (self.max_compaction_delay_ms > 0
                || self.dirty_ratio >= self.min_cleanable_dirty_ratio);
        dirty || self.tombstones_due
    }
}

/// How a cleaning pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanOutcome {
    /// Nothing was cleanable.
    #[default]
    NothingToClean,
    Cleaned,
    /// Stopped by [`Cleaner::abort_handle`], or because segments changed
    /// under it (retention, truncation); what was swapped in stays.
    Aborted,
}

/// What a cleaning pass did.
#[derive(Debug, Clone, Default)]
pub struct CleanStats {
    pub outcome: CleanOutcome,
    pub first_dirty_offset: u64,
    /// The new cleaner checkpoint: where the next pass starts.
    pub end_offset: u64,
    /// Segments replaced.
    pub segments_cleaned: usize,
    /// Cleaned segments written in their place.
    pub segments_written: usize,
    /// Bytes read: the dirty range for the offset map, then the segments
    /// rewritten.
    pub bytes_read: u64,
    /// Bytes of the cleaned segments.
    pub bytes_written: u64,
    /// Records looked at while rewriting.
    pub records_read: u64,
    /// Records dropped: superseded, without a key, or expired tombstones.
    pub records_removed: u64,
    /// Of those, tombstones.
    pub tombstones_removed: u64,
    /// Batches of aborted transactions removed.
    pub aborted_batches_removed: u64,
    /// Transaction markers removed (`delete.retention.ms` after their
    /// transaction's records were all gone).
    pub markers_removed: u64,
    /// Distinct keys in the offset map.
    pub keys: u64,
    pub duration: Duration,
}

/// Cleans logs one pass at a time. One cleaner works on one log at a time;
/// its offset map is sized per pass, at most `dedupe_buffer_size`.
pub struct Cleaner {
    config: CleanerConfig,
    abort: Arc<AtomicBool>,
    throttler: Throttler,
}

impl std::fmt::Debug for Cleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleaner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Cleaner {
    pub fn new(config: CleanerConfig) -> Self {
        Self {
            throttler: Throttler::new(config.io_max_bytes_per_second),
            config,
            abort: Arc::default(),
        }
    }

    /// Setting this flag stops a pass at the next batch; what was swapped in
    /// until then stays, the rest is left for the next pass.
    pub fn abort_handle(&self) -> Arc<AtomicBool> {
        self.abort.clone()
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Cleans what is cleanable in `log` now, below `upper_bound` (the high
    /// watermark), whatever the dirty ratio; see [`Cleanable::needs_cleaning`]
    /// to decide whether to. A log without `compact` in its cleanup policy
    /// is left alone.
    pub fn clean(&mut self, log: &Log, upper_bound: u64) -> Result<CleanStats, LogError> {
        let started = Instant::now();
        let mut stats = CleanStats::default();
        let result = self.clean_inner(log, upper_bound, &mut stats);
        stats.duration = started.elapsed();
        result.map(|()| stats)
    }

    fn clean_inner(
        &self,
        log: &Log,
        upper_bound: u64,
        stats: &mut CleanStats,
    ) -> Result<(), LogError> {
        let Some(plan) = log.plan_clean(upper_bound)? else {
            return Ok(());
        };
        let cleanable = plan.cleanable;
        stats.first_dirty_offset = cleanable.first_dirty_offset;
        stats.end_offset = cleanable.first_dirty_offset;
        let dirty = cleanable.first_uncleanable_offset > cleanable.first_dirty_offset;
        if !dirty && !cleanable.tombstones_due {
            return Ok(());
        }
        // Only durable segments are replaced: a crash then leaves either
        // them or their cleaned copy, both whole.
        log.sync_sealed_below(plan.limit)?;
        let span = cleanable.first_uncleanable_offset - cleanable.first_dirty_offset;
        let mut map = OffsetMap::new(self.config.dedupe_buffer_size, span);
        let Some(dirty_end) = self.build_offset_map(&plan, &mut map, stats)? else {
            stats.outcome = CleanOutcome::Aborted;
            return Ok(());
        };
        stats.keys = map.len() as u64;
        let count = plan
            .segments
            .iter()
            .take_while(|s| s.base_offset < dirty_end)
            .count();
        if count == 0 {
            return Ok(());
        }
        let mut horizon = None;
        for group in group_segments(&plan.segments[..count], &plan.config) {
            let old = &plan.segments[group];
            let Some(cleaned) =
                self.clean_group(log, &plan, old, &map, dirty_end, stats, &mut horizon)?
            else {
                stats.outcome = CleanOutcome::Aborted;
                return Ok(());
            };
            let written = cleaned.size;
            match log.swap_cleaned(old, cleaned)? {
                Swap::Swapped => {
                    stats.segments_cleaned += old.len();
                    stats.segments_written += 1;
                    stats.bytes_written += written;
                }
                Swap::Stale => {
                    stats.outcome = CleanOutcome::Aborted;
                    return Ok(());
                }
            }
        }
        log.finish_clean(plan.truncations, dirty_end, horizon)?;
        stats.end_offset = dirty_end;
        stats.outcome = CleanOutcome::Cleaned;
        Ok(())
    }

    /// Fills the map from the dirty range; returns where the range it
    /// covers ends (`None` when aborted).
    fn build_offset_map(
        &self,
        plan: &CleanPlan,
        map: &mut OffsetMap,
        stats: &mut CleanStats,
    ) -> Result<Option<u64>, LogError> {
        let first_dirty = plan.cleanable.first_dirty_offset;
        let stop = plan.cleanable.first_uncleanable_offset;
        let aborted = AbortedRanges::new(&plan.aborted);
        let mut dirty_end = first_dirty;
        let dirty = plan
            .segments
            .iter()
            .filter(|s| s.end_offset > first_dirty && s.base_offset < stop);
        for segment in dirty {
            // Whole segments while they surely fit (Kafka's rule), so that
            // the range ends on a segment boundary.
            let span = segment
                .next_offset
                .saturating_sub(segment.base_offset.max(first_dirty));
            if !map.is_empty() && map.len() as u64 + span > map.capacity() as u64 {
                break;
            }
            let mut full_at = None;
            let flow = self.read_batches(segment, stats, |batch| {
                let header = batch.header;
                if header.last_offset() < first_dirty as i64
                    || header.is_control()
                    || aborted.contains(&header)
                {
                    // Markers have no keys; aborted records must not hide
                    // the committed ones before them.
                    return Ok(ControlFlow::Continue(()));
                }
                let count = header.record_count().max(0) as usize;
                if map.len() + count > map.capacity() {
                    full_at = Some(header.base_offset() as u64);
                    return Ok(ControlFlow::Break(()));
                }
                let base = header.base_offset() as u64;
                for_each_record(segment, batch, |record| {
                    if let Some(key) = record.key {
                        map.put(key, base + record.offset_delta as u64);
                    }
                })?;
                Ok(ControlFlow::Continue(()))
            })?;
            if self.aborted() {
                return Ok(None);
            }
            if let Some(at) = full_at {
                if map.is_empty() {
                    return Err(LogError::InvalidConfig(format!(
                        "log.cleaner.dedupe.buffer.size {} holds {} keys, fewer than the batch at offset {at} in {} has records",
                        self.config.dedupe_buffer_size,
                        map.capacity(),
                        segment.path.display()
                    )));
                }
                return Ok(Some(at.max(first_dirty)));
            }
            debug_assert!(flow.is_continue());
            dirty_end = segment.end_offset;
        }
        Ok(Some(dirty_end))
    }

    /// Writes the cleaned copy of `group` as a `.cleaned` segment, sealed
    /// and synced; `None` when aborted (its files removed).
    #[allow(clippy::too_many_arguments)]
    fn clean_group(
        &self,
        log: &Log,
        plan: &CleanPlan,
        group: &[SegmentSnapshot],
        map: &OffsetMap,
        dirty_end: u64,
        stats: &mut CleanStats,
        horizon: &mut Option<i64>,
    ) -> Result<Option<Segment>, LogError> {
        let storage = log.storage();
        let mut out = Segment::create_cleaned(storage, log.dir(), group[0].base_offset)?;
        let aborted = AbortedRanges::new(&plan.aborted);
        let target = Target {
            map,
            dirty_end,
            now_ms: plan.now_ms,
            delete_retention_ms: plan.config.delete_retention_ms,
            aborted: &aborted,
        };
        let result = self.fill(log, plan, group, &target, stats, horizon, &mut out);
        match result {
            Ok(true) => Ok(Some(out)),
            Ok(false) | Err(_) => {
                if let Err(error) = out.remove_files(storage) {
                    tracing::warn!(%error, "could not remove an unfinished cleaned segment");
                }
                result.map(|_| None)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        log: &Log,
        plan: &CleanPlan,
        group: &[SegmentSnapshot],
        target: &Target<'_>,
        stats: &mut CleanStats,
        horizon: &mut Option<i64>,
        out: &mut Segment,
    ) -> Result<bool, LogError> {
        let mut writer = Writer::default();
        let config = &plan.config;
        let mut txns = GroupTxns::new(&group[0].txn_open_at_base);
        for segment in group {
            let flow = self.read_batches(segment, stats, |batch| {
                let filtered = filter_batch(segment, batch, target, &mut txns, &mut writer.tally)?;
                match filtered {
                    Filtered::Keep => writer.push(batch.bytes),
                    Filtered::Rewritten(bytes) => writer.push(&bytes),
                    Filtered::Drop => {}
                }
                if writer.buf.len() >= WRITE_CHUNK {
                    let written = writer.flush(out, config, plan.now_ms)?;
                    self.throttler.throttle(written, &self.abort);
                }
                Ok(ControlFlow::Continue(()))
            })?;
            if flow.is_break() || self.aborted() {
                return Ok(false);
            }
        }
        let written = writer.flush(out, config, plan.now_ms)?;
        self.throttler.throttle(written, &self.abort);
        let tally = writer.tally;
        stats.records_read += tally.records_read;
        stats.records_removed += tally.records_removed;
        stats.tombstones_removed += tally.tombstones_removed;
        stats.aborted_batches_removed += tally.aborted_batches_removed;
        stats.markers_removed += txns.dropped_markers.len() as u64;
        if let Some(h) = tally.horizon {
            *horizon = Some(horizon.map_or(h, |old| old.min(h)));
        }
        let storage = log.storage();
        // Offsets do not change: the group's aborted transactions stay as
        // they were, but for those whose markers went.
        let entries = group
            .iter()
            .flat_map(|s| s.txn_entries.iter().copied())
            .filter(|e| !txns.dropped_markers.contains(&e.last_offset));
        let open_at_base = group[0].txn_open_at_base.clone();
        out.write_txn_index(storage, open_at_base, entries.collect(), true)?;
        out.seal(storage)?;
        for (path, file) in out.files_to_sync() {
            file.sync().context(&path)?;
        }
        out.log_dirty = false;
        out.indexes_dirty = false;
        out.txn.dirty = false;
        out.txn.release_file();
        Ok(true)
    }

    /// Reads the batches of a sealed segment in order, checking each (CRC
    /// included), and hands them to `f` until it breaks or the cleaner is
    /// aborted.
    fn read_batches(
        &self,
        segment: &SegmentSnapshot,
        stats: &mut CleanStats,
        mut f: impl FnMut(Batch<'_>) -> Result<ControlFlow<()>, LogError>,
    ) -> Result<ControlFlow<()>, LogError> {
        let corrupt = |position: u64, reason: String| LogError::Corrupt {
            path: segment.path.to_path_buf(),
            position,
            reason,
        };
        let mut position = 0u64;
        let mut buf = Vec::new();
        while position < segment.size {
            if self.aborted() {
                return Ok(ControlFlow::Break(()));
            }
            let want = READ_CHUNK.min((segment.size - position) as usize);
            buf.resize(want, 0);
            segment
                .file
                .read_exact_at(&mut buf, position)
                .context(&segment.path)?;
            stats.bytes_read += want as u64;
            self.throttler.throttle(want as u64, &self.abort);
            let mut at = 0usize;
            while at < buf.len() {
                let here = position + at as u64;
                if buf.len() - at < HEADER_SIZE {
                    if at == 0 {
                        return Err(corrupt(here, "less than a batch header left".into()));
                    }
                    break;
                }
                let size = BatchHeader::parse(&buf[at..], 0)
                    .map_err(|e| corrupt(here, e.to_string()))?
                    .total_size();
                if at + size > buf.len() {
                    if at > 0 {
                        break;
                    }
                    // A batch larger than a chunk: read exactly it.
                    if here + size as u64 > segment.size {
                        return Err(corrupt(
                            here,
                            "batch runs past the end of the segment".into(),
                        ));
                    }
                    buf.resize(size, 0);
                    segment
                        .file
                        .read_exact_at(&mut buf, here)
                        .context(&segment.path)?;
                    stats.bytes_read += (size - want) as u64;
                    self.throttler.throttle((size - want) as u64, &self.abort);
                }
                let batch = batch::validate(&buf[at..], 0, Origin::Log, usize::MAX)
                    .map_err(|e| corrupt(here, e.to_string()))?;
                if f(batch)?.is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                at += size;
            }
            position += at as u64;
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// Splits the segments to rewrite into runs that each fit in one segment:
/// at most `segment.bytes` of data and `segment.index.bytes` of index, and
/// offsets within 2³²−1 of the first base offset.
fn group_segments(segments: &[SegmentSnapshot], config: &LogConfig) -> Vec<Range<usize>> {
    let max_entries = ((config.segment_index_bytes / 8) as usize).max(1);
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let base = segments[start].base_offset;
        let mut size = segments[start].size;
        let mut entries = segments[start].index_entries;
        let mut end = start + 1;
        while let Some(next) = segments.get(end) {
            let last_offset = next.next_offset.max(next.base_offset + 1) - 1;
            if size + next.size > config.segment_bytes
                || entries + next.index_entries > max_entries
                || last_offset - base > u64::from(u32::MAX)
            {
                break;
            }
            size += next.size;
            entries += next.index_entries;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// Counts of one group's rewrite.
#[derive(Default)]
struct Tally {
    records_read: u64,
    records_removed: u64,
    tombstones_removed: u64,
    aborted_batches_removed: u64,
    /// The earliest delete horizon of a kept tombstone.
    horizon: Option<i64>,
}

/// Cleaned batches waiting to be appended to the cleaned segment.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
    tally: Tally,
}

impl Writer {
    fn push(&mut self, batch: &[u8]) {
        self.buf.extend_from_slice(batch);
    }

    /// Appends the buffered batches; returns the bytes written.
    fn flush(
        &mut self,
        out: &mut Segment,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<u64, LogError> {
        if self.buf.is_empty() {
            return Ok(0);
        }
        let mut prepared = Vec::new();
        let mut at = 0;
        while at < self.buf.len() {
            let header = BatchHeader::parse(&self.buf[at..], at).expect("written by the cleaner");
            let size = header.total_size();
            prepared.push(PreparedBatch {
                header: self.buf[at..at + HEADER_SIZE]
                    .try_into()
                    .expect("a whole header"),
                records: &self.buf[at + HEADER_SIZE..at + size],
                base_offset: header.base_offset() as u64,
                last_offset: header.last_offset() as u64,
                max_timestamp: header.max_timestamp(),
            });
            at += size;
        }
        out.append(&prepared, config.index_interval_bytes, now_ms)
            .map_err(|(error, _)| error)?;
        let written = self.buf.len() as u64;
        self.buf.clear();
        Ok(written)
    }
}

/// What becomes of a batch.
enum Filtered {
    /// Every record stays: the batch is copied as it is.
    Keep,
    /// No record stays.
    Drop,
    /// Some records stay, or a delete horizon was set: a new batch.
    Rewritten(Vec<u8>),
}

/// What a pass keeps: the offset map of the dirty range up to `dirty_end`,
/// and the clock for delete horizons.
struct Target<'a> {
    map: &'a OffsetMap,
    dirty_end: u64,
    now_ms: i64,
    delete_retention_ms: i64,
    aborted: &'a AbortedRanges,
}

/// The records of aborted transactions: per producer, the ranges from a
/// transaction's first batch to its abort marker.
struct AbortedRanges(HashMap<i64, Vec<(u64, u64)>>);

impl AbortedRanges {
    fn new(aborted: &[AbortedTxn]) -> Self {
        let mut ranges: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for txn in aborted {
            ranges
                .entry(txn.producer_id)
                .or_default()
                .push((txn.first_offset, txn.last_offset));
        }
        Self(ranges)
    }

    /// Whether `header` is a data batch of an aborted transaction.
    fn contains(&self, header: &BatchHeader<'_>) -> bool {
        if !header.is_transactional() || header.is_control() || header.producer_id() < 0 {
            return false;
        }
        let base = header.base_offset() as u64;
        self.0.get(&header.producer_id()).is_some_and(|ranges| {
            ranges
                .iter()
                .any(|&(first, last)| first <= base && base < last)
        })
    }
}

/// What a group's rewrite knows of transactions, to tell when a marker may
/// go: only once no record of its transaction is left, and only if the
/// transaction began inside the group — otherwise the cleaned segment's
/// `.txnindex` header (the transactions open at its base) names it, and a
/// replay from that header would find it open for ever.
struct GroupTxns {
    /// Producers with a transaction open at the group's base offset.
    open_at_base: HashSet<i64>,
    /// Producers whose marker the rewrite has passed: their later
    /// transactions began inside the group.
    marked: HashSet<i64>,
    /// Producers whose current transaction keeps records in the group.
    retained: HashSet<i64>,
    /// Offsets of the markers removed.
    dropped_markers: HashSet<u64>,
}

impl GroupTxns {
    fn new(open_at_base: &[crate::txn::OpenTxn]) -> Self {
        Self {
            open_at_base: open_at_base.iter().map(|t| t.producer_id).collect(),
            marked: HashSet::new(),
            retained: HashSet::new(),
            dropped_markers: HashSet::new(),
        }
    }
}

/// Decides which records of `batch` stay: the latest of each key (by the
/// offset map; keys not in it are newer than the map's range), tombstones
/// until their delete horizon, nothing without a key. Batches at or past
/// the end of the map's range stay as they are (as in Kafka): a tombstone
/// there may still hide an older record the map has not seen.
///
/// Transactions: the batches of aborted transactions go; a marker stays
/// while records of its transaction do, then `delete.retention.ms` more
/// (its delete horizon set as a tombstone's is), then goes with its
/// `.txnindex` entry — if the transaction began inside the group.
fn filter_batch(
    segment: &SegmentSnapshot,
    batch: Batch<'_>,
    target: &Target<'_>,
    txns: &mut GroupTxns,
    tally: &mut Tally,
) -> Result<Filtered, LogError> {
    let header = batch.header;
    if header.base_offset() as u64 >= target.dirty_end {
        return Ok(Filtered::Keep);
    }
    if header.is_control() {
        return filter_marker(segment, batch, target, txns, tally);
    }
    if target.aborted.contains(&header) {
        tally.records_read += header.record_count().max(0) as u64;
        tally.records_removed += header.record_count().max(0) as u64;
        tally.aborted_batches_removed += 1;
        return Ok(Filtered::Drop);
    }
    let filtered = filter_records(segment, batch, target, tally)?;
    if header.is_transactional() && !matches!(filtered, Filtered::Drop) {
        txns.retained.insert(header.producer_id());
    }
    Ok(filtered)
}

/// A control batch: a marker stays as long as records of its transaction
/// do, and while its transaction may be named open in a `.txnindex` header;
/// then it gets a delete horizon, and goes once the horizon has passed.
fn filter_marker(
    segment: &SegmentSnapshot,
    batch: Batch<'_>,
    target: &Target<'_>,
    txns: &mut GroupTxns,
    tally: &mut Tally,
) -> Result<Filtered, LogError> {
    let header = batch.header;
    let producer_id = header.producer_id();
    let ends_txn = producer_id >= 0
        && matches!(
            batch::control_type(batch.bytes),
            Some(batch::ControlType::Commit | batch::ControlType::Abort)
        );
    if !ends_txn {
        return Ok(Filtered::Keep);
    }
    let began_before =
        txns.open_at_base.contains(&producer_id) && !txns.marked.contains(&producer_id);
    txns.marked.insert(producer_id);
    let has_records = txns.retained.remove(&producer_id);
    if began_before || has_records {
        return Ok(Filtered::Keep);
    }
    let now_ms = target.now_ms;
    if header.has_delete_horizon() {
        let horizon = header.base_timestamp();
        if now_ms >= horizon {
            txns.dropped_markers.insert(header.base_offset() as u64);
            return Ok(Filtered::Drop);
        }
        tally.horizon = Some(tally.horizon.map_or(horizon, |old| old.min(horizon)));
        return Ok(Filtered::Keep);
    }
    // The first time: the marker stays delete.retention.ms from now, so a
    // consumer that read the transaction's records sees it end.
    let horizon = now_ms.saturating_add(target.delete_retention_ms);
    tally.horizon = Some(tally.horizon.map_or(horizon, |old| old.min(horizon)));
    let body = &batch.bytes[HEADER_SIZE..];
    if header.compression() != Some(Compression::None) {
        return Ok(Filtered::Keep);
    }
    let records = parse_records(body, header.record_count())
        .map_err(|reason| corrupt_batch(segment, &header, reason))?;
    let old_base_timestamp = header.base_timestamp();
    let mut plain = Vec::with_capacity(body.len() + 8);
    for record in &records {
        let timestamp = old_base_timestamp.wrapping_add(record.timestamp_delta);
        encode_record(&mut plain, record, timestamp.wrapping_sub(horizon));
    }
    let mut new_header: [u8; HEADER_SIZE] = batch.bytes[..HEADER_SIZE].try_into().expect("header");
    batch::set_compacted(
        &mut new_header,
        &plain,
        header.attributes() | batch::DELETE_HORIZON,
        horizon,
        header.max_timestamp(),
        header.record_count(),
    );
    let mut out = Vec::with_capacity(HEADER_SIZE + plain.len());
    out.extend_from_slice(&new_header);
    out.extend_from_slice(&plain);
    Ok(Filtered::Rewritten(out))
}

/// The records of a data batch that stay (see [`filter_batch`]).
fn filter_records(
    segment: &SegmentSnapshot,
    batch: Batch<'_>,
    target: &Target<'_>,
    tally: &mut Tally,
) -> Result<Filtered, LogError> {
    let header = batch.header;
    let (map, now_ms) = (target.map, target.now_ms);
    let codec = header.compression().expect("validated");
    let body = records::inflate(batch, MAX_INFLATED_BATCH_BYTES)
        .map_err(|e| corrupt_batch(segment, &header, e.to_string()))?;
    let records = parse_records(&body, header.record_count())
        .map_err(|reason| corrupt_batch(segment, &header, reason))?;
    let base = header.base_offset() as u64;
    let old_horizon = header.has_delete_horizon().then(|| header.base_timestamp());
    let mut keep = Vec::with_capacity(records.len());
    let mut kept = 0usize;
    let mut kept_tombstone = false;
    for record in &records {
        let offset = base + record.offset_delta as u64;
        let retain = match record.key {
            None => false,
            Some(key) => match map.get(key) {
                Some(latest) if latest > offset => false,
                _ if record.value_is_null => old_horizon.is_none_or(|h| now_ms < h),
                _ => true,
            },
        };
        if retain {
            kept += 1;
            kept_tombstone |= record.value_is_null;
        } else if record.value_is_null {
            tally.tombstones_removed += 1;
        }
        keep.push(retain);
    }
    let removed = records.len() - kept;
    tally.records_read += records.len() as u64;
    tally.records_removed += removed as u64;
    // A tombstone seen for the first time stays delete.retention.ms from now:
    // the horizon goes into baseTimestamp, as Kafka does (KIP-534).
    let set_horizon = old_horizon.is_none() && kept_tombstone;
    let batch_horizon = if set_horizon {
        Some(now_ms.saturating_add(target.delete_retention_ms))
    } else {
        old_horizon
    };
    if kept_tombstone {
        let h = batch_horizon.expect("set above");
        tally.horizon = Some(tally.horizon.map_or(h, |old| old.min(h)));
    }
    if removed == 0 && !set_horizon {
        return Ok(Filtered::Keep);
    }
    if kept == 0 {
        return Ok(Filtered::Drop);
    }
    let old_base_timestamp = header.base_timestamp();
    let base_timestamp = batch_horizon.unwrap_or(old_base_timestamp);
    let mut plain = Vec::with_capacity(body.len());
    let mut max_timestamp = i64::MIN;
    for (record, _) in records.iter().zip(&keep).filter(|(_, k)| **k) {
        let timestamp = old_base_timestamp.wrapping_add(record.timestamp_delta);
        max_timestamp = max_timestamp.max(timestamp);
        if base_timestamp == old_base_timestamp {
            plain.extend_from_slice(record.raw);
        } else {
            encode_record(&mut plain, record, timestamp.wrapping_sub(base_timestamp));
        }
    }
    if header.is_log_append_time() {
        max_timestamp = header.max_timestamp();
    }
    let records_bytes =
        compress(codec, &plain).map_err(|reason| corrupt_batch(segment, &header, reason))?;
    let mut new_header: [u8; HEADER_SIZE] = batch.bytes[..HEADER_SIZE].try_into().expect("header");
    let mut attributes = header.attributes();
    if batch_horizon.is_some() {
        attributes |= batch::DELETE_HORIZON;
    }
    batch::set_compacted(
        &mut new_header,
        &records_bytes,
        attributes,
        base_timestamp,
        max_timestamp,
        kept as i32,
    );
    let mut out = Vec::with_capacity(HEADER_SIZE + records_bytes.len());
    out.extend_from_slice(&new_header);
    out.extend_from_slice(&records_bytes);
    Ok(Filtered::Rewritten(out))
}

fn corrupt_batch(segment: &SegmentSnapshot, header: &BatchHeader<'_>, reason: String) -> LogError {
    LogError::Corrupt {
        path: segment.path.to_path_buf(),
        position: 0,
        reason: format!(
            "batch at offset {}: cannot read records: {reason}",
            header.base_offset()
        ),
    }
}

/// Calls `f` with every record of a (non-control) batch.
fn for_each_record(
    segment: &SegmentSnapshot,
    batch: Batch<'_>,
    mut f: impl FnMut(&RecordView<'_>),
) -> Result<(), LogError> {
    let header = batch.header;
    let body = records::inflate(batch, MAX_INFLATED_BATCH_BYTES)
        .map_err(|e| corrupt_batch(segment, &header, e.to_string()))?;
    let records = parse_records(&body, header.record_count())
        .map_err(|reason| corrupt_batch(segment, &header, reason))?;
    records.iter().for_each(&mut f);
    Ok(())
}

// ---------------------------------------------------------------------------
// The offset map and the throttle.

/// Key → latest offset, in a fixed amount of memory: an open-addressing
/// table of 24-byte slots (a 128-bit hash of the key and the offset), like
/// Kafka's SkimpyOffsetMap. Two keys with the same 128-bit hash would be
/// taken for one; the hash is keyed afresh for every pass.
struct OffsetMap {
    hashes: Vec<[u64; 2]>,
    offsets: Vec<u64>,
    len: usize,
    capacity: usize,
    hashers: (RandomState, RandomState),
}

const EMPTY: u64 = u64::MAX;

impl OffsetMap {
    /// A map in at most `buffer_size` bytes, no larger than `span`
    /// offsets need.
    fn new(buffer_size: usize, span: u64) -> Self {
        let max_slots = (buffer_size / BYTES_PER_ENTRY).max(2);
        let wanted = ((span as f64 / LOAD_FACTOR) as u64)
            .saturating_add(2)
            .max(64);
        let slots = (wanted.min(max_slots as u64)) as usize;
        let capacity = ((slots as f64 * LOAD_FACTOR) as usize).min(slots - 1);
        Self {
            hashes: vec![[0; 2]; slots],
            offsets: vec![EMPTY; slots],
            len: 0,
            capacity,
            hashers: (RandomState::new(), RandomState::new()),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many keys it takes.
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn hash(&self, key: &[u8]) -> [u64; 2] {
        [self.hashers.0.hash_one(key), self.hashers.1.hash_one(key)]
    }

    /// The slot holding `hash`, or the empty one where it would go.
    fn slot(&self, hash: [u64; 2]) -> usize {
        let slots = self.offsets.len();
        let mut i = (hash[0] % slots as u64) as usize;
        while self.offsets[i] != EMPTY && self.hashes[i] != hash {
            i = (i + 1) % slots;
        }
        i
    }

    /// Records `offset` as the latest of `key`; the caller keeps the map
    /// below its capacity.
    fn put(&mut self, key: &[u8], offset: u64) {
        let hash = self.hash(key);
        let i = self.slot(hash);
        if self.offsets[i] == EMPTY {
            assert!(self.len < self.capacity, "offset map over capacity");
            self.len += 1;
            self.hashes[i] = hash;
        }
        self.offsets[i] = offset;
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        let i = self.slot(self.hash(key));
        Some(self.offsets[i]).filter(|&o| o != EMPTY)
    }
}

/// Keeps the cleaner's I/O under `log.cleaner.io.max.bytes.per.second` by
/// sleeping when it ran ahead, measured over periods of at least 100 ms.
struct Throttler {
    max_bytes_per_second: f64,
    period_start: Cell<Instant>,
    bytes: Cell<f64>,
}

const THROTTLE_PERIOD: Duration = Duration::from_millis(100);

impl Throttler {
    fn new(max_bytes_per_second: f64) -> Self {
        Self {
            max_bytes_per_second,
            period_start: Cell::new(Instant::now()),
            bytes: Cell::new(0.0),
        }
    }

    fn unlimited(&self) -> bool {
        !(self.max_bytes_per_second > 0.0 && self.max_bytes_per_second < f64::MAX)
    }

    fn throttle(&self, bytes: u64, abort: &AtomicBool) {
        if self.unlimited() || bytes == 0 {
            return;
        }
        let total = self.bytes.get() + bytes as f64;
        self.bytes.set(total);
        let elapsed = self.period_start.get().elapsed();
        if elapsed < THROTTLE_PERIOD && total < self.max_bytes_per_second / 10.0 {
            return;
        }
        let due = Duration::from_secs_f64(total / self.max_bytes_per_second);
        if let Some(mut wait) = due.checked_sub(elapsed) {
            // In slices, so that an abort is not held up.
            while !wait.is_zero() && !abort.load(Ordering::Relaxed) {
                let slice = wait.min(THROTTLE_PERIOD);
                std::thread::sleep(slice);
                wait -= slice;
            }
        }
        self.period_start.set(Instant::now());
        self.bytes.set(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_map_keeps_the_latest_offset_and_its_capacity() {
        let mut map = OffsetMap::new(24 * 100, 1_000_000);
        assert_eq!(map.capacity(), 90);
        for i in 0..90u64 {
            map.put(format!("k{}", i % 45).as_bytes(), i);
        }
        assert_eq!(map.len(), 45);
        assert_eq!(map.get(b"k0"), Some(45));
        assert_eq!(map.get(b"k44"), Some(89));
        assert_eq!(map.get(b"nope"), None);
        // Sized by the span when that is smaller than the buffer.
        let small = OffsetMap::new(128 << 20, 10);
        assert_eq!(small.offsets.len(), 64);
    }

    #[test]
    fn throttle_sleeps_when_ahead() {
        let throttler = Throttler::new(1_000_000.0);
        let started = Instant::now();
        throttler.throttle(300_000, &AtomicBool::new(false));
        assert!(started.elapsed() >= Duration::from_millis(250));
        let unlimited = Throttler::new(f64::MAX);
        let started = Instant::now();
        unlimited.throttle(u64::MAX / 2, &AtomicBool::new(false));
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}
