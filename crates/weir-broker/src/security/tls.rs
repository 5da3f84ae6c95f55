//! TLS for SSL and SASL_SSL listeners, with rustls: the key and certificate
//! chain from PEM (a file, or inline), client certificates checked against
//! a PEM trust store when `ssl.client.auth` asks for them, and the files
//! read again when they change, so certificates rotate without a restart.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

pub use crate::config::tls::{ClientAuth, PemSource, TlsSettings};

impl PemSource {
    fn read(&self) -> Result<Vec<u8>, TlsError> {
        match self {
            Self::File(path) => std::fs::read(path).map_err(|error| TlsError::Read {
                path: path.clone(),
                error,
            }),
            Self::Inline(text) => Ok(text.as_bytes().to_vec()),
        }
    }

    /// The file's modification time and length, to tell when it changed.
    fn stamp(&self) -> Option<(SystemTime, u64)> {
        match self {
            Self::File(path) => file_stamp(path),
            Self::Inline(_) => None,
        }
    }
}

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("an SSL listener needs a key store: set ssl.keystore.location (key and certificate chain in one PEM file) or ssl.keystore.key and ssl.keystore.certificate.chain")]
    NoKeyStore,
    #[error("ssl.client.auth={0} needs a trust store: set ssl.truststore.location (PEM CA certificates)")]
    NoTrustStore(&'static str),
    #[error("no private key in the key store ({0}); it must be an unencrypted PEM key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey(String),
    #[error("no certificate in {0}")]
    NoCertificate(String),
    #[error("invalid TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("invalid trust store: {0}")]
    Verifier(String),
    #[error("client certificate: {0}")]
    Certificate(String),
}

impl TlsSettings {
    /// The files the TLS setup is read from.
    fn sources(&self) -> impl Iterator<Item = &PemSource> {
        [&self.key, &self.chain, &self.trust].into_iter().flatten()
    }

    /// Builds the rustls server configuration from the files as they are now.
    pub fn server_config(&self) -> Result<ServerConfig, TlsError> {
        let (Some(key_source), Some(chain_source)) = (&self.key, &self.chain) else {
            return Err(TlsError::NoKeyStore);
        };
        let describe = |source: &PemSource| match source {
            PemSource::File(path) => path.display().to_string(),
            PemSource::Inline(_) => "the inline PEM".to_owned(),
        };
        let key = PrivateKeyDer::from_pem_slice(&key_source.read()?)
            .map_err(|_| TlsError::NoKey(describe(key_source)))?;
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&chain_source.read()?)
                .filter_map(Result::ok)
                .collect();
        if chain.is_empty() {
            return Err(TlsError::NoCertificate(describe(chain_source)));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
            (self.tls13, &rustls::version::TLS13),
            (self.tls12, &rustls::version::TLS12),
        ]
        .into_iter()
        .filter_map(|(on, version)| on.then_some(version))
        .collect();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)?;
        let builder = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            mode => {
                let name = if mode == ClientAuth::Required {
                    "required"
                } else {
                    "requested"
                };
                let trust = self.trust.as_ref().ok_or(TlsError::NoTrustStore(name))?;
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(&trust.read()?).filter_map(Result::ok) {
                    roots
                        .add(cert)
                        .map_err(|error| TlsError::Verifier(error.to_string()))?;
                }
                if roots.is_empty() {
                    return Err(TlsError::NoCertificate(describe(trust)));
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if mode == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|error| TlsError::Verifier(error.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        Ok(builder.with_single_cert(chain, key)?)
    }
}

/// The TLS acceptor of the broker's TLS listeners, rebuilt when its files
/// change.
pub struct TlsServer {
    settings: TlsSettings,
    /// `ssl.principal.mapping.rules`
    mapper: weir_auth::PrincipalMapper,
    config: RwLock<Arc<ServerConfig>>,
    /// The stamps of the files the configuration was built from.
    stamps: Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsServer {
    pub fn new(settings: TlsSettings) -> Result<Self, TlsError> {
        let stamps = settings.sources().map(PemSource::stamp).collect();
        let config = settings.server_config()?;
        let mapper = weir_auth::PrincipalMapper::parse(&settings.principal_mapping_rules)
            .map_err(|error| TlsError::Certificate(error.to_string()))?;
        Ok(Self {
            mapper,
            settings,
            config: RwLock::new(Arc::new(config)),
            stamps: Mutex::new(stamps),
        })
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.read().clone())
    }

    /// Reads the files again if any changed since they were last read;
    /// true if the new ones are in force. Files that do not make a valid
    /// setup (a key written before its certificate, say) leave the old one
    /// in force, and are tried again at the next change.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now: Vec<_> = self.settings.sources().map(PemSource::stamp).collect();
        let mut stamps = self.stamps.lock();
        if *stamps == now {
            return Ok(false);
        }
        *stamps = now;
        let config = self.settings.server_config()?;
        *self.config.write() = Arc::new(config);
        Ok(true)
    }
}

