//! The HTTP endpoint's mirrors (KIP-1279), for `weir mirror`:
//!
//! - `GET /v1/mirrors`: every mirror, as the metadata has it;
//! - `GET /v1/mirrors/{name}`: one, with the progress of the mirror
//!   partitions this broker leads (a client asks every broker);
//! - `POST /v1/mirrors` (JSON), `POST /v1/mirrors/{name}/pause`,
//!   `POST /v1/mirrors/{name}/resume`, `POST /v1/mirrors/{name}/failover`
//!   (JSON: `{"topics": [...]}`, none for all) and
//!   `DELETE /v1/mirrors/{name}`.
//!
//! Changes need ALTER on the cluster when the broker has an authorizer, as
//! KIP-1279's mirror RPCs do, and a JSON body (or DELETE), which a page of
//! another site cannot send without the browser asking first.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, Mirror, MirrorCut, MirrorTopic, MirrorTopicState, ResourceType};

use crate::broker::{Broker, BrokerError};
use crate::mirror::PartitionProgress;
use crate::server::http::HttpPrincipal;

/// Source settings whose values are secrets: shown as `[hidden]`.
const SECRET_SETTINGS: [&str; 6] = [
    "sasl.password",
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
];

pub(super) fn routes() -> Router<Arc<Broker>> {
    Router::new()
        .route("/v1/mirrors", get(list).post(create))
        .route("/v1/mirrors/{name}", get(describe).delete(delete))
        .route("/v1/mirrors/{name}/pause", post(pause))
        .route("/v1/mirrors/{name}/resume", post(resume))
        .route("/v1/mirrors/{name}/failover", post(failover))
}

/// A mirror as the endpoint shows it.
#[derive(Serialize)]
struct MirrorView {
    name: String,
    source_bootstrap: String,
    topics: String,
    groups: Option<String>,
    source_config: BTreeMap<String, String>,
    paused: bool,
    sync_acls: bool,
    /// The topics it created, by name.
    mirror_topics: Vec<MirrorTopicView>,
}

#[derive(Serialize)]
struct MirrorTopicView {
    name: String,
    /// `failing-back`, `mirroring`, `failing-over` or `failed-over`.
    state: &'static str,
    /// Once failed over: per partition, where the mirrored records end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    last_mirrored_offsets: Vec<LastMirrored>,
    /// Once taken back from a writable topic: per partition, where its log
    /// and the source's parted, the offset mirroring started from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    failback_offsets: Vec<LastMirrored>,
}

#[derive(Serialize)]
struct LastMirrored {
    partition: i32,
    offset: u64,
}

impl From<&MirrorTopic> for MirrorTopicView {
    fn from(topic: &MirrorTopic) -> Self {
        let offsets = |cuts: &BTreeMap<i32, MirrorCut>| -> Vec<LastMirrored> {
            cuts.iter()
                .map(|(&partition, cut)| LastMirrored {
                    partition,
                    offset: cut.last_mirrored_offset,
                })
                .collect()
        };
        let (state, last_mirrored_offsets) = match &topic.state {
            MirrorTopicState::Preparing { .. } => ("failing-back", Vec::new()),
            MirrorTopicState::Mirroring => ("mirroring", Vec::new()),
            MirrorTopicState::Stopping { .. } => ("failing-over", Vec::new()),
            MirrorTopicState::Stopped { partitions } => ("failed-over", offsets(partitions)),
        };
        Self {
            name: topic.name.clone(),
            state,
            last_mirrored_offsets,
            failback_offsets: offsets(&topic.failback_cuts),
        }
    }
}

impl From<&Mirror> for MirrorView {
    fn from(mirror: &Mirror) -> Self {
        let mut mirror_topics: Vec<MirrorTopicView> = mirror
            .mirror_topics
            .values()
            .map(MirrorTopicView::from)
            .collect();
        mirror_topics.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            name: mirror.name.clone(),
            source_bootstrap: mirror.source_bootstrap.clone(),
            topics: mirror.topics.clone(),
            groups: mirror.groups.clone(),
            source_config: mirror
                .source_config
                .iter()
                .map(|(key, value)| {
                    let shown = if SECRET_SETTINGS.contains(&key.as_str()) {
                        "[hidden]".to_owned()
                    } else {
                        value.clone()
                    };
                    (key.clone(), shown)
                })
                .collect(),
            paused: mirror.paused,
            sync_acls: mirror.sync_acls,
            mirror_topics,
        }
    }
}

/// One mirror with what this broker knows of its partitions.
#[derive(Serialize)]
struct MirrorDescription {
    #[serde(flatten)]
    mirror: MirrorView,
    /// The broker answering: it reports the partitions it leads.
    broker: i32,
    partitions: Vec<PartitionProgress>,
}

async fn list(State(broker): State<Arc<Broker>>) -> Json<Vec<MirrorView>> {
    let image = broker.image();
    Json(image.mirrors().map(MirrorView::from).collect())
}

