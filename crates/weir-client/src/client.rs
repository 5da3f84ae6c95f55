//! One connection to one broker: connect, negotiate versions with
//! ApiVersions, and exchange requests for responses in order.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{check, ClientError};
use crate::frame::{self, FrameError};

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
/// newer versions of these name topics by id rather than by name.
const CLIENT_MAX_VERSIONS: &[(ApiKey, i16)] = &[(ApiKey::Produce, 12), (ApiKey::Fetch, 12)];

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
/// connection is dropped and the next request opens a new one.
pub struct Client {
    addr: String,
    config: ClientConfig,
    stream: Option<TcpStream>,
    /// What the broker advertised in ApiVersions: key → (min, max).
    broker_versions: HashMap<i16, (i16, i16)>,
    next_correlation_id: i32,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr)
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
        let addrs: Vec<&str> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let mut last_error = None;
        for addr in addrs {
            match Self::connect_one(addr, config.clone()).await {
                Ok(client) => return Ok(client),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ClientError::InvalidArgument(format!("no broker address in {bootstrap:?}"))
        }))
    }

    async fn connect_one(addr: &str, config: ClientConfig) -> Result<Self, ClientError> {
        let stream = open(addr, config.connect_timeout).await?;
        let mut client = Self {
            addr: addr.to_owned(),
            config,
            stream: Some(stream),
            broker_versions: HashMap::new(),
            next_correlation_id: 1,
        };
        client.negotiate().await?;
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
    /// removed, correlation id checked).
    async fn exchange<Req: Encodable>(
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
        if self.stream.is_none() {
            self.stream = Some(open(&self.addr, self.config.connect_timeout).await?);
        }
        let addr = self.addr.clone();
        let stream = self.stream.as_mut().expect("connected above");
        let round_trip = async {
            stream
                .write_all(&request)
                .await
                .map_err(|error| ClientError::Io {
                    context: format!("cannot send {key:?} request to {addr}"),
                    error,
                })?;
            let read_error = |error: std::io::Error| ClientError::Io {
                context: format!("cannot read {key:?} response from {addr}"),
                error,
            };
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
            let (correlation_id, frame) = self.exchange(key, version, &request, timeout).await?;
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

async fn open(addr: &str, timeout: Duration) -> Result<TcpStream, ClientError> {
    let context = || format!("cannot connect to {addr}");
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            return Err(ClientError::Io {
                context: context(),
                error,
            })
        }
        Err(_) => {
            return Err(ClientError::Timeout {
                context: context(),
                after: timeout,
            })
        }
    };
    stream.set_nodelay(true).map_err(|error| ClientError::Io {
        context: context(),
        error,
    })?;
    Ok(stream)
}
