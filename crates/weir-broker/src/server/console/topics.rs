//! Topics as the console lists and shows them, from the metadata image and
//! this broker's replicas: `GET /v1/topics` (searched and paged, so that
//! ten thousand partitions cost one page) and `GET /v1/topics/{topic}`
//! (every partition with its leader, replicas, ISR, log start and end, and
//! the topic's configs with their sources).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use weir_meta::TopicInfo;

use weir_meta::{AclOperation, ResourceType};

use super::{allowed, Principal};
use crate::broker::Broker;
use crate::config::topic::effective;
use crate::config::ConfigSource;

/// Topics per page unless asked otherwise, and at most.
const DEFAULT_PAGE_SIZE: usize = 50;
const MAX_PAGE_SIZE: usize = 1000;

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    /// Only topics whose name contains this.
    #[serde(default)]
    search: String,
    #[serde(default)]
    page: usize,
    page_size: Option<usize>,
}

#[derive(Debug, Serialize)]
pub(crate) struct TopicList {
    /// Topics matching the search, over all pages.
    pub(crate) total: usize,
    pub(crate) page: usize,
    pub(crate) page_size: usize,
    pub(crate) topics: Vec<TopicSummary>,
}

#[derive(Debug, Serialize)]
pub(crate) struct TopicSummary {
    pub(crate) name: String,
    pub(crate) internal: bool,
    pub(crate) partitions: usize,
    pub(crate) replication_factor: usize,
    /// Partitions whose ISR is smaller than their replicas.
    pub(crate) under_replicated: usize,
    /// Partitions without a leader.
    pub(crate) offline: usize,
    /// The bytes of the replicas this broker holds.
    pub(crate) local_size_bytes: u64,
    pub(crate) retention_ms: String,
    pub(crate) cleanup_policy: String,
}

/// Off the runtime's workers: a log's size waits on its lock, which an
/// append or a segment's deletion holds across its I/O.
pub(crate) async fn list(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    Query(query): Query<ListQuery>,
) -> Response {
    match tokio::task::spawn_blocking(move || list_page(&broker, &principal, query)).await {
        Ok(page) => Json(page).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the listing failed\n").into_response(),
    }
}

fn list_page(broker: &Broker, principal: &Principal, query: ListQuery) -> TopicList {
    let image = broker.image();
    let page_size = query
        .page_size
        .unwrap_or(DEFAULT_PAGE_SIZE)
        .clamp(1, MAX_PAGE_SIZE);
    let search = query.search.to_lowercase();
    let mut matching: Vec<&TopicInfo> = image
        .topics()
        .filter(|t| t.name.to_lowercase().contains(&search))
        // As Metadata: a topic the user may not describe is not there.
        .filter(|t| {
            allowed(
                broker,
                principal,
                AclOperation::Describe,
                ResourceType::Topic,
                &t.name,
            )
        })
        .collect();
    matching.sort_by(|a, b| a.name.cmp(&b.name));
    let total = matching.len();
    let topics = matching
        .into_iter()
        .skip(query.page.saturating_mul(page_size))
        .take(page_size)
        .map(|topic| summary(broker, topic))
        .collect();
    TopicList {
        total,
        page: query.page,
        page_size,
        topics,
    }
}

fn summary(broker: &Broker, topic: &TopicInfo) -> TopicSummary {
    let configs = effective(&broker.config(), &topic.configs);
    let config = |name: &str| {
        configs
            .iter()
            .find(|c| c.def.name == name)
            .map(|c| c.value.clone())
            .unwrap_or_default()
    };
    TopicSummary {
        name: topic.name.clone(),
        internal: topic.internal,
        partitions: topic.partitions.len(),
        replication_factor: topic.partitions.first().map_or(0, |p| p.replicas.len()),
        under_replicated: topic
            .partitions
            .iter()
            .filter(|p| p.isr.len() < p.replicas.len())
            .count(),
        offline: topic.partitions.iter().filter(|p| p.leader < 0).count(),
        local_size_bytes: topic
            .partitions
            .iter()
            .filter_map(|p| broker.partition(&topic.name, p.partition))
            .map(|p| p.log().size_bytes())
            .sum(),
        retention_ms: config("retention.ms"),
        cleanup_policy: config("cleanup.policy"),
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct TopicDetail {
    pub(crate) name: String,
    pub(crate) id: String,
    pub(crate) internal: bool,
    pub(crate) partitions: Vec<PartitionDetail>,
    pub(crate) configs: Vec<ConfigView>,
}

#[derive(Debug, Serialize)]
pub(crate) struct PartitionDetail {
    pub(crate) partition: i32,
    pub(crate) leader: i32,
    pub(crate) replicas: Vec<i32>,
    pub(crate) isr: Vec<i32>,
    /// From this broker's replica, when it holds one.
    pub(crate) log_start_offset: Option<u64>,
    pub(crate) log_end_offset: Option<u64>,
    pub(crate) high_watermark: Option<u64>,
    pub(crate) size_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ConfigView {
    pub(crate) name: String,
    pub(crate) value: String,
    /// Kafka's name of where the value comes from (`DYNAMIC_TOPIC_CONFIG`,
    /// `STATIC_BROKER_CONFIG`, `DEFAULT_CONFIG`, …).
    pub(crate) source: &'static str,
}

/// Off the runtime's workers, as [`list`].
pub(crate) async fn detail(
    State(broker): State<Arc<Broker>>,
    principal: Principal,
    Path(name): Path<String>,
) -> Response {
    match tokio::task::spawn_blocking(move || describe(&broker, &principal, &name)).await {
        Ok(Some(detail)) => Json(detail).into_response(),
        // As Metadata: a topic the user may not describe does not exist.
        Ok(None) => (StatusCode::NOT_FOUND, "no such topic\n").into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the description failed\n",
        )
            .into_response(),
    }
}

fn describe(broker: &Broker, principal: &Principal, name: &str) -> Option<TopicDetail> {
    let image = broker.image();
    if !allowed(
        broker,
        principal,
        AclOperation::Describe,
        ResourceType::Topic,
        name,
    ) {
        return None;
    }
    let topic = image.topic(name)?;
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let local = broker.partition(&topic.name, p.partition);
            PartitionDetail {
                partition: p.partition,
                leader: p.leader,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                log_start_offset: local.as_ref().map(|l| l.log().log_start_offset()),
                log_end_offset: local.as_ref().map(|l| l.log().log_end_offset()),
                high_watermark: local.as_ref().map(|l| l.high_watermark()),
                size_bytes: local.as_ref().map(|l| l.log().size_bytes()),
            }
        })
        .collect();
    let configs = effective(&broker.config(), &topic.configs)
        .into_iter()
        .map(|c| ConfigView {
            name: c.def.name.to_owned(),
            value: c.value,
            source: source_name(c.source),
        })
        .collect();
    Some(TopicDetail {
        name: topic.name.clone(),
        id: topic.id.to_string(),
        internal: topic.internal,
        partitions,
        configs,
    })
}

/// Kafka's `ConfigSource` names, as DescribeConfigs' tools print them.
fn source_name(source: ConfigSource) -> &'static str {
    match source {
        ConfigSource::TopicConfig => "DYNAMIC_TOPIC_CONFIG",
        ConfigSource::DynamicBrokerConfig => "DYNAMIC_BROKER_CONFIG",
        ConfigSource::DynamicDefaultBrokerConfig => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        ConfigSource::StaticBrokerConfig => "STATIC_BROKER_CONFIG",
        ConfigSource::DefaultConfig => "DEFAULT_CONFIG",
        ConfigSource::GroupConfig => "GROUP_CONFIG",
    }
}
