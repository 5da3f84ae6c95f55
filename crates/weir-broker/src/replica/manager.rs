//! The partitions this node hosts, kept in step with the metadata image:
//! a replica assigned here is opened, a topic deleted (or recreated under a
//! new id) loses its data, config overrides and changed broker defaults
//! (dynamic broker configs) are applied live, and each
//! partition learns its leader, leader epoch and ISR.
//!
//! Every node runs [`ReplicaManager::reconcile`] after each image change,
//! so a change committed through any node reaches the data of all of them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use weir_log::storage::Storage;
use weir_log::{Clock, Log, LogError};

use crate::partition::high_watermarks::HighWatermarks;
use crate::replica::directories::LogDirs;

use parking_lot::{Mutex, RwLock};
use weir_meta::topic_config::ThrottledReplicas;
use weir_meta::{MetadataImage, PartitionInfo, TopicInfo};

use crate::config::topic::log_config;
use crate::config::BrokerConfig;
use crate::partition::{Leading, LogEnv, Partition, ReplicaState};
use crate::quotas::rate::QuotaWindows;
use crate::quotas::ReplicationQuota;
use crate::replica::{Follow, ReplicaFetchers};

/// Why a partition cannot be served here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotServed {
    #[error("this topic or partition does not exist")]
    UnknownTopicOrPartition,
    #[error("this broker is not the partition's leader")]
    NotLeader,
    #[error("the partition has no leader at the moment")]
    LeaderNotAvailable,
}

impl NotServed {
    /// Kafka's error code.
    pub fn code(self) -> i16 {
        match self {
            NotServed::UnknownTopicOrPartition => 3,
            NotServed::LeaderNotAvailable => 5,
            NotServed::NotLeader => 6,
        }
    }
}

/// A topic with at least one replica here.
struct HostedTopic {
    id: uuid::Uuid,
    /// The config overrides the logs were last configured with.
    overrides: BTreeMap<String, String>,
    /// The broker settings, for the defaults, they were configured with.
    defaults: Arc<BrokerConfig>,
    partitions: BTreeMap<i32, Arc<Partition>>,
}

/// What one [`ReplicaManager::reconcile`] changed.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Topics whose data was removed here because the image no longer has
    /// them (or has another topic of the same name).
    pub removed_topics: Vec<String>,
    /// Partitions this node became leader of.
    pub led: Vec<(String, i32)>,
    /// Partitions this node stopped leading.
    pub unled: Vec<(String, i32)>,
}

