//! The coordinator of share groups (KIP-932): hosts a [`ShareGroupEngine`]
//! for every share group whose `__consumer_offsets` partition this node
//! leads, appends the records it emits (key types 9 to 14), answers a
//! heartbeat once the in-sync replicas hold them, and ends the sessions of
//! silent members.
//!
//! As for consumer groups, each `__consumer_offsets` partition has its own
//! mutex over its share groups, held while an event is applied and its
//! records appended, never across an await; a new leader replays the
//! records ([`take_over`](ShareGroupCoordinator::take_over)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use weir_meta::MetadataImage;

use crate::broker::Broker;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::groups::configs::{share_settings, ShareBrokerConfig};
use crate::groups::consumer::ImageTopics;
use crate::partition::ReplicatedWrite;
use crate::share::{
    ShareGroupConfig, ShareGroupEngine, ShareGroupError, ShareGroupState, ShareHeartbeat,
    ShareHeartbeatResponse, ShareOutput,
};
use weir_coord::consumer::TopicMetadata;
use weir_coord::records;
use weir_coord::records::offsets::partition_for;

struct HostedShareGroup {
    engine: ShareGroupEngine,
    /// Armed session timers by member, with the token that tells a firing
    /// timer it is current.
    sessions: HashMap<String, (u64, JoinHandle<()>)>,
    /// The metadata image the engine last saw (its applied index).
    image_seen: u64,
    /// The group's last write: an answer that writes nothing still waits
    /// for it.
    last_write: Option<ReplicatedWrite>,
}

impl HostedShareGroup {
    fn new(engine: ShareGroupEngine) -> Self {
        Self {
            engine,
            sessions: HashMap::new(),
            image_seen: 0,
            last_write: None,
        }
    }

    fn disarm_all(&mut self) {
        for (_, (_, handle)) in self.sessions.drain() {
            handle.abort();
        }
    }
}

type PartitionGroups = Arc<Mutex<HashMap<String, HostedShareGroup>>>;

/// Why a ShareGroupHeartbeat got no answer from the group itself, or the
/// group's refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareCoordinatorError {
    #[error(transparent)]
    Group(#[from] ShareGroupError),
    /// The id names a group of another type.
    #[error("Group {0} is not a share group.")]
    NotShareGroup(String),
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    #[error("the group's state could not be written to __consumer_offsets")]
    CoordinatorNotAvailable,
}

impl ShareCoordinatorError {
    pub fn code(&self) -> i16 {
        match self {
            Self::Group(error) => error.code(),
            Self::NotShareGroup(_) => 69, // GROUP_ID_NOT_FOUND, as Kafka
            Self::NotCoordinator => 16,
            Self::CoordinatorNotAvailable => 15,
        }
    }
}

/// A share group as ShareGroupDescribe and the operators' tools see it.
#[derive(Debug, Clone)]
pub struct ShareGroupDescription {
    pub state: ShareGroupState,
}

pub struct ShareGroupCoordinator {
    config: ShareBrokerConfig,
    partitions: RwLock<HashMap<i32, PartitionGroups>>,
    partition_count: AtomicI32,
    next_token: AtomicU64,
}

impl ShareGroupCoordinator {
    pub fn new(config: ShareBrokerConfig) -> Self {
        Self {
            config,
            partitions: RwLock::default(),
            partition_count: AtomicI32::new(0),
            next_token: AtomicU64::new(1),
        }
    }

