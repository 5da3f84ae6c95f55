//! Security at the edge: TLS, the controller link's protection, password
//! checks for SASL/PLAIN and HTTP Basic, and OAUTHBEARER's signing keys.

pub(crate) mod controller_link;
pub mod jwks;
pub(crate) mod password_checks;
pub mod tls;
