//! TLS and SASL against a scripted broker in the test: certificates made
//! here with rcgen, SCRAM and PLAIN checked by weir-auth's server side,
//! every request the broker saw logged per connection.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use weir_auth::{PlainCredentials, ScramCredential, ScramMechanism, ScramServer};
use weir_client::{
    parse_properties, Client, ClientConfig, ClientError, SecurityConfig, SecurityProtocol,
};

// ---- certificates ----

/// A CA, and a key with a certificate it signed.
struct Pki {
    ca: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

struct Leaf {
    chain: String,
    key: String,
}

impl Pki {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self {
            ca: issuer.pem(),
            issuer,
        }
    }

    fn leaf(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "weir");
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            chain: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    fn server(&self, names: &[&str]) -> Leaf {
        self.leaf(names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn client(&self) -> Leaf {
        self.leaf(&[], ExtendedKeyUsagePurpose::ClientAuth)
    }
}

fn server_tls(leaf: &Leaf, client_ca: Option<&str>) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(leaf.chain.as_bytes())
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    Arc::new(builder.with_single_cert(chain, key).unwrap())
}

// ---- the scripted broker ----

#[derive(Clone, Default)]
struct Broker {
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Enabled SASL mechanisms; none: no SASL.
    mechanisms: Vec<&'static str>,
    /// User → password.
    users: BTreeMap<&'static str, &'static str>,
    /// `connections.max.reauth.ms`; 0: sessions last.
    session_ms: i64,
    /// Closes each connection after its first Metadata answer.
    close_after_metadata: bool,
}

/// What the broker saw: (connection number, event).
type Log = Arc<Mutex<Vec<(usize, String)>>>;

fn events(log: &Log) -> Vec<(usize, String)> {
    log.lock().unwrap().clone()
}

enum Sasl {
    Handshake,
    Plain,
    Scram {
        server: Box<ScramServer>,
        first_answered: bool,
    },
    Authenticated {
        expires: Option<Instant>,
    },
}

fn respond<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, key.response_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}

