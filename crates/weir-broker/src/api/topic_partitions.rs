//! DescribeTopicPartitions (KIP-966): topics and their partitions from the
//! metadata image, a page at a time, as the Admin client's
//! `describeTopics` asks since Kafka 3.8.
//!
//! As Kafka's `DescribeTopicPartitionsRequestHandler`: the topics asked for
//! (all of them if none is named) are taken in name order from the cursor's
//! topic on, the cursor's topic from the cursor's partition; at most
//! `response_partition_limit` partitions (capped at 2000, Kafka's
//! `max.request.partition.size.limit`) are answered, and `next_cursor`
//! says where the next page starts. A named topic that does not exist is
//! answered UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
//! illegal name); listing all topics leaves such errors out. Each partition
//! carries its eligible leader replicas and last known leader (KIP-966's
//! `eligibleLeaderReplicas` and `lastKnownElr`), empty lists when it has
//! none.

use std::collections::BTreeSet;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::topic_name::validate_topic_name;
use weir_meta::{MetadataImage, TopicInfo};

use weir_meta::{AclOperation, ResourceType};

use super::{authorized_operations, RequestContext};
use crate::broker::Broker;

/// Kafka's default `max.request.partition.size.limit`: the most partitions
/// one response holds, whatever the request asks.
const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

pub(super) fn describe_topic_partitions(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = broker.image();
    match page(broker, ctx, &image, &request) {
        Ok(response) => response,
        // As Kafka answers an INVALID_REQUEST it throws: every topic asked
        // for, with the error and nothing else.
        Err(error) => DescribeTopicPartitionsResponse::default().with_topics(
            request
                .topics
                .into_iter()
                .map(|t| {
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(error.code())
                        .with_name(Some(t.name))
                })
                .collect(),
        ),
    }
}

fn page(
    broker: &Broker,
    ctx: &RequestContext,
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
) -> Result<DescribeTopicPartitionsResponse, ResponseError> {
    let all_topics = request.topics.is_empty();
    let cursor = request.cursor.as_ref();
    let cursor_topic = cursor.map_or("", |c| c.topic_name.0.as_str());
    // Sorted and without repeats, from the cursor's topic on.
    let names: BTreeSet<String> = if all_topics {
        // Only the topics the principal may see, as Kafka lists them.
        image
            .topics()
            .map(|t| t.name.clone())
            .filter(|name| name.as_str() >= cursor_topic)
            .filter(|name| ctx.may(AclOperation::Describe, ResourceType::Topic, name))
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .filter(|name| name.as_str() >= cursor_topic)
            .collect()
    };
    if let Some(cursor) = cursor {
        // The cursor's topic must be among those named, and its
        // partition a valid index.
        if (!all_topics && !names.contains(cursor.topic_name.0.as_str()))
            || cursor.partition_index < 0
        {
            return Err(ResponseError::InvalidRequest);
        }
    }
    let limit = request
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE);
    let mut remaining = limit as usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if remaining == 0 {
            // The next page starts with this topic.
            next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        if !all_topics
            && !ctx.authorized(broker, AclOperation::Describe, ResourceType::Topic, &name)
        {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_name(Some(topic_name(&name))),
            );
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            if !all_topics {
                let error = match validate_topic_name(&name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(error.code())
                        .with_is_internal(super::is_internal_topic(&name))
                        .with_name(Some(topic_name(&name))),
                );
            }
            continue;
        };
        let start = if name == cursor_topic {
            cursor.map_or(0, |c| c.partition_index as usize)
        } else {
            0
        };
        let count = topic.partitions.len();
        let end = count.min(start.saturating_add(remaining));
        let partitions: Vec<_> = (start..end)
            .filter_map(|index| topic.partition(index as i32))
            .map(|p| partition_response(image, p))
            .collect();
        remaining -= partitions.len();
        topics.push(topic_response(topic, partitions, ctx));
        if end < count {
            next_cursor = Some(cursor_at(&name, end as i32));
            break;
        }
    }
    Ok(DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor))
}

fn topic_response(
    topic: &TopicInfo,
    partitions: Vec<DescribeTopicPartitionsResponsePartition>,
    ctx: &RequestContext,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(topic.internal || super::is_internal_topic(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(authorized_operations::topic(ctx, &topic.name))
}

fn partition_response(
    image: &MetadataImage,
    p: &weir_meta::PartitionInfo,
) -> DescribeTopicPartitionsResponsePartition {
    let ids = |list: &[i32]| list.iter().copied().map(BrokerId).collect::<Vec<_>>();
    // Offline as Kafka counts them: on a broker fenced or not registered.
    let offline: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|&id| image.broker(id).is_none() || image.is_fenced(id))
        .collect();
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(p.partition)
        .with_leader_id(BrokerId(p.leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_eligible_leader_replicas(Some(ids(&p.elr)))
        .with_last_known_elr(Some(ids(&p.last_known_elr)))
        .with_offline_replicas(ids(&offline))
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
