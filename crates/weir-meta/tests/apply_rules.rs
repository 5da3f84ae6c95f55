//! Table-driven tests of `MetadataImage::apply`: each row sets up an image,
//! applies one command and states the outcome. Every failing row also
//! checks that the image did not change; every passing row that the
//! applied index went up by one.

use std::collections::BTreeMap;

use uuid::Uuid;
use weir_meta::{
    Applied, BrokerInfo, Command, EntityName, MetaError, MetadataImage, QuotaAlteration,
    QuotaEntity, QuotaValue, TopicCreation,
};

fn broker(id: i32) -> Command {
    Command::RegisterBroker(BrokerInfo {
        id,
        host: format!("host{id}"),
        port: 9092,
        rack: None,
        incarnation: uuid::Uuid::from_u128(1),
        previous_incarnation: None,
        listeners: Vec::new(),
    })
}

fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn create_full(
    name: &str,
    id: u128,
    partitions: i32,
    replicas: &[&[i32]],
    cfg: &[(&str, &str)],
) -> Command {
    Command::CreateTopic {
        name: name.to_owned(),
        id: Uuid::from_u128(id),
        partitions,
        replicas: replicas.iter().map(|r| r.to_vec()).collect(),
        configs: configs(cfg),
        internal: false,
    }
}

/// A topic with one partition per replica list.
fn create(name: &str, id: u128, replicas: &[&[i32]]) -> Command {
    create_full(name, id, replicas.len() as i32, replicas, &[])
}

fn delete(name: &str) -> Command {
    Command::DeleteTopic {
        name: name.to_owned(),
    }
}

fn add_partitions(name: &str, replicas: &[&[i32]]) -> Command {
    Command::CreatePartitions {
        name: name.to_owned(),
        new_replicas: replicas.iter().map(|r| r.to_vec()).collect(),
    }
}

fn alter(name: &str, set: &[(&str, &str)], del: &[&str]) -> Command {
    Command::AlterTopicConfigs {
        name: name.to_owned(),
        set: configs(set),
        delete: del.iter().map(|s| s.to_string()).collect(),
    }
}

fn alter_broker(broker: Option<i32>, set: &[(&str, &str)], del: &[&str]) -> Command {
    Command::AlterBrokerConfigs {
        broker,
        set: configs(set),
        delete: del.iter().map(|s| s.to_string()).collect(),
    }
}

fn producer_ids(count: i64) -> Command {
    Command::AllocateProducerIds { count }
}

/// Three brokers and topic "t" (id 1) with 3 partitions of 2 replicas.
fn cluster() -> Vec<Command> {
    vec![
        broker(1),
        broker(2),
        broker(3),
        create("t", 1, &[&[1, 2], &[2, 3], &[3, 1]]),
    ]
}

fn with(mut base: Vec<Command>, more: &[Command]) -> Vec<Command> {
    base.extend_from_slice(more);
    base
}

