//! The topic-level configs Weir knows: names, types, Kafka's defaults, the
//! broker config that supplies each default, and value validation.
//!
//! Used to validate `CreateTopics` and `AlterConfigs` (through
//! [`MetadataImage::apply`](crate::MetadataImage::apply)) and to answer
//! `DescribeConfigs`. A topic stores only its overrides; the effective value
//! of a config is the override, else the broker's value of
//! [`TopicConfigDef::broker_config`], else [`TopicConfigDef::default`].
//!
//! Defaults are those of Kafka 4.x. Configs that Kafka 4 removed
//! (`message.format.version`, `message.downconversion.enable`,
//! `message.timestamp.difference.max.ms`) are not known, so they are
//! rejected as unknown names.
//!
//! [`check_value`] is Kafka's `ConfigDef` parsing and validation of one
//! value (its type, then its [`Valid`] rule); the broker and group config
//! registries check their values with it too.

use std::collections::BTreeMap;

use crate::error::MetaError;

/// The type of a config value, as `DescribeConfigs` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    /// "true" or "false" (case-insensitive).
    Boolean,
    /// Free text, possibly limited to a set of values.
    String,
    /// A 32-bit signed integer.
    Int,
    /// A 64-bit signed integer.
    Long,
    /// A finite floating-point number.
    Double,
    /// A comma-separated list.
    List,
    /// A secret: described as null, and flagged sensitive.
    Password,
    /// A 16-bit signed integer.
    Short,
    /// A Java class name (Kafka loads it; Weir only stores it).
    Class,
}

impl ConfigType {
    /// Kafka's name of the type (`ConfigDef.Type`), e.g. "LONG".
    pub fn name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
            ConfigType::Password => "PASSWORD",
            ConfigType::Short => "SHORT",
            ConfigType::Class => "CLASS",
        }
    }

    /// The `config_type` field of a `DescribeConfigs` (v3+) response.
    pub fn describe_configs_type(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Short => 4,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }
}

/// What values a config accepts beyond parsing as its type (Kafka's
/// `ConfigDef.Validator`s).
#[derive(Clone, Copy, Debug)]
pub enum Valid {
    /// Anything of the right type.
    Any,
    /// A number no smaller than this.
    AtLeast(i64),
    /// A number within these bounds, inclusive.
    Between(i64, i64),
    /// A double within these bounds, inclusive.
    BetweenF(f64, f64),
    /// A double no smaller than this.
    AtLeastF(f64),
    /// One of these strings (case-sensitive).
    OneOf(&'static [&'static str]),
    /// One of these strings, in any case.
    OneOfIgnoreCase(&'static [&'static str]),
    /// A string with something other than spaces in it.
    NonEmpty,
    /// A list whose items are each one of these strings; an empty list
    /// is valid (as Kafka 4.2's `cleanup.policy`).
    ListOf(&'static [&'static str]),
    /// gzip's level: 1 to 9, or -1 for zlib's default.
    GzipLevel,
    /// Replicas to throttle: `*`, or a list of `partitionId:brokerId`
    /// (empty items allowed, as Kafka's validator allows them).
    ThrottledReplicas,
}

/// One topic-level config.
#[derive(Clone, Debug)]
pub struct TopicConfigDef {
    /// The config name, e.g. "retention.ms".
    pub name: &'static str,
    /// The value type.
    pub config_type: ConfigType,
    /// Kafka's default, as `DescribeConfigs` shows it.
    pub default: &'static str,
    /// The broker config whose value is the default for topics without an
    /// override, e.g. "log.retention.ms".
    pub broker_config: Option<&'static str>,
    /// One sentence on what the config does.
    pub doc: &'static str,
    valid: Valid,
}

const LONG_MAX: &str = "9223372036854775807";
const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];

macro_rules! def {
    ($name:literal, $ty:ident, $default:expr, $broker:expr, $valid:expr, $doc:literal) => {
        TopicConfigDef {
            name: $name,
            config_type: ConfigType::$ty,
            default: $default,
            broker_config: $broker,
            doc: $doc,
            valid: $valid,
        }
    };
}

