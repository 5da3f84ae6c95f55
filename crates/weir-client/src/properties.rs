//! Java `.properties` files, as Kafka's tools read `--command-config`:
//! `key=value`, `key: value` or `key value` lines, `#` and `!` comments,
//! backslash escapes and line continuations, as `java.util.Properties`.

use std::collections::BTreeMap;

/// Why a properties file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropertiesError {
    /// A `\u` escape not followed by four hexadecimal digits (Java refuses
    /// the whole file too).
    #[error("line {line}: malformed \\uXXXX escape")]
    MalformedUnicodeEscape {
        /// The line (1-based) where the logical line holding it starts.
        line: usize,
    },
}

/// The properties in `text`; when a key is given twice the later value
/// wins, as in Java.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, PropertiesError> {
    let mut properties = BTreeMap::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, first)) = lines.next() {
        let start = first.trim_start_matches(is_blank);
        if start.is_empty() || start.starts_with('#') || start.starts_with('!') {
            continue;
        }
        // A line ending in an odd number of backslashes goes on on the next
        // one, whose leading blanks are dropped.
        let mut logical = start.to_owned();
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let line = index + 1;
        let (key, value) = split_key_value(&logical);
        properties.insert(unescape(key, line)?, unescape(value, line)?);
    }
    Ok(properties)
}

/// Java's white space in properties files: space, tab and form feed.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

fn ends_in_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// The raw (still escaped) key and value: the key ends at the first
/// unescaped `=`, `:` or blank; blanks around the separator, and one `=` or
/// `:` after blanks, are not part of the value.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            key_end = at;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start_matches(is_blank);
    if let Some(after) = rest.strip_prefix(['=', ':']) {
        rest = after.trim_start_matches(is_blank);
    }
    (key, rest)
}

/// Resolves `\t`, `\n`, `\r`, `\f`, `\uXXXX`; any other escaped character
/// stands for itself (`\\`, `\=`, `\:`, `\ `, `\#`).
fn unescape(raw: &str, line: usize) -> Result<String, PropertiesError> {
    if !raw.contains('\\') {
        return Ok(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or(PropertiesError::MalformedUnicodeEscape { line })?;
                // A lone surrogate half (Java strings hold them) has no
                // UTF-8 form.
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<(String, String)> {
        parse_properties(text).unwrap().into_iter().collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        pairs.sort();
        pairs
    }

    #[test]
    fn all_three_separators_and_trimming() {
        let text = "security.protocol=SSL\n\
                    \x20 ssl.ca.location : /etc/ca.pem  \n\
                    sasl.mechanism SCRAM-SHA-512\n\
                    empty=\n\
                    bare\n";
        assert_eq!(
            parse(text),
            pairs(&[
                ("security.protocol", "SSL"),
                // Trailing blanks belong to the value, as in Java.
                ("ssl.ca.location", "/etc/ca.pem  "),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("empty", ""),
                ("bare", ""),
            ])
        );
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let text = "# a comment\n  ! another\n\n\t\nkey=value # not a comment\n";
        assert_eq!(parse(text), pairs(&[("key", "value # not a comment")]));
    }

    #[test]
    fn the_value_keeps_later_separators() {
        let text = "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
                    required username=\"alice\" password=\"a=b:c\";\n";
        let parsed = parse_properties(text).unwrap();
        assert_eq!(
            parsed["sasl.jaas.config"],
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"alice\" password=\"a=b:c\";"
        );
    }

    #[test]
    fn backslash_continues_a_line() {
        let text = "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n\
                    \x20   required \\\n\
                    \x20   username=\"admin\" password=\"secret\";\n\
                    next=1\n";
        let parsed = parse_properties(text).unwrap();
        assert_eq!(
            parsed["sasl.jaas.config"],
            "org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"admin\" password=\"secret\";"
        );
        assert_eq!(parsed["next"], "1");
        // An even number of backslashes is an escaped backslash, not a
        // continuation.
        let parsed = parse_properties("path=C:\\\\dir\\\\\nother=2\n").unwrap();
        assert_eq!(parsed["path"], "C:\\dir\\");
        assert_eq!(parsed["other"], "2");
        // A continuation on the last line just ends.
        assert_eq!(parse("k=v\\"), pairs(&[("k", "v")]));
    }

    #[test]
    fn escapes_in_keys_and_values() {
        let text = "a\\=b=c\\:d\nsp\\ ace=\\u00e9t\\u00E9\\t!\n";
        assert_eq!(parse(text), pairs(&[("a=b", "c:d"), ("sp ace", "été\t!")]));
        assert_eq!(
            parse_properties("x=\\u12\n"),
            Err(PropertiesError::MalformedUnicodeEscape { line: 1 })
        );
        assert_eq!(
            parse_properties("ok=1\n\nx=\\uZZZZ\n"),
            Err(PropertiesError::MalformedUnicodeEscape { line: 3 })
        );
    }

    #[test]
    fn the_last_of_a_repeated_key_wins() {
        assert_eq!(parse("k=1\nk=2\n"), pairs(&[("k", "2")]));
    }

    #[test]
    fn windows_line_endings() {
        assert_eq!(parse("a=1\r\nb = 2\r\n"), pairs(&[("a", "1"), ("b", "2")]));
    }
}
