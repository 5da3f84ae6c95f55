//! Both ends together: RFC 7677's example, round trips, and every way an
//! exchange should fail.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::sync::LazyLock;

use proptest::prelude::*;

use super::*;
use crate::{ScramCredential, ScramMechanism};

const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";

/// RFC 7677 section 3 for SHA-256; the same inputs for SHA-512, computed
/// with Python's hashlib and hmac (whose SHA-256 run gives the RFC's text).
struct Vector {
    mechanism: ScramMechanism,
    client_first: &'static str,
    server_first: &'static str,
    client_final: &'static str,
    server_final: &'static str,
}

const VECTORS: [Vector; 2] = [
    Vector {
        mechanism: ScramMechanism::Sha256,
        client_first: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        client_final: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        server_final: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    },
    Vector {
        mechanism: ScramMechanism::Sha512,
        client_first: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        client_final: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ==",
        server_final: "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
    },
];

fn pencil_credential(mechanism: ScramMechanism) -> ScramCredential {
    let salt = STANDARD.decode(SALT).unwrap();
    let salted = formula::salted_password(mechanism, b"pencil", &salt, 4096);
    ScramCredential::from_salted_password(mechanism, &salted, salt, 4096)
}

#[test]
fn server_replays_the_vectors() {
    for v in &VECTORS {
        let mut server = ScramServer::with_nonce(v.mechanism, SERVER_NONCE);
        assert_eq!(
            server.receive_client_first(v.client_first.as_bytes()),
            Ok("user")
        );
        let credential = pencil_credential(v.mechanism);
        assert_eq!(
            server.server_first(Some(&credential)),
            v.server_first.as_bytes()
        );
        assert!(!server.is_complete());
        let reply = server
            .receive_client_final(v.client_final.as_bytes())
            .unwrap();
        assert_eq!(reply, v.server_final.as_bytes(), "{}", v.mechanism);
        assert_eq!(server.authenticated_user(), Some("user"));
    }
}

#[test]
fn client_replays_the_vectors() {
    for v in &VECTORS {
        let mut client = ScramClient::with_nonce(v.mechanism, "user", "pencil", CLIENT_NONCE);
        assert_eq!(client.client_first(), v.client_first.as_bytes());
        let reply = client
            .receive_server_first(v.server_first.as_bytes())
            .unwrap();
        assert_eq!(reply, v.client_final.as_bytes(), "{}", v.mechanism);
        assert!(!client.is_complete());
        client
            .receive_server_final(v.server_final.as_bytes())
            .unwrap();
        assert!(client.is_complete());
    }
}

/// Runs a whole exchange; the error is the first either end reports.
fn exchange(
    mechanism: ScramMechanism,
    username: &str,
    password: &str,
    stored: Option<&ScramCredential>,
) -> Result<String, ScramError> {
    let mut client = ScramClient::new(mechanism, username, password);
    let mut server = ScramServer::new(mechanism);
    let named = server
        .receive_client_first(&client.client_first())?
        .to_owned();
    assert_eq!(named, username);
    let server_first = server.server_first(stored);
    let client_final = client.receive_server_first(&server_first)?;
    let server_final = server.receive_client_final(&client_final)?;
    client.receive_server_final(&server_final)?;
    assert!(client.is_complete() && server.is_complete());
    Ok(server.authenticated_user().unwrap().to_owned())
}

#[test]
fn round_trip_for_both_mechanisms() {
    for mechanism in ScramMechanism::ALL {
        for username in ["alice", "a,b=c", "=2C", "ünïcode"] {
            let credential = ScramCredential::from_password(mechanism, "s3cret", 4096);
            assert_eq!(
                exchange(mechanism, username, "s3cret", Some(&credential)),
                Ok(username.to_owned())
            );
        }
    }
}

#[test]
fn wrong_password_fails() {
    for mechanism in ScramMechanism::ALL {
        let credential = ScramCredential::from_password(mechanism, "s3cret", 4096);
        assert_eq!(
            exchange(mechanism, "alice", "s3cret!", Some(&credential)),
            Err(ScramError::AuthenticationFailed)
        );
    }
}

#[test]
fn credential_of_the_other_mechanism_fails() {
    let credential = ScramCredential::from_password(ScramMechanism::Sha512, "s3cret", 4096);
    assert_eq!(
        exchange(ScramMechanism::Sha256, "alice", "s3cret", Some(&credential)),
        Err(ScramError::AuthenticationFailed)
    );
}

