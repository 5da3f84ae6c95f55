//! Fetch: whole batches as stored, up to the high watermark (or, for a
//! `read_committed` consumer, the last stable offset, with the aborted
//! transactions the records overlap), with a long-poll woken by appends
//! when fewer than `min_bytes` are available. Followers read to the log
//! end. Partitions are named by topic name before v13 and by topic id
//! after; fetch sessions (KIP-227, see `fetch_sessions`) let a fetcher
//! name only what changed, and hear only what is new.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::FetchRequest;
use kafka_protocol::ResponseError;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::time::Instant;
use weir_log::{LogError, LogSlice};
use weir_meta::MetadataImage;

use super::fetch_response::{self, FetchedPartition, NodeEndpoint};
use super::RequestContext;
use crate::broker::Broker;
use crate::fetch_sessions::{
    Answered, FetchContext, FetchParams, FetchRequestView, PartitionKey, TopicRef,
};
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
    // Followers name themselves in `replica_id` before v15, in
    // `replica_state` after; consumers send -1.
    let replica = if ctx.version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    let follower = replica >= 0;
    let read_committed = request.isolation_level == 1 && !follower;
    let now = broker.now_ms();
    let context = broker
        .fetch_sessions()
        .new_context(session_view(ctx.version, &request, follower), now);
    let image = broker.image();
    let targets: Vec<Target> = context
        .partitions()
        .iter()
        .map(|(key, params)| {
            let partition = led_by_key(broker, &image, key, params.current_leader_epoch);
            if let (Ok(partition), true) = (&partition, follower) {
                let offset = u64::try_from(params.fetch_offset).unwrap_or(0);
                if let Some(isr) = partition.follower_fetched(replica, offset, now) {
                    broker.propose_isr(partition.clone(), isr);
                }
            }
            Target {
                index: key.partition,
                fetch_offset: params.fetch_offset,
                max_bytes: params.max_bytes.max(0) as usize,
                partition,
                follower,
                read_committed,
            }
        })
        .collect();
    let mut watchers: Vec<watch::Receiver<u64>> = targets
        .iter()
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
        let (fetched, bytes, has_error) = read_all(&targets, max_bytes);
        let timed_out = Instant::now() >= deadline;
        if bytes >= min_bytes.max(1) || has_error || timed_out || watchers.is_empty() {
            return respond(broker, ctx, &image, context, fetched);
        }
        parked.get_or_insert_with(|| Parked::new(&broker.metrics().fetches_waiting));
        let any_append =
            futures::future::select_all(watchers.iter_mut().map(|w| Box::pin(w.changed())));
        // On timeout, loop once more to answer with whatever is there.
        let _ = tokio::time::timeout_at(deadline, any_append).await;
    }
}

/// The request as the session cache sees it.
fn session_view(version: i16, request: &FetchRequest, follower: bool) -> FetchRequestView {
    let topic_ref = |name: &str, id: uuid::Uuid| {
        if version >= 13 {
            TopicRef::Id(id)
        } else {
            TopicRef::Name(name.into())
        }
    };
    let partitions = request
        .topics
        .iter()
        .flat_map(|topic| {
            let topic_ref = topic_ref(&topic.topic.0, topic.topic_id);
            topic.partitions.iter().map(move |p| {
                let key = PartitionKey {
                    topic: topic_ref.clone(),
                    partition: p.partition,
                };
                let params = FetchParams {
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    current_leader_epoch: p.current_leader_epoch,
                };
                (key, params)
            })
        })
        .collect();
    let forgotten = request
        .forgotten_topics_data
        .iter()
        .flat_map(|topic| {
            let topic_ref = topic_ref(&topic.topic.0, topic.topic_id);
            topic.partitions.iter().map(move |&partition| PartitionKey {
                topic: topic_ref.clone(),
                partition,
            })
        })
        .collect();
    FetchRequestView {
        version,
        session_id: request.session_id,
        epoch: request.session_epoch,
        privileged: follower,
        partitions,
        forgotten,
    }
}

