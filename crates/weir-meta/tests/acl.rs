//! ACLs: Kafka's codes and names, filter matching, and the outcomes of
//! `CreateAcls` and `DeleteAcls`.

use weir_meta::{
    AclBinding, AclBindingFilter, AclError, AclOperation, AclPermissionType, Applied, Command,
    MetadataImage, PatternType, ResourceType,
};

use AclOperation as Op;
use AclPermissionType::{Allow, Deny};
use PatternType::{Literal, Prefixed};
use ResourceType::{Cluster, Group, Topic};

fn binding(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: AclOperation,
    permission: AclPermissionType,
) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.to_owned(),
        pattern_type,
        principal: principal.to_owned(),
        host: "*".to_owned(),
        operation,
        permission,
    }
}

/// alice may read topic "orders".
fn alice_reads_orders() -> AclBinding {
    binding(Topic, "orders", Literal, "User:alice", Op::Read, Allow)
}

fn filter(
    resource_type: ResourceType,
    name: Option<&str>,
    pattern_type: PatternType,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type,
        resource_name: name.map(str::to_owned),
        pattern_type,
        ..AclBindingFilter::any()
    }
}

fn create(image: &mut MetadataImage, bindings: Vec<AclBinding>) -> Vec<Result<(), AclError>> {
    match image.apply(&Command::CreateAcls { bindings }).unwrap() {
        Applied::AclsCreated(results) => results,
        other => panic!("not an ACL creation: {other:?}"),
    }
}

type Deleted = Vec<Result<Vec<AclBinding>, AclError>>;

fn delete(image: &mut MetadataImage, filters: Vec<AclBindingFilter>) -> Deleted {
    match image.apply(&Command::DeleteAcls { filters }).unwrap() {
        Applied::AclsDeleted(results) => results,
        other => panic!("not an ACL deletion: {other:?}"),
    }
}

#[test]
fn codes_and_names_are_kafkas() {
    let resource_types: &[(ResourceType, i8, &str, &str)] = &[
        (ResourceType::Unknown, 0, "UNKNOWN", "Unknown"),
        (ResourceType::Any, 1, "ANY", "Any"),
        (Topic, 2, "TOPIC", "Topic"),
        (Group, 3, "GROUP", "Group"),
        (Cluster, 4, "CLUSTER", "Cluster"),
        (
            ResourceType::TransactionalId,
            5,
            "TRANSACTIONAL_ID",
            "TransactionalId",
        ),
        (
            ResourceType::DelegationToken,
            6,
            "DELEGATION_TOKEN",
            "DelegationToken",
        ),
        (ResourceType::User, 7, "USER", "User"),
    ];
    for &(value, code, name, pascal) in resource_types {
        assert_eq!(value.code(), code);
        assert_eq!(ResourceType::from_code(code), value);
        assert_eq!(value.to_string(), name);
        assert_eq!(value.pascal_name(), pascal);
        assert_eq!(ResourceType::from_name(name), value);
        assert_eq!(ResourceType::from_name(pascal), value);
    }
    assert_eq!(ResourceType::ALL.len(), resource_types.len());

    let pattern_types = [
        (PatternType::Unknown, 0, "UNKNOWN"),
        (PatternType::Any, 1, "ANY"),
        (PatternType::Match, 2, "MATCH"),
        (Literal, 3, "LITERAL"),
        (Prefixed, 4, "PREFIXED"),
    ];
    for (value, code, name) in pattern_types {
        assert_eq!((value.code(), value.to_string()), (code, name.to_owned()));
        assert_eq!(PatternType::from_code(code), value);
    }

    let operations = [
        (Op::Unknown, 0, "UNKNOWN", "Unknown"),
        (Op::Any, 1, "ANY", "Any"),
        (Op::All, 2, "ALL", "All"),
        (Op::Read, 3, "READ", "Read"),
        (Op::Write, 4, "WRITE", "Write"),
        (Op::Create, 5, "CREATE", "Create"),
        (Op::Delete, 6, "DELETE", "Delete"),
        (Op::Alter, 7, "ALTER", "Alter"),
        (Op::Describe, 8, "DESCRIBE", "Describe"),
        (Op::ClusterAction, 9, "CLUSTER_ACTION", "ClusterAction"),
        (
            Op::DescribeConfigs,
            10,
            "DESCRIBE_CONFIGS",
            "DescribeConfigs",
        ),
        (Op::AlterConfigs, 11, "ALTER_CONFIGS", "AlterConfigs"),
        (
            Op::IdempotentWrite,
            12,
            "IDEMPOTENT_WRITE",
            "IdempotentWrite",
        ),
        (Op::CreateTokens, 13, "CREATE_TOKENS", "CreateTokens"),
        (Op::DescribeTokens, 14, "DESCRIBE_TOKENS", "DescribeTokens"),
        (Op::TwoPhaseCommit, 15, "TWO_PHASE_COMMIT", "TwoPhaseCommit"),
    ];
    for (value, code, name, pascal) in operations {
        assert_eq!(value.code(), code);
        assert_eq!(Op::from_code(code), value);
        assert_eq!(value.to_string(), name);
        assert_eq!(value.pascal_name(), pascal);
    }
    assert_eq!(Op::ALL.len(), operations.len());

    let permissions = [
        (AclPermissionType::Unknown, 0, "UNKNOWN"),
        (AclPermissionType::Any, 1, "ANY"),
        (Deny, 2, "DENY"),
        (Allow, 3, "ALLOW"),
    ];
    for (value, code, name) in permissions {
        assert_eq!((value.code(), value.to_string()), (code, name.to_owned()));
        assert_eq!(AclPermissionType::from_code(code), value);
    }

    // Codes this version does not know, and names it does not know.
    assert_eq!(Op::from_code(16), Op::Unknown);
    assert_eq!(ResourceType::from_code(-1), ResourceType::Unknown);
    assert_eq!(AclPermissionType::from_code(9), AclPermissionType::Unknown);
    assert_eq!(Op::from_name("cluster_action"), Op::ClusterAction);
    assert_eq!(Op::from_name("CLUSTERACTION"), Op::ClusterAction);
    assert_eq!(Op::from_name("Fly"), Op::Unknown);
    assert_eq!(PatternType::from_name("prefixed"), Prefixed);
}

