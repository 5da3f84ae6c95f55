//! Metadata: brokers, topics and partition leaders; auto-creates topics
//! when allowed.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::HashSet;
use uuid::Uuid;
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::AclOperation::{Create, Describe};
use weir_meta::ResourceType::{Cluster, Topic};
use weir_meta::{MetaError, MetadataImage, TopicInfo};

use super::{authorized_operations, RequestContext};
use crate::broker::{Broker, BrokerError};

pub(super) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    request: MetadataRequest,
) -> MetadataResponse {
    // v12+ may name topics by id (the Java admin client's describeTopics of
    // topic ids): as Kafka, when any id is given, the names are not looked
    // at; an unknown id is UNKNOWN_TOPIC_ID, and nothing is auto-created.
    let ids: Vec<Uuid> = match &request.topics {
        Some(topics) if ctx.version >= 12 => topics
            .iter()
            .map(|t| t.topic_id)
            .filter(|id| !id.is_nil())
            .collect(),
        _ => Vec::new(),
    };
    // v0: an empty list means every topic; v1+: null does.
    let wanted: Option<Vec<String>> = match request.topics {
        None => None,
        Some(topics) if topics.is_empty() && ctx.version == 0 => None,
        Some(topics) => Some(
            topics
                .into_iter()
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect(),
        ),
    };
    let auto_create = broker.config().auto_create_topics_enable
        && (ctx.version < 4 || request.allow_auto_topic_creation);
    let mut topics = Vec::new();
    match wanted {
        _ if !ids.is_empty() => broker.with_image(|image| {
            let mut seen = HashSet::new();
            for id in ids.into_iter().filter(|id| seen.insert(*id)) {
                topics.push(match image.topic_by_id(id) {
                    Some(topic) if !ctx.authorized(broker, Describe, Topic, &topic.name) => {
                        MetadataResponseTopic::default()
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                            .with_name(None)
                            .with_topic_id(id)
                    }
                    Some(topic) => topic_response(image, topic),
                    None => MetadataResponseTopic::default()
                        .with_error_code(ResponseError::UnknownTopicId.code())
                        .with_name(None)
                        .with_topic_id(id),
                });
            }
        }),
        // Every topic the principal may see.
        None => broker.with_image(|image| {
            topics.extend(
                image
                    .topics()
                    .filter(|t| ctx.may(Describe, Topic, &t.name))
                    .map(|t| topic_response(image, t)),
            );
        }),
        Some(names) => {
            for name in names {
                if !ctx.authorized(broker, Describe, Topic, &name) {
                    topics.push(error_topic(&name, ResponseError::TopicAuthorizationFailed));
                    continue;
                }
                let known =
                    broker.with_image(|image| image.topic(&name).map(|t| topic_response(image, t)));
                // Creating needs Create on the cluster or on the topic.
                let may_create = || {
                    ctx.may(Create, Cluster, CLUSTER_RESOURCE_NAME)
                        || ctx.authorized(broker, Create, Topic, &name)
                };
                let response = match known {
                    Some(topic) => topic,
                    None if auto_create && may_create() => auto_create_topic(broker, &name),
                    None if auto_create => {
                        error_topic(&name, ResponseError::TopicAuthorizationFailed)
                    }
                    None => error_topic(&name, ResponseError::UnknownTopicOrPartition),
                };
                topics.push(response);
            }
        }
    }
    // Clients connect only to brokers that are alive, as in Kafka, on the
    // listener they came in on: a broker without it is left out.
    let listener = ctx.channel.listener();
    let brokers = broker.with_image(|image| {
        image
            .live_brokers()
            .filter_map(|b| {
                let (host, port) = b.endpoint(listener)?;
                Some(
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.id))
                        .with_host(StrBytes::from_string(host.to_owned()))
                        .with_port(i32::from(port))
                        .with_rack(b.rack.clone().map(StrBytes::from_string)),
                )
            })
            .collect()
    });
    if ctx.version >= 8 && request.include_topic_authorized_operations {
        for topic in &mut topics {
            let name = topic.name.as_ref().map(|n| n.0.to_string());
            topic.topic_authorized_operations =
                authorized_operations::topic(ctx, name.as_deref().unwrap_or_default());
        }
    }
    let mut response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id().to_owned())))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_topics(topics);
    // Versions 8 to 10 only; later ones ask DescribeCluster.
    if (8..=10).contains(&ctx.version) && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = authorized_operations::cluster(ctx);
    }
    response
}

fn auto_create_topic(broker: &Broker, name: &str) -> MetadataResponseTopic {
    // As Kafka: the creation goes to the controller and the client, told
    // the topic is unknown for now, asks again.
    match broker.auto_create_topic(name) {
        Ok(()) => error_topic(name, ResponseError::UnknownTopicOrPartition),
        Err(BrokerError::Meta(MetaError::TopicAlreadyExists(_))) => broker
            .with_image(|image| image.topic(name).map(|t| topic_response(image, t)))
            .unwrap_or_else(|| error_topic(name, ResponseError::UnknownTopicOrPartition)),
        Err(BrokerError::Meta(MetaError::InvalidTopicName { .. })) => {
            error_topic(name, ResponseError::InvalidTopicException)
        }
        Err(BrokerError::Meta(MetaError::InvalidReplicationFactor(reason))) => {
            tracing::warn!(topic = name, reason, "cannot auto-create topic");
            error_topic(name, ResponseError::InvalidReplicationFactor)
        }
        Err(error) => {
            tracing::warn!(topic = name, %error, "auto-creating topic failed");
            error_topic(name, ResponseError::UnknownServerError)
        }
    }
}

fn topic_response(image: &MetadataImage, topic: &TopicInfo) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let offline = p
                .replicas
                .iter()
                .copied()
                .filter(|id| image.is_fenced(*id))
                .map(BrokerId)
                .collect();
            let error = if p.leader < 0 {
                ResponseError::LeaderNotAvailable.code()
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                .with_offline_replicas(offline)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.internal)
        .with_partitions(partitions)
}

fn error_topic(name: &str, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
}
