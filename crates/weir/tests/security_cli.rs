//! The CLI against SSL, mutual-TLS and SASL listeners of the real broker,
//! secured by `--command-config` files in the Java client's and
//! librdkafka's property names, with certificates made for the test.

mod common;

use std::path::Path;

use common::cli::{run, run_with_env, Out};
use common::pki::{Identity, Pki};
use common::Weir;

/// `weir ARGS --bootstrap ADDR --command-config FILE`.
fn cli(addr: &str, config: &Path, args: &[&str], input: &[u8]) -> Out {
    let config = config.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--bootstrap", addr, "--command-config", &config]);
    run(&all, input)
}

/// A broker whose key store is a certificate `pki` signed for the
/// loopback, with these listeners and extra flags.
fn start(pki: &Pki, listeners: &str, extra: &[&str]) -> Weir {
    let server: Identity = pki.server("broker", &["127.0.0.1", "localhost"]);
    let keystore = server.keystore.display().to_string();
    let mut args = vec![
        "--listeners",
        listeners,
        "--ssl-keystore-location",
        &keystore,
    ];
    args.extend(extra);
    Weir::start(&args)
}

/// Creates a one-partition topic, writes three records, reads them back,
/// and finds the topic listed: all through `config`.
fn round_trip(addr: &str, config: &Path, topic: &str) {
    let out = cli(
        addr,
        config,
        &["topic", "create", topic, "--partitions", "1"],
        b"",
    )
    .ok();
    assert_eq!(
        out.stdout,
        format!("Created topic {topic} with 1 partition\n")
    );
    cli(addr, config, &["produce", topic], b"one\ntwo\nthree\n").ok();
    let out = cli(addr, config, &["consume", topic, "--exit-at-end"], b"").ok();
    assert_eq!(out.lines(), vec!["one", "two", "three"]);
    let out = cli(addr, config, &["topic", "list"], b"").ok();
    assert!(out.lines().contains(&topic), "{}", out.stdout);
}

#[test]
fn ssl_with_the_ca_in_either_clients_names() {
    let pki = Pki::new("Weir test CA");
    let broker = start(&pki, "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", &[]);
    let ssl = broker.listener("SSL");
    let ca = pki.ca.display().to_string();

    let librdkafka = pki.write(
        "librdkafka.properties",
        &format!("security.protocol=SSL\nssl.ca.location={ca}\n"),
    );
    round_trip(ssl, &librdkafka, "over-tls");

    // Java's names, with a password a PEM trust store does not need: it
    // works, and the unused property is named.
    let java = pki.write(
        "java.properties",
        &format!(
            "# as for kafka-topics.sh\n\
             security.protocol = SSL\n\
             ssl.truststore.type: PEM\n\
             ssl.truststore.location={ca}\n\
             ssl.truststore.password=changeit\n"
        ),
    );
    let out = cli(ssl, &java, &["consume", "over-tls", "--exit-at-end"], b"").ok();
    assert_eq!(out.lines(), vec!["one", "two", "three"]);
    assert_eq!(
        out.stderr,
        format!(
            "warning: --command-config {}: ignoring properties Weir does not use: \
             ssl.truststore.password\n",
            java.display()
        )
    );

    // WEIR_COMMAND_CONFIG in place of the flag.
    let java = java.display().to_string();
    let out = run_with_env(
        &["topic", "list", "--bootstrap", ssl],
        b"",
        &[("WEIR_COMMAND_CONFIG", &java)],
    )
    .ok();
    assert!(out.lines().contains(&"over-tls"), "{}", out.stdout);

    // The plaintext listener serves the same topic without TLS.
    let out = run(
        &[
            "consume",
            "over-tls",
            "--exit-at-end",
            "--bootstrap",
            &broker.kafka,
        ],
        b"",
    )
    .ok();
    assert_eq!(out.lines().len(), 3);

    // A CA that did not sign the broker's certificate.
    let other = Pki::new("another CA");
    let untrusting = pki.write(
        "untrusting.properties",
        &format!(
            "security.protocol=SSL\nssl.ca.location={}\n",
            other.ca.display()
        ),
    );
    let line = cli(ssl, &untrusting, &["topic", "list"], b"").failed_with_one_line();
    assert_eq!(
        line,
        format!(
            "error: TLS with {ssl} failed: invalid peer certificate: UnknownIssuer (the \
             broker's certificate is not signed by a trusted CA: check ssl.ca.location or \
             ssl.truststore.location)"
        )
    );
}

#[test]
fn mutual_tls_needs_a_client_certificate_the_broker_trusts() {
    let pki = Pki::new("Weir test CA");
    let clients = Pki::new("Weir clients CA");
    let client_ca = clients.ca.display().to_string();
    let broker = start(
        &pki,
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &[
            "--ssl-client-auth",
            "required",
            "--ssl-truststore-location",
            &client_ca,
        ],
    );
    let ssl = broker.listener("SSL");
    let ca = pki.ca.display();
    let base = format!("security.protocol=SSL\nssl.ca.location={ca}\n");

    let anonymous = pki.write("anonymous.properties", &base);
    let line = cli(ssl, &anonymous, &["topic", "list"], b"").failed_with_one_line();
    assert!(
        line.starts_with(&format!("error: TLS with {ssl} failed: ")),
        "{line}"
    );
    assert!(line.contains("requires a client certificate"), "{line}");

    // Signed by a CA the broker does not trust.
    let stranger = pki.client("stranger", "stranger");
    let untrusted = pki.write(
        "untrusted.properties",
        &format!(
            "{base}ssl.certificate.location={}\nssl.key.location={}\n",
            stranger.certificate.display(),
            stranger.key.display()
        ),
    );
    let line = cli(ssl, &untrusted, &["topic", "list"], b"").failed_with_one_line();
    assert!(
        line.starts_with(&format!(
            "error: TLS with {ssl} failed: received fatal alert"
        )),
        "{line}"
    );

    let client = clients.client("client", "operator");
    let librdkafka = pki.write(
        "librdkafka.properties",
        &format!(
            "{base}ssl.certificate.location={}\nssl.key.location={}\n",
            client.certificate.display(),
            client.key.display()
        ),
    );
    round_trip(ssl, &librdkafka, "mutual");
    let java = pki.write(
        "java.properties",
        &format!(
            "security.protocol=SSL\n\
             ssl.truststore.location={ca}\n\
             ssl.keystore.type=PEM\n\
             ssl.keystore.location={}\n",
            client.keystore.display()
        ),
    );
    let out = cli(ssl, &java, &["consume", "mutual", "--exit-at-end"], b"").ok();
    assert_eq!(out.lines(), vec!["one", "two", "three"]);
}

