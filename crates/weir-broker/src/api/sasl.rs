//! SaslHandshake and SaslAuthenticate on a SASL listener, as Kafka's
//! `SaslServerAuthenticator`: until the client has authenticated, only
//! ApiVersions and these two are served, and anything else closes the
//! connection. A failed authentication is answered with
//! SASL_AUTHENTICATION_FAILED and a message that tells nothing about which
//! part was wrong, then the connection closes; the connection sends that
//! answer only after `connection.failed.authentication.delay.ms`. PLAIN
//! checks the password through the broker's password checks. With
//! `connections.max.reauth.ms` a session lasts that long: the client
//! authenticates again on the same connection (KIP-368) as the same
//! principal, or the connection is closed at its next request.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;
use weir_auth::{OAuthBearerServer, PlainCredentials, ScramMechanism, ScramServer};

use super::{key_and_version, response_frame, supported_versions};
use crate::broker::Broker;
use crate::net::Outgoing;

/// What the connection does with a frame the authenticator looked at.
pub(crate) enum Intercepted {
    /// Not the authenticator's: dispatch it as usual.
    Pass,
    /// Answered; go on reading.
    Respond(Outgoing),
    /// Answered (or not: `None`), then the connection closes.
    Close(Option<Outgoing>, String),
}

/// A mechanism's exchange in progress.
enum Exchange {
    Plain,
    OAuthBearer(Box<OAuthBearerServer>),
    Scram {
        server: Box<ScramServer>,
        /// The client's first message has been answered.
        first_answered: bool,
    },
}

/// PLAIN: the user, if the password is theirs.
async fn plain(broker: &Broker, token: &[u8]) -> Option<String> {
    let credentials = PlainCredentials::parse(token).ok()?;
    let user = credentials.username.clone();
    let verified = broker
        .password_checks()
        .matches(&broker.image(), credentials)
        .await;
    verified.then_some(user)
}

/// One OAUTHBEARER message (RFC 7628): the client's token, answered with
/// an empty reply and the principal (its `sub`, or the configured claim)
/// and the token's expiry; or, if the token does not check out, with the
/// error the client acknowledges before the exchange fails.
#[allow(clippy::type_complexity)]
fn oauth_step(
    broker: &Broker,
    server: &mut OAuthBearerServer,
    token: &[u8],
) -> Option<(Bytes, Option<(String, u64)>)> {
    let response = match server.receive_client_response(token) {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(%error, "OAUTHBEARER exchange refused");
            return None;
        }
    };
    let now_secs = (broker.now_ms().max(0) / 1000) as u64;
    let validated = broker
        .oauth()
        .ok_or(weir_auth::OAuthError::AuthenticationFailed)
        .and_then(|validator| validator.validate_token(&response.token, now_secs));
    match validated {
        Ok(token) => match server.accept(&token.principal) {
            Ok(reply) => Some((
                Bytes::from(reply),
                Some((token.principal, token.expires_at)),
            )),
            Err(error) => {
                tracing::debug!(%error, "OAUTHBEARER exchange refused");
                None
            }
        },
        Err(error) => {
            if matches!(error, weir_auth::OAuthError::UnknownKey { .. }) {
                broker.jwks_key_missing();
            }
            tracing::debug!(%error, "OAUTHBEARER token refused");
            Some((Bytes::from(server.reject()), None))
        }
    }
}

/// One SCRAM message: the client's first (answered with the server's
/// first), then its final (answered with the server's signature, and the
/// user proven).
fn scram_step(
    broker: &Broker,
    server: &mut ScramServer,
    first_answered: &mut bool,
    token: &[u8],
) -> Option<(Bytes, Option<String>)> {
    let outcome = if *first_answered {
        server.receive_client_final(token).map(|reply| {
            let user = server.authenticated_user().map(str::to_owned);
            (Bytes::from(reply), user)
        })
    } else {
        *first_answered = true;
        match server.receive_client_first(token).map(str::to_owned) {
            Ok(user) => {
                let mechanism = server.mechanism();
                let credential =
                    broker.with_image(|image| image.scram_credential(&user, mechanism).cloned());
                Ok((Bytes::from(server.server_first(credential.as_ref())), None))
            }
            Err(error) => Err(error),
        }
    };
    outcome
        .inspect_err(|error| tracing::debug!(%error, "SCRAM exchange refused"))
        .ok()
}

enum State {
    /// Waiting for SaslHandshake.
    Handshake,
    /// Handshake done: waiting for the mechanism's tokens, in
    /// SaslAuthenticate requests, or raw after a v0 handshake.
    Authenticating {
        mechanism: String,
        exchange: Exchange,
        raw_tokens: bool,
    },
    /// Authenticated; a new SaslHandshake starts a re-authentication.
    Authenticated,
}

