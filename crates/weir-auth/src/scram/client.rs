//! The client's end of SCRAM, as Kafka's `ScramSaslClient`.

use subtle::ConstantTimeEq;

use super::formula;
use super::messages::{ClientFinal, ServerFinal, ServerFirst};
use super::ScramError;
use crate::{saslname, ScramMechanism};

/// The GS2 header the client sends: no channel binding, no authorization
/// id (Kafka's client sends none).
const GS2_HEADER: &str = "n,,";

/// The client's end of one SCRAM exchange (RFC 5802 section 5):
/// [`client_first`](Self::client_first) starts it,
/// [`receive_server_first`](Self::receive_server_first) answers the
/// server's challenge with the proof, and
/// [`receive_server_final`](Self::receive_server_final) checks that the
/// server knew the credential too.
#[derive(Clone)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    username: String,
    password: String,
    client_nonce: String,
    state: State,
}

#[derive(Clone)]
enum State {
    SendClientFirst,
    ReceiveServerFirst { client_first_bare: String },
    ReceiveServerFinal { server_signature: Vec<u8> },
    Complete,
    Failed,
}

impl ScramClient {
    /// A client that will authenticate `username` with `password`, with a
    /// fresh random nonce.
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str) -> Self {
        Self::with_nonce(mechanism, username, password, formula::nonce())
    }

    /// A client whose nonce is fixed, to replay a known exchange in tests.
    /// A nonce must never repeat in real use: call [`ScramClient::new`].
    /// The nonce must be printable ASCII without commas.
    #[doc(hidden)]
    pub fn with_nonce(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        client_nonce: impl Into<String>,
    ) -> Self {
        Self {
            mechanism,
            username: username.to_owned(),
            password: password.to_owned(),
            client_nonce: client_nonce.into(),
            state: State::SendClientFirst,
        }
    }

    /// The mechanism this exchange speaks.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The client's first message, which starts (or starts again) the
    /// exchange.
    pub fn client_first(&mut self) -> Vec<u8> {
        let bare = format!(
            "n={},r={}",
            saslname::encode(&self.username),
            self.client_nonce
        );
        let message = format!("{GS2_HEADER}{bare}").into_bytes();
        self.state = State::ReceiveServerFirst {
            client_first_bare: bare,
        };
        message
    }

    /// Reads the server's first message and returns the client's final one,
    /// which carries the proof of the password.
    ///
    /// Fails when the server's nonce does not extend the client's, or when it
    /// asks for an iteration count outside the mechanism's bounds.
    pub fn receive_server_first(&mut self, bytes: &[u8]) -> Result<Vec<u8>, ScramError> {
        let client_first_bare = match std::mem::replace(&mut self.state, State::Failed) {
            State::ReceiveServerFirst { client_first_bare } => client_first_bare,
            _ => return Err(ScramError::UnexpectedMessage),
        };
        let message = ServerFirst::parse(bytes)?;
        if message.nonce.len() <= self.client_nonce.len()
            || !message.nonce.starts_with(&self.client_nonce)
        {
            return Err(ScramError::NonceMismatch);
        }
        let (min, max) = (
            self.mechanism.min_iterations(),
            self.mechanism.max_iterations(),
        );
        if !(min..=max).contains(&message.iterations) {
            return Err(ScramError::IterationsOutOfRange {
                iterations: message.iterations,
                min,
                max,
            });
        }
        let salted_password = formula::salted_password(
            self.mechanism,
            self.password.as_bytes(),
            &message.salt,
            message.iterations,
        );
        let without_proof = ClientFinal::without_proof(GS2_HEADER, &message.nonce);
        let auth_message = formula::auth_message(&client_first_bare, &message.text, &without_proof);
        let client_key = formula::client_key(self.mechanism, &salted_password);
        let stored_key = formula::hash(self.mechanism, &client_key);
        let client_signature = formula::hmac(self.mechanism, &stored_key, &auth_message);
        let proof = formula::xor(&client_key, &client_signature);
        let server_key = formula::server_key(self.mechanism, &salted_password);
        let server_signature = formula::hmac(self.mechanism, &server_key, &auth_message);
        self.state = State::ReceiveServerFinal { server_signature };
        Ok(ClientFinal::format(&without_proof, &proof).into_bytes())
    }

    /// Reads the server's final message: the exchange is complete when the
    /// server's signature proves it holds the user's credential.
    pub fn receive_server_final(&mut self, bytes: &[u8]) -> Result<(), ScramError> {
        let expected = match std::mem::replace(&mut self.state, State::Failed) {
            State::ReceiveServerFinal { server_signature } => server_signature,
            _ => return Err(ScramError::UnexpectedMessage),
        };
        match ServerFinal::parse(bytes)? {
            ServerFinal::Error(error) => Err(ScramError::ServerError(error)),
            ServerFinal::Verifier(signature) => {
                if !bool::from(signature.ct_eq(&expected)) {
                    return Err(ScramError::InvalidServerSignature);
                }
                self.state = State::Complete;
                Ok(())
            }
        }
    }

    /// Whether the server has been verified and the exchange is done.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::SendClientFirst => "SendClientFirst",
            State::ReceiveServerFirst { .. } => "ReceiveServerFirst",
            State::ReceiveServerFinal { .. } => "ReceiveServerFinal",
            State::Complete => "Complete",
            State::Failed => "Failed",
        };
        // Never the password.
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
