//! Share groups on the wire (KIP-932): ShareGroupHeartbeat and
//! ShareGroupDescribe go to the group's coordinator; ShareFetch and
//! ShareAcknowledge to the leaders of the partitions, which acquire records
//! for the member and take its acknowledgements. Every change to
//! share-partition state is answered once `__share_group_state` holds it.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch as AckLeader, PartitionData as AckPartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::share_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member as DescribedMember,
    TopicPartitions as DescribedTopicPartitions,
};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;
use weir_meta::{AclOperation, ResourceType};

use super::{authorized_operations, RequestContext};
use crate::broker::Broker;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::partition::ReplicatedWrite;
use crate::share::persister::{ShareCode, STATE_LOADING};
use crate::share::state_coordinator::SHARE_STATE_TOPIC;
use crate::share::{AcknowledgeType, AcquiredRange, ShareHeartbeat, FINAL_SESSION_EPOCH};
use weir_coord::records::share_state::SharePartitionKey;

/// How soon a fetch asks again for share-partitions whose state is loading.
const STATE_LOADING_RETRY: Duration = Duration::from_millis(100);

/// The records a ShareFetch acquires when it names no limit.
const DEFAULT_MAX_RECORDS: usize = 500;

fn message(text: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(text.into()))
}

/// Why `group` is not a share group hosted here, in Kafka's words: the
/// message of its GROUP_ID_NOT_FOUND.
pub(super) fn no_share_group(broker: &Broker, group: &str) -> Option<StrBytes> {
    let text = if broker.groups().state(group).is_some() || broker.consumer_groups().hosts(group) {
        format!("Group {group} is not a share group.")
    } else {
        format!("Group {group} not found.")
    };
    message(text)
}

// ---- ShareGroupHeartbeat ----

pub(super) fn heartbeat(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: ShareGroupHeartbeatRequest,
) -> impl Future<Output = ShareGroupHeartbeatResponse> + Send + 'static {
    let failed = |code: i16, text: String| {
        ShareGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_error_message(message(text))
    };
    let group = request.group_id.to_string();
    let checked = if group.is_empty() {
        Err(failed(
            ResponseError::InvalidRequest.code(),
            "GroupId can't be empty.".into(),
        ))
    } else if let Err(code) = broker.check_coordinator(&group) {
        Err(failed(code, super::coordinator_error_message(code).into()))
    } else if !ctx.authorized(broker, AclOperation::Read, ResourceType::Group, &group) {
        Err(failed(
            ResponseError::GroupAuthorizationFailed.code(),
            "not authorized to read the group".into(),
        ))
    } else {
        Ok(())
    };
    let outcome = checked.map(|()| {
        // The members' share-partitions keep their state there: create it
        // ahead of their first fetch.
        if broker.with_image(|image| image.topic(SHARE_STATE_TOPIC).is_none()) {
            let _ = broker.auto_create_topic(SHARE_STATE_TOPIC);
        }
        let heartbeat = ShareHeartbeat {
            member_id: request.member_id.to_string(),
            member_epoch: request.member_epoch,
            rack_id: request.rack_id.map(|s| s.to_string()),
            subscribed_topic_names: request
                .subscribed_topic_names
                .map(|names| names.into_iter().map(|n| n.to_string()).collect()),
            client_id: ctx.client_id.clone(),
            client_host: ctx.client_host.clone(),
        };
        broker
            .share_groups()
            .heartbeat(broker.group_coordinators(), &group, heartbeat)
    });
    async move {
        let answer = match outcome {
            Err(response) => return response,
            Ok(answer) => answer.await,
        };
        match answer {
            Ok(response) => ShareGroupHeartbeatResponse::default()
                .with_member_id(Some(StrBytes::from_string(response.member_id)))
                .with_member_epoch(response.member_epoch)
                .with_heartbeat_interval_ms(response.heartbeat_interval_ms)
                .with_assignment(response.assignment.map(|assignment| {
                    Assignment::default().with_topic_partitions(
                        assignment
                            .into_iter()
                            .map(|(topic, partitions)| {
                                TopicPartitions::default()
                                    .with_topic_id(topic)
                                    .with_partitions(partitions.into_iter().collect())
                            })
                            .collect(),
                    )
                })),
            Err(error) => failed(error.code(), error.to_string()),
        }
    }
}

