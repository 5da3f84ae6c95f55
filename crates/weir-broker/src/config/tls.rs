//! The TLS settings of the SSL and SASL_SSL listeners (Kafka's `ssl.*`),
//! checked at start. What they are used for is `security::tls`'s.

use std::path::PathBuf;

use super::ConfigError;

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    #[default]
    None,
    Requested,
    Required,
}

/// Where a PEM document comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    File(PathBuf),
    Inline(String),
}

/// The TLS settings of the broker's SSL and SASL_SSL listeners.
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// The private key; `None` when no key store is configured.
    pub key: Option<PemSource>,
    /// The certificate chain, leaf first.
    pub chain: Option<PemSource>,
    /// The CAs client certificates must chain to.
    pub trust: Option<PemSource>,
    pub client_auth: ClientAuth,
    /// `ssl.principal.mapping.rules`
    pub principal_mapping_rules: String,
    /// TLS 1.2 is accepted (`ssl.enabled.protocols`).
    pub tls12: bool,
    /// TLS 1.3 is accepted.
    pub tls13: bool,
}

impl TlsSettings {
    pub(crate) fn parse<'a>(get: impl Fn(&str) -> &'a str) -> Result<Self, ConfigError> {
        let refuse = |name: &str, reason: &str| ConfigError {
            name: name.to_owned(),
            value: get(name).to_owned(),
            reason: reason.to_owned(),
        };
        for name in ["ssl.keystore.type", "ssl.truststore.type"] {
            if !get(name).trim().eq_ignore_ascii_case("PEM") {
                return Err(refuse(
                    name,
                    "Weir reads PEM only; convert a JKS or PKCS12 store with keytool and openssl",
                ));
            }
        }
        if !get("ssl.key.password").is_empty() {
            return Err(refuse(
                "ssl.key.password",
                "encrypted private keys are not supported; give an unencrypted PKCS#8 key \
                 (openssl pkcs8 -topk8 -nocrypt) in a file only the broker can read",
            ));
        }
        let text = |name: &str| Some(get(name).trim().to_owned()).filter(|v| !v.is_empty());
        let (key, chain) = match (
            text("ssl.keystore.location"),
            text("ssl.keystore.key"),
            text("ssl.keystore.certificate.chain"),
        ) {
            (Some(path), None, None) => {
                let file = PemSource::File(PathBuf::from(path));
                (Some(file.clone()), Some(file))
            }
            (None, Some(key), Some(chain)) => {
                (Some(PemSource::Inline(key)), Some(PemSource::Inline(chain)))
            }
            (None, None, None) => (None, None),
            _ => {
                return Err(refuse(
                    "ssl.keystore.location",
                    "give either ssl.keystore.location, or both ssl.keystore.key and \
                     ssl.keystore.certificate.chain",
                ))
            }
        };
        let trust = match (
            text("ssl.truststore.location"),
            text("ssl.truststore.certificates"),
        ) {
            (Some(path), None) => Some(PemSource::File(PathBuf::from(path))),
            (None, Some(pem)) => Some(PemSource::Inline(pem)),
            (None, None) => None,
            _ => {
                return Err(refuse(
                    "ssl.truststore.location",
                    "give ssl.truststore.location or ssl.truststore.certificates, not both",
                ))
            }
        };
        let client_auth = match get("ssl.client.auth").trim().to_ascii_lowercase().as_str() {
            "none" | "" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => {
                return Err(refuse(
                    "ssl.client.auth",
                    "must be none, requested or required",
                ))
            }
        };
        let protocols: Vec<String> = get("ssl.enabled.protocols")
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        let tls12 = protocols.iter().any(|p| p == "TLSv1.2");
        let tls13 = protocols.iter().any(|p| p == "TLSv1.3");
        if let Some(other) = protocols
            .iter()
            .find(|p| *p != "TLSv1.2" && *p != "TLSv1.3")
        {
            return Err(refuse(
                "ssl.enabled.protocols",
                &format!("{other} is not supported; use TLSv1.2 and/or TLSv1.3"),
            ));
        }
        if !tls12 && !tls13 {
            return Err(refuse("ssl.enabled.protocols", "enable TLSv1.2 or TLSv1.3"));
        }
        let rules = get("ssl.principal.mapping.rules").trim().to_owned();
        if let Err(error) = weir_auth::PrincipalMapper::parse(&rules) {
            return Err(refuse("ssl.principal.mapping.rules", &error.to_string()));
        }
        Ok(Self {
            key,
            chain,
            trust,
            client_auth,
            principal_mapping_rules: rules,
            tls12,
            tls13,
        })
    }
}
