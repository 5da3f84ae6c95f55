//! Every API version ApiVersions advertises answers a valid request with a
//! response that decodes at that version.

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use weir_log::testing::BatchBuilder;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// The versions the broker advertises for `key`.
fn advertised(raw: &mut Raw, key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let versions: ApiVersionsResponse =
        raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let entry = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == key as i16)
        .unwrap_or_else(|| panic!("{key:?} not advertised"));
    entry.min_version..=entry.max_version
}

/// Readies the transactional producer `id` (FindCoordinator, then
/// InitProducerId, retried while the coordinator takes up its partition);
/// returns its producer id and epoch.
fn init_transactional(raw: &mut Raw, id: &str) -> (i64, i16) {
    let found = raw.find_coordinator(1, id);
    assert_eq!(
        found.error_code, 0,
        "FindCoordinator for transactional id {id}"
    );
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.to_owned()))))
        .with_transaction_timeout_ms(60_000);
    for _ in 0..100 {
        let r: InitProducerIdResponse = raw.call(ApiKey::InitProducerId, 3, &request);
        if r.error_code == 0 {
            return (r.producer_id.0, r.producer_epoch);
        }
        // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
        // NOT_COORDINATOR, CONCURRENT_TRANSACTIONS: retried, as clients do.
        assert!(
            [14, 15, 16, 51].contains(&r.error_code),
            "InitProducerId for {id}: error {}",
            r.error_code
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the coordinator of transactional id {id} never answered")
}

/// Joins `group` as its only member with JoinGroup `version` (asking again
/// with the member id handed back, from v4 on); returns the member id and
/// generation.
fn join(raw: &mut Raw, group: &str, version: i16) -> (StrBytes, i32) {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    let request = |member_id: StrBytes| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(member_id)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default().with_name(StrBytes::from_static_str("range"))
            ])
    };
    // The coordinator may still be taking up a __consumer_offsets partition
    // created a moment ago: clients retry, and so does this.
    let mut r: JoinGroupResponse =
        raw.call(ApiKey::JoinGroup, version, &request(StrBytes::default()));
    for _ in 0..50 {
        let retriable = [
            kafka_protocol::ResponseError::CoordinatorLoadInProgress.code(),
            kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
        ];
        if !retriable.contains(&r.error_code) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        r = raw.call(ApiKey::JoinGroup, version, &request(StrBytes::default()));
    }
    if version >= 4 {
        assert_eq!(r.error_code, 79, "JoinGroup v{version}: MEMBER_ID_REQUIRED");
        r = raw.call(ApiKey::JoinGroup, version, &request(r.member_id));
    }
    assert_eq!(r.error_code, 0, "JoinGroup v{version}");
    assert_eq!(r.leader, r.member_id, "JoinGroup v{version}");
    (r.member_id, r.generation_id)
}

