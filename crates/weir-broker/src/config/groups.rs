//! The configs of a group (Kafka's GROUP config resource, KIP-848 and
//! KIP-932): a consumer group's session timeout and heartbeat interval, a
//! share group's, how long its members hold records, how often a record is
//! delivered, where it starts, what it reads, and where its dead letters go
//! (KIP-1191). Set per group with IncrementalAlterConfigs and stored in the
//! replicated metadata; unset, a group takes the broker's `group.*` value
//! or the config's own default.
//!
//! Every group config of Kafka 4.x (`GroupConfig`) is known. Those of
//! streams groups (KIP-1071), the assignment intervals and
//! `share.renew.acknowledge.enable` (KIP-1222) are accepted, validated,
//! stored and described with no effect on Weir ([`GroupConfigDef::inert`]).

use std::collections::BTreeMap;

use weir_meta::topic_config::{ConfigType, Valid};

use weir_coord::consumer::ConsumerGroupConfig;

/// Where an unset group config takes its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupDefault {
    /// The broker config of this name.
    Broker(&'static str),
    /// This value.
    Value(&'static str),
}

/// One group config.
pub struct GroupConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    pub default: GroupDefault,
    /// Kafka's check of a value beyond its type.
    pub valid: Valid,
    /// Accepted and stored with no effect on Weir.
    pub inert: bool,
    pub doc: &'static str,
}

/// Every group config, sorted by name.
pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    GroupConfigDef {
        name: "consumer.assignment.interval.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Value("1000"),
        valid: Valid::AtLeast(0),
        inert: true,
        doc: "The interval between assignment updates of this consumer group",
    },
    GroupConfigDef {
        name: "consumer.heartbeat.interval.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.consumer.heartbeat.interval.ms"),
        valid: Valid::AtLeast(1),
        inert: false,
        doc: "How often members of this consumer group heartbeat",
    },
    GroupConfigDef {
        name: "consumer.session.timeout.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.consumer.session.timeout.ms"),
        valid: Valid::AtLeast(1),
        inert: false,
        doc: "How long a member of this consumer group may go without a heartbeat before it is removed",
    },
    GroupConfigDef {
        name: "errors.deadletterqueue.copy.record.enable",
        config_type: ConfigType::Boolean,
        default: GroupDefault::Value("false"),
        valid: Valid::Any,
        inert: false,
        doc: "Whether a dead letter of this share group carries the record's key and value, not only headers naming it",
    },
    GroupConfigDef {
        name: "errors.deadletterqueue.topic.name",
        config_type: ConfigType::String,
        default: GroupDefault::Value(""),
        valid: Valid::Any,
        inert: false,
        doc: "The topic a share group writes the records it archives as undeliverable to (rejected, or delivered too often); empty for none",
    },
    GroupConfigDef {
        name: "share.assignment.interval.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Value("1000"),
        valid: Valid::AtLeast(0),
        inert: true,
        doc: "The interval between assignment updates of this share group",
    },
    GroupConfigDef {
        name: "share.auto.offset.reset",
        config_type: ConfigType::String,
        default: GroupDefault::Value("latest"),
        valid: Valid::Any,
        inert: false,
        doc: "Where a share group starts reading a partition it has no state for: earliest or latest",
    },
    GroupConfigDef {
        name: "share.delivery.count.limit",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.share.delivery.count.limit"),
        valid: Valid::Any,
        inert: false,
        doc: "How often this share group delivers a record before archiving it",
    },
    GroupConfigDef {
        name: "share.heartbeat.interval.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.share.heartbeat.interval.ms"),
        valid: Valid::AtLeast(1),
        inert: false,
        doc: "How often members of this share group heartbeat",
    },
    GroupConfigDef {
        name: "share.isolation.level",
        config_type: ConfigType::String,
        default: GroupDefault::Value("read_uncommitted"),
        valid: Valid::Any,
        inert: false,
        doc: "Whether this share group delivers records of transactions not yet committed (read_uncommitted) or only committed ones (read_committed)",
    },
    GroupConfigDef {
        name: "share.partition.max.record.locks",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.share.partition.max.record.locks"),
        valid: Valid::AtLeast(1),
        inert: false,
        doc: "The most records of one share-partition of this share group in flight at once",
    },
    GroupConfigDef {
        name: "share.record.lock.duration.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.share.record.lock.duration.ms"),
        valid: Valid::AtLeast(1000),
        inert: false,
        doc: "How long a record a member of this share group acquired stays with it",
    },
    GroupConfigDef {
        name: "share.renew.acknowledge.enable",
        config_type: ConfigType::Boolean,
        default: GroupDefault::Value("false"),
        valid: Valid::Any,
        inert: true,
        doc: "Whether members of this share group may renew the lock of a record they hold (KIP-1222)",
    },
    GroupConfigDef {
        name: "share.session.timeout.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.share.session.timeout.ms"),
        valid: Valid::AtLeast(1),
        inert: false,
        doc: "How long a member of this share group may go without a heartbeat before it is removed",
    },
    GroupConfigDef {
        name: "streams.heartbeat.interval.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.streams.heartbeat.interval.ms"),
        valid: Valid::AtLeast(1),
        inert: true,
        doc: "How often members of this streams group heartbeat",
    },
    GroupConfigDef {
        name: "streams.initial.rebalance.delay.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.streams.initial.rebalance.delay.ms"),
        valid: Valid::AtLeast(0),
        inert: true,
        doc: "How long the first rebalance of this streams group waits for more members",
    },
    GroupConfigDef {
        name: "streams.num.standby.replicas",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.streams.num.standby.replicas"),
        valid: Valid::AtLeast(0),
        inert: true,
        doc: "The standby replicas of each task of this streams group",
    },
    GroupConfigDef {
        name: "streams.session.timeout.ms",
        config_type: ConfigType::Int,
        default: GroupDefault::Broker("group.streams.session.timeout.ms"),
        valid: Valid::AtLeast(1),
        inert: true,
        doc: "How long a member of this streams group may go without a heartbeat before it is removed",
    },
    GroupConfigDef {
        name: "weir.share.release.backoff.max.ms",
        config_type: ConfigType::Long,
        default: GroupDefault::Value("60000"),
        valid: Valid::Any,
        inert: false,
        doc: "A Weir extension: the longest wait before a released record of this share group is available again",
    },
    GroupConfigDef {
        name: "weir.share.release.backoff.ms",
        config_type: ConfigType::Long,
        default: GroupDefault::Value("0"),
        valid: Valid::Any,
        inert: false,
        doc: "A Weir extension: the wait before a record this share group released (or whose lock expired) is available again after its first delivery, doubling with each further one; 0 for none",
    },
];

