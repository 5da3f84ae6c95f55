//! KIP-430's authorized operations: the bit field of what the asking
//! principal may do with a resource, for clients that ask (Metadata,
//! DescribeCluster, DescribeGroups). With no authorizer every principal may
//! do every operation the resource type supports, which is what Kafka then
//! answers.

/// Kafka's `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

const fn bits(operations: &[u8]) -> i32 {
    let mut field = 0;
    let mut i = 0;
    while i < operations.len() {
        field |= 1 << operations[i];
        i += 1;
    }
    field
}

/// The operations a topic supports.
pub(super) const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DESCRIBE,
    DELETE,
    ALTER,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);

/// The operations a group supports.
pub(super) const GROUP: i32 = bits(&[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);

/// The operations the cluster supports.
pub(super) const CLUSTER: i32 = bits(&[
    CREATE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    ALTER,
    DESCRIBE,
]);
