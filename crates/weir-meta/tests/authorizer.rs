//! The authorizer against Kafka's `StandardAuthorizer` rules: one table of
//! (bindings, request, expected answer) for `authorize`, one for
//! `authorize_by_resource_type`, and properties over random ACLs.

use proptest::prelude::*;
use weir_meta::{
    AclBinding, AclOperation, AclPermissionType, Applied, Authorizer, Command, MetadataImage,
    PatternType, ResourceType,
};

use AclOperation as Op;
use AclPermissionType::{Allow, Deny};
use PatternType::{Literal, Prefixed};
use ResourceType::{Cluster, Group, Topic};

/// A binding from any host.
fn acl(
    permission: AclPermissionType,
    principal: &str,
    operation: AclOperation,
    resource_type: ResourceType,
    pattern_type: PatternType,
    name: &str,
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

fn from_host(mut binding: AclBinding, host: &str) -> AclBinding {
    binding.host = host.to_owned();
    binding
}

const ALICE: &str = "User:alice";
const BOB: &str = "User:bob";
const ANYONE: &str = "User:*";
const HOST: &str = "10.0.0.1";

struct Request {
    principal: &'static str,
    host: &'static str,
    operation: AclOperation,
    resource_type: ResourceType,
    /// `None` asks `authorize_by_resource_type`.
    name: Option<&'static str>,
}

/// alice, from HOST, asks to `operation` the topic `name`.
fn alice(operation: AclOperation, name: &'static str) -> Request {
    Request {
        principal: ALICE,
        host: HOST,
        operation,
        resource_type: Topic,
        name: Some(name),
    }
}

/// alice, from HOST, asks to `operation` some topic.
fn alice_any_topic(operation: AclOperation) -> Request {
    Request {
        name: None,
        ..alice(operation, "")
    }
}

struct Case {
    name: &'static str,
    bindings: Vec<AclBinding>,
    super_users: &'static [&'static str],
    allow_everyone: bool,
    request: Request,
    want: bool,
}

fn case(name: &'static str, bindings: Vec<AclBinding>, request: Request, want: bool) -> Case {
    Case {
        name,
        bindings,
        super_users: &[],
        allow_everyone: false,
        request,
        want,
    }
}

fn allow_everyone(mut case: Case) -> Case {
    case.allow_everyone = true;
    case
}

