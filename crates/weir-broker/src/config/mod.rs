//! Broker settings (Kafka's `KafkaConfig`). Every Kafka broker config keeps
//! its Kafka name; the binary turns each name into a flag
//! (`--log-retention-ms`), an environment variable (`WEIR_LOG_RETENTION_MS`)
//! and a TOML key (`"log.retention.ms"`).
//!
//! Three registries, one row per config: [`BROKER_CONFIGS`], the configs
//! Weir acts on; [`STARTUP_CONFIGS`], how the node was started; and
//! [`INERT_CONFIGS`], the rest of Kafka 4.x's broker configs, accepted,
//! validated, stored and described with Kafka's default, but with no
//! effect on Weir (Kerberos, ZooKeeper, JMX and metrics reporters, thread
//! pools, tiered storage, …). Together they know every name of Kafka's
//! `AbstractKafkaConfig.CONFIG_DEF`.
//!
//! The rows of the first one also declare the [`BrokerConfig`] settings
//! they fill and how, and those of the second the value each describes
//! from the [`Startup`], so that a config is written down once.

pub mod features;
pub mod groups;
pub mod listeners;
pub mod replica_selector;
pub mod tls;
pub mod topic;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use weir_coord::consumer::ConsumerGroupConfig;
use weir_log::CleanupPolicy;
use weir_meta::topic_config::{ConfigType, Valid};

use crate::config::groups::ShareBrokerConfig;
use crate::config::listeners::{Listener, CONTROLLER_LISTENER, DEFAULT_PROTOCOL_MAP};
use crate::config::replica_selector::ReplicaSelector;

/// A broker config Weir understands, with Kafka's default.
#[derive(Debug, Clone, Copy)]
pub struct BrokerConfigDef {
    pub name: &'static str,
    /// Kafka's default; `None` where Kafka's is null (described as null).
    pub default: Option<&'static str>,
    /// The value type, as DescribeConfigs reports it.
    pub config_type: ConfigType,
    /// Whether AlterConfigs may change it while the broker runs, for one
    /// broker or as the cluster-wide default: the configs Kafka's
    /// `DynamicLogConfig` (the broker defaults of topic configs) and
    /// `LogCleaner` reconfigure. The others (identity, listeners, storage,
    /// membership, groups) are read once at start.
    pub dynamic: bool,
    /// A dynamic config Kafka lets AlterConfigs set for one broker only,
    /// never as the cluster-wide default (Kafka's `PerBrokerConfigs`:
    /// listeners, TLS and SASL settings).
    pub per_broker: bool,
    /// What values Kafka's `ConfigDef` accepts beyond the type.
    pub valid: Valid,
    pub doc: &'static str,
}

impl BrokerConfigDef {
    /// Checks `value` as Kafka's `ConfigDef` does: its type, then
    /// [`valid`](Self::valid).
    pub fn check(&self, value: &str) -> Result<(), ConfigError> {
        weir_meta::topic_config::check_value(self.name, self.config_type, self.valid, value)
            .map_err(|reason| ConfigError {
                name: self.name.to_owned(),
                value: value.to_owned(),
                reason,
            })
    }
}

/// The definition of the broker config `name`, one of [`BROKER_CONFIGS`],
/// [`STARTUP_CONFIGS`] or [`INERT_CONFIGS`].
pub fn lookup(name: &str) -> Option<&'static BrokerConfigDef> {
    BROKER_CONFIGS
        .iter()
        .chain(STARTUP_CONFIGS)
        .find(|def| def.name == name)
        .or_else(|| {
            INERT_CONFIGS
                .binary_search_by(|def| def.name.cmp(name))
                .ok()
                .map(|i| &INERT_CONFIGS[i])
        })
}

/// The configs set at start or with AlterConfigs: [`BROKER_CONFIGS`] and
/// [`INERT_CONFIGS`] (the [`STARTUP_CONFIGS`] have flags of their own).
pub fn settable() -> impl Iterator<Item = &'static BrokerConfigDef> {
    BROKER_CONFIGS.iter().chain(INERT_CONFIGS)
}

/// The names that are one config given in different units, in Kafka's
/// order of precedence (`DynamicBrokerConfig.brokerConfigSynonyms`): the
/// first one set wins, at any level.
pub fn unit_synonyms(name: &str) -> &'static [&'static str] {
    const RETENTION: &[&str] = &[
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ];
    const ROLL: &[&str] = &["log.roll.ms", "log.roll.hours"];
    const JITTER: &[&str] = &["log.roll.jitter.ms", "log.roll.jitter.hours"];
    match name {
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => RETENTION,
        "log.roll.ms" | "log.roll.hours" => ROLL,
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => JITTER,
        _ => &[],
    }
}

/// A value of one of the [`unit_synonyms`] in milliseconds; `None` if it
/// is not a number.
pub fn in_millis(name: &str, value: &str) -> Option<i64> {
    let n: i64 = value.trim().parse().ok()?;
    let unit = if name.ends_with(".hours") {
        3_600_000
    } else if name.ends_with(".minutes") {
        60_000
    } else {
        1
    };
    Some(n.saturating_mul(unit))
}

/// Where a config value comes from, as DescribeConfigs reports it (Kafka's
/// `ConfigSource`), in Kafka's order of precedence for broker configs:
/// dynamic per broker, dynamic cluster default, static, default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    TopicConfig = 1,
    DynamicBrokerConfig = 2,
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
    /// A group's own config (GROUP config resource).
    GroupConfig = 8,
}

/// One [`BrokerConfigDef`]; `update` is Kafka's update mode: ReadOnly,
/// ClusterWide (dynamic) or PerBroker (dynamic, for one broker only).
macro_rules! broker_def {
    ($name:literal, $ty:ident, $default:expr, $update:ident, $valid:expr, $doc:expr) => {
        BrokerConfigDef {
            name: $name,
            default: $default,
            config_type: ConfigType::$ty,
            dynamic: broker_def!(@dynamic $update),
            per_broker: broker_def!(@per_broker $update),
            valid: $valid,
            doc: $doc,
        }
    };
    (@dynamic ReadOnly) => { false };
    (@dynamic ClusterWide) => { true };
    (@dynamic PerBroker) => { true };
    (@per_broker PerBroker) => { true };
    (@per_broker $other:ident) => { false };
}