pub fn lookup(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|def| def.name == name)
}

/// A broker setting with the bounds a group's own value must keep to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded {
    pub value: i32,
    pub min: i32,
    pub max: i32,
}

/// The broker's `group.share.*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareBrokerConfig {
    pub heartbeat_interval_ms: Bounded,
    pub session_timeout_ms: Bounded,
    pub record_lock_duration_ms: Bounded,
    /// `group.share.delivery.count.limit`, 2 to 10.
    pub delivery_count_limit: i32,
    /// `group.share.partition.max.record.locks`.
    pub partition_max_record_locks: i32,
    /// `group.share.max.size`.
    pub max_size: i32,
    /// `group.share.max.share.sessions`.
    pub max_share_sessions: usize,
    /// `errors.deadletterqueue.topic.name.prefix`: what a dead-letter
    /// topic's name begins with.
    pub dead_letter_topic_prefix: String,
    /// `share.coordinator.state.topic.num.partitions`.
    pub state_topic_num_partitions: i32,
    /// `share.coordinator.state.topic.replication.factor`.
    pub state_topic_replication_factor: i32,
    /// `share.coordinator.state.topic.min.isr`.
    pub state_topic_min_isr: i32,
}

impl Default for ShareBrokerConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: Bounded {
                value: 5_000,
                min: 5_000,
                max: 15_000,
            },
            session_timeout_ms: Bounded {
                value: 45_000,
                min: 45_000,
                max: 60_000,
            },
            record_lock_duration_ms: Bounded {
                value: 30_000,
                min: 15_000,
                max: 60_000,
            },
            delivery_count_limit: 5,
            partition_max_record_locks: 2_000,
            max_size: 200,
            max_share_sessions: 2_000,
            dead_letter_topic_prefix: "dlq.".to_owned(),
            state_topic_num_partitions: 50,
            state_topic_replication_factor: 3,
            state_topic_min_isr: 2,
        }
    }
}

