//! ACL administration: CreateAcls, DescribeAcls, DeleteAcls.
//!
//! Bindings and filters carry Kafka's codes as they go on the wire
//! (`ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType`):
//! the caller names them (the `weir` CLI with `weir_meta::acl`), and a
//! test can send a code a broker must refuse.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::error::{check, ClientError};
use crate::Client;

/// One ACL: `permission_type` for `principal` from `host` to perform
/// `operation` on the resources the pattern (`resource_type`,
/// `resource_name`, `pattern_type`) names. Codes are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    /// Kafka's `ResourceType` code: 2 topic, 3 group, 4 cluster, 5
    /// transactional id, …
    pub resource_type: i8,
    /// A name, a prefix, or `*`.
    pub resource_name: String,
    /// Kafka's `PatternType` code: 3 literal, 4 prefixed.
    pub pattern_type: i8,
    /// `Type:name`, e.g. `User:alice`.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    /// Kafka's `AclOperation` code: 2 all, 3 read, 4 write, …
    pub operation: i8,
    /// Kafka's `AclPermissionType` code: 2 deny, 3 allow.
    pub permission_type: i8,
}

/// Selects ACLs (Kafka's `AclBindingFilter`): an "any" code (1) or `None`
/// matches anything; pattern type 2 (MATCH) with a name selects the ACLs
/// that apply to a resource of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission_type: i8,
}

impl AclFilter {
    /// The filter that matches every ACL.
    pub fn any() -> Self {
        const ANY: i8 = 1;
        Self {
            resource_type: ANY,
            resource_name: None,
            pattern_type: ANY,
            principal: None,
            host: None,
            operation: ANY,
            permission_type: ANY,
        }
    }
}

impl Client {
    /// Creates ACLs: one outcome per binding, in order (a binding that
    /// exists already is a success). `Err` only when the request failed as
    /// a whole.
    pub async fn create_acls(
        &mut self,
        bindings: &[AclBinding],
    ) -> Result<Vec<Result<(), ClientError>>, ClientError> {
        let request = CreateAclsRequest::default().with_creations(
            bindings
                .iter()
                .map(|b| {
                    AclCreation::default()
                        .with_resource_type(b.resource_type)
                        .with_resource_name(str_bytes(&b.resource_name))
                        .with_resource_pattern_type(b.pattern_type)
                        .with_principal(str_bytes(&b.principal))
                        .with_host(str_bytes(&b.host))
                        .with_operation(b.operation)
                        .with_permission_type(b.permission_type)
                })
                .collect(),
        );
        let response: CreateAclsResponse = self.call(ApiKey::CreateAcls, &request).await?;
        if response.results.len() != bindings.len() {
            return Err(self.miscounted("CreateAcls", bindings.len(), response.results.len()));
        }
        Ok(response
            .results
            .into_iter()
            .map(|r| check(r.error_code, text(r.error_message)))
            .collect())
    }

    /// The ACLs `filter` matches, in the broker's order.
    pub async fn describe_acls(
        &mut self,
        filter: &AclFilter,
    ) -> Result<Vec<AclBinding>, ClientError> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(str_bytes))
            .with_pattern_type_filter(filter.pattern_type)
            .with_principal_filter(filter.principal.as_deref().map(str_bytes))
            .with_host_filter(filter.host.as_deref().map(str_bytes))
            .with_operation(filter.operation)
            .with_permission_type(filter.permission_type);
        let response: DescribeAclsResponse = self.call(ApiKey::DescribeAcls, &request).await?;
        check(response.error_code, text(response.error_message))?;
        Ok(response
            .resources
            .into_iter()
            .flat_map(|resource| {
                resource.acls.into_iter().map(move |acl| AclBinding {
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.to_string(),
                    pattern_type: resource.pattern_type,
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: acl.operation,
                    permission_type: acl.permission_type,
                })
            })
            .collect())
    }

    /// Deletes the ACLs each filter matches: per filter, in order, the ACLs
    /// it deleted, or why it failed (a failure the broker reports for one
    /// of its ACLs fails the filter). `Err` only when the request failed as
    /// a whole.
    pub async fn delete_acls(
        &mut self,
        filters: &[AclFilter],
    ) -> Result<Vec<Result<Vec<AclBinding>, ClientError>>, ClientError> {
        let request = DeleteAclsRequest::default().with_filters(
            filters
                .iter()
                .map(|f| {
                    DeleteAclsFilter::default()
                        .with_resource_type_filter(f.resource_type)
                        .with_resource_name_filter(f.resource_name.as_deref().map(str_bytes))
                        .with_pattern_type_filter(f.pattern_type)
                        .with_principal_filter(f.principal.as_deref().map(str_bytes))
                        .with_host_filter(f.host.as_deref().map(str_bytes))
                        .with_operation(f.operation)
                        .with_permission_type(f.permission_type)
                })
                .collect(),
        );
        let response: DeleteAclsResponse = self.call(ApiKey::DeleteAcls, &request).await?;
        if response.filter_results.len() != filters.len() {
            return Err(self.miscounted(
                "DeleteAcls",
                filters.len(),
                response.filter_results.len(),
            ));
        }
        Ok(response
            .filter_results
            .into_iter()
            .map(|result| {
                check(result.error_code, text(result.error_message))?;
                result
                    .matching_acls
                    .into_iter()
                    .map(|acl| {
                        check(acl.error_code, text(acl.error_message))?;
                        Ok(AclBinding {
                            resource_type: acl.resource_type,
                            resource_name: acl.resource_name.to_string(),
                            pattern_type: acl.pattern_type,
                            principal: acl.principal.to_string(),
                            host: acl.host.to_string(),
                            operation: acl.operation,
                            permission_type: acl.permission_type,
                        })
                    })
                    .collect()
            })
            .collect())
    }

    /// A response with another number of results than the request had
    /// items.
    pub(crate) fn miscounted(&self, api: &str, sent: usize, answered: usize) -> ClientError {
        ClientError::Protocol {
            addr: self.addr().to_owned(),
            reason: format!("{api} answered {answered} results to {sent} items"),
        }
    }
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn text(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}
