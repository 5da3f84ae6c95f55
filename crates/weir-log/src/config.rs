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

/// `cleanup.policy`: what happens to old records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `delete`: whole segments go once `retention.ms` or `retention.bytes`
    /// says so.
    pub delete: bool,
    /// `compact`: the log cleaner keeps only the latest record of each key.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        Self::DELETE
    }
}

impl CleanupPolicy {
    pub const DELETE: Self = Self {
        delete: true,
        compact: false,
    };
    pub const COMPACT: Self = Self {
        delete: false,
        compact: true,
    };
    pub const COMPACT_DELETE: Self = Self {
        delete: true,
        compact: true,
    };

    /// Parses Kafka's comma-separated list (`compact,delete`); `None` for
    /// an unknown policy or an empty item. An empty list is neither policy:
    /// the log keeps every segment (Kafka 4.2).
    pub fn parse(value: &str) -> Option<Self> {
        let mut policy = Self {
            delete: false,
            compact: false,
        };
        let value = value.trim();
        if value.is_empty() {
            return Some(policy);
        }
        for item in value.split(',').map(str::trim) {
            match item {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                _ => return None,
            }
        }
        Some(policy)
    }
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
    /// `message.timestamp.before.max.ms`: how far in the past a producer's
    /// CreateTime timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future it may be.
    pub timestamp_after_max_ms: i64,
    /// `flush.messages`: fsync after this many records (`u64::MAX`: never).
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the oldest unflushed record is this old
    /// (`i64::MAX`: never).
    pub flush_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older (-1: never).
    pub retention_ms: i64,
    /// `retention.bytes`: delete old segments beyond this size (-1: never).
    pub retention_bytes: i64,
    /// `local.retention.ms`: in tiered storage, how long copied segments
    /// stay local (-2: `retention.ms`).
    pub local_retention_ms: i64,
    /// `local.retention.bytes`: in tiered storage, the local size beyond
    /// which copied segments go (-2: `retention.bytes`).
    pub local_retention_bytes: i64,
    /// `remote.storage.enable`: the log's older segments live in remote
    /// storage too, so its leader-epoch cache reaches below its first
    /// local segment, down to the log start across both tiers.
    pub remote_storage_enable: bool,
    /// `file.delete.delay.ms`: how long a deleted segment stays readable.
    pub file_delete_delay_ms: i64,
    /// `cleanup.policy`: retention deletes segments only under `delete`;
    /// the log cleaner compacts only under `compact`.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone stays after the cleaner
    /// first saw it.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a record older than this is compacted
    /// whatever the dirty ratio (and the active segment rolls by then).
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: the share of the log that must be dirty
    /// before it is cleaned.
    pub min_cleanable_dirty_ratio: f64,
    /// `weir.delivery.delay.ms`: consumers read a batch only once its
    /// newest timestamp is this old (0: at once). Replicas read everything.
    pub delivery_delay_ms: i64,
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
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            flush_messages: u64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            local_retention_ms: -2,
            local_retention_bytes: -2,
            remote_storage_enable: false,
            file_delete_delay_ms: 60_000,
            cleanup_policy: CleanupPolicy::DELETE,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            delivery_delay_ms: 0,
        }
    }
}

/// Sets the field of a [`LogConfig`] that implements one topic config from
/// a value of that config, trimmed; `None`, leaving the field as it was,
/// when the value does not parse.
type Setter = fn(&mut LogConfig, &str) -> Option<()>;

/// Each topic config a [`LogConfig`] implements, by name, with the setter
/// of its field: the one place where the names meet the fields.
const TOPIC_CONFIGS: &[(&str, Setter)] = &[
    ("cleanup.policy", |c, v| {
        CleanupPolicy::parse(v).map(|policy| c.cleanup_policy = policy)
    }),
    ("delete.retention.ms", |c, v| {
        long(v).map(|n| c.delete_retention_ms = n)
    }),
    ("file.delete.delay.ms", |c, v| {
        long(v).map(|n| c.file_delete_delay_ms = n)
    }),
    ("flush.messages", |c, v| {
        long(v).map(|n| c.flush_messages = n as u64)
    }),
    ("flush.ms", |c, v| long(v).map(|n| c.flush_ms = n)),
    ("index.interval.bytes", |c, v| {
        long(v).map(|n| c.index_interval_bytes = n as u64)
    }),
    ("local.retention.bytes", |c, v| {
        long(v).map(|n| c.local_retention_bytes = n)
    }),
    ("local.retention.ms", |c, v| {
        long(v).map(|n| c.local_retention_ms = n)
    }),
    ("max.compaction.lag.ms", |c, v| {
        long(v).map(|n| c.max_compaction_lag_ms = n)
    }),
    ("max.message.bytes", |c, v| {
        long(v).map(|n| c.max_message_bytes = n as usize)
    }),
    ("message.timestamp.after.max.ms", |c, v| {
        long(v).map(|n| c.timestamp_after_max_ms = n)
    }),
    ("message.timestamp.before.max.ms", |c, v| {
        long(v).map(|n| c.timestamp_before_max_ms = n)
    }),
    ("message.timestamp.type", |c, v| {
        c.timestamp_type = if v == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        };
        Some(())
    }),
    ("min.cleanable.dirty.ratio", |c, v| {
        v.parse()
            .ok()
            .map(|ratio| c.min_cleanable_dirty_ratio = ratio)
    }),
    ("min.compaction.lag.ms", |c, v| {
        long(v).map(|n| c.min_compaction_lag_ms = n)
    }),
    ("remote.storage.enable", |c, v| {
        let enable = if v.eq_ignore_ascii_case("true") {
            true
        } else if v.eq_ignore_ascii_case("false") {
            false
        } else {
            return None;
        };
        c.remote_storage_enable = enable;
        Some(())
    }),
    ("retention.bytes", |c, v| {
        long(v).map(|n| c.retention_bytes = n)
    }),
    ("retention.ms", |c, v| long(v).map(|n| c.retention_ms = n)),
    ("segment.bytes", |c, v| {
        long(v).map(|n| c.segment_bytes = n as u64)
    }),
    ("segment.index.bytes", |c, v| {
        long(v).map(|n| c.segment_index_bytes = n as u64)
    }),
    ("segment.ms", |c, v| long(v).map(|n| c.segment_ms = n)),
    ("weir.delivery.delay.ms", |c, v| {
        long(v).map(|n| c.delivery_delay_ms = n.max(0))
    }),
];

