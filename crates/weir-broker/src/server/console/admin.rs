//! The console's changes, each authorized for the HTTP user with the ACL
//! Kafka's matching request needs (when the broker has an authorizer):
//!
//! - `POST /v1/topics` (CreateTopics: Create on the topic or the cluster);
//! - `POST /v1/topics/{topic}/partitions` (CreatePartitions: Alter);
//! - `PATCH /v1/topics/{topic}/configs` (IncrementalAlterConfigs:
//!   AlterConfigs);
//! - `DELETE /v1/topics/{topic}` (DeleteTopics: Delete), refused for
//!   internal topics;
//! - `POST /v1/topics/{topic}/messages` (Produce: Write), one test record;
//! - `POST /v1/groups/{group}/reset-offsets` (OffsetCommit: Read on the
//!   group and the topic), with a dry run.
//!
//! Every change takes a JSON body (DELETE excepted) and, when the browser
//! sends an `Origin`, only this endpoint's own: a page of another site can
//! send neither without the browser asking first, and it is not asked.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use weir_client::{Client, ClientConfig, Cluster, OutgoingRecord};
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use crate::broker::{Broker, NewTopic};
use crate::server::http::HttpPrincipal;

/// How long a change may take at the controller.
const TIMEOUT_MS: i32 = 30_000;

use super::{allowed, Principal};

/// The answer to a change: 200 with `body`, or an error with a message.
fn failed(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (
        status,
        Json(serde_json::json!({ "error": message.to_string() })),
    )
        .into_response()
}

/// A change the console does not make: the console is read-only
/// (`weir.console.read.only`), or a page of another site sent it (its
/// `Origin` is not this endpoint's).
fn refused_change(broker: &Broker, headers: &HeaderMap) -> Option<Response> {
    if broker.config().console_read_only {
        return Some(failed(
            StatusCode::FORBIDDEN,
            "the console is read-only (weir.console.read.only)",
        ));
    }
    let origin = headers.get(header::ORIGIN)?.to_str().ok()?;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok())?;
    let same = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|rest| rest == host);
    (!same).then(|| failed(StatusCode::FORBIDDEN, "a change from another site's page"))
}

/// Whether the HTTP user may do `operation` on the resource, when the
/// broker has an authorizer; a refusal names what is missing.
fn authorize(
    broker: &Broker,
    principal: &Principal,
    operation: AclOperation,
    resource: ResourceType,
    name: &str,
) -> Option<Response> {
    if allowed(broker, principal, operation, resource, name) {
        return None;
    }
    let Some(Extension(HttpPrincipal { principal, .. })) = principal else {
        return Some(failed(StatusCode::FORBIDDEN, "changes need a user"));
    };
    broker
        .metrics()
        .authorization_denied(principal, operation, resource, name);
    Some(failed(
        StatusCode::FORBIDDEN,
        format!("{principal} needs {operation:?} on {resource:?} {name}"),
    ))
}

/// [`refused_change`], then [`authorize`] `operation` on `topic`.
fn topic_change(
    broker: &Broker,
    principal: &Principal,
    headers: &HeaderMap,
    operation: AclOperation,
    topic: &str,
) -> Option<Response> {
    refused_change(broker, headers)
        .or_else(|| authorize(broker, principal, operation, ResourceType::Topic, topic))
}

