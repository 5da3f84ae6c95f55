//! The HTTP endpoint: readiness, Prometheus metrics, cluster description;
//! over HTTPS with the broker's key store when asked, and behind Basic
//! authentication when security is on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::IncomingStream;
use axum::{Json, Router};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use crate::broker::Broker;
use crate::metrics::{GroupPartitionLabels, PartitionLabels};
use crate::security::tls::TlsServer;
use crate::server::lag::{self, GroupLag};

/// The one path served without credentials: orchestrators probe it with
/// no way to give any, and it tells nothing but whether the node serves.
const UNAUTHENTICATED_PATH: &str = "/ready";

pub fn router(broker: Arc<Broker>) -> Router {
    Router::new()
        .route(UNAUTHENTICATED_PATH, get(ready))
        .route("/metrics", get(metrics))
        .route("/v1/cluster", get(cluster))
        .route("/v1/groups", get(groups))
        .route("/v1/groups/{group}", get(group))
        .route("/v1/topics/{topic}/remote-log", get(topic_remote_log))
        .merge(crate::server::mirror_api::routes())
        .merge(if broker.config().console_enable {
            crate::server::console::routes(crate::server::console::History::start(&broker))
        } else {
            Router::new()
        })
        // On the whole router, not per route: an unknown path is refused
        // like the others rather than telling what exists.
        .layer(middleware::from_fn_with_state(broker.clone(), authenticate))
        .with_state(broker)
}

/// The user an authenticated request came from, as ACLs name it, and its
/// host: what handlers that change something authorize.
#[derive(Debug, Clone)]
pub struct HttpPrincipal {
    pub principal: String,
    pub host: String,
}

/// The client of an HTTP connection, for ACL host matching: serve the
/// router with `into_make_service_with_connect_info::<HttpPeer>()`.
#[derive(Debug, Clone, Copy)]
pub struct HttpPeer(pub SocketAddr);

impl axum::extract::connect_info::Connected<IncomingStream<'_, TcpListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, HttpsListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, HttpsListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

/// Basic authentication against the SCRAM users, when
/// [`http_requires_authentication`](crate::config::BrokerConfig::http_requires_authentication):
/// every path but `/ready` needs a user's name and password (checked as
/// SASL/PLAIN checks them), else 401, answered only after
/// `connection.failed.authentication.delay.ms`. With an authorizer the user must
/// also have Describe on the Cluster (or be a super user), else 403: the
/// endpoint describes the whole cluster, as DescribeCluster does, which
/// needs that operation. A wrong or malformed `Authorization` header counts
/// in `weir_authentication_failures_total{listener="HTTP",mechanism="BASIC"}`;
/// none at all does not (clients ask without one first).
async fn authenticate(
    State(broker): State<Arc<Broker>>,
    mut request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == UNAUTHENTICATED_PATH
        || !broker.config().http_requires_authentication()
    {
        return next.run(request).await;
    }
    let Some(given) = request.headers().get(header::AUTHORIZATION) else {
        return unauthorized();
    };
    let Some(credentials) = basic_credentials(given) else {
        return failed_authentication(&broker).await;
    };
    let user = credentials.username.clone();
    if !broker
        .password_checks()
        .matches(&broker.image(), credentials)
        .await
    {
        return failed_authentication(&broker).await;
    }
    let principal = format!("User:{user}");
    let host = request
        .extensions()
        .get::<ConnectInfo<HttpPeer>>()
        .map(|ConnectInfo(HttpPeer(peer))| peer.ip().to_string())
        .unwrap_or_default();
    if let Some(authorizer) = broker.authorizer() {
        let operation = AclOperation::Describe;
        if !authorizer.authorize(
            &principal,
            &host,
            operation,
            ResourceType::Cluster,
            CLUSTER_RESOURCE_NAME,
        ) {
            broker.metrics().authorization_denied(
                &principal,
                operation,
                ResourceType::Cluster,
                CLUSTER_RESOURCE_NAME,
            );
            return (
                StatusCode::FORBIDDEN,
                format!("{principal} needs Describe on the Cluster, or to be a super user\n"),
            )
                .into_response();
        }
    }
    request
        .extensions_mut()
        .insert(HttpPrincipal { principal, host });
    next.run(request).await
}

/// 401 for a wrong or malformed `Authorization`, counted, and only after
/// `connection.failed.authentication.delay.ms` as on the Kafka listeners:
/// a guesser waits for each answer. A timer: the wait holds no worker.
async fn failed_authentication(broker: &Broker) -> Response {
    broker.metrics().failed_authentication("HTTP", "BASIC");
    let delay = broker.config().security.failed_authentication_delay_ms;
    tokio::time::sleep(Duration::from_millis(delay)).await;
    unauthorized()
}

/// 401 with the challenge that makes browsers and tools ask for a user.
fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Basic realm="weir", charset="UTF-8""#),
        )],
        "authentication required: a user's name and password, as for SASL/PLAIN\n",
    )
        .into_response()
}

