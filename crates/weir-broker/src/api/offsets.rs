//! FindCoordinator, OffsetCommit, OffsetFetch and OffsetDelete: the
//! committed offsets of groups.

use std::future::Future;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use std::sync::Arc;

use weir_meta::{AclOperation, ResourceType};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::coordinator::{CoordinatorError, COORDINATOR_WRITE_TIMEOUT};
use crate::groups::classic::{CommitError, Committer, DeletedOffsets, GroupAdminError};
use crate::groups::offsets::{FetchedOffsets, OffsetChange, MAX_METADATA_BYTES, OFFSETS_TOPIC};
use crate::partition::ReplicatedWrite;
use crate::txn::TRANSACTION_STATE_TOPIC;
use weir_coord::records::offsets::CommittedOffset;

const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// The protocol's error for a code this module produces.
fn kafka_error(code: i16) -> ResponseError {
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}

fn partition_exists(broker: &Broker, topic: &str, partition: i32) -> bool {
    broker.with_image(|image| {
        image
            .topic(topic)
            .and_then(|t| t.partition(partition))
            .is_some()
    })
}

/// One partition of an OffsetCommit or TxnOffsetCommit: the metadata to
/// write with its offset, or why it is not written, checked in Kafka's
/// order: the error of the whole group, an unknown partition, metadata over
/// `offset.metadata.max.bytes`.
fn check_partition_commit(
    broker: &Broker,
    group_error: Option<ResponseError>,
    topic: &str,
    partition: i32,
    metadata: Option<StrBytes>,
) -> Result<String, ResponseError> {
    let metadata = metadata.map(|m| m.to_string()).unwrap_or_default();
    if let Some(error) = group_error {
        Err(error)
    } else if !partition_exists(broker, topic, partition) {
        Err(ResponseError::UnknownTopicOrPartition)
    } else if metadata.len() > MAX_METADATA_BYTES {
        Err(ResponseError::OffsetMetadataTooLarge)
    } else {
        Ok(metadata)
    }
}

/// The answers to a commit's partitions of one topic: each partition's own
/// error, or `None` for the outcome of the write.
type Answers = Vec<(i32, Option<ResponseError>)>;

pub(super) fn find_coordinator(
    broker: &Broker,
    ctx: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys = if ctx.version >= 4 {
        request.coordinator_keys
    } else {
        vec![request.key]
    };
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            let coordinator = Coordinator::default().with_key(key.clone());
            let refuse = |error: ResponseError, message: String| {
                coordinator
                    .clone()
                    .with_node_id(BrokerId(-1))
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            };
            // Finding a coordinator needs Describe on its group or
            // transactional id.
            let (denied, kind) = match request.key_type {
                GROUP_KEY => (ResponseError::GroupAuthorizationFailed, ResourceType::Group),
                _ => (
                    ResponseError::TransactionalIdAuthorizationFailed,
                    ResourceType::TransactionalId,
                ),
            };
            if matches!(request.key_type, GROUP_KEY | TRANSACTION_KEY)
                && !ctx.authorized(broker, AclOperation::Describe, kind, &key)
            {
                return refuse(denied, denied.to_string());
            }
            let (topic, found) = match request.key_type {
                GROUP_KEY => (OFFSETS_TOPIC, broker.coordinator_of(&key)),
                TRANSACTION_KEY => (TRANSACTION_STATE_TOPIC, broker.txn_coordinator_of(&key)),
                other => {
                    return refuse(
                        ResponseError::InvalidRequest,
                        format!("unknown coordinator key type {other}"),
                    )
                }
            };
            // As Kafka: the internal topic is created on first use, in the
            // background; the client asks again.
            let Some((_, leader)) = found else {
                if let Err(error) = broker.auto_create_topic(topic) {
                    tracing::warn!(%error, "cannot create {topic}");
                }
                return refuse(
                    ResponseError::CoordinatorNotAvailable,
                    format!("{topic} is being created"),
                );
            };
            let listener = ctx.channel.listener();
            let node = broker.with_image(|image| {
                let node = image.live_brokers().find(|b| b.id == leader)?;
                let (host, port) = node.endpoint(listener)?;
                Some((node.id, host.to_owned(), port))
            });
            let Some((node_id, host, port)) = node else {
                return refuse(
                    ResponseError::CoordinatorNotAvailable,
                    format!("the {topic} partition of {key:?} has no leader at the moment"),
                );
            };
            coordinator
                .with_node_id(BrokerId(node_id))
                .with_host(StrBytes::from_string(host))
                .with_port(i32::from(port))
        })
        .collect();
    if ctx.version >= 4 {
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    // v4+ leaves a found coordinator's message at the generated default
    // "", as Kafka does; v1–v3 carry Kafka's `Errors.NONE.message()`.
    let only = coordinators.into_iter().next().unwrap_or_default();
    let message = match (ctx.version, only.error_code) {
        (0, _) => None,
        (_, 0) => Some(StrBytes::from_static_str("NONE")),
        _ => only.error_message,
    };
    FindCoordinatorResponse::default()
        .with_error_code(only.error_code)
        .with_error_message(message)
        .with_node_id(only.node_id)
        .with_host(only.host)
        .with_port(only.port)
}

