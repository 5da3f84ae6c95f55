//! The OAUTHBEARER client's initial response (RFC 7628 section 3.1), as
//! Kafka's `OAuthBearerClientInitialResponse` reads and writes it:
//! `n,[a=authzid],` then `^A`-separated `key=value` pairs, one of them
//! `auth=Bearer <token>`, the others SASL extensions (KIP-342), then `^A^A`.

use std::collections::BTreeMap;

use super::OAuthError;
use crate::saslname;

const SEPARATOR: char = '\x01';

fn malformed(reason: impl Into<String>) -> OAuthError {
    OAuthError::Malformed(reason.into())
}

/// What an OAUTHBEARER client sends first: its token, the identity it asks
/// to act as, and its SASL extensions.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientInitialResponse {
    /// The bearer token (for Kafka, a JWT).
    pub token: String,
    /// The authorization identity asked for, if any; Kafka requires it to
    /// equal the token's principal.
    pub authzid: Option<String>,
    /// SASL extensions (KIP-342), by name; never `auth`.
    pub extensions: BTreeMap<String, String>,
}

impl std::fmt::Debug for ClientInitialResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a credential: never in logs.
        f.debug_struct("ClientInitialResponse")
            .field("token", &"<redacted>")
            .field("authzid", &self.authzid)
            .field("extensions", &self.extensions)
            .finish()
    }
}

/// RFC 7628's `key`: letters only.
fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic())
}

/// RFC 7628's `value`: printable ASCII, space, tab, CR and LF.
fn valid_value(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// RFC 6750's `b64token`: the characters of a bearer token, then any `=`.
fn valid_token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

/// The token in an `auth` value: a scheme that is `Bearer` in any case,
/// one or more spaces, the token.
fn bearer_token(auth: &str) -> Result<&str, OAuthError> {
    let (scheme, token) = auth
        .split_once(' ')
        .ok_or_else(|| malformed("invalid auth value"))?;
    let token = token.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed("auth scheme is not Bearer"));
    }
    if !valid_token(token) {
        return Err(malformed("invalid bearer token"));
    }
    Ok(token)
}

impl ClientInitialResponse {
    /// Reads a client's initial response.
    pub fn parse(message: &[u8]) -> Result<Self, OAuthError> {
        let message = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        let (flag, rest) = message
            .split_once(',')
            .ok_or_else(|| malformed("missing GS2 header"))?;
        match flag {
            "n" | "y" => {}
            _ if flag.starts_with("p=") => return Err(OAuthError::ChannelBindingNotSupported),
            _ => return Err(malformed("invalid GS2 channel binding flag")),
        }
        let (authzid, body) = rest
            .split_once(',')
            .ok_or_else(|| malformed("missing GS2 authorization identity"))?;
        let authzid = match authzid {
            "" => None,
            _ => Some(
                authzid
                    .strip_prefix("a=")
                    .and_then(saslname::decode)
                    .ok_or_else(|| malformed("invalid authorization identity"))?,
            ),
        };
        let pairs = body
            .strip_prefix(SEPARATOR)
            .and_then(|b| b.strip_suffix(SEPARATOR))
            .ok_or_else(|| malformed("key-value pairs not framed by ^A"))?;
        let mut token = None;
        let mut extensions = BTreeMap::new();
        if !pairs.is_empty() {
            let pairs = pairs
                .strip_suffix(SEPARATOR)
                .ok_or_else(|| malformed("key-value pair not ended by ^A"))?;
            for pair in pairs.split(SEPARATOR) {
                let (key, value) = pair
                    .split_once('=')
                    .ok_or_else(|| malformed("key-value pair without ="))?;
                if !valid_key(key) || !valid_value(value) {
                    return Err(malformed("invalid key-value pair"));
                }
                if key == "auth" {
                    token = Some(bearer_token(value)?.to_owned());
                } else {
                    extensions.insert(key.to_owned(), value.to_owned());
                }
            }
        }
        let token = token.ok_or_else(|| malformed("auth not specified"))?;
        Ok(Self {
            token,
            authzid,
            extensions,
        })
    }