/// The SASL side of one connection.
pub(crate) struct Authenticator {
    listener: String,
    mechanisms: Vec<String>,
    max_reauth_ms: i64,
    state: State,
    /// Who the client proved to be, once it has.
    principal: Option<String>,
    /// When the session ends, if `connections.max.reauth.ms` is set.
    expires: Option<Instant>,
}

impl Authenticator {
    pub(crate) fn new(broker: &Broker, listener: &str) -> Self {
        let config = broker.config();
        Self {
            listener: listener.to_owned(),
            mechanisms: config.security.sasl_mechanisms.clone(),
            max_reauth_ms: config.security.max_reauth_ms,
            state: State::Handshake,
            principal: None,
            expires: None,
        }
    }

    /// Whether the client has authenticated (and may send any request).
    pub(crate) fn is_authenticated(&self) -> bool {
        self.principal.is_some()
    }

    /// The principal, once authenticated.
    pub(crate) fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Looks at a frame before dispatch.
    pub(crate) async fn intercept(&mut self, broker: &Broker, body: &Bytes) -> Intercepted {
        if let State::Authenticating {
            raw_tokens: true, ..
        } = self.state
        {
            return self.raw_token(broker, body).await;
        }
        let key = key_and_version(body).map(|(key, _)| key);
        match key {
            Some(ApiKey::SaslHandshake) => self.handshake(body),
            Some(ApiKey::SaslAuthenticate) => self.authenticate(broker, body).await,
            Some(ApiKey::ApiVersions) if !self.is_authenticated() => Intercepted::Pass,
            _ if !self.is_authenticated() => Intercepted::Close(
                None,
                format!(
                    "unexpected {} request before SASL authentication",
                    key.map_or("unknown".to_owned(), |k| format!("{k:?}"))
                ),
            ),
            _ if self.expires.is_some_and(|at| Instant::now() >= at) => Intercepted::Close(
                None,
                "the SASL session expired (connections.max.reauth.ms) and the client did not \
                 authenticate again"
                    .to_owned(),
            ),
            _ => Intercepted::Pass,
        }
    }

    fn handshake(&mut self, body: &Bytes) -> Intercepted {
        let Some((header, request, version)) = decode::<SaslHandshakeRequest>(body) else {
            return Intercepted::Close(None, "malformed SaslHandshake request".to_owned());
        };
        if matches!(self.state, State::Authenticating { .. }) {
            return Intercepted::Close(
                None,
                "SaslHandshake in the middle of an authentication".to_owned(),
            );
        }
        let mechanism = request.mechanism.to_string();
        let enabled: Vec<StrBytes> = self
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect();
        let respond = |error: Option<ResponseError>| {
            let response = SaslHandshakeResponse::default()
                .with_error_code(error.map_or(0, |e| e.code()))
                .with_mechanisms(enabled.clone());
            response_frame(
                ApiKey::SaslHandshake,
                version,
                header.correlation_id,
                &response,
            )
        };
        let exchange = match mechanism.as_str() {
            name if !self.mechanisms.iter().any(|m| m == name) => None,
            "PLAIN" => Some(Exchange::Plain),
            "OAUTHBEARER" => Some(Exchange::OAuthBearer(Box::default())),
            name => ScramMechanism::from_name(name).map(|m| Exchange::Scram {
                server: Box::new(ScramServer::new(m)),
                first_answered: false,
            }),
        };
        let Some(exchange) = exchange else {
            return Intercepted::Close(
                Some(respond(Some(ResponseError::UnsupportedSaslMechanism))),
                format!("the client asked for SASL mechanism {mechanism:?}, which is not enabled"),
            );
        };
        if self.is_authenticated() && version == 0 {
            return Intercepted::Close(
                None,
                "re-authentication needs SaslHandshake v1 or later".to_owned(),
            );
        }
        self.state = State::Authenticating {
            mechanism,
            exchange,
            raw_tokens: version == 0,
        };
        Intercepted::Respond(respond(None))
    }

