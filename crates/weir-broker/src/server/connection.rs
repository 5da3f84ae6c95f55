//! One client connection: frames are read in order, each request is
//! dispatched in arrival order (so a producer's appends are queued in its
//! order), its answer is awaited as its own task, and responses are written
//! strictly in request order. A client over a quota is not read
//! from until its throttle time has passed (KIP-219). A failed SASL
//! authentication is answered `connection.failed.authentication.delay.ms`
//! late, and the connection closes once the client has had the answer
//! (KIP-306). The connection holds its [`Admission`] (the connection
//! quotas) and its request memory until its last response is written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::ServedListener;
use crate::api::{self, Authenticator, Intercepted, Reply};
use crate::broker::Broker;
use crate::net::connection_quotas::Admission;
use crate::net::frame::{read_frame, FrameError, FrameLimits};
use crate::net::outgoing::{Outgoing, ResponseWriter};
use crate::net::request_memory::{RequestMemory, Reservation, Stage};
use crate::net::Channel;
use crate::net::ANONYMOUS;
use crate::quotas::client::{Client, QuotaKind};

/// Requests of one connection being processed at once.
const MAX_IN_FLIGHT: usize = 64;

/// Numbers connections in the order they were accepted.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// The longest a frame may take to arrive before the client has
/// authenticated, whatever `socket.request.receive.timeout.ms` says: a login
/// is a few small frames, and a stalled one holds the small
/// pre-authentication pool that every new client needs.
const PRE_AUTH_RECEIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the accept loop hands a connection.
pub(crate) struct Accepted {
    pub(crate) stream: TcpStream,
    pub(crate) admission: Admission,
}

pub(crate) async fn serve(
    broker: Arc<Broker>,
    Accepted { stream, admission }: Accepted,
    listener: Arc<ServedListener>,
    memory: Arc<RequestMemory>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // Counted until the connection's end.
    let _admission = admission;
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let sasl = listener
        .protocol
        .is_sasl()
        .then(|| Authenticator::new(&broker, &listener.name));
    let Some(tls) = &listener.tls else {
        let (reader, writer) = stream.into_split();
        let peer = Peer {
            channel: Channel::new(&listener.name, ANONYMOUS),
            sasl,
            address: peer,
        };
        let writer = ResponseWriter::plain(writer);
        return serve_requests(broker, reader, writer, peer, memory, shutdown).await;
    };
    let idle = Duration::from_millis(broker.config().connections_max_idle_ms);
    let stream = match tokio::time::timeout(idle, tls.acceptor().accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            broker
                .metrics()
                .failed_authentication(&listener.name, "TLS");
            match crate::security::tls::handshake_failure_hint(&error) {
                Some(hint) => {
                    tracing::warn!(?peer, %error, "TLS handshake failed; closing connection: {hint}")
                }
                None => tracing::info!(?peer, %error, "TLS handshake failed; closing connection"),
            }
            return;
        }
        Err(_) => {
            tracing::info!(
                ?peer,
                "TLS handshake not finished in connections.max.idle.ms; closing connection"
            );
            return;
        }
    };
    let principal = match tls.peer_principal(stream.get_ref().1) {
        Ok(principal) => principal,
        Err(error) => {
            broker
                .metrics()
                .failed_authentication(&listener.name, "TLS");
            tracing::info!(?peer, %error, "no principal for the client certificate; closing connection");
            return;
        }
    };
    let peer = Peer {
        channel: Channel::new(&listener.name, &principal),
        sasl,
        address: peer,
    };
    let (reader, writer) = tokio::io::split(stream);
    let writer = ResponseWriter::tls(writer);
    serve_requests(broker, reader, writer, peer, memory, shutdown).await
}

/// Who is at the other end, as far as the connection knows.
struct Peer {
    channel: Channel,
    /// On a SASL listener: the client's authentication.
    sasl: Option<Authenticator>,
    address: Option<std::net::SocketAddr>,
}

