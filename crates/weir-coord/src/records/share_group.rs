//! The records of share groups (KIP-932) in `__consumer_offsets`, in
//! Kafka's schemas: keys 9 to 15 (ShareGroupPartitionMetadata,
//! ShareGroupMemberMetadata, ShareGroupMetadata,
//! ShareGroupTargetAssignmentMetadata, ShareGroupTargetAssignmentMember,
//! ShareGroupCurrentMemberAssignment, ShareGroupStatePartitionMetadata),
//! each key the group id (and the member id for member records) as classic
//! strings, each value version 0, flexible. The same encoding helpers as the
//! consumer group records.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::{
    get_compact_nullable, get_compact_string, get_i16, get_i32, get_i8, get_length, get_string,
    get_uuid, put_compact_nullable, put_compact_string, put_length, put_no_tags, put_string,
    skip_tags, RecordError,
};
use super::consumer_group::{
    get_assignment, get_topic_metadata, put_assignment, put_topic_metadata,
};
use crate::consumer::TopicMetadata;
use crate::share::{ShareMemberMetadata, ShareRecord};

pub(crate) const PARTITION_METADATA: i16 = 9;
pub(crate) const MEMBER_METADATA: i16 = 10;
pub(crate) const GROUP_METADATA: i16 = 11;
pub(crate) const TARGET_ASSIGNMENT_METADATA: i16 = 12;
pub(crate) const TARGET_ASSIGNMENT_MEMBER: i16 = 13;
pub(crate) const CURRENT_MEMBER_ASSIGNMENT: i16 = 14;
pub(crate) const STATE_PARTITION_METADATA: i16 = 15;

/// Whether a key of type `key_type` is a share group record's.
pub fn is_share_group_key(key_type: i16) -> bool {
    (PARTITION_METADATA..=STATE_PARTITION_METADATA).contains(&key_type)
}

fn key_of(record: &ShareRecord) -> (i16, Option<&str>) {
    match record {
        ShareRecord::GroupMetadata { .. } | ShareRecord::GroupMetadataTombstone => {
            (GROUP_METADATA, None)
        }
        ShareRecord::PartitionMetadata { .. } | ShareRecord::PartitionMetadataTombstone => {
            (PARTITION_METADATA, None)
        }
        ShareRecord::StatePartitionMetadata { .. }
        | ShareRecord::StatePartitionMetadataTombstone => (STATE_PARTITION_METADATA, None),
        ShareRecord::MemberMetadata { member_id, .. }
        | ShareRecord::MemberMetadataTombstone { member_id } => (MEMBER_METADATA, Some(member_id)),
        ShareRecord::TargetAssignmentMetadata { .. }
        | ShareRecord::TargetAssignmentMetadataTombstone => (TARGET_ASSIGNMENT_METADATA, None),
        ShareRecord::TargetAssignmentMember { member_id, .. }
        | ShareRecord::TargetAssignmentMemberTombstone { member_id } => {
            (TARGET_ASSIGNMENT_MEMBER, Some(member_id))
        }
        ShareRecord::CurrentMemberAssignment { member_id, .. }
        | ShareRecord::CurrentMemberAssignmentTombstone { member_id } => {
            (CURRENT_MEMBER_ASSIGNMENT, Some(member_id))
        }
    }
}

