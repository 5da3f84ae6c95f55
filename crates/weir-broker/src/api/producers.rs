//! DescribeProducers: the idempotent and transactional producers a
//! partition remembers, from this replica's producer state (what
//! `kafka-transactions.sh describe-producers` and the Admin client's
//! `describeProducers` show, to find a hanging transaction).
//!
//! As in Kafka, any replica answers, leader or follower: a follower builds
//! its producer state from the batches it replicates. A partition of a
//! known topic with no replica here is NOT_LEADER_OR_FOLLOWER; an unknown
//! topic or partition UNKNOWN_TOPIC_OR_PARTITION.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::topic_name::validate_topic_name;
use weir_meta::{AclOperation, MetaError, ResourceType};

use super::RequestContext;
use crate::broker::Broker;

/// Kafka's message for UNKNOWN_TOPIC_OR_PARTITION, which it sends along
/// with a topic-level error.
const UNKNOWN_TOPIC_MESSAGE: &str = "This server does not host this topic-partition.";

pub(super) fn describe_producers(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            // Checked for the whole topic first, as Kafka's KafkaApis.
            let topic_error = match validate_topic_name(&name) {
                Err(MetaError::InvalidTopicName { reason, .. }) => {
                    Some((ResponseError::InvalidTopicException, reason))
                }
                // Producer state is read from the topic's partitions.
                _ if !ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, &name) => {
                    Some((
                        ResponseError::TopicAuthorizationFailed,
                        "Topic authorization failed.".to_owned(),
                    ))
                }
                _ if broker.with_image(|image| image.topic(&name).is_none()) => Some((
                    ResponseError::UnknownTopicOrPartition,
                    UNKNOWN_TOPIC_MESSAGE.to_owned(),
                )),
                _ => None,
            };
            let partitions = topic
                .partition_indexes
                .into_iter()
                .map(|index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    if let Some((error, message)) = &topic_error {
                        return answer
                            .with_error_code(error.code())
                            .with_error_message(Some(StrBytes::from_string(message.clone())));
                    }
                    partition_producers(broker, &name, index, answer)
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn partition_producers(
    broker: &Broker,
    topic: &str,
    index: i32,
    answer: PartitionResponse,
) -> PartitionResponse {
    let Some(partition) = broker.partition(topic, index) else {
        let exists = broker.with_image(|image| {
            image
                .topic(topic)
                .is_some_and(|t| t.partition(index).is_some())
        });
        let error = if exists {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        return answer.with_error_code(error.code());
    };
    let producers = partition
        .active_producers()
        .into_iter()
        .map(|(producer, txn_start)| {
            ProducerState::default()
                .with_producer_id(ProducerId(producer.producer_id))
                .with_producer_epoch(i32::from(producer.epoch))
                .with_last_sequence(producer.last_sequence)
                .with_last_timestamp(producer.last_timestamp)
                .with_coordinator_epoch(producer.coordinator_epoch)
                .with_current_txn_start_offset(txn_start)
        })
        .collect();
    answer.with_active_producers(producers)
}