/// The registry of the broker configs Weir acts on, one row each:
///
/// ```text
/// "kafka.name", Type, Kafka's default, update mode, Kafka's validator,
///     [setting: RustType [= reader],]
///     "What it does";
/// ```
///
/// From the rows it makes [`BROKER_CONFIGS`] (in the rows' order, which is
/// that of DescribeConfigs and of `weir serve --help`), the field of
/// [`BrokerConfig`] each row with a setting names, and
/// `BrokerConfig::read`, which fills those fields from the merged values in
/// the rows' order (the first bad value is the one reported).
///
/// Kafka's validator is checked, in Kafka's words, on every value given
/// before any setting is read. The reader is a [`Read`]: a range for
/// Weir's own bounds on a setting (refused as "must be between"), a
/// function for a setting that takes more than parsing, none for the value
/// parsed as it is. A row has one or the other bound, never both: they
/// differ in their error texts, which tools see.
///
/// A setting made of several configs checked against one another (the
/// consumer and share groups', the security settings) is declared on the
/// first of their rows, with a doc comment of its own. Rows without a
/// setting are still validated, stored and described; the topic defaults
/// among them are read by name ([`BrokerConfig::topic_default`]).
macro_rules! broker_configs {
    (@reader) => { Parsed };
    (@reader $read:expr) => { $read };
    (@doc $name:literal, $doc:literal) => { concat!("`", $name, "`: ", $doc) };
    (@doc $name:literal, $doc:literal, $($setting_doc:literal),+) => { concat!($($setting_doc, "\n"),+) };
    ($(
        $name:literal, $ty:ident, $default:expr, $update:ident, $valid:expr,
        $($(#[doc = $setting_doc:literal])* $field:ident: $field_ty:ty $(= $read:expr)?,)?
        $doc:literal;
    )*) => {
        /// The Kafka broker configs Weir acts on.
        pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
            $(broker_def!($name, $ty, $default, $update, $valid, $doc),)*
        ];

        /// The broker's settings: how the node was started, a field per
        /// setting of the registry (`broker_configs!`), and the
        /// Kafka-named values at each level.
        #[derive(Debug, Clone)]
        pub struct BrokerConfig {
            /// How the node was started; never changed by dynamic configs.
            pub startup: Startup,
            $($(
                #[doc = broker_configs!(@doc $name, $doc $(, $setting_doc)*)]
                pub $field: $field_ty,
            )?)*
            /// The Kafka-named values in force, for DescribeConfigs.
            pub values: BTreeMap<String, String>,
            /// The values given at start (flags, `WEIR_*` variables, weir.toml).
            pub static_values: BTreeMap<String, String>,
            /// The dynamic cluster-wide defaults in force (AlterConfigs on the
            /// broker resource "").
            pub dynamic_default: BTreeMap<String, String>,
            /// The dynamic configs of this broker in force (AlterConfigs on the
            /// broker resource named by its id).
            pub dynamic_broker: BTreeMap<String, String>,
        }

        impl BrokerConfig {
            /// The settings of `startup` from `merged`, the values in force
            /// of every settable config, which came from these levels.
            fn read(
                startup: Startup,
                merged: BTreeMap<String, String>,
                static_values: BTreeMap<String, String>,
                dynamic_default: BTreeMap<String, String>,
                dynamic_broker: BTreeMap<String, String>,
            ) -> Result<Self, ConfigError> {
                let from = Merged(&merged);
                Ok(Self {
                    startup,
                    $($(
                        $field: <_ as Read<$field_ty>>::read(
                            broker_configs!(@reader $($read)?),
                            from,
                            $name,
                        )?,
                    )?)*
                    values: merged,
                    static_values,
                    dynamic_default,
                    dynamic_broker,
                })
            }
        }
    };
}

broker_configs! {
    "num.partitions", Int, Some("1"), ReadOnly, Valid::Any,
        num_partitions: i32 = 1..=1_000_000,
        "Partitions of an auto-created topic, or of one created without a count";
    "auto.create.topics.enable", Boolean, Some("true"), ReadOnly, Valid::Any,
        auto_create_topics_enable: bool,
        "Create a topic when a client asks for metadata of an unknown one";
    "log.segment.bytes", Int, Some("1073741824"), ClusterWide, Valid::Any,
        log_segment_bytes: u64 = 14..=i32::MAX as u64,
        "Default segment.bytes of topics";
    "log.retention.ms", Long, None, ClusterWide, Valid::Any,
        /// `log.retention.ms`, else `log.retention.minutes`, else
        /// `log.retention.hours`, in milliseconds; -1 keeps forever.
        log_retention_ms: i64 = retention_ms,
        "Default retention.ms of topics (-1: keep forever)";
    "min.insync.replicas", Int, Some("1"), ClusterWide, Valid::AtLeast(1),
        min_insync_replicas: usize,
        "Default min.insync.replicas of topics; kept by the controller as a cluster-level config while eligible leader replicas are enabled (KIP-966)";
    "log.retention.minutes", Int, None, ReadOnly, Valid::Any,
        "Default retention.ms of topics in minutes, when log.retention.ms is not set";
    "log.retention.hours", Int, Some("168"), ReadOnly, Valid::Any,
        "Default retention.ms of topics in hours, when neither log.retention.ms nor log.retention.minutes is set";
    "log.roll.ms", Long, None, ClusterWide, Valid::Any,
        /// `log.roll.ms`, else `log.roll.hours`, in milliseconds.
        log_roll_ms: i64 = roll_ms,
        "Default segment.ms of topics: roll a segment this old (null: log.roll.hours)";
    "log.roll.hours", Int, Some("168"), ReadOnly, Valid::AtLeast(1),
        "Default segment.ms of topics in hours, when log.roll.ms is not set";
    "log.index.size.max.bytes", Int, Some("10485760"), ClusterWide, Valid::AtLeast(4),
        "Default segment.index.bytes of topics";
    "log.index.interval.bytes", Int, Some("4096"), ClusterWide, Valid::AtLeast(0),
        "Default index.interval.bytes of topics";
    "log.segment.delete.delay.ms", Long, Some("60000"), ClusterWide, Valid::AtLeast(0),
        "Default file.delete.delay.ms of topics";
    "log.message.timestamp.type", String, Some("CreateTime"), ClusterWide, Valid::OneOf(&["CreateTime", "LogAppendTime"]),
        "Default message.timestamp.type of topics";
    "log.message.timestamp.before.max.ms", Long, Some("9223372036854775807"), ClusterWide, Valid::AtLeast(0),
        "Default message.timestamp.before.max.ms of topics";
    "log.message.timestamp.after.max.ms", Long, Some("3600000"), ClusterWide, Valid::AtLeast(0),
        "Default message.timestamp.after.max.ms of topics";
    "log.retention.bytes", Long, Some("-1"), ClusterWide, Valid::Any,
        log_retention_bytes: i64 = -1..=i64::MAX,
        "Default retention.bytes of topics (-1: no limit)";
    "log.retention.check.interval.ms", Long, Some("300000"), ReadOnly, Valid::Any,
        log_retention_check_interval_ms: u64 = 1..=u64::MAX,
        "How often retention is enforced";
    "message.max.bytes", Int, Some("1048588"), ClusterWide, Valid::Any,
        message_max_bytes: usize = 0..=i32::MAX as usize,
        "Default max.message.bytes of topics: the largest record batch accepted";
    "socket.request.max.bytes", Int, Some("104857600"), ReadOnly, Valid::Any,
        socket_request_max_bytes: usize = 1..=i32::MAX as usize,
        "Largest request accepted; larger frames close the connection";
    "log.flush.interval.messages", Long, Some("9223372036854775807"), ClusterWide, Valid::Any,
        log_flush_interval_messages: u64 = 1..=u64::MAX,
        "Default flush.messages of topics: fsync after this many records";
    "log.flush.interval.ms", Long, Some("9223372036854775807"), ClusterWide, Valid::Any,
        log_flush_interval_ms: i64 = 0..=i64::MAX,
        "Default flush.ms of topics: fsync when unflushed data is this old";
    "connections.max.idle.ms", Long, Some("600000"), ReadOnly, Valid::Any,
        connections_max_idle_ms: u64 = 1..=u64::MAX,
        "Close connections idle this long";
    "queued.max.request.bytes", Long, Some("536870912"), ReadOnly, Valid::Any,
        queued_max_request_bytes: usize = 1024 * 1024..=tokio::sync::Semaphore::MAX_PERMITS,
        "Memory for requests being read or processed, across all connections; at least socket.request.max.bytes";
    "socket.request.receive.timeout.ms", Long, Some("30000"), ReadOnly, Valid::Any,
        socket_request_receive_timeout_ms: u64 = 1..=i32::MAX as u64,
        "Weir's own: how long a request's bytes may take to arrive once its first byte has (5 s at most before the client has authenticated); a connection slower than that is closed and the request's memory released";
    "max.connections", Int, Some("2147483647"), ClusterWide, Valid::Any,
        max_connections: usize = 0..=i32::MAX as usize,
        "The most connections the broker keeps open over its listeners; when reached, new ones wait to be accepted until one closes";
    "max.connections.per.ip", Int, Some("2147483647"), ClusterWide, Valid::Any,
        max_connections_per_ip: usize = 0..=i32::MAX as usize,
        "The most connections one IP address may have open; one more is closed at once";
    "max.connections.per.ip.overrides", String, Some(""), ClusterWide, Valid::Any,
        max_connections_per_ip_overrides: BTreeMap<IpAddr, usize> = per_ip_overrides,
        "Per-IP exceptions to max.connections.per.ip, as IP:count pairs separated by commas (127.0.0.1:200,10.0.0.7:50)";
    "offsets.topic.num.partitions", Int, Some("50"), ReadOnly, Valid::Any,
        offsets_topic_num_partitions: i32 = 1..=10_000,
        "Partitions of __consumer_offsets, fixed when it is first created";
    "offsets.retention.minutes", Int, Some("10080"), ReadOnly, Valid::Any,
        offsets_retention_minutes: u64 = 1..=i32::MAX as u64,
        "How long committed offsets of a group without members are kept";
    "offsets.retention.check.interval.ms", Long, Some("600000"), ReadOnly, Valid::Any,
        offsets_retention_check_interval_ms: u64 = 1..=u64::MAX,
        "How often committed offsets are checked for expiry";
    "group.initial.rebalance.delay.ms", Int, Some("3000"), ReadOnly, Valid::Any,
        group_initial_rebalance_delay_ms: u64 = 0..=i32::MAX as u64,
        "How long the first rebalance of an empty group waits for more members";
    "group.min.session.timeout.ms", Int, Some("6000"), ReadOnly, Valid::Any,
        group_min_session_timeout_ms: i32 = 0..=i32::MAX,
        "The smallest session timeout a group member may ask for";
    "group.max.session.timeout.ms", Int, Some("1800000"), ReadOnly, Valid::Any,
        group_max_session_timeout_ms: i32 = 0..=i32::MAX,
        "The largest session timeout a group member may ask for";
    "group.max.size", Int, Some("2147483647"), ReadOnly, Valid::Any,
        group_max_size: i32 = 1..=i32::MAX,
        "The most members a consumer group may have";
    "group.consumer.heartbeat.interval.ms", Int, Some("5000"), ReadOnly, Valid::Any,
        /// The `group.consumer.*` settings of consumer groups (KIP-848).
        consumer_group: ConsumerGroupConfig = consumer_group_config,
        "How often members of consumer groups (group.protocol=consumer) heartbeat";
    "group.consumer.session.timeout.ms", Int, Some("45000"), ReadOnly, Valid::Any,
        "How long a consumer group member may go without a heartbeat before it is removed";
    "group.consumer.min.heartbeat.interval.ms", Int, Some("5000"), ReadOnly, Valid::Any,
        "The shortest heartbeat interval a consumer group may be configured with";
    "group.consumer.max.heartbeat.interval.ms", Int, Some("15000"), ReadOnly, Valid::Any,
        "The longest heartbeat interval a consumer group may be configured with";
    "group.consumer.min.session.timeout.ms", Int, Some("45000"), ReadOnly, Valid::Any,
        "The shortest session timeout a consumer group may be configured with";
    "group.consumer.max.session.timeout.ms", Int, Some("60000"), ReadOnly, Valid::Any,
        "The longest session timeout a consumer group may be configured with";
    "group.consumer.max.size", Int, Some("2147483647"), ReadOnly, Valid::Any,
        "The most members a consumer group (group.protocol=consumer) may have";
    "group.consumer.migration.policy", String, Some("bidirectional"), ReadOnly, Valid::Any,
        "Whether a classic group with members becomes a consumer group when a member joins with the consumer protocol (upgrade), and back when the last such member leaves (downgrade): bidirectional, upgrade, downgrade or disabled";
    "group.consumer.assignors", List, Some("uniform,range"), ReadOnly, Valid::Any,
        "The server-side assignors of consumer groups; the first is the default";
    "group.share.heartbeat.interval.ms", Int, Some("5000"), ReadOnly, Valid::Any,
        /// The `group.share.*` settings of share groups (KIP-932).
        share_group: ShareBrokerConfig = share_group_config,
        "How often members of share groups heartbeat";
    "group.share.min.heartbeat.interval.ms", Int, Some("5000"), ReadOnly, Valid::Any,
        "The shortest heartbeat interval a share group may be configured with";
    "group.share.max.heartbeat.interval.ms", Int, Some("15000"), ReadOnly, Valid::Any,
        "The longest heartbeat interval a share group may be configured with";
    "group.share.session.timeout.ms", Int, Some("45000"), ReadOnly, Valid::Any,
        "How long a share group member may go without a heartbeat before it is removed";
    "group.share.min.session.timeout.ms", Int, Some("45000"), ReadOnly, Valid::Any,
        "The shortest session timeout a share group may be configured with";
    "group.share.max.session.timeout.ms", Int, Some("60000"), ReadOnly, Valid::Any,
        "The longest session timeout a share group may be configured with";
    "group.share.record.lock.duration.ms", Int, Some("30000"), ReadOnly, Valid::Any,
        "How long a record a share group member acquired stays with it";
    "group.share.min.record.lock.duration.ms", Int, Some("15000"), ReadOnly, Valid::Any,
        "The shortest record lock a share group may be configured with";
    "group.share.max.record.lock.duration.ms", Int, Some("60000"), ReadOnly, Valid::Any,
        "The longest record lock a share group may be configured with";
    "group.share.delivery.count.limit", Int, Some("5"), ReadOnly, Valid::Any,
        "How often a share group delivers a record before archiving it (2 to 10)";
    "group.share.partition.max.record.locks", Int, Some("2000"), ReadOnly, Valid::Any,
        "The most records of a share-partition in flight at once";
    "group.share.max.size", Int, Some("200"), ReadOnly, Valid::Any,
        "The most members a share group may have";
    "group.share.max.share.sessions", Int, Some("2000"), ReadOnly, Valid::Any,
        "The most share sessions a broker keeps (one per share group member fetching from it)";
    "errors.deadletterqueue.topic.name.prefix", String, Some("dlq."), ReadOnly, Valid::Any,
        "What the name of a share group's dead-letter topic must begin with (KIP-1191)";
    "share.coordinator.state.topic.num.partitions", Int, Some("50"), ReadOnly, Valid::Any,
        "Partitions of __share_group_state, where share-partition state is kept";
    "share.coordinator.state.topic.replication.factor", Int, Some("3"), ReadOnly, Valid::Any,
        "Replicas of __share_group_state (fewer while the cluster has fewer live brokers)";
    "share.coordinator.state.topic.min.isr", Int, Some("2"), ReadOnly, Valid::Any,
        "min.insync.replicas of __share_group_state (capped at its replication factor)";
    "max.incremental.fetch.session.cache.slots", Int, Some("1000"), ReadOnly, Valid::Any,
        max_incremental_fetch_session_cache_slots: usize = 0..=i32::MAX as usize,
        "How many incremental fetch sessions (KIP-227) the broker keeps";
    "quota.window.num", Int, Some("11"), ReadOnly, Valid::Any,
        quota_window_num: usize = 1..=i32::MAX as usize,
        "How many windows a client quota's rate is measured over";
    "quota.window.size.seconds", Int, Some("1"), ReadOnly, Valid::Any,
        quota_window_size_seconds: u32 = 1..=i32::MAX as u32,
        "The length of one window of a client quota's rate";
    "leader.replication.throttled.rate", Long, Some("9223372036854775807"), ClusterWide, Valid::Any,
        leader_replication_throttled_rate: i64 = 0..=i64::MAX,
        "Bytes per second this broker, as leader, sends to followers of the replicas \
          topics list in leader.replication.throttled.replicas; a follower not in the ISR \
          gets no records of them while the rate is over it";
    "follower.replication.throttled.rate", Long, Some("9223372036854775807"), ClusterWide, Valid::Any,
        follower_replication_throttled_rate: i64 = 0..=i64::MAX,
        "Bytes per second this broker, as follower, fetches of the replicas topics list \
          in follower.replication.throttled.replicas; a replica not caught up is not \
          fetched while the rate is over it";
    "replica.alter.log.dirs.io.max.bytes.per.second", Long, Some("9223372036854775807"), ClusterWide, Valid::Any,
        replica_alter_log_dirs_io_max_bytes_per_second: i64 = 0..=i64::MAX,
        "Bytes per second the copies of replicas moving between log directories of \
          this broker (AlterReplicaLogDirs) may make; the final catch-up under the \
          partition's lock is not held back";
    "replication.quota.window.num", Int, Some("11"), ReadOnly, Valid::Any,
        replication_quota_window_num: usize = 1..=i32::MAX as usize,
        "How many windows the replication throttles' rates are measured over";
    "replication.quota.window.size.seconds", Int, Some("1"), ReadOnly, Valid::Any,
        replication_quota_window_size_seconds: u32 = 1..=i32::MAX as u32,
        "The length of one window of the replication throttles' rates";
    "replica.lag.time.max.ms", Long, Some("30000"), ReadOnly, Valid::Any,
        replica_lag_time_max_ms: i64 = 1..=i32::MAX as i64,
        "A follower that has not caught up with its leader for this long leaves the ISR";
    "broker.rack", String, Some(""), ReadOnly, Valid::Any,
        broker_rack: Option<String> = optional_text,
        "This broker's rack, for rack-aware replica placement (empty: none)";
    "replica.selector.class", Class, None, ReadOnly, Valid::Any,
        replica_selector_class: ReplicaSelector = replica_selector,
        "How a leader picks the replica a consumer reads from (KIP-392): empty for the \
          leader, or org.apache.kafka.common.replica.RackAwareReplicaSelector for a \
          replica in the consumer's client.rack";
    "broker.session.timeout.ms", Int, Some("9000"), ReadOnly, Valid::Any,
        broker_session_timeout_ms: u64 = 1..=i32::MAX as u64,
        "A broker that sends no heartbeat to the active controller for this long is fenced";
    "initial.broker.registration.timeout.ms", Int, Some("60000"), ReadOnly, Valid::Any,
        initial_broker_registration_timeout_ms: u64 = 1..=i32::MAX as u64,
        "How long a starting node waits for the controller quorum to elect a leader and take its registration, trying again meanwhile, before it gives up";
    "broker.heartbeat.interval.ms", Int, Some("2000"), ReadOnly, Valid::Any,
        broker_heartbeat_interval_ms: u64 = 1..=i32::MAX as u64,
        "How often a broker heartbeats to the active controller";
    "default.replication.factor", Int, Some("1"), ReadOnly, Valid::Any,
        default_replication_factor: i32 = 1..=i16::MAX as i32,
        "Replicas of a topic created without a replication factor";
    "offsets.topic.replication.factor", Int, Some("3"), ReadOnly, Valid::Any,
        offsets_topic_replication_factor: i32 = 1..=i16::MAX as i32,
        "Replicas of __consumer_offsets (fewer while the cluster has fewer live brokers)";
    "auto.leader.rebalance.enable", Boolean, Some("true"), ReadOnly, Valid::Any,
        auto_leader_rebalance_enable: bool,
        "Move leadership back to each partition's preferred replica when it is in sync";
    "leader.imbalance.check.interval.seconds", Long, Some("300"), ReadOnly, Valid::Any,
        leader_imbalance_check_interval_seconds: u64 = 1..=u32::MAX as u64,
        "How often the active controller looks for partitions to give back to their preferred leader";
    "log.max.open.files", Int, Some("0"), ReadOnly, Valid::Any,
        /// `log.max.open.files`, resolved: the descriptors the partition
        /// logs may keep open.
        log_max_open_files: usize = open_file_limit,
        "A Weir setting: the most segment and index files kept open at once; the least \
          recently used are closed and reopened on demand. 0: three quarters of the \
          process's open-file limit (the soft limit is raised to the hard one at start)";
    "log.cleaner.enable", Boolean, Some("true"), ReadOnly, Valid::Any,
        log_cleaner_enable: bool,
        "Run the log cleaner, which compacts topics whose cleanup.policy includes compact";
    "log.cleaner.backoff.ms", Long, Some("15000"), ClusterWide, Valid::Any,
        log_cleaner_backoff_ms: u64 = 0..=u64::MAX,
        "How long the log cleaner sleeps when no log needs cleaning";
    "log.cleaner.dedupe.buffer.size", Long, Some("134217728"), ClusterWide, Valid::Any,
        log_cleaner_dedupe_buffer_size: usize = 1024..=usize::MAX,
        "Memory for the log cleaner's key-to-offset map (24 bytes a key); a pass cleans what it covers";
    "log.cleaner.io.max.bytes.per.second", Double, Some("1.7976931348623157E308"), ClusterWide, Valid::Any,
        log_cleaner_io_max_bytes_per_second: f64 = f64::MIN_POSITIVE..=f64::MAX,
        "The log cleaner's read plus write rate limit";
    "log.cleanup.policy", List, Some("delete"), ClusterWide, Valid::Any,
        log_cleanup_policy: CleanupPolicy = cleanup_policy,
        "Default cleanup.policy of topics: delete, compact, compact,delete, or empty (keep every segment)";
    "log.cleaner.delete.retention.ms", Long, Some("86400000"), ClusterWide, Valid::Any,
        log_cleaner_delete_retention_ms: i64 = 0..=i64::MAX,
        "Default delete.retention.ms of topics: how long a tombstone stays once cleaned";
    "log.cleaner.min.compaction.lag.ms", Long, Some("0"), ClusterWide, Valid::Any,
        log_cleaner_min_compaction_lag_ms: i64 = 0..=i64::MAX,
        "Default min.compaction.lag.ms of topics: records younger than this are not compacted";
    "log.cleaner.max.compaction.lag.ms", Long, Some("9223372036854775807"), ClusterWide, Valid::Any,
        log_cleaner_max_compaction_lag_ms: i64 = 1..=i64::MAX,
        "Default max.compaction.lag.ms of topics: records older than this are compacted whatever the dirty ratio";
    "log.cleaner.min.cleanable.ratio", Double, Some("0.5"), ClusterWide, Valid::Any,
        log_cleaner_min_cleanable_ratio: f64 = 0.0..=1.0,
        "Default min.cleanable.dirty.ratio of topics: the dirty share of a log before it is cleaned";
    "transaction.state.log.num.partitions", Int, Some("50"), ReadOnly, Valid::Any,
        transaction_state_log_num_partitions: i32 = 1..=10_000,
        "Partitions of __transaction_state, where transaction coordinators keep their state";
    "transaction.state.log.replication.factor", Int, Some("3"), ReadOnly, Valid::Any,
        transaction_state_log_replication_factor: i32 = 1..=i16::MAX as i32,
        "Replicas of __transaction_state (fewer while the cluster has fewer live brokers)";
    "transaction.state.log.min.isr", Int, Some("2"), ReadOnly, Valid::Any,
        transaction_state_log_min_isr: i32 = 1..=i16::MAX as i32,
        "min.insync.replicas of __transaction_state (capped at its replication factor)";
    "transaction.max.timeout.ms", Int, Some("900000"), ReadOnly, Valid::Any,
        transaction_max_timeout_ms: i32 = 1..=i32::MAX,
        "The longest transaction timeout a producer may ask for";
    "transactional.id.expiration.ms", Int, Some("604800000"), ReadOnly, Valid::Any,
        transactional_id_expiration_ms: i64 = 1..=i32::MAX as i64,
        "How long a transactional id without transactions is remembered";
    "producer.id.expiration.ms", Int, Some("86400000"), ReadOnly, Valid::Any,
        producer_id_expiration_ms: i64 = 1..=i32::MAX as i64,
        "How long a partition remembers an idempotent producer that wrote nothing since \
          (its sequence numbers, for de-duplicating retries)";
    "producer.id.expiration.check.interval.ms", Int, Some("600000"), ReadOnly, Valid::Any,
        producer_id_expiration_check_interval_ms: u64 = 1..=i32::MAX as u64,
        "How often idempotent producers past producer.id.expiration.ms are forgotten";
    "transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, Some("10000"), ReadOnly, Valid::Any,
        transaction_abort_timed_out_transaction_cleanup_interval_ms: u64 = 1..=i32::MAX as u64,
        "How often transactions past their timeout are looked for and aborted";
    "ssl.keystore.type", String, Some("PEM"), ReadOnly, Valid::Any,
        /// TLS, SASL and ACL settings: the `ssl.*`, `sasl.*` and
        /// authorizer configs.
        security: SecurityConfig = SecurityConfig::parse,
        "The format of the key store: PEM (the only one Weir reads)";
    "ssl.keystore.location", String, Some(""), ReadOnly, Valid::Any,
        "A PEM file with the listener's private key and certificate chain (reloaded when it changes)";
    "ssl.keystore.key", Password, Some(""), ReadOnly, Valid::Any,
        "The private key, PEM, given inline instead of ssl.keystore.location";
    "ssl.keystore.certificate.chain", Password, Some(""), ReadOnly, Valid::Any,
        "The certificate chain, PEM, given inline with ssl.keystore.key";
    "ssl.key.password", Password, Some(""), ReadOnly, Valid::Any,
        "The password of an encrypted private key: not supported, give an unencrypted PKCS#8 key";
    "ssl.truststore.type", String, Some("PEM"), ReadOnly, Valid::Any,
        "The format of the trust store: PEM";
    "ssl.truststore.location", String, Some(""), ReadOnly, Valid::Any,
        "A PEM file of the CA certificates that client certificates must chain to (reloaded when it changes)";
    "ssl.truststore.certificates", Password, Some(""), ReadOnly, Valid::Any,
        "The trusted CA certificates, PEM, given inline instead of ssl.truststore.location";
    "ssl.client.auth", String, Some("none"), ReadOnly, Valid::Any,
        "Client certificates on SSL listeners: none, requested or required";
    "ssl.principal.mapping.rules", String, Some("DEFAULT"), ReadOnly, Valid::Any,
        "Rules turning a client certificate's subject into a principal name (Kafka's RULE:pattern/replacement/[LU] syntax)";
    "ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3"), ReadOnly, Valid::Any,
        "The TLS versions accepted";
    "sasl.enabled.mechanisms", List, Some("SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"), ReadOnly, Valid::Any,
        "The SASL mechanisms SASL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER";
    "sasl.mechanism.inter.broker.protocol", String, Some("SCRAM-SHA-512"), ReadOnly, Valid::Any,
        "The SASL mechanism this broker authenticates with to the others, when the inter-broker listener uses SASL";
    "sasl.mechanism.controller.protocol", String, Some("SCRAM-SHA-512"), ReadOnly, Valid::Any,
        "The SASL mechanism this node authenticates with to the controllers, when the controller listener uses SASL: SCRAM-SHA-256 or SCRAM-SHA-512";
    "sasl.jaas.config", Password, Some(""), ReadOnly, Valid::Any,
        "This broker's own credentials for an inter-broker listener with SASL, as Kafka's login modules take them: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"…\";";
    "ssl.endpoint.identification.algorithm", String, Some("https"), ReadOnly, Valid::Any,
        "https: a broker connecting to another over TLS checks that the certificate names the host it connects to; empty: only that it is trusted";
    "connection.failed.authentication.delay.ms", Int, Some("100"), ReadOnly, Valid::Any,
        "How long the answer to a failed authentication waits (SASL on the Kafka listeners, where the connection then closes, and HTTP Basic): a password guesser waits for each answer";
    "sasl.server.max.receive.size", Int, Some("524288"), ReadOnly, Valid::Any,
        "The largest frame a client may send before it has authenticated; a larger one closes the connection";
    "connections.max.reauth.ms", Long, Some("0"), ReadOnly, Valid::Any,
        "How long a SASL session lasts before the client must authenticate again (0: for ever)";
    "sasl.oauthbearer.jwks.endpoint.url", String, Some(""), ReadOnly, Valid::Any,
        "Where OAUTHBEARER tokens' signing keys are: an https:// URL or a file:// path to a JWKS";
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", Long, Some("3600000"), ReadOnly, Valid::Any,
        "How often the JWKS of an http(s) endpoint is fetched again";
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Long, Some("10000"), ReadOnly, Valid::Any,
        "The least time between two fetches of the JWKS asked for by tokens naming a key it lacks";
    "sasl.oauthbearer.expected.audience", List, Some(""), ReadOnly, Valid::Any,
        "The audiences an OAUTHBEARER token must name one of (empty: not checked)";
    "sasl.oauthbearer.expected.issuer", String, Some(""), ReadOnly, Valid::Any,
        "The issuer an OAUTHBEARER token must name (empty: not checked)";
    "sasl.oauthbearer.sub.claim.name", String, Some("sub"), ReadOnly, Valid::Any,
        "The token claim that names the principal";
    "authorizer.class.name", String, Some(""), ReadOnly, Valid::Any,
        "Set to turn ACLs on: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or any value naming it)";
    "super.users", String, Some(""), ReadOnly, Valid::Any,
        "Principals allowed everything, separated by semicolons: User:admin;User:CN=broker";
    "allow.everyone.if.no.acl.found", Boolean, Some("false"), ReadOnly, Valid::Any,
        "With ACLs on, whether a resource no ACL names is open to everyone";
    "remote.log.storage.system.enable", Boolean, Some("false"), ReadOnly, Valid::Any,
        remote_log_storage_system_enable: bool,
        "Tiered storage on this broker: topics with remote.storage.enable copy closed segments to weir.remote.storage.url";
    "weir.remote.storage.url", String, None, ReadOnly, Valid::Any,
        remote_storage_url: Option<String> = optional_text,
        "Weir's own: the remote tier, s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///path; credentials from the standard environment (AWS_ACCESS_KEY_ID, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT_NAME, ...)";
    "weir.remote.storage.s3.endpoint", String, None, ReadOnly, Valid::Any,
        remote_storage_s3_endpoint: Option<String> = optional_text,
        "Weir's own: the endpoint of an S3-compatible server (an http:// endpoint is used as given); null: AWS";
    "weir.remote.storage.s3.region", String, None, ReadOnly, Valid::Any,
        remote_storage_s3_region: Option<String> = optional_text,
        "Weir's own: the S3 region; null: AWS_REGION, else us-east-1";
    "weir.console.enable", Boolean, Some("true"), ReadOnly, Valid::Any,
        console_enable: bool,
        "Weir's own: serve the web console at / on the HTTP listener";
    "weir.console.read.only", Boolean, Some("false"), ReadOnly, Valid::Any,
        console_read_only: bool,
        "Weir's own: the web console shows the cluster and changes nothing";
    "remote.log.manager.task.interval.ms", Long, Some("30000"), ReadOnly, Valid::AtLeast(1),
        remote_log_manager_task_interval_ms: u64 = 1..=u64::MAX,
        "How often each tiered partition's leader looks for segments to copy and remote segments to delete";
    "remote.log.manager.copy.max.bytes.per.second", Long, Some("9223372036854775807"), ClusterWide, Valid::AtLeast(1),
        remote_log_manager_copy_max_bytes_per_second: u64,
        "The most bytes per second this broker copies to remote storage";
    "remote.log.manager.fetch.max.bytes.per.second", Long, Some("9223372036854775807"), ClusterWide, Valid::AtLeast(1),
        remote_log_manager_fetch_max_bytes_per_second: u64,
        "The most bytes per second this broker reads from remote storage for fetches";
    "remote.log.index.cache.size.bytes", Long, Some("1073741824"), ClusterWide, Valid::AtLeast(1),
        remote_log_index_cache_size_bytes: u64,
        "Weir's name for Kafka's remote.log.index.file.cache.total.size.bytes: the local disk the indexes of remote segments may take";
    "remote.fetch.max.wait.ms", Int, Some("500"), ClusterWide, Valid::AtLeast(1),
        remote_fetch_max_wait_ms: u64,
        "How long a fetch waits for a remote read before answering with what it has";
    "log.local.retention.ms", Long, Some("-2"), ClusterWide, Valid::AtLeast(-2),
        "Default local.retention.ms of topics: how long a tiered topic keeps segments locally (-2: retention.ms)";
    "log.local.retention.bytes", Long, Some("-2"), ClusterWide, Valid::AtLeast(-2),
        "Default local.retention.bytes of topics: the local bytes a tiered partition keeps (-2: retention.bytes)";
}

