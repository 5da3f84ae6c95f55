//! Share-partition state in `__share_group_state` (Kafka's share
//! coordinator): each share-partition's state lives in the partition
//! `hash("group:topicId:partition") % count` of that topic, as a
//! ShareSnapshot followed by ShareUpdates. The leader of such a partition
//! keeps the state of its share-partitions in memory, rebuilt by replaying
//! the log when it becomes leader, and appends each change with acks=all;
//! the caller answers once the in-sync replicas hold it.
//!
//! A snapshot is written again after [`UPDATES_PER_SNAPSHOT`] updates, so a
//! share-partition's state never takes more than that many records to
//! rebuild.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use weir_log::LogError;

use crate::groups::offsets::{encode_batch, for_each_item, Entry, Item};
use crate::partition::{AppendError, AppendOrigin, Partition, ReplicatedWrite, RequiredAcks};
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
    Append(#[from] AppendError),
}

impl StateWriteError {
    /// Kafka's error code for it.
    pub fn code(&self) -> i16 {
        match self {
            Self::FencedStateEpoch => 124, // FENCED_STATE_EPOCH
            Self::FencedLeaderEpoch => 74, // FENCED_LEADER_EPOCH
            Self::Append(_) => 15,         // COORDINATOR_NOT_AVAILABLE
        }
    }
}

#[derive(Debug, Clone)]
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

/// The share-partitions of one `__share_group_state` partition.
type PartitionStates = Arc<Mutex<HashMap<SharePartitionKey, Stored>>>;

/// The state of the share-partitions whose `__share_group_state`
/// partition this node leads.
#[derive(Default)]
pub struct ShareStateStore {
    /// By `__share_group_state` partition: its share-partitions. A lock per
    /// partition, held across its appends so they apply in log order.
    partitions: Mutex<HashMap<i32, PartitionStates>>,
}

