//! The coordinator of share groups (KIP-932): a [`ShareGroupEngine`] for
//! every share group stored in a `__consumer_offsets` partition this node
//! leads, kept in that partition's shard of the coordinator runtime with
//! its classic and consumer groups and offsets. A heartbeat, an admin
//! change and a member's session ending are events of the shard: the
//! engine handles it, the records it emits (key types 9 to 14) are written
//! through the shard, and the answer waits until the in-sync replicas hold
//! them. A new leader of the partition rebuilds the engines from their
//! records as it loads the shard.
//!
//! A group id names one group, of one type: the shard holds the groups of
//! every type of its partition, so a heartbeat checks that in the same
//! turn that serves it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use weir_meta::MetadataImage;

use crate::config::groups::{share_settings, ShareBrokerConfig};
use crate::coordinator::batches::Entry;
use crate::coordinator::{
    CoordinatorError as RuntimeError, EventOutcome, ShardContext, COORDINATOR_WRITE_TIMEOUT,
};
use crate::groups::consumer::ImageTopics;
use crate::groups::hosted::{self, HostedGroups};
use crate::groups::offsets::{write, GroupShard, GroupTurn, OffsetStore};
use crate::groups::GroupCoordinators;
use crate::partition::ReplicatedWrite;
use weir_coord::consumer::TopicMetadata;
use weir_coord::records;
use weir_coord::records::share_group::is_share_group_key;
use weir_coord::share::{
    ShareGroupConfig, ShareGroupEngine, ShareGroupError, ShareGroupState, ShareHeartbeat,
    ShareHeartbeatResponse, ShareOutput,
};

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

impl From<RuntimeError> for ShareCoordinatorError {
    fn from(error: RuntimeError) -> Self {
        match error {
            RuntimeError::NotCoordinator => Self::NotCoordinator,
            _ => Self::CoordinatorNotAvailable,
        }
    }
}

/// A share group as ShareGroupDescribe and the operators' tools see it.
#[derive(Debug, Clone)]
pub struct ShareGroupDescription {
    pub state: ShareGroupState,
}

type HostedGroup = hosted::HostedGroup<ShareGroupEngine, String>;

/// The share groups of one `__consumer_offsets` partition, in the
/// partition's shard. A group's timers are its members' sessions.
pub type ShareGroups = HostedGroups<ShareGroupEngine, String>;

pub struct ShareGroupCoordinator {
    config: ShareBrokerConfig,
    offsets: Arc<OffsetStore>,
}

