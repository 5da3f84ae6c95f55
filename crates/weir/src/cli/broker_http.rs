//! Brokers' HTTP endpoints from the CLI, for what only the leader of a
//! partition knows and the Kafka protocol does not carry (the records a
//! share-partition holds in flight, a mirror's progress), and for what it
//! has no request for (mirrors). Each broker tells where its endpoint
//! is in its read-only config `weir.http.listener`; the CLI trusts the CAs
//! of `--command-config` and gives its SASL user as Basic credentials, as
//! the endpoint asks when security is on.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use base64::Engine;
use serde::de::DeserializeOwned;
use weir_client::{Cluster, ConfigResource, PemSource, SecurityConfig};

/// The config naming a broker's HTTP endpoint.
const HTTP_LISTENER_CONFIG: &str = "weir.http.listener";
const TIMEOUT: Duration = Duration::from_secs(10);
/// Far more than a group's view of one broker takes.
const MAX_BODY_BYTES: u64 = 64 << 20;

pub(crate) struct BrokerHttp {
    agent: ureq::Agent,
    /// `Basic …`, from the SASL user.
    authorization: Option<String>,
}

impl BrokerHttp {
    pub(crate) fn new(security: &SecurityConfig) -> anyhow::Result<Self> {
        let mut tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
        let trust = security.tls.as_ref().and_then(|t| t.trust.as_ref());
        let roots: Vec<ureq::tls::Certificate<'static>> = match trust {
            Some(source) => pem_certificates(source)?,
            None => weir_client::system_ca_certificates()
                .into_iter()
                .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
                .collect(),
        };
        tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)));
        if let Some(identity) = security.tls.as_ref().and_then(|t| t.identity.as_ref()) {
            let chain = pem_certificates(&identity.chain)?;
            let key = ureq::tls::PrivateKey::from_pem(&read_pem(&identity.key)?)
                .context("the client's private key is not a PEM key")?;
            tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        let agent = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .timeout_global(Some(TIMEOUT))
            .build()
            .into();
        let authorization = security.sasl.as_ref().map(|sasl| {
            let token = base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", sasl.username, sasl.password));
            format!("Basic {token}")
        });
        Ok(Self {
            agent,
            authorization,
        })
    }

    /// The URL of broker `node`'s HTTP endpoint, as it describes it.
    pub(crate) async fn endpoint_of(cluster: &mut Cluster, node: i32) -> anyhow::Result<String> {
        let configs = cluster
            .connection(node)
            .await?
            .describe_configs(ConfigResource::Broker(node))
            .await?;
        configs
            .into_iter()
            .find(|c| c.name == HTTP_LISTENER_CONFIG)
            .and_then(|c| c.value)
            .ok_or_else(|| anyhow!("broker {node} does not describe {HTTP_LISTENER_CONFIG}"))
    }

    /// `GET url`, its JSON body read as `T`; `None` on 404.
    pub(crate) async fn get_json<T: DeserializeOwned + Send + 'static>(
        &self,
        url: String,
    ) -> anyhow::Result<Option<T>> {
        let mut request = self.agent.get(&url).header("Accept", "application/json");
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        tokio::task::spawn_blocking(move || {
            let mut response = match request.call() {
                Ok(response) => response,
                Err(ureq::Error::StatusCode(404)) => return Ok(None),
                Err(error) => return Err(anyhow!("GET {url}: {error}")),
            };
            let body = response
                .body_mut()
                .with_config()
                .limit(MAX_BODY_BYTES)
                .read_to_string()
                .with_context(|| format!("GET {url}"))?;
            serde_json::from_str(&body)
                .map(Some)
                .with_context(|| format!("GET {url}: unexpected answer"))
        })
        .await?
    }

    /// A change: `POST url` with the JSON `body`, or `DELETE url` without
    /// one. Returns the JSON answer of a success; an error stating the
    /// endpoint's `error` otherwise.
    pub(crate) async fn change(
        &self,
        url: String,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<serde_json::Value> {
        let authorization = self.authorization.clone();
        let agent = self.agent.clone();
        tokio::task::spawn_blocking(move || {
            let method = if body.is_some() { "POST" } else { "DELETE" };
            let sent = match body {
                Some(body) => {
                    let mut request = agent
                        .post(&url)
                        .header("Content-Type", "application/json")
                        .header("Accept", "application/json");
                    if let Some(authorization) = &authorization {
                        request = request.header("Authorization", authorization);
                    }
                    request
                        .config()
                        .http_status_as_error(false)
                        .build()
                        .send(body.to_string())
                }
                None => {
                    let mut request = agent.delete(&url).header("Accept", "application/json");
                    if let Some(authorization) = &authorization {
                        request = request.header("Authorization", authorization);
                    }
                    request.config().http_status_as_error(false).build().call()
                }
            };
            let mut response = sent.map_err(|error| anyhow!("{method} {url}: {error}"))?;
            let status = response.status();
            let text = response
                .body_mut()
                .with_config()
                .limit(MAX_BODY_BYTES)
                .read_to_string()
                .with_context(|| format!("{method} {url}"))?;
            let answer: serde_json::Value =
                serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
            if status.is_success() {
                return Ok(answer);
            }
            let reason = answer
                .get("error")
                .and_then(|e| e.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| answer.to_string());
            Err(anyhow!("{}", reason.trim_end()))
        })
        .await?
    }
}

fn read_pem(source: &PemSource) -> anyhow::Result<Vec<u8>> {
    match source {
        PemSource::File(path) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
        }
        PemSource::Inline(text) => Ok(text.as_bytes().to_vec()),
    }
}

fn pem_certificates(source: &PemSource) -> anyhow::Result<Vec<ureq::tls::Certificate<'static>>> {
    Ok(ureq::tls::parse_pem(&read_pem(source)?)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(certificate)) => Some(certificate),
            _ => None,
        })
        .collect())
}
