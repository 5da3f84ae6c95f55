//! Authentication without I/O: the SASL mechanisms Kafka speaks, for the
//! broker's side and the client's, and the rules that turn a certificate's
//! subject into a principal.

mod credential;

pub use credential::{ScramCredential, ScramMechanism};
