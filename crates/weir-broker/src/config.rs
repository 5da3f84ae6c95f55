//! Broker settings. Every Kafka broker config keeps its Kafka name; the binary
//! turns each name into a flag (`--log-retention-ms`), an environment
//! variable (`WEIR_LOG_RETENTION_MS`) and a TOML key (`"log.retention.ms"`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A broker config Weir understands, with Kafka's default.
#[derive(Debug, Clone, Copy)]
pub struct BrokerConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// The Kafka broker configs Weir supports.
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    BrokerConfigDef {
        name: "num.partitions",
        default: "1",
        doc: "Partitions of an auto-created topic, or of one created without a count",
    },
    BrokerConfigDef {
        name: "auto.create.topics.enable",
        default: "true",
        doc: "Create a topic when a client asks for metadata of an unknown one",
    },
    BrokerConfigDef {
        name: "log.segment.bytes",
        default: "1073741824",
        doc: "Default segment.bytes of topics",
    },
    BrokerConfigDef {
        name: "log.retention.ms",
        default: "604800000",
        doc: "Default retention.ms of topics (-1: keep forever)",
    },
    BrokerConfigDef {
        name: "log.retention.bytes",
        default: "-1",
        doc: "Default retention.bytes of topics (-1: no limit)",
    },
    BrokerConfigDef {
        name: "log.retention.check.interval.ms",
        default: "300000",
        doc: "How often retention is enforced",
    },
    BrokerConfigDef {
        name: "message.max.bytes",
        default: "1048588",
        doc: "Default max.message.bytes of topics: the largest record batch accepted",
    },
    BrokerConfigDef {
        name: "socket.request.max.bytes",
        default: "104857600",
        doc: "Largest request accepted; larger frames close the connection",
    },
    BrokerConfigDef {
        name: "log.flush.interval.messages",
        default: "9223372036854775807",
        doc: "Default flush.messages of topics: fsync after this many records",
    },
    BrokerConfigDef {
        name: "log.flush.interval.ms",
        default: "9223372036854775807",
        doc: "Default flush.ms of topics: fsync when unflushed data is this old",
    },
    BrokerConfigDef {
        name: "connections.max.idle.ms",
        default: "600000",
        doc: "Close connections idle this long",
    },
    BrokerConfigDef {
        name: "queued.max.request.bytes",
        default: "536870912",
        doc: "Memory for requests being read or processed, across all connections",
    },
    BrokerConfigDef {
        name: "offsets.topic.num.partitions",
        default: "50",
        doc: "Partitions of __consumer_offsets, fixed when it is first created",
    },
    BrokerConfigDef {
        name: "offsets.retention.minutes",
        default: "10080",
        doc: "How long committed offsets of a group without members are kept",
    },
    BrokerConfigDef {
        name: "offsets.retention.check.interval.ms",
        default: "600000",
        doc: "How often committed offsets are checked for expiry",
    },
    BrokerConfigDef {
        name: "group.initial.rebalance.delay.ms",
        default: "3000",
        doc: "How long the first rebalance of an empty group waits for more members",
    },
    BrokerConfigDef {
        name: "group.min.session.timeout.ms",
        default: "6000",
        doc: "The smallest session timeout a group member may ask for",
    },
    BrokerConfigDef {
        name: "group.max.session.timeout.ms",
        default: "1800000",
        doc: "The largest session timeout a group member may ask for",
    },
    BrokerConfigDef {
        name: "group.max.size",
        default: "2147483647",
        doc: "The most members a consumer group may have",
    },
    BrokerConfigDef {
        name: "replica.lag.time.max.ms",
        default: "30000",
        doc: "A follower that has not caught up with its leader for this long leaves the ISR",
    },
    BrokerConfigDef {
        name: "broker.rack",
        default: "",
        doc: "This broker's rack, for rack-aware replica placement (empty: none)",
    },
    BrokerConfigDef {
        name: "broker.session.timeout.ms",
        default: "9000",
        doc: "A broker that sends no heartbeat to the active controller for this long is fenced",
    },
    BrokerConfigDef {
        name: "broker.heartbeat.interval.ms",
        default: "2000",
        doc: "How often a broker heartbeats to the active controller",
    },
    BrokerConfigDef {
        name: "default.replication.factor",
        default: "1",
        doc: "Replicas of a topic created without a replication factor",
    },
    BrokerConfigDef {
        name: "offsets.topic.replication.factor",
        default: "3",
        doc: "Replicas of __consumer_offsets (fewer while the cluster has fewer live brokers)",
    },
    BrokerConfigDef {
        name: "auto.leader.rebalance.enable",
        default: "true",
        doc: "Move leadership back to each partition's preferred replica when it is in sync",
    },
    BrokerConfigDef {
        name: "leader.imbalance.check.interval.seconds",
        default: "300",
        doc: "How often the active controller looks for partitions to give back to their preferred leader",
    },
    BrokerConfigDef {
        name: "log.cleaner.enable",
        default: "true",
        doc: "Run the log cleaner, which compacts topics whose cleanup.policy includes compact",
    },
    BrokerConfigDef {
        name: "log.cleaner.backoff.ms",
        default: "15000",
        doc: "How long the log cleaner sleeps when no log needs cleaning",
    },
    BrokerConfigDef {
        name: "log.cleaner.dedupe.buffer.size",
        default: "134217728",
        doc: "Memory for the log cleaner's key-to-offset map (24 bytes a key); a pass cleans what it covers",
    },
    BrokerConfigDef {
        name: "log.cleaner.io.max.bytes.per.second",
        default: "1.7976931348623157E308",
        doc: "The log cleaner's read plus write rate limit",
    },
    BrokerConfigDef {
        name: "log.cleanup.policy",
        default: "delete",
        doc: "Default cleanup.policy of topics: delete, compact, or compact,delete",
    },
    BrokerConfigDef {
        name: "log.cleaner.delete.retention.ms",
        default: "86400000",
        doc: "Default delete.retention.ms of topics: how long a tombstone stays once cleaned",
    },
    BrokerConfigDef {
        name: "log.cleaner.min.compaction.lag.ms",
        default: "0",
        doc: "Default min.compaction.lag.ms of topics: records younger than this are not compacted",
    },
    BrokerConfigDef {
        name: "log.cleaner.max.compaction.lag.ms",
        default: "9223372036854775807",
        doc: "Default max.compaction.lag.ms of topics: records older than this are compacted whatever the dirty ratio",
    },
    BrokerConfigDef {
        name: "log.cleaner.min.cleanable.ratio",
        default: "0.5",
        doc: "Default min.cleanable.dirty.ratio of topics: the dirty share of a log before it is cleaned",
    },
];