#[test]
fn sasl_with_scram_and_plain() {
    let pki = Pki::new("Weir test CA");
    let broker = start(
        &pki,
        "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        &[
            "--add-scram",
            "SCRAM-SHA-512=[name=admin,password=admin-secret]",
            "--add-scram",
            "SCRAM-SHA-256=[name=alice,password=alice-secret]",
        ],
    );
    let sasl_ssl = broker.listener("SASL_SSL");
    let ca = pki.ca.display();

    let scram = pki.write(
        "scram.properties",
        &format!(
            "security.protocol=SASL_SSL\n\
             ssl.ca.location={ca}\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.username=admin\n\
             sasl.password=admin-secret\n"
        ),
    );
    round_trip(sasl_ssl, &scram, "authenticated");

    // Java's JAAS line, split over lines, for PLAIN.
    let plain = pki.write(
        "plain.properties",
        &format!(
            "security.protocol=SASL_SSL\n\
             ssl.truststore.type=PEM\n\
             ssl.truststore.location={ca}\n\
             sasl.mechanism=PLAIN\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n\
             \x20   required username=\"admin\" password=\"admin-secret\";\n"
        ),
    );
    let out = cli(
        sasl_ssl,
        &plain,
        &["consume", "authenticated", "--exit-at-end"],
        b"",
    )
    .ok();
    assert_eq!(out.lines(), vec!["one", "two", "three"]);
    assert_eq!(out.stderr, "");

    // SCRAM-SHA-256 without TLS, by its JAAS line.
    let plaintext = pki.write(
        "sasl-plaintext.properties",
        "security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=SCRAM-SHA-256\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"alice\" password=\"alice-secret\";\n",
    );
    let out = cli(
        broker.listener("SASL_PLAINTEXT"),
        &plaintext,
        &["consume", "authenticated", "--exit-at-end"],
        b"",
    )
    .ok();
    assert_eq!(out.lines().len(), 3);

    // A wrong password: the broker's message, and a failure exit.
    for (mechanism, message) in [
        (
            "SCRAM-SHA-512",
            "Authentication failed during authentication due to invalid credentials with \
             SASL mechanism SCRAM-SHA-512",
        ),
        (
            "PLAIN",
            "Authentication failed: Invalid username or password",
        ),
    ] {
        let wrong = pki.write(
            "wrong.properties",
            &format!(
                "security.protocol=SASL_SSL\n\
                 ssl.ca.location={ca}\n\
                 sasl.mechanism={mechanism}\n\
                 sasl.username=admin\n\
                 sasl.password=not-the-password\n"
            ),
        );
        for command in [&["topic", "list"][..], &["produce", "authenticated"][..]] {
            let line = cli(sasl_ssl, &wrong, command, b"x\n").failed_with_one_line();
            assert_eq!(
                line,
                format!("error: SASL authentication with {sasl_ssl} failed: {message}")
            );
        }
    }
    // Nothing was written by the refused producers.
    let out = cli(
        sasl_ssl,
        &scram,
        &["consume", "authenticated", "--exit-at-end"],
        b"",
    )
    .ok();
    assert_eq!(out.lines().len(), 3);

    // Kerberos is not spoken: said before connecting.
    let kerberos = pki.write(
        "kerberos.properties",
        "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n",
    );
    let line = cli(sasl_ssl, &kerberos, &["topic", "list"], b"").failed_with_one_line();
    assert_eq!(
        line,
        format!(
            "error: --command-config {}: sasl.mechanism=GSSAPI: GSSAPI (Kerberos) is not \
             supported; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
            kerberos.display()
        )
    );
}

#[test]
fn a_missing_or_malformed_command_config_is_named() {
    let missing = std::env::temp_dir().join("weir-no-such-client.properties");
    let out = run(
        &[
            "topic",
            "list",
            "--bootstrap",
            "127.0.0.1:1",
            "--command-config",
            &missing.display().to_string(),
        ],
        b"",
    );
    let line = out.failed_with_one_line();
    assert!(
        line.starts_with(&format!(
            "error: cannot read --command-config {}: ",
            missing.display()
        )),
        "{line}"
    );
    let pki = Pki::new("unused");
    let bad = pki.write("bad.properties", "security.protocol=TLS\n");
    let line = cli("127.0.0.1:1", &bad, &["group", "list"], b"").failed_with_one_line();
    assert_eq!(
        line,
        format!(
            "error: --command-config {}: security.protocol=TLS: expected PLAINTEXT, SSL, \
             SASL_PLAINTEXT or SASL_SSL",
            bad.display()
        )
    );
}
