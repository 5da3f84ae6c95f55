//! The metadata image: the state machine that commands are applied to.
//!
//! [`MetadataImage::apply`] is pure: no I/O, no clock, no randomness. Every
//! id, assignment and count comes inside the command, so replaying the same
//! commands in the same order on any node yields an equal image.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;
use weir_auth::{ScramCredential, ScramMechanism};

use crate::acl::{AclBinding, AclBindingFilter, AclError};
use crate::authorizer::Authorizer;
use crate::client_quota::{self, ClientQuotas, QuotaAlteration};
use crate::command::{Applied, Command, Election, ElectionOutcome, TopicCreation, TopicRejected};
use crate::error::MetaError;
use crate::mirror::{Mirror, MirrorCut, MirrorTopic, MirrorTopicState};
use crate::model::{BrokerInfo, PartitionInfo, TopicInfo};
use crate::partition_change::{self, Change, Election as ElectionType, Rules};
use crate::placement;
use crate::remote_log::{self, RemoteLog, RemoteLogs, RemoteSegment, RemoteSegmentState};
use crate::scram::{self, ScramCredentials};
use crate::topic_config;
use crate::topic_name::{collision_key, validate_topic_name};

/// The cluster metadata: brokers (and which of them are fenced), topics
/// with their partitions and config overrides, and the producer id
/// allocator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(try_from = "ImageData")]
pub struct MetadataImage {
    /// Set once, by the first broker to start; every node reports it.
    cluster_id: Option<String>,
    brokers: BTreeMap<i32, BrokerInfo>,
    /// Registered brokers that may not lead or join an ISR until they
    /// register again.
    fenced: BTreeSet<i32>,
    topics: BTreeMap<String, TopicInfo>,
    /// Dynamic broker configs of the cluster-wide default (resource "").
    cluster_broker_configs: BTreeMap<String, String>,
    /// Dynamic broker configs of single brokers (registered or not, as in
    /// Kafka), by broker id; never an empty map.
    broker_configs: BTreeMap<i32, BTreeMap<String, String>>,
    /// The configs of groups (GROUP config resource), by group; never an
    /// empty map.
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Client quotas by entity; never an empty map of quotas.
    #[serde(with = "client_quota::as_pairs")]
    client_quotas: ClientQuotas,
    /// SCRAM credentials by user and mechanism; never an empty map of
    /// mechanisms.
    #[serde(with = "scram::as_list")]
    scram_credentials: ScramCredentials,
    /// The ACLs, sorted (resource first): a set, as in Kafka, where
    /// creating an existing binding changes nothing.
    acls: BTreeSet<AclBinding>,
    /// Finalized feature levels other than `metadata.version` (which is
    /// the code's), by name; a feature at level 0 is absent.
    features: BTreeMap<String, i16>,
    /// The segments of tiered storage (KIP-405) by (topic id, partition):
    /// every partition that has a segment or a remote log start above 0.
    /// Shared behind an `Arc` so that cloning the image, which every apply
    /// does, copies no segment list.
    #[serde(with = "remote_log::as_pairs")]
    remote_logs: RemoteLogs,
    /// Topics deleted while they had remote logs, by id, with their last
    /// name: their objects must still be removed from the store, after
    /// which [`Command::RemoteTopicPurged`] drops them.
    purging_topics: BTreeMap<Uuid, String>,
    /// Mirrors of source clusters (KIP-1279), by name.
    mirrors: BTreeMap<String, Mirror>,
    /// Producer ids below it may be in records mirrored from another
    /// cluster: brokers hand none of them out, also from blocks they hold.
    mirrored_producer_ids_end: i64,
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
    /// Absent from images written before the cluster id was shared.
    #[serde(default)]
    cluster_id: Option<String>,
    brokers: BTreeMap<i32, BrokerInfo>,
    /// Absent from images written before fencing existed.
    #[serde(default)]
    fenced: BTreeSet<i32>,
    topics: BTreeMap<String, TopicInfo>,
    /// Absent from images written before broker configs were dynamic.
    #[serde(default)]
    cluster_broker_configs: BTreeMap<String, String>,
    #[serde(default)]
    broker_configs: BTreeMap<i32, BTreeMap<String, String>>,
    /// Absent from images written before group configs existed.
    #[serde(default)]
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Absent from images written before client quotas existed.
    #[serde(default, with = "client_quota::as_pairs")]
    client_quotas: ClientQuotas,
    /// Absent from images written before SCRAM credentials existed.
    #[serde(default, with = "scram::as_list")]
    scram_credentials: ScramCredentials,
    /// Absent from images written before ACLs existed.
    #[serde(default)]
    acls: BTreeSet<AclBinding>,
    /// Absent from images written before features were stored: every
    /// feature at 0.
    #[serde(default)]
    features: BTreeMap<String, i16>,
    /// Absent from images written before tiered storage existed: nothing
    /// in remote storage.
    #[serde(default, with = "remote_log::as_pairs")]
    remote_logs: RemoteLogs,
    /// Absent from images written before tiered storage existed.
    #[serde(default)]
    purging_topics: BTreeMap<Uuid, String>,
    /// Absent from images written before mirrors existed.
    #[serde(default)]
    mirrors: BTreeMap<String, Mirror>,
    #[serde(default)]
    mirrored_producer_ids_end: i64,
    next_producer_id: i64,
    applied_index: u64,
}

impl TryFrom<ImageData> for MetadataImage {
    type Error = String;

