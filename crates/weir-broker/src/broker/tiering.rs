//! The tiering task (Kafka's `RemoteLogManager`): on each partition this
//! broker leads in tiered storage, every `remote.log.manager.task.interval.ms`,
//! it cleans up copies and deletions left unfinished, copies the sealed
//! segments below the last stable offset, and applies `retention.ms`,
//! `retention.bytes` and the log start offset to the remote segments.
//!
//! Every step is recorded in the metadata quorum before and after its
//! objects are written or removed: a copy is referenced only once it
//! finished, and what a crash or a leader change interrupts is found in
//! the metadata and cleaned up by the next leader. Failures are logged,
//! counted and retried at the next pass; local segments not yet copied stay.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use uuid::Uuid;
use weir_meta::{Command, MetadataImage, RemoteLog, RemoteSegment, RemoteSegmentState};

use crate::broker::{Broker, BrokerError, CONTROLLER_CHANGE_TIMEOUT_MS};
use crate::metrics::PartitionLabels;
use crate::partition::Partition;
use crate::remote::{copier, RemoteError, RemoteStore, SegmentName};

/// Why a step of the task failed.
#[derive(Debug, thiserror::Error)]
enum TieringError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("metadata: {0}")]
    Metadata(#[from] BrokerError),
    #[error(transparent)]
    Log(#[from] weir_log::LogError),
}

pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let Some(reader) = broker.remote_reader() else {
        return;
    };
    let store = reader.store().clone();
    let every = Duration::from_millis(broker.config().remote_log_manager_task_interval_ms);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = Failing::new();
    loop {
        tokio::select! {
            _ = tick.tick() => pass(&broker, &store, &mut failing).await,
            _ = shutdown.changed() => return,
        }
    }
}

/// The partitions whose last pass failed, told once.
type Failing = std::collections::HashSet<(String, i32)>;

/// One pass over the partitions led here.
async fn pass(broker: &Arc<Broker>, store: &RemoteStore, failing: &mut Failing) {
    let me = broker.node_id();
    for partition in broker.all_partitions() {
        let image = broker.image();
        let Some(topic) = image
            .topic(&partition.topic)
            .filter(|t| t.id == partition.topic_id)
        else {
            continue;
        };
        let Some(info) = topic.partition(partition.index) else {
            continue;
        };
        let labels = PartitionLabels {
            topic: partition.topic.clone(),
            partition: partition.index.to_string(),
        };
        if info.leader != me {
            forget_gauges(broker, &labels);
            continue;
        }
        let flag = |name: &str| {
            topic
                .configs
                .get(name)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        };
        let leader = Leader {
            broker,
            store,
            partition: &partition,
            leader_epoch: info.leader_epoch,
        };
        let tiered = partition.remote().is_tiered();
        let remote = image.remote_log(topic.id, partition.index).cloned();
        // KIP-950: tiered storage turned off with its data deleted.
        let delete_all = !tiered && flag("remote.log.delete.on.disable");
        if !tiered && !delete_all && remote.is_none() {
            continue;
        }
        let copy = tiered && !flag("remote.log.copy.disable");
        let outcome = leader
            .step(remote.as_ref(), copy, tiered || delete_all, delete_all)
            .await;
        leader.set_gauges(&broker.image(), &labels).await;
        match outcome {
            Err((operation, error)) => leader.failed(operation, &error, failing),
            Ok(()) => {
                if failing.remove(&(partition.topic.clone(), partition.index)) {
                    tracing::info!(topic = %partition.topic, partition = partition.index, "tiered storage works again");
                }
            }
        }
    }
    purge_deleted_topics(broker, store).await;
}

impl Broker {
    /// Raises the remote log start of a partition led here to `offset`
    /// (DeleteRecords): the offsets below it are gone from the remote
    /// tier at once, its segments below it at the next pass.
    pub async fn raise_remote_log_start(
        &self,
        partition: &Partition,
        offset: u64,
    ) -> Result<(), BrokerError> {
        let leader_epoch = self
            .image()
            .topic(&partition.topic)
            .and_then(|t| t.partition(partition.index))
            .map_or(-1, |p| p.leader_epoch);
        self.submit(
            Command::RemoteSegmentsDeleteStarted {
                topic_id: partition.topic_id,
                partition: partition.index,
                ids: Vec::new(),
                log_start_offset: Some(offset),
                broker: self.node_id(),
                leader_epoch,
            },
            CONTROLLER_CHANGE_TIMEOUT_MS,
        )
        .await
        .map(drop)
    }
}