/// Calls `call` again while the answer says a coordinator is loading or
/// not there yet (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
/// NOT_COORDINATOR: its internal topic is being created), for up to 10 s.
fn until_loaded<R>(mut call: impl FnMut() -> R, code: impl Fn(&R) -> i16) -> R {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = call();
        if !matches!(code(&r), 14..=16) || std::time::Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn every_advertised_version_answers() {
    let weir = Weir::start(&["--group-initial-rebalance-delay-ms", "0"]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("sweep");
    assert_eq!(raw.produce("sweep", 0, BatchBuilder::new(2).build()).0, 0);
    let sweep_id = {
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("sweep"))),
        ]));
        let r: MetadataResponse = raw.call(ApiKey::Metadata, 12, &request);
        r.topics[0].topic_id
    };

    let versions: ApiVersionsResponse =
        raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let keys: Vec<i16> = versions.api_keys.iter().map(|k| k.api_key).collect();
    let mut checked = 0;
    for key in keys {
        let key = ApiKey::try_from(key).unwrap();
        for version in advertised(&mut raw, key) {
            let label = format!("{key:?} v{version}");
            match key {
                ApiKey::ApiVersions => {
                    let r: ApiVersionsResponse =
                        raw.call(key, version, &ApiVersionsRequest::default());
                    assert_eq!(r.error_code, 0, "{label}");
                }
                ApiKey::Metadata => {
                    let request = MetadataRequest::default().with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(name("sweep"))),
                    ]));
                    let r: MetadataResponse = raw.call(key, version, &request);
                    assert_eq!(r.topics[0].error_code, 0, "{label}");
                    assert_eq!(r.topics[0].partitions.len(), 1, "{label}");
                }
                ApiKey::Produce => {
                    let request = ProduceRequest::default()
                        .with_acks(1)
                        .with_timeout_ms(5000)
                        // v13 names the topic by id, the others by name.
                        .with_topic_data(vec![TopicProduceData::default()
                            .with_name(name("sweep"))
                            .with_topic_id(sweep_id)
                            .with_partition_data(vec![PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(BatchBuilder::new(1).build().into()))])]);
                    let r: ProduceResponse = raw.call(key, version, &request);
                    assert_eq!(
                        r.responses[0].partition_responses[0].error_code, 0,
                        "{label}"
                    );
                }
                ApiKey::Fetch => {
                    let request = FetchRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_max_wait_ms(0)
                        .with_min_bytes(1)
                        .with_max_bytes(1 << 20)
                        .with_session_epoch(-1)
                        .with_topics(vec![FetchTopic::default()
                            .with_topic(name("sweep"))
                            .with_topic_id(sweep_id)
                            .with_partitions(vec![FetchPartition::default()
                                .with_partition(0)
                                .with_fetch_offset(0)
                                .with_partition_max_bytes(1 << 20)])]);
                    let r: FetchResponse = raw.call(key, version, &request);
                    if version >= 13 {
                        assert_eq!(r.responses[0].topic_id, sweep_id, "{label}");
                    } else {
                        assert_eq!(r.responses[0].topic.as_str(), "sweep", "{label}");
                    }
                    let data = &r.responses[0].partitions[0];
                    assert_eq!(data.error_code, 0, "{label}");
                    assert!(!data.records.as_ref().unwrap().is_empty(), "{label}");
                }
                ApiKey::ListOffsets => {
                    let request = ListOffsetsRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![ListOffsetsTopic::default()
                            .with_name(name("sweep"))
                            .with_partitions(vec![ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(-1)])]);
                    let r: ListOffsetsResponse = raw.call(key, version, &request);
                    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{label}");
                    assert!(r.topics[0].partitions[0].offset > 0, "{label}");
                }
                ApiKey::WriteTxnMarkers => {
                    use kafka_protocol::messages::write_txn_markers_request::{
                        WritableTxnMarker, WritableTxnMarkerTopic,
                    };
                    // A marker for a producer with no open transaction is
                    // written all the same.
                    let request = WriteTxnMarkersRequest::default().with_markers(vec![
                        WritableTxnMarker::default()
                            .with_producer_id(ProducerId(1_000_000 + i64::from(version)))
                            .with_producer_epoch(0)
                            .with_transaction_result(false)
                            .with_coordinator_epoch(0)
                            .with_topics(vec![WritableTxnMarkerTopic::default()
                                .with_name(name("sweep"))
                                .with_partition_indexes(vec![0])]),
                    ]);
                    let r: WriteTxnMarkersResponse = raw.call(key, version, &request);
                    let result = &r.markers[0].topics[0].partitions[0];
                    assert_eq!(result.error_code, 0, "{label}");
                }
                ApiKey::AlterPartitionReassignments => {
                    use kafka_protocol::messages::alter_partition_reassignments_request::{
                        ReassignablePartition, ReassignableTopic,
                    };
                    // To the replicas it has: completes at once.
                    let request = AlterPartitionReassignmentsRequest::default()
                        .with_timeout_ms(5000)
                        .with_topics(vec![ReassignableTopic::default()
                            .with_name(name("sweep"))
                            .with_partitions(vec![ReassignablePartition::default()
                                .with_partition_index(0)
                                .with_replicas(Some(vec![BrokerId(1)]))])]);
                    let r: AlterPartitionReassignmentsResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::ElectLeaders => {
                    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
                    // One broker: its only replica leads already.
                    let request = ElectLeadersRequest::default()
                        .with_timeout_ms(5000)
                        .with_topic_partitions(Some(vec![TopicPartitions::default()
                            .with_topic(name("sweep"))
                            .with_partitions(vec![0])]));
                    let r: ElectLeadersResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    let result = &r.replica_election_results[0].partition_result[0];
                    assert_eq!(result.error_code, 84, "{label}");
                }
                ApiKey::ListPartitionReassignments => {
                    let request = ListPartitionReassignmentsRequest::default()
                        .with_timeout_ms(5000)
                        .with_topics(None);
                    let r: ListPartitionReassignmentsResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(r.topics.is_empty(), "{label}");
                }
                ApiKey::OffsetForLeaderEpoch => {
                    use kafka_protocol::messages::offset_for_leader_epoch_request::{
                        OffsetForLeaderPartition, OffsetForLeaderTopic,
                    };
                    let request = OffsetForLeaderEpochRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![OffsetForLeaderTopic::default()
                            .with_topic(name("sweep"))
                            .with_partitions(vec![OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_current_leader_epoch(-1)
                                .with_leader_epoch(0)])]);
                    let r: OffsetForLeaderEpochResponse = raw.call(key, version, &request);
                    let answer = &r.topics[0].partitions[0];
                    assert_eq!(answer.error_code, 0, "{label}");
                    assert_eq!(answer.leader_epoch, 0, "{label}");
                    assert!(answer.end_offset > 0, "{label}");
                }
                ApiKey::CreateTopics => {
                    let topic = format!("created-v{version}");
                    let request =
                        CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                            .with_name(name(&topic))
                            .with_num_partitions(1)
                            .with_replication_factor(1)]);
                    let r: CreateTopicsResponse = raw.call(key, version, &request);
                    assert_eq!(r.topics[0].error_code, 0, "{label}");
                }
                ApiKey::CreatePartitions => {
                    let topic = format!("grown-v{version}");
                    raw.topic_metadata(&topic);
                    let request = CreatePartitionsRequest::default()
                        .with_timeout_ms(5000)
                        .with_topics(vec![CreatePartitionsTopic::default()
                            .with_name(name(&topic))
                            .with_count(2)
                            .with_assignments(None)]);
                    let r: CreatePartitionsResponse = raw.call(key, version, &request);
                    assert_eq!(r.results[0].error_code, 0, "{label}");
                }
                ApiKey::DeleteTopics => {
                    let topic = format!("doomed-v{version}");
                    raw.topic_metadata(&topic);
                    let request = if version >= 6 {
                        DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default(
                        )
                        .with_name(Some(name(&topic)))])
                    } else {
                        DeleteTopicsRequest::default().with_topic_names(vec![name(&topic)])
                    };
                    let r: DeleteTopicsResponse =
                        raw.call(key, version, &request.with_timeout_ms(5000));
                    assert_eq!(r.responses[0].error_code, 0, "{label}");
                }
                ApiKey::InitProducerId => {
                    let request = InitProducerIdRequest::default()
                        .with_transactional_id(None)
                        .with_transaction_timeout_ms(60_000);
                    let r: InitProducerIdResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(r.producer_id.0 >= 0, "{label}");
                }
                ApiKey::DescribeConfigs => {
                    let request = DescribeConfigsRequest::default().with_resources(vec![
                        DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("sweep"))
                            .with_configuration_keys(None),
                    ]);
                    let r: DescribeConfigsResponse = raw.call(key, version, &request);
                    assert_eq!(r.results[0].error_code, 0, "{label}");
                    assert!(
                        r.results[0]
                            .configs
                            .iter()
                            .any(|c| c.name.as_str() == "retention.ms"),
                        "{label}"
                    );
                }
                ApiKey::DescribeCluster => {
                    let r: DescribeClusterResponse =
                        raw.call(key, version, &DescribeClusterRequest::default());
                    assert_eq!(r.error_code, 0, "{label}");
                    assert_eq!(r.brokers.len(), 1, "{label}");
                }
                ApiKey::DescribeQuorum => {
                    use kafka_protocol::messages::describe_quorum_request::{
                        PartitionData, TopicData,
                    };
                    let request =
                        DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
                            .with_topic_name(name("__cluster_metadata"))
                            .with_partitions(vec![PartitionData::default()])]);
                    let r: DescribeQuorumResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    let quorum = &r.topics[0].partitions[0];
                    assert_eq!(quorum.leader_id.0, 1, "{label}");
                    assert!(quorum.leader_epoch >= 1, "{label}");
                    assert!(quorum.high_watermark >= 1, "{label}");
                    assert_eq!(quorum.current_voters.len(), 1, "{label}");
                    // The leader's own fetch and caught-up times (v1+) are
                    // the time of the answer, as in Kafka.
                    let now_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis() as i64;
                    let leader = &quorum.current_voters[0];
                    let times = [
                        ("last fetch", leader.last_fetch_timestamp),
                        ("last caught up", leader.last_caught_up_timestamp),
                    ];
                    for (what, ms) in times.into_iter().filter(|_| version >= 1) {
                        assert!(
                            (now_ms - 60_000..=now_ms).contains(&ms),
                            "{label}: the leader's {what} timestamp {ms}, now {now_ms}"
                        );
                    }
                }
                ApiKey::FindCoordinator => {
                    let request = if version >= 4 {
                        FindCoordinatorRequest::default()
                            .with_coordinator_keys(vec![StrBytes::from_static_str("sweep-group")])
                    } else {
                        FindCoordinatorRequest::default()
                            .with_key(StrBytes::from_static_str("sweep-group"))
                    };
                    // The first asks create __consumer_offsets and are
                    // answered COORDINATOR_NOT_AVAILABLE meanwhile.
                    let mut tries = 0;
                    let (error, node) = loop {
                        let r: FindCoordinatorResponse = raw.call(key, version, &request);
                        let found = if version >= 4 {
                            (r.coordinators[0].error_code, r.coordinators[0].node_id.0)
                        } else {
                            (r.error_code, r.node_id.0)
                        };
                        tries += 1;
                        if ![14, 15].contains(&found.0) || tries == 300 {
                            break found;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    };
                    assert_eq!((error, node), (0, 1), "{label}");
                }
                ApiKey::OffsetCommit => {
                    use kafka_protocol::messages::offset_commit_request::{
                        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
                    };
                    let request = OffsetCommitRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("sweep-group")))
                        .with_generation_id_or_member_epoch(-1)
                        .with_topics(vec![OffsetCommitRequestTopic::default()
                            .with_name(name("sweep"))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(i64::from(version))])]);
                    // Clients find the coordinator first (which creates
                    // __consumer_offsets), then commit, asking again while
                    // it loads the group's partition
                    // (COORDINATOR_LOAD_IN_PROGRESS).
                    let find = FindCoordinatorRequest::default()
                        .with_key(StrBytes::from_static_str("sweep-group"));
                    for _ in 0..300 {
                        let r: FindCoordinatorResponse =
                            raw.call(ApiKey::FindCoordinator, 3, &find);
                        if r.error_code == 0 {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    let mut tries = 0;
                    let code = loop {
                        let r: OffsetCommitResponse = raw.call(key, version, &request);
                        let code = r.topics[0].partitions[0].error_code;
                        tries += 1;
                        if code != 14 || tries == 300 {
                            break code;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    };
                    assert_eq!(code, 0, "{label}");
                }
                ApiKey::OffsetFetch => {
                    use kafka_protocol::messages::offset_fetch_request::{
                        OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
                    };
                    let group = GroupId(StrBytes::from_static_str("sweep-group"));
                    let committed = if version >= 8 {
                        let request = OffsetFetchRequest::default().with_groups(vec![
                            OffsetFetchRequestGroup::default()
                                .with_group_id(group)
                                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                                    .with_name(name("sweep"))
                                    .with_partition_indexes(vec![0])])),
                        ]);
                        let r: OffsetFetchResponse = raw.call(key, version, &request);
                        r.groups[0].topics[0].partitions[0].committed_offset
                    } else {
                        let request = OffsetFetchRequest::default()
                            .with_group_id(group)
                            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                                .with_name(name("sweep"))
                                .with_partition_indexes(vec![0])]));
                        let r: OffsetFetchResponse = raw.call(key, version, &request);
                        r.topics[0].partitions[0].committed_offset
                    };
                    // The last OffsetCommit version swept committed its own number.
                    assert_eq!(committed, 9, "{label}");
                }
                ApiKey::ListGroups => {
                    let r: ListGroupsResponse =
                        raw.call(key, version, &ListGroupsRequest::default());
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(
                        r.groups
                            .iter()
                            .any(|g| g.group_id.0.as_str() == "sweep-group"),
                        "{label}"
                    );
                }
                ApiKey::DescribeGroups => {
                    let request = DescribeGroupsRequest::default()
                        .with_groups(vec![GroupId(StrBytes::from_static_str("sweep-group"))]);
                    let r: DescribeGroupsResponse = raw.call(key, version, &request);
                    assert_eq!(r.groups[0].error_code, 0, "{label}");
                    assert_eq!(r.groups[0].group_state.as_str(), "Empty", "{label}");
                }
                ApiKey::DeleteGroups => {
                    // Deleting a group nobody has is refused at every version.
                    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(
                        StrBytes::from_static_str("no-such-group"),
                    )]);
                    let r: DeleteGroupsResponse = raw.call(key, version, &request);
                    assert_eq!(
                        r.results[0].error_code,
                        kafka_protocol::ResponseError::GroupIdNotFound.code(),
                        "{label}"
                    );
                }
                ApiKey::JoinGroup => {
                    join(&mut raw, &format!("join-v{version}"), version);
                }
                ApiKey::SyncGroup => {
                    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
                    let group = format!("sync-v{version}");
                    let (member_id, generation) = join(&mut raw, &group, 5);
                    let request = SyncGroupRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(group)))
                        .with_generation_id(generation)
                        .with_member_id(member_id.clone())
                        .with_assignments(vec![SyncGroupRequestAssignment::default()
                            .with_member_id(member_id)
                            .with_assignment(vec![7u8].into())]);
                    let r: SyncGroupResponse = raw.call(key, version, &request);
                    assert_eq!(
                        (r.error_code, &r.assignment[..]),
                        (0, &[7u8][..]),
                        "{label}"
                    );
                }
                ApiKey::Heartbeat => {
                    let group = format!("heartbeat-v{version}");
                    let (member_id, generation) = join(&mut raw, &group, 5);
                    let request = HeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(group)))
                        .with_generation_id(generation)
                        .with_member_id(member_id);
                    let r: HeartbeatResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                }
                ApiKey::ConsumerGroupHeartbeat => {
                    use kafka_protocol::messages::{
                        ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
                    };
                    let request = ConsumerGroupHeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(format!("modern-v{version}"))))
                        .with_member_id(StrBytes::from_string(format!("member-v{version}")))
                        .with_member_epoch(0)
                        .with_rebalance_timeout_ms(30_000)
                        .with_subscribed_topic_names(Some(vec![name("sweep")]))
                        .with_topic_partitions(Some(Vec::new()));
                    // Until the group's coordinator has loaded its partition.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    let r: ConsumerGroupHeartbeatResponse = loop {
                        let r: ConsumerGroupHeartbeatResponse = raw.call(key, version, &request);
                        if !matches!(r.error_code, 14 | 15) || std::time::Instant::now() > deadline
                        {
                            break r;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    };
                    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{label}");
                    let assigned = r.assignment.map(|a| a.topic_partitions.len());
                    assert_eq!(assigned, Some(1), "{label}");
                }
                ApiKey::ConsumerGroupDescribe => {
                    use kafka_protocol::messages::{
                        ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                    };
                    // The group the heartbeat sweep (v1) created.
                    let request = ConsumerGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(StrBytes::from_static_str("modern-v1"))]);
                    let r: ConsumerGroupDescribeResponse = raw.call(key, version, &request);
                    assert_eq!(r.groups[0].error_code, 0, "{label}");
                    assert_eq!(r.groups[0].members.len(), 1, "{label}");
                }
                ApiKey::ShareGroupHeartbeat => {
                    let request = ShareGroupHeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("share-sweep")))
                        .with_member_id(StrBytes::from_static_str("share-member"))
                        .with_member_epoch(0)
                        .with_subscribed_topic_names(Some(vec![name("sweep")]));
                    let r: ShareGroupHeartbeatResponse = until_loaded(
                        || raw.call(key, version, &request),
                        |r: &ShareGroupHeartbeatResponse| r.error_code,
                    );
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(r.member_epoch > 0, "{label}");
                }
                ApiKey::ShareGroupDescribe => {
                    let request = ShareGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(StrBytes::from_static_str("share-sweep"))]);
                    let r: ShareGroupDescribeResponse = raw.call(key, version, &request);
                    assert_eq!(r.groups[0].error_code, 0, "{label}");
                    assert_eq!(r.groups[0].members.len(), 1, "{label}");
                }
                ApiKey::ShareFetch => {
                    use kafka_protocol::messages::share_fetch_request::{
                        FetchPartition, FetchTopic,
                    };
                    let request = ShareFetchRequest::default()
                        .with_group_id(Some(GroupId(StrBytes::from_static_str("share-sweep"))))
                        .with_member_id(Some(StrBytes::from_static_str("share-member")))
                        .with_share_session_epoch(0)
                        .with_max_wait_ms(100)
                        .with_max_bytes(1 << 20)
                        .with_max_records(10)
                        .with_topics(vec![FetchTopic::default()
                            .with_topic_id(sweep_id)
                            .with_partitions(vec![
                                FetchPartition::default().with_partition_index(0)
                            ])]);
                    let r: ShareFetchResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::ShareAcknowledge => {
                    let request = ShareAcknowledgeRequest::default()
                        .with_group_id(Some(GroupId(StrBytes::from_static_str("share-sweep"))))
                        .with_member_id(Some(StrBytes::from_static_str("share-member")))
                        .with_share_session_epoch(1);
                    let r: ShareAcknowledgeResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                }
                ApiKey::DescribeShareGroupOffsets => {
                    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
                    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                        DescribeShareGroupOffsetsRequestGroup::default()
                            .with_group_id(GroupId(StrBytes::from_static_str("share-sweep")))
                            .with_topics(None),
                    ]);
                    let r: DescribeShareGroupOffsetsResponse = raw.call(key, version, &request);
                    let group = &r.groups[0];
                    assert_eq!(group.error_code, 0, "{label}");
                    let p = &group
                        .topics
                        .first()
                        .unwrap_or_else(|| panic!("{label}: {r:?}"))
                        .partitions[0];
                    // -1 (or COORDINATOR_LOAD_IN_PROGRESS) while the share
                    // fetch before has not yet written the partition's first
                    // state: its state topic may be new.
                    let loading = kafka_protocol::ResponseError::CoordinatorLoadInProgress.code();
                    assert!([0, loading].contains(&p.error_code), "{label}: {p:?}");
                    assert!(p.start_offset >= -1, "{label}: {p:?}");
                }
                ApiKey::AlterShareGroupOffsets => {
                    use kafka_protocol::messages::alter_share_group_offsets_request::{
                        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
                    };
                    let request = AlterShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("share-sweep")))
                        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(name("sweep"))
                            .with_partitions(vec![
                                AlterShareGroupOffsetsRequestPartition::default(),
                            ])]);
                    let r: AlterShareGroupOffsetsResponse = raw.call(key, version, &request);
                    // The group has a member: it is not changed.
                    assert_eq!(
                        r.error_code,
                        kafka_protocol::ResponseError::NonEmptyGroup.code(),
                        "{label}"
                    );
                }
                ApiKey::DeleteShareGroupOffsets => {
                    use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
                    let request = DeleteShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("share-sweep")))
                        .with_topics(vec![DeleteShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(name("sweep"))]);
                    let r: DeleteShareGroupOffsetsResponse = raw.call(key, version, &request);
                    assert_eq!(
                        r.error_code,
                        kafka_protocol::ResponseError::NonEmptyGroup.code(),
                        "{label}"
                    );
                }
                ApiKey::InitializeShareGroupState => {
                    use kafka_protocol::messages::initialize_share_group_state_request::{
                        InitializeStateData, PartitionData,
                    };
                    let request = InitializeShareGroupStateRequest::default()
                        .with_group_id(StrBytes::from_static_str("state-sweep"))
                        .with_topics(vec![InitializeStateData::default()
                            .with_topic_id(sweep_id)
                            .with_partitions(
                                vec![PartitionData::default().with_start_offset(1)],
                            )]);
                    let r: InitializeShareGroupStateResponse = until_loaded(
                        || raw.call(key, version, &request),
                        |r: &InitializeShareGroupStateResponse| {
                            r.results[0].partitions[0].error_code
                        },
                    );
                    assert_eq!(r.results[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::ReadShareGroupState => {
                    use kafka_protocol::messages::read_share_group_state_request::{
                        PartitionData, ReadStateData,
                    };
                    let request = ReadShareGroupStateRequest::default()
                        .with_group_id(StrBytes::from_static_str("state-sweep"))
                        .with_topics(vec![ReadStateData::default()
                            .with_topic_id(sweep_id)
                            .with_partitions(vec![PartitionData::default()])]);
                    let r: ReadShareGroupStateResponse = raw.call(key, version, &request);
                    let p = &r.results[0].partitions[0];
                    assert_eq!((p.error_code, p.start_offset), (0, 1), "{label}");
                }
                ApiKey::WriteShareGroupState => {
                    use kafka_protocol::messages::write_share_group_state_request::{
                        PartitionData, WriteStateData,
                    };
                    let request = WriteShareGroupStateRequest::default()
                        .with_group_id(StrBytes::from_static_str("state-sweep"))
                        .with_topics(vec![WriteStateData::default()
                            .with_topic_id(sweep_id)
                            .with_partitions(
                                vec![PartitionData::default().with_start_offset(2)],
                            )]);
                    let r: WriteShareGroupStateResponse = raw.call(key, version, &request);
                    assert_eq!(r.results[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::LeaveGroup => {
                    use kafka_protocol::messages::leave_group_request::MemberIdentity;
                    let group = format!("leave-v{version}");
                    let (member_id, _) = join(&mut raw, &group, 5);
                    let request = LeaveGroupRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(group)));
                    let request = if version >= 3 {
                        request
                            .with_members(vec![MemberIdentity::default().with_member_id(member_id)])
                    } else {
                        request.with_member_id(member_id)
                    };
                    let r: LeaveGroupResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    if version >= 3 {
                        assert_eq!(r.members[0].error_code, 0, "{label}");
                    }
                }
                ApiKey::OffsetDelete => {
                    use kafka_protocol::messages::offset_delete_request::{
                        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
                    };
                    let request = OffsetDeleteRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("sweep-group")))
                        .with_topics(vec![OffsetDeleteRequestTopic::default()
                            .with_name(name("sweep"))
                            .with_partitions(vec![
                                OffsetDeleteRequestPartition::default().with_partition_index(0)
                            ])]);
                    let r: OffsetDeleteResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::DeleteRecords => {
                    use kafka_protocol::messages::delete_records_request::{
                        DeleteRecordsPartition, DeleteRecordsTopic,
                    };
                    let request = DeleteRecordsRequest::default()
                        .with_timeout_ms(1000)
                        .with_topics(vec![DeleteRecordsTopic::default()
                            .with_name(name("sweep"))
                            .with_partitions(vec![DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(0)])]);
                    let r: DeleteRecordsResponse = raw.call(key, version, &request);
                    let p = &r.topics[0].partitions[0];
                    assert_eq!((p.error_code, p.low_watermark), (0, 0), "{label}");
                }
                ApiKey::AlterConfigs => {
                    use kafka_protocol::messages::alter_configs_request::{
                        AlterConfigsResource, AlterableConfig,
                    };
                    let request = AlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("sweep"))
                            .with_configs(vec![AlterableConfig::default()
                                .with_name(StrBytes::from_static_str("retention.ms"))
                                .with_value(Some(StrBytes::from_static_str("86400000")))]),
                    ]);
                    let r: AlterConfigsResponse = raw.call(key, version, &request);
                    assert_eq!(r.responses[0].error_code, 0, "{label}");
                }
                ApiKey::IncrementalAlterConfigs => {
                    use kafka_protocol::messages::incremental_alter_configs_request::{
                        AlterConfigsResource, AlterableConfig,
                    };
                    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("sweep"))
                            .with_configs(vec![AlterableConfig::default()
                                .with_name(StrBytes::from_static_str("retention.bytes"))
                                .with_config_operation(0)
                                .with_value(Some(StrBytes::from_static_str("1000000")))]),
                    ]);
                    let r: IncrementalAlterConfigsResponse = raw.call(key, version, &request);
                    assert_eq!(r.responses[0].error_code, 0, "{label}");
                }
                ApiKey::TxnOffsetCommit => {
                    use kafka_protocol::messages::txn_offset_commit_request::{
                        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
                    };
                    let id = format!("sweep-txn-commit-v{version}");
                    let (producer_id, epoch) = init_transactional(&mut raw, &id);
                    let group =
                        GroupId(StrBytes::from_string(format!("sweep-txn-group-v{version}")));
                    let added: AddOffsetsToTxnResponse = raw.call(
                        ApiKey::AddOffsetsToTxn,
                        3,
                        &AddOffsetsToTxnRequest::default()
                            .with_transactional_id(TransactionalId(StrBytes::from_string(
                                id.clone(),
                            )))
                            .with_producer_id(ProducerId(producer_id))
                            .with_producer_epoch(epoch)
                            .with_group_id(group.clone()),
                    );
                    assert_eq!(added.error_code, 0, "{label}: AddOffsetsToTxn");
                    let request = TxnOffsetCommitRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                        .with_group_id(group)
                        .with_producer_id(ProducerId(producer_id))
                        .with_producer_epoch(epoch)
                        .with_generation_id(-1)
                        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                            .with_name(name("sweep"))
                            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1)])]);
                    let r: TxnOffsetCommitResponse = raw.call(key, version, &request);
                    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::AddPartitionsToTxn => {
                    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
                    let id = format!("sweep-add-v{version}");
                    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
                    let (producer_id, epoch) = init_transactional(&mut raw, &id);
                    let topics = vec![AddPartitionsToTxnTopic::default()
                        .with_name(name("sweep"))
                        .with_partitions(vec![0])];
                    let id = TransactionalId(StrBytes::from_string(id));
                    // v4 and up are the brokers': several transactions at once.
                    let request = if version >= 4 {
                        AddPartitionsToTxnRequest::default().with_transactions(vec![
                            AddPartitionsToTxnTransaction::default()
                                .with_transactional_id(id)
                                .with_producer_id(ProducerId(producer_id))
                                .with_producer_epoch(epoch)
                                .with_topics(topics),
                        ])
                    } else {
                        AddPartitionsToTxnRequest::default()
                            .with_v3_and_below_transactional_id(id)
                            .with_v3_and_below_producer_id(ProducerId(producer_id))
                            .with_v3_and_below_producer_epoch(epoch)
                            .with_v3_and_below_topics(topics)
                    };
                    let r: AddPartitionsToTxnResponse = raw.call(key, version, &request);
                    let result = if version >= 4 {
                        &r.results_by_transaction[0].topic_results[0].results_by_partition[0]
                    } else {
                        &r.results_by_topic_v3_and_below[0].results_by_partition[0]
                    };
                    assert_eq!(result.partition_error_code, 0, "{label}");
                }
                ApiKey::AddOffsetsToTxn => {
                    let id = format!("sweep-offsets-v{version}");
                    let (producer_id, epoch) = init_transactional(&mut raw, &id);
                    let request = AddOffsetsToTxnRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                        .with_producer_id(ProducerId(producer_id))
                        .with_producer_epoch(epoch)
                        .with_group_id(GroupId(StrBytes::from_static_str("sweep-group")));
                    let r: AddOffsetsToTxnResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                }
                ApiKey::EndTxn => {
                    let id = format!("sweep-end-v{version}");
                    let (producer_id, epoch) = init_transactional(&mut raw, &id);
                    // Ending a transaction that was never begun is refused.
                    let request = EndTxnRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                        .with_producer_id(ProducerId(producer_id))
                        .with_producer_epoch(epoch)
                        .with_committed(true);
                    let r: EndTxnResponse = raw.call(key, version, &request);
                    assert_eq!(
                        r.error_code,
                        kafka_protocol::ResponseError::InvalidTxnState.code(),
                        "{label}"
                    );
                }
                ApiKey::DescribeTransactions => {
                    let (producer_id, _) = init_transactional(&mut raw, "sweep-describe");
                    let request =
                        DescribeTransactionsRequest::default().with_transactional_ids(vec![
                            TransactionalId(StrBytes::from_static_str("sweep-describe")),
                        ]);
                    let r: DescribeTransactionsResponse = raw.call(key, version, &request);
                    let state = &r.transaction_states[0];
                    assert_eq!(state.error_code, 0, "{label}");
                    assert_eq!(state.transaction_state.as_str(), "Empty", "{label}");
                    assert_eq!(state.producer_id.0, producer_id, "{label}");
                }
                ApiKey::ListTransactions => {
                    let id = format!("sweep-list-v{version}");
                    init_transactional(&mut raw, &id);
                    let r: ListTransactionsResponse =
                        raw.call(key, version, &ListTransactionsRequest::default());
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(
                        r.transaction_states
                            .iter()
                            .any(|t| t.transactional_id.0.as_str() == id),
                        "{label}"
                    );
                    if version >= 2 {
                        // The pattern must match the whole id, as Java's.
                        for (pattern, expected) in [
                            ("nothing|sweep-list-v[2]", vec![id.as_str()]),
                            ("sweep-list", vec![]),
                        ] {
                            let request = ListTransactionsRequest::default()
                                .with_transactional_id_pattern(Some(StrBytes::from_static_str(
                                    pattern,
                                )));
                            let r: ListTransactionsResponse = raw.call(key, version, &request);
                            let ids: Vec<&str> = r
                                .transaction_states
                                .iter()
                                .map(|t| t.transactional_id.0.as_str())
                                .filter(|t| t.starts_with("sweep-list"))
                                .collect();
                            assert_eq!(ids, expected, "{label} /{pattern}/");
                        }
                        let request = ListTransactionsRequest::default()
                            .with_transactional_id_pattern(Some(StrBytes::from_static_str("(")));
                        let r: ListTransactionsResponse = raw.call(key, version, &request);
                        assert_eq!(
                            r.error_code,
                            kafka_protocol::ResponseError::InvalidRegularExpression.code(),
                            "{label}"
                        );
                    }
                }
                ApiKey::DescribeProducers => {
                    use kafka_protocol::messages::describe_producers_request::TopicRequest;
                    let request = DescribeProducersRequest::default().with_topics(vec![
                        TopicRequest::default()
                            .with_name(name("sweep"))
                            .with_partition_indexes(vec![0]),
                    ]);
                    let r: DescribeProducersResponse = raw.call(key, version, &request);
                    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::DescribeTopicPartitions => {
                    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
                    let request = DescribeTopicPartitionsRequest::default()
                        .with_response_partition_limit(2000)
                        .with_topics(vec![TopicRequest::default().with_name(name("sweep"))]);
                    let r: DescribeTopicPartitionsResponse = raw.call(key, version, &request);
                    assert_eq!(r.topics[0].error_code, 0, "{label}");
                    assert_eq!(r.topics[0].partitions.len(), 1, "{label}");
                    assert!(r.next_cursor.is_none(), "{label}");
                }
                ApiKey::UpdateFeatures => {
                    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
                    let request = UpdateFeaturesRequest::default().with_feature_updates(vec![
                        FeatureUpdateKey::default()
                            .with_feature(StrBytes::from_static_str("metadata.version"))
                            .with_max_version_level(25),
                    ]);
                    let r: UpdateFeaturesResponse = raw.call(key, version, &request);
                    assert_eq!(r.error_code, 0, "{label}");
                }
                ApiKey::ListConfigResources => {
                    let r: ListConfigResourcesResponse =
                        raw.call(key, version, &ListConfigResourcesRequest::default());
                    assert_eq!(r.error_code, 0, "{label}");
                    // v0 lists client-metrics subscriptions, of which there
                    // are none; v1 every type, the topics among them.
                    assert_eq!(
                        r.config_resources
                            .iter()
                            .any(|c| c.resource_name.as_str() == "sweep"),
                        version >= 1,
                        "{label}"
                    );
                }
                ApiKey::DescribeClientQuotas => {
                    let r: DescribeClientQuotasResponse =
                        raw.call(key, version, &DescribeClientQuotasRequest::default());
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(r.entries.is_some_and(|e| e.is_empty()), "{label}");
                }
                ApiKey::AlterClientQuotas => {
                    use kafka_protocol::messages::alter_client_quotas_request::{
                        EntityData, EntryData, OpData,
                    };
                    // Validated only: the quota is not kept.
                    let request = AlterClientQuotasRequest::default()
                        .with_validate_only(true)
                        .with_entries(vec![EntryData::default()
                            .with_entity(vec![EntityData::default()
                                .with_entity_type(StrBytes::from_static_str("client-id"))
                                .with_entity_name(None)])
                            .with_ops(vec![OpData::default()
                                .with_key(StrBytes::from_static_str("consumer_byte_rate"))
                                .with_value(1e6)])]);
                    let r: AlterClientQuotasResponse = raw.call(key, version, &request);
                    assert_eq!(r.entries[0].error_code, 0, "{label}");
                    assert_eq!(r.entries[0].error_message, None, "{label}");
                }
                ApiKey::DescribeLogDirs => {
                    let r: DescribeLogDirsResponse = raw.call(
                        key,
                        version,
                        &DescribeLogDirsRequest::default().with_topics(None),
                    );
                    assert_eq!(r.error_code, 0, "{label}");
                    assert_eq!(r.results.len(), 1, "{label}");
                    assert!(
                        r.results[0]
                            .topics
                            .iter()
                            .any(|t| t.name.0.as_str() == "sweep"),
                        "{label}"
                    );
                    // The volume's size from v4, Kafka's default -1 before.
                    assert_eq!(r.results[0].total_bytes > 0, version >= 4, "{label}");
                }
                ApiKey::AlterReplicaLogDirs => {
                    // To the directory it is in: nothing to do.
                    let here = std::path::absolute(&weir.data_dir).unwrap();
                    let request = AlterReplicaLogDirsRequest::default().with_dirs(vec![
                        alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                            .with_path(StrBytes::from_string(here.display().to_string()))
                            .with_topics(vec![
                                alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                                    .with_name(TopicName(StrBytes::from_static_str("sweep")))
                                    .with_partitions(vec![0]),
                            ]),
                    ]);
                    let r: AlterReplicaLogDirsResponse = raw.call(key, version, &request);
                    assert_eq!(r.results.len(), 1, "{label}");
                    assert_eq!(r.results[0].partitions[0].error_code, 0, "{label}");
                }
                ApiKey::SaslHandshake => {
                    // Out of place on a listener without SASL.
                    let r: SaslHandshakeResponse = raw.call(
                        key,
                        version,
                        &SaslHandshakeRequest::default()
                            .with_mechanism(StrBytes::from_static_str("PLAIN")),
                    );
                    assert_eq!(r.error_code, 34, "{label}"); // ILLEGAL_SASL_STATE
                }
                ApiKey::SaslAuthenticate => {
                    let r: SaslAuthenticateResponse =
                        raw.call(key, version, &SaslAuthenticateRequest::default());
                    assert_eq!(r.error_code, 34, "{label}"); // ILLEGAL_SASL_STATE
                }
                ApiKey::DescribeUserScramCredentials => {
                    let r: DescribeUserScramCredentialsResponse = raw.call(
                        key,
                        version,
                        &DescribeUserScramCredentialsRequest::default().with_users(None),
                    );
                    assert_eq!(r.error_code, 0, "{label}");
                    assert!(r.results.is_empty(), "{label}");
                }
                ApiKey::AlterUserScramCredentials => {
                    let r: AlterUserScramCredentialsResponse =
                        raw.call(key, version, &AlterUserScramCredentialsRequest::default());
                    assert!(r.results.is_empty(), "{label}");
                }
                ApiKey::DescribeAcls => {
                    let r: DescribeAclsResponse = raw.call(
                        key,
                        version,
                        &DescribeAclsRequest::default()
                            .with_resource_type_filter(1)
                            .with_resource_name_filter(None)
                            .with_pattern_type_filter(1)
                            .with_principal_filter(None)
                            .with_host_filter(None)
                            .with_operation(1)
                            .with_permission_type(1),
                    );
                    assert_eq!(r.error_code, 0, "{label}");
                }
                ApiKey::CreateAcls => {
                    let creation = create_acls_request::AclCreation::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("sweep"))
                        .with_resource_pattern_type(3)
                        .with_principal(StrBytes::from_static_str("User:sweep"))
                        .with_host(StrBytes::from_static_str("*"))
                        .with_operation(3)
                        .with_permission_type(3);
                    let r: CreateAclsResponse = raw.call(
                        key,
                        version,
                        &CreateAclsRequest::default().with_creations(vec![creation]),
                    );
                    assert_eq!(r.results.len(), 1, "{label}");
                    assert_eq!(r.results[0].error_code, 0, "{label}");
                }
                ApiKey::DeleteAcls => {
                    let filter = delete_acls_request::DeleteAclsFilter::default()
                        .with_resource_type_filter(2)
                        .with_resource_name_filter(Some(StrBytes::from_static_str("sweep")))
                        .with_pattern_type_filter(1)
                        .with_principal_filter(None)
                        .with_host_filter(None)
                        .with_operation(1)
                        .with_permission_type(1);
                    let r: DeleteAclsResponse = raw.call(
                        key,
                        version,
                        &DeleteAclsRequest::default().with_filters(vec![filter]),
                    );
                    assert_eq!(r.filter_results.len(), 1, "{label}");
                    assert_eq!(r.filter_results[0].error_code, 0, "{label}");
                }
                other => panic!("{other:?} is advertised but this test does not cover it"),
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} versions checked");
}

