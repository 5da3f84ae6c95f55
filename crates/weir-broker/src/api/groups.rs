//! ListGroups, DescribeGroups and DeleteGroups. Membership is not served
//! yet, so every group is one of committed offsets only: Kafka lists such a
//! group as Empty, with no protocol type and no members.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::{now_ms, Broker};
use crate::offsets::OffsetChange;

const EMPTY: &str = "Empty";

pub(super) fn list_groups(
    broker: &Broker,
    _ctx: &RequestContext,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    let wanted = |state: &str| {
        request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|s| s.eq_ignore_ascii_case(state))
    };
    let groups = if wanted(EMPTY) {
        broker
            .offsets()
            .groups()
            .into_iter()
            .map(|group| {
                ListedGroup::default()
                    .with_group_id(GroupId(StrBytes::from_string(group)))
                    .with_group_state(StrBytes::from_static_str(EMPTY))
            })
            .collect()
    } else {
        Vec::new()
    };
    ListGroupsResponse::default().with_groups(groups)
}

pub(super) fn describe_groups(
    broker: &Broker,
    _ctx: &RequestContext,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let groups = request
        .groups
        .into_iter()
        .map(|group| {
            let known = !broker.offsets().group_offsets(&group.0).is_empty();
            // Kafka describes a group it does not know as Dead, without error.
            let state = if known { EMPTY } else { "Dead" };
            DescribedGroup::default()
                .with_group_id(group)
                .with_group_state(StrBytes::from_static_str(state))
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

pub(super) fn delete_groups(
    broker: &Broker,
    _ctx: &RequestContext,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let results = request
        .groups_names
        .into_iter()
        .map(|group| {
            let offsets = broker.offsets().group_offsets(&group.0);
            let result = DeletableGroupResult::default().with_group_id(group.clone());
            if offsets.is_empty() {
                return result.with_error_code(ResponseError::GroupIdNotFound.code());
            }
            let changes = offsets
                .into_iter()
                .map(|((topic, partition), _)| OffsetChange {
                    topic,
                    partition,
                    value: None,
                })
                .collect();
            match broker.commit_offsets(&group.0, changes, now_ms()) {
                Ok(()) => result,
                Err(error) => {
                    tracing::error!(group = %group.0.as_str(), %error, "deleting a group failed");
                    result.with_error_code(ResponseError::CoordinatorNotAvailable.code())
                }
            }
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
