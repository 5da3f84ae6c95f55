//! Fetch: whole batches as stored, up to the high watermark (or, for a
//! `read_committed` consumer, the last stable offset, with the aborted
//! transactions the records overlap), with a long-poll woken by appends
//! when fewer than `min_bytes` are available. Followers read to the log
//! end. Partitions are named by topic name before v13 and by topic id
//! after; fetch sessions (KIP-227, see `fetch_sessions`) let a fetcher
//! name only what changed, and hear only what is new.
//!
//! Fetch from follower (KIP-392): from v11 a consumer may read any replica
//! hosted here, a follower's up to the high watermark (and last stable
//! offset) it learnt from its leader, as Kafka's `fetchOnlyFromLeader`
//! allows; a leader with a `replica.selector.class` answers a consumer
//! that names its rack with no records and the replica to read from
//! instead (Kafka's `findPreferredReadReplica`).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::FetchRequest;
use kafka_protocol::ResponseError;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;
use weir_log::LogError;
use weir_meta::MetadataImage;

use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, ResourceType};

use super::fetch_response::{self, FetchedPartition, NodeEndpoint};
use super::RequestContext;
use crate::broker::Broker;
use crate::fetch_sessions::{
    Answered, FetchContext, FetchParams, FetchRequestView, PartitionKey, TopicRef,
};
use crate::metrics::PartitionLabels;
use crate::net::Outgoing;
use crate::partition::Partition;
use crate::quotas::client::QuotaKind;
use crate::replica::manager::NotServed;
use crate::replica::{ReplicaSelector, ReplicaView};

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
    /// See [`FetchContext::caught_up_at`].
    caught_up_at: Option<u64>,
    /// A follower's fetch of a replica the topic's
    /// `leader.replication.throttled.replicas` names on this leader: its
    /// bytes count against `leader.replication.throttled.rate`.
    throttled: bool,
    /// Whether that follower is in the ISR: an in-sync follower is never
    /// held back, so throttling cannot push it out.
    in_sync: bool,
    /// The replica this leader sends the consumer to instead of reading
    /// (KIP-392); -1 to read here.
    preferred_read_replica: i32,
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
    // A replica's fetch needs ClusterAction: a client that only claims to
    // be a follower gets an authorization error for every partition, never
    // a follower's view of the log.
    let follower_denied =
        follower && !ctx.authorized_on_cluster(broker, AclOperation::ClusterAction);
    if follower && !follower_denied {
        ctx.channel.mark_inter_broker();
    }
    let read_committed = request.isolation_level == 1 && !follower;
    // From v11 a consumer may read from followers, and names its rack.
    let from_any_replica = !follower && ctx.version >= 11;
    let client_rack = if from_any_replica {
        request.rack_id.as_str()
    } else {
        ""
    };
    let selector = broker.config().replica_selector_class;
    let now = broker.now_ms();
    let context = broker
        .fetch_sessions()
        .new_context(session_view(ctx.version, &request, follower), now);
    let image = broker.image();
    let led = led_here(
        broker,
        ctx,
        follower,
        from_any_replica,
        &image,
        context.partitions(),
    );
    let targets: Vec<Target> = context
        .partitions()
        .iter()
        .zip(led)
        .enumerate()
        .map(|(i, ((key, params), partition))| {
            let partition = partition.and_then(|partition| {
                check_leader_epoch(&partition, params.current_leader_epoch)?;
                Ok(partition)
            });
            let (mut throttled, mut in_sync) = (false, true);
            if let (Ok(partition), true) = (&partition, follower) {
                let offset = u64::try_from(params.fetch_offset).unwrap_or(0);
                if let Ok(log_start) = u64::try_from(params.log_start_offset) {
                    partition.follower_log_start(replica, log_start);
                }
                if let Some(isr) = partition.follower_fetched(replica, offset, now) {
                    broker.propose_isr(partition.clone(), isr);
                }
                throttled = partition.leader_throttled();
                in_sync = !throttled || partition.in_isr(replica);
            }
            let preferred_read_replica = match &partition {
                Ok(partition) if !selector.is_leader_only() && !client_rack.is_empty() => {
                    preferred_read_replica_of(
                        &image,
                        ctx.channel.listener(),
                        selector,
                        client_rack,
                        partition,
                        params.fetch_offset,
                        now,
                    )
                    .unwrap_or(-1)
                }
                _ => -1,
            };
            Target {
                index: key.partition,
                fetch_offset: params.fetch_offset,
                max_bytes: params.max_bytes.max(0) as usize,
                partition,
                follower,
                read_committed,
                caught_up_at: context.caught_up_at(i),
                throttled,
                in_sync,
                preferred_read_replica,
            }
        })
        .collect();
    let targets = Arc::new(targets);
    let live: Vec<&Arc<Partition>> = targets
        .iter()
        .filter_map(|t| t.partition.as_ref().ok())
        .collect();
    let mut max_bytes = usize::try_from(request.max_bytes).unwrap_or(usize::MAX);
    let quotas = broker.client_quotas();
    if !follower && quotas.enabled(QuotaKind::Fetch) {
        // Never more than the quota lets through at once (Kafka's bound).
        if let Some(bound) = quotas.max_fetch_bytes(&ctx.quota_client()) {
            max_bytes = max_bytes.min(bound);
        }
    }
    let replication_quota = broker.leader_replication_quota();
    let any_throttled = targets.iter().any(|t| t.throttled);
    // A consumer sent elsewhere hears of it at once, as in Kafka.
    let any_redirected = targets.iter().any(|t| t.preferred_read_replica >= 0);
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    // One waker for the whole fetch, woken by the next change of any of
    // its partitions.
    let waker = Arc::new(Notify::new());
    let mut parked = None;
    loop {
        let seen = changes(&live);
        // Over the leader's replication throttle, throttled followers not
        // in sync get no records (Kafka's `shouldLeaderThrottle`); judged
        // afresh on every read of a long poll.
        let hold_back = any_throttled && replication_quota.is_exceeded();
        let (mut reads, mut bytes, mut has_error) =
            match read_all(&targets, max_bytes, hold_back, Reading::InMemory) {
                Some(read) => read,
                None => read_off_workers(&targets, max_bytes, hold_back).await,
            };
        // A read of the remote tier is answered as soon as it is done, as
        // in Kafka.
        let remote = read_remote_tier(broker, &targets, &mut reads).await;
        if let Some((remote_bytes, remote_error)) = remote {
            bytes += remote_bytes;
            has_error |= remote_error;
        }
        let timed_out = Instant::now() >= deadline;
        if bytes >= min_bytes.max(1)
            || has_error
            || remote.is_some()
            || any_redirected
            || timed_out
            || live.is_empty()
        {
            if any_throttled {
                let sent: usize = targets
                    .iter()
                    .zip(&reads)
                    .filter(|(target, _)| target.throttled)
                    .map(|(_, read)| read.data.records.len() as usize)
                    .sum();
                replication_quota.record(sent);
            }
            let throttle = if follower {
                0
            } else {
                ctx.record_quota(broker, QuotaKind::Fetch, bytes as f64)
            };
            if throttle > 0 {
                // Over the quota: no records now, and they do not count.
                quotas.unrecord(
                    QuotaKind::Fetch,
                    &ctx.quota_client(),
                    bytes as f64,
                    broker.now_ms(),
                );
                ctx.channel.throttle(throttle);
                return respond_throttled(broker, ctx, &context, throttle);
            }
            if !follower {
                count_consumer_bytes(broker, &targets, &reads);
            }
            return respond(broker, ctx, &image, context, reads);
        }
        parked.get_or_insert_with(|| Parked::new(&broker.metrics().fetches_waiting));
        for partition in &live {
            partition.wake_on_change(&waker);
        }
        // Records held back by a delivery delay are read again when they
        // are due, or at the deadline if that is sooner.
        let wake = reads
            .iter()
            .filter_map(|read| read.held_until_ms)
            .min()
            .map_or(deadline, |at| {
                let wait = u64::try_from(at.saturating_sub(broker.now_ms())).unwrap_or(0);
                deadline.min(Instant::now() + Duration::from_millis(wait))
            });
        // A change between the read and the parking is read again now.
        if changes(&live) == seen {
            // On timeout, loop once more to answer with whatever is there.
            let _ = tokio::time::timeout_at(wake, waker.notified()).await;
        }
    }
}