/// KIP-430: asked for, the authorized operations of topics, groups and the
/// cluster are every operation their type supports (no authorizer), as
/// Kafka's bit fields; not asked for, Kafka's "not requested" value.
#[test]
fn authorized_operations_are_every_supported_one_when_asked() {
    // Bits by Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5,
    // DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
    // ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
    let field = |codes: &[u8]| codes.iter().fold(0i32, |f, c| f | 1 << c);
    let topic = field(&[3, 4, 5, 6, 7, 8, 10, 11]);
    let group = field(&[3, 6, 8, 10, 11]);
    let cluster = field(&[5, 7, 8, 9, 10, 11, 12]);
    const NOT_REQUESTED: i32 = i32::MIN;

    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("ops");
    let metadata = |version, asked| -> MetadataResponse {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("ops")))
            ]))
            .with_include_topic_authorized_operations(asked)
            // Versions 11 and later ask DescribeCluster instead.
            .with_include_cluster_authorized_operations(asked && version <= 10);
        Raw::connect(&weir.kafka).call(ApiKey::Metadata, version, &request)
    };
    let asked = metadata(10, true);
    assert_eq!(asked.topics[0].topic_authorized_operations, topic);
    assert_eq!(asked.cluster_authorized_operations, cluster);
    let not_asked = metadata(10, false);
    assert_eq!(
        not_asked.topics[0].topic_authorized_operations,
        NOT_REQUESTED
    );
    assert_eq!(not_asked.cluster_authorized_operations, NOT_REQUESTED);
    let v12 = metadata(12, true);
    assert_eq!(v12.topics[0].topic_authorized_operations, topic);

    for (asked, expected) in [(true, cluster), (false, NOT_REQUESTED)] {
        let described: DescribeClusterResponse = raw.call(
            ApiKey::DescribeCluster,
            1,
            &DescribeClusterRequest::default().with_include_cluster_authorized_operations(asked),
        );
        assert_eq!(described.cluster_authorized_operations, expected);
    }

    // As a client does: find the coordinator, and ask it again while it
    // loads the group's partition.
    raw.find_coordinator(0, "nobody");
    for (asked, expected) in [(true, group), (false, NOT_REQUESTED)] {
        let request = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_static_str("nobody"))])
            .with_include_authorized_operations(asked);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let described = loop {
            let described: DescribeGroupsResponse = raw.call(ApiKey::DescribeGroups, 5, &request);
            if described.groups[0].error_code != 14 || std::time::Instant::now() > deadline {
                break described;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert_eq!(described.groups[0].error_code, 0);
        assert_eq!(described.groups[0].authorized_operations, expected);
    }
}