// ---- ShareGroupDescribe ----

pub(super) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    request: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let image = broker.image();
    let groups = request
        .group_ids
        .into_iter()
        .map(|group_id| {
            let described = DescribedGroup::default().with_group_id(group_id.clone());
            let group = group_id.as_str();
            if !ctx.authorized(broker, AclOperation::Describe, ResourceType::Group, group) {
                return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            if let Err(code) = broker.check_coordinator(group) {
                return described.with_error_code(code);
            }
            let Some(description) = broker.share_groups().describe(group) else {
                return described
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(no_share_group(broker, group));
            };
            let state = description.state;
            let members = state
                .members
                .into_values()
                .map(|m| {
                    let assignment = DescribedAssignment::default().with_topic_partitions(
                        m.assignment
                            .into_iter()
                            .map(|(id, partitions)| {
                                let name = image
                                    .topic_by_id(id)
                                    .map_or(String::new(), |t| t.name.clone());
                                DescribedTopicPartitions::default()
                                    .with_topic_id(id)
                                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                                    .with_partitions(partitions.into_iter().collect())
                            })
                            .collect(),
                    );
                    DescribedMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_rack_id(m.metadata.rack_id.map(StrBytes::from_string))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(StrBytes::from_string(m.metadata.client_id))
                        .with_client_host(StrBytes::from_string(m.metadata.client_host))
                        .with_subscribed_topic_names(
                            m.metadata
                                .subscribed_topic_names
                                .into_iter()
                                .map(|n| TopicName(StrBytes::from_string(n)))
                                .collect(),
                        )
                        .with_assignment(assignment)
                })
                .collect::<Vec<_>>();
            let group_state = if members.is_empty() {
                "Empty"
            } else {
                "Stable"
            };
            let described = described
                .with_group_state(StrBytes::from_static_str(group_state))
                .with_group_epoch(state.group_epoch)
                .with_assignment_epoch(state.assignment_epoch)
                .with_assignor_name(StrBytes::from_static_str("simple"))
                .with_members(members);
            if request.include_authorized_operations {
                described.with_authorized_operations(authorized_operations::group(ctx, &group_id))
            } else {
                described
            }
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}

// ---- acknowledgements, shared by ShareFetch and ShareAcknowledge ----

/// A partition's acknowledgement batches as they came: first offset, last
/// offset, acknowledge types.
type AckBatches = Vec<(i64, i64, Vec<i8>)>;

/// The leader of a partition and its epoch, as the image says; -1 for none.
fn current_leader(broker: &Broker, topic_id: Uuid, index: i32) -> (i32, i32) {
    broker.with_image(|image| {
        image
            .topic_by_id(topic_id)
            .and_then(|t| t.partition(index))
            .map_or((-1, -1), |p| (p.leader, p.leader_epoch))
    })
}

/// One partition's acknowledgement batches as offset ranges of one type
/// each; `None` if a batch is malformed.
fn acknowledgements(batches: &[(i64, i64, Vec<i8>)]) -> Option<Vec<(i64, i64, AcknowledgeType)>> {
    let mut ranges: Vec<(i64, i64, AcknowledgeType)> = Vec::new();
    for (first, last, types) in batches {
        let (first, last) = (*first, *last);
        if last < first {
            return None;
        }
        match types.as_slice() {
            [] => return None,
            [one] => ranges.push((first, last, AcknowledgeType::from_id(*one)?)),
            many => {
                if many.len() as i64 != last - first + 1 {
                    return None;
                }
                for (offset, kind) in (first..=last).zip(many) {
                    let kind = AcknowledgeType::from_id(*kind)?;
                    match ranges.last_mut() {
                        Some(run) if run.1 + 1 == offset && run.2 == kind => run.1 = offset,
                        _ => ranges.push((offset, offset, kind)),
                    }
                }
            }
        }
    }
    Some(ranges)
}

/// One partition's acknowledgements, checked: the ranges to apply, or the
/// error code refusing them all.
fn checked_acknowledgements(
    broker: &Broker,
    ctx: &RequestContext,
    key: &SharePartitionKey,
    batches: &[(i64, i64, Vec<i8>)],
) -> Result<Vec<(i64, i64, AcknowledgeType)>, i16> {
    if !topic_readable(broker, ctx, key.topic_id) {
        return Err(ResponseError::TopicAuthorizationFailed.code());
    }
    acknowledgements(batches).ok_or(ResponseError::InvalidRequest.code())
}

/// The error code answering acknowledgements applied with `outcome`.
fn acknowledgement_code(
    key: &SharePartitionKey,
    member: &str,
    outcome: Result<(), ShareCode>,
) -> i16 {
    match outcome {
        Ok(()) => 0,
        Err(code) => {
            tracing::debug!(
                group = key.group,
                member,
                partition = key.partition,
                code,
                "acknowledgements refused"
            );
            if code == STATE_LOADING {
                ResponseError::CoordinatorNotAvailable.code()
            } else {
                code
            }
        }
    }
}

/// Applies the acknowledgements of one partition: the error code, and the
/// write to await.
async fn acknowledge(
    broker: &Broker,
    ctx: &RequestContext,
    key: &SharePartitionKey,
    member: &str,
    batches: &[(i64, i64, Vec<i8>)],
) -> (i16, Option<ReplicatedWrite>) {
    let ranges = match checked_acknowledgements(broker, ctx, key, batches) {
        Ok(ranges) => ranges,
        Err(code) => return (code, None),
    };
    let acknowledged = broker
        .share_partitions()
        .acknowledge(broker, key, member, &ranges)
        .await;
    match acknowledged {
        Ok(write) => (0, write),
        Err(code) => (acknowledgement_code(key, member, Err(code)), None),
    }
}

fn topic_readable(broker: &Broker, ctx: &RequestContext, topic_id: Uuid) -> bool {
    let name = broker.with_image(|image| image.topic_by_id(topic_id).map(|t| t.name.clone()));
    match name {
        Some(name) => ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name),
        // An unknown topic is answered as such by the share-partitions.
        None => true,
    }
}

/// Waits for `writes`; false if one failed.
async fn replicated(node_id: i32, writes: Vec<ReplicatedWrite>) -> bool {
    let mut ok = true;
    for write in writes {
        ok &= write
            .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
            .await
            .is_ok();
    }
    ok
}

// ---- ShareFetch ----

struct Fetched {
    error_code: i16,
    records: Bytes,
    ranges: Vec<AcquiredRange>,
}

pub(super) fn fetch(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ShareFetchRequest,
) -> impl Future<Output = ShareFetchResponse> + Send + 'static {
    let failed = |code: i16, text: &str| {
        ShareFetchResponse::default()
            .with_error_code(code)
            .with_error_message(message(text))
    };
    let broker = broker.clone();
    let group = request.group_id.as_ref().map(|g| g.to_string());
    let member = request.member_id.as_ref().map(|m| m.to_string());
    async move {
        let (Some(group), Some(member)) = (group, member) else {
            return failed(
                ResponseError::InvalidRequest.code(),
                "GroupId and MemberId must be set.",
            );
        };
        if group.is_empty() || member.is_empty() {
            return failed(
                ResponseError::InvalidRequest.code(),
                "GroupId and MemberId must be set.",
            );
        }
        if !ctx.authorized(&broker, AclOperation::Read, ResourceType::Group, &group) {
            return failed(
                ResponseError::GroupAuthorizationFailed.code(),
                "not authorized to read the group",
            );
        }
        let epoch = request.share_session_epoch;
        let requested: Vec<(Uuid, i32)> = request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
            .collect();
        let has_acks = request.topics.iter().any(|t| {
            t.partitions
                .iter()
                .any(|p| !p.acknowledgement_batches.is_empty())
        });
        if epoch == 0 && has_acks {
            return failed(
                ResponseError::InvalidRequest.code(),
                "Acknowledge data present on initial fetch request.",
            );
        }
        let forgotten: Vec<(Uuid, i32)> = request
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
            .collect();
        let opened = broker
            .share_partitions()
            .sessions()
            .fetch(&group, &member, epoch, &requested, &forgotten);
        let session = match opened {
            Ok(session) => session,
            Err(error) => return failed(error.code(), &error.to_string()),
        };
        let key = |(topic_id, partition): (Uuid, i32)| SharePartitionKey {
            group: group.clone(),
            topic_id,
            partition,
        };
        // Acknowledgements first, then the fetch (both may wait on a file).
        let mut acks: HashMap<SharePartitionKey, AckBatches> = request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| !p.acknowledgement_batches.is_empty())
                    .map(|p| {
                        (
                            key((t.topic_id, p.partition_index)),
                            p.acknowledgement_batches
                                .iter()
                                .map(|b| {
                                    (b.first_offset, b.last_offset, b.acknowledge_types.clone())
                                })
                                .collect(),
                        )
                    })
            })
            .collect();
        let fetching = epoch != FINAL_SESSION_EPOCH;
        let mut writes: Vec<ReplicatedWrite> = Vec::new();
        let mut ack_codes: BTreeMap<(Uuid, i32), i16> = BTreeMap::new();
        if session.ended || !fetching {
            // On their own: a session that ended (closed, or replaced by a
            // new one) gives back what its member held, once its last
            // acknowledgements are in.
            for (key, batches) in std::mem::take(&mut acks) {
                let (code, write) = acknowledge(&broker, &ctx, &key, &member, &batches).await;
                ack_codes.insert((key.topic_id, key.partition), code);
                writes.extend(write);
            }
            if session.ended {
                broker
                    .share_partitions()
                    .release(&*broker, &group, &member)
                    .await;
            }
        }
        let settings_lock_ms = broker.config().share_group.record_lock_duration_ms.value;
        let mut fetched: BTreeMap<(Uuid, i32), Fetched> = BTreeMap::new();
        if fetching {
            let max_records = usize::try_from(request.max_records)
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_MAX_RECORDS);
            let max_bytes = usize::try_from(request.max_bytes)
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(usize::MAX);
            let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
            let deadline = Instant::now() + wait;
            let partitions: Vec<SharePartitionKey> =
                session.partitions.iter().copied().map(key).collect();
            loop {
                let waker = Arc::new(Notify::new());
                for key in &partitions {
                    if let Some(partition) = broker.share_partitions().partition_of(key) {
                        partition.wake_on_change(&waker);
                    }
                }
                // The first round applies the acknowledgements, each with
                // its partition's acquisition: one state write.
                let Round {
                    fetched: mut round,
                    ack_codes: round_ack_codes,
                    writes: round_writes,
                } = acquire_all(
                    &broker,
                    &ctx,
                    &partitions,
                    &member,
                    std::mem::take(&mut acks),
                    max_records,
                    max_bytes,
                )
                .await;
                writes.extend(round_writes);
                ack_codes.extend(round_ack_codes);
                // State still loading is no error: nothing yet, ask again.
                let mut loading = false;
                for f in round.values_mut() {
                    if f.error_code == STATE_LOADING {
                        f.error_code = 0;
                        loading = true;
                    }
                }
                let done = round
                    .values()
                    .any(|f| f.error_code != 0 || !f.ranges.is_empty());
                fetched = round;
                if done || Instant::now() >= deadline || partitions.is_empty() {
                    break;
                }
                let wake = if loading {
                    deadline.min(Instant::now() + STATE_LOADING_RETRY)
                } else {
                    deadline
                };
                let _ = tokio::time::timeout_at(wake, waker.notified()).await;
            }
        }
        if !replicated(broker.node_id(), writes).await {
            // Not persisted: nothing of this request counts.
            return failed(
                ResponseError::CoordinatorNotAvailable.code(),
                "the share-partition state could not be written",
            );
        }
        let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
        let keys: std::collections::BTreeSet<(Uuid, i32)> = fetched
            .keys()
            .chain(ack_codes.keys())
            .chain(requested.iter())
            .copied()
            .collect();
        for (topic_id, index) in keys {
            let fetched = fetched.remove(&(topic_id, index));
            let leader = current_leader(&broker, topic_id, index);
            let mut data = PartitionData::default()
                .with_partition_index(index)
                .with_acknowledge_error_code(
                    ack_codes.get(&(topic_id, index)).copied().unwrap_or(0),
                )
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(leader.0)
                        .with_leader_epoch(leader.1),
                )
                .with_records(Some(Bytes::new()));
            if let Some(fetched) = fetched {
                data = data
                    .with_error_code(fetched.error_code)
                    .with_records(Some(fetched.records))
                    .with_acquired_records(
                        fetched
                            .ranges
                            .into_iter()
                            .map(|r| {
                                AcquiredRecords::default()
                                    .with_first_offset(r.first_offset)
                                    .with_last_offset(r.last_offset)
                                    .with_delivery_count(r.delivery_count as i16)
                            })
                            .collect(),
                    );
            }
            topics.entry(topic_id).or_default().push(data);
        }
        ShareFetchResponse::default()
            .with_acquisition_lock_timeout_ms(settings_lock_ms)
            .with_responses(
                topics
                    .into_iter()
                    .map(|(topic_id, partitions)| {
                        ShareFetchableTopicResponse::default()
                            .with_topic_id(topic_id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
    }
}

/// What one round of acquisition did.
struct Round {
    fetched: BTreeMap<(Uuid, i32), Fetched>,
    /// Of the acknowledgements applied in the round.
    ack_codes: Vec<((Uuid, i32), i16)>,
    writes: Vec<ReplicatedWrite>,
}

/// One round of acquisition over the session's partitions, applying
/// `acks` first: a partition's with its acquisition, so both make one
/// state write, any other's on its own.
async fn acquire_all(
    broker: &Broker,
    ctx: &RequestContext,
    partitions: &[SharePartitionKey],
    member: &str,
    mut acks: HashMap<SharePartitionKey, AckBatches>,
    max_records: usize,
    max_bytes: usize,
) -> Round {
    let mut round = Round {
        fetched: BTreeMap::new(),
        ack_codes: Vec::new(),
        writes: Vec::new(),
    };
    let mut records_left = max_records;
    let mut bytes_left = max_bytes;
    for key in partitions {
        let mut entry = Fetched {
            error_code: 0,
            records: Bytes::new(),
            ranges: Vec::new(),
        };
        let mut ack_code = None;
        let checked = acks
            .remove(key)
            .map(|batches| checked_acknowledgements(broker, ctx, key, &batches));
        let ranges = match checked {
            None => Vec::new(),
            Some(Ok(ranges)) => ranges,
            Some(Err(code)) => {
                ack_code = Some(code);
                Vec::new()
            }
        };
        let wanted = records_left > 0 && bytes_left > 0;
        if !topic_readable(broker, ctx, key.topic_id) {
            entry.error_code = ResponseError::TopicAuthorizationFailed.code();
        } else if wanted || !ranges.is_empty() {
            let (records, bytes) = if wanted {
                (records_left, bytes_left)
            } else {
                (0, 0)
            };
            match broker
                .share_partitions()
                .acquire(broker, key, member, &ranges, records, bytes)
                .await
            {
                Ok((acquired, write)) => {
                    if !ranges.is_empty() {
                        ack_code =
                            Some(acknowledgement_code(key, member, acquired.acknowledgements));
                    }
                    let count: i64 = acquired
                        .ranges
                        .iter()
                        .map(|r| r.last_offset - r.first_offset + 1)
                        .sum();
                    records_left = records_left.saturating_sub(count as usize);
                    bytes_left = bytes_left.saturating_sub(acquired.records.len());
                    entry.records = acquired.records;
                    entry.ranges = acquired.ranges;
                    round.writes.extend(write);
                }
                Err(code) => {
                    if !ranges.is_empty() {
                        ack_code = Some(acknowledgement_code(key, member, Err(code)));
                    }
                    entry.error_code = code;
                }
            }
        }
        round
            .ack_codes
            .extend(ack_code.map(|code| ((key.topic_id, key.partition), code)));
        round.fetched.insert((key.topic_id, key.partition), entry);
    }
    // Acknowledgements of partitions the session does not fetch.
    for (key, batches) in acks {
        let (code, write) = acknowledge(broker, ctx, &key, member, &batches).await;
        round.ack_codes.push(((key.topic_id, key.partition), code));
        round.writes.extend(write);
    }
    round
}

// ---- ShareAcknowledge ----

pub(super) fn acknowledge_request(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ShareAcknowledgeRequest,
) -> impl Future<Output = ShareAcknowledgeResponse> + Send + 'static {
    let failed = |code: i16, text: &str| {
        ShareAcknowledgeResponse::default()
            .with_error_code(code)
            .with_error_message(message(text))
    };
    let broker = broker.clone();
    async move {
        let group = request.group_id.as_ref().map(|g| g.to_string());
        let member = request.member_id.as_ref().map(|m| m.to_string());
        let (Some(group), Some(member)) = (group, member) else {
            return failed(
                ResponseError::InvalidRequest.code(),
                "GroupId and MemberId must be set.",
            );
        };
        if !ctx.authorized(&broker, AclOperation::Read, ResourceType::Group, &group) {
            return failed(
                ResponseError::GroupAuthorizationFailed.code(),
                "not authorized to read the group",
            );
        }
        let epoch = request.share_session_epoch;
        let moved = broker
            .share_partitions()
            .sessions()
            .acknowledge(&group, &member, epoch);
        let session = match moved {
            Ok(session) => session,
            Err(error) => return failed(error.code(), &error.to_string()),
        };
        let mut results: Vec<(Uuid, i32, i16, Option<ReplicatedWrite>)> = Vec::new();
        for topic in &request.topics {
            for partition in &topic.partitions {
                let key = SharePartitionKey {
                    group: group.clone(),
                    topic_id: topic.topic_id,
                    partition: partition.partition_index,
                };
                let batches: AckBatches = partition
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                    .collect();
                let (code, write) = acknowledge(&broker, &ctx, &key, &member, &batches).await;
                results.push((topic.topic_id, partition.partition_index, code, write));
            }
        }
        if session.ended {
            broker
                .share_partitions()
                .release(&*broker, &group, &member)
                .await;
        }
        let mut topics: BTreeMap<Uuid, Vec<AckPartitionData>> = BTreeMap::new();
        let mut writes = Vec::new();
        for (topic_id, index, code, write) in results {
            writes.extend(write);
            let leader = current_leader(&broker, topic_id, index);
            topics.entry(topic_id).or_default().push(
                AckPartitionData::default()
                    .with_partition_index(index)
                    .with_error_code(code)
                    .with_current_leader(
                        AckLeader::default()
                            .with_leader_id(leader.0)
                            .with_leader_epoch(leader.1),
                    ),
            );
        }
        if !replicated(broker.node_id(), writes).await {
            return failed(
                ResponseError::CoordinatorNotAvailable.code(),
                "the share-partition state could not be written",
            );
        }
        ShareAcknowledgeResponse::default().with_responses(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    ShareAcknowledgeTopicResponse::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
    }
}