fn cases() -> Vec<Case> {
    let alice_reads_orders = acl(Allow, ALICE, Op::Read, Topic, Literal, "orders");
    vec![
        // ---- authorize
        case(
            "literal allow",
            vec![alice_reads_orders.clone()],
            alice(Op::Read, "orders"),
            true,
        ),
        case(
            "literal allow of another operation",
            vec![alice_reads_orders.clone()],
            alice(Op::Write, "orders"),
            false,
        ),
        case(
            "literal allow of another topic",
            vec![alice_reads_orders.clone()],
            alice(Op::Read, "payments"),
            false,
        ),
        case(
            "a literal name is not a prefix",
            vec![acl(Allow, ALICE, Op::Read, Topic, Literal, "ord")],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "wildcard resource",
            vec![acl(Allow, ALICE, Op::Read, Topic, Literal, "*")],
            alice(Op::Read, "anything"),
            true,
        ),
        case(
            "wildcard principal",
            vec![acl(Allow, ANYONE, Op::Read, Topic, Literal, "orders")],
            alice(Op::Read, "orders"),
            true,
        ),
        case(
            "another principal",
            vec![acl(Allow, BOB, Op::Read, Topic, Literal, "orders")],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "another principal type of the same name",
            vec![acl(
                Allow,
                "Group:alice",
                Op::Read,
                Topic,
                Literal,
                "orders",
            )],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "host matches",
            vec![from_host(alice_reads_orders.clone(), HOST)],
            alice(Op::Read, "orders"),
            true,
        ),
        case(
            "host mismatch",
            vec![from_host(alice_reads_orders.clone(), "10.0.0.2")],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "prefixed allow",
            vec![acl(Allow, ALICE, Op::Read, Topic, Prefixed, "ord")],
            alice(Op::Read, "orders"),
            true,
        ),
        case(
            "prefixed allow of the whole name",
            vec![acl(Allow, ALICE, Op::Read, Topic, Prefixed, "orders")],
            alice(Op::Read, "orders"),
            true,
        ),
        case(
            "prefixed allow longer than the name",
            vec![acl(Allow, ALICE, Op::Read, Topic, Prefixed, "orders-")],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "prefixed deny beats literal allow",
            vec![
                alice_reads_orders.clone(),
                acl(Deny, ALICE, Op::Read, Topic, Prefixed, "ord"),
            ],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "wildcard deny beats literal allow",
            vec![
                alice_reads_orders.clone(),
                acl(Deny, ANYONE, Op::Read, Topic, Literal, "*"),
            ],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "a deny for another principal changes nothing",
            vec![
                alice_reads_orders.clone(),
                acl(Deny, BOB, Op::Read, Topic, Literal, "*"),
            ],
            alice(Op::Read, "orders"),
            true,
        ),
        case(
            "deny of All",
            vec![
                alice_reads_orders.clone(),
                acl(Deny, ALICE, Op::All, Topic, Literal, "orders"),
            ],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "allow of All",
            vec![acl(Allow, ALICE, Op::All, Topic, Literal, "orders")],
            alice(Op::Delete, "orders"),
            true,
        ),
        case(
            "Describe implied by Write",
            vec![acl(Allow, ALICE, Op::Write, Topic, Literal, "orders")],
            alice(Op::Describe, "orders"),
            true,
        ),
        case(
            "Describe implied by Read",
            vec![alice_reads_orders.clone()],
            alice(Op::Describe, "orders"),
            true,
        ),
        case(
            "Describe implied by Alter",
            vec![acl(Allow, ALICE, Op::Alter, Topic, Literal, "orders")],
            alice(Op::Describe, "orders"),
            true,
        ),
        case(
            "Describe not implied by Create",
            vec![acl(Allow, ALICE, Op::Create, Topic, Literal, "orders")],
            alice(Op::Describe, "orders"),
            false,
        ),
        case(
            "DescribeConfigs implied by AlterConfigs",
            vec![acl(
                Allow,
                ALICE,
                Op::AlterConfigs,
                Topic,
                Literal,
                "orders",
            )],
            alice(Op::DescribeConfigs, "orders"),
            true,
        ),
        case(
            "DescribeConfigs not implied by Read",
            vec![alice_reads_orders.clone()],
            alice(Op::DescribeConfigs, "orders"),
            false,
        ),
        case(
            "Describe implies nothing",
            vec![acl(Allow, ALICE, Op::Describe, Topic, Literal, "orders")],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "a deny of Read does not deny the Describe Write grants",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "orders"),
                acl(Deny, ALICE, Op::Read, Topic, Literal, "orders"),
            ],
            alice(Op::Describe, "orders"),
            true,
        ),
        case(
            "a deny of Read still denies Read",
            vec![
                acl(Allow, ALICE, Op::All, Topic, Literal, "orders"),
                acl(Deny, ALICE, Op::Read, Topic, Literal, "orders"),
            ],
            alice(Op::Read, "orders"),
            false,
        ),
        case(
            "a deny of Describe beats the Describe Write grants",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "orders"),
                acl(Deny, ALICE, Op::Describe, Topic, Prefixed, "o"),
            ],
            alice(Op::Describe, "orders"),
            false,
        ),
        Case {
            super_users: &["User:admin", ALICE],
            ..case(
                "super user, whatever denies",
                vec![acl(Deny, ANYONE, Op::All, Topic, Literal, "*")],
                alice(Op::Read, "orders"),
                true,
            )
        },
        Case {
            super_users: &["User:admin"],
            ..case(
                "another super user",
                vec![acl(Deny, ANYONE, Op::All, Topic, Literal, "*")],
                alice(Op::Read, "orders"),
                false,
            )
        },
        case(
            "no ACL, allow.everyone.if.no.acl.found false",
            vec![],
            alice(Op::Read, "orders"),
            false,
        ),
        allow_everyone(case(
            "no ACL, allow.everyone.if.no.acl.found true",
            vec![],
            alice(Op::Read, "orders"),
            true,
        )),
        allow_everyone(case(
            "ACLs on other topics only count as no ACL",
            vec![acl(Deny, ANYONE, Op::All, Topic, Literal, "payments")],
            alice(Op::Read, "orders"),
            true,
        )),
        allow_everyone(case(
            "an ACL on the topic for someone else is an ACL found",
            vec![acl(Allow, BOB, Op::Write, Topic, Literal, "orders")],
            alice(Op::Read, "orders"),
            false,
        )),
        allow_everyone(case(
            "a prefixed ACL is an ACL found",
            vec![acl(Allow, BOB, Op::Write, Topic, Prefixed, "or")],
            alice(Op::Read, "orders"),
            false,
        )),
        case(
            "a group of the same name is another resource",
            vec![acl(Allow, ALICE, Op::Read, Group, Literal, "orders")],
            alice(Op::Read, "orders"),
            false,
        ),
        allow_everyone(case(
            "ACLs of another resource type count as no ACL",
            vec![acl(Deny, ALICE, Op::Read, Group, Literal, "orders")],
            alice(Op::Read, "orders"),
            true,
        )),
        case(
            "the cluster",
            vec![acl(
                Allow,
                ALICE,
                Op::IdempotentWrite,
                Cluster,
                Literal,
                "kafka-cluster",
            )],
            Request {
                resource_type: Cluster,
                ..alice(Op::IdempotentWrite, "kafka-cluster")
            },
            true,
        ),
        case(
            "names are compared by characters",
            vec![acl(Allow, ALICE, Op::Read, Topic, Prefixed, "é")],
            alice(Op::Read, "été"),
            true,
        ),
        // ---- authorize_by_resource_type
        case("by type: no ACL", vec![], alice_any_topic(Op::Write), false),
        allow_everyone(case(
            "by type: no ACL, allow.everyone.if.no.acl.found true",
            vec![],
            alice_any_topic(Op::Write),
            true,
        )),
        case(
            "by type: a literal allow",
            vec![acl(Allow, ALICE, Op::Write, Topic, Literal, "t")],
            alice_any_topic(Op::Write),
            true,
        ),
        case(
            "by type: an allow of another operation",
            vec![acl(Allow, ALICE, Op::Write, Topic, Literal, "t")],
            alice_any_topic(Op::Read),
            false,
        ),
        case(
            "by type: no implied operations",
            vec![acl(Allow, ALICE, Op::Write, Topic, Literal, "t")],
            alice_any_topic(Op::Describe),
            false,
        ),
        case(
            "by type: an allow of All",
            vec![acl(Allow, ALICE, Op::All, Topic, Prefixed, "t")],
            alice_any_topic(Op::Create),
            true,
        ),
        case(
            "by type: another host",
            vec![from_host(
                acl(Allow, ALICE, Op::Write, Topic, Literal, "t"),
                "10.9.9.9",
            )],
            alice_any_topic(Op::Write),
            false,
        ),
        case(
            "by type: literal allow, literal deny",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "t"),
                acl(Deny, ALICE, Op::Write, Topic, Literal, "t"),
            ],
            alice_any_topic(Op::Write),
            false,
        ),
        case(
            "by type: literal allow, deny of another literal",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "t"),
                acl(Deny, ALICE, Op::Write, Topic, Literal, "u"),
            ],
            alice_any_topic(Op::Write),
            true,
        ),
        case(
            "by type: literal allow, prefixed deny of its name",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "tx"),
                acl(Deny, ANYONE, Op::All, Topic, Prefixed, "tx"),
            ],
            alice_any_topic(Op::Write),
            false,
        ),
        case(
            "by type: prefixed allow, prefixed deny of a shorter prefix",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Prefixed, "abc"),
                acl(Deny, ALICE, Op::Write, Topic, Prefixed, "a"),
            ],
            alice_any_topic(Op::Write),
            false,
        ),
        case(
            "by type: prefixed allow, prefixed deny of a longer prefix",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Prefixed, "abc"),
                acl(Deny, ALICE, Op::Write, Topic, Prefixed, "abcd"),
            ],
            alice_any_topic(Op::Write),
            true,
        ),
        case(
            "by type: prefixed allow, literal deny of its name",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Prefixed, "ab"),
                acl(Deny, ALICE, Op::Write, Topic, Literal, "ab"),
            ],
            alice_any_topic(Op::Write),
            true,
        ),
        case(
            "by type: one allow dominated, another not",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "t"),
                acl(Allow, ALICE, Op::Write, Topic, Literal, "u"),
                acl(Deny, ALICE, Op::Write, Topic, Literal, "t"),
            ],
            alice_any_topic(Op::Write),
            true,
        ),
        case(
            "by type: wildcard allow, prefixed deny",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "*"),
                acl(Deny, ALICE, Op::Write, Topic, Prefixed, "a"),
            ],
            alice_any_topic(Op::Write),
            true,
        ),
        allow_everyone(case(
            "by type: wildcard deny beats everything but super users",
            vec![
                acl(Allow, ALICE, Op::Write, Topic, Literal, "t"),
                acl(Deny, ANYONE, Op::Write, Topic, Literal, "*"),
            ],
            alice_any_topic(Op::Write),
            false,
        )),
        Case {
            super_users: &[ALICE],
            ..case(
                "by type: super user",
                vec![acl(Deny, ANYONE, Op::All, Topic, Literal, "*")],
                alice_any_topic(Op::Write),
                true,
            )
        },
        case(
            "by type: someone else's allow",
            vec![acl(Allow, BOB, Op::Write, Topic, Literal, "t")],
            alice_any_topic(Op::Write),
            false,
        ),
        case(
            "by type: another type's allow",
            vec![acl(Allow, ALICE, Op::Write, Group, Literal, "t")],
            alice_any_topic(Op::Write),
            false,
        ),
        case(
            "by type: a prefixed allow matching 'hardcode'",
            vec![acl(Allow, ANYONE, Op::Write, Topic, Prefixed, "hard")],
            alice_any_topic(Op::Write),
            true,
        ),
        allow_everyone(case(
            "by type: a filter type is refused",
            vec![],
            Request {
                resource_type: ResourceType::Any,
                ..alice_any_topic(Op::Write)
            },
            false,
        )),
        allow_everyone(case(
            "by type: a filter operation is refused",
            vec![],
            alice_any_topic(Op::Any),
            false,
        )),
    ]
}

