//! Property test: random sequences of operations on a log with small
//! segments, checked after every step against a simple model — the batches
//! physically present with their offsets, the log start and the log end.
//! Segment boundaries are taken from the log itself; what the model predicts
//! is which batches a read, a truncation, DeleteRecords or retention touch.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use weir_log::sim::SimStorage;
use weir_log::{Log, LogConfig, LogError, ManualClock};

use common::*;

#[derive(Debug, Clone)]
struct BatchSpec {
    count: usize,
    value_size: usize,
    ts_jitter: i64,
}

/// An upper bound for a read or for retention.
#[derive(Debug, Clone)]
enum Bound {
    LogEnd,
    Unbounded,
    /// Picked between the log start and just past the log end.
    Offset(u32),
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        batches: Vec<BatchSpec>,
        new_epoch: bool,
    },
    Read {
        from: u32,
        max_bytes: usize,
        bound: Bound,
    },
    Roll,
    Flush,
    TruncateTo(u32),
    DeleteRecordsBefore(u32),
    Retention {
        retention_bytes: i64,
        bound: Bound,
        delete_at_once: bool,
    },
    CleanReopen,
    UncleanReopen,
}

fn batch_spec() -> impl Strategy<Value = BatchSpec> {
    (
        1usize..=5,
        prop_oneof![3 => 1usize..64, 1 => 64usize..400],
        -30i64..30,
    )
        .prop_map(|(count, value_size, ts_jitter)| BatchSpec {
            count,
            value_size,
            ts_jitter,
        })
}

fn bound() -> impl Strategy<Value = Bound> {
    prop_oneof![
        Just(Bound::LogEnd),
        Just(Bound::Unbounded),
        any::<u32>().prop_map(Bound::Offset),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (prop::collection::vec(batch_spec(), 1..=3), prop::bool::weighted(0.1))
            .prop_map(|(batches, new_epoch)| Op::Append { batches, new_epoch }),
        4 => (any::<u32>(), 0usize..3000, bound())
            .prop_map(|(from, max_bytes, bound)| Op::Read { from, max_bytes, bound }),
        1 => Just(Op::Roll),
        1 => Just(Op::Flush),
        1 => any::<u32>().prop_map(Op::TruncateTo),
        1 => any::<u32>().prop_map(Op::DeleteRecordsBefore),
        1 => (-1i64..6000, bound(), any::<bool>()).prop_map(|(retention_bytes, bound, delete_at_once)| {
            Op::Retention { retention_bytes, bound, delete_at_once }
        }),
        1 => Just(Op::CleanReopen),
        1 => Just(Op::UncleanReopen),
    ]
}

fn config() -> impl Strategy<Value = LogConfig> {
    (
        1024u64..=4096,
        64u64..=512,
        prop_oneof![3 => Just(10 * 1024 * 1024u64), 1 => (4u64..=32).prop_map(|n| n * 8)],
    )
        .prop_map(
            |(segment_bytes, index_interval_bytes, segment_index_bytes)| LogConfig {
                segment_bytes,
                index_interval_bytes,
                segment_index_bytes,
                retention_ms: -1,
                ..LogConfig::default()
            },
        )
}

/// `lo + sel mod (hi - lo + 1)`.
fn pick(sel: u32, lo: u64, hi: u64) -> u64 {
    lo + u64::from(sel) % (hi - lo + 1)
}

struct Model {
    /// Batches physically in the log (some maybe below the log start).
    batches: Vec<Stored>,
    log_start: u64,
    log_end: u64,
    epoch: i32,
    next_ts: i64,
}

impl Model {
    fn bound(&self, bound: &Bound) -> u64 {
        match bound {
            Bound::LogEnd => self.log_end,
            Bound::Unbounded => u64::MAX,
            Bound::Offset(sel) => pick(*sel, self.log_start, self.log_end + 2),
        }
    }

    /// Index in `segments` of the segment holding `offset`.
    fn segment_of(segments: &[u64], offset: u64) -> usize {
        segments.iter().rposition(|&b| b <= offset).unwrap()
    }

