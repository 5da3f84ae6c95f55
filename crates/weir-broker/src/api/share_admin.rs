//! Share groups for operators: DescribeShareGroupOffsets (each
//! share-partition's start offset as `__share_group_state` holds it),
//! AlterShareGroupOffsets and DeleteShareGroupOffsets (start a
//! share-partition over, or forget it), and the deletion of a whole share
//! group for DeleteGroups. Changes need an empty group, and are answered
//! once replicated.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition as AlteredPartition,
    AlterShareGroupOffsetsResponseTopic as AlteredTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic as DeletedTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as ResponseGroup,
    DescribeShareGroupOffsetsResponsePartition as ResponsePartition,
    DescribeShareGroupOffsetsResponseTopic as ResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::{AclOperation, ResourceType};

use super::share::no_share_group;
use super::RequestContext;
use crate::broker::Broker;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::groups::share::ShareGroupDescription;
use crate::partition::ReplicatedWrite;
use crate::share::persister::{ShareCode, STATE_LOADING};
use weir_coord::consumer::TopicMetadata;
use weir_coord::records::share_state::SharePartitionKey;

fn message(text: String) -> Option<StrBytes> {
    Some(StrBytes::from_string(text))
}

/// DescribeShareGroupOffsets: for each group, the start offset of each
/// share-partition asked for (of every topic it subscribed to when
/// none are named), -1 where it has no state yet. Topics the principal
/// may not describe, and unknown ones, are left out, as Kafka does.
pub(super) async fn describe_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for asked in request.groups {
        groups.push(describe_group_offsets(broker, ctx, asked).await);
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

/// DescribeShareGroupOffsets of one group.
async fn describe_group_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    asked: DescribeShareGroupOffsetsRequestGroup,
) -> ResponseGroup {
    let group = asked.group_id.as_str().to_owned();
    let answer = ResponseGroup::default().with_group_id(asked.group_id.clone());
    if !ctx.authorized(broker, AclOperation::Describe, ResourceType::Group, &group) {
        return answer.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(code) = broker.check_coordinator(&group) {
        return answer.with_error_code(code);
    }
    let Some(description) = broker.share_groups().describe(&group) else {
        return answer
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(no_share_group(broker, &group));
    };
    let asked_topics: Vec<(String, Option<Vec<i32>>)> = match asked.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.topic_name.0.to_string(), Some(t.partitions)))
            .collect(),
        None => description
            .state
            .state_topics
            .keys()
            .map(|name| (name.clone(), None))
            .collect(),
    };
    let image = broker.image();
    let mut topics = Vec::new();
    for (name, partitions) in asked_topics {
        if !ctx.authorized(broker, AclOperation::Describe, ResourceType::Topic, &name) {
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            continue;
        };
        let indexes = partitions.unwrap_or_else(|| (0..topic.partition_count()).collect());
        let mut answers = Vec::with_capacity(indexes.len());
        for index in indexes {
            let answer = ResponsePartition::default()
                .with_partition_index(index)
                .with_start_offset(-1)
                .with_leader_epoch(-1);
            if topic.partition(index).is_none() {
                answers.push(answer.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            }
            let key = SharePartitionKey {
                group: group.clone(),
                topic_id: topic.id,
                partition: index,
            };
            answers.push(
                match broker
                    .share_partitions()
                    .persisted_start(broker, &key)
                    .await
                {
                    Ok(start) => answer.with_start_offset(start.unwrap_or(-1)),
                    Err(code) => answer.with_error_code(state_error(code)),
                },
            );
        }
        topics.push(
            ResponseTopic::default()
                .with_topic_name(TopicName(StrBytes::from_string(name)))
                .with_topic_id(topic.id)
                .with_partitions(answers),
        );
    }
    answer.with_topics(topics)
}

/// A refusal of a whole request: its error code and message.
type Refusal = (i16, Option<StrBytes>);