/// This broker leading one partition in one leader epoch.
struct Leader<'a> {
    broker: &'a Arc<Broker>,
    store: &'a RemoteStore,
    partition: &'a Arc<Partition>,
    leader_epoch: i32,
}

impl Leader<'_> {
    fn name(&self, base_offset: u64, segment_id: Uuid) -> SegmentName<'_> {
        SegmentName {
            topic: &self.partition.topic,
            topic_id: self.partition.topic_id,
            partition: self.partition.index,
            base_offset,
            segment_id,
        }
    }

    /// Runs `read` on the partition on the blocking pool: what takes the
    /// log's lock, which an append may hold across its write.
    async fn off_workers<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Partition) -> T + Send + 'static,
    ) -> Result<T, TieringError> {
        let partition = self.partition.clone();
        tokio::task::spawn_blocking(move || read(&partition))
            .await
            .map_err(|error| RemoteError::Io(std::io::Error::other(error.to_string())).into())
    }

    async fn submit(&self, command: Command) -> Result<(), BrokerError> {
        self.broker
            .submit(command, CONTROLLER_CHANGE_TIMEOUT_MS)
            .await
            .map(drop)
    }

    fn failed(&self, operation: &str, error: &TieringError, failing: &mut Failing) {
        self.broker.metrics().remote.error(operation);
        let key = (self.partition.topic.clone(), self.partition.index);
        // Said once while it keeps failing: a store that is down for an
        // hour is one WARN per partition, and the metrics count the rest.
        if failing.insert(key) {
            tracing::warn!(
                topic = %self.partition.topic,
                partition = self.partition.index,
                %error,
                "tiered storage {operation} failed; retried at every pass, local segments not yet copied are kept"
            );
        } else {
            tracing::debug!(topic = %self.partition.topic, partition = self.partition.index, %error, "tiered storage {operation} failed again");
        }
    }

    /// One pass's work: cleans up what was left unfinished, copies (with
    /// `copy`), and applies remote retention (with `retain`; all of it goes
    /// with `delete_all`). The first failure ends it, with its operation.
    async fn step(
        &self,
        remote: Option<&RemoteLog>,
        copy: bool,
        retain: bool,
        delete_all: bool,
    ) -> Result<(), (&'static str, TieringError)> {
        if let Some(remote) = remote {
            self.clean_up(remote).await.map_err(|e| ("delete", e))?;
        }
        if copy {
            self.copy_sealed_segments().await.map_err(|e| ("copy", e))?;
        }
        if retain {
            let image = self.broker.image();
            if let Some(remote) = image.remote_log(self.partition.topic_id, self.partition.index) {
                self.enforce_retention(remote, delete_all)
                    .await
                    .map_err(|e| ("delete", e))?;
            }
        }
        Ok(())
    }

    /// Copies every sealed segment below the last stable offset that the
    /// remote tier does not hold yet, oldest first.
    async fn copy_sealed_segments(&self) -> Result<(), TieringError> {
        loop {
            // Never what the remote tier holds, nor what retention or
            // DeleteRecords deleted from it.
            let copied_below = copied_below(
                self.broker
                    .image()
                    .remote_log(self.partition.topic_id, self.partition.index),
            );
            // The last stable offset and the segment take the log's lock,
            // which an append may hold across its write: off the workers.
            let sealed = self
                .off_workers(move |partition| {
                    let upper_bound = partition.last_stable_offset();
                    partition
                        .log()
                        .sealed_segment_from(copied_below, upper_bound)
                })
                .await??;
            let Some(sealed) = sealed else {
                return Ok(());
            };
            let next_offset = sealed.next_offset;
            let producer_state = self
                .off_workers(move |partition| partition.producer_state_at(next_offset))
                .await??;
            let producer_state = Bytes::from(producer_state.to_json());
            let id = Uuid::new_v4();
            let segment = RemoteSegment {
                id,
                base_offset: sealed.base_offset,
                end_offset: sealed.next_offset - 1,
                max_timestamp_ms: sealed.max_timestamp,
                size_bytes: sealed.size,
                leader_epochs: sealed.segment_epochs(),
                broker: self.broker.node_id(),
                leader_epoch: self.leader_epoch,
                event_ms: self.broker.now_ms(),
                state: RemoteSegmentState::CopyStarted,
            };
            let base_offset = segment.base_offset;
            self.submit(Command::RemoteSegmentCopyStarted {
                topic_id: self.partition.topic_id,
                partition: self.partition.index,
                segment,
            })
            .await?;
            let rate = self
                .broker
                .config()
                .remote_log_manager_copy_max_bytes_per_second;
            let name = self.name(base_offset, id);
            let copied = async {
                let bytes =
                    copier::copy_segment(self.store, &name, sealed, producer_state, rate).await?;
                self.submit(Command::RemoteSegmentCopyFinished {
                    topic_id: self.partition.topic_id,
                    partition: self.partition.index,
                    id,
                    broker: self.broker.node_id(),
                    leader_epoch: self.leader_epoch,
                })
                .await?;
                Ok::<_, TieringError>(bytes)
            };
            let bytes = match copied.await {
                Ok(bytes) => bytes,
                Err(error) => {
                    // What this copy wrote goes now if it can (a deposed
                    // leader's copy, refused, leaves nothing behind); else
                    // the next leader finds the copy unfinished and removes it.
                    let _ = self.store.delete_segment(&name).await;
                    return Err(error);
                }
            };
            let metrics = &self.broker.metrics().remote;
            metrics.copy_bytes.inc_by(bytes);
            metrics.copy_segments.inc();
            tracing::debug!(topic = %self.partition.topic, partition = self.partition.index, base_offset, bytes, "copied a segment to the remote tier");
        }
    }

    /// Deletes what an interrupted copy (a crash, a leader change, a store
    /// that failed) or an interrupted deletion left: nothing refers to
    /// either, so they go whole.
    async fn clean_up(&self, remote: &RemoteLog) -> Result<(), TieringError> {
        let unfinished: Vec<&RemoteSegment> = remote
            .segments()
            .filter(|s| s.state != RemoteSegmentState::CopyFinished)
            .collect();
        if unfinished.is_empty() {
            return Ok(());
        }
        self.delete(&unfinished, None).await
    }

    /// Deletes the oldest remote segments that `retention.ms`,
    /// `retention.bytes` or the log start offset say go (all of them with
    /// `delete_all`), raising the remote log start past them.
    async fn enforce_retention(
        &self,
        remote: &RemoteLog,
        delete_all: bool,
    ) -> Result<(), TieringError> {
        let now = self.broker.now_ms();
        let copied_below = copied_below(Some(remote));
        // What the whole log holds: the remote tier and what of the local
        // log is not in it yet.
        let (config, (_, local_only)) = self
            .off_workers(move |partition| {
                let log = partition.log();
                (
                    log.config(),
                    log.segments_from(copied_below, u64::MAX, true),
                )
            })
            .await?;
        let mut total = remote.size_bytes() + local_only;
        let delete = config.cleanup_policy.delete;
        let mut doomed: Vec<&RemoteSegment> = Vec::new();
        for segment in remote.finished() {
            let expired = delete
                && config.retention_ms >= 0
                && now.saturating_sub(segment.max_timestamp_ms) > config.retention_ms;
            let oversize = delete
                && config.retention_bytes >= 0
                && total.saturating_sub(segment.size_bytes) >= config.retention_bytes as u64;
            let below_start = segment.end_offset < remote.log_start_offset;
            if !(delete_all || expired || oversize || below_start) {
                break;
            }
            total = total.saturating_sub(segment.size_bytes);
            doomed.push(segment);
        }
        let Some(last) = doomed.last() else {
            return Ok(());
        };
        let log_start = (!delete_all).then_some(last.end_offset + 1);
        self.delete(&doomed, log_start).await?;
        tracing::info!(
            topic = %self.partition.topic,
            partition = self.partition.index,
            segments = doomed.len(),
            log_start_offset = log_start,
            "remote retention deleted segments"
        );
        Ok(())
    }

    /// Deletes `segments`: recorded as started (raising the log start to
    /// `log_start`), their objects removed, recorded as finished.
    async fn delete(
        &self,
        segments: &[&RemoteSegment],
        log_start: Option<u64>,
    ) -> Result<(), TieringError> {
        let ids: Vec<Uuid> = segments.iter().map(|s| s.id).collect();
        self.submit(Command::RemoteSegmentsDeleteStarted {
            topic_id: self.partition.topic_id,
            partition: self.partition.index,
            ids: ids.clone(),
            log_start_offset: log_start,
            broker: self.broker.node_id(),
            leader_epoch: self.leader_epoch,
        })
        .await?;
        for segment in segments {
            self.store
                .delete_segment(&self.name(segment.base_offset, segment.id))
                .await?;
            self.broker.metrics().remote.delete_segments.inc();
        }
        self.submit(Command::RemoteSegmentsDeleteFinished {
            topic_id: self.partition.topic_id,
            partition: self.partition.index,
            ids,
        })
        .await?;
        Ok(())
    }

    async fn set_gauges(&self, image: &MetadataImage, labels: &PartitionLabels) {
        let metrics = &self.broker.metrics().remote;
        let remote = image.remote_log(self.partition.topic_id, self.partition.index);
        let copied_below = copied_below(remote);
        let (segments, bytes) = if self.partition.remote().is_tiered() {
            self.off_workers(move |partition| {
                let upper_bound = partition.last_stable_offset();
                partition
                    .log()
                    .segments_from(copied_below, upper_bound, false)
            })
            .await
            .unwrap_or_default()
        } else {
            (0, 0)
        };
        metrics
            .copy_lag_segments
            .get_or_create(labels)
            .set(segments as i64);
        metrics
            .copy_lag_bytes
            .get_or_create(labels)
            .set(bytes as i64);
        metrics
            .log_size_bytes
            .get_or_create(labels)
            .set(remote.map_or(0, RemoteLog::size_bytes) as i64);
    }
}

