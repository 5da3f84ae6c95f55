//! The broker's end of SCRAM, as Kafka's `ScramSaslServer`.

use std::sync::OnceLock;

use subtle::ConstantTimeEq;

use super::formula;
use super::messages::{ClientFinal, ClientFirst, ServerFinal, ServerFirst};
use super::ScramError;
use crate::{ScramCredential, ScramMechanism};

/// Bytes of salt in the stand-in credential of an unknown user: as many as
/// [`ScramCredential::from_password`] makes, so the length tells nothing.
const FAKE_SALT_LEN: usize = 32;

/// Iterations of the stand-in credential: Kafka's default for new users.
const FAKE_ITERATIONS: u32 = 4096;

/// The server's end of one SCRAM exchange (RFC 5802 section 5):
///
/// 1. [`receive_client_first`](Self::receive_client_first) reads the
///    client's first message and names the user;
/// 2. the caller looks the user's credential up and passes it (or `None`)
///    to [`server_first`](Self::server_first), whose bytes go to the client;
/// 3. [`receive_client_final`](Self::receive_client_final) checks the proof
///    and returns the server's final message; the user is then
///    [`authenticated_user`](Self::authenticated_user).
///
/// An unknown user gets a server-first message like a known one's, with a
/// salt that stays the same for that name for the life of the process, and
/// fails only at the proof, with the error a wrong password gives.
#[derive(Clone)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    server_nonce: String,
    state: State,
}

#[derive(Clone)]
enum State {
    ReceiveClientFirst,
    SendServerFirst(ClientFirst),
    ReceiveClientFinal(Box<Exchange>),
    Complete { username: String },
    Failed,
}

/// What the final step needs of the first two messages.
#[derive(Clone)]
struct Exchange {
    client_first: ClientFirst,
    server_first: String,
    /// Client nonce followed by server nonce.
    nonce: String,
    credential: ScramCredential,
    /// False when `credential` is a stand-in for an unknown user.
    known_user: bool,
}

