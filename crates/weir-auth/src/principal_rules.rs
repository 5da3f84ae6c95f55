//! Kafka's `ssl.principal.mapping.rules` (KIP-371), as its
//! `SslPrincipalMapper`: a TLS client's certificate subject, written as
//! RFC 2253 (see [`rfc2253_name`](crate::rfc2253_name)), becomes the name
//! ACLs are written against.
//!
//! Rules are separated by commas, evaluated in order, and the first that
//! matches gives the name:
//!
//! - `RULE:pattern/replacement/` with an optional `L` or `U` after the last
//!   slash to lower- or upper-case the result. The rule matches when the
//!   pattern matches the whole name; every match of the pattern is then
//!   replaced, as Java's `String.replaceAll`. A `/` or `\` inside the
//!   pattern or replacement is escaped with `\`, and commas need no escape.
//! - `DEFAULT`: the name unchanged.
//!
//! Patterns are compiled by the `regex` crate, which speaks most of Java's
//! syntax but has no look-around or back-references (such a rule is refused
//! when parsed), and whose `\w`, `\d`, `\s` and case-insensitivity cover
//! Unicode where Java's cover ASCII. Replacements follow Java's
//! `Matcher.replaceAll`: `$n` and `${name}` insert a group, `\x` is a
//! literal `x`, and, as Kafka adds, `$n` naming a group the pattern lacks is
//! literal text.

use std::collections::HashMap;
use std::fmt;

use regex::Regex;

/// Why rules were refused, or a name could not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// A rule is not `DEFAULT` nor a well-formed `RULE:`.
    #[error("invalid rule `{rule}`: {reason}")]
    InvalidRule {
        /// The rule's text.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No rule matched the name, as when the rules lack `DEFAULT`.
    #[error("no rule applies to `{0}`")]
    NoMatchingRule(String),
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Clone, Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Clone, Debug)]
enum Rule {
    Default,
    Replace(Box<Replace>),
}

#[derive(Clone, Debug)]
struct Replace {
    /// The pattern and replacement as written, for display.
    pattern: String,
    replacement: String,
    /// The pattern anchored at both ends: does it match the whole name?
    whole: Regex,
    /// The pattern as written: where to replace.
    find: Regex,
    template: Vec<Part>,
    case: Case,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A piece of a parsed replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Group(usize),
}

impl PrincipalMapper {
    /// Kafka's default value of `ssl.principal.mapping.rules`.
    pub const DEFAULT_RULES: &'static str = "DEFAULT";

    /// Parses the value of `ssl.principal.mapping.rules`. Empty rules
    /// (nothing between two commas) are skipped, as Kafka does; no rules at
    /// all maps no name.
    pub fn parse(rules: &str) -> Result<Self, RuleError> {
        let mut parsed = Vec::new();
        // Java's String.trim: every char up to and including space.
        let mut rest = rules.trim_matches(|c: char| c <= ' ');
        loop {
            rest = rest.trim_start_matches(is_java_space);
            if rest.is_empty() {
                break;
            }
            if let Some(next) = default_rule(rest) {
                parsed.push(Rule::Default);
                rest = next;
                continue;
            }
            if let Some((pattern, replacement, after)) =
                rest.strip_prefix("RULE:").and_then(scan_rule_body)
            {
                let (flags, next) = split_at_comma(after);
                let rule_text = &rest[..rest.len() - after.len() + flags.len()];
                let case = match flags {
                    "" => Case::Keep,
                    "L" => Case::Lower,
                    "U" => Case::Upper,
                    _ => return Err(invalid(rule_text, "expected only L or U after the last /")),
                };
                parsed.push(Rule::Replace(Box::new(Replace::new(
                    rule_text,
                    pattern,
                    replacement,
                    case,
                )?)));
                rest = next;
                continue;
            }
            let (chunk, next) = split_at_comma(rest);
            if !chunk.is_empty() {
                return Err(invalid(
                    chunk,
                    "expected DEFAULT or RULE:pattern/replacement/[LU]",
                ));
            }
            rest = next;
        }
        Ok(Self { rules: parsed })
    }