/// `record` of `group` as the key and value written to the log (`None`:
/// a tombstone).
pub fn encode(group: &str, record: &ShareRecord) -> (Bytes, Option<Bytes>) {
    let (key_type, member) = key_of(record);
    let mut key = BytesMut::with_capacity(8 + group.len() + member.map_or(0, str::len));
    key.put_i16(key_type);
    put_string(&mut key, group);
    if let Some(member) = member {
        put_string(&mut key, member);
    }
    let mut value = BytesMut::with_capacity(64);
    value.put_i16(0);
    match record {
        ShareRecord::GroupMetadata { epoch } => value.put_i32(*epoch),
        ShareRecord::PartitionMetadata { topics } => put_topic_metadata(&mut value, topics),
        ShareRecord::StatePartitionMetadata { topics } => {
            // Nothing initializing: a share-partition's state is initialized
            // by its leader before this record names it.
            put_length(&mut value, 0);
            put_length(&mut value, topics.len());
            for topic in topics {
                value.put_slice(topic.id.as_bytes());
                put_compact_string(&mut value, &topic.name);
                put_length(&mut value, usize::try_from(topic.partitions).unwrap_or(0));
                for partition in 0..topic.partitions {
                    value.put_i32(partition);
                }
                put_no_tags(&mut value);
            }
            // Nor deleting: a deletion is answered once done.
            put_length(&mut value, 0);
        }
        ShareRecord::MemberMetadata { metadata, .. } => {
            put_compact_nullable(&mut value, metadata.rack_id.as_deref());
            put_compact_string(&mut value, &metadata.client_id);
            put_compact_string(&mut value, &metadata.client_host);
            put_length(&mut value, metadata.subscribed_topic_names.len());
            for name in &metadata.subscribed_topic_names {
                put_compact_string(&mut value, name);
            }
        }
        ShareRecord::TargetAssignmentMetadata { assignment_epoch } => {
            value.put_i32(*assignment_epoch)
        }
        ShareRecord::TargetAssignmentMember { assignment, .. } => {
            put_assignment(&mut value, assignment)
        }
        ShareRecord::CurrentMemberAssignment {
            member_epoch,
            assignment,
            ..
        } => {
            value.put_i32(*member_epoch);
            // A share group member takes its target at once: its previous
            // epoch is not needed to reconcile, and its state is Stable.
            value.put_i32(*member_epoch);
            value.put_i8(0);
            put_assignment(&mut value, assignment);
        }
        ShareRecord::GroupMetadataTombstone
        | ShareRecord::PartitionMetadataTombstone
        | ShareRecord::StatePartitionMetadataTombstone
        | ShareRecord::MemberMetadataTombstone { .. }
        | ShareRecord::TargetAssignmentMetadataTombstone
        | ShareRecord::TargetAssignmentMemberTombstone { .. }
        | ShareRecord::CurrentMemberAssignmentTombstone { .. } => return (key.freeze(), None),
    }
    put_no_tags(&mut value);
    (key.freeze(), Some(value.freeze()))
}