/// Reads the first partition left to the remote tier (one per fetch, as
/// Kafka reads them), within `remote.fetch.max.wait.ms`; the others are
/// answered without records, to be asked again. Returns the bytes read and
/// whether the read failed, or `None` when no read was left to it. A failed
/// read answers KAFKA_STORAGE_ERROR, which clients retry; one that takes
/// too long answers no records.
async fn read_remote_tier(
    broker: &Broker,
    targets: &[Target],
    reads: &mut [Read],
) -> Option<(usize, bool)> {
    let (target, read) = targets
        .iter()
        .zip(reads.iter_mut())
        .find(|(_, read)| read.remote.is_some())?;
    let pending = read.remote.take()?;
    let partition = target.partition.as_ref().ok()?;
    let metrics = &broker.metrics().remote;
    let image = broker.image();
    let segment = image
        .remote_log(partition.topic_id, partition.index)
        .and_then(|remote| remote.segment_for(pending.offset))
        .cloned();
    let (Some(reader), Some(segment)) = (broker.remote_reader(), segment) else {
        read.data.error_code = ResponseError::OffsetOutOfRange.code();
        return Some((0, true));
    };
    let config = broker.config();
    if reader.fetch_quota_exceeded(config.remote_log_manager_fetch_max_bytes_per_second) {
        return Some((0, false));
    }
    let fetch = crate::remote::RemoteFetch {
        topic: &partition.topic,
        topic_id: partition.topic_id,
        partition: partition.index,
        offset: pending.offset,
        max_bytes: pending.max_bytes,
        upper_bound: pending.upper_bound,
        read_committed: target.read_committed,
    };
    let wait = Duration::from_millis(config.remote_fetch_max_wait_ms);
    match tokio::time::timeout(wait, reader.read(fetch, &segment)).await {
        Ok(Ok(remote)) => {
            let bytes = remote.records.len() as usize;
            metrics.fetch_requests.inc();
            metrics.fetch_bytes.inc_by(bytes as u64);
            read.data.records = remote.records;
            read.data.aborted = remote.aborted;
            Some((bytes, false))
        }
        Ok(Err(error)) => {
            metrics.error("fetch");
            // A corrupt copy is news; a store that is down is told by the
            // tiering task once, not at every retry of every consumer.
            if matches!(error, crate::remote::RemoteError::Corrupt { .. }) {
                tracing::warn!(topic = %partition.topic, partition = partition.index, offset = pending.offset, %error, "remote read failed");
            } else {
                tracing::debug!(topic = %partition.topic, partition = partition.index, offset = pending.offset, %error, "remote read failed");
            }
            read.data.error_code = ResponseError::KafkaStorageError.code();
            Some((0, true))
        }
        Err(_) => Some((0, false)),
    }
}