/// What the newest versions changed: DescribeGroups v6 reports an unknown
/// group (KIP-1043); DescribeCluster v1+ refuses endpoint types a broker
/// is not, and v2 flags fenced brokers (KIP-1073).
#[test]
fn the_newest_versions_answer_as_kafka_4() {
    const GROUP_ID_NOT_FOUND: i16 = 69;
    const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
    const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);

    raw.find_coordinator(0, "nobody");
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_static_str("nobody"))]);
    for version in [5, 6] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let described = loop {
            let described: DescribeGroupsResponse =
                raw.call(ApiKey::DescribeGroups, version, &request);
            if described.groups[0].error_code != 14 || std::time::Instant::now() > deadline {
                break described;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let group = &described.groups[0];
        assert_eq!(group.group_state.as_str(), "Dead", "v{version}");
        if version < 6 {
            assert_eq!((group.error_code, &group.error_message), (0, &None));
        } else {
            assert_eq!(group.error_code, GROUP_ID_NOT_FOUND);
            assert_eq!(
                group.error_message.as_ref().map(|m| m.as_str()),
                Some("Group nobody not found.")
            );
        }
    }

    for (endpoint_type, expected) in [
        (1, 0),
        (2, MISMATCHED_ENDPOINT_TYPE),
        (7, UNSUPPORTED_ENDPOINT_TYPE),
    ] {
        let described: DescribeClusterResponse = raw.call(
            ApiKey::DescribeCluster,
            2,
            &DescribeClusterRequest::default()
                .with_endpoint_type(endpoint_type)
                .with_include_fenced_brokers(true),
        );
        assert_eq!(
            described.error_code, expected,
            "endpoint type {endpoint_type}"
        );
        if expected == 0 {
            let brokers: Vec<(i32, bool)> = described
                .brokers
                .iter()
                .map(|b| (b.broker_id.0, b.is_fenced))
                .collect();
            assert_eq!(brokers, [(1, false)]);
        } else {
            assert!(described.brokers.is_empty());
            assert!(described.error_message.is_some());
        }
    }
}

