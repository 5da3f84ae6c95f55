//! The coordinator of consumer groups (KIP-848): a [`ConsumerGroupEngine`]
//! for every such group stored in a `__consumer_offsets` partition this
//! node leads, kept in that partition's shard of the coordinator runtime
//! with its classic groups and offsets. Every request and timer is an
//! event of the shard: the engine handles it, the records it emits (in
//! Kafka's schemas, `weir_coord::records::consumer_group`) are written
//! through the shard, and the answer waits until the in-sync replicas hold
//! them.
//!
//! A group's classic and consumer forms live in the same shard, so the
//! online upgrade and downgrade between them (KIP-848's migration) each
//! happen in one event, and a classic request is routed to the group's
//! form in the turn that serves it: no request sees a group half
//! converted. A new leader of the partition rebuilds the engines from their
//! records as it loads the shard, so members keep their epochs and
//! assignments through a failover.
//!
//! The cluster's topics reach an engine lazily: before a group handles a
//! request, a metadata image newer than the one it last saw is fed to it
//! as [`Event::MetadataChanged`].

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{ready, BoxFuture, FutureExt};
use weir_meta::MetadataImage;

use crate::coordinator::batches::Entry;
use crate::coordinator::{
    CoordinatorError as RuntimeError, EventOutcome, ShardContext, COORDINATOR_WRITE_TIMEOUT,
};
use crate::groups::classic::{self, ConversionError};
use crate::groups::hosted::{self, HostedGroups};
use crate::groups::offsets::{write, GroupShard, GroupTurn, OffsetStore};
use crate::groups::GroupCoordinators;
use crate::partition::ReplicatedWrite;
use weir_coord::classic::{
    GroupError, Heartbeat as ClassicHeartbeat, JoinGroup, JoinResponse, LeaveGroup, LeaveResponse,
    LeftMember, SyncGroup, SyncResponse,
};
use weir_coord::consumer::{
    ClassicJoin, ClassicJoined, ClassicProtocol, ClassicSynced, ConsumerGroupConfig,
    ConsumerGroupEngine, ConsumerGroupError, Event, GroupDescription, HeartbeatRequest,
    HeartbeatResponse, Output, Record, TimerCommand, TimerKey, TopicLookup, TopicRef,
    CONSUMER_PROTOCOL_TYPE,
};
use weir_coord::records;
use weir_coord::records::consumer_group::is_consumer_group_key;

/// Why a request got no answer from the group itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerCoordinatorError {
    #[error(transparent)]
    Group(#[from] ConsumerGroupError),
    /// This node does not (or no longer) coordinate the group.
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    /// The group's records could not be written or replicated.
    #[error("the group's state could not be written to __consumer_offsets")]
    CoordinatorNotAvailable,
}

impl ConsumerCoordinatorError {
    pub fn code(&self) -> i16 {
        match self {
            Self::Group(error) => error.code(),
            Self::NotCoordinator => 16,
            Self::CoordinatorNotAvailable => 15,
        }
    }
}

impl From<RuntimeError> for ConsumerCoordinatorError {
    fn from(error: RuntimeError) -> Self {
        match error {
            RuntimeError::NotCoordinator => Self::NotCoordinator,
            _ => Self::CoordinatorNotAvailable,
        }
    }
}

type HostedGroup = hosted::HostedGroup<ConsumerGroupEngine, TimerKey>;

/// The consumer groups of one `__consumer_offsets` partition, in the
/// partition's shard.
pub type ConsumerGroups = HostedGroups<ConsumerGroupEngine, TimerKey>;