/// OffsetCommit: validates and writes the commit in one turn of the
/// group's `__consumer_offsets` shard, and answers once the in-sync
/// replicas of that partition hold it (as Kafka writes commits with
/// acks=all): an acknowledged commit survives the loss of its coordinator.
pub(super) fn offset_commit(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: OffsetCommitRequest,
) -> Reply {
    let (answers, commit) = start_offset_commit(broker, &ctx, request);
    let Some(commit) = commit else {
        return Reply::Now(Some(ctx.respond(&commit_response(answers, None))));
    };
    let node_id = broker.node_id();
    Reply::Later(Box::pin(async move {
        let outcome = match commit.await {
            Ok(Some(write)) => write
                .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                .await
                .err(),
            Ok(None) => None,
            Err(error) => Some(kafka_error(error.code())),
        };
        Some(ctx.respond(&commit_response(answers, outcome)))
    }))
}

/// What OffsetCommit checks before the group sees it: each partition's
/// own error, and the commit of the rest, to await (`None` when the
/// request is refused as a whole).
#[allow(clippy::type_complexity)]
fn start_offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    request: OffsetCommitRequest,
) -> (
    Vec<(TopicName, Answers)>,
    Option<impl Future<Output = Result<Option<ReplicatedWrite>, CommitError>> + Send + 'static>,
) {
    let group = request.group_id.0.to_string();
    let group_error = if group.is_empty() {
        Some(ResponseError::InvalidGroupId)
    } else if !ctx.authorized(broker, AclOperation::Read, ResourceType::Group, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else if let Err(code) = broker.check_coordinator(&group) {
        Some(kafka_error(code))
    } else {
        None
    };
    let now = broker.now_ms();
    let mut changes = Vec::new();
    let mut answers: Vec<(TopicName, Answers)> = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        // Committing needs Read on the topic too.
        let topic_error = group_error.or_else(|| {
            (!ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name))
                .then_some(ResponseError::TopicAuthorizationFailed)
        });
        let partitions = topic
            .partitions
            .into_iter()
            .map(|p| {
                let error = match check_partition_commit(
                    broker,
                    topic_error,
                    &name,
                    p.partition_index,
                    p.committed_metadata,
                ) {
                    Err(error) => Some(error),
                    Ok(metadata) => {
                        changes.push(OffsetChange {
                            topic: name.clone(),
                            partition: p.partition_index,
                            value: Some(CommittedOffset {
                                offset: p.committed_offset,
                                leader_epoch: if ctx.version >= 6 {
                                    p.committed_leader_epoch
                                } else {
                                    -1
                                },
                                metadata,
                                commit_timestamp: now,
                            }),
                        });
                        None
                    }
                };
                (p.partition_index, error)
            })
            .collect();
        answers.push((topic.name, partitions));
    }
    if group_error.is_some() || changes.is_empty() {
        return (answers, None);
    }
    // A consumer group (KIP-848) checks the member epoch, a classic group
    // the generation, in the turn that writes.
    let committer = Committer {
        member_id: &request.member_id,
        generation_id: request.generation_id_or_member_epoch,
        group_instance_id: request.group_instance_id.as_deref(),
    };
    let commit = broker
        .groups()
        .commit_offsets(&group, committer, ctx.version, changes, now);
    (answers, Some(commit))
}