impl Broker {
    async fn start(self) -> (String, Log) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let log: Log = Arc::default();
        let seen = log.clone();
        tokio::spawn(async move {
            let mut connection = 0;
            while let Ok((tcp, _)) = listener.accept().await {
                connection += 1;
                let broker = self.clone();
                let log = seen.clone();
                tokio::spawn(async move {
                    match &broker.tls {
                        None => broker.serve(connection, tcp, log).await,
                        Some(config) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(config.clone());
                            match acceptor.accept(tcp).await {
                                Ok(stream) => broker.serve(connection, stream, log).await,
                                Err(error) => {
                                    log.lock()
                                        .unwrap()
                                        .push((connection, format!("TLS failed: {error}")));
                                }
                            }
                        }
                    }
                });
            }
        });
        (addr, log)
    }

    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        connection: usize,
        mut stream: S,
        log: Log,
    ) {
        let mut sasl = Sasl::Handshake;
        loop {
            let mut size = [0u8; 4];
            if stream.read_exact(&mut size).await.is_err() {
                return;
            }
            let size = i32::from_be_bytes(size);
            if !(0..=1 << 20).contains(&size) {
                // Not a Kafka request (a TLS hello, say).
                return;
            }
            let mut body = vec![0u8; size as usize];
            if stream.read_exact(&mut body).await.is_err() {
                return;
            }
            let mut body = Bytes::from(body);
            let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
            let version = i16::from_be_bytes([body[2], body[3]]);
            let header =
                RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
            let id = header.correlation_id;
            let note = |event: String| log.lock().unwrap().push((connection, event));
            let authenticated = match &sasl {
                Sasl::Authenticated { expires } => expires.is_none_or(|at| Instant::now() < at),
                _ => self.mechanisms.is_empty(),
            };
            let (reply, close) = match key {
                ApiKey::ApiVersions => {
                    note("ApiVersions".into());
                    let ranges = [
                        (ApiKey::ApiVersions, 0, 4),
                        (ApiKey::Metadata, 0, 12),
                        (ApiKey::SaslHandshake, 0, 1),
                        (ApiKey::SaslAuthenticate, 0, 2),
                    ];
                    let body = ApiVersionsResponse::default().with_api_keys(
                        ranges
                            .iter()
                            .map(|&(key, min, max)| {
                                ApiVersion::default()
                                    .with_api_key(key as i16)
                                    .with_min_version(min)
                                    .with_max_version(max)
                            })
                            .collect(),
                    );
                    (respond(key, version, id, &body), false)
                }
                ApiKey::SaslHandshake => {
                    let request = SaslHandshakeRequest::decode(&mut body, version).unwrap();
                    let mechanism = request.mechanism.to_string();
                    note(format!("SaslHandshake v{version} {mechanism}"));
                    let enabled = self.mechanisms.iter().any(|m| *m == mechanism);
                    let response = SaslHandshakeResponse::default()
                        .with_error_code(if enabled { 0 } else { 33 })
                        .with_mechanisms(
                            self.mechanisms
                                .iter()
                                .map(|m| StrBytes::from_static_str(m))
                                .collect(),
                        );
                    if enabled {
                        sasl = match ScramMechanism::from_name(&mechanism) {
                            Some(m) => Sasl::Scram {
                                server: Box::new(ScramServer::new(m)),
                                first_answered: false,
                            },
                            None => Sasl::Plain,
                        };
                    }
                    (respond(key, version, id, &response), !enabled)
                }
                ApiKey::SaslAuthenticate => {
                    let request = SaslAuthenticateRequest::decode(&mut body, version).unwrap();
                    note(format!("SaslAuthenticate v{version}"));
                    let (outcome, next) = self.authenticate(&mut sasl, &request.auth_bytes);
                    let response = match outcome {
                        Ok(reply) => SaslAuthenticateResponse::default()
                            .with_auth_bytes(reply)
                            .with_session_lifetime_ms(if next { self.session_ms } else { 0 }),
                        Err(message) => SaslAuthenticateResponse::default()
                            .with_error_code(58)
                            .with_error_message(Some(StrBytes::from_string(message))),
                    };
                    let failed = response.error_code != 0;
                    if next {
                        sasl = Sasl::Authenticated {
                            expires: (self.session_ms > 0).then(|| {
                                Instant::now() + Duration::from_millis(self.session_ms as u64)
                            }),
                        };
                    }
                    (respond(key, version, id, &response), failed)
                }
                ApiKey::Metadata if authenticated => {
                    note("Metadata".into());
                    let body = MetadataResponse::default().with_controller_id(BrokerId(7));
                    (respond(key, version, id, &body), self.close_after_metadata)
                }
                other => {
                    note(format!("{other:?} refused: not authenticated"));
                    return;
                }
            };
            if stream.write_all(&reply).await.is_err() || stream.flush().await.is_err() {
                return;
            }
            if close {
                let _ = stream.shutdown().await;
                return;
            }
        }
    }

    /// One token: the reply or the failure message, and whether the client
    /// is now authenticated.
    fn authenticate(&self, sasl: &mut Sasl, token: &[u8]) -> (Result<Bytes, String>, bool) {
        let credential = |user: &str, mechanism: ScramMechanism| {
            self.users
                .get(user)
                .map(|password| ScramCredential::from_password(mechanism, password, 4096))
        };
        match sasl {
            Sasl::Plain => {
                let verified = PlainCredentials::parse(token).ok().filter(|c| {
                    let stored = credential(&c.username, ScramMechanism::Sha512);
                    c.authenticate(stored.as_ref().map(|s| (ScramMechanism::Sha512, s)))
                        .is_ok()
                });
                match verified {
                    Some(_) => (Ok(Bytes::new()), true),
                    None => (
                        Err("Authentication failed: Invalid username or password".into()),
                        false,
                    ),
                }
            }
            Sasl::Scram {
                server,
                first_answered: first @ false,
            } => {
                *first = true;
                let user = server.receive_client_first(token).unwrap().to_owned();
                let stored = credential(&user, server.mechanism());
                (Ok(Bytes::from(server.server_first(stored.as_ref()))), false)
            }
            Sasl::Scram { server, .. } => match server.receive_client_final(token) {
                Ok(reply) => (Ok(Bytes::from(reply)), true),
                Err(_) => (
                    Err(format!(
                        "Authentication failed during authentication due to invalid \
                         credentials with SASL mechanism {}",
                        server.mechanism()
                    )),
                    false,
                ),
            },
            _ => (Err("unexpected SaslAuthenticate".into()), false),
        }
    }
}