/// A value of a LONG topic config.
fn long(value: &str) -> Option<i64> {
    value.parse().ok()
}

impl LogConfig {
    /// The local (time, size) retention of a log in tiered storage, with
    /// -2 resolved to the total's.
    pub fn local_retention(&self) -> (i64, i64) {
        let resolve = |local: i64, total: i64| if local == -2 { total } else { local };
        (
            resolve(self.local_retention_ms, self.retention_ms),
            resolve(self.local_retention_bytes, self.retention_bytes),
        )
    }

    /// The names of the topic configs these settings implement.
    pub fn topic_configs() -> impl Iterator<Item = &'static str> {
        TOPIC_CONFIGS.iter().map(|(name, _)| *name)
    }

    /// Sets what the topic config `name` says from its `value`; `false`,
    /// with nothing changed, for a topic config that does not shape the
    /// log or a value that does not parse.
    pub fn set(&mut self, name: &str, value: &str) -> bool {
        TOPIC_CONFIGS
            .iter()
            .find(|(config, _)| *config == name)
            .and_then(|(_, set)| set(self, value.trim()))
            .is_some()
    }

    /// The age at which the active segment rolls: `segment.ms`, or
    /// `max.compaction.lag.ms` when that is shorter on a compacted log (a
    /// record cannot be compacted while it is in the active segment).
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

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
        if self.delete_retention_ms < 0 || self.min_compaction_lag_ms < 0 {
            return invalid(format!(
                "delete.retention.ms {} and min.compaction.lag.ms {} must not be negative",
                self.delete_retention_ms, self.min_compaction_lag_ms
            ));
        }
        if self.max_compaction_lag_ms < 1 {
            return invalid(format!(
                "max.compaction.lag.ms {} must be at least 1",
                self.max_compaction_lag_ms
            ));
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return invalid(format!(
                "min.cleanable.dirty.ratio {} must be between 0 and 1",
                self.min_cleanable_dirty_ratio
            ));
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

#[cfg(test)]
mod tests {
    use super::{CleanupPolicy, LogConfig, TimestampType, TOPIC_CONFIGS};

    #[test]
    fn topic_configs_set_their_field_and_bad_values_leave_it() {
        for pair in TOPIC_CONFIGS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} >= {}", pair[0].0, pair[1].0);
        }
        let mut config = LogConfig::default();
        assert!(config.set("segment.bytes", " 4096 "));
        assert!(config.set("cleanup.policy", "compact,delete"));
        assert!(config.set("message.timestamp.type", "LogAppendTime"));
        assert!(config.set("weir.delivery.delay.ms", "-5"));
        assert_eq!(config.segment_bytes, 4096);
        assert_eq!(config.cleanup_policy, CleanupPolicy::COMPACT_DELETE);
        assert_eq!(config.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(config.delivery_delay_ms, 0);
        assert!(!config.set("segment.bytes", "big"));
        assert!(!config.set("min.cleanable.dirty.ratio", "half"));
        assert!(!config.set("compression.type", "zstd"));
        assert_eq!(config.segment_bytes, 4096);
        assert_eq!(config.min_cleanable_dirty_ratio, 0.5);
    }

    #[test]
    fn cleanup_policy_parses_kafkas_lists_the_empty_one_included() {
        let none = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for (value, want) in [
            ("delete", Some(CleanupPolicy::DELETE)),
            ("compact", Some(CleanupPolicy::COMPACT)),
            ("delete, compact", Some(CleanupPolicy::COMPACT_DELETE)),
            ("", Some(none)),
            ("  ", Some(none)),
            ("compact,", None),
            ("shred", None),
        ] {
            assert_eq!(CleanupPolicy::parse(value), want, "{value:?}");
        }
    }
}
