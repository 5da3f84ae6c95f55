//! SCRAM credentials (KIP-554, Kafka's `UserScramCredentialRecord`): what
//! a broker verifies a SASL/SCRAM login against, per user and mechanism.
//!
//! The image never sees a password: the broker that takes an
//! AlterUserScramCredentials request derives the stored and server keys
//! from the salted password, and the command carries only those.
//!
//! As in Kafka's controller (`ScramControlManager.alterCredentials`), an
//! alteration succeeds or fails per user, never as a whole: each user named
//! in the request gets its own outcome, and a user with an error has none
//! of its changes applied.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_auth::{ScramCredential, ScramMechanism};

/// The credentials of every user that has one, by user then mechanism;
/// a user is dropped with its last credential.
pub(crate) type ScramCredentials = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// One credential to set (replacing any previous one for the same user and
/// mechanism) within [`crate::Command::AlterUserScramCredentials`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScramUpsertion {
    /// The user name, as the SCRAM client sends it.
    pub user: String,
    /// The mechanism the credential is for.
    pub mechanism: ScramMechanism,
    /// The salt, iterations and derived keys.
    pub credential: ScramCredential,
}

/// Why one user's credential changes were refused, with Kafka's error code
/// ([`ScramError::kafka_error_code`]) and message (`to_string()`), so a
/// broker can answer with both as they are.
#[derive(thiserror::Error, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ScramError {
    /// The user is named more than once in the request (deleted and set,
    /// or any two changes, whatever their mechanisms).
    #[error("A user credential cannot be altered twice in the same request")]
    DuplicateUser,
    /// A deletion of a credential the user does not have.
    #[error("Attempt to delete a user credential that does not exist")]
    CredentialNotFound,
    /// An empty user name, iterations out of range, or a salt or key that
    /// cannot be a credential of the mechanism.
    #[error("{0}")]
    UnacceptableCredential(String),
    /// A mechanism type code the broker does not know. Commands carry known
    /// mechanisms only, so `apply` never returns this: it is for the
    /// broker, which meets the unknown code while decoding the request and
    /// leaves that user out of the command.
    #[error("Unknown SCRAM mechanism")]
    UnknownMechanism,
}

impl ScramError {
    /// The Kafka error code of the user's result.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            ScramError::UnknownMechanism => 33, // UNSUPPORTED_SASL_MECHANISM
            ScramError::CredentialNotFound => 91, // RESOURCE_NOT_FOUND
            ScramError::DuplicateUser => 92,    // DUPLICATE_RESOURCE
            ScramError::UnacceptableCredential(_) => 93, // UNACCEPTABLE_CREDENTIAL
        }
    }
}

/// What one user's changes do once accepted: the request holds exactly one
/// change for such a user.
enum Change<'a> {
    Delete(ScramMechanism),
    Upsert(&'a ScramUpsertion),
}

/// Applies `AlterUserScramCredentials` to `credentials`: each user's
/// outcome, users in the order they first appear (deletions, then
/// upsertions), and only the changes of users without an error.
///
/// The checks follow Kafka's controller, which reads deletions then
/// upsertions: a user's first change is checked; a second one, while the
/// first was accepted, makes the user a duplicate; once a user has an
/// error, its later changes are ignored.
pub(crate) fn alter(
    credentials: &mut ScramCredentials,
    deletions: &[(String, ScramMechanism)],
    upsertions: &[ScramUpsertion],
) -> Vec<(String, Result<(), ScramError>)> {
    let mut order: Vec<&str> = Vec::new();
    let mut accepted: BTreeMap<&str, Change> = BTreeMap::new();
    let mut refused: BTreeMap<&str, ScramError> = BTreeMap::new();
    let changes = deletions
        .iter()
        .map(|(user, mechanism)| (user.as_str(), Change::Delete(*mechanism)))
        .chain(
            upsertions
                .iter()
                .map(|u| (u.user.as_str(), Change::Upsert(u))),
        );
    for (user, change) in changes {
        if refused.contains_key(user) {
            continue;
        }
        if accepted.remove(user).is_some() {
            refused.insert(user, ScramError::DuplicateUser);
            continue;
        }
        order.push(user);
        let checked = match &change {
            Change::Delete(mechanism) => check_deletion(credentials, user, *mechanism),
            Change::Upsert(upsertion) => check_upsertion(upsertion),
        };
        match checked {
            Ok(()) => {
                accepted.insert(user, change);
            }
            Err(error) => {
                refused.insert(user, error);
            }
        }
    }
    for (user, change) in &accepted {
        match change {
            Change::Delete(mechanism) => {
                if let Some(of_user) = credentials.get_mut(*user) {
                    of_user.remove(mechanism);
                    if of_user.is_empty() {
                        credentials.remove(*user);
                    }
                }
            }
            Change::Upsert(u) => {
                credentials
                    .entry(u.user.clone())
                    .or_default()
                    .insert(u.mechanism, u.credential.clone());
            }
        }
    }
    order
        .into_iter()
        .map(|user| {
            let outcome = refused.remove(user).map_or(Ok(()), Err);
            (user.to_owned(), outcome)
        })
        .collect()
}

