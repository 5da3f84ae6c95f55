//! The group coordinator: hosts a [`GroupEngine`] for every group whose
//! `__consumer_offsets` partition lives on this broker and does the engine's
//! I/O: it parks requests until the engine answers them, arms timers that feed
//! [`Event::Timer`] back, and writes group metadata records before the
//! responses that depend on them.
//!
//! The groups of each `__consumer_offsets` partition have their own mutex,
//! so groups of different partitions never wait for each other. It is held
//! only while an event is applied and its commands executed (an append to
//! `__consumer_offsets` at most), never across an await. Lock order: a
//! partition's groups, then the [`OffsetStore`](crate::groups::offsets::OffsetStore)'s;
//! the map of partitions is never held while a partition's groups are taken.
//!
//! A group is served only once its `__consumer_offsets` partition has been
//! loaded here: between the metadata naming this node leader and the load,
//! requests get COORDINATOR_LOAD_IN_PROGRESS, so no state made in that window
//! is replaced by the load.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::groups::offsets::{OffsetChange, TxnProducer};
use crate::partition::{AppendError, ReplicatedWrite};
use weir_coord::classic::{
    Command, Event, GroupConfig, GroupEngine, GroupError, GroupSnapshot, GroupState, Heartbeat,
    JoinGroup, JoinResponse, LeaveGroup, LeaveResponse, LeftMember, RequestId, Response, SyncGroup,
    SyncResponse, TimerKey,
};
use weir_coord::consumer::{ClassicGroupImage, ClassicMemberImage, ClassicProtocol};
use weir_coord::records::offsets::{partition_for, CommittedOffset};

/// Why a group could not be deleted or its offsets changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupAdminError {
    #[error("the group does not exist")]
    NotFound,
    #[error("the group has active members")]
    NotEmpty,
    #[error(transparent)]
    Membership(#[from] GroupError),
    #[error("__consumer_offsets could not be written")]
    Unavailable,
}

/// Why a transactional offset commit was refused.
#[derive(Debug, thiserror::Error)]
pub enum TxnCommitError {
    #[error(transparent)]
    Membership(#[from] GroupError),
    #[error(transparent)]
    Append(#[from] AppendError),
}

/// What OffsetDelete did.
pub struct DeletedOffsets {
    /// The partitions kept: their topics are subscribed to.
    pub refused: Vec<(String, i32)>,
    /// The deletion, to be answered once replicated.
    pub write: Option<ReplicatedWrite>,
}

/// Who commits offsets, as an OffsetCommit request names itself.
#[derive(Debug, Clone, Copy)]
pub struct Committer<'a> {
    pub member_id: &'a str,
    pub generation_id: i32,
    pub group_instance_id: Option<&'a str>,
}

/// What DescribeGroups and ListGroups report of a group.
#[derive(Debug, Clone)]
pub struct GroupSummary {
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol while Stable, empty otherwise (as Kafka reports).
    pub protocol_name: String,
    pub members: Vec<MemberSummary>,
}

#[derive(Debug, Clone)]
pub struct MemberSummary {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Only while Stable.
    pub metadata: Vec<u8>,
    /// Only while Stable.
    pub assignment: Vec<u8>,
}

struct HostedGroup {
    engine: GroupEngine,
    /// Requests parked in the engine, by id.
    waiting: HashMap<RequestId, oneshot::Sender<Response>>,
    /// Armed timers with the token that tells a firing timer it is current.
    timers: HashMap<TimerKey, (u64, JoinHandle<()>)>,
}

impl HostedGroup {
    fn new(engine: GroupEngine) -> Self {
        Self {
            engine,
            waiting: HashMap::new(),
            timers: HashMap::new(),
        }
    }

