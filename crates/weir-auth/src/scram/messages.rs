//! The four SCRAM messages (RFC 5802 section 7), parsed strictly: anything
//! the grammar does not allow is `Malformed`, never a panic, whatever bytes
//! a peer sends before it has authenticated.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::ScramError;
use crate::saslname;

fn malformed(reason: impl Into<String>) -> ScramError {
    ScramError::Malformed(reason.into())
}

/// Reads a `saslname` back into the user or authorization name.
fn decode_saslname(saslname: &str) -> Result<String, ScramError> {
    saslname::decode(saslname).ok_or_else(|| malformed("invalid user name"))
}

/// A nonce is printable ASCII without a comma, and never empty.
fn check_nonce(nonce: &str) -> Result<(), ScramError> {
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|c| (0x21..=0x7e).contains(&c) && c != b',')
    {
        return Err(malformed("invalid nonce"));
    }
    Ok(())
}

/// Decodes a base64 attribute value (padded, standard alphabet).
fn decode_base64(value: &str, what: &str) -> Result<Vec<u8>, ScramError> {
    STANDARD
        .decode(value)
        .map_err(|_| malformed(format!("{what} is not valid base64")))
}

/// Parses the optional extensions after the mandatory attributes: each a
/// letter-named `key=value` with a non-empty value.
fn parse_extensions<'a>(
    attributes: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, ScramError> {
    attributes
        .map(|attribute| {
            let (key, value) = attribute
                .split_once('=')
                .ok_or_else(|| malformed("extension without a value"))?;
            if key.is_empty() || !key.bytes().all(|c| c.is_ascii_alphabetic()) {
                return Err(malformed("invalid extension name"));
            }
            if value.is_empty() || value.contains('\0') {
                return Err(malformed("invalid extension value"));
            }
            Ok((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// Takes the value of attribute `name` (`name=value`) or says which was missing.
fn attribute<'a>(attribute: Option<&'a str>, name: &str) -> Result<&'a str, ScramError> {
    attribute
        .and_then(|a| a.strip_prefix(name))
        .and_then(|a| a.strip_prefix('='))
        .ok_or_else(|| malformed(format!("expected attribute {name}")))
}

/// RFC 5802 reserves `m=` for mandatory extensions and asks that its
/// presence fail authentication, since none are defined.
fn reject_mandatory_extension(first: Option<&str>) -> Result<(), ScramError> {
    if first.is_some_and(|a| a.starts_with("m=")) {
        return Err(malformed("mandatory extensions (m=) are not supported"));
    }
    Ok(())
}

fn utf8(bytes: &[u8]) -> Result<&str, ScramError> {
    std::str::from_utf8(bytes).map_err(|_| malformed("message is not UTF-8"))
}

/// `gs2-header client-first-message-bare`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientFirst {
    /// The GS2 header as sent (`n,,`, `y,,` or `n,a=name,`): the final
    /// message must echo it as its channel binding.
    pub(crate) gs2_header: String,
    /// The authorization identity asked for, unescaped.
    pub(crate) authzid: Option<String>,
    /// The user name, unescaped.
    pub(crate) username: String,
    pub(crate) nonce: String,
    pub(crate) extensions: Vec<(String, String)>,
    /// `client-first-message-bare` as sent, for the AuthMessage.
    pub(crate) bare: String,
}

impl ClientFirst {
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, ScramError> {
        let message = utf8(bytes)?;
        let (flag, rest) = message
            .split_once(',')
            .ok_or_else(|| malformed("missing GS2 header"))?;
        match flag {
            // "n": no channel binding; "y": the client could bind but
            // believes the server cannot, which is true here.
            "n" | "y" => {}
            _ if flag.starts_with("p=") => return Err(ScramError::ChannelBindingNotSupported),
            _ => return Err(malformed("invalid GS2 channel binding flag")),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or_else(|| malformed("missing GS2 authorization identity"))?;
        let authzid = match authzid {
            "" => None,
            _ => Some(decode_saslname(attribute(Some(authzid), "a")?)?),
        };
        let gs2_header = message[..message.len() - bare.len()].to_owned();

        let mut attributes = bare.split(',');
        let first = attributes.next();
        reject_mandatory_extension(first)?;
        let username = decode_saslname(attribute(first, "n")?)?;
        let nonce = attribute(attributes.next(), "r")?;
        check_nonce(nonce)?;
        let extensions = parse_extensions(attributes)?;
        Ok(Self {
            gs2_header,
            authzid,
            username,
            nonce: nonce.to_owned(),
            extensions,
            bare: bare.to_owned(),
        })
    }
}

/// `server-first-message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerFirst {
    /// The client's nonce followed by the server's.
    pub(crate) nonce: String,
    pub(crate) salt: Vec<u8>,
    pub(crate) iterations: u32,
    /// The message as sent, for the AuthMessage.
    pub(crate) text: String,
}

impl ServerFirst {
    pub(crate) fn format(nonce: &str, salt: &[u8], iterations: u32) -> String {
        format!("r={nonce},s={},i={iterations}", STANDARD.encode(salt))
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, ScramError> {
        let text = utf8(bytes)?;
        let mut attributes = text.split(',');
        let first = attributes.next();
        reject_mandatory_extension(first)?;
        let nonce = attribute(first, "r")?;
        check_nonce(nonce)?;
        let salt = decode_base64(attribute(attributes.next(), "s")?, "salt")?;
        let iterations = attribute(attributes.next(), "i")?;
        if iterations.is_empty() || !iterations.bytes().all(|c| c.is_ascii_digit()) {
            return Err(malformed("invalid iteration count"));
        }
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| malformed("iteration count out of range"))?;
        if iterations == 0 {
            return Err(malformed("iteration count is zero"));
        }
        parse_extensions(attributes)?;
        Ok(Self {
            nonce: nonce.to_owned(),
            salt,
            iterations,
            text: text.to_owned(),
        })
    }
}

/// `client-final-message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientFinal {
    /// The decoded `c=` attribute: the GS2 header echoed.
    pub(crate) channel_binding: Vec<u8>,
    pub(crate) nonce: String,
    pub(crate) proof: Vec<u8>,
    /// `client-final-message-without-proof` as sent, for the AuthMessage.
    pub(crate) without_proof: String,
}

impl ClientFinal {
    pub(crate) fn without_proof(gs2_header: &str, nonce: &str) -> String {
        format!("c={},r={nonce}", STANDARD.encode(gs2_header))
    }

    pub(crate) fn format(without_proof: &str, proof: &[u8]) -> String {
        format!("{without_proof},p={}", STANDARD.encode(proof))
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, ScramError> {
        let text = utf8(bytes)?;
        // Nothing before the proof may hold a comma inside a value, so the
        // last ",p=" starts the proof.
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| malformed("missing proof"))?;
        let proof = decode_base64(proof, "proof")?;
        let mut attributes = without_proof.split(',');
        let channel_binding = decode_base64(attribute(attributes.next(), "c")?, "channel binding")?;
        let nonce = attribute(attributes.next(), "r")?;
        check_nonce(nonce)?;
        parse_extensions(attributes)?;
        Ok(Self {
            channel_binding,
            nonce: nonce.to_owned(),
            proof,
            without_proof: without_proof.to_owned(),
        })
    }
}

/// `server-final-message`: the server's signature, or the error it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerFinal {
    Verifier(Vec<u8>),
    Error(String),
}