/// Every topic config Weir knows, sorted by name.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def!("cleanup.policy", List, "delete", Some("log.cleanup.policy"), Valid::ListOf(CLEANUP_POLICIES),
        "What happens to old segments: \"delete\" removes them after the retention limits, \"compact\" keeps the latest record per key, \"compact,delete\" does both, and an empty list keeps every segment."),
    def!("compression.gzip.level", Int, "-1", Some("compression.gzip.level"), Valid::GzipLevel,
        "The gzip level used when compression.type is gzip."),
    def!("compression.lz4.level", Int, "9", Some("compression.lz4.level"), Valid::Between(1, 17),
        "The lz4 level used when compression.type is lz4."),
    def!("compression.type", String, "producer", Some("compression.type"), Valid::OneOf(COMPRESSION_TYPES),
        "The compression stored batches must have; \"producer\" keeps whatever the producer sent."),
    def!("compression.zstd.level", Int, "3", Some("compression.zstd.level"), Valid::Between(-131072, 22),
        "The zstd level used when compression.type is zstd."),
    def!("delete.retention.ms", Long, "86400000", Some("log.cleaner.delete.retention.ms"), Valid::AtLeast(0),
        "How long tombstones are kept in a compacted topic."),
    def!("errors.deadletterqueue.group.enable", Boolean, "false", None, Valid::Any,
        "Whether share groups may write their dead letters to this topic (KIP-1191)."),
    def!("file.delete.delay.ms", Long, "60000", Some("log.segment.delete.delay.ms"), Valid::AtLeast(0),
        "How long a deleted segment's files stay before removal from the file system."),
    def!("flush.messages", Long, LONG_MAX, Some("log.flush.interval.messages"), Valid::AtLeast(1),
        "Force an fsync after this many messages."),
    def!("flush.ms", Long, LONG_MAX, Some("log.flush.interval.ms"), Valid::AtLeast(0),
        "Force an fsync when unflushed data is this old."),
    def!("follower.replication.throttled.replicas", List, "", None, Valid::ThrottledReplicas,
        "The replicas whose fetching is throttled on the follower side (by follower.replication.throttled.rate): partitionId:brokerId,... or * for every replica of the topic."),
    def!("index.interval.bytes", Int, "4096", Some("log.index.interval.bytes"), Valid::AtLeast(0),
        "Log bytes between two entries of the offset index."),
    def!("leader.replication.throttled.replicas", List, "", None, Valid::ThrottledReplicas,
        "The replicas whose fetching is throttled on the leader side (by leader.replication.throttled.rate): partitionId:brokerId,... or * for every replica of the topic."),
    def!("local.retention.bytes", Long, "-2", Some("log.local.retention.bytes"), Valid::AtLeast(-2),
        "Tiered storage: the local bytes kept before segments are only in remote storage; -2 takes retention.bytes."),
    def!("local.retention.ms", Long, "-2", Some("log.local.retention.ms"), Valid::AtLeast(-2),
        "Tiered storage: how long segments are kept locally; -2 takes retention.ms."),
    def!("max.compaction.lag.ms", Long, LONG_MAX, Some("log.cleaner.max.compaction.lag.ms"), Valid::AtLeast(1),
        "The longest a record may stay ineligible for compaction."),
    def!("max.message.bytes", Int, "1048588", Some("message.max.bytes"), Valid::AtLeast(0),
        "The largest record batch accepted, after compression."),
    def!("message.timestamp.after.max.ms", Long, "3600000", Some("log.message.timestamp.after.max.ms"), Valid::AtLeast(0),
        "How far ahead of the broker's clock a CreateTime timestamp may be."),
    def!("message.timestamp.before.max.ms", Long, LONG_MAX, Some("log.message.timestamp.before.max.ms"), Valid::AtLeast(0),
        "How far behind the broker's clock a CreateTime timestamp may be."),
    def!("message.timestamp.type", String, "CreateTime", Some("log.message.timestamp.type"), Valid::OneOf(TIMESTAMP_TYPES),
        "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime)."),
    def!("min.cleanable.dirty.ratio", Double, "0.5", Some("log.cleaner.min.cleanable.ratio"), Valid::BetweenF(0.0, 1.0),
        "The share of uncompacted log above which the log is compacted."),
    def!("min.compaction.lag.ms", Long, "0", Some("log.cleaner.min.compaction.lag.ms"), Valid::AtLeast(0),
        "The shortest time a record stays uncompacted."),
    def!("min.insync.replicas", Int, "1", Some("min.insync.replicas"), Valid::AtLeast(1),
        "The fewest in-sync replicas with which an acks=all produce succeeds."),
    def!("preallocate", Boolean, "false", Some("log.preallocate"), Valid::Any,
        "Preallocate segment files when they are created."),
    def!("remote.log.copy.disable", Boolean, "false", None, Valid::Any,
        "Tiered storage: stop copying segments to remote storage; those there stay readable until retention deletes them."),
    def!("remote.log.delete.on.disable", Boolean, "false", None, Valid::Any,
        "Tiered storage: delete the remote segments when remote.storage.enable is turned off (required to turn it off)."),
    def!("remote.storage.enable", Boolean, "false", None, Valid::Any,
        "Tiered storage: copy closed segments to the brokers' remote storage and read them back from there once local retention removed them (needs remote.log.storage.system.enable on the brokers)."),
    def!("retention.bytes", Long, "-1", Some("log.retention.bytes"), Valid::Any,
        "Delete old segments when a partition grows beyond this size; -1 means no size limit."),
    def!("retention.ms", Long, "604800000", Some("log.retention.ms"), Valid::AtLeast(-1),
        "Delete segments whose newest record is older than this; -1 means no time limit."),
    def!("segment.bytes", Int, "1073741824", Some("log.segment.bytes"), Valid::AtLeast(14),
        "Roll to a new segment when the active one reaches this size."),
    def!("segment.index.bytes", Int, "10485760", Some("log.index.size.max.bytes"), Valid::AtLeast(4),
        "The size of a segment's offset index; a full index rolls the segment."),
    def!("segment.jitter.ms", Long, "0", Some("log.roll.jitter.ms"), Valid::AtLeast(0),
        "A random amount up to this is subtracted from segment.ms per segment."),
    def!("segment.ms", Long, "604800000", Some("log.roll.ms"), Valid::AtLeast(1),
        "Roll to a new segment when the active one is this old."),
    def!("unclean.leader.election.enable", Boolean, "false", Some("unclean.leader.election.enable"), Valid::Any,
        "Allow a replica outside the ISR to become leader, at the risk of losing data."),
    def!("weir.delivery.delay.ms", Long, "0", None, Valid::AtLeast(0),
        "A Weir extension: consumers see a record only once its timestamp is this old (the producer's with CreateTime, the broker's with LogAppendTime); 0 delivers at once."),
];

