//! `weir acl create|list|delete`: ACLs, with the flags and output of
//! Kafka's `kafka-acls.sh`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::bail;
use clap::{Args, Subcommand, ValueEnum};
use weir_client::{AclBinding, AclFilter};
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, AclPermissionType, PatternType, ResourceType};

use super::{block_on, Connection};

#[derive(Args, Debug)]
pub(crate) struct AclArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: AclCommand,
}

#[derive(Subcommand, Debug)]
enum AclCommand {
    /// Allow or deny principals operations on resources: one ACL per
    /// resource, principal, host and operation.
    Create {
        #[command(flatten)]
        resources: Resources,
        #[command(flatten)]
        entries: Entries,
        /// How the resource names apply: the resource of that name (`*`:
        /// every one of its type), or every resource whose name starts
        /// with it.
        #[arg(long, value_enum, ignore_case = true, default_value_t = CreatePattern::Literal)]
        resource_pattern_type: CreatePattern,
    },
    /// List ACLs, grouped by resource: all of them, or those of the
    /// resources named.
    List {
        #[command(flatten)]
        resources: Resources,
        /// Only the ACLs of this principal (TYPE:NAME); repeat for several.
        #[arg(long = "principal", value_name = "TYPE:NAME")]
        principals: Vec<String>,
        /// Which ACLs of the resources named to list: those with that name
        /// whatever their pattern type (any), those that apply to a
        /// resource of that name, prefixed and wildcard ones included
        /// (match), or only literal or only prefixed ones.
        #[arg(long, value_enum, ignore_case = true, default_value_t = FilterPattern::Any)]
        resource_pattern_type: FilterPattern,
    },
    /// Delete ACLs of the resources named: those of the principals, hosts
    /// and operations given, or with no principal every ACL of the
    /// resources (of the operations given, if any).
    Delete {
        #[command(flatten)]
        resources: Resources,
        #[command(flatten)]
        entries: Entries,
        /// Which ACLs of the resources named to delete, as for `list`
        /// (careful with match: it deletes prefixed and wildcard ACLs too).
        #[arg(long, value_enum, ignore_case = true, default_value_t = FilterPattern::Any)]
        resource_pattern_type: FilterPattern,
    },
}

/// The resources an ACL command is about.
#[derive(Args, Debug)]
struct Resources {
    /// A topic (`*`: every topic); repeat for several.
    #[arg(long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
    /// A consumer group (`*`: every group); repeat for several.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
    /// A transactional id (`*`: every one); repeat for several.
    #[arg(long = "transactional-id", value_name = "ID")]
    transactional_ids: Vec<String>,
    /// The cluster.
    #[arg(long)]
    cluster: bool,
}

impl Resources {
    /// (type, name) of each resource named, in flag order.
    fn named(&self) -> Vec<(ResourceType, String)> {
        let of = |kind: ResourceType, names: &[String]| {
            names
                .iter()
                .map(move |n| (kind, n.trim().to_owned()))
                .collect::<Vec<_>>()
        };
        let mut named = of(ResourceType::Topic, &self.topics);
        named.extend(of(ResourceType::Group, &self.groups));
        named.extend(of(ResourceType::TransactionalId, &self.transactional_ids));
        if self.cluster {
            named.push((ResourceType::Cluster, CLUSTER_RESOURCE_NAME.to_owned()));
        }
        named
    }
}

/// Who an ACL allows or denies, from where, to do what.
#[derive(Args, Debug)]
struct Entries {
    /// A principal to allow, TYPE:NAME (User:alice; User:* for everyone);
    /// repeat for several.
    #[arg(long = "allow-principal", value_name = "TYPE:NAME")]
    allow_principals: Vec<String>,
    /// A principal to deny, TYPE:NAME; a DENY beats every ALLOW. Repeat
    /// for several.
    #[arg(long = "deny-principal", value_name = "TYPE:NAME")]
    deny_principals: Vec<String>,
    /// A host the allowed principals may connect from (default: any, *);
    /// repeat for several.
    #[arg(
        long = "allow-host",
        value_name = "HOST",
        requires = "allow_principals"
    )]
    allow_hosts: Vec<String>,
    /// A host the denied principals are denied from (default: any, *);
    /// repeat for several.
    #[arg(long = "deny-host", value_name = "HOST", requires = "deny_principals")]
    deny_hosts: Vec<String>,
    /// An operation (Read, Write, Create, Delete, Alter, Describe,
    /// ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All);
    /// repeat for several. Default for create: All.
    #[arg(long = "operation", value_name = "OPERATION", value_parser = parse_operation)]
    operations: Vec<AclOperation>,
}