#[test]
fn unknown_user_fails_like_a_wrong_password() {
    for mechanism in ScramMechanism::ALL {
        assert_eq!(
            exchange(mechanism, "nobody", "s3cret", None),
            Err(ScramError::AuthenticationFailed)
        );
    }
}

fn server_first_for(mechanism: ScramMechanism, username: &str) -> ServerFirstParts {
    let mut server = ScramServer::new(mechanism);
    let client_first = format!("n,,n={username},r=abc");
    server
        .receive_client_first(client_first.as_bytes())
        .unwrap();
    let text = String::from_utf8(server.server_first(None)).unwrap();
    let parts: Vec<&str> = text.split(',').collect();
    ServerFirstParts {
        salt: parts[1].to_owned(),
        iterations: parts[2].to_owned(),
    }
}

#[derive(Debug, PartialEq)]
struct ServerFirstParts {
    salt: String,
    iterations: String,
}

#[test]
fn unknown_user_gets_a_stable_salt_like_a_real_one() {
    for mechanism in ScramMechanism::ALL {
        let first = server_first_for(mechanism, "nobody");
        // The same name asked twice gets the same salt, as a real user would.
        assert_eq!(first, server_first_for(mechanism, "nobody"));
        assert_ne!(first.salt, server_first_for(mechanism, "someone").salt);
        assert_eq!(first.iterations, "i=4096");
        let salt = STANDARD
            .decode(first.salt.strip_prefix("s=").unwrap())
            .unwrap();
        let real = ScramCredential::from_password(mechanism, "x", 4096);
        assert_eq!(salt.len(), real.salt.len());
    }
}

#[test]
fn credential_with_too_few_iterations_fails() {
    let mechanism = ScramMechanism::Sha256;
    let credential = ScramCredential::from_password(mechanism, "s3cret", 1024);
    let mut client = ScramClient::new(mechanism, "alice", "s3cret");
    let mut server = ScramServer::new(mechanism);
    server.receive_client_first(&client.client_first()).unwrap();
    let server_first = server.server_first(Some(&credential));
    // The server does not reveal the weak credential; it fails at the end.
    assert!(String::from_utf8(server_first.clone())
        .unwrap()
        .ends_with(",i=4096"));
    let client_final = client.receive_server_first(&server_first).unwrap();
    assert_eq!(
        server.receive_client_final(&client_final),
        Err(ScramError::AuthenticationFailed)
    );
}

/// A server and client one step from the end, with the client's final message.
fn ready_for_final(mechanism: ScramMechanism) -> (ScramServer, ScramClient, String) {
    let credential = ScramCredential::from_password(mechanism, "s3cret", 4096);
    let mut client = ScramClient::new(mechanism, "alice", "s3cret");
    let mut server = ScramServer::new(mechanism);
    server.receive_client_first(&client.client_first()).unwrap();
    let server_first = server.server_first(Some(&credential));
    let client_final = client.receive_server_first(&server_first).unwrap();
    (server, client, String::from_utf8(client_final).unwrap())
}

#[test]
fn tampered_nonce_fails() {
    let (mut server, _, client_final) = ready_for_final(ScramMechanism::Sha256);
    // The nonce must end with the combined one (a prefix is what old
    // librdkafka adds): change its last character (the nonce is random, so
    // pick one it does not already end with).
    let (before_proof, proof) = client_final.rsplit_once(",p=").unwrap();
    let (kept, last) = before_proof.split_at(before_proof.len() - 1);
    let other = if last == "x" { 'y' } else { 'x' };
    let tampered = format!("{kept}{other},p={proof}");
    assert_eq!(
        server.receive_client_final(tampered.as_bytes()),
        Err(ScramError::NonceMismatch)
    );
    // A failed exchange stays failed.
    assert_eq!(
        server.receive_client_final(client_final.as_bytes()),
        Err(ScramError::UnexpectedMessage)
    );
    assert!(!server.is_complete());
}

#[test]
fn tampered_proof_fails() {
    let (mut server, _, client_final) = ready_for_final(ScramMechanism::Sha512);
    let (without_proof, proof) = client_final.rsplit_once(",p=").unwrap();
    let mut proof = STANDARD.decode(proof).unwrap();
    proof[0] ^= 1;
    let tampered = format!("{without_proof},p={}", STANDARD.encode(proof));
    assert_eq!(
        server.receive_client_final(tampered.as_bytes()),
        Err(ScramError::AuthenticationFailed)
    );
}

