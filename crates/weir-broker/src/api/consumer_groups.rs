//! ConsumerGroupHeartbeat and ConsumerGroupDescribe: the consumer group
//! protocol of KIP-848 (`group.protocol=consumer`). The heartbeat handler
//! checks what Kafka checks before the group sees the request (the group
//! id, the coordinator, Read on the group, the regex), maps it onto the
//! engine's request, and answers once the group's records are replicated.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member as DescribedMember,
    TopicPartitions as DescribedTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::{AclOperation, ResourceType};

use super::{authorized_operations, RequestContext};
use crate::broker::Broker;
use weir_coord::consumer::{assignment_from, HeartbeatRequest};

fn failed(code: i16, message: impl Into<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.into())))
}

pub(super) fn heartbeat(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: ConsumerGroupHeartbeatRequest,
) -> impl Future<Output = ConsumerGroupHeartbeatResponse> + Send + 'static {
    let checked = check(broker, ctx, &request);
    let outcome = checked
        .map_err(|(code, message)| failed(code, message))
        .map(|()| {
            let group = request.group_id.to_string();
            let heartbeat = HeartbeatRequest {
                member_id: request.member_id.to_string(),
                member_epoch: request.member_epoch,
                instance_id: request.instance_id.map(|s| s.to_string()),
                rack_id: request.rack_id.map(|s| s.to_string()),
                rebalance_timeout_ms: request.rebalance_timeout_ms,
                subscribed_topic_names: request
                    .subscribed_topic_names
                    .map(|names| names.into_iter().map(|n| n.to_string()).collect()),
                subscribed_topic_regex: request.subscribed_topic_regex.map(|s| s.to_string()),
                server_assignor: request.server_assignor.map(|s| s.to_string()),
                owned_partitions: request.topic_partitions.map(|owned| {
                    assignment_from(owned.into_iter().map(|t| (t.topic_id, t.partitions)))
                }),
                client_id: ctx.client_id.clone(),
                client_host: ctx.client_host.clone(),
            };
            broker
                .consumer_groups()
                .heartbeat(broker.group_coordinators(), &group, heartbeat)
        });
    async move {
        let answer = match outcome {
            Err(response) => return response,
            Ok(answer) => answer.await,
        };
        match answer {
            Ok(response) => ConsumerGroupHeartbeatResponse::default()
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

/// What Kafka refuses before the group sees the request.
fn check(
    broker: &Broker,
    ctx: &RequestContext,
    request: &ConsumerGroupHeartbeatRequest,
) -> Result<(), (i16, String)> {
    let group = request.group_id.as_str();
    if group.is_empty() {
        return Err((
            ResponseError::InvalidRequest.code(),
            "GroupId can't be empty.".to_owned(),
        ));
    }
    broker
        .check_coordinator(group)
        .map_err(|code| (code, super::coordinator_error_message(code).to_owned()))?;
    if !ctx.authorized(broker, AclOperation::Read, ResourceType::Group, group) {
        return Err((
            ResponseError::GroupAuthorizationFailed.code(),
            "not authorized to read the group".to_owned(),
        ));
    }
    if let Some(regex) = request.subscribed_topic_regex.as_deref() {
        if !regex.is_empty() && regex::Regex::new(regex).is_err() {
            return Err((
                ResponseError::InvalidRegularExpression.code(),
                format!("SubscribedTopicRegex {regex:?} is not a valid regular expression."),
            ));
        }
    }
    Ok(())
}

/// ConsumerGroupDescribe: each consumer group as its coordinator sees it,
/// topics named by id and name. A classic group, or an unknown one, is
/// GROUP_ID_NOT_FOUND, as Kafka answers (clients then ask DescribeGroups).
pub(super) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let image = broker.image();
    let topic_partitions = |assignment: weir_coord::consumer::Assignment| {
        DescribedAssignment::default().with_topic_partitions(
            assignment
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
        )
    };
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
            let Some(description) = broker.consumer_groups().describe(group) else {
                let message = if broker.groups().state(group).is_some() {
                    format!("Group {group} is not a consumer group.")
                } else {
                    format!("Group {group} not found.")
                };
                return described
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(message)));
            };
            let members = description
                .members
                .into_iter()
                .map(|m| {
                    DescribedMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_instance_id(m.instance_id.map(StrBytes::from_string))
                        .with_rack_id(m.rack_id.map(StrBytes::from_string))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .into_iter()
                                .map(|n| TopicName(StrBytes::from_string(n)))
                                .collect(),
                        )
                        .with_subscribed_topic_regex(
                            m.subscribed_topic_regex.map(StrBytes::from_string),
                        )
                        .with_assignment(topic_partitions(m.assignment))
                        .with_target_assignment(topic_partitions(m.target_assignment))
                        // v1: 0 for a classic member, 1 for a consumer one.
                        .with_member_type(if m.classic { 0 } else { 1 })
                })
                .collect();
            let described = described
                .with_group_state(StrBytes::from_static_str(description.state.as_str()))
                .with_group_epoch(description.group_epoch)
                .with_assignment_epoch(description.assignment_epoch)
                .with_assignor_name(StrBytes::from_static_str(description.assignor.name()))
                .with_members(members);
            if request.include_authorized_operations {
                described.with_authorized_operations(authorized_operations::group(ctx, &group_id))
            } else {
                described
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
