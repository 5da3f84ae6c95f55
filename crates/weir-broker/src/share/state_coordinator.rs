//! Share-partition state in `__share_group_state` (Kafka's share
//! coordinator): each share-partition's state lives in the partition
//! `hash("group:topicId:partition") % count` of that topic, as a
//! ShareSnapshot followed by ShareUpdates. The leader of such a partition
//! keeps the state of its share-partitions in memory, a shard of the
//! coordinator runtime rebuilt by replaying the log when it becomes leader,
//! and appends each change with acks=all; the caller answers once the
//! in-sync replicas hold it.
//!
//! A snapshot is written again after [`UPDATES_PER_SNAPSHOT`] updates, so a
//! share-partition's state never takes more than that many records to
//! rebuild.

use std::collections::HashMap;
use std::sync::Arc;

use weir_log::LogError;

use crate::coordinator::batches::{Entry, Item};
use crate::coordinator::{
    Applied, CoordinatorError, CoordinatorRuntime, EventOutcome, Outcome, Shard,
};
use crate::partition::{AppendError, Partition};
use crate::share::PersistedState;
use weir_coord::records;
use weir_coord::records::offsets::partition_for;
use weir_coord::records::share_state::{SharePartitionKey, ShareStateRecord};

/// The internal topic of share-partition state.
pub const SHARE_STATE_TOPIC: &str = "__share_group_state";

/// Kafka's `share.coordinator.snapshot.update.records.per.snapshot`.
pub const UPDATES_PER_SNAPSHOT: u32 = 500;

/// The `__share_group_state` partition (of `count`) holding `key`'s state.
pub fn state_partition_for(key: &SharePartitionKey, count: i32) -> i32 {
    partition_for(
        &format!("{}:{}:{}", key.group, key.topic_id, key.partition),
        count,
    )
}

/// Why a state write was refused.
#[derive(Debug, thiserror::Error)]
pub enum StateWriteError {
    /// The writer loaded the state at another state epoch: it was reset or
    /// deleted since (or initialized by another writer).
    #[error("the share-partition state epoch moved on (reset or deleted)")]
    FencedStateEpoch,
    /// The writer leads the data partition at an older leader epoch than
    /// one that wrote the state.
    #[error("a newer leader of the partition writes its state")]
    FencedLeaderEpoch,
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
}