/// Below it, every offset is in the remote tier or deleted from both.
fn copied_below(remote: Option<&RemoteLog>) -> u64 {
    remote.map_or(0, |remote| {
        remote
            .highest_copied_offset()
            .map_or(0, |end| end + 1)
            .max(remote.log_start_offset)
    })
}

fn forget_gauges(broker: &Broker, labels: &PartitionLabels) {
    let metrics = &broker.metrics().remote;
    metrics.copy_lag_segments.remove(labels);
    metrics.copy_lag_bytes.remove(labels);
    metrics.log_size_bytes.remove(labels);
}

/// Removes the remote data of deleted topics, on one broker: the live one
/// with the lowest id.
async fn purge_deleted_topics(broker: &Arc<Broker>, store: &RemoteStore) {
    let image = broker.image();
    let first_live = image.live_brokers().map(|b| b.id).min();
    if first_live != Some(broker.node_id()) {
        return;
    }
    let purging: Vec<(Uuid, String)> = image
        .purging_topics()
        .map(|(id, name)| (id, name.to_owned()))
        .collect();
    for (id, name) in purging {
        let purged = async {
            let objects = store.delete_topic(&name, id).await?;
            broker
                .submit(
                    Command::RemoteTopicPurged { topic_id: id },
                    CONTROLLER_CHANGE_TIMEOUT_MS,
                )
                .await?;
            Ok::<_, TieringError>(objects)
        };
        match purged.await {
            Ok(objects) => {
                tracing::info!(
                    topic = name,
                    objects,
                    "removed the remote data of a deleted topic"
                )
            }
            Err(error) => {
                broker.metrics().remote.error("delete");
                tracing::warn!(topic = name, %error, "removing the remote data of a deleted topic failed; retried at the next pass");
            }
        }
    }
}
