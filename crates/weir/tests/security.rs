//! Listeners, TLS, SASL and ACLs against the real binary, with librdkafka
//! (the rdkafka crate) and raw requests: clients in, each on its listener,
//! and nobody in where they do not belong.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::pki::Pki;
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message};

const TIMEOUT: Duration = Duration::from_secs(15);

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// A librdkafka configuration for `bootstrap` with `settings` on top.
fn client(bootstrap: &str, settings: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "10000")
        .set("socket.timeout.ms", "5000")
        .set("linger.ms", "0");
    for (key, value) in settings {
        config.set(*key, *value);
    }
    config
}

/// Counts the records the broker did not acknowledge, and the last error.
#[derive(Default)]
struct Deliveries {
    failed: std::sync::Mutex<Vec<String>>,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, report: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = report {
            self.failed.lock().unwrap().push(error.to_string());
        }
    }
}

/// Produces `count` records to `topic` and waits for their acknowledgement:
/// an error if any was not acknowledged.
fn produce(config: &ClientConfig, topic: &str, count: usize) -> Result<(), String> {
    let producer: BaseProducer<Deliveries> = config
        .create_with_context(Deliveries::default())
        .map_err(|e| e.to_string())?;
    for i in 0..count {
        let value = format!("value-{i}");
        common::send_queued(&producer, BaseRecord::<(), str>::to(topic).payload(&value));
    }
    producer.flush(TIMEOUT).map_err(|e| e.to_string())?;
    let failed = producer.context().failed.lock().unwrap();
    match failed.first() {
        Some(error) => Err(format!("{} of {count} failed: {error}", failed.len())),
        None => Ok(()),
    }
}

/// Reads `count` records of partition 0 of `topic` from the start.
fn consume(config: &ClientConfig, topic: &str, count: usize) -> Vec<String> {
    let consumer: BaseConsumer = config
        .clone()
        .set("group.id", format!("reader-{topic}"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut values = Vec::new();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while values.len() < count && std::time::Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            values.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into());
        }
    }
    values
}

/// The brokers a client of `config` is told of, as host:port.
fn advertised(config: &ClientConfig) -> Vec<String> {
    let consumer: BaseConsumer = config.create().unwrap();
    let metadata = consumer.fetch_metadata(None, TIMEOUT).unwrap();
    metadata
        .brokers()
        .iter()
        .map(|b| format!("{}:{}", b.host(), b.port()))
        .collect()
}

#[test]
fn each_listener_serves_its_protocol_and_tells_clients_its_own_addresses() {
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "--ssl-keystore-location",
        &path(&keystore),
    ]);
    let (plain, ssl) = (
        weir.listener("PLAINTEXT").to_owned(),
        weir.listener("SSL").to_owned(),
    );
    assert_ne!(plain, ssl);
    let tls = client(
        &ssl,
        &[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", &path(&pki.ca)),
        ],
    );
    assert_eq!(advertised(&tls), vec![ssl.clone()]);
    assert_eq!(advertised(&client(&plain, &[])), vec![plain.clone()]);
    produce(&tls, "over-tls", 200).unwrap();
    let values = consume(&tls, "over-tls", 200);
    assert_eq!(values.len(), 200);
    assert_eq!(values[199], "value-199");
    // What went in over TLS reads the same over PLAINTEXT.
    assert_eq!(consume(&client(&plain, &[]), "over-tls", 200), values);
}

#[test]
fn mutual_tls_takes_the_principal_from_the_certificate_and_refuses_strangers() {
    let pki = Pki::new("weir");
    let stranger = Pki::new("other");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    // Only alice's certificate, mapped by the rule to "alice", is a super
    // user; everyone else has no ACL and is denied.
    let weir = Weir::start(&[
        "--listeners",
        "SSL://127.0.0.1:0",
        "--ssl-keystore-location",
        &path(&keystore),
        "--ssl-truststore-location",
        &path(&pki.ca),
        "--ssl-client-auth",
        "required",
        "--ssl-principal-mapping-rules",
        "RULE:^CN=([^,]+),O=Weir,C=US$/$1/L,DEFAULT",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:alice",
        // Alice's password, for the HTTP endpoint.
        "--add-scram",
        "SCRAM-SHA-512=[name=alice,password=alice-secret]",
    ]);
    let ssl = weir.listener("SSL").to_owned();
    let with_certificate = |cert: &Path, key: &Path, ca: &Path| {
        client(
            &ssl,
            &[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", &path(ca)),
                ("ssl.certificate.location", &path(cert)),
                ("ssl.key.location", &path(key)),
            ],
        )
    };
    // Subjects as C=US, O=…, CN=… in the certificate: CN=…,O=…,C=US as
    // Kafka writes them.
    let organisation = |name: &'static str, org: &'static str| {
        move |params: &mut rcgen::CertificateParams| {
            let mut subject = rcgen::DistinguishedName::new();
            subject.push(rcgen::DnType::CountryName, "US");
            subject.push(rcgen::DnType::OrganizationName, org);
            subject.push(rcgen::DnType::CommonName, name);
            params.distinguished_name = subject;
        }
    };
    let alice = pki.client_with("alice", "Alice", organisation("Alice", "Weir"));
    let alice = with_certificate(&alice.certificate, &alice.key, &pki.ca);
    produce(&alice, "secured", 10).unwrap();
    assert_eq!(consume(&alice, "secured", 10).len(), 10);

    // Bob's certificate is good, but the principal User:CN=Bob,O=Other,C=US
    // may not write.
    let bob = pki.client_with("bob", "Bob", organisation("Bob", "Other"));
    let bob = with_certificate(&bob.certificate, &bob.key, &pki.ca);
    let denied = produce(
        &bob.clone().set("message.timeout.ms", "3000").clone(),
        "secured",
        1,
    );
    assert!(denied.is_err(), "bob wrote without an ACL");

    // No certificate, one from another CA, or an expired one: no handshake.
    let other = stranger.client_with("mallory", "Mallory", organisation("Mallory", "Weir"));
    let old = pki.client_with("oldie", "Oldie", |params| {
        organisation("Oldie", "Weir")(params);
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    for config in [
        client(
            &ssl,
            &[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", &path(&pki.ca)),
            ],
        ),
        with_certificate(&other.certificate, &other.key, &pki.ca),
        with_certificate(&old.certificate, &old.key, &pki.ca),
    ] {
        let consumer: BaseConsumer = config.create().unwrap();
        assert!(
            consumer
                .fetch_metadata(None, Duration::from_secs(3))
                .is_err(),
            "a client without a trusted, valid certificate was served"
        );
    }
    // Garbage instead of a ClientHello closes that connection only.
    let mut garbage = TcpStream::connect(&ssl).unwrap();
    garbage.write_all(&[0, 0, 0, 20, 0, 3, 0, 0]).unwrap();
    garbage
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(
        std::io::Read::read(&mut garbage, &mut buf),
        Ok(0) | Ok(7) | Err(_)
    ));
    // Alice is still served.
    assert_eq!(consume(&alice, "secured", 10).len(), 10);
    let metrics = weir.http_get_as("/metrics", "alice", "alice-secret").1;
    assert!(
        metrics.contains("weir_authentication_failures_total{listener=\"SSL\",mechanism=\"TLS\"}"),
        "{metrics}"
    );
}

/// Runs openssl with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl {args:?}: {status}");
}