/// The share group `group` that a change may be made to: `operation` on it
/// is allowed, this broker coordinates it, and it has no members.
fn changeable_group(
    broker: &Broker,
    ctx: &RequestContext,
    group: &str,
    operation: AclOperation,
) -> Result<ShareGroupDescription, Refusal> {
    if !ctx.authorized(broker, operation, ResourceType::Group, group) {
        return Err((ResponseError::GroupAuthorizationFailed.code(), None));
    }
    broker
        .check_coordinator(group)
        .map_err(|code| (code, None))?;
    let Some(description) = broker.share_groups().describe(group) else {
        let code = ResponseError::GroupIdNotFound.code();
        return Err((code, no_share_group(broker, group)));
    };
    if !description.state.members.is_empty() {
        return Err((
            ResponseError::NonEmptyGroup.code(),
            message(format!(
                "The group {group} has active members: stop its consumers first."
            )),
        ));
    }
    Ok(description)
}

/// A state error as a client sees it.
fn state_error(code: ShareCode) -> i16 {
    if code == STATE_LOADING {
        ResponseError::CoordinatorLoadInProgress.code()
    } else {
        code
    }
}

/// Waits for `writes`; the first error, or 0.
async fn replicated(node_id: i32, writes: Vec<ReplicatedWrite>) -> i16 {
    for write in writes {
        if let Err(error) = write.replicated(node_id, COORDINATOR_WRITE_TIMEOUT).await {
            return error.code();
        }
    }
    0
}

/// The outcome of the group's write of the topics it has state on: 0 once
/// replicated, else the error code.
async fn listed_outcome(node_id: i32, listed: Result<Option<ReplicatedWrite>, i16>) -> i16 {
    match listed {
        Ok(write) => replicated(node_id, write.into_iter().collect()).await,
        Err(code) => code,
    }
}

/// AlterShareGroupOffsets: each share-partition named starts over at the
/// offset given, with nothing in flight.
pub(super) async fn alter_offsets(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let group = request.group_id.as_str().to_owned();
    let node_id = broker.node_id();
    if let Err((code, text)) = changeable_group(broker, ctx, &group, AclOperation::Read) {
        return AlterShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(text);
    }
    let image = broker.image();
    let mut topics: Vec<(AlteredTopic, Vec<Option<ReplicatedWrite>>)> = Vec::new();
    let mut reset_topics = Vec::new();
    for asked in request.topics {
        let name = asked.topic_name.0.to_string();
        let topic = image.topic(&name);
        let allowed = ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name);
        let mut writes = Vec::new();
        let mut partitions: Vec<AlteredPartition> = Vec::with_capacity(asked.partitions.len());
        for p in asked.partitions {
            let answer = AlteredPartition::default().with_partition_index(p.partition_index);
            let code = match topic {
                _ if !allowed => ResponseError::TopicAuthorizationFailed.code(),
                Some(t) if t.partition(p.partition_index).is_some() => {
                    if p.start_offset < 0 {
                        ResponseError::InvalidRequest.code()
                    } else {
                        let key = SharePartitionKey {
                            group: group.clone(),
                            topic_id: t.id,
                            partition: p.partition_index,
                        };
                        let reset =
                            broker
                                .share_partitions()
                                .reset_state(&**broker, &key, p.start_offset);
                        match reset.await {
                            Ok(write) => {
                                writes.push(write);
                                0
                            }
                            Err(code) => state_error(code),
                        }
                    }
                }
                _ => ResponseError::UnknownTopicOrPartition.code(),
            };
            partitions.push(answer.with_error_code(code));
        }
        if let Some(t) = topic.filter(|_| partitions.iter().any(|p| p.error_code == 0)) {
            reset_topics.push(TopicMetadata {
                id: t.id,
                name: name.clone(),
                partitions: t.partition_count(),
            });
        }
        let answer = AlteredTopic::default()
            .with_topic_name(asked.topic_name)
            .with_topic_id(topic.map(|t| t.id).unwrap_or_default())
            .with_partitions(partitions);
        topics.push((answer, writes));
    }
    // The group lists the topics it now has state on.
    let listed = if reset_topics.is_empty() {
        Ok(None)
    } else {
        broker
            .share_groups()
            .state_topics_changed(
                broker.group_coordinators(),
                &group,
                reset_topics,
                Vec::new(),
            )
            .await
            .map_err(|error| error.code())
    };
    let listed = listed_outcome(node_id, listed).await;
    let mut responses = Vec::with_capacity(topics.len());
    for (mut topic, writes) in topics {
        // Partitions whose write succeeded take its replication's outcome.
        let mut writes = writes.into_iter();
        for partition in topic.partitions.iter_mut().filter(|p| p.error_code == 0) {
            if let Some(Some(write)) = writes.next() {
                partition.error_code = replicated(node_id, vec![write]).await;
            }
            if partition.error_code == 0 {
                partition.error_code = listed;
            }
        }
        responses.push(topic);
    }
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}

