//! One connection to one broker: connect, negotiate versions with
//! ApiVersions, and exchange requests for responses in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::error::{check, ClientError};
use crate::frame::{self, FrameError};
use crate::security::SecurityConfig;
use crate::transport::{self, Connector, Stream};

/// How a [`Client`] connects and how long it waits.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Sent in every request header; brokers log it and quota by it.
    pub client_id: String,
    /// How long a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its response (a fetch adds its
    /// own `max_wait_ms`).
    pub request_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            client_id: "weir-client".to_owned(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The highest version of some APIs this client knows how to fill in:
/// newer versions of these name topics by id rather than by name, or
/// (Produce 12, TxnOffsetCommit 5) belong to transactions v2 (KIP-890),
/// whose protocol this client does not run.
///
/// And OffsetCommit 10, OffsetFetch 10 and InitProducerId 6 (Kafka 4.2 and
/// later offer them) are in kafka-protocol's API table but not in its
/// message codecs, which stop one version earlier.
const CLIENT_MAX_VERSIONS: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 11),
    (ApiKey::Fetch, 12),
    (ApiKey::TxnOffsetCommit, 4),
    (ApiKey::OffsetCommit, 9),
    (ApiKey::OffsetFetch, 9),
    (ApiKey::InitProducerId, 5),
];

/// The versions of `key` this client can speak.
pub(crate) fn client_versions(key: ApiKey) -> (i16, i16) {
    let range = key.valid_versions();
    let cap = CLIENT_MAX_VERSIONS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(range.max, |&(_, max)| max.min(range.max));
    (range.min, cap)
}