/// The OffsetCommit response: each partition's own error, else `outcome`.
fn commit_response(
    answers: Vec<(TopicName, Answers)>,
    outcome: Option<ResponseError>,
) -> OffsetCommitResponse {
    let topics = answers
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, error)| {
                    let code = error.or(outcome).map_or(0, |e| e.code());
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// What OffsetFetch answers for one partition.
enum Fetched {
    /// The committed offset, if any.
    Committed(Option<CommittedOffset>),
    /// `require_stable` was asked and a transaction has an offset for the
    /// partition pending: UNSTABLE_OFFSET_COMMIT, so that a read_committed
    /// consumer waits rather than start from an offset that may yet change.
    Unstable,
    /// The principal may not describe the topic.
    Denied,
}

/// A group's committed offsets for the requested partitions (all it has
/// when `topics` is `None`): `(topic, [(partition, fetched)])`.
type GroupOffsets = Vec<(String, Vec<(i32, Fetched)>)>;

/// What OffsetFetch answers of one group, from what its shard gave.
/// Topics the principal may not describe are left out of "all the group's
/// offsets", and answered TOPIC_AUTHORIZATION_FAILED when named.
fn fetched_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    read: FetchedOffsets,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupOffsets {
    let FetchedOffsets {
        mut committed,
        pending,
    } = read;
    let fetched = |topic: &str, partition: i32, committed: Option<CommittedOffset>| {
        let key = (topic.to_owned(), partition);
        if require_stable && pending.binary_search(&key).is_ok() {
            Fetched::Unstable
        } else {
            Fetched::Committed(committed)
        }
    };
    match topics {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, partitions)| {
                let allowed =
                    ctx.authorized(broker, AclOperation::Describe, ResourceType::Topic, &topic);
                let found = partitions
                    .into_iter()
                    .map(|p| {
                        let committed = committed.remove(&(topic.clone(), p));
                        let answer = if allowed {
                            fetched(&topic, p, committed)
                        } else {
                            Fetched::Denied
                        };
                        (p, answer)
                    })
                    .collect();
                (topic, found)
            })
            .collect(),
        None => {
            let mut by_topic: std::collections::BTreeMap<String, Vec<(i32, Fetched)>> =
                Default::default();
            for ((topic, partition), committed) in committed {
                if !ctx.may(AclOperation::Describe, ResourceType::Topic, &topic) {
                    continue;
                }
                let answer = fetched(&topic, partition, Some(committed));
                by_topic.entry(topic).or_default().push((partition, answer));
            }
            by_topic.into_iter().collect()
        }
    }
}