/// Sends `$api`'s requests (its default request unless listed) at
/// `$version` and decodes each answer as `$api`'s response at that version;
/// the first failure is returned. An advertised API missing from the list
/// fails, so that a new API joins the sweep.
macro_rules! minimal_requests {
    ($raw:expr, $key:expr, $version:expr, {
        $($api:ident: $request:ty => $response:ty $(= $requests:expr)?),* $(,)?
    }) => {
        match $key {
            $(ApiKey::$api => {
                let requests: Vec<$request> = minimal_requests!(@requests $($requests)?);
                for request in &requests {
                    $raw.try_call::<_, $response>(ApiKey::$api, $version, request)?;
                }
                Ok(())
            })*
            other => Err(format!("{other:?} has no minimal request in this sweep")),
        }
    };
    (@requests) => { vec![Default::default()] };
    (@requests $requests:expr) => { $requests };
}

/// The requests of the minimal sweep for `key` at `version`: defaults,
/// with the names of the topic and of the groups of every type where a
/// request names them, so that each builder describes what exists. Nothing
/// is deleted; what alters, validates only or names nothing.
fn answers_minimal_requests(
    raw: &mut Raw,
    key: ApiKey,
    version: i16,
    topic: &str,
    topic_id: Uuid,
    groups: &[&str],
) -> Result<(), String> {
    use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    use kafka_protocol::messages::leave_group_request::MemberIdentity;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic,
    };
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    let group_id = |g: &&str| GroupId(StrBytes::from_string((*g).to_owned()));
    let group_ids: Vec<GroupId> = groups.iter().map(group_id).collect();
    let text = |s: &str| StrBytes::from_string(s.to_owned());
    let unknown_member = StrBytes::from_static_str("unknown-member");
    fn per_group<T>(groups: &[&str], f: impl Fn(GroupId) -> T) -> Vec<T> {
        groups
            .iter()
            .map(|g| f(GroupId(StrBytes::from_string((*g).to_owned()))))
            .collect()
    }
    minimal_requests!(raw, key, version, {
        Produce: ProduceRequest => ProduceResponse = vec![ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(BatchBuilder::new(1).build().into()))])])],
        Fetch: FetchRequest => FetchResponse = vec![FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(if version < 13 { name(topic) } else { TopicName::default() })
                .with_topic_id(if version >= 13 { topic_id } else { Uuid::nil() })
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_max_bytes(1 << 20)])])],
        ListOffsets: ListOffsetsRequest => ListOffsetsResponse = vec![ListOffsetsRequest::default()
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)])])],
        Metadata: MetadataRequest => MetadataResponse = vec![MetadataRequest::default()
            // Every topic: an empty list at v0, none from v1 on.
            .with_topics(if version == 0 { Some(Vec::new()) } else { None })],
        OffsetCommit: OffsetCommitRequest => OffsetCommitResponse = per_group(groups, |g| {
            OffsetCommitRequest::default()
                .with_group_id(g)
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()])])
        }),
        OffsetFetch: OffsetFetchRequest => OffsetFetchResponse = if version >= 8 {
            vec![OffsetFetchRequest::default().with_groups(
                group_ids
                    .iter()
                    .map(|g| OffsetFetchRequestGroup::default().with_group_id(g.clone()))
                    .collect(),
            )]
        } else {
            per_group(groups, |g| {
                OffsetFetchRequest::default()
                    .with_group_id(g)
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(name(topic))
                        .with_partition_indexes(vec![0])]))
            })
        },
        FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse = if version >= 4 {
            vec![FindCoordinatorRequest::default()
                .with_coordinator_keys(groups.iter().map(|g| text(g)).collect())]
        } else {
            groups
                .iter()
                .map(|g| FindCoordinatorRequest::default().with_key(text(g)))
                .collect()
        },
        JoinGroup: JoinGroupRequest => JoinGroupResponse,
        Heartbeat: HeartbeatRequest => HeartbeatResponse = per_group(groups, |g| {
            HeartbeatRequest::default()
                .with_group_id(g)
                .with_member_id(unknown_member.clone())
        }),
        LeaveGroup: LeaveGroupRequest => LeaveGroupResponse = per_group(groups, |g| {
            let request = LeaveGroupRequest::default().with_group_id(g);
            if version >= 3 {
                request.with_members(vec![
                    MemberIdentity::default().with_member_id(unknown_member.clone())
                ])
            } else {
                request.with_member_id(unknown_member.clone())
            }
        }),
        SyncGroup: SyncGroupRequest => SyncGroupResponse = per_group(groups, |g| {
            SyncGroupRequest::default()
                .with_group_id(g)
                .with_member_id(unknown_member.clone())
        }),
        DescribeGroups: DescribeGroupsRequest => DescribeGroupsResponse = vec![
            DescribeGroupsRequest::default()
                .with_groups(group_ids.clone())
                .with_include_authorized_operations(version >= 3),
        ],
        ListGroups: ListGroupsRequest => ListGroupsResponse,
        SaslHandshake: SaslHandshakeRequest => SaslHandshakeResponse,
        ApiVersions: ApiVersionsRequest => ApiVersionsResponse,
        CreateTopics: CreateTopicsRequest => CreateTopicsResponse = vec![
            // It exists: refused, and nothing changes.
            CreateTopicsRequest::default()
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(topic))
                    .with_num_partitions(1)
                    .with_replication_factor(1)])
                .with_validate_only(true),
        ],
        DeleteTopics: DeleteTopicsRequest => DeleteTopicsResponse,
        DeleteRecords: DeleteRecordsRequest => DeleteRecordsResponse = vec![
            DeleteRecordsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![DeleteRecordsPartition::default()])]),
        ],
        InitProducerId: InitProducerIdRequest => InitProducerIdResponse,
        OffsetForLeaderEpoch: OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse = vec![
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![OffsetForLeaderTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_current_leader_epoch(-1)])]),
        ],
        AddPartitionsToTxn: AddPartitionsToTxnRequest => AddPartitionsToTxnResponse,
        AddOffsetsToTxn: AddOffsetsToTxnRequest => AddOffsetsToTxnResponse,
        EndTxn: EndTxnRequest => EndTxnResponse,
        WriteTxnMarkers: WriteTxnMarkersRequest => WriteTxnMarkersResponse,
        TxnOffsetCommit: TxnOffsetCommitRequest => TxnOffsetCommitResponse,
        DescribeAcls: DescribeAclsRequest => DescribeAclsResponse,
        CreateAcls: CreateAclsRequest => CreateAclsResponse,
        DeleteAcls: DeleteAclsRequest => DeleteAclsResponse,
        DescribeConfigs: DescribeConfigsRequest => DescribeConfigsResponse = vec![
            DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(text(topic)),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(text("1")),
            ]),
        ],
        AlterConfigs: AlterConfigsRequest => AlterConfigsResponse = vec![
            AlterConfigsRequest::default()
                .with_validate_only(true)
                .with_resources(vec![AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(text(topic))]),
        ],
        AlterReplicaLogDirs: AlterReplicaLogDirsRequest => AlterReplicaLogDirsResponse,
        DescribeLogDirs: DescribeLogDirsRequest => DescribeLogDirsResponse = vec![
            DescribeLogDirsRequest::default().with_topics(None),
        ],
        SaslAuthenticate: SaslAuthenticateRequest => SaslAuthenticateResponse,
        CreatePartitions: CreatePartitionsRequest => CreatePartitionsResponse = vec![
            // Not more partitions than it has: refused, and nothing changes.
            CreatePartitionsRequest::default()
                .with_timeout_ms(5000)
                .with_validate_only(true)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(name(topic))
                    .with_count(1)
                    .with_assignments(None)]),
        ],
        DeleteGroups: DeleteGroupsRequest => DeleteGroupsResponse,
        ElectLeaders: ElectLeadersRequest => ElectLeadersResponse = vec![
            ElectLeadersRequest::default().with_timeout_ms(5000),
        ],
        IncrementalAlterConfigs: IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse,
        AlterPartitionReassignments:
            AlterPartitionReassignmentsRequest => AlterPartitionReassignmentsResponse,
        ListPartitionReassignments:
            ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse,
        OffsetDelete: OffsetDeleteRequest => OffsetDeleteResponse = per_group(groups, |g| {
            OffsetDeleteRequest::default()
                .with_group_id(g)
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![OffsetDeleteRequestPartition::default()])])
        }),
        DescribeClientQuotas: DescribeClientQuotasRequest => DescribeClientQuotasResponse,
        AlterClientQuotas: AlterClientQuotasRequest => AlterClientQuotasResponse,
        DescribeUserScramCredentials:
            DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse,
        AlterUserScramCredentials:
            AlterUserScramCredentialsRequest => AlterUserScramCredentialsResponse,
        DescribeQuorum: DescribeQuorumRequest => DescribeQuorumResponse,
        UpdateFeatures: UpdateFeaturesRequest => UpdateFeaturesResponse = vec![
            UpdateFeaturesRequest::default().with_validate_only(version >= 1),
        ],
        DescribeCluster: DescribeClusterRequest => DescribeClusterResponse,
        DescribeProducers: DescribeProducersRequest => DescribeProducersResponse = vec![
            DescribeProducersRequest::default().with_topics(vec![
                kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                    .with_name(name(topic))
                    .with_partition_indexes(vec![0]),
            ]),
        ],
        DescribeTransactions: DescribeTransactionsRequest => DescribeTransactionsResponse = vec![
            DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(text("no-such-transaction"))]),
        ],
        ListTransactions: ListTransactionsRequest => ListTransactionsResponse,
        ConsumerGroupHeartbeat: ConsumerGroupHeartbeatRequest => ConsumerGroupHeartbeatResponse,
        ConsumerGroupDescribe: ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse = vec![
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(group_ids.clone())
                .with_include_authorized_operations(true),
        ],
        DescribeTopicPartitions: DescribeTopicPartitionsRequest => DescribeTopicPartitionsResponse = vec![
            DescribeTopicPartitionsRequest::default()
                .with_response_partition_limit(2000)
                .with_topics(vec![
                    kafka_protocol::messages::describe_topic_partitions_request::TopicRequest::default()
                        .with_name(name(topic)),
                ]),
        ],
        ShareGroupHeartbeat: ShareGroupHeartbeatRequest => ShareGroupHeartbeatResponse,
        ShareGroupDescribe: ShareGroupDescribeRequest => ShareGroupDescribeResponse = vec![
            ShareGroupDescribeRequest::default()
                .with_group_ids(group_ids.clone())
                .with_include_authorized_operations(true),
        ],
        ShareFetch: ShareFetchRequest => ShareFetchResponse = per_group(groups, |g| {
            ShareFetchRequest::default()
                .with_group_id(Some(g))
                .with_member_id(Some(unknown_member.clone()))
                .with_max_bytes(1 << 20)
                .with_max_records(10)
        }),
        ShareAcknowledge: ShareAcknowledgeRequest => ShareAcknowledgeResponse = per_group(groups, |g| {
            ShareAcknowledgeRequest::default()
                .with_group_id(Some(g))
                .with_member_id(Some(unknown_member.clone()))
                .with_share_session_epoch(1)
        }),
        InitializeShareGroupState:
            InitializeShareGroupStateRequest => InitializeShareGroupStateResponse,
        ReadShareGroupState: ReadShareGroupStateRequest => ReadShareGroupStateResponse,
        WriteShareGroupState: WriteShareGroupStateRequest => WriteShareGroupStateResponse,
        DescribeShareGroupOffsets:
            DescribeShareGroupOffsetsRequest => DescribeShareGroupOffsetsResponse = vec![
            DescribeShareGroupOffsetsRequest::default().with_groups(
                group_ids
                    .iter()
                    .map(|g| {
                        DescribeShareGroupOffsetsRequestGroup::default()
                            .with_group_id(g.clone())
                            .with_topics(None)
                    })
                    .collect(),
            ),
        ],
        AlterShareGroupOffsets: AlterShareGroupOffsetsRequest => AlterShareGroupOffsetsResponse =
            per_group(groups, |g| AlterShareGroupOffsetsRequest::default().with_group_id(g)),
        DeleteShareGroupOffsets: DeleteShareGroupOffsetsRequest => DeleteShareGroupOffsetsResponse =
            per_group(groups, |g| DeleteShareGroupOffsetsRequest::default().with_group_id(g)),
        ListConfigResources: ListConfigResourcesRequest => ListConfigResourcesResponse,
    })
}

