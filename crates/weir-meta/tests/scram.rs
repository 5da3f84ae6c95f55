//! `AlterUserScramCredentials`: each user's outcome as Kafka's controller
//! decides it, and the credentials the image keeps.

use weir_meta::{
    Applied, Command, MetadataImage, ScramCredential, ScramError, ScramMechanism, ScramUpsertion,
};

use ScramMechanism::{Sha256, Sha512};

/// A well-formed credential; `seed` tells credentials apart.
fn credential(mechanism: ScramMechanism, iterations: u32, seed: u8) -> ScramCredential {
    let len = match mechanism {
        Sha256 => 32,
        Sha512 => 64,
    };
    ScramCredential {
        salt: vec![seed; 16],
        stored_key: vec![seed; len],
        server_key: vec![seed.wrapping_add(1); len],
        iterations,
    }
}

fn upsert(user: &str, mechanism: ScramMechanism, credential: ScramCredential) -> ScramUpsertion {
    ScramUpsertion {
        user: user.to_owned(),
        mechanism,
        credential,
    }
}

fn set(user: &str, mechanism: ScramMechanism, iterations: u32) -> ScramUpsertion {
    upsert(user, mechanism, credential(mechanism, iterations, 7))
}

fn alter(deletions: &[(&str, ScramMechanism)], upsertions: Vec<ScramUpsertion>) -> Command {
    Command::AlterUserScramCredentials {
        deletions: deletions
            .iter()
            .map(|(user, mechanism)| ((*user).to_owned(), *mechanism))
            .collect(),
        upsertions,
    }
}

fn outcomes(applied: Applied) -> Vec<(String, Result<(), ScramError>)> {
    match applied {
        Applied::ScramAlterations(outcomes) => outcomes,
        other => panic!("not a SCRAM outcome: {other:?}"),
    }
}

/// alice has SHA-256 and SHA-512, bob SHA-256.
fn with_users() -> MetadataImage {
    let mut image = MetadataImage::default();
    image
        .apply(&alter(
            &[],
            vec![set("alice", Sha256, 4096), set("bob", Sha256, 8192)],
        ))
        .unwrap();
    // A user named twice in one command is a duplicate: alice's second
    // mechanism takes a command of its own.
    image
        .apply(&alter(&[], vec![set("alice", Sha512, 4096)]))
        .unwrap();
    image
}

#[test]
fn credentials_are_set_replaced_listed_and_deleted() {
    let mut image = with_users();
    assert_eq!(
        image.scram_users().collect::<Vec<_>>(),
        vec![
            ("alice", vec![(Sha256, 4096), (Sha512, 4096)]),
            ("bob", vec![(Sha256, 8192)]),
        ]
    );
    assert_eq!(
        image.scram_credential("bob", Sha256),
        Some(&credential(Sha256, 8192, 7))
    );
    assert_eq!(image.scram_credential("bob", Sha512), None);
    assert_eq!(image.scram_credential("carol", Sha256), None);

    // Replacing keeps the other mechanism.
    let replacement = credential(Sha256, 10000, 9);
    let got = image
        .apply(&alter(
            &[],
            vec![upsert("alice", Sha256, replacement.clone())],
        ))
        .unwrap();
    assert_eq!(outcomes(got), vec![("alice".to_owned(), Ok(()))]);
    assert_eq!(image.scram_credential("alice", Sha256), Some(&replacement));
    assert_eq!(
        image.scram_user("alice"),
        Some(vec![(Sha256, 10000), (Sha512, 4096)])
    );

    // Deleting bob's only credential drops bob.
    let got = image.apply(&alter(&[("bob", Sha256)], vec![])).unwrap();
    assert_eq!(outcomes(got), vec![("bob".to_owned(), Ok(()))]);
    assert_eq!(image.scram_user("bob"), None);
    assert_eq!(image.scram_users().count(), 1);
}

