//! The records of consumer groups (KIP-848) in `__consumer_offsets`, in
//! Kafka's schemas, so that a Kafka tool reading the topic, or a Weir
//! coordinator after a failover, reads the same groups.
//!
//! A key is its type as an i16 (3 group metadata, 4 partition metadata, 5
//! member metadata, 6 target assignment metadata, 7 target assignment
//! member, 8 current member assignment), then the group id and, for the
//! member records, the member id, as classic strings (i16 length). A value
//! is an i16 version (0) and the fields in the flexible encoding: compact
//! strings and arrays (unsigned varint length + 1, 0 for null), 16-byte
//! UUIDs, and an empty tagged-field section after every struct. A null
//! value is a tombstone.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::{
    get_compact_nullable, get_compact_string, get_i16, get_i32, get_i8, get_length, get_string,
    get_uuid, get_uvarint, put_compact_nullable, put_compact_string, put_length, put_no_tags,
    put_string, put_uvarint, skip_tags, take, RecordError,
};
use crate::consumer::{
    Assignment, ClassicMetadata, ClassicProtocol, CurrentAssignment, MemberMetadata, MemberState,
    Record, TopicMetadata,
};

pub(crate) const GROUP_METADATA: i16 = 3;
pub(crate) const PARTITION_METADATA: i16 = 4;
pub(crate) const MEMBER_METADATA: i16 = 5;
pub(crate) const TARGET_ASSIGNMENT_METADATA: i16 = 6;
pub(crate) const TARGET_ASSIGNMENT_MEMBER: i16 = 7;
pub(crate) const CURRENT_MEMBER_ASSIGNMENT: i16 = 8;

/// Whether a key of type `key_type` is a consumer group record's.
pub fn is_consumer_group_key(key_type: i16) -> bool {
    (GROUP_METADATA..=CURRENT_MEMBER_ASSIGNMENT).contains(&key_type)
}

/// `record` of `group` as the key and value written to the log.
pub fn encode(group: &str, record: &Record) -> (Bytes, Option<Bytes>) {
    let member = record.member_id();
    let key_type = match record {
        Record::GroupMetadata { .. } | Record::GroupMetadataTombstone => GROUP_METADATA,
        Record::PartitionMetadata { .. } | Record::PartitionMetadataTombstone => PARTITION_METADATA,
        Record::MemberMetadata { .. } | Record::MemberMetadataTombstone { .. } => MEMBER_METADATA,
        Record::TargetAssignmentMetadata { .. } | Record::TargetAssignmentMetadataTombstone => {
            TARGET_ASSIGNMENT_METADATA
        }
        Record::TargetAssignmentMember { .. } | Record::TargetAssignmentMemberTombstone { .. } => {
            TARGET_ASSIGNMENT_MEMBER
        }
        Record::CurrentMemberAssignment { .. }
        | Record::CurrentMemberAssignmentTombstone { .. } => CURRENT_MEMBER_ASSIGNMENT,
    };
    let mut key = BytesMut::with_capacity(8 + group.len() + member.map_or(0, str::len));
    key.put_i16(key_type);
    put_string(&mut key, group);
    if let Some(member) = member {
        put_string(&mut key, member);
    }
    (key.freeze(), encode_value(record))
}

