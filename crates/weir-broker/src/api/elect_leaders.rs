//! ElectLeaders: an operator moves partitions' leadership back to their
//! preferred replicas, or gives leaderless partitions a leader out of sync
//! (an unclean election). The controller quorum decides each partition's
//! outcome (`Command::ElectLeaders`); the answer waits for the commit,
//! within the request's `timeout_ms`.

use std::sync::Arc;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::{AclOperation, Election, ElectionOutcome};

use super::RequestContext;
use crate::broker::quorum::MetadataError;
use crate::broker::{Broker, BrokerError};

/// Kafka's election types (`ElectionType`).
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

pub(super) async fn elect_leaders(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let version = ctx.version;
    // Moving leadership alters the cluster.
    if !ctx.authorized_on_cluster(&broker, AclOperation::Alter) {
        return failed(
            version,
            &request,
            ResponseError::ClusterAuthorizationFailed,
            Some("Cluster authorization failed.".to_owned()),
        );
    }
    // v0 has no type: preferred (the decoder leaves the field at 0).
    let unclean = match request.election_type {
        PREFERRED => false,
        UNCLEAN => true,
        other => {
            let message = format!("Unknown election type {other}");
            return failed(
                version,
                &request,
                ResponseError::InvalidRequest,
                Some(message),
            );
        }
    };
    let partitions: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            .collect()
    });
    match broker
        .elect_leaders(unclean, partitions, request.timeout_ms)
        .await
    {
        Ok(elections) => answer(&request, elections),
        Err(error) => {
            let (code, message) = match &error {
                BrokerError::Meta(e) => (
                    ResponseError::try_from_code(e.kafka_error_code())
                        .unwrap_or(ResponseError::UnknownServerError),
                    Some(error.to_string()),
                ),
                // Kafka's controller times out with no message of its own.
                BrokerError::Controller(MetadataError::TimedOut(_)) => {
                    (ResponseError::RequestTimedOut, None)
                }
                // Retriable: the controller may be moving.
                _ => (ResponseError::NotController, Some(error.to_string())),
            };
            tracing::info!(%error, "leader election not made");
            failed(version, &request, code, message)
        }
    }
}

/// The response to a committed election: the partitions asked for, as the
/// request lists them (the command keeps its order). Asked for every
/// partition, Kafka's controller names every topic but leaves out the
/// partitions whose election was not needed.
fn answer(request: &ElectLeadersRequest, elections: Vec<Election>) -> ElectLeadersResponse {
    let result = |e: &Election| {
        PartitionResult::default()
            .with_partition_id(e.partition)
            .with_error_code(e.outcome.kafka_error_code())
            .with_error_message(e.message().map(StrBytes::from_string))
    };
    let mut elections = elections.into_iter();
    let topics = match &request.topic_partitions {
        Some(asked) => asked
            .iter()
            .map(|t| {
                let partitions = elections
                    .by_ref()
                    .take(t.partitions.len())
                    .map(|e| result(&e))
                    .collect();
                ReplicaElectionResult::default()
                    .with_topic(t.topic.clone())
                    .with_partition_result(partitions)
            })
            .collect(),
        None => {
            // By topic, then partition: a topic's partitions are together.
            let mut topics: Vec<ReplicaElectionResult> = Vec::new();
            for e in elections {
                if topics.last().is_none_or(|t| t.topic.0.as_str() != e.topic) {
                    topics.push(
                        ReplicaElectionResult::default()
                            .with_topic(TopicName(StrBytes::from_string(e.topic.clone()))),
                    );
                }
                if e.outcome != ElectionOutcome::NotNeeded {
                    let topic = topics.last_mut().expect("pushed above");
                    topic.partition_result.push(result(&e));
                }
            }
            topics
        }
    };
    ElectLeadersResponse::default().with_replica_election_results(topics)
}

/// Kafka's error response: the error at the top (v1+) and on every
/// partition asked for.
fn failed(
    version: i16,
    request: &ElectLeadersRequest,
    error: ResponseError,
    message: Option<String>,
) -> ElectLeadersResponse {
    let topics = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionResult::default()
                        .with_partition_id(*p)
                        .with_error_code(error.code())
                        .with_error_message(message.clone().map(StrBytes::from_string))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(partitions)
        })
        .collect();
    let response = ElectLeadersResponse::default().with_replica_election_results(topics);
    if version >= 1 {
        response.with_error_code(error.code())
    } else {
        response
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::protocol::Encodable;

    use super::*;

    /// v0 has no top-level error code: the error goes on the partitions
    /// alone, and the response still encodes.
    #[test]
    fn an_error_response_fits_every_version() {
        let request = ElectLeadersRequest::default().with_topic_partitions(Some(vec![
            TopicPartitions::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![0, 1]),
        ]));
        for version in 0..=2 {
            let response = failed(version, &request, ResponseError::RequestTimedOut, None);
            let top = if version == 0 { 0 } else { 7 };
            assert_eq!(response.error_code, top, "v{version}");
            let partitions = &response.replica_election_results[0].partition_result;
            assert_eq!(partitions.len(), 2);
            assert!(partitions
                .iter()
                .all(|p| p.error_code == 7 && p.error_message.is_none()));
            let mut buf = bytes::BytesMut::new();
            response.encode(&mut buf, version).unwrap();
        }
    }
}