/// Where a share group starts a partition it has no state for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareAutoOffsetReset {
    Earliest,
    Latest,
}

/// A share group's settings: the broker's with the group's configs on top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSettings {
    pub heartbeat_interval_ms: i32,
    pub session_timeout_ms: i32,
    pub max_size: usize,
    pub partition: weir_coord::share::SharePartitionConfig,
    pub auto_offset_reset: ShareAutoOffsetReset,
    pub read_committed: bool,
    /// `errors.deadletterqueue.topic.name`, if set.
    pub dead_letter_topic: Option<String>,
    pub copy_dead_letter_record: bool,
}

/// The consumer group settings of a group: `broker`'s, with the group's
/// `configs` on top. An error names a config that is unknown or whose
/// value does not fit (its type, the broker's bounds, the heartbeat
/// interval below the session timeout), for every config given.
pub fn apply(
    broker: &ConsumerGroupConfig,
    configs: &BTreeMap<String, String>,
) -> Result<ConsumerGroupConfig, String> {
    let mut config = broker.clone();
    for (name, value) in configs {
        let def = lookup(name).ok_or_else(|| format!("Unknown group config name: {name}"))?;
        weir_meta::topic_config::check_value(def.name, def.config_type, def.valid, value)
            .map_err(|why| format!("Invalid value {value} for configuration {name}: {why}"))?;
        match name.as_str() {
            "consumer.session.timeout.ms" => config.session_timeout_ms = int(name, value)?,
            "consumer.heartbeat.interval.ms" => config.heartbeat_interval_ms = int(name, value)?,
            _ => {}
        }
    }
    config
        .check_timing(
            "consumer.heartbeat.interval.ms",
            "consumer.session.timeout.ms",
        )
        .map_err(|error| error.to_string())?;
    Ok(config)
}

