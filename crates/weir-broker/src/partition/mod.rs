//! One partition this broker hosts: its log, the idempotent-producer state,
//! and a signal that wakes fetches waiting for new data.

mod appender;
pub use appender::QueuedWrite;
pub(crate) mod file_io;
pub mod high_watermarks;
pub mod leader_state;
pub mod producer_snapshots;
pub mod producer_state;
pub mod remote_tier;

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;
use weir_log::batch::{self, BatchError, BatchHeader, CheckedBatch, ControlType};
use weir_log::records::{self, RecordsError};
use weir_log::storage::{FsStorage, Storage};
use weir_log::{
    AbortedTxn, AppendInfo, CleanStats, Cleanable, Cleaner, Clock, EpochEntry, FailureListener,
    Log, LogConfig, LogError, LogSlice, OpenTxn, RetentionOutcome, TimestampOffset, TimestampType,
};

use crate::partition::file_io::on_the_blocking_pool;
use crate::partition::leader_state::{LeaderState, ReadableFollower};
use crate::partition::producer_snapshots::{
    load_producer_state, ProducerSnapshot, PRODUCER_SNAPSHOT_FILE,
};
use crate::partition::producer_state::{
    ActiveProducer, BatchMetadata, IncomingBatch, MarkerCheck, ProducerStates, SequenceCheck,
};
use crate::partition::remote_tier::RemoteTier;

/// Why a produce to this partition failed, in Kafka's terms.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("produce requests must carry exactly one record batch per partition, got {0}")]
    BatchCount(usize),
    #[error("out of order sequence number: expected {expected}, got {got}")]
    OutOfOrderSequence { expected: i32, got: i32 },
    #[error("producer epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch { current: i16, got: i16 },
    #[error("clients may not write control batches (transaction markers)")]
    ControlBatch,
    #[error("a transactional batch needs a producer id (from InitProducerId)")]
    TransactionalWithoutProducer,
    #[error("producer {producer_id} has a transaction open since offset {first_offset}: its batches must be transactional until it ends")]
    InvalidTxnState { producer_id: i64, first_offset: u64 },
    #[error("coordinator epoch {got} is older than the epoch {current} of the coordinator that last wrote a marker")]
    CoordinatorFenced { current: i32, got: i32 },
    #[error("leadership moved (leader epoch {current}, not {epoch}) before the append")]
    NotLeader { epoch: i32, current: i32 },
    #[error("the ISR has {isr} replica(s), fewer than min.insync.replicas={min}")]
    NotEnoughReplicas { isr: usize, min: usize },
    /// Records Kafka's validation refuses one by one (KIP-467): without
    /// a key for a compacted topic, or with a timestamp out of range.
    /// Kafka's words, so clients and their users see the same messages.
    #[error("{}", record_errors_message(*.timestamps, .records))]
    InvalidRecords {
        /// Whether the records are refused for their timestamps
        /// (INVALID_TIMESTAMP) rather than as invalid (INVALID_RECORD).
        timestamps: bool,
        /// The index within the batch of each refused record, and why.
        records: Vec<(i32, String)>,
    },
    #[error("the batch's records cannot be checked: {0}")]
    UnreadableRecords(#[from] RecordsError),
    /// The append is in the log but the fsync `flush.messages` asked for
    /// failed; the log's directory is then in doubt.
    #[error("the append could not be synced: {0}")]
    FlushFailed(String),
    /// The appender dropped the write unanswered: the broker is stopping.
    #[error("the append was abandoned: the broker is stopping")]
    Abandoned,
    /// Mirrored batches fetched for a log that ended elsewhere then (it
    /// was cut meanwhile): they would leave a hole or overlap.
    #[error("the log ends at {end}, not at {fetched_for} as when its batches were fetched")]
    MovedSinceFetch { fetched_for: u64, end: u64 },
}

/// Kafka's message for a batch refused for its records.
fn record_errors_message(timestamps: bool, records: &[(i32, String)]) -> String {
    if timestamps {
        return "One or more records have been rejected due to invalid timestamp".to_owned();
    }
    let shown: Vec<String> = records
        .iter()
        .take(3)
        .map(|(index, message)| format!("RecordError(batchIndex={index}, message='{message}')"))
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        records.len(),
        shown.join(", ")
    )
}

/// The partition's leadership as the metadata image last said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    /// The leader's broker id; -1 while the partition has none.
    pub leader: i32,
    pub leader_epoch: i32,
    /// The topic's `min.insync.replicas`.
    pub min_insync_replicas: usize,
}

impl Default for ReplicaState {
    fn default() -> Self {
        Self {
            leader: -1,
            leader_epoch: 0,
            min_insync_replicas: 1,
        }
    }
}

/// Who leads the partition and, while this replica does, over which
/// followers: the state Kafka's `leaderIsrUpdateLock` guards. Appends and
/// waiting writes hold it shared, from their check to their end; a change
/// of leader, epoch or ISR holds it exclusively.
struct Leadership {
    state: ReplicaState,
    /// While this replica leads: its followers, the ISR and the high
    /// watermark they give, the one place the ISR is kept. Its own mutex
    /// lets appends and follower fetches, which hold the leadership shared,
    /// move the followers' progress and the high watermark.
    leading: Mutex<Option<LeaderState>>,
}

impl Leadership {
    /// The in-sync replicas this replica leads, itself included; 0 when it
    /// does not lead.
    fn isr_size(&self) -> usize {
        self.leading.lock().as_ref().map_or(0, |s| s.isr().len())
    }
}

/// Who wrote a batch, as far as the idempotent-producer checks care
/// (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: its sequence numbers are checked and its retries
    /// answered with their original offsets.
    Client,
    /// The broker itself, on a producer's behalf (a group coordinator's
    /// transactional offset commits): only the producer epoch is checked,
    /// as Kafka does; the sequence numbers are not the producer's.
    Coordinator,
}

/// Who must hold a leader's append before it is acknowledged (the
/// producer's `acks`, all for every coordinator write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequiredAcks {
    /// acks=0 or acks=1: the leader's log.
    Leader,
    /// acks=all: every in-sync replica, which must be at least
    /// `min.insync.replicas` when the append is made.
    All,
}

/// A coordinator's write to one of its internal partitions, answered to the
/// client only once the in-sync replicas hold it (Kafka writes its
/// coordinators' records with acks=all).
#[derive(Clone)]
pub struct ReplicatedWrite {
    pub partition: std::sync::Arc<Partition>,
    /// The high watermark must reach this offset.
    pub until: u64,
}

impl ReplicatedWrite {
    /// The write of `appended` to `partition`.
    pub fn of(partition: std::sync::Arc<Partition>, appended: &Appended) -> Self {
        Self {
            partition,
            until: appended.last_offset + 1,
        }
    }

    /// Waits until the in-sync replicas hold the write, for at most
    /// `timeout`. A failure is answered as Kafka's coordinators answer a
    /// failed write: NOT_COORDINATOR once leadership moved,
    /// COORDINATOR_NOT_AVAILABLE otherwise (too few in-sync replicas, or
    /// the timeout).
    pub async fn replicated(
        &self,
        node_id: i32,
        timeout: std::time::Duration,
    ) -> Result<(), ResponseError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let outcome = self
            .partition
            .replicated(self.until, node_id, deadline)
            .await;
        self.answer(outcome)
    }

    /// [`replicated`](Self::replicated) without waiting: `None` while the
    /// in-sync replicas do not all hold the write yet.
    pub fn outcome(&self, node_id: i32) -> Option<Result<(), ResponseError>> {
        let outcome = self.partition.replication_outcome(self.until, node_id)?;
        Some(self.answer(outcome))
    }

    fn answer(&self, outcome: Result<(), (ResponseError, String)>) -> Result<(), ResponseError> {
        outcome.map_err(|(error, message)| {
            tracing::warn!(topic = %self.partition.topic, partition = self.partition.index, %message, "coordinator write not replicated");
            match error {
                ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
                _ => ResponseError::CoordinatorNotAvailable,
            }
        })
    }
}

/// A successful produce: where the batch is, or was already.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub base_offset: u64,
    pub last_offset: u64,
    pub log_append_time_ms: Option<i64>,
    pub records: u64,
    pub bytes: u64,
    pub duplicate: bool,
}

impl From<&AppendInfo> for Appended {
    fn from(info: &AppendInfo) -> Self {
        Self {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_append_time_ms: info.log_append_time_ms,
            records: info.records,
            bytes: info.bytes,
            duplicate: false,
        }
    }
}

/// An append, done or waiting for its fsync.
#[must_use]
pub enum Written {
    Appended(Appended),
    FlushDue(FlushDue),
}

/// An append in the log but not yet synced, as `flush.messages` asks:
/// answered only after [`Partition::flush_appended`].
#[must_use]
pub struct FlushDue {
    info: AppendInfo,
}

impl FlushDue {
    /// Where the batch went.
    pub fn appended(&self) -> Appended {
        Appended::from(&self.info)
    }
}

/// What the partitions of a broker share: the file system their logs are
/// on and the clock that stamps their time.
#[derive(Clone)]
pub struct LogEnv {
    pub storage: Arc<dyn Storage>,
    pub clock: Arc<dyn Clock>,
    /// Told when an I/O failure leaves a log's directory in doubt.
    pub on_failure: Option<FailureListener>,
}

impl Default for LogEnv {
    fn default() -> Self {
        Self {
            storage: Arc::new(FsStorage::default()),
            clock: Arc::new(weir_log::SystemClock),
            on_failure: None,
        }
    }
}

/// What a leading replica leads over, as the metadata says.
#[derive(Debug, Clone, Copy)]
pub struct Leading<'a> {
    /// This broker.
    pub me: i32,
    pub replicas: &'a [i32],
    pub isr: &'a [i32],
    pub partition_epoch: i32,
    pub now_ms: i64,
}

/// A partition's log, for reading. Everything that changes the log goes
/// through the [`Partition`], which keeps its producer state, leadership
/// and high watermark in step with it.
///
/// A view reads the log it was taken from: after a move to another log
/// directory swapped in the copy, take a new view to see what was
/// appended since.
pub struct LogView(Arc<Log>);

impl LogView {
    pub fn dir(&self) -> &Path {
        self.0.dir()
    }

    pub fn log_start_offset(&self) -> u64 {
        self.0.log_start_offset()
    }

    pub fn log_end_offset(&self) -> u64 {
        self.0.log_end_offset()
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.0.size_bytes()
    }

    /// The log's settings in force.
    pub fn config(&self) -> LogConfig {
        self.0.config()
    }

    /// See [`Log::sealed_segment_from`].
    pub fn sealed_segment_from(
        &self,
        from: u64,
        upper_bound: u64,
    ) -> Result<Option<weir_log::sealed::SealedSegment>, LogError> {
        self.0.sealed_segment_from(from, upper_bound)
    }