enum Want {
    Ok(Applied),
    /// Kafka error code and a fragment of the message.
    Err(i16, &'static str),
}

struct Case {
    name: &'static str,
    setup: Vec<Command>,
    cmd: Command,
    want: Want,
    /// Extra checks on the image after a successful apply.
    then: Option<fn(&MetadataImage)>,
}

fn case(name: &'static str, setup: Vec<Command>, cmd: Command, want: Want) -> Case {
    Case {
        name,
        setup,
        cmd,
        want,
        then: None,
    }
}

fn ok() -> Want {
    Want::Ok(Applied::Done)
}

fn cases() -> Vec<Case> {
    let long_name = "x".repeat(249);
    let too_long = "x".repeat(250);
    vec![
        // ---- topic names
        case(
            "name: all legal characters",
            cluster(),
            create("Az09._-", 9, &[&[1]]),
            ok(),
        ),
        case(
            "name: 249 characters",
            cluster(),
            create(&long_name, 9, &[&[1]]),
            ok(),
        ),
        case(
            "name: 250 characters",
            cluster(),
            create(&too_long, 9, &[&[1]]),
            Want::Err(17, "can't be longer than 249 characters"),
        ),
        case(
            "name: empty",
            cluster(),
            create("", 9, &[&[1]]),
            Want::Err(17, "can't be empty"),
        ),
        case(
            "name: dot",
            cluster(),
            create(".", 9, &[&[1]]),
            Want::Err(17, "cannot be \".\" or \"..\""),
        ),
        case(
            "name: dot dot",
            cluster(),
            create("..", 9, &[&[1]]),
            Want::Err(17, "cannot be \".\" or \"..\""),
        ),
        case(
            "name: three dots are legal",
            cluster(),
            create("...", 9, &[&[1]]),
            ok(),
        ),
        case(
            "name: space",
            cluster(),
            create("a b", 9, &[&[1]]),
            Want::Err(
                17,
                "contains a character other than ASCII alphanumerics, '.', '_' and '-'",
            ),
        ),
        case(
            "name: slash",
            cluster(),
            create("a/b", 9, &[&[1]]),
            Want::Err(17, "contains a character other than"),
        ),
        case(
            "name: non-ASCII",
            cluster(),
            create("tópico", 9, &[&[1]]),
            Want::Err(17, "contains a character other than"),
        ),
        case(
            "name: duplicate",
            cluster(),
            create("t", 9, &[&[1]]),
            Want::Err(36, "Topic 't' already exists."),
        ),
        case(
            "name: '.' and '_' collide",
            with(cluster(), &[create("a.b", 9, &[&[1]])]),
            create("a_b", 10, &[&[1]]),
            Want::Err(17, "Topic 'a_b' collides with existing topic: a.b"),
        ),
        case(
            "name: '_' and '.' collide",
            with(cluster(), &[create("a_b", 9, &[&[1]])]),
            create("a.b", 10, &[&[1]]),
            Want::Err(17, "collides with existing topic: a_b"),
        ),
        case(
            "name: no collision once the other topic is deleted",
            with(cluster(), &[create("a.b", 9, &[&[1]]), delete("a.b")]),
            create("a_b", 10, &[&[1]]),
            ok(),
        ),
        // ---- topic ids
        case(
            "id: nil",
            cluster(),
            create("u", 0, &[&[1]]),
            Want::Err(42, "nil UUID"),
        ),
        case(
            "id: already used",
            cluster(),
            create("u", 1, &[&[1]]),
            Want::Err(42, "already used by topic 't'"),
        ),
        // ---- partition counts
        case(
            "partitions: zero",
            cluster(),
            create_full("u", 9, 0, &[], &[]),
            Want::Err(37, "non-positive"),
        ),
        case(
            "partitions: negative",
            cluster(),
            create_full("u", 9, -1, &[], &[]),
            Want::Err(37, "non-positive"),
        ),
        case(
            "partitions: fewer assignments than partitions",
            cluster(),
            create_full("u", 9, 3, &[&[1], &[2]], &[]),
            Want::Err(37, "2 replica assignments were given for 3 partitions"),
        ),
        case(
            "partitions: more assignments than partitions",
            cluster(),
            create_full("u", 9, 1, &[&[1], &[2]], &[]),
            Want::Err(37, "2 replica assignments were given for 1 partitions"),
        ),
        // ---- replicas
        case(
            "replicas: empty list",
            cluster(),
            create("u", 9, &[&[]]),
            Want::Err(39, "empty replica list"),
        ),
        case(
            "replicas: empty list in a later partition",
            cluster(),
            create("u", 9, &[&[1], &[]]),
            Want::Err(39, "empty replica list"),
        ),
        case(
            "replicas: broker twice",
            cluster(),
            create("u", 9, &[&[1, 2, 1]]),
            Want::Err(39, "includes the broker 1 more than once"),
        ),
        case(
            "replicas: unregistered broker",
            cluster(),
            create("u", 9, &[&[1, 4]]),
            Want::Err(39, "includes broker 4, but no such broker is registered"),
        ),
        case(
            "replicas: no brokers at all",
            vec![],
            create("u", 9, &[&[1]]),
            Want::Err(39, "no such broker is registered"),
        ),
        case(
            "replicas: inconsistent replication factor",
            cluster(),
            create("u", 9, &[&[1, 2], &[3]]),
            Want::Err(
                39,
                "1 replica(s), but this is not consistent with previous partitions, which have 2",
            ),
        ),
        Case {
            name: "replicas: leader is the first replica, ISR the replicas, epoch 0",
            setup: cluster(),
            cmd: create("u", 9, &[&[3, 1, 2], &[2, 3, 1]]),
            want: ok(),
            then: Some(|image| {
                let topic = image.topic("u").unwrap();
                assert_eq!(topic.id, Uuid::from_u128(9));
                assert_eq!(topic.partitions.len(), 2);
                for (i, p) in topic.partitions.iter().enumerate() {
                    assert_eq!(p.partition, i as i32);
                    assert_eq!(p.leader, p.replicas[0]);
                    assert_eq!(p.isr, p.replicas);
                    assert_eq!(p.leader_epoch, 0);
                }
                assert_eq!(topic.partitions[0].replicas, vec![3, 1, 2]);
                assert_eq!(topic.partitions[1].leader, 2);
                assert!(!topic.internal);
                assert_eq!(image.topic_by_id(Uuid::from_u128(9)).unwrap().name, "u");
            }),
        },
        // ---- configs at creation
        Case {
            name: "configs: valid overrides are stored, nothing else",
            setup: cluster(),
            cmd: create_full(
                "u",
                9,
                1,
                &[&[1]],
                &[
                    ("retention.ms", "1000"),
                    ("cleanup.policy", "compact,delete"),
                ],
            ),
            want: ok(),
            then: Some(|image| {
                assert_eq!(
                    image.topic("u").unwrap().configs,
                    configs(&[
                        ("retention.ms", "1000"),
                        ("cleanup.policy", "compact,delete")
                    ])
                );
            }),
        },
        case(
            "configs: unknown name",
            cluster(),
            create_full("u", 9, 1, &[&[1]], &[("retention.hours", "1")]),
            Want::Err(40, "Unknown topic config name: retention.hours"),
        ),
        case(
            "configs: invalid value",
            cluster(),
            create_full("u", 9, 1, &[&[1]], &[("retention.ms", "-2")]),
            Want::Err(
                40,
                "Invalid value -2 for configuration retention.ms: Value must be at least -1",
            ),
        ),
        case(
            "configs: invalid cleanup.policy",
            cluster(),
            create_full("u", 9, 1, &[&[1]], &[("cleanup.policy", "forever")]),
            Want::Err(40, "cleanup.policy"),
        ),
        case(
            "configs: compaction lags out of order",
            cluster(),
            create_full(
                "u",
                9,
                1,
                &[&[1]],
                &[
                    ("min.compaction.lag.ms", "10"),
                    ("max.compaction.lag.ms", "5"),
                ],
            ),
            Want::Err(40, "conflict topic config setting"),
        ),
        // ---- delete
        case(
            "delete: unknown topic",
            cluster(),
            delete("nope"),
            Want::Err(3, "nope"),
        ),
        case(
            "delete: twice",
            with(cluster(), &[delete("t")]),
            delete("t"),
            Want::Err(3, "t"),
        ),
        Case {
            name: "delete: removes the topic and its id",
            setup: cluster(),
            cmd: delete("t"),
            want: ok(),
            then: Some(|image| {
                assert!(image.topic("t").is_none());
                assert!(image.topic_by_id(Uuid::from_u128(1)).is_none());
                assert_eq!(image.topics().count(), 0);
            }),
        },
        // ---- create partitions
        case(
            "partitions+: unknown topic",
            cluster(),
            add_partitions("nope", &[&[1, 2]]),
            Want::Err(3, "nope"),
        ),
        case(
            "partitions+: none added",
            cluster(),
            add_partitions("t", &[]),
            Want::Err(37, "Topic already has 3 partition(s)."),
        ),
        case(
            "partitions+: unregistered broker",
            cluster(),
            add_partitions("t", &[&[1, 7]]),
            Want::Err(39, "includes broker 7, but no such broker is registered"),
        ),
        case(
            "partitions+: broker twice",
            cluster(),
            add_partitions("t", &[&[2, 2]]),
            Want::Err(39, "more than once"),
        ),
        case(
            "partitions+: empty replica list",
            cluster(),
            add_partitions("t", &[&[]]),
            Want::Err(39, "empty replica list"),
        ),
        case(
            "partitions+: different replication factor",
            cluster(),
            add_partitions("t", &[&[1, 2, 3]]),
            Want::Err(
                39,
                "3 replica(s), but this is not consistent with previous partitions, which have 2",
            ),
        ),
        Case {
            name: "partitions+: new partitions continue the numbering",
            setup: cluster(),
            cmd: add_partitions("t", &[&[2, 1], &[3, 2]]),
            want: ok(),
            then: Some(|image| {
                let topic = image.topic("t").unwrap();
                assert_eq!(topic.partition_count(), 5);
                let p4 = topic.partition(4).unwrap();
                assert_eq!((p4.partition, p4.leader, p4.leader_epoch), (4, 3, 0));
                assert_eq!(p4.isr, vec![3, 2]);
                assert_eq!(topic.partitions[0].replicas, vec![1, 2]);
            }),
        },
        // ---- alter configs
        case(
            "alter: unknown topic",
            cluster(),
            alter("nope", &[("retention.ms", "1")], &[]),
            Want::Err(3, "nope"),
        ),
        case(
            "alter: unknown name set",
            cluster(),
            alter("t", &[("colour", "blue")], &[]),
            Want::Err(40, "Unknown topic config name: colour"),
        ),
        case(
            "alter: unknown name deleted",
            cluster(),
            alter("t", &[], &["colour"]),
            Want::Err(40, "Unknown topic config name: colour"),
        ),
        case(
            "alter: invalid value",
            cluster(),
            alter("t", &[("segment.bytes", "13")], &[]),
            Want::Err(
                40,
                "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
            ),
        ),
        case(
            "alter: bad boolean",
            cluster(),
            alter("t", &[("unclean.leader.election.enable", "yes")], &[]),
            Want::Err(40, "Expected value to be either true or false"),
        ),
        case(
            "alter: same key set and deleted",
            cluster(),
            alter("t", &[("retention.ms", "1")], &["retention.ms"]),
            Want::Err(42, "duplicate config keys"),
        ),
        case(
            "alter: same key deleted twice",
            cluster(),
            alter("t", &[], &["retention.ms", "retention.ms"]),
            Want::Err(42, "duplicate config keys"),
        ),
        case(
            "alter: conflicts with an existing override",
            with(
                cluster(),
                &[alter("t", &[("max.compaction.lag.ms", "100")], &[])],
            ),
            alter("t", &[("min.compaction.lag.ms", "200")], &[]),
            Want::Err(40, "conflict topic config setting"),
        ),
        Case {
            name: "alter: set and delete overrides",
            setup: with(
                cluster(),
                &[alter(
                    "t",
                    &[("retention.ms", "1"), ("segment.ms", "5")],
                    &[],
                )],
            ),
            cmd: alter(
                "t",
                &[("retention.ms", "2"), ("compression.type", "zstd")],
                &["segment.ms", "flush.ms"],
            ),
            want: ok(),
            then: Some(|image| {
                assert_eq!(
                    image.topic("t").unwrap().configs,
                    configs(&[("retention.ms", "2"), ("compression.type", "zstd")])
                );
            }),
        },
        // ---- broker configs: stored, not interpreted (the broker validates)
        Case {
            name: "broker configs: the cluster default and one broker's",
            setup: with(
                cluster(),
                &[alter_broker(None, &[("log.retention.ms", "1000")], &[])],
            ),
            cmd: alter_broker(Some(2), &[("log.retention.ms", "5")], &[]),
            want: ok(),
            then: Some(|image| {
                assert_eq!(
                    image.broker_configs(None),
                    &configs(&[("log.retention.ms", "1000")])
                );
                assert_eq!(
                    image.broker_configs(Some(2)),
                    &configs(&[("log.retention.ms", "5")])
                );
                assert!(image.broker_configs(Some(1)).is_empty());
                assert_eq!(image.brokers_with_configs().collect::<Vec<_>>(), [2]);
            }),
        },
        Case {
            name: "broker configs: set and delete; an emptied broker disappears",
            setup: with(
                cluster(),
                &[alter_broker(Some(3), &[("a", "1"), ("b", "2")], &[])],
            ),
            cmd: alter_broker(Some(3), &[], &["a", "b", "never.set"]),
            want: ok(),
            then: Some(|image| {
                assert!(image.broker_configs(Some(3)).is_empty());
                assert_eq!(image.brokers_with_configs().count(), 0);
            }),
        },
        case(
            "broker configs: an unregistered broker id is kept, as in Kafka",
            cluster(),
            alter_broker(Some(9), &[("a", "1")], &[]),
            ok(),
        ),
        case(
            "broker configs: negative broker id",
            cluster(),
            alter_broker(Some(-1), &[("a", "1")], &[]),
            Want::Err(42, "Invalid negative broker ID"),
        ),
        case(
            "broker configs: same key set and deleted",
            cluster(),
            alter_broker(None, &[("a", "1")], &["a"]),
            Want::Err(42, "duplicate config keys"),
        ),
        case(
            "broker configs: same key deleted twice",
            cluster(),
            alter_broker(None, &[], &["a", "a"]),
            Want::Err(42, "duplicate config keys"),
        ),
        case(
            "broker configs: empty name",
            cluster(),
            alter_broker(None, &[(" ", "1")], &[]),
            Want::Err(42, "empty config name"),
        ),
        // ---- producer ids
        case(
            "pids: first block starts at 0",
            cluster(),
            producer_ids(1000),
            Want::Ok(Applied::ProducerIds {
                first: 0,
                count: 1000,
            }),
        ),
        Case {
            name: "pids: blocks follow each other",
            setup: with(cluster(), &[producer_ids(1000), producer_ids(5)]),
            cmd: producer_ids(7),
            want: Want::Ok(Applied::ProducerIds {
                first: 1005,
                count: 7,
            }),
            then: Some(|image| assert_eq!(image.next_producer_id(), 1012)),
        },
        case(
            "pids: zero",
            cluster(),
            producer_ids(0),
            Want::Err(42, "at least 1"),
        ),
        case(
            "pids: negative",
            cluster(),
            producer_ids(-3),
            Want::Err(42, "at least 1"),
        ),
        case(
            "pids: exhausted",
            vec![producer_ids(i64::MAX - 5)],
            producer_ids(10),
            Want::Err(-1, "cannot allocate 10 producer ids"),
        ),
        case(
            "pids: the very last block",
            vec![producer_ids(i64::MAX - 5)],
            producer_ids(5),
            Want::Ok(Applied::ProducerIds {
                first: i64::MAX - 5,
                count: 5,
            }),
        ),
        // ---- brokers
        case(
            "broker: negative id",
            vec![],
            Command::RegisterBroker(BrokerInfo {
                id: -1,
                host: "h".into(),
                port: 1,
                rack: None,
                incarnation: uuid::Uuid::from_u128(1),
                previous_incarnation: None,
                listeners: Vec::new(),
            }),
            Want::Err(42, "negative"),
        ),
        case(
            "broker: empty host",
            vec![],
            Command::RegisterBroker(BrokerInfo {
                id: 1,
                host: String::new(),
                port: 1,
                rack: None,
                incarnation: uuid::Uuid::from_u128(1),
                previous_incarnation: None,
                listeners: Vec::new(),
            }),
            Want::Err(42, "empty host"),
        ),
        case(
            "broker: port 0",
            vec![],
            Command::RegisterBroker(BrokerInfo {
                id: 1,
                host: "h".into(),
                port: 0,
                rack: None,
                incarnation: uuid::Uuid::from_u128(1),
                previous_incarnation: None,
                listeners: Vec::new(),
            }),
            Want::Err(42, "port 0"),
        ),
        Case {
            name: "broker: re-registering replaces",
            setup: cluster(),
            cmd: Command::RegisterBroker(BrokerInfo {
                id: 2,
                host: "new".into(),
                port: 19092,
                rack: Some("r1".into()),
                incarnation: uuid::Uuid::from_u128(1),
                previous_incarnation: None,
                listeners: Vec::new(),
            }),
            want: ok(),
            then: Some(|image| {
                assert_eq!(image.brokers().count(), 3);
                let b = image.broker(2).unwrap();
                assert_eq!(
                    (b.host.as_str(), b.port, b.rack.as_deref()),
                    ("new", 19092, Some("r1"))
                );
            }),
        },
    ]
}

#[test]
fn apply_table() {
    let mut failures = Vec::new();
    for case in cases() {
        let mut image = MetadataImage::default();
        for (i, cmd) in case.setup.iter().enumerate() {
            image
                .apply(cmd)
                .unwrap_or_else(|e| panic!("{}: setup command {i} failed: {e}", case.name));
        }
        let before = image.clone();
        let got = image.apply(&case.cmd);
        let outcome = match (&case.want, &got) {
            (Want::Ok(want), Ok(applied)) if want == applied => {
                if image.applied_index() != before.applied_index() + 1 {
                    Err("the applied index did not go up by one".to_owned())
                } else {
                    if let Some(then) = case.then {
                        then(&image);
                    }
                    Ok(())
                }
            }
            (Want::Err(code, fragment), Err(e))
                if e.kafka_error_code() == *code && e.to_string().contains(fragment) =>
            {
                if image != before {
                    Err("a rejected command changed the image".to_owned())
                } else {
                    Ok(())
                }
            }
            (Want::Ok(want), _) => Err(format!("want Ok({want:?}), got {got:?}")),
            (Want::Err(code, fragment), _) => Err(format!(
                "want error {code} containing {fragment:?}, got {}",
                describe(&got)
            )),
        };
        if let Err(why) = outcome {
            failures.push(format!("{}: {why}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "failing rows:\n{}",
        failures.join("\n")
    );
}

fn describe(got: &Result<Applied, MetaError>) -> String {
    match got {
        Ok(applied) => format!("Ok({applied:?})"),
        Err(e) => format!("error {} {e:?}: {e}", e.kafka_error_code()),
    }
}

/// Kafka's messages for a `CreatePartitions` count that does not grow
/// the topic.
#[test]
fn partitions_to_add() {
    let mut image = MetadataImage::default();
    for cmd in cluster() {
        image.apply(&cmd).unwrap();
    }
    let table: &[(&str, i32, Result<i32, &str>)] = &[
        ("t", 5, Ok(2)),
        ("t", 4, Ok(1)),
        ("t", 3, Err("Topic already has 3 partition(s).")),
        (
            "t",
            2,
            Err("The topic t currently has 3 partition(s); 2 would not be an increase."),
        ),
        ("nope", 5, Err("nope")),
    ];
    for &(name, total, ref want) in table {
        let got = image.partitions_to_add(name, total);
        match (want, &got) {
            (Ok(n), Ok(m)) => assert_eq!(n, m, "{name} {total}"),
            (Err(text), Err(e)) => assert!(e.to_string().contains(text), "{name} {total}: {e}"),
            _ => panic!("{name} {total}: want {want:?}, got {got:?}"),
        }
    }
    assert_eq!(
        image
            .partitions_to_add("t", 2)
            .unwrap_err()
            .kafka_error_code(),
        37
    );
}

#[test]
fn assign_replicas_spreads_over_registered_brokers() {
    let mut image = MetadataImage::default();
    for id in [5, 1, 3, 9] {
        image.apply(&broker(id)).unwrap();
    }
    for start in 0..8 {
        let assignment = image.assign_replicas(0, 12, 3, start).unwrap();
        assert_eq!(assignment.len(), 12);
        let mut leaders = BTreeMap::new();
        for replicas in &assignment {
            assert_eq!(replicas.len(), 3);
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "duplicate broker in {replicas:?}");
            assert!(replicas.iter().all(|id| image.broker(*id).is_some()));
            *leaders.entry(replicas[0]).or_insert(0) += 1;
        }
        // 12 partitions over 4 brokers: each leads 3.
        assert!(leaders.values().all(|&n| n == 3), "{leaders:?}");
        // The assignment is valid input for CreateTopic.
        let mut copy = image.clone();
        copy.apply(&Command::CreateTopic {
            name: "x".into(),
            id: Uuid::from_u128(1),
            partitions: 12,
            replicas: assignment,
            configs: BTreeMap::new(),
            internal: false,
        })
        .unwrap();
    }
    assert_eq!(
        image
            .assign_replicas(0, 1, 5, 0)
            .unwrap_err()
            .kafka_error_code(),
        38
    );
    assert_eq!(
        image
            .assign_replicas(0, 1, 0, 0)
            .unwrap_err()
            .kafka_error_code(),
        38
    );
    assert_eq!(
        image
            .assign_replicas(0, 0, 1, 0)
            .unwrap_err()
            .kafka_error_code(),
        37
    );
    // Deterministic.
    assert_eq!(
        image.assign_replicas(3, 4, 2, 7).unwrap(),
        image.assign_replicas(3, 4, 2, 7).unwrap()
    );
}

#[test]
fn validate_does_not_change_the_image() {
    let mut image = MetadataImage::default();
    for cmd in cluster() {
        image.apply(&cmd).unwrap();
    }
    let before = image.clone();
    image.validate(&create("u", 9, &[&[1]])).unwrap();
    image.validate(&producer_ids(10)).unwrap();
    assert!(image.validate(&delete("nope")).is_err());
    assert_eq!(image, before);
}

#[test]
fn image_json_round_trip() {
    let mut image = MetadataImage::default();
    for cmd in with(
        cluster(),
        &[
            producer_ids(42),
            alter("t", &[("retention.ms", "5")], &[]),
            alter_broker(None, &[("log.retention.bytes", "10")], &[]),
            alter_broker(Some(2), &[("log.retention.ms", "5")], &[]),
            quotas(&[(
                user_and_client("u", None),
                &[("producer_byte_rate", 1024.0)],
                &[],
            )]),
        ],
    ) {
        image.apply(&cmd).unwrap();
    }
    let json = serde_json::to_string(&image).unwrap();
    let back: MetadataImage = serde_json::from_str(&json).unwrap();
    assert_eq!(back, image);
    assert_eq!(back.topic_by_id(Uuid::from_u128(1)).unwrap().name, "t");
    assert_eq!(back.applied_index(), 9);
    assert_eq!(back.client_quotas(), image.client_quotas());
    assert_eq!(back.client_quotas().len(), 1);
    assert_eq!(
        back.broker_configs(Some(2)),
        &configs(&[("log.retention.ms", "5")])
    );
    assert_eq!(back.next_producer_id(), 42);
}

/// Snapshots written before broker configs were dynamic lack both fields,
/// and those of before quotas and SCRAM credentials lack theirs.
#[test]
fn an_image_without_broker_configs_still_loads() {
    let mut image = MetadataImage::default();
    for cmd in cluster() {
        image.apply(&cmd).unwrap();
    }
    let mut json: serde_json::Value = serde_json::to_value(&image).unwrap();
    let fields = json.as_object_mut().unwrap();
    assert!(fields.remove("cluster_broker_configs").is_some());
    assert!(fields.remove("broker_configs").is_some());
    assert!(fields.remove("client_quotas").is_some());
    assert!(fields.remove("scram_credentials").is_some());
    let back: MetadataImage = serde_json::from_value(json).unwrap();
    assert_eq!(back, image);
}

#[test]
fn command_json_round_trip() {
    for cmd in with(
        cluster(),
        &[
            producer_ids(1),
            alter("t", &[("a", "b")], &["c"]),
            add_partitions("t", &[&[1]]),
            delete("t"),
            Command::FenceBroker { id: 2 },
            Command::ControlledShutdown { id: 3 },
            Command::ReplicasOffline {
                broker: 2,
                partitions: vec![("t".to_owned(), 0)],
            },
            Command::ElectPreferredLeaders,
            alter_broker(None, &[("a", "b")], &["c"]),
            alter_broker(Some(1), &[], &["c"]),
            quotas(&[(
                user_and_client("u", Some("c")),
                &[("request_percentage", 12.5)],
                &["x"],
            )]),
        ],
    ) {
        let json = serde_json::to_string(&cmd).unwrap();
        let back: Command = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cmd);
    }
}

#[test]
fn the_cluster_id_is_set_once() {
    let set = |id: &str| Command::SetClusterId { id: id.to_owned() };
    let mut image = MetadataImage::default();
    assert_eq!(image.cluster_id(), None);
    assert!(matches!(
        image.apply(&set("")),
        Err(MetaError::InvalidRequest(_))
    ));
    image.apply(&set("P7WXyOzvQTSk_iFOJluJ0A")).unwrap();
    // The same id again: a second broker racing the first.
    image.apply(&set("P7WXyOzvQTSk_iFOJluJ0A")).unwrap();
    let before = image.clone();
    let error = image.apply(&set("another")).unwrap_err();
    assert_eq!(error.kafka_error_code(), 42);
    assert_eq!(image, before);
    assert_eq!(image.cluster_id(), Some("P7WXyOzvQTSk_iFOJluJ0A"));
}

fn user_and_client(user: &str, client_id: Option<&str>) -> QuotaEntity {
    QuotaEntity {
        user: Some(EntityName::Named(user.to_owned())),
        client_id: Some(EntityName::from_nullable(client_id)),
    }
}

/// An entity, the quotas set on it and the quotas removed.
type QuotaChange<'a> = (QuotaEntity, &'a [(&'a str, f64)], &'a [&'a str]);

fn quotas(changes: &[QuotaChange]) -> Command {
    Command::AlterClientQuotas {
        alterations: changes
            .iter()
            .map(|(entity, set, remove)| QuotaAlteration {
                entity: entity.clone(),
                set: set
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), QuotaValue(*v)))
                    .collect(),
                remove: remove.iter().map(|k| (*k).to_owned()).collect(),
            })
            .collect(),
    }
}

#[test]
fn client_quotas_are_set_replaced_and_removed() {
    let mut image = MetadataImage::default();
    let alice = user_and_client("alice", None);
    image
        .apply(&quotas(&[(
            alice.clone(),
            &[("producer_byte_rate", 1024.0), ("request_percentage", 50.0)],
            &[],
        )]))
        .unwrap();
    image
        .apply(&quotas(&[(
            alice.clone(),
            &[("producer_byte_rate", 2048.0)],
            &["request_percentage"],
        )]))
        .unwrap();
    let values = &image.client_quotas()[&alice];
    assert_eq!(values.len(), 1);
    assert_eq!(values["producer_byte_rate"], QuotaValue(2048.0));
    // Removing the last quota drops the entity.
    image
        .apply(&quotas(&[(alice, &[], &["producer_byte_rate"])]))
        .unwrap();
    assert!(image.client_quotas().is_empty());
}

#[test]
fn client_quota_changes_kafka_refuses() {
    let empty = QuotaEntity {
        user: None,
        client_id: None,
    };
    let unnamed = QuotaEntity {
        user: None,
        client_id: Some(EntityName::Named(String::new())),
    };
    let alice = user_and_client("alice", None);
    let cases: Vec<(Command, &str)> = vec![
        (
            quotas(&[(empty, &[("producer_byte_rate", 1.0)], &[])]),
            "Invalid empty client quota entity",
        ),
        (
            quotas(&[(unnamed, &[("producer_byte_rate", 1.0)], &[])]),
            "Empty client-id not supported",
        ),
        (
            quotas(&[(alice.clone(), &[("producer_byte_rate", 0.0)], &[])]),
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            quotas(&[(alice.clone(), &[("producer_byte_rate", f64::NAN)], &[])]),
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            quotas(&[
                (alice.clone(), &[("producer_byte_rate", 1.0)], &[]),
                (alice.clone(), &[("consumer_byte_rate", 1.0)], &[]),
            ]),
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice, client-id=null})",
        ),
        (
            quotas(&[(
                alice,
                &[("producer_byte_rate", 1.0)],
                &["producer_byte_rate"],
            )]),
            "Duplicate quota key producer_byte_rate not updating quota for this entity \
             ClientQuotaEntity(entries={user=alice, client-id=null})",
        ),
    ];
    for (cmd, message) in cases {
        let mut image = MetadataImage::default();
        let error = image.apply(&cmd).unwrap_err();
        assert_eq!(error.kafka_error_code(), 42, "{cmd:?}");
        assert_eq!(error.to_string(), message);
        assert_eq!(image, MetadataImage::default());
    }
}