    fn try_from(data: ImageData) -> Result<Self, String> {
        let mut image = MetadataImage {
            cluster_id: data.cluster_id,
            brokers: data.brokers,
            fenced: data.fenced,
            topics: data.topics,
            cluster_broker_configs: data.cluster_broker_configs,
            broker_configs: data.broker_configs,
            group_configs: data.group_configs,
            client_quotas: data.client_quotas,
            scram_credentials: data.scram_credentials,
            acls: data.acls,
            features: data.features,
            remote_logs: data.remote_logs,
            purging_topics: data.purging_topics,
            mirrors: data.mirrors,
            mirrored_producer_ids_end: data.mirrored_producer_ids_end,
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
        if let Some(id) = image.broker_configs.keys().find(|id| **id < 0) {
            return Err(format!("dynamic configs of the negative broker id {id}"));
        }
        if let Some(id) = image
            .fenced
            .iter()
            .find(|id| !image.brokers.contains_key(id))
        {
            return Err(format!("broker {id} is fenced but not registered"));
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
        // DeleteTopic takes a topic's remote logs with it, and partitions
        // are never removed.
        if let Some((topic_id, partition)) = image.remote_logs.keys().find(|(id, p)| {
            image
                .topic_by_id(*id)
                .and_then(|t| t.partition(*p))
                .is_none()
        }) {
            return Err(format!(
                "a remote log is stored for partition {partition} of topic id {topic_id}, \
                 which does not exist"
            ));
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
    /// `validate_only` requests).
    pub fn validate(&self, cmd: &Command) -> Result<(), MetaError> {
        match cmd {
            Command::RegisterBroker(broker) => self.check_broker(broker),
            Command::FenceBroker { id } | Command::ControlledShutdown { id } => {
                self.registered_broker(*id).map(|_| ())
            }
            Command::ReplicasOffline { broker, .. } => self.registered_broker(*broker).map(|_| ()),
            Command::SetFeatureLevel { name, level } => check_feature_level(name, *level),
            // Outcomes of these are per partition or per user, in `Applied`.
            Command::ElectPreferredLeaders
            | Command::ElectLeaders { .. }
            | Command::AlterUserScramCredentials { .. }
            | Command::CreateAcls { .. }
            | Command::DeleteAcls { .. }
            | Command::CreateTopics { .. } => Ok(()),
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
            Command::AlterBrokerConfigs {
                broker,
                set,
                delete,
            } => {
                check_broker_configs(*broker, set, delete)?;
                self.check_min_isr_with_elr(*broker, set, delete)
            }
            Command::AlterGroupConfigs { group, set, delete } => {
                check_group_configs(group, set, delete)
            }
            Command::AllocateProducerIds { count } => self.check_producer_ids(*count),
            Command::AlterClientQuotas { alterations } => check_client_quotas(alterations),
            Command::SetClusterId { id } => self.check_cluster_id(id),
            Command::ReassignPartition {
                topic,
                partition,
                replicas,
            } => self.check_reassignment(topic, *partition, replicas.as_deref()),
            Command::AlterPartition {
                topic,
                partition,
                leader,
                leader_epoch,
                partition_epoch,
                isr,
            } => self.check_alter_partition(
                topic,
                *partition,
                *leader,
                *leader_epoch,
                *partition_epoch,
                isr,
            ),
            Command::RemoteSegmentCopyStarted {
                topic_id,
                partition,
                segment,
            } => self.check_remote_copy_started(*topic_id, *partition, segment),
            Command::RemoteSegmentCopyFinished {
                topic_id,
                partition,
                id,
                broker,
                leader_epoch,
            } => {
                self.check_remote_copy_finished(*topic_id, *partition, *id, *broker, *leader_epoch)
            }
            Command::RemoteSegmentsDeleteStarted {
                topic_id,
                partition,
                ids,
                log_start_offset: _,
                broker,
                leader_epoch,
            } => {
                self.check_remote_delete_started(*topic_id, *partition, ids, *broker, *leader_epoch)
            }
            Command::RemoteSegmentsDeleteFinished {
                topic_id,
                partition,
                ids,
            } => self.check_remote_delete_finished(*topic_id, *partition, ids),
            // Purging is the end of a deletion that was accepted already.
            Command::RemoteTopicPurged { .. } => Ok(()),
            Command::CreateMirror { mirror } => {
                mirror.check_new().map_err(MetaError::InvalidRequest)?;
                if self.mirrors.contains_key(&mirror.name) {
                    return Err(MetaError::InvalidRequest(format!(
                        "Mirror '{}' already exists.",
                        mirror.name
                    )));
                }
                Ok(())
            }
            Command::DeleteMirror { name }
            | Command::SetMirrorPaused { name, .. }
            | Command::CreateMirrorTopics { mirror: name, .. } => {
                self.existing_mirror(name).map(|_| ())
            }
            Command::FailOverMirror { mirror, topics } => {
                let mirror = self.existing_mirror(mirror)?;
                for name in topics {
                    let fed = mirror
                        .mirror_topics
                        .values()
                        .any(|t| t.name == *name && t.feeds());
                    if !fed {
                        return Err(MetaError::InvalidRequest(format!(
                            "Mirror '{}' does not feed topic '{name}'.",
                            mirror.name
                        )));
                    }
                }
                Ok(())
            }
            Command::MirrorPartitionStopped {
                topic_id,
                partition,
                broker,
                leader_epoch,
                ..
            } => self.check_mirror_report(
                *topic_id,
                *partition,
                (*broker, *leader_epoch),
                |state| matches!(state, MirrorTopicState::Stopping { .. }),
                "is not failing over",
            ),
            Command::FailBackMirrorTopics { mirror, topic_ids } => {
                let mirror = self.existing_mirror(mirror)?;
                for id in topic_ids {
                    let Some(name) = self.topic_ids.get(id) else {
                        return Err(MetaError::UnknownTopic(id.to_string()));
                    };
                    if let Some(feeding) = self.mirror_feeding(*id) {
                        return Err(MetaError::InvalidRequest(format!(
                            "Mirror '{}' feeds topic '{name}'.",
                            feeding.name
                        )));
                    }
                    if mirror.mirror_topics.contains_key(id) {
                        return Err(MetaError::InvalidRequest(format!(
                            "Mirror '{}' failed topic '{name}' over; a new mirror may take it back.",
                            mirror.name
                        )));
                    }
                }
                Ok(())
            }
            Command::MirrorPartitionPrepared {
                topic_id,
                partition,
                broker,
                leader_epoch,
                ..
            } => self.check_mirror_report(
                *topic_id,
                *partition,
                (*broker, *leader_epoch),
                |state| matches!(state, MirrorTopicState::Preparing { .. }),
                "is not being taken back by a mirror",
            ),
        }
    }

    /// Applies a command that [`validate`](Self::validate) accepted.
    fn execute(&mut self, cmd: &Command) -> Applied {
        let applied = match cmd {
            Command::RegisterBroker(broker) => {
                // A new process of a broker may have lost what it had not
                // synced: see `fence_restarted`.
                let previous = self.brokers.get(&broker.id).map(|old| old.incarnation);
                if let Some(old) = previous.filter(|old| *old != broker.incarnation) {
                    let clean = broker.previous_incarnation == Some(old);
                    self.fence_restarted(broker.id, clean);
                }
                self.brokers.insert(broker.id, broker.clone());
                self.unfence(broker.id);
                Applied::Done
            }
            Command::FenceBroker { id } | Command::ControlledShutdown { id } => {
                self.fence(*id);
                Applied::Done
            }
            Command::ReplicasOffline { broker, partitions } => {
                let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
                let fenced = &self.fenced;
                let acceptable = |r: i32| r != *broker && !fenced.contains(&r);
                for (name, index) in partitions {
                    let Some(topic) = self.topics.get_mut(name) else {
                        continue;
                    };
                    let rules = topic_rules(topic, elr, cluster_min_isr);
                    let election = election_type(topic);
                    let Some(p) = usize::try_from(*index)
                        .ok()
                        .and_then(|i| topic.partitions.get_mut(i))
                    else {
                        continue;
                    };
                    // The only in-sync replica keeps the partition: there is
                    // no clean leader to move to, and a leaderless partition
                    // would go back to it at the next preferred election.
                    if !p.replicas.contains(broker)
                        || (p.isr == [*broker] && election == ElectionType::Online)
                    {
                        continue;
                    }
                    // A replica whose directory failed may have lost what it
                    // held: it does not wait in the ELR (Weir does not learn
                    // when a single partition's directory is back).
                    let change = Change {
                        target_isr: without(&p.isr, *broker),
                        acceptable: &acceptable,
                        election,
                        unclean_shutdown: Some(*broker),
                    };
                    partition_change::apply(p, &change, rules);
                }
                Applied::Done
            }
            Command::ElectPreferredLeaders => {
                let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
                let fenced = &self.fenced;
                for topic in self.topics.values_mut() {
                    let rules = topic_rules(topic, elr, cluster_min_isr);
                    for p in topic.partitions.iter_mut() {
                        if let Some(next) = preferred_change(p, fenced, rules) {
                            *p = next;
                        }
                    }
                }
                Applied::Done
            }
            Command::SetFeatureLevel { name, level } => {
                self.set_feature_level(name, *level);
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
                self.create_topic(name, *id, replicas, configs, *internal);
                Applied::Done
            }
            Command::CreateTopics { topics } => Applied::TopicsCreated(
                topics
                    .iter()
                    .map(|topic| {
                        let TopicCreation {
                            name,
                            id,
                            replicas,
                            configs,
                            internal,
                        } = topic;
                        let partitions = i32::try_from(replicas.len()).unwrap_or(i32::MAX);
                        self.check_create_topic(name, *id, partitions, replicas, configs)
                            .map_err(|error| TopicRejected::from(&error))?;
                        self.create_topic(name, *id, replicas, configs, *internal);
                        Ok(())
                    })
                    .collect(),
            ),
            Command::DeleteTopic { name } => {
                if let Some(topic) = self.topics.remove(name) {
                    self.topic_ids.remove(&topic.id);
                    self.collision_keys.remove(&collision_key(name));
                    self.forget_remote_logs(topic.id, name);
                    for mirror in self.mirrors.values_mut() {
                        mirror.mirror_topics.remove(&topic.id);
                    }
                }
                Applied::Done
            }
            Command::CreateMirror { mirror } => {
                self.mirrors.insert(mirror.name.clone(), mirror.clone());
                Applied::Done
            }
            Command::DeleteMirror { name } => {
                self.mirrors.remove(name);
                Applied::Done
            }
            Command::FailOverMirror { mirror, topics } => {
                if let Some(mirror) = self.mirrors.get_mut(mirror) {
                    for topic in mirror.mirror_topics.values_mut() {
                        let chosen = topics.is_empty() || topics.contains(&topic.name);
                        if chosen && topic.feeds() {
                            topic.state = MirrorTopicState::Stopping {
                                reported: BTreeMap::new(),
                            };
                        }
                    }
                }
                Applied::Done
            }
            Command::MirrorPartitionStopped {
                topic_id,
                partition,
                last_mirrored_offset,
                max_producer_id,
                ..
            } => {
                self.mirrored_producer_ids_end = self
                    .mirrored_producer_ids_end
                    .max(max_producer_id.saturating_add(1));
                self.next_producer_id = self.next_producer_id.max(self.mirrored_producer_ids_end);
                self.mirror_partition_stopped(*topic_id, *partition, *last_mirrored_offset);
                Applied::Done
            }
            Command::FailBackMirrorTopics { mirror, topic_ids } => {
                for id in topic_ids {
                    let Some(name) = self.topic_ids.get(id).cloned() else {
                        continue;
                    };
                    for other in self.mirrors.values_mut() {
                        other.mirror_topics.remove(id);
                    }
                    if let Some(mirror) = self.mirrors.get_mut(mirror) {
                        mirror
                            .mirror_topics
                            .insert(*id, MirrorTopic::preparing(&name));
                    }
                }
                Applied::Done
            }
            Command::MirrorPartitionPrepared {
                topic_id,
                partition,
                agreed_offset,
                ..
            } => {
                self.mirror_partition_prepared(*topic_id, *partition, *agreed_offset);
                Applied::Done
            }
            Command::SetMirrorPaused { name, paused } => {
                if let Some(mirror) = self.mirrors.get_mut(name) {
                    mirror.paused = *paused;
                }
                Applied::Done
            }
            Command::CreateMirrorTopics { mirror, topics } => {
                let outcomes = topics
                    .iter()
                    .map(|topic| {
                        let partitions = i32::try_from(topic.replicas.len()).unwrap_or(i32::MAX);
                        self.check_create_topic(
                            &topic.name,
                            topic.id,
                            partitions,
                            &topic.replicas,
                            &topic.configs,
                        )
                        .map_err(|error| TopicRejected::from(&error))?;
                        self.create_topic(
                            &topic.name,
                            topic.id,
                            &topic.replicas,
                            &topic.configs,
                            false,
                        );
                        if let Some(mirror) = self.mirrors.get_mut(mirror) {
                            mirror
                                .mirror_topics
                                .insert(topic.id, MirrorTopic::mirroring(&topic.name));
                        }
                        Ok(())
                    })
                    .collect();
                Applied::TopicsCreated(outcomes)
            }
            Command::CreatePartitions { name, new_replicas } => {
                if let Some(topic) = self.topics.get_mut(name) {
                    let first = topic.partitions.len();
                    topic.partitions.extend(new_partitions(first, new_replicas));
                }
                Applied::Done
            }
            Command::AlterTopicConfigs { name, set, delete } => {
                let elr = self.elr_enabled();
                if let Some(topic) = self.topics.get_mut(name) {
                    // Kafka cleans the ELR state when the topic's
                    // min.insync.replicas is set or removed.
                    if elr && touches_min_isr(set, delete) {
                        topic.partitions.iter_mut().for_each(clear_elr);
                    }
                    for key in delete {
                        topic.configs.remove(key);
                    }
                    for (key, value) in set {
                        topic.configs.insert(key.clone(), value.clone());
                    }
                }
                Applied::Done
            }
            Command::AlterBrokerConfigs {
                broker,
                set,
                delete,
            } => {
                // Kafka cleans every ELR state when the cluster-level
                // min.insync.replicas is set, even to the same value.
                if broker.is_none() && self.elr_enabled() && set.contains_key(MIN_ISR) {
                    self.topics
                        .values_mut()
                        .flat_map(|t| t.partitions.iter_mut())
                        .for_each(clear_elr);
                }
                let configs = match broker {
                    None => &mut self.cluster_broker_configs,
                    Some(id) => self.broker_configs.entry(*id).or_default(),
                };
                for key in delete {
                    configs.remove(key);
                }
                configs.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
                if let Some(id) = broker {
                    if self.broker_configs.get(id).is_some_and(BTreeMap::is_empty) {
                        self.broker_configs.remove(id);
                    }
                }
                Applied::Done
            }
            Command::AlterGroupConfigs { group, set, delete } => {
                let configs = self.group_configs.entry(group.clone()).or_default();
                for key in delete {
                    configs.remove(key);
                }
                configs.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
                if configs.is_empty() {
                    self.group_configs.remove(group);
                }
                Applied::Done
            }
            Command::SetClusterId { id } => {
                self.cluster_id = Some(id.clone());
                Applied::Done
            }
            Command::AlterClientQuotas { alterations } => {
                for change in alterations {
                    let quotas = self.client_quotas.entry(change.entity.clone()).or_default();
                    for key in &change.remove {
                        quotas.remove(key);
                    }
                    quotas.extend(change.set.iter().map(|(k, v)| (k.clone(), *v)));
                    if quotas.is_empty() {
                        self.client_quotas.remove(&change.entity);
                    }
                }
                Applied::Done
            }
            Command::AlterPartition {
                topic,
                partition,
                isr,
                ..
            } => {
                let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
                let rules = self
                    .topics
                    .get(topic)
                    .map_or(Rules { elr, min_isr: 1 }, |t| {
                        topic_rules(t, elr, cluster_min_isr)
                    });
                if let Some(p) = self.topics.get_mut(topic).and_then(|t| {
                    usize::try_from(*partition)
                        .ok()
                        .and_then(|i| t.partitions.get_mut(i))
                }) {
                    let fenced = &self.fenced;
                    let acceptable = |r: i32| !fenced.contains(&r);
                    let change = Change {
                        target_isr: isr.clone(),
                        acceptable: &acceptable,
                        // The leader asking is in the new ISR and unfenced:
                        // it stays.
                        election: ElectionType::Online,
                        unclean_shutdown: None,
                    };
                    partition_change::apply(p, &change, rules);
                    if !p.adding.is_empty() && p.adding.iter().all(|r| p.isr.contains(r)) {
                        complete_reassignment(p, &self.fenced);
                    }
                }
                Applied::Done
            }
            Command::ReassignPartition {
                topic,
                partition,
                replicas,
            } => {
                let fenced = &self.fenced;
                if let Some(p) = self.topics.get_mut(topic).and_then(|t| {
                    usize::try_from(*partition)
                        .ok()
                        .and_then(|i| t.partitions.get_mut(i))
                }) {
                    match replicas {
                        Some(target) => start_reassignment(p, target, fenced),
                        None => cancel_reassignment(p, fenced),
                    }
                }
                Applied::Done
            }
            Command::ElectLeaders {
                unclean,
                partitions,
            } => Applied::Elections(self.elect_leaders(*unclean, partitions.as_deref())),
            Command::AlterUserScramCredentials {
                deletions,
                upsertions,
            } => Applied::ScramAlterations(scram::alter(
                &mut self.scram_credentials,
                deletions,
                upsertions,
            )),
            Command::CreateAcls { bindings } => Applied::AclsCreated(self.create_acls(bindings)),
            Command::DeleteAcls { filters } => Applied::AclsDeleted(self.delete_acls(filters)),
            Command::AllocateProducerIds { count } => {
                let first = self.next_producer_id;
                self.next_producer_id = first.saturating_add(*count);
                Applied::ProducerIds {
                    first,
                    count: *count,
                }
            }
            Command::RemoteSegmentCopyStarted {
                topic_id,
                partition,
                segment,
            } => {
                self.change_remote_log(*topic_id, *partition, |log| {
                    log.copy_started(segment.clone())
                });
                Applied::Done
            }
            Command::RemoteSegmentCopyFinished {
                topic_id,
                partition,
                id,
                ..
            } => {
                self.change_remote_log(*topic_id, *partition, |log| {
                    log.set_state(&[*id], RemoteSegmentState::CopyFinished)
                });
                Applied::Done
            }
            Command::RemoteSegmentsDeleteStarted {
                topic_id,
                partition,
                ids,
                log_start_offset,
                ..
            } => {
                self.change_remote_log(*topic_id, *partition, |log| {
                    log.set_state(ids, RemoteSegmentState::DeleteStarted);
                    if let Some(offset) = log_start_offset {
                        log.raise_log_start(*offset);
                    }
                });
                Applied::Done
            }
            Command::RemoteSegmentsDeleteFinished {
                topic_id,
                partition,
                ids,
            } => {
                self.change_remote_log(*topic_id, *partition, |log| log.remove(ids));
                Applied::Done
            }
            Command::RemoteTopicPurged { topic_id } => {
                self.purging_topics.remove(topic_id);
                Applied::Done
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

    /// All registered brokers, fenced or not, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers.values()
    }

    /// The broker with this id, fenced or not.
    pub fn broker(&self, id: i32) -> Option<&BrokerInfo> {
        self.brokers.get(&id)
    }

    /// True if broker `id` is registered and fenced: it missed its
    /// heartbeats or shut down, and leads nothing until it registers again.
    pub fn is_fenced(&self, id: i32) -> bool {
        self.fenced.contains(&id)
    }

    /// The fenced brokers' ids, ascending.
    pub fn fenced_brokers(&self) -> impl Iterator<Item = i32> + '_ {
        self.fenced.iter().copied()
    }

    /// The registered brokers that are not fenced, by id: those that may
    /// lead partitions and receive new replicas.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers
            .values()
            .filter(|b| !self.fenced.contains(&b.id))
    }

    /// The number of partitions, over all topics, that broker `id` leads.
    pub fn partitions_led_by(&self, id: i32) -> usize {
        self.partitions().filter(|(_, p)| p.leader == id).count()
    }

    /// The partitions without a leader (`leader == -1`), as (topic,
    /// partition), by topic name then partition.
    pub fn offline_partitions(&self) -> Vec<(String, i32)> {
        self.partitions()
            .filter(|(_, p)| p.leader == -1)
            .map(|(t, p)| (t.name.clone(), p.partition))
            .collect()
    }

    /// The partitions whose ISR is smaller than their replica list, as
    /// (topic, partition), by topic name then partition.
    pub fn under_replicated_partitions(&self) -> Vec<(String, i32)> {
        self.partitions()
            .filter(|(_, p)| p.isr.len() < p.replicas.len())
            .map(|(t, p)| (t.name.clone(), p.partition))
            .collect()
    }

    /// How many partitions [`Command::ElectPreferredLeaders`] would change
    /// now; the controller submits it only when this is above zero.
    pub fn preferred_leader_imbalance(&self) -> usize {
        let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
        self.topics
            .values()
            .map(|t| {
                let rules = topic_rules(t, elr, cluster_min_isr);
                t.partitions
                    .iter()
                    .filter(|p| preferred_change(p, &self.fenced, rules).is_some())
                    .count()
            })
            .sum()
    }

    /// The cluster id, once a broker has set it.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The dynamic broker configs of broker `broker`, or with `None` the
    /// cluster-wide default; empty when none are set. A broker's own value
    /// beats the cluster-wide default, which beats its static config.
    pub fn broker_configs(&self, broker: Option<i32>) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        match broker {
            None => &self.cluster_broker_configs,
            Some(id) => self.broker_configs.get(&id).unwrap_or(&NONE),
        }
    }

    /// The client quotas, by entity.
    pub fn client_quotas(&self) -> &ClientQuotas {
        &self.client_quotas
    }

    /// The SCRAM credential of `user` for `mechanism`, which a login with
    /// that mechanism is verified against.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<&ScramCredential> {
        self.scram_credentials.get(user)?.get(&mechanism)
    }

    /// The users with SCRAM credentials, by name, each with its mechanisms
    /// and their iterations in type-code order: what
    /// DescribeUserScramCredentials answers when asked for every user.
    pub fn scram_users(&self) -> impl Iterator<Item = (&str, Vec<(ScramMechanism, u32)>)> + '_ {
        self.scram_credentials
            .iter()
            .map(|(user, of_user)| (user.as_str(), mechanisms_of(of_user)))
    }

    /// The mechanisms `user` has a SCRAM credential for, with their
    /// iterations, in type-code order; `None` for a user without any
    /// (Kafka's RESOURCE_NOT_FOUND when DescribeUserScramCredentials names
    /// it).
    pub fn scram_user(&self, user: &str) -> Option<Vec<(ScramMechanism, u32)>> {
        self.scram_credentials.get(user).map(mechanisms_of)
    }

    /// Every ACL, sorted by resource (type, name, pattern type), then
    /// principal, host, operation and permission.
    pub fn acls(&self) -> impl Iterator<Item = &AclBinding> {
        self.acls.iter()
    }

    /// The ACLs `filter` matches, in the order of [`acls`](Self::acls):
    /// DescribeAcls.
    pub fn describe_acls(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.acls
            .iter()
            .filter(|binding| filter.matches(binding))
            .cloned()
            .collect()
    }

    /// An [`Authorizer`] over the image's ACLs, with the broker's
    /// `super.users` and `allow.everyone.if.no.acl.found`. Building one
    /// copies the ACLs once; a broker builds it when the image changes and
    /// keeps it for the checks until the next change.
    pub fn authorizer(
        &self,
        super_users: Vec<String>,
        allow_everyone_if_no_acl_found: bool,
    ) -> Authorizer {
        Authorizer::new(
            self.acls.iter().cloned(),
            super_users,
            allow_everyone_if_no_acl_found,
        )
    }

    /// The configs set on `group` (GROUP config resource).
    pub fn group_configs(&self, group: &str) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.group_configs.get(group).unwrap_or(&NONE)
    }

