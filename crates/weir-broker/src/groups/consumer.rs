//! The coordinator of consumer groups (KIP-848): hosts a
//! [`ConsumerGroupEngine`] for every such group whose `__consumer_offsets`
//! partition this node leads, and does its I/O: appends the records the
//! engine emits (in Kafka's schemas, `weir_coord::records::consumer_group`),
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
use futures::future::{BoxFuture, FutureExt};
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use weir_meta::MetadataImage;

use crate::broker::Broker;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::groups::classic::ConversionError;
use crate::partition::ReplicatedWrite;
use weir_coord::classic::{
    GroupError, GroupSnapshot, Heartbeat as ClassicHeartbeat, JoinGroup, JoinResponse, LeaveGroup,
    LeaveResponse, LeftMember, SyncGroup, SyncResponse,
};
use weir_coord::consumer::{
    ClassicJoin, ClassicJoined, ClassicProtocol, ClassicSynced, ConsumerGroupConfig,
    ConsumerGroupEngine, ConsumerGroupError, Event, GroupDescription, HeartbeatRequest,
    HeartbeatResponse, Output, Record, TimerCommand, TimerKey, TopicLookup, TopicRef,
    CONSUMER_PROTOCOL_TYPE,
};
use weir_coord::records;
use weir_coord::records::offsets::partition_for;

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
pub(crate) struct ImageTopics<'a>(pub(crate) &'a MetadataImage);

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

    fn topic_name(&self, id: uuid::Uuid) -> Option<String> {
        self.0.topic_by_id(id).map(|topic| topic.name.clone())
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
        crate::groups::configs::apply(&self.config, image.group_configs(group))
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
                let replayed = records::consumer_group::decode(&key, Some(&value))
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
        // A member joining (epoch 0) may upgrade a classic group.
        if request.member_epoch == 0 && !groups.get(group).is_some_and(|h| h.engine.exists()) {
            match self.upgrade(broker, group, &config, &image, now) {
                Some(Ok(hosted)) => {
                    groups.insert(group.to_owned(), hosted);
                }
                Some(Err(error)) => return Ok((Err(error), None)),
                None => {}
            }
        }
        let hosted = groups
            .entry(group.to_owned())
            .or_insert_with(|| HostedGroup::new(ConsumerGroupEngine::new(group, config.clone())));
        let mut output = self.catch_up(hosted, config, &image, now);
        let topics = ImageTopics(&image);
        let handled = hosted.engine.handle(
            Event::Heartbeat {
                now_ms: now,
                request,
                fresh_member_id: uuid::Uuid::new_v4(),
            },
            &topics,
        );
        let response = handled
            .response
            .clone()
            .unwrap_or(Err(ConsumerGroupError::InvalidRequest(
                "no answer to the heartbeat",
            )));
        merge(&mut output, handled);
        let written = self.execute(broker, group, hosted, output);
        let hosted_write = hosted.last_write.clone();
        if !hosted.engine.exists() {
            groups.remove(group);
        }
        match written {
            Ok(()) => Ok((response, hosted_write)),
            Err(()) => Err(CoordinatorError::CoordinatorNotAvailable),
        }
    }

    /// Brings a hosted group up to date: new settings, and the topics of
    /// an image newer than the one it last saw. Returns what that produced.
    fn catch_up(
        &self,
        hosted: &mut HostedGroup,
        config: ConsumerGroupConfig,
        image: &MetadataImage,
        now: u64,
    ) -> Output {
        if *hosted.engine.config() != config {
            hosted.engine.set_config(config);
        }
        let mut output = Output::default();
        if hosted.engine.exists() && hosted.image_seen != image.applied_index() {
            output = hosted
                .engine
                .handle(Event::MetadataChanged { now_ms: now }, &ImageTopics(image));
        }
        hosted.image_seen = image.applied_index();
        output
    }

    /// The online upgrade of `group` if it is a classic group with members:
    /// the consumer group it becomes (its records written), or why not
    /// (GROUP_ID_NOT_FOUND, as Kafka answers when it may not upgrade).
    /// `None` when there is no such classic group.
    fn upgrade(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        config: &ConsumerGroupConfig,
        image: &Arc<MetadataImage>,
        now: u64,
    ) -> Option<Result<HostedGroup, ConsumerGroupError>> {
        let (name, config, topics) = (group.to_owned(), config.clone(), image.clone());
        let converted = broker
            .groups()
            .convert_to_consumer(broker, group, move |classic| {
                if !ConsumerGroupEngine::may_upgrade(&config, classic) {
                    return Err(ConsumerGroupError::GroupIdNotFound);
                }
                let topics = ImageTopics(&topics);
                let (engine, output) =
                    ConsumerGroupEngine::from_classic(&name, config, classic, &topics, now)
                        .map_err(|_| ConsumerGroupError::GroupIdNotFound)?;
                let entries = output
                    .records
                    .iter()
                    .map(|record| records::consumer_group::encode(&name, record))
                    .collect();
                Ok(((engine, output.timers), entries))
            })?;
        Some(match converted {
            Ok(((engine, timers), write)) => {
                let mut hosted = HostedGroup::new(engine);
                hosted.last_write = write;
                hosted.image_seen = image.applied_index();
                self.apply_timers(broker, group, &mut hosted, timers);
                Ok(hosted)
            }
            Err(ConversionError::Refused(error)) => Err(error),
            Err(ConversionError::NotWritten) => Err(ConsumerGroupError::GroupIdNotFound),
        })
    }

    /// Appends `records` (noted as the group's last write), with the
    /// classic group it became if it was downgraded; on failure the engine,
    /// ahead of the log now, is rebuilt from what the log holds.
    fn persist(
        &self,
        broker: &Broker,
        group: &str,
        hosted: &mut HostedGroup,
        records: Vec<Record>,
        downgraded: Option<&GroupSnapshot>,
    ) -> Result<Option<ReplicatedWrite>, ()> {
        if records.is_empty() {
            return Ok(None);
        }
        let mut entries: Vec<(Bytes, Option<Bytes>)> = records
            .iter()
            .map(|record| records::consumer_group::encode(group, record))
            .collect();
        if let Some(snapshot) = downgraded {
            entries.push(crate::groups::offsets::classic_group_entry(
                group,
                Some(snapshot),
            ));
        }
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
        for (name, entries) in broker.offsets().consumer_group_records(index) {
            if name != group {
                continue;
            }
            for (key, value) in entries {
                if let Ok((_, record)) = records::consumer_group::decode(&key, Some(&value)) {
                    let _ = engine.replay(&record);
                }
            }
        }
        engine
    }

    /// Writes what an event produced and arms its timers. A group that
    /// became a classic group is handed to the classic coordinator (the
    /// caller drops it here: its engine no longer exists).
    fn execute(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        hosted: &mut HostedGroup,
        output: Output,
    ) -> Result<(), ()> {
        let written = self.persist(
            broker,
            group,
            hosted,
            output.records,
            output.downgraded.as_ref(),
        );
        if written.is_err() {
            return Err(());
        }
        self.apply_timers(broker, group, hosted, output.timers);
        if let Some(snapshot) = output.downgraded {
            hosted.disarm_all();
            broker.groups().install_downgraded(broker, group, snapshot);
        }
        Ok(())
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
        let _ = self.execute(broker, group, hosted, output);
        if !hosted.engine.exists() {
            groups.remove(group);
        }
    }

    // ---- classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ----
    //
    // A classic request goes to the consumer group if `group` is one hosted
    // here, else to the classic coordinator; the choice is made, and the
    // classic coordinator fed, under the group's partition lock, so that no
    // upgrade or downgrade of the group slips in between.

    /// Runs `consumer` on the hosted consumer group `group`, or `classic`
    /// if there is none, holding the partition's lock either way.
    fn route<Q, A: Send + 'static, R: Send + 'static>(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: Q,
        consumer: impl FnOnce(&mut HostedGroup, &MetadataImage, u64, Q) -> (Answer<A, R>, Output),
        classic: impl FnOnce(Q) -> BoxFuture<'static, R>,
    ) -> BoxFuture<'static, R> {
        let Some(partition) = self.partition_of(group) else {
            return classic(request);
        };
        let mut groups = partition.lock();
        match groups.get_mut(group).filter(|h| h.engine.exists()) {
            Some(hosted) => {
                let image = broker.image();
                let now = broker.now_ms() as u64;
                let config = self.config_of(&image, group);
                let mut output = self.catch_up(hosted, config, &image, now);
                let (answer, produced) = consumer(hosted, &image, now, request);
                merge(&mut output, produced);
                let written = self.execute(broker, group, hosted, output);
                let wait = hosted.last_write.clone();
                if !hosted.engine.exists() {
                    groups.remove(group);
                }
                consumer_answer(broker, written, wait, answer)
            }
            None => classic(request),
        }
    }

    pub fn join(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: JoinGroup,
    ) -> BoxFuture<'static, JoinResponse> {
        let member_id = request.member_id.clone();
        self.route(
            broker,
            group,
            request,
            |hosted, image, now, request| {
                let join = ClassicJoin {
                    member_id: request.member_id.clone(),
                    instance_id: request.group_instance_id.clone(),
                    session_timeout_ms: request.session_timeout_ms,
                    rebalance_timeout_ms: request.rebalance_timeout_ms,
                    protocol_type: request.protocol_type.clone(),
                    protocols: request
                        .protocols
                        .iter()
                        .map(ClassicProtocol::from)
                        .collect(),
                    require_known_member_id: request.require_known_member_id,
                    client_id: request.client_id.clone(),
                    client_host: request.client_host.clone(),
                };
                let (result, output) = hosted.engine.classic_join(
                    now,
                    &join,
                    uuid::Uuid::new_v4(),
                    &ImageTopics(image),
                );
                let answer = move |result: Result<ClassicJoined, CoordinatorError>| match result {
                    Ok(joined) => JoinResponse {
                        error: None,
                        generation_id: joined.generation_id,
                        protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_owned()),
                        protocol_name: Some(joined.protocol_name),
                        leader: String::new(),
                        member_id: joined.member_id,
                        members: Vec::new(),
                        skip_assignment: false,
                    },
                    Err(error) => {
                        let member_id = match &error {
                            CoordinatorError::Group(ConsumerGroupError::MemberIdRequired(id)) => {
                                id.clone()
                            }
                            _ => member_id,
                        };
                        JoinResponse {
                            error: Some(classic_error(&error)),
                            generation_id: -1,
                            protocol_type: None,
                            protocol_name: None,
                            leader: String::new(),
                            member_id,
                            members: Vec::new(),
                            skip_assignment: false,
                        }
                    }
                };
                (
                    (result, Box::new(answer) as Box<dyn FnOnce(_) -> _ + Send>),
                    output,
                )
            },
            |request| broker.groups().join(broker, group, request).boxed(),
        )
    }

    pub fn sync(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: SyncGroup,
    ) -> BoxFuture<'static, SyncResponse> {
        self.route(
            broker,
            group,
            request,
            |hosted, image, now, request| {
                let (result, output) =
                    hosted
                        .engine
                        .classic_sync(now, &request, &ImageTopics(image));
                let (protocol_type, protocol_name) =
                    (request.protocol_type.clone(), request.protocol_name.clone());
                let answer = move |result: Result<ClassicSynced, CoordinatorError>| match result {
                    Ok(synced) => SyncResponse {
                        error: None,
                        protocol_type,
                        protocol_name,
                        assignment: synced.assignment.to_vec(),
                    },
                    Err(error) => SyncResponse {
                        error: Some(classic_error(&error)),
                        ..SyncResponse::default()
                    },
                };
                (
                    (result, Box::new(answer) as Box<dyn FnOnce(_) -> _ + Send>),
                    output,
                )
            },
            |request| broker.groups().sync(broker, group, request).boxed(),
        )
    }

    pub fn classic_heartbeat(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: ClassicHeartbeat,
    ) -> BoxFuture<'static, Result<(), GroupError>> {
        self.route(
            broker,
            group,
            request,
            |hosted, _, now, request| {
                let (result, output) = hosted.engine.classic_heartbeat(
                    now,
                    &request.member_id,
                    request.group_instance_id.as_deref(),
                    request.generation_id,
                );
                let answer =
                    |result: Result<(), CoordinatorError>| result.map_err(|e| classic_error(&e));
                (
                    (result, Box::new(answer) as Box<dyn FnOnce(_) -> _ + Send>),
                    output,
                )
            },
            |request| broker.groups().heartbeat(broker, group, request).boxed(),
        )
    }

    pub fn leave(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: LeaveGroup,
    ) -> BoxFuture<'static, LeaveResponse> {
        self.route(
            broker,
            group,
            request,
            |hosted, image, _, request| {
                let leaving: Vec<(String, Option<String>)> = request
                    .members
                    .iter()
                    .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
                    .collect();
                let (answers, output) = hosted.engine.classic_leave(&leaving, &ImageTopics(image));
                let members = request.members.clone();
                let answer = move |result: Result<
                    Vec<Result<String, ConsumerGroupError>>,
                    CoordinatorError,
                >| match result {
                    Ok(answers) => LeaveResponse {
                        error: None,
                        members: members
                            .into_iter()
                            .zip(answers)
                            .map(|(m, answer)| LeftMember {
                                member_id: answer.as_ref().map_or(m.member_id, Clone::clone),
                                group_instance_id: m.group_instance_id,
                                error: answer
                                    .err()
                                    .map(|e| classic_error(&CoordinatorError::Group(e))),
                            })
                            .collect(),
                    },
                    Err(error) => LeaveResponse {
                        error: Some(classic_error(&error)),
                        members: Vec::new(),
                    },
                };
                (
                    (
                        Ok(answers),
                        Box::new(answer) as Box<dyn FnOnce(_) -> _ + Send>,
                    ),
                    output,
                )
            },
            |request| broker.groups().leave(broker, group, request).boxed(),
        )
    }

    /// Checks an OffsetCommit of a consumer group member; `None` when
    /// `group` is not a consumer group hosted here.
    pub fn validate_offset_commit(
        &self,
        group: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Option<Result<(), ConsumerGroupError>> {
        self.check(group, |engine| {
            engine.validate_offset_commit(member_id, member_epoch, api_version)
        })
    }

    /// Checks a TxnOffsetCommit; `None` when `group` is not a consumer
    /// group hosted here.
    pub fn validate_txn_offset_commit(
        &self,
        group: &str,
        member_id: &str,
        member_epoch: i32,
        group_instance_id: Option<&str>,
    ) -> Option<Result<(), ConsumerGroupError>> {
        self.check(group, |engine| {
            engine.validate_txn_offset_commit(member_id, member_epoch, group_instance_id)
        })
    }

    /// Checks an OffsetFetch naming a member; `None` when `group` is not a
    /// consumer group hosted here.
    pub fn validate_offset_fetch(
        &self,
        group: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Option<Result<(), ConsumerGroupError>> {
        self.check(group, |engine| {
            engine.validate_offset_fetch(member_id, member_epoch)
        })
    }

    /// What `check` says of `group`'s engine; `None` when `group` is not a
    /// consumer group hosted here.
    fn check<T>(&self, group: &str, check: impl FnOnce(&ConsumerGroupEngine) -> T) -> Option<T> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        let hosted = groups.get(group).filter(|h| h.engine.exists())?;
        Some(check(&hosted.engine))
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
        self.persist(broker, group, hosted, records, None)
            .map_err(|()| CoordinatorError::CoordinatorNotAvailable)?;
        let offsets = broker
            .offsets()
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

/// Adds what a second event produced to the first's output.
fn merge(into: &mut Output, from: Output) {
    into.records.extend(from.records);
    into.timers.extend(from.timers);
    if from.downgraded.is_some() {
        into.downgraded = from.downgraded;
    }
}

/// A consumer group's answer to a classic request, and how to turn it
/// into the classic response.
type Answer<A, R> = (
    Result<A, ConsumerGroupError>,
    Box<dyn FnOnce(Result<A, CoordinatorError>) -> R + Send>,
);

/// The answer to a classic request the consumer group handled: `result`
/// (turned into the response by `respond`) once the group's last write is
/// replicated, COORDINATOR_NOT_AVAILABLE if it cannot be.
fn consumer_answer<T: Send + 'static, R: Send + 'static>(
    broker: &Arc<Broker>,
    written: Result<(), ()>,
    wait: Option<ReplicatedWrite>,
    (result, respond): Answer<T, R>,
) -> BoxFuture<'static, R> {
    let node_id = broker.node_id();
    async move {
        if written.is_err() {
            return respond(Err(CoordinatorError::CoordinatorNotAvailable));
        }
        if let Some(write) = wait {
            if write
                .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                .await
                .is_err()
            {
                return respond(Err(CoordinatorError::CoordinatorNotAvailable));
            }
        }
        respond(result.map_err(CoordinatorError::Group))
    }
    .boxed()
}

/// A consumer group's refusal of a classic request, as the classic
/// protocol's error.
fn classic_error(error: &CoordinatorError) -> GroupError {
    match error {
        CoordinatorError::Group(error) => match error {
            ConsumerGroupError::IllegalGeneration => GroupError::IllegalGeneration,
            ConsumerGroupError::InconsistentGroupProtocol => GroupError::InconsistentGroupProtocol,
            ConsumerGroupError::RebalanceInProgress => GroupError::RebalanceInProgress,
            ConsumerGroupError::MemberIdRequired(_) => GroupError::MemberIdRequired,
            ConsumerGroupError::GroupMaxSizeReached => GroupError::GroupMaxSizeReached,
            ConsumerGroupError::FencedInstanceId => GroupError::FencedInstanceId,
            _ => GroupError::UnknownMemberId,
        },
        CoordinatorError::NotCoordinator => GroupError::NotCoordinator,
        CoordinatorError::CoordinatorNotAvailable => GroupError::CoordinatorNotAvailable,
    }
}
