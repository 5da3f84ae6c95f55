//! Topic administration errors, as Kafka reports them.

mod common;

use common::cluster::Cluster;
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

fn create(raw: &mut Raw, topic: CreatableTopic, validate_only: bool) -> (i16, Option<String>) {
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_validate_only(validate_only),
    );
    let result = &response.topics[0];
    (
        result.error_code,
        result.error_message.as_ref().map(|m| m.to_string()),
    )
}

fn topic(name: &'static str, partitions: i32, replication: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
}

#[test]
fn create_topics_reports_each_problem() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let (code, message) = create(&mut raw, topic("replicated", 3, 3), false);
    assert_eq!(code, ResponseError::InvalidReplicationFactor.code());
    assert!(message
        .unwrap()
        .contains("larger than available brokers: 1"));
    let bad_config = topic("configured", 1, 1).with_configs(vec![CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("retention.ms"))
        .with_value(Some(StrBytes::from_static_str("soon")))]);
    let (code, message) = create(&mut raw, bad_config, false);
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(message.unwrap().contains("retention.ms"));
    let unknown_config =
        topic("configured", 1, 1).with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("no.such.config"))
            .with_value(Some(StrBytes::from_static_str("1")))]);
    assert_eq!(
        create(&mut raw, unknown_config, false).0,
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        create(&mut raw, topic("bad/name", 1, 1), false).0,
        ResponseError::InvalidTopicException.code()
    );
    assert_eq!(
        create(&mut raw, topic("none", 0, 1), false).0,
        ResponseError::InvalidPartitions.code()
    );
    // validate_only checks without creating.
    assert_eq!(create(&mut raw, topic("dry", 2, 1), true).0, 0);
    assert_eq!(create(&mut raw, topic("dry", 2, 1), false).0, 0);
    assert_eq!(
        create(&mut raw, topic("dry", 2, 1), false).0,
        ResponseError::TopicAlreadyExists.code()
    );
    // Partitions only grow.
    let response: CreatePartitionsResponse = raw.call(
        ApiKey::CreatePartitions,
        3,
        &CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("dry")))
                .with_count(1)]),
    );
    assert_eq!(
        response.results[0].error_code,
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(raw.topic_metadata("dry").topics[0].partitions.len(), 2);
}

/// A change whose `timeout_ms` is 0 or less is not made: Kafka's
/// controller puts the request's deadline at its arrival and times it out
/// before starting it, so every topic named, a bad one included, is
/// answered REQUEST_TIMED_OUT without a message, and nothing changes
/// (librdkafka hides this error from an application that asked not to
/// wait).
#[test]
fn a_topic_change_with_no_time_to_start_is_not_made() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let create = |raw: &mut Raw, topics: Vec<CreatableTopic>, timeout_ms: i32| {
        let response: CreateTopicsResponse = raw.call(
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms),
        );
        response
            .topics
            .iter()
            .map(|t| {
                (
                    t.error_code,
                    t.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect::<Vec<_>>()
    };
    let timed_out = || (ResponseError::RequestTimedOut.code(), None::<String>);
    assert_eq!(
        create(
            &mut raw,
            vec![topic("later", 3, 1), topic("bad/name", 1, 1)],
            0
        ),
        [timed_out(), timed_out()]
    );
    assert_eq!(
        create(&mut raw, vec![topic("later", 3, 1)], -1),
        [timed_out()]
    );
    // Never created: a request with time to wait creates it now.
    assert_eq!(
        create(&mut raw, vec![topic("later", 3, 1)], 5000),
        [(0, None)]
    );

    let grow = |raw: &mut Raw, timeout_ms: i32| {
        let response: CreatePartitionsResponse = raw.call(
            ApiKey::CreatePartitions,
            3,
            &CreatePartitionsRequest::default()
                .with_timeout_ms(timeout_ms)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("later")))
                    .with_count(5)
                    .with_assignments(None)]),
        );
        let result = &response.results[0];
        (
            result.error_code,
            result.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    assert_eq!(grow(&mut raw, 0), timed_out());
    let delete = |raw: &mut Raw, timeout_ms: i32| {
        let response: DeleteTopicsResponse = raw.call(
            ApiKey::DeleteTopics,
            6,
            &DeleteTopicsRequest::default()
                .with_timeout_ms(timeout_ms)
                .with_topics(vec![DeleteTopicState::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str("later"))))]),
        );
        let result = &response.responses[0];
        (
            result.error_code,
            result.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    assert_eq!(delete(&mut raw, 0), timed_out());
    assert_eq!(raw.topic_metadata("later").topics[0].partitions.len(), 3);
    assert_eq!(grow(&mut raw, 5000), (0, None));
    assert_eq!(delete(&mut raw, 5000), (0, None));
}