// ---- helpers ----

fn quick() -> ClientConfig {
    ClientConfig {
        client_id: "security-test".into(),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
    }
}

fn security(properties: &str) -> SecurityConfig {
    SecurityConfig::from_properties(&parse_properties(properties).unwrap()).unwrap()
}

/// A file in `dir` holding `text`; its path.
fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

async fn connect(addr: &str, security: SecurityConfig) -> Result<Client, ClientError> {
    Client::connect_with_security(addr, quick(), security).await
}

fn tls_failure(error: ClientError) -> (String, Option<&'static str>) {
    match error {
        ClientError::Tls { reason, hint, .. } => (reason, hint),
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

fn users() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([("admin", "admin-secret"), ("alice", "alice-secret")])
}

// ---- TLS ----

#[tokio::test]
async fn ssl_trusts_the_given_ca_and_checks_the_host_name() {
    let pki = Pki::new("test CA");
    let dir = tempfile::tempdir().unwrap();
    let ca = write(&dir, "ca.pem", &pki.ca);
    let (addr, log) = Broker {
        tls: Some(server_tls(&pki.server(&["localhost", "127.0.0.1"]), None)),
        ..Broker::default()
    }
    .start()
    .await;
    let port = addr.rsplit(':').next().unwrap();
    let config = security(&format!("security.protocol=SSL\nssl.ca.location={ca}\n"));
    assert_eq!(config.protocol(), SecurityProtocol::Ssl);
    for target in [addr.clone(), format!("localhost:{port}")] {
        let mut client = connect(&target, config.clone()).await.unwrap();
        assert_eq!(client.security(), &config);
        assert_eq!(client.metadata(None).await.unwrap().controller_id, 7);
    }
    assert_eq!(
        events(&log),
        vec![
            (1, "ApiVersions".into()),
            (1, "Metadata".into()),
            (2, "ApiVersions".into()),
            (2, "Metadata".into()),
        ]
    );
    // Java's names, the trust store inline this time.
    let java = security(&format!(
        "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.certificates={}\n",
        pki.ca.replace('\n', "\\n\\\n")
    ));
    let mut client = connect(&addr, java).await.unwrap();
    client.metadata(None).await.unwrap();
}

#[tokio::test]
async fn a_broker_signed_by_another_ca_is_refused() {
    let pki = Pki::new("test CA");
    let other = Pki::new("another CA");
    let dir = tempfile::tempdir().unwrap();
    let ca = write(&dir, "other-ca.pem", &other.ca);
    let (addr, _) = Broker {
        tls: Some(server_tls(&pki.server(&["127.0.0.1"]), None)),
        ..Broker::default()
    }
    .start()
    .await;
    // Turning the host name check off keeps the chain's.
    for verify in ["https", ""] {
        let config = security(&format!(
            "security.protocol=SSL\nssl.ca.location={ca}\n\
             ssl.endpoint.identification.algorithm={verify}\n"
        ));
        let error = connect(&addr, config).await.unwrap_err();
        assert!(
            error.to_string().starts_with(&format!(
                "TLS with {addr} failed: invalid peer certificate: UnknownIssuer"
            )),
            "{error}"
        );
        let (_, hint) = tls_failure(error);
        assert!(hint.unwrap().contains("not signed by a trusted CA"));
    }
}

#[tokio::test]
async fn a_certificate_for_another_host_needs_the_check_turned_off() {
    let pki = Pki::new("test CA");
    let dir = tempfile::tempdir().unwrap();
    let ca = write(&dir, "ca.pem", &pki.ca);
    let (addr, _) = Broker {
        tls: Some(server_tls(&pki.server(&["broker-1.example"]), None)),
        ..Broker::default()
    }
    .start()
    .await;
    let checked = security(&format!("security.protocol=SSL\nssl.ca.location={ca}\n"));
    let (reason, hint) = tls_failure(connect(&addr, checked).await.unwrap_err());
    assert!(
        reason.contains("certificate not valid for name"),
        "{reason}"
    );
    assert!(hint
        .unwrap()
        .contains("ssl.endpoint.identification.algorithm"));
    let unchecked = security(&format!(
        "security.protocol=SSL\nssl.ca.location={ca}\nssl.endpoint.identification.algorithm=\n"
    ));
    let mut client = connect(&addr, unchecked).await.unwrap();
    client.metadata(None).await.unwrap();
}

#[tokio::test]
async fn mutual_tls_with_either_clients_key_store_names() {
    let pki = Pki::new("test CA");
    let clients = Pki::new("client CA");
    let dir = tempfile::tempdir().unwrap();
    let ca = write(&dir, "ca.pem", &pki.ca);
    let client_leaf = clients.client();
    let cert = write(&dir, "client.pem", &client_leaf.chain);
    let key = write(&dir, "client.key", &client_leaf.key);
    let keystore = write(
        &dir,
        "keystore.pem",
        &format!("{}{}", client_leaf.key, client_leaf.chain),
    );
    let (addr, log) = Broker {
        tls: Some(server_tls(&pki.server(&["127.0.0.1"]), Some(&clients.ca))),
        ..Broker::default()
    }
    .start()
    .await;
    let base = format!("security.protocol=SSL\nssl.ca.location={ca}\n");
    // Without a certificate: the broker's alert, read with the first
    // response under TLS 1.3.
    let error = connect(&addr, security(&base)).await.unwrap_err();
    let (reason, hint) = tls_failure(error);
    assert!(reason.contains("CertificateRequired"), "{reason}");
    assert!(hint.unwrap().contains("requires a client certificate"));
    // A certificate the broker's CA did not sign.
    let stranger = pki.client();
    let stranger_cert = write(&dir, "stranger.pem", &stranger.chain);
    let stranger_key = write(&dir, "stranger.key", &stranger.key);
    let error = connect(
        &addr,
        security(&format!(
            "{base}ssl.certificate.location={stranger_cert}\nssl.key.location={stranger_key}\n"
        )),
    )
    .await
    .unwrap_err();
    let (reason, _) = tls_failure(error);
    assert!(reason.contains("received fatal alert"), "{reason}");
    // librdkafka's names, then Java's PEM key store.
    for identity in [
        format!("ssl.certificate.location={cert}\nssl.key.location={key}\n"),
        format!("ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"),
    ] {
        let mut client = connect(&addr, security(&format!("{base}{identity}")))
            .await
            .unwrap();
        assert_eq!(client.metadata(None).await.unwrap().controller_id, 7);
    }
    let served = events(&log).iter().filter(|(_, e)| e == "Metadata").count();
    assert_eq!(served, 2);
}

#[tokio::test]
async fn tls_to_a_plaintext_listener_says_what_to_check() {
    let pki = Pki::new("test CA");
    let (addr, _) = Broker::default().start().await;
    let config = security(&format!(
        "security.protocol=SSL\nssl.ca.pem={}\n",
        pki.ca.replace('\n', "\\n")
    ));
    let error = connect(&addr, config).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "TLS with {addr} failed: the broker closed the connection during the handshake \
             (is this an SSL or SASL_SSL listener?)"
        )
    );
}