/// Why a config value was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid value {value:?} for {name}: {reason}")]
pub struct ConfigError {
    pub name: String,
    pub value: String,
    pub reason: String,
}

/// The broker's settings.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Host and port clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: u16,
    pub http_listen: SocketAddr,
    pub num_partitions: i32,
    pub auto_create_topics_enable: bool,
    pub log_segment_bytes: u64,
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: u64,
    pub message_max_bytes: usize,
    pub socket_request_max_bytes: usize,
    pub log_flush_interval_messages: u64,
    pub log_flush_interval_ms: i64,
    pub connections_max_idle_ms: u64,
    pub queued_max_request_bytes: usize,
    pub offsets_topic_num_partitions: i32,
    pub offsets_retention_minutes: u64,
    pub offsets_retention_check_interval_ms: u64,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub group_max_size: i32,
    pub replica_lag_time_max_ms: i64,
    pub broker_rack: Option<String>,
    pub broker_session_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub default_replication_factor: i32,
    pub offsets_topic_replication_factor: i32,
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    pub log_cleaner_enable: bool,
    pub log_cleaner_backoff_ms: u64,
    pub log_cleaner_dedupe_buffer_size: usize,
    pub log_cleaner_io_max_bytes_per_second: f64,
    pub log_cleanup_policy: weir_log::CleanupPolicy,
    pub log_cleaner_delete_retention_ms: i64,
    pub log_cleaner_min_compaction_lag_ms: i64,
    pub log_cleaner_max_compaction_lag_ms: i64,
    pub log_cleaner_min_cleanable_ratio: f64,
    /// The controller listener (Raft between controllers).
    pub controller_listen: SocketAddr,
    /// The voters of the controller quorum, id and controller address;
    /// empty for a quorum of this node alone, at `controller_listen`.
    pub controllers: Vec<(u64, SocketAddr)>,
    /// Whether this node votes in the controller quorum; a broker that is
    /// not a controller follows the metadata as a Raft learner.
    pub is_controller: bool,
    /// The Kafka-named values in force, for DescribeConfigs.
    pub values: BTreeMap<String, String>,
    /// Names set explicitly (not defaults).
    pub overridden: Vec<String>,
}

