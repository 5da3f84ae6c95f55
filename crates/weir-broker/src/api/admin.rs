//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions,
//! DeleteRecords.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_records_request::DeleteRecordsPartition;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, MetaError, ResourceType};

use super::RequestContext;
use crate::broker::quorum::MetadataError;
use crate::broker::{Broker, BrokerError, NewTopic};
use crate::config::topic;

pub(super) type Failure = (ResponseError, String);

pub(super) fn failure(error: BrokerError) -> Failure {
    let code = match &error {
        BrokerError::Meta(MetaError::TopicAlreadyExists(_)) => ResponseError::TopicAlreadyExists,
        BrokerError::Meta(MetaError::UnknownTopic(_)) => ResponseError::UnknownTopicOrPartition,
        BrokerError::Meta(MetaError::InvalidTopicName { .. }) => {
            ResponseError::InvalidTopicException
        }
        BrokerError::Meta(MetaError::InvalidPartitions(_)) => ResponseError::InvalidPartitions,
        BrokerError::Meta(MetaError::InvalidReplicationFactor(_)) => {
            ResponseError::InvalidReplicationFactor
        }
        BrokerError::Meta(MetaError::InvalidReplicaAssignment(_)) => {
            ResponseError::InvalidReplicaAssignment
        }
        BrokerError::Meta(MetaError::InvalidConfig { .. }) => ResponseError::InvalidConfig,
        BrokerError::Meta(MetaError::InvalidRequest(_)) => ResponseError::InvalidRequest,
        BrokerError::Controller(MetadataError::TimedOut(_)) => ResponseError::RequestTimedOut,
        // Retriable: the client refreshes its metadata and tries again.
        BrokerError::Controller(_) => ResponseError::NotController,
        _ => {
            tracing::error!(%error, "admin request failed");
            ResponseError::UnknownServerError
        }
    };
    (code, error.to_string())
}

/// The end of a request's `timeout_ms`, shared by the changes it asks for.
pub(super) struct Deadline(Option<Instant>);

impl Deadline {
    pub(super) fn new(timeout_ms: i32) -> Self {
        Self((timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64)))
    }

    /// What is left of it; 0 (do not wait) once it has passed, or when the
    /// request asked not to wait.
    pub(super) fn remaining_ms(&self) -> i32 {
        self.0.map_or(0, |end| {
            let left = end.saturating_duration_since(Instant::now()).as_millis();
            i32::try_from(left).unwrap_or(i32::MAX)
        })
    }
}

/// Whether a change with this `timeout_ms` comes too late to be started.
/// Kafka's controller times out a request whose deadline has passed before
/// it could start it (`KafkaEventQueue`), and a `timeout_ms` of 0 or less
/// puts the deadline at its arrival: nothing is done, and every item is
/// answered REQUEST_TIMED_OUT without a message. librdkafka, which sends 0
/// when told not to wait, hides this error from the application.
fn past_its_deadline(timeout_ms: i32) -> bool {
    timeout_ms <= 0
}

const TIMED_OUT: i16 = ResponseError::RequestTimedOut.code();

/// A new topic's manual assignment, checked as Kafka's controller checks
/// it (`ReplicationControlManager.createTopic`), in request order: no
/// partition twice, each replica list valid and as long as the ones before,
/// then partitions numbered from 0 without gaps. One replica list per
/// partition, in partition order.
fn manual_assignment(
    broker: &Broker,
    assignments: &[CreatableReplicaAssignment],
) -> Result<Vec<Vec<i32>>, Failure> {
    let invalid = |message: String| (ResponseError::InvalidReplicaAssignment, message);
    let mut by_partition: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let mut replication_factor = None;
    for assignment in assignments {
        let index = assignment.partition_index;
        if by_partition.contains_key(&index) {
            return Err(invalid(format!(
                "Found multiple manual partition assignments for partition {index}"
            )));
        }
        let replicas: Vec<i32> = assignment.broker_ids.iter().map(|b| b.0).collect();
        broker
            .with_image(|image| image.check_manual_assignment(&replicas, replication_factor))
            .map_err(|error| failure(error.into()))?;
        replication_factor = Some(replicas.len());
        by_partition.insert(index, replicas);
    }
    if !by_partition
        .keys()
        .copied()
        .eq(0..by_partition.len() as i32)
    {
        return Err(invalid(
            "partitions should be a consecutive 0-based integer sequence".to_owned(),
        ));
    }
    Ok(by_partition.into_values().collect())
}