#[test]
fn client_rejects_a_server_nonce_that_does_not_extend_its_own() {
    for server_first in [
        "r=other-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        // The server must add to the nonce, not only echo it.
        "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    ] {
        let mut client =
            ScramClient::with_nonce(ScramMechanism::Sha256, "user", "pencil", CLIENT_NONCE);
        client.client_first();
        assert_eq!(
            client.receive_server_first(server_first.as_bytes()),
            Err(ScramError::NonceMismatch)
        );
    }
}

#[test]
fn client_rejects_iteration_counts_out_of_bounds() {
    for iterations in [1, 4095, 16385, 100_000_000] {
        let mut client =
            ScramClient::with_nonce(ScramMechanism::Sha512, "user", "pencil", CLIENT_NONCE);
        client.client_first();
        let server_first = format!("r={CLIENT_NONCE}xyz,s={SALT},i={iterations}");
        assert_eq!(
            client.receive_server_first(server_first.as_bytes()),
            Err(ScramError::IterationsOutOfRange {
                iterations,
                min: 4096,
                max: 16384
            })
        );
    }
}

#[test]
fn client_checks_the_server_signature() {
    let v = &VECTORS[0];
    let mut client = ScramClient::with_nonce(v.mechanism, "user", "pencil", CLIENT_NONCE);
    client.client_first();
    client
        .receive_server_first(v.server_first.as_bytes())
        .unwrap();
    // The SHA-512 vector's signature is not this exchange's.
    assert_eq!(
        client.receive_server_final(VECTORS[1].server_final.as_bytes()),
        Err(ScramError::InvalidServerSignature)
    );
    assert!(!client.is_complete());

    let mut client = ScramClient::with_nonce(v.mechanism, "user", "pencil", CLIENT_NONCE);
    client.client_first();
    client
        .receive_server_first(v.server_first.as_bytes())
        .unwrap();
    assert_eq!(
        client.receive_server_final(b"e=invalid-proof"),
        Err(ScramError::ServerError("invalid-proof".into()))
    );
}

#[test]
fn client_messages_out_of_turn_fail() {
    let v = &VECTORS[0];
    let mut client = ScramClient::with_nonce(v.mechanism, "user", "pencil", CLIENT_NONCE);
    assert_eq!(
        client.receive_server_first(v.server_first.as_bytes()),
        Err(ScramError::UnexpectedMessage)
    );
    client.client_first();
    assert_eq!(
        client.receive_server_final(v.server_final.as_bytes()),
        Err(ScramError::UnexpectedMessage)
    );
}

#[test]
fn server_rejects_what_kafka_rejects() {
    let cases: &[(&str, ScramError)] = &[
        ("n,a=bob,n=alice,r=abc", ScramError::AuthorizationIdMismatch),
        (
            "n,,n=alice,r=abc,tokenauth=true",
            ScramError::TokenAuthNotSupported,
        ),
        (
            "n,,n=alice,r=abc,tokenauth=TRUE",
            ScramError::TokenAuthNotSupported,
        ),
        (
            "p=tls-server-end-point,,n=alice,r=abc",
            ScramError::ChannelBindingNotSupported,
        ),
    ];
    for (message, error) in cases {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert_eq!(
            server.receive_client_first(message.as_bytes()),
            Err(error.clone()),
            "{message}"
        );
    }
    // Matching authzid, an unknown extension, or tokenauth=false are fine.
    for message in [
        "n,a=alice,n=alice,r=abc",
        "n,,n=alice,r=abc,foo=bar",
        "n,,n=alice,r=abc,tokenauth=false",
    ] {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert_eq!(server.receive_client_first(message.as_bytes()), Ok("alice"));
    }
}

#[test]
fn malformed_messages_are_malformed() {
    for message in [
        &b""[..],
        b"n,,",
        b"n,,n=alice",
        b"n,,n=al=ice,r=abc",
        b"n,,n=alice,r=a,b",
        b"\xff\xfe",
        b"n,,m=x,n=alice,r=abc",
    ] {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            server.receive_client_first(message),
            Err(ScramError::Malformed(_))
        ));
    }
    let (mut server, _, client_final) = ready_for_final(ScramMechanism::Sha256);
    let short_proof = format!("{},p=AAAA", client_final.rsplit_once(",p=").unwrap().0);
    assert!(matches!(
        server.receive_client_final(short_proof.as_bytes()),
        Err(ScramError::Malformed(_))
    ));
    let (mut server, _, client_final) = ready_for_final(ScramMechanism::Sha256);
    assert!(matches!(
        server.receive_client_final(&client_final.as_bytes()[..client_final.len() - 3]),
        Err(ScramError::Malformed(_))
    ));
}

