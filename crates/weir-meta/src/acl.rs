//! ACLs: Kafka's access control model (`org.apache.kafka.common.acl` and
//! `.resource`) and the rules of its controller (`AclControlManager`) for
//! creating and deleting them.
//!
//! A binding allows or denies one principal, from one host (or any), one
//! operation on the resources a pattern names: a literal name (`*` for
//! every resource of the type) or a prefix. Filters select bindings for
//! DescribeAcls and DeleteAcls; [`crate::Authorizer`] answers requests from
//! the bindings.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The name Kafka gives the cluster resource; the only valid name of a
/// [`ResourceType::Cluster`] binding.
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";

/// The resource name and host that match any, and the principal that
/// matches every user.
pub const WILDCARD: &str = "*";

/// The principal of a binding that applies to every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Declares one of Kafka's ACL enums with its protocol codes and names.
macro_rules! kafka_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $code:literal, $java:literal, $pascal:literal;)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The protocol code (Kafka's `code()`).
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)+
                }
            }

            /// From a protocol code; a code this version does not know is
            /// `Unknown`, as in Kafka.
            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => $name::$variant,)+
                    _ => $name::Unknown,
                }
            }

            /// The Java enum's name (`TRANSACTIONAL_ID`): how Kafka's
            /// messages, `toString()` and `kafka-acls --list` show it.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $java,)+
                }
            }

            /// The Pascal-case name (`TransactionalId`), as Kafka's
            /// `SecurityUtils` writes it in authorizer audit logs.
            pub fn pascal_name(self) -> &'static str {
                match self {
                    $($name::$variant => $pascal,)+
                }
            }

            /// From either name, ignoring case and underscores (so
            /// `TRANSACTIONAL_ID`, `TransactionalId` and `transactionalid`
            /// all parse); anything else is `Unknown`, as Kafka's
            /// `fromString` and `SecurityUtils` answer.
            pub fn from_name(name: &str) -> Self {
                let folded = |s: &str| -> String {
                    s.chars()
                        .filter(|c| *c != '_')
                        .map(|c| c.to_ascii_uppercase())
                        .collect()
                };
                let wanted = folded(name);
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| folded(v.name()) == wanted)
                    .unwrap_or($name::Unknown)
            }
        }

        impl fmt::Display for $name {
            /// The Java enum's name, as Kafka's own messages print it
            /// ("Invalid resourceType ANY") and `kafka-acls` lists it.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// The kind of resource a binding applies to (Kafka's `ResourceType`).
    ResourceType {
        /// A code this version does not know.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Any type: in filters only.
        Any = 1, "ANY", "Any";
        /// A topic.
        Topic = 2, "TOPIC", "Topic";
        /// A consumer group.
        Group = 3, "GROUP", "Group";
        /// The cluster, named [`CLUSTER_RESOURCE_NAME`].
        Cluster = 4, "CLUSTER", "Cluster";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID", "TransactionalId";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN", "DelegationToken";
        /// A user (for delegation tokens created on another's behalf).
        User = 7, "USER", "User";
    }
}

kafka_enum! {
    /// How a binding's resource name applies (Kafka's `PatternType`).
    PatternType {
        /// A code this version does not know.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Any pattern type, names compared as they are: in filters only.
        Any = 1, "ANY", "Any";
        /// The bindings that apply to a resource name (literal, wildcard,
        /// or a prefix of it): in filters only.
        Match = 2, "MATCH", "Match";
        /// The resource of that name, or every resource for `*`.
        Literal = 3, "LITERAL", "Literal";
        /// Every resource whose name starts with the binding's name.
        Prefixed = 4, "PREFIXED", "Prefixed";
    }
}

kafka_enum! {
    /// What a binding allows or denies (Kafka's `AclOperation`).
    AclOperation {
        /// A code this version does not know.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Any operation: in filters only.
        Any = 1, "ANY", "Any";
        /// Every operation.
        All = 2, "ALL", "All";
        /// Read (fetch, commit offsets, join a group).
        Read = 3, "READ", "Read";
        /// Write (produce).
        Write = 4, "WRITE", "Write";
        /// Create topics.
        Create = 5, "CREATE", "Create";
        /// Delete topics, records, groups.
        Delete = 6, "DELETE", "Delete";
        /// Alter (partitions, ACLs).
        Alter = 7, "ALTER", "Alter";
        /// Describe; implied by an ALLOW of Read, Write, Delete or Alter.
        Describe = 8, "DESCRIBE", "Describe";
        /// Inter-broker requests.
        ClusterAction = 9, "CLUSTER_ACTION", "ClusterAction";
        /// Describe configs; implied by an ALLOW of AlterConfigs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS", "DescribeConfigs";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS", "AlterConfigs";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE", "IdempotentWrite";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS", "CreateTokens";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS", "DescribeTokens";
        /// Two-phase commit of transactions (KIP-939).
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT", "TwoPhaseCommit";
    }
}

kafka_enum! {
    /// Whether a binding allows or denies (Kafka's `AclPermissionType`).
    AclPermissionType {
        /// A code this version does not know.
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Either: in filters only.
        Any = 1, "ANY", "Any";
        /// Denies; a matching DENY beats every ALLOW.
        Deny = 2, "DENY", "Deny";
        /// Allows.
        Allow = 3, "ALLOW", "Allow";
    }
}

/// One ACL: `permission` for `principal` from `host` to perform
/// `operation` on the resources of `resource_type` that the pattern
/// (`resource_name`, `pattern_type`) names.
///
/// The field order is the sort order of stored bindings (resource first),
/// so images list them deterministically, grouped by resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    /// A concrete type (not `Any` or `Unknown`).
    pub resource_type: ResourceType,
    /// A name, a prefix, or `*` (literal) for every resource of the type.
    pub resource_name: String,
    /// `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice`; `User:*` for every principal.
    pub principal: String,
    /// The client's IP address, or `*` for any.
    pub host: String,
    /// A concrete operation, or `All`.
    pub operation: AclOperation,
    /// `Allow` or `Deny`.
    pub permission: AclPermissionType,
}