/// One ACL's entry: principal, host, operation, permission.
type Entry = (String, String, AclOperation, AclPermissionType);

impl Entries {
    fn any_principal(&self) -> bool {
        !self.allow_principals.is_empty() || !self.deny_principals.is_empty()
    }

    /// Every (principal, host, operation, permission) the flags name,
    /// `default_operation` without `--operation`.
    fn expand(&self, default_operation: AclOperation) -> BTreeSet<Entry> {
        let operations = if self.operations.is_empty() {
            vec![default_operation]
        } else {
            self.operations.clone()
        };
        let wildcard = vec!["*".to_owned()];
        let mut entries = BTreeSet::new();
        for (principals, hosts, permission) in [
            (
                &self.allow_principals,
                &self.allow_hosts,
                AclPermissionType::Allow,
            ),
            (
                &self.deny_principals,
                &self.deny_hosts,
                AclPermissionType::Deny,
            ),
        ] {
            let hosts = if hosts.is_empty() { &wildcard } else { hosts };
            for principal in principals {
                for host in hosts {
                    for operation in &operations {
                        entries.insert((
                            principal.trim().to_owned(),
                            host.trim().to_owned(),
                            *operation,
                            permission,
                        ));
                    }
                }
            }
        }
        entries
    }
}

/// `--resource-pattern-type` of `create`.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum CreatePattern {
    Literal,
    Prefixed,
}

/// `--resource-pattern-type` of `list` and `delete`.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum FilterPattern {
    Any,
    Match,
    Literal,
    Prefixed,
}

impl From<CreatePattern> for PatternType {
    fn from(p: CreatePattern) -> Self {
        match p {
            CreatePattern::Literal => PatternType::Literal,
            CreatePattern::Prefixed => PatternType::Prefixed,
        }
    }
}

impl From<FilterPattern> for PatternType {
    fn from(p: FilterPattern) -> Self {
        match p {
            FilterPattern::Any => PatternType::Any,
            FilterPattern::Match => PatternType::Match,
            FilterPattern::Literal => PatternType::Literal,
            FilterPattern::Prefixed => PatternType::Prefixed,
        }
    }
}

fn parse_operation(name: &str) -> Result<AclOperation, String> {
    match AclOperation::from_name(name.trim()) {
        AclOperation::Unknown | AclOperation::Any => Err(format!(
            "unknown operation {name:?}; use one of {}",
            operation_names(concrete_operations())
        )),
        operation => Ok(operation),
    }
}

fn concrete_operations() -> impl Iterator<Item = AclOperation> {
    AclOperation::ALL
        .iter()
        .copied()
        .filter(|o| !matches!(o, AclOperation::Unknown | AclOperation::Any))
}

fn operation_names(operations: impl Iterator<Item = AclOperation>) -> String {
    operations
        .map(AclOperation::pascal_name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The operations an ACL of the resource type can name besides All, as
/// Kafka's `AclEntry.supportedOperations`.
fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Delete, Describe, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            Alter,
            Describe,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ],
        ResourceType::TransactionalId => &[Write, Describe],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        ResourceType::Unknown | ResourceType::Any => &[],
    }
}

/// Refuses an operation the resource type has no use for, as kafka-acls
/// does.
fn check_operations(
    resources: &[(ResourceType, String)],
    operations: &[AclOperation],
) -> anyhow::Result<()> {
    for (resource_type, _) in resources {
        let supported = supported_operations(*resource_type);
        if let Some(op) = operations
            .iter()
            .find(|op| **op != AclOperation::All && !supported.contains(op))
        {
            bail!(
                "a {resource_type} ACL cannot name operation {}: {resource_type} supports {}, All",
                op.pascal_name(),
                operation_names(supported.iter().copied())
            );
        }
    }
    Ok(())
}

