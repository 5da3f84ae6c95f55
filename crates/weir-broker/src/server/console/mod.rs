//! The web console, served by the HTTP endpoint at `/`: one page and its
//! script and style, compiled into the binary (nothing from a CDN, no
//! build step), drawing the cluster, topics and consumer groups from the
//! same JSON the HTTP API serves, and lag over time from samples the
//! broker keeps itself ([`history`]). Off the Kafka request path: every
//! handler reads the metadata image and the partitions' in-memory state.

mod admin;
mod history;
mod messages;
mod topics;

use std::sync::Arc;

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Extension, Json, Router};

use weir_meta::{AclOperation, ResourceType};

use crate::broker::Broker;
use crate::server::http::HttpPrincipal;
pub(crate) use history::History;

/// The HTTP user, when the endpoint asks for one.
pub(crate) type Principal = Option<Extension<HttpPrincipal>>;

/// Whether the HTTP user may do `operation` on the resource: always
/// without an authorizer; with one, as the Kafka request would be.
pub(crate) fn allowed(
    broker: &Broker,
    principal: &Principal,
    operation: AclOperation,
    resource: ResourceType,
    name: &str,
) -> bool {
    let Some(authorizer) = broker.authorizer() else {
        return true;
    };
    let Some(Extension(HttpPrincipal { principal, host })) = principal else {
        return false;
    };
    authorizer.authorize(principal, host, operation, resource, name)
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The console's routes, and the JSON it reads beside the HTTP API's;
/// `history` is sampled for as long as the broker lives.
pub(crate) fn routes(history: Arc<History>) -> Router<Arc<Broker>> {
    Router::new()
        .route("/", get(index))
        .route("/console/app.js", get(app_js))
        .route("/console/app.css", get(app_css))
        .route("/v1/topics", get(topics::list).post(admin::create_topic))
        .route(
            "/v1/topics/{topic}",
            get(topics::detail).delete(admin::delete_topic),
        )
        .route(
            "/v1/topics/{topic}/messages",
            get(messages::messages).post(admin::produce),
        )
        .route("/v1/topics/{topic}/partitions", post(admin::add_partitions))
        .route("/v1/topics/{topic}/configs", patch(admin::alter_configs))
        .route(
            "/v1/groups/{group}/reset-offsets",
            post(admin::reset_offsets),
        )
        .route("/v1/console", get(settings))
        .route("/v1/throughput", get(throughput))
        .route("/v1/groups/{group}/lag-history", get(lag_history))
        .layer(Extension(history))
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // Nothing but what the binary serves runs in the page.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// What the page needs to know of itself: whether it may change anything,
/// and who is signed in.
async fn settings(
    axum::extract::State(broker): axum::extract::State<Arc<Broker>>,
    principal: Principal,
) -> Json<serde_json::Value> {
    let config = broker.config();
    // The remote tier's address (no credentials: they come from the
    // environment), when tiered storage is on.
    let remote_tier = config
        .remote_log_storage_system_enable
        .then(|| config.remote_storage_url.clone())
        .flatten();
    Json(serde_json::json!({
        "read_only": config.console_read_only,
        "user": principal.map(|Extension(p)| p.principal),
        "remote_tier": remote_tier,
    }))
}

async fn throughput(Extension(history): Extension<Arc<History>>) -> Json<history::Chart> {
    Json(history.throughput())
}

async fn lag_history(
    Extension(history): Extension<Arc<History>>,
    Path(group): Path<String>,
) -> Response {
    // No samples yet is an empty chart, not an error.
    Json(history.lag(&group).unwrap_or_default()).into_response()
}
