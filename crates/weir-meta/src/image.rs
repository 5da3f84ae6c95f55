//! The metadata image: the state machine that commands are applied to.
//!
//! [`MetadataImage::apply`] is pure: no I/O, no clock, no randomness. Every
//! id, assignment and count comes inside the command, so replaying the same
//! commands in the same order on any node yields an equal image.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::command::{Applied, Command};
use crate::error::MetaError;
use crate::model::{BrokerInfo, PartitionInfo, TopicInfo};
use crate::topic_config;
use crate::topic_name::{collision_key, validate_topic_name};

/// The cluster metadata: brokers, topics with their partitions and config
/// overrides, and the producer id allocator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(try_from = "ImageData")]
pub struct MetadataImage {
    brokers: BTreeMap<i32, BrokerInfo>,
    topics: BTreeMap<String, TopicInfo>,
    next_producer_id: i64,
    applied_index: u64,
    /// Topic id → name; derived from `topics`.
    #[serde(skip)]
    topic_ids: BTreeMap<Uuid, String>,
    /// Name with '.' folded to '_' → name; derived from `topics`.
    #[serde(skip)]
    collision_keys: BTreeMap<String, String>,
}

/// The serialized form; the derived indexes are rebuilt from it.
#[derive(Deserialize)]
struct ImageData {
    brokers: BTreeMap<i32, BrokerInfo>,
    topics: BTreeMap<String, TopicInfo>,
    next_producer_id: i64,
    applied_index: u64,
}

impl TryFrom<ImageData> for MetadataImage {
    type Error = String;

    fn try_from(data: ImageData) -> Result<Self, String> {
        let mut image = MetadataImage {
            brokers: data.brokers,
            topics: data.topics,
            next_producer_id: data.next_producer_id,
            applied_index: data.applied_index,
            topic_ids: BTreeMap::new(),
            collision_keys: BTreeMap::new(),
        };
        for (id, broker) in &image.brokers {
            if *id != broker.id {
                return Err(format!("broker {} is stored under id {id}", broker.id));
            }
        }
        for (name, topic) in &image.topics {
            if *name != topic.name {
                return Err(format!("topic '{}' is stored under '{name}'", topic.name));
            }
            for (i, p) in topic.partitions.iter().enumerate() {
                if usize::try_from(p.partition) != Ok(i) {
                    return Err(format!(
                        "topic '{name}' has partition {} at position {i}",
                        p.partition
                    ));
                }
            }
            if let Some(other) = image.topic_ids.insert(topic.id, name.clone()) {
                return Err(format!(
                    "topics '{other}' and '{name}' share the id {}",
                    topic.id
                ));
            }
            image
                .collision_keys
                .insert(collision_key(name), name.clone());
        }
        Ok(image)
    }
}

impl MetadataImage {
    /// An empty image.
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates `cmd` against the image, then applies it. On error the
    /// image is unchanged; on success [`applied_index`](Self::applied_index)
    /// goes up by one.
    pub fn apply(&mut self, cmd: &Command) -> Result<Applied, MetaError> {
        self.validate(cmd)?;
        Ok(self.execute(cmd))
    }

    /// Checks whether `cmd` would apply, without changing anything (for
    /// `validate_only` requests, and for the store before it logs a command).
    pub fn validate(&self, cmd: &Command) -> Result<(), MetaError> {
        match cmd {
            Command::RegisterBroker(broker) => self.check_broker(broker),
            Command::CreateTopic {
                name,
                id,
                partitions,
                replicas,
                configs,
                internal: _,
            } => self.check_create_topic(name, *id, *partitions, replicas, configs),
            Command::DeleteTopic { name } => self.existing_topic(name).map(|_| ()),
            Command::CreatePartitions { name, new_replicas } => {
                self.check_create_partitions(name, new_replicas)
            }
            Command::AlterTopicConfigs { name, set, delete } => {
                self.check_alter_configs(name, set, delete)
            }
            Command::AllocateProducerIds { count } => self.check_producer_ids(*count),
        }
    }

