//! What a broker keeps of a SCRAM user (RFC 5802): never the password,
//! only what verifies a proof of it.

use serde::{Deserialize, Serialize};

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
