//! How a client secures its connections: TLS, SASL, both or neither, as
//! Kafka's `security.protocol` says, read from Kafka's client property
//! names so that the files people already have for the Java client
//! (`--command-config`) or for librdkafka work unchanged.

use std::collections::BTreeMap;
use std::path::PathBuf;

use weir_auth::ScramMechanism;

/// Kafka's `security.protocol`: which of TLS and SASL a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// From Kafka's name, in any case (as both Kafka clients accept it).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Plaintext,
            Self::Ssl,
            Self::SaslPlaintext,
            Self::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Whether the connection runs over TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether the client must authenticate with SASL first.
    pub fn is_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

impl std::fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a PEM document comes from: a file, or the text itself (Kafka's
/// `ssl.truststore.certificates`, librdkafka's `ssl.ca.pem`).
#[derive(Clone, PartialEq, Eq)]
pub enum PemSource {
    File(PathBuf),
    Inline(String),
}

impl std::fmt::Debug for PemSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            // An inline key is a secret.
            Self::Inline(_) => f.write_str("Inline(..)"),
        }
    }
}

/// The client's certificate chain and private key, for brokers that ask
/// for one (`ssl.client.auth=required`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsIdentity {
    /// The certificate chain, leaf first.
    pub chain: PemSource,
    /// The private key, unencrypted PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PemSource,
}

/// TLS settings of SSL and SASL_SSL connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The CA certificates the broker's chain must lead to; `None`: the
    /// system's (`SSL_CERT_FILE`, or the usual bundle locations), as
    /// librdkafka probes them.
    pub trust: Option<PemSource>,
    /// A client certificate, for mutual TLS.
    pub identity: Option<TlsIdentity>,
    /// Whether the broker's certificate must name the host connected to
    /// (`ssl.endpoint.identification.algorithm=https`, the default). When
    /// off, the chain is still verified.
    pub verify_hostname: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            trust: None,
            identity: None,
            verify_hostname: true,
        }
    }
}

/// The SASL mechanisms this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616): the password itself, so on TLS only in practice.
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// The SASL name sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(mechanism) => mechanism.name(),
        }
    }

    /// From the SASL name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            other => ScramMechanism::from_name(other).map(Self::Scram),
        }
    }
}

impl std::fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Who to authenticate as, and how.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How connections are secured. TLS and SASL are each there or not, so
/// that every combination is one of Kafka's four security protocols and
/// no other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// TLS (SSL, SASL_SSL).
    pub tls: Option<TlsConfig>,
    /// SASL (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<SaslConfig>,
}

/// Why client properties do not make a security configuration, or the
/// files they name cannot be used. Messages never include a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityConfigError {
    /// A property's value is not one this client accepts.
    #[error("{name}={value}: {reason}")]
    InvalidValue {
        name: String,
        value: String,
        reason: String,
    },
    /// A property this configuration needs is not set.
    #[error("{name} is not set: {reason}")]
    Missing { name: String, reason: String },
    /// Properties that say the same thing more than once.
    #[error("{} each give {what}: keep one", names.join(" and "))]
    Conflict {
        names: Vec<String>,
        what: &'static str,
    },
    /// `sasl.jaas.config` is not one login module with a user name and a
    /// password.
    #[error("invalid sasl.jaas.config: {0}")]
    Jaas(String),
    /// A PEM file cannot be read.
    #[error("cannot read {what} {}: {error}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// A PEM document holds nothing of what it should.
    #[error("no {what} in {origin}{hint}")]
    Pem {
        what: &'static str,
        /// The file, or "the inline PEM".
        origin: String,
        hint: &'static str,
    },
    /// No CA certificates to trust were given and none were found on the
    /// system.
    #[error(
        "no CA certificates to trust: set ssl.ca.location (librdkafka) or \
         ssl.truststore.location (Java) to a PEM file of the CAs that signed the \
         brokers' certificates"
    )]
    NoTrustedCertificates,
    /// rustls refused the certificates or key.
    #[error("invalid TLS setup: {0}")]
    Tls(String),
}

/// `sasl.jaas.config`'s login modules.
const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// The properties read with any protocol.
const PROTOCOL_PROPERTIES: &[&str] = &["security.protocol"];

