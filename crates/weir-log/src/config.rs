//! Per-log settings, named after the Kafka topic configs they implement.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::batch::DEFAULT_MAX_MESSAGE_BYTES;

/// `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// Keep the producer's timestamps.
    #[default]
    CreateTime,
    /// Stamp every batch with the broker's clock at append.
    LogAppendTime,
}

/// Settings of one partition log. Defaults are Kafka's.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty segment this old.
    pub segment_ms: i64,
    /// `segment.index.bytes`: roll when the offset index reaches this size.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: log bytes between two offset index entries.
    pub index_interval_bytes: u64,
    /// `max.message.bytes`: largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `flush.messages`: fsync after this many records (`u64::MAX`: never).
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the oldest unflushed record is this old
    /// (`i64::MAX`: never).
    pub flush_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older (-1: never).
    pub retention_ms: i64,
    /// `retention.bytes`: delete old segments beyond this size (-1: never).
    pub retention_bytes: i64,
    /// `file.delete.delay.ms`: how long a deleted segment stays readable.
    pub file_delete_delay_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            timestamp_type: TimestampType::CreateTime,
            flush_messages: u64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            file_delete_delay_ms: 60_000,
        }
    }
}

impl LogConfig {
    /// Checks the settings against the limits of the on-disk format.
    pub fn validate(&self) -> Result<(), crate::LogError> {
        let invalid = |msg: String| Err(crate::LogError::InvalidConfig(msg));
        if !(14..=i32::MAX as u64).contains(&self.segment_bytes) {
            return invalid(format!(
                "segment.bytes {} must be between 14 and {}",
                self.segment_bytes,
                i32::MAX
            ));
        }
        if self.segment_index_bytes < 4 {
            return invalid(format!(
                "segment.index.bytes {} must be at least 4",
                self.segment_index_bytes
            ));
        }
        if self.segment_ms < 1 {
            return invalid(format!("segment.ms {} must be at least 1", self.segment_ms));
        }
        if self.flush_messages < 1 {
            return invalid("flush.messages must be at least 1".to_owned());
        }
        if self.flush_ms < 0 {
            return invalid(format!("flush.ms {} must not be negative", self.flush_ms));
        }
        Ok(())
    }
}

/// Wall-clock milliseconds since the Unix epoch, replaceable in tests.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn new(now_ms: i64) -> Self {
        Self(now_ms.into())
    }
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now_ms(&self) -> i64 {
        (**self).now_ms()
    }
}