impl BrokerConfig {
    /// Builds the settings from Kafka-named values over the defaults.
    pub fn new(
        node_id: i32,
        data_dir: PathBuf,
        listen: SocketAddr,
        advertised: Option<(String, u16)>,
        http_listen: SocketAddr,
        values: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let mut merged = BTreeMap::new();
        for def in BROKER_CONFIGS {
            merged.insert(def.name.to_owned(), def.default.to_owned());
        }
        for (name, value) in values {
            if !merged.contains_key(name) {
                return Err(ConfigError {
                    name: name.clone(),
                    value: value.clone(),
                    reason: "unknown broker config".into(),
                });
            }
            merged.insert(name.clone(), value.clone());
        }
        let get = |name: &str| merged[name].as_str();
        let (advertised_host, advertised_port) =
            advertised.unwrap_or_else(|| (listen.ip().to_string(), listen.port()));
        Ok(Self {
            node_id,
            data_dir,
            listen,
            advertised_host,
            advertised_port,
            http_listen,
            num_partitions: parse_in(get, "num.partitions", 1..=1_000_000)?,
            auto_create_topics_enable: parse(get, "auto.create.topics.enable")?,
            log_segment_bytes: parse_in(get, "log.segment.bytes", 14..=i32::MAX as u64)?,
            log_retention_ms: parse_in(get, "log.retention.ms", -1..=i64::MAX)?,
            log_retention_bytes: parse_in(get, "log.retention.bytes", -1..=i64::MAX)?,
            log_retention_check_interval_ms: parse_in(
                get,
                "log.retention.check.interval.ms",
                1..=u64::MAX,
            )?,
            message_max_bytes: parse_in(get, "message.max.bytes", 0..=i32::MAX as usize)?,
            socket_request_max_bytes: parse_in(
                get,
                "socket.request.max.bytes",
                1..=i32::MAX as usize,
            )?,
            log_flush_interval_messages: parse_in(
                get,
                "log.flush.interval.messages",
                1..=u64::MAX,
            )?,
            log_flush_interval_ms: parse_in(get, "log.flush.interval.ms", 0..=i64::MAX)?,
            connections_max_idle_ms: parse_in(get, "connections.max.idle.ms", 1..=u64::MAX)?,
            queued_max_request_bytes: parse_in(
                get,
                "queued.max.request.bytes",
                1024 * 1024..=tokio::sync::Semaphore::MAX_PERMITS,
            )?,
            offsets_topic_num_partitions: parse_in(
                get,
                "offsets.topic.num.partitions",
                1..=10_000,
            )?,
            offsets_retention_minutes: parse_in(
                get,
                "offsets.retention.minutes",
                1..=i32::MAX as u64,
            )?,
            offsets_retention_check_interval_ms: parse_in(
                get,
                "offsets.retention.check.interval.ms",
                1..=u64::MAX,
            )?,
            group_initial_rebalance_delay_ms: parse_in(
                get,
                "group.initial.rebalance.delay.ms",
                0..=i32::MAX as u64,
            )?,
            group_min_session_timeout_ms: parse_in(
                get,
                "group.min.session.timeout.ms",
                0..=i32::MAX,
            )?,
            group_max_session_timeout_ms: parse_in(
                get,
                "group.max.session.timeout.ms",
                0..=i32::MAX,
            )?,
            group_max_size: parse_in(get, "group.max.size", 1..=i32::MAX)?,
            replica_lag_time_max_ms: parse_in(get, "replica.lag.time.max.ms", 1..=i32::MAX as i64)?,
            broker_rack: Some(get("broker.rack").trim().to_owned()).filter(|r| !r.is_empty()),
            broker_session_timeout_ms: parse_in(
                get,
                "broker.session.timeout.ms",
                1..=i32::MAX as u64,
            )?,
            broker_heartbeat_interval_ms: parse_in(
                get,
                "broker.heartbeat.interval.ms",
                1..=i32::MAX as u64,
            )?,
            default_replication_factor: parse_in(
                get,
                "default.replication.factor",
                1..=i16::MAX as i32,
            )?,
            offsets_topic_replication_factor: parse_in(
                get,
                "offsets.topic.replication.factor",
                1..=i16::MAX as i32,
            )?,
            auto_leader_rebalance_enable: parse(get, "auto.leader.rebalance.enable")?,
            leader_imbalance_check_interval_seconds: parse_in(
                get,
                "leader.imbalance.check.interval.seconds",
                1..=u32::MAX as u64,
            )?,
            log_cleaner_enable: parse(get, "log.cleaner.enable")?,
            log_cleaner_backoff_ms: parse_in(get, "log.cleaner.backoff.ms", 0..=u64::MAX)?,
            log_cleaner_dedupe_buffer_size: parse_in(
                get,
                "log.cleaner.dedupe.buffer.size",
                1024..=usize::MAX,
            )?,
            log_cleaner_io_max_bytes_per_second: parse_in(
                get,
                "log.cleaner.io.max.bytes.per.second",
                f64::MIN_POSITIVE..=f64::MAX,
            )?,
            log_cleanup_policy: weir_log::CleanupPolicy::parse(get("log.cleanup.policy"))
                .ok_or_else(|| ConfigError {
                    name: "log.cleanup.policy".into(),
                    value: get("log.cleanup.policy").into(),
                    reason: "must be delete, compact, or compact,delete".into(),
                })?,
            log_cleaner_delete_retention_ms: parse_in(
                get,
                "log.cleaner.delete.retention.ms",
                0..=i64::MAX,
            )?,
            log_cleaner_min_compaction_lag_ms: parse_in(
                get,
                "log.cleaner.min.compaction.lag.ms",
                0..=i64::MAX,
            )?,
            log_cleaner_max_compaction_lag_ms: parse_in(
                get,
                "log.cleaner.max.compaction.lag.ms",
                1..=i64::MAX,
            )?,
            log_cleaner_min_cleanable_ratio: parse_in(
                get,
                "log.cleaner.min.cleanable.ratio",
                0.0..=1.0,
            )?,
            controller_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            controllers: Vec::new(),
            is_controller: true,
            overridden: values.keys().cloned().collect(),
            values: merged,
        })
    }