    /// See [`Log::segments_from`].
    pub fn segments_from(&self, from: u64, upper_bound: u64, with_active: bool) -> (u64, u64) {
        self.0.segments_from(from, upper_bound, with_active)
    }

    /// See [`Log::truncation_count`].
    pub fn truncation_count(&self) -> u64 {
        self.0.truncation_count()
    }

    /// The segments' base offsets, oldest first; the last is the active one.
    pub fn segment_base_offsets(&self) -> Vec<u64> {
        self.0.segment_base_offsets()
    }

    /// See [`Log::read`].
    pub fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
        upper_bound: u64,
    ) -> Result<LogSlice, LogError> {
        self.0.read(from_offset, max_bytes, upper_bound)
    }

    /// See [`Log::try_read_in_memory`].
    pub fn try_read_in_memory(
        &self,
        from_offset: u64,
        max_bytes: usize,
        upper_bound: u64,
    ) -> Option<Result<LogSlice, LogError>> {
        self.0
            .try_read_in_memory(from_offset, max_bytes, upper_bound)
    }

    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        self.0.offset_for_timestamp(timestamp)
    }

    pub fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>, LogError> {
        self.0.max_timestamp_offset()
    }

    pub fn latest_epoch(&self) -> Option<EpochEntry> {
        self.0.latest_epoch()
    }

    /// See [`Log::end_offset_for_epoch`].
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.0.end_offset_for_epoch(epoch)
    }

    pub fn aborted_transactions(&self, from: u64, upper_bound: u64) -> Vec<AbortedTxn> {
        self.0.aborted_transactions(from, upper_bound)
    }

    /// See [`Log::try_aborted_transactions`].
    pub fn try_aborted_transactions(&self, from: u64, upper_bound: u64) -> Option<Vec<AbortedTxn>> {
        self.0.try_aborted_transactions(from, upper_bound)
    }

    pub fn open_transactions(&self) -> Vec<OpenTxn> {
        self.0.open_transactions()
    }
}

pub struct Partition {
    pub topic: String,
    pub topic_id: uuid::Uuid,
    pub index: i32,
    /// The log. A move to another directory swaps in its copy whole (see
    /// [`Partition::move_log`]); the lock is held only to take or swap the
    /// reference, never across I/O.
    log: RwLock<Arc<Log>>,
    /// Held shared by everything that changes the log (appends,
    /// truncations, retention, cleaning, rolls, flushes, config changes,
    /// producer-state snapshots), exclusively by a move while it copies the
    /// last of the log and opens the copy. Readers never take it.
    log_changes: RwLock<()>,
    /// Where the log and the partition's own state files are.
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    on_failure: Option<FailureListener>,
    /// Fetches and acks=all writes waiting for this partition (among
    /// others) to change, each woken once by the next change.
    parked_fetches: Mutex<Vec<Weak<Notify>>>,
    /// See [`change_count`](Self::change_count).
    changes: AtomicU64,
    producers: Mutex<ProducerStates>,
    /// Client batches and markers queued to be written off the runtime's
    /// workers (see [`Partition::append`]).
    appender: appender::Appender,
    leadership: RwLock<Leadership>,
    /// Below this offset records are on every in-sync replica.
    high_watermark: AtomicU64,
    /// The log end the producer-state snapshot on disk covers (`u64::MAX`:
    /// none, or stale), so that an unchanged partition is not written again.
    snapshot_offset: AtomicU64,
    /// Held by whoever writes `producer-state.json`, from reading the
    /// state to the file's rename (after `log_changes`, before
    /// `producers`): two writers never interleave, so the file never gets
    /// an older state after a newer one.
    snapshot_writes: Mutex<()>,
    /// Whether the topic's `leader.replication.throttled.replicas` names
    /// this partition on this broker: followers' fetches of it, while this
    /// replica leads, count against `leader.replication.throttled.rate`.
    leader_throttled: AtomicBool,
    /// Whether the topic's `follower.replication.throttled.replicas` names
    /// this partition on this broker: this replica's fetches, while it
    /// follows, count against `follower.replication.throttled.rate`.
    follower_throttled: AtomicBool,
    /// `weir.delivery.delay.ms`, read by every consumer fetch.
    delivery_delay_ms: AtomicI64,
    /// How far consumers may read under it.
    delivery: Mutex<DeliveryCursor>,
    /// This replica's series of the `consumer_bytes_out` metric, looked up
    /// once.
    consumer_bytes_out: OnceLock<Counter>,
    /// Its series of `producer_bytes_in`, likewise.
    producer_bytes_in: OnceLock<Counter>,
    /// Its remote tier, as the metadata says.
    remote: RemoteTier,
    /// The mirror feeding its topic, which makes it read-only, as the
    /// metadata says.
    mirror: RwLock<Option<Arc<str>>>,
}

/// The delivery delay's watermark, moved on as time passes: batches below
/// `visible` are old enough for consumers. Each batch header is read about
/// once, when the watermark reaches it; nothing is held per record, so a
/// partition holding back a million records costs what one holding back
/// one does.
#[derive(Debug, Default)]
struct DeliveryCursor {
    /// The delay it was computed for.
    delay_ms: i64,
    /// The log's truncation count then: a truncated log starts over.
    truncations: u64,
    visible: u64,
    /// When the batch at `visible` becomes readable (`i64::MAX`: `visible`
    /// was the upper bound asked for, nothing held back).
    visible_at_ms: i64,
    /// The upper bound it was computed for.
    upper: u64,
}

impl Partition {
    pub fn open(
        data_dir: &Path,
        topic: &str,
        topic_id: uuid::Uuid,
        index: i32,
        config: LogConfig,
    ) -> Result<Self, LogError> {
        Self::open_in(
            &LogEnv::default(),
            data_dir,
            topic,
            topic_id,
            index,
            config,
            None,
        )
    }

    /// [`open`](Self::open) on `storage`, which the broker's partitions
    /// share so their open files stay within `log.max.open.files`, at the
    /// high watermark the broker's checkpoint holds for it.
    pub fn open_in(
        env: &LogEnv,
        data_dir: &Path,
        topic: &str,
        topic_id: uuid::Uuid,
        index: i32,
        config: LogConfig,
        checkpointed_high_watermark: Option<u64>,
    ) -> Result<Self, LogError> {
        let dir = Self::dir_in(data_dir, topic, index);
        let log = Log::open_with(dir, config, env.storage.clone(), env.clock.clone())?;
        Self::with_log(
            env,
            log,
            topic,
            topic_id,
            index,
            checkpointed_high_watermark,
        )
    }

    /// The directory of partition `index` of `topic` in `data_dir`.
    pub fn dir_in(data_dir: &Path, topic: &str, index: i32) -> std::path::PathBuf {
        data_dir.join(format!("{topic}-{index}"))
    }

    /// A partition on `log`, opened on `env`'s storage (see
    /// [`open_in`](Self::open_in)).
    pub fn with_log(
        env: &LogEnv,
        log: Log,
        topic: &str,
        topic_id: uuid::Uuid,
        index: i32,
        checkpointed_high_watermark: Option<u64>,
    ) -> Result<Self, LogError> {
        if let Some(listener) = &env.on_failure {
            log.on_failure(listener.clone());
        }
        // Snapshots of a tail the crash took are not the log's any more.
        producer_snapshots::remove_segment_snapshots_outside(
            &*env.storage,
            log.dir(),
            log.log_start_offset()..=log.log_end_offset(),
        );
        let (producers, snapshot_offset) = load_producer_state(&*env.storage, &log)?;
        let log_delivery_delay_ms = log.config().delivery_delay_ms;
        let snapshot_offset = snapshot_offset
            .filter(|offset| *offset == log.log_end_offset())
            .unwrap_or(u64::MAX);
        let high_watermark = checkpointed_high_watermark
            .or_else(|| read_high_watermark(&*env.storage, log.dir()))
            .unwrap_or(0)
            .clamp(log.log_start_offset(), log.log_end_offset());
        Ok(Self {
            topic: topic.to_owned(),
            topic_id,
            index,
            log: RwLock::new(Arc::new(log)),
            log_changes: RwLock::new(()),
            storage: env.storage.clone(),
            clock: env.clock.clone(),
            on_failure: env.on_failure.clone(),
            parked_fetches: Mutex::new(Vec::new()),
            changes: AtomicU64::new(0),
            producers: Mutex::new(producers),
            appender: appender::Appender::default(),
            leadership: RwLock::new(Leadership {
                state: ReplicaState::default(),
                leading: Mutex::new(None),
            }),
            high_watermark: AtomicU64::new(high_watermark),
            snapshot_offset: AtomicU64::new(snapshot_offset),
            snapshot_writes: Mutex::new(()),
            leader_throttled: AtomicBool::new(false),
            follower_throttled: AtomicBool::new(false),
            delivery_delay_ms: AtomicI64::new(log_delivery_delay_ms),
            delivery: Mutex::new(DeliveryCursor::default()),
            consumer_bytes_out: OnceLock::new(),
            producer_bytes_in: OnceLock::new(),
            remote: RemoteTier::default(),
            mirror: RwLock::new(None),
        })
    }

    /// Its remote tier, as the metadata says.
    pub fn remote(&self) -> &RemoteTier {
        &self.remote
    }

    /// The mirror feeding this partition's topic (KIP-1279), if any:
    /// producers may not write to it.
    pub fn mirror(&self) -> Option<Arc<str>> {
        self.mirror.read().clone()
    }

    /// Drops what a mirror partition holds past a cut from before the
    /// cut's leader epoch: at a failover, records of a source transaction
    /// the cut left open, or fetched after the leader reported its cut; at
    /// a failback, what this cluster wrote that the new source does not
    /// hold. Records written since the cut are never dropped. Whether it
    /// cuts.
    pub fn apply_mirror_cut(&self, cut: &weir_meta::MirrorCut) -> Result<bool, LogError> {
        if !self.is_past_mirror_cut(cut) {
            return Ok(false);
        }
        tracing::info!(topic = %self.topic, partition = self.index, from = self.read_log().log_end_offset(), to = cut.last_mirrored_offset, "cutting a mirror partition where it and the mirror's source part");
        self.truncate_to(cut.last_mirrored_offset)?;
        Ok(true)
    }

    /// Whether the log holds records past `cut` from before its epoch,
    /// which [`apply_mirror_cut`](Self::apply_mirror_cut) drops.
    pub fn is_past_mirror_cut(&self, cut: &weir_meta::MirrorCut) -> bool {
        let log = self.read_log();
        let written_since = log
            .latest_epoch()
            .is_some_and(|e| e.epoch >= cut.leader_epoch);
        !written_since && log.log_end_offset() > cut.last_mirrored_offset
    }

    /// Takes what the metadata says of the mirror feeding the topic.
    pub fn set_mirror(&self, mirror: Option<&str>) {
        let mut current = self.mirror.write();
        if current.as_deref() != mirror {
            *current = mirror.map(Arc::from);
        }
    }

