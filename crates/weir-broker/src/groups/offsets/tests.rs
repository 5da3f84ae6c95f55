//! Pending transactional offsets: committed by a COMMIT marker, dropped by
//! an ABORT marker, and rebuilt identically from the log.

use std::sync::Arc;

use futures::executor::block_on;
use weir_log::LogConfig;

use super::*;

const T: &str = "orders";

fn open(dir: &std::path::Path, index: i32) -> Arc<Partition> {
    let partition = Partition::open(
        dir,
        OFFSETS_TOPIC,
        uuid::Uuid::nil(),
        index,
        LogConfig::default(),
    )
    .unwrap();
    // The only replica: what it appends is replicated at once.
    partition.lead_for_tests(&[1], 0, 1);
    Arc::new(partition)
}

fn value(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: format!("m{offset}"),
        commit_timestamp: 1_700_000_000_000,
    }
}

fn producer(id: i64) -> TxnProducer {
    TxnProducer { id, epoch: 0 }
}

/// A store leading `partitions`, the whole of `__consumer_offsets`.
fn store_of(partitions: &[Arc<Partition>]) -> OffsetStore {
    let store = OffsetStore::new(1);
    for partition in partitions {
        store
            .load(partition.clone(), partitions.len() as i32, |_| {})
            .unwrap();
    }
    store
}

fn commit(store: &OffsetStore, group: &str, p: i32, offset: i64) {
    let change = OffsetChange {
        topic: T.to_owned(),
        partition: p,
        value: Some(value(offset)),
    };
    block_on(store.commit(group, vec![change], 0)).unwrap();
}

fn txn_commit(
    store: &OffsetStore,
    group: &str,
    producer: TxnProducer,
    offsets: &[(i32, i64)],
) -> ReplicatedWrite {
    let offsets = offsets
        .iter()
        .map(|&(p, o)| (T.to_owned(), p, value(o)))
        .collect();
    block_on(store.commit_transactional(group, producer, offsets, 0))
        .unwrap()
        .expect("something to write")
}

/// Appends a transaction marker to the log, as a partition leader writes
/// it, and tells the store, as the broker's marker hook does. Returns its
/// offset.
fn marker(store: &OffsetStore, partition: &Partition, producer: TxnProducer, commit: bool) -> u64 {
    let at = partition
        .write_marker(producer.id, producer.epoch, commit, 0, 0)
        .unwrap()
        .base_offset;
    complete(store, partition.index, producer.id, commit, at);
    at
}

fn complete(store: &OffsetStore, index: i32, producer_id: i64, commit: bool, at: u64) {
    block_on(store.complete_transaction(index, producer_id, commit, at));
}

fn committed(store: &OffsetStore, group: &str, p: i32) -> Option<i64> {
    store.committed(group, T, p).map(|c| c.offset)
}

/// Everything a store holds for `groups`, to compare two stores.
fn state(store: &OffsetStore, groups: &[&str], producers: &[i64]) -> String {
    let mut out = String::new();
    for group in groups {
        out += &format!("{group} committed {:?}\n", store.group_offsets(group));
        for id in producers {
            out += &format!(
                "{group} pending/{id} {:?}\n",
                store.pending_offsets(group, *id)
            );
        }
    }
    out
}

#[test]
fn transactional_offsets_stay_pending_until_a_commit_marker() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    commit(&store, "g", 0, 5);
    txn_commit(&store, "g", producer(7), &[(0, 10), (1, 11)]);

    assert_eq!(committed(&store, "g", 0), Some(5));
    assert_eq!(committed(&store, "g", 1), None);
    assert!(store.has_pending("g", T, 0) && store.has_pending("g", T, 1));
    assert!(!store.has_pending("g", T, 2) && !store.has_pending("other", T, 0));
    assert!(store.has_open_transactions("g"));
    assert_eq!(
        store.pending_partitions("g"),
        vec![(T.to_owned(), 0), (T.to_owned(), 1)]
    );

    marker(&store, &partition, producer(7), true);
    assert_eq!(committed(&store, "g", 0), Some(10));
    assert_eq!(committed(&store, "g", 1), Some(11));
    assert_eq!(store.committed("g", T, 1).unwrap().metadata, "m11");
    assert!(!store.has_pending("g", T, 0) && !store.has_open_transactions("g"));
}

#[test]
fn an_abort_marker_drops_the_pending_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    commit(&store, "g", 0, 5);
    txn_commit(&store, "g", producer(7), &[(0, 10), (1, 11)]);
    marker(&store, &partition, producer(7), false);
    assert_eq!(committed(&store, "g", 0), Some(5));
    assert_eq!(committed(&store, "g", 1), None);
    assert!(!store.has_open_transactions("g"));
    // A marker of a producer with nothing pending changes nothing.
    marker(&store, &partition, producer(8), true);
    assert_eq!(committed(&store, "g", 0), Some(5));
}