#[test]
fn a_binding_prints_as_kafka_prints_it() {
    assert_eq!(
        alice_reads_orders().to_string(),
        "(pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), \
         entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))"
    );
}

/// Kafka's `AclBindingFilter.matches`, name and pattern part.
#[test]
fn filter_matching() {
    let literal = binding(Topic, "orders", Literal, "User:a", Op::Read, Allow);
    let wildcard = binding(Topic, "*", Literal, "User:a", Op::Read, Allow);
    let prefixed = binding(Topic, "ord", Prefixed, "User:a", Op::Read, Allow);
    let group = binding(Group, "orders", Literal, "User:a", Op::Read, Allow);
    let all = [&literal, &wildcard, &prefixed, &group];
    // The filter and, in the order above, which bindings it matches.
    let table: Vec<(AclBindingFilter, [bool; 4])> = vec![
        (AclBindingFilter::any(), [true, true, true, true]),
        (
            filter(Topic, None, PatternType::Any),
            [true, true, true, false],
        ),
        (
            filter(Topic, Some("orders"), PatternType::Match),
            [true, true, true, false],
        ),
        (
            filter(ResourceType::Any, Some("orders"), PatternType::Match),
            [true, true, true, true],
        ),
        // A prefixed binding matches a longer name, not a shorter one.
        (
            filter(Topic, Some("or"), PatternType::Match),
            [false, true, false, false],
        ),
        // Any compares names as they are, of either pattern type.
        (
            filter(Topic, Some("orders"), PatternType::Any),
            [true, false, false, false],
        ),
        (
            filter(Topic, Some("ord"), PatternType::Any),
            [false, false, true, false],
        ),
        // So does a concrete pattern type: "*" finds the wildcard binding
        // only.
        (
            filter(Topic, Some("*"), Literal),
            [false, true, false, false],
        ),
        (
            filter(Topic, Some("ord"), Literal),
            [false, false, false, false],
        ),
        (filter(Topic, None, Prefixed), [false, false, true, false]),
        (
            AclBindingFilter {
                principal: Some("User:b".into()),
                ..AclBindingFilter::any()
            },
            [false; 4],
        ),
        (
            AclBindingFilter {
                host: Some("*".into()),
                operation: Op::Read,
                permission: Allow,
                ..AclBindingFilter::any()
            },
            [true; 4],
        ),
        (
            AclBindingFilter {
                operation: Op::Write,
                ..AclBindingFilter::any()
            },
            [false; 4],
        ),
        (
            AclBindingFilter {
                permission: Deny,
                ..AclBindingFilter::any()
            },
            [false; 4],
        ),
    ];
    for (f, want) in table {
        let got = all.map(|b| f.matches(b));
        assert_eq!(got, want, "{f:?}");
    }
    assert!(literal.to_filter().matches(&literal));
    assert!(!literal.to_filter().matches(&wildcard));
}