    /// The membership settings of `group`: the broker's, with the group's
    /// own configs on top.
    fn config_of(&self, image: &MetadataImage, group: &str) -> ShareGroupConfig {
        let settings = share_settings(&self.config, image.group_configs(group))
            .or_else(|_| share_settings(&self.config, &Default::default()))
            .expect("the broker's own share settings are valid");
        ShareGroupConfig {
            heartbeat_interval_ms: settings.heartbeat_interval_ms,
            session_timeout_ms: settings.session_timeout_ms,
            max_size: settings.max_size,
        }
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

    /// This node now coordinates the share groups of `__consumer_offsets`
    /// partition `partition` (of `partition_count`), rebuilt from `records`.
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
            let mut engine = ShareGroupEngine::new(group.clone(), self.config_of(&image, &group));
            for (key, value) in entries {
                match records::share_group::decode(&key, Some(&value)) {
                    Ok((_, record)) => engine.replay(&record),
                    Err(error) => tracing::warn!(group, %error, "skipping a share group record"),
                }
            }
            if !engine.exists() {
                continue;
            }
            let mut hosted = HostedShareGroup::new(engine);
            let output = hosted.engine.on_loaded(now);
            let _ = self.execute(broker, &group, &mut hosted, output);
            groups.insert(group, hosted);
        }
    }

    /// Another node coordinates partition `partition` now.
    pub fn hand_over(&self, partition: i32) {
        if let Some(handed) = self.partitions.write().remove(&partition) {
            disarm(&handed);
        }
    }

    /// Whether `group` is a share group hosted here.
    pub fn hosts(&self, group: &str) -> bool {
        self.partition_of(group)
            .is_some_and(|p| p.lock().get(group).is_some_and(|h| h.engine.exists()))
    }

    /// The hosted share group `group`, if there is one.
    pub fn describe(&self, group: &str) -> Option<ShareGroupDescription> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        let hosted = groups.get(group).filter(|h| h.engine.exists())?;
        Some(ShareGroupDescription {
            state: hosted.engine.state().clone(),
        })
    }

    /// Deletes the empty share group `group` (DeleteGroups): writes the
    /// tombstones of its records; the write to await.
    pub fn delete(
        &self,
        broker: &Arc<Broker>,
        group: &str,
    ) -> Result<Option<ReplicatedWrite>, ShareCoordinatorError> {
        self.change(broker, group, ShareGroupEngine::delete)
    }

    /// The group's offsets were altered on `added` or deleted on `removed`:
    /// writes the topics where it may hold state; the write to await.
    pub fn state_topics_changed(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        added: Vec<TopicMetadata>,
        removed: &[String],
    ) -> Result<Option<ReplicatedWrite>, ShareCoordinatorError> {
        self.change(broker, group, |engine| {
            Ok(engine.state_topics_changed(added, removed))
        })
    }

    /// Applies `change` to the existing group `group` and writes what it
    /// produced; the write to await, if any. A group it deleted goes.
    fn change(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        change: impl FnOnce(&mut ShareGroupEngine) -> Result<ShareOutput, ShareGroupError>,
    ) -> Result<Option<ReplicatedWrite>, ShareCoordinatorError> {
        let partition = self
            .partition_of(group)
            .ok_or(ShareCoordinatorError::NotCoordinator)?;
        let mut groups = partition.lock();
        let hosted = groups
            .get_mut(group)
            .filter(|h| h.engine.exists())
            .ok_or(ShareGroupError::GroupIdNotFound)?;
        let output = change(&mut hosted.engine)?;
        if output.records.is_empty() {
            return Ok(None);
        }
        self.execute(broker, group, hosted, output)
            .map_err(|()| ShareCoordinatorError::CoordinatorNotAvailable)?;
        let write = hosted.last_write.clone();
        if !hosted.engine.exists() {
            if let Some(mut deleted) = groups.remove(group) {
                deleted.disarm_all();
            }
        }
        Ok(write)
    }

    /// Every share group hosted here, with whether it has members.
    pub fn list(&self) -> Vec<(String, bool)> {
        let partitions: Vec<PartitionGroups> = self.partitions.read().values().cloned().collect();
        let mut listed = Vec::new();
        for partition in partitions {
            for (group, hosted) in partition.lock().iter() {
                if hosted.engine.exists() {
                    listed.push((group.clone(), !hosted.engine.state().members.is_empty()));
                }
            }
        }
        listed.sort();
        listed
    }

    /// Applies one ShareGroupHeartbeat; the answer, once what it changed
    /// is replicated.
    pub fn heartbeat(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: ShareHeartbeat,
    ) -> impl std::future::Future<Output = Result<ShareHeartbeatResponse, ShareCoordinatorError>>
           + Send
           + 'static {
        let outcome = self.heartbeat_now(broker, group, request);
        let node_id = broker.node_id();
        async move {
            let (response, write) = outcome?;
            if let Some(write) = write {
                write
                    .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                    .await
                    .map_err(|_| ShareCoordinatorError::CoordinatorNotAvailable)?;
            }
            response.map_err(ShareCoordinatorError::Group)
        }
    }

    #[allow(clippy::type_complexity)]
    fn heartbeat_now(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: ShareHeartbeat,
    ) -> Result<
        (
            Result<ShareHeartbeatResponse, ShareGroupError>,
            Option<ReplicatedWrite>,
        ),
        ShareCoordinatorError,
    > {
        let partition = self
            .partition_of(group)
            .ok_or(ShareCoordinatorError::NotCoordinator)?;
        // A group id names one group, of one type.
        if broker.consumer_groups().hosts(group) || broker.groups().state(group).is_some() {
            return Err(ShareCoordinatorError::NotShareGroup(group.to_owned()));
        }
        let image = broker.image();
        let now = broker.now_ms() as u64;
        let config = self.config_of(&image, group);
        let mut groups = partition.lock();
        let hosted = groups
            .entry(group.to_owned())
            .or_insert_with(|| HostedShareGroup::new(ShareGroupEngine::new(group, config.clone())));
        hosted.engine.set_config(config);
        let topics = ImageTopics(&image);
        let mut output = ShareOutput::default();
        if hosted.engine.exists() && hosted.image_seen != image.applied_index() {
            output = hosted.engine.metadata_changed(&topics);
        }
        hosted.image_seen = image.applied_index();
        let (response, produced) = hosted.engine.heartbeat(now, &request, &topics);
        merge(&mut output, produced);
        let written = self.execute(broker, group, hosted, output);
        let last_write = hosted.last_write.clone();
        if !hosted.engine.exists() {
            groups.remove(group);
        }
        match written {
            Ok(()) => Ok((response, last_write)),
            Err(()) => Err(ShareCoordinatorError::CoordinatorNotAvailable),
        }
    }

    /// Writes what an event produced and arms its session timers.
    fn execute(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        hosted: &mut HostedShareGroup,
        output: ShareOutput,
    ) -> Result<(), ()> {
        if !output.records.is_empty() {
            let entries = output
                .records
                .iter()
                .map(|record| records::share_group::encode(group, record))
                .collect();
            match broker.write_consumer_group(group, entries) {
                Ok(write) => {
                    if write.is_some() {
                        hosted.last_write = write;
                    }
                }
                Err(error) => {
                    tracing::error!(group, %error, "cannot write share group records");
                    hosted.disarm_all();
                    hosted.engine = self.reload(broker, group);
                    return Err(());
                }
            }
        }
        for (member, at_ms) in output.sessions {
            self.arm_session(broker, group, hosted, member, at_ms);
        }
        // The records an ended member acquired stay with it until its share
        // session closes (its last acknowledgements may still come) or their
        // locks expire, as in Kafka: the partitions' leaders are elsewhere.
        for member in output.ended {
            if let Some((_, handle)) = hosted.sessions.remove(&member) {
                handle.abort();
            }
        }
        Ok(())
    }

    fn arm_session(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        hosted: &mut HostedShareGroup,
        member: String,
        at_ms: u64,
    ) {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let delay = Duration::from_millis(at_ms.saturating_sub(broker.now_ms() as u64));
        let broker_ref = Arc::downgrade(broker);
        let (group, fired) = (group.to_owned(), member.clone());
        let handle = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(broker) = broker_ref.upgrade() {
                // The append may wait on the disk.
                let _ = tokio::task::spawn_blocking(move || {
                    broker
                        .share_groups()
                        .session_ended(&broker, &group, &fired, token)
                })
                .await;
            }
        });
        if let Some((_, previous)) = hosted.sessions.insert(member, (token, handle)) {
            previous.abort();
        }
    }

    fn session_ended(&self, broker: &Arc<Broker>, group: &str, member: &str, token: u64) {
        let Some(partition) = self.partition_of(group) else {
            return;
        };
        let image = broker.image();
        let mut groups = partition.lock();
        let Some(hosted) = groups.get_mut(group) else {
            return;
        };
        if hosted.sessions.get(member).map(|(t, _)| *t) != Some(token) {
            return;
        }
        hosted.sessions.remove(member);
        let output =
            hosted
                .engine
                .session_expired(broker.now_ms() as u64, member, &ImageTopics(&image));
        if !output.ended.is_empty() {
            tracing::info!(
                group,
                member,
                "removed a share group member whose session ended"
            );
        }
        let _ = self.execute(broker, group, hosted, output);
    }

    /// `group` as the records in `__consumer_offsets` leave it.
    fn reload(&self, broker: &Broker, group: &str) -> ShareGroupEngine {
        let mut engine = ShareGroupEngine::new(group, self.config_of(&broker.image(), group));
        let count = self.partition_count.load(Ordering::Acquire);
        let index = partition_for(group, count);
        for (name, entries) in broker.offsets().share_group_records(index) {
            if name != group {
                continue;
            }
            for (key, value) in entries {
                if let Ok((_, record)) = records::share_group::decode(&key, Some(&value)) {
                    engine.replay(&record);
                }
            }
        }
        engine
    }
}

fn disarm(partition: &PartitionGroups) {
    for hosted in partition.lock().values_mut() {
        hosted.disarm_all();
    }
}

fn merge(into: &mut ShareOutput, from: ShareOutput) {
    into.records.extend(from.records);
    into.sessions.extend(from.sessions);
    into.ended.extend(from.ended);
}
