//! The HTTP endpoint over HTTPS, with the key store of the SSL listeners,
//! and behind Basic authentication against the SCRAM users when security
//! is on, `/ready` excepted; against the real binary.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use common::pki::Pki;
use common::Weir;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

struct Response {
    status: u16,
    head: String,
    body: String,
}

/// `GET path` as raw HTTP/1.1 over `stream`, with Basic credentials if
/// given.
fn get(mut stream: impl Read + Write, path: &str, user: Option<(&str, &str)>) -> Response {
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some((name, password)) = user {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{name}:{password}"));
        request.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    // A peer that closes without close_notify ends the body all the same.
    if let Err(error) = stream.read_to_end(&mut raw) {
        assert_eq!(error.kind(), ErrorKind::UnexpectedEof, "read: {error}");
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    Response {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// A TLS connection to `addr` that trusts only `ca`, or the handshake's
/// error.
fn tls_connect(
    addr: &str,
    ca: &Path,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connection =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
            .unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    while stream.conn.is_handshaking() {
        if let Err(error) = stream.conn.complete_io(&mut stream.sock) {
            return match error.into_inner().map(|e| e.downcast::<rustls::Error>()) {
                Some(Ok(error)) => Err(*error),
                other => panic!("TLS handshake: {other:?}"),
            };
        }
    }
    Ok(stream)
}

fn https_get(weir: &Weir, ca: &Path, path: &str, user: Option<(&str, &str)>) -> Response {
    get(tls_connect(&weir.http, ca).unwrap(), path, user)
}

fn http_get(weir: &Weir, path: &str, user: Option<(&str, &str)>) -> Response {
    let tcp = TcpStream::connect(&weir.http).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    get(tcp, path, user)
}

/// The value of the sample `name{labels}` in a metrics page, 0 if absent.
fn sample(metrics: &str, name_and_labels: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name_and_labels))
        .map_or(0, |value| value.trim().parse().unwrap())
}

const BASIC_FAILURES: &str =
    r#"weir_authentication_failures_total{listener="HTTP",mechanism="BASIC"}"#;

#[test]
fn https_with_the_listeners_key_store_and_basic_authentication_against_the_scram_users() {
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    // No TLS Kafka listener: HTTPS needs only the key store.
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--http-listen",
        "https://127.0.0.1:0",
        "--ssl-keystore-location",
        &path(&keystore),
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--add-scram",
        "SCRAM-SHA-256=[name=alice,password=alice-secret]",
    ]);
    let ca = pki.ca.as_path();

    let ready = https_get(&weir, ca, "/ready", None);
    assert_eq!((ready.status, ready.body.as_str()), (200, "ready\n"));

    let anonymous = https_get(&weir, ca, "/metrics", None);
    assert_eq!(anonymous.status, 401);
    assert!(
        anonymous
            .head
            .to_ascii_lowercase()
            .contains(r#"www-authenticate: basic realm="weir""#),
        "{}",
        anonymous.head
    );
    assert_eq!(https_get(&weir, ca, "/v1/cluster", None).status, 401);
    assert_eq!(https_get(&weir, ca, "/no/such/path", None).status, 401);

    let refused = [
        ("admin", "wrong"),
        ("nobody", "admin-secret"),
        ("alice", "admin-secret"),
    ];
    for user in refused {
        assert_eq!(
            https_get(&weir, ca, "/metrics", Some(user)).status,
            401,
            "{user:?}"
        );
    }

    let metrics = https_get(&weir, ca, "/metrics", Some(("admin", "admin-secret")));
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert_eq!(sample(&metrics.body, BASIC_FAILURES), refused.len() as u64);
    // A user with only a SCRAM-SHA-256 credential too.
    let cluster = https_get(&weir, ca, "/v1/cluster", Some(("alice", "alice-secret")));
    assert_eq!(cluster.status, 200, "{}", cluster.body);
    assert!(cluster.body.contains("\"node_id\""), "{}", cluster.body);
}

#[test]
fn plain_http_on_the_https_port_fails_cleanly_and_the_broker_stays_up() {
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let weir = Weir::start(&[
        "--http-listen",
        "https://127.0.0.1:0",
        "--ssl-keystore-location",
        &path(&keystore),
    ]);

    let plain = http_get(&weir, "/metrics", None);
    assert_eq!(plain.status, 400);
    assert!(plain.body.contains("HTTPS"), "{}", plain.body);

    // Bytes that are neither HTTP nor TLS, and a client that says nothing.
    let mut garbage = TcpStream::connect(&weir.http).unwrap();
    garbage
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    garbage.write_all(&[0u8; 64]).unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    assert!(!rest.starts_with(b"HTTP/"), "{rest:?}");
    drop(TcpStream::connect(&weir.http).unwrap());

    // A client that does not trust the broker's CA fails its handshake,
    // counted as a TLS authentication failure.
    let stranger = Pki::new("someone else");
    assert!(tls_connect(&weir.http, &stranger.ca).is_err());

    let ready = https_get(&weir, &pki.ca, "/ready", None);
    assert_eq!(ready.status, 200);
    // Security is off (no SASL listener, no authorizer): no credentials.
    // The garbage and the stranger count as failed handshakes, the silent
    // client not; the broker counts them as it notices, so wait a little.
    let tls_failures = r#"weir_authentication_failures_total{listener="HTTP",mechanism="TLS"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = https_get(&weir, &pki.ca, "/metrics", None);
        assert_eq!(metrics.status, 200, "{}", metrics.body);
        let failures = sample(&metrics.body, tls_failures);
        if failures == 2 {
            break;
        }
        assert!(
            failures < 2 && Instant::now() < deadline,
            "{failures} failed handshakes:\n{}",
            metrics.body
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn with_the_authorizer_a_user_needs_describe_on_the_cluster() {
    let weir = Weir::start(&[
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--add-scram",
        "SCRAM-SHA-512=[name=bob,password=bob-secret]",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:admin",
    ]);
    // Security is on through the authorizer alone, over plain HTTP.
    assert_eq!(http_get(&weir, "/ready", None).status, 200);
    assert_eq!(http_get(&weir, "/metrics", None).status, 401);
    let bob = http_get(&weir, "/metrics", Some(("bob", "bob-secret")));
    assert_eq!(bob.status, 403, "{}", bob.body);
    assert!(bob.body.contains("Describe"), "{}", bob.body);
    assert_eq!(
        http_get(&weir, "/v1/groups", Some(("bob", "bob-secret"))).status,
        403
    );
    let admin = http_get(&weir, "/metrics", Some(("admin", "admin-secret")));
    assert_eq!(admin.status, 200, "{}", admin.body);
    assert!(
        admin
            .body
            .lines()
            .any(|l| l.starts_with(r#"weir_authorization_denials_total{principal="User:bob""#)),
        "{}",
        admin.body
    );
}

#[test]
fn https_follows_the_key_store_when_it_changes() {
    let pki = Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let weir = Weir::start(&[
        "--http-listen",
        "https://127.0.0.1:0",
        "--ssl-keystore-location",
        &path(&keystore),
    ]);
    assert_eq!(https_get(&weir, &pki.ca, "/ready", None).status, 200);
    let next = Pki::new("next");
    let renewed = next.server("broker", &["localhost", "127.0.0.1"]).keystore;
    std::fs::copy(&renewed, &keystore).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while tls_connect(&weir.http, &next.ca).is_err() {
        assert!(Instant::now() < deadline, "the new key store never served");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(tls_connect(&weir.http, &pki.ca).is_err());
    assert_eq!(https_get(&weir, &next.ca, "/ready", None).status, 200);
}

#[test]
fn https_without_a_key_store_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
            "--http-listen",
            "https://127.0.0.1:0",
        ])
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ssl.keystore.location"), "{stderr}");
}

/// `GET /metrics` over plain HTTP as `user`: the status, and how long the
/// broker took to answer.
fn timed_get(weir: &Weir, user: (&str, &str)) -> (u16, Duration) {
    let tcp = TcpStream::connect(&weir.http).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let status = get(tcp, "/metrics", Some(user)).status;
    (status, started.elapsed())
}

/// A broker whose HTTP endpoint needs Basic authentication (it has a SASL
/// listener), with `delay_ms` as `connection.failed.authentication.delay.ms`.
fn with_basic_authentication(delay_ms: &str) -> Weir {
    Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--connection-failed-authentication-delay-ms",
        delay_ms,
    ])
}

#[test]
fn a_wrong_basic_password_is_answered_no_sooner_than_the_configured_delay() {
    let weir = with_basic_authentication("300");
    let delay = Duration::from_millis(300);
    for user in [("admin", "guess"), ("nobody", "guess")] {
        let (status, elapsed) = timed_get(&weir, user);
        assert_eq!(status, 401, "{user:?}");
        assert!(elapsed >= delay, "{user:?}: answered after {elapsed:?}");
    }
    // A malformed Authorization header fails the same way.
    let tcp = TcpStream::connect(&weir.http).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    assert_eq!(get(tcp, "/metrics", Some(("admin", ""))).status, 401);
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());

    assert_eq!(timed_get(&weir, ("admin", "admin-secret")).0, 200);
}