/// The user name and password of `Authorization: Basic BASE64(user:password)`
/// (RFC 7617); `None` for any other scheme or a malformed value.
fn basic_credentials(value: &HeaderValue) -> Option<weir_auth::PlainCredentials> {
    use base64::Engine;
    let (scheme, encoded) = value.to_str().ok()?.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("Basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (username, password) = decoded.split_once(':')?;
    if username.is_empty() || password.is_empty() {
        return None;
    }
    Some(weir_auth::PlainCredentials {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

/// How long a client has to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections completed handshakes wait in before `axum::serve` takes
/// them.
const HANDSHAKEN_BACKLOG: usize = 64;

/// An HTTPS listener for `axum::serve`: accepts TCP connections and does
/// each TLS handshake in a task of its own, so that a slow or silent client
/// holds up nobody else. Each handshake takes the broker's TLS setup (that
/// of its SSL listeners) as it is then, so reloaded certificates apply to
/// new connections. A failed handshake counts in
/// `weir_authentication_failures_total{listener="HTTP",mechanism="TLS"}`,
/// as on the Kafka listeners.
pub struct HttpsListener {
    local_addr: SocketAddr,
    handshaken: mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl HttpsListener {
    /// Fails if the broker has no TLS setup (`BrokerConfig::http_tls` was
    /// not set when it opened).
    pub fn new(listener: TcpListener, broker: Arc<Broker>) -> std::io::Result<Self> {
        let Some(tls) = broker.tls() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "HTTPS needs a key store: set ssl.keystore.location",
            ));
        };
        let local_addr = listener.local_addr()?;
        let (sender, handshaken) = mpsc::channel(HANDSHAKEN_BACKLOG);
        let accepting = tokio::spawn(accept_https(listener, broker, tls, sender));
        Ok(Self {
            local_addr,
            handshaken,
            accepting,
        })
    }
}

impl Drop for HttpsListener {
    fn drop(&mut self) {
        // Stops accepting once axum::serve lets go (graceful shutdown).
        self.accepting.abort();
    }
}

impl axum::serve::Listener for HttpsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accepting task ended (it never does on its own): serve
            // nothing more rather than spin.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

async fn accept_https(
    listener: TcpListener,
    broker: Arc<Broker>,
    tls: Arc<TlsServer>,
    handshaken: mpsc::Sender<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                use std::io::ErrorKind;
                // A connection gone before it was accepted concerns it
                // alone; anything else (out of descriptors) lasts a while.
                if !matches!(
                    error.kind(),
                    ErrorKind::ConnectionAborted
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionRefused
                ) {
                    tracing::warn!(%error, "cannot accept an HTTPS connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                continue;
            }
        };
        let tls = tls.clone();
        let broker = broker.clone();
        let handshaken = handshaken.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&tls, stream)).await {
                Ok(Ok(Some(stream))) => {
                    let _ = handshaken.send((stream, peer)).await;
                }
                Ok(Ok(None)) => tracing::debug!(%peer, "no TLS handshake on the HTTPS port"),
                Ok(Err(error)) => {
                    broker.metrics().failed_authentication("HTTP", "TLS");
                    tracing::info!(%peer, %error, "HTTPS handshake failed; closing connection");
                }
                Err(_) => tracing::debug!(%peer, "HTTPS handshake timed out"),
            }
        });
    }
}

/// The TLS handshake; a plain HTTP request instead is answered with a
/// plain 400 that says to use HTTPS, as Go's and nginx's servers do,
/// rather than with a TLS alert clients show as garbage. `None` for that,
/// or a connection closed before it sent anything.
async fn handshake(
    tls: &TlsServer,
    mut stream: TcpStream,
) -> std::io::Result<Option<tokio_rustls::server::TlsStream<TcpStream>>> {
    const TLS_HANDSHAKE_RECORD: u8 = 0x16;
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        // Closed without a word (a port check): no failed handshake.
        return Ok(None);
    }
    if first[0] != TLS_HANDSHAKE_RECORD && first[0].is_ascii_uppercase() {
        // Read the request first: closing with unread bytes resets the
        // connection, and the client may lose the answer.
        let mut request = Vec::new();
        let mut chunk = [0u8; 1024];
        while request.len() < 8192 && !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await? {
                0 => break,
                n => request.extend_from_slice(&chunk[..n]),
            }
        }
        let body = "this port speaks HTTPS: use https://\n";
        let answer = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        return Ok(None);
    }
    tls.acceptor().accept(stream).await.map(Some)
}

async fn ready(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    if broker.is_serving() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}