fn creation(name: &str, id: u128, replicas: &[&[i32]]) -> TopicCreation {
    TopicCreation {
        name: name.to_owned(),
        id: Uuid::from_u128(id),
        replicas: replicas.iter().map(|r| r.to_vec()).collect(),
        configs: BTreeMap::new(),
        internal: false,
    }
}

/// As Kafka's controller does with one CreateTopics request: each topic is
/// checked against the image with the topics before it, a bad one is left
/// out with the error `CreateTopic` would have had, and the others are
/// created, in one applied index.
#[test]
fn create_topics_creates_each_good_topic_and_reports_each_bad_one() {
    let mut image = MetadataImage::default();
    for cmd in cluster() {
        image.apply(&cmd).unwrap();
    }
    let index = image.applied_index();
    let batch = Command::CreateTopics {
        topics: vec![
            creation("a", 101, &[&[1], &[2]]),
            creation("t", 102, &[&[1]]),
            creation("bad/name", 103, &[&[1]]),
            creation("b", 104, &[&[1, 9]]),
            creation("a", 105, &[&[1]]),
            creation("c.d", 106, &[&[3]]),
            creation("c_d", 107, &[&[3]]),
            creation("e", 101, &[&[1]]),
            creation("f", 108, &[&[2, 3]]),
        ],
    };
    let Applied::TopicsCreated(outcomes) = image.apply(&batch).unwrap() else {
        panic!("CreateTopics answers TopicsCreated");
    };
    let codes: Vec<i16> = outcomes
        .into_iter()
        .map(|o| o.map_or_else(|e| MetaError::from(e).kafka_error_code(), |()| 0))
        .collect();
    // t exists already; bad/name is invalid; broker 9 is unknown; a was
    // created earlier in the list; c_d collides with c.d; id 101 is a's.
    assert_eq!(codes, [0, 36, 17, 39, 36, 0, 17, 42, 0]);
    for name in ["a", "c.d", "f"] {
        assert!(image.topic(name).is_some(), "{name} created");
    }
    for name in ["bad/name", "b", "c_d", "e"] {
        assert!(image.topic(name).is_none(), "{name} left out");
    }
    assert_eq!(image.topic("a").unwrap().partitions.len(), 2);
    assert_eq!(image.applied_index(), index + 1);
    let json = serde_json::to_string(&batch).unwrap();
    assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), batch);
}