#[test]
fn with_no_failed_authentication_delay_a_wrong_basic_password_is_answered_at_once() {
    let weir = with_basic_authentication("0");
    // A loose bound on the fastest of a few tries, so that a busy machine
    // does not fail it; a delay that ignored the setting would hold them all.
    let fastest = (0..3)
        .map(|_| {
            let (status, elapsed) = timed_get(&weir, ("admin", "guess"));
            assert_eq!(status, 401);
            elapsed
        })
        .min()
        .unwrap();
    assert!(
        fastest < Duration::from_millis(250),
        "answered after {fastest:?}"
    );
}

#[test]
fn a_changed_or_deleted_basic_password_stops_working_at_once_though_it_just_logged_in() {
    let weir = with_basic_authentication("0");
    let admin = weir.listener("PLAINTEXT").to_owned();
    let set_password = |password: &str| {
        common::cli::run(
            &[
                "user",
                "create",
                "alice",
                "--password",
                password,
                "--bootstrap",
                &admin,
            ],
            b"",
        )
        .ok();
    };
    set_password("old-secret");
    // Twice: the second login is answered from the verified passwords.
    for _ in 0..2 {
        assert_eq!(timed_get(&weir, ("alice", "old-secret")).0, 200);
    }
    set_password("new-secret");
    assert_eq!(timed_get(&weir, ("alice", "old-secret")).0, 401);
    for _ in 0..2 {
        assert_eq!(timed_get(&weir, ("alice", "new-secret")).0, 200);
    }
    common::cli::run(&["user", "delete", "alice", "--bootstrap", &admin], b"").ok();
    assert_eq!(timed_get(&weir, ("alice", "new-secret")).0, 401);
}
