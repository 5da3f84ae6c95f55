//! The broker's shared state: settings, the metadata store, and the
//! partitions it hosts.

pub mod clean_shutdown;
pub mod log_cleaner;
pub mod maintenance;
pub mod mirroring;
pub(crate) mod producer_ids;
pub mod quorum;
mod share_host;
pub mod tiering;

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use weir_log::Clock;
use weir_meta::{
    Applied, BrokerInfo, Command, Election, ElectionOutcome, MetaError, MetadataImage,
    QuotaAlteration, TopicCreation, TopicInfo,
};

use crate::broker::producer_ids::ProducerIdBlocks;
use crate::broker::quorum::{Metadata, MetadataError};
use crate::config::BrokerConfig;
use crate::coordinator::{CoordinatorError, Environment};
use crate::fetch_sessions::FetchSessionCache;
use crate::groups::classic::GroupCoordinator;
use crate::groups::consumer::ConsumerGroupCoordinator;
use crate::groups::offsets::{OffsetChange, OffsetStore, OFFSETS_TOPIC};
use crate::groups::share::ShareGroupCoordinator;
use crate::groups::GroupCoordinators;
use crate::metrics::Metrics;
use crate::partition::{Partition, ReplicatedWrite};
use crate::quotas::client::{ClientQuotaManager, QuotaWindows};
use crate::replica::manager::{NotServed, ReplicaManager};
use crate::security::tls::TlsServer;
use crate::share::state_coordinator::SHARE_STATE_TOPIC;
use crate::txn::{TxnCoordinator, TRANSACTION_STATE_TOPIC};
use weir_meta::Authorizer;

/// How long a change forwarded to the controller quorum by a request with
/// no timeout of its own (AlterConfigs, IncrementalAlterConfigs) may wait
/// for it: Kafka's `request.timeout.ms` default.
const CONTROLLER_CHANGE_TIMEOUT_MS: i32 = 30_000;

/// The remote tier `weir.remote.storage.url` names, with
/// `remote.log.storage.system.enable`; its index cache is in the data
/// directory.
fn open_remote_tier(
    config: &BrokerConfig,
    clock: Arc<dyn Clock>,
) -> Result<Option<Arc<crate::remote::RemoteReader>>, BrokerError> {
    if !config.remote_log_storage_system_enable {
        return Ok(None);
    }
    let Some(url) = &config.remote_storage_url else {
        return Err(crate::remote::RemoteError::NoUrl.into());
    };
    let store = crate::remote::RemoteStore::open(
        url,
        config.remote_storage_s3_endpoint.as_deref(),
        config.remote_storage_s3_region.as_deref(),
    )?;
    tracing::info!(url, "tiered storage on");
    Ok(Some(Arc::new(crate::remote::RemoteReader::new(
        store,
        config.startup.data_dir.join("remote-index-cache"),
        config.remote_log_index_cache_size_bytes,
        clock,
    ))))
}

/// The instant `timeout_ms` from now (now for 0 or less).
fn deadline_after(timeout_ms: i32) -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms.max(0) as u64)
}

/// What is left until `deadline`, in milliseconds (0 once it has passed).
fn remaining_ms(deadline: std::time::Instant) -> i32 {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    i32::try_from(left.as_millis()).unwrap_or(i32::MAX)
}

/// The failure of a quorum call once more, for each change it held back.
fn again(error: &MetadataError) -> BrokerError {
    BrokerError::Controller(match error {
        MetadataError::TimedOut(timeout) => MetadataError::TimedOut(*timeout),
        other => MetadataError::Unavailable(other.to_string()),
    })
}