    /// The principal name for a certificate subject: what the first rule
    /// that matches gives.
    pub fn map(&self, distinguished_name: &str) -> Result<String, RuleError> {
        self.rules
            .iter()
            .find_map(|rule| rule.apply(distinguished_name))
            .ok_or_else(|| RuleError::NoMatchingRule(distinguished_name.to_owned()))
    }
}

impl Default for PrincipalMapper {
    /// The mapper of Kafka's default rules: every name maps to itself.
    fn default() -> Self {
        Self {
            rules: vec![Rule::Default],
        }
    }
}

impl fmt::Display for PrincipalMapper {
    /// The rules in the form they are parsed from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rule) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match rule {
                Rule::Default => f.write_str("DEFAULT")?,
                Rule::Replace(r) => {
                    let flag = match r.case {
                        Case::Keep => "",
                        Case::Lower => "L",
                        Case::Upper => "U",
                    };
                    write!(f, "RULE:{}/{}/{flag}", r.pattern, r.replacement)?;
                }
            }
        }
        Ok(())
    }
}

fn invalid(rule: &str, reason: impl Into<String>) -> RuleError {
    RuleError::InvalidRule {
        rule: rule.to_owned(),
        reason: reason.into(),
    }
}

/// Java's `\s`: space, tab, newline, vertical tab, form feed, return.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
}

/// Java's `.`: any char but a line terminator.
fn is_java_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// The text up to the next comma (spaces before it dropped) and the text
/// after that comma; or all of it when there is no comma.
fn split_at_comma(text: &str) -> (&str, &str) {
    let (chunk, next) = text.split_once(',').unwrap_or((text, ""));
    (chunk.trim_end_matches(is_java_space), next)
}

/// When `text` starts with a `DEFAULT` rule, the text after it and its
/// separator.
fn default_rule(text: &str) -> Option<&str> {
    let after = text
        .strip_prefix("DEFAULT")?
        .trim_start_matches(is_java_space);
    match after.strip_prefix(',') {
        Some(next) => Some(next),
        None if after.is_empty() => Some(after),
        None => None,
    }
}

/// Splits `pattern/replacement/...` at its two unescaped slashes: a
/// backslash takes the next char with it, so `\/` and `\\` stay inside.
fn scan_rule_body(body: &str) -> Option<(&str, &str, &str)> {
    let (pattern, rest) = scan_to_slash(body)?;
    let (replacement, rest) = scan_to_slash(rest)?;
    Some((pattern, replacement, rest))
}

fn scan_to_slash(text: &str) -> Option<(&str, &str)> {
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '/' => return Some((&text[..at], &text[at + 1..])),
            '\\' => match chars.next() {
                Some((_, escaped)) if !is_java_line_terminator(escaped) => {}
                _ => return None,
            },
            _ => {}
        }
    }
    None
}

impl Replace {
    fn new(rule: &str, pattern: &str, replacement: &str, case: Case) -> Result<Self, RuleError> {
        let ascii = ascii_shorthands(pattern);
        let find = Regex::new(&ascii).map_err(|e| invalid(rule, e.to_string()))?;
        let whole =
            Regex::new(&format!(r"\A(?:{ascii})\z")).map_err(|e| invalid(rule, e.to_string()))?;
        let names: HashMap<&str, usize> = find
            .capture_names()
            .enumerate()
            .filter_map(|(i, name)| Some((name?, i)))
            .collect();
        let template = parse_replacement(replacement, find.captures_len() - 1, &names)
            .map_err(|reason| invalid(rule, reason))?;
        Ok(Self {
            pattern: pattern.to_owned(),
            replacement: replacement.to_owned(),
            whole,
            find,
            template,
            case,
        })
    }
}

