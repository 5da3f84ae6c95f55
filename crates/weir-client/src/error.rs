//! What can go wrong talking to a broker.

use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::security::SecurityConfigError;

/// Every failure of a [`Client`](crate::Client) call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The network failed: connecting, writing or reading. `context`
    /// names the operation and the address, e.g. `cannot connect to
    /// 127.0.0.1:9092`.
    #[error("{context}: {}", io_text(error))]
    Io {
        context: String,
        error: std::io::Error,
    },
    /// No answer within the deadline. `context` names the operation and
    /// the address.
    #[error("{context}: timed out after {}", duration_text(*after))]
    Timeout { context: String, after: Duration },
    /// The broker answered with a Kafka error code.
    #[error("{name} (error code {code}){}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        code: i16,
        /// Kafka's name for the code, e.g. `UNKNOWN_TOPIC_OR_PARTITION`.
        name: String,
        /// The broker's explanation, when it sent one.
        message: Option<String>,
    },
    /// The broker does not implement any version of an API this client
    /// can speak.
    #[error("the broker at {addr} does not support {api}")]
    UnsupportedApi { addr: String, api: String },
    /// Bytes that do not follow the protocol: an undecodable response, a
    /// correlation id that does not match, a corrupt record batch.
    #[error("protocol error from {addr}: {reason}")]
    Protocol { addr: String, reason: String },
    /// A request this client cannot build from the arguments given.
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    /// TLS failed: the handshake, or an alert from the broker. `reason` is
    /// rustls's; `hint` says what to check.
    #[error("TLS with {addr} failed: {reason}{}", hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    Tls {
        addr: String,
        reason: String,
        hint: Option<&'static str>,
    },
    /// SASL authentication failed. `message` is the broker's when it sent
    /// one (with `code`, e.g. SASL_AUTHENTICATION_FAILED), or why this
    /// client gave up on the exchange.
    #[error("SASL authentication with {addr} failed: {message}")]
    Authentication {
        addr: String,
        /// The SASL mechanism, e.g. `SCRAM-SHA-512`.
        mechanism: String,
        /// The Kafka error code the broker answered with, if it did.
        code: Option<i16>,
        message: String,
    },
    /// Security settings that cannot be used: a PEM file that is missing
    /// or holds no certificate, say.
    #[error(transparent)]
    Security(#[from] SecurityConfigError),
}

impl ClientError {
    /// The error for a non-zero Kafka error code; `None` for 0.
    pub fn from_code(code: i16, message: Option<String>) -> Option<Self> {
        let error = ResponseError::try_from_code(code)?;
        Some(Self::Kafka {
            code,
            name: error_name(error),
            message: message.filter(|m| !m.is_empty()),
        })
    }

    /// The Kafka error this is, if the broker sent one.
    pub fn kafka_error(&self) -> Option<ResponseError> {
        match self {
            Self::Kafka { code, .. }
            | Self::Authentication {
                code: Some(code), ..
            } => ResponseError::try_from_code(*code),
            _ => None,
        }
    }

    /// True if the broker answered with this Kafka error.
    pub fn is(&self, error: ResponseError) -> bool {
        self.kafka_error() == Some(error)
    }
}

/// `Ok(())` for code 0, the matching [`ClientError::Kafka`] otherwise.
pub(crate) fn check(code: i16, message: Option<String>) -> Result<(), ClientError> {
    match ClientError::from_code(code, message) {
        None => Ok(()),
        Some(error) => Err(error),
    }
}

/// Kafka's constant name for an error, as the Java client spells it:
/// `UnknownTopicOrPartition` becomes `UNKNOWN_TOPIC_OR_PARTITION`.
pub(crate) fn error_name(error: ResponseError) -> String {
    if let ResponseError::Unknown(code) = error {
        return format!("UNKNOWN_ERROR_CODE_{code}");
    }
    let camel = error.to_string();
    let mut name = String::with_capacity(camel.len() + 8);
    let mut previous_lower = false;
    for c in camel.chars() {
        if c.is_ascii_uppercase() && previous_lower {
            name.push('_');
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// An I/O error's text without the `(os error N)` suffix.
fn io_text(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_owned(),
        _ => text,
    }
}

fn duration_text(after: Duration) -> String {
    if after.subsec_millis() == 0 {
        format!("{}s", after.as_secs())
    } else {
        format!("{}ms", after.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_follow_the_java_constants() {
        let cases = [
            (3, "UNKNOWN_TOPIC_OR_PARTITION"),
            (1, "OFFSET_OUT_OF_RANGE"),
            (36, "TOPIC_ALREADY_EXISTS"),
            (17, "INVALID_TOPIC_EXCEPTION"),
            (56, "KAFKA_STORAGE_ERROR"),
            (-1, "UNKNOWN_SERVER_ERROR"),
            (30000, "UNKNOWN_ERROR_CODE_30000"),
        ];
        for (code, expected) in cases {
            let error = ClientError::from_code(code, None).unwrap();
            match error {
                ClientError::Kafka { code: c, name, .. } => {
                    assert_eq!(c, code);
                    assert_eq!(name, expected);
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(ClientError::from_code(0, None).is_none());
    }

    #[test]
    fn messages_are_one_line_and_name_the_cause() {
        let refused = ClientError::Io {
            context: "cannot connect to 127.0.0.1:9".into(),
            error: std::io::Error::from_raw_os_error(111),
        };
        assert_eq!(
            refused.to_string(),
            "cannot connect to 127.0.0.1:9: Connection refused"
        );
        let kafka = ClientError::from_code(3, Some("Topic 'x' does not exist.".into())).unwrap();
        assert_eq!(
            kafka.to_string(),
            "UNKNOWN_TOPIC_OR_PARTITION (error code 3): Topic 'x' does not exist."
        );
        assert!(kafka.is(ResponseError::UnknownTopicOrPartition));
        let timeout = ClientError::Timeout {
            context: "Metadata request to 127.0.0.1:9".into(),
            after: Duration::from_millis(250),
        };
        assert_eq!(
            timeout.to_string(),
            "Metadata request to 127.0.0.1:9: timed out after 250ms"
        );
    }
}
