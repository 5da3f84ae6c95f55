//! The records of `__consumer_offsets`, in Kafka's own key and value
//! schemas, so that tools reading the topic (Burrow, kafka-consumer-groups)
//! understand it.
//!
//! ```text
//! key   v0/v1 (offset commit):  version i16, group string, topic string, partition i32
//! key   v2    (group metadata): version i16, group string
//! value v3    (offset commit):  version i16, offset i64, leader epoch i32,
//!                               metadata string, commit timestamp i64
//! value v3    (group metadata): version i16, protocol type string,
//!                               generation i32, protocol string?, leader string?,
//!                               current state timestamp i64, members [
//!                                 member id string, group instance id string?,
//!                                 client id string, client host string,
//!                                 rebalance timeout i32, session timeout i32,
//!                                 subscription bytes, assignment bytes ]
//! ```
//!
//! Strings are an i16 length (-1 for null) and UTF-8 bytes; bytes an i32
//! length; arrays an i32 count. A null value is a tombstone. Older value
//! versions (Kafka before 2.3) are read too.

use bytes::{BufMut, Bytes, BytesMut};

pub use super::codec::RecordError;
use super::codec::{
    get_bytes, get_i16, get_i32, get_i64, get_nullable_string, get_string, put_bytes,
    put_nullable_string, put_string,
};
use crate::classic::{GroupSnapshot, MemberSnapshot};

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
    /// One of a consumer group's (KIP-848) or share group's (KIP-932)
    /// records, kept by its whole key.
    ConsumerGroup {
        group: String,
        key: Bytes,
    },
}

const OFFSET_KEY_VERSION: i16 = 1;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_KEY_VERSION: i16 = 2;
const GROUP_VALUE_VERSION: i16 = 3;

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

pub fn encode_group_key(group: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + group.len());
    buf.put_i16(GROUP_KEY_VERSION);
    put_string(&mut buf, group);
    buf.freeze()
}

pub fn encode_group_value(group: &GroupSnapshot) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(GROUP_VALUE_VERSION);
    put_string(&mut buf, group.protocol_type.as_deref().unwrap_or_default());
    buf.put_i32(group.generation_id);
    put_nullable_string(&mut buf, group.protocol_name.as_deref());
    put_nullable_string(&mut buf, group.leader.as_deref());
    buf.put_i64(group.current_state_timestamp_ms.map_or(-1, |t| t as i64));
    buf.put_i32(group.members.len() as i32);
    for m in &group.members {
        put_string(&mut buf, &m.member_id);
        put_nullable_string(&mut buf, m.group_instance_id.as_deref());
        put_string(&mut buf, &m.client_id);
        put_string(&mut buf, &m.client_host);
        buf.put_i32(m.rebalance_timeout_ms);
        buf.put_i32(m.session_timeout_ms);
        put_bytes(&mut buf, &m.metadata);
        put_bytes(&mut buf, &m.assignment);
    }
    buf.freeze()
}

pub fn decode_group_value(mut buf: &[u8]) -> Result<GroupSnapshot, RecordError> {
    let version = get_i16(&mut buf)?;
    if !(0..=3).contains(&version) {
        return Err(RecordError(format!(
            "unknown group metadata value version {version}"
        )));
    }
    let protocol_type = get_string(&mut buf)?;
    let generation_id = get_i32(&mut buf)?;
    let protocol_name = get_nullable_string(&mut buf)?;
    let leader = get_nullable_string(&mut buf)?;
    let timestamp = if version >= 2 { get_i64(&mut buf)? } else { -1 };
    let count = get_i32(&mut buf)?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        let member_id = get_string(&mut buf)?;
        let group_instance_id = if version >= 3 {
            get_nullable_string(&mut buf)?
        } else {
            None
        };
        let client_id = get_string(&mut buf)?;
        let client_host = get_string(&mut buf)?;
        let rebalance_timeout_ms = if version >= 1 {
            Some(get_i32(&mut buf)?)
        } else {
            None
        };
        let session_timeout_ms = get_i32(&mut buf)?;
        members.push(MemberSnapshot {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: rebalance_timeout_ms.unwrap_or(session_timeout_ms),
            session_timeout_ms,
            metadata: get_bytes(&mut buf)?,
            assignment: get_bytes(&mut buf)?,
        });
    }
    Ok(GroupSnapshot {
        protocol_type: (!protocol_type.is_empty()).then_some(protocol_type),
        generation_id,
        protocol_name,
        leader,
        current_state_timestamp_ms: u64::try_from(timestamp).ok(),
        members,
    })
}

pub fn decode_key(whole: &[u8]) -> Result<RecordKey, RecordError> {
    let mut buf = whole;
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
        key_type
            if super::consumer_group::is_consumer_group_key(key_type)
                || super::share_group::is_share_group_key(key_type) =>
        {
            Ok(RecordKey::ConsumerGroup {
                group: get_string(&mut buf)?,
                key: Bytes::copy_from_slice(whole),
            })
        }
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
    fn group_metadata_round_trips() {
        let group = GroupSnapshot {
            protocol_type: Some("consumer".into()),
            generation_id: 4,
            protocol_name: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp_ms: Some(1_700_000_000_000),
            members: vec![MemberSnapshot {
                member_id: "m-1".into(),
                group_instance_id: Some("i-1".into()),
                client_id: "app".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                metadata: vec![1, 2, 3],
                assignment: vec![4, 5],
            }],
        };
        let value = encode_group_value(&group);
        assert_eq!(decode_group_value(&value).unwrap(), group);
        assert_eq!(
            decode_key(&encode_group_key("g")).unwrap(),
            RecordKey::GroupMetadata { group: "g".into() }
        );
        // An empty group: no protocol, no leader, no members.
        let empty = GroupSnapshot {
            generation_id: 5,
            ..GroupSnapshot::default()
        };
        let value = encode_group_value(&empty);
        assert_eq!(&value[..8], &[0, 3, 0, 0, 0, 0, 0, 5]);
        assert_eq!(decode_group_value(&value).unwrap(), empty);
    }

    #[test]
    fn malformed_records_are_errors() {
        assert!(decode_key(&[0]).is_err());
        assert!(decode_key(&[0, 99, 0, 0]).is_err());
        assert!(decode_offset_value(&[0, 3, 0, 0]).is_err());
        assert!(decode_group_value(&[0, 3, 0, 0]).is_err());
        assert!(decode_group_value(&[0, 9]).is_err());
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