#[test]
fn the_later_record_wins_when_a_transaction_commits() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    // Partition 0: the plain commit comes after the transactional one.
    txn_commit(&store, "g", producer(7), &[(0, 10), (1, 11)]);
    commit(&store, "g", 0, 20);
    // Partition 1: before it.
    marker(&store, &partition, producer(7), true);
    assert_eq!(committed(&store, "g", 0), Some(20));
    assert_eq!(committed(&store, "g", 1), Some(11));
    let reloaded = store_of(&[partition]);
    assert_eq!(committed(&reloaded, "g", 0), Some(20));
    assert_eq!(committed(&reloaded, "g", 1), Some(11));
}

#[test]
fn records_after_a_marker_belong_to_the_next_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    txn_commit(&store, "g", producer(7), &[(0, 10)]);
    let written = txn_commit(&store, "g", producer(7), &[(1, 11)]);
    // A marker the log placed before the second commit (a race between an
    // abort on timeout and a late TxnOffsetCommit) ends only the first.
    complete(&store, 0, 7, true, written.until - 1);
    assert_eq!(committed(&store, "g", 0), Some(10));
    assert_eq!(committed(&store, "g", 1), None);
    assert!(store.has_pending("g", T, 1));
}

#[test]
fn a_tombstone_removes_pending_offsets_too() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    commit(&store, "g", 0, 5);
    txn_commit(&store, "g", producer(7), &[(0, 10), (1, 11)]);
    block_on(store.delete_group("g", 0)).unwrap();
    assert!(!store.has_open_transactions("g"));
    assert!(store.groups().is_empty());
    marker(&store, &partition, producer(7), true);
    assert_eq!(store.group_offsets("g"), vec![]);
    let reloaded = store_of(&[partition]);
    assert_eq!(reloaded.group_offsets("g"), vec![]);
    assert!(!reloaded.has_open_transactions("g"));
}

#[test]
fn loading_the_log_rebuilds_committed_and_pending_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    commit(&store, "a", 0, 1);
    txn_commit(&store, "a", producer(1), &[(0, 100), (1, 101)]);
    txn_commit(&store, "b", producer(2), &[(0, 200)]);
    commit(&store, "b", 1, 2);
    txn_commit(&store, "b", producer(3), &[(1, 300)]);
    txn_commit(&store, "a", producer(1), &[(2, 102)]);
    marker(&store, &partition, producer(1), true);
    marker(&store, &partition, producer(2), false);
    // Producer 3's transaction is still open, and producer 1 starts another.
    txn_commit(&store, "a", producer(1), &[(0, 110)]);

    let groups = ["a", "b"];
    let producers = [1, 2, 3];
    let before = state(&store, &groups, &producers);
    assert!(before.contains("b pending/3 [((\"orders\", 1)"), "{before}");
    assert!(before.contains("a pending/1 [((\"orders\", 0)"), "{before}");
    let loaded = store_of(std::slice::from_ref(&partition));
    assert_eq!(state(&loaded, &groups, &producers), before);

    // Reloading on leadership replaces what the store had of the partition.
    marker(&store, &partition, producer(3), true);
    loaded.load(partition.clone(), 1, |_| {}).unwrap();
    assert_eq!(
        state(&loaded, &groups, &producers),
        state(&store, &groups, &producers)
    );
    assert_eq!(committed(&loaded, "b", 1), Some(300));
    assert!(loaded.has_pending("a", T, 0));
    assert!(!loaded.has_pending("b", T, 1));
}

#[test]
fn a_marker_ends_the_transaction_only_in_its_own_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (p0, p1) = (open(dir.path(), 0), open(dir.path(), 1));
    let name = |index| {
        (0..)
            .map(|i| format!("group-{i}"))
            .find(|g| records::offsets::partition_for(g, 2) == index)
            .unwrap()
    };
    let (g0, g1) = (name(0), name(1));
    let store = store_of(&[p0.clone(), p1.clone()]);
    txn_commit(&store, &g0, producer(7), &[(0, 10)]);
    txn_commit(&store, &g1, producer(7), &[(0, 20)]);
    marker(&store, &p0, producer(7), true);
    assert_eq!(committed(&store, &g0, 0), Some(10));
    assert_eq!(committed(&store, &g1, 0), None);
    assert!(store.has_pending(&g1, T, 0));
    marker(&store, &p1, producer(7), false);
    assert!(!store.has_open_transactions(&g1));
    assert_eq!(committed(&store, &g1, 0), None);
}

