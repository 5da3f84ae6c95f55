//! DescribeAcls, CreateAcls and DeleteAcls: the ACLs in the replicated
//! metadata, with Kafka's per-binding and per-filter outcomes.
//!
//! Kafka answers these with SECURITY_DISABLED when its broker runs without
//! an authorizer. Weir always stores ACLs in the cluster metadata, whether
//! or not a listener enforces them, so it always manages them: an operator
//! can set ACLs up before turning authorization on.

use std::sync::Arc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::{
    AclBinding, AclBindingFilter, AclError, AclOperation, AclPermissionType, PatternType,
    ResourceType,
};

use super::admin::{failure, Failure};
use super::RequestContext;
use crate::broker::{Broker, BrokerError};

/// DescribeAcls: the bindings the filter matches, one resource entry per
/// (type, name, pattern type) as Kafka groups them. A filter with a code
/// Kafka calls UNKNOWN fails the whole response with INVALID_REQUEST (and
/// the message of Kafka's controller for such a filter), where Kafka's
/// broker drops the connection over it.
pub(super) fn describe_acls(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    if !ctx.authorized_on_cluster(broker, AclOperation::Describe) {
        let denied = ResponseError::ClusterAuthorizationFailed;
        return DescribeAclsResponse::default()
            .with_error_code(denied.code())
            .with_error_message(Some(StrBytes::from_string(denied.to_string())));
    }
    let filter = AclBindingFilter {
        resource_type: ResourceType::from_code(request.resource_type_filter),
        resource_name: text(request.resource_name_filter),
        pattern_type: PatternType::from_code(request.pattern_type_filter),
        principal: text(request.principal_filter),
        host: text(request.host_filter),
        operation: AclOperation::from_code(request.operation),
        permission: AclPermissionType::from_code(request.permission_type),
    };
    if let Err(error) = filter.check() {
        let (code, message) = acl_failure(error);
        return DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let bindings = broker.with_image(|image| image.describe_acls(&filter));
    DescribeAclsResponse::default().with_resources(group_by_resource(bindings))
}

/// Bindings in the image's order (resource first) as the response's
/// resources, each with its entries.
fn group_by_resource(bindings: Vec<AclBinding>) -> Vec<DescribeAclsResource> {
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for binding in bindings {
        let description = AclDescription::default()
            .with_principal(StrBytes::from_string(binding.principal))
            .with_host(StrBytes::from_string(binding.host))
            .with_operation(binding.operation.code())
            .with_permission_type(binding.permission.code());
        let same = resources.last_mut().filter(|r| {
            r.resource_type == binding.resource_type.code()
                && r.pattern_type == binding.pattern_type.code()
                && r.resource_name.as_str() == binding.resource_name
        });
        match same {
            Some(resource) => resource.acls.push(description),
            None => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(binding.resource_type.code())
                    .with_resource_name(StrBytes::from_string(binding.resource_name))
                    .with_pattern_type(binding.pattern_type.code())
                    .with_acls(vec![description]),
            ),
        }
    }
    resources
}

/// CreateAcls: each binding's outcome, in request order. The valid ones
/// are created together and acknowledged once the controller quorum has
/// committed them; an invalid one is answered here with Kafka's message.
/// Without Alter on the cluster (`allowed` false) every creation is
/// CLUSTER_AUTHORIZATION_FAILED.
pub(super) async fn create_acls(
    broker: Arc<Broker>,
    allowed: bool,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    if !allowed {
        let denied = ResponseError::ClusterAuthorizationFailed;
        let results = request
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(denied.code())
                    .with_error_message(Some(StrBytes::from_string(denied.to_string())))
            })
            .collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let bindings: Vec<AclBinding> = request
        .creations
        .into_iter()
        .map(|c| AclBinding {
            resource_type: ResourceType::from_code(c.resource_type),
            resource_name: c.resource_name.to_string(),
            pattern_type: PatternType::from_code(c.resource_pattern_type),
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: AclOperation::from_code(c.operation),
            permission: AclPermissionType::from_code(c.permission_type),
        })
        .collect();
    let checked: Vec<Result<(), AclError>> = bindings.iter().map(AclBinding::check).collect();
    let outcomes = submit_valid(bindings, checked, |valid| broker.create_acls(valid)).await;
    let results = outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Ok(()) => AclCreationResult::default(),
            Err((code, message)) => AclCreationResult::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// DeleteAcls: per filter, in request order, the bindings it removed, or