    fn disarm_all(&mut self) {
        for (_, (_, handle)) in self.timers.drain() {
            handle.abort();
        }
    }
}

/// The groups of one `__consumer_offsets` partition.
type PartitionGroups = Arc<Mutex<HashMap<String, HostedGroup>>>;

pub struct GroupCoordinator {
    config: GroupConfig,
    /// By `__consumer_offsets` partition, for the partitions whose groups
    /// are loaded here.
    partitions: RwLock<HashMap<i32, PartitionGroups>>,
    /// `__consumer_offsets`' partition count, which never changes once the
    /// topic exists (0 before).
    partition_count: AtomicI32,
    next_id: AtomicU64,
    /// Groups whose consumers read committed data only: they ask
    /// OffsetFetch for stable offsets, which only read_committed
    /// consumers do. Their lag is counted to the last stable offset.
    read_committed: Mutex<HashSet<String>>,
}

impl GroupCoordinator {
    /// A coordinator of the groups of the `coordinated` partitions of
    /// `__consumer_offsets`: those of `loaded` (every group read from the
    /// log) in other partitions are left out. Their session timers start
    /// with [`start`](Self::start).
    pub fn new(
        config: GroupConfig,
        partition_count: i32,
        coordinated: HashSet<i32>,
        loaded: Vec<(String, GroupSnapshot)>,
        now_ms: i64,
    ) -> Self {
        let now = now_ms as u64;
        let mut partitions: HashMap<i32, HashMap<String, HostedGroup>> = coordinated
            .into_iter()
            .map(|p| (p, HashMap::new()))
            .collect();
        for (group, snapshot) in loaded {
            let index = partition_for(&group, partition_count);
            if let Some(groups) = partitions.get_mut(&index) {
                let engine = GroupEngine::load(group.clone(), config.clone(), snapshot, now);
                groups.insert(group, HostedGroup::new(engine));
            }
        }
        Self {
            config,
            partitions: RwLock::new(
                partitions
                    .into_iter()
                    .map(|(p, groups)| (p, Arc::new(Mutex::new(groups))))
                    .collect(),
            ),
            partition_count: AtomicI32::new(partition_count),
            next_id: AtomicU64::new(1),
            read_committed: Mutex::default(),
        }
    }

    /// The groups of `__consumer_offsets` partition `partition`, if loaded here.
    fn partition(&self, partition: i32) -> Option<PartitionGroups> {
        self.partitions.read().get(&partition).cloned()
    }

    /// The groups of the partition `group` belongs to, if loaded here.
    fn partition_of(&self, group: &str) -> Option<PartitionGroups> {
        match self.partition_count.load(Ordering::Acquire) {
            0 => None,
            count => self.partition(partition_for(group, count)),
        }
    }

    /// Every partition's groups loaded here.
    fn all_partitions(&self) -> Vec<PartitionGroups> {
        self.partitions.read().values().cloned().collect()
    }

    /// A consumer of `group` asked for stable offsets: it reads committed
    /// data only.
    pub fn note_read_committed(&self, group: &str) {
        let mut groups = self.read_committed.lock();
        if !groups.contains(group) {
            groups.insert(group.to_owned());
        }
    }

    /// Whether `group`'s consumers read committed data only, as far as
    /// this coordinator has seen.
    pub fn reads_committed(&self, group: &str) -> bool {
        self.read_committed.lock().contains(group)
    }

    /// The `__consumer_offsets` partitions whose groups are loaded here.
    pub fn coordinated(&self) -> Vec<i32> {
        self.partitions.read().keys().copied().collect()
    }

    /// Whether the groups of `__consumer_offsets` partition `partition` are
    /// loaded here.
    pub fn coordinates(&self, partition: i32) -> bool {
        self.partitions.read().contains_key(&partition)
    }

    /// This node now coordinates the groups of `__consumer_offsets`
    /// partition `partition` (of `partition_count`): they are `loaded`
    /// (read from the log just now) and their timers armed.
    pub fn take_over(
        &self,
        broker: &Arc<Broker>,
        partition: i32,
        partition_count: i32,
        loaded: Vec<(String, GroupSnapshot)>,
    ) {
        let now = broker.now_ms() as u64;
        self.partition_count
            .store(partition_count, Ordering::Release);
        let taken = PartitionGroups::default();
        // Held from before the groups can be found: a timer that fires at
        // once waits for its group.
        let mut groups = taken.lock();
        let replaced = self.partitions.write().insert(partition, taken.clone());
        if let Some(replaced) = replaced {
            disarm(&replaced);
        }
        for (group, snapshot) in loaded {
            let engine = GroupEngine::load(group.clone(), self.config.clone(), snapshot, now);
            let hosted = groups
                .entry(group.clone())
                .or_insert(HostedGroup::new(engine));
            self.execute(broker, &group, hosted);
        }
    }

