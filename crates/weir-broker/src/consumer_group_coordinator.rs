//! The coordinator of consumer groups (KIP-848): hosts a
//! [`ConsumerGroupEngine`] for every such group whose `__consumer_offsets`
//! partition this node leads, and does its I/O: appends the records the
//! engine emits (in Kafka's schemas, `offsets::consumer_group_records`),
//! answers a heartbeat only once the in-sync replicas hold them, and arms
//! the session and revocation timers.
//!
//! As for classic groups, the groups of each `__consumer_offsets` partition
//! have their own mutex, held while an event is applied and its records
//! appended, never across an await. A new leader of the partition replays
//! the groups' records ([`take_over`](ConsumerGroupCoordinator::take_over)),
//! so members keep their epochs and assignments through a failover.
//!
//! The cluster's topics reach an engine lazily: before a group handles a
//! heartbeat, a metadata image newer than the one it last saw is fed to it
//! as [`Event::MetadataChanged`].

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use weir_meta::MetadataImage;

use crate::broker::Broker;
use crate::consumer_group::{
    ConsumerGroupConfig, ConsumerGroupEngine, ConsumerGroupError, Event, GroupDescription,
    HeartbeatRequest, HeartbeatResponse, Output, Record, TimerCommand, TimerKey, TopicLookup,
    TopicRef,
};
use crate::group_coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::offsets::consumer_group_records;
use crate::offsets::records::partition_for;
use crate::partition::ReplicatedWrite;

/// Why a request got no answer from the group itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorError {
    #[error(transparent)]
    Group(#[from] ConsumerGroupError),
    /// This node does not (or no longer) coordinate the group.
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    /// The group's records could not be written or replicated.
    #[error("the group's state could not be written to __consumer_offsets")]
    CoordinatorNotAvailable,
}

impl CoordinatorError {
    pub fn code(&self) -> i16 {
        match self {
            CoordinatorError::Group(error) => error.code(),
            CoordinatorError::NotCoordinator => 16,
            CoordinatorError::CoordinatorNotAvailable => 15,
        }
    }
}

struct HostedGroup {
    engine: ConsumerGroupEngine,
    /// Armed timers with the token that tells a firing timer it is current.
    timers: HashMap<TimerKey, (u64, JoinHandle<()>)>,
    /// The metadata image the engine last saw (its applied index).
    image_seen: u64,
    /// The group's last write: an answer that writes nothing still waits
    /// for it, since it may tell what that write decided.
    last_write: Option<ReplicatedWrite>,
}

impl HostedGroup {
    fn new(engine: ConsumerGroupEngine) -> Self {
        Self {
            engine,
            timers: HashMap::new(),
            image_seen: 0,
            last_write: None,
        }
    }

    fn disarm_all(&mut self) {
        for (_, (_, handle)) in self.timers.drain() {
            handle.abort();
        }
    }
}

/// The consumer groups of one `__consumer_offsets` partition.
type PartitionGroups = Arc<Mutex<HashMap<String, HostedGroup>>>;

pub struct ConsumerGroupCoordinator {
    config: ConsumerGroupConfig,
    partitions: RwLock<HashMap<i32, PartitionGroups>>,
    partition_count: AtomicI32,
    next_token: AtomicU64,
}

/// The cluster's topics as the engines look them up: the metadata image.
struct ImageTopics<'a>(&'a MetadataImage);

impl TopicLookup for ImageTopics<'_> {
    fn topic(&self, name: &str) -> Option<TopicRef> {
        self.0.topic(name).map(|topic| TopicRef {
            id: topic.id,
            partitions: topic.partition_count(),
        })
    }

    fn topics_matching(&self, regex: &str) -> BTreeSet<String> {
        let Ok(regex) = regex::Regex::new(&format!("^(?:{regex})$")) else {
            return BTreeSet::new();
        };
        self.0
            .topics()
            .filter(|topic| !topic.internal && regex.is_match(&topic.name))
            .map(|topic| topic.name.clone())
            .collect()
    }
}