impl StateWriteError {
    /// Kafka's error code for it.
    pub fn code(&self) -> i16 {
        match self {
            Self::FencedStateEpoch => 124, // FENCED_STATE_EPOCH
            Self::FencedLeaderEpoch => 74, // FENCED_LEADER_EPOCH
            Self::Coordinator(error) => error.code(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Stored {
    state_epoch: i32,
    /// The newest leader epoch of the data partition that wrote it.
    leader_epoch: i32,
    snapshot_epoch: u16,
    state: PersistedState,
    updates_since_snapshot: u32,
    /// The log offset of its latest snapshot: the records before it are
    /// not needed to rebuild it.
    snapshot_at: u64,
}

/// The share-partitions of one `__share_group_state` partition: the shard
/// the coordinator runtime hosts for it.
#[derive(Default)]
pub struct ShareStates {
    states: HashMap<SharePartitionKey, Stored>,
}

impl Shard for ShareStates {
    fn replay(&mut self, item: Item) {
        let Item::Record {
            key,
            value: Some(value),
            at,
            ..
        } = item
        else {
            return;
        };
        match records::share_state::decode(&key, &value) {
            Ok((key, record)) => apply(&mut self.states, key, record, at),
            Err(error) => tracing::warn!(%error, "skipping a __share_group_state record"),
        }
    }

    fn size(&self) -> usize {
        self.states.len()
    }
}

/// A state write's outcome: in the local log, with the write to await for
/// the in-sync replicas.
pub type StateWritten = EventOutcome<Result<Applied<()>, StateWriteError>>;

/// The state of the share-partitions whose `__share_group_state`
/// partition this node leads (Kafka's share coordinator).
pub struct ShareStateStore {
    runtime: CoordinatorRuntime<ShareStates>,
}

impl ShareStateStore {
    pub fn new(node_id: i32) -> Self {
        Self {
            runtime: CoordinatorRuntime::new(SHARE_STATE_TOPIC, node_id),
        }
    }

    /// This node leads `partition` now: its share-partitions are read
    /// from its log.
    pub fn take_over(&self, partition: Arc<Partition>) -> Result<usize, LogError> {
        self.runtime.load(partition)
    }

    /// Another node leads `index` now.
    pub fn hand_over(&self, index: i32) {
        self.runtime.unload(index);
    }

    /// Whether this node leads state partition `index`.
    pub fn leads(&self, index: i32) -> bool {
        self.runtime.hosts(index)
    }

    /// The state of `key` in state partition `index` and its state epoch;
    /// `None` if it was never initialized. Deleted state has start offset
    /// -1 (its epoch lives on, so that a writer from before is fenced).
    pub fn read(
        &self,
        index: i32,
        key: &SharePartitionKey,
    ) -> EventOutcome<Result<Option<(i32, PersistedState)>, StateWriteError>> {
        let key = key.clone();
        self.runtime.read(index, move |shard| {
            Ok(shard
                .states
                .get(&key)
                .map(|stored| (stored.state_epoch, stored.state.clone())))
        })
    }

    /// Writes `key`'s whole state at `state_epoch`, which must be above
    /// its last: a new start (initialization, a reset of its offsets, or a
    /// deletion with start offset -1).
    pub fn initialize(
        &self,
        index: i32,
        key: &SharePartitionKey,
        state: PersistedState,
        state_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> StateWritten {
        self.write(index, key, now_ms, move |stored| {
            if stored.is_some_and(|s| s.state_epoch >= state_epoch) {
                return Err(StateWriteError::FencedStateEpoch);
            }
            Ok(ShareStateRecord::Snapshot {
                snapshot_epoch: stored.map_or(0, |s| s.snapshot_epoch.wrapping_add(1)),
                state_epoch,
                leader_epoch,
                state,
            })
        })
    }

    /// Writes what changed in `key`'s state, by a writer that loaded it at
    /// `state_epoch`: an update, or a snapshot of the state with it applied
    /// once enough updates piled up.
    pub fn update(
        &self,
        index: i32,
        key: &SharePartitionKey,
        update: PersistedState,
        state_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> StateWritten {
        self.write(index, key, now_ms, move |stored| {
            let Some(stored) =
                stored.filter(|s| s.state_epoch == state_epoch && s.state.start_offset >= 0)
            else {
                return Err(StateWriteError::FencedStateEpoch);
            };
            if leader_epoch < stored.leader_epoch {
                return Err(StateWriteError::FencedLeaderEpoch);
            }
            if stored.updates_since_snapshot < UPDATES_PER_SNAPSHOT {
                return Ok(ShareStateRecord::Update {
                    snapshot_epoch: stored.snapshot_epoch,
                    leader_epoch,
                    state: update,
                });
            }
            let mut state = stored.state.clone();
            state.apply_update(&update);
            Ok(ShareStateRecord::Snapshot {
                snapshot_epoch: stored.snapshot_epoch.wrapping_add(1),
                state_epoch,
                leader_epoch,
                state,
            })
        })
    }

    fn write(
        &self,
        index: i32,
        key: &SharePartitionKey,
        now_ms: i64,
        record: impl FnOnce(Option<&Stored>) -> Result<ShareStateRecord, StateWriteError>
            + Send
            + 'static,
    ) -> StateWritten {
        let key = key.clone();
        self.runtime
            .write_unreplicated(index, now_ms, move |shard, _| {
                let record = record(shard.states.get(&key))?;
                Ok(Outcome::write(vec![entry(&key, &record)], ()))
            })
    }

    /// Keeps state partition `partition` (led here) from growing without
    /// end: the share-partitions whose latest snapshot is in the older half
    /// of the log get a new one (with the same state and epochs), then the
    /// log start moves up to the oldest snapshot still needed, within what
    /// the in-sync replicas hold. Returns the new log start, if it moved.
    /// The segments that go are deleted on the blocking pool.
    pub async fn prune(
        &self,
        partition: &Arc<Partition>,
        now_ms: i64,
    ) -> Result<Option<u64>, StateWriteError> {
        let start = partition.log().log_start_offset();
        let end = partition.log().log_end_offset();
        let middle = start + (end - start) / 2;
        self.runtime
            .write_unreplicated(partition.index, now_ms, move |shard, _| {
                let snapshots = shard
                    .states
                    .iter()
                    .filter(|(_, stored)| stored.snapshot_at < middle)
                    .map(|(key, stored)| {
                        let record = ShareStateRecord::Snapshot {
                            snapshot_epoch: stored.snapshot_epoch.wrapping_add(1),
                            state_epoch: stored.state_epoch,
                            leader_epoch: stored.leader_epoch,
                            state: stored.state.clone(),
                        };
                        entry(key, &record)
                    })
                    .collect();
                Ok::<_, StateWriteError>(Outcome::write(snapshots, ()))
            })
            .await?;
        // Snapshots only move up the log: what is needed now stays needed
        // by no more than this, whatever is written meanwhile.
        let needed = self
            .runtime
            .read(partition.index, move |shard| {
                Ok::<_, StateWriteError>(
                    shard
                        .states
                        .values()
                        .map(|stored| stored.snapshot_at)
                        .min()
                        .unwrap_or(end),
                )
            })
            .await?;
        let below = needed.min(partition.high_watermark());
        if below <= start {
            return Ok(None);
        }
        let moved = partition
            .delete_records(below)
            .await
            .map_err(|error| CoordinatorError::Append(AppendError::Log(error)))?;
        Ok(Some(moved))
    }
}

/// The record of `record`, ready to append.
fn entry(key: &SharePartitionKey, record: &ShareStateRecord) -> Entry {
    Entry {
        key: records::share_state::encode_key(key, record),
        value: Some(records::share_state::encode_value(record)),
    }
}

/// Applies one record read from (or written to) the log.
fn apply(
    states: &mut HashMap<SharePartitionKey, Stored>,
    key: SharePartitionKey,
    record: ShareStateRecord,
    at: u64,
) {
    match record {
        ShareStateRecord::Snapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            state,
        } => {
            let previous = states.get(&key).map_or(-1, |s| s.leader_epoch);
            // A reset (new state epoch) starts the leader epochs over.
            let leader_epoch = match states.get(&key) {
                Some(s) if s.state_epoch == state_epoch => previous.max(leader_epoch),
                _ => leader_epoch,
            };
            states.insert(
                key,
                Stored {
                    state_epoch,
                    leader_epoch,
                    snapshot_epoch,
                    state,
                    updates_since_snapshot: 0,
                    snapshot_at: at,
                },
            );
        }
        ShareStateRecord::Update {
            snapshot_epoch,
            leader_epoch,
            state,
        } => {
            // An update of an older snapshot was overtaken by a newer one.
            if let Some(stored) = states.get_mut(&key) {
                if stored.snapshot_epoch == snapshot_epoch {
                    stored.state.apply_update(&state);
                    stored.updates_since_snapshot += 1;
                    stored.leader_epoch = stored.leader_epoch.max(leader_epoch);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use weir_log::LogConfig;

    use super::*;
    use crate::share::{RecordState, StateBatch};

    fn open(dir: &std::path::Path) -> Arc<Partition> {
        let partition = Partition::open(
            dir,
            SHARE_STATE_TOPIC,
            uuid::Uuid::nil(),
            0,
            LogConfig::default(),
        )
        .unwrap();
        // The only replica: what it appends is replicated at once.
        partition.lead_for_tests(&[1], 0, 1);
        Arc::new(partition)
    }

    async fn prune(
        store: &Arc<ShareStateStore>,
        partition: &Arc<Partition>,
    ) -> Result<Option<u64>, StateWriteError> {
        store.prune(partition, 0).await
    }

    fn key(group: &str) -> SharePartitionKey {
        SharePartitionKey {
            group: group.to_owned(),
            topic_id: uuid::Uuid::nil(),
            partition: 0,
        }
    }

    fn state(start_offset: i64) -> PersistedState {
        PersistedState {
            start_offset,
            batches: Vec::new(),
        }
    }

    fn acknowledged(offset: i64) -> PersistedState {
        PersistedState {
            start_offset: offset + 1,
            batches: vec![StateBatch {
                first_offset: offset,
                last_offset: offset,
                state: RecordState::Acknowledged,
                delivery_count: 1,
            }],
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_writer_of_an_older_state_epoch_or_leader_epoch_is_fenced() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        let store = ShareStateStore::new(1);
        store.take_over(partition.clone()).unwrap();
        let k = key("g");
        let fenced = store.update(0, &k, acknowledged(0), 0, 5, 0).await;
        assert!(
            matches!(fenced, Err(StateWriteError::FencedStateEpoch)),
            "no state yet"
        );
        store.initialize(0, &k, state(0), 0, 5, 0).await.unwrap();
        store.update(0, &k, acknowledged(0), 0, 5, 0).await.unwrap();
        let older = store.update(0, &k, acknowledged(1), 0, 4, 0).await;
        assert!(matches!(older, Err(StateWriteError::FencedLeaderEpoch)));
        // A reset: a new state epoch, which an initialize must raise.
        let same = store.initialize(0, &k, state(10), 0, -1, 0).await;
        assert!(matches!(same, Err(StateWriteError::FencedStateEpoch)));
        store.initialize(0, &k, state(10), 1, -1, 0).await.unwrap();
        let stale = store.update(0, &k, acknowledged(1), 0, 5, 0).await;
        assert!(matches!(stale, Err(StateWriteError::FencedStateEpoch)));
        store
            .update(0, &k, acknowledged(10), 1, 5, 0)
            .await
            .unwrap();
        // A deletion (start offset -1) fences the writers of the epoch before.
        store.initialize(0, &k, state(-1), 2, -1, 0).await.unwrap();
        let deleted = store.update(0, &k, acknowledged(11), 2, 5, 0).await;
        assert!(matches!(deleted, Err(StateWriteError::FencedStateEpoch)));
        let reloaded = ShareStateStore::new(1);
        reloaded.take_over(partition.clone()).unwrap();
        assert_eq!(
            reloaded
                .read(0, &k)
                .await
                .unwrap()
                .map(|(e, s)| (e, s.start_offset)),
            Some((2, -1))
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn pruning_keeps_every_state_and_drops_what_snapshots_superseded() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        let store = Arc::new(ShareStateStore::new(1));
        store.take_over(partition.clone()).unwrap();
        let (hot, cold) = (key("hot"), key("cold"));
        store.initialize(0, &cold, state(0), 0, 0, 0).await.unwrap();
        store
            .update(0, &cold, acknowledged(0), 0, 0, 0)
            .await
            .unwrap();
        store.initialize(0, &hot, state(0), 0, 0, 0).await.unwrap();
        for offset in 0..(UPDATES_PER_SNAPSHOT as i64 * 3) {
            store
                .update(0, &hot, acknowledged(offset), 0, 0, 0)
                .await
                .unwrap();
        }
        let end = partition.log().log_end_offset();
        let start = prune(&store, &partition)
            .await
            .unwrap()
            .expect("the log start moved");
        assert!(start > end / 2, "log start {start} of {end}");
        let reloaded = ShareStateStore::new(1);
        reloaded.take_over(partition.clone()).unwrap();
        for k in [&hot, &cold] {
            assert_eq!(
                reloaded.read(0, k).await.unwrap(),
                store.read(0, k).await.unwrap(),
                "{k:?}"
            );
        }
        assert_eq!(
            reloaded
                .read(0, &hot)
                .await
                .unwrap()
                .unwrap()
                .1
                .start_offset,
            UPDATES_PER_SNAPSHOT as i64 * 3
        );
        assert_eq!(
            reloaded
                .read(0, &cold)
                .await
                .unwrap()
                .unwrap()
                .1
                .start_offset,
            1
        );
        // Writes go on after a prune, and a prune with nothing to gain
        // keeps the log start.
        store
            .update(0, &cold, acknowledged(1), 0, 0, 0)
            .await
            .unwrap();
        let again = prune(&store, &partition).await.unwrap();
        assert!(again.is_none_or(|s| s >= start), "{again:?}");
    }
}