impl AclBinding {
    /// Checks the binding as Kafka does before creating it: the checks of
    /// its controller (`AclControlManager.validateNewAcl`: concrete types,
    /// operation and permission), then those of its broker (`AclApis`: the
    /// cluster's name, a non-empty name), each failure `INVALID_REQUEST`
    /// with Kafka's message. Weir also refuses a principal that is not
    /// `Type:name`: Kafka stores one, and its authorizer fails on it later.
    pub fn check(&self) -> Result<(), AclError> {
        let invalid = |message: String| Err(AclError::InvalidRequest(message));
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return invalid(format!("Invalid resourceType {}", self.resource_type));
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return invalid(format!("Invalid patternType {}", self.pattern_type));
        }
        if matches!(self.operation, AclOperation::Unknown | AclOperation::Any) {
            return invalid(format!("Invalid operation {}", self.operation));
        }
        if !matches!(
            self.permission,
            AclPermissionType::Allow | AclPermissionType::Deny
        ) {
            return invalid(format!("Invalid permissionType {}", self.permission));
        }
        if self.resource_type == ResourceType::Cluster
            && self.resource_name != CLUSTER_RESOURCE_NAME
        {
            return invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
            ));
        }
        if self.resource_name.is_empty() {
            return invalid("Invalid empty resource name".to_owned());
        }
        // Kafka's `SecurityUtils.parseKafkaPrincipal`: a type, a colon, a
        // name (either may be empty).
        if !self.principal.contains(':') {
            return invalid(format!(
                "expected a string in format principalType:principalName but got {}",
                self.principal
            ));
        }
        Ok(())
    }

    /// The filter that matches exactly this binding (Kafka's `toFilter`).
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: self.resource_type,
            resource_name: Some(self.resource_name.clone()),
            pattern_type: self.pattern_type,
            principal: Some(self.principal.clone()),
            host: Some(self.host.clone()),
            operation: self.operation,
            permission: self.permission,
        }
    }
}

impl fmt::Display for AclBinding {
    /// As Kafka's `AclBinding.toString()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(pattern=ResourcePattern(resourceType={}, name={}, patternType={}), \
             entry=(principal={}, host={}, operation={}, permissionType={}))",
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission
        )
    }
}

/// Selects bindings (Kafka's `AclBindingFilter`), for DescribeAcls and
/// DeleteAcls: `Any` types and `None` names match anything, and the
/// `Match` pattern type selects the bindings that apply to a resource name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// A type, or `Any`.
    pub resource_type: ResourceType,
    /// A name, or `None` for any.
    pub resource_name: Option<String>,
    /// `Literal` or `Prefixed` (names compared as they are), `Any` (of
    /// either type, names compared as they are), or `Match`.
    pub pattern_type: PatternType,
    /// A principal, or `None` for any.
    pub principal: Option<String>,
    /// A host, or `None` for any.
    pub host: Option<String>,
    /// An operation, or `Any`.
    pub operation: AclOperation,
    /// A permission, or `Any`.
    pub permission: AclPermissionType,
}

impl AclBindingFilter {
    /// The filter that matches every binding (Kafka's `AclBindingFilter.ANY`).
    pub fn any() -> Self {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermissionType::Any,
        }
    }

    /// Whether the filter selects `binding`, as Kafka's
    /// `ResourcePatternFilter.matches` and `AccessControlEntryFilter.matches`.
    ///
    /// With a name and `Match`, a literal binding matches if it has the
    /// same name or `*`, a prefixed one if its name is a prefix of the
    /// filter's. With `Any` or a concrete pattern type, names must be
    /// equal (so `*` matches only the wildcard binding itself).
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(binding) && self.matches_entry(binding)
    }

    fn matches_pattern(&self, binding: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != binding.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != binding.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type != PatternType::Match {
            return *name == binding.resource_name;
        }
        match binding.pattern_type {
            PatternType::Literal => {
                *name == binding.resource_name || binding.resource_name == WILDCARD
            }
            PatternType::Prefixed => name.starts_with(&binding.resource_name),
            // Stored bindings are literal or prefixed (`AclBinding::check`).
            _ => false,
        }
    }

    fn matches_entry(&self, binding: &AclBinding) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && (self.operation == AclOperation::Any || self.operation == binding.operation)
            && (self.permission == AclPermissionType::Any || self.permission == binding.permission)
    }

    /// Checks the filter as Kafka's controller does before deleting with it
    /// (`AclControlManager.validateFilter`): no `Unknown` in it.
    pub fn check(&self) -> Result<(), AclError> {
        if self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
        {
            return Err(AclError::InvalidRequest(
                "Unknown patternFilter.".to_owned(),
            ));
        }
        if self.operation == AclOperation::Unknown || self.permission == AclPermissionType::Unknown
        {
            return Err(AclError::InvalidRequest("Unknown entryFilter.".to_owned()));
        }
        Ok(())
    }
}

/// Why a binding could not be created or a filter used, with Kafka's error
/// code ([`AclError::kafka_error_code`]) and message (`to_string()`).
#[derive(thiserror::Error, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum AclError {
    /// A binding or filter that is malformed (INVALID_REQUEST).
    #[error("{0}")]
    InvalidRequest(String),
}

impl AclError {
    /// The Kafka error code of the binding's or filter's result.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            AclError::InvalidRequest(_) => 42, // INVALID_REQUEST
        }
    }
}
