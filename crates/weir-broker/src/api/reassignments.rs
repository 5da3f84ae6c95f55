//! AlterPartitionReassignments and ListPartitionReassignments: moving a
//! partition's replicas to other brokers while it stays available (the new
//! replicas catch up first, then the old ones are dropped).

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use std::sync::Arc;

use kafka_protocol::ResponseError;

use weir_meta::AclOperation;

use super::admin::Deadline;
use super::RequestContext;
use crate::broker::quorum::MetadataError;
use crate::broker::{Broker, BrokerError};

/// Kafka's message for CLUSTER_AUTHORIZATION_FAILED, which it sends along.
const CLUSTER_DENIED: &str = "Cluster authorization failed.";

pub(super) async fn alter(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !ctx.authorized_on_cluster(&broker, AclOperation::Alter) {
        // As Kafka: the error at the top and on every partition.
        let denied = || Some(StrBytes::from_static_str(CLUSTER_DENIED));
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let responses = request
            .topics
            .into_iter()
            .map(|topic| {
                let partitions = topic.partitions.iter().map(|p| {
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(denied())
                });
                ReassignableTopicResponse::default()
                    .with_name(topic.name)
                    .with_partitions(partitions.collect())
            })
            .collect();
        return AlterPartitionReassignmentsResponse::default()
            .with_error_code(code)
            .with_error_message(denied())
            .with_responses(responses);
    }
    let deadline = Deadline::new(request.timeout_ms);
    let mut responses = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let replicas = p
                .replicas
                .map(|ids| ids.into_iter().map(|id| id.0).collect());
            let answer = ReassignablePartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_error_message(None);
            let moved = broker
                .reassign_partition(&name, p.partition_index, replicas, deadline.remaining_ms())
                .await;
            partitions.push(match moved {
                Ok(()) => answer,
                Err(error) => {
                    let code = match &error {
                        BrokerError::Meta(e) => e.kafka_error_code(),
                        BrokerError::Controller(MetadataError::TimedOut(_)) => {
                            ResponseError::RequestTimedOut.code()
                        }
                        // Retriable: the controller may be moving.
                        _ => ResponseError::NotController.code(),
                    };
                    answer
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(error.to_string())))
                }
            });
        }
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    // As Kafka's controller: a null message, not the generated default "".
    AlterPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_responses(responses)
}

pub(super) fn list(
    broker: &Broker,
    ctx: &RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !ctx.authorized_on_cluster(broker, AclOperation::Describe) {
        // As Kafka: the error at the top, and the partitions asked for
        // with nothing about them.
        let topics = request
            .topics
            .into_iter()
            .flatten()
            .map(|topic| {
                let partitions = topic.partition_indexes.iter().map(|&index| {
                    OngoingPartitionReassignment::default().with_partition_index(index)
                });
                OngoingTopicReassignment::default()
                    .with_name(topic.name)
                    .with_partitions(partitions.collect())
            })
            .collect();
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
            .with_topics(topics);
    }
    let image = broker.image();
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.name.0.as_str() == topic && t.partition_indexes.contains(&partition)),
    };
    let ids = |list: &[i32]| list.iter().copied().map(BrokerId).collect();
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for (topic, p) in image.reassignments() {
        if !wanted(&topic, p.partition) {
            continue;
        }
        let ongoing = OngoingPartitionReassignment::default()
            .with_partition_index(p.partition)
            .with_replicas(ids(&p.replicas))
            .with_adding_replicas(ids(&p.adding))
            .with_removing_replicas(ids(&p.removing));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(ongoing),
            None => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![ongoing]),
            ),
        }
    }
    ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(topics)
}
