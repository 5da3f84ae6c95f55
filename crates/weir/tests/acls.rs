//! ACLs (CreateAcls, DescribeAcls, DeleteAcls) and SCRAM users against the
//! real `weir` binary: through `weir acl` and `weir user`, through
//! `weir-client`, in raw protocol requests, and a SCRAM user authenticating
//! with librdkafka.

mod common;

use std::time::{Duration, Instant};

use common::cli::{block_on, run};
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_client::{AclBinding, AclFilter, Client, ClientError};
use weir_meta::{AclOperation, AclPermissionType, PatternType, ResourceType};

const ANY: i8 = 1;

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: AclOperation,
) -> AclBinding {
    AclBinding {
        resource_type: resource_type.code(),
        resource_name: name.to_owned(),
        pattern_type: pattern_type.code(),
        principal: principal.to_owned(),
        host: "*".to_owned(),
        operation: operation.code(),
        permission_type: AclPermissionType::Allow.code(),
    }
}

fn topic_filter(name: &str, pattern_type: PatternType) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::Topic.code(),
        resource_name: Some(name.to_owned()),
        pattern_type: pattern_type.code(),
        ..AclFilter::any()
    }
}

fn sorted(mut bindings: Vec<AclBinding>) -> Vec<AclBinding> {
    bindings.sort();
    bindings
}

/// The Kafka error code and message of a failed outcome.
fn kafka_error<T: std::fmt::Debug>(outcome: &Result<T, ClientError>) -> (i16, String) {
    match outcome {
        Err(ClientError::Kafka { code, message, .. }) => {
            (*code, message.clone().unwrap_or_default())
        }
        other => panic!("expected a Kafka error, got {other:?}"),
    }
}

#[test]
fn acls_are_created_described_and_deleted_with_kafkas_outcomes() {
    use AclOperation::{Alter, Describe, Read, Write};
    use PatternType::{Literal, Prefixed};
    use ResourceType::{Cluster, Group, Topic};
    let weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        let orders = acl(Topic, "orders", Literal, "User:alice", Read);
        let prefixed = acl(Topic, "ord", Prefixed, "User:bob", Write);
        let wildcard = acl(Topic, "*", Literal, "User:carol", Describe);
        let other = acl(Topic, "other", Literal, "User:alice", Read);
        let group = acl(Group, "orders", Literal, "User:alice", Read);
        let no_type = AclBinding {
            principal: "alice".to_owned(),
            ..orders.clone()
        };
        let cluster_named = acl(Cluster, "my-cluster", Literal, "User:alice", Alter);
        let any_pattern = AclBinding {
            pattern_type: ANY,
            ..orders.clone()
        };
        let any_operation = AclBinding {
            operation: ANY,
            ..orders.clone()
        };
        let outcomes = client
            .create_acls(&[
                orders.clone(),
                no_type,
                prefixed.clone(),
                cluster_named,
                wildcard.clone(),
                any_pattern,
                other.clone(),
                any_operation,
                group.clone(),
                // Again: a success that changes nothing.
                orders.clone(),
            ])
            .await
            .unwrap();
        let invalid = ResponseError::InvalidRequest.code();
        let expected_failures = [
            (
                1,
                "expected a string in format principalType:principalName but got alice",
            ),
            (
                3,
                "The only valid name for the CLUSTER resource is kafka-cluster",
            ),
            (5, "Invalid patternType ANY"),
            (7, "Invalid operation ANY"),
        ];
        for (i, outcome) in outcomes.iter().enumerate() {
            match expected_failures.iter().find(|(at, _)| *at == i) {
                Some((_, message)) => {
                    assert_eq!(
                        kafka_error(outcome),
                        (invalid, (*message).to_owned()),
                        "#{i}"
                    )
                }
                None => assert!(outcome.is_ok(), "#{i}: {outcome:?}"),
            }
        }
        assert_eq!(outcomes.len(), 10);

        let everything = vec![
            orders.clone(),
            prefixed.clone(),
            wildcard.clone(),
            other.clone(),
            group.clone(),
        ];
        assert_eq!(
            sorted(client.describe_acls(&AclFilter::any()).await.unwrap()),
            sorted(everything)
        );
        // MATCH: what applies to the topic "orders": its literal ACL, the
        // wildcard, and the prefix "ord"; not another topic's nor a group's.
        assert_eq!(
            sorted(
                client
                    .describe_acls(&topic_filter("orders", PatternType::Match))
                    .await
                    .unwrap()
            ),
            sorted(vec![orders.clone(), prefixed.clone(), wildcard.clone()])
        );
        // LITERAL and ANY compare names as they are.
        assert_eq!(
            client
                .describe_acls(&topic_filter("orders", Literal))
                .await
                .unwrap(),
            vec![orders.clone()]
        );
        assert_eq!(
            client
                .describe_acls(&topic_filter("ord", PatternType::Any))
                .await
                .unwrap(),
            vec![prefixed.clone()]
        );
        let by_principal = AclFilter {
            principal: Some("User:alice".to_owned()),
            ..AclFilter::any()
        };
        assert_eq!(
            sorted(client.describe_acls(&by_principal).await.unwrap()),
            sorted(vec![orders.clone(), other.clone(), group.clone()])
        );
        // A filter with an UNKNOWN code fails the whole request.
        let unknown_type = AclFilter {
            resource_type: 0,
            ..AclFilter::any()
        };
        assert_eq!(
            kafka_error(&client.describe_acls(&unknown_type).await),
            (invalid, "Unknown patternFilter.".to_owned())
        );
        let unknown_operation = AclFilter {
            operation: 0,
            ..AclFilter::any()
        };
        assert_eq!(
            kafka_error(&client.describe_acls(&unknown_operation).await),
            (invalid, "Unknown entryFilter.".to_owned())
        );

        let deleted = client
            .delete_acls(&[
                AclFilter {
                    principal: Some("User:bob".to_owned()),
                    ..AclFilter::any()
                },
                AclFilter {
                    pattern_type: 0,
                    ..AclFilter::any()
                },
                topic_filter("nothing-here", PatternType::Any),
                // Both of alice's topic ACLs.
                AclFilter {
                    resource_type: Topic.code(),
                    principal: Some("User:alice".to_owned()),
                    ..AclFilter::any()
                },
            ])
            .await
            .unwrap();
        assert_eq!(deleted.len(), 4);
        assert_eq!(deleted[0].as_ref().unwrap(), &vec![prefixed]);
        assert_eq!(
            kafka_error(&deleted[1]),
            (invalid, "Unknown patternFilter.".to_owned())
        );
        assert_eq!(deleted[2].as_ref().unwrap(), &Vec::<AclBinding>::new());
        assert_eq!(
            sorted(deleted[3].as_ref().unwrap().clone()),
            sorted(vec![orders, other])
        );
        assert_eq!(
            sorted(client.describe_acls(&AclFilter::any()).await.unwrap()),
            sorted(vec![wildcard, group])
        );
    });
}