/// DeleteShareGroupOffsets: the share-partitions of each topic named are
/// forgotten; the group starts them again from `share.auto.offset.reset`.
pub(super) async fn delete_offsets(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let group = request.group_id.as_str().to_owned();
    let node_id = broker.node_id();
    if let Err((code, text)) = changeable_group(broker, ctx, &group, AclOperation::Delete) {
        return DeleteShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(text);
    }
    let image = broker.image();
    let mut topics: Vec<(DeletedTopic, Vec<ReplicatedWrite>)> = Vec::new();
    let mut deleted_topics = Vec::new();
    for asked in request.topics {
        let name = asked.topic_name.0.to_string();
        let answer = DeletedTopic::default().with_topic_name(asked.topic_name);
        if !ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name) {
            let code = ResponseError::TopicAuthorizationFailed.code();
            topics.push((answer.with_error_code(code), Vec::new()));
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            let code = ResponseError::UnknownTopicOrPartition.code();
            topics.push((answer.with_error_code(code), Vec::new()));
            continue;
        };
        let answer = answer.with_topic_id(topic.id);
        match delete_topic_state(broker, &group, topic.id, topic.partition_count()).await {
            Ok(writes) => {
                deleted_topics.push(name);
                topics.push((answer, writes));
            }
            Err(code) => topics.push((answer.with_error_code(code), Vec::new())),
        }
    }
    // The group no longer lists the topics it has no state on.
    let listed = if deleted_topics.is_empty() {
        Ok(None)
    } else {
        broker
            .share_groups()
            .state_topics_changed(
                broker.group_coordinators(),
                &group,
                Vec::new(),
                deleted_topics,
            )
            .await
            .map_err(|error| error.code())
    };
    let listed = listed_outcome(node_id, listed).await;
    let mut responses = Vec::with_capacity(topics.len());
    for (topic, writes) in topics {
        let code = match replicated(node_id, writes).await {
            0 => listed,
            code => code,
        };
        responses.push(if topic.error_code == 0 {
            topic.with_error_code(code)
        } else {
            topic
        });
    }
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}

/// Deletes `group`'s state of every partition of a topic.
async fn delete_topic_state(
    broker: &Broker,
    group: &str,
    topic_id: uuid::Uuid,
    partitions: i32,
) -> Result<Vec<ReplicatedWrite>, i16> {
    let mut writes = Vec::new();
    for partition in 0..partitions {
        let key = SharePartitionKey {
            group: group.to_owned(),
            topic_id,
            partition,
        };
        let write = broker
            .share_partitions()
            .reset_state(broker, &key, -1)
            .await
            .map_err(state_error)?;
        writes.extend(write);
    }
    Ok(writes)
}

/// Deletes the share group `group` for DeleteGroups: its share-partition
/// state, then its records. Checked here; the future gives the writes to
/// await, or the error code.
pub(super) fn delete_group(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    group: &str,
) -> impl Future<Output = Result<Vec<ReplicatedWrite>, i16>> + Send + 'static {
    let checked = changeable_group(broker, ctx, group, AclOperation::Delete);
    let (broker, group) = (broker.clone(), group.to_owned());
    async move {
        let description = checked.map_err(|(code, _)| code)?;
        let image = broker.image();
        let mut writes = Vec::new();
        for name in description.state.state_topics.keys() {
            if let Some(topic) = image.topic(name) {
                writes.extend(
                    delete_topic_state(&broker, &group, topic.id, topic.partition_count()).await?,
                );
            }
        }
        let write = broker
            .share_groups()
            .delete(broker.group_coordinators(), &group)
            .await
            .map_err(|error| error.code())?;
        writes.extend(write);
        Ok(writes)
    }
}