/// `openssl x509 -req` without extensions makes an X.509 v1 certificate,
/// which rustls does not verify: the client is refused, and the broker's
/// log says why and how to make a v3 one (before, an INFO line named only
/// `UnsupportedCertVersion`). The certificate that advice makes is served.
#[test]
fn a_v1_client_certificate_is_refused_with_a_warning_that_says_how_to_make_a_v3_one() {
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path();
    openssl(
        at,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-subj",
            "/CN=openssl-ca",
            "-out",
            "ca.pem",
            "-days",
            "2",
        ],
    );
    openssl(
        at,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "client.key",
            "-subj",
            "/CN=old",
            "-out",
            "client.csr",
        ],
    );
    let sign = |out: &str, extensions: Option<&str>| {
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            out,
        ];
        if let Some(file) = extensions {
            args.extend(["-extfile", file]);
        }
        openssl(at, &args);
    };
    sign("v1.pem", None);
    std::fs::write(at.join("ext.cnf"), "basicConstraints=CA:FALSE\n").unwrap();
    sign("v3.pem", Some("ext.cnf"));
    let trusted = at.join("trusted.pem");
    let mut cas = std::fs::read_to_string(&pki.ca).unwrap();
    cas.push_str(&std::fs::read_to_string(at.join("ca.pem")).unwrap());
    std::fs::write(&trusted, cas).unwrap();

    let weir = Weir::start_logged(&[
        "--listeners",
        "SSL://127.0.0.1:0",
        "--ssl-keystore-location",
        &path(&keystore),
        "--ssl-truststore-location",
        &path(&trusted),
        "--ssl-client-auth",
        "required",
    ]);
    let ssl = weir.listener("SSL").to_owned();
    let with_certificate = |certificate: &str| {
        client(
            &ssl,
            &[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", &path(&pki.ca)),
                ("ssl.certificate.location", &path(&at.join(certificate))),
                ("ssl.key.location", &path(&at.join("client.key"))),
            ],
        )
        .create::<BaseConsumer>()
        .unwrap()
        .fetch_metadata(None, Duration::from_secs(3))
    };
    assert!(
        with_certificate("v1.pem").is_err(),
        "a v1 certificate was served"
    );
    common::cluster::wait_until("the warning", Duration::from_secs(10), || {
        weir.logged()
            .lines()
            .find(|l| l.contains("WARN") && l.contains("X.509 v1"))
            .map(|l| assert!(l.contains("-extfile"), "{l}"))
    });
    with_certificate("v3.pem").expect("the v3 certificate the warning's advice makes");
}

#[test]
fn sasl_scram_and_plain_authenticate_against_the_same_users() {
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let weir = Weir::start(&[
        "--listeners",
        "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--inter-broker-listener-name",
        "SASL_PLAINTEXT",
        "--ssl-keystore-location",
        &path(&keystore),
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--add-scram",
        "SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]",
    ]);
    let sasl_ssl = weir.listener("SASL_SSL").to_owned();
    let login = |mechanism: &str, user: &str, password: &str| {
        client(
            &sasl_ssl,
            &[
                ("security.protocol", "SASL_SSL"),
                ("ssl.ca.location", &path(&pki.ca)),
                ("sasl.mechanism", mechanism),
                ("sasl.username", user),
                ("sasl.password", password),
            ],
        )
    };
    produce(&login("SCRAM-SHA-512", "admin", "admin-secret"), "users", 5).unwrap();
    produce(&login("SCRAM-SHA-256", "alice", "alice-secret"), "users", 5).unwrap();
    // PLAIN checks the password against the SCRAM credential.
    produce(&login("PLAIN", "alice", "alice-secret"), "users", 5).unwrap();
    assert_eq!(
        consume(&login("PLAIN", "admin", "admin-secret"), "users", 15).len(),
        15
    );
    for (mechanism, user, password) in [
        ("SCRAM-SHA-512", "admin", "wrong"),
        // alice has no SHA-512 credential.
        ("SCRAM-SHA-512", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "nobody", "x"),
        ("PLAIN", "alice", "wrong"),
    ] {
        let consumer: BaseConsumer = login(mechanism, user, password).create().unwrap();
        let error = consumer
            .fetch_metadata(None, Duration::from_secs(3))
            .unwrap_err();
        assert!(
            error.to_string().contains("Authentication") || error.to_string().contains("transport"),
            "{mechanism} {user}: {error}"
        );
    }
    // The others are undisturbed.
    assert_eq!(
        consume(
            &login("SCRAM-SHA-256", "alice", "alice-secret"),
            "users",
            15
        )
        .len(),
        15
    );
}

