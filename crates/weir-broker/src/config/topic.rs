//! The configs in force for a topic: its own overrides, else the broker
//! config that supplies the default (dynamic for this broker, dynamic for
//! the cluster, static), else Kafka's default.

use std::collections::BTreeMap;

use weir_log::LogConfig;
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
    pub synonyms: Vec<(&'static str, Option<String>, ConfigSource)>,
}

/// Every topic config with its value and source. A value inherited from
/// a broker config given in other units (`log.retention.hours`,
/// `log.roll.hours`, …) is shown in the topic config's milliseconds, as
/// Kafka shows it.
pub fn effective(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<EffectiveConfig> {
    topic_config::all()
        .map(|def| {
            let broker_def = def.broker_config.and_then(crate::config::lookup);
            let mut synonyms = Vec::new();
            if let Some(value) = overrides.get(def.name) {
                synonyms.push((def.name, Some(value.clone()), ConfigSource::TopicConfig));
            }
            if let Some(broker_def) = broker_def {
                synonyms.extend(broker.synonyms(broker_def.name));
            }
            let value = match overrides.get(def.name) {
                Some(value) => value.clone(),
                None => broker_def
                    .and_then(|broker_def| broker.topic_default(broker_def.name))
                    .unwrap_or_else(|| def.default.to_owned()),
            };
            let source = synonyms
                .first()
                .map_or(ConfigSource::DefaultConfig, |(_, _, source)| *source);
            EffectiveConfig {
                def,
                value,
                source,
                synonyms,
            }
        })
        .collect()
}

/// The log settings of a topic, config by config: Kafka's default, then
/// the broker's value for topics (dynamic for this broker, dynamic for the
/// cluster, static; in milliseconds for one given in other units), then the
/// topic's own. A value that does not parse leaves the one before it.
pub fn log_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let mut config = LogConfig::default();
    for def in weir_meta::topic_config::all() {
        let inherited = def
            .broker_config
            .and_then(|name| broker.topic_default(name));
        let own = overrides.get(def.name).map(String::as_str);
        for value in [Some(def.default), inherited.as_deref(), own]
            .into_iter()
            .flatten()
        {
            config.set(def.name, value);
        }
    }
    config
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
                .map(|(name, value, source)| (*name, value.as_deref(), *source))
                .collect::<Vec<_>>(),
            [
                ("segment.bytes", Some("4096"), ConfigSource::TopicConfig),
                (
                    "log.segment.bytes",
                    Some("1073741824"),
                    ConfigSource::DefaultConfig
                ),
            ]
        );
    }
    #[test]
    fn a_default_given_in_hours_is_shown_in_the_topic_configs_milliseconds() {
        let values = BTreeMap::from([
            ("log.retention.hours".to_owned(), "1".to_owned()),
            ("log.roll.hours".to_owned(), "2".to_owned()),
        ]);
        let config = BrokerConfig::new(
            1,
            "d".into(),
            "127.0.0.1:9092".parse().unwrap(),
            None,
            "127.0.0.1:9644".parse().unwrap(),
            &values,
        )
        .unwrap();
        let all = effective(&config, &BTreeMap::new());
        let find = |name: &str| all.iter().find(|c| c.def.name == name).unwrap();
        let retention = find("retention.ms");
        // As Kafka: log.retention.ms's synonyms from its null default on,
        // so DEFAULT_CONFIG, with the value of the hour given.
        assert_eq!(
            (retention.value.as_str(), retention.source),
            ("3600000", ConfigSource::DefaultConfig)
        );
        assert_eq!(
            retention.synonyms,
            [
                ("log.retention.ms", None, ConfigSource::DefaultConfig),
                ("log.retention.minutes", None, ConfigSource::DefaultConfig),
                (
                    "log.retention.hours",
                    Some("168".to_owned()),
                    ConfigSource::DefaultConfig
                ),
            ]
        );
        assert_eq!(find("segment.ms").value, "7200000");
        // Nothing given: Kafka's 168 hours, as DEFAULT_CONFIG.
        let none = BrokerConfig::new(
            1,
            "d".into(),
            "127.0.0.1:9092".parse().unwrap(),
            None,
            "127.0.0.1:9644".parse().unwrap(),
            &BTreeMap::new(),
        )
        .unwrap();
        let all = effective(&none, &BTreeMap::new());
        let retention = all.iter().find(|c| c.def.name == "retention.ms").unwrap();
        assert_eq!(
            (retention.value.as_str(), retention.source),
            ("604800000", ConfigSource::DefaultConfig)
        );
        let log = super::log_config(&config, &BTreeMap::new());
        assert_eq!((log.retention_ms, log.segment_ms), (3_600_000, 7_200_000));
    }

    #[test]
    fn a_log_takes_the_topics_value_else_the_brokers_else_kafkas() {
        for name in weir_log::LogConfig::topic_configs() {
            assert!(topic_config::lookup(name).is_some(), "{name}");
        }
        let values = BTreeMap::from([
            ("log.retention.hours".to_owned(), "2".to_owned()),
            ("log.segment.bytes".to_owned(), "8192".to_owned()),
        ]);
        let config = BrokerConfig::new(
            1,
            "d".into(),
            "127.0.0.1:9092".parse().unwrap(),
            None,
            "127.0.0.1:9644".parse().unwrap(),
            &values,
        )
        .unwrap();
        let overrides = BTreeMap::from([
            ("segment.bytes".to_owned(), "4096".to_owned()),
            ("retention.ms".to_owned(), "soon".to_owned()),
        ]);
        let log = super::log_config(&config, &overrides);
        assert_eq!(log.segment_bytes, 4096);
        // A value that does not parse leaves the broker's.
        assert_eq!(log.retention_ms, 2 * 3_600_000);
        assert_eq!(log.flush_messages, i64::MAX as u64);
        assert_eq!(log.cleanup_policy, weir_log::CleanupPolicy::DELETE);
    }
}
