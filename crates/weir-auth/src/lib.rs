//! Authentication without I/O: the SASL mechanisms Kafka speaks, for the
//! broker's side and the client's, and the rules that turn a certificate's
//! subject into a principal.
//!
//! Every type here takes bytes and gives bytes: the caller reads and writes
//! the SaslHandshake/SaslAuthenticate frames, looks credentials up, and
//! supplies the time where one is needed.

mod credential;
mod distinguished_name;
mod oauthbearer;
mod plain;
mod principal_rules;
mod saslname;
mod scram;
mod verified;

pub use credential::{SaltedPassword, ScramCredential, ScramMechanism};
pub use distinguished_name::{rfc2253_keyword, rfc2253_name};
pub use oauthbearer::{
    ClientInitialResponse, JwtValidator, OAuthBearerServer, OAuthError, ValidatedToken,
};
pub use plain::{PlainCredentials, PlainError};
pub use principal_rules::{PrincipalMapper, RuleError};
pub use scram::{ScramClient, ScramError, ScramServer};
pub use verified::VerifiedPasswords;