/// Sends SaslHandshake for `mechanism`; the response's error code.
fn handshake(raw: &mut Raw, mechanism: &str) -> SaslHandshakeResponse {
    raw.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())),
    )
}

#[test]
fn a_sasl_listener_serves_nothing_before_authentication() {
    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-512,PLAIN",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();

    // A Kafka request before the handshake closes the connection.
    let mut early = Raw::connect(&sasl);
    early.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(early.is_closed());

    // A frame above sasl.server.max.receive.size closes it too, unread.
    let mut large = TcpStream::connect(&sasl).unwrap();
    large.write_all(&(600_000i32).to_be_bytes()).unwrap();
    let _ = large.write_all(&[0u8; 1024]);
    large
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 8];
    assert!(matches!(
        std::io::Read::read(&mut large, &mut buf),
        Ok(0) | Err(_)
    ));

    // A mechanism not enabled: refused with the list of enabled ones.
    let mut unknown = Raw::connect(&sasl);
    let response = handshake(&mut unknown, "SCRAM-SHA-256");
    assert_eq!(response.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let enabled: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(enabled, ["SCRAM-SHA-512", "PLAIN"]);
    assert!(unknown.is_closed());

    // SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE, closed.
    let mut out_of_turn = Raw::connect(&sasl);
    let response: SaslAuthenticateResponse = out_of_turn.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(b"\0admin\0admin-secret"[..].into()),
    );
    assert_eq!(response.error_code, 34, "ILLEGAL_SASL_STATE");
    assert!(out_of_turn.is_closed());

    // A wrong PLAIN password: a message that does not say which part was
    // wrong, then the connection closes.
    let mut wrong = Raw::connect(&sasl);
    assert_eq!(handshake(&mut wrong, "PLAIN").error_code, 0);
    let response: SaslAuthenticateResponse = wrong.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(b"\0admin\0guess"[..].into()),
    );
    assert_eq!(response.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert_eq!(
        response.error_message.as_deref(),
        Some("Authentication failed: Invalid username or password")
    );
    assert!(wrong.is_closed());

    // The right one: then any request is served.
    let mut right = Raw::connect(&sasl);
    assert_eq!(handshake(&mut right, "PLAIN").error_code, 0);
    let response: SaslAuthenticateResponse = right.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(b"\0admin\0admin-secret"[..].into()),
    );
    assert_eq!(response.error_code, 0);
    let metadata: MetadataResponse = right.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(metadata.brokers.len(), 1);
    assert_eq!(
        format!("{}:{}", metadata.brokers[0].host, metadata.brokers[0].port),
        sasl
    );
    // SaslHandshake on a PLAINTEXT listener is out of place.
    let mut plain = Raw::connect(weir.listener("PLAINTEXT"));
    assert_eq!(handshake(&mut plain, "PLAIN").error_code, 34);
}

fn follower_fetch(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(2))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}

#[test]
fn without_acls_a_principal_sees_nothing_and_a_replica_id_gets_no_follower_view() {
    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:admin",
    ]);
    let admin = client(
        weir.listener("SASL_PLAINTEXT"),
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "admin"),
            ("sasl.password", "admin-secret"),
        ],
    );
    produce(&admin, "guarded", 3).unwrap();
    assert_eq!(consume(&admin, "guarded", 3).len(), 3);

    // User:ANONYMOUS on the PLAINTEXT listener: no ACL names it.
    let mut anonymous = Raw::connect(weir.listener("PLAINTEXT"));
    let all: MetadataResponse = anonymous.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    assert!(all.topics.is_empty(), "{:?}", all.topics);
    let named = anonymous.topic_metadata("guarded");
    assert_eq!(named.topics[0].error_code, 29, "TOPIC_AUTHORIZATION_FAILED");
    // Claiming to be broker 2 without ClusterAction: an authorization
    // error, not the log.
    let fetched: FetchResponse = anonymous.call(ApiKey::Fetch, 12, &follower_fetch("guarded"));
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, 29);
    assert!(partition.records.as_ref().is_none_or(|r| r.is_empty()));
    let metrics = weir.http_get_as("/metrics", "admin", "admin-secret").1;
    assert!(
        metrics.contains("weir_authorization_denials_total{principal=\"User:ANONYMOUS\",operation=\"CLUSTER_ACTION\""),
        "{metrics}"
    );
}

/// Leaders of the partitions of `topic`, as a SASL_SSL client sees them.
fn leaders(config: &ClientConfig, topic: &str) -> Option<Vec<i32>> {
    let consumer: BaseConsumer = config.create().ok()?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()?;
    let topic = metadata.topics().first()?;
    (topic.error().is_none() && !topic.partitions().is_empty())
        .then(|| topic.partitions().iter().map(|p| p.leader()).collect())
}