    /// Applies a command that [`validate`](Self::validate) accepted.
    pub(crate) fn execute(&mut self, cmd: &Command) -> Applied {
        let applied = match cmd {
            Command::RegisterBroker(broker) => {
                self.brokers.insert(broker.id, broker.clone());
                Applied::Done
            }
            Command::CreateTopic {
                name,
                id,
                partitions: _,
                replicas,
                configs,
                internal,
            } => {
                let topic = TopicInfo {
                    name: name.clone(),
                    id: *id,
                    partitions: new_partitions(0, replicas),
                    configs: configs.clone(),
                    internal: *internal,
                };
                self.topic_ids.insert(*id, name.clone());
                self.collision_keys
                    .insert(collision_key(name), name.clone());
                self.topics.insert(name.clone(), topic);
                Applied::Done
            }
            Command::DeleteTopic { name } => {
                if let Some(topic) = self.topics.remove(name) {
                    self.topic_ids.remove(&topic.id);
                    self.collision_keys.remove(&collision_key(name));
                }
                Applied::Done
            }
            Command::CreatePartitions { name, new_replicas } => {
                if let Some(topic) = self.topics.get_mut(name) {
                    let first = topic.partitions.len();
                    topic.partitions.extend(new_partitions(first, new_replicas));
                }
                Applied::Done
            }
            Command::AlterTopicConfigs { name, set, delete } => {
                if let Some(topic) = self.topics.get_mut(name) {
                    for key in delete {
                        topic.configs.remove(key);
                    }
                    for (key, value) in set {
                        topic.configs.insert(key.clone(), value.clone());
                    }
                }
                Applied::Done
            }
            Command::AllocateProducerIds { count } => {
                let first = self.next_producer_id;
                self.next_producer_id = first.saturating_add(*count);
                Applied::ProducerIds {
                    first,
                    count: *count,
                }
            }
        };
        self.applied_index += 1;
        applied
    }

    /// The topic with this name.
    pub fn topic(&self, name: &str) -> Option<&TopicInfo> {
        self.topics.get(name)
    }

