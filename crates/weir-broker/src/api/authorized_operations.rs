//! KIP-430's authorized operations: the bit field of what the asking
//! principal may do with a resource, for clients that ask (Metadata,
//! DescribeCluster, DescribeGroups). With no authorizer every principal may
//! do every operation the resource type supports, which is what Kafka then
//! answers.

use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use super::RequestContext;

use AclOperation::*;

/// The operations a topic supports.
const TOPIC: &[AclOperation] = &[
    Read,
    Write,
    Create,
    Describe,
    Delete,
    Alter,
    DescribeConfigs,
    AlterConfigs,
];

/// The operations a group supports.
const GROUP: &[AclOperation] = &[Read, Describe, Delete, DescribeConfigs, AlterConfigs];

/// The operations the cluster supports.
const CLUSTER: &[AclOperation] = &[
    Create,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    Alter,
    Describe,
];

/// The bit field of the `operations` the principal may do on the resource.
fn allowed(
    ctx: &RequestContext,
    resource_type: ResourceType,
    name: &str,
    operations: &[AclOperation],
) -> i32 {
    operations
        .iter()
        .filter(|op| ctx.may(**op, resource_type, name))
        .fold(0, |field, op| field | 1 << op.code())
}

pub(super) fn topic(ctx: &RequestContext, name: &str) -> i32 {
    allowed(ctx, ResourceType::Topic, name, TOPIC)
}

pub(super) fn group(ctx: &RequestContext, name: &str) -> i32 {
    allowed(ctx, ResourceType::Group, name, GROUP)
}

pub(super) fn cluster(ctx: &RequestContext) -> i32 {
    allowed(ctx, ResourceType::Cluster, CLUSTER_RESOURCE_NAME, CLUSTER)
}