/// The replica a consumer in `client_rack` reading `partition` from
/// `fetch_offset` is sent to, if this replica leads it and `selector` names
/// another (Kafka's `findPreferredReadReplica`): one of the followers in
/// the ISR holding that offset, reachable on the client's listener.
fn preferred_read_replica_of(
    image: &MetadataImage,
    listener: &str,
    selector: ReplicaSelector,
    client_rack: &str,
    partition: &Partition,
    fetch_offset: i64,
    now_ms: i64,
) -> Option<i32> {
    let (followers, log_end) =
        partition.readable_followers(u64::try_from(fetch_offset).ok()?, now_ms)?;
    let reachable = |id: i32| image.broker(id).filter(|b| b.endpoint(listener).is_some());
    let leader_id = partition.replica_state().leader;
    let leader = ReplicaView {
        id: leader_id,
        rack: reachable(leader_id).and_then(|b| b.rack.as_deref()),
        log_end,
        since_caught_up_ms: 0,
    };
    let views: Vec<ReplicaView<'_>> = followers
        .iter()
        .filter_map(|f| {
            Some(ReplicaView {
                id: f.id,
                rack: reachable(f.id)?.rack.as_deref(),
                log_end: f.log_end,
                since_caught_up_ms: f.since_caught_up_ms,
            })
        })
        .collect();
    selector.select(client_rack, &leader, &views)
}