/// The controller quorum's own log, which no client may create.
const METADATA_TOPIC: &str = "__cluster_metadata";

pub(super) async fn create_topics(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    if past_its_deadline(request.timeout_ms) {
        let topics = request
            .topics
            .into_iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(TIMED_OUT)
                    .with_error_message(None)
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            })
            .collect();
        return CreateTopicsResponse::default().with_topics(topics);
    }
    let deadline = Deadline::new(request.timeout_ms);
    broker
        .catch_up_with_controller(deadline.remaining_ms())
        .await;
    // As Kafka's controller: Create on the cluster covers every topic (its
    // denial is not logged), else each topic needs Create of its own.
    let create_on_cluster = ctx.may(
        AclOperation::Create,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    );
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    // Per topic: its name, whether its configs may be described, and the
    // creation to ask for or why not.
    let mut checked = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        // Without DescribeConfigs on the topic, a created topic is
        // answered without its configs, counts or replication factor.
        let mut describable = true;
        let prepared = (|| {
            if duplicates.contains(&name) {
                return Err((
                    ResponseError::InvalidRequest,
                    "Duplicate topic name.".to_owned(),
                ));
            }
            if name == METADATA_TOPIC {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("Creation of internal topic {METADATA_TOPIC} is prohibited."),
                ));
            }
            if !create_on_cluster
                && !ctx.authorized(&broker, AclOperation::Create, ResourceType::Topic, &name)
            {
                return Err((
                    ResponseError::TopicAuthorizationFailed,
                    "Authorization failed.".to_owned(),
                ));
            }
            describable = ctx.may(AclOperation::DescribeConfigs, ResourceType::Topic, &name);
            let configs: BTreeMap<String, String> = topic
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            // The name, then the configs, before the request's shape and
            // the placement, in the order of Kafka's controller.
            broker
                .with_image(|image| image.check_new_topic(&name, &configs))
                .and_then(|()| broker.config().check_topic_tiering(&configs))
                .map_err(|error| failure(error.into()))?;
            // The request's shape, checked in the order of Kafka's
            // controller: with a manual assignment both counts must be -1;
            // without, each is positive or -1 (the broker's default).
            let (partitions, replication_factor, assignment) = if !topic.assignments.is_empty() {
                if topic.replication_factor != -1 {
                    return Err((
                        ResponseError::InvalidRequest,
                        "A manual partition assignment was specified, but replication factor was not set to -1."
                            .to_owned(),
                    ));
                }
                if topic.num_partitions != -1 {
                    return Err((
                        ResponseError::InvalidRequest,
                        "A manual partition assignment was specified, but numPartitions was not set to -1."
                            .to_owned(),
                    ));
                }
                let assignment = manual_assignment(&broker, &topic.assignments)?;
                (assignment.len() as i32, None, Some(assignment))
            } else {
                let replication_factor = match topic.replication_factor {
                    -1 => None,
                    factor if factor > 0 => Some(i32::from(factor)),
                    _ => return Err((
                        ResponseError::InvalidReplicationFactor,
                        "Replication factor must be larger than 0, or -1 to use the default value."
                            .to_owned(),
                    )),
                };
                let partitions = match topic.num_partitions {
                    -1 => broker.config().num_partitions,
                    count if count > 0 => count,
                    _ => {
                        return Err((
                            ResponseError::InvalidPartitions,
                            "Number of partitions was set to an invalid non-positive value."
                                .to_owned(),
                        ))
                    }
                };
                (partitions, replication_factor, None)
            };
            Ok(NewTopic {
                name: name.clone(),
                partitions,
                replication_factor,
                assignment,
                configs,
            })
        })();
        checked.push((topic.name, describable, prepared));
    }
    // One creation of all the good topics, as Kafka's controller makes them.
    let new_topics: Vec<NewTopic> = checked
        .iter()
        .filter_map(|(_, _, prepared)| match prepared {
            Ok(new_topic) => Some(new_topic.clone()),
            Err(_) => None,
        })
        .collect();
    let mut created = broker
        .create_topics(new_topics, request.validate_only, deadline.remaining_ms())
        .await
        .into_iter();
    let mut topics = Vec::with_capacity(checked.len());
    for (name, describable, prepared) in checked {
        // Kafka's controller answers a success with a null message, not the
        // generated default "".
        let result = CreatableTopicResult::default()
            .with_name(name)
            .with_error_message(None);
        let outcome = match prepared {
            Ok(_) => created
                .next()
                .expect("one outcome per topic asked for")
                .map_err(failure),
            Err(failure) => Err(failure),
        };
        topics.push(match outcome {
            Ok(info) if !describable => result
                .with_topic_id(info.id)
                .with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_configs(Some(Vec::new())),
            Ok(info) => {
                let configs = topic::effective(&broker.config(), &info.configs)
                    .into_iter()
                    .map(|c| {
                        CreatableTopicConfigs::default()
                            .with_name(StrBytes::from_static_str(c.def.name))
                            .with_value(Some(StrBytes::from_string(c.value)))
                            .with_config_source(c.source as i8)
                    })
                    .collect();
                result
                    .with_topic_id(info.id)
                    .with_num_partitions(info.partitions.len() as i32)
                    .with_replication_factor(info.replication_factor() as i16)
                    .with_configs(Some(configs))
            }
            Err((code, message)) => result
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message)))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        });
    }
    CreateTopicsResponse::default().with_topics(topics)
}