impl ServerFinal {
    pub(crate) fn format_verifier(signature: &[u8]) -> String {
        format!("v={}", STANDARD.encode(signature))
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, ScramError> {
        let text = utf8(bytes)?;
        if let Some(error) = text.strip_prefix("e=") {
            let error = error.split(',').next().unwrap_or_default();
            if error.is_empty() {
                return Err(malformed("empty server error"));
            }
            return Ok(Self::Error(error.to_owned()));
        }
        let mut attributes = text.split(',');
        let signature = decode_base64(attribute(attributes.next(), "v")?, "server signature")?;
        parse_extensions(attributes)?;
        Ok(Self::Verifier(signature))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_first_parts() {
        let m = ClientFirst::parse(b"n,a=u=2Cv,n=u=2Cv,r=abc,tokenauth=true").unwrap();
        assert_eq!(m.gs2_header, "n,a=u=2Cv,");
        assert_eq!(m.authzid.as_deref(), Some("u,v"));
        assert_eq!(m.username, "u,v");
        assert_eq!(m.nonce, "abc");
        assert_eq!(m.extensions, [("tokenauth".to_owned(), "true".to_owned())]);
        assert_eq!(m.bare, "n=u=2Cv,r=abc,tokenauth=true");

        let m = ClientFirst::parse(b"y,,n=user,r=x").unwrap();
        assert_eq!(m.gs2_header, "y,,");
        assert_eq!(m.authzid, None);
    }

    #[test]
    fn client_first_rejects() {
        let cases: &[&[u8]] = &[
            b"",
            b"n",
            b"n,",
            b"x,,n=user,r=abc",
            b"n,b=user,n=user,r=abc",
            b"n,,n=user",
            b"n,,r=abc,n=user",
            b"n,,m=ext,n=user,r=abc",
            b"n,,n=,r=abc",
            b"n,,n=user,r=",
            b"n,,n=user,r=a b",
            b"n,,n=user,r=abc,",
            b"n,,n=user,r=abc,1=x",
            b"n,,n=user,r=abc,k=",
            b"n,,n=user,r=abc,k",
            b"n,,n=us\xffer,r=abc",
        ];
        for case in cases {
            assert!(
                matches!(ClientFirst::parse(case), Err(ScramError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
        assert_eq!(
            ClientFirst::parse(b"p=tls-unique,,n=user,r=abc"),
            Err(ScramError::ChannelBindingNotSupported)
        );
    }

    #[test]
    fn server_first_parts_and_rejects() {
        let m = ServerFirst::parse(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4096").unwrap();
        assert_eq!(m.nonce, "abcdef");
        assert_eq!(m.iterations, 4096);
        assert_eq!(m.salt, STANDARD.decode("QSXCR+Q6sek8bf92").unwrap());
        assert_eq!(ServerFirst::format(&m.nonce, &m.salt, 4096), m.text);
        let cases: &[&[u8]] = &[
            b"m=x,r=abc,s=QSXC,i=1",
            b"r=abc,s=QSX,i=1",
            b"r=abc,s=QSXC,i=0",
            b"r=abc,s=QSXC,i=-1",
            b"r=abc,s=QSXC,i=+1",
            b"r=abc,s=QSXC,i=99999999999",
            b"r=abc,s=QSXC",
            b"s=QSXC,r=abc,i=1",
        ];
        for case in cases {
            assert!(
                matches!(ServerFirst::parse(case), Err(ScramError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn client_final_parts_and_rejects() {
        let m = ClientFinal::parse(b"c=biws,r=abc,ext=1,p=AAEC").unwrap();
        assert_eq!(m.channel_binding, b"n,,");
        assert_eq!(m.nonce, "abc");
        assert_eq!(m.proof, [0, 1, 2]);
        assert_eq!(m.without_proof, "c=biws,r=abc,ext=1");
        let cases: &[&[u8]] = &[
            b"c=biws,r=abc",
            b"c=biws,r=abc,p=A",
            b"r=abc,c=biws,p=AAEC",
            b"c=bi,r=abc,p=AAEC",
            b"c=biws,r=abc,p=AAEC,x=1",
            b"c=biws,p=AAEC",
        ];
        for case in cases {
            assert!(
                matches!(ClientFinal::parse(case), Err(ScramError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn server_final_parts() {
        assert_eq!(
            ServerFinal::parse(b"v=AAEC").unwrap(),
            ServerFinal::Verifier(vec![0, 1, 2])
        );
        assert_eq!(
            ServerFinal::parse(b"e=invalid-proof").unwrap(),
            ServerFinal::Error("invalid-proof".to_owned())
        );
        for case in [&b"e="[..], b"v=A", b"x=1", b""] {
            assert!(matches!(
                ServerFinal::parse(case),
                Err(ScramError::Malformed(_))
            ));
        }
    }
}
