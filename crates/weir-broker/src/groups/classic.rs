//! The classic group coordinator: a [`GroupEngine`] for every classic group
//! stored in a `__consumer_offsets` partition this broker leads, kept in that
//! partition's shard of the coordinator runtime with the partition's offsets.
//! Every request is an event of the shard: the engine handles it, requests
//! park until it answers them, timers feed [`Event::Timer`] back as events
//! of their own, and group metadata is written through the shard before the
//! answers that depend on it, which wait until the in-sync replicas hold it.
//!
//! A group is served only once its `__consumer_offsets` partition has been
//! loaded here: between the metadata naming this node leader and the load,
//! requests get COORDINATOR_LOAD_IN_PROGRESS, so no state made in that window
//! is replaced by the load. The engines are built from the partition's
//! metadata records in the same step as the load.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::coordinator::batches::Entry;
use crate::coordinator::{
    CoordinatorError, EventOutcome, ShardContext, Timers, COORDINATOR_WRITE_TIMEOUT,
};
use crate::groups::offsets::{
    commit_entries, group_entry, write, GroupShard, GroupTurn, OffsetChange, OffsetStore,
    TxnProducer,
};
use crate::groups::GroupCoordinators;
use crate::partition::ReplicatedWrite;
use weir_coord::classic::{
    Command, Event, GroupConfig, GroupEngine, GroupError, GroupSnapshot, GroupState, Heartbeat,
    JoinGroup, JoinResponse, LeaveGroup, LeaveResponse, LeftMember, RequestId, Response, SyncGroup,
    SyncResponse, TimerKey,
};
use weir_coord::consumer::{
    ClassicGroupImage, ClassicMemberImage, ClassicProtocol, ConsumerGroupError,
};
use weir_coord::records;
use weir_coord::records::offsets::CommittedOffset;

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

/// Why an offset commit was refused or not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// The committer is not a member of the classic group as it is.
    #[error(transparent)]
    Classic(GroupError),
    /// The committer is not a member of the consumer group as it is.
    #[error(transparent)]
    Consumer(ConsumerGroupError),
    #[error("the commit was not written: {0}")]
    NotWritten(GroupError),
}

impl CommitError {
    pub fn code(&self) -> i16 {
        match self {
            Self::Classic(error) | Self::NotWritten(error) => error.code(),
            Self::Consumer(error) => error.code(),
        }
    }
}