/// The message of an error, with its Kafka code; `None` for success.
type Outcome = Option<(i16, &'static str)>;

struct Case {
    name: &'static str,
    deletions: Vec<(&'static str, ScramMechanism)>,
    upsertions: Vec<ScramUpsertion>,
    /// Each user's outcome, in the order of the result.
    want: Vec<(&'static str, Outcome)>,
}

const DUPLICATE: Outcome = Some((
    92,
    "A user credential cannot be altered twice in the same request",
));
const NOT_FOUND: Outcome = Some((
    91,
    "Attempt to delete a user credential that does not exist",
));
const TOO_FEW: Outcome = Some((93, "Too few iterations"));
const TOO_MANY: Outcome = Some((93, "Too many iterations"));
const EMPTY_USER: Outcome = Some((93, "Username must not be empty"));

fn cases() -> Vec<Case> {
    let bad = |f: fn(&mut ScramCredential)| {
        let mut c = credential(Sha256, 4096, 3);
        f(&mut c);
        upsert("carol", Sha256, c)
    };
    vec![
        Case {
            name: "iterations at both limits",
            deletions: vec![],
            upsertions: vec![set("carol", Sha256, 4096), set("dave", Sha512, 16384)],
            want: vec![("carol", None), ("dave", None)],
        },
        Case {
            name: "iterations below and above the limits",
            deletions: vec![],
            upsertions: vec![set("carol", Sha256, 4095), set("dave", Sha512, 16385)],
            want: vec![("carol", TOO_FEW), ("dave", TOO_MANY)],
        },
        Case {
            name: "deleting a credential the user does not have",
            deletions: vec![("bob", Sha512), ("nobody", Sha256)],
            upsertions: vec![],
            want: vec![("bob", NOT_FOUND), ("nobody", NOT_FOUND)],
        },
        Case {
            name: "a user deleted twice, with different mechanisms",
            deletions: vec![("alice", Sha256), ("alice", Sha512)],
            upsertions: vec![],
            want: vec![("alice", DUPLICATE)],
        },
        Case {
            name: "a user deleted and set",
            deletions: vec![("alice", Sha256)],
            upsertions: vec![set("alice", Sha512, 5000)],
            want: vec![("alice", DUPLICATE)],
        },
        Case {
            name: "a user set twice for one mechanism",
            deletions: vec![],
            upsertions: vec![set("carol", Sha256, 5000), set("carol", Sha256, 6000)],
            want: vec![("carol", DUPLICATE)],
        },
        Case {
            name: "a refused first change keeps its error; later ones are ignored",
            deletions: vec![("carol", Sha256)],
            upsertions: vec![set("carol", Sha256, 5000), set("carol", Sha512, 5000)],
            want: vec![("carol", NOT_FOUND)],
        },
        Case {
            name: "a third change after a duplicate stays a duplicate",
            deletions: vec![],
            upsertions: vec![
                set("carol", Sha256, 5000),
                set("carol", Sha512, 5000),
                set("carol", Sha512, 1),
            ],
            want: vec![("carol", DUPLICATE)],
        },
        Case {
            name: "an empty user name",
            deletions: vec![("", Sha256)],
            upsertions: vec![set("carol", Sha256, 5000)],
            want: vec![("", EMPTY_USER), ("carol", None)],
        },
        Case {
            name: "an empty salt",
            deletions: vec![],
            upsertions: vec![bad(|c| c.salt.clear())],
            want: vec![("carol", Some((93, "Salt must not be empty")))],
        },
        Case {
            name: "a stored key of the wrong length",
            deletions: vec![],
            upsertions: vec![bad(|c| c.stored_key.push(0))],
            want: vec![(
                "carol",
                Some((93, "Stored key must be 32 bytes for SCRAM-SHA-256, got 33")),
            )],
        },
        Case {
            name: "an empty server key",
            deletions: vec![],
            upsertions: vec![bad(|c| c.server_key.clear())],
            want: vec![(
                "carol",
                Some((93, "Server key must be 32 bytes for SCRAM-SHA-256, got 0")),
            )],
        },
        Case {
            name: "a SHA-256-sized key for SHA-512",
            deletions: vec![],
            upsertions: vec![upsert("carol", Sha512, credential(Sha256, 4096, 1))],
            want: vec![(
                "carol",
                Some((93, "Stored key must be 64 bytes for SCRAM-SHA-512, got 32")),
            )],
        },
        Case {
            name: "users in order of first appearance, deletions first",
            deletions: vec![("bob", Sha256), ("alice", Sha512)],
            upsertions: vec![
                set("zed", Sha256, 4096),
                set("bob", Sha512, 4096),
                set("carol", Sha256, 1),
            ],
            want: vec![
                ("bob", DUPLICATE),
                ("alice", None),
                ("zed", None),
                ("carol", TOO_FEW),
            ],
        },
    ]
}

/// Every row starts from `with_users()`. Users with an error keep their
/// credentials as they were; the others' changes are applied.
#[test]
fn alteration_outcomes_per_user() {
    let mut failures = Vec::new();
    for case in cases() {
        let mut image = with_users();
        let before = image.clone();
        let got = outcomes(
            image
                .apply(&alter(&case.deletions, case.upsertions.clone()))
                .unwrap(),
        );
        let got_view: Vec<(String, Option<(i16, String)>)> = got
            .iter()
            .map(|(user, outcome)| {
                let error = outcome
                    .as_ref()
                    .err()
                    .map(|e| (e.kafka_error_code(), e.to_string()));
                (user.clone(), error)
            })
            .collect();
        let want_view: Vec<(String, Option<(i16, String)>)> = case
            .want
            .iter()
            .map(|(user, outcome)| {
                (
                    (*user).to_owned(),
                    outcome.map(|(code, message)| (code, message.to_owned())),
                )
            })
            .collect();
        if got_view != want_view {
            failures.push(format!(
                "{}: want {want_view:?}, got {got_view:?}",
                case.name
            ));
            continue;
        }
        for (user, outcome) in &got {
            let changed = before.scram_user(user) != image.scram_user(user)
                || ScramMechanism::ALL
                    .iter()
                    .any(|m| before.scram_credential(user, *m) != image.scram_credential(user, *m));
            let deleted = case.deletions.iter().any(|(u, _)| u == user);
            let upserted = case.upsertions.iter().find(|u| &u.user == user);
            let expected_change = match (outcome, upserted) {
                (Err(_), _) => false,
                (Ok(()), Some(u)) => {
                    before.scram_credential(user, u.mechanism) != Some(&u.credential)
                }
                (Ok(()), None) => deleted,
            };
            if changed != expected_change {
                failures.push(format!(
                    "{}: user {user:?}: changed {changed}, expected {expected_change}",
                    case.name
                ));
            }
            if let (Ok(()), Some(u)) = (outcome, upserted) {
                if image.scram_credential(user, u.mechanism) != Some(&u.credential) {
                    failures.push(format!("{}: {user}'s credential not set", case.name));
                }
            }
        }
        // Users the command does not name are untouched.
        for (user, _) in before.scram_users() {
            if got.iter().all(|(u, _)| u != user)
                && before.scram_user(user) != image.scram_user(user)
            {
                failures.push(format!("{}: unnamed user {user} changed", case.name));
            }
        }
        assert_eq!(image.applied_index(), before.applied_index() + 1);
    }
    assert!(
        failures.is_empty(),
        "failing rows:\n{}",
        failures.join("\n")
    );
}

#[test]
fn codes_of_every_error() {
    let table = [
        (ScramError::DuplicateUser, 92),
        (ScramError::CredentialNotFound, 91),
        (ScramError::UnacceptableCredential("x".into()), 93),
        (ScramError::UnknownMechanism, 33),
    ];
    for (error, code) in table {
        assert_eq!(error.kafka_error_code(), code, "{error:?}");
    }
    assert_eq!(
        ScramError::UnknownMechanism.to_string(),
        "Unknown SCRAM mechanism"
    );
}

#[test]
fn credentials_survive_serialization() {
    let image = with_users();
    let json = serde_json::to_string(&image).unwrap();
    let back: MetadataImage = serde_json::from_str(&json).unwrap();
    assert_eq!(back, image);
    assert_eq!(
        back.scram_credential("alice", Sha512),
        Some(&credential(Sha512, 4096, 7))
    );

    // A list naming one credential twice is refused.
    let mut value: serde_json::Value = serde_json::to_value(&image).unwrap();
    let list = value["scram_credentials"].as_array_mut().unwrap();
    assert_eq!(list.len(), 3);
    let first = list[0].clone();
    list.push(first);
    let error = serde_json::from_value::<MetadataImage>(value).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("two SCRAM-SHA-256 credentials for user \"alice\""),
        "{error}"
    );

    let cmd = alter(&[("bob", Sha256)], vec![set("alice", Sha512, 5000)]);
    let json = serde_json::to_string(&cmd).unwrap();
    assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), cmd);
    let mut copy = image.clone();
    let applied = copy.apply(&cmd).unwrap();
    let json = serde_json::to_string(&applied).unwrap();
    assert_eq!(serde_json::from_str::<Applied>(&json).unwrap(), applied);
}