    /// Bytes of each segment.
    fn segment_sizes(&self, segments: &[u64]) -> Vec<u64> {
        let mut sizes = vec![0; segments.len()];
        for b in &self.batches {
            sizes[Self::segment_of(segments, b.base)] += b.size();
        }
        sizes
    }

    /// What `read(from, max_bytes, upper_bound)` must return.
    fn read(
        &self,
        segments: &[u64],
        from: u64,
        max_bytes: usize,
        upper_bound: u64,
    ) -> Vec<(u64, Vec<u8>)> {
        let bound = upper_bound.min(self.log_end);
        if from >= bound {
            return Vec::new();
        }
        let Some(first) = self.batches.iter().position(|b| b.last >= from) else {
            return Vec::new();
        };
        let segment = Self::segment_of(segments, self.batches[first].base);
        let segment_end = segments.get(segment + 1).copied().unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut total = 0u64;
        for b in &self.batches[first..] {
            if b.last >= bound || b.base >= segment_end {
                break;
            }
            if !out.is_empty() && total + b.size() > max_bytes as u64 {
                break;
            }
            total += b.size();
            out.push((b.base, b.bytes.clone()));
        }
        out
    }

    fn offset_for_timestamp(&self, timestamp: i64) -> Option<(u64, i64)> {
        self.batches
            .iter()
            .flat_map(|b| b.record_timestamps())
            .find(|&(offset, ts)| offset >= self.log_start && ts >= timestamp)
    }

    /// Drops the batches of segments that were deleted.
    fn drop_below(&mut self, first_segment: u64) {
        self.batches.retain(|b| b.base >= first_segment);
    }
}

struct Harness {
    storage: SimStorage,
    clock: Arc<ManualClock>,
    config: LogConfig,
    log: Option<Log>,
    model: Model,
}

impl Harness {
    fn log(&self) -> &Log {
        self.log.as_ref().unwrap()
    }

    fn reopen(&mut self) {
        self.log = Some(open(&self.storage, &self.config, &self.clock));
    }

