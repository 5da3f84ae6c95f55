//! TLS for SSL and SASL_SSL connections, with rustls on ring: the CAs to
//! trust (given, or the system's), a client certificate when configured,
//! and the broker's host name checked unless told not to.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::security::{PemSource, SecurityConfigError, TlsConfig};

/// Where the system's CA bundle usually is, as librdkafka probes for it:
/// Debian and Ubuntu, Fedora and RHEL, openSUSE, Alpine and macOS.
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The rustls client configuration for `tls`, with the files as they are
/// now.
pub fn client_config(tls: &TlsConfig) -> Result<Arc<rustls::ClientConfig>, SecurityConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(match &tls.trust {
        Some(source) => trusted(source)?,
        None => system_roots().ok_or(SecurityConfigError::NoTrustedCertificates)?,
    });
    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|error| SecurityConfigError::Tls(error.to_string()))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| SecurityConfigError::Tls(error.to_string()))?;
    let builder = if tls.verify_hostname {
        builder.with_webpki_verifier(webpki)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
    };
    let config = match &tls.identity {
        None => builder.with_no_client_auth(),
        Some(identity) => {
            let chain = certificates(&identity.chain, "certificate")?;
            let key = PrivateKeyDer::from_pem_slice(&read(&identity.key, "private key")?).map_err(
                |_| SecurityConfigError::Pem {
                    what: "private key",
                    origin: describe(&identity.key),
                    hint: " (it must be an unencrypted PEM key: PKCS#8, PKCS#1 or SEC1)",
                },
            )?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| SecurityConfigError::Tls(error.to_string()))?
        }
    };
    Ok(Arc::new(config))
}

/// What to call a PEM source in a message.
fn describe(source: &PemSource) -> String {
    match source {
        PemSource::File(path) => path.display().to_string(),
        PemSource::Inline(_) => "the inline PEM".to_owned(),
    }
}

fn read(source: &PemSource, what: &'static str) -> Result<Vec<u8>, SecurityConfigError> {
    match source {
        PemSource::File(path) => std::fs::read(path).map_err(|error| SecurityConfigError::Read {
            what,
            path: path.clone(),
            error,
        }),
        PemSource::Inline(text) => Ok(text.as_bytes().to_vec()),
    }
}

/// The certificates of a PEM document, at least one.
fn certificates(
    source: &PemSource,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, SecurityConfigError> {
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read(source, what)?)
            .filter_map(Result::ok)
            .collect();
    if certificates.is_empty() {
        return Err(SecurityConfigError::Pem {
            what,
            origin: describe(source),
            hint: " (it must be PEM: -----BEGIN CERTIFICATE-----; convert a JKS or PKCS12 \
                   store with keytool and openssl)",
        });
    }
    Ok(certificates)
}

/// The CAs of a trust store the user gave: each must be a valid CA
/// certificate.
fn trusted(source: &PemSource) -> Result<RootCertStore, SecurityConfigError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(source, "CA certificate")? {
        roots
            .add(certificate)
            .map_err(|error| SecurityConfigError::Tls(format!("{}: {error}", describe(source))))?;
    }
    Ok(roots)
}

/// The system's CAs: `SSL_CERT_FILE`, or the first bundle found where
/// distributions keep it. A bundle's odd certificate that does not parse is
/// skipped rather than failing every connection.
fn system_roots() -> Option<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(system_ca_certificates());
    (!roots.is_empty()).then_some(roots)
}

/// The certificates of the system's CA bundle: `SSL_CERT_FILE`, or the
/// first bundle found where distributions keep it; none if there is none.
pub fn system_ca_certificates() -> Vec<CertificateDer<'static>> {
    let from_env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    let candidates = from_env
        .into_iter()
        .chain(SYSTEM_CA_BUNDLES.iter().map(std::path::PathBuf::from));
    for path in candidates {
        let Ok(pem) = std::fs::read(&path) else {
            continue;
        };
        let certificates: Vec<_> = CertificateDer::pem_slice_iter(&pem)
            .filter_map(Result::ok)
            .collect();
        if !certificates.is_empty() {
            return certificates;
        }
    }
    Vec::new()
}

/// The name the broker's certificate must carry: the host of `addr`
/// (`host:port`, `[v6]:port`), a DNS name or an IP address.
pub fn server_name(addr: &str) -> Option<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).ok()
}

/// Checks the broker's chain as the WebPKI verifier does, but not whether
/// it names the host: `ssl.endpoint.identification.algorithm=` (empty), for
/// brokers reached by an address their certificate does not list.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The WebPKI verifier checks the chain first and the name last, so
        // a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// What to tell the user about a TLS failure, beyond rustls's reason.
pub(crate) fn hint(error: &rustls::Error) -> Option<&'static str> {
    use rustls::AlertDescription;
    match error {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => Some(
            "the broker's certificate is not signed by a trusted CA: check ssl.ca.location or \
             ssl.truststore.location",
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => Some(
            "the broker's certificate does not name the host connected to; \
             ssl.endpoint.identification.algorithm= (empty) skips this check",
        ),
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => Some(
            "the broker requires a client certificate: set ssl.certificate.location and \
             ssl.key.location, or ssl.keystore.location",
        ),
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown,
        ) => Some("the broker refused this client's certificate"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_addresses() {
        let name = |addr| server_name(addr).map(|n| n.to_str().into_owned());
        assert_eq!(
            name("broker-1.example:9093").as_deref(),
            Some("broker-1.example")
        );
        assert_eq!(name("127.0.0.1:9093").as_deref(), Some("127.0.0.1"));
        assert_eq!(name("[::1]:9093").as_deref(), Some("::1"));
        assert_eq!(name("localhost").as_deref(), Some("localhost"));
        assert_eq!(name("bad host:1"), None);
    }
}