/// The README's secured cluster: SASL_SSL for clients, brokers and
/// controllers alike, ACLs on, and no anonymous super user.
#[test]
fn a_cluster_with_only_sasl_ssl_listeners_replicates_and_fails_over() {
    use common::cluster::wait_until;
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                username=\"broker\" password=\"broker-secret\";";
    let mut nodes = three_nodes(|port| {
        vec![
            "--listeners".to_owned(),
            format!("SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
            "--listener-security-protocol-map".to_owned(),
            "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL".to_owned(),
            "--authorizer-class-name".to_owned(),
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_owned(),
            "--super-users".to_owned(),
            "User:broker;User:app".to_owned(),
            "--ssl-keystore-location".to_owned(),
            path(&keystore),
            "--ssl-truststore-location".to_owned(),
            path(&pki.ca),
            "--sasl-jaas-config".to_owned(),
            jaas.to_owned(),
            "--add-scram".to_owned(),
            "SCRAM-SHA-512=[name=broker,password=broker-secret]".to_owned(),
            "--add-scram".to_owned(),
            "SCRAM-SHA-512=[name=app,password=app-secret]".to_owned(),
            "--broker-heartbeat-interval-ms".to_owned(),
            "500".to_owned(),
            "--broker-session-timeout-ms".to_owned(),
            "3000".to_owned(),
        ]
    });
    let app = |node: &Weir| {
        client(
            node.listener("SASL_SSL"),
            &[
                ("security.protocol", "SASL_SSL"),
                ("ssl.ca.location", &path(&pki.ca)),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "app"),
                ("sasl.password", "app-secret"),
                ("acks", "all"),
            ],
        )
    };
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        app(&nodes[0]).create().unwrap();
    let topic =
        rdkafka::admin::NewTopic::new("replicated", 1, rdkafka::admin::TopicReplication::Fixed(3))
            .set("min.insync.replicas", "2");
    let created =
        common::cli::block_on(admin.create_topics(&[topic], &rdkafka::admin::AdminOptions::new()))
            .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let config = app(&nodes[0]);
    wait_until("a leader", Duration::from_secs(20), || {
        leaders(&config, "replicated").filter(|l| l[0] > 0)
    });
    // Acknowledged under acks=all and min.insync.replicas=2: the followers
    // fetched them over SASL_SSL as the broker user.
    produce(&config, "replicated", 100).unwrap();
    let leader = leaders(&config, "replicated").unwrap()[0];
    nodes[(leader - 1) as usize].kill();
    let survivor = nodes.iter().position(|n| n.is_running()).unwrap();
    let config = app(&nodes[survivor]);
    let moved = wait_until("the leadership to move", Duration::from_secs(30), || {
        leaders(&config, "replicated").filter(|l| l[0] > 0 && l[0] != leader)
    });
    assert_ne!(moved[0], leader);
    produce(&config, "replicated", 100).unwrap();
    let values = consume(&config, "replicated", 200);
    assert_eq!(values.len(), 200, "every acknowledged record survives");
}

/// Three nodes, each a voter of the controller quorum on a port of its
/// own, started with `node_args(controller port)` and ready.
fn three_nodes(mut node_args: impl FnMut(u16) -> Vec<String>) -> Vec<Weir> {
    use common::cluster::free_port;
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let voters: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
        .collect();
    let voters = voters.join(",");
    let launches: Vec<_> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let mut args = vec![
                "--node-id".to_owned(),
                (i + 1).to_string(),
                "--controllers".to_owned(),
                voters.clone(),
            ];
            args.extend(node_args(*port));
            Weir::launch(&args)
        })
        .collect();
    launches.into_iter().map(|l| l.ready()).collect()
}

/// A P-256 key and its JWKS (key id `k1`), for OAUTHBEARER tokens.
fn signing_key() -> (jsonwebtoken::EncodingKey, String) {
    signing_key_named("k1")
}

/// A P-256 key and its JWKS, with key id `kid`.
fn signing_key_named(kid: &str) -> (jsonwebtoken::EncodingKey, String) {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let point = key.public_key_raw(); // 0x04, then X and Y
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwks = format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"{kid}","use":"sig","alg":"ES256","x":"{}","y":"{}"}}]}}"#,
        b64(&point[1..33]),
        b64(&point[33..65])
    );
    let encoding = jsonwebtoken::EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap();
    (encoding, jwks)
}

fn token(key: &jsonwebtoken::EncodingKey, subject: &str, expires_in: i64) -> String {
    token_of("k1", key, subject, expires_in)
}

/// A token signed with `key`, whose header names `kid`.
fn token_of(kid: &str, key: &jsonwebtoken::EncodingKey, subject: &str, expires_in: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    let claims = serde_json::json!({
        "sub": subject, "iss": "https://issuer.example", "aud": "weir",
        "iat": now, "exp": now + expires_in,
    });
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

fn oauth_authenticate(raw: &mut Raw, token: &str) -> SaslAuthenticateResponse {
    let message = format!("n,,\x01auth=Bearer {token}\x01\x01");
    raw.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(message.into_bytes().into()),
    )
}

