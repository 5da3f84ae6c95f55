//! ACLs on the admin and metadata APIs, against the real binary: with the
//! authorizer on, every API family is allowed where no ACL exists and
//! `allow.everyone.if.no.acl.found` is true, and for a super user; denied
//! otherwise, with Kafka's error code in the place Kafka puts it.
//!
//! A PLAINTEXT client is `User:ANONYMOUS`: one data directory is served
//! three times, allowing everyone, with ANONYMOUS a super user, and with
//! only `User:admin` one, so the same principal sees each case.

mod common;

use std::path::Path;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC_DENIED: i16 = 29;
const CLUSTER_DENIED: i16 = 31;
const TRANSACTIONAL_ID_DENIED: i16 = 53;

fn serve(dir: &Path, super_users: &str, allow_everyone: bool) -> Weir {
    Weir::start_in(
        dir,
        &[
            "--authorizer-class-name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "--super-users",
            super_users,
            "--allow-everyone-if-no-acl-found",
            if allow_everyone { "true" } else { "false" },
        ],
        None,
        &[],
    )
}

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

/// One request of each API, harmless when allowed (validate-only, or
/// asking for what is not there); each answer's code where Kafka puts an
/// authorization error, with the code Kafka answers a denial with.
fn matrix(raw: &mut Raw, t: &str) -> Vec<(&'static str, i16, i16)> {
    let mut codes = Vec::new();

    let r: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic("fresh"))
                .with_num_partitions(1)
                .with_replication_factor(1)])
            .with_timeout_ms(10_000)
            .with_validate_only(true),
    );
    codes.push(("CreateTopics", r.topics[0].error_code, TOPIC_DENIED));

    // A topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION to who may
    // describe it, TOPIC_AUTHORIZATION_FAILED to who may not.
    let r: DeleteTopicsResponse = raw.call(
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(topic("ghost")))
            ])
            .with_timeout_ms(10_000),
    );
    codes.push(("DeleteTopics", r.responses[0].error_code, TOPIC_DENIED));

    let r: CreatePartitionsResponse = raw.call(
        ApiKey::CreatePartitions,
        3,
        &CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic(t))
                .with_count(3)])
            .with_timeout_ms(10_000)
            .with_validate_only(true),
    );
    codes.push(("CreatePartitions", r.results[0].error_code, TOPIC_DENIED));

    let r: DeleteRecordsResponse = raw.call(
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default()
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(0)])])
            .with_timeout_ms(10_000),
    );
    codes.push((
        "DeleteRecords",
        r.topics[0].partitions[0].error_code,
        TOPIC_DENIED,
    ));

    let r: DescribeConfigsResponse = raw.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(t)),
            DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(s("")),
        ]),
    );
    codes.push((
        "DescribeConfigs topic",
        r.results[0].error_code,
        TOPIC_DENIED,
    ));
    codes.push((
        "DescribeConfigs broker",
        r.results[1].error_code,
        CLUSTER_DENIED,
    ));

    let r: AlterConfigsResponse = raw.call(
        ApiKey::AlterConfigs,
        2,
        &AlterConfigsRequest::default()
            .with_resources(vec![alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(t))
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("60000")))])])
            .with_validate_only(true),
    );
    codes.push((
        "AlterConfigs topic",
        r.responses[0].error_code,
        TOPIC_DENIED,
    ));

    let r: IncrementalAlterConfigsResponse = raw.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &IncrementalAlterConfigsRequest::default()
            .with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s(""))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s("log.retention.ms"))
                            .with_config_operation(0)
                            .with_value(Some(s("60000"))),
                    ]),
            ])
            .with_validate_only(true),
    );
    codes.push((
        "IncrementalAlterConfigs broker",
        r.responses[0].error_code,
        CLUSTER_DENIED,
    ));

    let r: ListConfigResourcesResponse = raw.call(
        ApiKey::ListConfigResources,
        1,
        &ListConfigResourcesRequest::default(),
    );
    codes.push(("ListConfigResources", r.error_code, CLUSTER_DENIED));

    let r: DescribeClientQuotasResponse = raw.call(
        ApiKey::DescribeClientQuotas,
        1,
        &DescribeClientQuotasRequest::default(),
    );
    codes.push(("DescribeClientQuotas", r.error_code, CLUSTER_DENIED));

    let r: AlterClientQuotasResponse = raw.call(
        ApiKey::AlterClientQuotas,
        1,
        &AlterClientQuotasRequest::default()
            .with_entries(vec![EntryData::default()
                .with_entity(vec![EntityData::default()
                    .with_entity_type(s("user"))
                    .with_entity_name(Some(s("bob")))])
                .with_ops(vec![OpData::default()
                    .with_key(s("producer_byte_rate"))
                    .with_value(1024.0)])])
            .with_validate_only(true),
    );
    codes.push(("AlterClientQuotas", r.entries[0].error_code, CLUSTER_DENIED));

    let r: DescribeUserScramCredentialsResponse = raw.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default()
            .with_users(Some(vec![UserName::default().with_name(s("bob"))])),
    );
    codes.push(("DescribeUserScramCredentials", r.error_code, CLUSTER_DENIED));

    let r: AlterUserScramCredentialsResponse = raw.call(
        ApiKey::AlterUserScramCredentials,
        0,
        &AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(s("bob"))
                .with_mechanism(1),
        ]),
    );
    codes.push((
        "AlterUserScramCredentials",
        r.results[0].error_code,
        CLUSTER_DENIED,
    ));

    let r: DescribeLogDirsResponse = raw.call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    );
    codes.push(("DescribeLogDirs", r.error_code, CLUSTER_DENIED));

    let r: AlterReplicaLogDirsResponse = raw.call(
        ApiKey::AlterReplicaLogDirs,
        2,
        &AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(s("/nowhere"))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![0])])]),
    );
    codes.push((
        "AlterReplicaLogDirs",
        r.results[0].partitions[0].error_code,
        CLUSTER_DENIED,
    ));

    let r: AlterPartitionReassignmentsResponse = raw.call(
        ApiKey::AlterPartitionReassignments,
        0,
        &AlterPartitionReassignmentsRequest::default()
            .with_topics(vec![ReassignableTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(0)
                    .with_replicas(None)])])
            .with_timeout_ms(10_000),
    );
    codes.push(("AlterPartitionReassignments", r.error_code, CLUSTER_DENIED));

    let r: ListPartitionReassignmentsResponse = raw.call(
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default()
            .with_topics(None)
            .with_timeout_ms(10_000),
    );
    codes.push(("ListPartitionReassignments", r.error_code, CLUSTER_DENIED));

    let r: ElectLeadersResponse = raw.call(
        ApiKey::ElectLeaders,
        2,
        &ElectLeadersRequest::default()
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic(topic(t))
                .with_partitions(vec![0])]))
            .with_timeout_ms(10_000),
    );
    codes.push(("ElectLeaders", r.error_code, CLUSTER_DENIED));

    let r: UpdateFeaturesResponse = raw.call(
        ApiKey::UpdateFeatures,
        1,
        &UpdateFeaturesRequest::default().with_timeout_ms(10_000),
    );
    codes.push(("UpdateFeatures", r.error_code, CLUSTER_DENIED));

    let r: DescribeQuorumResponse = raw.call(
        ApiKey::DescribeQuorum,
        1,
        &DescribeQuorumRequest::default().with_topics(vec![
            describe_quorum_request::TopicData::default()
                .with_topic_name(topic("__cluster_metadata"))
                .with_partitions(vec![describe_quorum_request::PartitionData::default()]),
        ]),
    );
    codes.push(("DescribeQuorum", r.error_code, CLUSTER_DENIED));

    let r: ListOffsetsResponse = raw.call(
        ApiKey::ListOffsets,
        7,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]),
    );
    codes.push((
        "ListOffsets",
        r.topics[0].partitions[0].error_code,
        TOPIC_DENIED,
    ));

    let r: OffsetForLeaderEpochResponse = raw.call(
        ApiKey::OffsetForLeaderEpoch,
        4,
        &OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(topic(t))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(0)])]),
    );
    codes.push((
        "OffsetForLeaderEpoch",
        r.topics[0].partitions[0].error_code,
        TOPIC_DENIED,
    ));

    let r: DescribeProducersResponse = raw.call(
        ApiKey::DescribeProducers,
        0,
        &DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
            .with_name(topic(t))
            .with_partition_indexes(vec![0])]),
    );
    codes.push((
        "DescribeProducers",
        r.topics[0].partitions[0].error_code,
        TOPIC_DENIED,
    ));

    let r: DescribeTransactionsResponse = raw.call(
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s("tx"))]),
    );
    codes.push((
        "DescribeTransactions",
        r.transaction_states[0].error_code,
        TRANSACTIONAL_ID_DENIED,
    ));

    codes
}

