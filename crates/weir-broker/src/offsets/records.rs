//! The records of `__consumer_offsets`, in Kafka's own key and value
//! schemas, so that tools reading the topic (Burrow, kafka-consumer-groups)
//! understand it.
//!
//! ```text
//! key   v0/v1 (offset commit):  version i16, group string, topic string, partition i32
//! key   v2    (group metadata): version i16, group string
//! value v3    (offset commit):  version i16, offset i64, leader epoch i32,
//!                               metadata string, commit timestamp i64
//! ```
//!
//! Strings are an i16 length and UTF-8 bytes. A null value is a tombstone.
//! Values v0–v2 (older Kafka) are read too.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// What a record's key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    GroupMetadata {
        group: String,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct RecordError(String);

const OFFSET_KEY_VERSION: i16 = 1;
const OFFSET_VALUE_VERSION: i16 = 3;

pub fn encode_offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(8 + group.len() + topic.len());
    buf.put_i16(OFFSET_KEY_VERSION);
    put_string(&mut buf, group);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

pub fn encode_offset_value(value: &CommittedOffset) -> Bytes {
    let mut buf = BytesMut::with_capacity(24 + value.metadata.len());
    buf.put_i16(OFFSET_VALUE_VERSION);
    buf.put_i64(value.offset);
    buf.put_i32(value.leader_epoch);
    put_string(&mut buf, &value.metadata);
    buf.put_i64(value.commit_timestamp);
    buf.freeze()
}

pub fn decode_key(mut buf: &[u8]) -> Result<RecordKey, RecordError> {
    let version = get_i16(&mut buf)?;
    match version {
        0 | 1 => Ok(RecordKey::Offset {
            group: get_string(&mut buf)?,
            topic: get_string(&mut buf)?,
            partition: get_i32(&mut buf)?,
        }),
        2 => Ok(RecordKey::GroupMetadata {
            group: get_string(&mut buf)?,
        }),
        other => Err(RecordError(format!("unknown key version {other}"))),
    }
}

pub fn decode_offset_value(mut buf: &[u8]) -> Result<CommittedOffset, RecordError> {
    let version = get_i16(&mut buf)?;
    let offset = get_i64(&mut buf)?;
    let leader_epoch = if version >= 3 { get_i32(&mut buf)? } else { -1 };
    let metadata = get_string(&mut buf)?;
    let commit_timestamp = get_i64(&mut buf)?;
    if !(0..=4).contains(&version) {
        return Err(RecordError(format!(
            "unknown offset value version {version}"
        )));
    }
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

/// Kafka's partition of `__consumer_offsets` for a group:
/// `Utils.abs(groupId.hashCode()) % partitions`, with Java's String hash
/// over UTF-16 code units.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    // Kafka's Utils.abs maps i32::MIN to 0 rather than overflowing.
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % partitions
}

fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

fn need(buf: &[u8], n: usize) -> Result<(), RecordError> {
    if buf.len() < n {
        return Err(RecordError(format!("{n} bytes needed, {} left", buf.len())));
    }
    Ok(())
}

fn get_i16(buf: &mut &[u8]) -> Result<i16, RecordError> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut &[u8]) -> Result<i32, RecordError> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut &[u8]) -> Result<i64, RecordError> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

fn get_string(buf: &mut &[u8]) -> Result<String, RecordError> {
    let len = get_i16(buf)?;
    let len = usize::try_from(len).map_err(|_| RecordError("null string".into()))?;
    need(buf, len)?;
    let s = std::str::from_utf8(&buf[..len])
        .map_err(|_| RecordError("string is not UTF-8".into()))?
        .to_owned();
    buf.advance(len);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let key = encode_offset_key("orders-app", "orders", 7);
        assert_eq!(
            decode_key(&key).unwrap(),
            RecordKey::Offset {
                group: "orders-app".into(),
                topic: "orders".into(),
                partition: 7
            }
        );
        let value = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
        };
        assert_eq!(
            decode_offset_value(&encode_offset_value(&value)).unwrap(),
            value
        );
    }

    #[test]
    fn bytes_match_kafkas_layout() {
        // OffsetCommitKey v1: version, "g", "t", partition 2.
        assert_eq!(
            &encode_offset_key("g", "t", 2)[..],
            &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2]
        );
        let value = encode_offset_value(&CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 9,
        });
        assert_eq!(
            &value[..],
            &[0, 3, 0, 0, 0, 0, 0, 0, 0, 5, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]
        );
    }

    #[test]
    fn older_value_versions_are_read() {
        // OffsetCommitValue v1: offset, metadata, commit ts, expire ts.
        let mut v1 = BytesMut::new();
        v1.put_i16(1);
        v1.put_i64(10);
        put_string(&mut v1, "x");
        v1.put_i64(77);
        v1.put_i64(99);
        let value = decode_offset_value(&v1).unwrap();
        assert_eq!(
            (value.offset, value.leader_epoch, value.commit_timestamp),
            (10, -1, 77)
        );
    }

    #[test]
    fn malformed_records_are_errors() {
        assert!(decode_key(&[0]).is_err());
        assert!(decode_key(&[0, 9, 0, 0]).is_err());
        assert!(decode_offset_value(&[0, 3, 0, 0]).is_err());
    }

    #[test]
    fn group_partitions_follow_javas_string_hash() {
        // Java: "foo".hashCode() = 101574, "orders-app".hashCode() computed
        // the same way; Math.abs(h) % 50.
        assert_eq!(partition_for("foo", 50), 101_574 % 50);
        // A negative hash: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("", 50), 0);
        assert!((0..50).contains(&partition_for("zzzzzzzzzzzzzzzzzzzzzzzz", 50)));
    }
}
