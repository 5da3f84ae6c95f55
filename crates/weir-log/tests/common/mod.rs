//! Helpers shared by the model, crash, corruption and fault tests: batches
//! as the log stores them, and reads of the whole log.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_log::batch::BatchHeader;
use weir_log::sim::SimStorage;
use weir_log::testing::BatchBuilder;
use weir_log::{Log, LogConfig, LogError, ManualClock};

pub(crate) const DIR: &str = "/data/topic-0";
pub(crate) const T0: i64 = 1_700_000_000_000;

/// A batch as the log stores it: the producer's bytes with the base offset
/// and leader epoch patched in.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) base: u64,
    pub(crate) last: u64,
    pub(crate) first_ts: i64,
    pub(crate) bytes: Vec<u8>,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stored({}..={}, {} bytes)",
            self.base,
            self.last,
            self.bytes.len()
        )
    }
}

impl Stored {
    /// What the log stores for `producer` appended at `base` in `epoch`.
    pub(crate) fn new(producer: &[u8], base: u64, epoch: i32, first_ts: i64) -> Self {
        let header = BatchHeader::parse(producer, 0).unwrap();
        let last = base + header.last_offset_delta() as u64;
        let mut bytes = producer.to_vec();
        bytes[0..8].copy_from_slice(&(base as i64).to_be_bytes());
        bytes[12..16].copy_from_slice(&epoch.to_be_bytes());
        Self {
            base,
            last,
            first_ts,
            bytes,
        }
    }

    pub(crate) fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub(crate) fn records(&self) -> u64 {
        self.last - self.base + 1
    }

    /// (offset, timestamp) of every record.
    pub(crate) fn record_timestamps(&self) -> impl Iterator<Item = (u64, i64)> + '_ {
        (0..self.records()).map(|i| (self.base + i, self.first_ts + i as i64))
    }
}

/// A producer batch of `count` records with `value_size`-byte values and
/// timestamps `ts, ts + 1, …`.
pub(crate) fn producer_batch(count: usize, value_size: usize, ts: i64) -> Vec<u8> {
    BatchBuilder::new(count)
        .timestamp(ts)
        .value_size(value_size)
        .build()
}

/// Splits the bytes of a read into whole batches; panics on a partial one.
pub(crate) fn split(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let header = BatchHeader::parse(rest, 0).expect("a read returns whole batches");
        let size = header.total_size();
        assert!(size <= rest.len(), "a read returned a partial batch");
        out.push((header.base_offset() as u64, rest[..size].to_vec()));
        rest = &rest[size..];
    }
    out
}

/// Every batch from the one containing `from` to the log end, reading
/// segment after segment. Fails on the first error, or on an empty read
/// before the log end.
pub(crate) fn read_all(log: &Log, from: u64) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
    let mut out = Vec::new();
    let end = log.log_end_offset();
    let mut next = from;
    while next < end {
        let slice = log.read(next, usize::MAX, u64::MAX)?;
        let batches = split(&slice.to_bytes().expect("slice readable"));
        assert!(
            !batches.is_empty(),
            "empty read at {next} below the log end {end}"
        );
        let last = batches.last().unwrap();
        let header = BatchHeader::parse(&last.1, 0).unwrap();
        next = header.next_offset() as u64;
        out.extend(batches);
    }
    Ok(out)
}

/// The log's batches as (base offset, bytes), for comparison with reads.
pub(crate) fn as_pairs(batches: &[Stored]) -> Vec<(u64, Vec<u8>)> {
    batches.iter().map(|b| (b.base, b.bytes.clone())).collect()
}

pub(crate) fn segment_path(base: u64, suffix: &str) -> PathBuf {
    Path::new(DIR).join(format!("{base:020}.{suffix}"))
}

/// Opens the log in [`DIR`] on `storage`.
pub(crate) fn open(storage: &SimStorage, config: &LogConfig, clock: &Arc<ManualClock>) -> Log {
    try_open(storage, config, clock).expect("open the log")
}

pub(crate) fn try_open(
    storage: &SimStorage,
    config: &LogConfig,
    clock: &Arc<ManualClock>,
) -> Result<Log, LogError> {
    Log::open_with(
        DIR,
        config.clone(),
        Arc::new(storage.clone()),
        clock.clone(),
    )
}

/// Small segments and dense indexes, so that rolls and sealed segments happen.
pub(crate) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        retention_ms: -1,
        ..LogConfig::default()
    }
}
