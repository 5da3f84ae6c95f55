//! RFC 5802's formulas (section 3) for both hashes, so the client, the
//! server and credential derivation compute them one way.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::ScramMechanism;

/// Bytes of the mechanism's hash output: the length of every key and proof.
pub(crate) fn hash_len(mechanism: ScramMechanism) -> usize {
    match mechanism {
        ScramMechanism::Sha256 => 32,
        ScramMechanism::Sha512 => 64,
    }
}

/// `HMAC(key, data)`.
pub(crate) fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length, so `new_from_slice` cannot fail.
    match mechanism {
        ScramMechanism::Sha256 => <Hmac<Sha256> as KeyInit>::new_from_slice(key)
            .expect("HMAC accepts any key length")
            .chain_update(data)
            .finalize()
            .into_bytes()
            .to_vec(),
        ScramMechanism::Sha512 => <Hmac<Sha512> as KeyInit>::new_from_slice(key)
            .expect("HMAC accepts any key length")
            .chain_update(data)
            .finalize()
            .into_bytes()
            .to_vec(),
    }
}

/// `H(data)`.
pub(crate) fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// `SaltedPassword := Hi(Normalize(password), salt, i)`: PBKDF2 with the
/// mechanism's HMAC. Like Kafka, the password is not SASLprepped: its UTF-8
/// bytes are used as they are.
pub(crate) fn salted_password(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut out = vec![0; hash_len(mechanism)];
    match mechanism {
        ScramMechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
        }
        ScramMechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
        }
    }
    out
}

/// `ClientKey := HMAC(SaltedPassword, "Client Key")`.
pub(crate) fn client_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(mechanism, salted_password, b"Client Key")
}

/// `ServerKey := HMAC(SaltedPassword, "Server Key")`.
pub(crate) fn server_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(mechanism, salted_password, b"Server Key")
}

/// Byte-wise XOR of two equally long strings.
pub(crate) fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// `AuthMessage := client-first-message-bare + "," + server-first-message +
/// "," + client-final-message-without-proof`, from the texts as sent.
pub(crate) fn auth_message(
    client_first_bare: &str,
    server_first: &str,
    client_final_without_proof: &str,
) -> Vec<u8> {
    [client_first_bare, server_first, client_final_without_proof]
        .join(",")
        .into_bytes()
}

/// Bytes from the operating system's random source.
pub(crate) fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    // Authentication cannot be made safe without randomness, so a machine
    // without it is not one to carry on on.
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
}

/// A fresh nonce: 24 random bytes in URL-safe base64, so it is printable
/// and has no comma, as RFC 5802 asks.
pub(crate) fn nonce() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_matches_rfc_7914_vector() {
        // PBKDF2-HMAC-SHA256 ("passwd", "salt", 1), RFC 7914 section 11.
        let out = salted_password(ScramMechanism::Sha256, b"passwd", b"salt", 1);
        let expected = [
            0x55, 0xac, 0x04, 0x6e, 0x56, 0xe3, 0x08, 0x9f, 0xec, 0x16, 0x91, 0xc2, 0x25, 0x44,
            0xb6, 0x05, 0xf9, 0x41, 0x85, 0x21, 0x6d, 0xde, 0x04, 0x65, 0xe6, 0x8b, 0x9d, 0x57,
            0xc2, 0x0d, 0xac, 0xbc,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn lengths_follow_the_hash() {
        for mechanism in ScramMechanism::ALL {
            assert_eq!(hash(mechanism, b"x").len(), hash_len(mechanism));
            assert_eq!(hmac(mechanism, b"k", b"x").len(), hash_len(mechanism));
            assert_eq!(
                salted_password(mechanism, b"p", b"s", 2).len(),
                hash_len(mechanism)
            );
        }
    }

    #[test]
    fn nonces_are_printable_without_commas_and_differ() {
        let a = nonce();
        let b = nonce();
        assert_ne!(a, b);
        assert!(a.len() >= 32);
        assert!(a.bytes().all(|c| (0x21..=0x7e).contains(&c) && c != b','));
    }
}