/// `/metrics`: Prometheus's text format, or OpenMetrics for a scraper
/// that asks for it (`Accept: application/openmetrics-text`).
async fn metrics(
    State(broker): State<Arc<Broker>>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
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
    let for_health = broker.clone();
    let process = tokio::task::spawn_blocking(move || {
        super::health::refresh(&for_health);
        crate::metrics::process::ProcessStats::read()
    })
    .await
    .unwrap_or_default()
    .encode(openmetrics);
    metrics.consumer_group_lag.clear();
    metrics.consumer_group_lag_seconds.clear();
    metrics.consumer_group_lost_to_retention.clear();
    let lags = lag::coordinated_groups(broker.clone(), None).await;
    // A share group's lag is in the share_group_* metrics.
    for group in lags.into_iter().filter(|g| g.group_type != "share") {
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
    metrics.share_group_records_available.clear();
    metrics.share_group_records_acquired.clear();
    metrics.share_group_oldest_available_seconds.clear();
    let broker_for_share = broker.clone();
    let views = tokio::task::spawn_blocking(move || {
        broker_for_share
            .share_partitions()
            .views(&*broker_for_share)
    })
    .await
    .unwrap_or_default();
    for view in views {
        let labels = GroupPartitionLabels {
            group: view.group,
            topic: view.topic,
            partition: view.partition.to_string(),
        };
        metrics
            .share_group_records_available
            .get_or_create(&labels)
            .set(view.available as i64);
        metrics
            .share_group_records_acquired
            .get_or_create(&labels)
            .set(view.acquired as i64);
        metrics
            .share_group_oldest_available_seconds
            .get_or_create(&labels)
            .set(view.oldest_available_seconds);
    }
    if openmetrics {
        // The process's metrics go before the end marker.
        let mut text = metrics.encode();
        let end = text.rfind("# EOF").unwrap_or(text.len());
        text.insert_str(end, &process);
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            metrics.encode_prometheus_text() + &process,
        )
    }
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
        node_id: broker.config().startup.node_id,
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

/// As ListGroups and DescribeGroups: only the groups the user may
/// describe (every group without an authorizer).
async fn groups(
    State(broker): State<Arc<Broker>>,
    principal: crate::server::console::Principal,
) -> Json<Vec<GroupLag>> {
    let mut lags = lag::coordinated_groups(broker.clone(), None).await;
    lags.retain(|g| describes_group(&broker, &principal, &g.group));
    Json(lags)
}

fn describes_group(
    broker: &Broker,
    principal: &crate::server::console::Principal,
    group: &str,
) -> bool {
    crate::server::console::allowed(
        broker,
        principal,
        AclOperation::Describe,
        ResourceType::Group,
        group,
    )
}

async fn group(
    State(broker): State<Arc<Broker>>,
    principal: crate::server::console::Principal,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> axum::response::Response {
    let lags = if describes_group(&broker, &principal, &name) {
        lag::coordinated_groups(broker, Some(name)).await
    } else {
        Vec::new()
    };
    match lags.into_iter().next() {
        Some(group) => Json(group).into_response(),
        None => (StatusCode::NOT_FOUND, "no such group\n").into_response(),
    }
}

/// `GET /v1/topics/{topic}/remote-log`: per partition, what the remote tier
/// holds (as the metadata says, on any broker) and what the local log of
/// this broker's replica holds (`null` where it has none).
async fn topic_remote_log(
    State(broker): State<Arc<Broker>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> axum::response::Response {
    let view = tokio::task::spawn_blocking(move || remote_log_view(&broker, &name)).await;
    match view.ok().flatten() {
        Some(view) => Json(view).into_response(),
        None => (StatusCode::NOT_FOUND, "no such topic\n").into_response(),
    }
}

#[derive(serde::Serialize)]
struct TopicRemoteLog {
    topic: String,
    topic_id: uuid::Uuid,
    /// The topic's `remote.storage.enable`.
    remote_storage_enable: bool,
    partitions: Vec<PartitionRemoteLog>,
}

#[derive(serde::Serialize)]
struct PartitionRemoteLog {
    partition: i32,
    leader: i32,
    remote: RemoteTierView,
    local: Option<LocalLogView>,
}

#[derive(serde::Serialize)]
struct RemoteTierView {
    /// The first offset the remote tier serves; `null` when it holds none.
    log_start_offset: Option<u64>,
    /// The last offset copied (ListOffsets' latest tiered); `null`: none.
    latest_tiered_offset: Option<u64>,
    size_bytes: u64,
    segments: usize,
}

#[derive(serde::Serialize)]
struct LocalLogView {
    log_start_offset: u64,
    log_end_offset: u64,
    size_bytes: u64,
}

fn remote_log_view(broker: &Broker, name: &str) -> Option<TopicRemoteLog> {
    let image = broker.image();
    let topic = image.topic(name)?;
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let remote = image.remote_log(topic.id, p.partition);
            let local = broker.partition(name, p.partition).map(|partition| {
                let log = partition.log();
                LocalLogView {
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                    size_bytes: log.size_bytes(),
                }
            });
            PartitionRemoteLog {
                partition: p.partition,
                leader: p.leader,
                remote: RemoteTierView {
                    log_start_offset: remote.and_then(|r| r.start_offset()),
                    latest_tiered_offset: remote.and_then(|r| r.highest_copied_offset()),
                    size_bytes: remote.map_or(0, |r| r.size_bytes()),
                    segments: remote.map_or(0, |r| r.finished().count()),
                },
                local,
            }
        })
        .collect();
    Some(TopicRemoteLog {
        topic: name.to_owned(),
        topic_id: topic.id,
        remote_storage_enable: topic
            .configs
            .get("remote.storage.enable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        partitions,
    })
}