/// The properties read when the protocol uses TLS.
const TLS_PROPERTIES: &[&str] = &[
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.endpoint.identification.algorithm",
];

/// The properties read when the protocol uses SASL.
const SASL_PROPERTIES: &[&str] = &[
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
];

impl SecurityConfig {
    /// No TLS, no SASL.
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// Kafka's name for what this configuration does.
    pub fn protocol(&self) -> SecurityProtocol {
        match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => SecurityProtocol::Plaintext,
            (true, false) => SecurityProtocol::Ssl,
            (false, true) => SecurityProtocol::SaslPlaintext,
            (true, true) => SecurityProtocol::SaslSsl,
        }
    }

    /// Reads Kafka client properties, by the Java client's names and
    /// librdkafka's: `security.protocol` (default PLAINTEXT); for TLS the
    /// CAs to trust (`ssl.ca.location`, `ssl.truststore.location` with
    /// `ssl.truststore.type=PEM`, or inline), a client certificate
    /// (`ssl.certificate.location` and `ssl.key.location`, or a PEM
    /// `ssl.keystore.location` with key and chain) and
    /// `ssl.endpoint.identification.algorithm`; for SASL `sasl.mechanism`
    /// (or `sasl.mechanisms`) with `sasl.username` and `sasl.password`, or
    /// `sasl.jaas.config`.
    ///
    /// Properties it has no use for are ignored, as Kafka's tools ignore
    /// them; [`unused_properties`](Self::unused_properties) names them.
    /// Files are read when connecting, not here.
    pub fn from_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, SecurityConfigError> {
        let properties = Properties(properties);
        let protocol = match properties.get("security.protocol") {
            None => SecurityProtocol::Plaintext,
            Some(name) => SecurityProtocol::from_name(name).ok_or_else(|| {
                SecurityConfigError::InvalidValue {
                    name: "security.protocol".to_owned(),
                    value: name.to_owned(),
                    reason: "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL".to_owned(),
                }
            })?,
        };
        let tls = match protocol.is_tls() {
            true => Some(tls_from_properties(properties)?),
            false => None,
        };
        let sasl = match protocol.is_sasl() {
            true => Some(sasl_from_properties(properties)?),
            false => None,
        };
        Ok(Self { tls, sasl })
    }

    /// The names in `properties` that this configuration did not use:
    /// unknown ones, and those of TLS or SASL when the protocol has none
    /// (`ssl.ca.location` without `security.protocol=SSL` is likely a
    /// mistake worth a warning).
    pub fn unused_properties<'a>(&self, properties: &'a BTreeMap<String, String>) -> Vec<&'a str> {
        let protocol = self.protocol();
        let used = |name: &str| {
            PROTOCOL_PROPERTIES.contains(&name)
                || (protocol.is_tls() && TLS_PROPERTIES.contains(&name))
                || (protocol.is_sasl() && SASL_PROPERTIES.contains(&name))
        };
        properties
            .keys()
            .map(String::as_str)
            .filter(|name| !used(name))
            .collect()
    }
}

/// Client properties by name.
#[derive(Clone, Copy)]
struct Properties<'a>(&'a BTreeMap<String, String>);