    /// The groups with configs of their own.
    pub fn groups_with_configs(&self) -> impl Iterator<Item = &str> {
        self.group_configs.keys().map(String::as_str)
    }

    /// The brokers with dynamic configs of their own, by id.
    pub fn brokers_with_configs(&self) -> impl Iterator<Item = i32> + '_ {
        self.broker_configs.keys().copied()
    }

    /// The first producer id the next `AllocateProducerIds` hands out.
    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// The number of commands applied so far.
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// The remote log (tiered storage) of a partition; `None` when nothing
    /// of it is in remote storage and its remote log start is 0, or when
    /// the topic is gone.
    pub fn remote_log(&self, topic_id: Uuid, partition: i32) -> Option<&RemoteLog> {
        self.remote_logs
            .get(&(topic_id, partition))
            .map(Arc::as_ref)
    }

    /// Every partition's remote log, as (topic id, partition, log), by topic
    /// id then partition.
    pub fn remote_logs(&self) -> impl Iterator<Item = (Uuid, i32, &RemoteLog)> {
        self.remote_logs
            .iter()
            .map(|((topic_id, partition), log)| (*topic_id, *partition, log.as_ref()))
    }

    /// Producer ids below it may be in records mirrored from another
    /// cluster (a failed-over mirror's): none is handed out.
    pub fn mirrored_producer_ids_end(&self) -> i64 {
        self.mirrored_producer_ids_end
    }

    /// Every mirror, by name.
    pub fn mirrors(&self) -> impl Iterator<Item = &Mirror> {
        self.mirrors.values()
    }

    /// The mirror called `name`.
    pub fn mirror(&self, name: &str) -> Option<&Mirror> {
        self.mirrors.get(name)
    }

    /// The mirror feeding the topic with this id, which makes it
    /// read-only: mirroring or failing over.
    pub fn mirror_feeding(&self, topic_id: Uuid) -> Option<&Mirror> {
        self.mirrors.values().find(|m| {
            m.mirror_topics
                .get(&topic_id)
                .is_some_and(MirrorTopic::is_read_only)
        })
    }

    /// The mirror that created the topic with this id, and the topic as it
    /// has it.
    pub fn mirror_topic(&self, topic_id: Uuid) -> Option<(&Mirror, &MirrorTopic)> {
        self.mirrors
            .values()
            .find_map(|m| Some((m, m.mirror_topics.get(&topic_id)?)))
    }

    /// Records a failing-over partition's cut; at the topic's last, makes
    /// it writable with a new leader epoch on every partition.
    fn mirror_partition_stopped(&mut self, topic_id: Uuid, partition: i32, offset: u64) {
        let Some(count) = self.partition_count_of(topic_id) else {
            return;
        };
        let Some(topic) = self.mirror_topic_mut(topic_id) else {
            return;
        };
        let MirrorTopicState::Stopping { reported } = &mut topic.state else {
            return;
        };
        reported.insert(partition, offset);
        if reported.len() < count {
            return;
        }
        let reported = std::mem::take(reported);
        let partitions = self.cut_topic(topic_id, &reported);
        if let Some(topic) = self.mirror_topic_mut(topic_id) {
            topic.state = MirrorTopicState::Stopped { partitions };
        }
    }

    /// Records where a taken-back partition and the source part; at the
    /// topic's last, starts its mirroring with a new leader epoch on every
    /// partition.
    fn mirror_partition_prepared(&mut self, topic_id: Uuid, partition: i32, offset: u64) {
        let Some(count) = self.partition_count_of(topic_id) else {
            return;
        };
        let Some(topic) = self.mirror_topic_mut(topic_id) else {
            return;
        };
        let MirrorTopicState::Preparing { reported } = &mut topic.state else {
            return;
        };
        reported.insert(partition, offset);
        if reported.len() < count {
            return;
        }
        let reported = std::mem::take(reported);
        let cuts = self.cut_topic(topic_id, &reported);
        if let Some(topic) = self.mirror_topic_mut(topic_id) {
            topic.state = MirrorTopicState::Mirroring;
            topic.failback_cuts = cuts;
        }
    }

    fn partition_count_of(&self, topic_id: Uuid) -> Option<usize> {
        let name = self.topic_ids.get(&topic_id)?;
        Some(self.topics.get(name)?.partitions.len())
    }

    fn mirror_topic_mut(&mut self, topic_id: Uuid) -> Option<&mut MirrorTopic> {
        self.mirrors
            .values_mut()
            .find_map(|m| m.mirror_topics.get_mut(&topic_id))
    }

    /// A new leader epoch on every partition of the topic, and each one's
    /// cut at its reported offset in that epoch.
    fn cut_topic(
        &mut self,
        topic_id: Uuid,
        reported: &BTreeMap<i32, u64>,
    ) -> BTreeMap<i32, MirrorCut> {
        let mut cuts = BTreeMap::new();
        let Some(info) = self
            .topic_ids
            .get(&topic_id)
            .and_then(|name| self.topics.get_mut(name))
        else {
            return cuts;
        };
        for p in &mut info.partitions {
            p.leader_epoch += 1;
            p.partition_epoch += 1;
            cuts.insert(
                p.partition,
                MirrorCut {
                    last_mirrored_offset: reported.get(&p.partition).copied().unwrap_or(0),
                    leader_epoch: p.leader_epoch,
                },
            );
        }
        cuts
    }

    /// Checks a mirror partition leader's report: its topic is in the
    /// state the report is about, and it leads the partition at that
    /// epoch.
    fn check_mirror_report(
        &self,
        topic_id: Uuid,
        partition: i32,
        (broker, leader_epoch): (i32, i32),
        in_state: impl Fn(&MirrorTopicState) -> bool,
        otherwise: &str,
    ) -> Result<(), MetaError> {
        let fits = self.mirrors.values().any(|m| {
            m.mirror_topics
                .get(&topic_id)
                .is_some_and(|t| in_state(&t.state))
        });
        if !fits {
            return Err(MetaError::InvalidRequest(format!(
                "Topic id {topic_id} {otherwise}."
            )));
        }
        self.remote_partition(topic_id, partition)?
            .check_leader(broker, leader_epoch)
    }

    fn existing_mirror(&self, name: &str) -> Result<&Mirror, MetaError> {
        self.mirrors
            .get(name)
            .ok_or_else(|| MetaError::InvalidRequest(format!("Mirror '{name}' does not exist.")))
    }

    /// The topics deleted while they had remote logs, as (topic id, last
    /// name), by id: their objects are still to be removed from the store,
    /// after which a broker proposes [`Command::RemoteTopicPurged`].
    pub fn purging_topics(&self) -> impl Iterator<Item = (Uuid, &str)> {
        self.purging_topics
            .iter()
            .map(|(topic_id, name)| (*topic_id, name.as_str()))
    }

    /// For a `CreatePartitions` request asking for `total` partitions in
    /// all: how many partitions to add, or Kafka's error when `total` does
    /// not grow the topic.
    pub fn partitions_to_add(&self, name: &str, total: i32) -> Result<i32, MetaError> {
        let current = self.existing_topic(name)?.partition_count();
        if total == current {
            return Err(MetaError::InvalidPartitions(format!(
                "Topic already has {current} partition(s)."
            )));
        }
        if total < current {
            return Err(MetaError::InvalidPartitions(format!(
                "The topic {name} currently has {current} partition(s); {total} would not be an increase."
            )));
        }
        Ok(total - current)
    }

    /// A replica assignment for `count` new partitions numbered from
    /// `first_partition`, over the live (registered, unfenced) brokers,
    /// rack-aware as Kafka's (see `placement.rs`): leaders round robin,
    /// followers shifted, the replicas of a partition on distinct racks as
    /// far as the racks allow. `start` rotates the layout; the caller picks
    /// it (at random, or from the topic count) so that this function stays
    /// deterministic.
    pub fn assign_replicas(
        &self,
        first_partition: i32,
        count: i32,
        replication_factor: i32,
        start: usize,
    ) -> Result<Vec<Vec<i32>>, MetaError> {
        let brokers: Vec<(i32, Option<&str>)> = self
            .live_brokers()
            .map(|b| (b.id, b.rack.as_deref()))
            .collect();
        placement::assign(&brokers, first_partition, count, replication_factor, start)
    }

    /// Every partition with its topic.
    fn partitions(&self) -> impl Iterator<Item = (&TopicInfo, &PartitionInfo)> {
        self.topics
            .values()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
    }

    fn registered_broker(&self, id: i32) -> Result<&BrokerInfo, MetaError> {
        self.brokers
            .get(&id)
            .ok_or_else(|| MetaError::InvalidRequest(format!("Broker {id} is not registered.")))
    }

    /// `RegisterBroker`: the broker is no longer fenced. It rejoins the ISR
    /// of every partition that has a leader, and leaderless partitions
    /// get a leader if one can be elected now (it, when it was their last
    /// in-sync replica).
    fn unfence(&mut self, id: i32) {
        self.fenced.remove(&id);
        let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
        let fenced = &self.fenced;
        let acceptable = |r: i32| !fenced.contains(&r);
        for topic in self.topics.values_mut() {
            let rules = topic_rules(topic, elr, cluster_min_isr);
            let election = election_type(topic);
            // A returning replica rejoins ISRs only through AlterPartition,
            // once its leader sees it caught up; here it can only take back
            // a partition it was the last in-sync replica of, or an eligible
            // leader replica of.
            for p in topic.partitions.iter_mut() {
                if p.leader != -1 || !p.replicas.contains(&id) {
                    continue;
                }
                let change = Change {
                    target_isr: p.isr.clone(),
                    acceptable: &acceptable,
                    election,
                    unclean_shutdown: None,
                };
                partition_change::apply(p, &change, rules);
            }
        }
    }

    /// A new process of broker `id` registers. If the old one was never
    /// fenced, it is now: the broker leaves the ISRs and rejoins them once
    /// caught up (Kafka refuses the registration until the old session
    /// expires, which fences it: the same outcome). And every partition it
    /// is a replica of moves to a new partition epoch, so that an ISR
    /// expansion a leader computed from the old process's fetches is
    /// refused (Kafka checks broker epochs for this, KIP-903).
    ///
    /// With eligible leader replicas, a process that cannot prove that the
    /// old one stopped cleanly (`clean` false) also leaves the ELRs: it may
    /// have lost records it had not synced (Kafka's unclean shutdown
    /// handling, KIP-966).
    fn fence_restarted(&mut self, id: i32, clean: bool) {
        let epochs_before: Vec<i32> = self
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.partition_epoch)
            .collect();
        if !clean && self.elr_enabled() {
            self.change_partitions(
                |p| p.isr.contains(&id) || p.elr.contains(&id),
                |p| without(&p.isr, id),
                Some(id),
            );
        }
        self.fence(id);
        let partitions = self
            .topics
            .values_mut()
            .flat_map(|t| t.partitions.iter_mut());
        for (p, before) in partitions.zip(epochs_before) {
            if p.replicas.contains(&id) && p.partition_epoch == before {
                p.partition_epoch = p.partition_epoch.saturating_add(1);
            }
        }
    }

    /// `ElectLeaders`: elects each partition named (every one for `None`)
    /// in turn, so a partition named twice hears ELECTION_NOT_NEEDED the
    /// second time.
    fn elect_leaders(
        &mut self,
        unclean: bool,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<Election> {
        let wanted: Vec<(String, i32)> = match partitions {
            Some(list) => list.to_vec(),
            None => self
                .partitions()
                .map(|(t, p)| (t.name.clone(), p.partition))
                .collect(),
        };
        let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
        let (brokers, fenced) = (&self.brokers, &self.fenced);
        let live = |id: i32| brokers.contains_key(&id) && !fenced.contains(&id);
        wanted
            .into_iter()
            .map(|(topic, partition)| {
                let outcome = match self.topics.get_mut(&topic) {
                    None => ElectionOutcome::UnknownTopic,
                    Some(t) => {
                        let rules = topic_rules(t, elr, cluster_min_isr);
                        match usize::try_from(partition)
                            .ok()
                            .and_then(|i| t.partitions.get_mut(i))
                        {
                            None => ElectionOutcome::UnknownPartition,
                            Some(p) => match requested_election(p, unclean, &live, rules) {
                                Ok(next) => {
                                    *p = next;
                                    ElectionOutcome::Elected
                                }
                                Err(outcome) => outcome,
                            },
                        }
                    }
                };
                Election {
                    topic,
                    partition,
                    outcome,
                }
            })
            .collect()
    }

    /// `CreateAcls`: each valid binding is added (if it is new: creating an
    /// existing one succeeds and changes nothing, as in Kafka).
    fn create_acls(&mut self, bindings: &[AclBinding]) -> Vec<Result<(), AclError>> {
        bindings
            .iter()
            .map(|binding| {
                binding.check()?;
                self.acls.insert(binding.clone());
                Ok(())
            })
            .collect()
    }

    /// `DeleteAcls`: each valid filter, in turn, removes the bindings it
    /// matches, so a binding two filters match is reported by the first
    /// (as Kafka's ZooKeeper-era authorizer did; its controller lists it
    /// under both). A filter that fails its check removes nothing.
    fn delete_acls(
        &mut self,
        filters: &[AclBindingFilter],
    ) -> Vec<Result<Vec<AclBinding>, AclError>> {
        filters
            .iter()
            .map(|filter| {
                filter.check()?;
                let removed = self.describe_acls(filter);
                for binding in &removed {
                    self.acls.remove(binding);
                }
                Ok(removed)
            })
            .collect()
    }

    /// `FenceBroker` and `ControlledShutdown`: the broker leaves every ISR
    /// (but stays as the last member, so that it can be elected cleanly
    /// when it returns) and its leaderships move to in-sync replicas.
    fn fence(&mut self, id: i32) {
        if !self.fenced.insert(id) {
            // Already fenced: it leads nothing and is only ever the last
            // member of an ISR, so there is nothing to move.
            return;
        }
        self.change_partitions(
            |p| p.isr.contains(&id) || p.leader == id,
            |p| without(&p.isr, id),
            None,
        );
    }

    /// Applies a [`partition_change`] to every partition `select` picks,
    /// aiming at the ISR `target_isr` gives it, with the topic's rules and
    /// election type; unfenced brokers may lead.
    fn change_partitions(
        &mut self,
        select: impl Fn(&PartitionInfo) -> bool,
        target_isr: impl Fn(&PartitionInfo) -> Vec<i32>,
        unclean_shutdown: Option<i32>,
    ) {
        let (elr, cluster_min_isr) = (self.elr_enabled(), self.cluster_min_isr());
        let fenced = &self.fenced;
        let acceptable = |r: i32| !fenced.contains(&r);
        for topic in self.topics.values_mut() {
            let rules = topic_rules(topic, elr, cluster_min_isr);
            let election = election_type(topic);
            for p in topic.partitions.iter_mut().filter(|p| select(p)) {
                let change = Change {
                    target_isr: target_isr(p),
                    acceptable: &acceptable,
                    election,
                    unclean_shutdown,
                };
                partition_change::apply(p, &change, rules);
            }
        }
    }

    /// The finalized level of feature `name` (0 if it is off or unknown);
    /// `metadata.version` is not stored here.
    pub fn feature_level(&self, name: &str) -> i16 {
        self.features.get(name).copied().unwrap_or(0)
    }

    /// The finalized features with a level above 0, by name.
    pub fn feature_levels(&self) -> impl Iterator<Item = (&str, i16)> {
        self.features
            .iter()
            .map(|(name, level)| (name.as_str(), *level))
    }

    /// True while `eligible.leader.replicas.version` is at least 1.
    pub fn elr_enabled(&self) -> bool {
        self.feature_level(ELR_FEATURE) >= 1
    }

    /// The cluster-level `min.insync.replicas` (the dynamic default broker
    /// config), or Kafka's default 1.
    pub fn cluster_min_isr(&self) -> usize {
        self.cluster_broker_configs
            .get(MIN_ISR)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1)
    }

    /// `SetFeatureLevel`, with what Kafka's controller does on the way
    /// (`ConfigurationControlManager`, `FeatureControlManager`).
    fn set_feature_level(&mut self, name: &str, level: i16) {
        let was_enabled = self.elr_enabled();
        if level == 0 {
            self.features.remove(name);
        } else {
            self.features.insert(name.to_owned(), level);
        }
        if name != ELR_FEATURE || was_enabled == self.elr_enabled() {
            return;
        }
        if self.elr_enabled() {
            // The cluster gets a min.insync.replicas of its own (Kafka takes
            // the active controller's static value; Weir's brokers have
            // none, so Kafka's default), and the brokers' own values go.
            self.cluster_broker_configs
                .entry(MIN_ISR.to_owned())
                .or_insert_with(|| "1".to_owned());
            for configs in self.broker_configs.values_mut() {
                configs.remove(MIN_ISR);
            }
            self.broker_configs.retain(|_, configs| !configs.is_empty());
        } else {
            self.topics
                .values_mut()
                .flat_map(|t| t.partitions.iter_mut())
                .for_each(clear_elr);
        }
    }

    /// Kafka's rules for `min.insync.replicas` as a broker config while ELR
    /// is enabled: the cluster-level value stays, brokers have none.
    fn check_min_isr_with_elr(
        &self,
        broker: Option<i32>,
        set: &BTreeMap<String, String>,
        delete: &[String],
    ) -> Result<(), MetaError> {
        if !self.elr_enabled() {
            return Ok(());
        }
        let invalid = |reason: &str| {
            Err(MetaError::InvalidConfig {
                key: MIN_ISR.to_owned(),
                reason: reason.to_owned(),
            })
        };
        match broker {
            None if delete.iter().any(|k| k == MIN_ISR) => {
                invalid("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
            }
            Some(_) if touches_min_isr(set, delete) => {
                invalid("Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
            }
            _ => Ok(()),
        }
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

    /// What a `CreateTopic` of `name` with `configs` would be refused for
    /// whatever its replicas: a bad name, the name taken (or colliding),
    /// a bad config. Kafka's controller checks these before the request's
    /// counts and assignment, so a request for an existing topic hears
    /// TOPIC_ALREADY_EXISTS whatever else is wrong with it.
    pub fn check_new_topic(
        &self,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), MetaError> {
        self.check_topic_name_free(name)?;
        topic_config::validate_configs(configs)
    }

    fn check_topic_name_free(&self, name: &str) -> Result<(), MetaError> {
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
        self.check_topic_name_free(name)?;
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
        // Its purge would delete the new topic's remote data.
        if let Some(other) = self.purging_topics.get(&id) {
            return Err(MetaError::InvalidRequest(format!(
                "Topic id {id} is that of the deleted topic '{other}'."
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
            self.check_manual_assignment(assignment, Some(rf))?;
        }
        topic_config::validate_configs(configs)
    }

    /// Adds a topic that [`check_create_topic`](Self::check_create_topic)
    /// accepted.
    fn create_topic(
        &mut self,
        name: &str,
        id: Uuid,
        replicas: &[Vec<i32>],
        configs: &BTreeMap<String, String>,
        internal: bool,
    ) {
        let topic = TopicInfo {
            name: name.to_owned(),
            id,
            partitions: new_partitions(0, replicas),
            configs: configs.clone(),
            internal,
        };
        self.topic_ids.insert(id, name.to_owned());
        self.collision_keys
            .insert(collision_key(name), name.to_owned());
        self.topics.insert(name.to_owned(), topic);
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
                "Topic already has {current} partition(s)."
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
            self.check_manual_assignment(assignment, Some(rf))?;
        }
        Ok(())
    }

    /// Checks one partition's replica list of a manual assignment, as
    /// Kafka's controller does (`validateManualPartitionAssignment`): not
    /// empty, every broker registered (and, in Weir, not fenced), none
    /// twice, and, when `replication_factor` is given (the other
    /// partitions' length), that long. Brokers are checked in id order, as
    /// Kafka does. Each failure is `InvalidReplicaAssignment` (39) with
    /// Kafka's message.
    pub fn check_manual_assignment(
        &self,
        replicas: &[i32],
        replication_factor: Option<usize>,
    ) -> Result<(), MetaError> {
        let invalid = |msg: String| Err(MetaError::InvalidReplicaAssignment(msg));
        if replicas.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".to_owned(),
            );
        }
        let mut sorted = replicas.to_vec();
        sorted.sort_unstable();
        for (i, &id) in sorted.iter().enumerate() {
            if !self.brokers.contains_key(&id) {
                return invalid(format!(
                    "The manual partition assignment includes broker {id}, but no such broker is registered."
                ));
            }
            if i > 0 && sorted[i - 1] == id {
                return invalid(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
            // Kafka takes a fenced replica as long as one is not; Weir
            // refuses any (see DESIGN.md: loosening a rule of the state
            // machine needs a versioned command).
            if self.fenced.contains(&id) {
                return invalid(format!(
                    "The manual partition assignment includes broker {id}, which is fenced or in controlled shutdown."
                ));
            }
        }
        match replication_factor {
            Some(rf) if replicas.len() != rf => invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
                replicas.len()
            )),
            _ => Ok(()),
        }
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
        topic_config::check_relations(&configs)?;
        topic_config::check_alteration(&topic.configs, &configs)
    }

    fn check_alter_partition(
        &self,
        topic: &str,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[i32],
    ) -> Result<(), MetaError> {
        let p = self
            .existing_topic(topic)?
            .partition(partition)
            .ok_or_else(|| MetaError::UnknownTopic(topic.to_owned()))?;
        if p.leader != leader || p.leader_epoch != leader_epoch {
            return Err(MetaError::FencedLeaderEpoch(format!(
                "{topic}-{partition}: broker {leader} at leader epoch {leader_epoch} is not the \
                 leader (the leader is {} at epoch {}).",
                p.leader, p.leader_epoch
            )));
        }
        if p.partition_epoch != partition_epoch {
            return Err(MetaError::InvalidUpdateVersion(format!(
                "{topic}-{partition}: the change is based on partition epoch {partition_epoch}, \
                 the partition is at {}.",
                p.partition_epoch
            )));
        }
        let mut seen = BTreeSet::new();
        for id in isr {
            if !p.replicas.contains(id) || !seen.insert(*id) {
                return Err(MetaError::InvalidRequest(format!(
                    "{topic}-{partition}: the ISR {isr:?} must be distinct replicas of {:?}.",
                    p.replicas
                )));
            }
            if self.fenced.contains(id) {
                return Err(MetaError::InvalidRequest(format!(
                    "{topic}-{partition}: broker {id} is fenced and cannot join the ISR."
                )));
            }
        }
        if !isr.contains(&leader) {
            return Err(MetaError::InvalidRequest(format!(
                "{topic}-{partition}: the ISR {isr:?} must hold the leader {leader}."
            )));
        }
        Ok(())
    }

    fn check_reassignment(
        &self,
        topic: &str,
        partition: i32,
        replicas: Option<&[i32]>,
    ) -> Result<(), MetaError> {
        let p = self
            .existing_topic(topic)?
            .partition(partition)
            .ok_or_else(|| MetaError::UnknownTopic(topic.to_owned()))?;
        let Some(target) = replicas else {
            if p.adding.is_empty() && p.removing.is_empty() {
                return Err(MetaError::NoReassignmentInProgress(format!(
                    "{topic}-{partition} is not being reassigned."
                )));
            }
            return Ok(());
        };
        if target.is_empty() {
            return Err(MetaError::InvalidReplicaAssignment(format!(
                "{topic}-{partition}: the target replica list is empty."
            )));
        }
        let mut seen = BTreeSet::new();
        for id in target {
            if !seen.insert(*id) {
                return Err(MetaError::InvalidReplicaAssignment(format!(
                    "{topic}-{partition}: broker {id} appears twice in {target:?}."
                )));
            }
            if !self.brokers.contains_key(id) {
                return Err(MetaError::InvalidReplicaAssignment(format!(
                    "{topic}-{partition}: broker {id} is not registered."
                )));
            }
            if !p.replicas.contains(id) && self.fenced.contains(id) {
                return Err(MetaError::InvalidReplicaAssignment(format!(
                    "{topic}-{partition}: broker {id} is fenced and cannot take a new replica."
                )));
            }
        }
        Ok(())
    }

    /// The partitions being reassigned: (topic, partition, replicas, adding,
    /// removing).
    pub fn reassignments(&self) -> Vec<(String, &PartitionInfo)> {
        self.partitions()
            .filter(|(_, p)| !p.adding.is_empty() || !p.removing.is_empty())
            .map(|(t, p)| (t.name.clone(), p))
            .collect()
    }

    fn check_cluster_id(&self, id: &str) -> Result<(), MetaError> {
        if id.is_empty() {
            return Err(MetaError::InvalidRequest(
                "The cluster id must not be empty.".to_owned(),
            ));
        }
        match &self.cluster_id {
            Some(current) if current != id => Err(MetaError::InvalidRequest(format!(
                "The cluster id is already {current}."
            ))),
            _ => Ok(()),
        }
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

    /// A partition as the tiered storage commands see it, found by topic
    /// id: unknown topic ids and partitions are `UnknownTopic` (3).
    fn remote_partition(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<RemotePartition<'_>, MetaError> {
        // A partition nothing was copied from reads as an empty log.
        static EMPTY: RemoteLog = RemoteLog::new();
        let topic = self
            .topic_by_id(topic_id)
            .ok_or_else(|| MetaError::UnknownTopic(topic_id.to_string()))?;
        let name = format!("{}-{partition}", topic.name);
        let info = topic
            .partition(partition)
            .ok_or_else(|| MetaError::UnknownTopic(name.clone()))?;
        let log = self
            .remote_logs
            .get(&(topic_id, partition))
            .map_or(&EMPTY, Arc::as_ref);
        Ok(RemotePartition { name, info, log })
    }

    fn check_remote_copy_started(
        &self,
        topic_id: Uuid,
        partition: i32,
        segment: &RemoteSegment,
    ) -> Result<(), MetaError> {
        let remote = self.remote_partition(topic_id, partition)?;
        remote.check_leader(segment.broker, segment.leader_epoch)?;
        segment
            .check_new()
            .map_err(|reason| MetaError::InvalidRequest(format!("{}: {reason}.", remote.name)))?;
        if remote.log.segment(segment.id).is_some() {
            return Err(MetaError::InvalidRequest(format!(
                "{}: remote segment {} exists already.",
                remote.name, segment.id
            )));
        }
        Ok(())
    }

    fn check_remote_copy_finished(
        &self,
        topic_id: Uuid,
        partition: i32,
        id: Uuid,
        broker: i32,
        leader_epoch: i32,
    ) -> Result<(), MetaError> {
        let remote = self.remote_partition(topic_id, partition)?;
        remote.check_leader(broker, leader_epoch)?;
        let segment = remote.segment(id)?;
        if segment.state != RemoteSegmentState::CopyStarted {
            return Err(MetaError::InvalidRequest(format!(
                "{}: remote segment {id} is in state {:?}, not CopyStarted.",
                remote.name, segment.state
            )));
        }
        // The leader that finishes must be the one that uploaded: after a
        // leader change, the old leader's upload may be incomplete.
        if segment.broker != broker || segment.leader_epoch != leader_epoch {
            return Err(MetaError::FencedLeaderEpoch(format!(
                "{}: remote segment {id} was started by broker {} at leader epoch {}, not by \
                 broker {broker} at leader epoch {leader_epoch}.",
                remote.name, segment.broker, segment.leader_epoch
            )));
        }
        Ok(())
    }

    fn check_remote_delete_started(
        &self,
        topic_id: Uuid,
        partition: i32,
        ids: &[Uuid],
        broker: i32,
        leader_epoch: i32,
    ) -> Result<(), MetaError> {
        let remote = self.remote_partition(topic_id, partition)?;
        remote.check_leader(broker, leader_epoch)?;
        for id in ids {
            remote.segment(*id)?;
        }
        Ok(())
    }

    fn check_remote_delete_finished(
        &self,
        topic_id: Uuid,
        partition: i32,
        ids: &[Uuid],
    ) -> Result<(), MetaError> {
        let remote = self.remote_partition(topic_id, partition)?;
        // Unknown ids were removed by an earlier attempt: skipped.
        let known = ids.iter().filter_map(|id| remote.log.segment(*id));
        for segment in known {
            if segment.state != RemoteSegmentState::DeleteStarted {
                return Err(MetaError::InvalidRequest(format!(
                    "{}: remote segment {} is in state {:?}, not DeleteStarted.",
                    remote.name, segment.id, segment.state
                )));
            }
        }
        Ok(())
    }

    /// Applies `change` to a partition's remote log (an empty one if it has
    /// none), copying the log first if an older image still shares it. A
    /// log left without segments and with its start at 0 is dropped: it
    /// holds nothing an empty one does not.
    fn change_remote_log(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        change: impl FnOnce(&mut RemoteLog),
    ) {
        let key = (topic_id, partition);
        let log = Arc::make_mut(self.remote_logs.entry(key).or_default());
        change(log);
        if log.is_forgettable() {
            self.remote_logs.remove(&key);
        }
    }

    /// `DeleteTopic`: the topic's remote logs go with it and, if it had
    /// any, the topic waits in `purging_topics` until its objects are
    /// removed from the store (a recreated topic gets a new id, so its
    /// objects are never those purged).
    fn forget_remote_logs(&mut self, topic_id: Uuid, name: &str) {
        let keys: Vec<(Uuid, i32)> = self
            .remote_logs
            .range((topic_id, i32::MIN)..=(topic_id, i32::MAX))
            .map(|(key, _)| *key)
            .collect();
        if keys.is_empty() {
            return;
        }
        for key in &keys {
            self.remote_logs.remove(key);
        }
        self.purging_topics.insert(topic_id, name.to_owned());
    }
}

/// A partition as the tiered storage commands see it.
struct RemotePartition<'a> {
    /// "topic-partition", for messages.
    name: String,
    info: &'a PartitionInfo,
    log: &'a RemoteLog,
}

impl RemotePartition<'_> {
    /// Refuses a change from a broker that is not the partition's leader,
    /// or from an older leader epoch, as `AlterPartition` does: a deposed
    /// leader must not add segments or delete them.
    fn check_leader(&self, broker: i32, leader_epoch: i32) -> Result<(), MetaError> {
        let p = self.info;
        if p.leader == -1 || p.leader != broker || p.leader_epoch != leader_epoch {
            return Err(MetaError::FencedLeaderEpoch(format!(
                "{}: broker {broker} at leader epoch {leader_epoch} is not the leader (the \
                 leader is {} at epoch {}).",
                self.name, p.leader, p.leader_epoch
            )));
        }
        Ok(())
    }

    /// The segment `id`, or `InvalidRequest` (42) naming it.
    fn segment(&self, id: Uuid) -> Result<&RemoteSegment, MetaError> {
        self.log.segment(id).ok_or_else(|| {
            MetaError::InvalidRequest(format!("{}: no remote segment {id}.", self.name))
        })
    }
}

/// The checks Kafka's controller makes of a broker config change: a
/// resource name that is a non-negative broker id (or the default), and
/// each key at most once. Names and values are the proposing broker's to
/// validate.
fn check_client_quotas(alterations: &[QuotaAlteration]) -> Result<(), MetaError> {
    let invalid = |message: String| Err(MetaError::InvalidRequest(message));
    let mut seen = BTreeSet::new();
    for change in alterations {
        let entity = &change.entity;
        if entity.user.is_none() && entity.client_id.is_none() {
            return invalid("Invalid empty client quota entity".into());
        }
        for (kind, name) in [("user", &entity.user), ("client-id", &entity.client_id)] {
            if matches!(name, Some(client_quota::EntityName::Named(n)) if n.is_empty()) {
                return invalid(format!("Empty {kind} not supported"));
            }
        }
        if !seen.insert(entity) {
            return invalid(format!("Ignoring duplicate entity {entity}"));
        }
        for (key, value) in &change.set {
            if !(value.0 > 0.0 && value.0.is_finite()) {
                return invalid(format!("Quota {key} must be greater than 0"));
            }
            if change.remove.contains(key) {
                return invalid(format!(
                    "Duplicate quota key {key} not updating quota for this entity {entity}"
                ));
            }
        }
    }
    Ok(())
}

fn check_group_configs(
    group: &str,
    set: &BTreeMap<String, String>,
    delete: &[String],
) -> Result<(), MetaError> {
    if group.is_empty() {
        return Err(MetaError::InvalidRequest(
            "The group id must not be empty.".to_owned(),
        ));
    }
    check_broker_configs(None, set, delete)
}

fn check_broker_configs(
    broker: Option<i32>,
    set: &BTreeMap<String, String>,
    delete: &[String],
) -> Result<(), MetaError> {
    if broker.is_some_and(|id| id < 0) {
        return Err(MetaError::InvalidRequest(
            "Invalid negative broker ID.".to_owned(),
        ));
    }
    let mut deleted = BTreeSet::new();
    for key in delete {
        if set.contains_key(key) || !deleted.insert(key) {
            return Err(MetaError::InvalidRequest(format!(
                "Error due to duplicate config keys: {key}"
            )));
        }
    }
    if let Some(key) = set.keys().chain(delete).find(|k| k.trim().is_empty()) {
        return Err(MetaError::InvalidRequest(format!(
            "Invalid empty config name {key:?}"
        )));
    }
    Ok(())
}

fn mechanisms_of(
    of_user: &BTreeMap<ScramMechanism, ScramCredential>,
) -> Vec<(ScramMechanism, u32)> {
    of_user
        .iter()
        .map(|(mechanism, credential)| (*mechanism, credential.iterations))
        .collect()
}

fn new_partitions(first: usize, replicas: &[Vec<i32>]) -> Vec<PartitionInfo> {
    replicas
        .iter()
        .enumerate()
        .map(|(i, replicas)| PartitionInfo {
            partition: (first + i) as i32,
            leader: replicas.first().copied().unwrap_or(-1),
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: replicas.clone(),
            adding: Vec::new(),
            removing: Vec::new(),
            isr: replicas.clone(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        })
        .collect()
}

/// Starts moving `p` to `target`: the replica set becomes the target plus
/// the current replicas not in it, the new ones catch up before the old
/// ones go. A target that adds nothing completes at once.
fn start_reassignment(p: &mut PartitionInfo, target: &[i32], fenced: &BTreeSet<i32>) {
    // A new target replaces one in progress: start from the original set.
    let original: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !p.adding.contains(r))
        .collect();
    p.isr.retain(|r| original.contains(r) || target.contains(r));
    p.adding = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    p.removing = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let mut replicas = target.to_vec();
    replicas.extend(p.removing.iter().copied());
    p.replicas = replicas;
    p.partition_epoch = p.partition_epoch.saturating_add(1);
    if p.adding.iter().all(|r| p.isr.contains(r)) {
        complete_reassignment(p, fenced);
    }
}

/// Every added replica is in the ISR: the removed ones go, and leadership
/// moves if the leader was one of them.
fn complete_reassignment(p: &mut PartitionInfo, fenced: &BTreeSet<i32>) {
    let removing = std::mem::take(&mut p.removing);
    p.adding.clear();
    drop_replicas(p, &removing, fenced);
}

/// Back to the replicas before the reassignment.
fn cancel_reassignment(p: &mut PartitionInfo, fenced: &BTreeSet<i32>) {
    let adding = std::mem::take(&mut p.adding);
    p.removing.clear();
    drop_replicas(p, &adding, fenced);
}

/// Takes `gone` out of the replicas and the ISR, electing a leader from
/// what remains if the leader went (or there was none).
fn drop_replicas(p: &mut PartitionInfo, gone: &[i32], fenced: &BTreeSet<i32>) {
    p.replicas.retain(|r| !gone.contains(r));
    p.elr.retain(|r| !gone.contains(r));
    p.last_known_elr.retain(|r| !gone.contains(r));
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| !gone.contains(r))
        .collect();
    let mut leader = p.leader;
    if leader == -1 || gone.contains(&leader) {
        match elect(&p.replicas, &isr, fenced, false) {
            Some((elected, elected_isr)) => (leader, isr) = (elected, elected_isr),
            None => leader = -1,
        }
    }
    if isr.is_empty() {
        // Never empty: keep the first remaining replica as the last member.
        isr = p.replicas.first().copied().into_iter().collect();
    }
    change_partition(p, leader, isr);
    // The replica set changed even if leader and ISR did not.
    p.partition_epoch = p.partition_epoch.saturating_add(1);
}