fn ask(authorizer: &Authorizer, r: &Request) -> bool {
    match r.name {
        Some(name) => authorizer.authorize(r.principal, r.host, r.operation, r.resource_type, name),
        None => {
            authorizer.authorize_by_resource_type(r.principal, r.host, r.operation, r.resource_type)
        }
    }
}

#[test]
fn authorization_table() {
    let mut failures = Vec::new();
    for case in cases() {
        // Through the image, as a broker builds it.
        let mut image = MetadataImage::default();
        let created = image
            .apply(&Command::CreateAcls {
                bindings: case.bindings.clone(),
            })
            .unwrap();
        assert!(
            matches!(&created, Applied::AclsCreated(r) if r.iter().all(Result::is_ok)),
            "{}: {created:?}",
            case.name
        );
        let super_users = case.super_users.iter().map(|s| (*s).to_owned()).collect();
        let authorizer = image.authorizer(super_users, case.allow_everyone);
        let got = ask(&authorizer, &case.request);
        if got != case.want {
            failures.push(format!("{}: want {}, got {got}", case.name, case.want));
        }
    }
    assert!(
        failures.is_empty(),
        "failing rows:\n{}",
        failures.join("\n")
    );
}

/// `authorize` by a plain scan of every binding, written from Kafka's
/// rules without the index, to check the index against.
fn reference(
    bindings: &[AclBinding],
    super_users: &[String],
    allow_everyone: bool,
    (principal, host, operation, resource_type, name): (&str, &str, Op, ResourceType, &str),
) -> bool {
    if super_users.iter().any(|s| s == principal) {
        return true;
    }
    let applicable: Vec<&AclBinding> = bindings
        .iter()
        .filter(|b| b.resource_type == resource_type)
        .filter(|b| match b.pattern_type {
            Literal => b.resource_name == name || b.resource_name == "*",
            Prefixed => name.starts_with(&b.resource_name),
            _ => false,
        })
        .collect();
    if applicable.is_empty() {
        return allow_everyone;
    }
    let concerned = |b: &&&AclBinding| {
        (b.principal == principal || b.principal == "User:*") && (b.host == "*" || b.host == host)
    };
    let implied = |granted: Op| match operation {
        Op::Describe => [Op::Read, Op::Write, Op::Delete, Op::Alter].contains(&granted),
        Op::DescribeConfigs => granted == Op::AlterConfigs,
        _ => false,
    };
    let denied = applicable
        .iter()
        .filter(concerned)
        .any(|b| b.permission == Deny && (b.operation == operation || b.operation == Op::All));
    let allowed = applicable.iter().filter(concerned).any(|b| {
        b.permission == Allow
            && (b.operation == operation || b.operation == Op::All || implied(b.operation))
    });
    !denied && allowed
}