#[tokio::test]
async fn unusable_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem").display().to_string();
    let error = connect(
        "127.0.0.1:1",
        security(&format!(
            "security.protocol=SSL\nssl.ca.location={missing}\n"
        )),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, ClientError::Security(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot read CA certificate {missing}: ")),
        "{error}"
    );
    let junk = write(&dir, "truststore.jks", "\u{fe}\u{ed}\u{fe}\u{ed} not PEM");
    let error = connect(
        "127.0.0.1:1",
        security(&format!(
            "security.protocol=SSL\nssl.truststore.location={junk}\n"
        )),
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("no CA certificate in {junk} (it must be PEM")),
        "{error}"
    );
    let pki = Pki::new("test CA");
    let ca = write(&dir, "ca.pem", &pki.ca);
    let chain_only = write(&dir, "chain.pem", &pki.client().chain);
    let error = connect(
        "127.0.0.1:1",
        security(&format!(
            "security.protocol=SSL\nssl.ca.location={ca}\nssl.keystore.location={chain_only}\n"
        )),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "no private key in {chain_only} (it must be an unencrypted PEM key: PKCS#8, \
             PKCS#1 or SEC1)"
        )
    );
}

// ---- SASL ----

fn sasl_broker() -> Broker {
    Broker {
        mechanisms: vec!["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        users: users(),
        ..Broker::default()
    }
}

#[tokio::test]
async fn scram_and_plain_authenticate_before_the_first_request() {
    let (addr, log) = sasl_broker().start().await;
    let configs = [
        "sasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=admin-secret\n",
        "sasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";\n",
        "sasl.mechanisms=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n",
    ];
    for properties in configs {
        let config = security(&format!("security.protocol=SASL_PLAINTEXT\n{properties}"));
        let mut client = connect(&addr, config).await.unwrap();
        assert_eq!(client.metadata(None).await.unwrap().controller_id, 7);
    }
    let seen: Vec<(usize, String)> = events(&log);
    let expected: Vec<(usize, String)> = [
        (1, "ApiVersions"),
        (1, "SaslHandshake v1 SCRAM-SHA-512"),
        (1, "SaslAuthenticate v2"),
        (1, "SaslAuthenticate v2"),
        (1, "Metadata"),
        (2, "ApiVersions"),
        (2, "SaslHandshake v1 SCRAM-SHA-256"),
        (2, "SaslAuthenticate v2"),
        (2, "SaslAuthenticate v2"),
        (2, "Metadata"),
        (3, "ApiVersions"),
        (3, "SaslHandshake v1 PLAIN"),
        (3, "SaslAuthenticate v2"),
        (3, "Metadata"),
    ]
    .into_iter()
    .map(|(c, e)| (c, e.to_owned()))
    .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_wrong_password_fails_with_the_brokers_message() {
    let (addr, _) = sasl_broker().start().await;
    let cases = [
        (
            "SCRAM-SHA-512",
            "Authentication failed during authentication due to invalid credentials with SASL \
             mechanism SCRAM-SHA-512",
        ),
        (
            "PLAIN",
            "Authentication failed: Invalid username or password",
        ),
    ];
    for (mechanism, message) in cases {
        let config = security(&format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n\
             sasl.username=admin\nsasl.password=wrong\n"
        ));
        let error = connect(&addr, config).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("SASL authentication with {addr} failed: {message}")
        );
        assert!(error.is(kafka_protocol::ResponseError::SaslAuthenticationFailed));
        match error {
            ClientError::Authentication {
                mechanism: m, code, ..
            } => {
                assert_eq!(m, mechanism);
                assert_eq!(code, Some(58));
            }
            other => panic!("{other:?}"),
        }
    }
    // An unknown user fails the same way as a wrong password.
    let config = security(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n\
         sasl.username=mallory\nsasl.password=x\n",
    );
    let error = connect(&addr, config).await.unwrap_err();
    assert!(error.is(kafka_protocol::ResponseError::SaslAuthenticationFailed));
}

