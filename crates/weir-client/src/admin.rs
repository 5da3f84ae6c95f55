//! Cluster and topic administration: Metadata, CreateTopics,
//! DeleteTopics, DescribeConfigs.

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::error::{check, ClientError};
use crate::Client;

/// How long the broker may take over an admin request.
const ADMIN_TIMEOUT_MS: i32 = 30_000;

/// The controller quorum, as DescribeQuorum reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumStatus {
    /// The active controller; -1 while there is none.
    pub leader_id: i32,
    /// The Raft term.
    pub term: i32,
    /// The last committed entry of the metadata log.
    pub commit_index: i64,
    /// The voters' ids.
    pub voters: Vec<i32>,
}

/// The cluster as one broker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub brokers: Vec<BrokerMetadata>,
    /// Sorted by name.
    pub topics: Vec<TopicMetadata>,
}

impl Metadata {
    /// The topic called `name`, if the response has it.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.iter().find(|t| t.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub name: String,
    /// Nil before Metadata v10.
    pub topic_id: Uuid,
    pub is_internal: bool,
    /// Sorted by partition index.
    pub partitions: Vec<PartitionMetadata>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    /// A Kafka error code for this partition (e.g. LEADER_NOT_AVAILABLE);
    /// 0 when it is served normally.
    pub error_code: i16,
    /// -1 when there is no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
}

/// What CreateTopics made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopic {
    pub name: String,
    /// Nil before CreateTopics v7.
    pub topic_id: Uuid,
    pub partitions: i32,
}

/// What DescribeConfigs describes and AlterConfigs changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigResource {
    Topic(String),
    /// One broker: its configs in force (describe), its own dynamic
    /// configs (alter).
    Broker(i32),
    /// The cluster-wide default of the dynamic broker configs (Kafka's
    /// broker resource named "").
    BrokerDefault,
}

impl ConfigResource {
    fn kafka_type(&self) -> i8 {
        match self {
            Self::Topic(_) => 2,
            Self::Broker(_) | Self::BrokerDefault => 4,
        }
    }

    fn name(&self) -> String {
        match self {
            Self::Topic(name) => name.clone(),
            Self::Broker(id) => id.to_string(),
            Self::BrokerDefault => String::new(),
        }
    }
}

/// Where a config value comes from (Kafka's `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Set on the topic.
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    /// Set in the broker's configuration.
    StaticBroker,
    /// The built-in default.
    Default,
    DynamicBrokerLogger,
    Unknown(i8),
}

impl ConfigSource {
    fn from_kafka(source: i8) -> Self {
        match source {
            1 => Self::DynamicTopic,
            2 => Self::DynamicBroker,
            3 => Self::DynamicDefaultBroker,
            4 => Self::StaticBroker,
            5 => Self::Default,
            6 => Self::DynamicBrokerLogger,
            other => Self::Unknown(other),
        }
    }
}

/// One config of a described resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for sensitive values.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub is_sensitive: bool,
}