    fn apply(&mut self, op: &Op) {
        let segments = self.log.as_ref().unwrap().segment_base_offsets();
        let m = &mut self.model;
        match op {
            Op::Append { batches, new_epoch } => {
                if *new_epoch {
                    m.epoch += 1;
                }
                let mut records = Vec::new();
                let mut stored = Vec::new();
                let mut base = m.log_end;
                for spec in batches {
                    let ts = m.next_ts + spec.ts_jitter;
                    m.next_ts += 10;
                    let producer = producer_batch(spec.count, spec.value_size, ts);
                    let batch = Stored::new(&producer, base, m.epoch, ts);
                    base = batch.last + 1;
                    records.extend_from_slice(&producer);
                    stored.push(batch);
                }
                let info = self
                    .log
                    .as_ref()
                    .unwrap()
                    .append(&records, m.epoch)
                    .unwrap();
                assert_eq!(info.base_offset, m.log_end);
                assert_eq!(info.last_offset, base - 1);
                m.log_end = base;
                m.batches.extend(stored);
            }
            Op::Read {
                from,
                max_bytes,
                bound,
            } => {
                let from = pick(*from, m.log_start.saturating_sub(2), m.log_end + 2);
                let upper = m.bound(bound);
                check_read(
                    self.log.as_ref().unwrap(),
                    m,
                    &segments,
                    from,
                    *max_bytes,
                    upper,
                );
            }
            Op::Roll => {
                self.log.as_ref().unwrap().roll().unwrap();
                let mut expected = segments.clone();
                if *segments.last().unwrap() < m.log_end {
                    expected.push(m.log_end);
                }
                assert_eq!(self.log.as_ref().unwrap().segment_base_offsets(), expected);
            }
            Op::Flush => {
                self.log.as_ref().unwrap().flush().unwrap();
                assert_eq!(self.log.as_ref().unwrap().durable_offset(), m.log_end);
            }
            Op::TruncateTo(sel) => {
                let offset = pick(*sel, m.log_start.saturating_sub(3), m.log_end + 1);
                let mut expected_segments = segments.clone();
                if offset >= m.log_end {
                    // Nothing to remove.
                } else if offset < m.log_start {
                    m.batches.clear();
                    m.log_start = offset;
                    m.log_end = offset;
                    expected_segments = vec![offset];
                } else {
                    let cut = m.batches.iter().position(|b| b.last >= offset).unwrap();
                    m.log_end = m.batches[cut].base;
                    m.batches.truncate(cut);
                    m.log_start = m.log_start.min(m.log_end);
                    expected_segments.retain(|&b| b <= offset);
                }
                self.log.as_ref().unwrap().truncate_to(offset).unwrap();
                assert_eq!(
                    self.log.as_ref().unwrap().segment_base_offsets(),
                    expected_segments
                );
            }
            Op::DeleteRecordsBefore(sel) => {
                let offset = pick(*sel, m.log_start.saturating_sub(2), m.log_end + 2);
                let result = self.log.as_ref().unwrap().delete_records_before(offset);
                if offset > m.log_end {
                    assert!(
                        matches!(result, Err(LogError::OffsetOutOfRange { .. })),
                        "{result:?}"
                    );
                } else if offset <= m.log_start {
                    assert_eq!(result.unwrap(), m.log_start);
                } else {
                    assert_eq!(result.unwrap(), offset);
                    m.log_start = offset;
                    let keep = segments
                        .windows(2)
                        .take_while(|pair| pair[1] <= offset)
                        .count();
                    let expected = segments[keep..].to_vec();
                    m.drop_below(expected[0]);
                    assert_eq!(self.log.as_ref().unwrap().segment_base_offsets(), expected);
                }
            }
            Op::Retention {
                retention_bytes,
                bound,
                delete_at_once,
            } => {
                let upper = m.bound(bound);
                let sizes = m.segment_sizes(&segments);
                let mut total: u64 = sizes.iter().sum();
                let mut doomed = 0;
                let mut doomed_bytes = 0;
                for i in 0..segments.len() - 1 {
                    let next = segments[i + 1];
                    if next > upper {
                        break;
                    }
                    let oversize =
                        *retention_bytes >= 0 && total - sizes[i] >= *retention_bytes as u64;
                    if !(oversize || next <= m.log_start) {
                        break;
                    }
                    total -= sizes[i];
                    doomed += 1;
                    doomed_bytes += sizes[i];
                }
                let remaining = segments[doomed..].to_vec();
                m.drop_below(remaining[0]);
                m.log_start = m.log_start.max(remaining[0]);
                let log = self.log.as_ref().unwrap();
                log.set_config(LogConfig {
                    retention_bytes: *retention_bytes,
                    file_delete_delay_ms: if *delete_at_once { 0 } else { 60_000 },
                    ..self.config.clone()
                })
                .unwrap();
                let outcome = log.enforce_retention(upper).unwrap();
                assert_eq!(outcome.deleted_segments, doomed);
                assert_eq!(outcome.deleted_bytes, doomed_bytes);
                assert_eq!(outcome.log_start_offset, m.log_start);
                assert_eq!(log.segment_base_offsets(), remaining);
            }
            Op::CleanReopen => {
                self.log.take().unwrap().close().unwrap();
                self.reopen();
            }
            Op::UncleanReopen => {
                drop(self.log.take());
                self.reopen();
            }
        }
    }