impl ShareGroupCoordinator {
    /// A coordinator of the share groups stored in the
    /// `__consumer_offsets` partitions `offsets` hosts.
    pub fn new(config: ShareBrokerConfig, offsets: Arc<OffsetStore>) -> Self {
        Self { config, offsets }
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

    /// Builds the share groups of a `__consumer_offsets` partition being
    /// loaded, from their records. Their session timers are armed by
    /// [`take_over`](Self::take_over).
    pub(crate) fn load(&self, shard: &mut GroupShard, image: &MetadataImage) {
        let engines: Vec<_> = shard
            .group_names(is_share_group_key)
            .into_iter()
            .map(|group| {
                let engine = self.replayed(shard, image, &group);
                (group, engine)
            })
            .collect();
        shard.share = ShareGroups::of(engines);
    }

    /// `group` as its records in the shard leave it.
    fn replayed(&self, shard: &GroupShard, image: &MetadataImage, group: &str) -> ShareGroupEngine {
        let mut engine = ShareGroupEngine::new(group, self.config_of(image, group));
        for entry in shard.records_of_group(group, is_share_group_key) {
            match records::share_group::decode(&entry.key, entry.value.as_deref()) {
                Ok((_, record)) => engine.replay(&record),
                Err(error) => tracing::warn!(group, %error, "skipping a share group record"),
            }
        }
        engine
    }

    /// This node now coordinates the share groups of `__consumer_offsets`
    /// partition `index`, just loaded: their members' sessions are armed.
    pub fn take_over(&self, coordinators: &Arc<GroupCoordinators>, index: i32) {
        let coordinators = coordinators.clone();
        // The event runs whether or not its outcome is awaited.
        drop(self.offsets.runtime().run(index, move |shard, context| {
            let now = coordinators.now_ms() as u64;
            let groups = shard.share.names();
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
    ) -> Result<EventOutcome<Result<R, RuntimeError>>, ShareCoordinatorError> {
        self.offsets
            .on_group_shard(group, op)
            .ok_or(ShareCoordinatorError::NotCoordinator)
    }

    /// Runs `op` on `group` if it is a share group hosted here, at once,
    /// between two events of its shard.
    fn inspect<R>(&self, group: &str, op: impl FnOnce(&HostedGroup) -> R) -> Option<R> {
        self.offsets
            .inspect(group, |shard| shard.share.get(group).map(op))
            .flatten()
    }

    /// Whether `group` is a share group hosted here.
    pub fn hosts(&self, group: &str) -> bool {
        self.inspect(group, |_| ()).is_some()
    }

    /// The hosted share group `group`, if there is one.
    pub fn describe(&self, group: &str) -> Option<ShareGroupDescription> {
        self.inspect(group, |hosted| ShareGroupDescription {
            state: hosted.engine.state().clone(),
        })
    }

    /// Every share group hosted here, with whether it has members.
    pub fn list(&self) -> Vec<(String, bool)> {
        let mut listed: Vec<(String, bool)> = self
            .offsets
            .runtime()
            .inspect_all(|_, shard| {
                shard
                    .share
                    .iter()
                    .map(|(group, hosted)| {
                        (group.clone(), !hosted.engine.state().members.is_empty())
                    })
                    .collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect();
        listed.sort();
        listed
    }

    /// Deletes the empty share group `group` (DeleteGroups): writes the
    /// tombstones of its records, in the shard's turn queued here; the
    /// future gives the write to await.
    pub fn delete(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, ShareCoordinatorError>> + Send + 'static
    {
        self.change(coordinators, group, ShareGroupEngine::delete)
    }

    /// The group's offsets were altered on `added` or deleted on `removed`:
    /// writes the topics where it may hold state, in the shard's turn
    /// queued here; the future gives the write to await.
    pub fn state_topics_changed(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        added: Vec<TopicMetadata>,
        removed: Vec<String>,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, ShareCoordinatorError>> + Send + 'static
    {
        self.change(coordinators, group, move |engine| {
            Ok(engine.state_topics_changed(added, &removed))
        })
    }

    /// Applies `change` to the existing group `group` in its shard's turn
    /// and writes what it produced; the write to await, if any. A group it
    /// deleted goes.
    fn change(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        change: impl FnOnce(&mut ShareGroupEngine) -> Result<ShareOutput, ShareGroupError>
            + Send
            + 'static,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, ShareCoordinatorError>> + Send + 'static
    {
        let (coordinators, name) = (coordinators.clone(), group.to_owned());
        let turn = self.on_shard(group, move |shard, context| {
            let output = with_group(shard, &name, |hosted| change(&mut hosted.engine))
                .ok_or(ShareGroupError::GroupIdNotFound)??;
            if output.records.is_empty() {
                return Ok(None);
            }
            execute(&coordinators, shard, context, &name, output)
                .map_err(|()| ShareCoordinatorError::CoordinatorNotAvailable)
        });
        async move { turn?.await? }
    }

    /// Applies one ShareGroupHeartbeat in its group's shard's turn; the
    /// answer, once what it changed is replicated.
    pub fn heartbeat(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        request: ShareHeartbeat,
    ) -> impl Future<Output = Result<ShareHeartbeatResponse, ShareCoordinatorError>> + Send + 'static
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
                    .map_err(|_| ShareCoordinatorError::CoordinatorNotAvailable)?;
            }
            response.map_err(ShareCoordinatorError::Group)
        }
    }

    /// A member's session timer has fired: an event of the group's shard.
    fn session_ended(
        &self,
        coordinators: &Arc<GroupCoordinators>,
        group: &str,
        member: String,
        token: u64,
    ) {
        let (coordinators, name) = (coordinators.clone(), group.to_owned());
        let _ = self.on_shard(group, move |shard, context| {
            let output = with_group(shard, &name, |hosted| {
                if !hosted.timers.fired(&member, token) {
                    return None;
                }
                let output = hosted.engine.session_expired(
                    coordinators.now_ms() as u64,
                    &member,
                    &ImageTopics(&coordinators.image()),
                );
                if !output.ended.is_empty() {
                    tracing::info!(
                        group = name,
                        member,
                        "removed a share group member whose session ended"
                    );
                }
                Some(output)
            });
            if let Some(output) = output.flatten() {
                let _ = execute(&coordinators, shard, context, &name, output);
            }
        });
    }
}

/// Runs `op` on the share group `group` hosted in `shard`; `None` if it is
/// not hosted there. A group `op` deletes goes.
fn with_group<R>(
    shard: &mut GroupTurn<'_>,
    group: &str,
    op: impl FnOnce(&mut HostedGroup) -> R,
) -> Option<R> {
    let mut hosted = shard.share.take(group)?;
    let result = op(&mut hosted);
    shard.share.put_back(group, hosted);
    Some(result)
}

/// One ShareGroupHeartbeat in its group's shard's turn: the engine's answer
/// and the group's last write, to wait on before answering.
#[allow(clippy::type_complexity)]
fn heartbeat_in(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    request: ShareHeartbeat,
) -> Result<
    (
        Result<ShareHeartbeatResponse, ShareGroupError>,
        Option<ReplicatedWrite>,
    ),
    ShareCoordinatorError,
> {
    // A group id names one group, of one type.
    if shard.consumer.hosts(group) || shard.classic.state(group).is_some() {
        return Err(ShareCoordinatorError::NotShareGroup(group.to_owned()));
    }
    let image = coordinators.image();
    let now = coordinators.now_ms() as u64;
    let config = coordinators.share_groups().config_of(&image, group);
    let mut hosted = shard
        .share
        .take(group)
        .unwrap_or_else(|| HostedGroup::new(ShareGroupEngine::new(group, config.clone())));
    hosted.engine.set_config(config);
    let topics = ImageTopics(&image);
    let mut output = ShareOutput::default();
    if hosted.engine.exists() && hosted.image_seen != image.applied_index() {
        output = hosted.engine.metadata_changed(&topics);
    }
    hosted.image_seen = image.applied_index();
    let (response, produced) = hosted.engine.heartbeat(now, &request, &topics);
    merge(&mut output, produced);
    shard.share.put_back(group, hosted);
    match execute(coordinators, shard, context, group, output) {
        Ok(last_write) => Ok((response, last_write)),
        Err(()) => Err(ShareCoordinatorError::CoordinatorNotAvailable),
    }
}

/// Writes what an event of `group` produced, the group back in the shard
/// and the shard let go meanwhile, then arms its members' sessions; gives
/// the group's last write, to wait on before answering. On a failed write
/// the engine, ahead of the log now, is rebuilt from what the log holds.
fn execute(
    coordinators: &Arc<GroupCoordinators>,
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    group: &str,
    output: ShareOutput,
) -> Result<Option<ReplicatedWrite>, ()> {
    let mut written = None;
    if !output.records.is_empty() {
        let entries: Vec<Entry> = output
            .records
            .iter()
            .map(|record| {
                let (key, value) = records::share_group::encode(group, record);
                Entry { key, value }
            })
            .collect();
        match write(shard, context, &entries, None, coordinators.now_ms()) {
            Ok(write) => written = write,
            Err(error) => {
                tracing::error!(group, %error, "cannot write share group records");
                let groups = coordinators.share_groups();
                let engine = groups.replayed(shard, &coordinators.image(), group);
                match shard.share.get_mut(group) {
                    Some(hosted) => {
                        hosted.timers.clear();
                        hosted.engine = engine;
                    }
                    None => shard.share.put_back(group, HostedGroup::new(engine)),
                }
                return Err(());
            }
        }
    }
    let Some(hosted) = shard.share.get_mut(group) else {
        return Ok(written);
    };
    if written.is_some() {
        hosted.last_write = written;
    }
    for (member, at_ms) in output.sessions {
        let delay = Duration::from_millis(at_ms.saturating_sub(coordinators.now_ms() as u64));
        let (coordinators, group, ended) = (
            Arc::downgrade(coordinators),
            group.to_owned(),
            member.clone(),
        );
        hosted.timers.schedule(member, delay, move |token| {
            if let Some(coordinators) = coordinators.upgrade() {
                coordinators
                    .share_groups()
                    .session_ended(&coordinators, &group, ended, token);
            }
        });
    }
    // The records an ended member acquired stay with it until its share
    // session closes (its last acknowledgements may still come) or their
    // locks expire, as in Kafka: the partitions' leaders are elsewhere.
    for member in output.ended {
        hosted.timers.cancel(&member);
    }
    Ok(hosted.last_write.clone())
}

fn merge(into: &mut ShareOutput, from: ShareOutput) {
    into.records.extend(from.records);
    into.sessions.extend(from.sessions);
    into.ended.extend(from.ended);
}