pub(crate) fn run(args: AclArgs) -> anyhow::Result<()> {
    block_on(async move {
        let mut client = args.connection.connect().await?;
        match args.command {
            AclCommand::Create {
                resources,
                entries,
                resource_pattern_type,
            } => {
                let pattern_type = PatternType::from(resource_pattern_type);
                let named = resources.named();
                if named.is_empty() {
                    bail!("give at least one resource: --topic, --group, --transactional-id or --cluster");
                }
                if resources.cluster && pattern_type != PatternType::Literal {
                    bail!("--cluster names the one cluster resource: it takes no --resource-pattern-type prefixed");
                }
                if !entries.any_principal() {
                    bail!("give --allow-principal or --deny-principal");
                }
                check_operations(&named, &entries.operations)?;
                let entries = entries.expand(AclOperation::All);
                let mut out = String::new();
                let mut bindings = Vec::new();
                for (resource_type, name) in &named {
                    writeln!(
                        out,
                        "Adding ACLs for resource `{}`:",
                        pattern(*resource_type, name, pattern_type)
                    )?;
                    for entry in &entries {
                        writeln!(out, "\t{}", entry_text(entry))?;
                        bindings.push(binding(*resource_type, name, pattern_type, entry));
                    }
                    writeln!(out)?;
                }
                super::print(format_args!("{out}"))?;
                let outcomes = client.create_acls(&bindings).await?;
                let failures: Vec<String> = bindings
                    .iter()
                    .zip(outcomes)
                    .filter_map(|(b, outcome)| {
                        outcome.err().map(|e| {
                            format!("{} on `{}`: {e}", binding_entry(b), binding_pattern(b))
                        })
                    })
                    .collect();
                if !failures.is_empty() {
                    bail!(
                        "{} of {} ACLs not created: {}",
                        failures.len(),
                        bindings.len(),
                        failures.join("; ")
                    );
                }
            }
            AclCommand::List {
                resources,
                principals,
                resource_pattern_type,
            } => {
                let pattern_type = PatternType::from(resource_pattern_type);
                let named = resources.named();
                let filters: Vec<AclFilter> = if named.is_empty() {
                    vec![AclFilter::any()]
                } else {
                    named
                        .iter()
                        .map(|(resource_type, name)| AclFilter {
                            resource_type: resource_type.code(),
                            resource_name: Some(name.clone()),
                            pattern_type: pattern_type.code(),
                            ..AclFilter::any()
                        })
                        .collect()
                };
                let mut out = String::new();
                if principals.is_empty() {
                    let mut found = Vec::new();
                    for filter in &filters {
                        found.extend(client.describe_acls(filter).await?);
                    }
                    out.push_str(&by_resource("Current ACLs for resource", found));
                }
                for principal in &principals {
                    let principal = principal.trim();
                    let mut found = Vec::new();
                    for filter in &filters {
                        let filter = AclFilter {
                            principal: Some(principal.to_owned()),
                            ..filter.clone()
                        };
                        found.extend(client.describe_acls(&filter).await?);
                    }
                    writeln!(out, "ACLs for principal `{principal}`")?;
                    out.push_str(&by_resource("Current ACLs for resource", found));
                }
                super::print(format_args!("{out}"))?;
            }
            AclCommand::Delete {
                resources,
                entries,
                resource_pattern_type,
            } => {
                let pattern_type = PatternType::from(resource_pattern_type);
                let named = resources.named();
                if named.is_empty() {
                    bail!("give at least one resource: --topic, --group, --transactional-id or --cluster");
                }
                check_operations(&named, &entries.operations)?;
                let mut filters = Vec::new();
                for (resource_type, name) in &named {
                    let resource = AclFilter {
                        resource_type: resource_type.code(),
                        resource_name: Some(name.clone()),
                        pattern_type: pattern_type.code(),
                        ..AclFilter::any()
                    };
                    if entries.any_principal() {
                        for (principal, host, operation, permission) in
                            entries.expand(AclOperation::All)
                        {
                            filters.push(AclFilter {
                                principal: Some(principal),
                                host: Some(host),
                                operation: operation.code(),
                                permission_type: permission.code(),
                                ..resource.clone()
                            });
                        }
                    } else if entries.operations.is_empty() {
                        filters.push(resource);
                    } else {
                        for operation in &entries.operations {
                            filters.push(AclFilter {
                                operation: operation.code(),
                                ..resource.clone()
                            });
                        }
                    }
                }
                let outcomes = client.delete_acls(&filters).await?;
                let mut deleted = Vec::new();
                let mut failures = Vec::new();
                for outcome in outcomes {
                    match outcome {
                        Ok(bindings) => deleted.extend(bindings),
                        Err(error) => failures.push(error.to_string()),
                    }
                }
                if deleted.is_empty() {
                    super::print_line(format_args!("No ACL matched"))?;
                } else {
                    let text = by_resource("Deleted ACLs for resource", deleted);
                    super::print(format_args!("{text}"))?;
                }
                if !failures.is_empty() {
                    bail!("{}", failures.join("; "));
                }
            }
        }
        Ok(())
    })
}

fn binding(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    (principal, host, operation, permission): &Entry,
) -> AclBinding {
    AclBinding {
        resource_type: resource_type.code(),
        resource_name: name.to_owned(),
        pattern_type: pattern_type.code(),
        principal: principal.clone(),
        host: host.clone(),
        operation: operation.code(),
        permission_type: permission.code(),
    }
}

