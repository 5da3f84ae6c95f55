//! The contents of `__consumer_offsets`: committed offsets and group
//! metadata, kept as records in Kafka's schemas. A group's records go to
//! partition `partition_for(group, N)`; the leader of a partition hosts its
//! [`GroupShard`] on the coordinator runtime, rebuilt from the partition's
//! records when it comes to lead it, and writes through it.
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
use std::future::Future;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use weir_log::LogError;

pub use crate::coordinator::batches::TxnProducer;
use crate::coordinator::batches::{encode_batch, for_each_item, Entry, Item};
use crate::coordinator::{
    CoordinatorError, CoordinatorRuntime, EventOutcome, Outcome, Shard, ShardContext, ShardTurn,
};
use crate::groups::classic::ClassicGroups;
use crate::groups::consumer::ConsumerGroups;
use crate::groups::share::ShareGroups;
use crate::partition::{AppendError, Partition, ReplicatedWrite};
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

/// The groups and offsets of the `__consumer_offsets` partitions led here:
/// one [`GroupShard`] per partition on the coordinator runtime, so that
/// commits to different partitions never wait for each other and a
/// partition's writes apply in log order.
pub struct OffsetStore {
    runtime: CoordinatorRuntime<GroupShard>,
    /// `__consumer_offsets`' partition count, which never changes once the
    /// topic exists (0 before).
    partition_count: AtomicI32,
}

