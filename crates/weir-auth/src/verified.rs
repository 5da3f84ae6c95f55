//! A bounded memory of passwords already proven against a SCRAM credential,
//! so that a client logging in again with SASL/PLAIN or HTTP Basic is not
//! charged PBKDF2 on every connection. An entry is keyed by the user, the
//! mechanism and a keyed hash of the password (HMAC-SHA-256 under a random
//! key of this memory, never the password itself), and holds the exact
//! credential the password was checked against: a lookup succeeds only if
//! that is still the user's credential, so a changed or deleted one is
//! never answered from here. Only passwords that matched are remembered.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::scram::formula;
use crate::{ScramCredential, ScramMechanism};

/// Bytes of the HMAC key and of a password's tag.
const TAG_LEN: usize = 32;

/// Passwords known to match a user's credential, at most `capacity` of
/// them, the oldest forgotten first.
pub struct VerifiedPasswords {
    /// The HMAC key of the password tags, random per memory: a tag is of no
    /// use outside this process, not even to test guesses against.
    key: [u8; TAG_LEN],
    capacity: usize,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_key: HashMap<EntryKey, ScramCredential>,
    /// Every key of `by_key` once, in the order it came in.
    order: VecDeque<EntryKey>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct EntryKey {
    user: String,
    mechanism: ScramMechanism,
    password_tag: [u8; TAG_LEN],
}

impl VerifiedPasswords {
    /// Entries a broker keeps: the users of many clients reconnecting, in
    /// a few hundred kilobytes at most.
    pub const DEFAULT_CAPACITY: usize = 1000;

    /// An empty memory of at most `capacity` entries (0: remembers nothing).
    pub fn new(capacity: usize) -> Self {
        let mut key = [0; TAG_LEN];
        key.copy_from_slice(&formula::random_bytes(TAG_LEN));
        Self {
            key,
            capacity,
            entries: Mutex::default(),
        }
    }

    /// Whether `password` was verified against exactly `credential`, the
    /// user's `mechanism` credential now: no PBKDF2, a hash and a lookup.
    pub fn is_verified(
        &self,
        user: &str,
        mechanism: ScramMechanism,
        credential: &ScramCredential,
        password: &str,
    ) -> bool {
        let key = self.key_of(user, mechanism, password);
        self.lock()
            .by_key
            .get(&key)
            .is_some_and(|verified| verified == credential)
    }

    /// Checks `password` against `credential` (PBKDF2: it holds the thread
    /// for milliseconds) and remembers it if it matches.
    pub fn verify(
        &self,
        user: &str,
        mechanism: ScramMechanism,
        credential: &ScramCredential,
        password: &str,
    ) -> bool {
        if !credential.verify_password(mechanism, password) {
            return false;
        }
        self.remember(self.key_of(user, mechanism, password), credential.clone());
        true
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remember(&self, key: EntryKey, credential: ScramCredential) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        // A password verified again (against a new credential) replaces
        // its entry and keeps its place.
        if let Some(verified) = entries.by_key.get_mut(&key) {
            *verified = credential;
            return;
        }
        while entries.by_key.len() >= self.capacity {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            entries.by_key.remove(&oldest);
        }
        entries.order.push_back(key.clone());
        entries.by_key.insert(key, credential);
    }

    fn key_of(&self, user: &str, mechanism: ScramMechanism, password: &str) -> EntryKey {
        let tag = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .expect("HMAC accepts any key length")
            .chain_update(password.as_bytes())
            .finalize()
            .into_bytes();
        let mut password_tag = [0; TAG_LEN];
        password_tag.copy_from_slice(&tag);
        EntryKey {
            user: user.to_owned(),
            mechanism,
            password_tag,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // The entries are consistent after every statement that changes
        // them: a panic elsewhere leaves nothing half done.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for VerifiedPasswords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedPasswords")
            .field("len", &self.len())
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA512: ScramMechanism = ScramMechanism::Sha512;

    fn credential(password: &str) -> ScramCredential {
        ScramCredential::from_password(SHA512, password, SHA512.min_iterations())
    }

    #[test]
    fn a_verified_password_is_known_only_for_its_user_mechanism_and_credential() {
        let verified = VerifiedPasswords::new(10);
        let alice = credential("s3cret");
        assert!(!verified.is_verified("alice", SHA512, &alice, "s3cret"));
        assert!(verified.verify("alice", SHA512, &alice, "s3cret"));
        assert!(verified.is_verified("alice", SHA512, &alice, "s3cret"));
        assert!(!verified.is_verified("alice", SHA512, &alice, "s3cret "));
        assert!(!verified.is_verified("bob", SHA512, &alice, "s3cret"));
        assert!(!verified.is_verified("alice", ScramMechanism::Sha256, &alice, "s3cret"));
        // The same password set again: a new salt, a new credential, and
        // the one remembered no longer counts.
        let changed = credential("s3cret");
        assert!(!verified.is_verified("alice", SHA512, &changed, "s3cret"));
        assert!(!verified.is_verified("alice", SHA512, &credential("other"), "s3cret"));
        // Verified against the new one, it replaces the old entry.
        assert!(verified.verify("alice", SHA512, &changed, "s3cret"));
        assert!(verified.is_verified("alice", SHA512, &changed, "s3cret"));
        assert!(!verified.is_verified("alice", SHA512, &alice, "s3cret"));
        assert_eq!(verified.len(), 1);
    }

    #[test]
    fn a_wrong_password_is_never_remembered() {
        let verified = VerifiedPasswords::new(10);
        let alice = credential("s3cret");
        for guess in ["guess", "s3cret2", "S3cret"] {
            assert!(!verified.verify("alice", SHA512, &alice, guess));
            assert!(!verified.is_verified("alice", SHA512, &alice, guess));
        }
        assert!(verified.is_empty());
    }

    #[test]
    fn it_holds_at_most_its_capacity_and_forgets_the_oldest_first() {
        let verified = VerifiedPasswords::new(3);
        let users: Vec<(String, ScramCredential)> = (0..5)
            .map(|i| (format!("user{i}"), credential(&format!("password{i}"))))
            .collect();
        for (i, (user, stored)) in users.iter().enumerate() {
            assert!(verified.verify(user, SHA512, stored, &format!("password{i}")));
            assert!(verified.len() <= 3);
        }
        let known: Vec<bool> = users
            .iter()
            .enumerate()
            .map(|(i, (user, stored))| {
                verified.is_verified(user, SHA512, stored, &format!("password{i}"))
            })
            .collect();
        assert_eq!(known, [false, false, true, true, true]);

        let none = VerifiedPasswords::new(0);
        let (user, stored) = &users[0];
        assert!(none.verify(user, SHA512, stored, "password0"));
        assert!(none.is_empty());
    }

    #[test]
    fn neither_the_password_nor_its_tag_is_shown() {
        let verified = VerifiedPasswords::new(10);
        let alice = credential("s3cret");
        assert!(verified.verify("alice", SHA512, &alice, "s3cret"));
        let shown = format!("{verified:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("alice"),
            "{shown}"
        );
        // Two memories tag one password differently: a tag tells nothing
        // outside the memory that made it.
        let other = VerifiedPasswords::new(10);
        assert_ne!(
            verified.key_of("alice", SHA512, "s3cret").password_tag,
            other.key_of("alice", SHA512, "s3cret").password_tag
        );
    }
}