/// Why a transactional offset commit was refused.
#[derive(Debug, thiserror::Error)]
pub enum TxnCommitError {
    #[error(transparent)]
    Membership(#[from] GroupError),
    #[error(transparent)]
    Write(#[from] CoordinatorError),
}

/// What OffsetDelete did.
pub struct DeletedOffsets {
    /// The partitions kept: their topics are subscribed to.
    pub refused: Vec<(String, i32)>,
    /// The deletion, to be answered once replicated.
    pub write: Option<ReplicatedWrite>,
}

/// What a group id names, as DescribeGroups reports it.
#[derive(Debug, Clone)]
pub enum FoundGroup {
    Classic(GroupSummary),
    /// A consumer or share group: described by their own APIs.
    OtherType,
    /// No group, but offsets committed (or pending in a transaction)
    /// under its id: an Empty group nobody manages.
    OffsetsOnly,
    Unknown,
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
    /// Disarmed when the group is dropped (removed, or its partition
    /// unloaded).
    timers: Timers<TimerKey>,
}

impl HostedGroup {
    fn new(engine: GroupEngine) -> Self {
        Self {
            engine,
            waiting: HashMap::new(),
            timers: Timers::default(),
        }
    }
}

/// The classic groups of one `__consumer_offsets` partition, in the
/// partition's shard.
#[derive(Default)]
pub struct ClassicGroups(HashMap<String, HostedGroup>);

impl ClassicGroups {
    /// The state of `group`, if it is hosted here.
    pub(crate) fn state(&self, group: &str) -> Option<GroupState> {
        self.0.get(group).map(|hosted| hosted.engine.state())
    }
}

/// Who commits offsets, owned, to take into a shard's event.
struct OwnedCommitter {
    member_id: String,
    generation_id: i32,
    group_instance_id: Option<String>,
}

impl OwnedCommitter {
    fn of(committer: Committer<'_>) -> Self {
        Self {
            member_id: committer.member_id.to_owned(),
            generation_id: committer.generation_id,
            group_instance_id: committer.group_instance_id.map(str::to_owned),
        }
    }

    fn as_committer(&self) -> Committer<'_> {
        Committer {
            member_id: &self.member_id,
            generation_id: self.generation_id,
            group_instance_id: self.group_instance_id.as_deref(),
        }
    }
}

pub struct GroupCoordinator {
    config: GroupConfig,
    offsets: Arc<OffsetStore>,
    next_id: AtomicU64,
    /// Groups whose consumers read committed data only: they ask
    /// OffsetFetch for stable offsets, which only read_committed
    /// consumers do. Their lag is counted to the last stable offset.
    read_committed: Mutex<HashSet<String>>,
}

impl GroupCoordinator {
    /// A coordinator of the classic groups stored in the `__consumer_offsets`
    /// partitions `offsets` hosts.
    pub fn new(config: GroupConfig, offsets: Arc<OffsetStore>) -> Self {
        Self {
            config,
            offsets,
            next_id: AtomicU64::new(1),
            read_committed: Mutex::default(),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Runs `op` on the shard of `group`'s partition in its turn.
    fn on_shard<R: Send + 'static>(
        &self,
        group: &str,
        op: impl FnOnce(&mut GroupTurn<'_>, &ShardContext<'_>) -> R + Send + 'static,
    ) -> Result<EventOutcome<Result<R, CoordinatorError>>, GroupError> {
        self.offsets
            .on_group_shard(group, op)
            .ok_or(GroupError::CoordinatorNotAvailable)
    }

    /// Runs the admin operation `op` in `group`'s shard's turn, queued
    /// here; the future gives its outcome.
    fn admin_turn<T: Send + 'static>(
        &self,
        group: &str,
        op: impl FnOnce(&mut GroupTurn<'_>, &ShardContext<'_>) -> Result<T, GroupAdminError>
            + Send
            + 'static,
    ) -> impl Future<Output = Result<T, GroupAdminError>> + Send + 'static {
        let turn = self.on_shard(group, op);
        async move {
            turn?
                .await
                .map_err(|error| group_error(error).into())
                .flatten()
        }
    }

    /// Runs `op` on `group` where it is hosted, at once, between two
    /// events of its shard.
    fn inspect<R>(&self, group: &str, op: impl FnOnce(Option<&HostedGroup>) -> R) -> Option<R> {
        self.offsets
            .inspect(group, |shard| op(shard.classic.0.get(group)))
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

    /// Builds the classic groups of a `__consumer_offsets` partition being
    /// loaded, from their last metadata records. Their timers are armed by
    /// [`take_over`](Self::take_over).
    pub(crate) fn load(&self, shard: &mut GroupShard, now_ms: i64) {
        shard.classic = ClassicGroups(
            shard
                .classic_snapshots()
                .into_iter()
                .map(|(group, snapshot)| {
                    let engine = GroupEngine::load(
                        group.clone(),
                        self.config.clone(),
                        snapshot,
                        now_ms as u64,
                    );
                    (group, HostedGroup::new(engine))
                })
                .collect(),
        );
    }

    /// This node now coordinates the groups of `__consumer_offsets`
    /// partition `index`, just loaded: their timers are armed.
    pub fn take_over(&self, coordinators: &Arc<GroupCoordinators>, index: i32) {
        let coordinators = coordinators.clone();
        // The event runs whether or not its outcome is awaited.
        drop(self.offsets.runtime().run(index, move |shard, context| {
            let groups: Vec<String> = shard.classic.0.keys().cloned().collect();
            for group in groups {
                with_group(&coordinators, shard, context, &group, |_| ());
            }
            Ok::<_, CoordinatorError>(())
        }));
    }

    // ---- requests, fed in their group's shard's turn ----
    //
    // The consumer group coordinator routes JoinGroup, SyncGroup, Heartbeat
    // and LeaveGroup: in the turn of the group's shard it hands each to the
    // consumer group of that id, or else to the classic group here, so that
    // no online upgrade or downgrade slips in between.

    /// JoinGroup of `group`, in its shard's turn.
    pub(crate) fn join_in(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        shard: &mut GroupTurn<'_>,
        context: &ShardContext<'_>,
        group: &str,
        request: JoinGroup,
    ) -> BoxFuture<'static, JoinResponse> {
        let member_id = request.member_id.clone();
        let fresh_uuid = uuid::Uuid::new_v4();
        let answer = self.feed(
            coordinators,
            shard,
            context,
            group,
            true,
            |request_id, now_ms| Event::Join {
                request_id,
                now_ms,
                request,
                fresh_uuid,
            },
        );
        async move {
            match answer.await {
                Ok(Some(Response::Join(response))) => response,
                Ok(_) => join_error(&member_id, GroupError::CoordinatorNotAvailable),
                Err(error) => join_error(&member_id, error),
            }
        }
        .boxed()
    }