    /// The log start offset clients see: the remote tier's when it holds
    /// offsets below the local log's.
    pub fn log_start_offset(&self) -> u64 {
        let local = self.log().log_start_offset();
        match self.remote.log_start() {
            Some(remote) if remote < local => remote,
            _ => local.max(self.remote.deleted_below().min(self.log().log_end_offset())),
        }
    }

    /// Counts `bytes` of records this replica sent to consumers, leader or
    /// follower, in its series of the metric, which `series` gives the
    /// first time.
    pub fn count_consumer_bytes(&self, series: impl FnOnce() -> Counter, bytes: u64) {
        self.consumer_bytes_out.get_or_init(series).inc_by(bytes);
    }

    /// Counts `bytes` of records producers appended to this replica as
    /// its leader, in its series of the metric, which `series` gives the
    /// first time.
    pub fn count_producer_bytes(&self, series: impl FnOnce() -> Counter, bytes: u64) {
        self.producer_bytes_in.get_or_init(series).inc_by(bytes);
    }

    /// While this replica leads: its replica set's size, its ISR's, and
    /// the topic's `min.insync.replicas`.
    pub fn leader_health(&self) -> Option<(usize, usize, usize)> {
        let leadership = self.leadership.read();
        let leading = leadership.leading.lock();
        leading.as_ref().map(LeaderState::health)
    }

    /// Takes the replication throttles the topic's configs set on this
    /// replica (see the fields).
    pub fn set_replication_throttled(&self, leader: bool, follower: bool) {
        self.leader_throttled.store(leader, Ordering::Relaxed);
        self.follower_throttled.store(follower, Ordering::Relaxed);
    }

    /// Whether followers' fetches of this replica are throttled.
    pub fn leader_throttled(&self) -> bool {
        self.leader_throttled.load(Ordering::Relaxed)
    }

    /// Whether this replica's fetches from its leader are throttled.
    pub fn follower_throttled(&self) -> bool {
        self.follower_throttled.load(Ordering::Relaxed)
    }

    /// Whether the topic holds records back for a delivery delay.
    pub fn delays_delivery(&self) -> bool {
        self.delivery_delay_ms.load(Ordering::Relaxed) > 0
    }

    /// How far a consumer may read below `upper` (the high watermark, or
    /// the last stable offset) under the topic's `weir.delivery.delay.ms`:
    /// up to the first batch whose newest timestamp is not yet that old.
    /// With it, when that batch becomes readable (`None`: nothing is held
    /// back). Replicas are not held back: they read to their own bound.
    /// May read batch timestamps from the log: call it off the runtime's
    /// workers.
    pub fn delivery_limit(&self, upper: u64) -> (u64, Option<i64>) {
        let delay_ms = self.delivery_delay_ms.load(Ordering::Relaxed);
        if delay_ms <= 0 {
            return (upper, None);
        }
        let log = self.read_log();
        let now = self.clock.now_ms();
        let truncations = log.truncation_count();
        let mut cursor = self.delivery.lock();
        let same = cursor.delay_ms == delay_ms && cursor.truncations == truncations;
        let still_holds = same
            && now < cursor.visible_at_ms
            && (cursor.visible < cursor.upper || upper <= cursor.upper);
        if !still_holds {
            let from = if same {
                cursor.visible
            } else {
                log.log_start_offset()
            };
            let cutoff = now.saturating_sub(delay_ms);
            let found = log.first_batch_newer_than(from, upper, cutoff);
            let (visible, visible_at_ms) = match found {
                Ok(Some((base, newest))) => (base, newest.saturating_add(delay_ms)),
                Ok(None) => (upper, i64::MAX),
                Err(error) => {
                    // Serve nothing not already known to be old enough.
                    tracing::warn!(topic = %self.topic, partition = self.index, %error, "cannot read batch timestamps for the delivery delay");
                    let known = if same { cursor.visible } else { 0 };
                    return (known.min(upper), Some(now.saturating_add(delay_ms)));
                }
            };
            *cursor = DeliveryCursor {
                delay_ms,
                truncations,
                visible,
                visible_at_ms,
                upper,
            };
        }
        let limit = cursor.visible.min(upper);
        (limit, (limit < upper).then_some(cursor.visible_at_ms))
    }

    /// The log, for reading.
    pub fn log(&self) -> LogView {
        LogView(self.read_log())
    }

    fn read_log(&self) -> Arc<Log> {
        self.log.read().clone()
    }

