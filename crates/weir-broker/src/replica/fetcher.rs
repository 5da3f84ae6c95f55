//! Followers copying their leaders: one task per leader broker, sending
//! Fetch requests (with this broker's id as the replica id) for every
//! partition this broker follows there, appending what comes back as it
//! is, and taking the leader's high watermark.
//!
//! Before its first fetch under a leader epoch, a follower asks the leader
//! (OffsetForLeaderEpoch) where its own latest epoch ended in the leader's
//! log, and drops anything it holds beyond that: a suffix the leader never
//! had, written under an older leader that lost its leadership.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use weir_client::{Client, ClientConfig};
use weir_log::batch::whole_batches;
use weir_log::LogError;

use crate::partition::file_io::on_the_blocking_pool;
use crate::partition::Partition;
use crate::quotas::ReplicationQuota;
use crate::replica::directories::DirHealth;
use crate::replica::remote_restart::{self, RemoteRestart, RemoteTierSource};

/// How long a follower's fetch waits at the leader for new records.
const FETCH_WAIT_MS: i32 = 500;
/// The most bytes one fetch asks for, per partition and in all.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 10 << 20;
/// The pause after a failure before trying again.
const BACKOFF: Duration = Duration::from_millis(200);
/// The first and the longest wait after an append of fetched records
/// failed (Kafka's `replica.fetch.backoff.ms` is 1 s).
const APPLY_BACKOFF_MIN: Duration = Duration::from_secs(1);
const APPLY_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A partition this broker follows, and under which leader epoch.
#[derive(Clone)]
pub struct Follow {
    pub partition: Arc<Partition>,
    pub leader: i32,
    /// The leader's `host:port`.
    pub leader_addr: String,
    pub leader_epoch: i32,
}

type Key = (String, i32);

struct Followed {
    partition: Arc<Partition>,
    leader_epoch: i32,
    /// Whether the divergent suffix check has been done for this epoch.
    truncated: bool,
    /// Whether the last fetch brought this replica up to the leader's
    /// high watermark (Kafka's `isReplicaInSync` of a fetch state): a
    /// caught-up replica is never held back by the throttle.
    caught_up: bool,
    /// After an append that failed (a full or failing disk): not fetched
    /// again before this instant, and how long the last wait was.
    backoff: Option<(std::time::Instant, Duration)>,
}

struct LeaderFetcher {
    addr: String,
    partitions: Arc<Mutex<BTreeMap<Key, Followed>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Where followers find what their leaders hold.
pub struct LeaderSources {
    /// How to connect to the leaders' inter-broker listener.
    pub security: weir_client::SecurityConfig,
    /// The remote tier, with tiered storage on.
    pub remote: Option<RemoteTierSource>,
}

/// Every follower fetch task of this broker.
pub struct ReplicaFetchers {
    node_id: i32,
    /// Created on first use; its own threads, so that fetching never waits
    /// behind client requests.
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    fetchers: Mutex<HashMap<i32, LeaderFetcher>>,
    /// `follower.replication.throttled.rate`.
    quota: Arc<ReplicationQuota>,
    /// How to connect to the leaders' inter-broker listener.
    security: weir_client::SecurityConfig,
    /// Which log directories are full.
    dirs: DirHealth,
    /// The remote tier, with tiered storage on.
    remote: Option<RemoteTierSource>,
}

impl ReplicaFetchers {
    pub fn new(
        node_id: i32,
        quota: Arc<ReplicationQuota>,
        sources: LeaderSources,
        dirs: DirHealth,
    ) -> Self {
        Self {
            node_id,
            quota,
            security: sources.security,
            remote: sources.remote,
            dirs,
            runtime: Mutex::new(None),
            fetchers: Mutex::new(HashMap::new()),
        }
    }