/// A CreateTopics naming many topics creates each good one and answers
/// each bad one with Kafka's error, and once it is answered every broker
/// knows the new topics: a broker that was behind the quorum (paused while
/// they were created) finds them at the next request that changes them,
/// as Kafka's brokers find them at the active controller.
#[test]
fn created_topics_are_known_to_the_next_request_on_every_broker() {
    let cluster = Cluster::start(&[]);
    let leader = cluster.controller(1) as i32;
    for round in 0..2 {
        // The creator is the active controller, then the other broker
        // that is not the one left behind.
        let behind = leader % 3 + 1;
        let creator = if round == 0 { leader } else { behind % 3 + 1 };
        let host = BrokerId(creator);
        let names: Vec<String> = (0..30).map(|i| format!("r{round}-t{i}")).collect();
        let mut topics: Vec<CreatableTopic> = names
            .iter()
            .map(|n| {
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(n.clone())))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_assignments(
                        (0..2)
                            .map(|p| {
                                CreatableReplicaAssignment::default()
                                    .with_partition_index(p)
                                    .with_broker_ids(vec![host])
                            })
                            .collect(),
                    )
            })
            .collect();
        topics.insert(10, topic("bad/name", 1, 1));
        topics.insert(20, topic("too-replicated", 1, 4));
        cluster.node(behind).pause();
        let created: CreateTopicsResponse = Raw::connect(&cluster.node(creator).kafka).call(
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(10_000),
        );
        cluster.node(behind).resume();
        let outcome = |name: &str| {
            let result = created
                .topics
                .iter()
                .find(|t| t.name.0.as_str() == name)
                .unwrap_or_else(|| panic!("no result for {name}"));
            (result.error_code, result.num_partitions)
        };
        for name in &names {
            assert_eq!(outcome(name), (0, 2), "{name}");
        }
        assert_eq!(
            outcome("bad/name").0,
            ResponseError::InvalidTopicException.code()
        );
        assert_eq!(
            outcome("too-replicated").0,
            ResponseError::InvalidReplicationFactor.code()
        );
        // At once, the broker left behind grows them all.
        let grown: CreatePartitionsResponse = Raw::connect(&cluster.node(behind).kafka).call(
            ApiKey::CreatePartitions,
            3,
            &CreatePartitionsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(
                    names
                        .iter()
                        .map(|n| {
                            CreatePartitionsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(n.clone())))
                                .with_count(3)
                                .with_assignments(None)
                        })
                        .collect(),
                ),
        );
        assert_eq!(grown.results.len(), names.len());
        for result in &grown.results {
            assert_eq!(
                (result.error_code, &result.error_message),
                (0, &None),
                "round {round}: CreatePartitions of {} on node {behind}",
                result.name.0.as_str()
            );
        }
    }
}