    /// Another node coordinates the groups of `__consumer_offsets`
    /// partition `partition` now: they are dropped here (requests still
    /// waiting on them are answered by their new coordinator once the
    /// clients retry).
    pub fn hand_over(&self, partition: i32) {
        let handed = self.partitions.write().remove(&partition);
        if let Some(handed) = handed {
            disarm(&handed);
        }
    }

    /// Arms the timers of the loaded groups, so that members that do not come
    /// back after a restart expire. Needs the Tokio runtime.
    pub fn start(&self, broker: &Arc<Broker>) {
        for partition in self.all_partitions() {
            let mut groups = partition.lock();
            for (group, hosted) in groups.iter_mut() {
                self.execute(broker, group, hosted);
            }
        }
    }

    // The request handlers below do their synchronous part (feeding the
    // engine) when called and return a future for the answer, so that the
    // consumer group coordinator can route a request here while it holds
    // the group's partition (no conversion of the group in between).

    pub fn join(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: JoinGroup,
    ) -> impl Future<Output = JoinResponse> + Send + 'static {
        let member_id = request.member_id.clone();
        let fresh_uuid = uuid::Uuid::new_v4();
        let answer = self.submit(broker, group, true, |request_id, now_ms| Event::Join {
            request_id,
            now_ms,
            request,
            fresh_uuid,
        });
        async move {
            match wait(answer).await {
                Ok(Some(Response::Join(response))) => response,
                Ok(_) => join_error(&member_id, GroupError::CoordinatorNotAvailable),
                Err(error) => join_error(&member_id, error),
            }
        }
    }