/// With a classic group (a static member: its instance id is in v4+
/// only), a consumer group (KIP-848) and a share group (KIP-932) in the
/// broker, every API it advertises, at every advertised version, answers a
/// minimal request with a frame that decodes as that API's response at
/// that version: no response is built outside its version's schema, and
/// no request costs the client its connection.
#[test]
fn every_advertised_version_answers_a_minimal_request_with_groups_of_every_type() {
    let weir = Weir::start(&["--group-initial-rebalance-delay-ms", "0"]);
    let mut raw = Raw::connect(&weir.kafka);
    let topic = "minimal";
    raw.topic_metadata(topic);
    assert_eq!(raw.produce(topic, 0, BatchBuilder::new(2).build()).0, 0);
    let topic_id = {
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic))),
        ]));
        let r: MetadataResponse = raw.call(ApiKey::Metadata, 12, &request);
        r.topics[0].topic_id
    };

    // A classic group, Stable, whose only member is static.
    let classic = "minimal-classic";
    let classic_id = GroupId(StrBytes::from_static_str(classic));
    let join = JoinGroupRequest::default()
        .with_group_id(classic_id.clone())
        .with_group_instance_id(Some(StrBytes::from_static_str("instance-1")))
        .with_session_timeout_ms(300_000)
        .with_rebalance_timeout_ms(300_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range")),
        ]);
    raw.find_coordinator(0, classic);
    let joined: JoinGroupResponse = until_loaded(
        || raw.call(ApiKey::JoinGroup, 5, &join),
        |r: &JoinGroupResponse| r.error_code,
    );
    assert_eq!(joined.error_code, 0, "JoinGroup of a static member");
    let synced: SyncGroupResponse = raw.call(
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest::default()
            .with_group_id(classic_id)
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone())
            .with_group_instance_id(Some(StrBytes::from_static_str("instance-1"))),
    );
    assert_eq!(synced.error_code, 0, "SyncGroup of a static member");

    // A consumer group (KIP-848) with one member.
    let consumer = "minimal-consumer";
    let heartbeat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(consumer)))
        .with_member_id(StrBytes::from_static_str("consumer-member"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![name(topic)]))
        .with_topic_partitions(Some(Vec::new()));
    let r: ConsumerGroupHeartbeatResponse = until_loaded(
        || raw.call(ApiKey::ConsumerGroupHeartbeat, 0, &heartbeat),
        |r: &ConsumerGroupHeartbeatResponse| r.error_code,
    );
    assert_eq!(r.error_code, 0, "ConsumerGroupHeartbeat");

    // A share group (KIP-932) with one member.
    let share = "minimal-share";
    let heartbeat = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(share)))
        .with_member_id(StrBytes::from_static_str("share-member"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![name(topic)]));
    let r: ShareGroupHeartbeatResponse = until_loaded(
        || raw.call(ApiKey::ShareGroupHeartbeat, 1, &heartbeat),
        |r: &ShareGroupHeartbeatResponse| r.error_code,
    );
    assert_eq!(r.error_code, 0, "ShareGroupHeartbeat");

    let groups = [classic, consumer, share, "minimal-absent"];
    let versions: ApiVersionsResponse =
        raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let mut failures = Vec::new();
    let mut checked = 0;
    for api in &versions.api_keys {
        let key = ApiKey::try_from(api.api_key).unwrap();
        for version in api.min_version..=api.max_version {
            checked += 1;
            if let Err(why) =
                answers_minimal_requests(&mut raw, key, version, topic, topic_id, &groups)
            {
                failures.push(format!("{key:?} v{version}: {why}"));
                // Whatever became of this connection, go on with a new one.
                raw = Raw::connect(&weir.kafka);
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked > 200, "only {checked} versions checked");
}