#[tokio::test]
async fn a_mechanism_the_broker_does_not_enable_is_named_with_those_it_does() {
    let (addr, _) = Broker {
        mechanisms: vec!["SCRAM-SHA-512"],
        users: users(),
        ..Broker::default()
    }
    .start()
    .await;
    let config = security(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.username=admin\nsasl.password=admin-secret\n",
    );
    let error = connect(&addr, config).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "SASL authentication with {addr} failed: the broker does not enable SASL \
             mechanism PLAIN; it enables SCRAM-SHA-512"
        )
    );
    assert!(error.is(kafka_protocol::ResponseError::UnsupportedSaslMechanism));
}

#[tokio::test]
async fn a_new_connection_authenticates_again() {
    let (addr, log) = Broker {
        close_after_metadata: true,
        ..sasl_broker()
    }
    .start()
    .await;
    let config = security(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
         sasl.username=admin\nsasl.password=admin-secret\n",
    );
    let mut client = connect(&addr, config).await.unwrap();
    client.metadata(None).await.unwrap();
    // The broker closed the connection; the next request finds out, and
    // the one after reconnects.
    assert!(matches!(
        client.metadata(None).await.unwrap_err(),
        ClientError::Io { .. }
    ));
    client.metadata(None).await.unwrap();
    let second: Vec<String> = events(&log)
        .into_iter()
        .filter(|(c, _)| *c == 2)
        .map(|(_, e)| e)
        .collect();
    assert_eq!(
        second,
        vec![
            "SaslHandshake v1 SCRAM-SHA-512",
            "SaslAuthenticate v2",
            "SaslAuthenticate v2",
            "Metadata"
        ]
    );
}

