//! The contents of `__consumer_offsets`: committed offsets and group
//! metadata, kept as records in Kafka's schemas. A group's records go to
//! partition `partition_for(group, N)`; the in-memory view is rebuilt from
//! those records at start.
//!
//! Until the log cleaner exists, [`OffsetStore::checkpoint`] keeps the topic
//! small: it re-appends the live records of a partition and moves the log
//! start past everything older, so loading reads little more than the live
//! state.

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

use crate::group::GroupSnapshot;
use crate::partition::{AppendError, Partition};
use records::{CommittedOffset, RecordKey};

/// The internal topic holding group state and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `offset.metadata.max.bytes`.
pub const MAX_METADATA_BYTES: usize = 4096;

/// Records per batch when a checkpoint rewrites a partition's live state.
const CHECKPOINT_BATCH_RECORDS: usize = 500;

type GroupOffsets = BTreeMap<(String, i32), CommittedOffset>;

/// Committed offsets and the last written metadata of every group.
#[derive(Default)]
pub struct OffsetStore {
    contents: Mutex<Contents>,
}

#[derive(Default)]
struct Contents {
    offsets: HashMap<String, GroupOffsets>,
    /// The encoded GroupMetadataValue last written for each group.
    metadata: HashMap<String, Bytes>,
}

/// One change to a group's offsets: a commit, or a deletion (`None`).
pub struct OffsetChange {
    pub topic: String,
    pub partition: i32,
    pub value: Option<CommittedOffset>,
}

/// One record of `__consumer_offsets`, ready to append.
struct Entry {
    key: Bytes,
    value: Option<Bytes>,
}

impl Contents {
    fn apply(&mut self, key: RecordKey, value: Option<Bytes>) {
        match key {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => {
                let offsets = self.offsets.entry(group.clone()).or_default();
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
                if offsets.is_empty() {
                    self.offsets.remove(&group);
                }
            }
            RecordKey::GroupMetadata { group } => match value {
                Some(value) => {
                    self.metadata.insert(group, value);
                }
                None => {
                    self.metadata.remove(&group);
                }
            },
        }
    }

    /// The live records of the groups for which `owns` is true.
    fn live_entries(&self, owns: impl Fn(&str) -> bool) -> Vec<Entry> {
        let mut entries = Vec::new();
        for (group, value) in &self.metadata {
            if owns(group) {
                entries.push(Entry {
                    key: records::encode_group_key(group),
                    value: Some(value.clone()),
                });
            }
        }
        for (group, offsets) in &self.offsets {
            if owns(group) {
                for ((topic, partition), value) in offsets {
                    entries.push(Entry {
                        key: records::encode_offset_key(group, topic, *partition),
                        value: Some(records::encode_offset_value(value)),
                    });
                }
            }
        }
        entries
    }
}

impl OffsetStore {
    /// Rebuilds the view from the records of `__consumer_offsets`.
    pub fn load(partitions: &[Arc<Partition>]) -> Result<Self, LogError> {
        let mut contents = Contents::default();
        let mut count = 0usize;
        for partition in partitions {
            for_each_record(partition, |key, value| {
                count += 1;
                match records::decode_key(&key) {
                    Ok(key) => contents.apply(key, value),
                    Err(error) => tracing::warn!(%error, "skipping an unreadable record"),
                }
            })?;
        }
        tracing::info!(
            groups_with_offsets = contents.offsets.len(),
            groups_with_metadata = contents.metadata.len(),
            records = count,
            "loaded __consumer_offsets"
        );
        Ok(Self {
            contents: Mutex::new(contents),
        })
    }

    /// This node became the leader of `partition` (one of `count`): its
    /// groups are read again from its log, which may have grown by
    /// replication since they were last read. Returns their metadata.
    pub fn reload(
        &self,
        partition: &Partition,
        count: i32,
    ) -> Result<Vec<(String, GroupSnapshot)>, LogError> {
        let owns = |group: &str| records::partition_for(group, count) == partition.index;
        let mut fresh = Contents::default();
        for_each_record(partition, |key, value| match records::decode_key(&key) {
            Ok(key) => fresh.apply(key, value),
            Err(error) => tracing::warn!(%error, "skipping an unreadable record"),
        })?;
        let loaded = decode_metadata(&fresh.metadata);
        let mut contents = self.contents.lock();
        contents.offsets.retain(|group, _| !owns(group));
        contents.metadata.retain(|group, _| !owns(group));
        contents.offsets.extend(fresh.offsets);
        contents.metadata.extend(fresh.metadata);
        Ok(loaded)
    }

    /// The last metadata written for each group, decoded.
    pub fn group_metadata(&self) -> Vec<(String, GroupSnapshot)> {
        decode_metadata(&self.contents.lock().metadata)
    }