    /// Keeps a move from taking over the log until it is dropped: taken by
    /// whatever changes the log, before it reads [`read_log`](Self::read_log).
    fn changing_log(&self) -> RwLockReadGuard<'_, ()> {
        self.log_changes.read_recursive()
    }

    /// Takes the log offline: its directory failed.
    pub fn take_offline(&self, reason: &str) {
        let _changing = self.changing_log();
        self.read_log().take_offline(reason)
    }

    /// Whether the log is offline after a failure.
    pub fn is_offline(&self) -> bool {
        self.read_log().is_offline()
    }

    /// Seals the active segment (if it holds anything), so that a move
    /// can copy it while the partition serves.
    pub fn roll_log(&self) -> Result<(), LogError> {
        let _changing = self.changing_log();
        self.read_log().roll()
    }

    /// Takes changed topic configs.
    pub fn set_log_config(&self, config: LogConfig) -> Result<(), LogError> {
        let delay_ms = config.delivery_delay_ms;
        let _changing = self.changing_log();
        self.read_log().set_config(config)?;
        self.delivery_delay_ms.store(delay_ms, Ordering::Relaxed);
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn flush(&self) -> Result<(), LogError> {
        let _changing = self.changing_log();
        self.read_log().flush()
    }

    /// Flushes as `flush.ms` asks, if it is due.
    pub fn flush_if_due(&self) -> Result<(), LogError> {
        let _changing = self.changing_log();
        self.read_log().flush_if_due()
    }

    /// Deletes what retention says may go, never at or above the high
    /// watermark. In tiered storage only local segments already copied go, by
    /// `local.retention.*`; the remote tier's retention deletes the rest.
    pub fn enforce_retention(&self) -> Result<RetentionOutcome, LogError> {
        let changing = self.changing_log();
        let log = self.read_log();
        let outcome = if self.remote.is_tiered() {
            // What remote retention or DeleteRecords deleted from the
            // remote tier goes from the local log too.
            let deleted_below = self.remote.deleted_below().min(self.high_watermark());
            if deleted_below > log.log_start_offset() {
                log.delete_records_before(deleted_below)?;
            }
            // The epochs of what is gone from both tiers go too; those of
            // what the remote tier still holds stay.
            log.forget_epochs_before(deleted_below)?;
            log.enforce_local_retention(self.high_watermark(), self.remote.copied_below())?
        } else {
            log.enforce_retention(self.high_watermark())?
        };
        if outcome.deleted_segments > 0 {
            self.remove_stale_segment_snapshots(&log);
        }
        drop(changing);
        if outcome.deleted_segments > 0 {
            self.notify();
        }
        Ok(outcome)
    }

    /// The first record at or after `timestamp`, looked up on the blocking
    /// pool (it reads the time index and a segment).
    pub async fn offset_for_timestamp(
        self: &Arc<Self>,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let partition = self.clone();
        on_the_blocking_pool(move || partition.log().offset_for_timestamp(timestamp)).await
    }

    /// The record with the largest timestamp, looked up on the blocking
    /// pool.
    pub async fn max_timestamp_offset(
        self: &Arc<Self>,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let partition = self.clone();
        on_the_blocking_pool(move || partition.log().max_timestamp_offset()).await
    }

    /// DeleteRecords: [`delete_records_before`](Self::delete_records_before)
    /// on the blocking pool (it deletes segment files).
    pub async fn delete_records(self: &Arc<Self>, offset: u64) -> Result<u64, LogError> {
        let partition = self.clone();
        on_the_blocking_pool(move || partition.delete_records_before(offset)).await
    }

    /// Moves the log start up to `offset` (DeleteRecords, or an internal
    /// topic's upkeep); the new log start. Deletes files where it is
    /// called, which must not be a runtime worker.
    pub fn delete_records_before(&self, offset: u64) -> Result<u64, LogError> {
        let _changing = self.changing_log();
        let log = self.read_log();
        let before = log.log_start_offset();
        let start = log.delete_records_before(offset)?;
        if start != before {
            self.remove_stale_segment_snapshots(&log);
            self.notify();
        }
        Ok(start)
    }

    /// What compaction could clean below the high watermark, if anything.
    pub fn cleanable(&self) -> Option<Cleanable> {
        self.read_log().cleanable(self.high_watermark())
    }

    /// Compacts the log below the high watermark with `cleaner`.
    pub fn clean(&self, cleaner: &mut Cleaner) -> Result<CleanStats, LogError> {
        let _changing = self.changing_log();
        cleaner.clean(&self.read_log(), self.high_watermark())
    }

    /// Swaps in the log moved to another directory. While no append,
    /// truncation, retention or cleaning may change the log (readers go on
    /// reading it): flushes the log, lets `finish` complete the copy and
    /// put it in place (it returns where; directories it renames go through
    /// the storage it is given, so that the old log stays readable), then
    /// opens the copy and swaps it in; if the copy cannot be opened, `undo`
    /// puts the old directory back and the old log goes on. Blocks on file
    /// I/O and on the log's writers: call it on the blocking pool.
    pub fn move_log<E: From<LogError>>(
        &self,
        finish: impl FnOnce(&Log, &dyn Storage) -> Result<PathBuf, E>,
        undo: impl FnOnce(&dyn Storage),
    ) -> Result<(), E> {
        let _no_changes = self.log_changes.write();
        let log = self.read_log();
        log.flush()?;
        let end = log.log_end_offset();
        let dir = finish(&log, &*self.storage)?;
        let moved =
            match Log::open_with(dir, log.config(), self.storage.clone(), self.clock.clone()) {
                Ok(moved) => moved,
                Err(error) => {
                    undo(&*self.storage);
                    return Err(error.into());
                }
            };
        if let Some(listener) = &self.on_failure {
            moved.on_failure(listener.clone());
        }
        if moved.log_end_offset() != end {
            tracing::error!(topic = %self.topic, partition = self.index, end, moved_end = moved.log_end_offset(), "moved log ends elsewhere");
        }
        // The old log's files are renamed away; it is dropped, not closed,
        // once its last reader is done.
        let old = std::mem::replace(&mut *self.log.write(), Arc::new(moved));
        drop(old);
        Ok(())
    }

    /// The storage the log's files and the partition's state files are in.
    pub fn storage(&self) -> &dyn Storage {
        &*self.storage
    }

    /// Closes the log cleanly (its next open skips recovery), unless a
    /// reader still holds it: then the next open recovers it.
    pub fn close(self) -> Result<(), LogError> {
        match Arc::try_unwrap(self.log.into_inner()) {
            Ok(log) => log.close(),
            Err(_) => {
                tracing::warn!(topic = %self.topic, partition = self.index, "the log is still being read as it closes; the next start recovers it");
                Ok(())
            }
        }
    }

    pub fn replica_state(&self) -> ReplicaState {
        self.leadership.read().state
    }

    /// Takes the leadership the metadata now gives this replica, `state`,
    /// and when this replica leads, the replicas and ISR of `leading`; the
    /// state before. One step under the leadership's write lock: an append
    /// and a write waiting for its followers never see the epoch of one
    /// image with the ISR, or the high watermark, of another. Every waiter
    /// wakes when the leader or the ISR's size changes: a produce waiting
    /// for its followers must learn at once that leadership moved or the
    /// ISR shrank, not at its timeout.
    pub fn take_leadership(
        &self,
        state: ReplicaState,
        leading: Option<Leading<'_>>,
    ) -> ReplicaState {
        let mut leadership = self.leadership.write();
        let isr_before = leadership.isr_size();
        let current = leadership.leading.get_mut();
        match leading {
            Some(l) => {
                let log_end = self.read_log().log_end_offset();
                let engine = current.get_or_insert_with(|| {
                    LeaderState::new(
                        l.me,
                        l.replicas,
                        l.isr,
                        l.partition_epoch,
                        log_end,
                        self.high_watermark(),
                        l.now_ms,
                        state.min_insync_replicas,
                    )
                });
                engine.set_replicas(l.replicas, l.now_ms);
                engine.set_min_isr(state.min_insync_replicas, log_end);
                engine.set_isr(l.isr, l.partition_epoch, log_end);
                self.set_high_watermark(engine.high_watermark());
            }
            None => *current = None,
        }
        let before = std::mem::replace(&mut leadership.state, state);
        let isr_after = leadership.isr_size();
        drop(leadership);
        if before != state || isr_before != isr_after {
            self.notify();
        }
        before
    }

    /// Writes the idempotent-producer state with the offset it covers, so
    /// the next start replays only the log after it.
    /// Skipped when the log end has not moved and no producer expired
    /// since the last one.
    pub fn snapshot_producer_state(&self) -> Result<(), LogError> {
        let _changing = self.changing_log();
        let _writing = self.snapshot_writes.lock();
        let producers = self.producers.lock();
        // Held to the write, so that the snapshot lands where the log is.
        let log = self.read_log();
        let offset = log.log_end_offset();
        if self.snapshot_offset.load(Ordering::Acquire) == offset {
            return Ok(());
        }
        let snapshot = ProducerSnapshot {
            offset,
            producers: producers.clone(),
        };
        drop(producers);
        let path = log.dir().join(PRODUCER_SNAPSHOT_FILE);
        weir_log::checkpoint::write(&*self.storage, &path, &snapshot.to_json())?;
        self.snapshot_offset.store(offset, Ordering::Release);
        Ok(())
    }

    /// The idempotent-producer state after every batch below `offset`, for
    /// the copy to remote storage of the segment ending there. Reads files:
    /// for callers off the runtime's workers.
    pub fn producer_state_at(&self, offset: u64) -> Result<ProducerSnapshot, LogError> {
        producer_snapshots::producer_state_at(&*self.storage, &self.read_log(), offset)
    }

    /// The offset below which consumers may read: records every in-sync
    /// replica holds.
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// How many times the log end, the log start, the high watermark or
    /// the replica state moved. A fetch compares it before and after
    /// parking, so no change slips between its read and
    /// [`wake_on_change`](Self::wake_on_change); a fetch session skips a
    /// caught-up partition whose count has not moved since its last read.
    pub fn change_count(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Wakes `waker` once, at the partition's next change. A fetch of many
    /// partitions parks on one waker instead of a watch per partition.
    pub fn wake_on_change(&self, waker: &Arc<Notify>) {
        let mut parked = self.parked_fetches.lock();
        parked.retain(|fetch| fetch.strong_count() > 0);
        parked.push(Arc::downgrade(waker));
    }

    /// Wakes the fetches parked on this partition: records it holds became
    /// available to them some other way than by an append (a share group's
    /// expired lock).
    pub(crate) fn wake_fetches(&self) {
        self.notify();
    }

    fn notify(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
        let parked = std::mem::take(&mut *self.parked_fetches.lock());
        for fetch in parked.iter().filter_map(Weak::upgrade) {
            fetch.notify_one();
        }
    }

    fn set_high_watermark(&self, offset: u64) {
        if self.high_watermark.swap(offset, Ordering::AcqRel) != offset {
            self.notify();
        }
    }

    /// A follower asked for records from `fetch_offset`: returns an ISR to
    /// propose if it has caught up and is not in the ISR.
    pub fn follower_fetched(
        &self,
        follower: i32,
        fetch_offset: u64,
        now_ms: i64,
    ) -> Option<Vec<i32>> {
        let log_end = self.read_log().log_end_offset();
        let leadership = self.leadership.read();
        let mut leading = leadership.leading.lock();
        let state = leading.as_mut()?;
        let (moved, proposal) = state.on_follower_fetch(follower, fetch_offset, log_end, now_ms);
        if moved {
            // Published under the lock: see `appended_as_leader`.
            self.set_high_watermark(state.high_watermark());
        }
        proposal
    }

    /// A follower's fetch reported its log start offset: below it, that
    /// follower cannot serve a consumer.
    pub fn follower_log_start(&self, follower: i32, log_start: u64) {
        let leadership = self.leadership.read();
        let mut leading = leadership.leading.lock();
        if let Some(state) = leading.as_mut() {
            state.on_follower_log_start(follower, log_start);
        }
    }

    /// While this replica leads: the followers a consumer reading from
    /// `fetch_offset` may be sent to (KIP-392), and this replica's log end.
    pub fn readable_followers(
        &self,
        fetch_offset: u64,
        now_ms: i64,
    ) -> Option<(Vec<ReadableFollower>, u64)> {
        let log_end = self.read_log().log_end_offset();
        let leadership = self.leadership.read();
        let leading = leadership.leading.lock();
        let state = leading.as_ref()?;
        Some((
            state.readable_followers(fetch_offset, now_ms).collect(),
            log_end,
        ))
    }

    /// The ISR without followers not caught up for `lag_ms`, to propose.
    pub fn lagging_isr(&self, now_ms: i64, lag_ms: i64) -> Option<Vec<i32>> {
        let leadership = self.leadership.read();
        let mut leading = leadership.leading.lock();
        leading.as_mut()?.shrink(now_ms, lag_ms)
    }

    /// Whether `replica` is in the ISR this replica leads with.
    pub fn in_isr(&self, replica: i32) -> bool {
        let leadership = self.leadership.read();
        let leading = leadership.leading.lock();
        leading.as_ref().is_some_and(|s| s.isr().contains(&replica))
    }

    /// The ISR this replica leads with, as last taken from the metadata.
    pub fn leader_isr(&self) -> Option<Vec<i32>> {
        let leadership = self.leadership.read();
        let leading = leadership.leading.lock();
        leading.as_ref().map(|s| s.isr().to_vec())
    }

    /// The controller refused an ISR change; a later one may be proposed.
    pub fn isr_change_failed(&self) {
        let leadership = self.leadership.read();
        let mut leading = leadership.leading.lock();
        if let Some(state) = leading.as_mut() {
            state.proposal_failed();
        }
    }

    /// Appends batches fetched from the leader as they are, and follows
    /// the leader's high watermark as far as this log reaches.
    pub fn append_replicated(
        &self,
        records: &[u8],
        leader_high_watermark: u64,
    ) -> Result<(), LogError> {
        if !records.is_empty() {
            // Under the producer lock, as a leader's append: a snapshot
            // taken meanwhile never holds a log end past the batches its
            // producer state has seen.
            let _changing = self.changing_log();
            let mut producers = self.producers.lock();
            let log = self.read_log();
            let info = log.append_replicated(records)?;
            let at_roll = info.rolled.then(|| ProducerSnapshot {
                offset: info.base_offset,
                producers: producers.clone(),
            });
            record_producer_batches(&mut producers, records);
            drop(producers);
            self.write_roll_snapshot(&log, at_roll);
            if info.batches > 0 {
                self.notify();
            }
        }
        let high_watermark = leader_high_watermark.min(self.read_log().log_end_offset());
        self.set_high_watermark(high_watermark);
        Ok(())
    }

    /// Drops every record at and above `offset` (a follower's divergent
    /// suffix).
    pub fn truncate_to(&self, offset: u64) -> Result<(), LogError> {
        let _changing = self.changing_log();
        self.read_log().truncate_to(offset)?;
        self.after_truncation()
    }

    /// Empties the log and restarts it at `offset` (a follower whose
    /// leader's log starts beyond its own end).
    pub fn restart_at(&self, offset: u64) -> Result<(), LogError> {
        let _changing = self.changing_log();
        self.read_log().truncate_fully_and_start_at(offset)?;
        self.after_truncation()
    }

    /// [`restart_at`](Self::restart_at) with what a copy in remote storage
    /// says of the log below `offset`: its leader epochs and the producer
    /// state at its end (Kafka's `buildRemoteLogAuxState`), so that this
    /// replica answers OffsetForLeaderEpoch and de-duplicates retries as
    /// its leader does.
    pub fn restart_from_remote(
        &self,
        offset: u64,
        epochs: &[weir_log::EpochEntry],
        producers: Option<ProducerStates>,
    ) -> Result<(), LogError> {
        {
            // The state is in memory and in the latest snapshot before a
            // snapshot of the partition's may be written again.
            let _changing = self.changing_log();
            let _writing = self.snapshot_writes.lock();
            let log = self.read_log();
            log.restart_at_with_epochs(offset, epochs)?;
            if let Some(producers) = producers {
                let snapshot = ProducerSnapshot { offset, producers };
                // The latest snapshot, which `after_truncation` loads, and
                // the one a copy of the segment starting here will carry.
                weir_log::checkpoint::write(
                    &*self.storage,
                    &log.dir().join(PRODUCER_SNAPSHOT_FILE),
                    &snapshot.to_json(),
                )?;
                producer_snapshots::write_segment_snapshot(&*self.storage, log.dir(), &snapshot)?;
                *self.producers.lock() = snapshot.producers;
                self.snapshot_offset.store(offset, Ordering::Release);
            }
        }
        let _changing = self.changing_log();
        self.after_truncation()
    }

    /// The producer state and the high watermark follow the log back: a
    /// retried batch whose earlier copy was dropped must be appended again,
    /// not answered as a duplicate at an offset that now holds other data.
    fn after_truncation(&self) -> Result<(), LogError> {
        self.notify();
        let log = self.read_log();
        let (rebuilt, _) = load_producer_state(&*self.storage, &log)?;
        *self.producers.lock() = rebuilt;
        self.remove_stale_segment_snapshots(&log);
        // A snapshot taken past the truncation point holds batches that
        // are gone; once the log grows past it again it would be loaded
        // as if they were there. It is replaced now.
        if let Err(error) = self.snapshot_producer_state() {
            tracing::warn!(topic = %self.topic, partition = self.index, %error, "cannot snapshot the producer state after a truncation");
            self.snapshot_offset.store(u64::MAX, Ordering::Release);
            let _ = self
                .storage
                .remove(&self.read_log().dir().join(PRODUCER_SNAPSHOT_FILE));
        }
        let end = self.read_log().log_end_offset();
        if self.high_watermark() > end {
            self.set_high_watermark(end);
        }
        Ok(())
    }

    /// The timestamp of the record at `offset` (or the first one after it),
    /// if it is below the high watermark.
    pub fn timestamp_at(&self, offset: u64) -> Result<Option<i64>, LogError> {
        let slice = self
            .log
            .read_recursive()
            .read(offset, 1, self.high_watermark())?;
        if slice.is_empty() {
            return Ok(None);
        }
        let bytes = slice.to_bytes().map_err(|source| LogError::Io {
            path: slice.path().map(Path::to_owned).unwrap_or_default(),
            source,
        })?;
        let header = BatchHeader::parse(&bytes, 0)?;
        if header.is_log_append_time() {
            return Ok(Some(header.max_timestamp()));
        }
        let size = header.total_size().min(bytes.len());
        let mut batch = bytes.slice(..size);
        let records =
            kafka_protocol::records::RecordBatchDecoder::decode(&mut batch).map_err(|e| {
                LogError::Corrupt {
                    path: slice.path().map(Path::to_owned).unwrap_or_default(),
                    position: slice.position(),
                    reason: format!("cannot decode records: {e}"),
                }
            })?;
        Ok(records
            .records
            .iter()
            .find(|r| r.offset >= offset as i64)
            .map(|r| r.timestamp))
    }

    /// Waits until every in-sync replica has the records below `until`.
    pub async fn replicated(
        &self,
        until: u64,
        node_id: i32,
        deadline: tokio::time::Instant,
    ) -> Result<(), (ResponseError, String)> {
        let waker = Arc::new(Notify::new());
        loop {
            // Parked before the check: a change in between leaves a permit.
            self.wake_on_change(&waker);
            if let Some(outcome) = self.replication_outcome(until, node_id) {
                return outcome;
            }
            if tokio::time::timeout_at(deadline, waker.notified())
                .await
                .is_err()
            {
                return Err((
                    ResponseError::RequestTimedOut,
                    "the in-sync replicas did not all have the records in time".to_owned(),
                ));
            }
        }
    }

    /// Whether a write below `until`, appended while `node_id` led, may be
    /// answered now: `None` while the in-sync replicas do not all hold it
    /// yet, an error once leadership moved or the ISR shrank below
    /// `min.insync.replicas`.
    pub fn replication_outcome(
        &self,
        until: u64,
        node_id: i32,
    ) -> Option<Result<(), (ResponseError, String)>> {
        // The state, the ISR and the high watermark read together: see
        // `take_leadership`.
        let leadership = self.leadership.read();
        let state = leadership.state;
        if state.leader != node_id {
            return Some(Err((
                ResponseError::NotLeaderOrFollower,
                "leadership moved before the followers had the records".to_owned(),
            )));
        }
        if self.high_watermark() < until {
            return None;
        }
        let isr_size = leadership.isr_size();
        if isr_size < state.min_insync_replicas {
            return Some(Err((
                ResponseError::NotEnoughReplicasAfterAppend,
                format!(
                    "written, but the ISR shrank to {isr_size} replica(s), fewer than min.insync.replicas={}",
                    state.min_insync_replicas
                ),
            )));
        }
        Some(Ok(()))
    }

    /// Removes the segment producer snapshots outside the log: below its
    /// start or past its end.
    fn remove_stale_segment_snapshots(&self, log: &Log) {
        producer_snapshots::remove_segment_snapshots_outside(
            &*self.storage,
            log.dir(),
            log.log_start_offset()..=log.log_end_offset(),
        );
    }

    /// Writes the producer state at a segment roll, taken before the
    /// batches that opened the new segment were recorded. A failure costs
    /// only a longer replay when the segment is copied to remote storage.
    fn write_roll_snapshot(&self, log: &Log, snapshot: Option<ProducerSnapshot>) {
        let Some(snapshot) = snapshot else {
            return;
        };
        if let Err(error) =
            producer_snapshots::write_segment_snapshot(&*self.storage, log.dir(), &snapshot)
        {
            tracing::warn!(topic = %self.topic, partition = self.index, offset = snapshot.offset, %error, "cannot write the producer snapshot of a segment roll");
        }
    }

    /// Appends one producer batch in place, de-duplicating idempotent
    /// retries: for callers off the runtime's workers.
    pub fn append_in_place(
        &self,
        records: &[u8],
        leader_epoch: i32,
    ) -> Result<Appended, AppendError> {
        self.append_from(
            records,
            leader_epoch,
            AppendOrigin::Client,
            RequiredAcks::Leader,
        )
    }

    /// [`append`](Self::append) for a batch written by `origin`, acknowledged
    /// once `acks` hold it, in place: for callers off the runtime's
    /// workers. An fsync that `flush.messages` calls for runs here too.
    pub fn append_from(
        &self,
        records: &[u8],
        leader_epoch: i32,
        origin: AppendOrigin,
        acks: RequiredAcks,
    ) -> Result<Appended, AppendError> {
        let batch = check_single_batch(&bytes::Bytes::copy_from_slice(records))?;
        match self.append_unflushed(&batch, leader_epoch, origin, acks)? {
            Written::Appended(appended) => Ok(appended),
            Written::FlushDue(due) => {
                let appended = due.appended();
                self.flush_appended(due)?;
                Ok(appended)
            }
        }
    }

    /// [`append_from`](Self::append_from), but an fsync that
    /// `flush.messages` calls for is left to the caller
    /// ([`flush_appended`](Self::flush_appended), off the runtime's
    /// workers): the request handler never blocks on it, and appends that
    /// arrive while it runs share the next one (group commit).
    pub fn append_unflushed(
        &self,
        batch: &CheckedBatch,
        leader_epoch: i32,
        origin: AppendOrigin,
        acks: RequiredAcks,
    ) -> Result<Written, AppendError> {
        let header = batch.header();
        if header.is_control() {
            return Err(AppendError::ControlBatch);
        }
        if header.is_transactional() && header.producer_id() < 0 {
            return Err(AppendError::TransactionalWithoutProducer);
        }
        if origin == AppendOrigin::Client {
            let config = self.read_log().config();
            if batch.len() > config.max_message_bytes {
                return Err(AppendError::Log(LogError::InvalidBatch(
                    BatchError::TooLarge {
                        position: 0,
                        size: batch.len(),
                        max: config.max_message_bytes,
                    },
                )));
            }
            self.check_keys(batch, &config)?;
            self.check_timestamps(batch, &config)?;
        }
        let producer = (header.producer_id() >= 0).then(|| {
            let first_seq = header.base_sequence();
            IncomingBatch {
                producer_id: header.producer_id(),
                epoch: header.producer_epoch(),
                first_seq,
                last_seq: first_seq.wrapping_add(header.last_offset_delta()),
            }
        });
        let led = self.led_at(leader_epoch, acks)?;
        let _changing = self.changing_log();
        let log = self.read_log();
        let mut producers = self.producers.lock();
        if let Some(batch) = &producer {
            if !header.is_transactional() {
                if let Some(first_offset) = log.open_transaction(batch.producer_id) {
                    return Err(AppendError::InvalidTxnState {
                        producer_id: batch.producer_id,
                        first_offset,
                    });
                }
            }
            match producers.check(batch) {
                SequenceCheck::Append => {}
                SequenceCheck::FencedEpoch { current, got } => {
                    return Err(AppendError::InvalidProducerEpoch { current, got })
                }
                _ if origin == AppendOrigin::Coordinator => {}
                SequenceCheck::Duplicate(existing) => {
                    return Ok(Written::Appended(Appended {
                        base_offset: existing.base_offset,
                        last_offset: existing.last_offset,
                        log_append_time_ms: (log.config().timestamp_type
                            == TimestampType::LogAppendTime)
                            .then_some(existing.timestamp),
                        records: 0,
                        bytes: 0,
                        duplicate: true,
                    }))
                }
                SequenceCheck::OutOfOrder { expected, got } => {
                    return Err(AppendError::OutOfOrderSequence { expected, got })
                }
            }
        }
        let (info, flush_due) = log.append_checked_deferring_flush(batch, leader_epoch)?;
        let at_roll = info.rolled.then(|| ProducerSnapshot {
            offset: info.base_offset,
            producers: producers.clone(),
        });
        if let Some(batch) = &producer {
            producers.record(
                batch,
                BatchMetadata {
                    first_seq: batch.first_seq,
                    last_seq: batch.last_seq,
                    base_offset: info.base_offset,
                    last_offset: info.last_offset,
                    timestamp: info.log_append_time_ms.unwrap_or(info.max_timestamp),
                },
            );
        }
        drop(producers);
        self.write_roll_snapshot(&log, at_roll);
        // The fsync comes outside the producer lock, so that concurrent
        // producers share it (group commit); the high watermark moves
        // after it.
        if flush_due {
            return Ok(Written::FlushDue(FlushDue { info }));
        }
        Ok(Written::Appended(self.appended_as_leader(&led, &info)))
    }

    /// Makes an append durable as `flush.messages` asked, then lets the
    /// leadership hear of it. Blocks on the fsync.
    pub fn flush_appended(&self, due: FlushDue) -> Result<(), AppendError> {
        self.flush_appended_all(std::slice::from_ref(&due))
    }

    /// [`flush_appended`](Self::flush_appended) for several appends: one
    /// fsync covers them all.
    pub fn flush_appended_all(&self, dues: &[FlushDue]) -> Result<(), AppendError> {
        let Some(end) = dues.iter().map(|due| due.info.last_offset + 1).max() else {
            return Ok(());
        };
        let _changing = self.changing_log();
        self.read_log().flush_to(end)?;
        let leadership = self.leadership.read();
        for due in dues {
            self.appended_as_leader(&leadership, &due.info);
        }
        Ok(())
    }

    /// The check a leader's append makes, held until the append is done
    /// (Kafka's `leaderIsrUpdateLock`): the caller found this replica
    /// leading at `leader_epoch`, and leadership cannot move before the
    /// batch is in the log. Every change of leader bumps the epoch. A write
    /// that needs every in-sync replica is refused while they are fewer
    /// than `min.insync.replicas`, and the ISR cannot shrink between this
    /// check and the append either.
    fn led_at(
        &self,
        leader_epoch: i32,
        acks: RequiredAcks,
    ) -> Result<RwLockReadGuard<'_, Leadership>, AppendError> {
        let leadership = self.leadership.read();
        let state = leadership.state;
        if state.leader_epoch != leader_epoch {
            return Err(AppendError::NotLeader {
                epoch: leader_epoch,
                current: state.leader_epoch,
            });
        }
        if acks == RequiredAcks::All {
            let isr = leadership.isr_size();
            if isr < state.min_insync_replicas {
                return Err(AppendError::NotEnoughReplicas {
                    isr,
                    min: state.min_insync_replicas,
                });
            }
        }
        Ok(leadership)
    }

    /// Kafka's check for compacted topics: every record needs a key, for
    /// the cleaner keeps records by key. Only batches bound for compacted
    /// topics are inflated, within [`records::MAX_INFLATED_BATCH_BYTES`].
    fn check_keys(&self, batch: &CheckedBatch, config: &LogConfig) -> Result<(), AppendError> {
        if !config.cleanup_policy.compact {
            return Ok(());
        }
        let indexes = records::keyless_records(batch.batch())?;
        if indexes.is_empty() {
            return Ok(());
        }
        let message = format!(
            "Compacted topic cannot accept message without key in topic partition {}-{}",
            self.topic, self.index
        );
        Err(AppendError::InvalidRecords {
            timestamps: false,
            records: indexes.into_iter().map(|i| (i, message.clone())).collect(),
        })
    }

    /// Kafka's check of a producer's timestamps on a CreateTime topic:
    /// each within `message.timestamp.before.max.ms` before now and
    /// `message.timestamp.after.max.ms` after. The batch header's maximum
    /// bounds every record from above, so with no limit on the past (the
    /// default) the records are read only when that maximum is too late.
    fn check_timestamps(
        &self,
        batch: &CheckedBatch,
        config: &LogConfig,
    ) -> Result<(), AppendError> {
        if config.timestamp_type != TimestampType::CreateTime {
            return Ok(());
        }
        let now = self.clock.now_ms();
        let earliest = now.saturating_sub(config.timestamp_before_max_ms);
        let latest = now.saturating_add(config.timestamp_after_max_ms);
        if config.timestamp_before_max_ms == i64::MAX && batch.header().max_timestamp() <= latest {
            return Ok(());
        }
        let refused = records::timestamps_out_of_range(batch.batch(), earliest, latest)?;
        if refused.is_empty() {
            return Ok(());
        }
        Err(AppendError::InvalidRecords {
            timestamps: true,
            records: refused
                .into_iter()
                .map(|r| {
                    let message = format!(
                        "Timestamp {} of message with offset {} is out of range. The timestamp \
                         should be within [{earliest}, {latest}]",
                        r.timestamp, r.offset
                    );
                    (r.index, message)
                })
                .collect(),
        })
    }

    /// Appends a transaction marker as the leader (WriteTxnMarkers): a
    /// control batch ending `producer_id`'s transaction with a commit or an
    /// abort. A marker whose producer epoch is older than the producer's
    /// (from a transaction that already ended, delivered late) is refused
    /// with INVALID_PRODUCER_EPOCH, so it can never end a later
    /// transaction; one from a coordinator older than the last one that
    /// wrote this producer a marker, with TRANSACTION_COORDINATOR_FENCED. A
    /// producer with no open transaction is written the marker all the same
    /// (as in Kafka: it changes nothing). The producer takes the marker's
    /// epoch.
    pub fn write_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
    ) -> Result<Appended, AppendError> {
        match self.write_marker_unflushed(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            leader_epoch,
        )? {
            Written::Appended(appended) => Ok(appended),
            Written::FlushDue(due) => {
                let appended = due.appended();
                self.flush_appended(due)?;
                Ok(appended)
            }
        }
    }

    /// [`write_marker`](Self::write_marker), but an fsync that
    /// `flush.messages` calls for is left to the caller, as
    /// [`append_unflushed`](Self::append_unflushed) leaves it.
    fn write_marker_unflushed(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
    ) -> Result<Written, AppendError> {
        // Markers are written with acks=all, as every coordinator write.
        let led = self.led_at(leader_epoch, RequiredAcks::All)?;
        let _changing = self.changing_log();
        let mut producers = self.producers.lock();
        match producers.check_marker(producer_id, producer_epoch, coordinator_epoch) {
            MarkerCheck::Write => {}
            MarkerCheck::FencedEpoch { current, got } => {
                return Err(AppendError::InvalidProducerEpoch { current, got })
            }
            MarkerCheck::FencedCoordinator { current, got } => {
                return Err(AppendError::CoordinatorFenced { current, got })
            }
        }
        let marker = batch::marker_batch(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            self.clock.now_ms(),
        );
        let (info, flush_due) = self
            .read_log()
            .append_deferring_flush(&marker, leader_epoch)?;
        producers.record_marker(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            info.max_timestamp,
        );
        drop(producers);
        if flush_due {
            return Ok(Written::FlushDue(FlushDue { info }));
        }
        Ok(Written::Appended(self.appended_as_leader(&led, &info)))
    }

    /// A mirror leader's append (KIP-1279): batches fetched from the source
    /// cluster, written at their own offsets with their bytes (but for the
    /// leader epoch, this leader's), producer state recorded as a
    /// follower's is, without the checks a producer's batch gets: the
    /// source made them. The high watermark then moves as the in-sync
    /// replicas copy them. Blocks on the fsync `flush.messages` may call
    /// for: for callers off the runtime's workers. `fetched_for` is the log
    /// end the batches were fetched after: refused if the log was cut since.
    pub fn append_mirrored(
        &self,
        records: &[u8],
        leader_epoch: i32,
        fetched_for: u64,
    ) -> Result<(), AppendError> {
        let led = self.led_at(leader_epoch, RequiredAcks::Leader)?;
        let _changing = self.changing_log();
        let mut producers = self.producers.lock();
        let log = self.read_log();
        let end = log.log_end_offset();
        if end != fetched_for {
            return Err(AppendError::MovedSinceFetch { fetched_for, end });
        }
        let (info, flush_due) = log.append_mirrored(records, leader_epoch)?;
        let at_roll = info.rolled.then(|| ProducerSnapshot {
            offset: info.base_offset,
            producers: producers.clone(),
        });
        record_producer_batches(&mut producers, records);
        drop(producers);
        self.write_roll_snapshot(&log, at_roll);
        if flush_due {
            log.flush_to(info.last_offset + 1)?;
        }
        self.appended_as_leader(&led, &info);
        Ok(())
    }

    /// The producers this replica remembers, each with the first offset of
    /// its open transaction (-1: none), as DescribeProducers shows them.
    pub fn active_producers(&self) -> Vec<(ActiveProducer, i64)> {
        let active = self.producers.lock().active();
        let open = self.read_log().open_transactions();
        active
            .into_iter()
            .map(|producer| {
                let start = open
                    .iter()
                    .find(|txn| txn.producer_id == producer.producer_id)
                    .map_or(-1, |txn| txn.first_offset as i64);
                (producer, start)
            })
            .collect()
    }

    /// `producer_id` has a transaction open here, begun at `epoch`.
    pub fn in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        // One lock at a time: appends take the producers' before the log's.
        let open = self.read_log().open_transaction(producer_id).is_some();
        open && self
            .producers
            .lock()
            .epochs(producer_id)
            .is_some_and(|(current, _)| current == epoch)
    }

    /// Forgets the idempotent producers idle for `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`), but those with a transaction open.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let expired = self
            .producers
            .lock()
            .expire(now_ms, expiration_ms, |producer_id| {
                self.read_log().open_transaction(producer_id).is_some()
            });
        if expired > 0 {
            self.snapshot_offset.store(u64::MAX, Ordering::Release);
        }
        expired
    }

    /// Aborts the open transaction of `producer_id` that no coordinator
    /// will end (a hanging transaction), with the producer's own epoch and
    /// its last coordinator's epoch, so that the marker is the one that
    /// coordinator would have written. Written off the runtime's workers.
    pub fn abort_hanging(self: &Arc<Self>, producer_id: i64, leader_epoch: i32) -> QueuedWrite {
        let (epoch, coordinator_epoch) =
            self.producers.lock().epochs(producer_id).unwrap_or((0, -1));
        self.write_marker_async(producer_id, epoch, false, coordinator_epoch, leader_epoch)
    }

    /// The offset below which `read_committed` consumers may read: the
    /// high watermark, or the first offset of an undecided transaction (or
    /// of a decided one whose marker is not on every in-sync replica yet)
    /// if lower; never below the log start.
    pub fn last_stable_offset(&self) -> u64 {
        self.last_stable_offset_at(self.high_watermark())
    }

    /// [`last_stable_offset`](Self::last_stable_offset) for a high
    /// watermark read before.
    pub fn last_stable_offset_at(&self, high_watermark: u64) -> u64 {
        let log = self.read_log();
        let first_unstable = log.first_unstable_offset(high_watermark);
        last_stable_offset(&log, high_watermark, first_unstable)
    }

    /// [`last_stable_offset_at`](Self::last_stable_offset_at) if that
    /// needs no wait for the log's lock.
    pub fn try_last_stable_offset_at(&self, high_watermark: u64) -> Option<u64> {
        let log = self.read_log();
        let first_unstable = log.try_first_unstable_offset(high_watermark)?;
        Some(last_stable_offset(&log, high_watermark, first_unstable))
    }

    /// After a leader's append: the leadership (held shared by the caller)
    /// hears of the new log end (the high watermark may move), and waiting
    /// fetches wake.
    fn appended_as_leader(&self, leadership: &Leadership, info: &AppendInfo) -> Appended {
        let log_end = info.last_offset + 1;
        let mut leadership = leadership.leading.lock();
        // The engine's high watermark never decreases; publishing it while
        // the lock is held keeps the published one from decreasing too (two
        // appends computing 11 then 12 must not publish 12 then 11).
        let moved = leadership.as_mut().is_some_and(|state| {
            let moved = state.on_append(log_end);
            if moved {
                self.set_high_watermark(state.high_watermark());
            }
            moved
        });
        drop(leadership);
        if !moved {
            self.notify();
        }
        Appended::from(info)
    }
}