impl<'a> Properties<'a> {
    /// The value, trimmed; `None` when unset or blank.
    fn get(self, name: &str) -> Option<&'a str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// At most one of `names` set: the name and value of that one.
    fn one_of(
        self,
        names: &[&'static str],
        what: &'static str,
    ) -> Result<Option<(&'static str, &'a str)>, SecurityConfigError> {
        let given: Vec<(&'static str, &'a str)> = names
            .iter()
            .filter_map(|&name| self.get(name).map(|value| (name, value)))
            .collect();
        match given[..] {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(SecurityConfigError::Conflict {
                names: given.iter().map(|(name, _)| (*name).to_owned()).collect(),
                what,
            }),
        }
    }
}

/// A PEM file or inline PEM, by which property gave it.
fn pem_source(name: &str, value: &str) -> PemSource {
    if name.ends_with(".location") {
        PemSource::File(PathBuf::from(value))
    } else {
        PemSource::Inline(value.to_owned())
    }
}

/// A Java store type must be PEM, the only format read here.
fn check_store_type(properties: Properties<'_>, name: &str) -> Result<(), SecurityConfigError> {
    match properties.get(name) {
        Some(value) if !value.eq_ignore_ascii_case("PEM") => {
            Err(SecurityConfigError::InvalidValue {
                name: name.to_owned(),
                value: value.to_owned(),
                reason: "only PEM stores are read; convert a JKS or PKCS12 store to PEM \
                         (keytool -importkeystore to PKCS12, then openssl pkcs12 -nodes)"
                    .to_owned(),
            })
        }
        _ => Ok(()),
    }
}

fn tls_from_properties(properties: Properties<'_>) -> Result<TlsConfig, SecurityConfigError> {
    check_store_type(properties, "ssl.truststore.type")?;
    check_store_type(properties, "ssl.keystore.type")?;
    if properties.get("ssl.key.password").is_some() {
        return Err(SecurityConfigError::InvalidValue {
            name: "ssl.key.password".to_owned(),
            value: "<redacted>".to_owned(),
            reason: "encrypted private keys are not supported; give an unencrypted key \
                     (openssl pkcs8 -topk8 -nocrypt) in a file only you can read"
                .to_owned(),
        });
    }
    let trust = properties
        .one_of(
            &[
                "ssl.ca.location",
                "ssl.ca.pem",
                "ssl.truststore.location",
                "ssl.truststore.certificates",
            ],
            "the CA certificates to trust",
        )?
        .map(|(name, value)| pem_source(name, value));
    let identity = match (librdkafka_identity(properties)?, java_identity(properties)?) {
        (Some(_), Some(_)) => {
            return Err(SecurityConfigError::Conflict {
                names: vec![
                    "ssl.certificate.location/ssl.key.location".to_owned(),
                    "ssl.keystore.location".to_owned(),
                ],
                what: "a client certificate",
            })
        }
        (librdkafka, java) => librdkafka.or(java),
    };
    // Unset means Kafka's default, https; set but empty turns the check
    // off, as in both clients (librdkafka also says none).
    let algorithm = properties
        .0
        .get("ssl.endpoint.identification.algorithm")
        .map(|v| v.trim());
    let verify_hostname = match algorithm {
        None => true,
        Some(value) if value.eq_ignore_ascii_case("https") => true,
        Some(value) if value.is_empty() || value.eq_ignore_ascii_case("none") => false,
        Some(value) => {
            return Err(SecurityConfigError::InvalidValue {
                name: "ssl.endpoint.identification.algorithm".to_owned(),
                value: value.to_owned(),
                reason: "expected https (check the broker's host name) or nothing (do not)"
                    .to_owned(),
            })
        }
    };
    Ok(TlsConfig {
        trust,
        identity,
        verify_hostname,
    })
}

/// librdkafka names the certificate and the key apart, each a file or
/// inline.
fn librdkafka_identity(
    properties: Properties<'_>,
) -> Result<Option<TlsIdentity>, SecurityConfigError> {
    let certificate = properties.one_of(
        &["ssl.certificate.location", "ssl.certificate.pem"],
        "the client certificate",
    )?;
    let key = properties.one_of(
        &["ssl.key.location", "ssl.key.pem"],
        "the client's private key",
    )?;
    match (certificate, key) {
        (None, None) => Ok(None),
        (Some((cert_name, cert)), Some((key_name, key))) => Ok(Some(TlsIdentity {
            chain: pem_source(cert_name, cert),
            key: pem_source(key_name, key),
        })),
        (Some((name, _)), None) => Err(SecurityConfigError::Missing {
            name: "ssl.key.location".to_owned(),
            reason: format!("{name} gives a client certificate, which needs its private key"),
        }),
        (None, Some((name, _))) => Err(SecurityConfigError::Missing {
            name: "ssl.certificate.location".to_owned(),
            reason: format!("{name} gives a private key, which needs its certificate"),
        }),
    }
}

/// Java's PEM key store holds the key and the chain in one file, or gives
/// both inline.
fn java_identity(properties: Properties<'_>) -> Result<Option<TlsIdentity>, SecurityConfigError> {
    match (
        properties.get("ssl.keystore.location"),
        properties.get("ssl.keystore.key"),
        properties.get("ssl.keystore.certificate.chain"),
    ) {
        (None, None, None) => Ok(None),
        (Some(path), None, None) => Ok(Some(TlsIdentity {
            chain: PemSource::File(PathBuf::from(path)),
            key: PemSource::File(PathBuf::from(path)),
        })),
        (None, Some(key), Some(chain)) => Ok(Some(TlsIdentity {
            chain: PemSource::Inline(chain.to_owned()),
            key: PemSource::Inline(key.to_owned()),
        })),
        (Some(_), _, _) => Err(SecurityConfigError::Conflict {
            names: vec![
                "ssl.keystore.location".to_owned(),
                "ssl.keystore.key".to_owned(),
            ],
            what: "the client's key store",
        }),
        (None, Some(_), None) => Err(SecurityConfigError::Missing {
            name: "ssl.keystore.certificate.chain".to_owned(),
            reason: "ssl.keystore.key gives a private key, which needs its certificate chain"
                .to_owned(),
        }),
        (None, None, Some(_)) => Err(SecurityConfigError::Missing {
            name: "ssl.keystore.key".to_owned(),
            reason: "ssl.keystore.certificate.chain gives a certificate chain, which needs \
                     its private key"
                .to_owned(),
        }),
    }
}

fn sasl_from_properties(properties: Properties<'_>) -> Result<SaslConfig, SecurityConfigError> {
    let mechanism = match (
        properties.get("sasl.mechanism"),
        properties.get("sasl.mechanisms"),
    ) {
        (Some(java), Some(librdkafka)) if java != librdkafka => {
            return Err(SecurityConfigError::Conflict {
                names: vec!["sasl.mechanism".to_owned(), "sasl.mechanisms".to_owned()],
                what: "the SASL mechanism",
            })
        }
        (Some(name), _) | (None, Some(name)) => name,
        (None, None) => {
            return Err(SecurityConfigError::Missing {
                name: "sasl.mechanism".to_owned(),
                reason: "Kafka's default, GSSAPI (Kerberos), is not supported; set it to \
                         PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                    .to_owned(),
            })
        }
    };
    let mechanism = SaslMechanism::from_name(&mechanism.to_ascii_uppercase()).ok_or_else(|| {
        let why = match mechanism.to_ascii_uppercase().as_str() {
            "GSSAPI" => "GSSAPI (Kerberos) is not supported",
            "OAUTHBEARER" => "OAUTHBEARER is not supported",
            _ => "unknown SASL mechanism",
        };
        SecurityConfigError::InvalidValue {
            name: "sasl.mechanism".to_owned(),
            value: mechanism.to_owned(),
            reason: format!("{why}; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
        }
    })?;
    // librdkafka's names, and Java's JAAS line; both may be there if they
    // agree.
    let (mut username, mut password) = (
        properties.get("sasl.username").map(str::to_owned),
        properties.0.get("sasl.password").cloned(),
    );
    if let Some(jaas) = properties.get("sasl.jaas.config") {
        let login = JaasLogin::parse(jaas)?;
        let expected = match mechanism {
            SaslMechanism::Plain => PLAIN_LOGIN_MODULE,
            SaslMechanism::Scram(_) => SCRAM_LOGIN_MODULE,
        };
        if login.module != expected {
            return Err(SecurityConfigError::Jaas(format!(
                "sasl.mechanism={mechanism} logs in with {expected}, not {}",
                login.module
            )));
        }
        if username.as_ref().is_some_and(|u| *u != login.username)
            || password.as_ref().is_some_and(|p| *p != login.password)
        {
            return Err(SecurityConfigError::Conflict {
                names: vec![
                    "sasl.username/sasl.password".to_owned(),
                    "sasl.jaas.config".to_owned(),
                ],
                what: "different SASL credentials",
            });
        }
        username = Some(login.username);
        password = Some(login.password);
    }
    let missing = |name: &str| SecurityConfigError::Missing {
        name: name.to_owned(),
        reason: format!(
            "SASL/{mechanism} needs a user name and a password (sasl.username and \
             sasl.password, or sasl.jaas.config)"
        ),
    };
    let username = username.ok_or_else(|| missing("sasl.username"))?;
    let password = password
        .filter(|p| !p.is_empty())
        .ok_or_else(|| missing("sasl.password"))?;
    Ok(SaslConfig {
        mechanism,
        username,
        password,
    })
}

/// One login module of a JAAS configuration, as Kafka's `JaasConfig`
/// reads `sasl.jaas.config`: `CLASS FLAG (KEY=VALUE)* ;`, values quoted or
/// not.
#[derive(Debug, PartialEq, Eq)]
struct JaasLogin {
    module: String,
    username: String,
    password: String,
}

impl JaasLogin {
    fn parse(text: &str) -> Result<Self, SecurityConfigError> {
        let error = |reason: String| SecurityConfigError::Jaas(reason);
        let tokens = jaas_tokens(text).map_err(error)?;
        let modules: Vec<&[JaasToken]> = tokens
            .split(|t| *t == JaasToken::Semicolon)
            .filter(|m| !m.is_empty())
            .collect();
        let [module] = modules[..] else {
            return Err(error(format!(
                "expected one login module, found {}",
                modules.len()
            )));
        };
        if tokens.last() != Some(&JaasToken::Semicolon) {
            return Err(error("the login module must end with ';'".to_owned()));
        }
        let word = |token: Option<&JaasToken>| match token {
            Some(JaasToken::Word(word)) => Some(word.clone()),
            _ => None,
        };
        let class = word(module.first())
            .ok_or_else(|| error("expected a login module class first".to_owned()))?;
        let flag = word(module.get(1))
            .ok_or_else(|| error(format!("expected a control flag after {class}")))?;
        if !["required", "requisite", "sufficient", "optional"]
            .iter()
            .any(|f| f.eq_ignore_ascii_case(&flag))
        {
            return Err(error(format!(
                "{flag:?} is not a control flag (required, requisite, sufficient or optional)"
            )));
        }
        let mut options = BTreeMap::new();
        let mut rest = module[2..].iter();
        while let Some(token) = rest.next() {
            let key = match token {
                JaasToken::Word(key) => key.clone(),
                _ => return Err(error("expected an option name".to_owned())),
            };
            if rest.next() != Some(&JaasToken::Equals) {
                return Err(error(format!("expected '=' after option {key}")));
            }
            let value = match rest.next() {
                Some(JaasToken::Word(value) | JaasToken::Quoted(value)) => value.clone(),
                _ => return Err(error(format!("expected a value for option {key}"))),
            };
            options.insert(key, value);
        }
        let mut take = |name: &str| {
            options
                .remove(name)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| error(format!("{class} needs a {name} option")))
        };
        Ok(Self {
            username: take("username")?,
            password: take("password")?,
            module: class,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum JaasToken {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

/// Splits JAAS text as Java's `StreamTokenizer` does for it: words,
/// double-quoted strings with backslash escapes, `=` and `;`.
fn jaas_tokens(text: &str) -> Result<Vec<JaasToken>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => tokens.push(JaasToken::Equals),
            ';' => tokens.push(JaasToken::Semicolon),
            '"' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err("a quoted value is not closed".to_owned()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some('t') => value.push('\t'),
                            Some('r') => value.push('\r'),
                            Some(other) => value.push(other),
                            None => return Err("a quoted value is not closed".to_owned()),
                        },
                        Some(other) => value.push(other),
                    }
                }
                tokens.push(JaasToken::Quoted(value));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, '=' | ';' | '"') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                tokens.push(JaasToken::Word(word));
            }
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<SecurityConfig, SecurityConfigError> {
        SecurityConfig::from_properties(&props(pairs))
    }

    fn error(pairs: &[(&str, &str)]) -> String {
        parse(pairs).unwrap_err().to_string()
    }

    fn file(path: &str) -> PemSource {
        PemSource::File(PathBuf::from(path))
    }

    #[test]
    fn no_properties_is_plaintext() {
        let config = parse(&[]).unwrap();
        assert_eq!(config, SecurityConfig::plaintext());
        assert_eq!(config.protocol(), SecurityProtocol::Plaintext);
        let config = parse(&[("security.protocol", "plaintext")]).unwrap();
        assert_eq!(config.protocol(), SecurityProtocol::Plaintext);
    }

    #[test]
    fn ssl_with_librdkafka_names() {
        let config = parse(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/etc/ca.pem"),
            ("ssl.certificate.location", "/etc/client.pem"),
            ("ssl.key.location", "/etc/client.key"),
        ])
        .unwrap();
        assert_eq!(config.protocol(), SecurityProtocol::Ssl);
        assert_eq!(
            config.tls,
            Some(TlsConfig {
                trust: Some(file("/etc/ca.pem")),
                identity: Some(TlsIdentity {
                    chain: file("/etc/client.pem"),
                    key: file("/etc/client.key"),
                }),
                verify_hostname: true,
            })
        );
        assert_eq!(config.sasl, None);
    }