#[test]
fn channel_binding_must_echo_the_gs2_header() {
    // "y,," (client could bind, server cannot) is accepted when echoed.
    let mechanism = ScramMechanism::Sha256;
    let credential = pencil_credential(mechanism);
    let run = |gs2: &str, echoed: &str| {
        let mut server = ScramServer::with_nonce(mechanism, SERVER_NONCE);
        let first = format!("{gs2}n=user,r={CLIENT_NONCE}");
        server.receive_client_first(first.as_bytes()).unwrap();
        let server_first = String::from_utf8(server.server_first(Some(&credential))).unwrap();
        let without_proof = format!(
            "c={},r={CLIENT_NONCE}{SERVER_NONCE}",
            STANDARD.encode(echoed)
        );
        let salted =
            formula::salted_password(mechanism, b"pencil", &STANDARD.decode(SALT).unwrap(), 4096);
        let client_key = formula::client_key(mechanism, &salted);
        let stored_key = formula::hash(mechanism, &client_key);
        let auth = formula::auth_message(&first[gs2.len()..], &server_first, &without_proof);
        let proof = formula::xor(&client_key, &formula::hmac(mechanism, &stored_key, &auth));
        let last = format!("{without_proof},p={}", STANDARD.encode(proof));
        server.receive_client_final(last.as_bytes()).map(|_| ())
    };
    assert_eq!(run("y,,", "y,,"), Ok(()));
    assert_eq!(run("n,a=user,", "n,a=user,"), Ok(()));
    assert!(matches!(run("y,,", "n,,"), Err(ScramError::Malformed(_))));
    assert!(matches!(run("n,,", "y,,"), Err(ScramError::Malformed(_))));
}

#[test]
fn server_messages_out_of_turn_fail() {
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    assert_eq!(
        server.receive_client_final(b"c=biws,r=abc,p=AAAA"),
        Err(ScramError::UnexpectedMessage)
    );
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    server.receive_client_first(b"n,,n=alice,r=abc").unwrap();
    assert_eq!(
        server.receive_client_first(b"n,,n=alice,r=abc"),
        Err(ScramError::UnexpectedMessage)
    );
}

#[test]
#[should_panic(expected = "out of turn")]
fn server_first_before_client_first_is_a_caller_bug() {
    ScramServer::new(ScramMechanism::Sha256).server_first(None);
}

/// One exchange a step from the end, copied for each generated case, as
/// deriving keys for each would take most of the test's time.
static READY_SERVER: LazyLock<ScramServer> =
    LazyLock::new(|| ready_for_final(ScramMechanism::Sha256).0);

/// A client waiting for RFC 7677's server-final message.
static READY_CLIENT: LazyLock<ScramClient> = LazyLock::new(|| {
    let v = &VECTORS[0];
    let mut client = ScramClient::with_nonce(v.mechanism, "user", "pencil", CLIENT_NONCE);
    client.client_first();
    client
        .receive_server_first(v.server_first.as_bytes())
        .unwrap();
    client
});

proptest! {
    #[test]
    fn random_client_first_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        if server.receive_client_first(&bytes).is_ok() {
            server.server_first(None);
        }
    }

    #[test]
    fn random_client_final_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        text in "c=[a-zA-Z0-9+/=]{0,8},r=[!-~]{0,12}(,[a-z]=[a-z]{0,3}){0,2},p=[a-zA-Z0-9+/=]{0,90}",
    ) {
        for message in [&bytes[..], text.as_bytes()] {
            let mut server = READY_SERVER.clone();
            prop_assert!(server.receive_client_final(message).is_err());
        }
    }

    #[test]
    fn structured_client_first_never_panics(
        text in "[ny]?,(a=[a-z=23CD,]{0,5})?,[mnr]=[!-~=]{0,10}(,[a-z]{0,3}=?[!-~]{0,5}){0,3}",
    ) {
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        if server.receive_client_first(text.as_bytes()).is_ok() {
            server.server_first(None);
        }
    }

    #[test]
    fn random_server_messages_never_panic_the_client(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        text in "r=[!-~]{0,30},s=[a-zA-Z0-9+/=]{0,12},i=[0-9]{0,6}",
    ) {
        for message in [&bytes[..], text.as_bytes()] {
            let mut client = ScramClient::new(ScramMechanism::Sha256, "user", "pencil");
            client.client_first();
            // A random nonce cannot extend the client's random one.
            prop_assert!(client.receive_server_first(message).is_err());
        }
        let mut client = READY_CLIENT.clone();
        prop_assert!(client.receive_server_final(&bytes).is_err());
    }
}