/// Where the high watermark was checkpointed before the broker kept one
/// file for all partitions (see [`crate::partition::high_watermarks`]): still read,
/// for a partition that file does not name yet.
const HIGH_WATERMARK_FILE: &str = "high-watermark";

fn read_high_watermark(storage: &dyn Storage, dir: &Path) -> Option<u64> {
    weir_log::checkpoint::read(storage, &dir.join(HIGH_WATERMARK_FILE))
        .ok()??
        .trim()
        .parse()
        .ok()
}

/// Records the idempotent producers of batches as they are stored, and the
/// epochs their transaction markers carry.
fn record_producer_batches(producers: &mut ProducerStates, mut bytes: &[u8]) {
    while let Ok(header) = BatchHeader::parse(bytes, 0) {
        if header.producer_id() >= 0 && header.is_control() {
            let whole = &bytes[..header.total_size().min(bytes.len())];
            if let Some(coordinator_epoch) = batch::marker_coordinator_epoch(whole) {
                debug_assert!(matches!(
                    batch::control_type(whole),
                    Some(ControlType::Commit | ControlType::Abort)
                ));
                producers.record_marker(
                    header.producer_id(),
                    header.producer_epoch(),
                    coordinator_epoch,
                    header.max_timestamp(),
                );
            }
        } else if header.producer_id() >= 0 {
            let first_seq = header.base_sequence();
            let batch = IncomingBatch {
                producer_id: header.producer_id(),
                epoch: header.producer_epoch(),
                first_seq,
                last_seq: first_seq.wrapping_add(header.last_offset_delta()),
            };
            producers.record(
                &batch,
                BatchMetadata {
                    first_seq,
                    last_seq: batch.last_seq,
                    base_offset: header.base_offset() as u64,
                    last_offset: header.last_offset() as u64,
                    timestamp: header.max_timestamp(),
                },
            );
        }
        bytes = &bytes[header.total_size().min(bytes.len())..];
    }
}