    pub fn sync(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: SyncGroup,
    ) -> impl Future<Output = SyncResponse> + Send + 'static {
        let answer = self.submit(broker, group, false, |request_id, now_ms| Event::Sync {
            request_id,
            now_ms,
            request,
        });
        async move {
            match wait(answer).await {
                Ok(Some(Response::Sync(response))) => response,
                Ok(None) => sync_error(GroupError::UnknownMemberId),
                Ok(Some(_)) => sync_error(GroupError::CoordinatorNotAvailable),
                Err(error) => sync_error(error),
            }
        }
    }

    pub fn heartbeat(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: Heartbeat,
    ) -> impl Future<Output = Result<(), GroupError>> + Send + 'static {
        let answer = self.submit(broker, group, false, |request_id, now_ms| {
            Event::Heartbeat {
                request_id,
                now_ms,
                request,
            }
        });
        async move {
            match wait(answer).await? {
                Some(Response::Heartbeat(result)) => result,
                None => Err(GroupError::UnknownMemberId),
                Some(_) => Err(GroupError::CoordinatorNotAvailable),
            }
        }
    }

    pub fn leave(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        request: LeaveGroup,
    ) -> impl Future<Output = LeaveResponse> + Send + 'static {
        let members = request.members.clone();
        let answer = self.submit(broker, group, false, |request_id, now_ms| Event::Leave {
            request_id,
            now_ms,
            request,
        });
        async move {
            match wait(answer).await {
                Ok(Some(Response::Leave(response))) => response,
                // Kafka answers a leave from an unknown group member by member.
                Ok(None) => LeaveResponse {
                    error: None,
                    members: members
                        .into_iter()
                        .map(|m| LeftMember {
                            member_id: m.member_id,
                            group_instance_id: m.group_instance_id,
                            error: Some(GroupError::UnknownMemberId),
                        })
                        .collect(),
                },
                Ok(Some(_)) => LeaveResponse {
                    error: Some(GroupError::CoordinatorNotAvailable),
                    members: Vec::new(),
                },
                Err(error) => LeaveResponse {
                    error: Some(error),
                    members: Vec::new(),
                },
            }
        }
    }

    /// Feeds one request to the group's engine; the answer comes on the
    /// receiver. `Ok(None)` when the group is not hosted and `create` is
    /// false.
    fn submit(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        create: bool,
        event: impl FnOnce(RequestId, u64) -> Event,
    ) -> Result<Option<oneshot::Receiver<Response>>, GroupError> {
        let (partition, _) = broker
            .coordinator_of(group)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        // None: handed over since the request was checked.
        let partition = self
            .partition(partition)
            .ok_or(GroupError::NotCoordinator)?;
        let mut groups = partition.lock();
        if !groups.contains_key(group) {
            if !create {
                return Ok(None);
            }
            let engine = GroupEngine::new(group, self.config.clone());
            groups.insert(group.to_owned(), HostedGroup::new(engine));
        }
        let hosted = groups.get_mut(group).expect("inserted above");
        let request_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        hosted.waiting.insert(request_id, reply);
        hosted
            .engine
            .handle(event(request_id, broker.now_ms() as u64));
        self.execute(broker, group, hosted);
        Ok(Some(answer))
    }

    /// Runs the engine's pending commands in order.
    fn execute(&self, broker: &Arc<Broker>, group: &str, hosted: &mut HostedGroup) {
        let mut persist_failed = false;
        // The last metadata write: responses after it wait until the
        // in-sync replicas hold it (a SyncGroup must not hand out an
        // assignment a new coordinator would not know).
        let mut persisted: Option<ReplicatedWrite> = None;
        for command in hosted.engine.take_commands() {
            match command {
                Command::Respond {
                    request_id,
                    response,
                } => {
                    // A response that follows unwritten metadata must not
                    // confirm it.
                    let response = if persist_failed {
                        fail(response, GroupError::CoordinatorNotAvailable)
                    } else {
                        response
                    };
                    let Some(reply) = hosted.waiting.remove(&request_id) else {
                        continue;
                    };
                    match persisted.clone() {
                        None => {
                            let _ = reply.send(response);
                        }
                        Some(write) => {
                            let node_id = broker.node_id();
                            tokio::spawn(async move {
                                let response = match write
                                    .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                                    .await
                                {
                                    Ok(()) => response,
                                    Err(error) => fail(response, write_failure(error)),
                                };
                                let _ = reply.send(response);
                            });
                        }
                    }
                }
                Command::ScheduleTimer { key, at_ms } => {
                    let token = self.next_id.fetch_add(1, Ordering::Relaxed);
                    let delay = Duration::from_millis(at_ms.saturating_sub(broker.now_ms() as u64));
                    let broker_ref = Arc::downgrade(broker);
                    let (group, timer) = (group.to_owned(), key.clone());
                    let handle = tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        if let Some(broker) = broker_ref.upgrade() {
                            broker.groups().fire(&broker, &group, timer, token);
                        }
                    });
                    if let Some((_, previous)) = hosted.timers.insert(key, (token, handle)) {
                        previous.abort();
                    }
                }
                Command::CancelTimer { key } => {
                    if let Some((_, handle)) = hosted.timers.remove(&key) {
                        handle.abort();
                    }
                }
                Command::PersistGroup(snapshot) => match broker.write_group(group, &snapshot) {
                    Ok(write) => persisted = write.or(persisted),
                    Err(error) => {
                        tracing::error!(group, %error, "cannot write group metadata");
                        persist_failed = true;
                    }
                },
            }
        }
    }

    /// A timer armed by [`execute`](Self::execute) has fired.
    fn fire(&self, broker: &Arc<Broker>, group: &str, key: TimerKey, token: u64) {
        let Some(partition) = self.partition_of(group) else {
            return;
        };
        let mut groups = partition.lock();
        let Some(hosted) = groups.get_mut(group) else {
            return;
        };
        if hosted.timers.get(&key).map(|(t, _)| *t) == Some(token) {
            hosted.timers.remove(&key);
        }
        hosted.engine.handle(Event::Timer {
            key,
            now_ms: broker.now_ms() as u64,
        });
        self.execute(broker, group, hosted);
    }

    /// A consumer group (KIP-848) takes over the id of `group`, an empty
    /// classic group: it is removed here and its metadata tombstoned (its
    /// committed offsets stay). False if it is no longer empty.
    pub fn convert_empty(&self, broker: &Broker, group: &str) -> bool {
        let Some(partition) = self.partition_of(group) else {
            return false;
        };
        let mut groups = partition.lock();
        if groups.get(group).map(|h| h.engine.state()) != Some(GroupState::Empty) {
            return false;
        }
        let written = broker.group_partition(group).and_then(|partition| {
            broker
                .offsets()
                .write_group(&partition, group, None, broker.now_ms())
        });
        if let Err(error) = written {
            tracing::warn!(group, %error, "cannot remove the empty classic group");
            return false;
        }
        if let Some(mut hosted) = groups.remove(group) {
            hosted.disarm_all();
        }
        true
    }

    /// An online upgrade (KIP-848): the classic group `group`, if hosted
    /// here with members, becomes a consumer group. `convert` builds the
    /// consumer group from the classic one and returns it with its records;
    /// they are written in one batch with the classic group's tombstone,
    /// and the classic group is gone once that batch is appended (requests
    /// parked in it are answered NOT_COORDINATOR, so that its members find
    /// the group again). `None` when there is no such classic group.
    pub fn convert_to_consumer<T, E>(
        &self,
        broker: &Broker,
        group: &str,
        convert: impl FnOnce(&ClassicGroupImage) -> Result<(T, Vec<(Bytes, Option<Bytes>)>), E>,
    ) -> Option<Conversion<T, E>> {
        let partition = self.partition_of(group)?;
        let mut groups = partition.lock();
        let hosted = groups.get_mut(group)?;
        let engine = &hosted.engine;
        if engine.members().is_empty() || engine.state() == GroupState::Dead {
            return None;
        }
        let image = ClassicGroupImage {
            generation_id: engine.generation_id(),
            protocol_type: engine.protocol_type().map(str::to_owned),
            protocol_name: engine.protocol_name().map(str::to_owned),
            members: engine
                .members()
                .iter()
                .map(|m| ClassicMemberImage {
                    member_id: m.member_id.clone(),
                    instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.iter().map(ClassicProtocol::from).collect(),
                    assignment: Bytes::from(m.assignment.clone()),
                })
                .collect(),
        };
        let (converted, records) = match convert(&image) {
            Ok(converted) => converted,
            Err(error) => return Some(Err(ConversionError::Refused(error))),
        };
        let mut entries = vec![crate::groups::offsets::classic_group_entry(group, None)];
        entries.extend(records);
        let write = match broker.write_consumer_group(group, entries) {
            Ok(write) => write,
            Err(error) => {
                tracing::error!(group, %error, "cannot write the upgrade of a classic group");
                return Some(Err(ConversionError::NotWritten));
            }
        };
        tracing::info!(group, "classic group upgraded to a consumer group");
        if let Some(mut hosted) = groups.remove(group) {
            hosted.engine.handle(Event::Unload {
                now_ms: broker.now_ms() as u64,
            });
            for command in hosted.engine.take_commands() {
                if let Command::Respond {
                    request_id,
                    response,
                } = command
                {
                    if let Some(reply) = hosted.waiting.remove(&request_id) {
                        let _ = reply.send(response);
                    }
                }
            }
            hosted.disarm_all();
        }
        Some(Ok((converted, write)))
    }

    /// An online downgrade (KIP-848): `group`, a consumer group a moment
    /// ago, is hosted here as the classic group `snapshot` describes (its
    /// record already written) and rebalances, so that its members rejoin.
    pub fn install_downgraded(&self, broker: &Arc<Broker>, group: &str, snapshot: GroupSnapshot) {
        let Some(partition) = self.partition_of(group) else {
            return;
        };
        let mut groups = partition.lock();
        let now = broker.now_ms() as u64;
        let mut engine = GroupEngine::load(group, self.config.clone(), snapshot, now);
        engine.rebalance(now);
        if let Some(mut replaced) = groups.insert(group.to_owned(), HostedGroup::new(engine)) {
            replaced.disarm_all();
        }
        let hosted = groups.get_mut(group).expect("inserted above");
        self.execute(broker, group, hosted);
        tracing::info!(group, "consumer group downgraded to a classic group");
    }

    /// The state of a hosted group.
    pub fn state(&self, group: &str) -> Option<GroupState> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        groups.get(group).map(|h| h.engine.state())
    }

    /// Every hosted group with its state and protocol type.
    pub fn list(&self) -> Vec<(String, GroupState, String)> {
        let mut listed = Vec::new();
        for partition in self.all_partitions() {
            let groups = partition.lock();
            listed.extend(groups.iter().map(|(name, hosted)| {
                let engine = &hosted.engine;
                (
                    name.clone(),
                    engine.state(),
                    engine.protocol_type().unwrap_or_default().to_owned(),
                )
            }));
        }
        listed
    }

    /// What DescribeGroups reports of a hosted group.
    pub fn describe(&self, group: &str) -> Option<GroupSummary> {
        let partition = self.partition_of(group)?;
        let groups = partition.lock();
        let engine = &groups.get(group)?.engine;
        let stable = engine.state() == GroupState::Stable;
        let protocol = engine.protocol_name().unwrap_or_default();
        Some(GroupSummary {
            state: engine.state(),
            protocol_type: engine.protocol_type().unwrap_or_default().to_owned(),
            protocol_name: if stable {
                protocol.to_owned()
            } else {
                String::new()
            },
            members: engine
                .members()
                .iter()
                .map(|m| MemberSummary {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(protocol).to_vec()
                    } else {
                        Vec::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        })
    }

    /// Whether a commit from `committer` is accepted now, as Kafka decides:
    /// a group nobody manages takes commits without a generation only.
    pub fn validate_commit(&self, group: &str, committer: Committer<'_>) -> Result<(), GroupError> {
        let partition = self.partition_of(group).ok_or(GroupError::NotCoordinator)?;
        let groups = partition.lock();
        Self::check_commit(groups.get(group), committer)
    }

    fn check_commit(
        hosted: Option<&HostedGroup>,
        committer: Committer<'_>,
    ) -> Result<(), GroupError> {
        match hosted {
            Some(hosted) => hosted.engine.validate_offset_commit(
                committer.member_id,
                committer.generation_id,
                committer.group_instance_id,
            ),
            None if committer.generation_id < 0 => Ok(()),
            None => Err(GroupError::IllegalGeneration),
        }
    }

    /// Validates and writes a commit atomically with respect to rebalances;
    /// returns the write, to be answered once replicated.
    pub fn commit_offsets(
        &self,
        broker: &Broker,
        group: &str,
        committer: Committer<'_>,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> Result<Option<ReplicatedWrite>, GroupAdminError> {
        let partition = self.partition_of(group).ok_or(GroupError::NotCoordinator)?;
        let groups = partition.lock();
        Self::check_commit(groups.get(group), committer)?;
        broker
            .commit_offsets(group, changes, now_ms)
            .map_err(|error| {
                tracing::error!(group, %error, "offset commit failed");
                GroupAdminError::Unavailable
            })
    }

    /// TxnOffsetCommit: validates the committer as Kafka does for
    /// transactional commits, then writes `offsets` as one transactional
    /// batch of `producer`, kept pending until the transaction ends; both
    /// atomically with respect to rebalances. Returns the partition written
    /// and the offset its high watermark must reach for the commit to be
    /// replicated (`None`: nothing to write).
    ///
    /// As Kafka's coordinator does, the commit creates a group nobody
    /// manages yet: Empty, without protocol type or members. It stays,
    /// whether the transaction commits or aborts, until
    /// [`expire_offsets`](Self::expire_offsets) finds it with neither
    /// offsets nor open transactions.
    pub fn commit_transactional_offsets(
        &self,
        broker: &Broker,
        group: &str,
        committer: Committer<'_>,
        producer: TxnProducer,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> Result<Option<ReplicatedWrite>, TxnCommitError> {
        let hosting = self.partition_of(group).ok_or(GroupError::NotCoordinator)?;
        let mut groups = hosting.lock();
        match groups.get(group) {
            Some(hosted) => hosted.engine.validate_txn_offset_commit(
                committer.member_id,
                committer.generation_id,
                committer.group_instance_id,
            )?,
            // A group nobody manages takes commits without a generation.
            None if committer.generation_id < 0 => {}
            None => return Err(GroupError::IllegalGeneration.into()),
        }
        let partition = broker.group_partition(group)?;
        let appended = broker
            .offsets()
            .commit_transactional(&partition, group, producer, offsets, now_ms)?;
        if appended.is_some() && !groups.contains_key(group) {
            let engine = GroupEngine::new(group, self.config.clone());
            groups.insert(group.to_owned(), HostedGroup::new(engine));
        }
        Ok(appended.map(|a| ReplicatedWrite::of(partition, &a)))
    }

    /// OffsetDelete: removes the group's offsets of `partitions`, except
    /// those of topics its members subscribe to, which are returned with
    /// the write to wait on before answering. A group with members of
    /// another protocol than "consumer" keeps everything.
    pub fn delete_offsets(
        &self,
        broker: &Broker,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<DeletedOffsets, GroupAdminError> {
        let hosting = self.partition_of(group).ok_or(GroupError::NotCoordinator)?;
        let groups = hosting.lock();
        let committed = broker.offsets().group_offsets(group);
        // Offsets of open transactions are deleted too, as in Kafka.
        let pending = broker.offsets().pending_partitions(group);
        let subscribed = match groups.get(group).map(|h| &h.engine) {
            None if committed.is_empty() && pending.is_empty() => {
                return Err(GroupAdminError::NotFound)
            }
            None => Vec::new(),
            Some(engine) => match engine.state() {
                GroupState::Dead => return Err(GroupAdminError::NotFound),
                GroupState::Empty => Vec::new(),
                _ if engine.protocol_type() == Some("consumer") => subscribed_topics(engine),
                _ => return Err(GroupAdminError::NotEmpty),
            },
        };
        let (refused, deleted): (Vec<_>, Vec<_>) = partitions
            .into_iter()
            .partition(|(topic, _)| subscribed.contains(topic));
        let changes = deleted
            .into_iter()
            .filter(|key| committed.iter().any(|(k, _)| k == key) || pending.contains(key))
            .map(|(topic, partition)| OffsetChange {
                topic,
                partition,
                value: None,
            })
            .collect();
        let write = broker
            .commit_offsets(group, changes, broker.now_ms())
            .map_err(|error| {
                tracing::error!(group, %error, "deleting offsets failed");
                GroupAdminError::Unavailable
            })?;
        Ok(DeletedOffsets { refused, write })
    }

    /// DeleteGroups: removes an empty group, its offsets (those of open
    /// transactions too, as Kafka does) and its metadata. Returns the write
    /// to wait on before answering.
    pub fn delete(
        &self,
        broker: &Broker,
        group: &str,
    ) -> Result<Option<ReplicatedWrite>, GroupAdminError> {
        let hosting = self.partition_of(group).ok_or(GroupError::NotCoordinator)?;
        let mut groups = hosting.lock();
        match groups.get(group).map(|h| h.engine.state()) {
            Some(GroupState::Empty) => {}
            Some(GroupState::Dead) => return Err(GroupAdminError::NotFound),
            Some(_) => return Err(GroupAdminError::NotEmpty),
            None if broker.offsets().group_offsets(group).is_empty()
                && !broker.offsets().has_open_transactions(group) =>
            {
                return Err(GroupAdminError::NotFound)
            }
            None => {}
        }
        let write = broker
            .delete_group(group, broker.now_ms())
            .map_err(|error| {
                tracing::error!(group, %error, "deleting a group failed");
                GroupAdminError::Unavailable
            })?;
        if let Some(mut hosted) = groups.remove(group) {
            hosted.disarm_all();
        }
        Ok(write)
    }

    /// Expires committed offsets older than `retention_ms` (Kafka's
    /// `offsets.retention.minutes`): for a group with members none; for an
    /// empty consumer group all of them once it has been empty that long; for
    /// a group nobody manages each offset by its commit time. As in Kafka, an
    /// offset with a transactional commit pending does not expire, and an
    /// empty group is removed only once it has neither offsets nor open
    /// transactions. Returns the offsets expired.
    ///
    /// Nothing is acknowledged to a client, so nothing waits for the
    /// in-sync replicas: an expiry lost with its leader happens again.
    pub fn expire_offsets(&self, broker: &Broker, retention_ms: u64, now_ms: u64) -> usize {
        let mut expired = 0;
        let mut candidates = broker.offsets().groups();
        for partition in self.all_partitions() {
            candidates.extend(partition.lock().keys().cloned());
        }
        candidates.sort();
        candidates.dedup();
        for group in candidates {
            let Some(hosting) = self.partition_of(&group) else {
                continue;
            };
            let mut groups = hosting.lock();
            let since_empty = match groups.get(&group) {
                Some(hosted) if hosted.engine.state() != GroupState::Empty => continue,
                Some(hosted) if hosted.engine.protocol_type().is_some() => {
                    Some(hosted.engine.state_timestamp_ms().unwrap_or(0))
                }
                _ => None,
            };
            let changes: Vec<OffsetChange> = broker
                .offsets()
                .group_offsets(&group)
                .into_iter()
                .filter(|((topic, partition), _)| {
                    !broker.offsets().has_pending(&group, topic, *partition)
                })
                .filter(|(_, committed)| {
                    let reference = since_empty
                        .unwrap_or_else(|| u64::try_from(committed.commit_timestamp).unwrap_or(0));
                    reference.saturating_add(retention_ms) <= now_ms
                })
                .map(|((topic, partition), _)| OffsetChange {
                    topic,
                    partition,
                    value: None,
                })
                .collect();
            let count = changes.len();
            if count > 0 {
                if let Err(error) = broker.commit_offsets(&group, changes, now_ms as i64) {
                    tracing::warn!(group, %error, "cannot expire offsets");
                    continue;
                }
                tracing::info!(group, offsets = count, "expired committed offsets");
                expired += count;
            }
            let empty_and_unused = groups
                .get(&group)
                .is_some_and(|h| h.engine.state() == GroupState::Empty)
                && broker.offsets().group_offsets(&group).is_empty()
                && !broker.offsets().has_open_transactions(&group);
            if empty_and_unused {
                match broker.delete_group(&group, now_ms as i64) {
                    Ok(_) => {
                        if let Some(mut hosted) = groups.remove(&group) {
                            hosted.disarm_all();
                        }
                    }
                    Err(error) => tracing::warn!(group, %error, "cannot remove an empty group"),
                }
            }
        }
        expired
    }
}

/// Stops the timers of every group of a partition no longer coordinated here.
fn disarm(partition: &PartitionGroups) {
    for hosted in partition.lock().values_mut() {
        hosted.disarm_all();
    }
}

fn join_error(member_id: &str, error: GroupError) -> JoinResponse {
    JoinResponse {
        error: Some(error),
        generation_id: -1,
        member_id: member_id.to_owned(),
        ..JoinResponse::default()
    }
}

fn sync_error(error: GroupError) -> SyncResponse {
    SyncResponse {
        error: Some(error),
        ..SyncResponse::default()
    }
}

/// A failed write to `__consumer_offsets`, as a group error.
fn write_failure(error: kafka_protocol::ResponseError) -> GroupError {
    match error {
        kafka_protocol::ResponseError::NotCoordinator => GroupError::NotCoordinator,
        _ => GroupError::CoordinatorNotAvailable,
    }
}

/// The response with `error` in place of its outcome.
fn fail(response: Response, error: GroupError) -> Response {
    match response {
        Response::Join(join) => Response::Join(join_error(&join.member_id, error)),
        Response::Sync(_) => Response::Sync(sync_error(error)),
        Response::Heartbeat(_) => Response::Heartbeat(Err(error)),
        Response::Leave(leave) => Response::Leave(leave),
    }
}

/// The topics the members of a consumer group subscribe to.
fn subscribed_topics(engine: &GroupEngine) -> Vec<String> {
    let protocol = engine.protocol_name().unwrap_or_default();
    let mut topics: Vec<String> = engine
        .members()
        .iter()
        .flat_map(|m| consumer_subscription(m.metadata(protocol)))
        .collect();
    topics.sort();
    topics.dedup();
    topics
}

/// The topics of a consumer's subscription (ConsumerProtocolSubscription),
/// empty if the metadata is not one.
fn consumer_subscription(metadata: &[u8]) -> Vec<String> {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Decodable;
    if metadata.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([metadata[0], metadata[1]]);
    let mut body = bytes::Bytes::copy_from_slice(&metadata[2..]);
    match ConsumerProtocolSubscription::decode(&mut body, version.clamp(0, 3)) {
        Ok(subscription) => subscription
            .topics
            .into_iter()
            .map(|t| t.to_string())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The outcome of an online upgrade: what the conversion built and the
/// write to wait on.
pub type Conversion<T, E> = Result<(T, Option<ReplicatedWrite>), ConversionError<E>>;

/// Why an online upgrade did not happen.
#[derive(Debug)]
pub enum ConversionError<E> {
    /// The conversion refused the group.
    Refused(E),
    /// The records could not be written.
    NotWritten,
}

/// The answer to a request [`submit`](GroupCoordinator::submit)ted.
async fn wait(
    submitted: Result<Option<oneshot::Receiver<Response>>, GroupError>,
) -> Result<Option<Response>, GroupError> {
    match submitted? {
        // The sender goes only if the group is dropped with the request parked.
        Some(answer) => answer
            .await
            .map(Some)
            .map_err(|_| GroupError::CoordinatorNotAvailable),
        None => Ok(None),
    }
}