impl ConsumerGroupCoordinator {
    pub fn new(config: ConsumerGroupConfig) -> Self {
        Self {
            config,
            partitions: RwLock::default(),
            partition_count: AtomicI32::new(0),
            next_token: AtomicU64::new(1),
        }
    }

    /// The settings of `group`: the broker's, with the group's own configs
    /// (GROUP config resource) on top.
    fn config_of(&self, image: &MetadataImage, group: &str) -> ConsumerGroupConfig {
        crate::group_configs::apply(&self.config, image.group_configs(group))
            .unwrap_or_else(|_| self.config.clone())
    }

    fn partition_of(&self, group: &str) -> Option<PartitionGroups> {
        match self.partition_count.load(Ordering::Acquire) {
            0 => None,
            count => self
                .partitions
                .read()
                .get(&partition_for(group, count))
                .cloned(),
        }
    }

    /// This node now coordinates the groups of `__consumer_offsets`
    /// partition `partition` (of `partition_count`): they are rebuilt from
    /// `records` (each group's live records in log order) and their timers
    /// armed.
    pub fn take_over(
        &self,
        broker: &Arc<Broker>,
        partition: i32,
        partition_count: i32,
        records: Vec<(String, Vec<(Bytes, Bytes)>)>,
    ) {
        self.partition_count
            .store(partition_count, Ordering::Release);
        let taken = PartitionGroups::default();
        let mut groups = taken.lock();
        if let Some(replaced) = self.partitions.write().insert(partition, taken.clone()) {
            disarm(&replaced);
        }
        let now = broker.now_ms() as u64;
        let image = broker.image();
        for (group, entries) in records {
            let mut engine =
                ConsumerGroupEngine::new(group.clone(), self.config_of(&image, &group));
            for (key, value) in entries {
                let replayed = consumer_group_records::decode(&key, Some(&value))
                    .map_err(|e| e.to_string())
                    .and_then(|(_, record)| engine.replay(&record).map_err(|e| e.to_string()));
                if let Err(error) = replayed {
                    tracing::warn!(group, %error, "skipping a consumer group record");
                }
            }
            if !engine.exists() {
                continue;
            }
            let mut hosted = HostedGroup::new(engine);
            let output = hosted.engine.on_loaded(now);
            self.execute(broker, &group, &mut hosted, output);
            groups.insert(group, hosted);
        }
    }

    /// Another node coordinates partition `partition` now.
    pub fn hand_over(&self, partition: i32) {
        if let Some(handed) = self.partitions.write().remove(&partition) {
            disarm(&handed);
        }
    }

    /// Whether `group` is a consumer group hosted here.
    pub fn hosts(&self, group: &str) -> bool {
        self.partition_of(group)
            .is_some_and(|p| p.lock().get(group).is_some_and(|h| h.engine.exists()))
    }

    /// Applies one ConsumerGroupHeartbeat; the answer, once what it changed
    /// is replicated.
    pub fn heartbeat(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: HeartbeatRequest,
    ) -> impl std::future::Future<Output = Result<HeartbeatResponse, CoordinatorError>> + Send + 'static
    {
        let outcome = self.heartbeat_now(broker, group, request);
        let node_id = broker.node_id();
        async move {
            let (response, write) = outcome?;
            if let Some(write) = write {
                write
                    .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                    .await
                    .map_err(|_| CoordinatorError::CoordinatorNotAvailable)?;
            }
            response.map_err(CoordinatorError::Group)
        }
    }