/// The registry of the startup configs, one row each:
///
/// ```text
/// "kafka.name", Type, weir serve's default, "What it is"[, value];
/// ```
///
/// where the value in force is a function of the [`Startup`] and of
/// whether the config was given (none: the default). From the rows it
/// makes [`STARTUP_CONFIGS`] and [`Startup::value`].
macro_rules! startup_configs {
    (@value $default:expr) => { |_, _| Some($default.to_owned()) };
    (@value $default:expr, $value:expr) => { $value };
    ($($name:literal, $ty:ident, $default:expr, $doc:literal $(, $value:expr)?;)*) => {
        /// The Kafka broker configs that say how the node was started: its
        /// identity, listeners, storage and controller quorum. `weir serve`
        /// takes them as flags of its own (`--node-id`, `--listen`,
        /// `--data-dir`, …), not as one flag per config; DescribeConfigs
        /// lists them, read-only, with the value in force
        /// ([`Startup::value`]). The defaults are `weir serve`'s; "" where
        /// Kafka's is null (the value is then null too).
        pub const STARTUP_CONFIGS: &[BrokerConfigDef] = &[
            $(broker_def!($name, $ty, Some($default), ReadOnly, Valid::Any, $doc),)*
        ];

        impl Startup {
            /// The value in force of the startup config `name` (one of
            /// [`STARTUP_CONFIGS`]; `None` for another name), null where
            /// Kafka's would be (`advertised.listeners`, `log.dirs` not
            /// given), and where it comes from.
            pub fn value(&self, name: &str) -> Option<(Option<String>, ConfigSource)> {
                let value: fn(&Startup, bool) -> Option<String> = match name {
                    $($name => startup_configs!(@value $default $(, $value)?),)*
                    _ => return None,
                };
                let given = self.given.contains(name);
                let source = if given {
                    ConfigSource::StaticBrokerConfig
                } else {
                    ConfigSource::DefaultConfig
                };
                Some((value(self, given), source))
            }
        }
    };
}

startup_configs! {
    "node.id", Int, "1", "This node's id (--node-id)",
        |node, _| Some(node.node_id.to_string());
    "broker.id", Int, "1", "This broker's id: node.id, as in Kafka's KRaft mode",
        |node, _| Some(node.node_id.to_string());
    "process.roles", List, "broker,controller",
        "What this node does: broker, controller, or both (--roles)",
        |node, _| Some(node.process_roles().to_owned());
    "listeners", String, "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "The Kafka listener and, on a controller, the controller listener, at the \
         addresses they are bound to (--listen, --controller-listen)",
        |node, _| Some(node.bound_listeners());
    "advertised.listeners", String, "",
        "The address clients are told to connect to (--advertised-addr); null: the \
         Kafka listener's",
        |node, given| given.then(|| node.advertised_listeners());
    "listener.security.protocol.map", String, DEFAULT_PROTOCOL_MAP,
        "The security protocol of each listener name: NAME:PROTOCOL,…",
        |node, _| Some(node.protocol_map());
    "inter.broker.listener.name", String, "PLAINTEXT", "The listener other brokers connect to",
        |node, _| Some(node.inter_broker_listener_name.clone());
    "controller.listener.names", String, "CONTROLLER", "The name of the controller listener";
    "controller.quorum.voters", List, "",
        "The voters of the controller quorum, ID@HOST:PORT (--controllers); by \
         default this node alone, at its controller listener",
        |node, _| Some(node.quorum_voters());
    "log.dirs", String, "",
        "The directories of the partition logs, comma-separated (--log-dirs); null: the \
         data directory (--data-dir), which also holds the metadata",
        |node, given| given.then(|| node.joined_log_dirs());
    "log.dir", String, "./weir-data", "The data directory when log.dirs is not set";
    "weir.http.listener", String, "http://127.0.0.1:9644",
        "Where this broker's HTTP endpoint (/metrics, /v1/cluster, /v1/groups) is \
         reached, http:// or https:// (--http-listen); bound to every interface, at the \
         host its Kafka listener advertises",
        |node, _| Some(node.http_url());
}

/// One of [`INERT_CONFIGS`], with the doc they all share.
macro_rules! inert {
    ($name:literal, $ty:ident, $default:expr, $update:ident, $valid:expr) => {
        broker_def!(
            $name,
            $ty,
            $default,
            $update,
            $valid,
            concat!(
                "Kafka's ",
                $name,
                ": accepted, validated, stored and described, with no effect on Weir"
            )
        )
    };
}