pub(super) async fn delete_topics(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    if past_its_deadline(request.timeout_ms) {
        let named = request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), uuid::Uuid::nil()));
        let responses = named
            .chain(request.topics.into_iter().map(|t| (t.name, t.topic_id)))
            .map(|(name, id)| {
                DeletableTopicResult::default()
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(TIMED_OUT)
                    .with_error_message(None)
            })
            .collect();
        return DeleteTopicsResponse::default().with_responses(responses);
    }
    let deadline = Deadline::new(request.timeout_ms);
    broker
        .catch_up_with_controller(deadline.remaining_ms())
        .await;
    // As Kafka's controller: Delete on the cluster covers every topic (its
    // denial is not logged); else a topic needs Describe and Delete.
    let delete_on_cluster = ctx.may(
        AclOperation::Delete,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    );
    let may = |operation, name: &str| {
        delete_on_cluster || ctx.authorized(&broker, operation, ResourceType::Topic, name)
    };
    // v0–v5 name topics in `topic_names`; v6 in `topics`, by name or id.
    let mut wanted: Vec<(Option<String>, uuid::Uuid)> = request
        .topic_names
        .iter()
        .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
        .collect();
    wanted.extend(
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
    );
    // Kafka's controller answers a denial with the error's own message.
    let denied = |result: DeletableTopicResult| {
        result
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Topic authorization failed.",
            )))
    };
    let mut responses = Vec::with_capacity(wanted.len());
    for (named, id) in wanted {
        let by_id = named.is_none();
        let name = named
            .or_else(|| broker.with_image(|image| image.topic_by_id(id).map(|t| t.name.clone())));
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))))
            .with_topic_id(id);
        let Some(name) = name else {
            responses.push(result.with_error_code(ResponseError::UnknownTopicId.code()));
            continue;
        };
        let describable = may(AclOperation::Describe, &name);
        let deletable = may(AclOperation::Delete, &name);
        if by_id && !deletable {
            // The name is told only to who may describe the topic.
            let result = if describable {
                result
            } else {
                result.with_name(None)
            };
            responses.push(denied(result));
            continue;
        }
        if !describable {
            responses.push(denied(result));
            continue;
        }
        if !deletable {
            // Who may describe the topic learns whether it exists.
            let exists = broker.with_image(|image| image.topic(&name).is_some());
            responses.push(if exists {
                denied(result)
            } else {
                let (code, message) = failure(MetaError::UnknownTopic(name).into());
                result
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            });
            continue;
        }
        responses.push(
            match broker.delete_topic(&name, deadline.remaining_ms()).await {
                Ok(id) => result.with_topic_id(id),
                Err(error) => {
                    let (code, message) = failure(error);
                    result
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message)))
                }
            },
        );
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