    /// The topic with this id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicInfo> {
        self.topic_ids
            .get(&id)
            .and_then(|name| self.topics.get(name))
    }

    /// All topics, by name.
    pub fn topics(&self) -> impl Iterator<Item = &TopicInfo> {
        self.topics.values()
    }

    /// The number of topics.
    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// All registered brokers, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers.values()
    }

    /// The broker with this id.
    pub fn broker(&self, id: i32) -> Option<&BrokerInfo> {
        self.brokers.get(&id)
    }

    /// The first producer id the next `AllocateProducerIds` hands out.
    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// The number of commands applied so far.
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// For a `CreatePartitions` request asking for `total` partitions in
    /// all: how many partitions to add, or Kafka's error when `total` does
    /// not grow the topic.
    pub fn partitions_to_add(&self, name: &str, total: i32) -> Result<i32, MetaError> {
        let current = self.existing_topic(name)?.partition_count();
        if total < current {
            return Err(MetaError::InvalidPartitions(format!(
                "Topic currently has {current} partitions, which is higher than the requested {total}."
            )));
        }
        if total == current {
            return Err(MetaError::InvalidPartitions(format!(
                "Topic already has {current} partitions."
            )));
        }
        Ok(total - current)
    }

    /// A replica assignment for `count` new partitions numbered from
    /// `first_partition`, spreading leaders and followers round-robin over
    /// the registered brokers (sorted by id). `start` rotates the layout;
    /// the caller picks it (at random, or from the topic count) so that
    /// this function stays deterministic.
    pub fn assign_replicas(
        &self,
        first_partition: i32,
        count: i32,
        replication_factor: i32,
        start: usize,
    ) -> Result<Vec<Vec<i32>>, MetaError> {
        if count < 1 {
            return Err(MetaError::InvalidPartitions(
                "Number of partitions must be larger than 0.".to_owned(),
            ));
        }
        if replication_factor < 1 {
            return Err(MetaError::InvalidReplicationFactor(
                "Replication factor must be larger than 0.".to_owned(),
            ));
        }
        let brokers: Vec<i32> = self.brokers.keys().copied().collect();
        let n = brokers.len();
        let rf = replication_factor as usize;
        if rf > n {
            return Err(MetaError::InvalidReplicationFactor(format!(
                "Replication factor: {rf} larger than available brokers: {n}."
            )));
        }
        let first = usize::try_from(first_partition).map_err(|_| {
            MetaError::InvalidPartitions(format!(
                "Invalid first partition index {first_partition}."
            ))
        })?;
        let spread = (n - 1).max(1);
        let assignment = (first..first + count as usize)
            .map(|p| {
                let leader = (start + p) % n;
                let shift = (start / n + p / n) % spread;
                let mut replicas = vec![brokers[leader]];
                replicas
                    .extend((0..rf - 1).map(|j| brokers[(leader + 1 + (shift + j) % spread) % n]));
                replicas
            })
            .collect();
        Ok(assignment)
    }

    fn existing_topic(&self, name: &str) -> Result<&TopicInfo, MetaError> {
        self.topics
            .get(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_owned()))
    }

    fn check_broker(&self, broker: &BrokerInfo) -> Result<(), MetaError> {
        if broker.id < 0 {
            return Err(MetaError::InvalidRequest(format!(
                "Broker id {} is negative.",
                broker.id
            )));
        }
        if broker.host.is_empty() {
            return Err(MetaError::InvalidRequest(format!(
                "Broker {} registered an empty host.",
                broker.id
            )));
        }
        if broker.port == 0 {
            return Err(MetaError::InvalidRequest(format!(
                "Broker {} registered port 0.",
                broker.id
            )));
        }
        Ok(())
    }

    fn check_create_topic(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        replicas: &[Vec<i32>],
        configs: &BTreeMap<String, String>,
    ) -> Result<(), MetaError> {
        validate_topic_name(name)?;
        if self.topics.contains_key(name) {
            return Err(MetaError::TopicAlreadyExists(name.to_owned()));
        }
        if let Some(other) = self.collision_keys.get(&collision_key(name)) {
            return Err(MetaError::InvalidTopicName {
                name: name.to_owned(),
                reason: format!("Topic '{name}' collides with existing topic: {other}"),
            });
        }
        if id.is_nil() {
            return Err(MetaError::InvalidRequest(
                "The topic id must not be the nil UUID.".to_owned(),
            ));
        }
        if let Some(other) = self.topic_ids.get(&id) {
            return Err(MetaError::InvalidRequest(format!(
                "Topic id {id} is already used by topic '{other}'."
            )));
        }
        if partitions < 1 {
            return Err(MetaError::InvalidPartitions(
                "Number of partitions was set to an invalid non-positive value.".to_owned(),
            ));
        }
        if replicas.len() != partitions as usize {
            return Err(MetaError::InvalidPartitions(format!(
                "{} replica assignments were given for {partitions} partitions.",
                replicas.len()
            )));
        }
        let rf = replicas[0].len();
        for assignment in replicas {
            self.check_replicas(assignment, rf)?;
        }
        topic_config::validate_configs(configs)
    }

    fn check_create_partitions(
        &self,
        name: &str,
        new_replicas: &[Vec<i32>],
    ) -> Result<(), MetaError> {
        let topic = self.existing_topic(name)?;
        let current = topic.partition_count();
        if new_replicas.is_empty() {
            return Err(MetaError::InvalidPartitions(format!(
                "Topic already has {current} partitions."
            )));
        }
        if i32::try_from(new_replicas.len())
            .ok()
            .and_then(|added| current.checked_add(added))
            .is_none()
        {
            return Err(MetaError::InvalidPartitions(format!(
                "Topic currently has {current} partitions; adding {} would exceed {}.",
                new_replicas.len(),
                i32::MAX
            )));
        }
        let rf = topic.replication_factor();
        for assignment in new_replicas {
            self.check_replicas(assignment, rf)?;
        }
        Ok(())
    }

    /// One partition's replica list: non-empty, no broker twice, every
    /// broker registered, and as long as the other partitions' lists.
    fn check_replicas(&self, replicas: &[i32], replication_factor: usize) -> Result<(), MetaError> {
        let invalid = |msg: String| Err(MetaError::InvalidReplicationFactor(msg));
        if replicas.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".to_owned(),
            );
        }
        let mut seen = BTreeSet::new();
        for &id in replicas {
            if !seen.insert(id) {
                return invalid(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
            if !self.brokers.contains_key(&id) {
                return invalid(format!(
                    "The manual partition assignment includes broker {id}, but no such broker is registered."
                ));
            }
        }
        if replicas.len() != replication_factor {
            return invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication_factor} replica(s).",
                replicas.len()
            ));
        }
        Ok(())
    }

    fn check_alter_configs(
        &self,
        name: &str,
        set: &BTreeMap<String, String>,
        delete: &[String],
    ) -> Result<(), MetaError> {
        let topic = self.existing_topic(name)?;
        let mut deleted = BTreeSet::new();
        for key in delete {
            topic_config::check_name(key)?;
            if set.contains_key(key) || !deleted.insert(key) {
                return Err(MetaError::InvalidRequest(format!(
                    "Error due to duplicate config keys: {key}"
                )));
            }
        }
        for (key, value) in set {
            topic_config::validate_value(key, value)?;
        }
        let mut configs = topic.configs.clone();
        for key in delete {
            configs.remove(key);
        }
        configs.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        topic_config::check_relations(&configs)
    }

    fn check_producer_ids(&self, count: i64) -> Result<(), MetaError> {
        if count < 1 {
            return Err(MetaError::InvalidRequest(format!(
                "Cannot allocate {count} producer ids; the count must be at least 1."
            )));
        }
        if self.next_producer_id.checked_add(count).is_none() {
            return Err(MetaError::ProducerIdsExhausted {
                next: self.next_producer_id,
                count,
            });
        }
        Ok(())
    }
}

fn new_partitions(first: usize, replicas: &[Vec<i32>]) -> Vec<PartitionInfo> {
    replicas
        .iter()
        .enumerate()
        .map(|(i, replicas)| PartitionInfo {
            partition: (first + i) as i32,
            leader: replicas.first().copied().unwrap_or(-1),
            leader_epoch: 0,
            replicas: replicas.clone(),
            isr: replicas.clone(),
        })
        .collect()
}