/// The one batch a produce request may carry per partition (or a
/// coordinator writes), checked once where it arrived (header, length,
/// CRC, record count): what the partition's appender and its log take
/// without checking it again.
pub fn check_single_batch(records: &bytes::Bytes) -> Result<CheckedBatch, AppendError> {
    let header = BatchHeader::parse(records, 0).map_err(|e| AppendError::Log(e.into()))?;
    let size = header.total_size();
    if size > records.len() {
        return Err(AppendError::Log(LogError::InvalidBatch(
            BatchError::Truncated {
                position: 0,
                needed: size,
                available: records.len(),
            },
        )));
    }
    if size < records.len() {
        let mut count = 1;
        let mut rest = &records[size..];
        while let Ok(next) = BatchHeader::parse(rest, 0) {
            count += 1;
            rest = &rest[next.total_size().min(rest.len())..];
        }
        return Err(AppendError::BatchCount(count.max(2)));
    }
    CheckedBatch::check(records).map_err(|e| AppendError::Log(e.into()))
}

#[cfg(test)]
impl Partition {
    /// Node 1 leads over `isr`, all the replicas, at `leader_epoch`, as the
    /// metadata would make it.
    pub(crate) fn lead_for_tests(
        &self,
        isr: &[i32],
        leader_epoch: i32,
        min_insync_replicas: usize,
    ) {
        let state = ReplicaState {
            leader: 1,
            leader_epoch,
            min_insync_replicas,
        };
        let leading = Leading {
            me: 1,
            replicas: isr,
            isr,
            partition_epoch: leader_epoch,
            now_ms: 0,
        };
        self.take_leadership(state, Some(leading));
    }
}