impl Rule {
    fn apply(&self, name: &str) -> Option<String> {
        let rule = match self {
            Rule::Default => return Some(name.to_owned()),
            Rule::Replace(rule) => rule,
        };
        if !rule.whole.is_match(name) {
            return None;
        }
        // Java's replaceAll: after an empty match the search moves on one
        // char, and an empty match right after a non-empty one counts.
        let mut out = String::with_capacity(name.len());
        let mut copied_to = 0;
        let mut search_from = 0;
        while search_from <= name.len() {
            let Some(captures) = rule.find.captures_at(name, search_from) else {
                break;
            };
            let found = captures.get(0).expect("group 0 is the match");
            out.push_str(&name[copied_to..found.start()]);
            for part in &rule.template {
                match part {
                    Part::Literal(text) => out.push_str(text),
                    Part::Group(i) => {
                        out.push_str(captures.get(*i).map_or("", |g| g.as_str()));
                    }
                }
            }
            copied_to = found.end();
            search_from = match name[found.end()..].chars().next() {
                _ if !found.is_empty() => found.end(),
                Some(c) => found.end() + c.len_utf8(),
                None => name.len() + 1,
            };
        }
        out.push_str(&name[copied_to..]);
        Some(match rule.case {
            Case::Keep => out,
            Case::Lower => out.to_lowercase(),
            Case::Upper => out.to_uppercase(),
        })
    }
}