/// The record stored under `key` with `value`, and its group.
pub fn decode(mut key: &[u8], value: Option<&[u8]>) -> Result<(String, ShareRecord), RecordError> {
    let key_type = get_i16(&mut key)?;
    if !is_share_group_key(key_type) {
        return Err(RecordError(format!(
            "not a share group key type: {key_type}"
        )));
    }
    let group = get_string(&mut key)?;
    let member_id = match key_type {
        MEMBER_METADATA | TARGET_ASSIGNMENT_MEMBER | CURRENT_MEMBER_ASSIGNMENT => {
            get_string(&mut key)?
        }
        _ => String::new(),
    };
    let Some(mut value) = value else {
        let record = match key_type {
            GROUP_METADATA => ShareRecord::GroupMetadataTombstone,
            PARTITION_METADATA => ShareRecord::PartitionMetadataTombstone,
            STATE_PARTITION_METADATA => ShareRecord::StatePartitionMetadataTombstone,
            MEMBER_METADATA => ShareRecord::MemberMetadataTombstone { member_id },
            TARGET_ASSIGNMENT_METADATA => ShareRecord::TargetAssignmentMetadataTombstone,
            TARGET_ASSIGNMENT_MEMBER => ShareRecord::TargetAssignmentMemberTombstone { member_id },
            _ => ShareRecord::CurrentMemberAssignmentTombstone { member_id },
        };
        return Ok((group, record));
    };
    let version = get_i16(&mut value)?;
    if version != 0 {
        return Err(RecordError(format!(
            "unknown value version {version} of share group record type {key_type}"
        )));
    }
    let buf = &mut value;
    let record = match key_type {
        GROUP_METADATA => ShareRecord::GroupMetadata {
            epoch: get_i32(buf)?,
        },
        PARTITION_METADATA => ShareRecord::PartitionMetadata {
            topics: get_topic_metadata(buf)?,
        },
        STATE_PARTITION_METADATA => {
            // Initializing and initialized topics both may hold state.
            let mut topics: Vec<TopicMetadata> = Vec::new();
            for _ in 0..2 {
                for _ in 0..get_length(buf)? {
                    let id = get_uuid(buf)?;
                    let name = get_compact_string(buf)?;
                    let mut partitions = 0;
                    for _ in 0..get_length(buf)? {
                        partitions = partitions.max(get_i32(buf)? + 1);
                    }
                    skip_tags(buf)?;
                    match topics.iter_mut().find(|t| t.id == id) {
                        Some(seen) => seen.partitions = seen.partitions.max(partitions),
                        None => topics.push(TopicMetadata {
                            id,
                            name,
                            partitions,
                        }),
                    }
                }
            }
            for _ in 0..get_length(buf)? {
                get_uuid(buf)?;
                get_compact_string(buf)?;
                skip_tags(buf)?;
            }
            ShareRecord::StatePartitionMetadata { topics }
        }
        MEMBER_METADATA => {
            let rack_id = get_compact_nullable(buf)?;
            let client_id = get_compact_string(buf)?;
            let client_host = get_compact_string(buf)?;
            let mut subscribed_topic_names = BTreeSet::new();
            for _ in 0..get_length(buf)? {
                subscribed_topic_names.insert(get_compact_string(buf)?);
            }
            ShareRecord::MemberMetadata {
                member_id,
                metadata: ShareMemberMetadata {
                    rack_id,
                    client_id,
                    client_host,
                    subscribed_topic_names,
                },
            }
        }
        TARGET_ASSIGNMENT_METADATA => ShareRecord::TargetAssignmentMetadata {
            assignment_epoch: get_i32(buf)?,
        },
        TARGET_ASSIGNMENT_MEMBER => ShareRecord::TargetAssignmentMember {
            member_id,
            assignment: get_assignment(buf)?,
        },
        _ => {
            let member_epoch = get_i32(buf)?;
            get_i32(buf)?; // the previous epoch
            get_i8(buf)?; // the state
            ShareRecord::CurrentMemberAssignment {
                member_id,
                member_epoch,
                assignment: get_assignment(buf)?,
            }
        }
    };
    skip_tags(buf)?;
    Ok((group, record))
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::consumer::{assignment_from, TopicMetadata};

    #[test]
    fn every_record_round_trips() {
        let topic = Uuid::from_u128(42);
        let assignment = assignment_from([(topic, vec![0, 3])]);
        let records = vec![
            ShareRecord::GroupMetadata { epoch: 3 },
            ShareRecord::GroupMetadataTombstone,
            ShareRecord::PartitionMetadata {
                topics: vec![TopicMetadata {
                    id: topic,
                    name: "jobs".into(),
                    partitions: 4,
                }],
            },
            ShareRecord::PartitionMetadataTombstone,
            ShareRecord::StatePartitionMetadata {
                topics: vec![TopicMetadata {
                    id: topic,
                    name: "jobs".into(),
                    partitions: 4,
                }],
            },
            ShareRecord::StatePartitionMetadataTombstone,
            ShareRecord::MemberMetadata {
                member_id: "m".into(),
                metadata: ShareMemberMetadata {
                    rack_id: Some("r1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: ["jobs".to_owned()].into(),
                },
            },
            ShareRecord::MemberMetadataTombstone {
                member_id: "m".into(),
            },
            ShareRecord::TargetAssignmentMetadata {
                assignment_epoch: 3,
            },
            ShareRecord::TargetAssignmentMetadataTombstone,
            ShareRecord::TargetAssignmentMember {
                member_id: "m".into(),
                assignment: assignment.clone(),
            },
            ShareRecord::TargetAssignmentMemberTombstone {
                member_id: "m".into(),
            },
            ShareRecord::CurrentMemberAssignment {
                member_id: "m".into(),
                member_epoch: 3,
                assignment,
            },
            ShareRecord::CurrentMemberAssignmentTombstone {
                member_id: "m".into(),
            },
        ];
        for record in records {
            let (key, value) = encode("queue", &record);
            assert_eq!(
                decode(&key, value.as_deref()).unwrap(),
                ("queue".to_owned(), record.clone())
            );
        }
        // The group metadata key: type 11, then the group id.
        let (key, value) = encode("queue", &ShareRecord::GroupMetadata { epoch: 3 });
        assert_eq!(&key[..4], &[0, 11, 0, 5]);
        assert_eq!(value.unwrap().as_ref(), &[0, 0, 0, 0, 0, 3, 0]);
        assert!(decode(&[0, 3, 0, 0], None).is_err(), "a consumer group key");
    }

    /// A value as Kafka writes it, with topics initializing, initialized
    /// and deleting: the first two may hold state.
    #[test]
    fn kafka_s_state_partition_metadata_names_initializing_and_initialized_topics() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let mut value = BytesMut::new();
        value.put_i16(0);
        let topic = |value: &mut BytesMut, id: Uuid, name: &str, partitions: &[i32]| {
            value.put_slice(id.as_bytes());
            put_compact_string(value, name);
            put_length(value, partitions.len());
            for p in partitions {
                value.put_i32(*p);
            }
            put_no_tags(value);
        };
        put_length(&mut value, 1);
        topic(&mut value, a, "a", &[0, 1]);
        put_length(&mut value, 1);
        topic(&mut value, b, "b", &[0, 1, 2]);
        put_length(&mut value, 1);
        value.put_slice(c.as_bytes());
        put_compact_string(&mut value, "c");
        put_no_tags(&mut value);
        put_no_tags(&mut value);
        let (key, _) = encode("queue", &ShareRecord::StatePartitionMetadataTombstone);
        let (_, record) = decode(&key, Some(&value)).unwrap();
        let named = |id, name: &str, partitions| TopicMetadata {
            id,
            name: name.into(),
            partitions,
        };
        assert_eq!(
            record,
            ShareRecord::StatePartitionMetadata {
                topics: vec![named(a, "a", 2), named(b, "b", 3)]
            }
        );
    }
}
