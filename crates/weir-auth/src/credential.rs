//! What a broker keeps of a SCRAM user (RFC 5802): never the password,
//! only what verifies a proof of it.

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::scram::formula;

/// A SCRAM mechanism, by Kafka's `ScramMechanism` type code.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256, type 1.
    Sha256,
    /// SCRAM-SHA-512, type 2.
    Sha512,
}

impl ScramMechanism {
    /// Both, in type-code order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// From the SASL mechanism name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's type code (1 and 2; 0 is UNKNOWN).
    pub fn type_code(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    /// From Kafka's type code.
    pub fn from_type_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.type_code() == code)
    }

    /// The fewest PBKDF2 iterations Kafka accepts for the mechanism.
    pub fn min_iterations(self) -> u32 {
        4096
    }

    /// The most PBKDF2 iterations Kafka accepts.
    pub fn max_iterations(self) -> u32 {
        16384
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A user's SCRAM credential for one mechanism (RFC 5802's `StoredKey`
/// and `ServerKey`, with the salt and iteration count that derived them).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    /// The random salt.
    pub salt: Vec<u8>,
    /// H(ClientKey): checks the client's proof.
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key"): signs the server's answer.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
}

/// Bytes of random salt in a credential made from a password: more than
/// RFC 5802's examples use, as Kafka's random salts are.
const SALT_LEN: usize = 32;

impl ScramCredential {
    /// Derives a credential from a password, with a fresh random salt, so two
    /// users with one password share nothing an attacker can use. The
    /// iteration count is the caller's to bound (Kafka allows
    /// [`ScramMechanism::min_iterations`] to
    /// [`ScramMechanism::max_iterations`]).
    pub fn from_password(mechanism: ScramMechanism, password: &str, iterations: u32) -> Self {
        let salted = SaltedPassword::new(mechanism, password, iterations);
        Self::from_salted_password(
            mechanism,
            &salted.salted_password,
            salted.salt,
            salted.iterations,
        )
    }

    /// Derives a credential from a salted password: what
    /// AlterUserScramCredentials carries, so a broker never sees the password.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Self {
        let client_key = formula::client_key(mechanism, salted_password);
        Self {
            salt,
            stored_key: formula::hash(mechanism, &client_key),
            server_key: formula::server_key(mechanism, salted_password),
            iterations,
        }
    }

    /// Whether `password` is the one this credential was derived from, in
    /// time that does not depend on how much of it matches: for SASL/PLAIN
    /// checked against the SCRAM credentials.
    pub fn verify_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        let candidate =
            Self::from_password_and_salt(mechanism, password, self.salt.clone(), self.iterations);
        let same = candidate.stored_key.ct_eq(&self.stored_key)
            & candidate.server_key.ct_eq(&self.server_key);
        same.into()
    }

    fn from_password_and_salt(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: u32,
    ) -> Self {
        let salted_password =
            formula::salted_password(mechanism, password.as_bytes(), &salt, iterations);
        Self::from_salted_password(mechanism, &salted_password, salt, iterations)
    }
}

/// A password salted for one mechanism (RFC 5802's `SaltedPassword`), with
/// the fresh random salt and the iteration count that made it: what a
/// client sends in AlterUserScramCredentials, so that the broker never sees
/// the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaltedPassword {
    /// The random salt.
    pub salt: Vec<u8>,
    /// `Hi(password, salt, iterations)`.
    pub salted_password: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
}

impl SaltedPassword {
    /// Salts `password` with a fresh random salt. The iteration count is the
    /// caller's to bound, as for [`ScramCredential::from_password`].
    pub fn new(mechanism: ScramMechanism, password: &str, iterations: u32) -> Self {
        let salt = formula::random_bytes(SALT_LEN);
        let salted_password =
            formula::salted_password(mechanism, password.as_bytes(), &salt, iterations);
        Self {
            salt,
            salted_password,
            iterations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_password_uses_a_fresh_salt() {
        let a = ScramCredential::from_password(ScramMechanism::Sha256, "secret", 4096);
        let b = ScramCredential::from_password(ScramMechanism::Sha256, "secret", 4096);
        assert!(a.salt.len() >= 16);
        assert_ne!(a.salt, b.salt);
        assert_ne!(a.stored_key, b.stored_key);
        assert_eq!(a.iterations, 4096);
    }

    #[test]
    fn keys_have_the_hash_length() {
        for mechanism in ScramMechanism::ALL {
            let c = ScramCredential::from_password(mechanism, "secret", 4096);
            assert_eq!(c.stored_key.len(), formula::hash_len(mechanism));
            assert_eq!(c.server_key.len(), formula::hash_len(mechanism));
        }
    }

    #[test]
    fn verify_password_accepts_only_the_password() {
        for mechanism in ScramMechanism::ALL {
            let c = ScramCredential::from_password(mechanism, "pencil", 4096);
            assert!(c.verify_password(mechanism, "pencil"));
            assert!(!c.verify_password(mechanism, "pencil "));
            assert!(!c.verify_password(mechanism, "Pencil"));
            assert!(!c.verify_password(mechanism, ""));
        }
        // A credential checked with the other mechanism does not verify.
        let c = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", 4096);
        assert!(!c.verify_password(ScramMechanism::Sha512, "pencil"));
    }

    #[test]
    fn a_salted_password_makes_a_credential_of_the_password() {
        for mechanism in ScramMechanism::ALL {
            let a = SaltedPassword::new(mechanism, "pencil", 4096);
            let b = SaltedPassword::new(mechanism, "pencil", 4096);
            assert_ne!(a.salt, b.salt);
            assert_eq!(a.salted_password.len(), formula::hash_len(mechanism));
            let c = ScramCredential::from_salted_password(
                mechanism,
                &a.salted_password,
                a.salt,
                a.iterations,
            );
            assert!(c.verify_password(mechanism, "pencil"));
            assert!(!c.verify_password(mechanism, "pencil2"));
        }
    }

    #[test]
    fn from_salted_password_matches_from_password() {
        // RFC 7677's user: the salted password of "pencil" with this salt
        // gives the credential a broker stores from AlterUserScramCredentials.
        let salt = b"[m\x99h\x9d\x125\x8e\xec\xa0K\x14\x126\xfa\x81".to_vec();
        let salted = formula::salted_password(ScramMechanism::Sha256, b"pencil", &salt, 4096);
        let c = ScramCredential::from_salted_password(ScramMechanism::Sha256, &salted, salt, 4096);
        assert!(c.verify_password(ScramMechanism::Sha256, "pencil"));
        assert!(!c.verify_password(ScramMechanism::Sha256, "pencil2"));
    }
}