    async fn authenticate(&mut self, broker: &Broker, body: &Bytes) -> Intercepted {
        let Some((header, request, version)) = decode::<SaslAuthenticateRequest>(body) else {
            return Intercepted::Close(None, "malformed SaslAuthenticate request".to_owned());
        };
        let respond = |response: SaslAuthenticateResponse| {
            response_frame(
                ApiKey::SaslAuthenticate,
                version,
                header.correlation_id,
                &response,
            )
        };
        if !matches!(self.state, State::Authenticating { .. }) {
            let response = SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "Unexpected SaslAuthenticate request: send SaslHandshake first",
                )));
            return Intercepted::Close(
                Some(respond(response)),
                "SaslAuthenticate without a handshake".to_owned(),
            );
        }
        match self.step(broker, &request.auth_bytes).await {
            Ok((reply, done)) => {
                let mut response = SaslAuthenticateResponse::default().with_auth_bytes(reply);
                if done && version >= 1 {
                    response.session_lifetime_ms = self.session_lifetime_ms();
                }
                Intercepted::Respond(respond(response))
            }
            Err(message) => {
                let response = SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(StrBytes::from_string(message.clone())));
                Intercepted::Close(Some(respond(response)), message)
            }
        }
    }

    /// A token sent raw, after a v0 handshake: answered raw, with the
    /// frame's size in front; a failure just closes the connection.
    async fn raw_token(&mut self, broker: &Broker, body: &Bytes) -> Intercepted {
        match self.step(broker, body).await {
            Ok((reply, _)) => {
                let mut framed = Vec::with_capacity(reply.len() + 4);
                framed.extend_from_slice(&(reply.len() as i32).to_be_bytes());
                framed.extend_from_slice(&reply);
                Intercepted::Respond(Outgoing::from(Bytes::from(framed)))
            }
            Err(message) => Intercepted::Close(None, message),
        }
    }

    /// One token of the exchange: the reply, and whether the client is now
    /// authenticated; or the message of a failed authentication.
    async fn step(&mut self, broker: &Broker, token: &[u8]) -> Result<(Bytes, bool), String> {
        let State::Authenticating {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            unreachable!("checked by the callers");
        };
        let mechanism = mechanism.clone();
        // The reply, and the user once proven; `None`: refused.
        // When the credential itself expires (a token's `exp`).
        let mut credential_expires: Option<u64> = None;
        let outcome: Option<(Bytes, Option<String>)> = match exchange {
            Exchange::Plain => plain(broker, token)
                .await
                .map(|user| (Bytes::new(), Some(user))),
            Exchange::OAuthBearer(server) => {
                oauth_step(broker, server, token).map(|(reply, proven)| match proven {
                    Some((principal, expires)) => {
                        credential_expires = Some(expires);
                        (reply, Some(principal))
                    }
                    None => (reply, None),
                })
            }
            Exchange::Scram {
                server,
                first_answered,
            } => scram_step(broker, server, first_answered, token),
        };
        let failure = match (&outcome, &exchange) {
            (Some(_), _) => None,
            (None, Exchange::OAuthBearer(_)) => Some(
                "Authentication failed during authentication due to invalid credentials with \
                 SASL mechanism OAUTHBEARER"
                    .to_owned(),
            ),
            (None, Exchange::Plain) => {
                Some("Authentication failed: Invalid username or password".to_owned())
            }
            (None, Exchange::Scram { .. }) => Some(format!(
                "Authentication failed during authentication due to invalid credentials with \
                 SASL mechanism {mechanism}"
            )),
        };
        let (reply, user) = match (outcome, failure) {
            (Some(outcome), None) => outcome,
            (_, failure) => {
                self.state = State::Handshake;
                broker
                    .metrics()
                    .failed_authentication(&self.listener, &mechanism);
                return Err(failure.unwrap_or_default());
            }
        };
        let Some(user) = user else {
            return Ok((reply, false));
        };
        let principal = format!("User:{user}");
        if let Some(previous) = self.principal.as_ref().filter(|p| **p != principal) {
            let message = format!(
                "Cannot change principals during re-authentication from {previous}: {principal}"
            );
            self.state = State::Handshake;
            broker
                .metrics()
                .failed_authentication(&self.listener, &mechanism);
            return Err(message);
        }
        self.principal = Some(principal);
        // The session ends at connections.max.reauth.ms, or when the
        // credential does, whichever comes first (KIP-368).
        let reauth = (self.max_reauth_ms > 0)
            .then(|| Instant::now() + Duration::from_millis(self.max_reauth_ms as u64));
        let credential = credential_expires.map(|expires_secs| {
            let now_ms = broker.now_ms().max(0) as u64;
            let left_ms = (expires_secs * 1000).saturating_sub(now_ms);
            Instant::now() + Duration::from_millis(left_ms)
        });
        self.expires = match (reauth, credential) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.state = State::Authenticated;
        Ok((reply, true))
    }

    /// What SaslAuthenticate v1+ tells the client: how long its session
    /// lasts, 0 for ever.
    fn session_lifetime_ms(&self) -> i64 {
        self.expires.map_or(0, |at| {
            at.saturating_duration_since(Instant::now()).as_millis() as i64
        })
    }
}

/// A SASL request's header and body, if it parses at a version Weir serves.
fn decode<R: Decodable>(body: &Bytes) -> Option<(RequestHeader, R, i16)> {
    let (key, version) = key_and_version(body)?;
    let (min, max) = supported_versions(key)?;
    if !(min..=max).contains(&version) {
        return None;
    }
    let mut body = body.clone();
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).ok()?;
    let request = R::decode(&mut body, version).ok()?;
    Some((header, request, version))
}