/// The share group settings of a group: `broker`'s, with the group's
/// `configs` on top, checked as Kafka checks them.
pub fn share_settings(
    broker: &ShareBrokerConfig,
    configs: &BTreeMap<String, String>,
) -> Result<ShareSettings, String> {
    let get = |name: &str| configs.get(name).map(String::as_str);
    let bounded = |name: &str, broker_name: &str, bounds: Bounded| -> Result<i32, String> {
        let Some(value) = get(name) else {
            return Ok(bounds.value);
        };
        let value = int(name, value)?;
        let what = broker_name.trim_start_matches("group.share.");
        if value < bounds.min {
            return Err(format!(
                "{name} must be greater than or equal to group.share.min.{what}"
            ));
        }
        if value > bounds.max {
            return Err(format!(
                "{name} must be less than or equal to group.share.max.{what}"
            ));
        }
        Ok(value)
    };
    let heartbeat_interval_ms = bounded(
        "share.heartbeat.interval.ms",
        "group.share.heartbeat.interval.ms",
        broker.heartbeat_interval_ms,
    )?;
    let session_timeout_ms = bounded(
        "share.session.timeout.ms",
        "group.share.session.timeout.ms",
        broker.session_timeout_ms,
    )?;
    if session_timeout_ms <= heartbeat_interval_ms {
        return Err(
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms".into(),
        );
    }
    let record_lock_duration_ms = bounded(
        "share.record.lock.duration.ms",
        "group.share.record.lock.duration.ms",
        broker.record_lock_duration_ms,
    )?;
    let delivery_count_limit = match get("share.delivery.count.limit") {
        None => broker.delivery_count_limit,
        Some(value) => {
            let value = int("share.delivery.count.limit", value)?;
            if !(2..=10).contains(&value) {
                return Err("share.delivery.count.limit must be between 2 and 10".into());
            }
            value
        }
    };
    let auto_offset_reset = match get("share.auto.offset.reset").map(str::trim) {
        None | Some("latest") => ShareAutoOffsetReset::Latest,
        Some("earliest") => ShareAutoOffsetReset::Earliest,
        Some(other) => {
            return Err(format!(
                "Invalid value {other} for configuration share.auto.offset.reset: String must be one of: latest, earliest"
            ))
        }
    };
    let read_committed = match get("share.isolation.level").map(str::trim) {
        None | Some("read_uncommitted") => false,
        Some("read_committed") => true,
        Some(other) => {
            return Err(format!(
                "Invalid value {other} for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"
            ))
        }
    };
    let non_negative = |name: &str, default: u64| -> Result<u64, String> {
        match get(name) {
            None => Ok(default),
            Some(value) => value.trim().parse::<u64>().map_err(|_| {
                format!(
                    "Invalid value {value} for configuration {name}: must be a non-negative long"
                )
            }),
        }
    };
    let release_backoff_ms = non_negative("weir.share.release.backoff.ms", 0)?;
    let release_backoff_max_ms = non_negative("weir.share.release.backoff.max.ms", 60_000)?;
    let dead_letter_topic = get("errors.deadletterqueue.topic.name")
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    if let Some(name) = &dead_letter_topic {
        let prefix = &broker.dead_letter_topic_prefix;
        if !name.starts_with(prefix.as_str()) {
            return Err(format!(
                "Invalid value {name} for configuration errors.deadletterqueue.topic.name: the name of a dead-letter topic must begin with {prefix} (errors.deadletterqueue.topic.name.prefix)"
            ));
        }
        weir_meta::topic_name::validate_topic_name(name).map_err(|error| {
            format!(
                "Invalid value {name} for configuration errors.deadletterqueue.topic.name: {error}"
            )
        })?;
    }
    let max_record_locks = match get("share.partition.max.record.locks") {
        None => broker.partition_max_record_locks.max(1),
        Some(value) => int("share.partition.max.record.locks", value)?,
    } as usize;
    let copy_dead_letter_record = get("errors.deadletterqueue.copy.record.enable")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    Ok(ShareSettings {
        heartbeat_interval_ms,
        session_timeout_ms,
        max_size: broker.max_size.max(1) as usize,
        partition: weir_coord::share::SharePartitionConfig {
            record_lock_duration_ms: record_lock_duration_ms as u64,
            delivery_count_limit: delivery_count_limit as u16,
            max_in_flight: max_record_locks,
            release_backoff_ms,
            release_backoff_max_ms,
            dead_letter_topic: dead_letter_topic.is_some(),
        },
        auto_offset_reset,
        read_committed,
        dead_letter_topic,
        copy_dead_letter_record,
    })
}

/// Checks every config of a group: the names, the values' types, and
/// both kinds of settings they make.
pub fn validate(
    consumer: &ConsumerGroupConfig,
    share: &ShareBrokerConfig,
    configs: &BTreeMap<String, String>,
) -> Result<(), String> {
    apply(consumer, configs)?;
    share_settings(share, configs)?;
    Ok(())
}