fn encode_value(record: &Record) -> Option<Bytes> {
    let mut value = BytesMut::with_capacity(64);
    value.put_i16(0);
    match record {
        Record::GroupMetadata { epoch } => value.put_i32(*epoch),
        Record::PartitionMetadata { topics } => put_topic_metadata(&mut value, topics),
        Record::MemberMetadata { metadata, .. } => {
            put_compact_nullable(&mut value, metadata.instance_id.as_deref());
            put_compact_nullable(&mut value, metadata.rack_id.as_deref());
            put_compact_string(&mut value, &metadata.client_id);
            put_compact_string(&mut value, &metadata.client_host);
            put_length(&mut value, metadata.subscribed_topic_names.len());
            for name in &metadata.subscribed_topic_names {
                put_compact_string(&mut value, name);
            }
            put_compact_nullable(&mut value, metadata.subscribed_topic_regex.as_deref());
            value.put_i32(metadata.rebalance_timeout_ms);
            put_compact_nullable(&mut value, metadata.server_assignor.as_deref());
            if let Some(classic) = &metadata.classic {
                // Tagged field 0: ClassicMemberMetadata.
                let mut field = BytesMut::new();
                field.put_i32(classic.session_timeout_ms);
                put_length(&mut field, classic.protocols.len());
                for protocol in &classic.protocols {
                    put_compact_string(&mut field, &protocol.name);
                    put_length(&mut field, protocol.metadata.len());
                    field.put_slice(&protocol.metadata);
                    put_no_tags(&mut field);
                }
                put_no_tags(&mut field);
                put_uvarint(&mut value, 1);
                put_uvarint(&mut value, 0);
                put_uvarint(&mut value, field.len() as u64);
                value.put_slice(&field);
                return Some(value.freeze());
            }
        }
        Record::TargetAssignmentMember { assignment, .. } => {
            put_assignment(&mut value, assignment);
        }
        Record::TargetAssignmentMetadata { assignment_epoch } => value.put_i32(*assignment_epoch),
        Record::CurrentMemberAssignment { assignment, .. } => {
            value.put_i32(assignment.member_epoch);
            value.put_i32(assignment.previous_member_epoch);
            value.put_i8(assignment.state.value());
            put_assignment(&mut value, &assignment.assigned);
            put_assignment(&mut value, &assignment.pending_revocation);
        }
        Record::GroupMetadataTombstone
        | Record::PartitionMetadataTombstone
        | Record::MemberMetadataTombstone { .. }
        | Record::TargetAssignmentMemberTombstone { .. }
        | Record::TargetAssignmentMetadataTombstone
        | Record::CurrentMemberAssignmentTombstone { .. } => return None,
    }
    put_no_tags(&mut value);
    Some(value.freeze())
}

/// The record stored under `key` with `value`, and its group.
pub fn decode(mut key: &[u8], value: Option<&[u8]>) -> Result<(String, Record), RecordError> {
    let key_type = get_i16(&mut key)?;
    let group = get_string(&mut key)?;
    let member = match key_type {
        MEMBER_METADATA | TARGET_ASSIGNMENT_MEMBER | CURRENT_MEMBER_ASSIGNMENT => {
            Some(get_string(&mut key)?)
        }
        GROUP_METADATA | PARTITION_METADATA | TARGET_ASSIGNMENT_METADATA => None,
        other => {
            return Err(RecordError(format!(
                "not a consumer group key type: {other}"
            )))
        }
    };
    let member_id = || member.clone().unwrap_or_default();
    let Some(mut value) = value else {
        let record = match key_type {
            GROUP_METADATA => Record::GroupMetadataTombstone,
            PARTITION_METADATA => Record::PartitionMetadataTombstone,
            MEMBER_METADATA => Record::MemberMetadataTombstone {
                member_id: member_id(),
            },
            TARGET_ASSIGNMENT_METADATA => Record::TargetAssignmentMetadataTombstone,
            TARGET_ASSIGNMENT_MEMBER => Record::TargetAssignmentMemberTombstone {
                member_id: member_id(),
            },
            _ => Record::CurrentMemberAssignmentTombstone {
                member_id: member_id(),
            },
        };
        return Ok((group, record));
    };
    let version = get_i16(&mut value)?;
    if version != 0 {
        return Err(RecordError(format!(
            "unknown value version {version} of consumer group record type {key_type}"
        )));
    }
    let buf = &mut value;
    let record = match key_type {
        GROUP_METADATA => Record::GroupMetadata {
            epoch: get_i32(buf)?,
        },
        PARTITION_METADATA => Record::PartitionMetadata {
            topics: get_topic_metadata(buf)?,
        },
        MEMBER_METADATA => {
            let instance_id = get_compact_nullable(buf)?;
            let rack_id = get_compact_nullable(buf)?;
            let client_id = get_compact_string(buf)?;
            let client_host = get_compact_string(buf)?;
            let mut subscribed_topic_names = BTreeSet::new();
            for _ in 0..get_length(buf)? {
                subscribed_topic_names.insert(get_compact_string(buf)?);
            }
            let subscribed_topic_regex = get_compact_nullable(buf)?;
            let rebalance_timeout_ms = get_i32(buf)?;
            let server_assignor = get_compact_nullable(buf)?;
            let mut classic = None;
            for _ in 0..get_uvarint(buf)? {
                let tag = get_uvarint(buf)?;
                let size = get_uvarint(buf)? as usize;
                let mut field = take(buf, size)?;
                if tag == 0 {
                    classic = Some(get_classic_metadata(&mut field)?);
                }
            }
            return Ok((
                group,
                Record::MemberMetadata {
                    member_id: member_id(),
                    metadata: MemberMetadata {
                        instance_id,
                        rack_id,
                        client_id,
                        client_host,
                        subscribed_topic_names,
                        subscribed_topic_regex,
                        rebalance_timeout_ms,
                        server_assignor,
                        classic,
                    },
                },
            ));
        }
        TARGET_ASSIGNMENT_METADATA => Record::TargetAssignmentMetadata {
            assignment_epoch: get_i32(buf)?,
        },
        TARGET_ASSIGNMENT_MEMBER => Record::TargetAssignmentMember {
            member_id: member_id(),
            assignment: get_assignment(buf)?,
        },
        _ => Record::CurrentMemberAssignment {
            member_id: member_id(),
            assignment: CurrentAssignment {
                member_epoch: get_i32(buf)?,
                previous_member_epoch: get_i32(buf)?,
                state: MemberState::from_value(get_i8(buf)?),
                assigned: get_assignment(buf)?,
                pending_revocation: get_assignment(buf)?,
            },
        },
    };
    skip_tags(buf)?;
    Ok((group, record))
}