/// Reads `group`'s offsets for OffsetFetch in a turn of its shard, after
/// the checks made here (Describe on the group, the coordinator), checking
/// a consumer group's `member` if named.
async fn fetch_group(
    broker: &Broker,
    ctx: &RequestContext,
    group: &str,
    member: Option<(Option<String>, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<GroupOffsets, i16> {
    may_describe_group(broker, ctx, group).and_then(|()| broker.check_coordinator(group))?;
    if require_stable {
        broker.groups().note_read_committed(group);
    }
    let read = broker
        .offsets()
        .fetch(group, member)
        .await
        .map_err(|error| error.code())?;
    Ok(fetched_offsets(broker, ctx, read, topics, require_stable))
}

/// The fields of one partition's answer, shared by the v1–v7 and v8+
/// response shapes: offset, leader epoch, metadata, error code.
fn answer(version: i16, fetched: &Fetched) -> (i64, i32, Option<StrBytes>, i16) {
    match fetched {
        Fetched::Committed(Some(c)) => (
            c.offset,
            if version >= 5 { c.leader_epoch } else { -1 },
            Some(StrBytes::from_string(c.metadata.clone())),
            0,
        ),
        Fetched::Committed(None) => (-1, -1, Some(StrBytes::default()), 0),
        Fetched::Unstable => (
            -1,
            -1,
            Some(StrBytes::default()),
            ResponseError::UnstableOffsetCommit.code(),
        ),
        Fetched::Denied => (
            -1,
            -1,
            Some(StrBytes::default()),
            ResponseError::TopicAuthorizationFailed.code(),
        ),
    }
}

pub(super) async fn offset_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let name = |topic: String| TopicName(StrBytes::from_string(topic));
    if ctx.version >= 8 {
        let groups = request.groups.into_iter().map(|g| async move {
            let group = g.group_id.0.to_string();
            // v9+: a member of a consumer group names itself and its epoch
            // (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
            let member_id = g.member_id.filter(|m| !m.is_empty()).map(|m| m.to_string());
            let topics = g.topics.map(|topics| {
                topics
                    .into_iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes))
                    .collect()
            });
            let member = Some((member_id, g.member_epoch));
            let read = fetch_group(broker, ctx, &group, member, topics, request.require_stable);
            let offsets = match read.await {
                Ok(offsets) => offsets,
                Err(code) => {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(code)
                }
            };
            let topics = offsets
                .into_iter()
                .map(|(topic, partitions)| {
                    let partitions = partitions.into_iter().map(|(p, c)| {
                        let (offset, epoch, metadata, code) = answer(ctx.version, &c);
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(p)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(epoch)
                            .with_metadata(metadata)
                            .with_error_code(code)
                    });
                    OffsetFetchResponseTopics::default()
                        .with_name(name(topic))
                        .with_partitions(partitions.collect())
                })
                .collect();
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id)
                .with_topics(topics)
        });
        let groups = futures::future::join_all(groups).await;
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let group = request.group_id.0.to_string();
    let topics = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    // `require_stable` exists from v7 on.
    let require_stable = ctx.version >= 7 && request.require_stable;
    let offsets = match fetch_group(broker, ctx, &group, None, topics, require_stable).await {
        Ok(offsets) => offsets,
        Err(code) if ctx.version >= 2 => {
            return OffsetFetchResponse::default().with_error_code(code);
        }
        Err(code) => {
            // Before v2 only partitions carry an error.
            let topics = request.topics.unwrap_or_default().into_iter().map(|t| {
                let partitions = t.partition_indexes.into_iter().map(|p| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                        .with_error_code(code)
                });
                OffsetFetchResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(partitions.collect())
            });
            return OffsetFetchResponse::default().with_topics(topics.collect());
        }
    };
    let topics = offsets
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions.into_iter().map(|(p, c)| {
                let (offset, epoch, metadata, code) = answer(ctx.version, &c);
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(metadata)
                    .with_error_code(code)
            });
            OffsetFetchResponseTopic::default()
                .with_name(name(topic))
                .with_partitions(partitions.collect())
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// OffsetDelete: answered once the in-sync replicas of the group's
/// `__consumer_offsets` partition hold the deletion.
pub(super) async fn offset_delete(
    broker: &Broker,
    ctx: &RequestContext,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let (response, write) = delete_offsets(broker, ctx, request).await;
    let Some(write) = write else {
        return response;
    };
    match write
        .replicated(broker.node_id(), COORDINATOR_WRITE_TIMEOUT)
        .await
    {
        Ok(()) => response,
        Err(error) => OffsetDeleteResponse::default().with_error_code(error.code()),
    }
}