    #[test]
    fn ssl_with_java_names() {
        let config = parse(&[
            ("security.protocol", "ssl"),
            ("ssl.truststore.location", "/etc/truststore.pem"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.keystore.location", "/etc/keystore.pem"),
            ("ssl.keystore.type", "pem"),
            ("ssl.endpoint.identification.algorithm", ""),
        ])
        .unwrap();
        assert_eq!(
            config.tls,
            Some(TlsConfig {
                trust: Some(file("/etc/truststore.pem")),
                identity: Some(TlsIdentity {
                    chain: file("/etc/keystore.pem"),
                    key: file("/etc/keystore.pem"),
                }),
                verify_hostname: false,
            })
        );
        // Inline PEM, Java's and librdkafka's.
        let config = parse(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----"),
            ("ssl.keystore.key", "KEY"),
            ("ssl.keystore.certificate.chain", "CHAIN"),
        ])
        .unwrap();
        let tls = config.tls.unwrap();
        assert_eq!(
            tls.trust,
            Some(PemSource::Inline("-----BEGIN CERTIFICATE-----".into()))
        );
        assert_eq!(
            tls.identity,
            Some(TlsIdentity {
                chain: PemSource::Inline("CHAIN".into()),
                key: PemSource::Inline("KEY".into()),
            })
        );
        let tls = parse(&[("security.protocol", "SSL"), ("ssl.ca.pem", "CA")])
            .unwrap()
            .tls
            .unwrap();
        assert_eq!(tls.trust, Some(PemSource::Inline("CA".into())));
        assert_eq!(tls.identity, None);
    }