/// What one `__consumer_offsets` partition stores: committed offsets, the
/// last written metadata of every group, the records of consumer and share
/// groups, and the offsets of transactions still open.
#[derive(Default)]
pub struct GroupShard {
    /// The classic groups stored here, their engines built from their
    /// metadata records when the partition is loaded.
    pub(crate) classic: ClassicGroups,
    /// The consumer groups (KIP-848) stored here, their engines built from
    /// their records when the partition is loaded.
    pub(crate) consumer: ConsumerGroups,
    /// The share groups (KIP-932) stored here, their engines built from
    /// their records when the partition is loaded.
    pub(crate) share: ShareGroups,
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

/// What OffsetFetch reads of a group.
pub struct FetchedOffsets {
    /// The committed offsets the in-sync replicas hold.
    pub committed: BTreeMap<(String, i32), CommittedOffset>,
    /// The partitions a transaction has an offset pending for, sorted.
    pub pending: Vec<(String, i32)>,
}

/// Why OffsetFetch read nothing of a group.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The consumer group's member named is not one at that epoch.
    #[error(transparent)]
    Member(#[from] weir_coord::consumer::ConsumerGroupError),
    #[error(transparent)]
    Coordinator(CoordinatorError),
}

impl FetchError {
    pub fn code(&self) -> i16 {
        match self {
            Self::Member(error) => error.code(),
            Self::Coordinator(error) => error.code(),
        }
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

impl GroupShard {
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

    /// A marker of `producer_id` at log offset `at` ends its transaction:
    /// the offsets it wrote before the marker
    /// become committed (`commit`) or are dropped. Records of the producer
    /// after the marker belong to its next transaction and stay pending.
    /// Returns the offsets ended.
    fn end_transaction(&mut self, producer_id: i64, commit: bool, at: u64) -> usize {
        let Some(groups) = self.pending.get_mut(&producer_id) else {
            return 0;
        };
        let mut ended = Vec::new();
        groups.retain(|group, offsets| {
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
    /// leave them.
    fn visible_offsets_now(&self, group: &str, high_watermark: u64) -> GroupOffsets {
        let mut visible = self.offsets.get(group).cloned().unwrap_or_default();
        for (key, tracked) in self.unreplicated.get(group).into_iter().flatten() {
            match tracked.visible(high_watermark) {
                Some(stored) => visible.insert(key.clone(), stored.clone()),
                None => visible.remove(key),
            };
        }
        visible
    }

    /// Forgets `group`'s writes the high watermark has passed.
    fn forget_replicated(&mut self, group: &str, high_watermark: u64) {
        if let Some(writes) = self.unreplicated.get_mut(group) {
            writes.retain(|_, tracked| !tracked.prune(high_watermark));
            if writes.is_empty() {
                self.unreplicated.remove(group);
            }
        }
    }

    fn replay_item(&mut self, item: Item) {
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
                self.end_transaction(producer_id, commit, at);
            }
        }
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

    /// The shard of `partition`, read from its log.
    pub fn read(partition: &Partition) -> Result<Self, LogError> {
        let mut shard = Self::default();
        for_each_item(partition, |item| shard.replay_item(item))?;
        Ok(shard)
    }

    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.offsets
            .get(group)?
            .get(&(topic.to_owned(), partition))
            .map(|stored| stored.value.clone())
    }

    /// A group's committed offsets as OffsetFetch serves them: as the
    /// records below `high_watermark` leave them, so that a commit the
    /// in-sync replicas may not hold yet is never served.
    pub fn replicated_offsets(
        &mut self,
        group: &str,
        high_watermark: u64,
    ) -> BTreeMap<(String, i32), CommittedOffset> {
        let served = self.served_offsets(group, high_watermark);
        self.forget_replicated(group, high_watermark);
        served
    }

    /// Every committed offset of a group, by topic and partition.
    pub(crate) fn group_offsets(&self, group: &str) -> Vec<((String, i32), CommittedOffset)> {
        self.offsets
            .get(group)
            .into_iter()
            .flatten()
            .map(|(k, stored)| (k.clone(), stored.value.clone()))
            .collect()
    }

    /// Whether an open transaction has an offset of `group` for the
    /// partition pending.
    pub(crate) fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending_of(group)
            .any(|((t, p), _)| t == topic && *p == partition)
    }

    /// Whether an open transaction has offsets of `group` pending.
    pub(crate) fn has_open_transactions(&self, group: &str) -> bool {
        self.pending_of(group).next().is_some()
    }

    /// The partitions for which open transactions have offsets of `group`
    /// pending, sorted.
    pub(crate) fn pending_partitions(&self, group: &str) -> Vec<(String, i32)> {
        let mut keys: Vec<(String, i32)> = self.pending_of(group).map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The groups that hold committed offsets or offsets of open
    /// transactions, each once.
    pub(crate) fn groups_with_offsets(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .offsets
            .keys()
            .chain(self.pending.values().flat_map(|groups| groups.keys()))
            .cloned()
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    /// [`replicated_offsets`](Self::replicated_offsets), without forgetting
    /// anything.
    pub fn served_offsets(
        &self,
        group: &str,
        high_watermark: u64,
    ) -> BTreeMap<(String, i32), CommittedOffset> {
        self.visible_offsets_now(group, high_watermark)
            .into_iter()
            .map(|(key, stored)| (key, stored.value))
            .collect()
    }

    /// The live records of every group.
    fn live_entries(&self) -> Vec<Entry> {
        let mut entries = Vec::new();
        for records in self.consumer_groups.values() {
            entries.extend(consumer_group_entries(records));
        }
        for (group, value) in &self.metadata {
            entries.push(Entry {
                key: records::offsets::encode_group_key(group),
                value: Some(value.clone()),
            });
        }
        for (group, offsets) in &self.offsets {
            for ((topic, partition), stored) in offsets {
                entries.push(Entry {
                    key: records::offsets::encode_offset_key(group, topic, *partition),
                    value: Some(records::offsets::encode_offset_value(&stored.value)),
                });
            }
        }
        entries
    }

    /// How many live records the partition holds, pending transactional
    /// offsets included.
    fn live_records(&self) -> usize {
        let offsets =
            |map: &HashMap<String, GroupOffsets>| map.values().map(BTreeMap::len).sum::<usize>();
        self.metadata.len()
            + self
                .consumer_groups
                .values()
                .map(HashMap::len)
                .sum::<usize>()
            + offsets(&self.offsets)
            + self.pending.values().map(offsets).sum::<usize>()
    }

    /// The tombstones that remove `group`: its offsets, those of its open
    /// transactions too (as Kafka's DeleteGroups does), and its metadata.
    pub(crate) fn group_tombstones(&self, group: &str) -> Vec<Entry> {
        let mut keys: Vec<&(String, i32)> = self
            .offsets
            .get(group)
            .into_iter()
            .flat_map(|offsets| offsets.keys())
            .chain(self.pending_of(group).map(|(key, _)| key))
            .collect();
        keys.sort();
        keys.dedup();
        let mut entries: Vec<Entry> = keys
            .into_iter()
            .map(|(topic, p)| Entry {
                key: records::offsets::encode_offset_key(group, topic, *p),
                value: None,
            })
            .collect();
        if self.metadata.contains_key(group) {
            entries.push(Entry {
                key: records::offsets::encode_group_key(group),
                value: None,
            });
        }
        entries
    }

    /// Re-appends the live records of the partition, then moves its log
    /// start past everything older. A crash before the log start moves
    /// leaves both copies, which load to the same state. Returns the
    /// records rewritten. Skipped while a transaction has offsets pending
    /// there: its records and marker must stay in the log.
    fn checkpoint(&self, context: &ShardContext<'_>, now_ms: i64) -> Result<usize, AppendError> {
        if !self.pending.is_empty() {
            return Ok(0);
        }
        let partition = context.partition;
        let entries = self.live_entries();
        let rewrite_start = partition.log().log_end_offset();
        for chunk in entries.chunks(CHECKPOINT_BATCH_RECORDS) {
            partition.append_in_place(&encode_batch(chunk, now_ms, None), context.leader_epoch)?;
        }
        partition.delete_records_before(rewrite_start)?;
        Ok(entries.len())
    }

    /// The classic groups' last metadata, as their engines are loaded.
    pub(crate) fn classic_snapshots(&self) -> Vec<(String, GroupSnapshot)> {
        decode_metadata(&self.metadata)
    }

    /// The consumer or share groups (as `of_kind` selects their record
    /// keys) with live records here.
    pub(crate) fn group_names(&self, of_kind: fn(i16) -> bool) -> Vec<String> {
        self.consumer_groups
            .iter()
            .filter(|(_, records)| {
                records
                    .keys()
                    .any(|key| key.len() >= 2 && of_kind(i16::from_be_bytes([key[0], key[1]])))
            })
            .map(|(group, _)| group.clone())
            .collect()
    }

    /// The live records of `group` (a consumer or share group) whose keys
    /// `of_kind` selects, in log order.
    pub(crate) fn records_of_group(&self, group: &str, of_kind: fn(i16) -> bool) -> Vec<Entry> {
        self.consumer_groups
            .get(group)
            .map(|records| of_kind_only(consumer_group_entries(records), of_kind))
            .unwrap_or_default()
    }
}

impl Shard for GroupShard {
    fn replay(&mut self, item: Item) {
        self.replay_item(item);
    }

    /// A plain commit or deletion of an offset is tracked until the high
    /// watermark passes it, so that OffsetFetch never serves it before.
    fn replay_written(&mut self, item: Item, high_watermark: u64) {
        let Item::Record {
            key,
            value,
            at,
            transaction: None,
        } = &item
        else {
            return self.replay_item(item);
        };
        let Ok(RecordKey::Offset {
            group,
            topic,
            partition,
        }) = records::offsets::decode_key(key)
        else {
            return self.replay_item(item);
        };
        let tracked = (topic, partition);
        self.track_write(&group, &tracked, high_watermark);
        let key = RecordKey::Offset {
            group: group.clone(),
            topic: tracked.0.clone(),
            partition,
        };
        self.apply(key, value.clone(), *at, None);
        self.tracked_write_done(&group, &tracked, *at, high_watermark);
    }

    fn size(&self) -> usize {
        self.live_records()
    }
}

impl OffsetStore {
    pub fn new(node_id: i32) -> Self {
        Self {
            runtime: CoordinatorRuntime::new(OFFSETS_TOPIC, node_id),
            partition_count: AtomicI32::new(0),
        }
    }

    /// The runtime hosting the shards, for the group hosts' events.
    pub(crate) fn runtime(&self) -> &CoordinatorRuntime<GroupShard> {
        &self.runtime
    }

    /// The partition storing `group`, once `__consumer_offsets` exists.
    pub(crate) fn index_of(&self, group: &str) -> Option<i32> {
        match self.partition_count.load(Ordering::Acquire) {
            0 => None,
            count => Some(records::offsets::partition_for(group, count)),
        }
    }

    /// Runs `op` on the shard of `group`'s partition in its turn; `None`
    /// before `__consumer_offsets` exists.
    pub(crate) fn on_group_shard<R: Send + 'static>(
        &self,
        group: &str,
        op: impl FnOnce(&mut GroupTurn<'_>, &ShardContext<'_>) -> R + Send + 'static,
    ) -> Option<EventOutcome<Result<R, CoordinatorError>>> {
        let index = self.index_of(group)?;
        Some(
            self.runtime
                .run(index, move |shard, context| Ok(op(shard, context))),
        )
    }

    /// What OffsetFetch reads of `group`, in one turn of its shard: its
    /// committed offsets as the in-sync replicas hold them (a commit not
    /// acknowledged yet may still be lost with this coordinator), and the
    /// partitions a transaction has an offset pending for. A consumer
    /// group's `member` (id and epoch), when named, is checked first.
    pub fn fetch(
        &self,
        group: &str,
        member: Option<(Option<String>, i32)>,
    ) -> impl Future<Output = Result<FetchedOffsets, FetchError>> + Send + 'static {
        let name = group.to_owned();
        let turn = self.on_group_shard(group, move |shard, context| {
            if let Some((member_id, member_epoch)) = &member {
                let checked = shard.consumer.validate_offset_fetch(
                    &name,
                    member_id.as_deref(),
                    *member_epoch,
                );
                if let Some(Err(error)) = checked {
                    return Err(FetchError::Member(error));
                }
            }
            let high_watermark = context.partition.high_watermark();
            Ok(FetchedOffsets {
                committed: shard.replicated_offsets(&name, high_watermark),
                pending: shard.pending_partitions(&name),
            })
        });
        async move {
            match turn {
                Some(turn) => turn.await.map_err(FetchError::Coordinator)?,
                None => Err(FetchError::Coordinator(CoordinatorError::NotCoordinator)),
            }
        }
    }

    /// Whether this broker coordinates `group`: it leads the group's
    /// partition of the offsets topic and has loaded it.
    pub fn coordinates(&self, group: &str) -> bool {
        self.inspect(group, |_| ()).is_some()
    }

    /// Runs `read` on the shard of `group`'s partition, if it is led here,
    /// at once, between two of its events.
    pub(crate) fn inspect<R>(&self, group: &str, read: impl FnOnce(&GroupShard) -> R) -> Option<R> {
        self.runtime.inspect(self.index_of(group)?, read)
    }

    /// This node leads `partition` (one of `count`) now: its groups and
    /// offsets are read from its log, then `loaded` builds the groups'
    /// engines before any event reaches the shard. Returns the number of
    /// live records. Reads the log where it is called, which must not be a
    /// runtime worker.
    pub fn load(
        &self,
        partition: Arc<Partition>,
        count: i32,
        loaded: impl FnOnce(&mut GroupShard),
    ) -> Result<usize, LogError> {
        self.partition_count.store(count, Ordering::Release);
        let index = partition.index;
        let records = self.runtime.load_with(partition, loaded)?;
        tracing::debug!(
            partition = index,
            records,
            "loaded a __consumer_offsets partition"
        );
        Ok(records)
    }

    /// Another node leads partition `index` now.
    pub fn unload(&self, index: i32) {
        self.runtime.unload(index);
    }

    /// Whether partition `index` is led, and its groups loaded, here.
    pub fn hosts(&self, index: i32) -> bool {
        self.runtime.hosts(index)
    }

    /// The partitions whose groups are loaded here, in order.
    pub fn hosted(&self) -> Vec<i32> {
        self.runtime.hosted()
    }

    /// Writes `changes` to the group's partition, then applies them. The
    /// caller answers once the returned write is replicated.
    pub fn commit(
        &self,
        group: &str,
        changes: Vec<OffsetChange>,
        now_ms: i64,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, CoordinatorError>> + Send + 'static
    {
        let entries = commit_entries(group, &changes);
        self.write_to_group(group, None, now_ms, |_| entries)
    }

    /// TxnOffsetCommit: writes `offsets` as one transactional batch of
    /// `producer` to the group's partition and keeps them pending until
    /// the transaction ends.
    pub fn commit_transactional(
        &self,
        group: &str,
        producer: TxnProducer,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, CoordinatorError>> + Send + 'static
    {
        let entries = offsets
            .iter()
            .map(|(topic, p, value)| Entry {
                key: records::offsets::encode_offset_key(group, topic, *p),
                value: Some(records::offsets::encode_offset_value(value)),
            })
            .collect();
        self.write_to_group(group, Some(producer), now_ms, |_| entries)
    }

    /// A transaction marker of `producer_id` was written at `marker_offset`
    /// to partition `index`: the transaction's offsets there become
    /// committed (`commit`) or are dropped, in the shard's turn. Gives how
    /// many there were.
    pub fn complete_transaction(
        &self,
        index: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: u64,
    ) -> impl Future<Output = usize> + Send + 'static {
        let ended = self.runtime.write_unreplicated(index, 0, move |shard, _| {
            let ended = shard.end_transaction(producer_id, commit, marker_offset);
            Ok::<_, CoordinatorError>(Outcome::answer(ended))
        });
        async move { ended.await.map_or(0, |applied| applied.result) }
    }

    /// Removes a group: tombstones for its offsets, those of its open
    /// transactions too (as Kafka's DeleteGroups does), and its metadata.
    pub fn delete_group(
        &self,
        group: &str,
        now_ms: i64,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, CoordinatorError>> + Send + 'static
    {
        let group_name = group.to_owned();
        self.write_to_group(group, None, now_ms, move |shard| {
            shard.group_tombstones(&group_name)
        })
    }

    /// Appends the entries `records` gives, as one batch (a transactional
    /// one of `producer`), to the partition of `group` in its shard's turn,
    /// and applies them there. Refused, as an acks=all produce is, while
    /// the ISR is smaller than `min.insync.replicas`. The event is queued
    /// here; the future gives the write the caller awaits before it
    /// answers (`None`: nothing to write).
    fn write_to_group(
        &self,
        group: &str,
        producer: Option<TxnProducer>,
        now_ms: i64,
        records: impl FnOnce(&GroupShard) -> Vec<Entry> + Send + 'static,
    ) -> impl Future<Output = Result<Option<ReplicatedWrite>, CoordinatorError>> + Send + 'static
    {
        let turn = self.index_of(group).map(|index| {
            self.runtime
                .write_unreplicated(index, now_ms, move |shard, _| {
                    Ok::<_, CoordinatorError>(Outcome {
                        records: records(shard),
                        producer,
                        result: (),
                    })
                })
        });
        async move {
            let applied = turn.ok_or(CoordinatorError::NotCoordinator)?.await?;
            Ok(applied.write)
        }
    }

    /// Rewrites the live records of partition `index` and moves its log
    /// start past the older ones (see [`GroupShard::checkpoint`]). Returns
    /// the records rewritten.
    pub fn checkpoint(
        &self,
        index: i32,
        now_ms: i64,
    ) -> impl Future<Output = Result<usize, CoordinatorError>> + Send + 'static {
        let turn = self
            .runtime
            .write_unreplicated(index, now_ms, move |shard, context| {
                let rewritten = shard.checkpoint(context, now_ms)?;
                Ok::<_, CoordinatorError>(Outcome::answer(rewritten))
            });
        async move { turn.await.map(|applied| applied.result) }
    }

    /// How many live records the groups of partition `index` hold, pending
    /// transactional offsets included.
    pub fn live_records(&self, index: i32) -> usize {
        self.runtime
            .inspect(index, |shard| shard.live_records())
            .unwrap_or(0)
    }

    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.inspect(group, |shard| shard.committed(group, topic, partition))
            .flatten()
    }

    /// Every committed offset of a group, by topic and partition.
    pub fn group_offsets(&self, group: &str) -> Vec<((String, i32), CommittedOffset)> {
        self.inspect(group, |shard| shard.group_offsets(group))
            .unwrap_or_default()
    }

    /// Whether an open transaction has an offset of `group` for the
    /// partition pending.
    pub fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.inspect(group, |shard| shard.has_pending(group, topic, partition))
            .unwrap_or(false)
    }

    /// Whether an open transaction has offsets of `group` pending.
    pub fn has_open_transactions(&self, group: &str) -> bool {
        self.inspect(group, |shard| shard.has_open_transactions(group))
            .unwrap_or(false)
    }

    /// The partitions for which open transactions have offsets of `group`
    /// pending, sorted.
    pub fn pending_partitions(&self, group: &str) -> Vec<(String, i32)> {
        self.inspect(group, |shard| shard.pending_partitions(group))
            .unwrap_or_default()
    }

    /// The offsets of `group` pending in the open transaction of
    /// `producer_id`.
    pub fn pending_offsets(
        &self,
        group: &str,
        producer_id: i64,
    ) -> Vec<((String, i32), CommittedOffset)> {
        self.inspect(group, |shard| {
            shard
                .pending
                .get(&producer_id)
                .and_then(|groups| groups.get(group))
                .map(|o| {
                    o.iter()
                        .map(|(k, stored)| (k.clone(), stored.value.clone()))
                        .collect()
                })
                .unwrap_or_default()
        })
        .unwrap_or_default()
    }

    /// Names of the groups led here that hold committed offsets or offsets
    /// of open transactions, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .runtime
            .inspect_all(|_, shard| shard.groups_with_offsets())
            .into_iter()
            .flatten()
            .collect();
        groups.sort();
        groups
    }