/// OffsetDelete up to the shard's turn: the answer as far as the local
/// write goes, and the write to wait on.
async fn delete_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    request: OffsetDeleteRequest,
) -> (OffsetDeleteResponse, Option<ReplicatedWrite>) {
    let refuse = |error: ResponseError| {
        (
            OffsetDeleteResponse::default().with_error_code(error.code()),
            None,
        )
    };
    let group = request.group_id.0.to_string();
    if group.is_empty() {
        return refuse(ResponseError::InvalidGroupId);
    }
    if !ctx.authorized(broker, AclOperation::Delete, ResourceType::Group, &group) {
        return refuse(ResponseError::GroupAuthorizationFailed);
    }
    if let Err(code) = broker.check_coordinator(&group) {
        return refuse(kafka_error(code));
    }
    let mut requested = Vec::new();
    let mut unknown = Vec::new();
    let mut denied = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let allowed = ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name);
        for p in &topic.partitions {
            let key = (name.clone(), p.partition_index);
            if !allowed {
                denied.push(key);
            } else if partition_exists(broker, &key.0, key.1) {
                requested.push(key);
            } else {
                unknown.push(key);
            }
        }
    }
    let DeletedOffsets { refused, write } = match broker
        .groups()
        .delete_offsets(broker.group_coordinators(), &group, requested)
        .await
    {
        Ok(deleted) => deleted,
        Err(error) => {
            let code = match error {
                GroupAdminError::NotFound => ResponseError::GroupIdNotFound,
                GroupAdminError::NotEmpty => ResponseError::NonEmptyGroup,
                GroupAdminError::Membership(e) => kafka_error(e.code()),
                GroupAdminError::Unavailable => ResponseError::CoordinatorNotAvailable,
            };
            return refuse(code);
        }
    };
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let key = (name.clone(), p.partition_index);
                    let code = if denied.contains(&key) {
                        ResponseError::TopicAuthorizationFailed.code()
                    } else if unknown.contains(&key) {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else if refused.contains(&key) {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else {
                        0
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    (OffsetDeleteResponse::default().with_topics(topics), write)
}

/// TxnOffsetCommit: the offsets a transaction consumed, written to the
/// group's `__consumer_offsets` partition as one transactional batch of the
/// producer and answered once the in-sync replicas have it. They stay
/// pending (invisible to OffsetFetch) until the transaction's marker commits
/// or aborts them.
pub(super) async fn txn_offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    request: kafka_protocol::messages::TxnOffsetCommitRequest,
) -> kafka_protocol::messages::TxnOffsetCommitResponse {
    use crate::groups::classic::TxnCommitError;
    use crate::groups::offsets::TxnProducer;
    use crate::partition::AppendError;

    let group = request.group_id.0.to_string();
    // Before v3 the request names no member: generation -1, member "".
    let committer = Committer {
        member_id: &request.member_id,
        generation_id: request.generation_id,
        group_instance_id: request.group_instance_id.as_deref(),
    };
    let producer = TxnProducer {
        id: request.producer_id.0,
        epoch: request.producer_epoch,
    };
    // A consumer group (KIP-848) checks the member epoch the generation
    // field carries; a classic group, with the write, the generation.
    let consumer_group = broker.consumer_groups().validate_txn_offset_commit(
        &group,
        &request.member_id,
        request.generation_id,
        request.group_instance_id.as_deref(),
    );
    let group_error = if group.is_empty() {
        Some(ResponseError::InvalidGroupId)
    } else if !ctx.authorized(
        broker,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &request.transactional_id,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.authorized(broker, AclOperation::Read, ResourceType::Group, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else if let Err(code) = broker.check_coordinator(&group) {
        Some(kafka_error(code))
    } else if let Some(Err(error)) = &consumer_group {
        Some(kafka_error(error.code()))
    } else {
        None
    };
    let now = broker.now_ms();
    let mut offsets = Vec::new();
    let mut responses: Vec<(TopicName, Answers)> = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let topic_error = group_error.or_else(|| {
            (!ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name))
                .then_some(ResponseError::TopicAuthorizationFailed)
        });
        let partitions = topic
            .partitions
            .into_iter()
            .map(|p| {
                let error = match check_partition_commit(
                    broker,
                    topic_error,
                    &name,
                    p.partition_index,
                    p.committed_metadata,
                ) {
                    Err(error) => Some(error),
                    Ok(metadata) => {
                        let leader_epoch = if ctx.version >= 2 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        };
                        offsets.push((
                            name.clone(),
                            p.partition_index,
                            CommittedOffset {
                                offset: p.committed_offset,
                                leader_epoch,
                                metadata,
                                commit_timestamp: now,
                            },
                        ));
                        None
                    }
                };
                (p.partition_index, error)
            })
            .collect();
        responses.push((topic.name, partitions));
    }
    let written = if offsets.is_empty() {
        Ok(None)
    } else if consumer_group.is_some() {
        broker
            .offsets()
            .commit_transactional(&group, producer, offsets, now)
            .await
            .map_err(TxnCommitError::from)
    } else {
        broker
            .groups()
            .commit_transactional_offsets(&group, committer, producer, offsets, now)
            .await
    };
    let written = written.map_err(|error| match error {
        TxnCommitError::Membership(error) => kafka_error(error.code()),
        TxnCommitError::Write(CoordinatorError::Append(AppendError::InvalidProducerEpoch {
            ..
        })) => ResponseError::InvalidProducerEpoch,
        error => {
            tracing::warn!(group = %group, %error, "transactional offset commit failed");
            ResponseError::CoordinatorNotAvailable
        }
    });
    let outcome = match written {
        Ok(Some(write)) => {
            write
                .replicated(broker.node_id(), COORDINATOR_WRITE_TIMEOUT)
                .await
        }
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    };
    txn_offset_commit_response(responses, outcome)
}