#[test]
fn oauthbearer_accepts_tokens_signed_by_the_jwks_and_refuses_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, jwks) = signing_key();
    let (stranger, _) = signing_key();
    let jwks_file = tmp.path().join("jwks.json");
    std::fs::write(&jwks_file, jwks).unwrap();
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "OAUTHBEARER,SCRAM-SHA-512",
        "--sasl-oauthbearer-jwks-endpoint-url",
        &format!("file://{}", jwks_file.display()),
        "--sasl-oauthbearer-expected-audience",
        "weir",
        "--sasl-oauthbearer-expected-issuer",
        "https://issuer.example",
        "--connections-max-reauth-ms",
        "3600000",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    let mut good = Raw::connect(&sasl);
    assert_eq!(handshake(&mut good, "OAUTHBEARER").error_code, 0);
    let response = oauth_authenticate(&mut good, &token(&key, "svc-orders", 600));
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    // The session ends with the token, before connections.max.reauth.ms.
    assert!(
        (1..=600_000).contains(&response.session_lifetime_ms),
        "{}",
        response.session_lifetime_ms
    );
    let metadata: MetadataResponse = good.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(metadata.brokers.len(), 1);

    // Signed by another key, or expired: the error challenge, then failure.
    for bad in [token(&stranger, "mallory", 600), token(&key, "late", -600)] {
        let mut raw = Raw::connect(&sasl);
        assert_eq!(handshake(&mut raw, "OAUTHBEARER").error_code, 0);
        let challenge = oauth_authenticate(&mut raw, &bad);
        assert_eq!(challenge.error_code, 0);
        assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
        let failed: SaslAuthenticateResponse = raw.call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(b"\x01"[..].into()),
        );
        assert_eq!(failed.error_code, 58, "SASL_AUTHENTICATION_FAILED");
        assert!(raw.is_closed());
    }

    // The keys rotate: the JWKS file now holds only the new key, and
    // tokens it signs are accepted without a restart.
    let (rotated, rotated_jwks) = signing_key();
    std::fs::write(&jwks_file, rotated_jwks).unwrap();
    common::cluster::wait_until("the new JWKS to be read", Duration::from_secs(10), || {
        let mut raw = Raw::connect(&sasl);
        assert_eq!(handshake(&mut raw, "OAUTHBEARER").error_code, 0);
        let response = oauth_authenticate(&mut raw, &token(&rotated, "svc-orders", 600));
        (response.error_code == 0 && response.auth_bytes.is_empty()).then_some(())
    });
}

/// An HTTPS endpoint serving the JWKS in `jwks` to every GET, with
/// `identity`'s certificate; its address, and a count of requests.
fn serve_jwks(
    identity: &common::pki::Identity,
    jwks: std::sync::Arc<std::sync::Mutex<String>>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{BufRead, BufReader};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let chain: Vec<_> = CertificateDer::pem_file_iter(&identity.certificate)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&identity.key).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut stream = rustls::StreamOwned::new(connection, tcp);
            let mut reader = BufReader::new(&mut stream);
            let mut line = String::new();
            // The request line and headers, up to the blank line.
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            counted.fetch_add(1, Ordering::SeqCst);
            let body = jwks.lock().unwrap().clone();
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
            let _ = stream.flush();
            stream.conn.send_close_notify();
            let _ = stream.flush();
        }
    });
    (addr, requests)
}

#[test]
fn oauthbearer_fetches_the_jwks_over_https_and_again_for_an_unknown_key() {
    use std::sync::atomic::Ordering;
    let pki = Pki::new("identity provider");
    let endpoint = pki.server("idp", &["localhost", "127.0.0.1"]);
    let (key, jwks) = signing_key_named("2026-a");
    let served = std::sync::Arc::new(std::sync::Mutex::new(jwks));
    let (addr, requests) = serve_jwks(&endpoint, served.clone());
    let ca = path(&pki.ca);
    let weir = Weir::start_with_env(
        &[
            "--listeners",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "--sasl-enabled-mechanisms",
            "OAUTHBEARER",
            "--sasl-oauthbearer-jwks-endpoint-url",
            &format!("https://{addr}/keys"),
            "--sasl-oauthbearer-expected-audience",
            "weir",
            "--sasl-oauthbearer-expected-issuer",
            "https://issuer.example",
            "--sasl-oauthbearer-jwks-endpoint-retry-backoff-max-ms",
            "0",
        ],
        // The endpoint's CA, as the system's.
        &[("SSL_CERT_FILE", &ca)],
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "fetched once at the start"
    );
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    let authenticate = |token: &str| {
        let mut raw = Raw::connect(&sasl);
        assert_eq!(handshake(&mut raw, "OAUTHBEARER").error_code, 0);
        let response = oauth_authenticate(&mut raw, token);
        response.error_code == 0 && response.auth_bytes.is_empty()
    };
    assert!(authenticate(&token_of("2026-a", &key, "svc-orders", 600)));

    // The provider rotates its keys: a token naming the new key makes the
    // broker fetch the set again (well before the hourly refresh), and
    // then it is accepted.
    let (rotated, rotated_jwks) = signing_key_named("2026-b");
    *served.lock().unwrap() = rotated_jwks;
    let fresh = token_of("2026-b", &rotated, "svc-orders", 600);
    common::cluster::wait_until(
        "the rotated JWKS to be fetched",
        Duration::from_secs(10),
        || authenticate(&fresh).then_some(()),
    );
    assert!(requests.load(Ordering::SeqCst) >= 2);
    // The retired key is gone with the old set.
    assert!(!authenticate(&token_of("2026-a", &key, "svc-orders", 600)));
}