/// why it could not be used. Answered once the controller quorum has
/// committed the deletions.
/// Without Alter on the cluster (`allowed` false) every filter is
/// CLUSTER_AUTHORIZATION_FAILED.
pub(super) async fn delete_acls(
    broker: Arc<Broker>,
    allowed: bool,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    if !allowed {
        let denied = ResponseError::ClusterAuthorizationFailed;
        let results = request
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(denied.code())
                    .with_error_message(Some(StrBytes::from_string(denied.to_string())))
            })
            .collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let filters: Vec<AclBindingFilter> = request
        .filters
        .into_iter()
        .map(|f| AclBindingFilter {
            resource_type: ResourceType::from_code(f.resource_type_filter),
            resource_name: text(f.resource_name_filter),
            pattern_type: PatternType::from_code(f.pattern_type_filter),
            principal: text(f.principal_filter),
            host: text(f.host_filter),
            operation: AclOperation::from_code(f.operation),
            permission: AclPermissionType::from_code(f.permission_type),
        })
        .collect();
    let checked: Vec<Result<(), AclError>> = filters.iter().map(AclBindingFilter::check).collect();
    let outcomes = submit_valid(filters, checked, |valid| broker.delete_acls(valid)).await;
    let results = outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Ok(deleted) => DeleteAclsFilterResult::default()
                .with_matching_acls(deleted.into_iter().map(matching_acl).collect()),
            Err((code, message)) => DeleteAclsFilterResult::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

/// Submits the items that passed their check (if any) and returns every
/// item's outcome in order: its check's failure, or what the controller
/// made of it. The controller checks them again; checking here first spares
/// a request of nothing but invalid items the round trip, and answers those
/// items as they are even while the quorum is unavailable.
async fn submit_valid<I, T, F>(
    items: Vec<I>,
    checked: Vec<Result<(), AclError>>,
    submit: impl FnOnce(Vec<I>) -> F,
) -> Vec<Result<T, Failure>>
where
    T: Clone,
    F: std::future::Future<Output = Result<Vec<Result<T, AclError>>, BrokerError>>,
{
    let valid: Vec<I> = items
        .into_iter()
        .zip(&checked)
        .filter(|(_, check)| check.is_ok())
        .map(|(item, _)| item)
        .collect();
    let mut submitted = if valid.is_empty() {
        Vec::new()
    } else {
        let count = valid.len();
        match submit(valid).await {
            Ok(outcomes) => outcomes
                .into_iter()
                .map(|o| o.map_err(acl_failure))
                .collect(),
            Err(error) => vec![Err(failure(error)); count],
        }
    }
    .into_iter();
    checked
        .into_iter()
        .map(|check| match check {
            Err(error) => Err(acl_failure(error)),
            Ok(()) => submitted.next().unwrap_or_else(|| {
                Err((
                    ResponseError::UnknownServerError,
                    "the controller answered fewer items than it was sent".to_owned(),
                ))
            }),
        })
        .collect()
}

fn matching_acl(binding: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(binding.resource_type.code())
        .with_resource_name(StrBytes::from_string(binding.resource_name))
        .with_pattern_type(binding.pattern_type.code())
        .with_principal(StrBytes::from_string(binding.principal))
        .with_host(StrBytes::from_string(binding.host))
        .with_operation(binding.operation.code())
        .with_permission_type(binding.permission.code())
}

fn acl_failure(error: AclError) -> Failure {
    let code = ResponseError::try_from_code(error.kafka_error_code())
        .unwrap_or(ResponseError::UnknownServerError);
    (code, error.to_string())
}

fn text(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        who: &str,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.to_owned(),
            pattern_type: pattern,
            principal: format!("User:{who}"),
            host: "*".to_owned(),
            operation: AclOperation::Read,
            permission: AclPermissionType::Allow,
        }
    }

    #[test]
    fn bindings_are_grouped_by_type_name_and_pattern_type() {
        use PatternType::{Literal, Prefixed};
        use ResourceType::{Group, Topic};
        // The image's order: by type, then name, then pattern type.
        let mut bindings = vec![
            binding(Topic, "t", Literal, "alice"),
            binding(Topic, "t", Literal, "bob"),
            binding(Topic, "t", Prefixed, "alice"),
            binding(Topic, "u", Literal, "alice"),
            binding(Group, "t", Literal, "alice"),
        ];
        bindings.sort();
        let resources = group_by_resource(bindings);
        let shape: Vec<(i8, &str, i8, Vec<&str>)> = resources
            .iter()
            .map(|r| {
                (
                    r.resource_type,
                    r.resource_name.as_str(),
                    r.pattern_type,
                    r.acls.iter().map(|a| a.principal.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (2, "t", 3, vec!["User:alice", "User:bob"]),
                (2, "t", 4, vec!["User:alice"]),
                (2, "u", 3, vec!["User:alice"]),
                (3, "t", 3, vec!["User:alice"]),
            ]
        );
        let acl = &resources[0].acls[0];
        assert_eq!(
            (acl.host.as_str(), acl.operation, acl.permission_type),
            ("*", 3, 3)
        );
    }
}