/// The Kafka 4.x broker configs that have no effect on Weir: Kerberos and
/// SASL login tuning, ZooKeeper, JMX and metrics reporters, thread pools,
/// socket buffers, purgatories, tiered storage, delegation tokens, and the
/// internal topics' segment and codec settings. Sorted by name; each with
/// Kafka's type, default, update mode and validator, so that tools that
/// set them by name work, and the README's list "Kafka configs accepted
/// with no effect" is this table.
#[rustfmt::skip]
pub const INERT_CONFIGS: &[BrokerConfigDef] = &[
    inert!("alter.config.policy.class.name", Class, None, ReadOnly, Valid::Any),
    inert!("alter.log.dirs.replication.quota.window.num", Int, Some("11"), ReadOnly, Valid::AtLeast(1)),
    inert!("alter.log.dirs.replication.quota.window.size.seconds", Int, Some("1"), ReadOnly, Valid::AtLeast(1)),
    inert!("background.threads", Int, Some("10"), ClusterWide, Valid::AtLeast(1)),
    inert!("broker.id.generation.enable", Boolean, Some("true"), ReadOnly, Valid::Any),
    inert!("client.quota.callback.class", Class, None, ReadOnly, Valid::Any),
    inert!("compression.gzip.level", Int, Some("-1"), ClusterWide, Valid::GzipLevel),
    inert!("compression.lz4.level", Int, Some("9"), ClusterWide, Valid::Between(1, 17)),
    inert!("compression.type", String, Some("producer"), ClusterWide, Valid::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])),
    inert!("compression.zstd.level", Int, Some("3"), ClusterWide, Valid::Between(-131072, 22)),
    inert!("control.plane.listener.name", String, None, ReadOnly, Valid::Any),
    inert!("controlled.shutdown.enable", Boolean, Some("true"), ReadOnly, Valid::Any),
    inert!("controlled.shutdown.max.retries", Int, Some("3"), ReadOnly, Valid::Any),
    inert!("controlled.shutdown.retry.backoff.ms", Long, Some("5000"), ReadOnly, Valid::Any),
    inert!("controller.quorum.append.linger.ms", Int, Some("25"), ReadOnly, Valid::Any),
    inert!("controller.quorum.auto.join.enable", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("controller.quorum.bootstrap.servers", List, Some(""), ReadOnly, Valid::Any),
    inert!("controller.quorum.election.backoff.max.ms", Int, Some("1000"), ReadOnly, Valid::Any),
    inert!("controller.quorum.election.timeout.ms", Int, Some("1000"), ReadOnly, Valid::Any),
    inert!("controller.quorum.fetch.timeout.ms", Int, Some("2000"), ReadOnly, Valid::Any),
    inert!("controller.quorum.request.timeout.ms", Int, Some("2000"), ReadOnly, Valid::Any),
    inert!("controller.quorum.retry.backoff.ms", Int, Some("20"), ReadOnly, Valid::Any),
    inert!("controller.quota.window.num", Int, Some("11"), ReadOnly, Valid::AtLeast(1)),
    inert!("controller.quota.window.size.seconds", Int, Some("1"), ReadOnly, Valid::AtLeast(1)),
    inert!("controller.socket.timeout.ms", Int, Some("30000"), ReadOnly, Valid::Any),
    inert!("create.topic.policy.class.name", Class, None, ReadOnly, Valid::Any),
    inert!("delegation.token.expiry.check.interval.ms", Long, Some("3600000"), ReadOnly, Valid::AtLeast(1)),
    inert!("delegation.token.expiry.time.ms", Long, Some("86400000"), ReadOnly, Valid::AtLeast(1)),
    inert!("delegation.token.max.lifetime.ms", Long, Some("604800000"), ReadOnly, Valid::AtLeast(1)),
    inert!("delegation.token.secret.key", Password, None, ReadOnly, Valid::Any),
    inert!("delete.records.purgatory.purge.interval.requests", Int, Some("1"), ReadOnly, Valid::Any),
    inert!("delete.topic.enable", Boolean, Some("true"), ReadOnly, Valid::Any),
    inert!("early.start.listeners", String, None, ReadOnly, Valid::Any),
    inert!("eligible.leader.replicas.enable", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("fetch.max.bytes", Int, Some("57671680"), ReadOnly, Valid::AtLeast(1024)),
    inert!("fetch.purgatory.purge.interval.requests", Int, Some("1000"), ReadOnly, Valid::Any),
    inert!("group.coordinator.append.linger.ms", Int, Some("10"), ReadOnly, Valid::AtLeast(0)),
    inert!("group.coordinator.rebalance.protocols", List, Some("classic,consumer"), ReadOnly, Valid::ListOf(&["classic", "consumer", "share", "streams"])),
    inert!("group.coordinator.threads", Int, Some("1"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.share.max.delivery.count.limit", Int, Some("10"), ReadOnly, Valid::Between(2, 10)),
    inert!("group.share.max.groups", Short, Some("10"), ReadOnly, Valid::Between(1, 100)),
    inert!("group.share.max.partition.max.record.locks", Int, Some("10000"), ReadOnly, Valid::AtLeast(100)),
    inert!("group.share.min.delivery.count.limit", Int, Some("2"), ReadOnly, Valid::Between(2, 10)),
    inert!("group.share.min.partition.max.record.locks", Int, Some("100"), ReadOnly, Valid::AtLeast(100)),
    inert!("group.streams.heartbeat.interval.ms", Int, Some("5000"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.streams.initial.rebalance.delay.ms", Int, Some("3000"), ReadOnly, Valid::AtLeast(0)),
    inert!("group.streams.max.heartbeat.interval.ms", Int, Some("15000"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.streams.max.session.timeout.ms", Int, Some("60000"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.streams.max.size", Int, Some("2147483647"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.streams.max.standby.replicas", Int, Some("2"), ReadOnly, Valid::AtLeast(0)),
    inert!("group.streams.min.heartbeat.interval.ms", Int, Some("5000"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.streams.min.session.timeout.ms", Int, Some("45000"), ReadOnly, Valid::AtLeast(1)),
    inert!("group.streams.num.standby.replicas", Int, Some("0"), ReadOnly, Valid::AtLeast(0)),
    inert!("group.streams.session.timeout.ms", Int, Some("45000"), ReadOnly, Valid::AtLeast(1)),
    inert!("inter.broker.protocol.version", String, Some("4.0-IV3"), ReadOnly, Valid::Any),
    inert!("kafka.metrics.polling.interval.secs", Int, Some("10"), ReadOnly, Valid::AtLeast(1)),
    inert!("kafka.metrics.reporters", List, Some(""), ReadOnly, Valid::Any),
    inert!("leader.imbalance.per.broker.percentage", Int, Some("10"), ReadOnly, Valid::Any),
    inert!("log.cleaner.io.buffer.load.factor", Double, Some("0.9"), ClusterWide, Valid::Any),
    inert!("log.cleaner.io.buffer.size", Int, Some("524288"), ClusterWide, Valid::AtLeast(0)),
    inert!("log.cleaner.threads", Int, Some("1"), ClusterWide, Valid::AtLeast(0)),
    inert!("log.dir.failure.timeout.ms", Long, Some("30000"), ReadOnly, Valid::AtLeast(1)),
    inert!("log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), ReadOnly, Valid::AtLeast(0)),
    inert!("log.flush.scheduler.interval.ms", Long, Some("9223372036854775807"), ReadOnly, Valid::Any),
    inert!("log.flush.start.offset.checkpoint.interval.ms", Int, Some("60000"), ReadOnly, Valid::AtLeast(0)),
    inert!("log.preallocate", Boolean, Some("false"), ClusterWide, Valid::Any),
    inert!("log.roll.jitter.hours", Int, Some("0"), ReadOnly, Valid::AtLeast(0)),
    inert!("log.roll.jitter.ms", Long, None, ClusterWide, Valid::Any),
    inert!("max.connection.creation.rate", Int, Some("2147483647"), ClusterWide, Valid::AtLeast(0)),
    inert!("max.request.partition.size.limit", Int, Some("2000"), ReadOnly, Valid::AtLeast(1)),
    inert!("metadata.log.dir", String, None, ReadOnly, Valid::Any),
    inert!("metadata.log.max.record.bytes.between.snapshots", Long, Some("20971520"), ReadOnly, Valid::AtLeast(1)),
    inert!("metadata.log.max.snapshot.interval.ms", Long, Some("3600000"), ReadOnly, Valid::AtLeast(0)),
    inert!("metadata.log.segment.bytes", Int, Some("1073741824"), ReadOnly, Valid::AtLeast(12)),
    inert!("metadata.log.segment.ms", Long, Some("604800000"), ReadOnly, Valid::Any),
    inert!("metadata.max.idle.interval.ms", Int, Some("500"), ReadOnly, Valid::AtLeast(0)),
    inert!("metadata.max.retention.bytes", Long, Some("104857600"), ReadOnly, Valid::Any),
    inert!("metadata.max.retention.ms", Long, Some("604800000"), ReadOnly, Valid::Any),
    inert!("metric.reporters", List, Some("org.apache.kafka.common.metrics.JmxReporter"), ClusterWide, Valid::Any),
    inert!("metrics.num.samples", Int, Some("2"), ReadOnly, Valid::AtLeast(1)),
    inert!("metrics.recording.level", String, Some("INFO"), ReadOnly, Valid::Any),
    inert!("metrics.sample.window.ms", Long, Some("30000"), ReadOnly, Valid::AtLeast(1)),
    inert!("num.io.threads", Int, Some("8"), ClusterWide, Valid::AtLeast(1)),
    inert!("num.network.threads", Int, Some("3"), ClusterWide, Valid::AtLeast(1)),
    inert!("num.recovery.threads.per.data.dir", Int, Some("1"), ClusterWide, Valid::AtLeast(1)),
    inert!("num.replica.alter.log.dirs.threads", Int, None, ReadOnly, Valid::Any),
    inert!("num.replica.fetchers", Int, Some("1"), ClusterWide, Valid::Any),
    inert!("offset.metadata.max.bytes", Int, Some("4096"), ReadOnly, Valid::Any),
    inert!("offsets.commit.timeout.ms", Int, Some("5000"), ReadOnly, Valid::AtLeast(1)),
    inert!("offsets.load.buffer.size", Int, Some("5242880"), ReadOnly, Valid::AtLeast(1)),
    inert!("offsets.topic.compression.codec", Int, Some("0"), ReadOnly, Valid::Any),
    inert!("offsets.topic.segment.bytes", Int, Some("104857600"), ReadOnly, Valid::AtLeast(1)),
    inert!("password.encoder.cipher.algorithm", String, Some("AES/CBC/PKCS5Padding"), ReadOnly, Valid::Any),
    inert!("password.encoder.iterations", Int, Some("4096"), ReadOnly, Valid::AtLeast(1024)),
    inert!("password.encoder.key.length", Int, Some("128"), ReadOnly, Valid::AtLeast(8)),
    inert!("password.encoder.keyfactory.algorithm", String, None, ReadOnly, Valid::Any),
    inert!("password.encoder.old.secret", Password, None, ReadOnly, Valid::Any),
    inert!("password.encoder.secret", Password, None, ReadOnly, Valid::Any),
    inert!("principal.builder.class", Class, Some("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"), PerBroker, Valid::Any),
    inert!("producer.purgatory.purge.interval.requests", Int, Some("1000"), ReadOnly, Valid::Any),
    inert!("queued.max.requests", Int, Some("500"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.list.offsets.request.timeout.ms", Long, Some("30000"), ClusterWide, Valid::AtLeast(1)),
    inert!("remote.log.index.file.cache.total.size.bytes", Long, Some("1073741824"), ClusterWide, Valid::AtLeast(1)),
    inert!("remote.log.manager.copier.thread.pool.size", Int, Some("-1"), ReadOnly, Valid::Any),
    inert!("remote.log.manager.copy.quota.window.num", Int, Some("11"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.manager.copy.quota.window.size.seconds", Int, Some("1"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.manager.expiration.thread.pool.size", Int, Some("-1"), ReadOnly, Valid::Any),
    inert!("remote.log.manager.fetch.quota.window.num", Int, Some("11"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.manager.fetch.quota.window.size.seconds", Int, Some("1"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.manager.thread.pool.size", Int, Some("10"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.metadata.custom.metadata.max.bytes", Int, Some("128"), ReadOnly, Valid::AtLeast(0)),
    inert!("remote.log.metadata.manager.class.name", String, Some("org.apache.kafka.server.log.remote.metadata.storag"), ReadOnly, Valid::NonEmpty),
    inert!("remote.log.metadata.manager.class.path", String, None, ReadOnly, Valid::Any),
    inert!("remote.log.metadata.manager.impl.prefix", String, Some("rlmm.config."), ReadOnly, Valid::NonEmpty),
    inert!("remote.log.metadata.manager.listener.name", String, None, ReadOnly, Valid::NonEmpty),
    inert!("remote.log.reader.max.pending.tasks", Int, Some("100"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.reader.threads", Int, Some("10"), ReadOnly, Valid::AtLeast(1)),
    inert!("remote.log.storage.manager.class.name", String, None, ReadOnly, Valid::NonEmpty),
    inert!("remote.log.storage.manager.class.path", String, None, ReadOnly, Valid::Any),
    inert!("remote.log.storage.manager.impl.prefix", String, Some("rsm.config."), ReadOnly, Valid::NonEmpty),
    inert!("replica.fetch.backoff.ms", Int, Some("1000"), ReadOnly, Valid::AtLeast(0)),
    inert!("replica.fetch.max.bytes", Int, Some("1048576"), ReadOnly, Valid::AtLeast(0)),
    inert!("replica.fetch.min.bytes", Int, Some("1"), ReadOnly, Valid::Any),
    inert!("replica.fetch.response.max.bytes", Int, Some("10485760"), ReadOnly, Valid::AtLeast(0)),
    inert!("replica.fetch.wait.max.ms", Int, Some("500"), ReadOnly, Valid::Any),
    inert!("replica.high.watermark.checkpoint.interval.ms", Long, Some("5000"), ReadOnly, Valid::Any),
    inert!("replica.socket.receive.buffer.bytes", Int, Some("65536"), ReadOnly, Valid::Any),
    inert!("replica.socket.timeout.ms", Int, Some("30000"), ReadOnly, Valid::Any),
    inert!("request.timeout.ms", Int, Some("30000"), ReadOnly, Valid::Any),
    inert!("reserved.broker.max.id", Int, Some("1000"), ReadOnly, Valid::AtLeast(0)),
    inert!("sasl.client.callback.handler.class", Class, None, ReadOnly, Valid::Any),
    inert!("sasl.kerberos.kinit.cmd", String, Some("/usr/bin/kinit"), PerBroker, Valid::Any),
    inert!("sasl.kerberos.min.time.before.relogin", Long, Some("60000"), PerBroker, Valid::Any),
    inert!("sasl.kerberos.principal.to.local.rules", List, Some("DEFAULT"), PerBroker, Valid::Any),
    inert!("sasl.kerberos.service.name", String, None, PerBroker, Valid::Any),
    inert!("sasl.kerberos.ticket.renew.jitter", Double, Some("0.05"), PerBroker, Valid::Any),
    inert!("sasl.kerberos.ticket.renew.window.factor", Double, Some("0.8"), PerBroker, Valid::Any),
    inert!("sasl.login.callback.handler.class", Class, None, ReadOnly, Valid::Any),
    inert!("sasl.login.class", Class, None, ReadOnly, Valid::Any),
    inert!("sasl.login.connect.timeout.ms", Int, None, ReadOnly, Valid::Any),
    inert!("sasl.login.read.timeout.ms", Int, None, ReadOnly, Valid::Any),
    inert!("sasl.login.refresh.buffer.seconds", Short, Some("300"), PerBroker, Valid::Any),
    inert!("sasl.login.refresh.min.period.seconds", Short, Some("60"), PerBroker, Valid::Any),
    inert!("sasl.login.refresh.window.factor", Double, Some("0.8"), PerBroker, Valid::Any),
    inert!("sasl.login.refresh.window.jitter", Double, Some("0.05"), PerBroker, Valid::Any),
    inert!("sasl.login.retry.backoff.max.ms", Long, Some("10000"), ReadOnly, Valid::Any),
    inert!("sasl.login.retry.backoff.ms", Long, Some("100"), ReadOnly, Valid::Any),
    inert!("sasl.oauthbearer.clock.skew.seconds", Int, Some("30"), ReadOnly, Valid::Any),
    inert!("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Long, Some("100"), ReadOnly, Valid::Any),
    inert!("sasl.oauthbearer.scope.claim.name", String, Some("scope"), ReadOnly, Valid::Any),
    inert!("sasl.oauthbearer.token.endpoint.url", String, None, ReadOnly, Valid::Any),
    inert!("sasl.server.callback.handler.class", Class, None, ReadOnly, Valid::Any),
    inert!("security.inter.broker.protocol", String, Some("PLAINTEXT"), ReadOnly, Valid::OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])),
    inert!("security.providers", String, None, ReadOnly, Valid::Any),
    inert!("share.coordinator.append.linger.ms", Int, Some("10"), ReadOnly, Valid::AtLeast(0)),
    inert!("share.coordinator.load.buffer.size", Int, Some("5242880"), ReadOnly, Valid::AtLeast(1)),
    inert!("share.coordinator.snapshot.update.records.per.snapshot", Int, Some("500"), ReadOnly, Valid::AtLeast(0)),
    inert!("share.coordinator.state.topic.compression.codec", Int, Some("0"), ReadOnly, Valid::Any),
    inert!("share.coordinator.state.topic.segment.bytes", Int, Some("104857600"), ReadOnly, Valid::AtLeast(1)),
    inert!("share.coordinator.threads", Int, Some("1"), ReadOnly, Valid::AtLeast(1)),
    inert!("share.coordinator.write.timeout.ms", Int, Some("5000"), ReadOnly, Valid::AtLeast(1)),
    inert!("share.fetch.purgatory.purge.interval.requests", Int, Some("1000"), ReadOnly, Valid::Any),
    inert!("socket.connection.setup.timeout.max.ms", Long, Some("30000"), ReadOnly, Valid::Any),
    inert!("socket.connection.setup.timeout.ms", Long, Some("10000"), ReadOnly, Valid::Any),
    inert!("socket.listen.backlog.size", Int, Some("50"), ReadOnly, Valid::AtLeast(1)),
    inert!("socket.receive.buffer.bytes", Int, Some("102400"), ReadOnly, Valid::Any),
    inert!("socket.send.buffer.bytes", Int, Some("102400"), ReadOnly, Valid::Any),
    inert!("ssl.allow.dn.changes", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("ssl.allow.san.changes", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("ssl.cipher.suites", List, Some(""), PerBroker, Valid::Any),
    inert!("ssl.engine.factory.class", Class, None, PerBroker, Valid::Any),
    inert!("ssl.keymanager.algorithm", String, Some("SunX509"), PerBroker, Valid::Any),
    inert!("ssl.keystore.password", Password, None, PerBroker, Valid::Any),
    inert!("ssl.protocol", String, Some("TLSv1.3"), PerBroker, Valid::Any),
    inert!("ssl.provider", String, None, PerBroker, Valid::Any),
    inert!("ssl.secure.random.implementation", String, None, PerBroker, Valid::Any),
    inert!("ssl.trustmanager.algorithm", String, Some("PKIX"), PerBroker, Valid::Any),
    inert!("ssl.truststore.password", Password, None, PerBroker, Valid::Any),
    inert!("telemetry.max.bytes", Int, Some("1048576"), ReadOnly, Valid::AtLeast(1)),
    inert!("transaction.partition.verification.enable", Boolean, Some("true"), ClusterWide, Valid::Any),
    inert!("transaction.remove.expired.transaction.cleanup.interval.ms", Int, Some("3600000"), ReadOnly, Valid::AtLeast(1)),
    inert!("transaction.state.log.load.buffer.size", Int, Some("5242880"), ReadOnly, Valid::AtLeast(1)),
    inert!("transaction.state.log.segment.bytes", Int, Some("104857600"), ReadOnly, Valid::AtLeast(1)),
    inert!("unclean.leader.election.enable", Boolean, Some("false"), ClusterWide, Valid::Any),
    inert!("zookeeper.clientCnxnSocket", String, None, ReadOnly, Valid::Any),
    inert!("zookeeper.connect", String, None, ReadOnly, Valid::Any),
    inert!("zookeeper.connection.timeout.ms", Int, None, ReadOnly, Valid::Any),
    inert!("zookeeper.max.in.flight.requests", Int, Some("10"), ReadOnly, Valid::AtLeast(1)),
    inert!("zookeeper.metadata.migration.enable", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("zookeeper.session.timeout.ms", Int, Some("18000"), ReadOnly, Valid::Any),
    inert!("zookeeper.set.acl", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.cipher.suites", List, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.client.enable", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.crl.enable", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.enabled.protocols", List, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.endpoint.identification.algorithm", String, Some("HTTPS"), ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.keystore.location", String, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.keystore.password", Password, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.keystore.type", String, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.ocsp.enable", Boolean, Some("false"), ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.protocol", String, Some("TLSv1.2"), ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.truststore.location", String, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.truststore.password", Password, None, ReadOnly, Valid::Any),
    inert!("zookeeper.ssl.truststore.type", String, None, ReadOnly, Valid::Any),
];

/// Checks the names of a change to the dynamic broker configs of one
/// level (`stored`: what that level holds now; `cluster_wide`: the level is
/// the cluster-wide default): each must be a broker config
/// (INVALID_CONFIG), and those set must be dynamic, and at the cluster-wide
/// level not per-broker (INVALID_REQUEST, with Kafka's messages). A name
/// stored may always be deleted.
pub fn check_dynamic_names(
    set: &BTreeMap<String, String>,
    delete: &[String],
    stored: &BTreeMap<String, String>,
    cluster_wide: bool,
) -> Result<(), weir_meta::MetaError> {
    let deleted = delete.iter().filter(|name| !stored.contains_key(*name));
    if let Some(name) = set
        .keys()
        .chain(deleted)
        .find(|name| lookup(name).is_none())
    {
        return Err(weir_meta::MetaError::InvalidConfig {
            key: name.clone(),
            reason: format!("Unknown broker config name: {name}"),
        });
    }
    let read_only: Vec<&str> = set
        .keys()
        .filter(|name| lookup(name).is_some_and(|def| !def.dynamic))
        .map(String::as_str)
        .collect();
    if !read_only.is_empty() {
        return Err(weir_meta::MetaError::InvalidRequest(format!(
            "Cannot update these configs dynamically: Set({})",
            read_only.join(", ")
        )));
    }
    let per_broker: Vec<&str> = set
        .keys()
        .filter(|name| lookup(name).is_some_and(|def| def.per_broker))
        .map(String::as_str)
        .collect();
    if cluster_wide && !per_broker.is_empty() {
        return Err(weir_meta::MetaError::InvalidRequest(format!(
            "Cannot update these configs at default cluster level, broker id must be specified: Set({})",
            per_broker.join(", ")
        )));
    }
    Ok(())
}

/// Why a config value was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid value {value:?} for {name}: {reason}")]
pub struct ConfigError {
    pub name: String,
    pub value: String,
    pub reason: String,
}

impl From<ConfigError> for weir_meta::MetaError {
    /// INVALID_CONFIG, worded like Kafka's.
    fn from(error: ConfigError) -> Self {
        weir_meta::MetaError::InvalidConfig {
            reason: format!(
                "Invalid value {} for configuration {}: {}",
                error.value, error.name, error.reason
            ),
            key: error.name,
        }
    }
}

/// How the node was started: its identity, listeners, storage and
/// controller quorum, which `weir serve` takes as flags of its own rather
/// than as Kafka-named values (the [`STARTUP_CONFIGS`] describe them).
/// Dynamic configs never change it: [`BrokerConfig::with_dynamic`] carries
/// it over whole.
#[derive(Debug, Clone)]
pub struct Startup {
    pub node_id: i32,
    pub data_dir: PathBuf,
    /// `log.dirs`: the directories of the partition logs; empty for the
    /// data directory alone.
    pub log_dirs: Vec<PathBuf>,
    /// The Kafka listeners; never empty.
    pub listeners: Vec<Listener>,
    /// `inter.broker.listener.name`: the listener other brokers reach this
    /// one on, one of `listeners`.
    pub inter_broker_listener_name: String,
    pub http_listen: SocketAddr,
    /// The HTTP endpoint speaks HTTPS (`--http-listen https://HOST:PORT`),
    /// with the key store of the SSL listeners (`ssl.keystore.*`, and
    /// `ssl.client.auth` with its trust store), reloaded with them.
    pub http_tls: bool,
    /// SCRAM users the cluster's metadata starts with (`--add-scram`):
    /// set by the node that creates the metadata, ignored afterwards.
    pub initial_scram: Vec<weir_meta::ScramUpsertion>,
    /// The controller listener (Raft between controllers).
    pub controller_listen: SocketAddr,
    /// The controller listener's security protocol: `CONTROLLER` in
    /// `listener.security.protocol.map`, PLAINTEXT when it is not there.
    pub controller_protocol: crate::config::listeners::SecurityProtocol,
    /// The voters of the controller quorum, id and controller address;
    /// empty for a quorum of this node alone, at `controller_listen`.
    pub controllers: Vec<(u64, SocketAddr)>,
    /// Whether this node votes in the controller quorum; a broker that is
    /// not a controller follows the metadata as a Raft learner.
    pub is_controller: bool,
    /// The [`STARTUP_CONFIGS`] given explicitly (a flag, a `WEIR_*`
    /// variable or weir.toml), by Kafka name: described as
    /// STATIC_BROKER_CONFIG, the others as DEFAULT_CONFIG.
    pub given: BTreeSet<&'static str>,
}

impl Startup {
    /// A node that is its controller quorum alone, with one PLAINTEXT
    /// listener bound to `listen` (advertised as `advertised`, else as
    /// bound) and nothing else given.
    pub fn new(
        node_id: i32,
        data_dir: PathBuf,
        listen: SocketAddr,
        advertised: Option<(String, u16)>,
        http_listen: SocketAddr,
    ) -> Self {
        let listener = Listener::plaintext(listen, advertised);
        Self {
            node_id,
            data_dir,
            log_dirs: Vec::new(),
            inter_broker_listener_name: listener.name.clone(),
            listeners: vec![listener],
            http_listen,
            http_tls: false,
            initial_scram: Vec::new(),
            controller_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            controller_protocol: crate::config::listeners::SecurityProtocol::Plaintext,
            controllers: Vec::new(),
            is_controller: true,
            given: BTreeSet::new(),
        }
    }

    /// The listener other brokers reach this one on.
    pub fn inter_broker_listener(&self) -> &Listener {
        self.listeners
            .iter()
            .find(|l| l.name == self.inter_broker_listener_name)
            .unwrap_or(&self.listeners[0])
    }

    /// `listener.security.protocol.map` as in force: the default mapping,
    /// and the listeners' own names, the controller's included.
    fn protocol_map(&self) -> String {
        let mut map = crate::config::listeners::parse_protocol_map(DEFAULT_PROTOCOL_MAP)
            .expect("the default map parses");
        for listener in &self.listeners {
            map.insert(listener.name.clone(), listener.protocol);
        }
        map.insert(
            crate::config::listeners::CONTROLLER_LISTENER.to_owned(),
            self.controller_protocol,
        );
        let entries: Vec<String> = map.iter().map(|(n, p)| format!("{n}:{p}")).collect();
        entries.join(",")
    }

    /// The URL of the HTTP endpoint, for other hosts: a wildcard address
    /// is no address to tell, so the host the Kafka listener advertises
    /// stands for it.
    pub fn http_url(&self) -> String {
        let scheme = if self.http_tls { "https" } else { "http" };
        let addr = self.http_listen;
        match self.listeners.first() {
            Some(listener) if addr.ip().is_unspecified() => {
                let host = &listener.advertised_host;
                if host.contains(':') {
                    format!("{scheme}://[{host}]:{}", addr.port())
                } else {
                    format!("{scheme}://{host}:{}", addr.port())
                }
            }
            _ => format!("{scheme}://{addr}"),
        }
    }

    /// `process.roles`.
    fn process_roles(&self) -> &'static str {
        if self.is_controller {
            "broker,controller"
        } else {
            "broker"
        }
    }

    /// `listeners`: the Kafka listeners and, on a controller, the
    /// controller listener, at the addresses they are bound to.
    fn bound_listeners(&self) -> String {
        let mut listeners: Vec<String> = self
            .listeners
            .iter()
            .map(|l| format!("{}://{}", l.name, l.bind))
            .collect();
        if self.is_controller {
            listeners.push(format!(
                "{CONTROLLER_LISTENER}://{}",
                self.controller_listen
            ));
        }
        listeners.join(",")
    }

    /// `advertised.listeners`: the addresses clients are told.
    fn advertised_listeners(&self) -> String {
        let advertised: Vec<String> = self
            .listeners
            .iter()
            .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
            .collect();
        advertised.join(",")
    }

    /// `controller.quorum.voters`: this node alone when none were given.
    fn quorum_voters(&self) -> String {
        if self.controllers.is_empty() {
            format!("{}@{}", self.node_id, self.controller_listen)
        } else {
            let voters: Vec<String> = self
                .controllers
                .iter()
                .map(|(id, addr)| format!("{id}@{addr}"))
                .collect();
            voters.join(",")
        }
    }

    /// `log.dirs`: the partition log directories, comma-separated.
    fn joined_log_dirs(&self) -> String {
        let dirs: Vec<String> = self
            .partition_log_dirs()
            .iter()
            .map(|dir| dir.display().to_string())
            .collect();
        dirs.join(",")
    }

    /// The directories of the partition logs: `log.dirs`, else the data
    /// directory.
    pub fn partition_log_dirs(&self) -> Vec<PathBuf> {
        if self.log_dirs.is_empty() {
            vec![self.data_dir.clone()]
        } else {
            self.log_dirs.clone()
        }
    }
}

impl BrokerConfig {
    /// Builds the settings of a node started as [`Startup::new`] from
    /// Kafka-named values over the defaults.
    pub fn new(
        node_id: i32,
        data_dir: PathBuf,
        listen: SocketAddr,
        advertised: Option<(String, u16)>,
        http_listen: SocketAddr,
        values: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let startup = Startup::new(node_id, data_dir, listen, advertised, http_listen);
        Self::build(startup, values.clone(), BTreeMap::new(), BTreeMap::new())
    }

    /// The settings of `startup` from the values given at start, the
    /// dynamic cluster-wide defaults and this broker's dynamic configs, in
    /// Kafka's order of precedence over Kafka's defaults.
    fn build(
        startup: Startup,
        static_values: BTreeMap<String, String>,
        dynamic_default: BTreeMap<String, String>,
        dynamic_broker: BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        for (name, value) in dynamic_default.iter().chain(&dynamic_broker) {
            let reason = match lookup(name) {
                None => "unknown broker config",
                Some(def) if !def.dynamic => "cannot be updated dynamically",
                Some(_) => continue,
            };
            return Err(ConfigError {
                name: name.clone(),
                value: value.clone(),
                reason: reason.into(),
            });
        }
        let mut given = static_values.clone();
        given.extend(
            dynamic_default
                .iter()
                .chain(&dynamic_broker)
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let mut merged = BTreeMap::new();
        for def in settable() {
            if let Some(default) = def.default {
                merged.insert(def.name.to_owned(), default.to_owned());
            }
        }
        // Kafka's validator first, on every value given; Weir's own bounds
        // as the settings are read.
        for (name, value) in &given {
            let Some(def) = settable().find(|def| def.name == name.as_str()) else {
                return Err(ConfigError {
                    name: name.clone(),
                    value: value.clone(),
                    reason: "unknown broker config".into(),
                });
            };
            def.check(value)?;
            merged.insert(name.clone(), value.clone());
        }
        check_request_memory(Merged(&merged))?;
        Self::read(
            startup,
            merged,
            static_values,
            dynamic_default,
            dynamic_broker,
        )
    }

    /// These settings with dynamic configs over the static ones, in
    /// Kafka's order of precedence: this broker's own (`broker`), then the
    /// cluster-wide default, then the static value, then the default. Every
    /// name must be a dynamic config and every value valid, as when the
    /// broker started. [`startup`](Self::startup) stays as it is.
    pub fn with_dynamic(
        &self,
        default: &BTreeMap<String, String>,
        broker: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        Self::build(
            self.startup.clone(),
            self.static_values.clone(),
            default.clone(),
            broker.clone(),
        )
    }

    /// [`with_dynamic`](Self::with_dynamic) for configs read from the
    /// metadata, which a broker of another version may have written: a
    /// config this broker cannot apply (unknown, read-only here, invalid)
    /// is left out with a warning, and the rest applies.
    pub fn with_dynamic_lenient(
        &self,
        default: &BTreeMap<String, String>,
        broker: &BTreeMap<String, String>,
    ) -> Self {
        let (mut default, mut broker) = (default.clone(), broker.clone());
        loop {
            match self.with_dynamic(&default, &broker) {
                Ok(config) => return config,
                Err(error) => {
                    tracing::warn!(%error, "ignoring a dynamic broker config");
                    // The value at fault is the one in force: this
                    // broker's own before the cluster-wide default.
                    let dropped = broker.remove(&error.name).is_some()
                        || default.remove(&error.name).is_some();
                    if !dropped {
                        // Not a dynamic value at fault: keep what runs.
                        return self.clone();
                    }
                }
            }
        }
    }

    /// Where the value in force of the broker config `name` comes from.
    pub fn source(&self, name: &str) -> ConfigSource {
        self.synonyms(name)
            .first()
            .map_or(ConfigSource::DefaultConfig, |(_, _, source)| *source)
    }

    /// Every value the broker config `name` has, with the name it has at
    /// each level, in order of precedence (what DescribeConfigs reports as
    /// synonyms), the defaults last. As Kafka's `ConfigHelper` lists them:
    /// level by level, within a level the [`unit_synonyms`] in their order,
    /// a null default as a null value, and then everything before the
    /// first entry named `name` dropped (so that `log.retention.ms` set
    /// nowhere lists its defaults only, even when `log.retention.hours` is
    /// given: Kafka then says DEFAULT_CONFIG).
    pub fn synonyms(&self, name: &str) -> Vec<(&'static str, Option<String>, ConfigSource)> {
        let Some(def) = lookup(name) else {
            return Vec::new();
        };
        let names: Vec<&'static str> = match unit_synonyms(name) {
            [] => vec![def.name],
            all => all.to_vec(),
        };
        let levels = [
            (&self.dynamic_broker, ConfigSource::DynamicBrokerConfig),
            (
                &self.dynamic_default,
                ConfigSource::DynamicDefaultBrokerConfig,
            ),
            (&self.static_values, ConfigSource::StaticBrokerConfig),
        ];
        let mut synonyms = Vec::new();
        for (values, source) in levels {
            for &synonym in &names {
                if let Some(value) = values.get(synonym) {
                    synonyms.push((synonym, Some(value.clone()), source));
                }
            }
        }
        for &synonym in &names {
            if let Some(def) = lookup(synonym) {
                let default = def.default.map(str::to_owned);
                synonyms.push((synonym, default, ConfigSource::DefaultConfig));
            }
        }
        let first = synonyms.iter().position(|(n, _, _)| *n == def.name);
        synonyms.split_off(first.unwrap_or(synonyms.len()))
    }

    /// Refuses `remote.storage.enable=true` among a topic's `configs`
    /// when this broker has no tiered storage, in Kafka's words.
    pub fn check_topic_tiering(
        &self,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), weir_meta::MetaError> {
        let tiered = configs
            .get("remote.storage.enable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if tiered && !self.remote_log_storage_system_enable {
            return Err(weir_meta::MetaError::InvalidConfig {
                key: "remote.storage.enable".to_owned(),
                reason: "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".to_owned(),
            });
        }
        Ok(())
    }

    /// The value in force of the broker config `name`, one of
    /// [`settable`], as a topic takes it for its default: a config given in
    /// other units ([`unit_synonyms`]) in milliseconds, from the first
    /// of its names set; `None` for a null.
    pub fn topic_default(&self, name: &str) -> Option<String> {
        match unit_synonyms(name) {
            [] => self.values.get(name).cloned(),
            names => {
                let (name, value) = first_set(&self.values, names)?;
                in_millis(name, value).map(|ms| ms.to_string())
            }
        }
    }

    /// Replaces the listeners (`listeners` and `advertised.listeners`,
    /// bound): `inter_broker` must name one of them.
    pub fn with_listeners(
        mut self,
        listeners: Vec<Listener>,
        inter_broker: &str,
    ) -> Result<Self, ConfigError> {
        let inter_broker = inter_broker.trim().to_ascii_uppercase();
        if !listeners.iter().any(|l| l.name == inter_broker) {
            let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
            return Err(ConfigError {
                name: "inter.broker.listener.name".into(),
                value: inter_broker,
                reason: format!(
                    "must be one of the listeners ({}): other brokers connect to it",
                    names.join(", ")
                ),
            });
        }
        self.startup.listeners = listeners;
        self.startup.inter_broker_listener_name = inter_broker;
        Ok(self)
    }

    /// How this broker connects to the others, on their inter-broker
    /// listener: its security protocol; the trust store and key store of
    /// the TLS listeners (a key store doubles as the client certificate,
    /// for brokers that ask for one); `sasl.mechanism.inter.broker.protocol`
    /// with the credentials of `sasl.jaas.config`, which a node alone in its
    /// cluster may leave out.
    pub fn inter_broker_client_security(&self) -> Result<weir_client::SecurityConfig, ConfigError> {
        let protocol = self.startup.inter_broker_listener().protocol;
        let mut properties = BTreeMap::new();
        properties.insert("security.protocol".to_owned(), protocol.name().to_owned());
        let value = |name: &str| self.given_value(name);
        if protocol.is_tls() {
            self.tls_client_properties(&mut properties);
        }
        // A node alone in its cluster never connects to another broker.
        let alone = self.startup.is_controller && self.startup.controllers.len() <= 1;
        if protocol.is_sasl() && alone && value("sasl.jaas.config").is_none() {
            return Ok(weir_client::SecurityConfig::plaintext());
        }
        if protocol.is_sasl() {
            let Some(jaas) = value("sasl.jaas.config") else {
                return Err(ConfigError {
                    name: "sasl.jaas.config".into(),
                    value: String::new(),
                    reason: format!(
                        "the inter-broker listener {} uses SASL: give this broker's own \
                         credentials, e.g. org.apache.kafka.common.security.scram.ScramLoginModule \
                         required username=\"broker\" password=\"...\";",
                        self.startup.inter_broker_listener_name
                    ),
                });
            };
            properties.insert("sasl.jaas.config".to_owned(), jaas);
            properties.insert(
                "sasl.mechanism".to_owned(),
                value("sasl.mechanism.inter.broker.protocol").unwrap_or_default(),
            );
        }
        weir_client::SecurityConfig::from_properties(&properties).map_err(|error| ConfigError {
            name: "inter.broker.listener.name".into(),
            value: self.startup.inter_broker_listener_name.clone(),
            // Never the credentials themselves.
            reason: format!("this broker cannot connect to the others: {error}"),
        })
    }

    /// How this node connects to the controllers over TLS: the key store
    /// as its client certificate, the trust store for theirs.
    pub fn controller_client_tls(&self) -> Result<weir_client::TlsConfig, ConfigError> {
        let mut properties = BTreeMap::new();
        properties.insert("security.protocol".to_owned(), "SSL".to_owned());
        self.tls_client_properties(&mut properties);
        let security =
            weir_client::SecurityConfig::from_properties(&properties).map_err(|error| {
                ConfigError {
                    name: "listener.security.protocol.map".into(),
                    value: "CONTROLLER:SSL".to_owned(),
                    reason: error.to_string(),
                }
            })?;
        Ok(security.tls.unwrap_or_default())
    }

    /// A config as given, trimmed; `None` when absent or empty.
    pub(crate) fn given_value(&self, name: &str) -> Option<String> {
        self.values
            .get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The client side of the TLS listeners' stores, as client properties.
    fn tls_client_properties(&self, properties: &mut BTreeMap<String, String>) {
        for name in [
            "ssl.truststore.location",
            "ssl.truststore.certificates",
            "ssl.keystore.location",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
        ] {
            if let Some(v) = self.given_value(name) {
                properties.insert(name.to_owned(), v);
            }
        }
        properties.insert("ssl.truststore.type".to_owned(), "PEM".to_owned());
        properties.insert("ssl.keystore.type".to_owned(), "PEM".to_owned());
        properties.insert(
            "ssl.endpoint.identification.algorithm".to_owned(),
            self.given_value("ssl.endpoint.identification.algorithm")
                .unwrap_or_default(),
        );
    }

    /// Whether security is on, so that the HTTP endpoint asks for a user
    /// (Basic authentication, `/ready` excepted): some Kafka listener
    /// authenticates with SASL, or an authorizer enforces ACLs. Otherwise
    /// the Kafka side is open too, and a password on HTTP alone would
    /// protect nothing. TLS with client certificates alone does not count:
    /// its users have no password to give.
    pub fn http_requires_authentication(&self) -> bool {
        self.security.authorizer_enabled
            || self.startup.listeners.iter().any(|l| l.protocol.is_sasl())
    }

    /// The settings of the group membership protocol.
    pub fn group_config(&self) -> weir_coord::classic::GroupConfig {
        weir_coord::classic::GroupConfig {
            initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            min_session_timeout_ms: self.group_min_session_timeout_ms,
            max_session_timeout_ms: self.group_max_session_timeout_ms,
            max_size: self.group_max_size as usize,
            ..weir_coord::classic::GroupConfig::default()
        }
    }

    /// The settings of transactions.
    pub fn txn_settings(&self) -> TxnSettings {
        TxnSettings {
            num_partitions: self.transaction_state_log_num_partitions,
            replication_factor: self.transaction_state_log_replication_factor,
            min_isr: self.transaction_state_log_min_isr,
            max_timeout_ms: self.transaction_max_timeout_ms,
            id_expiration_ms: self.transactional_id_expiration_ms,
            abort_check_interval_ms: self
                .transaction_abort_timed_out_transaction_cleanup_interval_ms,
        }
    }
}

/// The broker settings of transactions, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions`
    pub num_partitions: i32,
    /// `transaction.state.log.replication.factor`
    pub replication_factor: i32,
    /// `transaction.state.log.min.isr`
    pub min_isr: i32,
    /// `transaction.max.timeout.ms`: longer transaction timeouts are refused.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_check_interval_ms: u64,
}

impl Default for TxnSettings {
    fn default() -> Self {
        Self {
            num_partitions: 50,
            replication_factor: 3,
            min_isr: 2,
            max_timeout_ms: 900_000,
            id_expiration_ms: 7 * 24 * 3600 * 1000,
            abort_check_interval_ms: 10_000,
        }
    }
}

/// TLS, SASL and ACL settings: Kafka's `ssl.*`, `sasl.*` and authorizer
/// configs, checked at start.
#[derive(Debug, Clone, Default)]
pub struct SecurityConfig {
    pub tls: tls::TlsSettings,
    /// `sasl.enabled.mechanisms`, upper case.
    pub sasl_mechanisms: Vec<String>,
    /// `sasl.server.max.receive.size`
    pub sasl_max_receive_size: usize,
    /// `connections.max.reauth.ms`; 0: a session never expires.
    pub max_reauth_ms: i64,
    /// `connection.failed.authentication.delay.ms` (KIP-306): how long the
    /// answer to a failed SASL or HTTP Basic authentication waits.
    pub failed_authentication_delay_ms: u64,
    pub oauthbearer: OAuthBearerConfig,
    /// `authorizer.class.name` is set: ACLs are enforced.
    pub authorizer_enabled: bool,
    /// `super.users`: principals allowed everything (`User:admin`).
    pub super_users: Vec<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl SecurityConfig {
    /// An error about `sasl.oauthbearer.jwks.endpoint.url`.
    pub(crate) fn jwks_error(&self, reason: String) -> ConfigError {
        ConfigError {
            name: "sasl.oauthbearer.jwks.endpoint.url".into(),
            value: self.oauthbearer.jwks_endpoint_url.clone(),
            reason,
        }
    }

    /// The OAUTHBEARER token checker over `jwks` (a JWKS's JSON), with the
    /// expected audience, issuer and principal claim.
    pub fn jwt_validator(&self, jwks: &str) -> Result<weir_auth::JwtValidator, ConfigError> {
        let oauth = &self.oauthbearer;
        let audience =
            (!oauth.expected_audience.is_empty()).then(|| oauth.expected_audience.clone());
        let claim = Some(oauth.sub_claim_name.clone()).filter(|c| !c.is_empty());
        weir_auth::JwtValidator::from_jwks_json(
            jwks,
            audience,
            oauth.expected_issuer.clone(),
            claim,
        )
        .map_err(|error| self.jwks_error(error.to_string()))
    }
}

/// The OAUTHBEARER validation settings.
#[derive(Debug, Clone, Default)]
pub struct OAuthBearerConfig {
    /// `sasl.oauthbearer.jwks.endpoint.url`
    pub jwks_endpoint_url: String,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`
    pub jwks_refresh_ms: u64,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`
    pub jwks_retry_backoff_max_ms: u64,
    pub expected_audience: Vec<String>,
    pub expected_issuer: Option<String>,
    pub sub_claim_name: String,
}

/// The SASL mechanisms Weir serves.
pub const SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// The names `authorizer.class.name` may have: Kafka's authorizers, so that
/// a Kafka configuration carries over.
const AUTHORIZERS: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "weir",
];

impl SecurityConfig {
    /// The `ssl.*`, `sasl.*` and authorizer settings of `values` (read as
    /// the setting of the registry's row `_row`, the first of them).
    fn parse(values: Merged<'_>, _row: &str) -> Result<Self, ConfigError> {
        let get = |name: &str| values.get(name);
        let refuse = |name: &str, reason: String| ConfigError {
            name: name.to_owned(),
            value: get(name).to_owned(),
            reason,
        };
        let list = |name: &str| -> Vec<String> {
            get(name)
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let sasl_mechanisms: Vec<String> = list("sasl.enabled.mechanisms")
            .into_iter()
            .map(|m| m.to_ascii_uppercase())
            .collect();
        if let Some(unknown) = sasl_mechanisms
            .iter()
            .find(|m| !SASL_MECHANISMS.contains(&m.as_str()))
        {
            return Err(refuse(
                "sasl.enabled.mechanisms",
                format!(
                    "{unknown} is not supported; use {}",
                    SASL_MECHANISMS.join(", ")
                ),
            ));
        }
        let authorizer = get("authorizer.class.name").trim();
        if !authorizer.is_empty() && !AUTHORIZERS.contains(&authorizer) {
            return Err(refuse(
                "authorizer.class.name",
                format!(
                    "Weir's authorizer is Kafka's StandardAuthorizer; set {} or leave it empty",
                    AUTHORIZERS[0]
                ),
            ));
        }
        let super_users = get("super.users")
            .split(';')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>();
        if let Some(bad) = super_users.iter().find(|u| !u.contains(':')) {
            return Err(refuse(
                "super.users",
                format!("{bad:?} is not a principal of the form User:name"),
            ));
        }
        let issuer = get("sasl.oauthbearer.expected.issuer").trim();
        Ok(Self {
            tls: tls::TlsSettings::parse(get)?,
            sasl_mechanisms,
            sasl_max_receive_size: parse_in(
                values,
                "sasl.server.max.receive.size",
                1..=i32::MAX as usize,
            )?,
            max_reauth_ms: parse_in(values, "connections.max.reauth.ms", 0..=i64::MAX)?,
            failed_authentication_delay_ms: parse_in(
                values,
                "connection.failed.authentication.delay.ms",
                0..=i32::MAX as u64,
            )?,
            oauthbearer: OAuthBearerConfig {
                jwks_endpoint_url: get("sasl.oauthbearer.jwks.endpoint.url").trim().to_owned(),
                jwks_refresh_ms: parse_in(
                    values,
                    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
                    1..=i64::MAX as u64,
                )?,
                jwks_retry_backoff_max_ms: parse_in(
                    values,
                    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
                    0..=i64::MAX as u64,
                )?,
                expected_audience: list("sasl.oauthbearer.expected.audience"),
                expected_issuer: (!issuer.is_empty()).then(|| issuer.to_owned()),
                sub_claim_name: get("sasl.oauthbearer.sub.claim.name").trim().to_owned(),
            },
            authorizer_enabled: !authorizer.is_empty(),
            super_users,
            allow_everyone_if_no_acl_found: parse(values, "allow.everyone.if.no.acl.found")?,
        })
    }
}

/// The values a [`BrokerConfig`] is read from: those given over Kafka's
/// defaults, by name (a null default is absent).
#[derive(Clone, Copy)]
struct Merged<'a>(&'a BTreeMap<String, String>);

impl<'a> Merged<'a> {
    /// The value of `name`; "" for a null default, which no config Weir
    /// reads has.
    fn get(self, name: &str) -> &'a str {
        self.0.get(name).map_or("", String::as_str)
    }
}

/// How `BrokerConfig::read` makes the setting of one row of the registry
/// from the merged values, given the row's config name.
trait Read<T> {
    fn read(self, values: Merged<'_>, name: &'static str) -> Result<T, ConfigError>;
}

/// The config's value parsed as the setting's type, with no bounds but
/// those of Kafka's validator ([`BrokerConfigDef::valid`]), already checked.
struct Parsed;

impl<T> Read<T> for Parsed
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    fn read(self, values: Merged<'_>, name: &'static str) -> Result<T, ConfigError> {
        parse(values, name)
    }
}

/// Weir's own bounds on the setting, which Kafka's validator leaves open: a
/// value outside is refused as "must be between MIN and MAX".
impl<T> Read<T> for std::ops::RangeInclusive<T>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
    T::Err: std::fmt::Display,
{
    fn read(self, values: Merged<'_>, name: &'static str) -> Result<T, ConfigError> {
        parse_in(values, name, self)
    }
}

/// A setting that takes more than parsing its config: another type, the
/// config's unit synonyms, or another config with it.
impl<T, F> Read<T> for F
where
    F: FnOnce(Merged<'_>, &'static str) -> Result<T, ConfigError>,
{
    fn read(self, values: Merged<'_>, name: &'static str) -> Result<T, ConfigError> {
        self(values, name)
    }
}

/// A week, Kafka's default retention and segment age.
const WEEK_MS: i64 = 7 * 24 * 3_600_000;

/// `log.retention.ms`, else `log.retention.minutes`, else
/// `log.retention.hours`, in milliseconds; -1 keeps forever.
fn retention_ms(values: Merged<'_>, name: &'static str) -> Result<i64, ConfigError> {
    Ok(match first_set(values.0, unit_synonyms(name)) {
        Some((set, _)) if set == name => parse_in(values, name, -1..=i64::MAX)?,
        // Kafka: a negative value in any unit keeps forever.
        Some((set, value)) => in_millis(set, value).unwrap_or(-1).max(-1),
        None => WEEK_MS,
    })
}

/// `log.roll.ms`, else `log.roll.hours`, in milliseconds.
fn roll_ms(values: Merged<'_>, name: &'static str) -> Result<i64, ConfigError> {
    Ok(match first_set(values.0, unit_synonyms(name)) {
        Some((set, value)) => in_millis(set, value).unwrap_or(1).max(1),
        None => WEEK_MS,
    })
}

/// A text setting whose null or blank value is `None`.
fn optional_text(values: Merged<'_>, name: &'static str) -> Result<Option<String>, ConfigError> {
    Ok(Some(values.get(name).trim().to_owned()).filter(|v| !v.is_empty()))
}

/// `replica.selector.class`: one of the selectors Weir implements.
fn replica_selector(
    values: Merged<'_>,
    name: &'static str,
) -> Result<ReplicaSelector, ConfigError> {
    ReplicaSelector::from_class_name(values.get(name)).map_err(|reason| ConfigError {
        name: name.into(),
        value: values.get(name).into(),
        reason,
    })
}

/// `log.max.open.files`, resolved: the descriptors the partition logs may
/// keep open.
fn open_file_limit(values: Merged<'_>, name: &'static str) -> Result<usize, ConfigError> {
    Ok(match parse_in(values, name, 0..=i32::MAX as usize)? {
        0 => three_quarters_of_the_open_file_limit(),
        limit => limit,
    })
}

/// `log.cleanup.policy`.
fn cleanup_policy(values: Merged<'_>, name: &'static str) -> Result<CleanupPolicy, ConfigError> {
    CleanupPolicy::parse(values.get(name)).ok_or_else(|| ConfigError {
        name: name.into(),
        value: values.get(name).into(),
        reason: "must be delete, compact, compact,delete, or empty".into(),
    })
}

/// The first of `names` that has a value, with it.
fn first_set<'a>(
    values: &'a BTreeMap<String, String>,
    names: &[&'static str],
) -> Option<(&'static str, &'a str)> {
    names
        .iter()
        .find_map(|&name| Some((name, values.get(name)?.as_str())))
}

/// Three quarters of the process's soft limit of open files: the rest is
/// left to connections and the broker's other files. (A cache a little
/// smaller than the files read in turn misses on every read.)
fn three_quarters_of_the_open_file_limit() -> usize {
    use nix::sys::resource::{getrlimit, Resource};
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 4 * 3).unwrap_or(usize::MAX).max(64)
}

/// The value of `name` as a `T`, refused with the parser's reason.
fn parse<T: std::str::FromStr>(values: Merged<'_>, name: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    let value = values.get(name);
    value.trim().parse().map_err(|e: T::Err| ConfigError {
        name: name.to_owned(),
        value: value.to_owned(),
        reason: e.to_string(),
    })
}

/// The value of `name` as a `T` within `range`.
fn parse_in<T>(
    values: Merged<'_>,
    name: &str,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
    T::Err: std::fmt::Display,
{
    let value: T = parse(values, name)?;
    if !range.contains(&value) {
        return Err(ConfigError {
            name: name.to_owned(),
            value: value.to_string(),
            reason: format!("must be between {} and {}", range.start(), range.end()),
        });
    }
    Ok(value)
}

/// As Kafka: the request memory holds at least one request of the largest
/// size, else such a request could never be read whole.
fn check_request_memory(values: Merged<'_>) -> Result<(), ConfigError> {
    let queued: usize = parse(values, "queued.max.request.bytes")?;
    let largest: usize = parse(values, "socket.request.max.bytes")?;
    if queued < largest {
        return Err(ConfigError {
            name: "queued.max.request.bytes".into(),
            value: queued.to_string(),
            reason: format!(
                "must be at least socket.request.max.bytes ({largest}): a request of that size must fit"
            ),
        });
    }
    Ok(())
}

/// `max.connections.per.ip.overrides`: `IP:count` pairs separated by
/// commas. Kafka also takes host names, which it resolves; Weir takes
/// addresses only, so that no configuration waits on DNS.
fn per_ip_overrides(
    values: Merged<'_>,
    name: &'static str,
) -> Result<BTreeMap<IpAddr, usize>, ConfigError> {
    let refuse = |reason: String| ConfigError {
        name: name.into(),
        value: values.get(name).to_owned(),
        reason,
    };
    let mut overrides = BTreeMap::new();
    for entry in values
        .get(name)
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        // The count follows the last colon: an IPv6 address has colons too.
        let Some((address, count)) = entry.rsplit_once(':') else {
            return Err(refuse(format!("{entry:?} is not of the form IP:count")));
        };
        let address = address.trim().trim_start_matches('[').trim_end_matches(']');
        let address: IpAddr = address.parse().map_err(|_| {
            refuse(format!(
                "{address:?} is not an IP address (host names are not resolved)"
            ))
        })?;
        let count: usize = count
            .trim()
            .parse()
            .ok()
            .filter(|c| *c <= i32::MAX as usize)
            .ok_or_else(|| refuse(format!("{count:?} in {entry:?} is not a connection count")))?;
        overrides.insert(address, count);
    }
    let per_ip: usize = parse(values, "max.connections.per.ip")?;
    if per_ip == 0 && overrides.is_empty() {
        return Err(ConfigError {
            name: "max.connections.per.ip".into(),
            value: "0".into(),
            reason: "can be 0 only if max.connections.per.ip.overrides lets some addresses in"
                .into(),
        });
    }
    Ok(overrides)
}

/// The `group.consumer.*` settings, checked as Kafka checks them: the
/// heartbeat interval and session timeout within their min/max bounds and
/// the interval below the timeout, known assignors.
fn consumer_group_config(
    values: Merged<'_>,
    _row: &str,
) -> Result<ConsumerGroupConfig, ConfigError> {
    use weir_coord::consumer::ServerAssignor;
    let heartbeat_interval_ms =
        parse_in(values, "group.consumer.heartbeat.interval.ms", 1..=i32::MAX)?;
    let session_timeout_ms = parse_in(values, "group.consumer.session.timeout.ms", 1..=i32::MAX)?;
    let bounds = |what: &str| -> Result<std::ops::RangeInclusive<i32>, ConfigError> {
        let min_name = format!("group.consumer.min.{what}");
        let max_name = format!("group.consumer.max.{what}");
        let min = parse_in(values, &min_name, 1..=i32::MAX)?;
        let max = parse_in(values, &max_name, 1..=i32::MAX)?;
        if max < min {
            return Err(ConfigError {
                name: max_name,
                value: max.to_string(),
                reason: format!("must be greater than or equal to {min_name} ({min})"),
            });
        }
        Ok(min..=max)
    };
    let policy = values.get("group.consumer.migration.policy");
    let migration_policy =
        weir_coord::consumer::MigrationPolicy::from_name(policy).ok_or_else(|| ConfigError {
            name: "group.consumer.migration.policy".into(),
            value: policy.to_owned(),
            reason: format!(
                "must be one of {}",
                weir_coord::consumer::MigrationPolicy::NAMES
            ),
        })?;
    let heartbeat_interval_bounds = bounds("heartbeat.interval.ms")?;
    let session_timeout_bounds = bounds("session.timeout.ms")?;
    let names = values.get("group.consumer.assignors");
    let assignors = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|name| {
            ServerAssignor::from_name(name).ok_or_else(|| ConfigError {
                name: "group.consumer.assignors".into(),
                value: names.to_owned(),
                reason: format!("unknown assignor {name:?}; use uniform or range"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if assignors.is_empty() {
        return Err(ConfigError {
            name: "group.consumer.assignors".into(),
            value: names.to_owned(),
            reason: "name at least one assignor".into(),
        });
    }
    let config = ConsumerGroupConfig {
        heartbeat_interval_ms,
        session_timeout_ms,
        heartbeat_interval_bounds,
        session_timeout_bounds,
        max_size: parse_in(values, "group.consumer.max.size", 1..=i32::MAX)? as usize,
        migration_policy,
        classic_max_size: parse_in(values, "group.max.size", 1..=i32::MAX)? as usize,
        assignors,
    };
    config
        .check_timing(
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.session.timeout.ms",
        )
        .map_err(|error| ConfigError {
            name: error.name.to_owned(),
            value: error.value.to_string(),
            reason: error.requirement,
        })?;
    Ok(config)
}

/// The `group.share.*` settings, each default within its bounds.
fn share_group_config(values: Merged<'_>, _row: &str) -> Result<ShareBrokerConfig, ConfigError> {
    let bounded = |what: &str| -> Result<crate::config::groups::Bounded, ConfigError> {
        let name = format!("group.share.{what}");
        let min_name = format!("group.share.min.{what}");
        let max_name = format!("group.share.max.{what}");
        let min = parse_in(values, &min_name, 1..=i32::MAX)?;
        let max = parse_in(values, &max_name, min..=i32::MAX)?;
        let value = parse_in(values, &name, min..=max)?;
        Ok(crate::config::groups::Bounded { value, min, max })
    };
    let heartbeat_interval_ms = bounded("heartbeat.interval.ms")?;
    let session_timeout_ms = bounded("session.timeout.ms")?;
    if heartbeat_interval_ms.value >= session_timeout_ms.value {
        return Err(ConfigError {
            name: "group.share.heartbeat.interval.ms".into(),
            value: heartbeat_interval_ms.value.to_string(),
            reason: "must be less than group.share.session.timeout.ms".into(),
        });
    }
    Ok(ShareBrokerConfig {
        heartbeat_interval_ms,
        session_timeout_ms,
        record_lock_duration_ms: bounded("record.lock.duration.ms")?,
        delivery_count_limit: parse_in(values, "group.share.delivery.count.limit", 2..=10)?,
        partition_max_record_locks: parse_in(
            values,
            "group.share.partition.max.record.locks",
            100..=10_000,
        )?,
        max_size: parse_in(values, "group.share.max.size", 1..=1000)?,
        max_share_sessions: parse_in(values, "group.share.max.share.sessions", 1..=100_000)?,
        dead_letter_topic_prefix: values
            .get("errors.deadletterqueue.topic.name.prefix")
            .to_owned(),
        state_topic_num_partitions: parse_in(
            values,
            "share.coordinator.state.topic.num.partitions",
            1..=10_000,
        )?,
        state_topic_replication_factor: parse_in(
            values,
            "share.coordinator.state.topic.replication.factor",
            1..=i16::MAX as i32,
        )?,
        state_topic_min_isr: parse_in(
            values,
            "share.coordinator.state.topic.min.isr",
            1..=i16::MAX as i32,
        )?,
    })
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
        assert_eq!(
            config.startup.inter_broker_listener().advertised_host,
            "127.0.0.1"
        );
    }

    #[test]
    fn consumer_group_timing_is_checked_against_its_bounds() {
        let config = build(&[]).unwrap().consumer_group;
        assert_eq!(
            (config.heartbeat_interval_ms, config.session_timeout_ms),
            (5_000, 45_000)
        );
        assert_eq!(config.heartbeat_interval_bounds, 5_000..=15_000);
        assert_eq!(config.session_timeout_bounds, 45_000..=60_000);
        let refused = |values: &[(&str, &str)]| build(values).unwrap_err().to_string();
        // Below the minimum unless the minimum is lowered with it.
        assert!(refused(&[("group.consumer.heartbeat.interval.ms", "500")])
            .contains("must be greater than or equal to group.consumer.min.heartbeat.interval.ms"));
        assert!(refused(&[("group.consumer.session.timeout.ms", "6000")])
            .contains("must be greater than or equal to group.consumer.min.session.timeout.ms"));
        assert!(refused(&[("group.consumer.session.timeout.ms", "60001")])
            .contains("must be less than or equal to group.consumer.max.session.timeout.ms"));
        assert!(refused(&[
            ("group.consumer.min.heartbeat.interval.ms", "20000"),
            ("group.consumer.heartbeat.interval.ms", "20000"),
        ])
        .contains("group.consumer.max.heartbeat.interval.ms"));
        let lowered = build(&[
            ("group.consumer.heartbeat.interval.ms", "500"),
            ("group.consumer.min.heartbeat.interval.ms", "500"),
            ("group.consumer.session.timeout.ms", "6000"),
            ("group.consumer.min.session.timeout.ms", "6000"),
        ])
        .unwrap()
        .consumer_group;
        assert_eq!(lowered.heartbeat_interval_bounds, 500..=15_000);
        assert_eq!(
            (lowered.heartbeat_interval_ms, lowered.session_timeout_ms),
            (500, 6_000)
        );
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
        let keep_all = build(&[("log.cleanup.policy", "")]).unwrap();
        assert!(!keep_all.log_cleanup_policy.delete && !keep_all.log_cleanup_policy.compact);
        assert!(build(&[("log.cleaner.min.cleanable.ratio", "1.5")]).is_err());
    }

    fn map(values: &[(&str, &str)]) -> BTreeMap<String, String> {
        values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn dynamic_configs_take_kafkas_precedence() {
        let config = build(&[("log.retention.ms", "1000"), ("log.segment.bytes", "2048")]).unwrap();
        let default = map(&[("log.retention.ms", "2000"), ("log.retention.bytes", "10")]);
        let own = map(&[("log.retention.bytes", "20")]);
        let dynamic = config.with_dynamic(&default, &own).unwrap();
        // Per broker > cluster default > static > default.
        assert_eq!(dynamic.log_retention_bytes, 20);
        assert_eq!(dynamic.log_retention_ms, 2000);
        assert_eq!(dynamic.log_segment_bytes, 2048);
        assert_eq!(dynamic.log_cleaner_backoff_ms, 15_000);
        assert_eq!(
            dynamic.source("log.retention.bytes"),
            ConfigSource::DynamicBrokerConfig
        );
        assert_eq!(
            dynamic.source("log.retention.ms"),
            ConfigSource::DynamicDefaultBrokerConfig
        );
        assert_eq!(
            dynamic.source("log.segment.bytes"),
            ConfigSource::StaticBrokerConfig
        );
        assert_eq!(
            dynamic.source("log.cleaner.backoff.ms"),
            ConfigSource::DefaultConfig
        );
        assert_eq!(dynamic.values["log.retention.bytes"], "20");
        assert_eq!(
            dynamic.synonyms("log.retention.ms"),
            [
                syn(
                    "log.retention.ms",
                    Some("2000"),
                    ConfigSource::DynamicDefaultBrokerConfig
                ),
                syn(
                    "log.retention.ms",
                    Some("1000"),
                    ConfigSource::StaticBrokerConfig
                ),
                syn("log.retention.ms", None, ConfigSource::DefaultConfig),
                syn("log.retention.minutes", None, ConfigSource::DefaultConfig),
                syn(
                    "log.retention.hours",
                    Some("168"),
                    ConfigSource::DefaultConfig
                ),
            ]
        );
        // Dropping the dynamic values goes back to the static ones.
        let back = dynamic
            .with_dynamic(&BTreeMap::new(), &BTreeMap::new())
            .unwrap();
        assert_eq!(
            (back.log_retention_ms, back.log_retention_bytes),
            (1000, -1)
        );
        assert_eq!(
            back.source("log.retention.ms"),
            ConfigSource::StaticBrokerConfig
        );
        // What is not a Kafka config stays.
        assert_eq!(back.startup.node_id, 1);
        assert_eq!(
            back.startup.inter_broker_listener().advertised_host,
            "127.0.0.1"
        );
    }

    #[test]
    fn dynamic_configs_keep_the_controller_listeners_protocol() {
        let mut config = build(&[]).unwrap();
        config.startup.controller_protocol = crate::config::listeners::SecurityProtocol::Ssl;
        let dynamic = config
            .with_dynamic(&map(&[("log.retention.ms", "2000")]), &BTreeMap::new())
            .unwrap();
        assert_eq!(
            dynamic.startup.controller_protocol,
            crate::config::listeners::SecurityProtocol::Ssl
        );
        let (map, _) = dynamic
            .startup
            .value("listener.security.protocol.map")
            .unwrap();
        assert!(map.unwrap().contains("CONTROLLER:SSL"));
    }

    #[test]
    fn dynamic_configs_are_validated() {
        let config = build(&[]).unwrap();
        let none = BTreeMap::new();
        let err = config
            .with_dynamic(&map(&[("log.retention.ms", "-5")]), &none)
            .unwrap_err();
        assert_eq!(err.name, "log.retention.ms");
        assert!(err.reason.contains("between"), "{err}");
        let err = config
            .with_dynamic(&none, &map(&[("log.cleanup.policy", "shred")]))
            .unwrap_err();
        assert_eq!(err.name, "log.cleanup.policy");
        let err = config
            .with_dynamic(&map(&[("num.partitions", "3")]), &none)
            .unwrap_err();
        assert_eq!(err.reason, "cannot be updated dynamically");
        let err = config
            .with_dynamic(&map(&[("no.such.config", "3")]), &none)
            .unwrap_err();
        assert_eq!(err.reason, "unknown broker config");
        // From the metadata: what cannot apply is left out, the rest applies.
        let lenient = config.with_dynamic_lenient(
            &map(&[("log.retention.ms", "5000"), ("num.partitions", "3")]),
            &map(&[
                ("log.retention.bytes", "oops"),
                ("log.segment.bytes", "4096"),
            ]),
        );
        assert_eq!(lenient.log_retention_ms, 5000);
        assert_eq!(lenient.log_retention_bytes, -1);
        assert_eq!(lenient.log_segment_bytes, 4096);
        assert_eq!(lenient.num_partitions, 1);
    }

    #[test]
    fn names_of_a_dynamic_change() {
        let stored = map(&[("old.removed.config", "1")]);
        let check = |set: &[(&str, &str)], delete: &[&str]| {
            let delete: Vec<String> = delete.iter().map(|s| s.to_string()).collect();
            check_dynamic_names(&map(set), &delete, &stored, false)
                .map_err(|e| (e.kafka_error_code(), e.to_string()))
        };
        assert_eq!(
            check(&[("log.retention.ms", "1")], &["log.segment.bytes"]),
            Ok(())
        );
        assert_eq!(
            check(&[("log.retention.msec", "1")], &[]),
            Err((40, "Unknown broker config name: log.retention.msec".into()))
        );
        assert_eq!(
            check(&[], &["nope"]),
            Err((40, "Unknown broker config name: nope".into()))
        );
        // A stale name stored may go.
        assert_eq!(check(&[], &["old.removed.config"]), Ok(()));
        assert_eq!(
            check(
                &[
                    ("num.partitions", "3"),
                    ("broker.rack", "a"),
                    ("log.retention.ms", "1")
                ],
                &[]
            ),
            Err((
                42,
                "Cannot update these configs dynamically: Set(broker.rack, num.partitions)".into()
            ))
        );
        let invalid: weir_meta::MetaError = build(&[])
            .unwrap()
            .with_dynamic(&map(&[("log.retention.bytes", "-9")]), &BTreeMap::new())
            .unwrap_err()
            .into();
        assert_eq!(invalid.kafka_error_code(), 40);
        assert_eq!(
            invalid.to_string(),
            format!(
                "Invalid value -9 for configuration log.retention.bytes: must be between -1 and {}",
                i64::MAX
            )
        );
    }

    #[test]
    fn only_kafkas_dynamic_configs_are_dynamic() {
        let dynamic: Vec<&str> = BROKER_CONFIGS
            .iter()
            .filter(|d| d.dynamic)
            .map(|d| d.name)
            .collect();
        for name in [
            "log.retention.ms",
            "log.retention.bytes",
            "log.segment.bytes",
            "log.cleanup.policy",
            "message.max.bytes",
            "log.flush.interval.ms",
            "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.min.cleanable.ratio",
        ] {
            assert!(dynamic.contains(&name), "{name}");
        }
        for name in [
            "num.partitions",
            "log.cleaner.enable",
            "log.retention.check.interval.ms",
            "broker.rack",
            "socket.request.max.bytes",
        ] {
            assert!(!dynamic.contains(&name), "{name}");
        }
        // Each dynamic config that supplies a topic default names its
        // topic config's type.
        for def in weir_meta::topic_config::all() {
            if let Some(broker) = def.broker_config.and_then(lookup) {
                assert_eq!(broker.config_type, def.config_type, "{}", def.name);
            }
        }
    }

    #[test]
    fn replication_throttles_are_dynamic_longs_unlimited_by_default() {
        let config = build(&[]).unwrap();
        assert_eq!(config.leader_replication_throttled_rate, i64::MAX);
        assert_eq!(config.follower_replication_throttled_rate, i64::MAX);
        assert_eq!(
            config.replica_alter_log_dirs_io_max_bytes_per_second,
            i64::MAX
        );
        assert_eq!(config.replication_quota_window_num, 11);
        assert_eq!(config.replication_quota_window_size_seconds, 1);
        for name in [
            "leader.replication.throttled.rate",
            "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second",
        ] {
            let def = lookup(name).unwrap();
            assert!(def.dynamic, "{name}");
            assert_eq!(def.config_type, ConfigType::Long);
            assert_eq!(def.default, Some("9223372036854775807"));
        }
        let none = BTreeMap::new();
        let dynamic = config
            .with_dynamic(
                &map(&[("leader.replication.throttled.rate", "1000")]),
                &map(&[("follower.replication.throttled.rate", "0")]),
            )
            .unwrap();
        assert_eq!(dynamic.leader_replication_throttled_rate, 1000);
        assert_eq!(dynamic.follower_replication_throttled_rate, 0);
        let err = config
            .with_dynamic(&map(&[("leader.replication.throttled.rate", "-1")]), &none)
            .unwrap_err();
        assert_eq!(err.name, "leader.replication.throttled.rate");
        let err = config
            .with_dynamic(
                &none,
                &map(&[("follower.replication.throttled.rate", "1.5")]),
            )
            .unwrap_err();
        assert_eq!(err.name, "follower.replication.throttled.rate");
        assert!(!lookup("replication.quota.window.num").unwrap().dynamic);
    }

    #[test]
    fn connection_limits_are_kafkas_and_checked_as_kafka_checks_them() {
        let config = build(&[]).unwrap();
        assert_eq!(config.max_connections, i32::MAX as usize);
        assert_eq!(config.max_connections_per_ip, i32::MAX as usize);
        assert!(config.max_connections_per_ip_overrides.is_empty());
        for name in [
            "max.connections",
            "max.connections.per.ip",
            "max.connections.per.ip.overrides",
        ] {
            assert!(lookup(name).unwrap().dynamic, "{name}");
        }
        let config = build(&[(
            "max.connections.per.ip.overrides",
            "127.0.0.1:200, [::1]:5,10.0.0.7:0",
        )])
        .unwrap();
        let overrides: Vec<(String, usize)> = config
            .max_connections_per_ip_overrides
            .iter()
            .map(|(ip, n)| (ip.to_string(), *n))
            .collect();
        assert_eq!(
            overrides,
            [
                ("10.0.0.7".to_owned(), 0),
                ("127.0.0.1".to_owned(), 200),
                ("::1".to_owned(), 5)
            ]
        );
        for bad in ["broker-1:5", "127.0.0.1", "127.0.0.1:-1", "127.0.0.1:many"] {
            let err = build(&[("max.connections.per.ip.overrides", bad)]).unwrap_err();
            assert_eq!(err.name, "max.connections.per.ip.overrides", "{bad}");
        }
        // Zero per address only with exceptions, as Kafka.
        let err = build(&[("max.connections.per.ip", "0")]).unwrap_err();
        assert_eq!(err.name, "max.connections.per.ip");
        assert!(build(&[
            ("max.connections.per.ip", "0"),
            ("max.connections.per.ip.overrides", "10.0.0.1:10"),
        ])
        .is_ok());
    }

    #[test]
    fn the_request_memory_holds_at_least_the_largest_request() {
        assert_eq!(
            build(&[]).unwrap().socket_request_receive_timeout_ms,
            30_000
        );
        let err = build(&[
            ("queued.max.request.bytes", "2097152"),
            ("socket.request.max.bytes", "4194304"),
        ])
        .unwrap_err();
        assert_eq!(err.name, "queued.max.request.bytes");
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
    fn syn(
        name: &'static str,
        value: Option<&str>,
        source: ConfigSource,
    ) -> (&'static str, Option<String>, ConfigSource) {
        (name, value.map(str::to_owned), source)
    }

    /// The names of one of the lists of Kafka's config names in tests/data.
    fn kafka_names(list: &str) -> Vec<&str> {
        list.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect()
    }

    #[test]
    fn every_broker_topic_and_group_config_name_of_kafka_4_is_known() {
        let broker = kafka_names(include_str!(
            "../../tests/data/kafka-4.x-broker-configs.txt"
        ));
        assert!(broker.len() > 300, "{}", broker.len());
        let unknown: Vec<&str> = broker
            .into_iter()
            .filter(|name| lookup(name).is_none())
            .collect();
        assert!(unknown.is_empty(), "unknown broker configs: {unknown:?}");
        let topic = kafka_names(include_str!("../../tests/data/kafka-4.x-topic-configs.txt"));
        let unknown: Vec<&str> = topic
            .into_iter()
            .filter(|name| weir_meta::topic_config::lookup(name).is_none())
            .collect();
        assert!(unknown.is_empty(), "unknown topic configs: {unknown:?}");
        let group = kafka_names(include_str!("../../tests/data/kafka-4.x-group-configs.txt"));
        let unknown: Vec<&str> = group
            .into_iter()
            .filter(|name| crate::config::groups::lookup(name).is_none())
            .collect();
        assert!(unknown.is_empty(), "unknown group configs: {unknown:?}");
    }

    #[test]
    fn the_readme_lists_exactly_the_configs_with_no_effect() {
        let readme = include_str!("../../../../README.md");
        let section = readme
            .split("### Kafka configs accepted with no effect")
            .nth(1)
            .and_then(|rest| rest.split("\n### ").next())
            .expect("the README's section on configs with no effect");
        let between = |from: &str, to: &str| -> BTreeSet<&str> {
            let text = section
                .split(from)
                .nth(1)
                .unwrap()
                .split(to)
                .next()
                .unwrap();
            text.split('`').skip(1).step_by(2).collect()
        };
        let broker: BTreeSet<&str> = INERT_CONFIGS.iter().map(|def| def.name).collect();
        assert_eq!(between("Broker configs:", "Group configs"), broker);
        let group: BTreeSet<&str> = crate::config::groups::GROUP_CONFIGS
            .iter()
            .filter(|def| def.inert)
            .map(|def| def.name)
            .collect();
        assert_eq!(
            between("Group configs (GROUP resources):", "Topic configs"),
            group
        );
    }

    #[test]
    fn every_config_is_defined_once_sorted_where_looked_up_and_its_default_valid() {
        for pair in INERT_CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} >= {}",
                pair[0].name,
                pair[1].name
            );
        }
        let mut seen = BTreeSet::new();
        for def in BROKER_CONFIGS
            .iter()
            .chain(STARTUP_CONFIGS)
            .chain(INERT_CONFIGS)
        {
            assert!(seen.insert(def.name), "{} defined twice", def.name);
            assert!(def.dynamic || !def.per_broker, "{}", def.name);
            if let Some(default) = def.default {
                def.check(default)
                    .unwrap_or_else(|e| panic!("default of {}: {e}", def.name));
            }
        }
    }

    #[test]
    fn configs_with_no_effect_are_validated_by_kafkas_rules() {
        let config = build(&[
            ("sasl.kerberos.min.time.before.relogin", "120000"),
            ("zookeeper.connect", "zk:2181"),
        ])
        .unwrap();
        assert_eq!(
            config.values["sasl.kerberos.min.time.before.relogin"],
            "120000"
        );
        assert_eq!(
            config.synonyms("sasl.kerberos.min.time.before.relogin")[0],
            syn(
                "sasl.kerberos.min.time.before.relogin",
                Some("120000"),
                ConfigSource::StaticBrokerConfig
            )
        );
        let table: &[(&str, &str, &str)] = &[
            (
                "sasl.kerberos.min.time.before.relogin",
                "soon",
                "Not a number of type LONG",
            ),
            ("num.io.threads", "0", "Value must be at least 1"),
            (
                "sasl.kerberos.ticket.renew.window.factor",
                "x",
                "Not a number of type DOUBLE",
            ),
            (
                "security.inter.broker.protocol",
                "TLS",
                "String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
            ),
            (
                "controlled.shutdown.enable",
                "yes",
                "Expected value to be either true or false",
            ),
            ("no.such.config", "1", "unknown broker config"),
        ];
        for &(name, value, reason) in table {
            let error = build(&[(name, value)]).unwrap_err();
            assert_eq!((error.name.as_str(), error.reason.as_str()), (name, reason));
        }
    }

    #[test]
    fn retention_in_ms_wins_over_minutes_which_win_over_hours() {
        let hours = build(&[("log.retention.hours", "2")]).unwrap();
        assert_eq!(hours.log_retention_ms, 2 * 3_600_000);
        let minutes =
            build(&[("log.retention.hours", "2"), ("log.retention.minutes", "3")]).unwrap();
        assert_eq!(minutes.log_retention_ms, 3 * 60_000);
        let ms = build(&[
            ("log.retention.hours", "2"),
            ("log.retention.minutes", "3"),
            ("log.retention.ms", "4000"),
        ])
        .unwrap();
        assert_eq!(ms.log_retention_ms, 4000);
        assert_eq!(
            build(&[("log.retention.hours", "-1")])
                .unwrap()
                .log_retention_ms,
            -1
        );
        assert_eq!(build(&[]).unwrap().log_roll_ms, 7 * 24 * 3_600_000);
        assert_eq!(
            build(&[("log.roll.hours", "1")]).unwrap().log_roll_ms,
            3_600_000
        );
        let roll = build(&[("log.roll.hours", "1"), ("log.roll.ms", "5000")]).unwrap();
        assert_eq!(roll.log_roll_ms, 5000);
        // A dynamic log.retention.ms beats static hours; the synonyms list
        // level by level, each in Kafka's order, and from the name asked.
        let dynamic = minutes
            .with_dynamic(&map(&[("log.retention.ms", "9000")]), &BTreeMap::new())
            .unwrap();
        assert_eq!(dynamic.log_retention_ms, 9000);
        use ConfigSource::{DefaultConfig, DynamicDefaultBrokerConfig, StaticBrokerConfig};
        assert_eq!(
            dynamic.synonyms("log.retention.ms"),
            [
                syn("log.retention.ms", Some("9000"), DynamicDefaultBrokerConfig),
                syn("log.retention.minutes", Some("3"), StaticBrokerConfig),
                syn("log.retention.hours", Some("2"), StaticBrokerConfig),
                syn("log.retention.ms", None, DefaultConfig),
                syn("log.retention.minutes", None, DefaultConfig),
                syn("log.retention.hours", Some("168"), DefaultConfig),
            ]
        );
        // Without it, everything before Kafka's null default is dropped.
        assert_eq!(
            minutes.synonyms("log.retention.ms"),
            [
                syn("log.retention.ms", None, DefaultConfig),
                syn("log.retention.minutes", None, DefaultConfig),
                syn("log.retention.hours", Some("168"), DefaultConfig),
            ]
        );
        assert_eq!(
            minutes.synonyms("log.retention.hours"),
            [
                syn("log.retention.hours", Some("2"), StaticBrokerConfig),
                syn("log.retention.ms", None, DefaultConfig),
                syn("log.retention.minutes", None, DefaultConfig),
                syn("log.retention.hours", Some("168"), DefaultConfig),
            ]
        );
        assert_eq!(
            minutes.topic_default("log.retention.ms").as_deref(),
            Some("180000")
        );
        // Read-only in Kafka, so refused dynamically.
        let error = minutes
            .with_dynamic(&map(&[("log.retention.hours", "1")]), &BTreeMap::new())
            .unwrap_err();
        assert_eq!(error.reason, "cannot be updated dynamically");
    }

    #[test]
    fn per_broker_configs_cannot_be_cluster_wide_defaults() {
        let set = map(&[("sasl.kerberos.min.time.before.relogin", "1000")]);
        let none = BTreeMap::new();
        check_dynamic_names(&set, &[], &none, false).unwrap();
        let error = check_dynamic_names(&set, &[], &none, true).unwrap_err();
        assert_eq!(
            error.to_string(),
            weir_meta::MetaError::InvalidRequest(
                "Cannot update these configs at default cluster level, broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)".to_owned()
            )
            .to_string()
        );
        let error = check_dynamic_names(&map(&[("zookeeper.connect", "zk")]), &[], &none, false)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("Cannot update these configs dynamically: Set(zookeeper.connect)"),
            "{error}"
        );
    }
}