/// A connection to one Kafka broker. Requests go out one at a time and
/// each waits for its response; after a network error or a timeout the
/// connection is dropped and the next request opens a new one (with TLS
/// and SASL again, as configured).
pub struct Client {
    addr: String,
    config: ClientConfig,
    connector: Arc<Connector>,
    stream: Option<Stream>,
    /// What the broker advertised in ApiVersions: key → (min, max).
    broker_versions: HashMap<i16, (i16, i16)>,
    next_correlation_id: i32,
    /// When to authenticate again on this connection, before the broker's
    /// `connections.max.reauth.ms` ends the SASL session.
    pub(crate) reauthenticate_at: Option<Instant>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr)
            .field("security", &self.connector.security().protocol())
            .field("connected", &self.stream.is_some())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the first reachable broker of `bootstrap`
    /// (`host:port`, or several separated by commas) and negotiates API
    /// versions with it.
    pub async fn connect(bootstrap: &str) -> Result<Self, ClientError> {
        Self::connect_with(bootstrap, ClientConfig::default()).await
    }

    /// [`Client::connect`] with explicit settings.
    pub async fn connect_with(bootstrap: &str, config: ClientConfig) -> Result<Self, ClientError> {
        Self::connect_using(bootstrap, config, Connector::plaintext()).await
    }

    /// [`Client::connect_with`] over TLS and/or SASL as `security` says.
    /// Its files (CAs, client certificate) are read here, once.
    pub async fn connect_with_security(
        bootstrap: &str,
        config: ClientConfig,
        security: SecurityConfig,
    ) -> Result<Self, ClientError> {
        Self::connect_using(bootstrap, config, Connector::new(security)?).await
    }

    /// A client of another broker of the same cluster (a coordinator, a
    /// partition's leader) with this client's settings and security.
    pub async fn connect_to_broker(&self, addr: &str) -> Result<Self, ClientError> {
        Self::connect_one(addr, self.config.clone(), self.connector.clone()).await
    }

    async fn connect_using(
        bootstrap: &str,
        config: ClientConfig,
        connector: Arc<Connector>,
    ) -> Result<Self, ClientError> {
        let addrs: Vec<&str> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let mut last_error = None;
        for addr in addrs {
            match Self::connect_one(addr, config.clone(), connector.clone()).await {
                Ok(client) => return Ok(client),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ClientError::InvalidArgument(format!("no broker address in {bootstrap:?}"))
        }))
    }

    /// Connects, negotiates versions (ApiVersions is answered before
    /// authentication), then authenticates if SASL is configured.
    async fn connect_one(
        addr: &str,
        config: ClientConfig,
        connector: Arc<Connector>,
    ) -> Result<Self, ClientError> {
        let stream = connector.open(addr, config.connect_timeout).await?;
        let mut client = Self {
            addr: addr.to_owned(),
            config,
            connector,
            stream: Some(stream),
            broker_versions: HashMap::new(),
            next_correlation_id: 1,
            reauthenticate_at: None,
        };
        client.negotiate().await?;
        client.authenticate().await?;
        Ok(client)
    }

    /// The broker this client talks to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// How this client's connections are secured.
    pub fn security(&self) -> &SecurityConfig {
        self.connector.security()
    }

    pub(crate) fn connector(&self) -> &Arc<Connector> {
        &self.connector
    }

    /// The version used for `key`: the highest that both this client and
    /// the broker support, or `None` if they share none.
    pub fn version(&self, key: ApiKey) -> Option<i16> {
        let &(broker_min, broker_max) = self.broker_versions.get(&(key as i16))?;
        let (client_min, client_max) = client_versions(key);
        let version = broker_max.min(client_max);
        (version >= broker_min.max(client_min)).then_some(version)
    }

    /// The versions of `key` the broker advertised.
    pub fn broker_versions(&self, key: ApiKey) -> Option<(i16, i16)> {
        self.broker_versions.get(&(key as i16)).copied()
    }

    pub(crate) fn require_version(&self, key: ApiKey) -> Result<i16, ClientError> {
        self.version(key).ok_or_else(|| {
            let (min, max) = client_versions(key);
            let broker = match self.broker_versions(key) {
                Some((bmin, bmax)) => format!("v{bmin}-{bmax}"),
                None => "none".to_owned(),
            };
            ClientError::UnsupportedApi {
                addr: self.addr.clone(),
                api: format!("{key:?} v{min}-{max} (it offers {broker})"),
            }
        })
    }

    /// Sends `request` as `key` at the negotiated version and decodes the
    /// response. Error codes inside the response are left to the caller.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        let version = self.require_version(key)?;
        self.call_version(key, version, request).await
    }

    /// [`Client::call`] at an explicit version.
    pub async fn call_version<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        let timeout = self.config.request_timeout;
        self.call_within(key, version, request, timeout).await
    }

    pub(crate) async fn call_within<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, ClientError> {
        let (correlation_id, frame) = self.exchange(key, version, request, timeout).await?;
        frame::decode_response(key, version, correlation_id, frame)
            .map_err(|e| self.protocol_error(e))
    }

    /// Writes one request and reads its response frame (size prefix
    /// removed, correlation id checked), connecting again first if the
    /// connection was dropped, and authenticating again first if the SASL
    /// session is about to end.
    async fn exchange<Req: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<(i32, Bytes), ClientError> {
        if self.stream.is_none() {
            self.stream = Some(
                self.connector
                    .open(&self.addr, self.config.connect_timeout)
                    .await?,
            );
            self.authenticate().await?;
        } else if self
            .reauthenticate_at
            .is_some_and(|at| Instant::now() >= at)
        {
            self.authenticate().await?;
        }
        self.round_trip(key, version, request, timeout).await
    }

    /// [`Client::call_version`] on the connection as it is: no reconnecting,
    /// for the exchanges that set a connection up.
    pub(crate) async fn call_on_connection<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        let timeout = self.config.request_timeout;
        let (correlation_id, frame) = self.round_trip(key, version, request, timeout).await?;
        frame::decode_response(key, version, correlation_id, frame)
            .map_err(|e| self.protocol_error(e))
    }

    /// Writes one request on the open connection and reads its response
    /// frame.
    async fn round_trip<Req: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<(i32, Bytes), ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let request = frame::encode_request(
            key,
            version,
            correlation_id,
            &self.config.client_id,
            request,
        )
        .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let addr = self.addr.clone();
        let Some(stream) = self.stream.as_mut() else {
            return Err(ClientError::Io {
                context: format!("cannot send {key:?} request to {addr}"),
                error: std::io::ErrorKind::NotConnected.into(),
            });
        };
        let io_error = |context: String, error: std::io::Error| {
            transport::tls_error(&addr, &error).unwrap_or(ClientError::Io { context, error })
        };
        let round_trip = async {
            let sent = async {
                stream.write_all(&request).await?;
                // TLS may hold the last record back until flushed; TCP
                // flushes are free.
                stream.flush().await
            };
            sent.await.map_err(|error| {
                io_error(format!("cannot send {key:?} request to {addr}"), error)
            })?;
            let read_error =
                |error| io_error(format!("cannot read {key:?} response from {addr}"), error);
            let mut prefix = [0u8; 4];
            stream.read_exact(&mut prefix).await.map_err(read_error)?;
            let size = frame::frame_size(prefix).map_err(|e| ClientError::Protocol {
                addr: addr.clone(),
                reason: e.to_string(),
            })?;
            let mut body = vec![0u8; size];
            stream.read_exact(&mut body).await.map_err(read_error)?;
            Ok(Bytes::from(body))
        };
        let result = match tokio::time::timeout(timeout, round_trip).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout {
                context: format!("{key:?} request to {addr}"),
                after: timeout,
            }),
        };
        let body = match result {
            Ok(body) => body,
            Err(error) => {
                // The stream is out of step (or gone): start over next time.
                self.stream = None;
                return Err(error);
            }
        };
        match frame::peek_correlation_id(&body) {
            Some(got) if got == correlation_id => Ok((correlation_id, body)),
            got => Err(self.protocol_error(match got {
                Some(got) => FrameError::CorrelationMismatch {
                    expected: correlation_id,
                    got,
                },
                None => FrameError::Decode(format!("{key:?} response of {} bytes", body.len())),
            })),
        }
    }

    /// The connection is of no more use (a failed authentication): the
    /// next request opens a new one.
    pub(crate) fn disconnect(&mut self) {
        self.stream = None;
        self.reauthenticate_at = None;
    }

    /// A protocol error; the connection is dropped since what follows on
    /// it cannot be trusted.
    fn protocol_error(&mut self, error: FrameError) -> ClientError {
        self.stream = None;
        ClientError::Protocol {
            addr: self.addr.clone(),
            reason: error.to_string(),
        }
    }

    /// ApiVersions at the newest version this client knows; if the broker
    /// does not know it, it answers in v0 with what it supports, and the
    /// client asks again at the broker's highest version.
    async fn negotiate(&mut self) -> Result<(), ClientError> {
        let key = ApiKey::ApiVersions;
        let mut version = client_versions(key).1;
        loop {
            let mut request = ApiVersionsRequest::default();
            if version >= 3 {
                request = request
                    .with_client_software_name(StrBytes::from_static_str("weir-client"))
                    .with_client_software_version(StrBytes::from_static_str(env!(
                        "CARGO_PKG_VERSION"
                    )));
            }
            let timeout = self.config.request_timeout;
            let (correlation_id, frame) = self.round_trip(key, version, &request, timeout).await?;
            // Every ApiVersions response starts with header v0 (the
            // correlation id) and the error code.
            let code = frame.get(4..6).map(|b| i16::from_be_bytes([b[0], b[1]]));
            if code == Some(ResponseError::UnsupportedVersion.code()) && version > 0 {
                let fallback: ApiVersionsResponse =
                    frame::decode_response(key, 0, correlation_id, frame)
                        .map_err(|e| self.protocol_error(e))?;
                let broker_max = fallback
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == key as i16)
                    .map_or(0, |k| k.max_version);
                version = broker_max.min(version - 1).max(0);
                continue;
            }
            let response: ApiVersionsResponse =
                frame::decode_response(key, version, correlation_id, frame)
                    .map_err(|e| self.protocol_error(e))?;
            check(response.error_code, None)?;
            self.broker_versions = response
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect();
            return Ok(());
        }
    }
}