fn int(name: &str, value: &str) -> Result<i32, String> {
    value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| {
            format!("Invalid value {value} for configuration {name}: must be a positive int")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn group_configs_are_sorted_by_name() {
        let names: Vec<&str> = GROUP_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }

    #[test]
    fn group_configs_override_the_brokers_and_are_checked() {
        let broker = ConsumerGroupConfig::default();
        let config = apply(
            &broker,
            &configs(&[("consumer.session.timeout.ms", "50000")]),
        )
        .unwrap();
        assert_eq!(config.session_timeout_ms, 50_000);
        assert_eq!(config.heartbeat_interval_ms, broker.heartbeat_interval_ms);
        assert!(apply(&broker, &configs(&[("consumer.session.timeout.ms", "0")])).is_err());
        assert!(apply(&broker, &configs(&[("consumer.lunch.break.ms", "1")])).is_err());
        assert_eq!(
            apply(
                &broker,
                &configs(&[("consumer.heartbeat.interval.ms", "45000")])
            ),
            Err(
                "consumer.heartbeat.interval.ms must be less than or equal to \
                 group.consumer.max.heartbeat.interval.ms (15000)"
                    .into()
            )
        );
        assert_eq!(
            apply(
                &broker,
                &configs(&[("consumer.session.timeout.ms", "44999")])
            ),
            Err(
                "consumer.session.timeout.ms must be greater than or equal to \
                 group.consumer.min.session.timeout.ms (45000)"
                    .into()
            )
        );
        // Within the bounds, the interval must still be below the timeout.
        let wide = ConsumerGroupConfig {
            heartbeat_interval_bounds: 1..=100_000,
            session_timeout_bounds: 1..=100_000,
            ..broker
        };
        assert_eq!(
            apply(
                &wide,
                &configs(&[
                    ("consumer.heartbeat.interval.ms", "9000"),
                    ("consumer.session.timeout.ms", "9000")
                ])
            ),
            Err(
                "consumer.heartbeat.interval.ms must be less than consumer.session.timeout.ms"
                    .into()
            )
        );
    }

    #[test]
    fn share_settings_take_the_groups_configs_within_the_brokers_bounds() {
        let broker = ShareBrokerConfig::default();
        let defaults = share_settings(&broker, &BTreeMap::new()).unwrap();
        assert_eq!(defaults.partition.record_lock_duration_ms, 30_000);
        assert_eq!(defaults.partition.delivery_count_limit, 5);
        assert_eq!(defaults.partition.max_in_flight, 2_000);
        assert_eq!(defaults.auto_offset_reset, ShareAutoOffsetReset::Latest);
        assert!(!defaults.read_committed);
        assert_eq!(defaults.dead_letter_topic, None);
        let set = share_settings(
            &broker,
            &configs(&[
                ("share.record.lock.duration.ms", "15000"),
                ("share.delivery.count.limit", "3"),
                ("share.auto.offset.reset", "earliest"),
                ("share.isolation.level", "read_committed"),
                ("errors.deadletterqueue.topic.name", "dlq.orders"),
                ("errors.deadletterqueue.copy.record.enable", "true"),
                ("weir.share.release.backoff.ms", "500"),
            ]),
        )
        .unwrap();
        assert_eq!(set.partition.record_lock_duration_ms, 15_000);
        assert_eq!(set.partition.delivery_count_limit, 3);
        assert_eq!(set.partition.release_backoff_ms, 500);
        assert_eq!(set.auto_offset_reset, ShareAutoOffsetReset::Earliest);
        assert!(set.read_committed);
        assert_eq!(set.dead_letter_topic.as_deref(), Some("dlq.orders"));
        assert!(set.copy_dead_letter_record);
        for (name, value, message) in [
            (
                "share.record.lock.duration.ms",
                "1000",
                "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms",
            ),
            (
                "share.session.timeout.ms",
                "60001",
                "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms",
            ),
            (
                "share.delivery.count.limit",
                "11",
                "share.delivery.count.limit must be between 2 and 10",
            ),
        ] {
            assert_eq!(
                share_settings(&broker, &configs(&[(name, value)])),
                Err(message.into())
            );
        }
        assert!(
            share_settings(&broker, &configs(&[("share.auto.offset.reset", "middle")])).is_err()
        );
        let unprefixed = share_settings(
            &broker,
            &configs(&[("errors.deadletterqueue.topic.name", "orders-dlq")]),
        );
        assert!(unprefixed.unwrap_err().contains("must begin with dlq."));
        assert!(share_settings(
            &broker,
            &configs(&[("weir.share.release.backoff.ms", "-1")])
        )
        .is_err());
        let consumer = ConsumerGroupConfig::default();
        assert!(validate(
            &consumer,
            &broker,
            &configs(&[("errors.deadletterqueue.copy.record.enable", "maybe")])
        )
        .is_err());
    }
}
