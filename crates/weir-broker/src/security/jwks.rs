//! Where OAUTHBEARER's signing keys come from, and when to read them again:
//! `sasl.oauthbearer.jwks.endpoint.url` is a file (`file://` or a path),
//! read again when it changes, or an HTTP(S) endpoint, fetched every
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms` and sooner when a token
//! names a key the set lacks (the provider rotated its keys), at most once
//! per `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`, as Kafka's
//! refreshing JWKS does.
//!
//! Reading blocks (a file, or a request with its own timeout): callers run
//! it on the blocking pool or at start-up, never on a runtime worker.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use crate::config::ConfigError;
use crate::security::tls::file_stamp;

/// How long one fetch from an endpoint may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest JWKS accepted from an endpoint.
const MAX_JWKS_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    File(PathBuf),
    /// An `http://` or `https://` URL.
    Endpoint(String),
}

impl JwksSource {
    /// The source `url` names: a file (`file://…` or a bare path) or an
    /// HTTP(S) endpoint.
    pub fn parse(url: &str) -> Result<Self, String> {
        if let Some(path) = url.strip_prefix("file://") {
            return Ok(Self::File(PathBuf::from(path)));
        }
        if url.starts_with("https://") || url.starts_with("http://") {
            return Ok(Self::Endpoint(url.to_owned()));
        }
        if url.contains("://") {
            return Err("use an https://, http:// or file:// URL".to_owned());
        }
        Ok(Self::File(PathBuf::from(url)))
    }

    /// The JWKS as it is now. Blocks.
    pub fn read(&self) -> Result<String, String> {
        match self {
            Self::File(path) => std::fs::read_to_string(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display())),
            Self::Endpoint(url) => fetch(url),
        }
    }
}

/// A GET of `url`, its TLS checked against the system's CAs
/// (`SSL_CERT_FILE`, or the usual bundle), as Kafka checks the endpoint
/// against the JVM's default trust store.
fn fetch(url: &str) -> Result<String, String> {
    let roots: Vec<ureq::tls::Certificate<'static>> = weir_client::system_ca_certificates()
        .into_iter()
        .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .timeout_global(Some(FETCH_TIMEOUT))
        .build()
        .into();
    let mut response = agent
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|error| format!("cannot fetch the JWKS from {url}: {error}"))?;
    response
        .body_mut()
        .with_config()
        .limit(MAX_JWKS_BYTES)
        .read_to_string()
        .map_err(|error| format!("cannot read the JWKS from {url}: {error}"))
}

/// When the keys should be read again.
#[derive(Debug)]
pub struct JwksRefresh {
    source: JwksSource,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`
    refresh: Duration,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`: the least
    /// time between two reads asked for by unknown keys.
    retry_backoff: Duration,
    state: Mutex<RefreshState>,
}

#[derive(Debug)]
struct RefreshState {
    /// The file's stamp when it was read.
    stamp: Option<(SystemTime, u64)>,
    /// When the endpoint was last read, or tried.
    read_at: Instant,
    /// A token named a key the set does not have.
    key_missing: bool,
}

impl JwksRefresh {
    /// Tracks `source`, just read at `now`.
    pub fn new(
        source: JwksSource,
        refresh: Duration,
        retry_backoff: Duration,
        now: Instant,
    ) -> Self {
        let stamp = match &source {
            JwksSource::File(path) => file_stamp(path),
            JwksSource::Endpoint(_) => None,
        };
        Self {
            source,
            refresh,
            retry_backoff,
            state: Mutex::new(RefreshState {
                stamp,
                read_at: now,
                key_missing: false,
            }),
        }
    }

    pub fn source(&self) -> &JwksSource {
        &self.source
    }

    /// A token named a key the set lacks: read the endpoint again soon.
    pub fn key_missing(&self) {
        self.state.lock().key_missing = true;
    }

    /// Whether to read the keys now (and if so, noted as read): a file
    /// whose stamp changed (stats it: blocks briefly); an endpoint whose
    /// refresh interval passed, or after a missing key once the backoff
    /// since the last read passed.
    pub fn due(&self, now: Instant) -> bool {
        let mut state = self.state.lock();
        let due = match &self.source {
            JwksSource::File(path) => {
                let stamp = file_stamp(path);
                let changed = stamp != state.stamp;
                state.stamp = stamp;
                changed
            }
            JwksSource::Endpoint(_) => {
                let since = now.saturating_duration_since(state.read_at);
                since >= self.refresh || (state.key_missing && since >= self.retry_backoff)
            }
        };
        if due {
            state.read_at = now;
            state.key_missing = false;
        }
        due
    }
}

impl crate::config::SecurityConfig {
    /// Where the keys OAUTHBEARER tokens are checked against are, when
    /// that mechanism is enabled.
    pub fn jwks_source(&self) -> Result<Option<JwksSource>, ConfigError> {
        if !self.sasl_mechanisms.iter().any(|m| m == "OAUTHBEARER") {
            return Ok(None);
        }
        let url = self.oauthbearer.jwks_endpoint_url.as_str();
        if url.is_empty() {
            return Err(self.jwks_error(
                "OAUTHBEARER is enabled: name the JWKS its tokens are signed with".into(),
            ));
        }
        JwksSource::parse(url)
            .map(Some)
            .map_err(|reason| self.jwks_error(reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_files_or_endpoints() {
        assert_eq!(
            JwksSource::parse("file:///etc/jwks.json").unwrap(),
            JwksSource::File("/etc/jwks.json".into())
        );
        assert_eq!(
            JwksSource::parse("jwks.json").unwrap(),
            JwksSource::File("jwks.json".into())
        );
        assert_eq!(
            JwksSource::parse("https://idp.example/keys").unwrap(),
            JwksSource::Endpoint("https://idp.example/keys".into())
        );
        assert!(JwksSource::parse("ftp://idp.example/keys").is_err());
    }

    #[test]
    fn an_endpoint_is_read_again_at_its_interval_and_sooner_for_a_missing_key() {
        let start = Instant::now();
        let source = JwksSource::Endpoint("https://idp.example/keys".into());
        let refresh = JwksRefresh::new(
            source,
            Duration::from_secs(3600),
            Duration::from_secs(10),
            start,
        );
        assert!(!refresh.due(start + Duration::from_secs(5)));
        // A missing key waits for the backoff since the last read.
        refresh.key_missing();
        assert!(!refresh.due(start + Duration::from_secs(9)));
        assert!(refresh.due(start + Duration::from_secs(10)));
        // Read: neither reason holds any more.
        assert!(!refresh.due(start + Duration::from_secs(30)));
        assert!(refresh.due(start + Duration::from_secs(3610)));
        assert!(!refresh.due(start + Duration::from_secs(3611)));
    }
}