impl TlsServer {
    /// The principal of the client at the other end of `connection`: by
    /// its certificate, or `User:ANONYMOUS` when it presented none.
    pub fn peer_principal(
        &self,
        connection: &rustls::ServerConnection,
    ) -> Result<String, TlsError> {
        match connection.peer_certificates() {
            Some([leaf, ..]) => self.principal(leaf),
            _ => Ok(weir_meta::ANONYMOUS.to_owned()),
        }
    }

    /// The principal of a client that presented `certificate`: its subject
    /// as Kafka writes it (RFC 2253, `CN=alice,O=Weir,C=US`), mapped by
    /// `ssl.principal.mapping.rules`.
    pub fn principal(&self, certificate: &CertificateDer<'_>) -> Result<String, TlsError> {
        use x509_parser::der_parser::asn1_rs::ToDer;
        let (_, parsed) = x509_parser::parse_x509_certificate(certificate)
            .map_err(|error| TlsError::Certificate(error.to_string()))?;
        // As Java writes them: a keyword and the text of a string value,
        // else the dotted OID and `#` with the hex of the value's DER.
        let attributes: Vec<(String, String)> = parsed
            .subject()
            .iter_attributes()
            .map(|attribute| {
                let oid = attribute.attr_type().to_id_string();
                match (weir_auth::rfc2253_keyword(&oid), attribute.as_str()) {
                    (Some(keyword), Ok(text)) => (keyword.to_owned(), text.to_owned()),
                    _ => {
                        let der = attribute.attr_value().to_der_vec().unwrap_or_default();
                        let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                        (oid, format!("#{hex}"))
                    }
                }
            })
            .collect();
        let pairs: Vec<(&str, &str)> = attributes
            .iter()
            .map(|(kind, value)| (kind.as_str(), value.as_str()))
            .collect();
        let name = weir_auth::rfc2253_name(&pairs);
        let mapped = self
            .mapper
            .map(&name)
            .map_err(|error| TlsError::Certificate(error.to_string()))?;
        Ok(format!("User:{mapped}"))
    }
}

/// A file's modification time and length: the files read at start (key
/// and trust stores, the OAUTHBEARER JWKS) are read again when it changes.
/// What an operator can do about a client's failed TLS handshake, when the
/// error says: rustls verifies only X.509 v3 certificates, and `openssl x509
/// -req` without extensions makes v1 ones (which Kafka's JSSE accepts).
pub(crate) fn handshake_failure_hint(error: &std::io::Error) -> Option<&'static str> {
    let refused = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    let rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)) = refused else {
        return None;
    };
    matches!(
        other.0.downcast_ref::<webpki::Error>(),
        Some(webpki::Error::UnsupportedCertVersion)
    )
    .then_some(
        "the client's certificate is X.509 v1, and Weir verifies only v3 certificates: \
         sign it again with an extension, e.g. `openssl x509 -req ... \
         -extfile <(printf 'basicConstraints=CA:FALSE')`",
    )
}

pub(crate) fn file_stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
