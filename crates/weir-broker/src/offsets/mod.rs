//! Committed consumer offsets, kept as records in `__consumer_offsets`: a
//! group's commits go to partition `partition_for(group, N)`, and the
//! in-memory view is rebuilt from those records at start.
//!
//! Group membership (JoinGroup/SyncGroup) is not served yet, so commits come
//! from "simple" consumers that assign partitions themselves (generation -1,
//! no member id), as Kafka allows for groups without members.

pub mod records;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use parking_lot::Mutex;
use weir_log::batch::BatchHeader;
use weir_log::LogError;

use crate::partition::{AppendError, Partition};
use records::{CommittedOffset, RecordKey};

/// The internal topic holding group state and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `offset.metadata.max.bytes`.
pub const MAX_METADATA_BYTES: usize = 4096;

type GroupOffsets = BTreeMap<(String, i32), CommittedOffset>;

/// Committed offsets of every group, by group.
#[derive(Default)]
pub struct OffsetStore {
    groups: Mutex<HashMap<String, GroupOffsets>>,
}

/// One change to a group's offsets: a commit, or a deletion (`None`).
pub struct OffsetChange {
    pub topic: String,
    pub partition: i32,
    pub value: Option<CommittedOffset>,
}

impl OffsetStore {
    /// Rebuilds the offsets from the records of `__consumer_offsets`.
    pub fn load(partitions: &[Arc<Partition>]) -> Result<Self, LogError> {
        let store = Self::default();
        let mut groups = store.groups.lock();
        let mut records = 0usize;
        for partition in partitions {
            for_each_record(partition, |key, value| {
                records += 1;
                match records::decode_key(&key) {
                    Ok(RecordKey::Offset {
                        group,
                        topic,
                        partition,
                    }) => {
                        let offsets = groups.entry(group).or_default();
                        match value.map(|v| records::decode_offset_value(&v)) {
                            Some(Ok(value)) => {
                                offsets.insert((topic, partition), value);
                            }
                            Some(Err(error)) => {
                                tracing::warn!(%error, "skipping an unreadable offset commit")
                            }
                            None => {
                                offsets.remove(&(topic, partition));
                            }
                        }
                    }
                    // Group metadata records are for the group coordinator.
                    Ok(RecordKey::GroupMetadata { .. }) => {}
                    Err(error) => tracing::warn!(%error, "skipping an unreadable record"),
                }
            })?;
        }
        groups.retain(|_, offsets| !offsets.is_empty());
        tracing::info!(groups = groups.len(), records, "loaded committed offsets");
        drop(groups);
        Ok(store)
    }

    /// Writes `changes` to the group's partition, then applies them.
    pub fn commit(
        &self,
        partition: &Partition,
        group: &str,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        if changes.is_empty() {
            return Ok(());
        }
        let records: Vec<Record> = changes
            .iter()
            .enumerate()
            .map(|(i, change)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // Only the base sequence is encoded: -1, no producer.
                sequence: i as i32 - 1,
                timestamp: now_ms,
                key: Some(records::encode_offset_key(
                    group,
                    &change.topic,
                    change.partition,
                )),
                value: change.value.as_ref().map(records::encode_offset_value),
                headers: Default::default(),
            })
            .collect();
        let mut batch = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut batch,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("offset commit records encode");
        // The lock spans the append so that the view applies changes in log
        // order.
        let mut groups = self.groups.lock();
        partition.append(&batch, 0)?;
        let offsets = groups.entry(group.to_owned()).or_default();
        for change in changes {
            let key = (change.topic, change.partition);
            match change.value {
                Some(value) => offsets.insert(key, value),
                None => offsets.remove(&key),
            };
        }
        if offsets.is_empty() {
            groups.remove(group);
        }
        Ok(())
    }

    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        let groups = self.groups.lock();
        groups
            .get(group)?
            .get(&(topic.to_owned(), partition))
            .cloned()
    }

    /// Every committed offset of a group, by topic and partition.
    pub fn group_offsets(&self, group: &str) -> Vec<((String, i32), CommittedOffset)> {
        let groups = self.groups.lock();
        groups
            .get(group)
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Names of the groups that hold committed offsets, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self.groups.lock().keys().cloned().collect();
        groups.sort();
        groups
    }

    /// Groups holding offsets of `topic`, with those partitions.
    pub fn commits_of_topic(&self, topic: &str) -> Vec<(String, Vec<i32>)> {
        let groups = self.groups.lock();
        groups
            .iter()
            .filter_map(|(group, offsets)| {
                let partitions: Vec<i32> = offsets
                    .keys()
                    .filter(|(t, _)| t == topic)
                    .map(|(_, p)| *p)
                    .collect();
                (!partitions.is_empty()).then(|| (group.clone(), partitions))
            })
            .collect()
    }
}

/// Calls `f(key, value)` for every record of a partition, oldest first.
fn for_each_record(
    partition: &Partition,
    mut f: impl FnMut(Bytes, Option<Bytes>),
) -> Result<(), LogError> {
    let end = partition.high_watermark();
    let mut offset = partition.log.log_start_offset();
    while offset < end {
        let slice = partition.log.read(offset, 1 << 20, end)?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_bytes().map_err(|source| LogError::Io {
            path: slice.path().map(|p| p.to_owned()).unwrap_or_default(),
            source,
        })?;
        let mut position = 0;
        while let Ok(header) = BatchHeader::parse(&bytes[position..], position) {
            let size = header.total_size();
            offset = header.next_offset() as u64;
            if !header.is_control() {
                let mut batch = bytes.slice(position..position + size);
                match RecordBatchDecoder::decode(&mut batch) {
                    Ok(set) => {
                        for record in set.records {
                            if let Some(key) = record.key {
                                f(key, record.value);
                            }
                        }
                    }
                    Err(error) => tracing::warn!(
                        topic = %partition.topic,
                        partition = partition.index,
                        %error,
                        "skipping an undecodable batch"
                    ),
                }
            }
            position += size;
            if position >= bytes.len() {
                break;
            }
        }
    }
    Ok(())
}