/// DescribeAcls answers one resource per (type, name, pattern type) with
/// its ACLs, at every version Weir advertises (v1-3); CreateAcls v1 carries
/// the pattern type.
#[test]
fn describe_acls_groups_by_resource_at_each_version() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let creation = |name: &'static str, pattern: PatternType, principal: &'static str| {
        AclCreation::default()
            .with_resource_type(ResourceType::Topic.code())
            .with_resource_name(StrBytes::from_static_str(name))
            .with_resource_pattern_type(pattern.code())
            .with_principal(StrBytes::from_static_str(principal))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(AclOperation::Read.code())
            .with_permission_type(AclPermissionType::Allow.code())
    };
    let created: CreateAclsResponse = raw.call(
        ApiKey::CreateAcls,
        1,
        &CreateAclsRequest::default().with_creations(vec![
            creation("t", PatternType::Literal, "User:a"),
            creation("t", PatternType::Literal, "User:b"),
            creation("t", PatternType::Prefixed, "User:a"),
            creation("u", PatternType::Literal, "User:a"),
        ]),
    );
    assert_eq!(created.results.len(), 4);
    assert!(created.results.iter().all(|r| r.error_code == 0));
    for version in 1..=3 {
        let described: DescribeAclsResponse = raw.call(
            ApiKey::DescribeAcls,
            version,
            &DescribeAclsRequest::default()
                .with_resource_type_filter(ANY)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(ANY)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(ANY)
                .with_permission_type(ANY),
        );
        assert_eq!(described.error_code, 0, "v{version}");
        let mut resources: Vec<(String, i8, Vec<String>)> = described
            .resources
            .iter()
            .map(|r| {
                assert_eq!(r.resource_type, ResourceType::Topic.code());
                let mut principals: Vec<String> =
                    r.acls.iter().map(|a| a.principal.to_string()).collect();
                principals.sort();
                (r.resource_name.to_string(), r.pattern_type, principals)
            })
            .collect();
        resources.sort();
        let literal = PatternType::Literal.code();
        let prefixed = PatternType::Prefixed.code();
        assert_eq!(
            resources,
            [
                ("t".into(), literal, vec!["User:a".into(), "User:b".into()]),
                ("t".into(), prefixed, vec!["User:a".into()]),
                ("u".into(), literal, vec!["User:a".into()]),
            ],
            "v{version}"
        );
    }
}