    /// Writes `changes` to the group's partition, then applies them.
    pub fn commit(
        &self,
        partition: &Partition,
        group: &str,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        let entries = changes
            .iter()
            .map(|change| Entry {
                key: records::encode_offset_key(group, &change.topic, change.partition),
                value: change.value.as_ref().map(records::encode_offset_value),
            })
            .collect();
        self.write(partition, entries, now_ms)
    }

    /// Writes a group's metadata record, or its tombstone for `None`.
    pub fn write_group(
        &self,
        partition: &Partition,
        group: &str,
        snapshot: Option<&GroupSnapshot>,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        let entry = Entry {
            key: records::encode_group_key(group),
            value: snapshot.map(records::encode_group_value),
        };
        self.write(partition, vec![entry], now_ms)
    }

    /// Removes a group: tombstones for its offsets and its metadata.
    pub fn delete_group(
        &self,
        partition: &Partition,
        group: &str,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        let mut entries: Vec<Entry> = self
            .group_offsets(group)
            .into_iter()
            .map(|((topic, p), _)| Entry {
                key: records::encode_offset_key(group, &topic, p),
                value: None,
            })
            .collect();
        if self.contents.lock().metadata.contains_key(group) {
            entries.push(Entry {
                key: records::encode_group_key(group),
                value: None,
            });
        }
        self.write(partition, entries, now_ms)
    }

    /// Appends `entries` as one batch and applies them to the view.
    fn write(
        &self,
        partition: &Partition,
        entries: Vec<Entry>,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        if entries.is_empty() {
            return Ok(());
        }
        let batch = encode_batch(&entries, now_ms);
        // The lock spans the append so that the view applies changes in log
        // order.
        let mut contents = self.contents.lock();
        partition.append(&batch, 0)?;
        for entry in entries {
            let key = records::decode_key(&entry.key).expect("keys written here decode");
            contents.apply(key, entry.value);
        }
        Ok(())
    }

    /// Re-appends the live records of the groups stored in `partition`
    /// (index `index` of `count`), then moves its log start past everything
    /// older. A crash before the log start moves leaves both copies, which
    /// load to the same state. Returns the records rewritten.
    pub fn checkpoint(
        &self,
        partition: &Partition,
        count: i32,
        now_ms: i64,
    ) -> Result<usize, AppendError> {
        let contents = self.contents.lock();
        let entries =
            contents.live_entries(|group| records::partition_for(group, count) == partition.index);
        let rewrite_start = partition.log.log_end_offset();
        for chunk in entries.chunks(CHECKPOINT_BATCH_RECORDS) {
            partition.append(&encode_batch(chunk, now_ms), 0)?;
        }
        partition.log.delete_records_before(rewrite_start)?;
        Ok(entries.len())
    }

    /// How many live records the groups of partition `index` of `count` hold.
    pub fn live_records(&self, index: i32, count: i32) -> usize {
        let contents = self.contents.lock();
        let owns = |group: &str| records::partition_for(group, count) == index;
        contents.metadata.keys().filter(|g| owns(g)).count()
            + contents
                .offsets
                .iter()
                .filter(|(g, _)| owns(g))
                .map(|(_, o)| o.len())
                .sum::<usize>()
    }

    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        let contents = self.contents.lock();
        contents
            .offsets
            .get(group)?
            .get(&(topic.to_owned(), partition))
            .cloned()
    }

    /// Every committed offset of a group, by topic and partition.
    pub fn group_offsets(&self, group: &str) -> Vec<((String, i32), CommittedOffset)> {
        let contents = self.contents.lock();
        contents
            .offsets
            .get(group)
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Names of the groups that hold committed offsets, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self.contents.lock().offsets.keys().cloned().collect();
        groups.sort();
        groups
    }

    /// Groups holding offsets of `topic`, with those partitions.
    pub fn commits_of_topic(&self, topic: &str) -> Vec<(String, Vec<i32>)> {
        let contents = self.contents.lock();
        contents
            .offsets
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

/// One uncompressed batch of `entries`, without producer.
fn encode_batch(entries: &[Entry], now_ms: i64) -> BytesMut {
    let records: Vec<Record> = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| Record {
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
            key: Some(entry.key.clone()),
            value: entry.value.clone(),
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
    .expect("__consumer_offsets records encode");
    batch
}

/// Calls `f(key, value)` for every record of a partition, oldest first.
fn decode_metadata<'a>(
    metadata: impl IntoIterator<Item = (&'a String, &'a Bytes)>,
) -> Vec<(String, GroupSnapshot)> {
    metadata
        .into_iter()
        .filter_map(|(group, value)| match records::decode_group_value(value) {
            Ok(snapshot) => Some((group.clone(), snapshot)),
            Err(error) => {
                tracing::warn!(group, %error, "skipping unreadable group metadata");
                None
            }
        })
        .collect()
}

/// Every record of `partition`, to its log end: a new leader's records
/// above the high watermark were written by the leader before it.
fn for_each_record(
    partition: &Partition,
    mut f: impl FnMut(Bytes, Option<Bytes>),
) -> Result<(), LogError> {
    let end = partition.log.log_end_offset();
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