pub struct ReplicaManager {
    node_id: i32,
    fetchers: ReplicaFetchers,
    topics: RwLock<HashMap<String, HostedTopic>>,
    /// One reconciliation at a time (it opens and deletes directories),
    /// and the applied index of the image it last followed: an older image
    /// read before the lock was taken must not reopen what a newer one
    /// deleted.
    reconciling: Mutex<u64>,
    /// The file system of every partition log, within `log.max.open.files`
    /// descriptors, and the broker's clock.
    env: LogEnv,
    high_watermarks: HighWatermarks,
    log_dirs: LogDirs,
    /// `leader.replication.throttled.rate`, measured over the throttled
    /// replicas' bytes sent to followers.
    leader_quota: ReplicationQuota,
    /// `follower.replication.throttled.rate`, shared with the fetchers.
    follower_quota: Arc<ReplicationQuota>,
    /// `replica.alter.log.dirs.io.max.bytes.per.second`, measured over the
    /// bytes copied by moves to other log directories.
    log_dir_move_quota: ReplicationQuota,
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        storage: Arc<dyn Storage>,
        data_dir: &Path,
        log_dirs: LogDirs,
        clock: Arc<dyn Clock>,
        replication_quota_windows: QuotaWindows,
        leaders: crate::replica::LeaderSources,
    ) -> Self {
        let follower_quota = Arc::new(ReplicationQuota::new(
            replication_quota_windows,
            clock.clone(),
        ));
        let on_failure = log_dirs.failure_listener();
        let dir_health = log_dirs.health();
        Self {
            high_watermarks: HighWatermarks::load(storage.clone(), data_dir),
            log_dirs,
            leader_quota: ReplicationQuota::new(replication_quota_windows, clock.clone()),
            log_dir_move_quota: ReplicationQuota::new(replication_quota_windows, clock.clone()),
            fetchers: ReplicaFetchers::new(node_id, follower_quota.clone(), leaders, dir_health),
            follower_quota,
            env: LogEnv {
                storage,
                clock,
                on_failure: Some(on_failure),
            },
            node_id,
            topics: RwLock::new(HashMap::new()),
            reconciling: Mutex::new(0),
        }
    }

    /// The throttle of what this broker sends followers as a leader.
    pub(crate) fn leader_quota(&self) -> &ReplicationQuota {
        &self.leader_quota
    }

    /// The throttle of the copies moves to other log directories make.
    pub(crate) fn log_dir_move_quota(&self) -> &ReplicationQuota {
        &self.log_dir_move_quota
    }

    /// Takes offline every replica in a failed log directory, so that
    /// none serves what a directory in doubt holds. Returns every replica
    /// in a failed directory, as (topic, partition).
    pub fn take_failed_dirs_offline(&self) -> Vec<(String, i32)> {
        let failed = self.log_dirs.failed();
        if failed.is_empty() {
            return Vec::new();
        }
        let mut offline = Vec::new();
        let mut taken = 0;
        for partition in self.all() {
            let dir = partition.log().dir().to_owned();
            let Some(index) = self.log_dirs.index_holding(&dir) else {
                continue;
            };
            if let Some((_, why)) = failed.iter().find(|(i, _)| *i == index) {
                if !partition.is_offline() {
                    partition.take_offline(why);
                    taken += 1;
                }
                offline.push((partition.topic.clone(), partition.index));
            }
        }
        if taken > 0 {
            tracing::warn!(
                replicas = taken,
                "replicas taken offline with their failed log directory"
            );
        }
        offline
    }

    /// Every replica in a full log directory, as (topic, partition): they
    /// cannot take writes, so they leave their ISRs and hand over their
    /// leaderships until space is freed.
    pub fn replicas_in_full_dirs(&self) -> Vec<(String, i32)> {
        if self.log_dirs.full().is_empty() {
            return Vec::new();
        }
        self.all()
            .into_iter()
            .filter(|partition| self.log_dirs.is_full(partition.log().dir()))
            .map(|partition| (partition.topic.clone(), partition.index))
            .collect()
    }

    /// The partition, if a replica of it is here.
    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.topics
            .read()
            .get(topic)?
            .partitions
            .get(&partition)
            .cloned()
    }

    /// The partition, if this node is its leader.
    pub fn leader(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, NotServed> {
        let topics = self.topics.read();
        self.leader_in(image, topics.get(topic), topic, partition)
    }

    /// [`leader`](Self::leader) of several partitions of one topic, with
    /// one look at the hosted topics.
    pub fn leaders(
        &self,
        image: &MetadataImage,
        topic: &str,
        partitions: impl Iterator<Item = i32>,
    ) -> Vec<Result<Arc<Partition>, NotServed>> {
        let topics = self.topics.read();
        let hosted = topics.get(topic);
        partitions
            .map(|partition| self.leader_in(image, hosted, topic, partition))
            .collect()
    }

    /// The partitions with a replica here, leader or follower, of those
    /// asked for: what a consumer may read from since KIP-392 (fetch from
    /// follower); the reason for the others, as [`leaders`](Self::leaders)
    /// gives it.
    pub fn readable(
        &self,
        image: &MetadataImage,
        topic: &str,
        partitions: impl Iterator<Item = i32>,
    ) -> Vec<Result<Arc<Partition>, NotServed>> {
        let topics = self.topics.read();
        let hosted = topics.get(topic);
        partitions
            .map(
                |partition| match hosted.and_then(|t| t.partitions.get(&partition)) {
                    Some(replica) => Ok(replica.clone()),
                    None => self.leader_in(image, None, topic, partition),
                },
            )
            .collect()
    }

    fn leader_in(
        &self,
        image: &MetadataImage,
        hosted: Option<&HostedTopic>,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, NotServed> {
        if let Some(hosted) = hosted.and_then(|t| t.partitions.get(&partition)) {
            let state = hosted.replica_state();
            if state.leader == self.node_id {
                return Ok(hosted.clone());
            }
            if state.leader < 0 {
                return Err(NotServed::LeaderNotAvailable);
            }
            return Err(NotServed::NotLeader);
        }
        match image.topic(topic).and_then(|t| t.partition(partition)) {
            None => Err(NotServed::UnknownTopicOrPartition),
            Some(p) if p.leader < 0 => Err(NotServed::LeaderNotAvailable),
            // Led here by the image, but not opened yet: a moment away.
            Some(p) if p.leader == self.node_id => Err(NotServed::LeaderNotAvailable),
            Some(_) => Err(NotServed::NotLeader),
        }
    }

    /// The replicas of `topic` hosted here, by partition.
    pub fn of_topic(&self, topic: &str) -> Vec<Arc<Partition>> {
        self.topics
            .read()
            .get(topic)
            .map(|t| t.partitions.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Writes the high watermark of every hosted partition to the data
    /// directory's checkpoint, if one moved since the last time.
    pub fn checkpoint_high_watermarks(&self) -> Result<(), LogError> {
        let entries = self
            .all()
            .iter()
            .map(|p| (p.topic.clone(), p.index, p.high_watermark()))
            .collect();
        self.high_watermarks.write(entries)
    }

    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.topics
            .read()
            .values()
            .flat_map(|t| t.partitions.values().cloned())
            .collect()
    }

    /// Brings the hosted replicas in line with `image`. Failures to open
    /// or delete a partition are logged and retried at the next change.
    pub fn reconcile(&self, config: &Arc<BrokerConfig>, image: &MetadataImage) -> Reconciled {
        let mut followed = self.reconciling.lock();
        let mut outcome = Reconciled::default();
        if image.applied_index() < *followed {
            return outcome;
        }
        *followed = image.applied_index();
        self.leader_quota
            .set_limit(config.leader_replication_throttled_rate);
        self.follower_quota
            .set_limit(config.follower_replication_throttled_rate);
        self.log_dir_move_quota
            .set_limit(config.replica_alter_log_dirs_io_max_bytes_per_second);
        let gone: Vec<(String, Vec<Arc<Partition>>)> = {
            let mut topics = self.topics.write();
            let stale: Vec<String> = topics
                .iter()
                .filter(|(name, hosted)| image.topic(name).is_none_or(|t| t.id != hosted.id))
                .map(|(name, _)| name.clone())
                .collect();
            stale
                .into_iter()
                .filter_map(|name| {
                    let hosted = topics.remove(&name)?;
                    Some((name, hosted.partitions.into_values().collect()))
                })
                .collect()
        };
        for (name, partitions) in gone {
            self.remove_data(partitions);
            tracing::info!(topic = name, "removed the data of a deleted topic");
            outcome.removed_topics.push(name);
        }
        let mut opened = self.open_assigned(config, image);
        let mut follows = Vec::new();
        for topic in image.topics() {
            self.reconcile_topic(
                config,
                image,
                topic,
                &mut opened,
                &mut outcome,
                &mut follows,
            );
        }
        self.fetchers.follow(follows);
        outcome
    }

    /// Opens the logs of every replica `image` assigns here that is not
    /// open yet, with one sync for all of them (see
    /// [`Log::sync_opened`]): a restart with thousands of partitions must
    /// not cost thousands of fsyncs. Failures are logged; the partition is
    /// tried again at the next change.
    fn open_assigned(
        &self,
        config: &Arc<BrokerConfig>,
        image: &MetadataImage,
    ) -> HashMap<(String, i32), Log> {
        // Picked under the lock, opened after it: a writer waiting on it
        // would hold up every request's look-up for as long as the opens.
        let mut wanted = Vec::new();
        {
            let topics = self.topics.read();
            for topic in image.topics() {
                let hosted = topics.get(&topic.name).filter(|h| h.id == topic.id);
                let mut topic_config = None;
                for p in topic.partitions.iter() {
                    if !p.replicas.contains(&self.node_id)
                        || hosted.is_some_and(|h| h.partitions.contains_key(&p.partition))
                    {
                        continue;
                    }
                    let topic_config = topic_config
                        .get_or_insert_with(|| log_config(config, &topic.configs))
                        .clone();
                    wanted.push((topic.name.clone(), p.partition, topic_config));
                }
            }
        }
        let mut unsynced = Vec::new();
        let mut keys = Vec::new();
        for (topic, partition, topic_config) in wanted {
            let dir = Partition::dir_in(&self.log_dirs.place(&topic, partition), &topic, partition);
            match Log::open_unsynced(
                dir,
                topic_config,
                self.env.storage.clone(),
                self.env.clock.clone(),
            ) {
                Ok(log) => {
                    unsynced.push(log);
                    keys.push((topic, partition));
                }
                Err(error) => {
                    tracing::error!(topic, partition, %error, "cannot open partition");
                }
            }
        }
        let mut opened = HashMap::new();
        for ((topic, partition), log) in keys.into_iter().zip(Log::sync_opened(unsynced)) {
            match log {
                Ok(log) => {
                    opened.insert((topic, partition), log);
                }
                Err(error) => {
                    tracing::error!(topic, partition, %error, "cannot open partition");
                }
            }
        }
        opened
    }

    fn reconcile_topic(
        &self,
        config: &Arc<BrokerConfig>,
        image: &MetadataImage,
        topic: &TopicInfo,
        logs: &mut HashMap<(String, i32), Log>,
        outcome: &mut Reconciled,
        follows: &mut Vec<Follow>,
    ) {
        let assigned: Vec<_> = topic
            .partitions
            .iter()
            .filter(|p| p.replicas.contains(&self.node_id))
            .collect();
        let (mut opened, overrides_changed, unassigned) = {
            let topics = self.topics.read();
            let hosted = topics.get(&topic.name);
            let opened: BTreeMap<i32, Arc<Partition>> =
                hosted.map(|h| h.partitions.clone()).unwrap_or_default();
            // A topic without an override follows the broker's default.
            let changed = hosted
                .is_some_and(|h| h.overrides != topic.configs || !Arc::ptr_eq(&h.defaults, config));
            let unassigned: Vec<i32> = opened
                .keys()
                .filter(|i| !assigned.iter().any(|p| p.partition == **i))
                .copied()
                .collect();
            (opened, changed, unassigned)
        };
        if assigned.is_empty() && opened.is_empty() {
            return;
        }
        let log_config = log_config(config, &topic.configs);
        if overrides_changed {
            for partition in opened.values() {
                if let Err(error) = partition.set_log_config(log_config.clone()) {
                    tracing::warn!(topic = topic.name, partition = partition.index, %error, "cannot apply altered configs");
                }
            }
        }
        let mut removed = Vec::new();
        for index in unassigned {
            removed.extend(opened.remove(&index));
        }
        let throttled = |name: &str| {
            topic
                .configs
                .get(name)
                .and_then(|value| ThrottledReplicas::parse(value))
                .unwrap_or_default()
        };
        let leader_throttled = throttled("leader.replication.throttled.replicas");
        let follower_throttled = throttled("follower.replication.throttled.replicas");
        let tiered = config.remote_log_storage_system_enable
            && topic
                .configs
                .get("remote.storage.enable")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let min_insync_replicas = topic
            .configs
            .get("min.insync.replicas")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(config.min_insync_replicas);
        for p in assigned {
            let partition = match opened.get(&p.partition) {
                Some(partition) => partition.clone(),
                None => match logs.remove(&(topic.name.clone(), p.partition)).map(|log| {
                    Partition::with_log(
                        &self.env,
                        log,
                        &topic.name,
                        topic.id,
                        p.partition,
                        self.high_watermarks.loaded(&topic.name, p.partition),
                    )
                }) {
                    // Its open failed and was logged.
                    None => continue,
                    Some(Ok(partition)) => {
                        let partition = Arc::new(partition);
                        opened.insert(p.partition, partition.clone());
                        partition
                    }
                    Some(Err(error)) => {
                        tracing::error!(topic = topic.name, partition = p.partition, %error, "cannot open partition");
                        continue;
                    }
                },
            };
            partition.set_replication_throttled(
                leader_throttled.contains(p.partition, self.node_id),
                follower_throttled.contains(p.partition, self.node_id),
            );
            partition
                .remote()
                .set(tiered, image.remote_log(topic.id, p.partition));
            partition.set_mirror(image.mirror_feeding(topic.id).map(|m| m.name.as_str()));
            if let Some(cut) = image
                .mirror_topic(topic.id)
                .and_then(|(_, mirror_topic)| mirror_topic.cut(p.partition))
            {
                if let Err(error) = partition.apply_mirror_cut(cut) {
                    tracing::error!(topic = topic.name, partition = p.partition, %error, "cannot cut a mirror partition");
                }
            }
            let (before, state) = take_leadership(
                self.node_id,
                &partition,
                p,
                min_insync_replicas,
                self.env.clock.now_ms(),
            );
            if p.leader != self.node_id {
                if let Some(leader) = image.broker(p.leader).filter(|_| p.leader >= 0) {
                    follows.push(Follow {
                        partition: partition.clone(),
                        leader: p.leader,
                        leader_addr: format!("{}:{}", leader.host, leader.port),
                        leader_epoch: p.leader_epoch,
                    });
                }
            }
            if before != state {
                if state.leader == self.node_id && before.leader != self.node_id {
                    outcome.led.push((topic.name.clone(), p.partition));
                }
                if state.leader != self.node_id && before.leader == self.node_id {
                    outcome.unled.push((topic.name.clone(), p.partition));
                }
                tracing::debug!(
                    topic = topic.name,
                    partition = p.partition,
                    leader = state.leader,
                    epoch = state.leader_epoch,
                    "partition state"
                );
            }
        }
        self.topics.write().insert(
            topic.name.clone(),
            HostedTopic {
                id: topic.id,
                overrides: topic.configs.clone(),
                defaults: config.clone(),
                partitions: opened,
            },
        );
        self.remove_data(removed);
    }

    /// The log directories.
    pub fn log_dirs(&self) -> &LogDirs {
        &self.log_dirs
    }

    /// Runs `f` if `partition` is still the replica hosted here, with
    /// reconciliation (which deletes and reopens partitions) held off
    /// until it returns. Waits on a lock held across file I/O: call it on
    /// the blocking pool.
    pub(crate) fn while_hosted<T>(
        &self,
        partition: &Arc<Partition>,
        f: impl FnOnce() -> T,
    ) -> Option<T> {
        let _reconciling = self.reconciling.lock();
        let hosted = self.get(&partition.topic, partition.index)?;
        Arc::ptr_eq(&hosted, partition).then(f)
    }

    /// Deletes the directories of partitions no longer hosted here.
    fn remove_data(&self, partitions: Vec<Arc<Partition>>) {
        for partition in partitions {
            let dir = partition.log().dir().to_owned();
            let (topic, index) = (partition.topic.clone(), partition.index);
            drop(partition);
            match self.env.storage.remove_dir_all(&dir) {
                Ok(()) => self.log_dirs.forget(&topic, index),
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "could not remove partition data")
                }
            }
        }
    }

    /// Takes every partition out, for a clean shutdown.
    pub fn drain(&self) -> Vec<Arc<Partition>> {
        self.fetchers.stop();
        self.topics
            .write()
            .drain()
            .flat_map(|(_, t)| t.partitions.into_values())
            .collect()
    }
}

/// Makes `partition` lead or follow as the metadata's `p` says, as
/// `node_id`, and takes its new replica state. Returns the states before
/// and after.
pub(crate) fn take_leadership(
    node_id: i32,
    partition: &Partition,
    p: &PartitionInfo,
    min_insync_replicas: usize,
    now_ms: i64,
) -> (ReplicaState, ReplicaState) {
    let state = ReplicaState {
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        min_insync_replicas,
    };
    let leading = (p.leader == node_id).then_some(Leading {
        me: node_id,
        replicas: &p.replicas,
        isr: &p.isr,
        partition_epoch: p.partition_epoch,
        now_ms,
    });
    let before = partition.take_leadership(state, leading);
    (before, state)
}
