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
/// an error names a config that is unknown or out of range, or a
/// heartbeat interval not below the session timeout.
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
    if config.heartbeat_interval_ms >= config.session_timeout_ms {
        return Err(format!(
            "consumer.heartbeat.interval.ms ({}) must be below consumer.session.timeout.ms ({})",
            config.heartbeat_interval_ms, config.session_timeout_ms
        ));
    }
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
        assert!(apply(
            &broker,
            &configs(&[("consumer.heartbeat.interval.ms", "45000")])
        )
        .is_err());
    }
}