    /// SyncGroup of `group`, in its shard's turn.
    pub(crate) fn sync_in(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        shard: &mut GroupTurn<'_>,
        context: &ShardContext<'_>,
        group: &str,
        request: SyncGroup,
    ) -> BoxFuture<'static, SyncResponse> {
        let answer = self.feed(
            coordinators,
            shard,
            context,
            group,
            false,
            |request_id, now_ms| Event::Sync {
                request_id,
                now_ms,
                request,
            },
        );
        async move {
            match answer.await {
                Ok(Some(Response::Sync(response))) => response,
                Ok(None) => sync_error(GroupError::UnknownMemberId),
                Ok(Some(_)) => sync_error(GroupError::CoordinatorNotAvailable),
                Err(error) => sync_error(error),
            }
        }
        .boxed()
    }

    /// Heartbeat of `group`, in its shard's turn.
    pub(crate) fn heartbeat_in(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        shard: &mut GroupTurn<'_>,
        context: &ShardContext<'_>,
        group: &str,
        request: Heartbeat,
    ) -> BoxFuture<'static, Result<(), GroupError>> {
        let answer = self.feed(
            coordinators,
            shard,
            context,
            group,
            false,
            |request_id, now_ms| Event::Heartbeat {
                request_id,
                now_ms,
                request,
            },
        );
        async move {
            match answer.await? {
                Some(Response::Heartbeat(result)) => result,
                None => Err(GroupError::UnknownMemberId),
                Some(_) => Err(GroupError::CoordinatorNotAvailable),
            }
        }
        .boxed()
    }

    /// LeaveGroup of `group`, in its shard's turn.
    pub(crate) fn leave_in(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        shard: &mut GroupTurn<'_>,
        context: &ShardContext<'_>,
        group: &str,
        request: LeaveGroup,
    ) -> BoxFuture<'static, LeaveResponse> {
        let members = request.members.clone();
        let answer = self.feed(
            coordinators,
            shard,
            context,
            group,
            false,
            |request_id, now_ms| Event::Leave {
                request_id,
                now_ms,
                request,
            },
        );
        async move {
            match answer.await {
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
                Ok(Some(_)) => leave_error(GroupError::CoordinatorNotAvailable),
                Err(error) => leave_error(error),
            }
        }
        .boxed()
    }

    /// Feeds one request to `group`'s engine in its shard's turn; gives the
    /// engine's answer, `None` when the group is not hosted and `create` is
    /// false.
    fn feed(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        shard: &mut GroupTurn<'_>,
        context: &ShardContext<'_>,
        group: &str,
        create: bool,
        event: impl FnOnce(RequestId, u64) -> Event,
    ) -> impl Future<Output = Result<Option<Response>, GroupError>> + Send + 'static {
        let request_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if create && !shard.classic.0.contains_key(group) {
            let engine = GroupEngine::new(group, self.config.clone());
            shard
                .classic
                .0
                .insert(group.to_owned(), HostedGroup::new(engine));
        }
        let answer = with_group(coordinators, shard, context, group, |hosted| {
            let (reply, answer) = oneshot::channel();
            hosted.waiting.insert(request_id, reply);
            hosted
                .engine
                .handle(event(request_id, coordinators.now_ms() as u64));
            answer
        });
        async move {
            match answer {
                // The sender goes only if the group is dropped with the
                // request parked.
                Some(answer) => answer
                    .await
                    .map(Some)
                    .map_err(|_| GroupError::CoordinatorNotAvailable),
                None => Ok(None),
            }
        }
    }

    /// A timer armed by [`execute`] has fired.
    fn fire(&self, coordinators: &Arc<GroupCoordinators>, group: &str, key: TimerKey, token: u64) {
        let (coordinators, name) = (coordinators.clone(), group.to_owned());
        let _ = self.on_shard(group, move |shard, context| {
            with_group(&coordinators, shard, context, &name, |hosted| {
                hosted.timers.fired(&key, token);
                hosted.engine.handle(Event::Timer {
                    key,
                    now_ms: coordinators.now_ms() as u64,
                });
            });
        });
    }

    /// The state of a hosted group.
    pub fn state(&self, group: &str) -> Option<GroupState> {
        self.inspect(group, |hosted| hosted.map(|h| h.engine.state()))
            .flatten()
    }

    /// Every hosted group with its state and protocol type.
    pub fn list(&self) -> Vec<(String, GroupState, String)> {
        self.offsets
            .runtime()
            .inspect_all(|_, shard| {
                shard
                    .classic
                    .0
                    .iter()
                    .map(|(name, hosted)| {
                        let engine = &hosted.engine;
                        (
                            name.clone(),
                            engine.state(),
                            engine.protocol_type().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect()
    }

    /// What DescribeGroups reports of a hosted group.
    pub fn describe(&self, group: &str) -> Option<GroupSummary> {
        self.inspect(group, |hosted| hosted.map(|h| summary(&h.engine)))
            .flatten()
    }

    /// What DescribeGroups finds under the id `group`, read in one turn of
    /// its shard.
    pub fn find(
        &self,
        group: &str,
    ) -> impl Future<Output = Result<FoundGroup, GroupError>> + Send + 'static {
        let name = group.to_owned();
        let turn = self.on_shard(group, move |shard, _| {
            if shard.consumer.hosts(&name) || shard.share.hosts(&name) {
                FoundGroup::OtherType
            } else if let Some(hosted) = shard.classic.0.get(&name) {
                FoundGroup::Classic(summary(&hosted.engine))
            } else if !shard.group_offsets(&name).is_empty() || shard.has_open_transactions(&name) {
                FoundGroup::OffsetsOnly
            } else {
                FoundGroup::Unknown
            }
        });
        async move { turn?.await.map_err(group_error) }
    }

    /// OffsetCommit in one turn of the group's shard, so atomically with
    /// respect to rebalances: checks `committer` against the group as it
    /// is (a consumer group's member epoch, a classic group's generation; a
    /// group nobody manages takes commits without a generation only), then
    /// writes `changes`. Gives the write, to be answered once replicated.
    pub fn commit_offsets(
        &self,
        group: &str,
        committer: Committer<'_>,
        api_version: i16,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, CommitError>> + Send + 'static {
        let (committer, name) = (OwnedCommitter::of(committer), group.to_owned());
        let turn = self.on_shard(group, move |shard, context| {
            let committer = committer.as_committer();
            let consumer = shard.consumer.validate_offset_commit(
                &name,
                committer.member_id,
                committer.generation_id,
                api_version,
            );
            match consumer {
                Some(checked) => checked.map_err(CommitError::Consumer)?,
                None => check_commit(shard.classic.0.get(&name), committer)
                    .map_err(CommitError::Classic)?,
            }
            let records = commit_entries(&name, &changes);
            write(shard, context, &records, None, now_ms).map_err(|error| {
                tracing::error!(group = name, %error, "offset commit failed");
                CommitError::NotWritten(GroupError::CoordinatorNotAvailable)
            })
        });
        async move {
            match turn {
                Ok(turn) => turn
                    .await
                    .map_err(|error| CommitError::NotWritten(group_error(error)))?,
                Err(error) => Err(CommitError::NotWritten(error)),
            }
        }
    }

    /// TxnOffsetCommit: validates the committer as Kafka does for
    /// transactional commits, then writes `offsets` as one transactional
    /// batch of `producer`, kept pending until the transaction ends; both
    /// in one turn of the group's shard, queued here. The future gives the
    /// write to wait on (`None`: nothing to write).
    ///
    /// As Kafka's coordinator does, the commit creates a group nobody
    /// manages yet: Empty, without protocol type or members. It stays,
    /// whether the transaction commits or aborts, until
    /// [`expire_offsets`](Self::expire_offsets) finds it with neither
    /// offsets nor open transactions.
    pub fn commit_transactional_offsets(
        &self,
        group: &str,
        committer: Committer<'_>,
        producer: TxnProducer,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, TxnCommitError>> + Send + 'static
    {
        let (committer, name, config) = (
            OwnedCommitter::of(committer),
            group.to_owned(),
            self.config.clone(),
        );
        let turn = self.on_shard(group, move |shard, context| {
            let committer = committer.as_committer();
            match shard.classic.0.get(&name) {
                Some(hosted) => hosted.engine.validate_txn_offset_commit(
                    committer.member_id,
                    committer.generation_id,
                    committer.group_instance_id,
                )?,
                // A group nobody manages takes commits without a generation.
                None if committer.generation_id < 0 => {}
                None => return Err(GroupError::IllegalGeneration.into()),
            }
            let records: Vec<Entry> = offsets
                .iter()
                .map(|(topic, p, value)| Entry {
                    key: records::offsets::encode_offset_key(&name, topic, *p),
                    value: Some(records::offsets::encode_offset_value(value)),
                })
                .collect();
            let written = write(shard, context, &records, Some(producer), now_ms)?;
            if written.is_some() && !shard.classic.0.contains_key(&name) {
                let engine = GroupEngine::new(&name, config);
                shard.classic.0.insert(name, HostedGroup::new(engine));
            }
            Ok(written)
        });
        async move { turn?.await? }
    }

    /// OffsetDelete: removes the group's offsets of `partitions`, except
    /// those of topics its members subscribe to, which are returned with
    /// the write to wait on before answering. A group with members of
    /// another protocol than "consumer" keeps everything. Queued here; the
    /// future gives the outcome of the shard's turn.
    pub fn delete_offsets(
        &self,
        coordinators: &GroupCoordinators,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> impl Future<Output = Result<DeletedOffsets, GroupAdminError>> + Send + 'static {
        let (now, name) = (coordinators.now_ms(), group.to_owned());
        self.admin_turn(group, move |shard, context| {
            let committed = shard.group_offsets(&name);
            // Offsets of open transactions are deleted too, as in Kafka.
            let pending = shard.pending_partitions(&name);
            let subscribed = match shard.classic.0.get(&name).map(|h| &h.engine) {
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
            let changes: Vec<OffsetChange> = deleted
                .into_iter()
                .filter(|key| committed.iter().any(|(k, _)| k == key) || pending.contains(key))
                .map(|(topic, partition)| OffsetChange {
                    topic,
                    partition,
                    value: None,
                })
                .collect();
            let records = commit_entries(&name, &changes);
            let write = write(shard, context, &records, None, now).map_err(|error| {
                tracing::error!(group = name, %error, "deleting offsets failed");
                GroupAdminError::Unavailable
            })?;
            Ok(DeletedOffsets { refused, write })
        })
    }

    /// DeleteGroups: removes an empty group, its offsets (those of open
    /// transactions too, as Kafka does) and its metadata. Queued here; the
    /// future gives the write to wait on before answering.
    pub fn delete(
        &self,
        coordinators: &GroupCoordinators,
        group: &str,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, GroupAdminError>> + Send + 'static
    {
        let (now, name) = (coordinators.now_ms(), group.to_owned());
        self.admin_turn(group, move |shard, context| {
            match shard.classic.0.get(&name).map(|h| h.engine.state()) {
                Some(GroupState::Empty) => {}
                Some(GroupState::Dead) => return Err(GroupAdminError::NotFound),
                Some(_) => return Err(GroupAdminError::NotEmpty),
                None if shard.group_offsets(&name).is_empty()
                    && !shard.has_open_transactions(&name) =>
                {
                    return Err(GroupAdminError::NotFound)
                }
                None => {}
            }
            let tombstones = shard.group_tombstones(&name);
            let write = write(shard, context, &tombstones, None, now).map_err(|error| {
                tracing::error!(group = name, %error, "deleting a group failed");
                GroupAdminError::Unavailable
            })?;
            shard.classic.0.remove(&name);
            Ok(write)
        })
    }

    /// Expires committed offsets older than `retention_ms` (Kafka's
    /// `offsets.retention.minutes`): for a group with members none; for an
    /// empty consumer group all of them once it has been empty that long; for
    /// a group nobody manages each offset by its commit time. As in Kafka, an
    /// offset with a transactional commit pending does not expire, and an
    /// empty group is removed only once it has neither offsets nor open
    /// transactions. The future gives the offsets expired, once each
    /// shard has had its turn.
    ///
    /// Nothing is acknowledged to a client, so nothing waits for the
    /// in-sync replicas: an expiry lost with its leader happens again.
    pub fn expire_offsets(
        &self,
        retention_ms: u64,
        now_ms: u64,
    ) -> impl Future<Output = usize> + Send + 'static {
        let runtime = self.offsets.runtime();
        let turns: Vec<_> = self
            .offsets
            .hosted()
            .into_iter()
            .map(|index| {
                runtime.run(index, move |shard, context| {
                    Ok::<_, CoordinatorError>(expire_in(shard, context, retention_ms, now_ms))
                })
            })
            .collect();
        async move {
            futures::future::join_all(turns)
                .await
                .into_iter()
                .map(|expired| expired.unwrap_or(0))
                .sum()
        }
    }
}

/// A consumer group (KIP-848) takes over the id of `group` if it is an
/// empty classic group, in its shard's turn: the classic group is removed
/// and its metadata tombstoned (its committed offsets stay).
pub(crate) fn remove_if_empty(
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    now_ms: i64,
) -> bool {
    if shard.classic.state(group) != Some(GroupState::Empty) {
        return false;
    }
    if let Err(error) = write(shard, context, &[group_entry(group, None)], None, now_ms) {
        tracing::warn!(group, %error, "cannot remove the empty classic group");
        return false;
    }
    shard.classic.0.remove(group);
    true
}

/// An online upgrade (KIP-848), in the shard's turn: the classic group
/// `group`, if hosted here with members, becomes a consumer group.
/// `convert` builds the consumer group from the classic one and returns it
/// with its records; they are written in one batch with the classic group's
/// tombstone, and the classic group is gone once that batch is appended
/// (requests parked in it are answered NOT_COORDINATOR, so that its members
/// find the group again). `None` when there is no such classic group.
pub(crate) fn upgrade<T, E>(
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    now_ms: i64,
    convert: impl FnOnce(&ClassicGroupImage) -> Result<(T, Vec<Entry>), E>,
) -> Option<Conversion<T, E>> {
    let engine = &shard.classic.0.get(group)?.engine;
    if engine.members().is_empty() || engine.state() == GroupState::Dead {
        return None;
    }
    let (converted, records) = match convert(&classic_image(engine)) {
        Ok(converted) => converted,
        Err(error) => return Some(Err(ConversionError::Refused(error))),
    };
    let mut entries = vec![group_entry(group, None)];
    entries.extend(records);
    let write = match write(shard, context, &entries, None, now_ms) {
        Ok(write) => write,
        Err(error) => {
            tracing::error!(group, %error, "cannot write the upgrade of a classic group");
            return Some(Err(ConversionError::NotWritten));
        }
    };
    tracing::info!(group, "classic group upgraded to a consumer group");
    if let Some(mut hosted) = shard.classic.0.remove(group) {
        hosted.engine.handle(Event::Unload {
            now_ms: now_ms as u64,
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
    }
    Some(Ok((converted, write)))
}

/// An online downgrade (KIP-848), in the shard's turn: `group`, a consumer
/// group a moment ago, is hosted here as the classic group `snapshot`
/// describes (its record already written) and rebalances, so that its
/// members rejoin.
pub(crate) fn install_downgraded(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    snapshot: GroupSnapshot,
) {
    let now = coordinators.now_ms() as u64;
    let mut engine = GroupEngine::load(group, coordinators.groups().config.clone(), snapshot, now);
    engine.rebalance(now);
    shard
        .classic
        .0
        .insert(group.to_owned(), HostedGroup::new(engine));
    with_group(coordinators, shard, context, group, |_| ());
    tracing::info!(group, "consumer group downgraded to a classic group");
}

/// [`GroupCoordinator::expire_offsets`] in one partition's shard.
fn expire_in(
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    retention_ms: u64,
    now_ms: u64,
) -> usize {
    let mut expired = 0;
    let mut candidates = shard.groups_with_offsets();
    candidates.extend(shard.classic.0.keys().cloned());
    candidates.sort();
    candidates.dedup();
    for group in candidates {
        let since_empty = match shard.classic.0.get(&group) {
            Some(hosted) if hosted.engine.state() != GroupState::Empty => continue,
            Some(hosted) if hosted.engine.protocol_type().is_some() => {
                Some(hosted.engine.state_timestamp_ms().unwrap_or(0))
            }
            _ => None,
        };
        let changes: Vec<OffsetChange> = shard
            .group_offsets(&group)
            .into_iter()
            .filter(|((topic, partition), _)| !shard.has_pending(&group, topic, *partition))
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
            let records = commit_entries(&group, &changes);
            if let Err(error) = write(shard, context, &records, None, now_ms as i64) {
                tracing::warn!(group, %error, "cannot expire offsets");
                continue;
            }
            tracing::info!(group, offsets = count, "expired committed offsets");
            expired += count;
        }
        let empty_and_unused = shard
            .classic
            .0
            .get(&group)
            .is_some_and(|h| h.engine.state() == GroupState::Empty)
            && shard.group_offsets(&group).is_empty()
            && !shard.has_open_transactions(&group);
        if empty_and_unused {
            let tombstones = shard.group_tombstones(&group);
            match write(shard, context, &tombstones, None, now_ms as i64) {
                Ok(_) => {
                    shard.classic.0.remove(&group);
                }
                Err(error) => tracing::warn!(group, %error, "cannot remove an empty group"),
            }
        }
    }
    expired
}

/// Runs `op` on `group` hosted in `shard`, then the engine's commands;
/// what they leave to write is written once the group is back in the
/// shard, which is let go meanwhile. `None` if the group is not hosted
/// there.
fn with_group<R>(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    op: impl FnOnce(&mut HostedGroup) -> R,
) -> Option<R> {
    let hosted = shard.classic.0.get_mut(group)?;
    let result = op(hosted);
    let pending = execute(coordinators, group, hosted);
    write_metadata(coordinators, shard, context, group, pending);
    Some(result)
}

/// What the engine's commands leave to do once its group is back in the
/// shard: the group's metadata to write, and the answers that follow it.
#[derive(Default)]
struct PendingMetadata {
    records: Vec<Entry>,
    answers: Vec<(oneshot::Sender<Response>, Response)>,
}

/// Runs the engine's pending commands in order: answers, timers, and the
/// group's metadata. An answer that follows metadata waits until the
/// in-sync replicas hold it (a SyncGroup must not hand out an assignment a
/// new coordinator would not know); the others go at once.
fn execute(
    coordinators: &Arc<GroupCoordinators>,
    group: &str,
    hosted: &mut HostedGroup,
) -> PendingMetadata {
    let mut pending = PendingMetadata::default();
    for command in hosted.engine.take_commands() {
        match command {
            Command::Respond {
                request_id,
                response,
            } => {
                let Some(reply) = hosted.waiting.remove(&request_id) else {
                    continue;
                };
                if pending.records.is_empty() {
                    let _ = reply.send(response);
                } else {
                    pending.answers.push((reply, response));
                }
            }
            Command::ScheduleTimer { key, at_ms } => {
                let delay =
                    Duration::from_millis(at_ms.saturating_sub(coordinators.now_ms() as u64));
                let (coordinators, group, timer) =
                    (Arc::downgrade(coordinators), group.to_owned(), key.clone());
                hosted.timers.schedule(key, delay, move |token| {
                    if let Some(coordinators) = coordinators.upgrade() {
                        coordinators
                            .groups()
                            .fire(&coordinators, &group, timer, token);
                    }
                });
            }
            Command::CancelTimer { key } => hosted.timers.cancel(&key),
            Command::PersistGroup(snapshot) => {
                pending.records.push(group_entry(group, Some(&snapshot)));
            }
        }
    }
    pending
}

/// Writes `pending`'s metadata, the shard let go meanwhile, and answers
/// what follows it once the in-sync replicas hold it; a response that
/// follows unwritten metadata must not confirm it.
fn write_metadata(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    pending: PendingMetadata,
) {
    let PendingMetadata { records, answers } = pending;
    let written = write(shard, context, &records, None, coordinators.now_ms());
    let write = match written {
        Ok(Some(write)) => write,
        Ok(None) => return,
        Err(error) => {
            tracing::error!(group, %error, "cannot write group metadata");
            for (reply, response) in answers {
                let _ = reply.send(fail(response, GroupError::CoordinatorNotAvailable));
            }
            return;
        }
    };
    if answers.is_empty() {
        return;
    }
    let node_id = coordinators.node_id();
    tokio::spawn(async move {
        let replicated = write.replicated(node_id, COORDINATOR_WRITE_TIMEOUT).await;
        for (reply, response) in answers {
            let response = match &replicated {
                Ok(()) => response,
                Err(error) => fail(response, write_failure(*error)),
            };
            let _ = reply.send(response);
        }
    });
}

fn check_commit(hosted: Option<&HostedGroup>, committer: Committer<'_>) -> Result<(), GroupError> {
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

/// The classic group as a consumer group takes it over.
fn classic_image(engine: &GroupEngine) -> ClassicGroupImage {
    ClassicGroupImage {
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
    }
}

/// What DescribeGroups reports of a group.
fn summary(engine: &GroupEngine) -> GroupSummary {
    let stable = engine.state() == GroupState::Stable;
    let protocol = engine.protocol_name().unwrap_or_default();
    GroupSummary {
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
    }
}

/// The runtime's refusal as a group error.
pub(crate) fn group_error(error: CoordinatorError) -> GroupError {
    write_failure(error.response_error())
}

pub(crate) fn join_error(member_id: &str, error: GroupError) -> JoinResponse {
    JoinResponse {
        error: Some(error),
        generation_id: -1,
        member_id: member_id.to_owned(),
        ..JoinResponse::default()
    }
}

pub(crate) fn sync_error(error: GroupError) -> SyncResponse {
    SyncResponse {
        error: Some(error),
        ..SyncResponse::default()
    }
}

pub(crate) fn leave_error(error: GroupError) -> LeaveResponse {
    LeaveResponse {
        error: Some(error),
        members: Vec::new(),
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