/// Adds the records each partition sends a consumer to its replica's
/// `consumer_bytes_out`.
fn count_consumer_bytes(broker: &Broker, targets: &[Target], reads: &[Read]) {
    let family = &broker.metrics().consumer_bytes_out;
    for (target, read) in targets.iter().zip(reads) {
        let bytes = read.data.records.len();
        if let (Ok(partition), true) = (&target.partition, bytes > 0) {
            let series = || {
                family
                    .get_or_create(&PartitionLabels {
                        topic: partition.topic.clone(),
                        partition: partition.index.to_string(),
                    })
                    .clone()
            };
            partition.count_consumer_bytes(series, bytes);
        }
    }
}

/// Every change the partitions have seen, summed: any change moves it.
fn changes(partitions: &[&Arc<Partition>]) -> u64 {
    partitions
        .iter()
        .fold(0, |sum, p| sum.wrapping_add(p.change_count()))
}

/// The partition each key names, if led here; the error code otherwise.
/// Topics are looked up once per run of partitions of the same topic.
/// The partitions this broker leads among those asked for (with
/// `from_any_replica`, those it hosts a replica of), or why not;
/// a topic the client may not read (a consumer needs Read on it, a
/// follower ClusterAction) is TOPIC_AUTHORIZATION_FAILED.
fn led_here(
    broker: &Broker,
    ctx: &RequestContext,
    follower: bool,
    from_any_replica: bool,
    image: &MetadataImage,
    partitions: &[(PartitionKey, FetchParams)],
) -> Vec<Result<Arc<Partition>, i16>> {
    let mut led = Vec::with_capacity(partitions.len());
    for run in partitions.chunk_by(|(a, _), (b, _)| a.topic == b.topic) {
        let name = match &run[0].0.topic {
            TopicRef::Name(name) => Some(&**name),
            TopicRef::Id(id) => image.topic_by_id(*id).map(|t| t.name.as_str()),
        };
        let Some(name) = name else {
            led.extend(
                run.iter()
                    .map(|_| Err(ResponseError::UnknownTopicId.code())),
            );
            continue;
        };
        let allowed = if follower {
            ctx.may(
                AclOperation::ClusterAction,
                ResourceType::Cluster,
                CLUSTER_RESOURCE_NAME,
            )
        } else {
            ctx.authorized(broker, AclOperation::Read, ResourceType::Topic, name)
        };
        if !allowed {
            led.extend(
                run.iter()
                    .map(|_| Err(ResponseError::TopicAuthorizationFailed.code())),
            );
            continue;
        }
        let indexes = run.iter().map(|(key, _)| key.partition);
        let found = if from_any_replica {
            broker.readable_partitions(image, name, indexes)
        } else {
            broker.leader_partitions(image, name, indexes)
        };
        led.extend(found.into_iter().map(|p| p.map_err(NotServed::code)));
    }
    led
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
                    log_start_offset: p.log_start_offset,
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
    reads: Vec<Read>,
) -> Outgoing {
    let answered: Vec<Answered> = reads.iter().map(Read::answered).collect();
    let outcome = broker
        .fetch_sessions()
        .finish(&context, &answered, broker.now_ms());
    let mut topics: Vec<(&TopicRef, Vec<FetchedPartition>)> = Vec::new();
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    let keys = context.partitions().iter().map(|(key, _)| key);
    for ((key, read), include) in keys.zip(reads).zip(outcome.include) {
        if !include {
            continue;
        }
        let mut data = read.data;
        if ctx.version >= 16 && is_leader_elsewhere(data.error_code) {
            hint_current_leader(
                image,
                ctx.channel.listener(),
                key,
                &mut data,
                &mut endpoints,
            );
        }
        match topics.last_mut() {
            Some((topic, partitions)) if **topic == key.topic => partitions.push(data),
            _ => topics.push((&key.topic, vec![data])),
        }
    }
    let header = fetch_response::Header {
        throttle_time_ms: 0,
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

/// The answer to a fetch over its quota: no partitions, and the session
/// as the request left it, as Kafka answers.
fn respond_throttled(
    broker: &Broker,
    ctx: &RequestContext,
    context: &FetchContext,
    throttle_ms: u32,
) -> Outgoing {
    let outcome = broker.fetch_sessions().throttled(context);
    let header = fetch_response::Header {
        throttle_time_ms: i32::try_from(throttle_ms).unwrap_or(i32::MAX),
        error_code: outcome.error_code,
        session_id: outcome.session_id,
    };
    fetch_response::encode(ctx.version, ctx.correlation_id, &header, &[], &[])
}

fn is_leader_elsewhere(error_code: i16) -> bool {
    error_code == ResponseError::NotLeaderOrFollower.code()
        || error_code == ResponseError::FencedLeaderEpoch.code()
}

fn hint_current_leader(
    image: &MetadataImage,
    listener: &str,
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
    let node = image.broker(info.leader);
    if let Some((node, (host, port))) = node.and_then(|n| Some((n, n.endpoint(listener)?))) {
        if !endpoints.iter().any(|e| e.node_id == node.id) {
            endpoints.push(NodeEndpoint {
                node_id: node.id,
                host: host.to_owned(),
                port: i32::from(port),
                rack: node.rack.clone(),
            });
        }
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

/// The partition's last stable offset at `high_watermark`; `None` when
/// reading it `InMemory` would wait for the log's lock.
fn last_stable_offset(partition: &Partition, high_watermark: u64, reading: Reading) -> Option<u64> {
    match reading {
        Reading::InMemory => partition.try_last_stable_offset_at(high_watermark),
        Reading::MayWait => Some(partition.last_stable_offset_at(high_watermark)),
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

/// Where a fetch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// On a runtime worker: only what is in memory, and only while no
    /// append holds the log (a read at the tail, or one that finds
    /// nothing new).
    InMemory,
    /// On the blocking pool: anything, waiting for the log's lock or the
    /// disk as it must.
    MayWait,
}

/// [`read_all`] on the blocking pool, for a fetch that could not be read
/// in memory: a read may wait for the log's lock (held across an append's
/// write), for a batch header from the disk, or for a log moving between
/// directories, none of which a runtime worker waits for.
async fn read_off_workers(
    targets: &Arc<Vec<Target>>,
    max_bytes: usize,
    hold_back: bool,
) -> (Vec<Read>, usize, bool) {
    let targets = targets.clone();
    tokio::task::spawn_blocking(move || {
        read_all(&targets, max_bytes, hold_back, Reading::MayWait).expect("may wait")
    })
    .await
    .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()))
}

/// Reads every target; with `hold_back`, throttled targets of followers
/// not in sync are answered without records. `None` when a target could
/// not be read `InMemory`.
fn read_all(
    targets: &[Target],
    max_bytes: usize,
    hold_back: bool,
    reading: Reading,
) -> Option<(Vec<Read>, usize, bool)> {
    let mut total = 0usize;
    let mut has_error = false;
    let mut reads = Vec::with_capacity(targets.len());
    for target in targets {
        let held = hold_back && target.throttled && !target.in_sync;
        let budget = if held {
            0
        } else {
            max_bytes.saturating_sub(total)
        };
        let read = read_partition(target, budget, held || total > 0, reading)?;
        has_error |= read.data.error_code != 0;
        total += read.data.records.len() as usize;
        reads.push(read);
    }
    Some((reads, total, has_error))
}

/// One partition's part of the answer, and what the fetch session keeps
/// of how it was read.
struct Read {
    data: FetchedPartition,
    /// See [`Answered::caught_up_at`].
    caught_up_at: Option<u64>,
    /// See [`Answered::skipped`].
    skipped: bool,
    /// When records held back by the topic's delivery delay become
    /// readable (epoch ms): a waiting fetch reads again then.
    held_until_ms: Option<i64>,
    /// A read below the local log start, left to the remote tier.
    remote: Option<RemotePending>,
}

/// A consumer's read of the remote tier, done after the local reads.
#[derive(Debug, Clone, Copy)]
struct RemotePending {
    offset: u64,
    max_bytes: usize,
    upper_bound: u64,
}

impl Read {
    fn answered(&self) -> Answered {
        Answered {
            error_code: self.data.error_code,
            high_watermark: self.data.high_watermark,
            log_start_offset: self.data.log_start_offset,
            has_records: !self.data.records.is_empty(),
            preferred_read_replica: self.data.preferred_read_replica >= 0,
            caught_up_at: self.caught_up_at,
            skipped: self.skipped,
        }
    }
}

/// Reads one partition within `budget` bytes. Only the first partition
/// with data may exceed the budget (to make progress past a large batch).
/// A partition of a fetch session that has not changed since a read found
/// nothing new is not read again.
fn read_partition(
    target: &Target,
    budget: usize,
    have_data: bool,
    reading: Reading,
) -> Option<Read> {
    let partition = match &target.partition {
        Ok(partition) => partition,
        Err(code) => {
            return Some(Read {
                data: FetchedPartition::error(target.index, *code),
                caught_up_at: None,
                skipped: false,
                held_until_ms: None,
                remote: None,
            })
        }
    };
    // As in Kafka, nothing is served of a replica whose directory failed.
    if partition.is_offline() {
        return Some(Read {
            data: FetchedPartition::error(target.index, ResponseError::KafkaStorageError.code()),
            caught_up_at: None,
            skipped: false,
            held_until_ms: None,
            remote: None,
        });
    }
    // Taken before anything is read: a change from here on moves it.
    let changes = partition.change_count();
    let mut read = Read {
        data: FetchedPartition::error(target.index, 0),
        caught_up_at: None,
        skipped: target.caught_up_at == Some(changes),
        held_until_ms: None,
        remote: None,
    };
    if target.preferred_read_replica >= 0 {
        // Read elsewhere: the offsets, no records (Kafka's answer).
        read.skipped = false;
        let data = &mut read.data;
        let high_watermark = partition.high_watermark();
        data.high_watermark = high_watermark as i64;
        data.last_stable_offset = last_stable_offset(partition, high_watermark, reading)? as i64;
        data.log_start_offset = partition.log_start_offset() as i64;
        data.preferred_read_replica = target.preferred_read_replica;
        return Some(read);
    }
    if read.skipped {
        return Some(read);
    }
    let high_watermark = partition.high_watermark();
    let last_stable = last_stable_offset(partition, high_watermark, reading)?;
    let log_start = partition.log().log_start_offset();
    let data = &mut read.data;
    data.high_watermark = high_watermark as i64;
    data.last_stable_offset = last_stable as i64;
    data.log_start_offset = partition.log_start_offset() as i64;
    let Ok(offset) = u64::try_from(target.fetch_offset) else {
        data.error_code = ResponseError::OffsetOutOfRange.code();
        return Some(read);
    };
    let upper = if target.follower {
        partition.log().log_end_offset()
    } else {
        // A consumer reads what the topic's delivery delay lets through,
        // which may take batch timestamps from the disk.
        if reading == Reading::InMemory && partition.delays_delivery() {
            return None;
        }
        let (limit, held_until_ms) = partition.delivery_limit(if target.read_committed {
            last_stable
        } else {
            high_watermark
        });
        read.held_until_ms = held_until_ms;
        limit
    };
    if offset == upper && offset >= log_start {
        // Held back by the delay, it is not caught up: time alone moves it.
        if read.held_until_ms.is_none() {
            read.caught_up_at = Some(changes);
        }
        return Some(read);
    }
    let limit = target.max_bytes.min(budget);
    if limit == 0 && have_data {
        return Some(read);
    }
    let in_remote_tier = offset < log_start
        && partition
            .remote()
            .log_start()
            .is_some_and(|remote_start| offset >= remote_start);
    if in_remote_tier {
        if target.follower {
            // The follower starts from the leader's local log start and
            // rebuilds what lies below from the remote tier (KIP-405).
            data.error_code = ResponseError::OffsetMovedToTieredStorage.code();
        } else {
            read.remote = Some(RemotePending {
                offset,
                max_bytes: limit.max(1),
                upper_bound: upper,
            });
        }
        return Some(read);
    }
    let log = partition.log();
    let slice = match reading {
        Reading::InMemory => log.try_read_in_memory(offset, limit.max(1), upper)?,
        Reading::MayWait => log.read(offset, limit.max(1), upper),
    };
    match slice {
        Ok(slice) if have_data && slice.len() as usize > limit => {}
        Ok(slice) => {
            if target.read_committed && !slice.is_empty() {
                data.aborted = match reading {
                    Reading::InMemory => log.try_aborted_transactions(offset, upper)?,
                    Reading::MayWait => log.aborted_transactions(offset, upper),
                };
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
    Some(read)
}
