//! A certificate subject written as Java's `X500Principal.getName()` writes
//! it (RFC 2253), since that string is what Kafka's principal mapping rules
//! and ACLs for TLS clients are written against.

/// The attribute types RFC 2253 names by keyword, by OID, as Java emits
/// them; Java writes every other type as its dotted OID.
const KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The keyword Java's RFC 2253 form uses for an attribute type OID
/// (`"2.5.4.3"` is `CN`), or `None` for a type it writes as the OID itself.
pub fn rfc2253_keyword(oid: &str) -> Option<&'static str> {
    KEYWORDS
        .iter()
        .find(|(known, _)| *known == oid)
        .map(|(_, keyword)| *keyword)
}

/// Writes a subject as Java's `X500Principal.getName()` does: the most
/// specific attribute first, `type=value` joined by commas.
///
/// `attributes` are `(type, value)` in the order the certificate encodes
/// them (country or domain first, common name last), one per RDN. The type
/// is the keyword (see [`rfc2253_keyword`]) for a string value, which is
/// escaped as Java does: `, = + < > # ; " \` get a backslash, NUL becomes
/// `\00`, and so do leading and trailing spaces. For any other attribute
/// Java writes the dotted OID and `#` followed by the hex of the value's
/// DER encoding; pass that pair (`("1.2.840.113549.1.9.1", "#1605...")`)
/// and it is written as given.
pub fn rfc2253_name(attributes: &[(&str, &str)]) -> String {
    let mut name = String::new();
    for (i, (attribute, value)) in attributes.iter().rev().enumerate() {
        if i > 0 {
            name.push(',');
        }
        name.push_str(attribute);
        name.push('=');
        if is_dotted_oid(attribute) && is_hex_value(value) {
            name.push_str(value);
        } else {
            escape_value(value, &mut name);
        }
    }
    name
}

fn is_dotted_oid(attribute: &str) -> bool {
    attribute.starts_with(|c: char| c.is_ascii_digit())
        && attribute.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn is_hex_value(value: &str) -> bool {
    value
        .strip_prefix('#')
        .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Escapes a value as Java's `AVA.toRFC2253String`.
fn escape_value(value: &str, out: &mut String) {
    let chars: Vec<char> = value.chars().collect();
    // Java escapes every space or return before the first other char and
    // after the last one.
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = chars.iter().take_while(|c| blank(c)).count();
    let trail = chars.len() - chars.iter().rev().take_while(|c| blank(c)).count();
    for (i, c) in chars.into_iter().enumerate() {
        match c {
            ',' | '=' | '+' | '<' | '>' | '#' | ';' | '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\0' => out.push_str("\\00"),
            _ if i < lead || i >= trail => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Subjects built as DER with Python's `cryptography`, read back by the
    /// JVM's `X500Principal(byte[]).getName()`; attributes here in the
    /// order they were encoded.
    #[test]
    fn same_as_java() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("C", "US"), ("O", "Weir"), ("CN", "client")],
                "CN=client,O=Weir,C=US",
            ),
            (
                &[
                    ("DC", "com"),
                    ("DC", "example"),
                    ("OU", "Eng, R&D"),
                    ("CN", "Tkac, Adam"),
                ],
                r"CN=Tkac\, Adam,OU=Eng\, R&D,DC=example,DC=com",
            ),
            (
                &[("CN", r#"a=b+c<d>e#f;g"h\i"#)],
                r#"CN=a\=b\+c\<d\>e\#f\;g\"h\\i"#,
            ),
            (&[("CN", "#lead")], r"CN=\#lead"),
            (&[("CN", "  two spaces  ")], r"CN=\ \ two spaces\ \ "),
            (&[("CN", "   ")], r"CN=\ \ \ "),
            (&[("CN", "nul\0here")], r"CN=nul\00here"),
            (&[("CN", "ünïcødé ✓")], "CN=ünïcødé ✓"),
            (&[("CN", "cr\r")], "CN=cr\\\r"),
            (
                &[
                    ("ST", "MD"),
                    ("L", "Fulton"),
                    ("STREET", "1 Main St"),
                    ("UID", "u1"),
                    ("CN", "x"),
                ],
                "CN=x,UID=u1,STREET=1 Main St,L=Fulton,ST=MD",
            ),
            (
                &[
                    ("O", "Weir"),
                    ("1.2.840.113549.1.9.1", "#16056140622e63"),
                    ("CN", "client"),
                ],
                "CN=client,1.2.840.113549.1.9.1=#16056140622e63,O=Weir",
            ),
            (
                &[("2.5.4.5", "#130431323334"), ("CN", "s")],
                "CN=s,2.5.4.5=#130431323334",
            ),
            (&[], ""),
        ];
        for (attributes, expected) in cases {
            assert_eq!(rfc2253_name(attributes), *expected);
        }
    }

    #[test]
    fn a_hash_value_is_escaped_unless_the_type_is_an_oid() {
        assert_eq!(rfc2253_name(&[("CN", "#1605")]), r"CN=\#1605");
        assert_eq!(rfc2253_name(&[("2.5.4.3", "#zz")]), r"2.5.4.3=\#zz");
        assert_eq!(rfc2253_name(&[("2.5.4.3", "#0a0b")]), "2.5.4.3=#0a0b");
    }

    #[test]
    fn keywords_by_oid() {
        assert_eq!(rfc2253_keyword("2.5.4.3"), Some("CN"));
        assert_eq!(rfc2253_keyword("2.5.4.8"), Some("ST"));
        assert_eq!(rfc2253_keyword("0.9.2342.19200300.100.1.25"), Some("DC"));
        // Java writes emailAddress and serialNumber by OID.
        assert_eq!(rfc2253_keyword("1.2.840.113549.1.9.1"), None);
        assert_eq!(rfc2253_keyword("2.5.4.5"), None);
    }
}