/// A request that succeeds is answered with the error message Kafka sends:
/// null where Kafka's handlers set none (CreateTopics, DeleteTopics,
/// CreatePartitions, the config changes, the partition reassignments), and
/// where Kafka leaves the generated default in place, that default: ""
/// for DescribeConfigs, "NONE" (`Errors.NONE.message()`) for
/// FindCoordinator v1–v3.
#[test]
fn successful_admin_responses_carry_kafkas_error_message() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::*;
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let name = |n: &'static str| TopicName(StrBytes::from_static_str(n));
    let text = |s: &'static str| StrBytes::from_static_str(s);

    let created: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![topic("quiet", 1, 1), topic("doomed", 1, 1)]),
    );
    for result in &created.topics {
        assert_eq!(
            (result.error_code, &result.error_message),
            (0, &None),
            "CreateTopics {:?}",
            result.name
        );
    }
    raw.topic_metadata("quiet");

    let grown: CreatePartitionsResponse = raw.call(
        ApiKey::CreatePartitions,
        3,
        &CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name("quiet"))
                .with_count(2)
                .with_assignments(None)]),
    );
    assert_eq!(
        (grown.results[0].error_code, &grown.results[0].error_message),
        (0, &None),
        "CreatePartitions"
    );

    let altered: AlterConfigsResponse = raw.call(
        ApiKey::AlterConfigs,
        2,
        &AlterConfigsRequest::default().with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(text("quiet"))
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name(text("retention.ms"))
                    .with_value(Some(text("100000")))]),
        ]),
    );
    let result = &altered.responses[0];
    assert_eq!(
        (result.error_code, &result.error_message),
        (0, &None),
        "AlterConfigs"
    );
    let altered: IncrementalAlterConfigsResponse = raw.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(text("quiet"))
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(text("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(text("200000"))),
                ]),
        ]),
    );
    let result = &altered.responses[0];
    assert_eq!(
        (result.error_code, &result.error_message),
        (0, &None),
        "IncrementalAlterConfigs"
    );

    let described: DescribeConfigsResponse = raw.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("quiet"))
            .with_configuration_keys(None)]),
    );
    let result = &described.results[0];
    assert_eq!(
        (result.error_code, result.error_message.as_deref()),
        (0, Some("")),
        "DescribeConfigs leaves Kafka's generated default"
    );

    let moved: AlterPartitionReassignmentsResponse = raw.call(
        ApiKey::AlterPartitionReassignments,
        0,
        &AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![ReassignableTopic::default()
                .with_name(name("quiet"))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(0)
                    .with_replicas(Some(vec![BrokerId(1)]))])]),
    );
    assert_eq!(
        (moved.error_code, &moved.error_message),
        (0, &None),
        "AlterPartitionReassignments"
    );
    let partition = &moved.responses[0].partitions[0];
    assert_eq!(
        (partition.error_code, &partition.error_message),
        (0, &None),
        "AlterPartitionReassignments partition"
    );
    let listed: ListPartitionReassignmentsResponse = raw.call(
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(None),
    );
    assert_eq!(
        (listed.error_code, &listed.error_message),
        (0, &None),
        "ListPartitionReassignments"
    );

    let deleted: DeleteTopicsResponse = raw.call(
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(name("doomed")))
            ]),
    );
    let result = &deleted.responses[0];
    assert_eq!(
        (result.error_code, &result.error_message),
        (0, &None),
        "DeleteTopics"
    );

    let found = raw.find_coordinator(0, "a-group");
    assert_eq!(
        (found.error_code, found.error_message.as_deref()),
        (0, Some("NONE")),
        "FindCoordinator v3"
    );
}

