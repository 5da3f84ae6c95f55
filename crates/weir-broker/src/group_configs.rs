//! The configs of a group (Kafka's GROUP config resource, KIP-848): a
//! consumer group's session timeout and heartbeat interval, set per group
//! with IncrementalAlterConfigs and stored in the replicated metadata;
//! unset, a group takes the broker's `group.consumer.*` values.

use std::collections::BTreeMap;

use weir_meta::topic_config::ConfigType;

use crate::consumer_group::ConsumerGroupConfig;

/// One group config: its name and the broker config it defaults to.
pub struct GroupConfigDef {
    pub name: &'static str,
    pub broker_default: &'static str,
    pub doc: &'static str,
}

pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    GroupConfigDef {
        name: "consumer.session.timeout.ms",
        broker_default: "group.consumer.session.timeout.ms",
        doc: "How long a member of this consumer group may go without a heartbeat before it is removed",
    },
    GroupConfigDef {
        name: "consumer.heartbeat.interval.ms",
        broker_default: "group.consumer.heartbeat.interval.ms",
        doc: "How often members of this consumer group heartbeat",
    },
];

/// Every group config is an int.
pub const GROUP_CONFIG_TYPE: ConfigType = ConfigType::Int;

pub fn lookup(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|def| def.name == name)
}

/// `broker`'s consumer group settings with a group's `configs` on top;
/// an error names a config that is unknown, outside the broker's
/// `group.consumer.min/max.*` bounds, or a heartbeat interval not below
/// the session timeout.
pub fn apply(
    broker: &ConsumerGroupConfig,
    configs: &BTreeMap<String, String>,
) -> Result<ConsumerGroupConfig, String> {
    let mut config = broker.clone();
    for (name, value) in configs {
        let parsed: i32 = value
            .trim()
            .parse()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| {
                format!("Invalid value {value} for configuration {name}: must be a positive int")
            })?;
        match name.as_str() {
            "consumer.session.timeout.ms" => config.session_timeout_ms = parsed,
            "consumer.heartbeat.interval.ms" => config.heartbeat_interval_ms = parsed,
            other => return Err(format!("Unknown group config name: {other}")),
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
        assert!(apply(&broker, &configs(&[("share.record.lock.duration.ms", "1")])).is_err());
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
}