    /// Makes `wanted` the partitions followed, each from its leader: new
    /// ones start with a truncation check, ones whose leader or epoch
    /// changed start over, the others carry on.
    pub fn follow(&self, wanted: Vec<Follow>) {
        let mut by_leader: HashMap<i32, (String, BTreeMap<Key, Follow>)> = HashMap::new();
        for follow in wanted {
            let key = (follow.partition.topic.clone(), follow.partition.index);
            by_leader
                .entry(follow.leader)
                .or_insert_with(|| (follow.leader_addr.clone(), BTreeMap::new()))
                .1
                .insert(key, follow);
        }
        let mut fetchers = self.fetchers.lock();
        fetchers.retain(|leader, fetcher| {
            let keep = by_leader
                .get(leader)
                .is_some_and(|(addr, _)| *addr == fetcher.addr);
            if !keep {
                fetcher.task.abort();
            }
            keep
        });
        for (leader, (addr, partitions)) in by_leader {
            let fetcher = fetchers
                .entry(leader)
                .or_insert_with(|| self.start(leader, addr.clone()));
            let mut followed = fetcher.partitions.lock();
            followed.retain(|key, f| {
                partitions.get(key).is_some_and(|w| {
                    w.leader_epoch == f.leader_epoch && Arc::ptr_eq(&w.partition, &f.partition)
                })
            });
            for (key, follow) in partitions {
                followed.entry(key).or_insert(Followed {
                    partition: follow.partition,
                    leader_epoch: follow.leader_epoch,
                    truncated: false,
                    caught_up: false,
                    backoff: None,
                });
            }
        }
    }

    fn start(&self, leader: i32, addr: String) -> LeaderFetcher {
        let partitions = Arc::new(Mutex::new(BTreeMap::new()));
        let mut runtime = self.runtime.lock();
        let runtime = runtime.get_or_insert_with(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("weir-replica-fetcher")
                .enable_all()
                .build()
                .expect("a runtime for the replica fetchers")
        });
        tracing::info!(leader, addr, "following partitions of a leader");
        let task = runtime.spawn(fetch_loop(
            self.node_id,
            addr.clone(),
            partitions.clone(),
            self.quota.clone(),
            self.security.clone(),
            self.dirs.clone(),
            self.remote.clone(),
        ));
        LeaderFetcher {
            addr,
            partitions,
            task,
        }
    }