/// The config with this name.
pub fn lookup(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .binary_search_by(|def| def.name.cmp(name))
        .ok()
        .map(|i| &TOPIC_CONFIGS[i])
}

/// Every known config, sorted by name.
pub fn all() -> impl Iterator<Item = &'static TopicConfigDef> {
    TOPIC_CONFIGS.iter()
}

/// Checks that `name` is a known topic config.
pub fn check_name(name: &str) -> Result<&'static TopicConfigDef, MetaError> {
    lookup(name).ok_or_else(|| MetaError::InvalidConfig {
        key: name.to_owned(),
        reason: format!("Unknown topic config name: {name}"),
    })
}

/// Checks one config: a known name and a valid value.
pub fn validate_value(name: &str, value: &str) -> Result<(), MetaError> {
    check_name(name)?.validate(value)
}

/// Checks a whole set of topic overrides: every name and value, and
/// [`check_relations`].
pub fn validate_configs(configs: &BTreeMap<String, String>) -> Result<(), MetaError> {
    for (name, value) in configs {
        validate_value(name, value)?;
    }
    check_relations(configs)
}

/// Checks the rules that tie configs together, over a topic's complete set
/// of overrides (missing ones take Kafka's default): `min.compaction.lag.ms`
/// must not exceed `max.compaction.lag.ms`, and a topic in tiered storage
/// follows [`check_tiered`]'s rules. Whether the brokers have tiered
/// storage at all is the proposing broker's check: it is their config, not
/// the image's.
pub fn check_relations(configs: &BTreeMap<String, String>) -> Result<(), MetaError> {
    let long = |name: &str| -> i64 {
        let value = configs
            .get(name)
            .map(String::as_str)
            .or_else(|| lookup(name).map(|d| d.default))
            .unwrap_or("0");
        value.trim().parse().unwrap_or(0)
    };
    let min_lag = long("min.compaction.lag.ms");
    let max_lag = long("max.compaction.lag.ms");
    if min_lag > max_lag {
        return Err(MetaError::InvalidConfig {
            key: "min.compaction.lag.ms".to_owned(),
            reason: format!(
                "conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
            ),
        });
    }
    if is_true(configs, "remote.storage.enable") {
        check_tiered(configs, &long)?;
    }
    Ok(())
}