const PRINCIPALS: &[&str] = &["User:alice", "User:bob", "User:*"];
const HOSTS: &[&str] = &["*", "h1", "h2"];
const NAMES: &[&str] = &["a", "ab", "abc", "b", "*"];
const OPERATIONS: &[Op] = &[
    Op::Read,
    Op::Write,
    Op::Describe,
    Op::All,
    Op::AlterConfigs,
    Op::DescribeConfigs,
];

fn binding() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(vec![Topic, Group]),
        prop::sample::select(NAMES),
        prop::sample::select(vec![Literal, Prefixed]),
        prop::sample::select(PRINCIPALS),
        prop::sample::select(HOSTS),
        prop::sample::select(OPERATIONS),
        prop::sample::select(vec![Allow, Deny]),
    )
        .prop_map(
            |(resource_type, name, pattern_type, principal, host, operation, permission)| {
                AclBinding {
                    resource_type,
                    resource_name: name.to_owned(),
                    pattern_type,
                    principal: principal.to_owned(),
                    host: host.to_owned(),
                    operation,
                    permission,
                }
            },
        )
}

type Asked = (&'static str, &'static str, Op, ResourceType, &'static str);

/// A request: alice or bob, from h1 or h2, a concrete operation, a name
/// among those the bindings use or another.
fn request() -> impl Strategy<Value = Asked> {
    (
        prop::sample::select(&PRINCIPALS[..2]),
        prop::sample::select(&HOSTS[1..]),
        prop::sample::select(OPERATIONS).prop_filter("concrete", |op| *op != Op::All),
        prop::sample::select(vec![Topic, Group]),
        prop::sample::select(vec!["a", "ab", "abc", "abd", "b", "c", "*"]),
    )
}

fn settings() -> impl Strategy<Value = (Vec<String>, bool)> {
    (
        prop::option::of(prop::sample::select(&PRINCIPALS[..2])),
        any::<bool>(),
    )
        .prop_map(|(super_user, allow_everyone)| {
            (
                super_user.into_iter().map(str::to_owned).collect(),
                allow_everyone,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The indexed lookup agrees with a scan of every binding.
    #[test]
    fn authorize_agrees_with_a_scan(
        bindings in prop::collection::vec(binding(), 0..8),
        (super_users, allow_everyone) in settings(),
        asked in request(),
    ) {
        let authorizer = Authorizer::new(bindings.clone(), super_users.clone(), allow_everyone);
        let (principal, host, operation, resource_type, name) = asked;
        prop_assert_eq!(
            authorizer.authorize(principal, host, operation, resource_type, name),
            reference(&bindings, &super_users, allow_everyone, asked)
        );
    }

    /// Adding a DENY never turns a denied request into an allowed one,
    /// for a resource or for a resource type.
    #[test]
    fn a_deny_never_allows(
        bindings in prop::collection::vec(binding(), 0..8),
        deny in binding(),
        (super_users, allow_everyone) in settings(),
        asked in request(),
    ) {
        let deny = AclBinding { permission: Deny, ..deny };
        let before = Authorizer::new(bindings.clone(), super_users.clone(), allow_everyone);
        let mut more = bindings;
        more.push(deny);
        let after = Authorizer::new(more, super_users, allow_everyone);
        let (principal, host, operation, resource_type, name) = asked;
        if !before.authorize(principal, host, operation, resource_type, name) {
            prop_assert!(!after.authorize(principal, host, operation, resource_type, name));
        }
        if !before.authorize_by_resource_type(principal, host, operation, resource_type) {
            prop_assert!(!after.authorize_by_resource_type(principal, host, operation, resource_type));
        }
    }
}