/// ClassicMemberMetadata, the tagged field of a member's metadata.
fn get_classic_metadata(buf: &mut &[u8]) -> Result<ClassicMetadata, RecordError> {
    let session_timeout_ms = get_i32(buf)?;
    let mut protocols = Vec::new();
    for _ in 0..get_length(buf)? {
        let name = get_compact_string(buf)?;
        let len = get_length(buf)?;
        let metadata = Bytes::copy_from_slice(take(buf, len)?);
        skip_tags(buf)?;
        protocols.push(ClassicProtocol { name, metadata });
    }
    skip_tags(buf)?;
    Ok(ClassicMetadata {
        session_timeout_ms,
        protocols,
    })
}

/// `[]TopicMetadata` of a PartitionMetadata value: id, name, partition
/// count, and no partition racks (deprecated).
pub(super) fn put_topic_metadata(buf: &mut BytesMut, topics: &[TopicMetadata]) {
    put_length(buf, topics.len());
    for topic in topics {
        buf.put_slice(topic.id.as_bytes());
        put_compact_string(buf, &topic.name);
        buf.put_i32(topic.partitions);
        put_length(buf, 0);
        put_no_tags(buf);
    }
}

pub(super) fn get_topic_metadata(buf: &mut &[u8]) -> Result<Vec<TopicMetadata>, RecordError> {
    let mut topics = Vec::new();
    for _ in 0..get_length(buf)? {
        let id = get_uuid(buf)?;
        let name = get_compact_string(buf)?;
        let partitions = get_i32(buf)?;
        for _ in 0..get_length(buf)? {
            get_i32(buf)?;
            for _ in 0..get_length(buf)? {
                get_compact_string(buf)?;
            }
            skip_tags(buf)?;
        }
        skip_tags(buf)?;
        topics.push(TopicMetadata {
            id,
            name,
            partitions,
        });
    }
    Ok(topics)
}

/// `[]TopicPartitions`: topic id, partitions, tags.
pub(super) fn put_assignment(buf: &mut BytesMut, assignment: &Assignment) {
    put_length(buf, assignment.len());
    for (topic, partitions) in assignment {
        buf.put_slice(topic.as_bytes());
        put_length(buf, partitions.len());
        for partition in partitions {
            buf.put_i32(*partition);
        }
        put_no_tags(buf);
    }
}

