//! The configs in force for a topic: its own overrides, else the broker
//! config that supplies the default, else Kafka's default.

use std::collections::BTreeMap;

use weir_meta::topic_config::{self, TopicConfigDef};

use crate::config::BrokerConfig;

/// Where a config value comes from, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    TopicConfig = 1,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
}

#[derive(Debug, Clone)]
pub struct EffectiveConfig {
    pub def: &'static TopicConfigDef,
    pub value: String,
    pub source: ConfigSource,
}

/// Every topic config with its value and source.
pub fn effective(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<EffectiveConfig> {
    topic_config::all()
        .map(|def| {
            if let Some(value) = overrides.get(def.name) {
                return EffectiveConfig {
                    def,
                    value: value.clone(),
                    source: ConfigSource::TopicConfig,
                };
            }
            let from_broker = def
                .broker_config
                .and_then(|name| Some((name, broker.values.get(name)?)));
            match from_broker {
                Some((name, value)) => EffectiveConfig {
                    def,
                    value: value.clone(),
                    source: if broker.overridden.iter().any(|o| o == name) {
                        ConfigSource::StaticBrokerConfig
                    } else {
                        ConfigSource::DefaultConfig
                    },
                },
                None => EffectiveConfig {
                    def,
                    value: def.default.to_owned(),
                    source: ConfigSource::DefaultConfig,
                },
            }
        })
        .collect()
}
