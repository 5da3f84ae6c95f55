//! Kafka's error response for a request that failed as a whole (its
//! `AbstractRequest.getErrorResponse`): the API's response carrying one
//! error code in every error field it has at the request's version, and
//! nothing else. The broker answers with it when a response it built does
//! not fit its version's schema, so that a bug in one builder costs the
//! client one failed request, never its connection.
//!
//! Kafka builds it from the request; here it is built from the response
//! that could not be encoded, which names the same entries (topics,
//! partitions, groups, resources) and nothing the request did not.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;

/// A response that has an error response.
pub(crate) trait ErrorResponse: Encodable + Sized {
    /// The error response standing in for `self` at `version`: `code` at
    /// the top level where the API has an error code there, otherwise in
    /// each entry `self` names, kept by its name and nothing else.
    fn error_response(&self, version: i16, code: i16) -> Self;
}

/// Responses whose every advertised version has a top-level error code.
macro_rules! top_level {
    ($($response:ty),* $(,)?) => {$(
        impl ErrorResponse for $response {
            fn error_response(&self, _version: i16, code: i16) -> Self {
                Self::default().with_error_code(code)
            }
        }
    )*};
}

top_level!(
    AddOffsetsToTxnResponse,
    AlterPartitionReassignmentsResponse,
    AlterShareGroupOffsetsResponse,
    ApiVersionsResponse,
    ConsumerGroupHeartbeatResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeAclsResponse,
    DescribeClientQuotasResponse,
    DescribeClusterResponse,
    DescribeQuorumResponse,
    DescribeUserScramCredentialsResponse,
    EndTxnResponse,
    HeartbeatResponse,
    InitProducerIdResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListConfigResourcesResponse,
    ListGroupsResponse,
    ListPartitionReassignmentsResponse,
    ListTransactionsResponse,
    OffsetDeleteResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    ShareAcknowledgeResponse,
    ShareFetchResponse,
    ShareGroupHeartbeatResponse,
    SyncGroupResponse,
    UpdateFeaturesResponse,
);

/// Maps each element of a list into its error form.
fn each<T, U>(items: &[T], f: impl FnMut(&T) -> U) -> Vec<U> {
    items.iter().map(f).collect()
}