/// CreateTopics v4+ may leave the partition count and the replication
/// factor to the broker (-1): `num.partitions` and
/// `default.replication.factor` fill them, and the answer (v5+) carries the
/// values used, as Kafka's. librdkafka's test tools create topics this way.
#[test]
fn create_topics_with_minus_one_takes_the_broker_defaults() {
    let weir = Weir::start(&["--num-partitions", "3", "--default-replication-factor", "1"]);
    let mut raw = Raw::connect(&weir.kafka);
    for (version, name) in [(4, "defaults-v4"), (5, "defaults-v5"), (7, "defaults-v7")] {
        let response: CreateTopicsResponse = raw.call(
            ApiKey::CreateTopics,
            version,
            &CreateTopicsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str(name)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)]),
        );
        let result = &response.topics[0];
        assert_eq!(
            (result.error_code, &result.error_message),
            (0, &None),
            "v{version}"
        );
        if version >= 5 {
            assert_eq!(
                (result.num_partitions, result.replication_factor),
                (3, 1),
                "v{version}"
            );
            let configs = result.configs.as_ref().expect("configs");
            let retention = configs
                .iter()
                .find(|c| c.name.as_str() == "retention.ms")
                .expect("retention.ms");
            assert_eq!(retention.value.as_deref(), Some("604800000"));
        }
        assert_eq!(raw.topic_metadata(name).topics[0].partitions.len(), 3);
    }
    // Each on its own: a count with the default factor, and the other way.
    let (code, _) = create(&mut raw, topic("counted", 2, -1), false);
    assert_eq!(code, 0);
    assert_eq!(raw.topic_metadata("counted").topics[0].partitions.len(), 2);
    let (code, _) = create(&mut raw, topic("replicated-once", -1, 1), false);
    assert_eq!(code, 0);
    assert_eq!(
        raw.topic_metadata("replicated-once").topics[0]
            .partitions
            .len(),
        3
    );

    // As librdkafka's test tools ask for it.
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .create()
        .expect("admin client");
    let results = common::cli::block_on(admin.create_topics(
        &[NewTopic::new(
            "from-librdkafka",
            -1,
            TopicReplication::Fixed(-1),
        )],
        &AdminOptions::new().operation_timeout(Some(std::time::Duration::from_secs(20))),
    ))
    .expect("create topics");
    for result in results {
        result.expect("topic created");
    }
    assert_eq!(
        raw.topic_metadata("from-librdkafka").topics[0]
            .partitions
            .len(),
        3
    );
}

