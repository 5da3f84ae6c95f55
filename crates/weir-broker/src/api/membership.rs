//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the classic group
//! membership protocol. Each handler maps its API version onto the engine's
//! request shape, waits for the group coordinator's answer, and maps it back.
//! The consumer group coordinator routes each request, in an event of the
//! group's `__consumer_offsets` shard: to the classic group, or to the
//! consumer group (KIP-848) of that id. The handlers only queue the event
//! and return a future that awaits its answer.

use bytes::Bytes;
use futures::future::{ready, BoxFuture, FutureExt};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use weir_meta::{AclOperation, ResourceType};

use super::RequestContext;
use crate::broker::Broker;
use weir_coord::classic::{
    error_code, Heartbeat, JoinGroup, LeaveGroup, LeavingMember, Protocol, SyncGroup,
};

fn text(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

fn invalid_group_id() -> i16 {
    ResponseError::InvalidGroupId.code()
}

pub(super) fn join_group(
    broker: &std::sync::Arc<Broker>,
    ctx: &RequestContext,
    request: JoinGroupRequest,
) -> BoxFuture<'static, JoinGroupResponse> {
    let v = ctx.version;
    // Before v7 the protocol name is not nullable.
    let protocol_name = move |name: Option<String>| match name {
        Some(name) => Some(text(name)),
        None if v < 7 => Some(StrBytes::default()),
        None => None,
    };
    if request.group_id.is_empty() {
        return ready(
            JoinGroupResponse::default()
                .with_error_code(invalid_group_id())
                .with_generation_id(-1)
                .with_protocol_name(protocol_name(None))
                .with_member_id(request.member_id),
        )
        .boxed();
    }
    if let Err(code) = broker
        .check_coordinator(&request.group_id)
        .and_then(|()| may_read_group(broker, ctx, &request.group_id))
    {
        return ready(
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_protocol_name(protocol_name(None))
                .with_member_id(request.member_id),
        )
        .boxed();
    }
    let join = JoinGroup {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|id| id.to_string()),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| Protocol::new(p.name.to_string(), p.metadata.to_vec()))
            .collect(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout serves as one.
        rebalance_timeout_ms: if v >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    // A consumer group (KIP-848) takes classic members too (its online
    // migration): the consumer group coordinator routes the request.
    let answer =
        broker
            .consumer_groups()
            .join(broker.group_coordinators(), &request.group_id, join);
    async move {
        let response = answer.await;
        JoinGroupResponse::default()
            .with_error_code(error_code(response.error))
            .with_generation_id(response.generation_id)
            .with_protocol_type(response.protocol_type.map(text))
            .with_protocol_name(protocol_name(response.protocol_name))
            .with_leader(text(response.leader))
            .with_skip_assignment(response.skip_assignment)
            .with_member_id(text(response.member_id))
            .with_members(
                response
                    .members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(text(m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(text))
                            .with_metadata(Bytes::from(m.metadata))
                    })
                    .collect(),
            )
    }
    .boxed()
}

pub(super) fn sync_group(
    broker: &std::sync::Arc<Broker>,
    ctx: &RequestContext,
    request: SyncGroupRequest,
) -> BoxFuture<'static, SyncGroupResponse> {
    if request.group_id.is_empty() {
        return ready(SyncGroupResponse::default().with_error_code(invalid_group_id())).boxed();
    }
    if let Err(code) = broker
        .check_coordinator(&request.group_id)
        .and_then(|()| may_read_group(broker, ctx, &request.group_id))
    {
        return ready(SyncGroupResponse::default().with_error_code(code)).boxed();
    }
    let sync = SyncGroup {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|id| id.to_string()),
        generation_id: request.generation_id,
        protocol_type: request.protocol_type.map(|p| p.to_string()),
        protocol_name: request.protocol_name.map(|p| p.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let answer =
        broker
            .consumer_groups()
            .sync(broker.group_coordinators(), &request.group_id, sync);
    async move {
        let response = answer.await;
        SyncGroupResponse::default()
            .with_error_code(error_code(response.error))
            .with_protocol_type(response.protocol_type.map(text))
            .with_protocol_name(response.protocol_name.map(text))
            .with_assignment(Bytes::from(response.assignment))
    }
    .boxed()
}

pub(super) fn heartbeat(
    broker: &std::sync::Arc<Broker>,
    ctx: &RequestContext,
    request: HeartbeatRequest,
) -> BoxFuture<'static, HeartbeatResponse> {
    if request.group_id.is_empty() {
        return ready(HeartbeatResponse::default().with_error_code(invalid_group_id())).boxed();
    }
    if let Err(code) = broker
        .check_coordinator(&request.group_id)
        .and_then(|()| may_read_group(broker, ctx, &request.group_id))
    {
        return ready(HeartbeatResponse::default().with_error_code(code)).boxed();
    }
    let heartbeat = Heartbeat {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|id| id.to_string()),
        generation_id: request.generation_id,
    };
    let answer = broker.consumer_groups().classic_heartbeat(
        broker.group_coordinators(),
        &request.group_id,
        heartbeat,
    );
    async move { HeartbeatResponse::default().with_error_code(error_code(answer.await.err())) }
        .boxed()
}

pub(super) fn leave_group(
    broker: &std::sync::Arc<Broker>,
    ctx: &RequestContext,
    request: LeaveGroupRequest,
) -> BoxFuture<'static, LeaveGroupResponse> {
    if request.group_id.is_empty() {
        return ready(LeaveGroupResponse::default().with_error_code(invalid_group_id())).boxed();
    }
    if let Err(code) = broker
        .check_coordinator(&request.group_id)
        .and_then(|()| may_read_group(broker, ctx, &request.group_id))
    {
        return ready(LeaveGroupResponse::default().with_error_code(code)).boxed();
    }
    let members = if ctx.version >= 3 {
        request
            .members
            .into_iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|id| id.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let answer = broker.consumer_groups().leave(
        broker.group_coordinators(),
        &request.group_id,
        LeaveGroup { members },
    );
    let version = ctx.version;
    async move {
        let response = answer.await;
        if version < 3 {
            // One member, answered at the request level.
            let error = response
                .error
                .or_else(|| response.members.first().and_then(|m| m.error));
            return LeaveGroupResponse::default().with_error_code(error_code(error));
        }
        LeaveGroupResponse::default()
            .with_error_code(error_code(response.error))
            .with_members(
                response
                    .members
                    .into_iter()
                    .map(|m| {
                        MemberResponse::default()
                            .with_member_id(text(m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(text))
                            .with_error_code(error_code(m.error))
                    })
                    .collect(),
            )
    }
    .boxed()
}

/// A member of a group needs Read on it: GROUP_AUTHORIZATION_FAILED
/// otherwise.
fn may_read_group(broker: &Broker, ctx: &RequestContext, group: &str) -> Result<(), i16> {
    if ctx.authorized(broker, AclOperation::Read, ResourceType::Group, group) {
        Ok(())
    } else {
        Err(ResponseError::GroupAuthorizationFailed.code())
    }
}