impl ConsumerGroups {
    /// Checks an OffsetFetch naming a member; `None` when `group` is not a
    /// consumer group hosted here.
    pub(crate) fn validate_offset_fetch(
        &self,
        group: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Option<Result<(), ConsumerGroupError>> {
        let hosted = self.get(group)?;
        Some(hosted.engine.validate_offset_fetch(member_id, member_epoch))
    }

    /// Checks an OffsetCommit of a member of `group`; `None` when `group`
    /// is not a consumer group hosted here.
    pub(crate) fn validate_offset_commit(
        &self,
        group: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Option<Result<(), ConsumerGroupError>> {
        let hosted = self.get(group)?;
        Some(
            hosted
                .engine
                .validate_offset_commit(member_id, member_epoch, api_version),
        )
    }
}

pub struct ConsumerGroupCoordinator {
    config: ConsumerGroupConfig,
    offsets: Arc<OffsetStore>,
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
    /// A coordinator of the consumer groups stored in the
    /// `__consumer_offsets` partitions `offsets` hosts.
    pub fn new(config: ConsumerGroupConfig, offsets: Arc<OffsetStore>) -> Self {
        Self { config, offsets }
    }

    /// The settings of `group`: the broker's, with the group's own configs
    /// (GROUP config resource) on top.
    fn config_of(&self, image: &MetadataImage, group: &str) -> ConsumerGroupConfig {
        crate::config::groups::apply(&self.config, image.group_configs(group))
            .unwrap_or_else(|_| self.config.clone())
    }

    /// Builds the consumer groups of a `__consumer_offsets` partition being
    /// loaded, from their records. Their timers are armed by
    /// [`take_over`](Self::take_over).
    pub(crate) fn load(&self, shard: &mut GroupShard, image: &MetadataImage) {
        let engines: Vec<_> = shard
            .group_names(is_consumer_group_key)
            .into_iter()
            .map(|group| {
                let engine = self.replayed(shard, image, &group);
                (group, engine)
            })
            .collect();
        shard.consumer = ConsumerGroups::of(engines);
    }

    /// `group` as its records in the shard leave it.
    fn replayed(
        &self,
        shard: &GroupShard,
        image: &MetadataImage,
        group: &str,
    ) -> ConsumerGroupEngine {
        let mut engine = ConsumerGroupEngine::new(group, self.config_of(image, group));
        for entry in shard.records_of_group(group, is_consumer_group_key) {
            let replayed = records::consumer_group::decode(&entry.key, entry.value.as_deref())
                .map_err(|e| e.to_string())
                .and_then(|(_, record)| engine.replay(&record).map_err(|e| e.to_string()));
            if let Err(error) = replayed {
                tracing::warn!(group, %error, "skipping a consumer group record");
            }
        }
        engine
    }

    /// This node now coordinates the groups of `__consumer_offsets`
    /// partition `index`, just loaded: their timers are armed.
    pub fn take_over(&self, coordinators: &Arc<GroupCoordinators>, index: i32) {
        let coordinators = coordinators.clone();
        // The event runs whether or not its outcome is awaited.
        drop(self.offsets.runtime().run(index, move |shard, context| {
            let now = coordinators.now_ms() as u64;
            let groups = shard.consumer.names();
            for group in groups {
                if let Some(output) =
                    with_group(shard, &group, |hosted| hosted.engine.on_loaded(now))
                {
                    let _ = execute(&coordinators, shard, context, &group, output);
                }
            }
            Ok::<_, RuntimeError>(())
        }));
    }

    /// Runs `op` on the shard of `group`'s partition in its turn.
    fn on_shard<R: Send + 'static>(
        &self,
        group: &str,
        op: impl FnOnce(&mut GroupTurn<'_>, &ShardContext<'_>) -> R + Send + 'static,
    ) -> Result<EventOutcome<Result<R, RuntimeError>>, ConsumerCoordinatorError> {
        self.offsets
            .on_group_shard(group, op)
            .ok_or(ConsumerCoordinatorError::CoordinatorNotAvailable)
    }

    /// Runs `op` on `group` if it is a consumer group hosted here, at once,
    /// between two events of its shard.
    fn inspect<R>(&self, group: &str, op: impl FnOnce(&HostedGroup) -> R) -> Option<R> {
        self.offsets
            .inspect(group, |shard| shard.consumer.get(group).map(op))
            .flatten()
    }

    /// Whether `group` is a consumer group hosted here.
    pub fn hosts(&self, group: &str) -> bool {
        self.inspect(group, |_| ()).is_some()
    }

    /// Applies one ConsumerGroupHeartbeat in its group's shard's turn; the
    /// answer, once what it changed is replicated.
    pub fn heartbeat(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: HeartbeatRequest,
    ) -> impl Future<Output = Result<HeartbeatResponse, ConsumerCoordinatorError>> + Send + 'static
    {
        let (shard_coordinators, name) = (coordinators.clone(), group.to_owned());
        let turn = self.on_shard(group, move |shard, context| {
            heartbeat_in(&shard_coordinators, shard, context, &name, request)
        });
        let node_id = coordinators.node_id();
        async move {
            let (response, write) = turn?.await??;
            if let Some(write) = write {
                write
                    .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                    .await
                    .map_err(|_| ConsumerCoordinatorError::CoordinatorNotAvailable)?;
            }
            response.map_err(ConsumerCoordinatorError::Group)
        }
    }

    /// A timer armed by [`apply_timers`] has fired: an event of the
    /// group's shard.
    fn fire(&self, coordinators: &Arc<GroupCoordinators>, group: &str, key: TimerKey, token: u64) {
        let (coordinators, name) = (coordinators.clone(), group.to_owned());
        let _ = self.on_shard(group, move |shard, context| {
            let image = coordinators.image();
            let output = with_group(shard, &name, |hosted| {
                hosted.timers.fired(&key, token);
                hosted.engine.handle(
                    Event::Timer {
                        now_ms: coordinators.now_ms() as u64,
                        key,
                    },
                    &ImageTopics(&image),
                )
            });
            if let Some(output) = output {
                let _ = execute(&coordinators, shard, context, &name, output);
            }
        });
    }

    // ---- classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ----
    //
    // A classic request goes to the consumer group if `group` is one hosted
    // here, else to the classic group of that id; the choice is made, and
    // the group fed, in one turn of the group's shard, so that no upgrade
    // or downgrade of the group slips in between.

    /// Runs `consumer` on the hosted consumer group `group`, or `classic`
    /// on the shard if there is none, in the shard's turn; `refused`
    /// answers when the shard cannot run it, `share_group` when `group`
    /// names a share group (Kafka refuses classic requests to one).
    #[allow(clippy::too_many_arguments)]
    fn route<Q, A, R>(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: Q,
        consumer: impl FnOnce(&mut HostedGroup, &MetadataImage, u64, Q) -> (Answer<A, R>, Output)
            + Send
            + 'static,
        classic: impl FnOnce(
                &Arc<GroupCoordinators>,
                &mut GroupTurn<'_>,
                &ShardContext<'_>,
                &str,
                Q,
            ) -> BoxFuture<'static, R>
            + Send
            + 'static,
        refused: impl FnOnce(GroupError) -> R + Send + 'static,
        share_group: R,
    ) -> BoxFuture<'static, R>
    where
        Q: Send + 'static,
        A: Send + 'static,
        R: Send + 'static,
    {
        let (shard_coordinators, name) = (coordinators.clone(), group.to_owned());
        let turn = self.on_shard(group, move |shard, context| {
            let coordinators = shard_coordinators;
            if shard.share.hosts(&name) {
                return ready(share_group).boxed();
            }
            let Some(mut hosted) = shard.consumer.take(&name) else {
                return classic(&coordinators, shard, context, &name, request);
            };
            let image = coordinators.image();
            let now = coordinators.now_ms() as u64;
            let config = coordinators.consumer_groups().config_of(&image, &name);
            let mut output = catch_up(&mut hosted, config, &image, now);
            let (answer, produced) = consumer(&mut hosted, &image, now, request);
            merge(&mut output, produced);
            shard.consumer.put_back(&name, hosted);
            let written = execute(&coordinators, shard, context, &name, output);
            consumer_answer(&coordinators, written, answer)
        });
        let turn = match turn {
            Ok(turn) => turn,
            Err(error) => return ready(refused(classic_error(&error))).boxed(),
        };
        async move {
            match turn.await {
                Ok(answer) => answer.await,
                Err(error) => refused(classic::group_error(error)),
            }
        }
        .boxed()
    }

    pub fn join(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: JoinGroup,
    ) -> BoxFuture<'static, JoinResponse> {
        let member_id = request.member_id.clone();
        let refused_member = member_id.clone();
        self.route(
            coordinators,
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
                let answer =
                    move |result: Result<ClassicJoined, ConsumerCoordinatorError>| match result {
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
                                ConsumerCoordinatorError::Group(
                                    ConsumerGroupError::MemberIdRequired(id),
                                ) => id.clone(),
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
            |coordinators, shard, context, group, request| {
                coordinators
                    .groups()
                    .join_in(coordinators, shard, context, group, request)
            },
            move |error| classic::join_error(&refused_member, error),
            classic::join_error("", GroupError::InconsistentGroupProtocol),
        )
    }

    pub fn sync(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: SyncGroup,
    ) -> BoxFuture<'static, SyncResponse> {
        self.route(
            coordinators,
            group,
            request,
            |hosted, image, now, request| {
                let (result, output) =
                    hosted
                        .engine
                        .classic_sync(now, &request, &ImageTopics(image));
                let (protocol_type, protocol_name) =
                    (request.protocol_type.clone(), request.protocol_name.clone());
                let answer =
                    move |result: Result<ClassicSynced, ConsumerCoordinatorError>| match result {
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
            |coordinators, shard, context, group, request| {
                coordinators
                    .groups()
                    .sync_in(coordinators, shard, context, group, request)
            },
            classic::sync_error,
            classic::sync_error(GroupError::UnknownMemberId),
        )
    }

    pub fn classic_heartbeat(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: ClassicHeartbeat,
    ) -> BoxFuture<'static, Result<(), GroupError>> {
        self.route(
            coordinators,
            group,
            request,
            |hosted, _, now, request| {
                let (result, output) = hosted.engine.classic_heartbeat(
                    now,
                    &request.member_id,
                    request.group_instance_id.as_deref(),
                    request.generation_id,
                );
                let answer = |result: Result<(), ConsumerCoordinatorError>| {
                    result.map_err(|e| classic_error(&e))
                };
                (
                    (result, Box::new(answer) as Box<dyn FnOnce(_) -> _ + Send>),
                    output,
                )
            },
            |coordinators, shard, context, group, request| {
                coordinators
                    .groups()
                    .heartbeat_in(coordinators, shard, context, group, request)
            },
            Err,
            Err(GroupError::UnknownMemberId),
        )
    }

    pub fn leave(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: LeaveGroup,
    ) -> BoxFuture<'static, LeaveResponse> {
        self.route(
            coordinators,
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
                    ConsumerCoordinatorError,
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
                                    .map(|e| classic_error(&ConsumerCoordinatorError::Group(e))),
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
            |coordinators, shard, context, group, request| {
                coordinators
                    .groups()
                    .leave_in(coordinators, shard, context, group, request)
            },
            classic::leave_error,
            classic::leave_error(GroupError::UnknownMemberId),
        )
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

    /// What `check` says of `group`'s engine; `None` when `group` is not a
    /// consumer group hosted here.
    fn check<T>(&self, group: &str, check: impl FnOnce(&ConsumerGroupEngine) -> T) -> Option<T> {
        self.inspect(group, |hosted| check(&hosted.engine))
    }

    /// DeleteGroups of a consumer group, in its shard's turn: refused while
    /// it has members; otherwise its records, its offsets (those of open
    /// transactions too) and its metadata are tombstoned in one batch.
    /// Queued here; the future gives the write to wait on.
    pub fn delete(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, ConsumerCoordinatorError>> + Send + 'static
    {
        let (coordinators, name) = (coordinators.clone(), group.to_owned());
        let turn = self.on_shard(group, move |shard, context| {
            let mut hosted = shard
                .consumer
                .take(&name)
                .ok_or(ConsumerGroupError::GroupIdNotFound)?;
            let records = match hosted.engine.delete() {
                Ok(records) => records,
                Err(error) => {
                    shard.consumer.put_back(&name, hosted);
                    return Err(error.into());
                }
            };
            let mut entries = encode(&name, &records);
            entries.extend(shard.group_tombstones(&name));
            // Out of the shard while its tombstones are written: it is
            // being deleted.
            match write(shard, context, &entries, None, coordinators.now_ms()) {
                Ok(write) => Ok(write),
                Err(error) => {
                    tracing::error!(group = name, %error, "deleting a consumer group failed");
                    hosted.engine = coordinators.consumer_groups().replayed(
                        shard,
                        &coordinators.image(),
                        &name,
                    );
                    shard.consumer.put_back(&name, hosted);
                    Err(ConsumerCoordinatorError::CoordinatorNotAvailable)
                }
            }
        });
        async move { turn?.await? }
    }

    /// What ConsumerGroupDescribe shows of `group`, if hosted here.
    pub fn describe(&self, group: &str) -> Option<GroupDescription> {
        self.inspect(group, |hosted| hosted.engine.describe())
    }

    /// Every consumer group hosted here, with its description.
    pub fn list(&self) -> Vec<GroupDescription> {
        self.offsets
            .runtime()
            .inspect_all(|_, shard| {
                shard
                    .consumer
                    .iter()
                    .map(|(_, hosted)| hosted.engine.describe())
                    .collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect()
    }
}

/// Runs `op` on the consumer group `group` hosted in `shard`; `None` if it
/// is not hosted there. A group `op` deletes goes.
fn with_group<R>(
    shard: &mut GroupTurn<'_>,
    group: &str,
    op: impl FnOnce(&mut HostedGroup) -> R,
) -> Option<R> {
    let mut hosted = shard.consumer.take(group)?;
    let result = op(&mut hosted);
    shard.consumer.put_back(group, hosted);
    Some(result)
}

/// One ConsumerGroupHeartbeat in its group's shard's turn: the engine's
/// answer and the group's last write, to wait on before answering.
#[allow(clippy::type_complexity)]
fn heartbeat_in(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    request: HeartbeatRequest,
) -> Result<
    (
        Result<HeartbeatResponse, ConsumerGroupError>,
        Option<ReplicatedWrite>,
    ),
    ConsumerCoordinatorError,
> {
    // A group id names one group, of one type.
    if shard.share.hosts(group) {
        return Ok((Err(ConsumerGroupError::GroupIdNotFound), None));
    }
    let image = coordinators.image();
    let now = coordinators.now_ms() as u64;
    let config = coordinators.consumer_groups().config_of(&image, group);
    if !shard.consumer.hosts(group) {
        // An empty classic group becomes a consumer group; one with members
        // too, as group.consumer.migration.policy allows, when a member
        // joins (epoch 0).
        let removed = classic::remove_if_empty(shard, context, group, now as i64);
        if !removed && request.member_epoch == 0 {
            match upgrade(coordinators, shard, context, group, &config, &image, now) {
                Some(Ok(hosted)) => shard.consumer.put_back(group, hosted),
                Some(Err(error)) => return Ok((Err(error), None)),
                None => {}
            }
        }
    }
    let mut hosted = shard
        .consumer
        .take(group)
        .unwrap_or_else(|| HostedGroup::new(ConsumerGroupEngine::new(group, config.clone())));
    let mut output = catch_up(&mut hosted, config, &image, now);
    let handled = hosted.engine.handle(
        Event::Heartbeat {
            now_ms: now,
            request,
            fresh_member_id: uuid::Uuid::new_v4(),
        },
        &ImageTopics(&image),
    );
    let response = handled
        .response
        .clone()
        .unwrap_or(Err(ConsumerGroupError::InvalidRequest(
            "no answer to the heartbeat",
        )));
    merge(&mut output, handled);
    shard.consumer.put_back(group, hosted);
    match execute(coordinators, shard, context, group, output) {
        Ok(last_write) => Ok((response, last_write)),
        Err(()) => Err(ConsumerCoordinatorError::CoordinatorNotAvailable),
    }
}

/// Brings a hosted group up to date: new settings, and the topics of an
/// image newer than the one it last saw. Returns what that produced.
fn catch_up(
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

/// The online upgrade of `group` if it is a classic group with members, in
/// the shard's turn: the consumer group it becomes (its records written),
/// or why not (GROUP_ID_NOT_FOUND, as Kafka answers when it may not
/// upgrade). `None` when there is no such classic group.
fn upgrade(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    config: &ConsumerGroupConfig,
    image: &MetadataImage,
    now: u64,
) -> Option<Result<HostedGroup, ConsumerGroupError>> {
    let converted = classic::upgrade(shard, context, group, now as i64, |classic| {
        if !ConsumerGroupEngine::may_upgrade(config, classic) {
            return Err(ConsumerGroupError::GroupIdNotFound);
        }
        let (engine, output) = ConsumerGroupEngine::from_classic(
            group,
            config.clone(),
            classic,
            &ImageTopics(image),
            now,
        )
        .map_err(|_| ConsumerGroupError::GroupIdNotFound)?;
        let entries = encode(group, &output.records);
        Ok(((engine, output.timers), entries))
    })?;
    Some(match converted {
        Ok(((engine, timers), write)) => {
            let mut hosted = HostedGroup::new(engine);
            hosted.last_write = write;
            hosted.image_seen = image.applied_index();
            apply_timers(coordinators, group, &mut hosted, timers);
            Ok(hosted)
        }
        Err(ConversionError::Refused(error)) => Err(error),
        Err(ConversionError::NotWritten) => Err(ConsumerGroupError::GroupIdNotFound),
    })
}

/// `records` of `group` as entries to write.
fn encode(group: &str, records: &[Record]) -> Vec<Entry> {
    records
        .iter()
        .map(|record| {
            let (key, value) = records::consumer_group::encode(group, record);
            Entry { key, value }
        })
        .collect()
}

/// Writes what an event of `group` produced, the group back in the shard
/// and the shard let go meanwhile, then arms its timers; gives the group's
/// last write, to wait on before answering. A group that became a classic
/// group is hosted as one in the shard (its consumer group went when it
/// was put back: its engine no longer exists). On a failed write the
/// engine, ahead of the log now, is rebuilt from what the log holds.
fn execute(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    output: Output,
) -> Result<Option<ReplicatedWrite>, ()> {
    let mut written = None;
    if !output.records.is_empty() {
        let mut entries = encode(group, &output.records);
        if let Some(snapshot) = &output.downgraded {
            entries.push(crate::groups::offsets::group_entry(group, Some(snapshot)));
        }
        match write(shard, context, &entries, None, coordinators.now_ms()) {
            Ok(write) => written = write,
            Err(error) => {
                tracing::error!(group, %error, "cannot write consumer group records");
                let groups = coordinators.consumer_groups();
                let engine = groups.replayed(shard, &coordinators.image(), group);
                match shard.consumer.get_mut(group) {
                    Some(hosted) => {
                        hosted.timers.clear();
                        hosted.engine = engine;
                    }
                    None => shard.consumer.put_back(group, HostedGroup::new(engine)),
                }
                return Err(());
            }
        }
    }
    if let Some(snapshot) = output.downgraded {
        classic::install_downgraded(coordinators, shard, context, group, snapshot);
        return Ok(written);
    }
    let Some(hosted) = shard.consumer.get_mut(group) else {
        return Ok(written);
    };
    if written.is_some() {
        hosted.last_write = written;
    }
    apply_timers(coordinators, group, hosted, output.timers);
    Ok(hosted.last_write.clone())
}

fn apply_timers(
    coordinators: &Arc<GroupCoordinators>,
    group: &str,
    hosted: &mut HostedGroup,
    timers: Vec<TimerCommand>,
) {
    for timer in timers {
        match timer {
            TimerCommand::Schedule { key, at_ms } => {
                let delay =
                    Duration::from_millis(at_ms.saturating_sub(coordinators.now_ms() as u64));
                let (coordinators, group, fired) =
                    (Arc::downgrade(coordinators), group.to_owned(), key.clone());
                hosted.timers.schedule(key, delay, move |token| {
                    if let Some(coordinators) = coordinators.upgrade() {
                        coordinators
                            .consumer_groups()
                            .fire(&coordinators, &group, fired, token);
                    }
                });
            }
            TimerCommand::Cancel { key } => hosted.timers.cancel(&key),
        }
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
    Box<dyn FnOnce(Result<A, ConsumerCoordinatorError>) -> R + Send>,
);

/// The answer to a classic request the consumer group handled: `result`
/// (turned into the response by `respond`) once the group's last write is
/// replicated, COORDINATOR_NOT_AVAILABLE if it cannot be.
fn consumer_answer<T: Send + 'static, R: Send + 'static>(
    coordinators: &Arc<GroupCoordinators>,
    written: Result<Option<ReplicatedWrite>, ()>,
    (result, respond): Answer<T, R>,
) -> BoxFuture<'static, R> {
    let node_id = coordinators.node_id();
    async move {
        let Ok(wait) = written else {
            return respond(Err(ConsumerCoordinatorError::CoordinatorNotAvailable));
        };
        if let Some(write) = wait {
            if write
                .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                .await
                .is_err()
            {
                return respond(Err(ConsumerCoordinatorError::CoordinatorNotAvailable));
            }
        }
        respond(result.map_err(ConsumerCoordinatorError::Group))
    }
    .boxed()
}

/// A consumer group's refusal of a classic request, as the classic
/// protocol's error.
fn classic_error(error: &ConsumerCoordinatorError) -> GroupError {
    match error {
        ConsumerCoordinatorError::Group(error) => match error {
            ConsumerGroupError::IllegalGeneration => GroupError::IllegalGeneration,
            ConsumerGroupError::InconsistentGroupProtocol => GroupError::InconsistentGroupProtocol,
            ConsumerGroupError::RebalanceInProgress => GroupError::RebalanceInProgress,
            ConsumerGroupError::MemberIdRequired(_) => GroupError::MemberIdRequired,
            ConsumerGroupError::GroupMaxSizeReached => GroupError::GroupMaxSizeReached,
            ConsumerGroupError::FencedInstanceId => GroupError::FencedInstanceId,
            _ => GroupError::UnknownMemberId,
        },
        ConsumerCoordinatorError::NotCoordinator => GroupError::NotCoordinator,
        ConsumerCoordinatorError::CoordinatorNotAvailable => GroupError::CoordinatorNotAvailable,
    }
}