    /// Stops every fetcher.
    pub fn stop(&self) {
        for (_, fetcher) in self.fetchers.lock().drain() {
            fetcher.task.abort();
        }
        if let Some(runtime) = self.runtime.lock().take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for ReplicaFetchers {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn fetch_loop(
    node_id: i32,
    addr: String,
    partitions: Arc<Mutex<BTreeMap<Key, Followed>>>,
    quota: Arc<ReplicationQuota>,
    security: weir_client::SecurityConfig,
    dirs: DirHealth,
    remote: Option<RemoteTierSource>,
) {
    let config = ClientConfig {
        client_id: format!("weir-replica-{node_id}"),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
    };
    let mut client: Option<Client> = None;
    loop {
        if partitions.lock().is_empty() {
            tokio::time::sleep(BACKOFF).await;
            continue;
        }
        let connection = match client.as_mut() {
            Some(connection) => connection,
            None => {
                match Client::connect_with_security(&addr, config.clone(), security.clone()).await {
                    Ok(connection) => client.insert(connection),
                    Err(error) => {
                        tracing::debug!(addr, %error, "cannot reach the leader");
                        tokio::time::sleep(BACKOFF).await;
                        continue;
                    }
                }
            }
        };
        let outcome = match truncate_divergent(connection, node_id, &partitions).await {
            Ok(()) => {
                fetch_once(
                    connection,
                    node_id,
                    &partitions,
                    quota.clone(),
                    &dirs,
                    remote.as_ref(),
                )
                .await
            }
            Err(error) => Err(error),
        };
        if let Err(error) = outcome {
            tracing::debug!(addr, %error, "replica fetch failed");
            client = None;
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

/// For partitions not checked yet under their leader epoch: asks the
/// leader where this replica's latest epoch ends, and truncates there.
async fn truncate_divergent(
    client: &mut Client,
    node_id: i32,
    partitions: &Mutex<BTreeMap<Key, Followed>>,
) -> Result<(), weir_client::ClientError> {
    let unchecked: Vec<(Key, Arc<Partition>, i32, i32)> = partitions
        .lock()
        .iter_mut()
        .filter(|(_, f)| !f.truncated)
        .filter_map(|(key, f)| match f.partition.log().latest_epoch() {
            Some(latest) => Some((
                key.clone(),
                f.partition.clone(),
                f.leader_epoch,
                latest.epoch,
            )),
            None => {
                // Nothing stored: nothing can diverge.
                f.truncated = true;
                None
            }
        })
        .collect();
    if unchecked.is_empty() {
        return Ok(());
    }
    let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for ((topic, index), _, current_epoch, epoch) in &unchecked {
        let partition = OffsetForLeaderPartition::default()
            .with_partition(*index)
            .with_current_leader_epoch(*current_epoch)
            .with_leader_epoch(*epoch);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(node_id))
        .with_topics(topics);
    let response: OffsetForLeaderEpochResponse =
        client.call(ApiKey::OffsetForLeaderEpoch, &request).await?;
    for topic in response.topics {
        for answer in topic.partitions {
            let key = (topic.topic.0.to_string(), answer.partition);
            let Some((_, partition, epoch, asked)) = unchecked.iter().find(|(k, ..)| *k == key)
            else {
                continue;
            };
            if answer.error_code != 0 {
                tracing::debug!(
                    topic = key.0,
                    partition = key.1,
                    code = answer.error_code,
                    "epoch end not known yet"
                );
                continue;
            }
            let end = divergence_point(partition, *asked, answer.leader_epoch, answer.end_offset);
            if end < partition.log().log_end_offset() {
                tracing::info!(
                    topic = key.0,
                    partition = key.1,
                    from = partition.log().log_end_offset(),
                    to = end,
                    "dropping records the leader does not have"
                );
                let truncating = partition.clone();
                if let Err(error) = on_the_blocking_pool(move || truncating.truncate_to(end)).await
                {
                    tracing::error!(topic = key.0, partition = key.1, %error, "truncation failed");
                    continue;
                }
            }
            if let Some(followed) = partitions.lock().get_mut(&key) {
                if followed.leader_epoch == *epoch && Arc::ptr_eq(&followed.partition, partition) {
                    followed.truncated = true;
                }
            }
        }
    }
    Ok(())
}

/// Where this replica's log stops agreeing with the leader's, from the
/// leader's answer for our latest epoch `asked`. When the leader answers
/// with an earlier epoch (it never had ours), our own records of that
/// earlier epoch may end before the leader's: everything from our end of
/// that epoch on was written under a leadership the leader never followed
/// (KIP-279), so the point is the smaller of the two ends. A leader that
/// knows no epoch at or below ours (an empty epoch cache) gives no point:
/// then only what was committed is known to be shared, and the replica
/// keeps its log up to its high watermark, as Kafka does.
pub(crate) fn divergence_point(
    partition: &Partition,
    asked: i32,
    leader_epoch: i32,
    leader_end: i64,
) -> u64 {
    let Ok(leader_end) = u64::try_from(leader_end) else {
        return partition
            .high_watermark()
            .min(partition.log().log_end_offset());
    };
    if leader_epoch >= asked || leader_epoch < 0 {
        return leader_end;
    }
    // Our records up to the end of our latest epoch at or below the
    // leader's are ones the leader also has (or had before truncating to
    // the same place); anything after was written in an epoch it lacks.
    let (_, own_end) = partition.log().end_offset_for_epoch(leader_epoch);
    leader_end.min(u64::try_from(own_end).unwrap_or(0))
}

/// One Fetch for every checked partition, but throttled ones not caught
/// up while the follower throttle is exceeded (Kafka's
/// `shouldFollowerThrottle`); appends what comes back.
async fn fetch_once(
    client: &mut Client,
    node_id: i32,
    partitions: &Arc<Mutex<BTreeMap<Key, Followed>>>,
    quota: Arc<ReplicationQuota>,
    dirs: &DirHealth,
    remote: Option<&RemoteTierSource>,
) -> Result<(), weir_client::ClientError> {
    let targets: Vec<(Key, Arc<Partition>, i32)> = {
        let followed = partitions.lock();
        let any_throttled = followed
            .values()
            .any(|f| f.partition.follower_throttled() && !f.caught_up);
        let exceeded = any_throttled && quota.is_exceeded();
        let now = std::time::Instant::now();
        followed
            .iter()
            .filter(|(_, f)| f.truncated)
            // An offline replica (its log directory failed) fetches nothing,
            // so that its leader never takes it back into the ISR.
            .filter(|(_, f)| !f.partition.is_offline())
            // Nor does one on a full volume, until space is freed.
            .filter(|(_, f)| !dirs.is_full(f.partition.log().dir()))
            .filter(|(_, f)| !(exceeded && f.partition.follower_throttled() && !f.caught_up))
            .filter(|(_, f)| f.backoff.is_none_or(|(until, _)| until <= now))
            .map(|(key, f)| (key.clone(), f.partition.clone(), f.leader_epoch))
            .collect()
    };
    if targets.is_empty() {
        tokio::time::sleep(BACKOFF).await;
        return Ok(());
    }
    let mut topics: Vec<FetchTopic> = Vec::new();
    for ((topic, index), partition, epoch) in &targets {
        let log = partition.log();
        let fetch = FetchPartition::default()
            .with_partition(*index)
            .with_current_leader_epoch(*epoch)
            .with_fetch_offset(log.log_end_offset() as i64)
            .with_log_start_offset(log.log_start_offset() as i64)
            .with_last_fetched_epoch(log.latest_epoch().map_or(-1, |e| e.epoch))
            .with_partition_max_bytes(PARTITION_MAX_BYTES);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(fetch),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![fetch]),
            ),
        }
    }
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(node_id))
        .with_max_wait_ms(FETCH_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_session_epoch(-1)
        .with_topics(topics);
    let response: FetchResponse = client.call(ApiKey::Fetch, &request).await?;
    let moved_to_remote = remote_restarts(client, &response, &targets, remote).await;
    // Appends (and the fsyncs flush.messages may call for) and truncations
    // run on the blocking pool, never on a runtime worker.
    let partitions = partitions.clone();
    let applied = tokio::task::spawn_blocking(move || {
        apply_fetched(response, &targets, &partitions, &quota, moved_to_remote)
    })
    .await;
    if let Err(error) = applied {
        tracing::error!(%error, "applying fetched records failed");
    }
    Ok(())
}

/// For each partition the leader answered OFFSET_MOVED_TO_TIERED_STORAGE,
/// where this replica starts over (the leader's local log start, from
/// ListOffsets earliest local) and what it takes from the remote tier
/// below it (KIP-405).
async fn remote_restarts(
    client: &mut Client,
    response: &FetchResponse,
    targets: &[(Key, Arc<Partition>, i32)],
    remote: Option<&RemoteTierSource>,
) -> BTreeMap<Key, RemoteRestart> {
    let mut restarts = BTreeMap::new();
    for topic in &response.responses {
        for data in &topic.partitions {
            if ResponseError::try_from_code(data.error_code)
                != Some(ResponseError::OffsetMovedToTieredStorage)
            {
                continue;
            }
            let key = (topic.topic.0.to_string(), data.partition_index);
            let Some((_, partition, _)) = targets.iter().find(|(k, ..)| *k == key) else {
                continue;
            };
            let local_start = match client
                .list_offsets(&key.0, data.partition_index, EARLIEST_LOCAL)
                .await
            {
                Ok(start) => u64::try_from(start).unwrap_or(0),
                Err(error) => {
                    tracing::debug!(topic = key.0, partition = data.partition_index, %error, "cannot learn the leader's local log start");
                    continue;
                }
            };
            if let Some(restart) = remote_restart::plan(remote, partition, local_start).await {
                restarts.insert(key, restart);
            }
        }
    }
    restarts
}

/// ListOffsets' earliest local offset (KIP-405).
const EARLIEST_LOCAL: i64 = -4;

/// Appends what the leader sent for each partition still followed under
/// the same epoch, or starts over where the leader's log now begins.
fn apply_fetched(
    response: FetchResponse,
    targets: &[(Key, Arc<Partition>, i32)],
    partitions: &Mutex<BTreeMap<Key, Followed>>,
    quota: &ReplicationQuota,
    mut moved_to_remote: BTreeMap<Key, RemoteRestart>,
) {
    for topic in response.responses {
        for data in topic.partitions {
            let key = (topic.topic.0.to_string(), data.partition_index);
            let Some((_, partition, epoch)) = targets.iter().find(|(k, ..)| *k == key) else {
                continue;
            };
            let still_followed = partitions
                .lock()
                .get(&key)
                .is_some_and(|f| f.leader_epoch == *epoch && Arc::ptr_eq(&f.partition, partition));
            if !still_followed {
                continue;
            }
            if partition.follower_throttled() {
                // Every throttled byte counts, caught up or not, so that
                // throttled replication as a whole stays under the rate.
                quota.record(data.records.as_ref().map_or(0, |r| r.len()));
            }
            let fetched = match ResponseError::try_from_code(data.error_code) {
                None => Fetched::Records {
                    records: data.records.as_deref().unwrap_or_default(),
                    high_watermark: u64::try_from(data.high_watermark).unwrap_or(0),
                },
                Some(ResponseError::OffsetOutOfRange) => Fetched::OutOfRange {
                    log_start: u64::try_from(data.log_start_offset).unwrap_or(0),
                    high_watermark: u64::try_from(data.high_watermark).unwrap_or(0),
                },
                Some(ResponseError::OffsetMovedToTieredStorage) => {
                    match moved_to_remote.remove(&key) {
                        Some(restart) => Fetched::MovedToTieredStorage(restart),
                        None => continue,
                    }
                }
                Some(error) => {
                    tracing::debug!(topic = key.0, partition = key.1, %error, "leader refused a replica fetch");
                    continue;
                }
            };
            let leader_high_watermark = data.high_watermark;
            let applied = apply_fetch(partition, fetched);
            let mut followed = partitions.lock();
            let Some(f) = followed.get_mut(&key) else {
                continue;
            };
            if applied.is_ok() && f.backoff.take().is_some() {
                tracing::info!(
                    topic = key.0,
                    partition = key.1,
                    "fetched records apply again"
                );
            }
            match applied {
                Ok(true) => {
                    f.truncated = false;
                    f.caught_up = false;
                }
                Ok(false) => {
                    f.caught_up = i64::try_from(partition.log().log_end_offset())
                        .is_ok_and(|end| end >= leader_high_watermark);
                }
                Err(error) => {
                    // The leader would send the same records at once: wait,
                    // longer each time, and say so once.
                    let wait = f.backoff.map_or(APPLY_BACKOFF_MIN, |(_, last)| {
                        (last * 2).min(APPLY_BACKOFF_MAX)
                    });
                    if f.backoff.is_none() {
                        tracing::error!(topic = key.0, partition = key.1, %error, "cannot apply fetched records; retrying with backoff");
                    } else {
                        tracing::debug!(topic = key.0, partition = key.1, %error, ?wait, "still cannot apply fetched records");
                    }
                    f.backoff = Some((std::time::Instant::now() + wait, wait));
                }
            }
        }
    }
}

/// A leader's answer to a follower's fetch of one partition.
pub(crate) enum Fetched<'a> {
    Records {
        records: &'a [u8],
        high_watermark: u64,
    },
    /// The fetch offset is outside the leader's log.
    OutOfRange { log_start: u64, high_watermark: u64 },
    /// The fetch offset is below the leader's local log, in the remote
    /// tier: where the replica restarts, and with what.
    MovedToTieredStorage(RemoteRestart),
}

/// Applies the leader's answer: appends what it sent, or starts over where
/// the leader's log now begins, or drops what the leader does not have.
/// Returns whether the divergence check must run again.
pub(crate) fn apply_fetch(partition: &Partition, fetched: Fetched<'_>) -> Result<bool, LogError> {
    match fetched {
        Fetched::Records {
            records,
            high_watermark,
        } => {
            partition.append_replicated(whole_batches(records), high_watermark)?;
            Ok(false)
        }
        Fetched::MovedToTieredStorage(restart) => {
            // Below it the remote tier serves readers; this replica holds
            // what the leader holds locally.
            remote_restart::apply(partition, restart)?;
            Ok(false)
        }
        Fetched::OutOfRange { log_start, .. } if partition.log().log_end_offset() < log_start => {
            // The leader deleted what this replica lacks: start over from
            // the leader's log start.
            tracing::info!(topic = %partition.topic, partition = partition.index, log_start, "restarting the replica at the leader's log start");
            partition.restart_at(log_start)?;
            Ok(false)
        }
        Fetched::OutOfRange { high_watermark, .. } => {
            // Ahead of the leader. After the divergence check this happens
            // only under a leader that knows no epoch of ours (its log was
            // lost: an unclean election, or the last in-sync replica
            // restarting without its unsynced tail). Kafka then truncates
            // to the leader's log end; its high watermark, which the answer
            // carries, is at or below that end.
            let end = partition.log().log_end_offset();
            if high_watermark < end {
                tracing::warn!(topic = %partition.topic, partition = partition.index, from = end, to = high_watermark, "dropping records beyond the log of a leader that lacks them");
                partition.truncate_to(high_watermark.max(partition.log().log_start_offset()))?;
            }
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_log::testing::BatchBuilder;

    #[test]
    fn a_cut_last_batch_is_left_for_the_next_fetch() {
        let mut bytes = BatchBuilder::new(3).build().to_vec();
        let first = bytes.len();
        bytes.extend_from_slice(&BatchBuilder::new(2).build());
        assert_eq!(whole_batches(&bytes).len(), bytes.len());
        assert_eq!(whole_batches(&bytes[..bytes.len() - 1]).len(), first);
        assert_eq!(whole_batches(&bytes[..10]).len(), 0);
        assert_eq!(whole_batches(&[]).len(), 0);
    }

    #[test]
    fn a_follower_ahead_of_its_leader_drops_what_the_leader_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let follower = Partition::open(
            dir.path(),
            "t",
            uuid::Uuid::nil(),
            0,
            weir_log::LogConfig::default(),
        )
        .unwrap();
        for _ in 0..5 {
            follower
                .append_in_place(&BatchBuilder::new(2).build(), 0)
                .unwrap();
        }
        assert_eq!(follower.log().log_end_offset(), 10);
        // A leader whose log was lost answers with its start and its high
        // watermark, 4: the follower keeps what is below, checks again.
        let fetched = Fetched::OutOfRange {
            log_start: 0,
            high_watermark: 4,
        };
        assert!(apply_fetch(&follower, fetched).unwrap());
        assert_eq!(follower.log().log_end_offset(), 4);
        // Behind a leader that deleted its start: the follower starts over.
        let fetched = Fetched::OutOfRange {
            log_start: 20,
            high_watermark: 25,
        };
        assert!(!apply_fetch(&follower, fetched).unwrap());
        assert_eq!(follower.log().log_start_offset(), 20);
        assert_eq!(follower.log().log_end_offset(), 20);
    }
}
