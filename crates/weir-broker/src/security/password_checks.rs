//! Password checks for SASL/PLAIN and HTTP Basic: the password against the
//! user's SCRAM credential. Each check costs PBKDF2 (milliseconds of CPU),
//! so it runs on the blocking pool, never on a runtime worker, and at most
//! one per core at once: however many connections a guesser opens, the
//! checks take those cores at most, in turn. A password that matched is
//! remembered against the credential it matched ([`VerifiedPasswords`]),
//! so a client that reconnects is not charged PBKDF2 again. Delaying the
//! answer to a failure is the caller's (it answers).

use std::sync::Arc;

use tokio::sync::Semaphore;
use weir_auth::{PlainCredentials, ScramMechanism, VerifiedPasswords};

/// Checks passwords for one broker.
pub(crate) struct PasswordChecks {
    /// One permit per PBKDF2 running; held by the blocking task itself, so
    /// a caller that gives up (a client gone) frees it only when the work
    /// is done.
    running: Arc<Semaphore>,
    verified: Arc<VerifiedPasswords>,
}

impl PasswordChecks {
    pub(crate) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            running: Arc::new(Semaphore::new(cores)),
            verified: Arc::new(VerifiedPasswords::new(VerifiedPasswords::DEFAULT_CAPACITY)),
        }
    }

    /// Whether the password is the user's. It is checked against the user's
    /// SCRAM credential, the strongest one it has (as Redpanda does): one
    /// user store for SASL/PLAIN, SCRAM and the HTTP endpoint. A user with
    /// none costs the same PBKDF2 as one with a credential, so that the time
    /// taken does not tell whether the user exists.
    pub(crate) async fn matches(
        &self,
        image: &weir_meta::MetadataImage,
        credentials: PlainCredentials,
    ) -> bool {
        let stored = [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|m| {
                image
                    .scram_credential(&credentials.username, m)
                    .map(|c| (m, c.clone()))
            });
        if let Some((mechanism, credential)) = &stored {
            if self.verified.is_verified(
                &credentials.username,
                *mechanism,
                credential,
                &credentials.password,
            ) {
                return true;
            }
        }
        let Ok(permit) = self.running.clone().acquire_owned().await else {
            return false; // never closed
        };
        let verified = self.verified.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            match stored {
                Some((mechanism, credential)) => verified.verify(
                    &credentials.username,
                    mechanism,
                    &credential,
                    &credentials.password,
                ),
                None => credentials.authenticate(None).is_ok(),
            }
        });
        checked.await.unwrap_or(false)
    }
}