impl ShareStateStore {
    /// This node leads `partition` now: its share-partitions are read
    /// from its log.
    pub fn take_over(&self, partition: &Partition) -> Result<usize, LogError> {
        let mut states: HashMap<SharePartitionKey, Stored> = HashMap::new();
        for_each_item(partition, |item| {
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
                Ok((key, record)) => apply(&mut states, key, record, at),
                Err(error) => tracing::warn!(%error, "skipping a __share_group_state record"),
            }
        })?;
        let count = states.len();
        self.partitions
            .lock()
            .insert(partition.index, Arc::new(Mutex::new(states)));
        Ok(count)
    }

    /// Another node leads `index` now.
    pub fn hand_over(&self, index: i32) {
        self.partitions.lock().remove(&index);
    }

    /// Whether this node leads state partition `index`.
    pub fn leads(&self, index: i32) -> bool {
        self.partitions.lock().contains_key(&index)
    }

    fn states(&self, index: i32) -> Option<PartitionStates> {
        self.partitions.lock().get(&index).cloned()
    }

    /// The state of `key` in state partition `index` and its state epoch;
    /// `None` if it was never initialized. Deleted state has start offset
    /// -1 (its epoch lives on, so that a writer from before is fenced).
    pub fn read(&self, index: i32, key: &SharePartitionKey) -> Option<(i32, PersistedState)> {
        let states = self.states(index)?;
        let states = states.lock();
        states
            .get(key)
            .map(|stored| (stored.state_epoch, stored.state.clone()))
    }

    /// Writes `key`'s whole state at `state_epoch`, which must be above
    /// its last: a new start (initialization, a reset of its offsets, or a
    /// deletion with start offset -1).
    pub fn initialize(
        &self,
        partition: &Arc<Partition>,
        key: &SharePartitionKey,
        state: PersistedState,
        state_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<ReplicatedWrite, StateWriteError> {
        self.write(partition, key, now_ms, |stored| {
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
        partition: &Arc<Partition>,
        key: &SharePartitionKey,
        update: PersistedState,
        state_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<ReplicatedWrite, StateWriteError> {
        self.write(partition, key, now_ms, |stored| {
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
        partition: &Arc<Partition>,
        key: &SharePartitionKey,
        now_ms: i64,
        record: impl FnOnce(Option<&Stored>) -> Result<ShareStateRecord, StateWriteError>,
    ) -> Result<ReplicatedWrite, StateWriteError> {
        let states = self.states(partition.index).ok_or_else(|| {
            AppendError::Log(LogError::Offline {
                dir: Default::default(),
                reason: format!("{SHARE_STATE_TOPIC}-{} is not led here", partition.index),
            })
        })?;
        let mut states = states.lock();
        let record = record(states.get(key))?;
        let entry = Entry {
            key: records::share_state::encode_key(key, &record),
            value: Some(records::share_state::encode_value(&record)),
        };
        let batch = encode_batch(&[entry], now_ms, None);
        let leader_epoch = partition.replica_state().leader_epoch;
        let appended = partition.append_from(
            &batch,
            leader_epoch,
            AppendOrigin::Coordinator,
            RequiredAcks::All,
        )?;
        apply(&mut states, key.clone(), record, appended.base_offset);
        Ok(ReplicatedWrite::of(partition.clone(), &appended))
    }

    /// Keeps `partition` (led here) from growing without end: the
    /// share-partitions whose latest snapshot is in the older half of the
    /// log get a new one (with the same state and epochs), then the log
    /// start moves up to the oldest snapshot still needed, within what the
    /// in-sync replicas hold. Returns the new log start, if it moved.
    pub fn prune(
        &self,
        partition: &Arc<Partition>,
        now_ms: i64,
    ) -> Result<Option<u64>, StateWriteError> {
        let Some(states) = self.states(partition.index) else {
            return Ok(None);
        };
        let start = partition.log().log_start_offset();
        let end = partition.log().log_end_offset();
        let middle = start + (end - start) / 2;
        let cold: Vec<SharePartitionKey> = states
            .lock()
            .iter()
            .filter(|(_, stored)| stored.snapshot_at < middle)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &cold {
            self.write(partition, key, now_ms, |stored| {
                let stored = stored.ok_or(StateWriteError::FencedStateEpoch)?;
                Ok(ShareStateRecord::Snapshot {
                    snapshot_epoch: stored.snapshot_epoch.wrapping_add(1),
                    state_epoch: stored.state_epoch,
                    leader_epoch: stored.leader_epoch,
                    state: stored.state.clone(),
                })
            })?;
        }
        // Under the lock: no write moves a snapshot meanwhile.
        let states = states.lock();
        let needed = states
            .values()
            .map(|stored| stored.snapshot_at)
            .min()
            .unwrap_or(end);
        let below = needed.min(partition.high_watermark());
        if below <= start {
            return Ok(None);
        }
        let moved = partition
            .delete_records_before(below)
            .map_err(|error| StateWriteError::Append(AppendError::Log(error)))?;
        Ok(Some(moved))
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

    #[test]
    fn a_writer_of_an_older_state_epoch_or_leader_epoch_is_fenced() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        let store = ShareStateStore::default();
        store.take_over(&partition).unwrap();
        let k = key("g");
        let fenced = store.update(&partition, &k, acknowledged(0), 0, 5, 0);
        assert!(
            matches!(fenced, Err(StateWriteError::FencedStateEpoch)),
            "no state yet"
        );
        store.initialize(&partition, &k, state(0), 0, 5, 0).unwrap();
        store
            .update(&partition, &k, acknowledged(0), 0, 5, 0)
            .unwrap();
        let older = store.update(&partition, &k, acknowledged(1), 0, 4, 0);
        assert!(matches!(older, Err(StateWriteError::FencedLeaderEpoch)));
        // A reset: a new state epoch, which an initialize must raise.
        let same = store.initialize(&partition, &k, state(10), 0, -1, 0);
        assert!(matches!(same, Err(StateWriteError::FencedStateEpoch)));
        store
            .initialize(&partition, &k, state(10), 1, -1, 0)
            .unwrap();
        let stale = store.update(&partition, &k, acknowledged(1), 0, 5, 0);
        assert!(matches!(stale, Err(StateWriteError::FencedStateEpoch)));
        store
            .update(&partition, &k, acknowledged(10), 1, 5, 0)
            .unwrap();
        // A deletion (start offset -1) fences the writers of the epoch before.
        store
            .initialize(&partition, &k, state(-1), 2, -1, 0)
            .unwrap();
        let deleted = store.update(&partition, &k, acknowledged(11), 2, 5, 0);
        assert!(matches!(deleted, Err(StateWriteError::FencedStateEpoch)));
        let reloaded = ShareStateStore::default();
        reloaded.take_over(&partition).unwrap();
        assert_eq!(
            reloaded.read(0, &k).map(|(e, s)| (e, s.start_offset)),
            Some((2, -1))
        );
    }

    #[test]
    fn pruning_keeps_every_state_and_drops_what_snapshots_superseded() {
        let dir = tempfile::tempdir().unwrap();
        let partition = open(dir.path());
        let store = ShareStateStore::default();
        store.take_over(&partition).unwrap();
        let (hot, cold) = (key("hot"), key("cold"));
        store
            .initialize(&partition, &cold, state(0), 0, 0, 0)
            .unwrap();
        store
            .update(&partition, &cold, acknowledged(0), 0, 0, 0)
            .unwrap();
        store
            .initialize(&partition, &hot, state(0), 0, 0, 0)
            .unwrap();
        for offset in 0..(UPDATES_PER_SNAPSHOT as i64 * 3) {
            store
                .update(&partition, &hot, acknowledged(offset), 0, 0, 0)
                .unwrap();
        }
        let end = partition.log().log_end_offset();
        let start = store
            .prune(&partition, 0)
            .unwrap()
            .expect("the log start moved");
        assert!(start > end / 2, "log start {start} of {end}");
        let reloaded = ShareStateStore::default();
        reloaded.take_over(&partition).unwrap();
        for k in [&hot, &cold] {
            assert_eq!(reloaded.read(0, k), store.read(0, k), "{k:?}");
        }
        assert_eq!(
            reloaded.read(0, &hot).unwrap().1.start_offset,
            UPDATES_PER_SNAPSHOT as i64 * 3
        );
        assert_eq!(reloaded.read(0, &cold).unwrap().1.start_offset, 1);
        // Writes go on after a prune, and a prune with nothing to gain
        // keeps the log start.
        store
            .update(&partition, &cold, acknowledged(1), 0, 0, 0)
            .unwrap();
        let again = store.prune(&partition, 0).unwrap();
        assert!(again.is_none_or(|s| s >= start), "{again:?}");
    }
}
