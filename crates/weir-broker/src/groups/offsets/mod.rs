//! The contents of `__consumer_offsets`: committed offsets and group
//! metadata, kept as records in Kafka's schemas. A group's records go to
//! partition `partition_for(group, N)`; the in-memory view is rebuilt from
//! those records at start.
//!
//! Transactional offset commits (TxnOffsetCommit) are records of a
//! transactional batch carrying the producer's id and epoch. They stay
//! *pending*, invisible to OffsetFetch, until a marker of that producer's
//! transaction reaches the partition: a COMMIT marker makes them committed,
//! an ABORT marker drops them. Loading the log replays the batches and the
//! markers in order, so it rebuilds the same committed and pending offsets.
//! When a transaction commits an offset for a partition that also has a
//! non-transactional commit, the later record in the log wins, as in Kafka
//! (so that compaction, which keeps the later record, loads the same state).
//!
//! Until the log cleaner exists, [`OffsetStore::checkpoint`] keeps the topic
//! small: it re-appends the live records of a partition and moves the log
//! start past everything older, so loading reads little more than the live
//! state.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use weir_log::LogError;

pub use crate::coordinator::batches::TxnProducer;
use crate::coordinator::batches::{encode_batch, for_each_item, Entry, Item};
use crate::partition::{AppendError, AppendOrigin, Appended, Partition, RequiredAcks};
use weir_coord::classic::GroupSnapshot;
use weir_coord::records;
use weir_coord::records::offsets::{CommittedOffset, RecordKey};

/// The internal topic holding group state and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `offset.metadata.max.bytes`.
pub const MAX_METADATA_BYTES: usize = 4096;

/// Records per batch when a checkpoint rewrites a partition's live state.
const CHECKPOINT_BATCH_RECORDS: usize = 500;

/// An offset with the position of its record in the log.
#[derive(Debug, Clone)]
struct Stored {
    value: CommittedOffset,
    /// The offset of the record in `__consumer_offsets`.
    at: u64,
}

type GroupOffsets = BTreeMap<(String, i32), Stored>;

/// Committed offsets, the last written metadata of every group, and the
/// offsets of transactions still open: in stripes by group, each with its
/// own lock, so that commits of groups in different stripes (and so of
/// different `__consumer_offsets` partitions) never wait for each other.
pub struct OffsetStore {
    stripes: Box<[Mutex<Contents>]>,
}

/// How many stripes the groups spread over.
const STRIPES: usize = 64;

impl Default for OffsetStore {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
        }
    }
}

fn stripe_of(group: &str) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    (hasher.hash_one(group) % STRIPES as u64) as usize
}

#[derive(Default)]
struct Contents {
    offsets: HashMap<String, GroupOffsets>,
    /// The encoded GroupMetadataValue last written for each group.
    metadata: HashMap<String, Bytes>,
    /// The live records of each consumer group (KIP-848): by key, the last
    /// value written and its log offset, as compaction would keep them.
    consumer_groups: HashMap<String, HashMap<Bytes, (u64, Bytes)>>,
    /// Transactional offset commits whose transaction has not ended: by
    /// producer id, then group.
    pending: HashMap<i64, HashMap<String, GroupOffsets>>,
    /// Offsets written here whose last writes the in-sync replicas may not
    /// hold yet: what OffsetFetch serves until the high watermark passes
    /// them. By group, then partition.
    unreplicated: HashMap<String, HashMap<(String, i32), Unreplicated>>,
}

/// The writes of one offset above the high watermark when they were made.
#[derive(Debug, Clone)]
struct Unreplicated {
    /// The offset before the first of them (`None`: none).
    before: Option<Stored>,
    /// Each write's log offset and what it left (`None`: a deletion).
    writes: Vec<(u64, Option<Stored>)>,
}

impl Unreplicated {
    /// The offset as the records below `high_watermark` leave it.
    fn visible(&self, high_watermark: u64) -> Option<&Stored> {
        self.writes
            .iter()
            .rev()
            .find(|(at, _)| *at < high_watermark)
            .map_or(self.before.as_ref(), |(_, stored)| stored.as_ref())
    }

    /// Forgets the writes the high watermark has passed; `true` once none
    /// is left.
    fn prune(&mut self, high_watermark: u64) -> bool {
        let replicated = self
            .writes
            .iter()
            .take_while(|(at, _)| *at < high_watermark)
            .count();
        if replicated > 0 {
            self.before = self.writes[replicated - 1].1.clone();
            self.writes.drain(..replicated);
        }
        self.writes.is_empty()
    }
}