impl ScramServer {
    /// A server for one exchange of `mechanism`, with a fresh random nonce.
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self::with_nonce(mechanism, formula::nonce())
    }

    /// A server whose nonce is fixed, to replay a known exchange in tests.
    /// A nonce must never repeat in real use: call [`ScramServer::new`].
    #[doc(hidden)]
    pub fn with_nonce(mechanism: ScramMechanism, server_nonce: impl Into<String>) -> Self {
        Self {
            mechanism,
            server_nonce: server_nonce.into(),
            state: State::ReceiveClientFirst,
        }
    }

    /// The mechanism this exchange speaks.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Reads the client's first message and returns the user name, unescaped,
    /// whose credential the caller should look up for
    /// [`server_first`](Self::server_first).
    ///
    /// Fails on a malformed message, on channel binding (`p=`), on a
    /// delegation-token request (`tokenauth=true`), and when the message asks
    /// for an authorization id other than the user name.
    pub fn receive_client_first(&mut self, bytes: &[u8]) -> Result<&str, ScramError> {
        if !matches!(
            std::mem::replace(&mut self.state, State::Failed),
            State::ReceiveClientFirst
        ) {
            return Err(ScramError::UnexpectedMessage);
        }
        let message = ClientFirst::parse(bytes)?;
        // Kafka's SCRAM extension for delegation tokens; other extensions
        // are ignored, as Kafka does.
        if message
            .extensions
            .iter()
            .any(|(key, value)| key == "tokenauth" && value.eq_ignore_ascii_case("true"))
        {
            return Err(ScramError::TokenAuthNotSupported);
        }
        if message
            .authzid
            .as_ref()
            .is_some_and(|authzid| *authzid != message.username)
        {
            return Err(ScramError::AuthorizationIdMismatch);
        }
        self.state = State::SendServerFirst(message);
        match &self.state {
            State::SendServerFirst(message) => Ok(&message.username),
            _ => unreachable!("state was just set"),
        }
    }

    /// The server's first message for the user named by
    /// [`receive_client_first`](Self::receive_client_first), given that
    /// user's credential for this mechanism, or `None` if there is none.
    ///
    /// A credential with fewer iterations than the mechanism allows is
    /// treated as no credential, as Kafka refuses it.
    ///
    /// # Panics
    ///
    /// When not called right after a successful `receive_client_first`:
    /// that is a bug in the caller, not something a client can cause.
    pub fn server_first(&mut self, credential: Option<&ScramCredential>) -> Vec<u8> {
        let client_first = match std::mem::replace(&mut self.state, State::Failed) {
            State::SendServerFirst(client_first) => client_first,
            _ => panic!("ScramServer::server_first called out of turn"),
        };
        let credential = credential
            .filter(|c| c.iterations >= self.mechanism.min_iterations())
            .filter(|c| c.stored_key.len() == formula::hash_len(self.mechanism));
        let known_user = credential.is_some();
        let credential = match credential {
            Some(credential) => credential.clone(),
            None => stand_in_credential(self.mechanism, &client_first.username),
        };
        let nonce = format!("{}{}", client_first.nonce, self.server_nonce);
        let server_first = ServerFirst::format(&nonce, &credential.salt, credential.iterations);
        let reply = server_first.clone().into_bytes();
        self.state = State::ReceiveClientFinal(Box::new(Exchange {
            client_first,
            server_first,
            nonce,
            credential,
            known_user,
        }));
        reply
    }

    /// Checks the client's final message and returns the server's final
    /// message (`v=` and the server's signature), to send to the client
    /// before treating the connection as authenticated.
    ///
    /// A wrong proof and an unknown user both give
    /// [`ScramError::AuthenticationFailed`].
    pub fn receive_client_final(&mut self, bytes: &[u8]) -> Result<Vec<u8>, ScramError> {
        let exchange = match std::mem::replace(&mut self.state, State::Failed) {
            State::ReceiveClientFinal(exchange) => exchange,
            _ => return Err(ScramError::UnexpectedMessage),
        };
        let message = ClientFinal::parse(bytes)?;
        if message.channel_binding != exchange.client_first.gs2_header.as_bytes() {
            return Err(ScramError::Malformed(
                "channel binding does not echo the GS2 header".into(),
            ));
        }
        // librdkafka before 2.6.1 sends its own nonce again in front of
        // the combined one; Kafka accepts that since 3.8.1 (KAFKA-17232),
        // and so must Weir, for the clients still on those versions.
        if !message.nonce.ends_with(&exchange.nonce) {
            return Err(ScramError::NonceMismatch);
        }
        if message.proof.len() != formula::hash_len(self.mechanism) {
            return Err(ScramError::Malformed("proof has the wrong length".into()));
        }
        let auth_message = formula::auth_message(
            &exchange.client_first.bare,
            &exchange.server_first,
            &message.without_proof,
        );
        let stored_key = &exchange.credential.stored_key;
        let client_signature = formula::hmac(self.mechanism, stored_key, &auth_message);
        let client_key = formula::xor(&message.proof, &client_signature);
        let proven_key = formula::hash(self.mechanism, &client_key);
        let proven = proven_key.ct_eq(stored_key) & u8::from(exchange.known_user).ct_eq(&1);
        if !bool::from(proven) {
            return Err(ScramError::AuthenticationFailed);
        }
        let server_signature = formula::hmac(
            self.mechanism,
            &exchange.credential.server_key,
            &auth_message,
        );
        self.state = State::Complete {
            username: exchange.client_first.username,
        };
        Ok(ServerFinal::format_verifier(&server_signature).into_bytes())
    }

    /// The user this exchange authenticated, once it has completed.
    pub fn authenticated_user(&self) -> Option<&str> {
        match &self.state {
            State::Complete { username } => Some(username),
            _ => None,
        }
    }

    /// Whether the exchange has completed successfully.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete { .. })
    }
}

impl std::fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::ReceiveClientFirst => "ReceiveClientFirst",
            State::SendServerFirst(_) => "SendServerFirst",
            State::ReceiveClientFinal(_) => "ReceiveClientFinal",
            State::Complete { .. } => "Complete",
            State::Failed => "Failed",
        };
        f.debug_struct("ScramServer")
            .field("mechanism", &self.mechanism)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

/// A credential for a user who has none: its salt is derived from the name
/// with a key secret to this process, so asking twice gives the same salt
/// as for a real user, while its keys are random and match no password.
fn stand_in_credential(mechanism: ScramMechanism, username: &str) -> ScramCredential {
    static KEY: OnceLock<Vec<u8>> = OnceLock::new();
    let key = KEY.get_or_init(|| formula::random_bytes(32));
    let mut input = mechanism.name().as_bytes().to_vec();
    input.push(0);
    input.extend_from_slice(username.as_bytes());
    let mut salt = formula::hmac(ScramMechanism::Sha512, key, &input);
    salt.truncate(FAKE_SALT_LEN);
    let len = formula::hash_len(mechanism);
    ScramCredential {
        salt,
        stored_key: formula::random_bytes(len),
        server_key: formula::random_bytes(len),
        iterations: FAKE_ITERATIONS,
    }
}