/// Rewrites Java's `\w \W \d \D \s \S \b \B` as the ASCII classes they
/// are in Java, where the `regex` crate's cover Unicode: `\w` must not match
/// `ü` in a name Kafka would not have matched either.
fn ascii_shorthands(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut class_depth = 0usize;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(escaped) = chars.next() else {
                    out.push(c);
                    break;
                };
                let class = match escaped {
                    'w' => Some("[:word:]"),
                    'W' => Some("[:^word:]"),
                    'd' => Some("[:digit:]"),
                    'D' => Some("[:^digit:]"),
                    's' => Some("[:space:]"),
                    'S' => Some("[:^space:]"),
                    _ => None,
                };
                match (class, escaped) {
                    (Some(class), _) if class_depth > 0 => out.push_str(class),
                    (Some(class), _) => {
                        out.push('[');
                        out.push_str(class);
                        out.push(']');
                    }
                    (None, 'b' | 'B') if class_depth == 0 => {
                        out.push_str("(?-u:\\");
                        out.push(escaped);
                        out.push(')');
                    }
                    (None, _) => {
                        out.push(c);
                        out.push(escaped);
                    }
                }
            }
            '[' => {
                class_depth += 1;
                out.push(c);
                // A ']' first in a class (after an optional '^') is literal.
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().expect("peeked"));
                }
                if chars.peek() == Some(&']') {
                    out.push(chars.next().expect("peeked"));
                }
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Parses a replacement as Java's `Matcher.appendReplacement` reads it,
/// after Kafka's rewrite that makes `$n` literal when the pattern has
/// groups but fewer than `n` (judged by its first digit, as Java reads
/// `$12` as group 1 and a `2` when there is no group 12).
fn parse_replacement(
    text: &str,
    groups: usize,
    names: &HashMap<&str, usize>,
) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => literal.push(chars.next().ok_or("replacement ends with a lone \\")?),
            '$' => {
                let group = match chars.peek().copied() {
                    None => return Err("replacement ends with a lone $".into()),
                    Some('{') => {
                        chars.next();
                        let mut name = String::new();
                        loop {
                            match chars.next() {
                                Some('}') => break,
                                Some(c) if c.is_ascii_alphanumeric() => name.push(c),
                                _ => return Err("unterminated ${name} in replacement".into()),
                            }
                        }
                        *names
                            .get(name.as_str())
                            .ok_or_else(|| format!("no group named {name}"))?
                    }
                    Some(d @ '0'..='9') => {
                        let first = d as usize - '0' as usize;
                        if groups > 0 && first > groups {
                            // Kafka's rewrite: literal text.
                            literal.push('$');
                            continue;
                        }
                        chars.next();
                        let mut group = first;
                        while let Some(next) = chars.peek().and_then(|c| c.to_digit(10)) {
                            match group
                                .checked_mul(10)
                                .and_then(|g| g.checked_add(next as usize))
                            {
                                Some(longer) if longer <= groups => {
                                    group = longer;
                                    chars.next();
                                }
                                _ => break,
                            }
                        }
                        if group > groups {
                            return Err(format!(
                                "replacement refers to group {group}, which the pattern lacks"
                            ));
                        }
                        group
                    }
                    Some(_) => return Err("$ in replacement not followed by a group".into()),
                };
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                parts.push(Part::Group(group));
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Each rule as Kafka's `SslPrincipalMapper.toString` shows it: the
    /// pattern, then `/replacement`, then `/L` or `/U`.
    fn kafka_view(mapper: &PrincipalMapper) -> Vec<String> {
        mapper
            .rules
            .iter()
            .map(|rule| match rule {
                Rule::Default => "DEFAULT".to_owned(),
                Rule::Replace(r) => {
                    let flag = match r.case {
                        Case::Keep => "",
                        Case::Lower => "/L",
                        Case::Upper => "/U",
                    };
                    format!("RULE:{}/{}{flag}", r.pattern, r.replacement)
                }
            })
            .collect()
    }

    #[test]
    fn kafka_valid_rules() {
        for rules in [
            "DEFAULT",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
            "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
        ] {
            assert!(PrincipalMapper::parse(rules).is_ok(), "{rules}");
        }
    }

    #[test]
    fn kafka_invalid_rules() {
        for rules in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        ] {
            assert!(
                matches!(
                    PrincipalMapper::parse(rules),
                    Err(RuleError::InvalidRule { .. })
                ),
                "{rules}"
            );
        }
    }

    #[test]
    fn kafka_mapping() {
        let rules = [
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
            "DEFAULT",
        ]
        .join(", ");
        let mapper = PrincipalMapper::parse(&rules).unwrap();
        for (name, principal) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
            ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(mapper.map(name).unwrap(), principal, "{name}");
        }
    }

    #[test]
    fn kafka_rules_splitting() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("DEFAULT", &["DEFAULT"]),
            ("RULE://", &["RULE:/"]),
            ("RULE:/.*/", &["RULE:/.*"]),
            ("RULE:/.*/L", &["RULE:/.*/L"]),
            ("RULE://,DEFAULT", &["RULE:/", "DEFAULT"]),
            ("  RULE:// ,  DEFAULT  ", &["RULE:/", "DEFAULT"]),
            (
                "  RULE:   /     / ,  DEFAULT  ",
                &["RULE:   /     ", "DEFAULT"],
            ),
            (
                "  RULE:  /     /U   ,DEFAULT  ",
                &["RULE:  /     /U", "DEFAULT"],
            ),
            (
                "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
                &["RULE:([A-Z]*)/$1/U", "RULE:([a-z]+)/$1", "DEFAULT"],
            ),
            // Empty rules are skipped.
            (",   , , ,      , , ,   ", &[]),
            (",,RULE://,,,DEFAULT,,", &["RULE:/", "DEFAULT"]),
            (
                ",  , RULE: /   /    ,,,   DEFAULT, ,   ",
                &["RULE: /   ", "DEFAULT"],
            ),
            (
                "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,",
                &["RULE:   /  /U", "DEFAULT"],
            ),
            // Escapes keep a slash or backslash inside a part.
            (r"RULE:\/\\\(\)\n\t/\/\//", &[r"RULE:\/\\\(\)\n\t/\/\/"]),
            (
                r"RULE:\**\/+/*/L,RULE:\/*\**/**/",
                &[r"RULE:\**\/+/*/L", r"RULE:\/*\**/**"],
            ),
            // Commas and the keywords themselves inside a rule.
            (
                r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
                &[
                    r"RULE:,RULE:,/,RULE:,\//U",
                    "RULE:,/RULE:,",
                    "RULE:,RULE:,/L,RULE:,/L",
                    "RULE:, DEFAULT, /DEFAULT",
                    "DEFAULT",
                ],
            ),
        ];
        for (rules, expected) in cases {
            let mapper = PrincipalMapper::parse(rules).unwrap();
            assert_eq!(kafka_view(&mapper), *expected, "{rules:?}");
        }
    }

    #[test]
    fn kafka_comma_with_whitespace() {
        let mapper = PrincipalMapper::parse(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT").unwrap();
        assert_eq!(
            mapper
                .map(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz")
                .unwrap(),
            r"Tkac\, Adam"
        );
    }

    /// What Kafka 4.4's `SslPrincipalMapper` answers, run on the JVM: the
    /// mapped name, or `None` when no rule matches.
    #[test]
    fn same_names_as_kafka() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            // A group the pattern lacks is literal text.
            (r"RULE:^CN=(.*?),.*$/$1@$4/", "CN=a,O=b", Some("a@$4")),
            // Java takes the longest group number that exists.
            (r"RULE:^CN=(.*?),.*$/$12/", "CN=a,O=b", Some("a2")),
            (r"RULE:^C(N)=(.*?)$/$10/", "CN=a", Some("N0")),
            (r"RULE:^C(N)=(.*?)$/$21/", "CN=a", Some("a1")),
            (r"RULE:^CN=(.*?),.*$/$0!/", "CN=a,O=b", Some("CN=a,O=b!")),
            (
                r"RULE:^CN=(?<name>[^,]*),.*$/${name}/",
                "CN=a,O=b",
                Some("a"),
            ),
            (r"RULE:^CN=(.*?),.*$/\$1/", "CN=a,O=b", Some("$1")),
            (r"RULE:^CN=(.*?)$/\\$1\//", "CN=a", Some(r"\a/")),
            (r"RULE:(a)|(b)/[$1$2]/", "b", Some("[b]")),
            // Every match is replaced, empty ones too, as replaceAll does.
            (r"RULE:(.*)/x/", "abc", Some("xx")),
            (r"RULE:(.*?)/x/", "CN", Some("xCxNx")),
            // The pattern must match the whole name.
            (r"RULE:a*/x/", "baaac", None),
            (r"RULE:b/X/", "abcb", None),
            (r"RULE:^CN=([^,]*).*$/$1/", "OU=x", None),
            (r"RULE:^CN=([^,]*).*$/$1/L", "CN=ÄBC,O=x", Some("äbc")),
            (
                r"RULE:^CN=([^,]*).*$/$1/U",
                "CN=straße,O=x",
                Some("STRASSE"),
            ),
            // \w is ASCII, as in Java.
            (r"RULE:^CN=(\w+)$/$1/", "CN=ünï", None),
            (r"RULE:^CN=(\w+)$/$1/", "CN=un_1", Some("un_1")),
            (r"RULE:^CN=([\w]+)$/$1/", "CN=ünï", None),
            (r"RULE:^CN=([^\W]+)$/$1/", "CN=ünï", None),
            (
                r"RULE:^CN=(\S+)\s(\d+)$/$2-$1/",
                "CN=ünï 42",
                Some("42-ünï"),
            ),
            (r"RULE:^CN=(\S+)\s(\d+)$/$2-$1/", "CN=ünï ٤٢", None),
            (r"RULE:^CN=.*\bb$/hit/", "CN=a b", Some("hit")),
            (r"RULE:^CN=.*\bb$/hit/", "CN=ab", None),
            ("", "anything", None),
            (" , ,DEFAULT", "CN=a", Some("CN=a")),
            (
                r"RULE:^CN=(.*),O=(.*)$/$2.$1/,DEFAULT",
                "CN=a,O=b",
                Some("b.a"),
            ),
            (r"RULE:^CN=(.*),O=(.*)$/$2.$1/,DEFAULT", "C=x", Some("C=x")),
            (r"RULE:^CN=(.*)$/$1/U,RULE:^.*$/none/", "CN=a", Some("A")),
            (r"RULE:^CN=(.*)$/$1/U,RULE:^.*$/none/", "O=z", Some("none")),
            (r"DEFAULT,RULE:^.*$/never/", "CN=a", Some("CN=a")),
        ];
        for (rules, name, expected) in cases {
            let mapper = PrincipalMapper::parse(rules).unwrap();
            match expected {
                Some(principal) => {
                    assert_eq!(mapper.map(name).as_deref(), Ok(*principal), "{rules}")
                }
                None => assert_eq!(
                    mapper.map(name),
                    Err(RuleError::NoMatchingRule((*name).to_owned())),
                    "{rules}"
                ),
            }
        }
    }

    /// Rules Kafka refuses when parsed, and rules it accepts but that fail on
    /// every name they match (a replacement naming a group or text Java's
    /// replaceAll rejects), which are refused here up front; and patterns the
    /// `regex` crate cannot compile (look-around).
    #[test]
    fn refused_rules() {
        for rules in [
            r"RULE:^CN=(.*?)$/\/",
            r"RULE:x/y/ L",
            r"RULE:x/y/L junk",
            r"RULE:[/x/",
            r"DEFAULT x",
            r"RULE:^.*$/$1/",
            r"RULE:^CN=(.*?)$/$/",
            r"RULE:^CN=(.*?)$/${x}/",
            r"RULE:^CN=(.*?)$/${x/",
            r"RULE:^CN=(.*?)$/$x/",
            r"RULE:^CN=(.*?)$/a\/",
            r"RULE:(?=a)/x/",
            r"RULE:a\",
        ] {
            assert!(
                matches!(
                    PrincipalMapper::parse(rules),
                    Err(RuleError::InvalidRule { .. })
                ),
                "{rules}"
            );
        }
    }

    #[test]
    fn default_maps_every_name_to_itself() {
        let mapper = PrincipalMapper::default();
        assert_eq!(mapper.map("CN=a,O=b").unwrap(), "CN=a,O=b");
        let parsed = PrincipalMapper::parse(PrincipalMapper::DEFAULT_RULES).unwrap();
        assert_eq!(parsed.to_string(), mapper.to_string());
    }

    #[test]
    fn display_parses_back_to_the_same_rules() {
        let rules = r"RULE:^CN=(.*?),OU=(.*?)$/$1\/$2/L, RULE:a,b/c/, DEFAULT";
        let mapper = PrincipalMapper::parse(rules).unwrap();
        let shown = mapper.to_string();
        assert_eq!(
            shown,
            r"RULE:^CN=(.*?),OU=(.*?)$/$1\/$2/L,RULE:a,b/c/,DEFAULT"
        );
        let again = PrincipalMapper::parse(&shown).unwrap();
        assert_eq!(kafka_view(&again), kafka_view(&mapper));
    }

    #[test]
    fn maps_a_certificate_subject() {
        let subject = crate::rfc2253_name(&[("C", "US"), ("O", "Weir"), ("CN", "Kafka, Client")]);
        let mapper = PrincipalMapper::parse(r"RULE:^CN=(.*?),O=Weir,C=US$/$1/L,DEFAULT").unwrap();
        assert_eq!(mapper.map(&subject).unwrap(), r"kafka\, client");
    }

    proptest! {
        #[test]
        fn parsing_anything_never_panics(rules in r"[A-Z:/,\\ LU$(){}.*0-9a-z\[\]]{0,40}") {
            if let Ok(mapper) = PrincipalMapper::parse(&rules) {
                let _ = mapper.map("CN=a,O=b");
            }
        }
    }
}
