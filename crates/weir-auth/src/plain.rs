//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` reads it: one
//! message, `authzid NUL authcid NUL passwd`, checked by the broker against
//! its SCRAM credentials. PLAIN sends the password itself, so it belongs on
//! TLS listeners only.

use crate::{ScramCredential, ScramMechanism};

/// Why a PLAIN message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlainError {
    /// Not three NUL-separated UTF-8 fields.
    #[error("invalid SASL/PLAIN message: {0}")]
    Malformed(String),
    /// The user name is empty.
    #[error("authentication failed: user name not specified")]
    MissingUsername,
    /// The password is empty.
    #[error("authentication failed: password not specified")]
    MissingPassword,
    /// The client asked to act as someone other than the user it
    /// authenticates as, which Kafka does not allow.
    #[error("authentication failed: the authorization id differs from the user name")]
    AuthorizationIdMismatch,
    /// Unknown user or wrong password; which of the two is not told.
    #[error("authentication failed: invalid user name or password")]
    AuthenticationFailed,
    /// A user name or password for a client message holds NUL, which
    /// separates the fields.
    #[error("a SASL/PLAIN user name or password may not contain NUL")]
    ContainsNul,
}

/// The user name and password a PLAIN client sent.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    /// The user to authenticate (RFC 4616's authcid), never empty.
    pub username: String,
    /// The password as sent, never empty.
    pub password: String,
}

impl std::fmt::Debug for PlainCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl PlainCredentials {
    /// Reads a client's PLAIN message (the server's side). An authorization
    /// id, if given, must equal the user name; neither user name nor
    /// password may be empty. The caller checks the password, e.g. with
    /// [`authenticate`](Self::authenticate).
    pub fn parse(message: &[u8]) -> Result<Self, PlainError> {
        let message =
            std::str::from_utf8(message).map_err(|_| PlainError::Malformed("not UTF-8".into()))?;
        let fields: Vec<&str> = message.split('\0').collect();
        let [authzid, username, password] = fields[..] else {
            return Err(PlainError::Malformed(format!(
                "expected 3 NUL-separated fields, got {}",
                fields.len()
            )));
        };
        if username.is_empty() {
            return Err(PlainError::MissingUsername);
        }
        if password.is_empty() {
            return Err(PlainError::MissingPassword);
        }
        if !authzid.is_empty() && authzid != username {
            return Err(PlainError::AuthorizationIdMismatch);
        }
        Ok(Self {
            username: username.to_owned(),
            password: password.to_owned(),
        })
    }

    /// The client's PLAIN message for these credentials, without an
    /// authorization id, as Kafka's client sends it.
    pub fn to_message(&self) -> Result<Vec<u8>, PlainError> {
        if self.username.is_empty() {
            return Err(PlainError::MissingUsername);
        }
        if self.password.is_empty() {
            return Err(PlainError::MissingPassword);
        }
        if self.username.contains('\0') || self.password.contains('\0') {
            return Err(PlainError::ContainsNul);
        }
        Ok(format!("\0{}\0{}", self.username, self.password).into_bytes())
    }

    /// Checks the password against the user's SCRAM credential, or fails
    /// for a user without one (`None`) after the work of checking one at the
    /// minimum iteration count, so that the time taken does not tell whether
    /// the user exists.
    pub fn authenticate(
        &self,
        stored: Option<(ScramMechanism, &ScramCredential)>,
    ) -> Result<(), PlainError> {
        let verified = match stored {
            Some((mechanism, credential)) => credential.verify_password(mechanism, &self.password),
            None => {
                let mechanism = ScramMechanism::Sha512;
                let decoy = ScramCredential {
                    salt: vec![0; 32],
                    stored_key: Vec::new(),
                    server_key: Vec::new(),
                    iterations: mechanism.min_iterations(),
                };
                decoy.verify_password(mechanism, &self.password);
                false
            }
        };
        if verified {
            Ok(())
        } else {
            Err(PlainError::AuthenticationFailed)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn credentials(username: &str, password: &str) -> PlainCredentials {
        PlainCredentials {
            username: username.into(),
            password: password.into(),
        }
    }

    #[test]
    fn parses_with_and_without_authzid() {
        let cases: &[&[u8]] = &[b"\0alice\0s3cret", b"alice\0alice\0s3cret"];
        for message in cases {
            assert_eq!(
                PlainCredentials::parse(message),
                Ok(credentials("alice", "s3cret"))
            );
        }
        assert_eq!(
            PlainCredentials::parse("\0ünï\0pässwörd with spaces".as_bytes()),
            Ok(credentials("ünï", "pässwörd with spaces"))
        );
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        // Kafka's PlainSaslServerTest: an empty user name is reported
        // before an empty password, whatever the authzid.
        let cases: &[(&[u8], PlainError)] = &[
            (b"\0\0", PlainError::MissingUsername),
            (b"\0\0p", PlainError::MissingUsername),
            (b"\0u\0", PlainError::MissingPassword),
            (b"a\0\0", PlainError::MissingUsername),
            (b"a\0\0p", PlainError::MissingUsername),
            (b"a\0u\0", PlainError::MissingPassword),
            (b"bob\0alice\0s3cret", PlainError::AuthorizationIdMismatch),
        ];
        for (message, error) in cases {
            assert_eq!(PlainCredentials::parse(message).as_ref(), Err(error));
        }
        let malformed: &[&[u8]] = &[
            b"",
            b"alice",
            b"\0alice",
            b"\0alice\0s3cret\0",
            b"\0alice\0s3\0cret",
            b"\0al\xffice\0s3cret",
        ];
        for message in malformed {
            assert!(matches!(
                PlainCredentials::parse(message),
                Err(PlainError::Malformed(_))
            ));
        }
    }

    #[test]
    fn client_message_round_trips() {
        let c = credentials("alice", "s3cret");
        assert_eq!(c.to_message().unwrap(), b"\0alice\0s3cret");
        assert_eq!(PlainCredentials::parse(&c.to_message().unwrap()), Ok(c));
        assert_eq!(
            credentials("al\0ice", "x").to_message(),
            Err(PlainError::ContainsNul)
        );
        assert_eq!(
            credentials("alice", "x\0").to_message(),
            Err(PlainError::ContainsNul)
        );
        assert_eq!(
            credentials("", "x").to_message(),
            Err(PlainError::MissingUsername)
        );
        assert_eq!(
            credentials("a", "").to_message(),
            Err(PlainError::MissingPassword)
        );
    }

    #[test]
    fn authenticates_against_the_scram_store() {
        for mechanism in ScramMechanism::ALL {
            let stored = ScramCredential::from_password(mechanism, "s3cret", 4096);
            let good = credentials("alice", "s3cret");
            assert_eq!(good.authenticate(Some((mechanism, &stored))), Ok(()));
            let bad = credentials("alice", "s3cret2");
            assert_eq!(
                bad.authenticate(Some((mechanism, &stored))),
                Err(PlainError::AuthenticationFailed)
            );
            assert_eq!(
                good.authenticate(None),
                Err(PlainError::AuthenticationFailed)
            );
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let shown = format!("{:?}", credentials("alice", "s3cret"));
        assert!(shown.contains("alice") && !shown.contains("s3cret"));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = PlainCredentials::parse(&bytes);
        }

        #[test]
        fn any_valid_pair_round_trips(username in "[^\0]{1,20}", password in "[^\0]{1,20}") {
            let c = credentials(&username, &password);
            prop_assert_eq!(PlainCredentials::parse(&c.to_message().unwrap()), Ok(c));
        }
    }
}