    /// The settings of this node's controller.
    pub fn controller_settings(&self) -> weir_meta::ControllerConfig {
        weir_meta::ControllerConfig {
            broker_session_timeout: Duration::from_millis(self.broker_session_timeout_ms),
            leader_imbalance_check_interval: self
                .auto_leader_rebalance_enable
                .then(|| Duration::from_secs(self.leader_imbalance_check_interval_seconds)),
            ..weir_meta::ControllerConfig::default()
        }
    }

    /// The settings of the group membership protocol.
    pub fn group_config(&self) -> crate::group::GroupConfig {
        crate::group::GroupConfig {
            initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            min_session_timeout_ms: self.group_min_session_timeout_ms,
            max_session_timeout_ms: self.group_max_session_timeout_ms,
            max_size: self.group_max_size as usize,
            ..crate::group::GroupConfig::default()
        }
    }
}

fn parse<'a, T: std::str::FromStr>(
    get: impl Fn(&str) -> &'a str,
    name: &str,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    let value = get(name);
    value.trim().parse().map_err(|e: T::Err| ConfigError {
        name: name.to_owned(),
        value: value.to_owned(),
        reason: e.to_string(),
    })
}

fn parse_in<'a, T>(
    get: impl Fn(&str) -> &'a str,
    name: &str,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
    T::Err: std::fmt::Display,
{
    let value: T = parse(&get, name)?;
    if !range.contains(&value) {
        return Err(ConfigError {
            name: name.to_owned(),
            value: value.to_string(),
            reason: format!("must be between {} and {}", range.start(), range.end()),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(values: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let values = values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::new(
            1,
            "d".into(),
            "127.0.0.1:9092".parse().unwrap(),
            None,
            "127.0.0.1:9644".parse().unwrap(),
            &values,
        )
    }

    #[test]
    fn defaults_are_kafkas() {
        let config = build(&[]).unwrap();
        assert_eq!(config.num_partitions, 1);
        assert!(config.auto_create_topics_enable);
        assert_eq!(config.log_segment_bytes, 1 << 30);
        assert_eq!(config.log_retention_ms, 7 * 24 * 3600 * 1000);
        assert_eq!(config.message_max_bytes, 1_048_588);
        assert_eq!(config.socket_request_max_bytes, 100 * 1024 * 1024);
        assert_eq!(config.advertised_host, "127.0.0.1");
    }

    #[test]
    fn log_cleaner_configs() {
        let config = build(&[]).unwrap();
        assert!(config.log_cleaner_enable);
        assert_eq!(config.log_cleaner_backoff_ms, 15_000);
        assert_eq!(config.log_cleaner_dedupe_buffer_size, 128 << 20);
        assert_eq!(config.log_cleaner_io_max_bytes_per_second, f64::MAX);
        assert_eq!(config.log_cleanup_policy, weir_log::CleanupPolicy::DELETE);
        assert_eq!(config.log_cleaner_min_cleanable_ratio, 0.5);
        let config = build(&[
            ("log.cleaner.backoff.ms", "100"),
            ("log.cleanup.policy", "compact,delete"),
            ("log.cleaner.io.max.bytes.per.second", "1e6"),
        ])
        .unwrap();
        assert_eq!(config.log_cleaner_backoff_ms, 100);
        assert_eq!(
            config.log_cleanup_policy,
            weir_log::CleanupPolicy::COMPACT_DELETE
        );
        assert_eq!(config.log_cleaner_io_max_bytes_per_second, 1e6);
        assert!(build(&[("log.cleanup.policy", "shred")]).is_err());
        assert!(build(&[("log.cleaner.min.cleanable.ratio", "1.5")]).is_err());
    }

    #[test]
    fn values_override_and_are_checked() {
        let config = build(&[("num.partitions", "6"), ("log.retention.ms", "-1")]).unwrap();
        assert_eq!((config.num_partitions, config.log_retention_ms), (6, -1));
        let err = build(&[("num.partitions", "zero")]).unwrap_err();
        assert_eq!(err.name, "num.partitions");
        assert!(build(&[("num.partitions", "0")]).is_err());
        assert!(build(&[("no.such.config", "1")]).is_err());
    }
}