/// A TLS connection to a controller listener, as a node with `identity`
/// would open it, and one controller frame (a broker heartbeat) sent on it;
/// what comes back, or the error.
fn controller_heartbeat(
    addr: &str,
    ca: &Path,
    identity: &common::pki::Identity,
) -> Result<Vec<u8>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use std::io::Read;
    use std::sync::Arc;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let chain: Vec<_> = CertificateDer::pem_file_iter(&identity.certificate)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&identity.key).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    let connection =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("127.0.0.1").unwrap())
            .unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let body =
        br#"{"Heartbeat":{"broker_id":99,"incarnation":"00000000-0000-0000-0000-000000000000"}}"#;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    stream.write_all(&frame).map_err(|e| e.to_string())?;
    stream.flush().map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => Ok(answer),
        // An answer, then no close: the connection stays open for more.
        Err(e) if !answer.is_empty() && e.kind() == std::io::ErrorKind::WouldBlock => Ok(answer),
        Err(e) if !answer.is_empty() && e.kind() == std::io::ErrorKind::TimedOut => Ok(answer),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn controllers_talk_over_mutual_tls_and_refuse_who_lacks_cluster_action() {
    use common::cluster::wait_until;
    let pki = Pki::new("weir");
    let node = pki.node("node", &["localhost", "127.0.0.1"], "weir node");
    let mut ports = Vec::new();
    let nodes = three_nodes(|port| {
        ports.push(port);
        [
            "--listeners",
            &format!("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
            "--listener-security-protocol-map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
            "--ssl-keystore-location",
            &path(&node.keystore),
            "--ssl-truststore-location",
            &path(&pki.ca),
            "--ssl-client-auth",
            "required",
            "--authorizer-class-name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            // The nodes by their certificate; clients on the PLAINTEXT
            // listener are anonymous (the controller listener asks
            // every peer for a certificate, so none is anonymous there).
            "--super-users",
            "User:CN=weir node;User:ANONYMOUS",
            "--broker-heartbeat-interval-ms",
            "500",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    });
    // The quorum formed, and commands from the other nodes reach its
    // leader: a replicated topic is created through each node.
    for (i, node) in nodes.iter().enumerate() {
        let plain = client(node.listener("PLAINTEXT"), &[("acks", "all")]);
        let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
            plain.create().unwrap();
        let topic = format!("over-tls-{i}");
        let new =
            rdkafka::admin::NewTopic::new(&topic, 1, rdkafka::admin::TopicReplication::Fixed(3));
        let created = common::cli::block_on(
            admin.create_topics(&[new], &rdkafka::admin::AdminOptions::new()),
        )
        .unwrap();
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        wait_until("a leader", Duration::from_secs(20), || {
            leaders(&plain, &topic).filter(|l| l[0] > 0)
        });
        produce(&plain, &topic, 20).unwrap();
    }
    let controller = format!("127.0.0.1:{}", ports[0]);
    // A node's certificate is answered (the heartbeat of an unknown broker
    // gets a reply, whatever it says).
    let answer = controller_heartbeat(&controller, &pki.ca, &node).unwrap();
    assert!(answer.len() > 4, "a node is answered: {answer:?}");
    // A certificate from the same CA whose principal has no ClusterAction:
    // the connection is closed with no answer.
    let intruder = pki.node("intruder", &["localhost"], "intruder");
    if let Ok(answer) = controller_heartbeat(&controller, &pki.ca, &intruder) {
        assert!(answer.is_empty(), "no answer to a stranger: {answer:?}");
    }
    // Plaintext on the controller listener gets no answer either.
    let mut raw = TcpStream::connect(&controller).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body =
        br#"{"Heartbeat":{"broker_id":99,"incarnation":"00000000-0000-0000-0000-000000000000"}}"#;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    raw.write_all(&frame).unwrap();
    let mut reply = Vec::new();
    let _ = std::io::Read::read_to_end(&mut raw, &mut reply);
    assert!(
        !String::from_utf8_lossy(&reply).contains("Heartbeat"),
        "no controller answer over plaintext: {reply:?}"
    );
}

#[test]
fn a_sasl_controller_listener_without_the_nodes_credentials_stops_the_start_with_a_clear_error() {
    let data = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .args([
            "--data-dir",
            &path(data.path()),
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--listeners",
            "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "--listener-security-protocol-map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sasl.jaas.config")
            && stderr.contains("a SASL controller listener needs this node's own credentials"),
        "{stderr}"
    );
}

/// librdkafka's connection counts per broker, from its statistics.
#[derive(Default)]
struct Connects {
    by_broker: std::sync::Mutex<std::collections::BTreeMap<String, i64>>,
}

impl rdkafka::ClientContext for Connects {
    fn stats(&self, statistics: rdkafka::Statistics) {
        let mut by_broker = self.by_broker.lock().unwrap();
        for (name, broker) in statistics.brokers {
            // The bootstrap entry, and the broker by its id.
            if broker.nodeid >= 0 {
                by_broker.insert(name, broker.connects.unwrap_or_default());
            }
        }
    }
}

impl rdkafka::producer::ProducerContext for Connects {
    type DeliveryOpaque = ();

    fn delivery(&self, report: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        report.as_ref().map_err(|(e, _)| e.clone()).unwrap();
    }
}

#[test]
fn sessions_end_at_connections_max_reauth_ms_and_librdkafka_reauthenticates_on_its_connection() {
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--connections-max-reauth-ms",
        "1500",
        "--add-scram",
        "SCRAM-SHA-512=[name=app,password=app-secret]",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    // A client that does not authenticate again is cut off once its
    // session is over.
    let mut raw = Raw::connect(&sasl);
    assert_eq!(handshake(&mut raw, "PLAIN").error_code, 0);
    let response: SaslAuthenticateResponse = raw.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(b"\0app\0app-secret"[..].into()),
    );
    assert_eq!(response.error_code, 0);
    assert!((1..=1500).contains(&response.session_lifetime_ms));
    let metadata: MetadataResponse = raw.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(metadata.brokers.len(), 1);
    std::thread::sleep(Duration::from_millis(1700));
    raw.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(raw.is_closed(), "an expired session is closed");

    // librdkafka (KIP-368) authenticates again on the same connection
    // before its session ends: records keep flowing over several session
    // lifetimes without a reconnect.
    let producer: BaseProducer<Connects> = client(
        &sasl,
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "app"),
            ("sasl.password", "app-secret"),
            ("statistics.interval.ms", "200"),
        ],
    )
    .create_with_context(Connects::default())
    .unwrap();
    let started = std::time::Instant::now();
    let mut sent = 0;
    while started.elapsed() < Duration::from_secs(6) {
        let value = format!("value-{sent}");
        common::send_queued(
            &producer,
            BaseRecord::<(), str>::to("reauth").payload(&value),
        );
        sent += 1;
        producer.poll(Duration::from_millis(100));
    }
    producer.flush(TIMEOUT).unwrap();
    producer.poll(Duration::from_millis(500));
    let connects = producer.context().by_broker.lock().unwrap().clone();
    assert!(!connects.is_empty(), "statistics arrived");
    assert!(
        connects.values().all(|&n| n == 1),
        "one connection per broker for four session lifetimes: {connects:?}"
    );
    let config = client(
        &sasl,
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "app"),
            ("sasl.password", "app-secret"),
        ],
    );
    assert_eq!(consume(&config, "reauth", sent).len(), sent);
}

