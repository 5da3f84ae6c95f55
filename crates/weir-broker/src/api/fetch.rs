//! Fetch: whole batches as stored, up to the high watermark (or, for a
//! `read_committed` consumer, the last stable offset, with the aborted
//! transactions the records overlap), with a long-poll woken by appends
//! when fewer than `min_bytes` are available. Followers read to the log
//! end.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::FetchRequest;
use kafka_protocol::ResponseError;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::time::Instant;
use weir_log::{LogError, LogSlice};

use super::fetch_response::{self, FetchedPartition};
use super::RequestContext;
use crate::broker::Broker;
use crate::net::Outgoing;
use crate::partition::Partition;
use crate::replica_manager::NotServed;

struct Target {
    index: i32,
    fetch_offset: i64,
    max_bytes: usize,
    partition: Result<Arc<Partition>, i16>,
    /// A follower reads up to the log end, a consumer up to the high
    /// watermark.
    follower: bool,
    /// A consumer with isolation level `read_committed`: reads up to the
    /// last stable offset, and is told which transactions were aborted.
    read_committed: bool,
}

pub(super) async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: FetchRequest,
) -> Outgoing {
    // Before v15 followers name themselves in `replica_id`; consumers send -1.
    let replica = request.replica_id.0;
    let read_committed = request.isolation_level == 1 && replica < 0;
    let now = broker.now_ms();
    let topics: Vec<(String, Vec<Target>)> = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let targets = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let partition =
                        led_at_epoch(broker, &name, p.partition, p.current_leader_epoch);
                    if let (Ok(partition), true) = (&partition, replica >= 0) {
                        let offset = u64::try_from(p.fetch_offset).unwrap_or(0);
                        if let Some(isr) = partition.follower_fetched(replica, offset, now) {
                            broker.propose_isr(partition.clone(), isr);
                        }
                    }
                    Target {
                        index: p.partition,
                        fetch_offset: p.fetch_offset,
                        max_bytes: p.partition_max_bytes.max(0) as usize,
                        partition,
                        follower: replica >= 0,
                        read_committed,
                    }
                })
                .collect();
            (name, targets)
        })
        .collect();
    let mut watchers: Vec<watch::Receiver<u64>> = topics
        .iter()
        .flat_map(|(_, targets)| targets.iter())
        .filter_map(|t| t.partition.as_ref().ok().map(|p| p.subscribe()))
        .collect();
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(usize::MAX);
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let mut parked = None;
    loop {
        for watcher in &mut watchers {
            watcher.borrow_and_update();
        }
        let (responses, bytes, has_error) = read_all(&topics, max_bytes);
        let timed_out = Instant::now() >= deadline;
        if bytes >= min_bytes.max(1) || has_error || timed_out || watchers.is_empty() {
            return fetch_response::encode(ctx.version, ctx.correlation_id, &responses);
        }
        parked.get_or_insert_with(|| Parked::new(&broker.metrics().fetches_waiting));
        let any_append =
            futures::future::select_all(watchers.iter_mut().map(|w| Box::pin(w.changed())));
        // On timeout, loop once more to answer with whatever is there.
        let _ = tokio::time::timeout_at(deadline, any_append).await;
    }
}

/// A fetch counted in `fetches_waiting` while it waits for data (Kafka's
/// fetch purgatory size); uncounted when it answers or its client goes.
struct Parked<'a>(&'a Gauge);

impl<'a> Parked<'a> {
    fn new(gauge: &'a Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The partition, if led here at the epoch the client names: the error
/// code otherwise.
pub(super) fn led_at_epoch(
    broker: &Broker,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<Arc<Partition>, i16> {
    let partition = broker
        .leader_partition(topic, partition)
        .map_err(NotServed::code)?;
    check_leader_epoch(&partition, current_leader_epoch)?;
    Ok(partition)
}

/// FENCED_LEADER_EPOCH for a client behind the leader's epoch,
/// UNKNOWN_LEADER_EPOCH for one ahead of it; -1 skips the check.
fn check_leader_epoch(partition: &Partition, current_leader_epoch: i32) -> Result<(), i16> {
    let epoch = partition.replica_state().leader_epoch;
    match current_leader_epoch {
        -1 => Ok(()),
        e if e < epoch => Err(ResponseError::FencedLeaderEpoch.code()),
        e if e > epoch => Err(ResponseError::UnknownLeaderEpoch.code()),
        _ => Ok(()),
    }
}

type Fetched<'a> = Vec<(&'a str, Vec<FetchedPartition>)>;

fn read_all(topics: &[(String, Vec<Target>)], max_bytes: usize) -> (Fetched<'_>, usize, bool) {
    let mut total = 0usize;
    let mut has_error = false;
    let mut responses = Vec::with_capacity(topics.len());
    for (name, targets) in topics {
        let mut partitions = Vec::with_capacity(targets.len());
        for target in targets {
            let data = read_partition(target, max_bytes.saturating_sub(total), total > 0);
            has_error |= data.error_code != 0;
            total += data.records.len() as usize;
            partitions.push(data);
        }
        responses.push((name.as_str(), partitions));
    }
    (responses, total, has_error)
}

/// Reads one partition within `budget` bytes. Only the first partition
/// with data may exceed the budget (to make progress past a large batch).
fn read_partition(target: &Target, budget: usize, have_data: bool) -> FetchedPartition {
    let partition = match &target.partition {
        Ok(partition) => partition,
        Err(code) => return FetchedPartition::error(target.index, *code),
    };
    let high_watermark = partition.high_watermark();
    let last_stable = partition.last_stable_offset_at(high_watermark);
    let mut data = FetchedPartition {
        index: target.index,
        error_code: 0,
        high_watermark: high_watermark as i64,
        last_stable_offset: last_stable as i64,
        log_start_offset: partition.log().log_start_offset() as i64,
        records: LogSlice::default(),
        aborted: Vec::new(),
    };
    let Ok(offset) = u64::try_from(target.fetch_offset) else {
        data.error_code = ResponseError::OffsetOutOfRange.code();
        return data;
    };
    let limit = target.max_bytes.min(budget);
    if limit == 0 && have_data {
        return data;
    }
    let upper = if target.follower {
        partition.log().log_end_offset()
    } else if target.read_committed {
        last_stable
    } else {
        high_watermark
    };
    match partition.log().read(offset, limit.max(1), upper) {
        Ok(slice) if have_data && slice.len() as usize > limit => {}
        Ok(slice) => {
            if target.read_committed && !slice.is_empty() {
                data.aborted = partition.log().aborted_transactions(offset, upper);
            }
            data.records = slice;
        }
        Err(LogError::OffsetOutOfRange { .. }) => {
            data.error_code = ResponseError::OffsetOutOfRange.code();
        }
        Err(error) => {
            tracing::error!(topic = %partition.topic, partition = target.index, %error, "fetch failed");
            data.error_code = ResponseError::KafkaStorageError.code();
        }
    }
    data
}
