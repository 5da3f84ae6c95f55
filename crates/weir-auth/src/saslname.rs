//! RFC 5802's `saslname`: a user name inside a comma-separated GS2 header
//! or SCRAM message, with `,` and `=` escaped as `=2C` and `=3D`.

/// Escapes a name into a `saslname`.
pub(crate) fn encode(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// Reads a `saslname` back into the name, or `None` when it is empty, holds
/// NUL or a comma, or has an `=` not starting `=2C` or `=3D`.
pub(crate) fn decode(saslname: &str) -> Option<String> {
    if saslname.is_empty() {
        return None;
    }
    let mut name = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find(['=', '\0', ',']) {
        name.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => name.push(','),
            Some("=3D") => name.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    name.push_str(rest);
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_commas_and_equals() {
        // Kafka's ScramFormatterTest names, and more.
        for name in [
            "user1", "123", "1,2", "user=A", "user==B", "user,1", "user 1", ",", "=", ",=", "==",
            "=2C", "ü=,",
        ] {
            let encoded = encode(name);
            assert!(!encoded.contains(','));
            assert!(!encoded.replace("=2C", "").replace("=3D", "").contains('='));
            assert_eq!(decode(&encoded).as_deref(), Some(name));
        }
        assert_eq!(encode("a,b=c"), "a=2Cb=3Dc");
    }

    #[test]
    fn rejects_bad_escapes() {
        for bad in ["", "a=", "a=2", "a=2D", "=3d", "a\0b", "==", "a,b"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