impl ConfigEntry {
    /// True when nothing overrides the built-in default.
    pub fn is_default(&self) -> bool {
        self.source == ConfigSource::Default
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn text(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

impl Client {
    /// Metadata for `topics`, or for every topic with `None`. Never
    /// creates topics. A topic the broker reports an error for (such as
    /// UNKNOWN_TOPIC_OR_PARTITION) fails the call.
    pub async fn metadata(&mut self, topics: Option<&[String]>) -> Result<Metadata, ClientError> {
        let version = self.require_version(ApiKey::Metadata)?;
        let topics = match topics {
            None if version == 0 => Some(Vec::new()),
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                    .collect(),
            ),
        };
        // Before v4 the field does not exist (and must stay at its
        // default, true); such brokers decide by their own config.
        let request = MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(version < 4);
        let response: MetadataResponse = self
            .call_version(ApiKey::Metadata, version, &request)
            .await?;
        check(response.error_code, None)?;
        let mut result = Metadata {
            cluster_id: text(response.cluster_id),
            controller_id: response.controller_id.0,
            brokers: response
                .brokers
                .into_iter()
                .map(|b| BrokerMetadata {
                    node_id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: text(b.rack),
                })
                .collect(),
            topics: Vec::with_capacity(response.topics.len()),
        };
        for topic in response.topics {
            let name = topic.name.map(|n| n.0.to_string()).unwrap_or_default();
            check(topic.error_code, None).map_err(|error| with_subject(error, "topic", &name))?;
            let mut partitions: Vec<PartitionMetadata> = topic
                .partitions
                .into_iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    error_code: p.error_code,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.into_iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.into_iter().map(|b| b.0).collect(),
                    offline_replicas: p.offline_replicas.into_iter().map(|b| b.0).collect(),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            result.topics.push(TopicMetadata {
                name,
                topic_id: topic.topic_id,
                is_internal: topic.is_internal,
                partitions,
            });
        }
        result.topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(result)
    }

    /// Every registered broker with whether it is fenced (down, or not
    /// heartbeating): DescribeCluster v2's `IncludeFencedBrokers`
    /// (KIP-1073); the live ones alone from a broker without it.
    pub async fn registered_brokers(&mut self) -> Result<Vec<(BrokerMetadata, bool)>, ClientError> {
        use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};
        let version = self.require_version(ApiKey::DescribeCluster)?;
        let request = DescribeClusterRequest::default().with_include_fenced_brokers(version >= 2);
        let response: DescribeClusterResponse = self
            .call_version(ApiKey::DescribeCluster, version, &request)
            .await?;
        check(response.error_code, text(response.error_message))?;
        Ok(response
            .brokers
            .into_iter()
            .map(|b| {
                (
                    BrokerMetadata {
                        node_id: b.broker_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                        rack: b.rack.map(|r| r.to_string()),
                    },
                    b.is_fenced,
                )
            })
            .collect())
    }

    /// The controller quorum's leader, term, commit index and voters.
    pub async fn describe_quorum(&mut self) -> Result<QuorumStatus, ClientError> {
        use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
        use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse};
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(topic_name("__cluster_metadata"))
            .with_partitions(vec![PartitionData::default()])]);
        let response: DescribeQuorumResponse = self.call(ApiKey::DescribeQuorum, &request).await?;
        check(response.error_code, text(response.error_message))?;
        let partition = response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or_else(|| ClientError::Protocol {
                addr: self.addr().to_owned(),
                reason: "DescribeQuorum answered without the metadata log".to_owned(),
            })?;
        check(partition.error_code, text(partition.error_message))?;
        Ok(QuorumStatus {
            leader_id: partition.leader_id.0,
            term: partition.leader_epoch,
            commit_index: partition.high_watermark,
            voters: partition
                .current_voters
                .iter()
                .map(|v| v.replica_id.0)
                .collect(),
        })
    }

    /// Creates a topic with `partitions` partitions, the broker's default
    /// replication factor, and `configs` as topic config overrides.
    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<CreatedTopic, ClientError> {
        self.create_topic_replicated(name, partitions, -1, configs)
            .await
    }

    /// [`create_topic`](Self::create_topic) with `replication_factor`
    /// replicas of each partition (-1: the broker's default).
    pub async fn create_topic_replicated(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> Result<CreatedTopic, ClientError> {
        let version = self.require_version(ApiKey::CreateTopics)?;
        let topic = CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            // -1 (the broker's default) needs v4.
            .with_replication_factor(match replication_factor {
                -1 if version < 4 => 1,
                factor => factor,
            })
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.clone()))
                            .with_value(Some(StrBytes::from_string(v.clone())))
                    })
                    .collect(),
            );
        let request = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(ADMIN_TIMEOUT_MS);
        let response: CreateTopicsResponse = self
            .call_version(ApiKey::CreateTopics, version, &request)
            .await?;
        let result = response
            .topics
            .into_iter()
            .find(|t| t.name.0.as_str() == name)
            .ok_or_else(|| self.missing("CreateTopics", name))?;
        check(result.error_code, text(result.error_message))?;
        Ok(CreatedTopic {
            name: name.to_owned(),
            topic_id: result.topic_id,
            partitions: if result.num_partitions > 0 {
                result.num_partitions
            } else {
                partitions
            },
        })
    }

    /// Grows a topic to `total` partitions.
    pub async fn create_partitions(&mut self, name: &str, total: i32) -> Result<(), ClientError> {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
        use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
        let version = self.require_version(ApiKey::CreatePartitions)?;
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name(name))
                .with_count(total)
                // Null: placed by the broker (an empty list would be a
                // manual assignment of no partitions).
                .with_assignments(None)]);
        let response: CreatePartitionsResponse = self
            .call_version(ApiKey::CreatePartitions, version, &request)
            .await?;
        let result = response
            .results
            .into_iter()
            .find(|r| r.name.0.as_str() == name)
            .ok_or_else(|| self.missing("CreatePartitions", name))?;
        check(result.error_code, text(result.error_message))
    }

    /// Starts moving partition `partition` of `topic` to `replicas`
    /// (preferred leader first), or with `None` cancels its move.
    pub async fn reassign_partition(
        &mut self,
        topic: &str,
        partition: i32,
        replicas: Option<&[i32]>,
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::alter_partition_reassignments_request::{
            ReassignablePartition, ReassignableTopic,
        };
        use kafka_protocol::messages::{
            AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
        };
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![ReassignableTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(partition)
                    .with_replicas(
                        replicas.map(|r| r.iter().copied().map(BrokerId).collect()),
                    )])]);
        let response: AlterPartitionReassignmentsResponse = self
            .call(ApiKey::AlterPartitionReassignments, &request)
            .await?;
        check(response.error_code, text(response.error_message))?;
        let subject = format!("{topic}-{partition}");
        let result = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| self.missing("AlterPartitionReassignments", &subject))?;
        check(result.error_code, text(result.error_message))
    }

    /// The partitions being moved: (topic, partition, replicas, adding,
    /// removing).
    pub async fn list_reassignments(
        &mut self,
    ) -> Result<Vec<(String, i32, Vec<i32>, Vec<i32>, Vec<i32>)>, ClientError> {
        use kafka_protocol::messages::{
            ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
        };
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(None);
        let response: ListPartitionReassignmentsResponse = self
            .call(ApiKey::ListPartitionReassignments, &request)
            .await?;
        check(response.error_code, text(response.error_message))?;
        let ids =
            |list: Vec<kafka_protocol::messages::BrokerId>| list.into_iter().map(|b| b.0).collect();
        Ok(response
            .topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partitions.into_iter().map(move |p| {
                    (
                        name.clone(),
                        p.partition_index,
                        ids(p.replicas),
                        ids(p.adding_replicas),
                        ids(p.removing_replicas),
                    )
                })
            })
            .collect())
    }

    /// ElectLeaders: moves leadership to each partition's preferred
    /// replica (or, `unclean`, to any replica of a partition without a
    /// leader) for `partitions`, or for every partition with `None`.
    /// Returns each partition the controller answered for, with its error
    /// (ELECTION_NOT_NEEDED: the preferred replica leads already).
    pub async fn elect_leaders(
        &mut self,
        unclean: bool,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<(String, i32, Option<ClientError>)>, ClientError> {
        use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
        use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
        let topics = partitions.map(|partitions| {
            let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
            for (topic, partition) in partitions {
                by_topic.entry(topic).or_default().push(*partition);
            }
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicPartitions::default()
                        .with_topic(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect()
        });
        let request = ElectLeadersRequest::default()
            .with_election_type(i8::from(unclean))
            .with_topic_partitions(topics)
            .with_timeout_ms(ADMIN_TIMEOUT_MS);
        let response: ElectLeadersResponse = self.call(ApiKey::ElectLeaders, &request).await?;
        check(response.error_code, None)?;
        let mut results: Vec<(String, i32, Option<ClientError>)> = response
            .replica_election_results
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic.0.to_string();
                t.partition_result.into_iter().map(move |p| {
                    (
                        topic.clone(),
                        p.partition_id,
                        ClientError::from_code(p.error_code, text(p.error_message)),
                    )
                })
            })
            .collect();
        results.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(results)
    }

    /// Deletes a topic by name.
    pub async fn delete_topic(&mut self, name: &str) -> Result<(), ClientError> {
        let version = self.require_version(ApiKey::DeleteTopics)?;
        let mut request = DeleteTopicsRequest::default().with_timeout_ms(ADMIN_TIMEOUT_MS);
        if version >= 6 {
            request.topics = vec![DeleteTopicState::default().with_name(Some(topic_name(name)))];
        } else {
            request.topic_names = vec![topic_name(name)];
        }
        let response: DeleteTopicsResponse = self
            .call_version(ApiKey::DeleteTopics, version, &request)
            .await?;
        let result = response
            .responses
            .into_iter()
            .find(|r| r.name.as_ref().is_some_and(|n| n.0.as_str() == name))
            .ok_or_else(|| self.missing("DeleteTopics", name))?;
        check(result.error_code, text(result.error_message))
    }

    /// Every config of a topic or broker, with where its value comes
    /// from.
    pub async fn describe_configs(
        &mut self,
        resource: ConfigResource,
    ) -> Result<Vec<ConfigEntry>, ClientError> {
        let version = self.require_version(ApiKey::DescribeConfigs)?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource.kafka_type())
                .with_resource_name(StrBytes::from_string(resource.name()))
                .with_configuration_keys(None),
        ]);
        let response: DescribeConfigsResponse = self
            .call_version(ApiKey::DescribeConfigs, version, &request)
            .await?;
        let result = response
            .results
            .into_iter()
            .next()
            .ok_or_else(|| self.missing("DescribeConfigs", &resource.name()))?;
        check(result.error_code, text(result.error_message))?;
        Ok(result
            .configs
            .into_iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: text(c.value),
                source: ConfigSource::from_kafka(c.config_source),
                read_only: c.read_only,
                is_sensitive: c.is_sensitive,
            })
            .collect())
    }

    /// Sets and removes a topic's config overrides in one request
    /// (IncrementalAlterConfigs SET and DELETE), validated by the broker.
    pub async fn alter_topic_configs(
        &mut self,
        topic: &str,
        set: &[(String, String)],
        delete: &[String],
    ) -> Result<(), ClientError> {
        self.alter_configs(ConfigResource::Topic(topic.to_owned()), set, delete)
            .await
    }

    /// Sets and removes configs of a resource in one request
    /// (IncrementalAlterConfigs SET and DELETE), validated by the broker: a
    /// topic's overrides, a broker's dynamic configs, or the cluster-wide
    /// default of the dynamic broker configs.
    pub async fn alter_configs(
        &mut self,
        resource: ConfigResource,
        set: &[(String, String)],
        delete: &[String],
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        use kafka_protocol::messages::{
            IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
        };
        const SET: i8 = 0;
        const DELETE: i8 = 1;
        let version = self.require_version(ApiKey::IncrementalAlterConfigs)?;
        let configs = set
            .iter()
            .map(|(name, value)| (name, SET, Some(StrBytes::from_string(value.clone()))))
            .chain(delete.iter().map(|name| (name, DELETE, None)))
            .map(|(name, operation, value)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(name.clone()))
                    .with_config_operation(operation)
                    .with_value(value)
            })
            .collect();
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource.kafka_type())
                .with_resource_name(StrBytes::from_string(resource.name()))
                .with_configs(configs),
        ]);
        let response: IncrementalAlterConfigsResponse = self
            .call_version(ApiKey::IncrementalAlterConfigs, version, &request)
            .await?;
        let result = response
            .responses
            .into_iter()
            .next()
            .ok_or_else(|| self.missing("IncrementalAlterConfigs", &resource.name()))?;
        check(result.error_code, text(result.error_message))
    }

    pub(crate) fn missing(&self, api: &str, subject: &str) -> ClientError {
        ClientError::Protocol {
            addr: self.addr().to_owned(),
            reason: format!("{api} response does not mention {subject:?}"),
        }
    }
}

/// Adds what the error is about when the broker did not say.
pub(crate) fn with_subject(error: ClientError, kind: &str, name: &str) -> ClientError {
    match error {
        ClientError::Kafka {
            code,
            name: error_name,
            message: None,
        } => ClientError::Kafka {
            code,
            name: error_name,
            message: Some(format!("{kind} '{name}'")),
        },
        other => other,
    }
}