/// A topic to create.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    /// `None`: `default.replication.factor`.
    pub replication_factor: Option<i32>,
    /// One replica list per partition; `None`: placed over the live
    /// brokers.
    pub assignment: Option<Vec<Vec<i32>>>,
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    /// `partitions` partitions, placed with the default replication
    /// factor, with no config overrides.
    pub fn with_defaults(name: &str, partitions: i32) -> Self {
        Self {
            name: name.to_owned(),
            partitions,
            replication_factor: None,
            assignment: None,
            configs: BTreeMap::new(),
        }
    }
}

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
    #[error(transparent)]
    LogDirs(#[from] crate::replica::directories::LogDirsError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The controller listener's address cannot be bound.
    #[error("cannot listen on {addr} (the controller listener, --controller-listen): {source}")]
    ControllerListen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(#[from] crate::security::tls::TlsError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    DirLock(#[from] weir_meta::DirLockError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
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
    /// This broker, for tasks it starts from `&self`.
    me: std::sync::Weak<Broker>,
    clock: Arc<dyn Clock>,
    /// The data directory and the log directories, locked until shutdown.
    dir_locks: Mutex<Vec<weir_meta::DirLock>>,
    /// This process's id in its broker registration, recorded at a clean
    /// stop (see [`crate::broker::clean_shutdown`]).
    incarnation: uuid::Uuid,
    /// The settings as the broker started. Those marked dynamic may have
    /// changed since: [`config`](Self::config) has the settings in force.
    static_config: BrokerConfig,
    /// The settings in force, rebuilt when the dynamic broker configs in
    /// the metadata change.
    current: RwLock<CurrentConfig>,
    cluster_id: String,
    meta: Metadata,
    /// Topics this node is auto-creating, so a burst of Metadata requests
    /// sends one creation each.
    auto_creating: Mutex<HashSet<String>>,
    /// How far the mirror partitions this broker leads got.
    mirror_progress: crate::mirror::MirrorProgress,
    /// Applies one image at a time, so coordinators are taken over and
    /// handed over in the order of the images that moved them.
    reconciling: Mutex<()>,
    /// The applied index of the last image the replicas here were brought
    /// in line with.
    reconciled: tokio::sync::watch::Sender<u64>,
    replicas: ReplicaManager,
    /// The heartbeat and image-following tasks.
    membership: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    producer_ids: Mutex<ProducerIdBlocks>,
    metrics: Metrics,
    serving: AtomicBool,
    /// What the coordinators may know of this broker.
    coordinator_env: Environment,
    group_coordinators: Arc<GroupCoordinators>,
    share_partitions: crate::share::leader::SharePartitions,
    share_state: crate::share::state_coordinator::ShareStateStore,
    txns: Arc<TxnCoordinator>,
    fetch_sessions: FetchSessionCache,
    client_quotas: ClientQuotaManager,
    /// The TLS setup of the SSL and SASL_SSL listeners, if there are any.
    tls: Option<Arc<TlsServer>>,
    /// `queued.max.request.bytes`: what requests being read or handled may
    /// hold, over every listener, shared fairly among them.
    request_memory: Arc<crate::net::RequestMemory>,
    /// `max.connections` and `max.connections.per.ip`, over every listener.
    connection_quotas: Arc<crate::net::ConnectionQuotas>,
    /// The authorizer over the ACLs of the image at the given applied
    /// index: rebuilt when the image changes.
    authorizer: RwLock<(u64, Option<Arc<Authorizer>>)>,
    /// How this broker connects to the others' inter-broker listener.
    inter_broker_security: weir_client::SecurityConfig,
    /// Checks OAUTHBEARER tokens, when that mechanism is enabled.
    oauth: RwLock<Option<Arc<weir_auth::JwtValidator>>>,
    /// The modification time and length of the JWKS file it was read from.
    /// When to read the OAUTHBEARER keys again.
    jwks: Option<crate::security::jwks::JwksRefresh>,
    /// SASL/PLAIN and HTTP Basic passwords: bounded PBKDF2, and the ones
    /// that matched remembered.
    password_checks: crate::security::password_checks::PasswordChecks,
    /// The remote tier, with `remote.log.storage.system.enable`.
    remote: Option<Arc<crate::remote::RemoteReader>>,
}

/// The settings in force and what they were built from.
struct CurrentConfig {
    config: Arc<BrokerConfig>,
    /// The applied index of the image they were built from: an older image
    /// never replaces them.
    image_index: u64,
    /// The dynamic configs of that image as stored (cluster-wide default,
    /// this broker's), including any that could not be applied.
    dynamic: (BTreeMap<String, String>, BTreeMap<String, String>),
}

impl Broker {
    /// Joins the controller quorum, registers this node, and opens every
    /// partition the metadata assigns to it.
    pub fn open(config: BrokerConfig) -> Result<Arc<Self>, BrokerError> {
        Self::open_with_clock(config, Arc::new(weir_log::SystemClock))
    }

    /// [`open`](Self::open) with `clock` for every timestamp and deadline
    /// the broker keeps (commit times, expirations, group timers, log
    /// retention), so tests can drive time.
    pub fn open_with_clock(
        config: BrokerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, BrokerError> {
        Self::open_with_storage(config, clock, None)
    }

    /// [`open_with_clock`](Self::open_with_clock) with every file of the
    /// partition logs going through `storage` (the file system when
    /// `None`), so tests can inject slow or failing I/O.
    pub fn open_with_storage(
        mut config: BrokerConfig,
        clock: Arc<dyn Clock>,
        storage: Option<Arc<dyn weir_log::storage::Storage>>,
    ) -> Result<Arc<Self>, BrokerError> {
        let io = |path: &std::path::Path| {
            let path = path.display().to_string();
            move |source| BrokerError::Io { path, source }
        };
        // Before anything else: a TLS setup that cannot work, or no way to
        // reach the other brokers, stops the start. HTTPS and an SSL
        // controller listener use the TLS setup too, with or without a TLS
        // Kafka listener.
        let tls = if config.startup.http_tls
            || config.startup.controller_protocol.is_tls()
            || config.startup.listeners.iter().any(|l| l.protocol.is_tls())
        {
            Some(Arc::new(TlsServer::new(config.security.tls.clone())?))
        } else {
            None
        };
        let inter_broker_security = config.inter_broker_client_security()?;
        let (oauth, jwks) = match config.security.jwks_source()? {
            None => (None, None),
            Some(source) => {
                let oauth = &config.security.oauthbearer;
                // Tracked from before the read: a change during it is
                // read again.
                let refresh = crate::security::jwks::JwksRefresh::new(
                    source,
                    std::time::Duration::from_millis(oauth.jwks_refresh_ms),
                    std::time::Duration::from_millis(oauth.jwks_retry_backoff_max_ms),
                    std::time::Instant::now(),
                );
                let jwks = refresh
                    .source()
                    .read()
                    .map_err(|reason| config.security.jwks_error(reason))?;
                let validator = config.security.jwt_validator(&jwks)?;
                (Some(Arc::new(validator)), Some(refresh))
            }
        };
        let oauth = RwLock::new(oauth);
        // Before anything in them is read: a second process writing the same
        // directories would destroy them.
        let dir_locks = weir_meta::DirLock::acquire_all(
            std::iter::once(&config.startup.data_dir)
                .chain(&config.startup.partition_log_dirs())
                .map(std::path::PathBuf::as_path),
        )?;
        let cluster_id = load_cluster_id(&config.startup.data_dir)?;
        // Before joining the cluster: a partition found twice stops the
        // start.
        let log_dirs =
            crate::replica::directories::LogDirs::open(&config.startup.partition_log_dirs())?;
        let controller_dir = config.startup.data_dir.join("controller");
        let listener =
            std::net::TcpListener::bind(config.startup.controller_listen).map_err(|source| {
                BrokerError::ControllerListen {
                    addr: config.startup.controller_listen,
                    source,
                }
            })?;
        // The address bound (port 0 asks for any), as DescribeConfigs
        // reports it.
        config.startup.controller_listen = listener.local_addr().map_err(io(&controller_dir))?;
        let mut voters = config.startup.controllers.clone();
        if voters.is_empty() {
            voters.push((
                config.startup.node_id as u64,
                config.startup.controller_listen,
            ));
        }
        // Kafka's initial.broker.registration.timeout.ms: a node that starts
        // while its quorum cannot commit waits for it, trying again.
        let registration_timeout =
            std::time::Duration::from_millis(config.initial_broker_registration_timeout_ms);
        let registration_deadline = std::time::Instant::now() + registration_timeout;
        let meta = Metadata::start(
            &controller_dir,
            config.startup.node_id,
            listener,
            voters,
            config.startup.is_controller,
            config.controller_settings(tls.clone())?,
            registration_timeout,
        )?;
        meta.import_local_store(&config.startup.data_dir.join("meta"))?;
        let cluster_id = shared_cluster_id(&meta, &config, cluster_id)?;
        let inter_broker = config.startup.inter_broker_listener();
        let registration = BrokerInfo {
            id: config.startup.node_id,
            host: inter_broker.advertised_host.clone(),
            port: inter_broker.advertised_port,
            listeners: config
                .startup
                .listeners
                .iter()
                .map(|l| weir_meta::ListenerEndpoint {
                    name: l.name.clone(),
                    host: l.advertised_host.clone(),
                    port: l.advertised_port,
                })
                .collect(),
            rack: config.broker_rack.clone(),
            incarnation: uuid::Uuid::new_v4(),
            previous_incarnation: crate::broker::clean_shutdown::take(&config.startup.data_dir),
        };
        register(&meta, &registration, registration_deadline)?;
        // Heartbeats start before the partitions open: opening thousands of
        // logs can outlast the session, and the controller would fence this
        // node for the silence. Nothing is served meanwhile: the listeners
        // start once `open` returns, and a partition led here but not open
        // yet answers LEADER_NOT_AVAILABLE.
        let heartbeats = AbortOnDrop(Some(meta.keep_alive(
            registration.clone(),
            std::time::Duration::from_millis(config.broker_heartbeat_interval_ms),
        )));
        // Dynamic broker configs apply before any partition opens.
        let image = meta.image();
        let dynamic = (
            image.broker_configs(None).clone(),
            image.broker_configs(Some(config.startup.node_id)).clone(),
        );
        let current = CurrentConfig {
            config: Arc::new(config.with_dynamic_lenient(&dynamic.0, &dynamic.1)),
            image_index: image.applied_index(),
            dynamic,
        };
        let remote = open_remote_tier(&config, clock.clone())?;
        let storage = storage.unwrap_or_else(|| {
            Arc::new(weir_log::storage::FsStorage::with_open_file_limit(
                config.log_max_open_files,
            ))
        });
        let replicas = ReplicaManager::new(
            config.startup.node_id,
            storage,
            &config.startup.data_dir,
            log_dirs,
            clock.clone(),
            QuotaWindows {
                samples: config.replication_quota_window_num,
                window_ms: i64::from(config.replication_quota_window_size_seconds) * 1000,
            },
            crate::replica::LeaderSources {
                security: inter_broker_security.clone(),
                remote: remote.as_ref().map(|reader| {
                    crate::replica::remote_restart::RemoteTierSource {
                        store: reader.store().clone(),
                        image: meta.image_watch(),
                    }
                }),
            },
        );
        replicas.reconcile(&current.config, &image);
        // The __consumer_offsets partitions led here in the image the
        // replicas were opened from are loaded now: later changes reach the
        // coordinators through `reconcile`.
        let offsets_topic = image.topic(OFFSETS_TOPIC);
        let offsets_partitions = offsets_topic.map_or(0, |t| t.partition_count());
        let coordinator_env =
            Environment::new(config.startup.node_id, clock.clone(), meta.image_watch());
        let offsets = Arc::new(OffsetStore::new(config.startup.node_id));
        let group_coordinators = GroupCoordinators::new(
            coordinator_env.clone(),
            offsets.clone(),
            GroupCoordinator::new(config.group_config(), offsets.clone()),
            ConsumerGroupCoordinator::new(config.consumer_group.clone(), offsets.clone()),
            ShareGroupCoordinator::new(config.share_group.clone(), offsets),
        );
        let led = offsets_topic
            .into_iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader == config.startup.node_id);
        for led in led {
            let Some(partition) = replicas.get(OFFSETS_TOPIC, led.partition) else {
                continue;
            };
            group_coordinators
                .load(partition, offsets_partitions, &image)
                .map_err(|source| BrokerError::Log {
                    topic: OFFSETS_TOPIC.to_owned(),
                    partition: led.partition,
                    source,
                })?;
        }
        let metrics = Metrics::default();
        let fetch_sessions = FetchSessionCache::new(
            config.max_incremental_fetch_session_cache_slots,
            metrics.fetch_sessions.clone(),
        );
        let client_quotas = ClientQuotaManager::new(QuotaWindows {
            samples: config.quota_window_num,
            window_ms: i64::from(config.quota_window_size_seconds) * 1000,
        });
        client_quotas.update(meta.image().client_quotas());
        let request_memory = Arc::new(crate::net::RequestMemory::new(
            crate::net::RequestMemorySizes::new(
                config.queued_max_request_bytes,
                config.socket_request_max_bytes,
                config.security.sasl_max_receive_size,
            ),
        ));
        let max_share_sessions = config.share_group.max_share_sessions;
        let share_state =
            crate::share::state_coordinator::ShareStateStore::new(config.startup.node_id);
        let txns = Arc::new(TxnCoordinator::new(
            coordinator_env.clone(),
            inter_broker_security.clone(),
        ));
        let broker = Arc::new_cyclic(|me: &Weak<Self>| Self {
            share_partitions: crate::share::leader::SharePartitions::new(
                max_share_sessions,
                me.clone() as Weak<dyn crate::share::ShareHost>,
            ),
            me: me.clone(),
            clock,
            dir_locks: Mutex::new(dir_locks),
            incarnation: registration.incarnation,
            static_config: config,
            current: RwLock::new(current),
            cluster_id,
            meta,
            auto_creating: Mutex::new(HashSet::new()),
            mirror_progress: crate::mirror::MirrorProgress::default(),
            reconciling: Mutex::new(()),
            reconciled: tokio::sync::watch::Sender::new(0),
            replicas,
            membership: Mutex::new(heartbeats.take().into_iter().collect()),
            producer_ids: Mutex::default(),
            metrics,
            serving: AtomicBool::new(false),
            coordinator_env,
            group_coordinators,
            share_state,
            txns,
            fetch_sessions,
            client_quotas,
            tls,
            request_memory,
            connection_quotas: Arc::default(),
            authorizer: RwLock::new((u64::MAX, None)),
            inter_broker_security,
            oauth,
            jwks,
            password_checks: crate::security::password_checks::PasswordChecks::new(),
            remote,
        });
        broker.load_led_transactions();
        broker.load_led_share_state();
        broker.start_membership();
        if broker.producer_ids.lock().request_if_empty() {
            broker.request_producer_id_block();
        }
        // Changes committed between the first reconcile and now.
        broker.reconcile();
        Ok(broker)
    }

    /// Arms the timers of the groups of the `__consumer_offsets`
    /// partitions loaded as the broker opened, so that members that do not
    /// come back after a restart expire. Needs the Tokio runtime.
    pub fn start_groups(self: &Arc<Self>) {
        for index in self.offsets().hosted() {
            self.group_coordinators.take_over(index);
        }
    }

    /// This node leads `__consumer_offsets` partition `partition` (of
    /// `count`) now: its groups and offsets are loaded from its log and
    /// their timers armed. Returns the live records. Reads the log where it
    /// is called, which must not be a runtime worker.
    pub fn coordinate_groups_of(
        self: &Arc<Self>,
        partition: Arc<Partition>,
        count: i32,
        image: &MetadataImage,
    ) -> Result<usize, weir_log::LogError> {
        let index = partition.index;
        let records = self.group_coordinators.load(partition, count, image)?;
        self.group_coordinators.take_over(index);
        Ok(records)
    }

    /// Keeps this node's replicas in step with every metadata change (its
    /// heartbeats run since its registration), until
    /// [`controlled_shutdown`](Self::controlled_shutdown) or
    /// [`shutdown`](Self::shutdown).
    fn start_membership(self: &Arc<Self>) {
        let broker = Arc::downgrade(self);
        let follower = self.meta.follow_changes(move || match broker.upgrade() {
            Some(broker) => {
                broker.reconcile();
                true
            }
            None => false,
        });
        self.membership.lock().push(follower);
    }

    fn stop_membership(&self) {
        for task in self.membership.lock().drain(..) {
            task.abort();
        }
    }

    /// Applies the current image to the hosted replicas.
    pub fn reconcile(&self) {
        let _reconciling = self.reconciling.lock();
        let image = self.meta.image();
        self.apply_image(&image);
        self.reconciled.send_if_modified(|reconciled| {
            let moved = image.applied_index() > *reconciled;
            *reconciled = (*reconciled).max(image.applied_index());
            moved
        });
    }

    /// Waits until the replicas here are in line with the image at `index`
    /// or later, or `deadline` passes; true if they are.
    async fn reconciled_by(&self, index: u64, deadline: std::time::Instant) -> bool {
        let mut reconciled = self.reconciled.subscribe();
        let caught_up = tokio::time::timeout_at(
            deadline.into(),
            reconciled.wait_for(|reconciled| *reconciled >= index),
        )
        .await;
        matches!(caught_up, Ok(Ok(_)))
    }

    /// Brings the replicas and coordinators here in line with `image`.
    fn apply_image(&self, image: &MetadataImage) {
        self.client_quotas.update(image.client_quotas());
        let config = self.follow_config(image);
        let outcome = self.replicas.reconcile(&config, image);
        let count = image
            .topic(OFFSETS_TOPIC)
            .map_or(0, |t| t.partition_count());
        for topic in outcome.removed_topics {
            self.forget_offsets_of(&topic, count);
        }
        // Groups move with the leadership of their __consumer_offsets
        // partition.
        for (_, index) in outcome.unled.iter().filter(|(t, _)| t == OFFSETS_TOPIC) {
            self.offsets().unload(*index);
        }
        for (_, index) in outcome
            .unled
            .iter()
            .filter(|(t, _)| t == TRANSACTION_STATE_TOPIC)
        {
            self.txns.hand_over(*index);
        }
        for (_, index) in outcome.unled.iter().filter(|(t, _)| t == SHARE_STATE_TOPIC) {
            self.share_state.hand_over(*index);
        }
        for (_, index) in outcome.led.iter().filter(|(t, _)| t == SHARE_STATE_TOPIC) {
            if let Some(partition) = self.replicas.get(SHARE_STATE_TOPIC, *index) {
                self.load_share_state(partition);
            }
        }
        let mut transactions = Coordinating::default();
        for (_, index) in outcome
            .led
            .iter()
            .filter(|(t, _)| t == TRANSACTION_STATE_TOPIC)
        {
            if let Some(partition) = self.replicas.get(TRANSACTION_STATE_TOPIC, *index) {
                transactions.add(self.load_transactions(partition));
            }
        }
        transactions.tell("transactional ids", TRANSACTION_STATE_TOPIC);
        let Some(me) = self.me.upgrade() else {
            // Still opening: the groups are loaded once the broker exists.
            return;
        };
        let mut groups = Coordinating::default();
        for (_, index) in outcome.led.iter().filter(|(t, _)| t == OFFSETS_TOPIC) {
            let Some(partition) = self.replicas.get(OFFSETS_TOPIC, *index) else {
                continue;
            };
            match me.coordinate_groups_of(partition, count, image) {
                Ok(records) => {
                    tracing::debug!(
                        partition = index,
                        records,
                        "coordinating the groups of a __consumer_offsets partition"
                    );
                    groups.add(Some(records));
                }
                Err(error) => tracing::error!(partition = index, %error, "cannot load groups"),
            }
        }
        groups.tell("records", OFFSETS_TOPIC);
    }

    /// Loads the transactions of the `__transaction_state` partitions this
    /// node leads as it opens.
    fn load_led_transactions(&self) {
        let mut transactions = Coordinating::default();
        for partition in self.led_partitions_of(TRANSACTION_STATE_TOPIC) {
            transactions.add(self.load_transactions(partition));
        }
        transactions.tell("transactional ids", TRANSACTION_STATE_TOPIC);
    }

    /// Loads the share-partition state of the `__share_group_state`
    /// partitions this node leads as it opens.
    fn load_led_share_state(&self) {
        for partition in self.led_partitions_of(SHARE_STATE_TOPIC) {
            self.load_share_state(partition);
        }
    }

    fn led_partitions_of(&self, topic: &str) -> Vec<Arc<Partition>> {
        self.replicas
            .of_topic(topic)
            .into_iter()
            .filter(|p| self.leader_partition(topic, p.index).is_ok())
            .collect()
    }

    /// This node leads `partition` of `__share_group_state`: it keeps the
    /// state of the share-partitions stored there.
    fn load_share_state(&self, partition: Arc<Partition>) {
        let index = partition.index;
        match self.share_state.take_over(partition) {
            Ok(states) => tracing::debug!(
                partition = index,
                states,
                "leading a __share_group_state partition"
            ),
            Err(error) => tracing::error!(
                partition = index,
                %error,
                "cannot load share-partition state"
            ),
        }
    }

    /// This node leads `partition` of `__transaction_state`: it coordinates
    /// the transactions stored there.
    /// The number of transactional ids loaded, if it loaded.
    fn load_transactions(&self, partition: Arc<Partition>) -> Option<usize> {
        let index = partition.index;
        match self.txns.take_over(partition) {
            Ok(count) => {
                tracing::debug!(
                    partition = index,
                    transactional_ids = count,
                    "coordinating the transactions of a __transaction_state partition"
                );
                Some(count)
            }
            Err(error) => {
                tracing::error!(partition = index, %error, "cannot load transactions");
                None
            }
        }
    }

    /// Hands this node's leaderships to other in-sync replicas and leaves
    /// the ISRs, before a clean exit.
    pub fn controlled_shutdown(&self) -> Result<(), BrokerError> {
        // A heartbeat after this would register the node again.
        self.stop_membership();
        self.meta.submit(Command::ControlledShutdown {
            id: self.static_config.startup.node_id,
        })?;
        self.reconcile();
        Ok(())
    }

    /// The settings in force: the static ones under the dynamic broker
    /// configs of the metadata. A snapshot, cheap to take (a read lock and
    /// a reference count); take it again for the latest.
    pub fn config(&self) -> Arc<BrokerConfig> {
        self.current.read().config.clone()
    }

    /// Wall-clock milliseconds on the broker's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// This broker's id, which never changes.
    pub fn node_id(&self) -> i32 {
        self.static_config.startup.node_id
    }

    /// Rebuilds the settings when the dynamic broker configs of `image`
    /// differ from those they were built from; the settings in force.
    fn follow_config(&self, image: &MetadataImage) -> Arc<BrokerConfig> {
        let default = image.broker_configs(None);
        let own = image.broker_configs(Some(self.static_config.startup.node_id));
        let mut current = self.current.write();
        if image.applied_index() <= current.image_index {
            return current.config.clone();
        }
        current.image_index = image.applied_index();
        if current.dynamic.0 == *default && current.dynamic.1 == *own {
            return current.config.clone();
        }
        current.config = Arc::new(self.static_config.with_dynamic_lenient(default, own));
        current.dynamic = (default.clone(), own.clone());
        tracing::info!(
            cluster_default = ?current.config.dynamic_default,
            broker = ?current.config.dynamic_broker,
            "dynamic broker configs changed"
        );
        current.config.clone()
    }

    /// The coordinators of what `__consumer_offsets` stores.
    pub fn group_coordinators(&self) -> &Arc<GroupCoordinators> {
        &self.group_coordinators
    }

    pub fn offsets(&self) -> &OffsetStore {
        self.group_coordinators.offsets()
    }

    pub fn groups(&self) -> &GroupCoordinator {
        self.group_coordinators.groups()
    }

    pub fn consumer_groups(&self) -> &ConsumerGroupCoordinator {
        self.group_coordinators.consumer_groups()
    }

    pub fn share_groups(&self) -> &ShareGroupCoordinator {
        self.group_coordinators.share_groups()
    }

    pub(crate) fn share_partitions(&self) -> &crate::share::leader::SharePartitions {
        &self.share_partitions
    }

    pub(crate) fn share_state(&self) -> &crate::share::state_coordinator::ShareStateStore {
        &self.share_state
    }

    pub fn txns(&self) -> &Arc<TxnCoordinator> {
        &self.txns
    }

    pub fn txn_settings(&self) -> crate::config::TxnSettings {
        self.static_config.txn_settings()
    }

    /// The index of the `__transaction_state` partition that holds
    /// `transactional_id` and the broker leading it (-1: none at the
    /// moment); `None` while the topic does not exist.
    pub fn txn_coordinator_of(&self, transactional_id: &str) -> Option<(i32, i32)> {
        self.internal_partition_of(TRANSACTION_STATE_TOPIC, |count| {
            crate::txn::coordinator::partition_for(transactional_id, count)
        })
    }

    /// The index of the `__consumer_offsets` partition that holds `group`
    /// and the broker leading it (-1: none at the moment); `None` while the
    /// topic does not exist.
    pub fn coordinator_of(&self, group: &str) -> Option<(i32, i32)> {
        self.internal_partition_of(OFFSETS_TOPIC, |count| {
            weir_coord::records::offsets::partition_for(group, count)
        })
    }

    fn internal_partition_of(
        &self,
        topic: &str,
        index_for: impl FnOnce(i32) -> i32,
    ) -> Option<(i32, i32)> {
        self.with_image(|image| {
            let topic = image.topic(topic)?;
            let index = index_for(topic.partition_count());
            Some((index, topic.partition(index).map_or(-1, |p| p.leader)))
        })
    }

    /// NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE) unless this node
    /// leads the `__consumer_offsets` partition of `group`.
    pub fn check_coordinator(&self, group: &str) -> Result<(), i16> {
        match self.coordinator_of(group) {
            Some((index, leader)) if leader == self.static_config.startup.node_id => {
                if self.offsets().hosts(index) {
                    Ok(())
                } else {
                    Err(14) // COORDINATOR_LOAD_IN_PROGRESS
                }
            }
            Some((_, leader)) if leader >= 0 => Err(16), // NOT_COORDINATOR
            _ => Err(15),                                // COORDINATOR_NOT_AVAILABLE
        }
    }

    /// How an internal topic is created: `__consumer_offsets` with
    /// `offsets.topic.*`, `__transaction_state` with
    /// `transaction.state.log.*`, both compacted and never expired,
    /// `__share_group_state` with `share.coordinator.state.topic.*`, with
    /// as many replicas as asked or as there are live brokers, and
    /// `min.insync.replicas` capped likewise. `None` for any other name.
    pub fn internal_topic(&self, name: &str) -> Option<NewTopic> {
        let (partitions, replication_factor, min_isr) = match name {
            OFFSETS_TOPIC => (
                self.static_config.offsets_topic_num_partitions,
                self.static_config.offsets_topic_replication_factor,
                None,
            ),
            SHARE_STATE_TOPIC => {
                let share = &self.static_config.share_group;
                (
                    share.state_topic_num_partitions,
                    share.state_topic_replication_factor,
                    Some(share.state_topic_min_isr),
                )
            }
            TRANSACTION_STATE_TOPIC => {
                let settings = self.txn_settings();
                (
                    settings.num_partitions,
                    settings.replication_factor,
                    Some(settings.min_isr),
                )
            }
            _ => return None,
        };
        let live = self.with_image(|image| image.live_brokers().count()) as i32;
        let replication_factor = replication_factor.min(live.max(1));
        // Compacted, never expired: each key keeps its latest state. The
        // share state is not compacted: a share-partition's updates share
        // one key and each counts (Kafka's share coordinator prunes it).
        let cleanup = if name == SHARE_STATE_TOPIC {
            "delete"
        } else {
            "compact"
        };
        let mut configs: BTreeMap<String, String> = [
            ("cleanup.policy", cleanup),
            ("retention.ms", "-1"),
            ("segment.bytes", "104857600"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        if let Some(min_isr) = min_isr {
            configs.insert(
                "min.insync.replicas".to_owned(),
                min_isr.min(replication_factor).to_string(),
            );
        }
        Some(NewTopic {
            replication_factor: Some(replication_factor),
            configs,
            ..NewTopic::with_defaults(name, partitions)
        })
    }

    /// Commits (or, with `None`, deletes) a group's offsets. Returns the
    /// write for the caller to wait on before it answers (`None`: nothing
    /// was written).
    pub fn commit_offsets(
        &self,
        group: &str,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, CoordinatorError>> + Send + 'static
    {
        self.offsets().commit(group, changes, now_ms)
    }

    /// A transaction marker of `producer_id` was written at `offset` to
    /// partition `partition` of `__consumer_offsets`: the offsets the
    /// transaction committed there (TxnOffsetCommit) become visible, or, on
    /// an abort, are dropped. Called by the partition's leader after the
    /// append.
    pub async fn on_offsets_marker(
        &self,
        partition: i32,
        producer_id: i64,
        commit: bool,
        offset: u64,
    ) {
        let ended = self
            .offsets()
            .complete_transaction(partition, producer_id, commit, offset)
            .await;
        tracing::debug!(
            partition,
            producer_id,
            commit,
            offsets = ended,
            "transaction ended in __consumer_offsets"
        );
    }

    pub(crate) fn fetch_sessions(&self) -> &FetchSessionCache {
        &self.fetch_sessions
    }

    /// The throttle of what this broker sends followers as a leader.
    pub(crate) fn leader_replication_quota(&self) -> &crate::quotas::ReplicationQuota {
        self.replicas.leader_quota()
    }

    pub(crate) fn client_quotas(&self) -> &ClientQuotaManager {
        &self.client_quotas
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The ACL authorizer when `authorizer.class.name` is set; `None`
    /// when every request is allowed.
    pub(crate) fn authorizer(&self) -> Option<Arc<Authorizer>> {
        let config = self.config();
        let security = &config.security;
        if !security.authorizer_enabled {
            return None;
        }
        let image = self.meta.image();
        let index = image.applied_index();
        {
            let cached = self.authorizer.read();
            if cached.0 == index {
                return cached.1.clone();
            }
        }
        let built = Arc::new(image.authorizer(
            security.super_users.clone(),
            security.allow_everyone_if_no_acl_found,
        ));
        *self.authorizer.write() = (index, Some(built.clone()));
        Some(built)
    }

    /// Checks OAUTHBEARER tokens; `None` when the mechanism is not enabled.
    pub(crate) fn oauth(&self) -> Option<Arc<weir_auth::JwtValidator>> {
        self.oauth.read().clone()
    }

    pub(crate) fn password_checks(&self) -> &crate::security::password_checks::PasswordChecks {
        &self.password_checks
    }

    /// Reads the OAUTHBEARER JWKS again when due (its file changed, its
    /// endpoint's refresh interval passed, a token named a key it lacks);
    /// true if new keys are in force. Keys that cannot be read or used
    /// leave the old ones in force. Blocks: run it on the blocking pool.
    pub fn refresh_jwks_if_due(&self) -> Result<bool, crate::config::ConfigError> {
        let Some(jwks) = &self.jwks else {
            return Ok(false);
        };
        if !jwks.due(std::time::Instant::now()) {
            return Ok(false);
        }
        let security = &self.static_config.security;
        let text = jwks
            .source()
            .read()
            .map_err(|reason| security.jwks_error(reason))?;
        let validator = security.jwt_validator(&text)?;
        *self.oauth.write() = Some(Arc::new(validator));
        Ok(true)
    }

    /// A token named a key the JWKS lacks: fetch it again soon.
    pub(crate) fn jwks_key_missing(&self) {
        if let Some(jwks) = &self.jwks {
            jwks.key_missing();
        }
    }

    /// How this broker connects to the other brokers.
    pub(crate) fn inter_broker_security(&self) -> &weir_client::SecurityConfig {
        &self.inter_broker_security
    }

    /// The TLS setup of the SSL and SASL_SSL listeners, and of HTTPS.
    pub fn tls(&self) -> Option<Arc<TlsServer>> {
        self.tls.clone()
    }

    /// The memory of requests in flight, shared by every listener.
    pub(crate) fn request_memory(&self) -> Arc<crate::net::RequestMemory> {
        self.request_memory.clone()
    }

    /// The open connections, counted against `max.connections`.
    pub(crate) fn connection_quotas(&self) -> Arc<crate::net::ConnectionQuotas> {
        self.connection_quotas.clone()
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

    /// The partition, if a replica of it is here (leader or not).
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.replicas.get(topic, partition)
    }

    /// The partition, if this node leads it: what produce and consumer
    /// fetches need.
    pub fn leader_partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, NotServed> {
        self.with_image(|image| self.replicas.leader(image, topic, partition))
    }

    /// [`leader_partition`](Self::leader_partition) of several partitions
    /// of one topic.
    pub fn leader_partitions(
        &self,
        image: &MetadataImage,
        topic: &str,
        partitions: impl Iterator<Item = i32>,
    ) -> Vec<Result<Arc<Partition>, NotServed>> {
        self.replicas.leaders(image, topic, partitions)
    }

    /// [`ReplicaManager::readable`]: the replicas of these partitions
    /// hosted here, leaders or followers.
    pub fn readable_partitions(
        &self,
        image: &MetadataImage,
        topic: &str,
        partitions: impl Iterator<Item = i32>,
    ) -> Vec<Result<Arc<Partition>, NotServed>> {
        self.replicas.readable(image, topic, partitions)
    }

    /// The replicas of `topic` hosted here.
    pub fn partitions_of(&self, topic: &str) -> Vec<Arc<Partition>> {
        self.replicas.of_topic(topic)
    }

    /// The directories of the partition logs (`log.dirs`).
    pub fn log_dirs(&self) -> &crate::replica::directories::LogDirs {
        self.replicas.log_dirs()
    }

    pub(crate) fn replicas(&self) -> &ReplicaManager {
        &self.replicas
    }

    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.replicas.all()
    }

    /// Writes the high watermark of every hosted partition down, if one
    /// moved since the last time.
    pub fn checkpoint_high_watermarks(&self) -> Result<(), weir_log::LogError> {
        self.replicas.checkpoint_high_watermarks()
    }

    /// How far the mirror partitions this broker leads got.
    pub fn mirror_progress(&self) -> &crate::mirror::MirrorProgress {
        &self.mirror_progress
    }

    /// The remote tier, when this broker has tiered storage.
    pub fn remote_reader(&self) -> Option<&Arc<crate::remote::RemoteReader>> {
        self.remote.as_ref()
    }

    /// Commits `command` through the controller quorum within
    /// `timeout_ms`, then waits (within what is left of it) until the
    /// replicas here are in line, so the caller usually sees its change
    /// here at once.
    async fn submit(&self, command: Command, timeout_ms: i32) -> Result<Applied, BrokerError> {
        let deadline = deadline_after(timeout_ms);
        let applied = self.meta.submit_within(command, timeout_ms).await?;
        if !self
            .reconciled_by(self.meta.image().applied_index(), deadline)
            .await
        {
            tracing::info!("answering a metadata change while the replicas here still follow it");
        }
        Ok(applied)
    }

    /// Waits, within `timeout_ms`, until the image here holds every change
    /// the controller quorum had committed (see `Controller::catch_up`), so
    /// that a change checked against it afterwards is checked as Kafka's
    /// active controller checks it: a topic another broker created a moment
    /// ago is known here too. If the quorum cannot tell in time, the image
    /// stays as it is; the change then goes to the quorum, which checks it
    /// again.
    pub async fn catch_up_with_controller(&self, timeout_ms: i32) {
        if let Err(error) = self.meta.catch_up(timeout_ms).await {
            tracing::debug!(%error, "checking a change against an image that may lag the quorum");
        }
    }

    /// Creates topics, as Kafka's controller creates those of one
    /// CreateTopics request: each on its own (one that fails its checks is
    /// left out with its error, the others are created), in as few
    /// committed log entries as Kafka's batch limit allows. Replicas come
    /// from each topic's `assignment` (one list per partition) when given,
    /// else are placed over the live brokers with its `replication_factor`
    /// (default `default.replication.factor`). With `validate_only`
    /// nothing changes. One result per topic, in order.
    ///
    /// Answered once the quorum has committed them, within `timeout_ms`
    /// (else REQUEST_TIMED_OUT: they may still be created). Their replicas
    /// open as each broker applies the change; this one waits for its own
    /// within what is left of `timeout_ms`, so a client usually finds the
    /// topics served here, but many partitions never hold the answer past
    /// its timeout (the partitions still opening answer
    /// LEADER_NOT_AVAILABLE).
    pub async fn create_topics(
        &self,
        topics: Vec<NewTopic>,
        validate_only: bool,
        timeout_ms: i32,
    ) -> Vec<Result<TopicInfo, BrokerError>> {
        let deadline = deadline_after(timeout_ms);
        let image = self.meta.image();
        let mut results: Vec<Option<Result<TopicInfo, BrokerError>>> =
            (0..topics.len()).map(|_| None).collect();
        // Where each creation submitted answers, in order.
        let mut submitted = Vec::with_capacity(topics.len());
        let mut creations = Vec::with_capacity(topics.len());
        for (at, topic) in topics.into_iter().enumerate() {
            match self.topic_creation(&image, topic) {
                Ok(creation) => {
                    submitted.push(at);
                    creations.push(creation);
                }
                Err(error) => results[at] = Some(Err(error)),
            }
        }
        let names: Vec<String> = creations.iter().map(|c| c.name.clone()).collect();
        let mut outcomes = Vec::with_capacity(creations.len());
        if validate_only {
            let mut scratch = (*image).clone();
            let command = Command::CreateTopics { topics: creations };
            if let Ok(Applied::TopicsCreated(checked)) = scratch.apply(&command) {
                outcomes.extend(checked.into_iter().zip(&names).map(|(outcome, name)| {
                    outcome
                        .map(|()| scratch.topic(name).cloned().expect("just created"))
                        .map_err(|rejected| BrokerError::Meta(rejected.into()))
                }));
            }
        } else {
            let committed = self.commit_topic_creations(creations, deadline).await;
            if committed.iter().any(Result::is_ok)
                && !self
                    .reconciled_by(self.meta.image().applied_index(), deadline)
                    .await
            {
                tracing::info!("answering a topic creation while the replicas here still open");
            }
            let image = self.meta.image();
            outcomes.extend(committed.into_iter().zip(&names).map(|(outcome, name)| {
                outcome?;
                let topic = image
                    .topic(name)
                    .cloned()
                    .ok_or_else(|| MetaError::UnknownTopic(name.clone()))?;
                tracing::info!(
                    topic = name,
                    partitions = topic.partitions.len(),
                    replication_factor = topic.replication_factor(),
                    "created topic"
                );
                Ok(topic)
            }));
        }
        for (at, outcome) in submitted.into_iter().zip(outcomes) {
            results[at] = Some(outcome);
        }
        results
            .into_iter()
            .map(|r| r.expect("every topic has an outcome"))
            .collect()
    }

    /// Commits `creations` through the quorum in bounded batches, one
    /// after the other, until `deadline`: each topic's outcome, in order.
    /// Once a batch fails, the ones after it are not submitted and share
    /// its error.
    async fn commit_topic_creations(
        &self,
        creations: Vec<TopicCreation>,
        deadline: std::time::Instant,
    ) -> Vec<Result<(), BrokerError>> {
        let mut outcomes = Vec::with_capacity(creations.len());
        let mut failed: Option<MetadataError> = None;
        for batch in TopicCreation::batches(creations) {
            let count = match &batch {
                Command::CreateTopics { topics } => topics.len(),
                _ => unreachable!("topic creations are batched as CreateTopics"),
            };
            if failed.is_none() {
                match self.meta.submit_within(batch, remaining_ms(deadline)).await {
                    Ok(Applied::TopicsCreated(created)) if created.len() == count => {
                        outcomes.extend(created.into_iter().map(|outcome| {
                            outcome.map_err(|rejected| BrokerError::Meta(rejected.into()))
                        }));
                        continue;
                    }
                    Ok(other) => {
                        failed = Some(MetadataError::Unavailable(format!(
                            "the controller answered {count} topic creations with {other:?}"
                        )))
                    }
                    Err(error) => failed = Some(error),
                }
            }
            let error = failed.as_ref().expect("set above");
            outcomes.extend((0..count).map(|_| Err(again(error))));
        }
        outcomes
    }

    /// Starts creating `name`, as Kafka does for a Metadata request naming
    /// an unknown topic and for FindCoordinator before its internal topic
    /// exists: an internal topic as [`internal_topic`](Self::internal_topic)
    /// says, any other with the default partition count and replication
    /// factor. The creation is checked here (a bad name or a replication
    /// factor the live brokers cannot hold is an error at once), then
    /// committed in the background, so the request is answered at once and
    /// the client asks again.
    pub fn auto_create_topic(&self, name: &str) -> Result<(), BrokerError> {
        let image = self.meta.image();
        let topic = self
            .internal_topic(name)
            .unwrap_or_else(|| NewTopic::with_defaults(name, self.config().num_partitions));
        let command = self.topic_creation(&image, topic)?.into_command();
        image.validate(&command)?;
        if !self.auto_creating.lock().insert(name.to_owned()) {
            return Ok(());
        }
        let broker = self.me.clone();
        let name = name.to_owned();
        self.meta.submit_in_background(command, move |outcome| {
            match outcome {
                Ok(_) => tracing::info!(topic = %name, "auto-created topic"),
                Err(MetadataError::Rejected(MetaError::TopicAlreadyExists(_))) => {}
                Err(error) => tracing::warn!(topic = %name, %error, "auto-creating topic failed"),
            }
            if let Some(broker) = broker.upgrade() {
                broker.auto_creating.lock().remove(&name);
            }
        });
        Ok(())
    }

    /// The creation of topic `name`, its replicas placed over the live
    /// brokers of `image` unless `assignment` says where.
    fn topic_creation(
        &self,
        image: &MetadataImage,
        topic: NewTopic,
    ) -> Result<TopicCreation, BrokerError> {
        let NewTopic {
            name,
            partitions,
            replication_factor,
            assignment,
            configs,
        } = topic;
        let replicas = match assignment {
            Some(assignment) => assignment,
            None => image.assign_replicas(
                0,
                partitions,
                replication_factor.unwrap_or(self.static_config.default_replication_factor),
                placement_start(),
            )?,
        };
        Ok(TopicCreation {
            internal: name.starts_with("__"),
            name,
            id: uuid::Uuid::new_v4(),
            replicas,
            configs,
        })
    }

    /// Adds partitions to a topic, up to `total`, placed like the topic's
    /// first partitions unless `assignment` says where (one replica list
    /// per partition added); answered once committed (within
    /// `timeout_ms`), like [`create_topic`](Self::create_topic). Checked in
    /// the order of Kafka's controller: the topic, the count, then the
    /// assignment.
    pub async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
        timeout_ms: i32,
    ) -> Result<(), BrokerError> {
        let image = self.meta.image();
        let additional = image.partitions_to_add(name, total)?;
        let topic = image
            .topic(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_owned()))?;
        let (current, replication_factor) = (topic.partition_count(), topic.replication_factor());
        let new_replicas = match assignment {
            Some(assignment) => {
                if assignment.len() != additional as usize {
                    return Err(MetaError::InvalidReplicaAssignment(format!(
                        "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                        assignment.len()
                    ))
                    .into());
                }
                for replicas in &assignment {
                    image.check_manual_assignment(replicas, Some(replication_factor))?;
                }
                assignment
            }
            None => image.assign_replicas(
                current,
                additional,
                replication_factor as i32,
                placement_start(),
            )?,
        };
        let command = Command::CreatePartitions {
            name: name.to_owned(),
            new_replicas,
        };
        image.validate(&command)?;
        if validate_only {
            return Ok(());
        }
        self.submit(command, timeout_ms).await?;
        Ok(())
    }

    /// Sets and removes a topic's config overrides; every replica applies
    /// them as soon as it sees the change. With `validate_only` nothing
    /// changes.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        self.config().check_topic_tiering(&set)?;
        let command = Command::AlterTopicConfigs {
            name: name.to_owned(),
            set,
            delete,
        };
        if validate_only {
            return Ok(self.meta.image().validate(&command)?);
        }
        self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await?;
        tracing::info!(topic = name, "altered topic configs");
        Ok(())
    }

    /// Sets and removes the configs of `group` (GROUP config resource),
    /// checked against this broker's consumer group settings; with
    /// `validate_only` nothing changes.
    pub async fn alter_group_configs(
        &self,
        group: &str,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let invalid = |reason: String| {
            BrokerError::Meta(MetaError::InvalidConfig {
                key: group.to_owned(),
                reason,
            })
        };
        let image = self.meta.image();
        let mut configs = image.group_configs(group).clone();
        for name in &delete {
            if crate::config::groups::lookup(name).is_none() {
                return Err(invalid(format!("Unknown group config name: {name}")));
            }
            configs.remove(name);
        }
        configs.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        crate::config::groups::validate(
            &self.static_config.consumer_group,
            &self.static_config.share_group,
            &configs,
        )
        .map_err(invalid)?;
        let command = Command::AlterGroupConfigs {
            group: group.to_owned(),
            set,
            delete,
        };
        if validate_only {
            return Ok(image.validate(&command)?);
        }
        self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await?;
        tracing::info!(group, "altered group configs");
        Ok(())
    }

    /// Sets and removes dynamic broker configs: those of broker `target`,
    /// or with `None` the cluster-wide default. Every name must be a
    /// dynamic broker config and every value valid for this broker's
    /// settings; every broker applies the change as soon as it sees it.
    /// With `validate_only` nothing changes.
    pub async fn alter_broker_configs(
        &self,
        target: Option<i32>,
        set: BTreeMap<String, String>,
        delete: Vec<String>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let image = self.meta.image();
        let stored = image.broker_configs(target);
        crate::config::check_dynamic_names(&set, &delete, stored, target.is_none())?;
        let mut level = stored.clone();
        for name in &delete {
            level.remove(name);
        }
        level.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        // The values as this broker would run with them (another broker's
        // own configs are checked over this one's static settings).
        let (default, own) = match target {
            None => (
                &level,
                image.broker_configs(Some(self.static_config.startup.node_id)),
            ),
            Some(_) => (image.broker_configs(None), &level),
        };
        self.static_config
            .with_dynamic(default, own)
            .map_err(MetaError::from)?;
        let command = Command::AlterBrokerConfigs {
            broker: target,
            set,
            delete,
        };
        if validate_only {
            return Ok(image.validate(&command)?);
        }
        self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await?;
        match target {
            Some(id) => tracing::info!(broker = id, "altered dynamic broker configs"),
            None => tracing::info!("altered the cluster-wide dynamic broker configs"),
        }
        Ok(())
    }

    /// Sets and removes client quotas, answered once committed; with
    /// `validate_only` only checks the change.
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<QuotaAlteration>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let command = Command::AlterClientQuotas { alterations };
        if validate_only {
            return Ok(self.meta.image().validate(&command)?);
        }
        self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await?;
        tracing::info!("altered client quotas");
        Ok(())
    }

    /// Deletes and sets SCRAM credentials: each user's outcome, as the
    /// controller decided it.
    pub async fn alter_scram_credentials(
        &self,
        deletions: Vec<(String, weir_auth::ScramMechanism)>,
        upsertions: Vec<weir_meta::ScramUpsertion>,
    ) -> Result<Vec<(String, Result<(), weir_meta::ScramError>)>, BrokerError> {
        let command = Command::AlterUserScramCredentials {
            deletions,
            upsertions,
        };
        match self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await? {
            Applied::ScramAlterations(outcomes) => {
                for (user, outcome) in &outcomes {
                    match outcome {
                        Ok(()) => tracing::info!(user, "altered SCRAM credentials"),
                        Err(error) => {
                            tracing::debug!(user, %error, "SCRAM credential change refused")
                        }
                    }
                }
                Ok(outcomes)
            }
            other => unreachable!("AlterUserScramCredentials applied as {other:?}"),
        }
    }

    /// Creates ACLs: each binding's outcome, as the controller decided it,
    /// once the quorum has committed them.
    pub async fn create_acls(
        &self,
        bindings: Vec<weir_meta::AclBinding>,
    ) -> Result<Vec<Result<(), weir_meta::AclError>>, BrokerError> {
        let command = Command::CreateAcls { bindings };
        match self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await? {
            Applied::AclsCreated(outcomes) => {
                let created = outcomes.iter().filter(|o| o.is_ok()).count();
                tracing::info!(created, refused = outcomes.len() - created, "created ACLs");
                Ok(outcomes)
            }
            other => unreachable!("CreateAcls applied as {other:?}"),
        }
    }

    /// Deletes the ACLs each filter matches: per filter, the bindings it
    /// removed (or why it could not be used), once the quorum has
    /// committed the change.
    pub async fn delete_acls(
        &self,
        filters: Vec<weir_meta::AclBindingFilter>,
    ) -> Result<Vec<Result<Vec<weir_meta::AclBinding>, weir_meta::AclError>>, BrokerError> {
        let command = Command::DeleteAcls { filters };
        match self.submit(command, CONTROLLER_CHANGE_TIMEOUT_MS).await? {
            Applied::AclsDeleted(outcomes) => {
                let deleted: usize = outcomes.iter().flatten().map(Vec::len).sum();
                tracing::info!(deleted, "deleted ACLs");
                Ok(outcomes)
            }
            other => unreachable!("DeleteAcls applied as {other:?}"),
        }
    }

    /// Deletes a topic (answered once committed, within `timeout_ms`);
    /// every replica removes its data when it sees the change.
    pub async fn delete_topic(
        &self,
        name: &str,
        timeout_ms: i32,
    ) -> Result<uuid::Uuid, BrokerError> {
        let id = self
            .meta
            .image()
            .topic(name)
            .map(|t| t.id)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_owned()))?;
        let command = Command::DeleteTopic {
            name: name.to_owned(),
        };
        self.submit(command, timeout_ms).await?;
        tracing::info!(topic = name, "deleted topic");
        Ok(id)
    }

    /// Starts moving a partition to `replicas`, or with `None` cancels its
    /// move.
    pub async fn reassign_partition(
        &self,
        topic: &str,
        partition: i32,
        replicas: Option<Vec<i32>>,
        timeout_ms: i32,
    ) -> Result<(), BrokerError> {
        let command = Command::ReassignPartition {
            topic: topic.to_owned(),
            partition,
            replicas,
        };
        self.submit(command, timeout_ms).await?;
        tracing::info!(topic, partition, "partition reassignment changed");
        Ok(())
    }

    /// Elects leaders of `partitions` (`None`: every partition), preferred
    /// or unclean, as an ElectLeaders request asks; answered once committed
    /// (within `timeout_ms`) with each partition's outcome.
    /// Finalizes feature `name` at `level` (UpdateFeatures, checked by the
    /// caller against the levels this node supports).
    pub async fn set_feature_level(
        &self,
        name: String,
        level: i16,
        timeout_ms: i32,
    ) -> Result<(), BrokerError> {
        self.submit(Command::SetFeatureLevel { name, level }, timeout_ms)
            .await
            .map(|_| ())
    }

    pub async fn elect_leaders(
        &self,
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
        timeout_ms: i32,
    ) -> Result<Vec<Election>, BrokerError> {
        let command = Command::ElectLeaders {
            unclean,
            partitions,
        };
        match self.submit(command, timeout_ms).await? {
            Applied::Elections(elections) => {
                for e in &elections {
                    if e.outcome == ElectionOutcome::Elected {
                        // Unclean elections may lose records: worth a line each.
                        tracing::info!(
                            topic = e.topic,
                            partition = e.partition,
                            unclean,
                            "leader elected on request"
                        );
                    }
                }
                Ok(elections)
            }
            other => Err(BrokerError::Controller(MetadataError::Unavailable(
                format!("the controller answered an election with {other:?}"),
            ))),
        }
    }

    /// Sends an ISR change this node's leadership of `partition` computed to
    /// the controller, in the background: AlterPartition, based on the
    /// partition state the leadership last took from the metadata, refused
    /// if that changed.
    pub fn propose_isr(&self, partition: Arc<Partition>, isr: Vec<i32>) {
        let image = self.meta.image();
        let current = image
            .topic(&partition.topic)
            .filter(|t| t.id == partition.topic_id)
            .and_then(|t| t.partition(partition.index));
        let based_on = partition.leader_isr();
        let command = match current {
            Some(p) if based_on.as_deref() == Some(p.isr.as_slice()) => Command::AlterPartition {
                topic: partition.topic.clone(),
                partition: partition.index,
                leader: self.static_config.startup.node_id,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                isr: isr.clone(),
            },
            _ => {
                partition.isr_change_failed();
                return;
            }
        };
        // Counted once the controller took it (Kafka's IsrShrinksPerSec and
        // IsrExpandsPerSec).
        let counted = if isr.len() < based_on.as_ref().map_or(0, Vec::len) {
            self.metrics.health.isr_shrinks.clone()
        } else {
            self.metrics.health.isr_expands.clone()
        };
        // The leadership takes the new ISR from the image, as every replica
        // does; only a refusal needs telling.
        self.meta
            .submit_in_background(command, move |outcome| match outcome {
                Ok(_) => {
                    counted.inc();
                    tracing::info!(
                        topic = %partition.topic,
                        partition = partition.index,
                        ?isr,
                        "ISR changed"
                    )
                }
                Err(error) => {
                    tracing::info!(topic = %partition.topic, partition = partition.index, ?isr, %error, "ISR change refused");
                    partition.isr_change_failed();
                }
            });
    }

    /// Tells the controller that these replicas take no writes (their log
    /// directory failed or is full), so that their leaderships move to
    /// other in-sync replicas and they leave the ISRs, as Kafka's
    /// controller handles an offline log directory.
    pub(crate) fn report_offline_replicas(&self, partitions: Vec<(String, i32)>) {
        if partitions.is_empty() {
            return;
        }
        let count = partitions.len();
        let command = Command::ReplicasOffline {
            broker: self.static_config.startup.node_id,
            partitions,
        };
        self.meta.submit_in_background(command, move |outcome| match outcome {
            Ok(_) => tracing::info!(
                replicas = count,
                "the controller moved the leaderships of the replicas that take no writes"
            ),
            Err(error) => {
                tracing::warn!(%error, "cannot tell the controller of the replicas that take no writes")
            }
        });
    }

    /// Committed offsets of a deleted topic go with it, in the groups this
    /// node coordinates.
    fn forget_offsets_of(&self, topic: &str, offsets_partitions: i32) {
        if offsets_partitions == 0 {
            return;
        }
        for (group, partitions) in self.offsets().commits_of_topic(topic) {
            let index = weir_coord::records::offsets::partition_for(&group, offsets_partitions);
            if !self.offsets().hosts(index) {
                continue;
            }
            let changes = partitions
                .into_iter()
                .map(|partition| OffsetChange {
                    topic: topic.to_owned(),
                    partition,
                    value: None,
                })
                .collect();
            // Queued now; nothing is acknowledged, so nothing waits for it
            // but the report of a failure.
            let deleted = self.commit_offsets(&group, changes, self.now_ms());
            let topic = topic.to_owned();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    if let Err(error) = deleted.await {
                        tracing::warn!(group, topic, %error, "could not delete committed offsets");
                    }
                });
            }
        }
    }

    /// A fresh producer id, or `None` while this broker waits for its next
    /// block of ids from the controller (the producer retries, as Kafka's
    /// COORDINATOR_LOAD_IN_PROGRESS tells it to).
    pub fn producer_id(&self) -> Option<i64> {
        // Ids a failed-over mirror's records may carry are skipped, also in
        // a block taken before the failover.
        let floor = self.meta.image().mirrored_producer_ids_end();
        loop {
            let claim = self.producer_ids.lock().claim();
            if claim.request_block {
                self.request_producer_id_block();
            }
            match claim.id {
                Some(id) if id < floor => continue,
                id => return id,
            }
        }
    }

    /// Asks the controller quorum for a block of producer ids, in the
    /// background.
    fn request_producer_id_block(&self) {
        let broker = self.me.clone();
        let command = Command::AllocateProducerIds {
            count: crate::broker::producer_ids::BLOCK_SIZE,
        };
        self.meta.submit_in_background(command, move |outcome| {
            let block = match outcome {
                Ok(Applied::ProducerIds { first, count }) => Some(first..first + count),
                Ok(other) => {
                    tracing::error!(?other, "unexpected answer to a producer id allocation");
                    None
                }
                Err(error) => {
                    tracing::warn!(%error, "producer id allocation failed");
                    None
                }
            };
            if let Some(broker) = broker.upgrade() {
                broker.producer_ids.lock().arrived(block);
            }
        });
    }

    /// The broker id reported as the controller: the active controller's
    /// when it is also a live broker, else this node's. Clients send admin
    /// requests to the reported controller, and any broker forwards them to
    /// the quorum, so it must name a broker clients can reach (as Kafka
    /// does with a quorum of controller-only nodes).
    pub fn controller_id(&self) -> i32 {
        let leader = self
            .meta
            .status()
            .leader_id
            .and_then(|id| i32::try_from(id).ok());
        leader
            .filter(|id| self.with_image(|image| image.live_brokers().any(|b| b.id == *id)))
            .unwrap_or(self.static_config.startup.node_id)
    }

    /// The controller quorum as this node sees it.
    pub fn controller_status(&self) -> weir_meta::ControllerStatus {
        self.meta.status()
    }

    /// The metadata image this node has applied.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.meta.image()
    }

    /// Flushes and closes every log cleanly, then stops the controller.
    pub fn shutdown(&self) {
        self.stop_membership();
        if self.close_partitions() {
            let data_dir = &self.static_config.startup.data_dir;
            if let Err(error) = crate::broker::clean_shutdown::record(data_dir, self.incarnation) {
                tracing::warn!(%error, "cannot record the clean shutdown");
            }
        }
        self.meta.shutdown();
        self.dir_locks.lock().clear();
    }

    /// Closes every partition, several at a time: a close is mostly
    /// fsyncs, and ten thousand of them one after another take minutes.
    /// True if every partition closed cleanly.
    fn close_partitions(&self) -> bool {
        const CLOSE_THREADS: usize = 8;
        if let Err(error) = self.replicas.checkpoint_high_watermarks() {
            tracing::warn!(%error, "high watermark checkpoint failed");
        }
        let partitions = std::sync::Mutex::new(self.replicas.drain().into_iter());
        let next = || partitions.lock().unwrap_or_else(|e| e.into_inner()).next();
        let all_clean = AtomicBool::new(true);
        std::thread::scope(|scope| {
            for _ in 0..CLOSE_THREADS {
                scope.spawn(|| {
                    while let Some(partition) = next() {
                        if !close_partition(partition) {
                            all_clean.store(false, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        all_clean.into_inner()
    }
}

/// Closes a partition; true if it closed cleanly (synced).
fn close_partition(partition: Arc<Partition>) -> bool {
    let name = format!("{}-{}", partition.topic, partition.index);
    if let Err(error) = partition.snapshot_producer_state() {
        tracing::warn!(partition = %name, %error, "producer state snapshot failed");
    }
    match Arc::try_unwrap(partition) {
        Ok(partition) => match partition.close() {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(partition = %name, %error, "clean close failed");
                false
            }
        },
        Err(partition) => {
            // Still referenced by a request: flush, skip the marker.
            match partition.flush() {
                Ok(()) => true,
                Err(error) => {
                    tracing::error!(partition = %name, %error, "flush failed");
                    false
                }
            }
        }
    }
}

/// A task stopped if it is dropped before being taken: the heartbeats of a
/// broker whose open fails after its registration.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl AbortOnDrop {
    fn take(mut self) -> Option<tokio::task::JoinHandle<()>> {
        self.0.take()
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Registers this node with the active controller, trying again while the
/// quorum cannot take it (no leader, no majority) until `deadline`.
fn register(
    meta: &Metadata,
    registration: &BrokerInfo,
    deadline: std::time::Instant,
) -> Result<(), BrokerError> {
    loop {
        match meta.submit(Command::RegisterBroker(registration.clone())) {
            Ok(_) => return Ok(()),
            Err(error @ (MetadataError::Unavailable(_) | MetadataError::TimedOut(_)))
                if std::time::Instant::now() < deadline =>
            {
                tracing::warn!(%error, "the controller quorum has not taken this node's registration yet; trying again");
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// The cluster id every node reports: the one in the metadata, set by the
/// first broker to start from its local id. Kept in the data directory too,
/// so that the id of a node started before the metadata held one lives on.
///
/// The node that sets it created the cluster's metadata: it adds the SCRAM
/// users it was started with (`--add-scram`), as `kafka-storage format`
/// does.
fn shared_cluster_id(
    meta: &Metadata,
    config: &BrokerConfig,
    local: String,
) -> Result<String, BrokerError> {
    let data_dir = &config.startup.data_dir;
    if meta.image().cluster_id().is_none() {
        match meta.submit(Command::SetClusterId { id: local.clone() }) {
            Ok(_) => {
                // A new cluster: eligible leader replicas on, as Kafka 4.1
                // formats new clusters, with the cluster-level
                // min.insync.replicas taken from this node's static config
                // (Kafka takes the active controller's).
                if let Some(min_isr) = config.static_values.get("min.insync.replicas") {
                    meta.submit(Command::AlterBrokerConfigs {
                        broker: None,
                        set: BTreeMap::from([("min.insync.replicas".to_owned(), min_isr.clone())]),
                        delete: Vec::new(),
                    })?;
                }
                meta.submit(Command::SetFeatureLevel {
                    name: weir_meta::ELR_FEATURE.to_owned(),
                    level: 1,
                })?;
                // Transactions v2 (KIP-890), as Kafka 4.x formats new
                // clusters.
                meta.submit(Command::SetFeatureLevel {
                    name: crate::config::features::TRANSACTION_VERSION.to_owned(),
                    level: 2,
                })?;
                add_initial_scram(meta, config)?;
            }
            // Another broker set it first.
            Err(MetadataError::Rejected(MetaError::InvalidRequest(_))) => {}
            Err(error) => return Err(error.into()),
        }
    }
    // Set by another broker: this node may not have applied it yet.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let shared = loop {
        if let Some(id) = meta.image().cluster_id() {
            break id.to_owned();
        }
        if std::time::Instant::now() > deadline {
            return Err(BrokerError::Controller(MetadataError::Unavailable(
                "the cluster id was set but never reached this node".to_owned(),
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    if shared != local {
        let path = data_dir.join("cluster-id");
        std::fs::write(&path, &shared).map_err(|source| BrokerError::Io {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(shared)
}

/// The SCRAM users a node that creates the cluster was started with
/// (`--add-scram`), as `kafka-storage format` adds them.
fn add_initial_scram(meta: &Metadata, config: &BrokerConfig) -> Result<(), BrokerError> {
    if config.startup.initial_scram.is_empty() {
        return Ok(());
    }

    let command = Command::AlterUserScramCredentials {
        deletions: Vec::new(),
        upsertions: config.startup.initial_scram.clone(),
    };
    if let Applied::ScramAlterations(outcomes) = meta.submit(command)? {
        for (user, outcome) in outcomes {
            if let Err(error) = outcome {
                return Err(BrokerError::Meta(MetaError::InvalidRequest(format!(
                    "--add-scram for {user}: {error}"
                ))));
            }
            tracing::info!(user, "added SCRAM user");
        }
    }
    Ok(())
}

/// Where round-robin placement starts: random, as in Kafka, so that
/// topics created one after another do not all lead on the same broker.
fn placement_start() -> usize {
    (uuid::Uuid::new_v4().as_u128() % 1_000_003) as usize
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

/// The internal-topic partitions a reconcile made this node coordinate,
/// told in one line rather than one per partition.
#[derive(Default)]
struct Coordinating {
    partitions: usize,
    items: usize,
}

impl Coordinating {
    fn add(&mut self, loaded: Option<usize>) {
        if let Some(items) = loaded {
            self.partitions += 1;
            self.items += items;
        }
    }

    fn tell(&self, what: &str, topic: &str) {
        if self.partitions > 0 {
            tracing::info!(
                "coordinating {} partition(s) of {topic} ({} {what})",
                self.partitions,
                self.items
            );
        }
    }
}