    #[test]
    fn host_name_verification_is_on_unless_turned_off() {
        let verify = |value: Option<&str>| {
            let mut pairs = vec![("security.protocol", "SSL")];
            pairs.extend(value.map(|v| ("ssl.endpoint.identification.algorithm", v)));
            parse(&pairs).unwrap().tls.unwrap().verify_hostname
        };
        assert!(verify(None));
        assert!(verify(Some("https")));
        assert!(verify(Some("HTTPS")));
        assert!(!verify(Some("")));
        assert!(!verify(Some("  ")));
        assert!(!verify(Some("none")));
        assert_eq!(
            error(&[
                ("security.protocol", "SSL"),
                ("ssl.endpoint.identification.algorithm", "http"),
            ]),
            "ssl.endpoint.identification.algorithm=http: expected https (check the broker's \
             host name) or nothing (do not)"
        );
    }

    #[test]
    fn tls_errors_name_the_properties() {
        assert_eq!(
            error(&[("security.protocol", "TLS")]),
            "security.protocol=TLS: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
        );
        assert!(error(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", "/etc/truststore.jks"),
            ("ssl.truststore.type", "JKS"),
        ])
        .starts_with("ssl.truststore.type=JKS: only PEM stores are read"));
        assert!(error(&[
            ("security.protocol", "SSL"),
            ("ssl.keystore.location", "/k.p12"),
            ("ssl.keystore.type", "PKCS12"),
        ])
        .starts_with("ssl.keystore.type=PKCS12: only PEM stores are read"));
        assert_eq!(
            error(&[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", "/a.pem"),
                ("ssl.truststore.location", "/b.pem"),
            ]),
            "ssl.ca.location and ssl.truststore.location each give the CA certificates to \
             trust: keep one"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SSL"),
                ("ssl.certificate.location", "/c.pem"),
            ]),
            "ssl.key.location is not set: ssl.certificate.location gives a client \
             certificate, which needs its private key"
        );
        assert_eq!(
            error(&[("security.protocol", "SSL"), ("ssl.key.pem", "KEY")]),
            "ssl.certificate.location is not set: ssl.key.pem gives a private key, which \
             needs its certificate"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SSL"),
                ("ssl.certificate.location", "/c.pem"),
                ("ssl.key.location", "/c.key"),
                ("ssl.keystore.location", "/k.pem"),
            ]),
            "ssl.certificate.location/ssl.key.location and ssl.keystore.location each give \
             a client certificate: keep one"
        );
        assert_eq!(
            error(&[("security.protocol", "SSL"), ("ssl.keystore.key", "KEY")]),
            "ssl.keystore.certificate.chain is not set: ssl.keystore.key gives a private \
             key, which needs its certificate chain"
        );
        let encrypted = error(&[
            ("security.protocol", "SSL"),
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.key.password", "hunter2"),
        ]);
        assert!(
            encrypted.starts_with("ssl.key.password=<redacted>: encrypted private keys"),
            "{encrypted}"
        );
        assert!(!encrypted.contains("hunter2"));
    }

    #[test]
    fn sasl_with_librdkafka_names() {
        let config = parse(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "SCRAM-SHA-256"),
            ("sasl.username", "alice"),
            ("sasl.password", "s3cret"),
        ])
        .unwrap();
        assert_eq!(config.protocol(), SecurityProtocol::SaslSsl);
        assert_eq!(config.tls, Some(TlsConfig::default()));
        assert_eq!(
            config.sasl,
            Some(SaslConfig {
                mechanism: SaslMechanism::Scram(ScramMechanism::Sha256),
                username: "alice".into(),
                password: "s3cret".into(),
            })
        );
        let config = parse(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "plain"),
            ("sasl.username", "bob"),
            ("sasl.password", "pw"),
        ])
        .unwrap();
        assert_eq!(config.protocol(), SecurityProtocol::SaslPlaintext);
        assert_eq!(config.tls, None);
        assert_eq!(config.sasl.unwrap().mechanism, SaslMechanism::Plain);
    }

    #[test]
    fn sasl_with_a_jaas_line() {
        let sasl = |mechanism: &str, jaas: &str| {
            parse(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", mechanism),
                ("sasl.jaas.config", jaas),
            ])
            .map(|c| c.sasl.unwrap())
        };
        assert_eq!(
            sasl(
                "PLAIN",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="al1ce-secret";"#
            )
            .unwrap(),
            SaslConfig {
                mechanism: SaslMechanism::Plain,
                username: "alice".into(),
                password: "al1ce-secret".into(),
            }
        );
        // SCRAM; unquoted values, other spacing, escapes, extra options.
        assert_eq!(
            sasl(
                "SCRAM-SHA-512",
                "org.apache.kafka.common.security.scram.ScramLoginModule  REQUIRED\n  \
                 username=admin password=\"a \\\"quoted\\\" p=w;d\" tokenauth=false ;"
            )
            .unwrap(),
            SaslConfig {
                mechanism: SaslMechanism::Scram(ScramMechanism::Sha512),
                username: "admin".into(),
                password: "a \"quoted\" p=w;d".into(),
            }
        );
    }

    #[test]
    fn jaas_errors() {
        let jaas_error = |mechanism: &str, jaas: &str| {
            error(&[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", mechanism),
                ("sasl.jaas.config", jaas),
            ])
        };
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule";
        let plain = "org.apache.kafka.common.security.plain.PlainLoginModule";
        assert_eq!(
            jaas_error(
                "PLAIN",
                &format!(r#"{scram} required username="a" password="b";"#)
            ),
            format!(
                "invalid sasl.jaas.config: sasl.mechanism=PLAIN logs in with {plain}, not {scram}"
            )
        );
        assert_eq!(
            jaas_error(
                "SCRAM-SHA-256",
                &format!(r#"{scram} required username="a";"#)
            ),
            format!("invalid sasl.jaas.config: {scram} needs a password option")
        );
        assert_eq!(
            jaas_error(
                "SCRAM-SHA-256",
                &format!(r#"{scram} required username="a" password="b""#)
            ),
            "invalid sasl.jaas.config: the login module must end with ';'"
        );
        assert_eq!(
            jaas_error(
                "SCRAM-SHA-256",
                &format!(r#"{scram} mandatory username="a" password="b";"#)
            ),
            "invalid sasl.jaas.config: \"mandatory\" is not a control flag (required, \
             requisite, sufficient or optional)"
        );
        assert_eq!(
            jaas_error(
                "SCRAM-SHA-256",
                &format!(r#"{scram} required username="a" password="b;"#)
            ),
            "invalid sasl.jaas.config: a quoted value is not closed"
        );
        assert_eq!(
            jaas_error(
                "SCRAM-SHA-256",
                &format!(
                    r#"{scram} required username="a" password="b"; {scram} required username="c" password="d";"#
                )
            ),
            "invalid sasl.jaas.config: expected one login module, found 2"
        );
        assert_eq!(
            jaas_error(
                "SCRAM-SHA-256",
                &format!(r#"{scram} required username "a" password="b";"#)
            ),
            "invalid sasl.jaas.config: expected '=' after option username"
        );
        // The password is never in a message.
        let conflict = error(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "one-password"),
            (
                "sasl.jaas.config",
                &format!(r#"{plain} required username="alice" password="other-password";"#),
            ),
        ]);
        assert_eq!(
            conflict,
            "sasl.username/sasl.password and sasl.jaas.config each give different SASL \
             credentials: keep one"
        );
        // The same credentials both ways are fine.
        parse(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "pw"),
            (
                "sasl.jaas.config",
                &format!(r#"{plain} required username="alice" password="pw";"#),
            ),
        ])
        .unwrap();
    }

    #[test]
    fn sasl_errors() {
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.username", "a"),
                ("sasl.password", "b"),
            ]),
            "sasl.mechanism is not set: Kafka's default, GSSAPI (Kerberos), is not \
             supported; set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "GSSAPI")
            ]),
            "sasl.mechanism=GSSAPI: GSSAPI (Kerberos) is not supported; use PLAIN, \
             SCRAM-SHA-256 or SCRAM-SHA-512"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "OAUTHBEARER")
            ]),
            "sasl.mechanism=OAUTHBEARER: OAUTHBEARER is not supported; use PLAIN, \
             SCRAM-SHA-256 or SCRAM-SHA-512"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "DIGEST-MD5")
            ]),
            "sasl.mechanism=DIGEST-MD5: unknown SASL mechanism; use PLAIN, SCRAM-SHA-256 \
             or SCRAM-SHA-512"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "PLAIN"),
                ("sasl.mechanisms", "SCRAM-SHA-256"),
            ]),
            "sasl.mechanism and sasl.mechanisms each give the SASL mechanism: keep one"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "a"),
            ]),
            "sasl.password is not set: SASL/PLAIN needs a user name and a password \
             (sasl.username and sasl.password, or sasl.jaas.config)"
        );
        assert_eq!(
            error(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.password", "b"),
            ]),
            "sasl.username is not set: SASL/SCRAM-SHA-512 needs a user name and a password \
             (sasl.username and sasl.password, or sasl.jaas.config)"
        );
    }

    #[test]
    fn unused_properties_are_named() {
        let properties = props(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/ca.pem"),
            ("sasl.mechanism", "PLAIN"),
            ("ssl.truststore.password", "changeit"),
            ("client.id", "tool"),
        ]);
        let config = SecurityConfig::from_properties(&properties).unwrap();
        assert_eq!(
            config.unused_properties(&properties),
            vec!["client.id", "sasl.mechanism", "ssl.truststore.password"]
        );
        // TLS settings without a TLS protocol are a likely mistake.
        let properties = props(&[("ssl.ca.location", "/ca.pem")]);
        let config = SecurityConfig::from_properties(&properties).unwrap();
        assert_eq!(
            config.unused_properties(&properties),
            vec!["ssl.ca.location"]
        );
    }

    #[test]
    fn debug_output_hides_secrets() {
        let config = parse(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "top-secret"),
            ("ssl.keystore.key", "-----BEGIN PRIVATE KEY----- secret-key"),
            ("ssl.keystore.certificate.chain", "CHAIN"),
        ])
        .unwrap();
        let debug = format!("{config:?}");
        assert!(debug.contains("alice"), "{debug}");
        assert!(!debug.contains("top-secret"), "{debug}");
        assert!(!debug.contains("secret-key"), "{debug}");
    }
}
