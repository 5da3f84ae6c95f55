//! ListGroups, DescribeGroups and DeleteGroups. A group is known if the
//! coordinator hosts it (it has or had members, or a transaction committed
//! offsets for it) or if it holds committed offsets, or offsets of an open
//! transaction, only; Kafka shows the latter as Empty, without protocol
//! type.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use super::{authorized_operations, RequestContext};
use crate::broker::Broker;
use crate::coordinator::COORDINATOR_WRITE_TIMEOUT;
use crate::groups::classic::{FoundGroup, GroupAdminError};
use weir_coord::classic::GroupState;

fn text(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

/// Kafka's names for the types of groups (ListGroups v5): the classic
/// protocol's, KIP-848's and KIP-932's.
const CLASSIC_GROUP_TYPE: &str = "classic";
const CONSUMER_GROUP_TYPE: &str = "consumer";
const SHARE_GROUP_TYPE: &str = "share";
/// The protocol type Kafka lists share groups with.
const SHARE_PROTOCOL_TYPE: &str = "share";

pub(super) fn list_groups(
    broker: &Broker,
    ctx: &RequestContext,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    // A filter lists only the states (v4) or types (v5) it names, in any
    // case; an empty one lists all.
    let passes = |filter: &[StrBytes], value: &str| {
        filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
    };
    let wanted = |state: &str| passes(&request.states_filter, state);
    let type_wanted = |group_type: &str| passes(&request.types_filter, group_type);
    // (group, state, protocol type, group type)
    let mut groups: Vec<(String, String, String, &str)> = Vec::new();
    let consumer_groups = broker.consumer_groups().list();
    if type_wanted(CONSUMER_GROUP_TYPE) {
        groups.extend(consumer_groups.iter().map(|g| {
            (
                g.group_id.clone(),
                g.state.as_str().to_owned(),
                "consumer".to_owned(),
                CONSUMER_GROUP_TYPE,
            )
        }));
    }
    if type_wanted(SHARE_GROUP_TYPE) {
        groups.extend(
            broker
                .share_groups()
                .list()
                .into_iter()
                .map(|(group, has_members)| {
                    let state = if has_members { "Stable" } else { "Empty" };
                    (
                        group,
                        state.to_owned(),
                        SHARE_PROTOCOL_TYPE.to_owned(),
                        SHARE_GROUP_TYPE,
                    )
                }),
        );
    }
    if type_wanted(CLASSIC_GROUP_TYPE) {
        let mut classic = broker.groups().list();
        for group in broker.offsets().groups() {
            if !classic.iter().any(|(name, _, _)| *name == group) {
                classic.push((group, GroupState::Empty, String::new()));
            }
        }
        groups.extend(
            classic
                .into_iter()
                .filter(|(name, _, _)| !consumer_groups.iter().any(|g| g.group_id == *name))
                .map(|(name, state, protocol_type)| {
                    (
                        name,
                        state.as_str().to_owned(),
                        protocol_type,
                        CLASSIC_GROUP_TYPE,
                    )
                }),
        );
    }
    // Describe on the cluster lists every group; otherwise only those the
    // principal may describe, as Kafka does.
    if !ctx.may(
        AclOperation::Describe,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        groups.retain(|(name, _, _, _)| ctx.may(AclOperation::Describe, ResourceType::Group, name));
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let groups = groups
        .into_iter()
        .filter(|(_, state, _, _)| wanted(state))
        // Each broker lists the groups it coordinates; clients ask them all.
        .filter(|(group, _, _, _)| broker.check_coordinator(group).is_ok())
        .map(|(group, state, protocol_type, group_type)| {
            ListedGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_protocol_type(text(protocol_type))
                .with_group_state(text(state))
                .with_group_type(StrBytes::from_static_str(group_type))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

pub(super) async fn describe_groups(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let with_operations = ctx.version >= 3 && request.include_authorized_operations;
    let described = request.groups.into_iter().map(|group| async move {
        let described = DescribedGroup::default().with_group_id(group.clone());
        if !ctx.authorized(broker, AclOperation::Describe, ResourceType::Group, &group) {
            return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        if let Err(code) = broker.check_coordinator(&group) {
            return described.with_error_code(code);
        }
        let found = match broker.groups().find(&group).await {
            Ok(found) => found,
            Err(error) => return described.with_error_code(error.code()),
        };
        let dead = described
            .clone()
            .with_group_state(StrBytes::from_static_str(GroupState::Dead.as_str()));
        match found {
            FoundGroup::Classic(summary) => {
                let members = summary
                    .members
                    .into_iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(text(m.member_id))
                            // A static member's instance id is in the
                            // response from v4 on.
                            .with_group_instance_id(
                                m.group_instance_id.filter(|_| ctx.version >= 4).map(text),
                            )
                            .with_client_id(text(m.client_id))
                            .with_client_host(text(m.client_host))
                            .with_member_metadata(Bytes::from(m.metadata))
                            .with_member_assignment(Bytes::from(m.assignment))
                    })
                    .collect();
                described
                    .with_group_state(StrBytes::from_static_str(summary.state.as_str()))
                    .with_protocol_type(text(summary.protocol_type))
                    .with_protocol_data(text(summary.protocol_name))
                    .with_members(members)
            }
            FoundGroup::OffsetsOnly => {
                described.with_group_state(StrBytes::from_static_str(GroupState::Empty.as_str()))
            }
            // A consumer group is described by ConsumerGroupDescribe, a
            // share group by ShareGroupDescribe. Kafka 4 answers here as
            // for a group it does not know: Dead, with GROUP_ID_NOT_FOUND
            // and a message from v6 on (KIP-1043), without error before,
            // where the response has no message.
            FoundGroup::OtherType | FoundGroup::Unknown if ctx.version < 6 => dead,
            FoundGroup::OtherType => dead
                .with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(text(format!(
                    "Group {} is not a classic group.",
                    group.0
                )))),
            FoundGroup::Unknown => dead
                .with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(text(format!("Group {} not found.", group.0)))),
        }
    });
    let mut groups = futures::future::join_all(described).await;
    if with_operations {
        for group in groups.iter_mut().filter(|g| g.error_code == 0) {
            group.authorized_operations = authorized_operations::group(ctx, &group.group_id);
        }
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

/// DeleteGroups: each group is answered once the in-sync replicas of its
/// `__consumer_offsets` partition hold its deletion. The deletions happen
/// here; the returned future only waits for the replicas.
pub(super) fn delete_groups(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DeleteGroupsRequest,
) -> impl Future<Output = DeleteGroupsResponse> + Send + 'static {
    let (results, writes): (Vec<_>, Vec<_>) = request
        .groups_names
        .into_iter()
        .map(|group| {
            let result = DeletableGroupResult::default().with_group_id(group.clone());
            if !ctx.authorized(broker, AclOperation::Delete, ResourceType::Group, &group) {
                let code = ResponseError::GroupAuthorizationFailed.code();
                return (result.with_error_code(code), Vec::new());
            }
            if let Err(code) = broker.check_coordinator(&group) {
                return (result.with_error_code(code), Vec::new());
            }
            if broker.consumer_groups().hosts(&group) {
                return match broker.consumer_groups().delete(broker, &group.0) {
                    Ok(write) => (result, write.into_iter().collect()),
                    Err(error) => (result.with_error_code(error.code()), Vec::new()),
                };
            }
            if broker.share_groups().hosts(&group) {
                return match super::share_admin::delete_group(broker, ctx, &group.0) {
                    Ok(writes) => (result, writes),
                    Err(code) => (result.with_error_code(code), Vec::new()),
                };
            }
            let error = match broker.groups().delete(broker, &group.0) {
                Ok(write) => return (result, write.into_iter().collect()),
                Err(GroupAdminError::NotFound) => ResponseError::GroupIdNotFound,
                Err(GroupAdminError::NotEmpty) => ResponseError::NonEmptyGroup,
                Err(GroupAdminError::Membership(error)) => {
                    return (result.with_error_code(error.code()), Vec::new())
                }
                Err(GroupAdminError::Unavailable) => ResponseError::CoordinatorNotAvailable,
            };
            (result.with_error_code(error.code()), Vec::new())
        })
        .unzip();
    let node_id = broker.node_id();
    async move {
        let replicated = futures::future::join_all(writes.into_iter().map(|writes| async move {
            for write in writes {
                write.replicated(node_id, COORDINATOR_WRITE_TIMEOUT).await?;
            }
            Ok::<(), ResponseError>(())
        }))
        .await;
        let results = results
            .into_iter()
            .zip(replicated)
            .map(|(result, replicated)| match replicated {
                Err(error) if result.error_code == 0 => result.with_error_code(error.code()),
                _ => result,
            })
            .collect();
        DeleteGroupsResponse::default().with_results(results)
    }
}