/// A raw connection authenticated as `user` with SASL PLAIN.
fn plain_session(addr: &str, user: &str, password: &str) -> Raw {
    let mut raw = Raw::connect(addr);
    assert_eq!(handshake(&mut raw, "PLAIN").error_code, 0);
    let response: SaslAuthenticateResponse = raw.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(format!("\0{user}\0{password}").into_bytes().into()),
    );
    assert_eq!(response.error_code, 0, "{user} logs in");
    raw
}

/// Sends, as the connection's principal, Metadata, Produce and CreateTopics
/// requests naming `count` topics nobody created (`batch` to a request),
/// each name used once; every one is denied.
fn deny_made_up_topics(raw: &mut Raw, tag: &str, count: usize, batch: usize) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{
        CreateTopicsRequest, CreateTopicsResponse, ProduceRequest, ProduceResponse,
    };
    let name = |api: &str, i: usize| TopicName(StrBytes::from_string(format!("{tag}-{api}-{i}")));
    for start in (0..count).step_by(batch) {
        let range = start..(start + batch).min(count);
        let request = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(
                range
                    .clone()
                    .map(|i| MetadataRequestTopic::default().with_name(Some(name("metadata", i))))
                    .collect(),
            ));
        let r: MetadataResponse = raw.call(ApiKey::Metadata, 12, &request);
        assert!(r.topics.iter().all(|t| t.error_code == 29), "denied");
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(
                range
                    .clone()
                    .map(|i| {
                        TopicProduceData::default()
                            .with_name(name("produce", i))
                            .with_partition_data(vec![PartitionProduceData::default()])
                    })
                    .collect(),
            );
        let r: ProduceResponse = raw.call(ApiKey::Produce, 9, &request);
        assert!(
            r.responses
                .iter()
                .all(|t| t.partition_responses[0].error_code == 29),
            "denied"
        );
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(
                range
                    .map(|i| {
                        CreatableTopic::default()
                            .with_name(name("create", i))
                            .with_num_partitions(1)
                            .with_replication_factor(1)
                    })
                    .collect(),
            );
        let r: CreateTopicsResponse = raw.call(ApiKey::CreateTopics, 7, &request);
        assert!(r.topics.iter().all(|t| t.error_code == 29), "denied");
    }
}

/// The denials of a principal without ACLs that names made-up topics grow
/// neither the broker's memory nor `/metrics`: the denial metric names a
/// resource only if it exists and the principal may describe it, and shows
/// `(hidden)` otherwise.
#[test]
fn denials_of_made_up_names_grow_neither_memory_nor_metrics() {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{
        CreateAclsRequest, CreateAclsResponse, ProduceRequest, ProduceResponse,
    };
    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-512,PLAIN",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:admin",
    ]);
    let metrics = || weir.http_get_as("/metrics", "admin", "admin-secret").1;
    let denials = |metrics: &str| -> Vec<String> {
        metrics
            .lines()
            .filter(|l| l.starts_with("weir_authorization_denials_total{"))
            .map(|l| l.rsplit_once(' ').unwrap().0.to_owned())
            .collect()
    };

    // Two topics; User:ANONYMOUS may describe one of them, nothing more.
    let mut admin = plain_session(weir.listener("SASL_PLAINTEXT"), "admin", "admin-secret");
    admin.topic_metadata("visible");
    admin.topic_metadata("secret");
    let created: CreateAclsResponse = admin.call(
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![
            kafka_protocol::messages::create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("visible"))
                .with_resource_pattern_type(3)
                .with_principal(StrBytes::from_static_str("User:ANONYMOUS"))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(8)
                .with_permission_type(3),
        ]),
    );
    assert_eq!(created.results[0].error_code, 0);

    let mut anonymous = Raw::connect(weir.listener("PLAINTEXT"));
    // The same kinds of requests once, so that what they need once is
    // there before measuring; then 50 000 more made-up names.
    deny_made_up_topics(&mut anonymous, "warm-up", 5_000, 5_000);
    let (rss_before, metrics_before) = (weir.rss_kib(), metrics().len());
    deny_made_up_topics(&mut anonymous, "made-up", 50_000, 5_000);
    let (rss_after, after) = (weir.rss_kib(), metrics());
    assert!(
        after.len() < metrics_before + 4096,
        "/metrics grew from {metrics_before} to {} bytes",
        after.len()
    );
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    assert!(!after.contains("made-up-"), "a made-up name became a label");

    // Writes to both are denied: the one it may describe is named.
    for topic in ["visible", "secret"] {
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_partition_data(vec![PartitionProduceData::default()])]);
        let r: ProduceResponse = anonymous.call(ApiKey::Produce, 9, &request);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 29);
    }
    let named = denials(&metrics());
    let write = |resource: &str| {
        format!(
            "weir_authorization_denials_total{{principal=\"User:ANONYMOUS\",operation=\"WRITE\",\
             resource_type=\"TOPIC\",resource=\"{resource}\"}}"
        )
    };
    assert!(named.contains(&write("visible")), "{named:#?}");
    assert!(named.contains(&write("(hidden)")), "{named:#?}");
    assert!(!named.iter().any(|l| l.contains("secret")), "{named:#?}");
}

