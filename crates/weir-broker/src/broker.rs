//! The broker's shared state: settings, the metadata store, and the
//! partitions it hosts.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use weir_meta::{Applied, BrokerInfo, Command, MetaError, MetadataImage, TopicInfo};

use crate::config::BrokerConfig;
use crate::group::GroupSnapshot;
use crate::group_coordinator::GroupCoordinator;
use crate::metadata::{Metadata, MetadataError};
use crate::metrics::Metrics;
use crate::offsets::{OffsetChange, OffsetStore, OFFSETS_TOPIC};
use crate::partition::AppendError;
use crate::partition::{log_config, Partition};

/// Producer ids are taken from the metadata store in blocks of this size.
const PRODUCER_ID_BLOCK: i64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Controller(MetadataError),
    #[error("partition {topic}-{partition}: {source}")]
    Log {
        topic: String,
        partition: i32,
        #[source]
        source: weir_log::LogError,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<MetadataError> for BrokerError {
    fn from(error: MetadataError) -> Self {
        match error {
            // A refused command keeps its Kafka error.
            MetadataError::Rejected(error) => BrokerError::Meta(error),
            other => BrokerError::Controller(other),
        }
    }
}

pub struct Broker {
    config: BrokerConfig,
    cluster_id: String,
    meta: Metadata,
    /// Serializes changes to the metadata with the partitions they open.
    admin: Mutex<()>,
    partitions: RwLock<HashMap<String, Vec<Arc<Partition>>>>,
    producer_ids: Mutex<std::ops::Range<i64>>,
    metrics: Metrics,
    serving: AtomicBool,
    offsets: OffsetStore,
    groups: GroupCoordinator,
}

impl Broker {
    /// Opens the data directory: metadata, then every partition's log.
    pub fn open(config: BrokerConfig) -> Result<Arc<Self>, BrokerError> {
        let io = |path: &std::path::Path| {
            let path = path.display().to_string();
            move |source| BrokerError::Io { path, source }
        };
        std::fs::create_dir_all(&config.data_dir).map_err(io(&config.data_dir))?;
        let cluster_id = load_cluster_id(&config.data_dir)?;
        let controller_dir = config.data_dir.join("controller");
        let listener = std::net::TcpListener::bind(config.controller_listen).map_err(io(
            std::path::Path::new(&config.controller_listen.to_string()),
        ))?;
        let mut voters = config.controllers.clone();
        if voters.is_empty() {
            let addr = listener.local_addr().map_err(io(&controller_dir))?;
            voters.push((config.node_id as u64, addr));
        }
        let meta = Metadata::start(&controller_dir, config.node_id, listener, voters)?;
        meta.import_local_store(&config.data_dir.join("meta"))?;
        let me = BrokerInfo {
            id: config.node_id,
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
        };
        if meta.image().broker(config.node_id) != Some(&me) {
            meta.submit(Command::RegisterBroker(me))?;
        }
        let mut partitions = HashMap::new();
        for topic in meta.image().topics() {
            partitions.insert(topic.name.clone(), open_partitions(&config, topic, 0)?);
        }
        let offsets = match partitions.get(OFFSETS_TOPIC) {
            Some(offset_partitions) => {
                OffsetStore::load(offset_partitions).map_err(|source| BrokerError::Log {
                    topic: OFFSETS_TOPIC.to_owned(),
                    partition: -1,
                    source,
                })?
            }
            None => OffsetStore::default(),
        };
        let groups = GroupCoordinator::new(config.group_config(), offsets.group_metadata());
        Ok(Arc::new(Self {
            config,
            cluster_id,
            meta,
            admin: Mutex::new(()),
            partitions: RwLock::new(partitions),
            producer_ids: Mutex::new(0..0),
            metrics: Metrics::default(),
            serving: AtomicBool::new(false),
            offsets,
            groups,
        }))
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    pub fn groups(&self) -> &GroupCoordinator {
        &self.groups
    }

    /// The partition of `__consumer_offsets` that holds `group`, creating
    /// the topic on first use.
    pub fn offsets_partition(&self, group: &str) -> Result<Arc<Partition>, BrokerError> {
        let count = match self.partitions_of(OFFSETS_TOPIC) {
            Some(partitions) => partitions.len() as i32,
            None => {
                let configs = [
                    // Until compaction exists, nothing may expire offsets.
                    ("cleanup.policy", "compact"),
                    ("retention.ms", "-1"),
                    ("segment.bytes", "104857600"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
                let partitions = self.config.offsets_topic_num_partitions;
                match self.create_topic(OFFSETS_TOPIC, partitions, configs, false) {
                    Ok(topic) => topic.partitions.len() as i32,
                    Err(BrokerError::Meta(MetaError::TopicAlreadyExists(_))) => self
                        .partitions_of(OFFSETS_TOPIC)
                        .map_or(partitions, |p| p.len() as i32),
                    Err(error) => return Err(error),
                }
            }
        };
        let index = crate::offsets::records::partition_for(group, count);
        Ok(self
            .partition(OFFSETS_TOPIC, index)
            .expect("partitions of __consumer_offsets exist once created"))
    }

    /// Commits (or, with `None`, deletes) a group's offsets.
    pub fn commit_offsets(
        &self,
        group: &str,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        let partition = self.group_partition(group)?;
        self.offsets.commit(&partition, group, changes, now_ms)
    }

    /// Writes a group's metadata record.
    pub fn write_group(&self, group: &str, snapshot: &GroupSnapshot) -> Result<(), AppendError> {
        let partition = self.group_partition(group)?;
        self.offsets
            .write_group(&partition, group, Some(snapshot), now_ms())
    }

    /// Removes a group's offsets and metadata from `__consumer_offsets`.
    pub fn delete_group(&self, group: &str, now_ms: i64) -> Result<(), AppendError> {
        let partition = self.group_partition(group)?;
        self.offsets.delete_group(&partition, group, now_ms)
    }

    fn group_partition(&self, group: &str) -> Result<Arc<Partition>, AppendError> {
        self.offsets_partition(group).map_err(|error| {
            AppendError::Log(weir_log::LogError::Offline {
                dir: self.config.data_dir.join(OFFSETS_TOPIC),
                reason: error.to_string(),
            })
        })
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// True once the listener accepts connections, false again at shutdown.
    pub fn is_serving(&self) -> bool {
        self.serving.load(Ordering::Acquire)
    }

    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::Release);
    }

    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Runs `f` over the current metadata image.
    pub fn with_image<T>(&self, f: impl FnOnce(&MetadataImage) -> T) -> T {
        f(&self.meta.image())
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        let partitions = self.partitions.read();
        partitions
            .get(topic)?
            .get(usize::try_from(partition).ok()?)
            .cloned()
    }

    pub fn partitions_of(&self, topic: &str) -> Option<Vec<Arc<Partition>>> {
        self.partitions.read().get(topic).cloned()
    }

    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .values()
            .flat_map(|ps| ps.iter().cloned())
            .collect()
    }

    /// Creates a topic with every replica on this node. With
    /// `validate_only` nothing changes.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicInfo, BrokerError> {
        let command = Command::CreateTopic {
            name: name.to_owned(),
            id: uuid::Uuid::new_v4(),
            partitions,
            replicas: (0..partitions.max(0))
                .map(|_| vec![self.config.node_id])
                .collect(),
            configs,
            internal: name.starts_with("__"),
        };
        let _admin = self.admin.lock();
        if validate_only {
            let mut scratch = (*self.meta.image()).clone();
            scratch.apply(&command)?;
            return Ok(scratch.topic(name).cloned().expect("just created"));
        }
        self.meta.submit(command)?;
        let topic = self
            .meta
            .image()
            .topic(name)
            .cloned()
            .expect("just created");
        let opened = open_partitions(&self.config, &topic, 0)?;
        self.partitions.write().insert(name.to_owned(), opened);
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// Adds partitions to a topic, up to `total`.
    pub fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let _admin = self.admin.lock();
        let current = self
            .meta
            .image()
            .topic(name)
            .map_or(0, |t| t.partitions.len() as i32);
        let command = Command::CreatePartitions {
            name: name.to_owned(),
            new_replicas: (current..total.max(current))
                .map(|_| vec![self.config.node_id])
                .collect(),
        };
        if validate_only || total <= current {
            let mut scratch = (*self.meta.image()).clone();
            scratch.apply(&command)?;
            return Ok(());
        }
        self.meta.submit(command)?;
        let topic = self.meta.image().topic(name).cloned().expect("exists");
        let added = open_partitions(&self.config, &topic, current as usize)?;
        self.partitions
            .write()
            .entry(name.to_owned())
            .or_default()
            .extend(added);
        Ok(())
    }

    /// Sets and removes a topic's config overrides, then applies the
    /// result to its partitions at once. With `validate_only` nothing changes.
    pub fn alter_topic_configs(
        &self,
        name: &str,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let command = Command::AlterTopicConfigs {
            name: name.to_owned(),
            set,
            delete,
        };
        let _admin = self.admin.lock();
        if validate_only {
            return Ok(self.meta.image().validate(&command)?);
        }
        self.meta.submit(command)?;
        let overrides = self
            .meta
            .image()
            .topic(name)
            .map(|t| t.configs.clone())
            .unwrap_or_default();
        let config = log_config(&self.config, &overrides);
        for partition in self.partitions_of(name).unwrap_or_default() {
            partition
                .log
                .set_config(config.clone())
                .map_err(|source| BrokerError::Log {
                    topic: name.to_owned(),
                    partition: partition.index,
                    source,
                })?;
        }
        tracing::info!(topic = name, ?overrides, "altered topic configs");
        Ok(())
    }

    /// Deletes a topic and its data.
    pub fn delete_topic(&self, name: &str) -> Result<uuid::Uuid, BrokerError> {
        let admin = self.admin.lock();
        let id = self
            .meta
            .image()
            .topic(name)
            .map(|t| t.id)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_owned()))?;
        self.meta.submit(Command::DeleteTopic {
            name: name.to_owned(),
        })?;
        let removed = self.partitions.write().remove(name).unwrap_or_default();
        drop(admin);
        // Committed offsets of a deleted topic go with it.
        for (group, partitions) in self.offsets.commits_of_topic(name) {
            let changes = partitions
                .into_iter()
                .map(|partition| OffsetChange {
                    topic: name.to_owned(),
                    partition,
                    value: None,
                })
                .collect();
            if let Err(error) = self.commit_offsets(&group, changes, now_ms()) {
                tracing::warn!(group, topic = name, %error, "could not delete committed offsets");
            }
        }
        for partition in removed {
            let dir = partition.log.dir().to_owned();
            drop(partition);
            if let Err(error) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), %error, "could not remove deleted partition");
            }
        }
        tracing::info!(topic = name, "deleted topic");
        Ok(id)
    }

    /// A fresh producer id for an idempotent producer.
    pub fn allocate_producer_id(&self) -> Result<i64, BrokerError> {
        let mut ids = self.producer_ids.lock();
        if ids.is_empty() {
            let applied = self.meta.submit(Command::AllocateProducerIds {
                count: PRODUCER_ID_BLOCK,
            })?;
            if let Applied::ProducerIds { first, count } = applied {
                *ids = first..first + count;
            }
        }
        Ok(ids.next().expect("block just allocated"))
    }

    /// The controller quorum as this node sees it.
    pub fn controller_status(&self) -> weir_meta::ControllerStatus {
        self.meta.status()
    }

    /// Flushes and closes every log cleanly, then stops the controller.
    pub fn shutdown(&self) {
        self.close_partitions();
        self.meta.shutdown();
    }

    fn close_partitions(&self) {
        let partitions: Vec<Arc<Partition>> = self
            .partitions
            .write()
            .drain()
            .flat_map(|(_, ps)| ps)
            .collect();
        for partition in partitions {
            let name = format!("{}-{}", partition.topic, partition.index);
            if let Err(error) = partition.snapshot_producer_state() {
                tracing::warn!(partition = %name, %error, "producer state snapshot failed");
            }
            match Arc::try_unwrap(partition) {
                Ok(partition) => {
                    if let Err(error) = partition.log.close() {
                        tracing::error!(partition = %name, %error, "clean close failed");
                    }
                }
                Err(partition) => {
                    // Still referenced by a request: flush, skip the marker.
                    if let Err(error) = partition.log.flush() {
                        tracing::error!(partition = %name, %error, "flush failed");
                    }
                }
            }
        }
    }
}

fn open_partitions(
    config: &BrokerConfig,
    topic: &TopicInfo,
    from: usize,
) -> Result<Vec<Arc<Partition>>, BrokerError> {
    let log_config = log_config(config, &topic.configs);
    topic.partitions[from..]
        .iter()
        .map(|p| {
            Partition::open(
                &config.data_dir,
                &topic.name,
                topic.id,
                p.partition,
                log_config.clone(),
            )
            .map(Arc::new)
            .map_err(|source| BrokerError::Log {
                topic: topic.name.clone(),
                partition: p.partition,
                source,
            })
        })
        .collect()
}

/// The cluster id, made once and kept in the data directory. Kafka's are 16
/// random bytes in URL-safe base64 without padding.
fn load_cluster_id(data_dir: &std::path::Path) -> Result<String, BrokerError> {
    use base64::Engine;
    let path = data_dir.join("cluster-id");
    let io = |source| BrokerError::Io {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
        _ => {
            let id = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(uuid::Uuid::new_v4().as_bytes());
            std::fs::write(&path, &id).map_err(io)?;
            Ok(id)
        }
    }
}

/// Wall-clock milliseconds, for commit timestamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