async fn serve_requests<R: AsyncRead + Unpin>(
    broker: Arc<Broker>,
    mut reader: R,
    writer: ResponseWriter,
    Peer {
        channel,
        mut sasl,
        address: peer,
    }: Peer,
    memory: Arc<RequestMemory>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let connection = CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1;
    let (queue, pending) =
        mpsc::channel::<(JoinHandle<Option<Outgoing>>, Reservation)>(MAX_IN_FLIGHT);
    let writer_task = tokio::spawn(write_responses(writer, pending));
    let config = broker.config();
    // Dropped after the writer, once every reservation is given back.
    let memory = memory.connection(peer.map(|p| p.ip()));
    let idle = Duration::from_millis(config.connections_max_idle_ms);
    let receive = Duration::from_millis(config.socket_request_receive_timeout_ms);
    let channel = Arc::new(channel);
    loop {
        // Before it has authenticated, a client may send only small frames
        // (Kafka's `sasl.server.max.receive.size`), from a pool of their own.
        let limits = match &sasl {
            Some(sasl) if !sasl.is_authenticated() => FrameLimits {
                max_size: config
                    .security
                    .sasl_max_receive_size
                    .min(config.socket_request_max_bytes),
                idle,
                receive: receive.min(PRE_AUTH_RECEIVE_TIMEOUT),
                stage: Stage::PreAuth,
            },
            _ => FrameLimits {
                max_size: config.socket_request_max_bytes,
                idle,
                receive,
                stage: Stage::Authenticated,
            },
        };
        let frame = tokio::select! {
            frame = read_frame(&mut reader, limits, &memory) => frame,
            _ = shutdown.changed() => break,
        };
        let (body, reservation) = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(FrameError::Closed) => break,
            Err(error @ FrameError::Idle(_)) => {
                tracing::debug!(?peer, %error, "closing idle connection");
                break;
            }
            Err(error) => {
                tracing::info!(?peer, %error, "closing connection");
                break;
            }
        };
        if let Some(until) = channel.muted_until() {
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = shutdown.changed() => break,
            }
        }
        let started = Instant::now();
        broker.metrics().bytes_in.inc_by(body.len() as u64 + 4);
        if let Some(sasl) = &mut sasl {
            let intercepted = tokio::select! {
                intercepted = sasl.intercept(&broker, &body) => intercepted,
                _ = shutdown.changed() => break,
            };
            let (response, closing) = match intercepted {
                Intercepted::Pass => (None, None),
                Intercepted::Respond(response) => (Some(response), None),
                Intercepted::Close(response, reason) => (response, Some(reason)),
            };
            if let Some(principal) = sasl.principal() {
                channel.set_principal(principal);
            }
            if let Some(reason) = closing {
                tracing::info!(?peer, reason, "closing connection");
                // As Kafka (KIP-306): the answer itself waits, so a guesser
                // waits for each before it may try again; then the client
                // reads it before the connection ends. A timer, not a
                // thread: waiting holds no worker.
                let delay = config.security.failed_authentication_delay_ms;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(delay)) => {}
                    _ = shutdown.changed() => {}
                }
                if let Some(response) = response {
                    let ready = tokio::spawn(std::future::ready(Some(response)));
                    if queue.send((ready, reservation)).await.is_ok() {
                        linger_until_closed(&mut reader, &mut shutdown).await;
                    }
                }
                break;
            }
            if let Some(response) = response {
                // In order behind the responses still being computed.
                let ready = tokio::spawn(std::future::ready(Some(response)));
                if queue.send((ready, reservation)).await.is_err() {
                    break;
                }
                continue;
            }
        }
        let api_name = api::api_name(&body);
        // The client id whose request time counts, if a request quota is set.
        let request_quota = (broker.client_quotas().enabled(QuotaKind::Request)
            && !channel.is_inter_broker())
        .then(|| {
            (
                api::header_client_id(&body).to_owned(),
                api::key_and_version(&body),
            )
        });
        // Requests are dispatched one after another, so that a
        // connection's appends keep their order (a producer's sequence
        // numbers); their responses may then be waited for concurrently.
        let dispatched = api::dispatch(&broker, body, peer, connection, channel.clone());
        let dispatch_time = started.elapsed();
        let reply = match dispatched {
            Ok(reply) => reply,
            Err(error) => {
                tracing::info!(?peer, %error, "closing connection after an unparseable request");
                break;
            }
        };
        let metered = broker.clone();
        let channel = channel.clone();
        let in_flight = InFlight::new(&broker.metrics().health.requests_in_flight);
        let task = tokio::spawn(async move {
            let _in_flight = in_flight;
            let response = if let Some((client_id, key_and_version)) = request_quota {
                let (mut response, busy) = with_busy_time(reply).await;
                // The request's handling time, in percent-seconds of one
                // thread, as Kafka counts it.
                let percent_seconds = (dispatch_time + busy).as_secs_f64() * 100.0;
                if !channel.is_inter_broker() {
                    let principal = channel.principal();
                    let client = Client {
                        user: crate::net::principal_name(&principal),
                        client_id: &client_id,
                    };
                    let now = metered.now_ms();
                    let quotas = metered.client_quotas();
                    let throttle = quotas.record(QuotaKind::Request, &client, percent_seconds, now);
                    channel.throttle(throttle);
                    // The response tells the client, as Kafka's do.
                    let offset = key_and_version
                        .and_then(|(key, version)| api::throttle_time_offset(key, version));
                    if let (Some(response), Some(offset), true) =
                        (&mut response, offset, throttle > 0)
                    {
                        response.raise_i32_at(offset, i32::try_from(throttle).unwrap_or(i32::MAX));
                    }
                }
                response
            } else {
                match reply {
                    Reply::Now(response) => response,
                    Reply::Later(future) => future.await,
                }
            };
            let metrics = metered.metrics();
            metrics.observe_request(api_name, started.elapsed().as_secs_f64());
            if let Some(response) = &response {
                metrics.bytes_out.inc_by(response.len() as u64);
            }
            response
        });
        if queue.send((task, reservation)).await.is_err() {
            break; // the writer failed: the peer is gone
        }
    }
    drop(queue);
    let _ = writer_task.await;
}