/// Below the first unstable offset and the high watermark, and never below
/// the log start (unless the high watermark is).
fn last_stable_offset(log: &Log, high_watermark: u64, first_unstable: Option<u64>) -> u64 {
    let stable = first_unstable.map_or(high_watermark, |first| first.min(high_watermark));
    stable.max(log.log_start_offset().min(high_watermark))
}

#[cfg(test)]
mod tests {
    use weir_log::testing::BatchBuilder;

    use super::*;

    fn open(dir: &Path) -> Partition {
        let partition =
            Partition::open(dir, "t", uuid::Uuid::nil(), 0, LogConfig::default()).unwrap();
        lead_alone(&partition);
        partition
    }

    /// Node 1 leads `partition` at epoch 0 as its only replica, so the high
    /// watermark follows the log end.
    fn lead_alone(partition: &Partition) {
        partition.lead_for_tests(&[1], 0, 1);
    }

    fn txn(producer_id: i64, epoch: i16, sequence: i32, count: usize) -> Vec<u8> {
        BatchBuilder::new(count)
            .producer(producer_id, epoch, sequence)
            .transactional()
            .build()
    }

    /// Every batch of the log, for a follower to copy.
    fn all_batches(partition: &Partition) -> Vec<u8> {
        let end = partition.log.read().log_end_offset();
        partition
            .log
            .read()
            .read(0, 1 << 20, end)
            .unwrap()
            .to_bytes()
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn a_produce_waiting_for_followers_learns_at_once_that_leadership_moved() {
        let dir = tempfile::tempdir().unwrap();
        let p =
            Partition::open(dir.path(), "t", uuid::Uuid::nil(), 0, LogConfig::default()).unwrap();
        p.lead_for_tests(&[1, 2, 3], 0, 2);
        let appended = p.append_in_place(&BatchBuilder::new(1).build(), 0).unwrap();

        // Far off: only the change of leader can end the wait.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3600);
        let waiting = p.replicated(appended.last_offset + 1, 1, deadline);
        tokio::pin!(waiting);
        assert!(futures::poll!(&mut waiting).is_pending());
        let followed = ReplicaState {
            leader: 2,
            leader_epoch: 1,
            min_insync_replicas: 2,
        };
        p.take_leadership(followed, None);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(60), waiting)
            .await
            .expect("the waiting produce was not woken by the change of leader");
        assert!(matches!(
            answer,
            Err((ResponseError::NotLeaderOrFollower, _))
        ));
    }