#[tokio::test]
async fn a_limited_session_is_renewed_on_the_same_connection() {
    let (addr, log) = Broker {
        session_ms: 400,
        ..sasl_broker()
    }
    .start()
    .await;
    let config = security(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.username=alice\nsasl.password=alice-secret\n",
    );
    let mut client = connect(&addr, config).await.unwrap();
    client.metadata(None).await.unwrap();
    // Past the session's end: the broker would close the connection at a
    // request sent without authenticating again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.metadata(None).await.unwrap();
    let seen: Vec<(usize, String)> = events(&log);
    let expected: Vec<(usize, String)> = [
        "ApiVersions",
        "SaslHandshake v1 PLAIN",
        "SaslAuthenticate v2",
        "Metadata",
        "SaslHandshake v1 PLAIN",
        "SaslAuthenticate v2",
        "Metadata",
    ]
    .into_iter()
    .map(|e| (1, e.to_owned()))
    .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn sasl_over_tls_and_other_brokers_of_the_cluster_alike() {
    let pki = Pki::new("test CA");
    let dir = tempfile::tempdir().unwrap();
    let ca = write(&dir, "ca.pem", &pki.ca);
    let broker = Broker {
        tls: Some(server_tls(&pki.server(&["127.0.0.1"]), None)),
        ..sasl_broker()
    };
    let (first, first_log) = broker.clone().start().await;
    let (second, second_log) = broker.start().await;
    let config = security(&format!(
        "security.protocol=SASL_SSL\nssl.ca.location={ca}\n\
         sasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=admin-secret\n"
    ));
    let client = connect(&first, config.clone()).await.unwrap();
    let mut other = client.connect_to_broker(&second).await.unwrap();
    assert_eq!(other.security(), &config);
    other.metadata(None).await.unwrap();
    for log in [first_log, second_log] {
        let handshakes = events(&log)
            .iter()
            .filter(|(_, e)| e == "SaslHandshake v1 SCRAM-SHA-512")
            .count();
        assert_eq!(handshakes, 1);
    }
}