    /// The message a client sends, as Kafka's client writes it.
    ///
    /// Fails when the token, an extension's name or value, or the
    /// authorization id cannot be written in RFC 7628's grammar, or an
    /// extension is named `auth`.
    pub fn to_bytes(&self) -> Result<Vec<u8>, OAuthError> {
        if !valid_token(&self.token) {
            return Err(malformed("invalid bearer token"));
        }
        let mut message = String::from("n,");
        if let Some(authzid) = &self.authzid {
            if authzid.is_empty() || authzid.contains('\0') {
                return Err(malformed("invalid authorization identity"));
            }
            message.push_str("a=");
            message.push_str(&saslname::encode(authzid));
        }
        message.push(',');
        message.push(SEPARATOR);
        message.push_str("auth=Bearer ");
        message.push_str(&self.token);
        for (key, value) in &self.extensions {
            if key == "auth" || !valid_key(key) || !valid_value(value) {
                return Err(malformed(format!("invalid extension {key}")));
            }
            message.push(SEPARATOR);
            message.push_str(key);
            message.push('=');
            message.push_str(value);
        }
        message.push(SEPARATOR);
        message.push(SEPARATOR);
        Ok(message.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln-_";

    fn response(authzid: Option<&str>, extensions: &[(&str, &str)]) -> ClientInitialResponse {
        ClientInitialResponse {
            token: TOKEN.into(),
            authzid: authzid.map(Into::into),
            extensions: extensions
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    #[test]
    fn parses_what_kafka_sends() {
        // Kafka's OAuthBearerClientInitialResponseTest messages.
        let cases: &[(&str, ClientInitialResponse)] = &[
            (
                "n,,\x01auth=Bearer 123.345.567\x01nineteen=42\x01\x01",
                ClientInitialResponse {
                    token: "123.345.567".into(),
                    authzid: None,
                    extensions: [("nineteen".into(), "42".into())].into(),
                },
            ),
            (
                "n,,\x01auth=Bearer 123.345.567\x01\x01",
                ClientInitialResponse {
                    token: "123.345.567".into(),
                    authzid: None,
                    extensions: BTreeMap::new(),
                },
            ),
            (
                "n,a=myuser,\x01auth=Bearer 123.345.567\x01\x01",
                ClientInitialResponse {
                    token: "123.345.567".into(),
                    authzid: Some("myuser".into()),
                    extensions: BTreeMap::new(),
                },
            ),
            (
                "n,,\x01auth=bEaReR   abc==\x01a=1\x01b=two words\x01\x01",
                ClientInitialResponse {
                    token: "abc==".into(),
                    authzid: None,
                    extensions: [("a".into(), "1".into()), ("b".into(), "two words".into())].into(),
                },
            ),
            (
                "n,a=us=2Cer,\x01k=v\x01auth=Bearer t\x01\x01",
                ClientInitialResponse {
                    token: "t".into(),
                    authzid: Some("us,er".into()),
                    extensions: [("k".into(), "v".into())].into(),
                },
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(
                &ClientInitialResponse::parse(message.as_bytes()).unwrap(),
                expected,
                "{message:?}"
            );
        }
    }

    #[test]
    fn refuses_malformed_messages() {
        for message in [
            "",
            "n,,",
            "n,,\x01\x01",
            "n,,\x01auth=Bearer t\x01",
            "n,,auth=Bearer t\x01\x01",
            "n,,\x01auth=Bearer t",
            "n,,\x01auth=Basic dXNlcjpwYXNz\x01\x01",
            "n,,\x01auth=Bearer\x01\x01",
            "n,,\x01auth=Bearer \x01\x01",
            "n,,\x01auth=Bearer a b\x01\x01",
            "n,,\x01auth=Bearer a=b\x01\x01",
            "n,,\x01auth=Bearer t\x01k1=v\x01\x01",
            "n,,\x01auth=Bearer t\x01k=\x01\x01",
            "n,,\x01auth=Bearer t\x01=v\x01\x01",
            "n,,\x01auth=Bearer t\x01kv\x01\x01",
            "n,,\x01auth=Bearer t\x01k=\u{7f}\x01\x01",
            "n,,\x01auth=Bearer t\x01\x01\x01",
            "n,b=user,\x01auth=Bearer t\x01\x01",
            "n,a=,\x01auth=Bearer t\x01\x01",
            "n,a=u=,\x01auth=Bearer t\x01\x01",
            "x,,\x01auth=Bearer t\x01\x01",
            "n\x01auth=Bearer t\x01\x01",
        ] {
            assert!(
                matches!(
                    ClientInitialResponse::parse(message.as_bytes()),
                    Err(OAuthError::Malformed(_))
                ),
                "{message:?}"
            );
        }
        assert_eq!(
            ClientInitialResponse::parse(b"p=tls-unique,,\x01auth=Bearer t\x01\x01"),
            Err(OAuthError::ChannelBindingNotSupported)
        );
    }

    #[test]
    fn writes_as_kafka_does() {
        assert_eq!(
            response(None, &[]).to_bytes().unwrap(),
            format!("n,,\x01auth=Bearer {TOKEN}\x01\x01").as_bytes()
        );
        assert_eq!(
            response(Some("a,b"), &[("x", "1"), ("y", "2 3")])
                .to_bytes()
                .unwrap(),
            format!("n,a=a=2Cb,\x01auth=Bearer {TOKEN}\x01x=1\x01y=2 3\x01\x01").as_bytes()
        );
        for bad in [
            response(None, &[("auth", "x")]),
            response(None, &[("k1", "x")]),
            response(None, &[("k", "")]),
            response(Some(""), &[]),
            ClientInitialResponse {
                token: "a b".into(),
                ..response(None, &[])
            },
        ] {
            assert!(bad.to_bytes().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn debug_hides_the_token() {
        assert!(!format!("{:?}", response(None, &[])).contains(TOKEN));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = ClientInitialResponse::parse(&bytes);
        }

        #[test]
        fn structured_text_never_panics(text in "[ny],(a=[a-z=23C]{0,4})?,[\x01]{0,2}(auth=[Bb]earer [a-z.=]{0,6}|[a-z]{0,3}=[ -~]{0,4})[\x01]{0,3}") {
            let _ = ClientInitialResponse::parse(text.as_bytes());
        }

        #[test]
        fn what_is_written_reads_back(
            token in "[-._~+/a-zA-Z0-9]{1,30}={0,2}",
            authzid in proptest::option::of("[ -~]{1,10}"),
            extensions in proptest::collection::btree_map("[a-zA-Z]{1,6}", "[!-~ \t][!-~ \t\r\n]{0,8}", 0..4),
        ) {
            let mut extensions = extensions;
            extensions.remove("auth");
            let response = ClientInitialResponse { token, authzid, extensions };
            let bytes = response.to_bytes().unwrap();
            prop_assert_eq!(ClientInitialResponse::parse(&bytes).unwrap(), response);
        }
    }
}