/// Settles the session and encodes the answer: every partition read, or
/// (in an incremental session) those with something new. From v16, a
/// partition led elsewhere names its leader (KIP-951), so the client
/// moves without a metadata round trip.
fn respond(
    broker: &Broker,
    ctx: &RequestContext,
    image: &MetadataImage,
    context: FetchContext,
    fetched: Vec<FetchedPartition>,
) -> Outgoing {
    let answered: Vec<Answered> = fetched
        .iter()
        .map(|f| Answered {
            error_code: f.error_code,
            high_watermark: f.high_watermark,
            log_start_offset: f.log_start_offset,
            has_records: !f.records.is_empty(),
        })
        .collect();
    let keys: Vec<PartitionKey> = context
        .partitions()
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    let outcome = broker
        .fetch_sessions()
        .finish(context, &answered, broker.now_ms());
    let mut topics: Vec<(TopicRef, Vec<FetchedPartition>)> = Vec::new();
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for ((key, mut data), include) in keys.into_iter().zip(fetched).zip(outcome.include) {
        if !include {
            continue;
        }
        if ctx.version >= 16 && is_leader_elsewhere(data.error_code) {
            hint_current_leader(image, &key, &mut data, &mut endpoints);
        }
        match topics.last_mut() {
            Some((topic, partitions)) if *topic == key.topic => partitions.push(data),
            _ => topics.push((key.topic, vec![data])),
        }
    }
    let header = fetch_response::Header {
        error_code: outcome.error_code,
        session_id: outcome.session_id,
    };
    fetch_response::encode(
        ctx.version,
        ctx.correlation_id,
        &header,
        &topics,
        &endpoints,
    )
}

fn is_leader_elsewhere(error_code: i16) -> bool {
    error_code == ResponseError::NotLeaderOrFollower.code()
        || error_code == ResponseError::FencedLeaderEpoch.code()
}

fn hint_current_leader(
    image: &MetadataImage,
    key: &PartitionKey,
    data: &mut FetchedPartition,
    endpoints: &mut Vec<NodeEndpoint>,
) {
    let topic = match &key.topic {
        TopicRef::Name(name) => image.topic(name),
        TopicRef::Id(id) => image.topic_by_id(*id),
    };
    let Some(info) = topic.and_then(|t| t.partition(key.partition)) else {
        return;
    };
    data.current_leader = Some((info.leader, info.leader_epoch));
    if let Some(node) = image.broker(info.leader) {
        if !endpoints.iter().any(|e| e.node_id == node.id) {
            endpoints.push(NodeEndpoint {
                node_id: node.id,
                host: node.host.clone(),
                port: i32::from(node.port),
                rack: node.rack.clone(),
            });
        }
    }
}

/// The partition `key` names, if led here at the epoch the client names.
fn led_by_key(
    broker: &Broker,
    image: &MetadataImage,
    key: &PartitionKey,
    current_leader_epoch: i32,
) -> Result<Arc<Partition>, i16> {
    match &key.topic {
        TopicRef::Name(name) => led_at_epoch(broker, name, key.partition, current_leader_epoch),
        TopicRef::Id(id) => match image.topic_by_id(*id) {
            Some(topic) => led_at_epoch(broker, &topic.name, key.partition, current_leader_epoch),
            None => Err(ResponseError::UnknownTopicId.code()),
        },
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

fn read_all(targets: &[Target], max_bytes: usize) -> (Vec<FetchedPartition>, usize, bool) {
    let mut total = 0usize;
    let mut has_error = false;
    let mut fetched = Vec::with_capacity(targets.len());
    for target in targets {
        let data = read_partition(target, max_bytes.saturating_sub(total), total > 0);
        has_error |= data.error_code != 0;
        total += data.records.len() as usize;
        fetched.push(data);
    }
    (fetched, total, has_error)
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
        current_leader: None,
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