fn broker_error(error: crate::broker::BrokerError) -> Response {
    let text = error.to_string();
    let status = if text.contains("does not exist") || text.contains("Unknown topic") {
        StatusCode::NOT_FOUND
    } else if text.contains("already exists") {
        StatusCode::CONFLICT
    } else if matches!(error, crate::broker::BrokerError::Meta(_)) {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    failed(status, text)
}

fn done() -> Response {
    Json(serde_json::json!({})).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateTopic {
    name: String,
    partitions: i32,
    replication_factor: Option<i32>,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

pub(crate) async fn create_topic(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    headers: HeaderMap,
    Json(new): Json<CreateTopic>,
) -> Response {
    if let Some(refused) = refused_change(&broker, &headers) {
        return refused;
    }
    let by_cluster = authorize(
        &broker,
        &principal,
        AclOperation::Create,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    );
    if by_cluster.is_some() {
        if let Some(refused) = authorize(
            &broker,
            &principal,
            AclOperation::Create,
            ResourceType::Topic,
            &new.name,
        ) {
            return refused;
        }
    }
    if crate::api::is_internal_topic(&new.name) {
        return failed(
            StatusCode::FORBIDDEN,
            "internal topics are created by the broker",
        );
    }
    let topic = NewTopic {
        name: new.name,
        partitions: new.partitions,
        replication_factor: new.replication_factor,
        assignment: None,
        configs: new.configs,
    };
    match broker
        .create_topics(vec![topic], false, TIMEOUT_MS)
        .await
        .pop()
    {
        Some(Ok(_)) => done(),
        Some(Err(error)) => broker_error(error),
        None => failed(StatusCode::SERVICE_UNAVAILABLE, "no answer"),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct AddPartitions {
    /// The partition count wanted.
    total: i32,
}

pub(crate) async fn add_partitions(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    headers: HeaderMap,
    Path(topic): Path<String>,
    Json(asked): Json<AddPartitions>,
) -> Response {
    if let Some(refused) = topic_change(&broker, &principal, &headers, AclOperation::Alter, &topic)
    {
        return refused;
    }
    match broker
        .create_partitions(&topic, asked.total, None, false, TIMEOUT_MS)
        .await
    {
        Ok(()) => done(),
        Err(error) => broker_error(error),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct AlterConfigs {
    #[serde(default)]
    set: BTreeMap<String, String>,
    #[serde(default)]
    delete: Vec<String>,
}

pub(crate) async fn alter_configs(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    headers: HeaderMap,
    Path(topic): Path<String>,
    Json(change): Json<AlterConfigs>,
) -> Response {
    if let Some(refused) = topic_change(
        &broker,
        &principal,
        &headers,
        AclOperation::AlterConfigs,
        &topic,
    ) {
        return refused;
    }
    match broker
        .alter_topic_configs(&topic, change.set, change.delete, false)
        .await
    {
        Ok(()) => done(),
        Err(error) => broker_error(error),
    }
}

pub(crate) async fn delete_topic(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    headers: HeaderMap,
    Path(topic): Path<String>,
) -> Response {
    if let Some(refused) = topic_change(&broker, &principal, &headers, AclOperation::Delete, &topic)
    {
        return refused;
    }
    if crate::api::is_internal_topic(&topic) {
        return failed(
            StatusCode::FORBIDDEN,
            format!("{topic} is internal: the console does not delete it"),
        );
    }
    match broker.delete_topic(&topic, TIMEOUT_MS).await {
        Ok(_) => done(),
        Err(error) => broker_error(error),
    }
}

/// A client of this cluster through this broker's own listener, as the
/// broker itself (its inter-broker credentials): for what the console does
/// with Kafka's requests, once the HTTP user is authorized.
async fn cluster_client(broker: &Broker) -> Result<Cluster, weir_client::ClientError> {
    let addr = broker.with_image(|image| {
        image
            .broker(broker.node_id())
            .map(|b| format!("{}:{}", b.host, b.port))
    });
    let addr = addr.ok_or_else(|| {
        weir_client::ClientError::InvalidArgument("this broker is not registered yet".to_owned())
    })?;
    let config = ClientConfig {
        client_id: "weir-console".to_owned(),
        ..ClientConfig::default()
    };
    let client =
        Client::connect_with_security(&addr, config, broker.inter_broker_security().clone())
            .await?;
    Ok(Cluster::from_client(client))
}

#[derive(Debug, Deserialize)]
pub(crate) struct TestRecord {
    partition: Option<i32>,
    key: Option<String>,
    value: Option<String>,
    #[serde(default)]
    headers: Vec<(String, Option<String>)>,
}

#[derive(Debug, Serialize)]
struct Written {
    partition: i32,
    offset: i64,
}

pub(crate) async fn produce(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    headers: HeaderMap,
    Path(topic): Path<String>,
    Json(record): Json<TestRecord>,
) -> Response {
    if let Some(refused) = topic_change(&broker, &principal, &headers, AclOperation::Write, &topic)
    {
        return refused;
    }
    let Some(count) = broker.with_image(|image| image.topic(&topic).map(|t| t.partition_count()))
    else {
        return failed(
            StatusCode::NOT_FOUND,
            format!("topic {topic} does not exist"),
        );
    };
    let partition = match (record.partition, &record.key) {
        (Some(p), _) if (0..count).contains(&p) => p,
        (Some(p), _) => {
            return failed(
                StatusCode::BAD_REQUEST,
                format!("topic {topic} has no partition {p}"),
            )
        }
        (None, Some(key)) => weir_client::murmur2_partition(key.as_bytes(), count),
        (None, None) => 0,
    };
    let outgoing = OutgoingRecord {
        key: record.key.map(Bytes::from),
        value: record.value.map(Bytes::from),
        headers: record
            .headers
            .into_iter()
            .map(|(k, v)| (k, v.map(Bytes::from)))
            .collect(),
    };
    let written = async {
        let mut cluster = cluster_client(&broker).await?;
        cluster
            .produce_records(
                &topic,
                partition,
                vec![outgoing],
                weir_client::Compression::None,
            )
            .await
    }
    .await;
    match written {
        Ok(offset) => Json(Written { partition, offset }).into_response(),
        Err(error) => failed(StatusCode::BAD_REQUEST, error),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ResetOffsets {
    topic: String,
    /// `earliest`, `latest`, `offset` or `time`.
    to: String,
    offset: Option<i64>,
    /// Milliseconds since the epoch, with `to=time`.
    time: Option<i64>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Debug, Serialize)]
struct NewOffset {
    partition: i32,
    offset: i64,
}

pub(crate) async fn reset_offsets(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    headers: HeaderMap,
    Path(group): Path<String>,
    Json(reset): Json<ResetOffsets>,
) -> Response {
    if let Some(refused) = refused_change(&broker, &headers)
        .or_else(|| {
            authorize(
                &broker,
                &principal,
                AclOperation::Read,
                ResourceType::Group,
                &group,
            )
        })
        .or_else(|| {
            authorize(
                &broker,
                &principal,
                AclOperation::Read,
                ResourceType::Topic,
                &reset.topic,
            )
        })
    {
        return refused;
    }
    let Some(count) =
        broker.with_image(|image| image.topic(&reset.topic).map(|t| t.partition_count()))
    else {
        return failed(
            StatusCode::NOT_FOUND,
            format!("topic {} does not exist", reset.topic),
        );
    };
    let outcome = async {
        let mut cluster = cluster_client(&broker).await?;
        let mut offsets = Vec::new();
        for partition in 0..count {
            let start = cluster
                .list_offsets(&reset.topic, partition, weir_client::EARLIEST)
                .await?;
            let end = cluster
                .list_offsets(&reset.topic, partition, weir_client::LATEST)
                .await?;
            let offset = match reset.to.as_str() {
                "earliest" => start,
                "latest" => end,
                "offset" => reset.offset.unwrap_or(start).clamp(start, end),
                "time" => {
                    let at = cluster
                        .list_offsets(&reset.topic, partition, reset.time.unwrap_or(0))
                        .await?;
                    if at < 0 {
                        end
                    } else {
                        at
                    }
                }
                other => {
                    return Err(weir_client::ClientError::InvalidArgument(format!(
                        "to must be earliest, latest, offset or time, not {other:?}"
                    )))
                }
            };
            offsets.push(NewOffset { partition, offset });
        }
        if !reset.dry_run {
            let commits: Vec<(String, i32, i64)> = offsets
                .iter()
                .map(|o| (reset.topic.clone(), o.partition, o.offset))
                .collect();
            let coordinator = cluster.any().find_coordinator(&group).await?;
            let mut client = cluster.any().connect_to_broker(&coordinator.addr()).await?;
            client.offset_commit_simple(&group, &commits).await?;
        }
        Ok(offsets)
    }
    .await;
    match outcome {
        Ok(offsets) => Json(serde_json::json!({ "dry_run": reset.dry_run, "offsets": offsets }))
            .into_response(),
        Err(error)
            if [
                weir_client::ResponseError::UnknownMemberId,
                weir_client::ResponseError::IllegalGeneration,
                weir_client::ResponseError::StaleMemberEpoch,
            ]
            .into_iter()
            .any(|e| error.is(e)) =>
        {
            failed(
                StatusCode::CONFLICT,
                format!("group {group} has active members: stop its consumers first"),
            )
        }
        Err(error) => failed(StatusCode::BAD_REQUEST, error),
    }
}
