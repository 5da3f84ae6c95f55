//! The share-partitions this broker leads (KIP-932's share-partition
//! leader): a [`SharePartition`] engine per share group and partition led
//! here, loaded from `__share_group_state` on first use and on every new
//! leader epoch, and the members' share sessions.
//!
//! Every change an acquisition, an acknowledgement, a release or an
//! expired lock makes is written to `__share_group_state` before the
//! request that made it is answered (the caller awaits the returned
//! [`ReplicatedWrite`]). Acquired records are persisted as available with
//! their delivery count, so a failover redelivers exactly what was in
//! flight, and counts every delivery.
//!
//! Each share-partition takes one turn at a time (a request's, a timer's,
//! a dead letter's), awaited: a turn that waits for its state write or a
//! log read holds up no runtime worker, and log reads run on the blocking
//! pool.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use serde::Serialize;
use tokio::task::JoinHandle;

use crate::config::groups::ShareAutoOffsetReset;
use crate::metrics::GroupPartitionLabels;
use crate::partition::file_io::on_the_blocking_pool;
use crate::partition::{Partition, ReplicatedWrite};
use crate::share::dead_letters::{self, DeadLetterError, Source};
use crate::share::keyed_turns::KeyedTurns;
use crate::share::persister::{ShareCode, SharePersister};
use crate::share::ShareHost;
use crate::share::{
    log_records, AcknowledgeType, AcquiredRange, DeadLetter, PersistedState, ShareError,
    SharePartition, ShareSessions,
};
use weir_coord::records::share_state::SharePartitionKey;

const UNKNOWN_TOPIC_ID: ShareCode = 100;
const KAFKA_STORAGE_ERROR: ShareCode = 56;
const FENCED_STATE_EPOCH: ShareCode = 124;

/// The most of a partition's log one share fetch reads: more records than
/// a fetch acquires unless they are large (at least one whole batch is
/// always read). The client fetches again for more.
const SHARE_READ_BYTES: usize = 256 * 1024;

/// How long a dead letter waits for its record's Archiving state to be
/// replicated.
const DEAD_LETTER_STATE_TIMEOUT: Duration = Duration::from_secs(30);
/// The first wait before a dead letter is tried again, doubling up to
/// [`DEAD_LETTER_RETRY_BACKOFF_MAX`].
const DEAD_LETTER_RETRY_BACKOFF: Duration = Duration::from_millis(500);
const DEAD_LETTER_RETRY_BACKOFF_MAX: Duration = Duration::from_secs(15);

/// A share-partition led here, as `/v1/groups` and the metrics show it.
#[derive(Debug, Clone, Serialize)]
pub struct SharePartitionView {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    /// Every record before it is acknowledged or archived.
    pub start_offset: i64,
    /// The end consumers may read to (the high watermark, or the last
    /// stable offset for `share.isolation.level=read_committed`).
    pub log_end_offset: i64,
    /// Records from the start offset on not yet acknowledged or archived.
    pub in_flight: u64,
    /// Records waiting to be acquired (never delivered, released, or their
    /// lock expired), up to the log end.
    pub available: u64,
    /// Records acquired by a member now.
    pub acquired: u64,
    /// Age of the oldest available record, from its timestamp; 0 if none.
    pub oldest_available_seconds: f64,
}

/// A share-partition led here: what was fixed when it was loaded, and its
/// engine, changed one turn at a time.
struct Hosted {
    partition: Arc<Partition>,
    /// The data partition's leader epoch when the state was loaded.
    leader_epoch: i32,
    /// The state epoch it was loaded at: a write after a reset or a
    /// deletion of the state (a new epoch) is refused, and the state
    /// loaded again.
    state_epoch: i32,
    read_committed: bool,
    /// `errors.deadletterqueue.topic.name` and `.copy.record.enable`.
    dead_letter_topic: Option<String>,
    copy_dead_letter_record: bool,
    /// Held for a whole turn, across its state write.
    turn: tokio::sync::Mutex<Turn>,
}

/// What a turn changes.
struct Turn {
    engine: SharePartition,
    /// The armed wake-up for the next lock expiry or held-back record.
    timer: Option<(u64, JoinHandle<()>)>,
}

impl Hosted {
    /// Where reading stops: the high watermark, or the last stable offset
    /// for read_committed, held back by the topic's delivery delay.
    fn readable_end(&self) -> u64 {
        let high_watermark = self.partition.high_watermark();
        let upper = if self.read_committed {
            self.partition.last_stable_offset_at(high_watermark)
        } else {
            high_watermark
        };
        self.partition.delivery_limit(upper).0
    }

