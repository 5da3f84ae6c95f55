//! Java's `.properties` format, as Kafka reads `server.properties`
//! (`java.util.Properties.load`): `key=value`, `key: value` or
//! `key value` per logical line; `#` and `!` comments; a backslash at the
//! end of a line continues it; `\t`, `\n`, `\r`, `\f`, `\uXXXX` and a
//! backslash before any other character as escapes.

use std::collections::BTreeMap;

/// The keys and values of a properties file, the last of a repeated key
/// winning, as Java's. Errors name the line.
pub(crate) fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut entries = BTreeMap::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, first)) = lines.next() {
        let number = index + 1;
        let mut logical = first.trim_start().to_owned();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_entry(&logical);
        let key = unescape(key).map_err(|e| format!("line {number}: {e}"))?;
        let value = unescape(value).map_err(|e| format!("line {number}: {e}"))?;
        entries.insert(key, value);
    }
    Ok(entries)
}

/// An odd number of backslashes ends the line: the last one escapes the
/// line break.
fn ends_in_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// The key ends at the first unescaped `=`, `:` or white space; the
/// separator may have white space around it.
fn split_entry(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' | ' ' | '\t' | '\u{c}' => {
                let key = &line[..at];
                let mut rest = line[at..].trim_start_matches([' ', '\t', '\u{c}']);
                if c.is_whitespace() || c == '\u{c}' {
                    if let Some(after) = rest.strip_prefix(['=', ':']) {
                        rest = after;
                    }
                } else {
                    rest = &rest[1..];
                }
                return (key, rest.trim_start_matches([' ', '\t', '\u{c}']));
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("malformed \\u escape \\u{hex}"))?;
                out.push(code);
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

    #[test]
    fn kafkas_own_server_properties_reads_as_java_reads_it() {
        let text = "\
# Licensed to the Apache Software Foundation (ASF) ...
############################# Server Basics #############################

# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller

# The node id associated with this instance's roles
node.id=1
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,\\
    SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs=/tmp/kraft-combined-logs
! another comment
log.retention.hours = 168
spaced   value with spaces  
colon: yes
escaped\\=key=a\\tb\\u0041
empty=
";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed["process.roles"], "broker,controller");
        assert_eq!(parsed["node.id"], "1");
        assert_eq!(parsed["listeners"], "PLAINTEXT://:9092,CONTROLLER://:9093");
        assert_eq!(
            parsed["listener.security.protocol.map"],
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
        );
        assert_eq!(parsed["log.retention.hours"], "168");
        assert_eq!(parsed["spaced"], "value with spaces  ");
        assert_eq!(parsed["colon"], "yes");
        assert_eq!(parsed["escaped=key"], "a\tbA");
        assert_eq!(parsed["empty"], "");
        assert_eq!(parsed.len(), 10);
    }

    #[test]
    fn a_broken_unicode_escape_names_its_line() {
        let error = parse("a=1\nb=\\u12\n").unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
    }
}