impl ErrorResponse for ProduceResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use produce_response::{PartitionProduceResponse, TopicProduceResponse};
        Self::default().with_responses(each(&self.responses, |t| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(each(&t.partition_responses, |p| {
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for ListOffsetsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
        Self::default().with_topics(each(&self.topics, |t| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(each(&t.partitions, |p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for MetadataResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        use metadata_response::MetadataResponseTopic;
        if version >= 13 {
            return Self::default().with_error_code(code);
        }
        Self::default().with_topics(each(&self.topics, |t| {
            MetadataResponseTopic::default()
                .with_name(t.name.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for OffsetCommitResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
        Self::default().with_topics(each(&self.topics, |t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(each(&t.partitions, |p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for OffsetFetchResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        use offset_fetch_response::{
            OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
        };
        match version {
            // One group per request, its error per partition.
            ..=1 => Self::default().with_topics(each(&self.topics, |t| {
                OffsetFetchResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(each(&t.partitions, |p| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code)
                    }))
            })),
            2..=7 => Self::default().with_error_code(code),
            _ => Self::default().with_groups(each(&self.groups, |g| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(code)
            })),
        }
    }
}

impl ErrorResponse for FindCoordinatorResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        use find_coordinator_response::Coordinator;
        if version < 4 {
            return Self::default().with_error_code(code);
        }
        Self::default().with_coordinators(each(&self.coordinators, |c| {
            Coordinator::default()
                .with_key(c.key.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DescribeGroupsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use describe_groups_response::DescribedGroup;
        Self::default().with_groups(each(&self.groups, |g| {
            DescribedGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DeleteGroupsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use delete_groups_response::DeletableGroupResult;
        Self::default().with_results(each(&self.results, |g| {
            DeletableGroupResult::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for ConsumerGroupDescribeResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use consumer_group_describe_response::DescribedGroup;
        Self::default().with_groups(each(&self.groups, |g| {
            DescribedGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for ShareGroupDescribeResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use share_group_describe_response::DescribedGroup;
        Self::default().with_groups(each(&self.groups, |g| {
            DescribedGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DescribeShareGroupOffsetsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
        Self::default().with_groups(each(&self.groups, |g| {
            DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for CreateTopicsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use create_topics_response::CreatableTopicResult;
        Self::default().with_topics(each(&self.topics, |t| {
            CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DeleteTopicsResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        use delete_topics_response::DeletableTopicResult;
        Self::default().with_responses(each(&self.responses, |t| {
            let result = DeletableTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code);
            // Deletion by id (v6) may name no topic.
            if version >= 6 {
                result.with_topic_id(t.topic_id)
            } else {
                result
            }
        }))
    }
}

impl ErrorResponse for CreatePartitionsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use create_partitions_response::CreatePartitionsTopicResult;
        Self::default().with_results(each(&self.results, |t| {
            CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DescribeTopicPartitionsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
        Self::default().with_topics(each(&self.topics, |t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DeleteRecordsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
        Self::default().with_topics(each(&self.topics, |t| {
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(each(&t.partitions, |p| {
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for OffsetForLeaderEpochResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
        Self::default().with_topics(each(&self.topics, |t| {
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(each(&t.partitions, |p| {
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for AddPartitionsToTxnResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        use add_partitions_to_txn_response::{
            AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
        };
        if version >= 4 {
            return Self::default().with_error_code(code);
        }
        Self::default().with_results_by_topic_v3_and_below(each(
            &self.results_by_topic_v3_and_below,
            |t| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(each(&t.results_by_partition, |p| {
                        AddPartitionsToTxnPartitionResult::default()
                            .with_partition_index(p.partition_index)
                            .with_partition_error_code(code)
                    }))
            },
        ))
    }
}

impl ErrorResponse for WriteTxnMarkersResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use write_txn_markers_response::{
            WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
        };
        Self::default().with_markers(each(&self.markers, |m| {
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(each(&m.topics, |t| {
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(each(&t.partitions, |p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        }))
                }))
        }))
    }
}

impl ErrorResponse for TxnOffsetCommitResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use txn_offset_commit_response::{
            TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
        };
        Self::default().with_topics(each(&self.topics, |t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(each(&t.partitions, |p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for CreateAclsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use create_acls_response::AclCreationResult;
        Self::default().with_results(each(&self.results, |_| {
            AclCreationResult::default().with_error_code(code)
        }))
    }
}

impl ErrorResponse for DeleteAclsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use delete_acls_response::DeleteAclsFilterResult;
        Self::default().with_filter_results(each(&self.filter_results, |_| {
            DeleteAclsFilterResult::default().with_error_code(code)
        }))
    }
}

impl ErrorResponse for DescribeConfigsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use describe_configs_response::DescribeConfigsResult;
        Self::default().with_results(each(&self.results, |r| {
            DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for AlterConfigsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use alter_configs_response::AlterConfigsResourceResponse;
        Self::default().with_responses(each(&self.responses, |r| {
            AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for IncrementalAlterConfigsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use incremental_alter_configs_response::AlterConfigsResourceResponse;
        Self::default().with_responses(each(&self.responses, |r| {
            AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for AlterReplicaLogDirsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use alter_replica_log_dirs_response::{
            AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
        };
        Self::default().with_results(each(&self.results, |t| {
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(t.topic_name.clone())
                .with_partitions(each(&t.partitions, |p| {
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for DescribeLogDirsResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        // Before v3 there is no error to give: no log dirs, as Kafka.
        if version >= 3 {
            Self::default().with_error_code(code)
        } else {
            Self::default()
        }
    }
}

impl ErrorResponse for ElectLeadersResponse {
    fn error_response(&self, version: i16, code: i16) -> Self {
        use elect_leaders_response::{PartitionResult, ReplicaElectionResult};
        if version >= 1 {
            return Self::default().with_error_code(code);
        }
        Self::default().with_replica_election_results(each(&self.replica_election_results, |t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(each(&t.partition_result, |p| {
                    PartitionResult::default()
                        .with_partition_id(p.partition_id)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for AlterClientQuotasResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use alter_client_quotas_response::EntryData;
        Self::default().with_entries(each(&self.entries, |e| {
            EntryData::default()
                .with_entity(e.entity.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for AlterUserScramCredentialsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
        Self::default().with_results(each(&self.results, |r| {
            AlterUserScramCredentialsResult::default()
                .with_user(r.user.clone())
                .with_error_code(code)
        }))
    }
}

impl ErrorResponse for DescribeProducersResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use describe_producers_response::{PartitionResponse, TopicResponse};
        Self::default().with_topics(each(&self.topics, |t| {
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(each(&t.partitions, |p| {
                    PartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                }))
        }))
    }
}

impl ErrorResponse for DescribeTransactionsResponse {
    fn error_response(&self, _version: i16, code: i16) -> Self {
        use describe_transactions_response::TransactionState;
        Self::default().with_transaction_states(each(&self.transaction_states, |s| {
            TransactionState::default()
                .with_transactional_id(s.transactional_id.clone())
                .with_error_code(code)
        }))
    }
}

/// The share-group state APIs answer alike: per topic id, per partition.
macro_rules! share_state_error_response {
    ($($response:ident => $module:ident :: $result:ident),* $(,)?) => {$(
        impl ErrorResponse for $response {
            fn error_response(&self, _version: i16, code: i16) -> Self {
                use $module::{PartitionResult, $result};
                Self::default().with_results(each(&self.results, |t| {
                    $result::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(each(&t.partitions, |p| {
                            PartitionResult::default()
                                .with_partition(p.partition)
                                .with_error_code(code)
                        }))
                }))
            }
        }
    )*};
}

share_state_error_response! {
    InitializeShareGroupStateResponse => initialize_share_group_state_response::InitializeStateResult,
    ReadShareGroupStateResponse => read_share_group_state_response::ReadStateResult,
    WriteShareGroupStateResponse => write_share_group_state_response::WriteStateResult,
}

#[cfg(test)]
mod tests {
    use bytes::{Buf, BytesMut};
    use kafka_protocol::protocol::{Decodable, StrBytes};

    use super::*;
    use crate::api::response_frame;
    use crate::api::table::APIS;

    #[test]
    fn a_response_outside_its_versions_schema_is_answered_with_unknown_server_error() {
        // An error message exists only from DescribeGroups v6 on.
        let group = describe_groups_response::DescribedGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("orders")))
            .with_group_state(StrBytes::from_static_str("Dead"))
            .with_error_message(Some(StrBytes::from_static_str("not a classic group")));
        let response = DescribeGroupsResponse::default().with_groups(vec![group]);
        let frame = response_frame(ApiKey::DescribeGroups, 0, 7, &response);
        assert!(!frame.closes());
        let mut bytes = frame.to_bytes().unwrap();
        assert_eq!(bytes.get_i32() as usize, frame.len() - 4);
        let header = ResponseHeader::decode(&mut bytes, 0).unwrap();
        assert_eq!(header.correlation_id, 7);
        let answered = DescribeGroupsResponse::decode(&mut bytes, 0).unwrap();
        assert!(!bytes.has_remaining());
        let group = &answered.groups[0];
        assert_eq!(group.group_id.as_str(), "orders");
        assert_eq!(group.error_code, -1, "UNKNOWN_SERVER_ERROR");
        assert_eq!(group.group_state.as_str(), "");
    }

    /// Checks `check::<Response>(key)` for every response type Weir
    /// answers with, by the key it answers.
    macro_rules! every_response {
        ($check:ident, $key:expr, $($api:ident => $response:ty),* $(,)?) => {
            match $key {
                $(ApiKey::$api => $check::<$response>(ApiKey::$api),)*
                // Fetch is encoded by hand (api/fetch_response.rs).
                ApiKey::Fetch => {}
                other => panic!("{other:?} is advertised but has no error response"),
            }
        };
    }

    fn error_responses_encode<R: ErrorResponse + Default>(key: ApiKey) {
        let (min, max) = crate::api::supported_versions(key).unwrap();
        for version in min..=max {
            let response = R::default().error_response(version, -1);
            let mut buf = BytesMut::new();
            response
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
        }
    }

    #[test]
    fn every_advertised_api_has_an_error_response_that_encodes_at_every_version() {
        for api in APIS {
            every_response!(
                error_responses_encode,
                api.key,
                Produce => ProduceResponse,
                ListOffsets => ListOffsetsResponse,
                Metadata => MetadataResponse,
                ApiVersions => ApiVersionsResponse,
                CreateTopics => CreateTopicsResponse,
                DeleteTopics => DeleteTopicsResponse,
                InitProducerId => InitProducerIdResponse,
                WriteTxnMarkers => WriteTxnMarkersResponse,
                CreatePartitions => CreatePartitionsResponse,
                DescribeConfigs => DescribeConfigsResponse,
                DescribeCluster => DescribeClusterResponse,
                DescribeQuorum => DescribeQuorumResponse,
                OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
                AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
                ListPartitionReassignments => ListPartitionReassignmentsResponse,
                ElectLeaders => ElectLeadersResponse,
                FindCoordinator => FindCoordinatorResponse,
                OffsetCommit => OffsetCommitResponse,
                OffsetFetch => OffsetFetchResponse,
                TxnOffsetCommit => TxnOffsetCommitResponse,
                ListGroups => ListGroupsResponse,
                DescribeGroups => DescribeGroupsResponse,
                DeleteGroups => DeleteGroupsResponse,
                JoinGroup => JoinGroupResponse,
                SyncGroup => SyncGroupResponse,
                Heartbeat => HeartbeatResponse,
                LeaveGroup => LeaveGroupResponse,
                ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
                ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
                ShareGroupHeartbeat => ShareGroupHeartbeatResponse,
                ShareGroupDescribe => ShareGroupDescribeResponse,
                ShareFetch => ShareFetchResponse,
                ShareAcknowledge => ShareAcknowledgeResponse,
                InitializeShareGroupState => InitializeShareGroupStateResponse,
                ReadShareGroupState => ReadShareGroupStateResponse,
                WriteShareGroupState => WriteShareGroupStateResponse,
                DescribeShareGroupOffsets => DescribeShareGroupOffsetsResponse,
                AlterShareGroupOffsets => AlterShareGroupOffsetsResponse,
                DeleteShareGroupOffsets => DeleteShareGroupOffsetsResponse,
                OffsetDelete => OffsetDeleteResponse,
                DeleteRecords => DeleteRecordsResponse,
                AlterConfigs => AlterConfigsResponse,
                IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
                AddPartitionsToTxn => AddPartitionsToTxnResponse,
                AddOffsetsToTxn => AddOffsetsToTxnResponse,
                EndTxn => EndTxnResponse,
                DescribeTransactions => DescribeTransactionsResponse,
                ListTransactions => ListTransactionsResponse,
                DescribeProducers => DescribeProducersResponse,
                DescribeTopicPartitions => DescribeTopicPartitionsResponse,
                DescribeClientQuotas => DescribeClientQuotasResponse,
                AlterClientQuotas => AlterClientQuotasResponse,
                UpdateFeatures => UpdateFeaturesResponse,
                ListConfigResources => ListConfigResourcesResponse,
                DescribeLogDirs => DescribeLogDirsResponse,
                AlterReplicaLogDirs => AlterReplicaLogDirsResponse,
                SaslHandshake => SaslHandshakeResponse,
                SaslAuthenticate => SaslAuthenticateResponse,
                DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
                AlterUserScramCredentials => AlterUserScramCredentialsResponse,
                DescribeAcls => DescribeAclsResponse,
                CreateAcls => CreateAclsResponse,
                DeleteAcls => DeleteAclsResponse,
            );
        }
    }
}
