//! SASL on a new connection, as Kafka's `SaslClientAuthenticator`:
//! SaslHandshake v1 names the mechanism, then SaslAuthenticate carries the
//! mechanism's messages (weir-auth's, which do no I/O) until the broker
//! has verified the client and, for SCRAM, the client the broker. A
//! session the broker limits (`connections.max.reauth.ms`) is renewed on
//! the same connection before it ends (KIP-368).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use weir_auth::{PlainCredentials, ScramClient};

use crate::error::error_name;
use crate::security::{SaslConfig, SaslMechanism};
use crate::{Client, ClientError};

impl Client {
    /// Authenticates the connection if SASL is configured; on failure the
    /// connection is dropped, as the broker closes it too.
    pub(crate) async fn authenticate(&mut self) -> Result<(), ClientError> {
        let connector = self.connector().clone();
        let Some(sasl) = connector.sasl() else {
            return Ok(());
        };
        match self.sasl_exchange(sasl).await {
            Ok(lifetime) => {
                self.reauthenticate_at = reauthentication_time(Instant::now(), lifetime);
                Ok(())
            }
            Err(error) => {
                self.disconnect();
                Err(error)
            }
        }
    }

    /// The handshake and the mechanism's exchange; the session's lifetime
    /// in milliseconds (0: unlimited).
    async fn sasl_exchange(&mut self, sasl: &SaslConfig) -> Result<i64, ClientError> {
        let mechanism = sasl.mechanism;
        let addr = self.addr().to_owned();
        let failed = |code: Option<i16>, message: String| ClientError::Authentication {
            addr: addr.clone(),
            mechanism: mechanism.name().to_owned(),
            code,
            message,
        };
        // v0 sends the tokens raw, outside Kafka's framing; only v1 on is
        // spoken here, as by every current Kafka client.
        let handshake_version = match self.version(ApiKey::SaslHandshake) {
            Some(version) if version >= 1 => version,
            _ => {
                return Err(failed(
                    None,
                    "the broker offers no SaslHandshake v1 or later; is this a SASL listener?"
                        .to_owned(),
                ))
            }
        };
        let request = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let response: SaslHandshakeResponse = self
            .call_on_connection(ApiKey::SaslHandshake, handshake_version, &request)
            .await?;
        if response.error_code != 0 {
            let error = ResponseError::try_from_code(response.error_code);
            let enabled: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
            let message = match error {
                Some(ResponseError::UnsupportedSaslMechanism) => format!(
                    "the broker does not enable SASL mechanism {mechanism}; it enables {}",
                    if enabled.is_empty() {
                        "none".to_owned()
                    } else {
                        enabled.join(", ")
                    }
                ),
                Some(error) => error_name(error),
                None => format!("error code {}", response.error_code),
            };
            return Err(failed(Some(response.error_code), message));
        }
        let version = self.require_version(ApiKey::SaslAuthenticate)?;
        match mechanism {
            SaslMechanism::Plain => {
                let message = PlainCredentials {
                    username: sasl.username.clone(),
                    password: sasl.password.clone(),
                }
                .to_message()
                .map_err(|error| failed(None, error.to_string()))?;
                let done = self.sasl_round(version, mechanism, message).await?;
                Ok(done.session_lifetime_ms)
            }
            SaslMechanism::Scram(scram) => {
                let mut client = ScramClient::new(scram, &sasl.username, &sasl.password);
                let first = client.client_first();
                let challenge = self.sasl_round(version, mechanism, first).await?;
                let proof = client
                    .receive_server_first(&challenge.auth_bytes)
                    .map_err(|error| failed(None, error.to_string()))?;
                let done = self.sasl_round(version, mechanism, proof).await?;
                client
                    .receive_server_final(&done.auth_bytes)
                    .map_err(|error| failed(None, error.to_string()))?;
                Ok(done.session_lifetime_ms)
            }
        }
    }

    /// One SaslAuthenticate request: the broker's reply, or its refusal
    /// with its message.
    async fn sasl_round(
        &mut self,
        version: i16,
        mechanism: SaslMechanism,
        token: Vec<u8>,
    ) -> Result<SaslAuthenticateResponse, ClientError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let response: SaslAuthenticateResponse = self
            .call_on_connection(ApiKey::SaslAuthenticate, version, &request)
            .await?;
        if response.error_code != 0 {
            let message = response
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| {
                    ResponseError::try_from_code(response.error_code)
                        .map_or(format!("error code {}", response.error_code), error_name)
                });
            return Err(ClientError::Authentication {
                addr: self.addr().to_owned(),
                mechanism: mechanism.name().to_owned(),
                code: Some(response.error_code),
                message,
            });
        }
        Ok(response)
    }
}

/// When to authenticate again for a session of `lifetime_ms` that started
/// at `now`: at nine tenths of it, which leaves a slow exchange time to
/// finish (Kafka's client picks at random between 85% and 95%).
fn reauthentication_time(now: Instant, lifetime_ms: i64) -> Option<Instant> {
    let lifetime = u64::try_from(lifetime_ms).ok().filter(|&ms| ms > 0)?;
    Some(now + Duration::from_millis(lifetime.saturating_mul(9) / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limited_session_is_renewed_before_it_ends() {
        let now = Instant::now();
        assert_eq!(reauthentication_time(now, 0), None);
        assert_eq!(reauthentication_time(now, -5), None);
        assert_eq!(
            reauthentication_time(now, 10_000),
            Some(now + Duration::from_millis(9_000))
        );
        assert_eq!(
            reauthentication_time(now, 1),
            Some(now),
            "a 1 ms session is renewed at once"
        );
    }
}
