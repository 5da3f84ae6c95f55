//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks
//! them, for both ends: [`ScramServer`] checks a client against a stored
//! [`ScramCredential`](crate::ScramCredential), [`ScramClient`] proves a
//! password to a broker. Both are state machines over message bytes; the
//! caller moves the bytes (SaslAuthenticate frames) and looks credentials up.
//!
//! What differs from RFC 5802, as in Kafka: names and passwords are not
//! SASLprepped, and channel binding is not offered.

mod client;
pub(crate) mod formula;
mod messages;
mod server;

pub use client::ScramClient;
pub use server::ScramServer;

/// Why a SCRAM exchange failed.
///
/// A broker may show any of these to the client: none says whether a user
/// exists. A wrong password and an unknown user are both
/// [`AuthenticationFailed`](ScramError::AuthenticationFailed), and found out
/// only at the last step, as for a known user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScramError {
    /// The message does not follow RFC 5802's grammar.
    #[error("malformed SCRAM message: {0}")]
    Malformed(String),
    /// Unknown user or wrong password.
    #[error("authentication failed: invalid credentials")]
    AuthenticationFailed,
    /// The client asked to act as someone other than the user it
    /// authenticates as, which Kafka does not allow.
    #[error("authentication failed: the authorization id differs from the user name")]
    AuthorizationIdMismatch,
    /// The client asked for channel binding (`p=`), which is not offered.
    #[error("channel binding is not supported")]
    ChannelBindingNotSupported,
    /// The client asked to authenticate with a delegation token
    /// (`tokenauth=true`), which is not supported.
    #[error("delegation token authentication is not supported")]
    TokenAuthNotSupported,
    /// The nonce is not the one this exchange agreed on.
    #[error("invalid nonce")]
    NonceMismatch,
    /// The server asked for an iteration count outside what Kafka allows for
    /// the mechanism: too few weakens the password's hash, too many costs the
    /// client unbounded work.
    #[error("server asked for {iterations} iterations; allowed are {min} to {max}")]
    IterationsOutOfRange {
        /// What the server asked for.
        iterations: u32,
        /// The mechanism's minimum.
        min: u32,
        /// The mechanism's maximum.
        max: u32,
    },
    /// The server's signature does not prove it knows the credential.
    #[error("invalid server signature")]
    InvalidServerSignature,
    /// The server ended the exchange with `e=`.
    #[error("server rejected the authentication: {0}")]
    ServerError(String),
    /// A message arrived when the exchange expected none, or another one.
    #[error("unexpected SCRAM message in this state of the exchange")]
    UnexpectedMessage,
}

#[cfg(test)]
mod tests;