/// DescribeCluster's authorized operations (it answers anyone).
fn cluster_operations(raw: &mut Raw) -> i32 {
    let r: DescribeClusterResponse = raw.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default()
            .with_include_cluster_authorized_operations(true)
            .with_endpoint_type(1),
    );
    assert_eq!(r.error_code, 0);
    r.cluster_authorized_operations
}

fn assert_allowed(codes: &[(&str, i16, i16)]) {
    for (api, code, _) in codes {
        assert!(
            ![29, 30, 31, 53].contains(code),
            "{api}: authorization error {code} where it is allowed"
        );
    }
}

#[test]
fn every_admin_api_is_allowed_or_denied_as_kafka() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");

    // No ACL at all and allow.everyone.if.no.acl.found: all allowed.
    let mut weir = serve(&dir, "User:admin", true);
    let mut raw = Raw::connect(&weir.kafka);
    let created: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic("t"))
                .with_num_partitions(2)
                .with_replication_factor(1)])
            .with_timeout_ms(10_000),
    );
    let t = &created.topics[0];
    assert_eq!(t.error_code, 0, "{:?}", t.error_message);
    // Allowed to describe its configs, so told them.
    assert_eq!(t.topic_config_error_code, 0);
    assert_eq!(t.num_partitions, 2);
    assert!(!t.configs.as_ref().unwrap().is_empty());
    let topic_id = t.topic_id;
    assert_allowed(&matrix(&mut raw, "t"));
    assert_ne!(cluster_operations(&mut raw), 0);
    drop(raw);
    weir.stop();

    // ANONYMOUS a super user, no ACL allows anyone else: still all allowed.
    let mut weir = serve(&dir, "User:ANONYMOUS", false);
    let mut raw = Raw::connect(&weir.kafka);
    assert_allowed(&matrix(&mut raw, "t"));
    drop(raw);
    weir.stop();

    // Neither: each denied with Kafka's code, where Kafka puts it.
    let weir = serve(&dir, "User:admin", false);
    let mut raw = Raw::connect(&weir.kafka);
    for (api, code, denied) in matrix(&mut raw, "t") {
        assert_eq!(code, denied, "{api}");
    }
    // DescribeCluster answers, with no operation allowed.
    assert_eq!(cluster_operations(&mut raw), 0);

    // By id, a topic the principal may not describe keeps its name.
    let r: DeleteTopicsResponse = raw.call(
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_topics(vec![DeleteTopicState::default().with_topic_id(topic_id)])
            .with_timeout_ms(10_000),
    );
    assert_eq!(r.responses[0].error_code, TOPIC_DENIED);
    assert_eq!(r.responses[0].name, None);
    assert_eq!(r.responses[0].topic_id, topic_id);
}