/// A request counted in `weir_requests_in_flight` until it is answered or
/// dropped.
struct InFlight(prometheus_client::metrics::gauge::Gauge);

impl InFlight {
    fn new(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// How long a connection whose login failed stays open after its answer,
/// unless the client closes it first.
const LINGER_AFTER_FAILED_LOGIN: Duration = Duration::from_secs(1);

/// Waits, discarding what arrives, until the client closes the connection
/// or [`LINGER_AFTER_FAILED_LOGIN`] passes. Some clients (kafka-python)
/// drop an answer read together with the connection's end, so the last
/// answer goes out before the broker's side closes.
async fn linger_until_closed<R: AsyncRead + Unpin>(
    reader: &mut R,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) {
    let mut discard = [0u8; 512];
    let drained =
        async { while matches!(reader.read(&mut discard).await, Ok(read) if read > 0) {} };
    tokio::select! {
        _ = tokio::time::timeout(LINGER_AFTER_FAILED_LOGIN, drained) => {}
        _ = shutdown.changed() => {}
    }
}

/// The reply, and the time spent computing it: its polls, not its waits.
async fn with_busy_time(reply: Reply) -> (Option<Outgoing>, Duration) {
    match reply {
        Reply::Now(response) => (response, Duration::ZERO),
        Reply::Later(mut future) => {
            let mut busy = Duration::ZERO;
            let response = std::future::poll_fn(|cx| {
                let polled = Instant::now();
                let poll = future.as_mut().poll(cx);
                busy += polled.elapsed();
                poll
            })
            .await;
            (response, busy)
        }
    }
}

async fn write_responses(
    mut writer: ResponseWriter,
    mut pending: mpsc::Receiver<(JoinHandle<Option<Outgoing>>, Reservation)>,
) {
    while let Some((task, reservation)) = pending.recv().await {
        let response = match task.await {
            Ok(response) => response,
            Err(error) => {
                tracing::error!(%error, "request handler failed; closing connection");
                return;
            }
        };
        drop(reservation);
        if let Some(response) = response {
            if response.closes() {
                let _ = writer.flush().await;
                let _ = writer.shutdown().await;
                return;
            }
            if let Err(error) = response.write_to(&mut writer).await {
                tracing::debug!(%error, "cannot write a response; closing connection");
                return;
            }
        }
        // Flush when no other response is ready, so pipelined responses
        // share a write.
        if pending.is_empty() && writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.shutdown().await;
}