/// Whether the boolean config `name` is set to true.
fn is_true(configs: &BTreeMap<String, String>, name: &str) -> bool {
    configs
        .get(name)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Kafka's rules for a topic in tiered storage (`LogConfig`'s remote
/// storage validation): not compacted, and local retention within the
/// total, or equal to it once copying is turned off.
fn check_tiered(
    configs: &BTreeMap<String, String>,
    long: &dyn Fn(&str) -> i64,
) -> Result<(), MetaError> {
    let policy = configs
        .get("cleanup.policy")
        .map_or("delete", String::as_str);
    if policy.to_ascii_lowercase().contains("compact") {
        return Err(MetaError::InvalidConfig {
            key: "cleanup.policy".to_owned(),
            reason: "Remote log storage is unsupported for the compacted topics".to_owned(),
        });
    }
    for (total_name, local_name, unlimited) in [
        ("retention.bytes", "local.retention.bytes", -1),
        ("retention.ms", "local.retention.ms", -1),
    ] {
        let (total, local) = (long(total_name), long(local_name));
        if total == unlimited || local == -2 {
            continue;
        }
        let rule = if local == -1 {
            format!("Value must not be -1 as {total_name} value is set as {total}.")
        } else if local > total {
            format!("Value must not be more than {total_name} property value: {total}")
        } else {
            continue;
        };
        return Err(MetaError::InvalidConfig {
            key: local_name.to_owned(),
            reason: format!("Invalid value {local} for configuration {local_name}: {rule}"),
        });
    }
    if is_true(configs, "remote.log.copy.disable") {
        for (total_name, local_name) in [
            ("retention.bytes", "local.retention.bytes"),
            ("retention.ms", "local.retention.ms"),
        ] {
            let (total, local) = (long(total_name), long(local_name));
            if local != -2 && local != total {
                return Err(MetaError::InvalidConfig {
                    key: local_name.to_owned(),
                    reason: format!(
                        "When `remote.log.copy.disable` is set to true, the `{local_name}` and `{total_name}` must be set to the identical value because there will be no more logs copied to the remote storage."
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Checks a change of a topic's overrides from `old` to `new` (both
/// complete, `new` already through [`check_relations`]): tiered storage is
/// turned off only with its remote data deleted (KIP-950).
pub fn check_alteration(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Result<(), MetaError> {
    let turned_off =
        is_true(old, "remote.storage.enable") && !is_true(new, "remote.storage.enable");
    if turned_off && !is_true(new, "remote.log.delete.on.disable") {
        return Err(MetaError::InvalidConfig {
            key: "remote.storage.enable".to_owned(),
            reason: "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.".to_owned(),
        });
    }
    Ok(())
}

/// The value of `leader.replication.throttled.replicas` or
/// `follower.replication.throttled.replicas`: which replicas of a topic
/// replicate under the throttle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    /// None (the default, an empty list).
    #[default]
    None,
    /// `*`: every replica of the topic.
    All,
    /// `partitionId:brokerId` pairs.
    Listed(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Parses a value as Kafka's validator accepts it: `*` (alone, spaces
    /// around it allowed), or comma-separated `partitionId:brokerId` items,
    /// each of digits only, where empty items are skipped. `None` if it is
    /// neither.
    pub fn parse(value: &str) -> Option<Self> {
        let items: Vec<&str> = value.split(',').map(str::trim).collect();
        if items.concat() == "*" {
            return Some(ThrottledReplicas::All);
        }
        let mut pairs = Vec::new();
        for item in items.into_iter().filter(|item| !item.is_empty()) {
            let (partition, broker) = item.split_once(':')?;
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !digits(partition) || !digits(broker) {
                return None;
            }
            pairs.push((partition.parse().ok()?, broker.parse().ok()?));
        }
        Some(if pairs.is_empty() {
            ThrottledReplicas::None
        } else {
            ThrottledReplicas::Listed(pairs)
        })
    }

    /// Whether the replica of `partition` on `broker` is throttled.
    pub fn contains(&self, partition: i32, broker: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::Listed(pairs) => pairs.contains(&(partition, broker)),
        }
    }
}

impl TopicConfigDef {
    /// Checks a value for this config. The error's reason is worded like
    /// Kafka's: "Invalid value X for configuration NAME: WHY".
    pub fn validate(&self, value: &str) -> Result<(), MetaError> {
        self.check(value).map_err(|why| MetaError::InvalidConfig {
            key: self.name.to_owned(),
            reason: format!(
                "Invalid value {value} for configuration {}: {why}",
                self.name
            ),
        })
    }

    /// The accepted values in the notation of Kafka's documentation, e.g.
    /// "[-1,...]", "[0,...,1]" or "[compact, delete]"; empty when any value
    /// of the type is accepted.
    pub fn valid_values(&self) -> String {
        match self.valid {
            Valid::Any => String::new(),
            Valid::AtLeast(min) => format!("[{min},...]"),
            Valid::Between(min, max) => format!("[{min},...,{max}]"),
            Valid::BetweenF(min, max) => format!("[{min:?},...,{max:?}]"),
            Valid::AtLeastF(min) => format!("[{min:?},...]"),
            Valid::OneOf(values) | Valid::ListOf(values) | Valid::OneOfIgnoreCase(values) => {
                format!("[{}]", values.join(", "))
            }
            Valid::NonEmpty => "non-empty string".to_owned(),
            Valid::GzipLevel => "[1,...,9] or -1".to_owned(),
            Valid::ThrottledReplicas => {
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...".to_owned()
            }
        }
    }

    fn check(&self, value: &str) -> Result<(), String> {
        check_value(self.name, self.config_type, self.valid, value)
    }
}

/// Checks `value` for the config `name` as Kafka's `ConfigDef` parses and
/// validates it: first as `config_type`, then by `valid`. The reason is
/// worded as Kafka's (the part after "Invalid value X for configuration
/// NAME: ").
pub fn check_value(
    name: &str,
    config_type: ConfigType,
    valid: Valid,
    value: &str,
) -> Result<(), String> {
    let trimmed = value.trim();
    let not_a_number = || format!("Not a number of type {}", config_type.name());
    let number: Option<i64> = match config_type {
        ConfigType::Short => Some(trimmed.parse::<i16>().map_err(|_| not_a_number())?.into()),
        ConfigType::Int => Some(trimmed.parse::<i32>().map_err(|_| not_a_number())?.into()),
        ConfigType::Long => Some(trimmed.parse::<i64>().map_err(|_| not_a_number())?),
        _ => None,
    };
    match config_type {
        ConfigType::Boolean => {
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                return Err("Expected value to be either true or false".to_owned());
            }
        }
        ConfigType::Double => {
            let x: f64 = trimmed.parse().map_err(|_| not_a_number())?;
            if !x.is_finite() {
                return Err(not_a_number());
            }
            let (min, max) = match valid {
                Valid::BetweenF(min, max) => (min, max),
                Valid::AtLeastF(min) => (min, f64::INFINITY),
                Valid::AtLeast(min) => (min as f64, f64::INFINITY),
                Valid::Between(min, max) => (min as f64, max as f64),
                _ => (f64::NEG_INFINITY, f64::INFINITY),
            };
            if x < min {
                return Err(format!("Value must be at least {min:?}"));
            }
            if x > max {
                return Err(format!("Value must be no more than {max:?}"));
            }
        }
        ConfigType::String | ConfigType::Class | ConfigType::Password => match valid {
            Valid::OneOf(values) if !values.contains(&trimmed) => {
                return Err(format!("String must be one of: {}", values.join(", ")));
            }
            Valid::OneOfIgnoreCase(values)
                if !values.iter().any(|v| v.eq_ignore_ascii_case(trimmed)) =>
            {
                return Err(format!(
                    "String must be one of (case insensitive): {}",
                    values.join(", ")
                ));
            }
            Valid::NonEmpty if trimmed.is_empty() => {
                return Err("String must be non-empty".to_owned());
            }
            _ => {}
        },
        ConfigType::List => {
            if let Valid::ListOf(values) = valid {
                // "" is the empty list; "compact," has an empty item.
                let items = match trimmed {
                    "" => Vec::new(),
                    list => list.split(',').map(str::trim).collect(),
                };
                if items.iter().any(|item| !values.contains(item)) {
                    return Err(format!("String must be one of: {}", values.join(", ")));
                }
            }
            if let Valid::ThrottledReplicas = valid {
                if ThrottledReplicas::parse(trimmed).is_none() {
                    return Err(format!(
                        "{name} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    ));
                }
            }
        }
        ConfigType::Int | ConfigType::Long | ConfigType::Short => {}
    }
    if let Some(n) = number {
        match valid {
            Valid::AtLeast(min) if n < min => {
                return Err(format!("Value must be at least {min}"));
            }
            Valid::Between(min, _) if n < min => {
                return Err(format!("Value must be at least {min}"));
            }
            Valid::Between(_, max) if n > max => {
                return Err(format!("Value must be no more than {max}"));
            }
            Valid::GzipLevel if n != -1 && !(1..=9).contains(&n) => {
                return Err("Value must be between 1 and 9 or equal to -1".to_owned());
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_replicas_are_validated_as_kafka_does() {
        for name in [
            "leader.replication.throttled.replicas",
            "follower.replication.throttled.replicas",
        ] {
            let def = lookup(name).unwrap();
            assert_eq!((def.config_type, def.default), (ConfigType::List, ""));
            for ok in ["", "*", " * ", "0:1", "0:1,1:2", "0:1, 1:2", "0:1,,1:2"] {
                def.validate(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
            }
            for bad in ["*,0:1", "0", "a:1", "0:-1", "0:1:2", "all"] {
                let err = def.validate(bad).unwrap_err().to_string();
                assert!(err.contains("must be the literal '*'"), "{bad:?}: {err}");
            }
        }
        let listed = ThrottledReplicas::parse("0:1,2:3").unwrap();
        assert!(listed.contains(0, 1) && listed.contains(2, 3));
        assert!(!listed.contains(0, 3) && !listed.contains(1, 1));
        assert!(ThrottledReplicas::parse("*").unwrap().contains(7, 9));
        assert_eq!(ThrottledReplicas::parse(""), Some(ThrottledReplicas::None));
        assert!(!ThrottledReplicas::None.contains(0, 0));
    }

    #[test]
    fn registry_is_sorted_and_unique() {
        for pair in TOPIC_CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} >= {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn every_default_is_valid() {
        for def in all() {
            def.validate(def.default)
                .unwrap_or_else(|e| panic!("default of {}: {e}", def.name));
        }
    }

    #[test]
    fn defaults_and_broker_configs() {
        let table: &[(&str, ConfigType, &str, Option<&str>)] = &[
            (
                "retention.ms",
                ConfigType::Long,
                "604800000",
                Some("log.retention.ms"),
            ),
            (
                "segment.bytes",
                ConfigType::Int,
                "1073741824",
                Some("log.segment.bytes"),
            ),
            (
                "retention.bytes",
                ConfigType::Long,
                "-1",
                Some("log.retention.bytes"),
            ),
            (
                "max.message.bytes",
                ConfigType::Int,
                "1048588",
                Some("message.max.bytes"),
            ),
            (
                "flush.messages",
                ConfigType::Long,
                LONG_MAX,
                Some("log.flush.interval.messages"),
            ),
            (
                "flush.ms",
                ConfigType::Long,
                LONG_MAX,
                Some("log.flush.interval.ms"),
            ),
            (
                "cleanup.policy",
                ConfigType::List,
                "delete",
                Some("log.cleanup.policy"),
            ),
            (
                "segment.ms",
                ConfigType::Long,
                "604800000",
                Some("log.roll.ms"),
            ),
            (
                "index.interval.bytes",
                ConfigType::Int,
                "4096",
                Some("log.index.interval.bytes"),
            ),
            (
                "segment.index.bytes",
                ConfigType::Int,
                "10485760",
                Some("log.index.size.max.bytes"),
            ),
            (
                "message.timestamp.type",
                ConfigType::String,
                "CreateTime",
                Some("log.message.timestamp.type"),
            ),
            (
                "min.insync.replicas",
                ConfigType::Int,
                "1",
                Some("min.insync.replicas"),
            ),
            (
                "unclean.leader.election.enable",
                ConfigType::Boolean,
                "false",
                Some("unclean.leader.election.enable"),
            ),
            (
                "file.delete.delay.ms",
                ConfigType::Long,
                "60000",
                Some("log.segment.delete.delay.ms"),
            ),
            (
                "compression.type",
                ConfigType::String,
                "producer",
                Some("compression.type"),
            ),
            (
                "delete.retention.ms",
                ConfigType::Long,
                "86400000",
                Some("log.cleaner.delete.retention.ms"),
            ),
            (
                "min.cleanable.dirty.ratio",
                ConfigType::Double,
                "0.5",
                Some("log.cleaner.min.cleanable.ratio"),
            ),
            (
                "min.compaction.lag.ms",
                ConfigType::Long,
                "0",
                Some("log.cleaner.min.compaction.lag.ms"),
            ),
            (
                "max.compaction.lag.ms",
                ConfigType::Long,
                LONG_MAX,
                Some("log.cleaner.max.compaction.lag.ms"),
            ),
            (
                "message.timestamp.before.max.ms",
                ConfigType::Long,
                LONG_MAX,
                Some("log.message.timestamp.before.max.ms"),
            ),
            (
                "message.timestamp.after.max.ms",
                ConfigType::Long,
                "3600000",
                Some("log.message.timestamp.after.max.ms"),
            ),
        ];
        for &(name, ty, default, broker) in table {
            let def = lookup(name).unwrap_or_else(|| panic!("{name} unknown"));
            assert_eq!(def.config_type, ty, "{name}");
            assert_eq!(def.default, default, "{name}");
            assert_eq!(def.broker_config, broker, "{name}");
        }
    }

    /// (name, value, Ok(()) or a fragment of the reason)
    #[test]
    fn value_validation() {
        let table: &[(&str, &str, Result<(), &str>)] = &[
            ("retention.ms", "-1", Ok(())),
            ("retention.ms", "0", Ok(())),
            ("retention.ms", " 1000 ", Ok(())),
            (
                "retention.ms",
                "-2",
                Err("Invalid value -2 for configuration retention.ms: Value must be at least -1"),
            ),
            ("retention.ms", "abc", Err("Not a number of type LONG")),
            ("retention.ms", "1.5", Err("Not a number of type LONG")),
            ("retention.ms", "", Err("Not a number of type LONG")),
            (
                "retention.ms",
                "9223372036854775808",
                Err("Not a number of type LONG"),
            ),
            ("retention.bytes", "-5", Ok(())),
            ("segment.bytes", "14", Ok(())),
            ("segment.bytes", "13", Err("Value must be at least 14")),
            (
                "segment.bytes",
                "2147483648",
                Err("Not a number of type INT"),
            ),
            ("segment.index.bytes", "3", Err("Value must be at least 4")),
            ("segment.ms", "0", Err("Value must be at least 1")),
            ("flush.messages", "0", Err("Value must be at least 1")),
            ("flush.messages", "1", Ok(())),
            ("max.message.bytes", "-1", Err("Value must be at least 0")),
            ("min.insync.replicas", "0", Err("Value must be at least 1")),
            ("min.insync.replicas", "2", Ok(())),
            ("cleanup.policy", "delete", Ok(())),
            ("cleanup.policy", "compact", Ok(())),
            ("cleanup.policy", "compact,delete", Ok(())),
            ("cleanup.policy", "delete, compact", Ok(())),
            (
                "cleanup.policy",
                "remove",
                Err("String must be one of: compact, delete"),
            ),
            (
                "cleanup.policy",
                "compact,",
                Err("String must be one of: compact, delete"),
            ),
            ("cleanup.policy", "", Ok(())),
            ("cleanup.policy", " ", Ok(())),
            (
                "cleanup.policy",
                ",",
                Err("String must be one of: compact, delete"),
            ),
            ("message.timestamp.type", "CreateTime", Ok(())),
            ("message.timestamp.type", "LogAppendTime", Ok(())),
            (
                "message.timestamp.type",
                "createtime",
                Err("String must be one of: CreateTime, LogAppendTime"),
            ),
            ("compression.type", "zstd", Ok(())),
            ("compression.type", "uncompressed", Ok(())),
            ("compression.type", "producer", Ok(())),
            (
                "compression.type",
                "brotli",
                Err("String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
            ),
            ("compression.gzip.level", "-1", Ok(())),
            ("compression.gzip.level", "9", Ok(())),
            (
                "compression.gzip.level",
                "0",
                Err("between 1 and 9 or equal to -1"),
            ),
            (
                "compression.lz4.level",
                "18",
                Err("Value must be no more than 17"),
            ),
            (
                "compression.zstd.level",
                "-131073",
                Err("Value must be at least -131072"),
            ),
            ("unclean.leader.election.enable", "true", Ok(())),
            ("unclean.leader.election.enable", "FALSE", Ok(())),
            (
                "unclean.leader.election.enable",
                "yes",
                Err("Expected value to be either true or false"),
            ),
            (
                "preallocate",
                "1",
                Err("Expected value to be either true or false"),
            ),
            ("min.cleanable.dirty.ratio", "0", Ok(())),
            ("min.cleanable.dirty.ratio", "1", Ok(())),
            ("min.cleanable.dirty.ratio", "0.25", Ok(())),
            (
                "min.cleanable.dirty.ratio",
                "1.5",
                Err("Value must be no more than 1.0"),
            ),
            (
                "min.cleanable.dirty.ratio",
                "-0.1",
                Err("Value must be at least 0.0"),
            ),
            (
                "min.cleanable.dirty.ratio",
                "NaN",
                Err("Not a number of type DOUBLE"),
            ),
            (
                "min.cleanable.dirty.ratio",
                "half",
                Err("Not a number of type DOUBLE"),
            ),
            ("delete.retention.ms", "-1", Err("Value must be at least 0")),
            (
                "max.compaction.lag.ms",
                "0",
                Err("Value must be at least 1"),
            ),
            (
                "message.timestamp.after.max.ms",
                "-1",
                Err("Value must be at least 0"),
            ),
            (
                "no.such.config",
                "1",
                Err("Unknown topic config name: no.such.config"),
            ),
            (
                "message.format.version",
                "3.0",
                Err("Unknown topic config name: message.format.version"),
            ),
        ];
        for (name, value, want) in table {
            let got = validate_value(name, value);
            match (want, &got) {
                (Ok(()), Ok(())) => {}
                (Err(fragment), Err(MetaError::InvalidConfig { key, reason })) => {
                    assert_eq!(key, name);
                    assert!(
                        reason.contains(fragment),
                        "{name}={value:?}: reason {reason:?} lacks {fragment:?}"
                    );
                }
                _ => panic!("{name}={value:?}: want {want:?}, got {got:?}"),
            }
        }
    }

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn refusal(pairs: &[(&str, &str)]) -> String {
        match validate_configs(&configs(pairs)) {
            Err(MetaError::InvalidConfig { reason, .. }) => reason,
            other => panic!("{pairs:?}: want INVALID_CONFIG, got {other:?}"),
        }
    }

    #[test]
    fn tiered_topics_follow_kafkas_rules() {
        assert!(validate_configs(&configs(&[("remote.storage.enable", "true")])).is_ok());
        assert!(validate_configs(&configs(&[
            ("remote.storage.enable", "true"),
            ("retention.ms", "86400000"),
            ("local.retention.ms", "3600000"),
            ("retention.bytes", "-1"),
            ("local.retention.bytes", "1048576"),
        ]))
        .is_ok());
        assert!(refusal(&[
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact,delete")
        ])
        .contains("unsupported for the compacted topics"));
        assert!(refusal(&[
            ("remote.storage.enable", "true"),
            ("retention.ms", "3600000"),
            ("local.retention.ms", "86400000"),
        ])
        .contains("Value must not be more than retention.ms property value: 3600000"));
        assert!(refusal(&[
            ("remote.storage.enable", "true"),
            ("retention.bytes", "1000"),
            ("local.retention.bytes", "-1"),
        ])
        .contains("Value must not be -1 as retention.bytes value is set as 1000."));
        assert!(refusal(&[
            ("remote.storage.enable", "true"),
            ("remote.log.copy.disable", "true"),
            ("local.retention.ms", "1000"),
        ])
        .contains("must be set to the identical value"));
        // The same configs on a topic without tiered storage are fine.
        assert!(validate_configs(&configs(&[
            ("retention.ms", "3600000"),
            ("local.retention.ms", "86400000"),
            ("cleanup.policy", "compact"),
        ]))
        .is_ok());
        assert!(validate_value("local.retention.ms", "-2").is_ok());
        assert!(validate_value("local.retention.ms", "-3").is_err());
    }

    #[test]
    fn tiered_storage_is_turned_off_only_with_its_remote_data_deleted() {
        let on = configs(&[("remote.storage.enable", "true")]);
        let err = check_alteration(&on, &configs(&[])).unwrap_err();
        assert!(
            err.to_string().contains("without deleting remote data"),
            "{err}"
        );
        assert!(check_alteration(
            &on,
            &configs(&[
                ("remote.storage.enable", "false"),
                ("remote.log.delete.on.disable", "true")
            ])
        )
        .is_ok());
        assert!(check_alteration(&configs(&[]), &configs(&[])).is_ok());
        assert!(check_alteration(&on, &on).is_ok());
    }

    #[test]
    fn shorts_and_classes_are_checked_as_kafka_parses_them() {
        assert!(check_value("x", ConfigType::Short, Valid::AtLeast(1), "3").is_ok());
        assert_eq!(
            check_value("x", ConfigType::Short, Valid::Any, "40000"),
            Err("Not a number of type SHORT".to_owned())
        );
        assert!(check_value("x", ConfigType::Class, Valid::Any, "a.B").is_ok());
        assert_eq!(
            check_value("x", ConfigType::String, Valid::NonEmpty, " "),
            Err("String must be non-empty".to_owned())
        );
    }

    #[test]
    fn compaction_lags_must_be_ordered() {
        let configs = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(validate_configs(&configs(&[("min.compaction.lag.ms", "100")])).is_ok());
        assert!(validate_configs(&configs(&[
            ("min.compaction.lag.ms", "100"),
            ("max.compaction.lag.ms", "100")
        ]))
        .is_ok());
        let err = validate_configs(&configs(&[
            ("min.compaction.lag.ms", "101"),
            ("max.compaction.lag.ms", "100"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("conflict"), "{err}");
    }

    #[test]
    fn types_for_describe_configs() {
        assert_eq!(
            lookup("retention.ms")
                .unwrap()
                .config_type
                .describe_configs_type(),
            5
        );
        assert_eq!(
            lookup("cleanup.policy")
                .unwrap()
                .config_type
                .describe_configs_type(),
            7
        );
        assert_eq!(lookup("retention.ms").unwrap().valid_values(), "[-1,...]");
        assert_eq!(
            lookup("cleanup.policy").unwrap().valid_values(),
            "[compact, delete]"
        );
        assert_eq!(
            lookup("min.cleanable.dirty.ratio").unwrap().valid_values(),
            "[0.0,...,1.0]"
        );
    }
}
