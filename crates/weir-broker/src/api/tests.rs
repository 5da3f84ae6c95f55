use kafka_protocol::messages::*;

use super::table::APIS;
use super::*;

const THROTTLE: i32 = 0x0102_0304;

/// A response of `key` at `version` with `THROTTLE` as its throttle time,
/// framed.
fn framed_with_throttle(key: ApiKey, version: i16) -> Bytes {
    macro_rules! responses {
        ($($k:ident => $ty:ty),* $(,)?) => {
            match key {
                $(ApiKey::$k => encode_response(
                    key,
                    version,
                    7,
                    &<$ty>::default().with_throttle_time_ms(THROTTLE),
                )
                .unwrap(),)*
                ApiKey::Fetch => {
                    let header = crate::api::fetch_response::Header {
                        throttle_time_ms: THROTTLE,
                        error_code: 0,
                        session_id: 0,
                    };
                    crate::api::fetch_response::encode(version, 7, &header, &[], &[])
                        .to_bytes()
                        .unwrap()
                }
                other => panic!("{other:?}: no case for its response"),
            }
        };
    }
    responses! {
        ListOffsets => ListOffsetsResponse,
        Metadata => MetadataResponse,
        OffsetCommit => OffsetCommitResponse,
        OffsetFetch => OffsetFetchResponse,
        FindCoordinator => FindCoordinatorResponse,
        JoinGroup => JoinGroupResponse,
        Heartbeat => HeartbeatResponse,
        LeaveGroup => LeaveGroupResponse,
        SyncGroup => SyncGroupResponse,
        DescribeGroups => DescribeGroupsResponse,
        ListGroups => ListGroupsResponse,
        CreateTopics => CreateTopicsResponse,
        DeleteTopics => DeleteTopicsResponse,
        DeleteRecords => DeleteRecordsResponse,
        InitProducerId => InitProducerIdResponse,
        OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
        AddPartitionsToTxn => AddPartitionsToTxnResponse,
        AddOffsetsToTxn => AddOffsetsToTxnResponse,
        EndTxn => EndTxnResponse,
        TxnOffsetCommit => TxnOffsetCommitResponse,
        DescribeConfigs => DescribeConfigsResponse,
        AlterConfigs => AlterConfigsResponse,
        CreatePartitions => CreatePartitionsResponse,
        DeleteGroups => DeleteGroupsResponse,
        ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
        ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
        ShareGroupHeartbeat => ShareGroupHeartbeatResponse,
        ShareGroupDescribe => ShareGroupDescribeResponse,
        ShareFetch => ShareFetchResponse,
        ShareAcknowledge => ShareAcknowledgeResponse,
        DescribeShareGroupOffsets => DescribeShareGroupOffsetsResponse,
        AlterShareGroupOffsets => AlterShareGroupOffsetsResponse,
        DeleteShareGroupOffsets => DeleteShareGroupOffsetsResponse,
        IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
        AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
        ListPartitionReassignments => ListPartitionReassignmentsResponse,
        DescribeClientQuotas => DescribeClientQuotasResponse,
        AlterClientQuotas => AlterClientQuotasResponse,
        DescribeCluster => DescribeClusterResponse,
        DescribeProducers => DescribeProducersResponse,
        DescribeTransactions => DescribeTransactionsResponse,
        ListTransactions => ListTransactionsResponse,
        DescribeTopicPartitions => DescribeTopicPartitionsResponse,
        ElectLeaders => ElectLeadersResponse,
        UpdateFeatures => UpdateFeaturesResponse,
        ListConfigResources => ListConfigResourcesResponse,
        DescribeLogDirs => DescribeLogDirsResponse,
        AlterReplicaLogDirs => AlterReplicaLogDirsResponse,
        DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
        AlterUserScramCredentials => AlterUserScramCredentialsResponse,
        DescribeAcls => DescribeAclsResponse,
        CreateAcls => CreateAclsResponse,
        DeleteAcls => DeleteAclsResponse,
    }
}

/// A request-time throttle is written into the encoded response: the
/// offset must be exactly where each response's schema puts the field.
#[test]
fn throttle_times_are_found_where_each_response_has_them() {
    let mut without = Vec::new();
    for api in APIS {
        let key = api.key;
        for version in api.min_version..=api.max_version {
            match throttle_time_offset(key, version) {
                Some(offset) => {
                    let frame = framed_with_throttle(key, version);
                    let mut out = Outgoing::from(frame.clone());
                    assert_eq!(
                        &frame[offset..offset + 4],
                        THROTTLE.to_be_bytes(),
                        "{key:?} v{version}"
                    );
                    // Raising it rewrites those bytes and nothing else.
                    assert!(out.raise_i32_at(offset, THROTTLE + 1));
                    let raised = out.to_bytes().unwrap();
                    assert_eq!(&raised[offset..offset + 4], (THROTTLE + 1).to_be_bytes());
                    assert_eq!(raised.len(), frame.len());
                }
                None if version == api.max_version => without.push(key),
                None => {}
            }
        }
    }
    assert_eq!(
        without,
        [
            ApiKey::Produce,
            ApiKey::SaslHandshake,
            ApiKey::ApiVersions,
            ApiKey::WriteTxnMarkers,
            ApiKey::SaslAuthenticate,
            ApiKey::OffsetDelete,
            ApiKey::DescribeQuorum,
            ApiKey::InitializeShareGroupState,
            ApiKey::ReadShareGroupState,
            ApiKey::WriteShareGroupState,
        ],
        "responses whose newest version does not start with the throttle time"
    );
}

#[test]
fn a_throttle_time_is_only_raised() {
    let frame = framed_with_throttle(ApiKey::Metadata, 12);
    let offset = throttle_time_offset(ApiKey::Metadata, 12).unwrap();
    let mut out = Outgoing::from(frame.clone());
    assert!(out.raise_i32_at(offset, 5));
    assert_eq!(out.to_bytes().unwrap(), frame);
    // Past the frame: nothing to raise.
    assert!(!out.raise_i32_at(frame.len(), 5));
}