pub(super) async fn create_partitions(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    if past_its_deadline(request.timeout_ms) {
        let results = request
            .topics
            .into_iter()
            .map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(TIMED_OUT)
                    .with_error_message(None)
            })
            .collect();
        return CreatePartitionsResponse::default().with_results(results);
    }
    let deadline = Deadline::new(request.timeout_ms);
    broker
        .catch_up_with_controller(deadline.remaining_ms())
        .await;
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let result = CreatePartitionsTopicResult::default().with_name(topic.name);
        // Adding partitions alters the topic; Kafka's controller answers a
        // denial without a message.
        if !ctx.authorized(&broker, AclOperation::Alter, ResourceType::Topic, &name) {
            results.push(
                result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(None),
            );
            continue;
        }
        // A list, even an empty one, is a manual assignment (Kafka checks
        // its length against the partitions added).
        let assignment = topic.assignments.as_ref().map(|assignments| {
            assignments
                .iter()
                .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                .collect()
        });
        let outcome = broker
            .create_partitions(
                &name,
                topic.count,
                assignment,
                request.validate_only,
                deadline.remaining_ms(),
            )
            .await
            .map_err(failure);
        results.push(match outcome {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// DeleteRecords: moves each partition's log start offset up to the given
/// offset (-1: the high watermark); whole segments below it are deleted.
pub(super) async fn delete_records(
    broker: &Broker,
    ctx: &RequestContext,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        // Every partition of a topic the principal may not delete from
        // is answered TOPIC_AUTHORIZATION_FAILED.
        let denied = !ctx.authorized(broker, AclOperation::Delete, ResourceType::Topic, name);
        // Kafka refuses it unless the policy deletes: the cleaner owns
        // a compacted log's start, and an empty policy keeps everything.
        let not_deleting = broker.with_image(|image| {
            image.topic(name).is_some_and(|t| {
                let effective = topic::effective(&broker.config(), &t.configs);
                effective.iter().any(|c| {
                    c.def.name == "cleanup.policy"
                        && weir_log::CleanupPolicy::parse(&c.value).is_some_and(|p| !p.delete)
                })
            })
        });
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let result = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let result = if denied {
                result.with_error_code(ResponseError::TopicAuthorizationFailed.code())
            } else if super::is_internal_topic(name) {
                // As Kafka: the coordinators own an internal topic's log.
                result.with_error_code(ResponseError::InvalidTopicException.code())
            } else {
                delete_records_of(broker, name, not_deleting, p, result).await
            };
            partitions.push(result);
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// DeleteRecords of one partition of topic `name`: `result` with the new
/// log start, or why there is none.
async fn delete_records_of(
    broker: &Broker,
    name: &str,
    not_deleting: bool,
    asked: DeleteRecordsPartition,
    result: DeleteRecordsPartitionResult,
) -> DeleteRecordsPartitionResult {
    let partition = match broker.leader_partition(name, asked.partition_index) {
        Ok(partition) => partition,
        Err(not_served) => return result.with_error_code(not_served.code()),
    };
    if not_deleting {
        return result.with_error_code(ResponseError::PolicyViolation.code());
    }
    let high_watermark = partition.high_watermark();
    let offset = if asked.offset == -1 {
        high_watermark
    } else {
        match u64::try_from(asked.offset) {
            Ok(offset) if offset <= high_watermark => offset,
            _ => return result.with_error_code(ResponseError::OffsetOutOfRange.code()),
        }
    };
    // Records in the remote tier go with its log start; its segments below
    // it are deleted by the tiering task.
    let in_remote = partition
        .remote()
        .log_start()
        .is_some_and(|remote_start| offset > remote_start);
    if in_remote {
        if let Err(error) = broker.raise_remote_log_start(&partition, offset).await {
            tracing::warn!(topic = name, partition = asked.partition_index, %error, "delete records in the remote tier failed");
            let code = match error {
                BrokerError::Meta(MetaError::FencedLeaderEpoch(_)) => {
                    ResponseError::NotLeaderOrFollower
                }
                error => failure(error).0,
            };
            return result.with_error_code(code.code());
        }
    }
    match partition.delete_records(offset).await {
        // The log starts at `offset` in both tiers now, below the local
        // log's start if the remote tier held it.
        Ok(log_start) => {
            result.with_low_watermark(if in_remote { offset } else { log_start } as i64)
        }
        Err(error) => {
            tracing::error!(topic = name, partition = asked.partition_index, %error, "delete records failed");
            result.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}