#[test]
fn bindings_kafka_refuses() {
    let ok = alice_reads_orders();
    let with = |f: fn(&mut AclBinding)| {
        let mut b = ok.clone();
        f(&mut b);
        b
    };
    let table: Vec<(AclBinding, Option<&str>)> = vec![
        (ok.clone(), None),
        (with(|b| b.pattern_type = Prefixed), None),
        (with(|b| b.operation = Op::All), None),
        (with(|b| b.permission = Deny), None),
        (with(|b| b.principal = "User:*".into()), None),
        (with(|b| b.principal = "User:".into()), None),
        (with(|b| b.host = "10.0.0.1".into()), None),
        (with(|b| b.resource_name = "*".into()), None),
        (
            with(|b| {
                b.resource_type = Cluster;
                b.resource_name = "kafka-cluster".into();
            }),
            None,
        ),
        (
            with(|b| b.resource_type = ResourceType::Any),
            Some("Invalid resourceType ANY"),
        ),
        (
            with(|b| b.resource_type = ResourceType::Unknown),
            Some("Invalid resourceType UNKNOWN"),
        ),
        (
            with(|b| b.pattern_type = PatternType::Match),
            Some("Invalid patternType MATCH"),
        ),
        (
            with(|b| b.pattern_type = PatternType::Any),
            Some("Invalid patternType ANY"),
        ),
        (
            with(|b| b.operation = Op::Any),
            Some("Invalid operation ANY"),
        ),
        (
            with(|b| b.operation = Op::Unknown),
            Some("Invalid operation UNKNOWN"),
        ),
        (
            with(|b| b.permission = AclPermissionType::Any),
            Some("Invalid permissionType ANY"),
        ),
        (
            with(|b| b.resource_type = Cluster),
            Some("The only valid name for the CLUSTER resource is kafka-cluster"),
        ),
        (
            with(|b| b.resource_name.clear()),
            Some("Invalid empty resource name"),
        ),
        (
            with(|b| b.principal = "alice".into()),
            Some("expected a string in format principalType:principalName but got alice"),
        ),
        // The controller's checks come before the broker's.
        (
            with(|b| {
                b.operation = Op::Any;
                b.resource_name.clear();
            }),
            Some("Invalid operation ANY"),
        ),
    ];
    for (b, want) in table {
        let mut image = MetadataImage::default();
        let results = create(&mut image, vec![b.clone()]);
        match (want, &results[..]) {
            (None, [Ok(())]) => assert_eq!(image.acls().collect::<Vec<_>>(), vec![&b]),
            (Some(message), [Err(e)]) => {
                assert_eq!(
                    (e.kafka_error_code(), e.to_string()),
                    (42, message.to_owned())
                );
                assert_eq!(image.acls().count(), 0, "{b}");
            }
            _ => panic!("{b}: want {want:?}, got {results:?}"),
        }
        assert_eq!(b.check().err(), results[0].clone().err());
    }
}

#[test]
fn creating_is_per_binding_and_idempotent() {
    let mut image = MetadataImage::default();
    let bad = binding(Topic, "", Literal, "User:alice", Op::Read, Allow);
    let deny = binding(Topic, "ord", Prefixed, "User:bob", Op::Write, Deny);
    let results = create(
        &mut image,
        vec![
            alice_reads_orders(),
            bad,
            alice_reads_orders(),
            deny.clone(),
        ],
    );
    assert!(results[0].is_ok() && results[1].is_err() && results[2].is_ok() && results[3].is_ok());
    assert_eq!(image.acls().count(), 2);
    // Again: every one succeeds, nothing changes but the index.
    let before: Vec<AclBinding> = image.acls().cloned().collect();
    let results = create(&mut image, vec![deny, alice_reads_orders()]);
    assert_eq!(results, vec![Ok(()), Ok(())]);
    assert_eq!(image.acls().cloned().collect::<Vec<_>>(), before);
}