/// A manual replica assignment is checked as Kafka's controller checks it,
/// with its error codes and messages: INVALID_REQUEST for counts given
/// with it, INVALID_REPLICA_ASSIGNMENT for the lists themselves.
#[test]
fn manual_replica_assignments_are_checked_as_kafka_checks_them() {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::messages::BrokerId;
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let assigned = |assignments: &[(i32, &[i32])], partitions: i32, replication: i16| {
        topic("manual", partitions, replication).with_assignments(
            assignments
                .iter()
                .map(|(index, brokers)| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(*index)
                        .with_broker_ids(brokers.iter().copied().map(BrokerId).collect())
                })
                .collect(),
        )
    };
    let invalid_assignment = ResponseError::InvalidReplicaAssignment.code();
    let cases: &[(&str, CreatableTopic, i16, &str)] = &[
        (
            "an unregistered broker",
            assigned(&[(0, &[1]), (1, &[2])], -1, -1),
            invalid_assignment,
            "The manual partition assignment includes broker 2, but no such broker is registered.",
        ),
        (
            "a broker twice",
            assigned(&[(0, &[1, 1])], -1, -1),
            invalid_assignment,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            "brokers are checked in id order",
            assigned(&[(0, &[3, 1, 1])], -1, -1),
            invalid_assignment,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            "an empty list",
            assigned(&[(0, &[1]), (1, &[])], -1, -1),
            invalid_assignment,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            "a partition twice",
            assigned(&[(0, &[1]), (0, &[1])], -1, -1),
            invalid_assignment,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            "a gap",
            assigned(&[(0, &[1]), (2, &[1])], -1, -1),
            invalid_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            "a replication factor with it",
            assigned(&[(0, &[1])], -1, 1),
            ResponseError::InvalidRequest.code(),
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        (
            "a partition count with it",
            assigned(&[(0, &[1])], 1, -1),
            ResponseError::InvalidRequest.code(),
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            "no partitions",
            topic("manual", 0, 1),
            ResponseError::InvalidPartitions.code(),
            "Number of partitions was set to an invalid non-positive value.",
        ),
    ];
    for (what, request, code, message) in cases {
        assert_eq!(
            create(&mut raw, request.clone(), false),
            (*code, Some(message.to_string())),
            "{what}"
        );
    }
    // In any order, numbered from 0.
    assert_eq!(
        create(&mut raw, assigned(&[(1, &[1]), (0, &[1])], -1, -1), false),
        (0, None)
    );
    assert_eq!(raw.topic_metadata("manual").topics[0].partitions.len(), 2);

    let grow = |raw: &mut Raw, count: i32, assignments: Option<&[&[i32]]>| {
        let response: CreatePartitionsResponse = raw.call(
            ApiKey::CreatePartitions,
            3,
            &CreatePartitionsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("manual")))
                    .with_count(count)
                    .with_assignments(assignments.map(|lists| {
                        lists
                            .iter()
                            .map(|brokers| {
                                CreatePartitionsAssignment::default().with_broker_ids(
                                    brokers.iter().copied().map(BrokerId).collect(),
                                )
                            })
                            .collect()
                    }))]),
        );
        let result = &response.results[0];
        (
            result.error_code,
            result.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    let message = |text: &str| Some(text.to_owned());
    assert_eq!(
        grow(&mut raw, 4, Some(&[&[1]])),
        (
            invalid_assignment,
            message("Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
        )
    );
    assert_eq!(
        grow(&mut raw, 4, Some(&[])),
        (
            invalid_assignment,
            message("Attempted to add 2 additional partition(s), but only 0 assignment(s) were specified.")
        )
    );
    assert_eq!(
        grow(&mut raw, 3, Some(&[&[2]])),
        (
            invalid_assignment,
            message("The manual partition assignment includes broker 2, but no such broker is registered.")
        )
    );
    assert_eq!(
        grow(&mut raw, 3, Some(&[&[1, 1]])),
        (
            invalid_assignment,
            message("The manual partition assignment includes the broker 1 more than once.")
        )
    );
    assert_eq!(grow(&mut raw, 4, Some(&[&[1], &[1]])), (0, None));
    assert_eq!(raw.topic_metadata("manual").topics[0].partitions.len(), 4);
    assert_eq!(
        grow(&mut raw, 4, None),
        (
            ResponseError::InvalidPartitions.code(),
            message("Topic already has 4 partition(s).")
        )
    );
    assert_eq!(
        grow(&mut raw, 3, Some(&[&[1]])),
        (
            ResponseError::InvalidPartitions.code(),
            message("The topic manual currently has 4 partition(s); 3 would not be an increase.")
        )
    );
}

/// CreateTopics checks the name, whether it is taken and the configs before
/// the partition count, replication factor and assignment, as Kafka's
/// controller does: "create unless it exists" with a replication factor the
/// cluster cannot hold hears TOPIC_ALREADY_EXISTS, which clients ignore.
#[test]
fn create_topics_checks_the_name_and_configs_before_the_counts() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(create(&mut raw, topic("taken", 1, 1), false).0, 0);
    let exists = ResponseError::TopicAlreadyExists.code();
    assert_eq!(
        create(&mut raw, topic("taken", 1, 3), false),
        (exists, Some("Topic 'taken' already exists.".to_owned()))
    );
    assert_eq!(create(&mut raw, topic("taken", 0, 1), false).0, exists);
    assert_eq!(create(&mut raw, topic("taken", 1, 0), false).0, exists);
    assert_eq!(
        create(&mut raw, topic("bad/name", 1, 3), false).0,
        ResponseError::InvalidTopicException.code()
    );
    let bad_config = topic("configured", 1, 3).with_configs(vec![CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("retention.ms"))
        .with_value(Some(StrBytes::from_static_str("soon")))]);
    assert_eq!(
        create(&mut raw, bad_config, false).0,
        ResponseError::InvalidConfig.code()
    );
    // A name given twice in one request: both refused.
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![topic("twice", 1, 1), topic("twice", 1, 1)]),
    );
    for result in &response.topics {
        assert_eq!(
            (result.error_code, result.error_message.as_deref()),
            (
                ResponseError::InvalidRequest.code(),
                Some("Duplicate topic name.")
            )
        );
    }
}

