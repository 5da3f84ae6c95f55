//! OffsetForLeaderEpoch: where a leader epoch ended in the leader's log.
//! Followers use it to find a divergent suffix after a leader change
//! (KIP-101, KIP-279); consumers to detect a log truncated under them
//! (KIP-320).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use kafka_protocol::ResponseError;
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use super::fetch::led_at_epoch;
use super::RequestContext;
use crate::broker::Broker;

pub(super) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // As Kafka (KIP-320): followers ask with ClusterAction on the cluster
    // (its denial not logged), consumers with Describe on each topic.
    let cluster_action = ctx.may(
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    );
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let denied = !cluster_action
                && !ctx.authorized(broker, AclOperation::Describe, ResourceType::Topic, &name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let answer = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if denied {
                        return answer
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    match led_at_epoch(broker, &name, p.partition, p.current_leader_epoch) {
                        Ok(partition) => {
                            let (epoch, end) = partition.log().end_offset_for_epoch(p.leader_epoch);
                            answer.with_leader_epoch(epoch).with_end_offset(end)
                        }
                        Err(code) => answer.with_error_code(code),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