/// True if the topic overrides `unclean.leader.election.enable` to true
/// (the broker default, false, is the only default the image knows).
fn unclean_election_enabled(configs: &BTreeMap<String, String>) -> bool {
    configs
        .get("unclean.leader.election.enable")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// A leader for a partition whose replicas are `replicas` and whose ISR
/// would be `isr`, and the ISR that goes with it: the first replica (in
/// replica order, so the preferred one when possible) that is in sync and
/// not fenced. Failing that, with unclean election enabled, the first
/// unfenced replica, alone in the ISR: it may lack acknowledged records,
/// which the topic accepted to lose rather than stay offline.
fn elect(
    replicas: &[i32],
    isr: &[i32],
    fenced: &BTreeSet<i32>,
    unclean: bool,
) -> Option<(i32, Vec<i32>)> {
    let live = |r: &&i32| !fenced.contains(*r);
    if let Some(&leader) = replicas.iter().filter(live).find(|r| isr.contains(r)) {
        return Some((leader, isr.to_vec()));
    }
    if unclean {
        if let Some(&leader) = replicas.iter().find(live) {
            return Some((leader, vec![leader]));
        }
    }
    None
}

/// What `ElectPreferredLeaders` does to one partition, if anything: the
/// preferred replica takes over when it is in sync and not fenced, and a
/// leaderless partition gets a clean leader if it has one.
fn preferred_change(
    p: &PartitionInfo,
    fenced: &BTreeSet<i32>,
    rules: Rules,
) -> Option<PartitionInfo> {
    if p.leader == -1 {
        let acceptable = |r: i32| !fenced.contains(&r);
        return online_election(p, &acceptable, ElectionType::Online, rules);
    }
    let preferred = *p.replicas.first()?;
    (preferred != p.leader && p.isr.contains(&preferred) && !fenced.contains(&preferred))
        .then(|| with_leader(p, preferred))
}

/// A leaderless partition with a leader elected as Kafka's controller
/// does, from the ISR, the ELR, the last known leader or (unclean) any
/// acceptable replica; `None` if none can lead.
fn online_election(
    p: &PartitionInfo,
    acceptable: &dyn Fn(i32) -> bool,
    election: ElectionType,
    rules: Rules,
) -> Option<PartitionInfo> {
    let change = Change {
        target_isr: p.isr.clone(),
        acceptable,
        election,
        unclean_shutdown: None,
    };
    let next = partition_change::changed(p, &change, rules);
    (next.leader != -1).then_some(next)
}

/// `p` led by `leader`, an ISR member, the ISR unchanged.
fn with_leader(p: &PartitionInfo, leader: i32) -> PartitionInfo {
    let mut next = p.clone();
    change_partition(&mut next, leader, p.isr.clone());
    next
}

/// The partition an ElectLeaders request makes of `p`, or why it changes
/// nothing, as Kafka's controller decides (`electLeader` and
/// `PartitionChangeBuilder`); `live` tells a registered, unfenced broker.
///
/// Preferred: not needed when the preferred replica leads; else it leads
/// if in sync and live. If it cannot, a partition that has a leader keeps
/// it (PREFERRED_LEADER_NOT_AVAILABLE), and a leaderless one gets the next
/// in-sync live replica (or, with the ISR empty, eligible leader replica,
/// or the last known leader) if there is one.
///
/// Unclean: not needed when the partition has a leader; else as above,
/// then the first live replica with the ISR just itself (records it lacks
/// are lost: the operator chose availability).
fn requested_election(
    p: &PartitionInfo,
    unclean: bool,
    live: &dyn Fn(i32) -> bool,
    rules: Rules,
) -> Result<PartitionInfo, ElectionOutcome> {
    let in_sync = |r: i32| p.isr.contains(&r) && live(r);
    if unclean {
        if p.leader != -1 {
            return Err(ElectionOutcome::NotNeeded);
        }
        return online_election(p, live, ElectionType::Unclean, rules)
            .ok_or(ElectionOutcome::EligibleLeadersNotAvailable);
    }
    let preferred = p.replicas.first().copied().unwrap_or(-1);
    if preferred == p.leader {
        return Err(ElectionOutcome::NotNeeded);
    }
    if in_sync(preferred) {
        return Ok(with_leader(p, preferred));
    }
    if p.leader != -1 && in_sync(p.leader) {
        return Err(ElectionOutcome::PreferredLeaderNotAvailable);
    }
    online_election(p, live, ElectionType::Online, rules)
        .ok_or(ElectionOutcome::PreferredLeaderNotAvailable)
}

/// Sets a partition's leader and ISR, bumping each epoch once if its part
/// changed: the leader epoch for a new leader, the partition epoch for a
/// new leader or ISR.
fn change_partition(p: &mut PartitionInfo, leader: i32, isr: Vec<i32>) {
    let leader_changed = p.leader != leader;
    let isr_changed = p.isr != isr;
    if leader_changed {
        p.leader = leader;
        p.leader_epoch = p.leader_epoch.saturating_add(1);
    }
    if isr_changed {
        p.isr = isr;
    }
    if leader_changed || isr_changed {
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
}

/// The feature that turns on eligible leader replicas (KIP-966).
pub const ELR_FEATURE: &str = "eligible.leader.replicas.version";

/// The topic config (and cluster-level broker config) that sets the
/// smallest ISR acks=all writes need.
const MIN_ISR: &str = "min.insync.replicas";

/// The checks of `SetFeatureLevel` the image makes: a name, a level not
/// below 0 (in Kafka's words). Which features and levels exist is the
/// proposing broker's to check.
fn check_feature_level(name: &str, level: i16) -> Result<(), MetaError> {
    if name.trim().is_empty() {
        return Err(MetaError::InvalidRequest(
            "The feature name must not be empty.".to_owned(),
        ));
    }
    if level < 0 {
        return Err(MetaError::InvalidUpdateVersion(format!(
            "Invalid update version {level} for feature {name}. A feature version cannot be less than 0."
        )));
    }
    Ok(())
}

/// The rules a topic's partitions change by: whether ELR is on, and the
/// topic's `min.insync.replicas` (its own, else the cluster's), capped at
/// its replication factor as Kafka's `getTopicEffectiveMinIsr` does.
fn topic_rules(topic: &TopicInfo, elr: bool, cluster_min_isr: usize) -> Rules {
    let min_isr = topic
        .configs
        .get(MIN_ISR)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(cluster_min_isr);
    Rules {
        elr,
        min_isr: min_isr.min(topic.replication_factor()),
    }
}

/// Unclean when the topic allows it, else online.
fn election_type(topic: &TopicInfo) -> ElectionType {
    if unclean_election_enabled(&topic.configs) {
        ElectionType::Unclean
    } else {
        ElectionType::Online
    }
}

/// `isr` without broker `id`.
fn without(isr: &[i32], id: i32) -> Vec<i32> {
    isr.iter().copied().filter(|r| *r != id).collect()
}

/// True if a config change sets or removes `min.insync.replicas`.
fn touches_min_isr(set: &BTreeMap<String, String>, delete: &[String]) -> bool {
    set.contains_key(MIN_ISR) || delete.iter().any(|k| k == MIN_ISR)
}

/// Forgets a partition's eligible leader replicas and last known leader
/// (a new partition epoch if there were any).
fn clear_elr(p: &mut PartitionInfo) {
    if !p.elr.is_empty() || !p.last_known_elr.is_empty() {
        p.elr.clear();
        p.last_known_elr.clear();
        p.partition_epoch = p.partition_epoch.saturating_add(1);
    }
}
