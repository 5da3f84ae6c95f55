//! ListGroups, DescribeGroups and DeleteGroups. A group is known if the
//! coordinator hosts it (it has or had members, or a transaction committed
//! offsets for it) or if it holds committed offsets, or offsets of an open
//! transaction, only; Kafka shows the latter as Empty, without protocol
//! type.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
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
use crate::partition::ReplicatedWrite;
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
/// `__consumer_offsets` partition hold its deletion. The deletions are
/// queued here, in the order asked; the returned future waits for their
/// turns and then for the replicas.
pub(super) fn delete_groups(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DeleteGroupsRequest,
) -> impl Future<Output = DeleteGroupsResponse> + Send + 'static {
    let deletions: Vec<(DeletableGroupResult, Deletion)> = request
        .groups_names
        .into_iter()
        .map(|group| {
            let result = DeletableGroupResult::default().with_group_id(group.clone());
            (result, delete_group(broker, ctx, &group))
        })
        .collect();
    let node_id = broker.node_id();
    async move {
        let results =
            futures::future::join_all(deletions.into_iter().map(|(result, deletion)| async move {
                let outcome = async {
                    for write in deletion.await? {
                        write
                            .replicated(node_id, COORDINATOR_WRITE_TIMEOUT)
                            .await
                            .map_err(|error| error.code())?;
                    }
                    Ok::<(), i16>(())
                };
                match outcome.await {
                    Ok(()) => result,
                    Err(code) => result.with_error_code(code),
                }
            }))
            .await;
        DeleteGroupsResponse::default().with_results(results)
    }
}

/// The deletion of one group: the writes to wait for, or the error code.
type Deletion = BoxFuture<'static, Result<Vec<ReplicatedWrite>, i16>>;

/// Queues the deletion of `group`, of whichever type it is.
fn delete_group(broker: &Arc<Broker>, ctx: &RequestContext, group: &str) -> Deletion {
    if !ctx.authorized(broker, AclOperation::Delete, ResourceType::Group, group) {
        let code = ResponseError::GroupAuthorizationFailed.code();
        return Box::pin(std::future::ready(Err(code)));
    }
    if let Err(code) = broker.check_coordinator(group) {
        return Box::pin(std::future::ready(Err(code)));
    }
    if broker.consumer_groups().hosts(group) {
        let deleted = broker
            .consumer_groups()
            .delete(broker.group_coordinators(), group);
        return Box::pin(async move {
            let write = deleted.await.map_err(|error| error.code())?;
            Ok(write.into_iter().collect())
        });
    }
    if broker.share_groups().hosts(group) {
        return Box::pin(super::share_admin::delete_group(broker, ctx, group));
    }
    let deleted = broker.groups().delete(broker.group_coordinators(), group);
    Box::pin(async move {
        let code = match deleted.await {
            Ok(write) => return Ok(write.into_iter().collect()),
            Err(GroupAdminError::NotFound) => ResponseError::GroupIdNotFound.code(),
            Err(GroupAdminError::NotEmpty) => ResponseError::NonEmptyGroup.code(),
            Err(GroupAdminError::Membership(error)) => error.code(),
            Err(GroupAdminError::Unavailable) => ResponseError::CoordinatorNotAvailable.code(),
        };
        Err(code)
    })
}