    #[allow(clippy::type_complexity)]
    fn heartbeat_now(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: HeartbeatRequest,
    ) -> Result<
        (
            Result<HeartbeatResponse, ConsumerGroupError>,
            Option<ReplicatedWrite>,
        ),
        CoordinatorError,
    > {
        let partition = self
            .partition_of(group)
            .ok_or(CoordinatorError::NotCoordinator)?;
        let image = broker.image();
        let now = broker.now_ms() as u64;
        let config = self.config_of(&image, group);
        let mut groups = partition.lock();
        let hosted = groups
            .entry(group.to_owned())
            .or_insert_with(|| HostedGroup::new(ConsumerGroupEngine::new(group, config.clone())));
        if *hosted.engine.config() != config {
            hosted.engine.set_config(config);
        }
        let topics = ImageTopics(&image);
        let mut records = Vec::new();
        let mut timers = Vec::new();
        if hosted.engine.exists() && hosted.image_seen != image.applied_index() {
            let changed = hosted
                .engine
                .handle(Event::MetadataChanged { now_ms: now }, &topics);
            records.extend(changed.records);
            timers.extend(changed.timers);
        }
        hosted.image_seen = image.applied_index();
        let output = hosted.engine.handle(
            Event::Heartbeat {
                now_ms: now,
                request,
                fresh_member_id: uuid::Uuid::new_v4(),
            },
            &topics,
        );
        records.extend(output.records);
        timers.extend(output.timers);
        let response = output
            .response
            .unwrap_or(Err(ConsumerGroupError::InvalidRequest(
                "no answer to the heartbeat",
            )));
        let write = self.persist(broker, group, hosted, records);
        self.apply_timers(broker, group, hosted, timers);
        let hosted_write = hosted.last_write.clone();
        if !hosted.engine.exists() {
            groups.remove(group);
        }
        match write {
            Ok(_) => Ok((response, hosted_write)),
            Err(()) => Err(CoordinatorError::CoordinatorNotAvailable),
        }
    }

    /// Appends `records` (noted as the group's last write); on failure the
    /// engine, ahead of the log now, is rebuilt from what the log holds.
    fn persist(
        &self,
        broker: &Broker,
        group: &str,
        hosted: &mut HostedGroup,
        records: Vec<Record>,
    ) -> Result<Option<ReplicatedWrite>, ()> {
        if records.is_empty() {
            return Ok(None);
        }
        let entries = records
            .iter()
            .map(|record| consumer_group_records::encode(group, record))
            .collect();
        match broker.write_consumer_group(group, entries) {
            Ok(write) => {
                if write.is_some() {
                    hosted.last_write.clone_from(&write);
                }
                Ok(write)
            }
            Err(error) => {
                tracing::error!(group, %error, "cannot write consumer group records");
                hosted.disarm_all();
                hosted.engine = self.reload(broker, group);
                Err(())
            }
        }
    }

    /// `group` as the records in `__consumer_offsets` leave it.
    fn reload(&self, broker: &Broker, group: &str) -> ConsumerGroupEngine {
        let mut engine = ConsumerGroupEngine::new(group, self.config_of(&broker.image(), group));
        let count = self.partition_count.load(Ordering::Acquire);
        let index = partition_for(group, count);
        for (name, entries) in broker.offsets().consumer_group_records(index, count) {
            if name != group {
                continue;
            }
            for (key, value) in entries {
                if let Ok((_, record)) = consumer_group_records::decode(&key, Some(&value)) {
                    let _ = engine.replay(&record);
                }
            }
        }
        engine
    }

    fn execute(&self, broker: &Arc<Broker>, group: &str, hosted: &mut HostedGroup, output: Output) {
        let _ = self.persist(broker, group, hosted, output.records);
        self.apply_timers(broker, group, hosted, output.timers);
    }