    /// At most `max_bytes` of the log from `from` up to the readable end,
    /// with that end; nothing if `from` is not below it. On the blocking
    /// pool: it reads the log, and the delivery delay may read batch
    /// timestamps.
    async fn read(
        self: &Arc<Self>,
        from: u64,
        max_bytes: usize,
    ) -> Result<Option<(Bytes, u64)>, ShareCode> {
        let hosted = self.clone();
        on_the_blocking_pool(move || {
            let upper = hosted.readable_end();
            if from >= upper {
                return Ok(None);
            }
            let slice = hosted.partition.log().read(from, max_bytes, upper);
            let bytes = slice.ok().and_then(|slice| slice.to_bytes().ok());
            bytes
                .map(|bytes| Some((bytes, upper)))
                .ok_or(KAFKA_STORAGE_ERROR)
        })
        .await
    }
}

/// What a fetch of one share-partition acquired, and what became of the
/// acknowledgements it carried.
pub(crate) struct Acquired {
    pub(crate) records: Bytes,
    pub(crate) ranges: Vec<AcquiredRange>,
    /// The outcome of the acknowledgements applied before acquiring.
    pub(crate) acknowledgements: Result<(), ShareCode>,
}

/// The share-partitions led here, and the share sessions.
pub(crate) struct SharePartitions {
    hosted: Mutex<HashMap<SharePartitionKey, Arc<Hosted>>>,
    /// One load at a time per share-partition: two requests finding it
    /// unloaded must not build two engines (each would hand out the same
    /// records, and one's acknowledgements would be lost with it).
    loading: KeyedTurns<SharePartitionKey>,
    sessions: Mutex<ShareSessions>,
    persister: SharePersister,
    /// The broker, for timers and dead letters that outlive a request.
    host: Weak<dyn ShareHost>,
}

impl SharePartitions {
    pub(crate) fn new(max_sessions: usize, host: Weak<dyn ShareHost>) -> Self {
        Self {
            hosted: Mutex::default(),
            loading: KeyedTurns::default(),
            sessions: Mutex::new(ShareSessions::new(max_sessions)),
            persister: SharePersister::default(),
            host,
        }
    }