/// Metadata v12 asked by topic id, as the Java admin client's describeTopics
/// of ids asks it (the name left empty): the topic by its id, and
/// UNKNOWN_TOPIC_ID with the id and a null name for an unknown one, as
/// Kafka answers. Names are not looked at then, nor anything auto-created.
#[test]
fn metadata_by_topic_id() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let (code, _) = create(&mut raw, topic("by-id", 2, 1), false);
    assert_eq!(code, 0);
    raw.topic_metadata("by-id");
    let by_name: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("by-id"))))])),
    );
    let id = by_name.topics[0].topic_id;
    assert!(!id.is_nil(), "v12 answers the topic id");

    let unknown = uuid::Uuid::from_u128(0x1234);
    let by_id: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_allow_auto_topic_creation(true)
            .with_topics(Some(vec![
                // As the Java client sends them: the name empty, not null.
                MetadataRequestTopic::default().with_topic_id(id),
                MetadataRequestTopic::default().with_topic_id(unknown),
                MetadataRequestTopic::default().with_topic_id(id),
            ])),
    );
    let got: Vec<_> = by_id
        .topics
        .iter()
        .map(|t| {
            (
                t.error_code,
                t.name.as_ref().map(|n| n.0.to_string()),
                t.topic_id,
                t.partitions.len(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, Some("by-id".to_owned()), id, 2),
            (ResponseError::UnknownTopicId.code(), None, unknown, 0),
        ]
    );
    // The empty names were not taken for a topic to create.
    let all: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    let names: Vec<_> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(names, vec!["by-id".to_owned()]);
}

/// ElectLeaders on one broker: every partition already has its preferred
/// leader. v0 (no type) is a preferred election; an unknown type is
/// INVALID_REQUEST on top and on every partition, as Kafka's controller
/// answers; asked for every partition, topics are named with no partition.
#[test]
fn elect_leaders_types_and_versions() {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(create(&mut raw, topic("elect", 2, 1), false).0, 0);
    let asked = Some(vec![TopicPartitions::default()
        .with_topic(TopicName(StrBytes::from_static_str("elect")))
        .with_partitions(vec![1, 0])]);
    let request = |election_type: i8, asked: Option<Vec<TopicPartitions>>| {
        ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_topic_partitions(asked)
            .with_timeout_ms(10_000)
    };
    let results = common::raw::elections;
    let not_needed = Some("Leader election not needed for topic partition.".to_owned());
    let both_not_needed = vec![(
        "elect".to_owned(),
        vec![(1, 84, not_needed.clone()), (0, 84, not_needed)],
    )];
    for version in 0..=2 {
        let r: ElectLeadersResponse =
            raw.call(ApiKey::ElectLeaders, version, &request(0, asked.clone()));
        assert_eq!(r.error_code, 0, "v{version}");
        assert_eq!(results(&r), both_not_needed, "v{version}");
    }
    let r: ElectLeadersResponse = raw.call(ApiKey::ElectLeaders, 1, &request(1, asked.clone()));
    assert_eq!(
        results(&r),
        both_not_needed,
        "unclean: the partitions have leaders"
    );

    let r: ElectLeadersResponse = raw.call(ApiKey::ElectLeaders, 2, &request(2, asked.clone()));
    let invalid = Some("Unknown election type 2".to_owned());
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    assert_eq!(
        results(&r),
        vec![(
            "elect".to_owned(),
            vec![(1, 42, invalid.clone()), (0, 42, invalid)]
        )]
    );

    let r: ElectLeadersResponse = raw.call(ApiKey::ElectLeaders, 2, &request(0, None));
    assert_eq!(r.error_code, 0);
    let all = results(&r);
    assert!(all.contains(&("elect".to_owned(), Vec::new())), "{all:?}");
    assert!(all.iter().all(|(_, p)| p.is_empty()), "{all:?}");
}