/// One change to a group's offsets: a commit, or a deletion (`None`).
pub struct OffsetChange {
    pub topic: String,
    pub partition: i32,
    pub value: Option<CommittedOffset>,
}

/// Removes `key` of `group` from `map`, and the group once it has no offsets.
fn remove_offset(map: &mut HashMap<String, GroupOffsets>, group: &str, key: &(String, i32)) {
    if let Some(offsets) = map.get_mut(group) {
        offsets.remove(key);
        if offsets.is_empty() {
            map.remove(group);
        }
    }
}

impl Contents {
    /// Applies one record at log offset `at`, of the transaction of
    /// producer `transaction` if it has one.
    fn apply(&mut self, key: RecordKey, value: Option<Bytes>, at: u64, transaction: Option<i64>) {
        match key {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => {
                let key = (topic, partition);
                match value.map(|v| records::offsets::decode_offset_value(&v)) {
                    Some(Ok(value)) => {
                        let offsets = match transaction {
                            Some(producer_id) => self.pending.entry(producer_id).or_default(),
                            None => &mut self.offsets,
                        };
                        offsets
                            .entry(group)
                            .or_default()
                            .insert(key, Stored { value, at });
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%error, "skipping an unreadable offset commit")
                    }
                    // A tombstone removes the committed offset and those of
                    // open transactions, as in Kafka.
                    None => {
                        remove_offset(&mut self.offsets, &group, &key);
                        self.pending.retain(|_, groups| {
                            remove_offset(groups, &group, &key);
                            !groups.is_empty()
                        });
                    }
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
            RecordKey::ConsumerGroup { group, key } => match value {
                Some(value) => {
                    self.consumer_groups
                        .entry(group)
                        .or_default()
                        .insert(key, (at, value));
                }
                None => {
                    if let Some(records) = self.consumer_groups.get_mut(&group) {
                        records.remove(&key);
                        if records.is_empty() {
                            self.consumer_groups.remove(&group);
                        }
                    }
                }
            },
        }
    }

    /// A marker of `producer_id` at log offset `at` ends its transaction in
    /// the groups `owns` selects: the offsets it wrote before the marker
    /// become committed (`commit`) or are dropped. Records of the producer
    /// after the marker belong to its next transaction and stay pending.
    /// Returns the offsets ended.
    fn end_transaction(
        &mut self,
        producer_id: i64,
        commit: bool,
        at: u64,
        owns: impl Fn(&str) -> bool,
    ) -> usize {
        let Some(groups) = self.pending.get_mut(&producer_id) else {
            return 0;
        };
        let mut ended = Vec::new();
        groups.retain(|group, offsets| {
            if !owns(group) {
                return true;
            }
            let (done, later): (GroupOffsets, GroupOffsets) = std::mem::take(offsets)
                .into_iter()
                .partition(|(_, stored)| stored.at < at);
            *offsets = later;
            if !done.is_empty() {
                ended.push((group.clone(), done));
            }
            !offsets.is_empty()
        });
        if groups.is_empty() {
            self.pending.remove(&producer_id);
        }
        let mut count = 0;
        for (group, done) in ended {
            count += done.len();
            if !commit {
                continue;
            }
            let committed = self.offsets.entry(group).or_default();
            for (key, stored) in done {
                // The later record wins, whichever kind it is.
                if committed.get(&key).is_none_or(|c| c.at < stored.at) {
                    committed.insert(key, stored);
                }
            }
        }
        count
    }

    /// Before a plain commit or deletion of `group`'s offset `key`:
    /// remembers what OffsetFetch serves until the high watermark passes
    /// the write.
    fn track_write(&mut self, group: &str, key: &(String, i32), high_watermark: u64) {
        let current = self
            .offsets
            .get(group)
            .and_then(|offsets| offsets.get(key))
            .cloned();
        let group_writes = self.unreplicated.entry(group.to_owned()).or_default();
        let tracked = group_writes
            .entry(key.clone())
            .or_insert_with(|| Unreplicated {
                before: current,
                writes: Vec::new(),
            });
        tracked.prune(high_watermark);
    }

    /// After the write at `at` that [`track_write`](Self::track_write)
    /// announced: records what it left, and forgets the offset's writes
    /// once the high watermark has passed them all.
    fn tracked_write_done(
        &mut self,
        group: &str,
        key: &(String, i32),
        at: u64,
        high_watermark: u64,
    ) {
        let now = self
            .offsets
            .get(group)
            .and_then(|offsets| offsets.get(key))
            .cloned();
        let Some(writes) = self.unreplicated.get_mut(group) else {
            return;
        };
        if let Some(tracked) = writes.get_mut(key) {
            tracked.writes.push((at, now));
            if tracked.prune(high_watermark) {
                writes.remove(key);
            }
        }
        if writes.is_empty() {
            self.unreplicated.remove(group);
        }
    }

    /// `group`'s committed offsets as the records below `high_watermark`
    /// leave them; forgets the writes it has passed.
    fn visible_offsets(&mut self, group: &str, high_watermark: u64) -> GroupOffsets {
        let mut visible = self.offsets.get(group).cloned().unwrap_or_default();
        if let Some(writes) = self.unreplicated.get_mut(group) {
            for (key, tracked) in writes.iter() {
                match tracked.visible(high_watermark) {
                    Some(stored) => visible.insert(key.clone(), stored.clone()),
                    None => visible.remove(key),
                };
            }
            writes.retain(|_, tracked| !tracked.prune(high_watermark));
            if writes.is_empty() {
                self.unreplicated.remove(group);
            }
        }
        visible
    }

    fn replay(&mut self, item: Item) {
        match item {
            Item::Record {
                key,
                value,
                at,
                transaction,
            } => match records::offsets::decode_key(&key) {
                Ok(key) => self.apply(key, value, at, transaction),
                Err(error) => tracing::warn!(%error, "skipping an unreadable record"),
            },
            Item::Marker {
                producer_id,
                commit,
                at,
            } => {
                self.end_transaction(producer_id, commit, at, |_| true);
            }
        }
    }

    /// Takes in the contents read from another partition's log.
    fn absorb(&mut self, other: Contents) {
        self.offsets.extend(other.offsets);
        self.metadata.extend(other.metadata);
        self.consumer_groups.extend(other.consumer_groups);
        for (producer_id, groups) in other.pending {
            self.pending.entry(producer_id).or_default().extend(groups);
        }
    }

    /// Splits the contents by stripe of their groups.
    fn into_stripes(self) -> Vec<Contents> {
        let mut stripes: Vec<Contents> = (0..STRIPES).map(|_| Contents::default()).collect();
        for (group, offsets) in self.offsets {
            stripes[stripe_of(&group)].offsets.insert(group, offsets);
        }
        for (group, value) in self.metadata {
            stripes[stripe_of(&group)].metadata.insert(group, value);
        }
        for (group, records) in self.consumer_groups {
            stripes[stripe_of(&group)]
                .consumer_groups
                .insert(group, records);
        }
        for (producer_id, groups) in self.pending {
            for (group, offsets) in groups {
                stripes[stripe_of(&group)]
                    .pending
                    .entry(producer_id)
                    .or_default()
                    .insert(group, offsets);
            }
        }
        for (group, writes) in self.unreplicated {
            stripes[stripe_of(&group)]
                .unreplicated
                .insert(group, writes);
        }
        stripes
    }

    /// Drops everything of the groups `owns` selects.
    fn forget(&mut self, owns: impl Fn(&str) -> bool) {
        self.offsets.retain(|group, _| !owns(group));
        self.unreplicated.retain(|group, _| !owns(group));
        self.metadata.retain(|group, _| !owns(group));
        self.consumer_groups.retain(|group, _| !owns(group));
        self.pending.retain(|_, groups| {
            groups.retain(|group, _| !owns(group));
            !groups.is_empty()
        });
    }

    /// The pending offsets of `group`, over all its open transactions.
    fn pending_of<'a>(
        &'a self,
        group: &'a str,
    ) -> impl Iterator<Item = (&'a (String, i32), &'a Stored)> + 'a {
        self.pending
            .values()
            .filter_map(move |groups| groups.get(group))
            .flat_map(|offsets| offsets.iter())
    }

    /// The live records of the groups for which `owns` is true.
    fn live_entries(&self, owns: impl Fn(&str) -> bool) -> Vec<Entry> {
        let mut entries = Vec::new();
        for (group, records) in &self.consumer_groups {
            if owns(group) {
                entries.extend(consumer_group_entries(records));
            }
        }
        for (group, value) in &self.metadata {
            if owns(group) {
                entries.push(Entry {
                    key: records::offsets::encode_group_key(group),
                    value: Some(value.clone()),
                });
            }
        }
        for (group, offsets) in &self.offsets {
            if owns(group) {
                for ((topic, partition), stored) in offsets {
                    entries.push(Entry {
                        key: records::offsets::encode_offset_key(group, topic, *partition),
                        value: Some(records::offsets::encode_offset_value(&stored.value)),
                    });
                }
            }
        }
        entries
    }
}

