//! Kafka's rules for topic names.

use crate::error::MetaError;

/// The longest legal topic name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name: 1 to 249 characters from `[a-zA-Z0-9._-]`, and
/// neither "." nor "..". The error carries Kafka's wording.
pub fn validate_topic_name(name: &str) -> Result<(), MetaError> {
    let invalid = |reason: String| {
        Err(MetaError::InvalidTopicName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("Topic name is illegal, it can't be empty".to_owned());
    }
    if name == "." || name == ".." {
        return invalid("Topic name cannot be \".\" or \"..\"".to_owned());
    }
    if name.chars().count() > MAX_TOPIC_NAME_LEN {
        return invalid(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return invalid(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// The name with '.' replaced by '_'. Kafka's metric names do not tell the
/// two apart, so two topics whose names differ only there may not coexist.
pub fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}
