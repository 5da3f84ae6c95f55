//! SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255), the broker's side: the
//! client's initial response carries a bearer token, which
//! [`JwtValidator`] checks as a JWT signed by a key of the identity
//! provider's JWKS, the way Kafka's `OAuthBearerValidatorCallbackHandler`
//! does. [`OAuthBearerServer`] holds the exchange around it, including the
//! error round trip RFC 7628 defines.

mod initial_response;
mod jwt;
mod server;
#[cfg(test)]
mod test_keys;

pub use initial_response::ClientInitialResponse;
pub use jwt::{JwtValidator, ValidatedToken};
pub use server::OAuthBearerServer;

/// Why an OAUTHBEARER exchange or a token was refused.
///
/// Token errors say what was wrong with the token the client sent, which
/// is the client's own; a broker may log them, and tells the client only
/// that the token was invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The client's message does not follow RFC 7628's grammar.
    #[error("invalid OAUTHBEARER message: {0}")]
    Malformed(String),
    /// The client asked for channel binding (`p=`), which is not offered.
    #[error("channel binding is not supported")]
    ChannelBindingNotSupported,
    /// The client asked to act as someone other than the token's principal.
    #[error("authentication failed: the authorization id differs from the token's principal")]
    AuthorizationIdMismatch,
    /// The client acknowledged the server's error; the exchange has failed.
    #[error("authentication failed: invalid token")]
    AuthenticationFailed,
    /// A message arrived when the exchange expected none, or another one.
    #[error("unexpected OAUTHBEARER message in this state of the exchange")]
    UnexpectedMessage,
    /// The JWKS document could not be read.
    #[error("invalid JWKS: {0}")]
    InvalidJwks(String),
    /// The token is not a well-formed JWT, or its header or claims are not
    /// what a JWT's must be.
    #[error("invalid token: {0}")]
    InvalidToken(String),
    /// No key of the JWKS fits the token's `kid` and algorithm.
    #[error("no key in the JWKS for the token (kid {kid:?}, algorithm {algorithm})")]
    UnknownKey {
        /// The token's key id, if it had one.
        kid: Option<String>,
        /// The token's algorithm.
        algorithm: String,
    },
    /// The signature does not verify with the key.
    #[error("invalid token signature")]
    InvalidSignature,
    /// The token's `exp` is past.
    #[error("token expired at {expired_at} (now {now})")]
    Expired {
        /// The `exp` claim, seconds since the Unix epoch.
        expired_at: u64,
        /// The time validated at.
        now: u64,
    },
    /// The token's `nbf` is still to come.
    #[error("token not valid before {not_before} (now {now})")]
    NotYetValid {
        /// The `nbf` claim, seconds since the Unix epoch.
        not_before: u64,
        /// The time validated at.
        now: u64,
    },
    /// A claim that must be present is missing.
    #[error("token lacks the {0} claim")]
    MissingClaim(String),
    /// A claim has the wrong type or value.
    #[error("token has an invalid {0} claim")]
    InvalidClaim(String),
    /// The token's `aud` names none of the expected audiences, or names one
    /// when none is expected.
    #[error("token is for another audience")]
    InvalidAudience,
    /// The token's `iss` is not the expected issuer.
    #[error("token is from another issuer")]
    InvalidIssuer,
}