/// Reads the groups and offsets of one partition's log.
fn read_partition(partition: &Partition) -> Result<(Contents, usize), LogError> {
    let mut contents = Contents::default();
    let mut count = 0usize;
    for_each_item(partition, |item| {
        count += 1;
        contents.replay(item);
    })?;
    Ok((contents, count))
}

impl OffsetStore {
    /// Rebuilds the view from the records of `__consumer_offsets`.
    pub fn load(partitions: &[Arc<Partition>]) -> Result<Self, LogError> {
        let mut contents = Contents::default();
        let mut count = 0usize;
        for partition in partitions {
            let (read, records) = read_partition(partition)?;
            contents.absorb(read);
            count += records;
        }
        tracing::info!(
            groups_with_offsets = contents.offsets.len(),
            groups_with_metadata = contents.metadata.len(),
            open_transactions = contents.pending.len(),
            records = count,
            "loaded __consumer_offsets"
        );
        Ok(Self {
            stripes: contents
                .into_stripes()
                .into_iter()
                .map(Mutex::new)
                .collect(),
        })
    }

    /// The stripe holding `group`.
    fn stripe(&self, group: &str) -> parking_lot::MutexGuard<'_, Contents> {
        self.stripes[stripe_of(group)].lock()
    }

    /// Every stripe, locked in order (so that two callers never deadlock).
    fn all_stripes(&self) -> Vec<parking_lot::MutexGuard<'_, Contents>> {
        self.stripes.iter().map(|stripe| stripe.lock()).collect()
    }

    /// This node became the leader of `partition` (one of `count`): its
    /// groups are read again from its log, which may have grown by
    /// replication since they were last read. Returns their metadata.
    pub fn reload(
        &self,
        partition: &Partition,
        count: i32,
    ) -> Result<Vec<(String, GroupSnapshot)>, LogError> {
        let owns = |group: &str| records::offsets::partition_for(group, count) == partition.index;
        // Read under every stripe's lock: a commit applied between the read
        // and the swap would otherwise vanish from the view.
        let mut stripes = self.all_stripes();
        let (fresh, _) = read_partition(partition)?;
        let loaded = decode_metadata(&fresh.metadata);
        for (contents, fresh) in stripes.iter_mut().zip(fresh.into_stripes()) {
            contents.forget(owns);
            contents.absorb(fresh);
        }
        Ok(loaded)
    }

    /// The last metadata written for each group, decoded.
    pub fn group_metadata(&self) -> Vec<(String, GroupSnapshot)> {
        self.stripes
            .iter()
            .flat_map(|stripe| decode_metadata(&stripe.lock().metadata))
            .collect()
    }

    /// Writes `changes` to the group's partition, then applies them.
    pub fn commit(
        &self,
        partition: &Partition,
        group: &str,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> Result<Option<Appended>, AppendError> {
        let entries = changes
            .iter()
            .map(|change| Entry {
                key: records::offsets::encode_offset_key(group, &change.topic, change.partition),
                value: change
                    .value
                    .as_ref()
                    .map(records::offsets::encode_offset_value),
            })
            .collect();
        self.write(partition, group, entries, now_ms, None)
    }

    /// TxnOffsetCommit: writes `offsets` as one transactional batch of
    /// `producer` to the group's partition and keeps them pending until
    /// the transaction ends. Returns where the batch went, `None` if there
    /// was nothing to write.
    pub fn commit_transactional(
        &self,
        partition: &Partition,
        group: &str,
        producer: TxnProducer,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> Result<Option<Appended>, AppendError> {
        let entries = offsets
            .iter()
            .map(|(topic, p, value)| Entry {
                key: records::offsets::encode_offset_key(group, topic, *p),
                value: Some(records::offsets::encode_offset_value(value)),
            })
            .collect();
        self.write(partition, group, entries, now_ms, Some(producer))
    }

    /// A transaction marker of `producer_id` was written at `marker_offset`
    /// to partition `index` of `count`: the transaction's offsets in that
    /// partition become committed (`commit`) or are dropped. Returns how
    /// many there were.
    pub fn complete_transaction(
        &self,
        index: i32,
        count: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: u64,
    ) -> usize {
        let owns = |group: &str| records::offsets::partition_for(group, count) == index;
        self.stripes
            .iter()
            .map(|stripe| {
                stripe
                    .lock()
                    .end_transaction(producer_id, commit, marker_offset, owns)
            })
            .sum()
    }

    /// Writes a group's metadata record, or its tombstone for `None`.
    pub fn write_group(
        &self,
        partition: &Partition,
        group: &str,
        snapshot: Option<&GroupSnapshot>,
        now_ms: i64,
    ) -> Result<Option<Appended>, AppendError> {
        let entry = Entry {
            key: records::offsets::encode_group_key(group),
            value: snapshot.map(records::offsets::encode_group_value),
        };
        self.write(partition, group, vec![entry], now_ms, None)
    }

    /// Writes a consumer group's records (KIP-848), keys and values as
    /// encoded, in one batch.
    pub fn write_consumer_group(
        &self,
        partition: &Partition,
        group: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
        now_ms: i64,
    ) -> Result<Option<Appended>, AppendError> {
        let entries = records
            .into_iter()
            .map(|(key, value)| Entry { key, value })
            .collect();
        self.write(partition, group, entries, now_ms, None)
    }

    /// The live records of the consumer groups (KIP-848) of partition
    /// `index` of `count`, each group's in log order: what a coordinator
    /// replays to continue them.
    pub fn consumer_group_records(
        &self,
        index: i32,
        count: i32,
    ) -> Vec<(String, Vec<(Bytes, Bytes)>)> {
        self.group_records(index, count, records::consumer_group::is_consumer_group_key)
    }

    /// The live records of the share groups (KIP-932) of partition `index`
    /// of `count`, each group's in log order.
    pub fn share_group_records(
        &self,
        index: i32,
        count: i32,
    ) -> Vec<(String, Vec<(Bytes, Bytes)>)> {
        self.group_records(index, count, records::share_group::is_share_group_key)
    }

    fn group_records(
        &self,
        index: i32,
        count: i32,
        of_kind: fn(i16) -> bool,
    ) -> Vec<(String, Vec<(Bytes, Bytes)>)> {
        let owns = |group: &str| records::offsets::partition_for(group, count) == index;
        let mut groups = Vec::new();
        for stripe in self.stripes.iter() {
            let contents = stripe.lock();
            for (group, records) in &contents.consumer_groups {
                if owns(group) {
                    let entries: Vec<(Bytes, Bytes)> = consumer_group_entries(records)
                        .into_iter()
                        .filter(|entry| {
                            entry.key.len() >= 2
                                && of_kind(i16::from_be_bytes([entry.key[0], entry.key[1]]))
                        })
                        .filter_map(|entry| Some((entry.key, entry.value?)))
                        .collect();
                    if !entries.is_empty() {
                        groups.push((group.clone(), entries));
                    }
                }
            }
        }
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        groups
    }

    /// Removes a group: tombstones for its offsets, those of its open
    /// transactions too (as Kafka's DeleteGroups does), and its metadata.
    pub fn delete_group(
        &self,
        partition: &Partition,
        group: &str,
        now_ms: i64,
    ) -> Result<Option<Appended>, AppendError> {
        let mut keys: Vec<(String, i32)> = self
            .group_offsets(group)
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        keys.extend(self.pending_partitions(group));
        keys.sort();
        keys.dedup();
        let mut entries: Vec<Entry> = keys
            .into_iter()
            .map(|(topic, p)| Entry {
                key: records::offsets::encode_offset_key(group, &topic, p),
                value: None,
            })
            .collect();
        if self.stripe(group).metadata.contains_key(group) {
            entries.push(Entry {
                key: records::offsets::encode_group_key(group),
                value: None,
            });
        }
        self.write(partition, group, entries, now_ms, None)
    }

    /// Appends `entries` as one batch (a transactional one of `producer`)
    /// and applies them to the view. Refused, as an acks=all produce is,
    /// while the ISR is smaller than `min.insync.replicas`: the caller
    /// answers once the in-sync replicas hold the batch.
    fn write(
        &self,
        partition: &Partition,
        group: &str,
        entries: Vec<Entry>,
        now_ms: i64,
        producer: Option<TxnProducer>,
    ) -> Result<Option<Appended>, AppendError> {
        if entries.is_empty() {
            return Ok(None);
        }
        let batch = encode_batch(&entries, now_ms, producer);
        let leader_epoch = partition.replica_state().leader_epoch;
        // The group's lock spans the append so that the view applies the
        // group's changes in log order.
        let mut contents = self.stripe(group);
        let appended = partition.append_from(
            &batch,
            leader_epoch,
            AppendOrigin::Coordinator,
            RequiredAcks::All,
        )?;
        let high_watermark = partition.high_watermark();
        for (i, entry) in entries.into_iter().enumerate() {
            let key = records::offsets::decode_key(&entry.key).expect("keys written here decode");
            let at = appended.base_offset + i as u64;
            let tracked = match (&key, producer) {
                (
                    RecordKey::Offset {
                        group,
                        topic,
                        partition,
                    },
                    None,
                ) => Some((group.clone(), (topic.clone(), *partition))),
                _ => None,
            };
            if let Some((group, key)) = &tracked {
                contents.track_write(group, key, high_watermark);
            }
            contents.apply(key, entry.value, at, producer.map(|p| p.id));
            if let Some((group, key)) = &tracked {
                contents.tracked_write_done(group, key, at, high_watermark);
            }
        }
        Ok(Some(appended))
    }

    /// Re-appends the live records of the groups stored in `partition`
    /// (index `index` of `count`), then moves its log start past everything
    /// older. A crash before the log start moves leaves both copies, which
    /// load to the same state. Returns the records rewritten. Skipped while
    /// a transaction has offsets pending there: its records and marker must
    /// stay in the log.
    pub fn checkpoint(
        &self,
        partition: &Partition,
        count: i32,
        now_ms: i64,
    ) -> Result<usize, AppendError> {
        // Every stripe stays locked until the rewrite is done: a commit
        // appended between the copy and the rewrite would be overwritten
        // by its older value.
        let stripes = self.all_stripes();
        let owns = |group: &str| records::offsets::partition_for(group, count) == partition.index;
        let open = stripes.iter().any(|contents| {
            contents
                .pending
                .values()
                .any(|groups| groups.keys().any(|g| owns(g)))
        });
        if open {
            return Ok(0);
        }
        let entries: Vec<Entry> = stripes
            .iter()
            .flat_map(|contents| contents.live_entries(owns))
            .collect();
        let rewrite_start = partition.log().log_end_offset();
        let leader_epoch = partition.replica_state().leader_epoch;
        for chunk in entries.chunks(CHECKPOINT_BATCH_RECORDS) {
            partition.append_in_place(&encode_batch(chunk, now_ms, None), leader_epoch)?;
        }
        partition.delete_records_before(rewrite_start)?;
        Ok(entries.len())
    }

    /// How many live records the groups of partition `index` of `count`
    /// hold, pending transactional offsets included.
    pub fn live_records(&self, index: i32, count: i32) -> usize {
        let owns = |group: &str| records::offsets::partition_for(group, count) == index;
        let offsets = |map: &HashMap<String, GroupOffsets>| {
            map.iter()
                .filter(|(g, _)| owns(g))
                .map(|(_, o)| o.len())
                .sum::<usize>()
        };
        self.stripes
            .iter()
            .map(|stripe| {
                let contents = stripe.lock();
                contents.metadata.keys().filter(|g| owns(g)).count()
                    + contents
                        .consumer_groups
                        .iter()
                        .filter(|(g, _)| owns(g))
                        .map(|(_, records)| records.len())
                        .sum::<usize>()
                    + offsets(&contents.offsets)
                    + contents.pending.values().map(offsets).sum::<usize>()
            })
            .sum()
    }

    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        let contents = self.stripe(group);
        contents
            .offsets
            .get(group)?
            .get(&(topic.to_owned(), partition))
            .map(|stored| stored.value.clone())
    }

    /// A group's committed offsets as OffsetFetch serves them: as the
    /// records below `high_watermark` (of the group's partition) leave
    /// them, so that a commit the in-sync replicas may not hold yet is never
    /// served.
    pub fn replicated_offsets(
        &self,
        group: &str,
        high_watermark: u64,
    ) -> BTreeMap<(String, i32), CommittedOffset> {
        self.stripe(group)
            .visible_offsets(group, high_watermark)
            .into_iter()
            .map(|(key, stored)| (key, stored.value))
            .collect()
    }

    /// Every committed offset of a group, by topic and partition.
    pub fn group_offsets(&self, group: &str) -> Vec<((String, i32), CommittedOffset)> {
        let contents = self.stripe(group);
        contents
            .offsets
            .get(group)
            .map(|o| {
                o.iter()
                    .map(|(k, stored)| (k.clone(), stored.value.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether an open transaction has an offset of `group` for the
    /// partition pending.
    pub fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_owned(), partition);
        self.stripe(group)
            .pending
            .values()
            .any(|groups| groups.get(group).is_some_and(|o| o.contains_key(&key)))
    }

    /// Whether an open transaction has offsets of `group` pending.
    pub fn has_open_transactions(&self, group: &str) -> bool {
        self.stripe(group)
            .pending
            .values()
            .any(|groups| groups.contains_key(group))
    }

    /// The partitions for which open transactions have offsets of `group`
    /// pending, sorted.
    pub fn pending_partitions(&self, group: &str) -> Vec<(String, i32)> {
        let contents = self.stripe(group);
        let mut keys: Vec<(String, i32)> =
            contents.pending_of(group).map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The offsets of `group` pending in the open transaction of
    /// `producer_id`.
    pub fn pending_offsets(
        &self,
        group: &str,
        producer_id: i64,
    ) -> Vec<((String, i32), CommittedOffset)> {
        let contents = self.stripe(group);
        contents
            .pending
            .get(&producer_id)
            .and_then(|groups| groups.get(group))
            .map(|o| {
                o.iter()
                    .map(|(k, stored)| (k.clone(), stored.value.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Names of the groups that hold committed offsets or offsets of open
    /// transactions, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = Vec::new();
        for stripe in self.stripes.iter() {
            let contents = stripe.lock();
            groups.extend(
                contents
                    .offsets
                    .keys()
                    .chain(contents.pending.values().flat_map(|groups| groups.keys()))
                    .cloned(),
            );
        }
        groups.sort();
        groups.dedup();
        groups
    }

    /// Groups holding offsets of `topic`, committed or pending, with those
    /// partitions.
    pub fn commits_of_topic(&self, topic: &str) -> Vec<(String, Vec<i32>)> {
        let mut found: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for stripe in self.stripes.iter() {
            let contents = stripe.lock();
            let all = contents
                .offsets
                .iter()
                .chain(contents.pending.values().flat_map(|groups| groups.iter()));
            for (group, offsets) in all {
                for (t, p) in offsets.keys() {
                    if t == topic {
                        found.entry(group.clone()).or_default().push(*p);
                    }
                }
            }
        }
        found
            .into_iter()
            .map(|(group, mut partitions)| {
                partitions.sort_unstable();
                partitions.dedup();
                (group, partitions)
            })
            .collect()
    }
}

/// A consumer group's live records as entries, in log order.
fn consumer_group_entries(records: &HashMap<Bytes, (u64, Bytes)>) -> Vec<Entry> {
    let mut ordered: Vec<(&u64, &Bytes, &Bytes)> = records
        .iter()
        .map(|(key, (at, value))| (at, key, value))
        .collect();
    ordered.sort_by_key(|(at, _, _)| **at);
    ordered
        .into_iter()
        .map(|(_, key, value)| Entry {
            key: key.clone(),
            value: Some(value.clone()),
        })
        .collect()
}

fn decode_metadata<'a>(
    metadata: impl IntoIterator<Item = (&'a String, &'a Bytes)>,
) -> Vec<(String, GroupSnapshot)> {
    metadata
        .into_iter()
        .filter_map(
            |(group, value)| match records::offsets::decode_group_value(value) {
                Ok(snapshot) => Some((group.clone(), snapshot)),
                Err(error) => {
                    tracing::warn!(group, %error, "skipping unreadable group metadata");
                    None
                }
            },
        )
        .collect()
}

/// The record of a classic group's metadata (`None`: its tombstone), to
/// write in one batch with consumer group records when a group changes kind.
pub(crate) fn classic_group_entry(
    group: &str,
    snapshot: Option<&GroupSnapshot>,
) -> (Bytes, Option<Bytes>) {
    (
        records::offsets::encode_group_key(group),
        snapshot.map(records::offsets::encode_group_value),
    )
}