/// A PLAIN login on a fresh connection: the SaslAuthenticate error code,
/// and how long the broker took to answer it.
fn plain_login(sasl: &str, user: &str, password: &str) -> (i16, Duration) {
    let mut raw = Raw::connect(sasl);
    assert_eq!(handshake(&mut raw, "PLAIN").error_code, 0);
    let token = format!("\0{user}\0{password}");
    let started = Instant::now();
    let response: SaslAuthenticateResponse = raw.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(token.into_bytes().into()),
    );
    (response.error_code, started.elapsed())
}

/// A SCRAM-SHA-512 login on a fresh connection: the error code of the
/// final SaslAuthenticate (the one that carries the proof), and how long
/// the broker took to answer it.
fn scram_login(sasl: &str, user: &str, password: &str) -> (i16, Duration) {
    let mut raw = Raw::connect(sasl);
    assert_eq!(handshake(&mut raw, "SCRAM-SHA-512").error_code, 0);
    let mut client = weir_auth::ScramClient::new(weir_auth::ScramMechanism::Sha512, user, password);
    let first: SaslAuthenticateResponse = raw.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(client.client_first().into()),
    );
    assert_eq!(first.error_code, 0, "{:?}", first.error_message);
    let proof = client.receive_server_first(&first.auth_bytes).unwrap();
    let started = Instant::now();
    let last: SaslAuthenticateResponse = raw.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(proof.into()),
    );
    (last.error_code, started.elapsed())
}

const SASL_AUTHENTICATION_FAILED: i16 = 58;

#[test]
fn a_failed_sasl_authentication_is_answered_no_sooner_than_the_configured_delay() {
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "PLAIN,SCRAM-SHA-512",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--connection-failed-authentication-delay-ms",
        "300",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    let delay = Duration::from_millis(300);
    let failures = [
        (
            "PLAIN, wrong password",
            plain_login(&sasl, "admin", "guess"),
        ),
        ("PLAIN, unknown user", plain_login(&sasl, "nobody", "guess")),
        (
            "SCRAM, wrong password",
            scram_login(&sasl, "admin", "guess"),
        ),
        ("SCRAM, unknown user", scram_login(&sasl, "nobody", "guess")),
    ];
    for (what, (error_code, elapsed)) in failures {
        assert_eq!(error_code, SASL_AUTHENTICATION_FAILED, "{what}");
        assert!(elapsed >= delay, "{what}: answered after {elapsed:?}");
    }
    assert_eq!(plain_login(&sasl, "admin", "admin-secret").0, 0);
    assert_eq!(scram_login(&sasl, "admin", "admin-secret").0, 0);
}

#[test]
fn with_no_failed_authentication_delay_a_failed_sasl_authentication_is_answered_at_once() {
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "PLAIN,SCRAM-SHA-512",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--connection-failed-authentication-delay-ms",
        "0",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    // A loose bound on the fastest of a few tries, so that a busy machine
    // does not fail it; a delay that ignored the setting would hold them all.
    let fastest = |login: fn(&str, &str, &str) -> (i16, Duration)| {
        (0..3)
            .map(|_| {
                let (error_code, elapsed) = login(&sasl, "admin", "guess");
                assert_eq!(error_code, SASL_AUTHENTICATION_FAILED);
                elapsed
            })
            .min()
            .unwrap()
    };
    for (what, login) in [
        (
            "PLAIN",
            plain_login as fn(&str, &str, &str) -> (i16, Duration),
        ),
        ("SCRAM", scram_login),
    ] {
        let elapsed = fastest(login);
        assert!(
            elapsed < Duration::from_millis(250),
            "{what}: answered after {elapsed:?}"
        );
    }
}

#[test]
fn a_changed_or_deleted_password_stops_working_at_once_though_it_just_logged_in() {
    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-enabled-mechanisms",
        "PLAIN,SCRAM-SHA-512",
        "--add-scram",
        "SCRAM-SHA-512=[name=alice,password=old-secret]",
        "--connection-failed-authentication-delay-ms",
        "0",
    ]);
    let sasl = weir.listener("SASL_PLAINTEXT").to_owned();
    let admin = weir.listener("PLAINTEXT").to_owned();
    // Twice: the second login is answered from the verified passwords.
    for _ in 0..2 {
        assert_eq!(plain_login(&sasl, "alice", "old-secret").0, 0);
    }

    common::cli::run(
        &[
            "user",
            "create",
            "alice",
            "--password",
            "new-secret",
            "--bootstrap",
            &admin,
        ],
        b"",
    )
    .ok();
    assert_eq!(
        plain_login(&sasl, "alice", "old-secret").0,
        SASL_AUTHENTICATION_FAILED,
        "the old password, verified just before, after the change"
    );
    assert_eq!(
        scram_login(&sasl, "alice", "old-secret").0,
        SASL_AUTHENTICATION_FAILED
    );
    for _ in 0..2 {
        assert_eq!(plain_login(&sasl, "alice", "new-secret").0, 0);
    }
    assert_eq!(scram_login(&sasl, "alice", "new-secret").0, 0);

    // The same password set again gets a new salt: still accepted, against
    // the new credential.
    common::cli::run(
        &[
            "user",
            "create",
            "alice",
            "--password",
            "new-secret",
            "--bootstrap",
            &admin,
        ],
        b"",
    )
    .ok();
    assert_eq!(plain_login(&sasl, "alice", "new-secret").0, 0);

    common::cli::run(&["user", "delete", "alice", "--bootstrap", &admin], b"").ok();
    assert_eq!(
        plain_login(&sasl, "alice", "new-secret").0,
        SASL_AUTHENTICATION_FAILED,
        "a deleted user"
    );
    assert_eq!(
        scram_login(&sasl, "alice", "new-secret").0,
        SASL_AUTHENTICATION_FAILED
    );
}
