//! The configs in force for a topic: its own overrides, else the broker
//! config that supplies the default (dynamic for this broker, dynamic for
//! the cluster, static), else Kafka's default.

use std::collections::BTreeMap;

use weir_meta::topic_config::{self, TopicConfigDef};

use crate::config::BrokerConfig;
pub use crate::config::ConfigSource;

#[derive(Debug, Clone)]
pub struct EffectiveConfig {
    pub def: &'static TopicConfigDef,
    pub value: String,
    pub source: ConfigSource,
    /// Every level that has a value, in order of precedence, with the
    /// config name at that level (the topic's, then the broker's): what
    /// DescribeConfigs reports as synonyms. The first is the value in force.
    pub synonyms: Vec<(&'static str, String, ConfigSource)>,
}

/// Every topic config with its value and source.
pub fn effective(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<EffectiveConfig> {
    topic_config::all()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(value) = overrides.get(def.name) {
                synonyms.push((def.name, value.clone(), ConfigSource::TopicConfig));
            }
            match def.broker_config.and_then(crate::config::lookup) {
                Some(broker_def) => synonyms.extend(
                    broker
                        .synonyms(broker_def.name)
                        .into_iter()
                        .map(|(value, source)| (broker_def.name, value, source)),
                ),
                None => synonyms.push((
                    def.name,
                    def.default.to_owned(),
                    ConfigSource::DefaultConfig,
                )),
            }
            let (_, value, source) = synonyms[0].clone();
            EffectiveConfig {
                def,
                value,
                source,
                synonyms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inherited_value_reports_the_level_it_comes_from() {
        let values = BTreeMap::from([("log.retention.bytes".to_owned(), "100".to_owned())]);
        let config = BrokerConfig::new(
            1,
            "d".into(),
            "127.0.0.1:9092".parse().unwrap(),
            None,
            "127.0.0.1:9644".parse().unwrap(),
            &values,
        )
        .unwrap()
        .with_dynamic(
            &BTreeMap::from([("log.retention.ms".to_owned(), "5000".to_owned())]),
            &BTreeMap::from([("log.cleanup.policy".to_owned(), "compact".to_owned())]),
        )
        .unwrap();
        let overrides = BTreeMap::from([("segment.bytes".to_owned(), "4096".to_owned())]);
        let all = effective(&config, &overrides);
        let find = |name: &str| all.iter().find(|c| c.def.name == name).unwrap();
        let source = |name: &str| (find(name).value.clone(), find(name).source);
        assert_eq!(
            source("segment.bytes"),
            ("4096".into(), ConfigSource::TopicConfig)
        );
        assert_eq!(
            source("cleanup.policy"),
            ("compact".into(), ConfigSource::DynamicBrokerConfig)
        );
        assert_eq!(
            source("retention.ms"),
            ("5000".into(), ConfigSource::DynamicDefaultBrokerConfig)
        );
        assert_eq!(
            source("retention.bytes"),
            ("100".into(), ConfigSource::StaticBrokerConfig)
        );
        assert_eq!(
            source("max.compaction.lag.ms"),
            ("9223372036854775807".into(), ConfigSource::DefaultConfig)
        );
        // A topic config whose broker synonym no level sets.
        assert_eq!(
            source("min.insync.replicas"),
            ("1".into(), ConfigSource::DefaultConfig)
        );
        assert_eq!(
            find("segment.bytes")
                .synonyms
                .iter()
                .map(|(name, value, source)| (*name, value.as_str(), *source))
                .collect::<Vec<_>>(),
            [
                ("segment.bytes", "4096", ConfigSource::TopicConfig),
                (
                    "log.segment.bytes",
                    "1073741824",
                    ConfigSource::DefaultConfig
                ),
            ]
        );
    }
}