#[test]
fn weir_acl_creates_lists_and_deletes() {
    let weir = Weir::start(&[]);
    let b = weir.kafka.as_str();
    let created = run(
        &[
            "acl",
            "create",
            "--bootstrap",
            b,
            "--topic",
            "orders",
            "--allow-principal",
            "User:alice",
            "--operation",
            "read",
            "--operation",
            "Describe",
        ],
        b"",
    )
    .ok();
    assert_eq!(
        created.lines(),
        [
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
            "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
            "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
            "",
        ]
    );
    run(
        &[
            "acl",
            "create",
            "--bootstrap",
            b,
            "--topic",
            "ord",
            "--resource-pattern-type",
            "prefixed",
            "--deny-principal",
            "User:bob",
            "--deny-host",
            "10.0.0.9",
            "--operation",
            "Write",
        ],
        b"",
    )
    .ok();
    run(
        &[
            "acl",
            "create",
            "--bootstrap",
            b,
            "--cluster",
            "--group",
            "g",
            "--allow-principal",
            "User:carol",
        ],
        b"",
    )
    .ok();

    let listed = run(&["acl", "list", "--bootstrap", b], b"").ok();
    assert_eq!(
        listed.lines(),
        [
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`:",
            "\t(principal=User:bob, host=10.0.0.9, operation=WRITE, permissionType=DENY)",
            "",
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
            "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
            "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
            "",
            "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)`:",
            "\t(principal=User:carol, host=*, operation=ALL, permissionType=ALLOW)",
            "",
            "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:",
            "\t(principal=User:carol, host=*, operation=ALL, permissionType=ALLOW)",
            "",
        ]
    );
    // The ACLs that apply to the topic "order-book": the prefix only.
    let matching = run(
        &[
            "acl",
            "list",
            "--bootstrap",
            b,
            "--topic",
            "order-book",
            "--resource-pattern-type",
            "MATCH",
        ],
        b"",
    )
    .ok();
    assert_eq!(
        matching.lines(),
        [
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`:",
            "\t(principal=User:bob, host=10.0.0.9, operation=WRITE, permissionType=DENY)",
            "",
        ]
    );
    // By default names are compared as they are.
    assert_eq!(
        run(
            &["acl", "list", "--bootstrap", b, "--topic", "order-book"],
            b""
        )
        .ok()
        .stdout,
        ""
    );
    let carol = run(
        &["acl", "list", "--bootstrap", b, "--principal", "User:carol"],
        b"",
    )
    .ok();
    assert_eq!(carol.lines()[0], "ACLs for principal `User:carol`");
    assert_eq!(
        carol
            .lines()
            .iter()
            .filter(|l| l.contains("User:carol"))
            .count(),
        3
    );
    assert!(!carol.stdout.contains("User:alice"));

    // Errors: the broker's, per ACL; the CLI's own, before asking.
    let error = run(
        &[
            "acl",
            "create",
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--allow-principal",
            "alice",
        ],
        b"",
    )
    .failed_with_one_line();
    assert!(
        error.contains(
            "INVALID_REQUEST (error code 42): expected a string in format \
             principalType:principalName but got alice"
        ),
        "{error}"
    );
    let error = run(
        &[
            "acl",
            "create",
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--allow-principal",
            "User:a",
            "--operation",
            "IdempotentWrite",
        ],
        b"",
    )
    .failed_with_one_line();
    assert!(
        error.contains("cannot name operation IdempotentWrite"),
        "{error}"
    );
    run(
        &[
            "acl",
            "create",
            "--bootstrap",
            b,
            "--topic",
            "t",
            "--allow-principal",
            "User:a",
            "--resource-pattern-type",
            "match",
        ],
        b"",
    )
    .usage_error();
    let error =
        run(&["acl", "create", "--bootstrap", b, "--topic", "t"], b"").failed_with_one_line();
    assert!(
        error.contains("--allow-principal or --deny-principal"),
        "{error}"
    );

    // Delete one entry, then everything on a resource.
    let deleted = run(
        &[
            "acl",
            "delete",
            "--bootstrap",
            b,
            "--topic",
            "orders",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
        ],
        b"",
    )
    .ok();
    assert_eq!(
        deleted.lines(),
        [
            "Deleted ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
            "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
            "",
        ]
    );
    run(
        &[
            "acl",
            "delete",
            "--bootstrap",
            b,
            "--topic",
            "ord",
            "--topic",
            "orders",
        ],
        b"",
    )
    .ok();
    assert_eq!(
        run(
            &["acl", "delete", "--bootstrap", b, "--topic", "orders"],
            b""
        )
        .ok()
        .lines(),
        ["No ACL matched"]
    );
    let left = run(&["acl", "list", "--bootstrap", b], b"").ok();
    assert!(!left.stdout.contains("TOPIC"), "{}", left.stdout);
    assert_eq!(
        left.lines()
            .iter()
            .filter(|l| l.contains("User:carol"))
            .count(),
        2
    );
}

/// A librdkafka client's configuration for the SASL_PLAINTEXT listener.
fn scram_config(addr: &str, user: &str, password: &str) -> rdkafka::ClientConfig {
    let mut config = rdkafka::ClientConfig::new();
    config
        .set("bootstrap.servers", addr)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", user)
        .set("sasl.password", password);
    config
}

#[test]
fn a_user_made_with_weir_user_authenticates_with_scram() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    ]);
    let plain = weir.listener("PLAINTEXT");
    let sasl = weir.listener("SASL_PLAINTEXT");
    assert_ne!(plain, sasl);
    let b = plain;

    let created = run(
        &[
            "user",
            "create",
            "alice",
            "--bootstrap",
            b,
            "--password",
            "alice-secret",
        ],
        b"",
    )
    .ok();
    assert_eq!(
        created.lines(),
        ["Set the SCRAM-SHA-512 credential of user alice (4096 iterations)"]
    );
    run(
        &[
            "user",
            "create",
            "alice",
            "--bootstrap",
            b,
            "--password",
            "other-secret",
            "--mechanism",
            "scram-sha-256",
            "--iterations",
            "8192",
        ],
        b"",
    )
    .ok();
    let listed = run(&["user", "list", "--bootstrap", b], b"").ok();
    assert_eq!(
        listed.table("USER"),
        [
            vec!["USER", "MECHANISM", "ITERATIONS"],
            vec!["alice", "SCRAM-SHA-256", "8192"],
            vec!["alice", "SCRAM-SHA-512", "4096"],
        ]
    );
    run(
        &[
            "topic",
            "create",
            "secured",
            "--bootstrap",
            b,
            "--partitions",
            "1",
        ],
        b"",
    )
    .ok();

    // alice produces one record over SCRAM-SHA-512 and reads it back.
    let producer: BaseProducer = scram_config(sasl, "alice", "alice-secret")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    producer
        .send(
            BaseRecord::<(), str>::to("secured")
                .partition(0)
                .payload("hello"),
        )
        .expect("queue");
    producer.flush(Duration::from_secs(20)).expect("delivered");
    let consumer: BaseConsumer = scram_config(sasl, "alice", "alice-secret")
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset("secured", 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let payload = loop {
        assert!(Instant::now() < deadline, "no record read back");
        if let Some(message) = consumer.poll(Duration::from_millis(500)) {
            let message = message.expect("fetch");
            break message.payload().map(|p| p.to_vec());
        }
    };
    assert_eq!(payload.as_deref(), Some(&b"hello"[..]));

    // A wrong password, or the SCRAM-SHA-256 password over SCRAM-SHA-512,
    // authenticates nothing.
    for password in ["wrong", "other-secret"] {
        let refused: BaseConsumer = scram_config(sasl, "alice", password)
            .set("group.id", "unused")
            .create()
            .expect("consumer");
        assert!(
            refused
                .fetch_metadata(Some("secured"), Duration::from_secs(5))
                .is_err(),
            "authenticated with password {password:?}"
        );
    }

    let deleted = run(&["user", "delete", "alice", "--bootstrap", b], b"").ok();
    assert_eq!(
        deleted.lines(),
        [
            "Deleted the SCRAM-SHA-256 credential of user alice",
            "Deleted the SCRAM-SHA-512 credential of user alice",
        ]
    );
    assert_eq!(
        run(&["user", "list", "--bootstrap", b], b"").ok().lines(),
        ["USER  MECHANISM  ITERATIONS"]
    );
    let error = run(&["user", "delete", "alice", "--bootstrap", b], b"").failed_with_one_line();
    assert_eq!(error, "error: user alice has no SCRAM credential");
    // Deleted, alice no longer gets in.
    let gone: BaseConsumer = scram_config(sasl, "alice", "alice-secret")
        .set("group.id", "unused")
        .create()
        .expect("consumer");
    assert!(gone
        .fetch_metadata(Some("secured"), Duration::from_secs(5))
        .is_err());
}