    /// Checks everything the model knows after a step.
    fn check(&self, probe: u16) {
        let log = self.log();
        let m = &self.model;
        assert_eq!(log.log_start_offset(), m.log_start, "log start offset");
        assert_eq!(log.log_end_offset(), m.log_end, "log end offset");

        let segments = log.segment_base_offsets();
        assert!(segments.windows(2).all(|p| p[0] < p[1]), "{segments:?}");
        assert!(segments[0] <= m.log_start, "{segments:?}");
        if let Some(first) = m.batches.first() {
            assert_eq!(first.base, segments[0], "first segment starts the log");
        }
        for (i, &base) in segments.iter().enumerate() {
            let starts_batch = m.batches.iter().any(|b| b.base == base);
            let empty_active = i + 1 == segments.len() && base == m.log_end;
            assert!(
                starts_batch || empty_active,
                "segment {base} does not start at a batch: {segments:?}"
            );
        }
        let total: u64 = m.batches.iter().map(Stored::size).sum();
        assert_eq!(log.size_bytes(), total, "size of all segments");

        // Every readable batch, in order, exactly as stored.
        let expected: Vec<_> = m
            .batches
            .iter()
            .filter(|b| b.last >= m.log_start)
            .map(|b| (b.base, b.bytes.clone()))
            .collect();
        assert_eq!(read_all(log, m.log_start).unwrap(), expected);
        check_read(log, m, &segments, m.log_end, 1 << 20, u64::MAX);

        let lo = T0 - 40;
        let hi = m.next_ts + 40;
        let target = lo + i64::from(probe) % (hi - lo + 1);
        let found = log
            .offset_for_timestamp(target)
            .unwrap()
            .map(|t| (t.offset, t.timestamp));
        assert_eq!(
            found,
            m.offset_for_timestamp(target),
            "offset_for_timestamp({target})"
        );
    }
}

fn check_read(log: &Log, m: &Model, segments: &[u64], from: u64, max_bytes: usize, upper: u64) {
    let result = log.read(from, max_bytes, upper);
    check_read_in_memory(log, from, max_bytes, upper, &result);
    if from < m.log_start || from > m.log_end {
        assert!(
            matches!(result, Err(LogError::OffsetOutOfRange { .. })),
            "read({from}) outside [{}, {}]: {result:?}",
            m.log_start,
            m.log_end
        );
        return;
    }
    let slice = result.unwrap();
    let got = split(&slice.to_bytes().unwrap());
    let expected = m.read(segments, from, max_bytes, upper);
    assert_eq!(
        got.iter().map(|b| b.0).collect::<Vec<_>>(),
        expected.iter().map(|b| b.0).collect::<Vec<_>>(),
        "read({from}, {max_bytes}, {upper}) base offsets; segments {segments:?}"
    );
    assert_eq!(got, expected, "read({from}, {max_bytes}, {upper}) bytes");
    if let Some(first) = got.first() {
        assert_eq!(slice.first_offset(), first.0);
        assert_eq!(
            slice.len(),
            got.iter().map(|b| b.1.len() as u64).sum::<u64>()
        );
    }
}

/// A read answered from memory is the read from the disk, when it is
/// answered at all.
fn check_read_in_memory(
    log: &Log,
    from: u64,
    max_bytes: usize,
    upper: u64,
    read: &Result<weir_log::LogSlice, LogError>,
) {
    let Some(in_memory) = log.try_read_in_memory(from, max_bytes, upper) else {
        return;
    };
    match (&in_memory, read) {
        (Ok(fast), Ok(slow)) => {
            assert_eq!(
                (fast.position(), fast.len()),
                (slow.position(), slow.len()),
                "read({from}, {max_bytes}, {upper}) in memory"
            );
            if !slow.is_empty() {
                assert_eq!(fast.first_offset(), slow.first_offset());
                assert_eq!(fast.path(), slow.path());
            }
        }
        (Err(LogError::OffsetOutOfRange { .. }), Err(LogError::OffsetOutOfRange { .. })) => {}
        _ => panic!(
            "read({from}, {max_bytes}, {upper}): {in_memory:?} in memory, {read:?} from disk"
        ),
    }
}

fn run(config: LogConfig, ops: Vec<(Op, u16)>) {
    let storage = SimStorage::new();
    let clock = Arc::new(ManualClock::new(T0));
    let log = open(&storage, &config, &clock);
    let mut h = Harness {
        storage,
        clock,
        config,
        log: Some(log),
        model: Model {
            batches: Vec::new(),
            log_start: 0,
            log_end: 0,
            epoch: 0,
            next_ts: T0,
        },
    };
    h.check(0);
    for (op, probe) in &ops {
        h.apply(op);
        h.check(*probe);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn log_agrees_with_the_model(
        config in config(),
        ops in prop::collection::vec((op(), any::<u16>()), 1..60),
    ) {
        run(config, ops);
    }
}
