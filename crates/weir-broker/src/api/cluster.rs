//! DescribeCluster (the brokers and the controller) and DescribeQuorum
//! (the controller quorum's Raft state, as `kafka-metadata-quorum.sh`
//! shows it).

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::AclOperation;

use super::{authorized_operations, RequestContext};
use crate::broker::Broker;

/// DescribeCluster's `endpoint_type`s: Weir's listeners are brokers'.
const BROKER_ENDPOINT: i8 = 1;
const CONTROLLER_ENDPOINT: i8 = 2;

pub(super) fn describe_cluster(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // As Kafka: v0 knows no endpoint types, so any mismatch is INVALID_REQUEST.
    let refuse = |error: ResponseError, message: String| {
        let error = if ctx.version == 0 {
            ResponseError::InvalidRequest
        } else {
            error
        };
        DescribeClusterResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    match request.endpoint_type {
        BROKER_ENDPOINT => {}
        CONTROLLER_ENDPOINT => {
            return refuse(
                ResponseError::MismatchedEndpointType,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".into(),
            )
        }
        other => {
            return refuse(
                ResponseError::UnsupportedEndpointType,
                format!("Unsupported endpoint type {other}"),
            )
        }
    }
    // v2 lists fenced brokers too when asked (KIP-1073).
    let with_fenced = ctx.version >= 2 && request.include_fenced_brokers;
    let listener = ctx.channel.listener();
    let brokers = broker.with_image(|image| {
        image
            .brokers()
            .filter(|b| with_fenced || !image.is_fenced(b.id))
            .filter_map(|b| {
                let (host, port) = b.endpoint(listener)?;
                Some(
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(b.id))
                        .with_host(StrBytes::from_string(host.to_owned()))
                        .with_port(i32::from(port))
                        .with_rack(b.rack.clone().map(StrBytes::from_string))
                        .with_is_fenced(image.is_fenced(b.id)),
                )
            })
            .collect()
    });
    let response = DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(broker.cluster_id().to_owned()))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_brokers(brokers);
    // A broker answers anyone (Kafka's controller wants Alter on the
    // cluster, but Weir's listeners are brokers'); the operations are told
    // only to who may describe the cluster, as Kafka.
    if request.include_cluster_authorized_operations {
        let operations = if ctx.authorized_on_cluster(broker, AclOperation::Describe) {
            authorized_operations::cluster(ctx)
        } else {
            0
        };
        response.with_cluster_authorized_operations(operations)
    } else {
        response
    }
}

/// The name Kafka gives the controller quorum's log.
const METADATA_TOPIC: &str = "__cluster_metadata";

pub(super) fn describe_quorum(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    // Kafka's controller answers it to who may describe the cluster.
    if !ctx.authorized_on_cluster(broker, AclOperation::Describe) {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
    }
    let asked_for_metadata_log = request.topics.iter().any(|t| {
        t.topic_name.0.as_str() == METADATA_TOPIC
            && t.partitions.iter().any(|p| p.partition_index == 0)
    });
    if !asked_for_metadata_log {
        return DescribeQuorumResponse::default()
            .with_error_code(kafka_protocol::ResponseError::UnknownTopicOrPartition.code());
    }
    let status = broker.controller_status();
    let index = |i: Option<u64>| i.map_or(-1, |i| i as i64);
    // As Kafka, the leader's own fetch and caught-up times are the time of
    // the answer.
    let leading = status.leader_id == Some(status.node_id);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(-1, |d| d.as_millis() as i64);
    let voters = status
        .voters
        .iter()
        .map(|(id, _)| {
            // Only this node's own log end is known here.
            let (log_end, seen_ms) = if *id == status.node_id {
                (
                    index(status.last_log_index),
                    if leading { now_ms } else { -1 },
                )
            } else {
                (-1, -1)
            };
            ReplicaState::default()
                .with_replica_id(BrokerId(*id as i32))
                .with_log_end_offset(log_end)
                .with_last_fetch_timestamp(seen_ms)
                .with_last_caught_up_timestamp(seen_ms)
        })
        .collect();
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(status.leader_id.map_or(-1, |id| id as i32)))
        .with_leader_epoch(status.term as i32)
        .with_high_watermark(index(status.applied_index))
        .with_current_voters(voters);
    let mut response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![partition])]);
    if ctx.version >= 2 {
        let nodes = status
            .voters
            .iter()
            .filter_map(|(id, addr)| {
                let addr: std::net::SocketAddr = addr.parse().ok()?;
                Some(
                    Node::default()
                        .with_node_id(BrokerId(*id as i32))
                        .with_listeners(vec![Listener::default()
                            .with_name(StrBytes::from_static_str("CONTROLLER"))
                            .with_host(StrBytes::from_string(addr.ip().to_string()))
                            .with_port(addr.port())]),
                )
            })
            .collect();
        response = response.with_nodes(nodes);
    }
    response
}