async fn describe(State(broker): State<Arc<Broker>>, Path(name): Path<String>) -> Response {
    let image = broker.image();
    let Some(mirror) = image.mirror(&name) else {
        return not_found(&name);
    };
    Json(MirrorDescription {
        mirror: MirrorView::from(mirror),
        broker: broker.node_id(),
        partitions: broker.mirror_progress().of(&name),
    })
    .into_response()
}

/// What `POST /v1/mirrors` takes.
#[derive(Deserialize)]
struct NewMirror {
    name: String,
    source_bootstrap: String,
    /// All the source's topics when absent.
    topics: Option<String>,
    groups: Option<String>,
    #[serde(default)]
    source_config: BTreeMap<String, String>,
    #[serde(default)]
    sync_acls: bool,
}

async fn create(
    State(broker): State<Arc<Broker>>,
    principal: Option<Extension<HttpPrincipal>>,
    Json(new): Json<NewMirror>,
) -> Response {
    if let Some(denied) = may_alter(&broker, principal) {
        return denied;
    }
    let mut mirror = Mirror::new(
        &new.name,
        &new.source_bootstrap,
        new.topics.as_deref().unwrap_or(".*"),
    );
    mirror.groups = new.groups;
    mirror.source_config = new.source_config;
    mirror.sync_acls = new.sync_acls;
    answer(broker.create_mirror(mirror).await, StatusCode::CREATED)
}

async fn delete(
    State(broker): State<Arc<Broker>>,
    principal: Option<Extension<HttpPrincipal>>,
    Path(name): Path<String>,
) -> Response {
    if let Some(denied) = may_alter(&broker, principal) {
        return denied;
    }
    answer(broker.delete_mirror(&name).await, StatusCode::OK)
}

/// What `POST /v1/mirrors/{name}/failover` takes.
#[derive(Deserialize)]
struct Failover {
    /// The topics to fail over; all the mirror feeds when absent or empty.
    #[serde(default)]
    topics: Vec<String>,
}

async fn failover(
    State(broker): State<Arc<Broker>>,
    principal: Option<Extension<HttpPrincipal>>,
    Path(name): Path<String>,
    Json(chosen): Json<Failover>,
) -> Response {
    if let Some(denied) = may_alter(&broker, principal) {
        return denied;
    }
    answer(
        broker.fail_over_mirror(&name, chosen.topics).await,
        StatusCode::ACCEPTED,
    )
}

/// `POST /v1/mirrors/{name}/pause` and `/resume` take an empty JSON object.
#[derive(Deserialize)]
struct NoArguments {}

async fn pause(
    state: State<Arc<Broker>>,
    principal: Option<Extension<HttpPrincipal>>,
    name: Path<String>,
    _: Json<NoArguments>,
) -> Response {
    set_paused(state, principal, name, true).await
}

async fn resume(
    state: State<Arc<Broker>>,
    principal: Option<Extension<HttpPrincipal>>,
    name: Path<String>,
    _: Json<NoArguments>,
) -> Response {
    set_paused(state, principal, name, false).await
}

async fn set_paused(
    State(broker): State<Arc<Broker>>,
    principal: Option<Extension<HttpPrincipal>>,
    Path(name): Path<String>,
    paused: bool,
) -> Response {
    if let Some(denied) = may_alter(&broker, principal) {
        return denied;
    }
    answer(
        broker.set_mirror_paused(&name, paused).await,
        StatusCode::OK,
    )
}

/// ALTER on the cluster, when the broker has an authorizer; the refusal
/// otherwise.
fn may_alter(broker: &Broker, principal: Option<Extension<HttpPrincipal>>) -> Option<Response> {
    let authorizer = broker.authorizer()?;
    let Some(Extension(HttpPrincipal { principal, host })) = principal else {
        return Some((StatusCode::FORBIDDEN, "changing mirrors needs a user\n").into_response());
    };
    let operation = AclOperation::Alter;
    if authorizer.authorize(
        &principal,
        &host,
        operation,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        return None;
    }
    broker.metrics().authorization_denied(
        &principal,
        operation,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    );
    Some(
        (
            StatusCode::FORBIDDEN,
            format!("{principal} needs Alter on the Cluster to change mirrors\n"),
        )
            .into_response(),
    )
}

fn answer(outcome: Result<(), BrokerError>, success: StatusCode) -> Response {
    match outcome {
        Ok(()) => (success, Json(serde_json::json!({}))).into_response(),
        Err(error) => {
            let status = match &error {
                BrokerError::Meta(weir_meta::MetaError::InvalidRequest(message))
                    if message.contains("does not exist") =>
                {
                    StatusCode::NOT_FOUND
                }
                BrokerError::Meta(weir_meta::MetaError::InvalidRequest(message))
                    if message.contains("already exists") =>
                {
                    StatusCode::CONFLICT
                }
                BrokerError::Meta(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            (
                status,
                Json(serde_json::json!({ "error": error.to_string() })),
            )
                .into_response()
        }
    }
}

fn not_found(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": format!("Mirror '{name}' does not exist.") })),
    )
        .into_response()
}