    /// Appends and follower fetches race on four threads while a fifth
    /// watches the published high watermark: it must never go down (a
    /// fetch would lose sight of records it was shown, and an acks=all
    /// produce would wait for the next append).
    #[test]
    fn the_published_high_watermark_never_decreases_under_concurrent_appends_and_fetches() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let p = Arc::new(
            Partition::open(dir.path(), "t", uuid::Uuid::nil(), 0, LogConfig::default()).unwrap(),
        );
        p.lead_for_tests(&[1, 2, 3], 0, 1);
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (p, done) = (p.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = 0;
                while !done.load(Ordering::Acquire) {
                    let now = p.high_watermark();
                    assert!(now >= seen, "the high watermark went from {seen} to {now}");
                    seen = now;
                }
            })
        };
        let mut workers = Vec::new();
        for _ in 0..2 {
            let p = p.clone();
            workers.push(std::thread::spawn(move || {
                let batch = BatchBuilder::new(1).build();
                for _ in 0..20_000 {
                    p.append_in_place(&batch, 0).unwrap();
                }
            }));
        }
        for follower in [2, 3] {
            let p = p.clone();
            workers.push(std::thread::spawn(move || {
                for i in 0..200_000 {
                    p.follower_fetched(follower, p.log.read().log_end_offset(), i);
                }
            }));
        }
        for worker in workers {
            worker.join().unwrap();
        }
        done.store(true, Ordering::Release);
        watcher.join().unwrap();
    }

    #[test]
    fn an_acks_all_write_is_refused_while_the_isr_is_below_its_minimum() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        p.lead_for_tests(&[1], 0, 2);
        let batch = BatchBuilder::new(1).build();
        let append = |acks| p.append_from(&batch, 0, AppendOrigin::Client, acks);
        assert!(matches!(
            append(RequiredAcks::All),
            Err(AppendError::NotEnoughReplicas { isr: 1, min: 2 })
        ));
        assert!(matches!(
            p.write_marker(7, 0, true, 0, 0),
            Err(AppendError::NotEnoughReplicas { .. })
        ));
        assert_eq!(p.log.read().log_end_offset(), 0, "nothing appended");
        // acks=1 asks only for the leader's log.
        append(RequiredAcks::Leader).unwrap();
        assert_eq!(p.log.read().log_end_offset(), 1);
    }

    #[test]
    fn a_write_waiting_for_followers_keeps_waiting_while_the_isr_is_below_its_minimum() {
        let dir = tempfile::tempdir().unwrap();
        let p =
            Partition::open(dir.path(), "t", uuid::Uuid::nil(), 0, LogConfig::default()).unwrap();
        let state = ReplicaState {
            leader: 1,
            leader_epoch: 0,
            min_insync_replicas: 2,
        };
        let leading = |isr| Leading {
            me: 1,
            replicas: &[1, 2, 3],
            isr,
            partition_epoch: 0,
            now_ms: 0,
        };
        p.take_leadership(state, Some(leading(&[1, 2, 3])));
        let batch = BatchBuilder::new(2).build();
        let appended = p
            .append_from(&batch, 0, AppendOrigin::Client, RequiredAcks::All)
            .unwrap();
        let until = appended.last_offset + 1;
        assert_eq!(
            p.replication_outcome(until, 1),
            None,
            "the followers lack it"
        );
        // The followers drop out: with the leader alone in the ISR, below
        // its minimum, the high watermark stands still (Kafka 4's strict
        // min-ISR rule, KIP-966), and the write waits for its timeout.
        p.take_leadership(state, Some(leading(&[1])));
        assert!(p.high_watermark() < until);
        assert_eq!(p.replication_outcome(until, 1), None);
    }

    #[test]
    fn compressed_batches_for_compacted_topics_are_inflated_to_check_their_keys() {
        use kafka_protocol::records::Compression;
        use weir_log::CleanupPolicy;
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        let keyless = BatchBuilder::new(3).compression(Compression::Zstd).build();
        p.append_in_place(&keyless, 0).unwrap();
        p.set_log_config(LogConfig {
            cleanup_policy: CleanupPolicy {
                delete: false,
                compact: true,
            },
            ..LogConfig::default()
        })
        .unwrap();
        let refused = p.append_in_place(&keyless, 0).unwrap_err();
        assert!(
            matches!(
                refused,
                AppendError::InvalidRecords {
                    timestamps: false,
                    ..
                }
            ),
            "{refused}"
        );
        let keyed = BatchBuilder::new(3)
            .keys("k")
            .compression(Compression::Zstd)
            .build();
        p.append_in_place(&keyed, 0).unwrap();
    }

    #[test]
    fn create_time_topics_refuse_timestamps_outside_their_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        let now = p.clock.now_ms();
        let hour = 3_600_000;
        let refused = |batch: Vec<u8>| -> Vec<i32> {
            match p.append_in_place(&batch, 0) {
                Err(AppendError::InvalidRecords {
                    timestamps: true,
                    records,
                }) => records.into_iter().map(|(index, _)| index).collect(),
                other => panic!("{other:?}"),
            }
        };
        // Records are stamped first, first + 1, ...: only the last two of
        // these are more than an hour ahead.
        let straddling = BatchBuilder::new(4).timestamp(now + hour - 1).build();
        assert_eq!(refused(straddling), vec![2, 3]);
        p.append_in_place(&BatchBuilder::new(2).timestamp(now).build(), 0)
            .unwrap();
        // Long past is fine by default; not with a bound on the past.
        p.append_in_place(&BatchBuilder::new(1).timestamp(0).build(), 0)
            .unwrap();
        p.set_log_config(LogConfig {
            timestamp_before_max_ms: hour,
            ..LogConfig::default()
        })
        .unwrap();
        assert_eq!(refused(BatchBuilder::new(1).timestamp(0).build()), vec![0]);
        // LogAppendTime topics stamp records themselves.
        p.set_log_config(LogConfig {
            timestamp_type: TimestampType::LogAppendTime,
            timestamp_before_max_ms: hour,
            ..LogConfig::default()
        })
        .unwrap();
        p.append_in_place(&BatchBuilder::new(1).timestamp(0).build(), 0)
            .unwrap();
    }

    #[test]
    fn an_append_at_a_leader_epoch_the_partition_has_left_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        p.lead_for_tests(&[1], 4, 1);
        p.append_in_place(&BatchBuilder::new(1).build(), 4).unwrap();
        // A handler that checked leadership before the epoch moved on.
        p.lead_for_tests(&[1], 5, 1);
        assert!(matches!(
            p.append_in_place(&BatchBuilder::new(1).build(), 4),
            Err(AppendError::NotLeader {
                epoch: 4,
                current: 5
            })
        ));
        assert!(matches!(
            p.write_marker(7, 0, true, 0, 4),
            Err(AppendError::NotLeader { .. })
        ));
        assert_eq!(
            p.log.read().log_end_offset(),
            1,
            "nothing appended at the old epoch"
        );
    }

    #[test]
    fn an_unchanged_partition_is_not_snapshotted_again() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        let file = p.log.read().dir().join(PRODUCER_SNAPSHOT_FILE);
        let batch = |sequence| BatchBuilder::new(1).producer(7, 0, sequence).build();
        p.append_in_place(&batch(0), 0).unwrap();
        p.snapshot_producer_state().unwrap();
        assert!(file.exists());
        // The file removed behind the partition's back shows whether the
        // next call writes one.
        std::fs::remove_file(&file).unwrap();
        p.snapshot_producer_state().unwrap();
        assert!(!file.exists(), "nothing changed: not written again");
        p.append_in_place(&batch(1), 0).unwrap();
        p.snapshot_producer_state().unwrap();
        assert!(file.exists(), "the log moved");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(p.expire_producers(i64::MAX, 1), 1);
        p.snapshot_producer_state().unwrap();
        assert!(file.exists(), "a producer expired");
        // Reopened at the log end its snapshot covers: still nothing to do.
        drop(p);
        let p = open(dir.path());
        std::fs::remove_file(&file).unwrap();
        p.snapshot_producer_state().unwrap();
        assert!(!file.exists());
    }

    #[test]
    fn the_producer_snapshot_goes_through_the_partitions_storage_and_survives_a_crash() {
        use weir_log::sim::{CrashMode, SimStorage};
        let sim = SimStorage::new();
        let env = LogEnv {
            storage: Arc::new(sim.clone()),
            clock: Arc::new(weir_log::ManualClock::new(1_700_000_000_000)),
            on_failure: None,
        };
        let dir = Path::new("/sim/data");
        let open = || {
            let p = Partition::open_in(
                &env,
                dir,
                "t",
                uuid::Uuid::nil(),
                0,
                LogConfig::default(),
                None,
            )
            .unwrap();
            lead_alone(&p);
            p
        };
        let batch = |sequence| BatchBuilder::new(2).producer(7, 0, sequence).build();
        let p = open();
        p.append_in_place(&batch(0), 0).unwrap();
        p.log.read().flush().unwrap();
        p.snapshot_producer_state().unwrap();
        let snapshot = p.log.read().dir().join(PRODUCER_SNAPSHOT_FILE);
        drop(p);
        sim.crash(CrashMode::DropUnsynced);
        assert!(
            sim.exists(&snapshot),
            "synced before it replaced the old one"
        );
        let p = open();
        let retried = p.append_in_place(&batch(0), 0).unwrap();
        assert!(retried.duplicate, "the producer's last batch is known");
        assert_eq!(retried.base_offset, 0);
    }

    #[test]
    fn a_failed_over_mirror_partition_is_cut_once_and_keeps_what_is_written_since() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        p.append_mirrored(&BatchBuilder::new(5).build(), 0, 0)
            .unwrap(); // 0..=4
        let stopped = weir_meta::MirrorCut {
            last_mirrored_offset: 3,
            leader_epoch: 1,
        };
        p.apply_mirror_cut(&stopped).unwrap();
        assert_eq!(
            p.log().log_end_offset(),
            0,
            "the batch holding offset 3 goes"
        );
        let fetched_too_early = p.append_mirrored(&BatchBuilder::new(3).build(), 0, 5);
        assert!(
            matches!(
                fetched_too_early,
                Err(AppendError::MovedSinceFetch {
                    fetched_for: 5,
                    end: 0
                })
            ),
            "{fetched_too_early:?}"
        );
        p.append_mirrored(&BatchBuilder::new(3).build(), 0, 0)
            .unwrap(); // 0..=2
        p.apply_mirror_cut(&stopped).unwrap();
        assert_eq!(p.log().log_end_offset(), 3, "nothing past the cut");
        p.lead_for_tests(&[1], 1, 1);
        p.append_in_place(&BatchBuilder::new(2).build(), 1).unwrap(); // 3..=4
        p.apply_mirror_cut(&stopped).unwrap();
        assert_eq!(p.log().log_end_offset(), 5, "written since the failover");
    }

    #[test]
    fn a_producer_snapshot_taken_past_a_truncation_is_never_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let batch = |producer_id, sequence, count| {
            BatchBuilder::new(count)
                .producer(producer_id, 0, sequence)
                .build()
        };
        let p = open(dir.path());
        p.append_in_place(&batch(7, 0, 3), 0).unwrap(); // 0..=2
        p.append_in_place(&batch(7, 3, 3), 0).unwrap(); // 3..=5
        p.snapshot_producer_state().unwrap(); // at 6
        p.truncate_to(3).unwrap();
        // Another producer's records take the log past the old snapshot.
        p.append_in_place(&batch(8, 0, 4), 0).unwrap(); // 3..=6
        drop(p);

        let p = open(dir.path());
        // Producer 7's retry of the batch that was dropped is appended
        // again, not answered as a duplicate at offsets holding others.
        let retried = p.append_in_place(&batch(7, 3, 3), 0).unwrap();
        assert!(!retried.duplicate);
        assert_eq!(retried.base_offset, 7);
    }

    #[test]
    fn markers_end_transactions_and_move_the_last_stable_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path());
        p.append_in_place(&BatchBuilder::new(1).build(), 0).unwrap(); // 0
        p.append_in_place(&txn(1, 0, 0, 2), 0).unwrap(); // 1..=2
        p.append_in_place(&txn(2, 0, 0, 1), 0).unwrap(); // 3
        assert_eq!(p.high_watermark(), 4);
        assert_eq!(p.last_stable_offset(), 1);

        // A producer with an open transaction writes transactionally, and
        // nobody writes markers through produce.
        let plain = BatchBuilder::new(1).producer(1, 0, 2).build();
        assert!(matches!(
            p.append_in_place(&plain, 0),
            Err(AppendError::InvalidTxnState {
                producer_id: 1,
                first_offset: 1
            })
        ));
        let forged = batch::marker_batch(1, 0, true, 0, 0);
        assert!(matches!(
            p.append_in_place(&forged, 0),
            Err(AppendError::ControlBatch)
        ));
        let anonymous = BatchBuilder::new(1).transactional().build();
        assert!(matches!(
            p.append_in_place(&anonymous, 0),
            Err(AppendError::TransactionalWithoutProducer)
        ));

        let committed = p.write_marker(1, 0, true, 5, 0).unwrap(); // 4
        assert_eq!(committed.base_offset, 4);
        assert_eq!(p.last_stable_offset(), 3);
        p.write_marker(2, 0, false, 5, 0).unwrap(); // 5
        assert_eq!(p.last_stable_offset(), 6);
        assert_eq!(
            p.log.read().aborted_transactions(0, 6),
            vec![weir_log::AbortedTxn {
                producer_id: 2,
                first_offset: 3,
                last_offset: 5,
                last_stable_offset: 6,
            }]
        );

        // The coordinator bumps producer 1's epoch at the end of its next
        // transaction; a late marker of the earlier epoch is refused.
        p.append_in_place(&txn(1, 0, 2, 1), 0).unwrap(); // 6
        p.write_marker(1, 1, true, 5, 0).unwrap(); // 7
        assert!(matches!(
            p.write_marker(1, 0, false, 5, 0),
            Err(AppendError::InvalidProducerEpoch { current: 1, got: 0 })
        ));
        // So is a marker from an older coordinator.
        assert!(matches!(
            p.write_marker(2, 0, true, 4, 0),
            Err(AppendError::CoordinatorFenced { current: 5, got: 4 })
        ));
        // A marker for a producer with nothing open is written, harmlessly.
        p.write_marker(9, 0, false, 0, 0).unwrap(); // 8
        assert_eq!(p.log.read().aborted_transactions(0, 9).len(), 1);
        assert_eq!(p.last_stable_offset(), 9);
    }

    #[test]
    fn followers_and_restarts_rebuild_the_same_transaction_state() {
        let dir = tempfile::tempdir().unwrap();
        let leader = open(&dir.path().join("leader"));
        leader.append_in_place(&txn(1, 0, 0, 2), 0).unwrap(); // 0..=1
        leader.append_in_place(&txn(2, 0, 0, 1), 0).unwrap(); // 2
        leader.write_marker(1, 3, false, 7, 0).unwrap(); // 3
        leader
            .append_in_place(&BatchBuilder::new(1).build(), 0)
            .unwrap(); // 4
        let aborted = leader.log.read().aborted_transactions(0, 5);
        assert_eq!(aborted.len(), 1);

        let follower = Partition::open(
            &dir.path().join("follower"),
            "t",
            uuid::Uuid::nil(),
            0,
            LogConfig::default(),
        )
        .unwrap();
        follower
            .append_replicated(&all_batches(&leader), 5)
            .unwrap();
        assert_eq!(follower.log.read().aborted_transactions(0, 5), aborted);
        assert_eq!(follower.last_stable_offset(), 2, "producer 2 is still open");
        // Promoted, the follower fences what the leader fenced.
        lead_alone(&follower);
        assert!(matches!(
            follower.write_marker(1, 2, true, 7, 0),
            Err(AppendError::InvalidProducerEpoch { current: 3, got: 2 })
        ));
        assert!(matches!(
            follower.write_marker(1, 3, true, 6, 0),
            Err(AppendError::CoordinatorFenced { current: 7, got: 6 })
        ));

        // A restart (snapshot or not) rebuilds it too.
        for snapshot in [false, true] {
            if snapshot {
                leader.snapshot_producer_state().unwrap();
            }
            let reopened = open(&dir.path().join("leader"));
            assert_eq!(reopened.log.read().aborted_transactions(0, 5), aborted);
            assert_eq!(reopened.last_stable_offset(), 2);
            assert!(matches!(
                reopened.write_marker(1, 2, true, 7, 0),
                Err(AppendError::InvalidProducerEpoch { current: 3, got: 2 })
            ));
        }
    }
}