#[test]
fn a_topic_creation_weighs_its_topic_partition_and_config_records() {
    let mut topic = creation("w", 1, &[&[1], &[1], &[1]]);
    assert_eq!(topic.weight(), 4);
    topic.configs = configs(&[("retention.ms", "1"), ("cleanup.policy", "compact")]);
    assert_eq!(topic.weight(), 6);
}

/// Topics of 10 partitions weigh 11: 909 fit in one batch of 10 000. A
/// topic heavier than a batch goes alone, and every topic keeps its place.
#[test]
fn topic_creations_are_batched_in_order_within_kafkas_batch_limit() {
    let ten: Vec<&[i32]> = vec![&[1]; 10];
    let topics: Vec<TopicCreation> = (0..2000)
        .map(|i| creation(&format!("t{i}"), i + 1, &ten))
        .collect();
    let batches = TopicCreation::batches(topics);
    let sizes: Vec<usize> = batches
        .iter()
        .map(|b| match b {
            Command::CreateTopics { topics } => {
                assert!(topics.iter().map(TopicCreation::weight).sum::<usize>() <= 10_000);
                topics.len()
            }
            other => panic!("not a batch: {other:?}"),
        })
        .collect();
    assert_eq!(sizes, [909, 909, 182]);
    let names: Vec<String> = batches
        .into_iter()
        .flat_map(|b| match b {
            Command::CreateTopics { topics } => topics.into_iter().map(|t| t.name),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        names,
        (0..2000).map(|i| format!("t{i}")).collect::<Vec<_>>()
    );

    let wide: Vec<&[i32]> = vec![&[1]; 20_000];
    let batches = TopicCreation::batches(vec![
        creation("small", 1, &[&[1]]),
        creation("wide", 2, &wide),
        creation("after", 3, &[&[1]]),
    ]);
    let sizes: Vec<usize> = batches
        .iter()
        .map(|b| match b {
            Command::CreateTopics { topics } => topics.len(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(sizes, [1, 1, 1]);
}
