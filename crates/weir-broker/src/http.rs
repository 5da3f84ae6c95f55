//! The HTTP endpoint: readiness, Prometheus metrics, cluster description.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::broker::Broker;
use crate::lag::{self, GroupLag};
use crate::metrics::{GroupPartitionLabels, PartitionLabels};

pub fn router(broker: Arc<Broker>) -> Router {
    Router::new()
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/v1/cluster", get(cluster))
        .route("/v1/groups", get(groups))
        .route("/v1/groups/{group}", get(group))
        .with_state(broker)
}

async fn ready(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    if broker.is_serving() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}

async fn metrics(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    let metrics = broker.metrics();
    metrics.log_end_offset.clear();
    for partition in broker.all_partitions() {
        let labels = PartitionLabels {
            topic: partition.topic.clone(),
            partition: partition.index.to_string(),
        };
        metrics
            .log_end_offset
            .get_or_create(&labels)
            .set(partition.log().log_end_offset() as i64);
    }
    metrics.consumer_group_lag.clear();
    metrics.consumer_group_lag_seconds.clear();
    metrics.consumer_group_lost_to_retention.clear();
    let broker_for_lag = broker.clone();
    let lags = tokio::task::spawn_blocking(move || lag::groups(&broker_for_lag, None))
        .await
        .unwrap_or_default();
    for group in lags {
        for p in group.partitions {
            let labels = GroupPartitionLabels {
                group: group.group.clone(),
                topic: p.topic,
                partition: p.partition.to_string(),
            };
            metrics
                .consumer_group_lag
                .get_or_create(&labels)
                .set(p.lag as i64);
            metrics
                .consumer_group_lag_seconds
                .get_or_create(&labels)
                .set(p.lag_seconds);
            metrics
                .consumer_group_lost_to_retention
                .get_or_create(&labels)
                .set(p.lost_to_retention as i64);
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

#[derive(Serialize)]
struct ClusterView {
    node_id: i32,
    /// The active controller (the Raft leader), -1 while there is none.
    controller_id: i64,
    cluster_id: String,
    brokers: Vec<BrokerView>,
    /// Partitions with no leader (every in-sync replica is down).
    offline_partitions: Vec<PartitionRef>,
    /// Partitions whose ISR is smaller than their replica set.
    under_replicated_partitions: Vec<PartitionRef>,
    /// The controller quorum as this node sees it.
    controller: ControllerView,
}

#[derive(Serialize)]
struct PartitionRef {
    topic: String,
    partition: i32,
}

#[derive(Serialize)]
struct ControllerView {
    role: String,
    leader_id: Option<u64>,
    term: u64,
    last_log_index: Option<u64>,
    applied_index: Option<u64>,
    snapshot_index: Option<u64>,
    voters: Vec<VoterView>,
}

#[derive(Serialize)]
struct VoterView {
    id: u64,
    address: String,
}

#[derive(Serialize)]
struct BrokerView {
    id: i32,
    host: String,
    port: u16,
    rack: Option<String>,
    /// Fenced: missed its heartbeats or shut down; leads nothing.
    fenced: bool,
    /// The partitions it leads.
    leaders: usize,
}

async fn cluster(State(broker): State<Arc<Broker>>) -> Json<ClusterView> {
    let image = broker.image();
    let brokers = image
        .brokers()
        .map(|b| BrokerView {
            id: b.id,
            host: b.host.clone(),
            port: b.port,
            rack: b.rack.clone(),
            fenced: image.is_fenced(b.id),
            leaders: image.partitions_led_by(b.id),
        })
        .collect();
    let refs = |partitions: Vec<(String, i32)>| {
        partitions
            .into_iter()
            .map(|(topic, partition)| PartitionRef { topic, partition })
            .collect()
    };
    let status = broker.controller_status();
    Json(ClusterView {
        node_id: broker.config().node_id,
        controller_id: status.leader_id.map_or(-1, |id| id as i64),
        cluster_id: broker.cluster_id().to_owned(),
        brokers,
        offline_partitions: refs(image.offline_partitions()),
        under_replicated_partitions: refs(image.under_replicated_partitions()),
        controller: ControllerView {
            role: format!("{:?}", status.role).to_lowercase(),
            leader_id: status.leader_id,
            term: status.term,
            last_log_index: status.last_log_index,
            applied_index: status.applied_index,
            snapshot_index: status.snapshot_index,
            voters: status
                .voters
                .into_iter()
                .map(|(id, address)| VoterView { id, address })
                .collect(),
        },
    })
}

async fn groups(State(broker): State<Arc<Broker>>) -> Json<Vec<GroupLag>> {
    let lags = tokio::task::spawn_blocking(move || lag::groups(&broker, None)).await;
    Json(lags.unwrap_or_default())
}

async fn group(
    State(broker): State<Arc<Broker>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> axum::response::Response {
    let lags = tokio::task::spawn_blocking(move || lag::groups(&broker, Some(&name))).await;
    match lags.unwrap_or_default().into_iter().next() {
        Some(group) => Json(group).into_response(),
        None => (StatusCode::NOT_FOUND, "no such group\n").into_response(),
    }
}