/// TxnOffsetCommit v5 and up (transactions v2): the producer never sent
/// AddOffsetsToTxn, so the group's `__consumer_offsets` partition first
/// joins its transaction here, then the offsets are written as before.
pub(super) async fn txn_offset_commit_adding_partition(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: kafka_protocol::messages::TxnOffsetCommitRequest,
) -> kafka_protocol::messages::TxnOffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let producer = (request.producer_id.0, request.producer_epoch);
    // A request refused anyway adds nothing.
    let refused = group.is_empty()
        || !ctx.authorized(
            &broker,
            AclOperation::Write,
            ResourceType::TransactionalId,
            &request.transactional_id,
        )
        || !ctx.authorized(&broker, AclOperation::Read, ResourceType::Group, &group)
        || broker.check_coordinator(&group).is_err();
    let offsets_partition = broker.coordinator_of(&group).map(|(index, _)| index);
    if let (false, Some(index)) = (refused, offsets_partition) {
        let joined = broker
            .leader_partition(OFFSETS_TOPIC, index)
            .is_ok_and(|partition| partition.in_transaction(producer.0, producer.1));
        let partitions = [(OFFSETS_TOPIC.to_owned(), index)];
        let added = if joined {
            Ok(())
        } else {
            crate::txn::add_from_leader::add_to_transaction(
                broker.txns(),
                &request.transactional_id.0,
                producer,
                &partitions,
            )
            .await
        };
        if let Err(error) = added {
            // As Kafka's group coordinator answers: a busy or absent
            // transaction coordinator is retried, a fenced producer is told.
            let code = match error {
                ResponseError::ConcurrentTransactions
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::NotCoordinator
                | ResponseError::NotEnoughReplicas => ResponseError::CoordinatorNotAvailable,
                ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
                other => other,
            };
            let answers = request
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, Some(code)))
                        .collect();
                    (t.name, partitions)
                })
                .collect();
            return txn_offset_commit_response(answers, Ok(()));
        }
    }
    txn_offset_commit(&broker, ctx, request).await
}

fn txn_offset_commit_response(
    responses: Vec<(TopicName, Answers)>,
    outcome: Result<(), ResponseError>,
) -> kafka_protocol::messages::TxnOffsetCommitResponse {
    use kafka_protocol::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    let topics = responses
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, error)| {
                    let code = error.or(outcome.err()).map_or(0, |e| e.code());
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    kafka_protocol::messages::TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Fetching a group's offsets needs Describe on the group.
fn may_describe_group(broker: &Broker, ctx: &RequestContext, group: &str) -> Result<(), i16> {
    if ctx.authorized(broker, AclOperation::Describe, ResourceType::Group, group) {
        Ok(())
    } else {
        Err(ResponseError::GroupAuthorizationFailed.code())
    }
}