    /// Groups led here holding offsets of `topic`, committed or pending,
    /// with those partitions.
    pub fn commits_of_topic(&self, topic: &str) -> Vec<(String, Vec<i32>)> {
        let mut found: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        self.runtime.inspect_all(|_, shard| {
            let all = shard
                .offsets
                .iter()
                .chain(shard.pending.values().flat_map(|groups| groups.iter()));
            for (group, offsets) in all {
                for (t, p) in offsets.keys() {
                    if t == topic {
                        found.entry(group.clone()).or_default().push(*p);
                    }
                }
            }
        });
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

/// A group shard in an event's turn.
pub(crate) type GroupTurn<'a> = ShardTurn<'a, GroupShard>;

/// Appends `records` (as one batch, a transactional one of `producer`)
/// through `shard`, in an event that holds no part of the shard out: the
/// shard is let go while the partition writes. The write for the caller to
/// await before it answers, `None` when there is nothing to write.
pub(crate) fn write(
    shard: &mut GroupTurn<'_>,
    context: &ShardContext<'_>,
    records: &[Entry],
    producer: Option<TxnProducer>,
    now_ms: i64,
) -> Result<Option<ReplicatedWrite>, CoordinatorError> {
    if records.is_empty() {
        return Ok(None);
    }
    shard.append(context, records, producer, now_ms).map(Some)
}

/// The records of a commit of `group`'s offsets.
pub(crate) fn commit_entries(group: &str, changes: &[OffsetChange]) -> Vec<Entry> {
    changes
        .iter()
        .map(|change| Entry {
            key: records::offsets::encode_offset_key(group, &change.topic, change.partition),
            value: change
                .value
                .as_ref()
                .map(records::offsets::encode_offset_value),
        })
        .collect()
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

/// The entries whose record keys `of_kind` selects.
fn of_kind_only(entries: Vec<Entry>, of_kind: fn(i16) -> bool) -> Vec<Entry> {
    entries
        .into_iter()
        .filter(|entry| {
            entry.key.len() >= 2 && of_kind(i16::from_be_bytes([entry.key[0], entry.key[1]]))
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

/// The record of a classic group's metadata (`None`: its tombstone).
pub(crate) fn group_entry(group: &str, snapshot: Option<&GroupSnapshot>) -> Entry {
    Entry {
        key: records::offsets::encode_group_key(group),
        value: snapshot.map(records::offsets::encode_group_value),
    }
}