/// Kafka's `ResourcePattern.toString()`.
fn pattern(resource_type: ResourceType, name: &str, pattern_type: PatternType) -> String {
    format!(
        "ResourcePattern(resourceType={resource_type}, name={name}, patternType={pattern_type})"
    )
}

/// Kafka's `AccessControlEntry.toString()`.
fn entry_text((principal, host, operation, permission): &Entry) -> String {
    format!(
        "(principal={principal}, host={host}, operation={operation}, permissionType={permission})"
    )
}

fn binding_pattern(b: &AclBinding) -> String {
    pattern(
        ResourceType::from_code(b.resource_type),
        &b.resource_name,
        PatternType::from_code(b.pattern_type),
    )
}

fn binding_entry(b: &AclBinding) -> String {
    entry_text(&(
        b.principal.clone(),
        b.host.clone(),
        AclOperation::from_code(b.operation),
        AclPermissionType::from_code(b.permission_type),
    ))
}

/// The bindings as kafka-acls lists them: per resource pattern a heading,
/// its entries one a line after a tab, and an empty line.
fn by_resource(heading: &str, bindings: Vec<AclBinding>) -> String {
    let mut grouped: BTreeMap<(i8, String, i8), BTreeSet<String>> = BTreeMap::new();
    for b in bindings {
        let entry = binding_entry(&b);
        grouped
            .entry((b.resource_type, b.resource_name, b.pattern_type))
            .or_default()
            .insert(entry);
    }
    let mut out = String::new();
    for ((resource_type, name, pattern_type), entries) in grouped {
        let resource = pattern(
            ResourceType::from_code(resource_type),
            &name,
            PatternType::from_code(pattern_type),
        );
        let _ = writeln!(out, "{heading} `{resource}`:");
        for entry in entries {
            let _ = writeln!(out, "\t{entry}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_by_kafka_names_in_any_case() {
        assert_eq!(parse_operation("Read"), Ok(AclOperation::Read));
        assert_eq!(
            parse_operation("describeconfigs"),
            Ok(AclOperation::DescribeConfigs)
        );
        assert_eq!(
            parse_operation("IDEMPOTENT_WRITE"),
            Ok(AclOperation::IdempotentWrite)
        );
        assert_eq!(parse_operation("all"), Ok(AclOperation::All));
        let error = parse_operation("Any").unwrap_err();
        assert!(error.contains("use one of All, Read, Write"), "{error}");
        assert!(parse_operation("Fly").is_err());
    }

    #[test]
    fn entries_are_every_principal_host_and_operation() {
        let entries = Entries {
            allow_principals: vec!["User:a".into(), "User:b".into()],
            deny_principals: vec!["User:c".into()],
            allow_hosts: vec!["10.0.0.1".into()],
            deny_hosts: vec![],
            operations: vec![AclOperation::Read, AclOperation::Write],
        };
        let expanded = entries.expand(AclOperation::All);
        assert_eq!(expanded.len(), 2 * 2 + 2);
        assert!(expanded.contains(&(
            "User:b".into(),
            "10.0.0.1".into(),
            AclOperation::Write,
            AclPermissionType::Allow
        )));
        assert!(expanded.contains(&(
            "User:c".into(),
            "*".into(),
            AclOperation::Read,
            AclPermissionType::Deny
        )));
        let defaults = Entries {
            operations: vec![],
            ..entries
        };
        assert!(defaults
            .expand(AclOperation::All)
            .iter()
            .all(|(_, _, op, _)| *op == AclOperation::All));
    }

    #[test]
    fn operations_are_checked_against_the_resource_type() {
        let topic = [(ResourceType::Topic, "t".to_owned())];
        assert!(check_operations(&topic, &[AclOperation::Read, AclOperation::All]).is_ok());
        let error = check_operations(&topic, &[AclOperation::IdempotentWrite]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "a TOPIC ACL cannot name operation IdempotentWrite: TOPIC supports Read, Write, \
             Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, All"
        );
        let cluster = [(ResourceType::Cluster, CLUSTER_RESOURCE_NAME.to_owned())];
        assert!(check_operations(&cluster, &[AclOperation::IdempotentWrite]).is_ok());
    }

    #[test]
    fn bindings_print_as_kafka_acls_does() {
        let b = binding(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            &(
                "User:alice".into(),
                "*".into(),
                AclOperation::Read,
                AclPermissionType::Allow,
            ),
        );
        assert_eq!(
            by_resource("Current ACLs for resource", vec![b.clone(), b]),
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, \
             patternType=LITERAL)`:\n\t(principal=User:alice, host=*, operation=READ, \
             permissionType=ALLOW)\n\n"
        );
    }
}