#[test]
fn deleting_reports_each_binding_under_the_first_filter() {
    let mut image = MetadataImage::default();
    let read = alice_reads_orders();
    let write = binding(Topic, "orders", Literal, "User:alice", Op::Write, Allow);
    let prefixed = binding(Topic, "ord", Prefixed, "User:bob", Op::Read, Deny);
    let group = binding(Group, "g", Literal, "User:alice", Op::Read, Allow);
    create(
        &mut image,
        vec![read.clone(), write.clone(), prefixed.clone(), group.clone()],
    );

    let unknown = AclBindingFilter {
        operation: Op::Unknown,
        ..AclBindingFilter::any()
    };
    let results = delete(
        &mut image,
        vec![
            // alice's read of orders only.
            AclBindingFilter {
                operation: Op::Read,
                ..filter(Topic, Some("orders"), Literal)
            },
            // Refused: removes nothing although it would match everything.
            unknown,
            // Everything that applies to topic "orders": the prefixed deny
            // and write, in sorted order (read went with the first filter).
            filter(Topic, Some("orders"), PatternType::Match),
            // Nothing left to match.
            filter(Topic, None, PatternType::Any),
            AclBindingFilter {
                resource_type: ResourceType::Unknown,
                ..AclBindingFilter::any()
            },
        ],
    );
    assert_eq!(
        results,
        vec![
            Ok(vec![read]),
            Err(AclError::InvalidRequest("Unknown entryFilter.".into())),
            Ok(vec![prefixed, write]),
            Ok(vec![]),
            Err(AclError::InvalidRequest("Unknown patternFilter.".into())),
        ]
    );
    assert_eq!(image.acls().collect::<Vec<_>>(), vec![&group]);
}

#[test]
fn describe_lists_matching_bindings_in_order() {
    let mut image = MetadataImage::default();
    let z = binding(Topic, "z", Literal, "User:a", Op::Read, Allow);
    let a = binding(Topic, "a", Literal, "User:a", Op::Read, Allow);
    let g = binding(Group, "a", Literal, "User:a", Op::Read, Allow);
    create(&mut image, vec![z.clone(), g.clone(), a.clone()]);
    assert_eq!(
        image.describe_acls(&AclBindingFilter::any()),
        vec![a.clone(), z.clone(), g.clone()]
    );
    assert_eq!(
        image.describe_acls(&filter(Topic, Some("a"), PatternType::Match)),
        vec![a]
    );
}

/// The same bindings created in another order give the same image bytes;
/// and images without ACLs (written before they existed) still load.
#[test]
fn acls_serialize_deterministically() {
    let bindings = vec![
        binding(Topic, "b", Prefixed, "User:x", Op::Write, Deny),
        alice_reads_orders(),
        binding(
            Cluster,
            "kafka-cluster",
            Literal,
            "User:*",
            Op::Alter,
            Allow,
        ),
        binding(Group, "g", Literal, "User:alice", Op::All, Allow),
    ];
    let mut one = MetadataImage::default();
    create(&mut one, bindings.clone());
    let mut other = MetadataImage::default();
    create(&mut other, bindings.into_iter().rev().collect());
    let json = serde_json::to_string(&one).unwrap();
    assert_eq!(json, serde_json::to_string(&other).unwrap());
    let back: MetadataImage = serde_json::from_str(&json).unwrap();
    assert_eq!(back, one);
    assert_eq!(back.acls().count(), 4);

    let mut value: serde_json::Value = serde_json::to_value(MetadataImage::default()).unwrap();
    assert!(value.as_object_mut().unwrap().remove("acls").is_some());
    let old: MetadataImage = serde_json::from_value(value).unwrap();
    assert_eq!(old.acls().count(), 0);

    let cmd = Command::DeleteAcls {
        filters: vec![AclBindingFilter::any(), alice_reads_orders().to_filter()],
    };
    let text = serde_json::to_string(&cmd).unwrap();
    assert_eq!(serde_json::from_str::<Command>(&text).unwrap(), cmd);
    let applied = one.apply(&cmd).unwrap();
    let text = serde_json::to_string(&applied).unwrap();
    assert_eq!(serde_json::from_str::<Applied>(&text).unwrap(), applied);
}