    fn apply_timers(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        hosted: &mut HostedGroup,
        timers: Vec<TimerCommand>,
    ) {
        for timer in timers {
            match timer {
                TimerCommand::Schedule { key, at_ms } => {
                    let token = self.next_token.fetch_add(1, Ordering::Relaxed);
                    let delay = Duration::from_millis(at_ms.saturating_sub(broker.now_ms() as u64));
                    let broker_ref = Arc::downgrade(broker);
                    let (group, fired) = (group.to_owned(), key.clone());
                    let handle = tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        if let Some(broker) = broker_ref.upgrade() {
                            // The append may wait on the disk.
                            let _ = tokio::task::spawn_blocking(move || {
                                broker.consumer_groups().fire(&broker, &group, fired, token)
                            })
                            .await;
                        }
                    });
                    if let Some((_, previous)) = hosted.timers.insert(key, (token, handle)) {
                        previous.abort();
                    }
                }
                TimerCommand::Cancel { key } => {
                    if let Some((_, handle)) = hosted.timers.remove(&key) {
                        handle.abort();
                    }
                }
            }
        }
    }

    /// A timer armed by [`apply_timers`](Self::apply_timers) has fired.
    fn fire(&self, broker: &Arc<Broker>, group: &str, key: TimerKey, token: u64) {
        let Some(partition) = self.partition_of(group) else {
            return;
        };
        let image = broker.image();
        let mut groups = partition.lock();
        let Some(hosted) = groups.get_mut(group) else {
            return;
        };
        if hosted.timers.get(&key).map(|(t, _)| *t) == Some(token) {
            hosted.timers.remove(&key);
        }
        let output = hosted.engine.handle(
            Event::Timer {
                now_ms: broker.now_ms() as u64,
                key,
            },
            &ImageTopics(&image),
        );
        self.execute(broker, group, hosted, output);
    }

    /// Checks an OffsetCommit of a consumer group member; `None` when
    /// `group` is not a consumer group hosted here.
    pub fn validate_offset_commit(
        &self,
        group: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Option<Result<(), ConsumerGroupError>> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        let hosted = groups.get(group).filter(|h| h.engine.exists())?;
        Some(
            hosted
                .engine
                .validate_offset_commit(member_id, member_epoch),
        )
    }

    /// Checks an OffsetFetch naming a member; `None` when `group` is not a
    /// consumer group hosted here.
    pub fn validate_offset_fetch(
        &self,
        group: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Option<Result<(), ConsumerGroupError>> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        let hosted = groups.get(group).filter(|h| h.engine.exists())?;
        Some(hosted.engine.validate_offset_fetch(member_id, member_epoch))
    }

    /// DeleteGroups of a consumer group: refused while it has members;
    /// otherwise its records and offsets are tombstoned. Returns the write
    /// to wait on.
    pub fn delete(
        &self,
        broker: &Broker,
        group: &str,
    ) -> Result<Option<ReplicatedWrite>, CoordinatorError> {
        let partition = self
            .partition_of(group)
            .ok_or(CoordinatorError::NotCoordinator)?;
        let mut groups = partition.lock();
        let hosted = groups
            .get_mut(group)
            .filter(|h| h.engine.exists())
            .ok_or(ConsumerGroupError::GroupIdNotFound)?;
        let records = hosted.engine.delete()?;
        self.persist(broker, group, hosted, records)
            .map_err(|()| CoordinatorError::CoordinatorNotAvailable)?;
        let offsets = broker
            .delete_group(group, broker.now_ms())
            .map_err(|error| {
                tracing::error!(group, %error, "deleting a group's offsets failed");
                CoordinatorError::CoordinatorNotAvailable
            })?;
        if let Some(mut hosted) = groups.remove(group) {
            hosted.disarm_all();
        }
        Ok(offsets)
    }

    /// What ConsumerGroupDescribe shows of `group`, if hosted here.
    pub fn describe(&self, group: &str) -> Option<GroupDescription> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        let hosted = groups.get(group).filter(|h| h.engine.exists())?;
        Some(hosted.engine.describe())
    }

    /// Every consumer group hosted here, with its description.
    pub fn list(&self) -> Vec<GroupDescription> {
        let partitions: Vec<PartitionGroups> = self.partitions.read().values().cloned().collect();
        let mut listed = Vec::new();
        for partition in partitions {
            let groups = partition.lock();
            listed.extend(
                groups
                    .values()
                    .filter(|h| h.engine.exists())
                    .map(|h| h.engine.describe()),
            );
        }
        listed
    }
}

fn disarm(partition: &PartitionGroups) {
    for hosted in partition.lock().values_mut() {
        hosted.disarm_all();
    }
}
