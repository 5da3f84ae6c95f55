//! The broker's end of an OAUTHBEARER exchange, as Kafka's
//! `OAuthBearerSaslServer`.

use std::collections::BTreeMap;

use super::{ClientInitialResponse, OAuthError};

/// The error the server sends for a token it refuses (RFC 7628 section
/// 3.2.2), as Kafka's broker words it.
const INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;

/// The client's whole answer to an error: a single `^A`.
const ERROR_ACK: &[u8] = b"\x01";

/// The server's end of one OAUTHBEARER exchange (RFC 7628 section 3):
///
/// 1. [`receive_client_response`](Self::receive_client_response) reads the
///    client's initial response and hands back the token;
/// 2. the caller validates the token (e.g. with
///    [`JwtValidator`](super::JwtValidator)) at its own clock, then either
///    [`accept`](Self::accept)s the principal, whose empty reply ends the
///    exchange, or [`reject`](Self::reject)s the token, whose JSON reply goes
///    to the client;
/// 3. after a rejection the client answers `^A`, which
///    `receive_client_response` turns into the exchange's failure. A client
///    may instead send a new initial response, as Kafka allows.
#[derive(Clone, Debug, Default)]
pub struct OAuthBearerServer {
    state: State,
}

#[derive(Clone, Debug, Default)]
enum State {
    #[default]
    ReceiveInitialResponse,
    Validating(ClientInitialResponse),
    ErrorSent,
    Complete {
        principal: String,
        extensions: BTreeMap<String, String>,
    },
    Failed,
}

impl OAuthBearerServer {
    /// A server for one exchange.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a client message: its initial response, whose token the caller
    /// must now validate; or, after a [`reject`](Self::reject), the client's
    /// `^A`, which ends the exchange with
    /// [`OAuthError::AuthenticationFailed`].
    pub fn receive_client_response(
        &mut self,
        bytes: &[u8],
    ) -> Result<&ClientInitialResponse, OAuthError> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::ErrorSent if bytes == ERROR_ACK => return Err(OAuthError::AuthenticationFailed),
            State::ReceiveInitialResponse | State::ErrorSent => {}
            _ => return Err(OAuthError::UnexpectedMessage),
        }
        self.state = State::Validating(ClientInitialResponse::parse(bytes)?);
        match &self.state {
            State::Validating(response) => Ok(response),
            _ => unreachable!("state was just set"),
        }
    }

    /// Completes the exchange for the principal the caller found the token
    /// to name, and returns the server's (empty) final message. Fails if the
    /// client asked for another authorization id.
    pub fn accept(&mut self, principal: &str) -> Result<Vec<u8>, OAuthError> {
        let response = match std::mem::replace(&mut self.state, State::Failed) {
            State::Validating(response) => response,
            _ => return Err(OAuthError::UnexpectedMessage),
        };
        if response
            .authzid
            .as_deref()
            .is_some_and(|authzid| authzid != principal)
        {
            return Err(OAuthError::AuthorizationIdMismatch);
        }
        self.state = State::Complete {
            principal: principal.to_owned(),
            extensions: response.extensions,
        };
        Ok(Vec::new())
    }

    /// Refuses the token: returns the error message to send, to which the
    /// client answers `^A`.
    ///
    /// # Panics
    ///
    /// When no initial response is waiting for a verdict: a bug in the
    /// caller, not something a client can cause.
    pub fn reject(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::Validating(_) => {}
            _ => panic!("OAuthBearerServer::reject called out of turn"),
        }
        self.state = State::ErrorSent;
        INVALID_TOKEN.as_bytes().to_vec()
    }

    /// The principal this exchange authenticated, once it has completed.
    pub fn authenticated_principal(&self) -> Option<&str> {
        match &self.state {
            State::Complete { principal, .. } => Some(principal),
            _ => None,
        }
    }

    /// The client's SASL extensions, once the exchange has completed.
    pub fn extensions(&self) -> Option<&BTreeMap<String, String>> {
        match &self.state {
            State::Complete { extensions, .. } => Some(extensions),
            _ => None,
        }
    }

    /// Whether the exchange has completed successfully.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INITIAL: &[u8] = b"n,,\x01auth=Bearer a.b.c\x01traceId=7\x01\x01";

    #[test]
    fn accepted_token_completes() {
        let mut server = OAuthBearerServer::new();
        let response = server.receive_client_response(INITIAL).unwrap();
        assert_eq!(response.token, "a.b.c");
        assert!(!server.is_complete());
        assert_eq!(server.accept("alice").unwrap(), b"");
        assert!(server.is_complete());
        assert_eq!(server.authenticated_principal(), Some("alice"));
        assert_eq!(
            server
                .extensions()
                .unwrap()
                .get("traceId")
                .map(String::as_str),
            Some("7")
        );
        assert_eq!(
            server.receive_client_response(INITIAL).unwrap_err(),
            OAuthError::UnexpectedMessage
        );
    }

    #[test]
    fn rejected_token_fails_when_the_client_acknowledges() {
        let mut server = OAuthBearerServer::new();
        server.receive_client_response(INITIAL).unwrap();
        let challenge = server.reject();
        let json: serde_json::Value = serde_json::from_slice(&challenge).unwrap();
        assert_eq!(json, serde_json::json!({"status": "invalid_token"}));
        assert_eq!(
            server.receive_client_response(b"\x01").unwrap_err(),
            OAuthError::AuthenticationFailed
        );
        assert!(!server.is_complete());
        assert_eq!(server.authenticated_principal(), None);
    }

    #[test]
    fn client_may_try_again_after_a_rejection() {
        let mut server = OAuthBearerServer::new();
        server.receive_client_response(INITIAL).unwrap();
        server.reject();
        server.receive_client_response(INITIAL).unwrap();
        server.accept("alice").unwrap();
        assert!(server.is_complete());
    }

    #[test]
    fn authzid_must_be_the_principal() {
        let initial = b"n,a=alice,\x01auth=Bearer a.b.c\x01\x01";
        let mut server = OAuthBearerServer::new();
        server.receive_client_response(initial).unwrap();
        assert_eq!(
            server.accept("bob").unwrap_err(),
            OAuthError::AuthorizationIdMismatch
        );
        assert!(!server.is_complete());

        let mut server = OAuthBearerServer::new();
        server.receive_client_response(initial).unwrap();
        server.accept("alice").unwrap();
        assert_eq!(server.authenticated_principal(), Some("alice"));
    }

    #[test]
    fn ack_without_an_error_is_malformed() {
        let mut server = OAuthBearerServer::new();
        assert!(matches!(
            server.receive_client_response(b"\x01"),
            Err(OAuthError::Malformed(_))
        ));
        // A failed exchange stays failed.
        assert_eq!(
            server.receive_client_response(INITIAL).unwrap_err(),
            OAuthError::UnexpectedMessage
        );
    }

    #[test]
    fn verdicts_out_of_turn() {
        let mut server = OAuthBearerServer::new();
        assert_eq!(
            server.accept("alice").unwrap_err(),
            OAuthError::UnexpectedMessage
        );
    }

    #[test]
    #[should_panic(expected = "out of turn")]
    fn reject_before_a_response_is_a_caller_bug() {
        OAuthBearerServer::new().reject();
    }
}