fn check_user(user: &str) -> Result<(), ScramError> {
    if user.is_empty() {
        return Err(unacceptable("Username must not be empty"));
    }
    Ok(())
}

fn check_deletion(
    credentials: &ScramCredentials,
    user: &str,
    mechanism: ScramMechanism,
) -> Result<(), ScramError> {
    check_user(user)?;
    if !credentials
        .get(user)
        .is_some_and(|of_user| of_user.contains_key(&mechanism))
    {
        return Err(ScramError::CredentialNotFound);
    }
    Ok(())
}

/// Kafka checks the user name and the iterations (its controller derives
/// the keys itself). Weir's broker derives them, so the image also refuses
/// a credential that could never verify a login: an empty salt, or keys
/// that are not one digest of the mechanism's hash long.
fn check_upsertion(upsertion: &ScramUpsertion) -> Result<(), ScramError> {
    check_user(&upsertion.user)?;
    let (mechanism, credential) = (upsertion.mechanism, &upsertion.credential);
    if credential.iterations < mechanism.min_iterations() {
        return Err(unacceptable("Too few iterations"));
    }
    if credential.iterations > mechanism.max_iterations() {
        return Err(unacceptable("Too many iterations"));
    }
    if credential.salt.is_empty() {
        return Err(unacceptable("Salt must not be empty"));
    }
    let want = digest_len(mechanism);
    for (what, key) in [
        ("Stored key", &credential.stored_key),
        ("Server key", &credential.server_key),
    ] {
        if key.len() != want {
            return Err(unacceptable(&format!(
                "{what} must be {want} bytes for {mechanism}, got {}",
                key.len()
            )));
        }
    }
    Ok(())
}

/// The output size of the mechanism's hash: the length of its keys.
fn digest_len(mechanism: ScramMechanism) -> usize {
    match mechanism {
        ScramMechanism::Sha256 => 32,
        ScramMechanism::Sha512 => 64,
    }
}

fn unacceptable(message: &str) -> ScramError {
    ScramError::UnacceptableCredential(message.to_owned())
}

/// Serializes [`ScramCredentials`] as a list of (user, mechanism,
/// credential): JSON object keys must be strings.
pub(crate) mod as_list {
    use super::*;
    use serde::de::Error;
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        credentials: &ScramCredentials,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(credentials.iter().flat_map(|(user, of_user)| {
            of_user
                .iter()
                .map(move |(mechanism, credential)| (user, mechanism, credential))
        }))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ScramCredentials, D::Error> {
        let list: Vec<(String, ScramMechanism, ScramCredential)> =
            Deserialize::deserialize(deserializer)?;
        let mut credentials = ScramCredentials::new();
        for (user, mechanism, credential) in list {
            if credentials
                .entry(user.clone())
                .or_default()
                .insert(mechanism, credential)
                .is_some()
            {
                return Err(D::Error::custom(format!(
                    "two {mechanism} credentials for user {user:?}"
                )));
            }
        }
        Ok(credentials)
    }
}