    pub(crate) fn sessions(&self) -> parking_lot::MutexGuard<'_, ShareSessions> {
        self.sessions.lock()
    }

    /// The share-partition `key`, loaded if this broker leads its data
    /// partition and its state partition.
    async fn hosted(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
    ) -> Result<Arc<Hosted>, ShareCode> {
        let image = host.image();
        let topic = image
            .topic_by_id(key.topic_id)
            .ok_or(UNKNOWN_TOPIC_ID)?
            .name
            .clone();
        let partition = host
            .leader_partition(&topic, key.partition)
            .map_err(|not_served| not_served.code())?;
        let leader_epoch = partition.replica_state().leader_epoch;
        let loaded = || {
            self.hosted.lock().get(key).cloned().filter(|hosted| {
                hosted.leader_epoch == leader_epoch && Arc::ptr_eq(&hosted.partition, &partition)
            })
        };
        if let Some(hosted) = loaded() {
            return Ok(hosted);
        }
        self.loading
            .run(key, async {
                // Loaded by another request meanwhile.
                match loaded() {
                    Some(hosted) => Ok(hosted),
                    None => self.load(host, key, partition.clone(), leader_epoch).await,
                }
            })
            .await
    }

    /// Builds `key`'s engine from its persisted state, or starts that state
    /// at `share.auto.offset.reset` if it has none. Only in `key`'s
    /// loading turn.
    async fn load(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        partition: Arc<Partition>,
        leader_epoch: i32,
    ) -> Result<Arc<Hosted>, ShareCode> {
        let settings = host.share_settings(&key.group);
        let home = self.persister.home(host, key)?;
        let read = self.persister.read(host, &home, key, leader_epoch).await?;
        let mut state_epoch = read.state_epoch;
        let engine = match read.state {
            Some(state) => SharePartition::load(settings.partition.clone(), &state),
            None => {
                let start = match settings.auto_offset_reset {
                    ShareAutoOffsetReset::Earliest => partition.log().log_start_offset(),
                    ShareAutoOffsetReset::Latest => partition.high_watermark(),
                } as i64;
                let state = PersistedState {
                    start_offset: start,
                    batches: Vec::new(),
                };
                // Written before anything is acquired from it: the answer
                // to the first fetch awaits this write with its own.
                state_epoch += 1;
                let _ = self
                    .persister
                    .initialize(host, &home, key, state, state_epoch, leader_epoch)
                    .await?;
                SharePartition::new(settings.partition.clone(), start)
            }
        };
        let pending = engine.pending_dead_letters();
        let hosted = Arc::new(Hosted {
            partition,
            leader_epoch,
            state_epoch,
            read_committed: settings.read_committed,
            dead_letter_topic: settings.dead_letter_topic,
            copy_dead_letter_record: settings.copy_dead_letter_record,
            turn: tokio::sync::Mutex::new(Turn {
                engine,
                timer: None,
            }),
        });
        self.hosted.lock().insert(key.clone(), hosted.clone());
        if !pending.is_empty() {
            // Left Archiving by the previous leader: some may be written.
            self.send_dead_letters(key, pending, None, leader_epoch, 1);
        }
        Ok(hosted)
    }

    /// The start offset `key`'s state holds, `None` if it has none yet.
    pub(crate) async fn persisted_start(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
    ) -> Result<Option<i64>, ShareCode> {
        let home = self.persister.home(host, key)?;
        let read = self
            .persister
            .read(host, &home, key, current_leader_epoch(host, key))
            .await?;
        Ok(read.state.map(|s| s.start_offset))
    }

    /// Starts `key`'s state over at `start_offset` (AlterShareGroupOffsets),
    /// or deletes it with -1 (DeleteShareGroupOffsets, DeleteGroups), at a
    /// new state epoch: the engine holding the old state, here or on
    /// another broker, is fenced and loads it again. Returns the write to
    /// await.
    pub(crate) async fn reset_state(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        start_offset: i64,
    ) -> Result<Option<ReplicatedWrite>, ShareCode> {
        let home = self.persister.home(host, key)?;
        let leader_epoch = current_leader_epoch(host, key);
        let read = self.persister.read(host, &home, key, leader_epoch).await?;
        if start_offset < 0 && read.state.is_none() {
            return Ok(None); // nothing to delete
        }
        let state = PersistedState {
            start_offset,
            batches: Vec::new(),
        };
        let write = self
            .persister
            .initialize(host, &home, key, state, read.state_epoch + 1, -1)
            .await?;
        self.forget(key).await;
        Ok(write)
    }

    /// Applies `member`'s acknowledgements `acks` of `key`, then acquires for
    /// it up to `max_records` records, reading at most `max_bytes` of its
    /// log (none if either is 0). Returns what was acquired (nothing if
    /// nothing is available), the acknowledgements' outcome, and the one
    /// write of both to await before answering.
    pub(crate) async fn acquire(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        member: &str,
        acks: &[(i64, i64, AcknowledgeType)],
        max_records: usize,
        max_bytes: usize,
    ) -> Result<(Acquired, Option<ReplicatedWrite>), ShareCode> {
        // Again once if its state write was fenced: the state was reset or
        // deleted, and the failed write dropped the engine, so the second
        // attempt works on the state as it is now.
        match self
            .acquire_once(host, key, member, acks, max_records, max_bytes)
            .await
        {
            Err(FENCED_STATE_EPOCH) => {
                self.acquire_once(host, key, member, acks, max_records, max_bytes)
                    .await
            }
            outcome => outcome,
        }
    }

    async fn acquire_once(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        member: &str,
        acks: &[(i64, i64, AcknowledgeType)],
        max_records: usize,
        max_bytes: usize,
    ) -> Result<(Acquired, Option<ReplicatedWrite>), ShareCode> {
        let hosted = self.hosted(host, key).await?;
        let mut turn = hosted.turn.lock().await;
        let h = &mut *turn;
        let now = host.now_ms() as u64;
        h.engine.expire_locks(now);
        let mut acquired = Acquired {
            records: Bytes::new(),
            ranges: Vec::new(),
            acknowledgements: Ok(()),
        };
        if !acks.is_empty() {
            acquired.acknowledgements = h
                .engine
                .acknowledge(member, now, acks)
                .map_err(|error: ShareError| error.code());
        }
        h.engine
            .on_log_start(hosted.partition.log().log_start_offset() as i64);
        let from = (max_records > 0 && max_bytes > 0)
            .then(|| h.engine.fetch_offset(now))
            .flatten();
        // What `max_records` records need, not all `max_bytes`: a share
        // fetch reads and parses every record it reads.
        let read_bytes = max_bytes.clamp(1, SHARE_READ_BYTES);
        if let Some(from) = from.map(|from| u64::try_from(from).unwrap_or(0)) {
            if let Some((bytes, upper)) = hosted.read(from, read_bytes).await? {
                let aborted = if hosted.read_committed {
                    hosted.partition.log().aborted_transactions(from, upper)
                } else {
                    Vec::new()
                };
                let records = log_records(&bytes, &aborted).map_err(|_| KAFKA_STORAGE_ERROR)?;
                acquired.ranges = h.engine.acquire(member, now, records, max_records);
                if let Some(last) = acquired.ranges.last() {
                    acquired.records = batches_through(bytes, last.last_offset);
                }
            }
        }
        let write = self.persist(host, key, &hosted, h).await?;
        self.arm_timer(key, h, now);
        Ok((acquired, write))
    }

    /// Applies `member`'s acknowledgements of `key`.
    pub(crate) async fn acknowledge(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        member: &str,
        batches: &[(i64, i64, AcknowledgeType)],
    ) -> Result<Option<ReplicatedWrite>, ShareCode> {
        let (acquired, write) = self.acquire(host, key, member, batches, 0, 0).await?;
        acquired.acknowledgements.map(|()| write)
    }

    /// Releases what `member` acquired on the share-partitions of `group`
    /// here: it left the group, was removed from it, or its share session
    /// ended. (A session outlives its member's leaving: the member's last
    /// acknowledgements may follow.)
    pub(crate) async fn release(&self, host: &dyn ShareHost, group: &str, member: &str) {
        let of_group: Vec<(SharePartitionKey, Arc<Hosted>)> = self
            .hosted
            .lock()
            .iter()
            .filter(|(key, _)| key.group == group)
            .map(|(key, hosted)| (key.clone(), hosted.clone()))
            .collect();
        let now = host.now_ms() as u64;
        for (key, hosted) in of_group {
            if !still_leads(host, &hosted) {
                continue;
            }
            let mut turn = hosted.turn.lock().await;
            turn.engine.release_member(member, now);
            let _ = self.persist(host, &key, &hosted, &mut turn).await;
            self.arm_timer(&key, &mut turn, now);
        }
    }

    /// Writes what changed to `__share_group_state`. On failure the engine,
    /// ahead of what is persisted, is dropped: the next request loads the
    /// persisted state again.
    async fn persist(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        hosted: &Hosted,
        turn: &mut Turn,
    ) -> Result<Option<ReplicatedWrite>, ShareCode> {
        let archived = turn.engine.take_archived();
        if archived > 0 {
            let labels = GroupPartitionLabels {
                group: key.group.clone(),
                topic: hosted.partition.topic.clone(),
                partition: key.partition.to_string(),
            };
            let metrics = host.metrics();
            metrics
                .share_group_records_archived
                .get_or_create(&labels)
                .inc_by(archived);
        }
        let (changes, dead_letters) = turn.engine.take_changes();
        let Some(update) = changes else {
            return Ok(None);
        };
        let written = match self.persister.home(host, key) {
            Ok(home) => {
                let (state_epoch, leader_epoch) = (hosted.state_epoch, hosted.leader_epoch);
                self.persister
                    .update(host, &home, key, update, state_epoch, leader_epoch)
                    .await
            }
            Err(code) => Err(code),
        };
        match written {
            Ok(write) => {
                if !dead_letters.is_empty() {
                    // Written once their Archiving state is replicated.
                    let leader_epoch = hosted.leader_epoch;
                    self.send_dead_letters(key, dead_letters, write.clone(), leader_epoch, 0);
                }
                Ok(write)
            }
            Err(code) => {
                self.hosted.lock().remove(key);
                Err(code)
            }
        }
    }

    /// Arms a wake-up for when the next lock expires or a held-back record
    /// becomes available, so an expired lock is persisted (and its record
    /// offered again) even when no request comes.
    fn arm_timer(&self, key: &SharePartitionKey, h: &mut Turn, now: u64) {
        let next = [h.engine.next_lock_expiry_ms(), h.engine.next_available_ms()]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next else {
            return;
        };
        if h.timer
            .as_ref()
            .is_some_and(|(armed, task)| *armed <= at && !task.is_finished())
        {
            return;
        }
        let host = self.host.clone();
        let key = key.clone();
        let delay = Duration::from_millis(at.saturating_sub(now));
        let task = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(host) = host.upgrade() else {
                return;
            };
            host.share_partitions().on_timer(&*host, &key).await;
        });
        if let Some((_, previous)) = h.timer.replace((at, task)) {
            previous.abort();
        }
    }

    async fn on_timer(&self, host: &dyn ShareHost, key: &SharePartitionKey) {
        let Some(hosted) = self.hosted.lock().get(key).cloned() else {
            return;
        };
        let mut turn = hosted.turn.lock().await;
        turn.timer = None;
        if !still_leads(host, &hosted) {
            // Another broker leads it now; the next request loads it anew.
            self.hosted.lock().remove(key);
            return;
        }
        let now = host.now_ms() as u64;
        turn.engine.expire_locks(now);
        let _ = self.persist(host, key, &hosted, &mut turn).await;
        self.arm_timer(key, &mut turn, now);
        // Records available again: a waiting ShareFetch reads them.
        hosted.partition.wake_fetches();
    }

    /// Writes `letters` to the group's dead-letter topic once `after` (the
    /// write of their Archiving state) is replicated, then archives them;
    /// `attempt` counts the tries before (a retry searches the topic for
    /// the ones already written, and waits longer).
    fn send_dead_letters(
        &self,
        key: &SharePartitionKey,
        letters: Vec<DeadLetter>,
        after: Option<ReplicatedWrite>,
        leader_epoch: i32,
        attempt: u32,
    ) {
        let host = self.host.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let Some(host) = host.upgrade() else {
                return;
            };
            if attempt > 1 {
                let backoff = DEAD_LETTER_RETRY_BACKOFF * 2u32.pow((attempt - 2).min(5));
                tokio::time::sleep(backoff.min(DEAD_LETTER_RETRY_BACKOFF_MAX)).await;
            }
            let replicated = match &after {
                Some(write) => write
                    .replicated(host.node_id(), DEAD_LETTER_STATE_TIMEOUT)
                    .await
                    .is_ok(),
                None => true,
            };
            // A state write not known to be replicated may still be: the
            // next try searches the topic first.
            let attempt = if replicated { attempt } else { attempt.max(1) };
            let partitions = host.share_partitions();
            partitions
                .write_dead_letters(&*host, &key, letters, leader_epoch, attempt)
                .await;
        });
    }

    async fn write_dead_letters(
        &self,
        host: &dyn ShareHost,
        key: &SharePartitionKey,
        letters: Vec<DeadLetter>,
        leader_epoch: i32,
        attempt: u32,
    ) {
        let Some(hosted) = self.hosted.lock().get(key).cloned() else {
            return;
        };
        if !still_leads(host, &hosted) || hosted.leader_epoch != leader_epoch {
            return; // the next leader writes what is still Archiving
        }
        let letters: Vec<DeadLetter> = {
            let turn = hosted.turn.lock().await;
            letters
                .into_iter()
                .filter(|l| turn.engine.awaits_dead_letter(l.offset))
                .collect()
        };
        if letters.is_empty() {
            return;
        }
        let (partition, topic) = (&hosted.partition, &hosted.partition.topic);
        let source = Source {
            group: &key.group,
            topic,
            partition,
        };
        let written = match &hosted.dead_letter_topic {
            Some(dead_letter_topic) => {
                dead_letters::write(
                    host,
                    &self.persister,
                    &source,
                    dead_letter_topic,
                    hosted.copy_dead_letter_record,
                    &letters,
                    attempt > 0,
                )
                .await
            }
            None => Err(DeadLetterError::Unwritable(
                "the group has no dead-letter topic any more".to_owned(),
            )),
        };
        match written {
            Ok(written) => {
                let labels = GroupPartitionLabels {
                    group: key.group.clone(),
                    topic: topic.clone(),
                    partition: partition.index.to_string(),
                };
                let counter = host
                    .metrics()
                    .share_group_dead_lettered
                    .get_or_create(&labels);
                counter.inc_by(written as u64);
            }
            Err(DeadLetterError::Unwritable(why)) => {
                tracing::warn!(
                    group = key.group,
                    topic,
                    partition = partition.index,
                    records = letters.len(),
                    "records archived without their dead letters: {why}"
                );
            }
            Err(DeadLetterError::Unavailable(why)) => {
                tracing::debug!(
                    group = key.group,
                    topic,
                    partition = partition.index,
                    "dead letters not written yet: {why}"
                );
                self.send_dead_letters(key, letters, None, leader_epoch, attempt + 1);
                return;
            }
        }
        if !still_leads(host, &hosted) {
            return;
        }
        let mut turn = hosted.turn.lock().await;
        for letter in &letters {
            turn.engine.dead_letter_written(letter.offset);
        }
        let now = host.now_ms() as u64;
        let _ = self.persist(host, key, &hosted, &mut turn).await;
        self.arm_timer(key, &mut turn, now);
        // The start offset may have moved: a waiting ShareFetch reads on.
        hosted.partition.wake_fetches();
    }

    /// Drops the engine of `key`, if hosted here (its state was reset or
    /// deleted): the next request loads the state anew.
    pub(crate) async fn forget(&self, key: &SharePartitionKey) {
        // The map's lock is let go first: `persist` and `on_timer` take it
        // during a turn.
        let removed = self.hosted.lock().remove(key);
        if let Some(hosted) = removed {
            if let Some((_, timer)) = hosted.turn.lock().await.timer.take() {
                timer.abort();
            }
        }
    }

    /// Every share-partition led here and loaded, by group, topic and
    /// partition. Waits for each one's turn and reads the log where it is
    /// called, which must be a blocking-pool thread.
    pub(crate) fn views(&self, host: &dyn ShareHost) -> Vec<SharePartitionView> {
        let hosted: Vec<(SharePartitionKey, Arc<Hosted>)> = self
            .hosted
            .lock()
            .iter()
            .map(|(key, hosted)| (key.clone(), hosted.clone()))
            .collect();
        let now = host.now_ms();
        let mut views: Vec<SharePartitionView> = hosted
            .into_iter()
            .filter_map(|(key, hosted)| {
                if !still_leads(host, &hosted) {
                    return None;
                }
                let turn = hosted.turn.blocking_lock();
                let end = hosted.readable_end() as i64;
                let counts = turn.engine.in_flight();
                let window_end = turn.engine.end_offset();
                let unread = (end - window_end).max(0) as u64;
                let first_available = counts
                    .first_available
                    .or((unread > 0).then_some(window_end));
                let start = turn.engine.start_offset();
                drop(turn);
                let oldest = first_available
                    .and_then(|offset| hosted.partition.timestamp_at(offset as u64).ok().flatten())
                    .filter(|ts| *ts >= 0)
                    .map_or(0.0, |ts| (now - ts).max(0) as f64 / 1000.0);
                Some(SharePartitionView {
                    group: key.group.clone(),
                    topic: hosted.partition.topic.clone(),
                    partition: key.partition,
                    start_offset: start,
                    log_end_offset: end,
                    in_flight: (end - start).max(0) as u64,
                    available: counts.available as u64 + unread,
                    acquired: counts.acquired as u64,
                    oldest_available_seconds: oldest,
                })
            })
            .collect();
        views.sort_by(|a, b| {
            (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition))
        });
        views
    }

    /// The data partition of a hosted share-partition, for waiting on.
    pub(crate) fn partition_of(&self, key: &SharePartitionKey) -> Option<Arc<Partition>> {
        let hosted = self.hosted.lock().get(key).cloned()?;
        Some(hosted.partition.clone())
    }
}

/// The leader epoch of `key`'s data partition, as the image says.
fn current_leader_epoch(host: &dyn ShareHost, key: &SharePartitionKey) -> i32 {
    host.environment().with_image(|image| {
        image
            .topic_by_id(key.topic_id)
            .and_then(|t| t.partition(key.partition))
            .map_or(-1, |p| p.leader_epoch)
    })
}

/// Whether this broker still leads the data partition of `hosted` at the
/// epoch its state was loaded at: only then may it change that state.
fn still_leads(host: &dyn ShareHost, hosted: &Hosted) -> bool {
    let state = hosted.partition.replica_state();
    state.leader == host.node_id() && state.leader_epoch == hosted.leader_epoch
}

/// The whole batches of `bytes` up to the one holding `last_offset`: what
/// the client needs to read the records acquired.
fn batches_through(bytes: Bytes, last_offset: i64) -> Bytes {
    let mut position = 0;
    while position < bytes.len() {
        let Ok(header) = weir_log::batch::BatchHeader::parse(&bytes[position..], position) else {
            break;
        };
        position += header.total_size();
        if header.next_offset() > last_offset {
            break;
        }
    }
    bytes.slice(..position.min(bytes.len()))
}