pub(super) fn get_assignment(buf: &mut &[u8]) -> Result<Assignment, RecordError> {
    let mut assignment = Assignment::new();
    for _ in 0..get_length(buf)? {
        let topic = get_uuid(buf)?;
        let mut partitions = BTreeSet::new();
        for _ in 0..get_length(buf)? {
            partitions.insert(get_i32(buf)?);
        }
        skip_tags(buf)?;
        if !partitions.is_empty() {
            assignment.entry(topic).or_default().extend(partitions);
        }
    }
    Ok(assignment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::assignment_from;
    use uuid::Uuid;

    fn every_record() -> Vec<Record> {
        let topic = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let assignment = assignment_from([(topic, vec![0, 2, 5])]);
        vec![
            Record::GroupMetadata { epoch: 7 },
            Record::GroupMetadataTombstone,
            Record::PartitionMetadata {
                topics: vec![TopicMetadata {
                    id: topic,
                    name: "orders".into(),
                    partitions: 6,
                }],
            },
            Record::PartitionMetadataTombstone,
            Record::MemberMetadata {
                member_id: "m-1".into(),
                metadata: MemberMetadata {
                    instance_id: Some("i-1".into()),
                    rack_id: None,
                    client_id: "client".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: ["orders".to_owned(), "refunds".to_owned()].into(),
                    subscribed_topic_regex: Some("ord.*".into()),
                    rebalance_timeout_ms: 300_000,
                    server_assignor: Some("uniform".into()),
                    classic: None,
                },
            },
            Record::MemberMetadata {
                member_id: "m-2".into(),
                metadata: MemberMetadata {
                    client_id: "classic".into(),
                    subscribed_topic_names: ["orders".to_owned()].into(),
                    rebalance_timeout_ms: 60_000,
                    classic: Some(ClassicMetadata {
                        session_timeout_ms: 10_000,
                        protocols: vec![
                            ClassicProtocol {
                                name: "cooperative-sticky".into(),
                                metadata: Bytes::from_static(&[0, 3, 0, 0, 0, 1]),
                            },
                            ClassicProtocol {
                                name: "range".into(),
                                metadata: Bytes::new(),
                            },
                        ],
                    }),
                    ..MemberMetadata::default()
                },
            },
            Record::MemberMetadataTombstone {
                member_id: "m-1".into(),
            },
            Record::TargetAssignmentMember {
                member_id: "m-1".into(),
                assignment: assignment.clone(),
            },
            Record::TargetAssignmentMemberTombstone {
                member_id: "m-1".into(),
            },
            Record::TargetAssignmentMetadata {
                assignment_epoch: 7,
            },
            Record::TargetAssignmentMetadataTombstone,
            Record::CurrentMemberAssignment {
                member_id: "m-1".into(),
                assignment: CurrentAssignment {
                    member_epoch: 7,
                    previous_member_epoch: 6,
                    state: MemberState::UnrevokedPartitions,
                    assigned: assignment.clone(),
                    pending_revocation: assignment_from([(topic, vec![1])]),
                },
            },
            Record::CurrentMemberAssignmentTombstone {
                member_id: "m-1".into(),
            },
        ]
    }

    #[test]
    fn every_record_reads_back_as_written() {
        for record in every_record() {
            let (key, value) = encode("group-1", &record);
            assert_eq!(value.is_none(), record.is_tombstone(), "{record:?}");
            let (group, read) = decode(&key, value.as_deref()).unwrap();
            assert_eq!(group, "group-1");
            assert_eq!(read, record);
        }
    }

    #[test]
    fn bytes_are_kafkas() {
        // ConsumerGroupCurrentMemberAssignment: key type 8, group, member;
        // value version 0, epochs, state, the assigned and pending
        // TopicPartitions arrays, empty tags.
        let topic = Uuid::from_u128(1);
        let record = Record::CurrentMemberAssignment {
            member_id: "m".into(),
            assignment: CurrentAssignment {
                member_epoch: 3,
                previous_member_epoch: 2,
                state: MemberState::Stable,
                assigned: assignment_from([(topic, vec![4])]),
                pending_revocation: Assignment::new(),
            },
        };
        let (key, value) = encode("g", &record);
        assert_eq!(&key[..], &[0, 8, 0, 1, b'g', 0, 1, b'm']);
        let mut expected = vec![0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 2];
        expected.extend_from_slice(topic.as_bytes());
        expected.extend_from_slice(&[2, 0, 0, 0, 4, 0, 1, 0]);
        assert_eq!(&value.unwrap()[..], &expected[..]);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped_and_damage_is_an_error() {
        let (key, value) = encode("g", &Record::GroupMetadata { epoch: 9 });
        let mut tagged = value.unwrap()[..6].to_vec();
        // One tagged field (tag 0, 2 bytes), as a newer writer may add.
        tagged.extend_from_slice(&[1, 0, 2, 0xab, 0xcd]);
        assert_eq!(
            decode(&key, Some(&tagged)).unwrap().1,
            Record::GroupMetadata { epoch: 9 }
        );
        for record in every_record().iter().filter(|r| !r.is_tombstone()) {
            let (key, value) = encode("g", record);
            let value = value.unwrap();
            for cut in 0..value.len() {
                assert!(
                    decode(&key, Some(&value[..cut])).is_err(),
                    "{record:?} cut at {cut}"
                );
            }
        }
    }
}