#[test]
fn coordinator_writes_are_fenced_by_epoch_but_not_sequenced() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    let current = TxnProducer { id: 7, epoch: 3 };
    // Every batch the coordinator writes starts at sequence 0.
    for i in 0..3 {
        txn_commit(&store, "g", current, &[(i, 10)]);
    }
    assert_eq!(store.pending_offsets("g", 7).len(), 3);
    let stale = TxnProducer { id: 7, epoch: 2 };
    let offsets = vec![(T.to_owned(), 5, value(1))];
    let refused = block_on(store.commit_transactional("g", stale, offsets, 0));
    assert!(
        matches!(
            refused,
            Err(CoordinatorError::Append(
                AppendError::InvalidProducerEpoch { current: 3, got: 2 }
            ))
        ),
        "{:?}",
        refused.err()
    );
    assert!(!store.has_pending("g", T, 5));
}

#[test]
fn checkpoints_wait_for_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    for i in 0..5 {
        commit(&store, "g", 0, i);
    }
    txn_commit(&store, "g", producer(7), &[(1, 10)]);
    assert_eq!(store.live_records(0), 2);
    assert_eq!(block_on(store.checkpoint(0, 0)).unwrap(), 0);
    assert_eq!(partition.log().log_start_offset(), 0);
    marker(&store, &partition, producer(7), true);
    assert_eq!(block_on(store.checkpoint(0, 0)).unwrap(), 2);
    let reloaded = store_of(&[partition]);
    assert_eq!(committed(&reloaded, "g", 0), Some(4));
    assert_eq!(committed(&reloaded, "g", 1), Some(10));
}

#[test]
fn groups_with_only_pending_offsets_are_known() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), 0);
    let store = store_of(std::slice::from_ref(&partition));
    commit(&store, "a", 0, 1);
    txn_commit(&store, "b", producer(7), &[(3, 10)]);
    assert_eq!(store.groups(), vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(
        store.commits_of_topic(T),
        vec![("a".to_owned(), vec![0]), ("b".to_owned(), vec![3])]
    );
}

/// OffsetFetch serves a commit only once the in-sync replicas hold it: a
/// newer commit the followers have not fetched yet is not served, nor is
/// a deletion they do not hold.
#[test]
fn only_commits_the_in_sync_replicas_hold_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let partition = Arc::new(
        Partition::open(
            dir.path(),
            OFFSETS_TOPIC,
            uuid::Uuid::nil(),
            0,
            LogConfig::default(),
        )
        .unwrap(),
    );
    partition.lead_for_tests(&[1, 2, 3], 0, 1);
    let store = store_of(std::slice::from_ref(&partition));
    // As OffsetFetch reads them.
    let served = |store: &OffsetStore| {
        block_on(store.fetch("g", None))
            .unwrap()
            .committed
            .get(&(T.to_owned(), 0))
            .map(|c| c.offset)
    };
    let followers_catch_up = || {
        for follower in [2, 3] {
            partition.follower_fetched(follower, partition.log().log_end_offset(), 0);
        }
    };

    commit(&store, "g", 0, 5);
    assert_eq!(served(&store), None, "the followers have nothing yet");
    followers_catch_up();
    assert_eq!(served(&store), Some(5));

    commit(&store, "g", 0, 7);
    commit(&store, "g", 0, 9);
    assert_eq!(served(&store), Some(5));
    // One follower has the first of the two, the other both.
    partition.follower_fetched(2, partition.log().log_end_offset() - 1, 0);
    partition.follower_fetched(3, partition.log().log_end_offset(), 0);
    assert_eq!(served(&store), Some(7));
    followers_catch_up();
    assert_eq!(served(&store), Some(9));

    let deletion = OffsetChange {
        topic: T.to_owned(),
        partition: 0,
        value: None,
    };
    block_on(store.commit("g", vec![deletion], 0)).unwrap();
    assert_eq!(served(&store), Some(9));
    followers_catch_up();
    assert_eq!(served(&store), None);
    assert_eq!(
        store
            .runtime
            .inspect(0, |shard| shard.unreplicated.is_empty()),
        Some(true),
        "nothing left to track"
    );
}

/// Each partition's shard is its own: a commit to one partition goes on
/// while another partition's shard is held; a partition no longer led here
/// takes no commit.
#[test]
fn a_commit_holds_only_its_partitions_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (p0, p1) = (open(dir.path(), 0), open(dir.path(), 1));
    let store = store_of(&[p0, p1]);
    let in_partition = |index| {
        (0..)
            .map(|i| format!("group-{i}"))
            .find(|g| records::offsets::partition_for(g, 2) == index)
            .unwrap()
    };
    let (g0, g1) = (in_partition(0), in_partition(1));
    store.runtime.inspect(0, |_| commit(&store, &g1, 0, 5));
    assert_eq!(committed(&store, &g1, 0), Some(5));
    store.unload(0);
    let change = OffsetChange {
        topic: T.to_owned(),
        partition: 0,
        value: Some(value(1)),
    };
    assert!(matches!(
        block_on(store.commit(&g0, vec![change], 0)),
        Err(CoordinatorError::NotCoordinator)
    ));
    assert_eq!(committed(&store, &g0, 0), None);
}
