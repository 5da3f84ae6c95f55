//! The mirroring task (after KIP-1279's mirror fetcher and mirror
//! coordinator): one loop per mirror on every broker.
//!
//! - On the live broker with the lowest id, every [`TOPIC_SYNC`], it reads
//!   the source's metadata and creates the topics the mirror's regex
//!   matches that are not here yet: the source's topic id, partition count
//!   and topic config overrides, this cluster's replication factor
//!   (`Command::CreateMirrorTopics`); and adds the partitions the source
//!   added.
//! - On every broker, it fetches the mirror partitions this broker leads
//!   from the source's leaders, as a consumer reading committed records,
//!   and appends the batches at their own offsets
//!   (`Partition::append_mirrored`): the next fetch starts at the log end,
//!   so no batch is written twice or out of order. The destination's
//!   followers copy them as any records, and the high watermark follows
//!   `min.insync.replicas` as for any write.
//!
//! - On the live broker with the lowest id, every [`GROUP_SYNC`], for the
//!   groups the mirror's group regex matches, it copies the offsets the
//!   source's coordinators hold for mirror topics to this cluster's
//!   coordinators as they are (the offsets are the same on both sides, so
//!   there is nothing to translate), each at most the partition's high
//!   watermark here: a commit with no members' generation, which a
//!   coordinator takes only while the group has no active members here.
//!
//! - Failback: the topic sync takes back a writable topic with the source
//!   topic's id (`Command::FailBackMirrorTopics`); each partition's leader
//!   finds where its log and the source's part (`mirror::failback`) and
//!   reports it (`Command::MirrorPartitionPrepared`); the topic is then
//!   cut there and mirrored like any other.
//!
//! A source that cannot be reached, a leader moving there, or a topic
//! deleted there stops nothing but the partitions concerned, whose state
//! says why; the loop retries. The source's log start moving past the
//! mirror (retention) is followed: the mirror fetches on from it, leaving
//! a gap as a compacted log has.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use tokio::sync::watch;
use weir_client::{Client, ClientError, Cluster, ConfigSource};
use weir_meta::{
    Applied, Command, MetadataImage, Mirror, MirrorCut, MirrorTopic, MirrorTopicState,
    TopicCreation,
};

use crate::broker::{Broker, BrokerError, NewTopic, CONTROLLER_CHANGE_TIMEOUT_MS};
use crate::metrics::MirrorPartitionLabels;
use crate::mirror::failback;
use crate::mirror::source::{self, Target};
use crate::partition::Partition;

/// How often the mirror's topics are compared with the source's.
const TOPIC_SYNC: Duration = Duration::from_secs(5);
/// How often the mirror topics' configs are compared with the source's
/// (MirrorMaker 2's `sync.topic.configs.interval.seconds`, 600 s there):
/// a DescribeConfigs per topic each time.
const CONFIG_SYNC: Duration = Duration::from_secs(30);
/// Topic configs that belong to this cluster, never copied from the
/// source: its own durability rule (`min.insync.replicas`), replication
/// throttles and election policy, and its own tiered storage.
const LOCAL_TOPIC_CONFIGS: &[&str] = &[
    "min.insync.replicas",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "unclean.leader.election.enable",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
];
/// How often the chosen groups' committed offsets are copied (MirrorMaker
/// 2's `sync.group.offsets.interval.seconds`).
const GROUP_SYNC: Duration = Duration::from_secs(5);
/// How often the source's ACLs are copied, for a mirror that syncs them.
const ACL_SYNC: Duration = Duration::from_secs(5);
/// The pause after a failure, and between looks at a paused mirror.
const BACKOFF: Duration = Duration::from_secs(1);

/// Runs a loop per mirror while the broker runs, started and stopped as
/// mirrors are created, changed and deleted.
pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let mut running: HashMap<String, (Mirror, tokio::task::JoinHandle<()>)> = HashMap::new();
    let mut tick = tokio::time::interval(BACKOFF);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => {
                for (_, (_, task)) in running.drain() {
                    task.abort();
                }
                return;
            }
        }
        let image = broker.image();
        running.retain(|name, (definition, task)| {
            let keep = image
                .mirror(name)
                .is_some_and(|current| same_settings(current, definition));
            if !keep {
                task.abort();
                forget_mirror(&broker, name);
            }
            keep
        });
        for mirror in image.mirrors() {
            if !running.contains_key(&mirror.name) {
                let task = tokio::spawn(mirror_loop(broker.clone(), mirror.clone()));
                running.insert(mirror.name.clone(), (mirror.clone(), task));
            }
        }
    }
}

/// Whether a mirror's loop goes on with `current` as it started with
/// `started`: the topics it created change, nothing else may.
fn same_settings(current: &Mirror, started: &Mirror) -> bool {
    current.source_bootstrap == started.source_bootstrap
        && current.topics == started.topics
        && current.groups == started.groups
        && current.source_config == started.source_config
        && current.paused == started.paused
        && current.sync_acls == started.sync_acls
}

fn forget_mirror(broker: &Broker, name: &str) {
    for (topic, partition) in broker.mirror_progress().forget(name) {
        broker
            .metrics()
            .mirror
            .forget(&labels(name, &topic, partition));
    }
}

fn labels(mirror: &str, topic: &str, partition: i32) -> MirrorPartitionLabels {
    MirrorPartitionLabels {
        mirror: mirror.to_owned(),
        topic: topic.to_owned(),
        partition: partition.to_string(),
    }
}

/// A mirror partition this broker leads.
struct Led {
    partition: Arc<Partition>,
    leader_epoch: i32,
    /// Where the partition was cut last, by a failback or a failover.
    cut: Option<MirrorCut>,
}

/// The partitions of `mirror`'s topics in state `wanted` this broker
/// leads in `image`.
fn led_here(
    broker: &Broker,
    image: &MetadataImage,
    mirror: &Mirror,
    wanted: impl Fn(&MirrorTopicState, i32) -> bool,
) -> Vec<Led> {
    let me = broker.node_id();
    let mut led = Vec::new();
    for (id, mirror_topic) in &mirror.mirror_topics {
        let Some(topic) = image.topic(&mirror_topic.name).filter(|t| t.id == *id) else {
            continue;
        };
        for info in topic
            .partitions
            .iter()
            .filter(|p| p.leader == me && wanted(&mirror_topic.state, p.partition))
        {
            if let Some(partition) = broker.partition(&topic.name, info.partition) {
                led.push(Led {
                    partition,
                    leader_epoch: info.leader_epoch,
                    cut: mirror_topic.cut(info.partition).copied(),
                });
            }
        }
    }
    led
}

async fn mirror_loop(broker: Arc<Broker>, mirror: Mirror) {
    let name = mirror.name.clone();
    let mut source: Option<Cluster> = None;
    let mut last_sync: Option<Instant> = None;
    let mut last_config_sync: Option<Instant> = None;
    // Where a partition fetches next when not at its log end: the source's
    // log start, past a mirror that fell behind its retention.
    let mut skip_to: HashMap<(String, i32), u64> = HashMap::new();
    let mut unreachable_told = false;
    let mut groups = GroupSync::default();
    let mut acls = AclSync::default();
    loop {
        let image = broker.image();
        let Some(current) = image.mirror(&name) else {
            return;
        };
        report_cuts(&broker, &image, current).await;
        let led = led_here(&broker, &image, current, |state, _| {
            *state == MirrorTopicState::Mirroring
        });
        let kept: HashSet<(String, i32)> = led_here(&broker, &image, current, |state, _| {
            matches!(
                state,
                MirrorTopicState::Mirroring | MirrorTopicState::Preparing { .. }
            )
        })
        .iter()
        .map(|l| (l.partition.topic.clone(), l.partition.index))
        .collect();
        for (topic, partition) in broker
            .mirror_progress()
            .retain(&name, |t, p| kept.contains(&(t.to_owned(), p)))
        {
            broker
                .metrics()
                .mirror
                .forget(&labels(&name, &topic, partition));
        }
        if current.paused {
            for l in &led {
                record(&broker, &name, &l.partition, None, "paused");
            }
            tokio::time::sleep(BACKOFF).await;
            continue;
        }
        if source.is_none() {
            match source::connect(current, broker.node_id()).await {
                Ok(cluster) => {
                    if unreachable_told {
                        tracing::info!(mirror = name, "the mirror's source is reachable again");
                        unreachable_told = false;
                    }
                    source = Some(cluster);
                }
                Err(error) => {
                    if !unreachable_told {
                        tracing::warn!(mirror = name, source = current.source_bootstrap, %error, "cannot reach the mirror's source; retrying");
                        unreachable_told = true;
                    }
                    for l in &led {
                        record(&broker, &name, &l.partition, None, "source unreachable");
                    }
                    tokio::time::sleep(BACKOFF).await;
                    continue;
                }
            }
        }
        let cluster = source.as_mut().expect("connected above");
        let first_live = image.live_brokers().map(|b| b.id).min();
        if first_live == Some(broker.node_id())
            && last_sync.is_none_or(|at| at.elapsed() >= TOPIC_SYNC)
        {
            last_sync = Some(Instant::now());
            if let Err(error) = sync_topics(&broker, current, cluster).await {
                tracing::warn!(mirror = name, %error, "cannot bring the mirror's topics in line with the source's");
            }
        }
        if first_live == Some(broker.node_id())
            && last_config_sync.is_none_or(|at| at.elapsed() >= CONFIG_SYNC)
        {
            last_config_sync = Some(Instant::now());
            if let Err(error) = sync_configs(&broker, &image, current, cluster).await {
                tracing::warn!(mirror = name, %error, "cannot bring the mirror topics' configs in line with the source's");
            }
        }
        if first_live == Some(broker.node_id())
            && current.sync_acls
            && acls.last.is_none_or(|at| at.elapsed() >= ACL_SYNC)
        {
            acls.last = Some(Instant::now());
            match acls.sync(&broker, &image, &name, cluster).await {
                Ok(()) => acls.failing = false,
                // Once per failing streak: it fails again every round.
                Err(error) if !acls.failing => {
                    acls.failing = true;
                    tracing::warn!(mirror = name, %error, "cannot copy the source's ACLs; retrying");
                }
                Err(_) => {}
            }
        }
        if first_live == Some(broker.node_id())
            && current.groups.is_some()
            && groups.last.is_none_or(|at| at.elapsed() >= GROUP_SYNC)
        {
            groups.last = Some(Instant::now());
            if let Err(error) = groups.sync(&broker, &image, current, cluster).await {
                tracing::debug!(mirror = name, %error, "cannot copy the groups' offsets");
                groups.destination = None;
            }
        }
        report_agreements(&broker, &image, current, cluster).await;
        if led.is_empty() {
            tokio::time::sleep(BACKOFF).await;
            continue;
        }
        match fetch_round(&broker, &name, cluster, &led, &mut skip_to).await {
            Ok(true) => {}
            Ok(false) => tokio::time::sleep(BACKOFF / 5).await,
            Err(error) => {
                tracing::debug!(mirror = name, %error, "fetching from the mirror's source failed");
                for l in &led {
                    record(&broker, &name, &l.partition, None, "source unreachable");
                }
                source = None;
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}

/// For the failing-over partitions led here that have not reported yet:
/// reports where each is cut, its last stable offset, and the largest
/// producer id of its records. Nothing is appended to them any more: this
/// loop is their only writer, and it fetches only for mirroring topics.
async fn report_cuts(broker: &Broker, image: &MetadataImage, mirror: &Mirror) {
    let stopping = led_here(
        broker,
        image,
        mirror,
        |state, partition| matches!(state, MirrorTopicState::Stopping { reported } if !reported.contains_key(&partition)),
    );
    for l in stopping {
        let partition = l.partition.clone();
        let cut = tokio::task::spawn_blocking(move || {
            let max_producer_id = partition
                .active_producers()
                .iter()
                .map(|(p, _)| p.producer_id)
                .max()
                .unwrap_or(-1);
            (partition.last_stable_offset(), max_producer_id)
        })
        .await;
        let Ok((offset, max_producer_id)) = cut else {
            continue;
        };
        let p = &l.partition;
        let reported = broker
            .submit(
                Command::MirrorPartitionStopped {
                    topic_id: p.topic_id,
                    partition: p.index,
                    broker: broker.node_id(),
                    leader_epoch: l.leader_epoch,
                    last_mirrored_offset: offset,
                    max_producer_id,
                },
                CONTROLLER_CHANGE_TIMEOUT_MS,
            )
            .await;
        match reported {
            Ok(_) => {
                tracing::info!(
                    mirror = mirror.name,
                    topic = p.topic,
                    partition = p.index,
                    last_mirrored_offset = offset,
                    "mirror partition failing over: cut at its last stable offset"
                )
            }
            Err(error) => {
                tracing::debug!(mirror = mirror.name, topic = p.topic, partition = p.index, %error, "cannot report a failing-over partition's cut; retrying")
            }
        }
    }
}

/// For the taken-back partitions led here that have not reported yet:
/// finds where each one's log and the source's part and reports it. The
/// topic is read-only already, so the log grows no more meanwhile.
async fn report_agreements(
    broker: &Broker,
    image: &MetadataImage,
    mirror: &Mirror,
    cluster: &mut Cluster,
) {
    let preparing = led_here(
        broker,
        image,
        mirror,
        |state, partition| matches!(state, MirrorTopicState::Preparing { reported } if !reported.contains_key(&partition)),
    );
    for l in preparing {
        let p = &l.partition;
        let agreed = match agreed_with_source(p, cluster).await {
            Ok(offset) => offset,
            Err(error) => {
                record(
                    broker,
                    &mirror.name,
                    p,
                    None,
                    &format!("failing back: {error}"),
                );
                continue;
            }
        };
        record(broker, &mirror.name, p, None, "failing back");
        let reported = broker
            .submit(
                Command::MirrorPartitionPrepared {
                    topic_id: p.topic_id,
                    partition: p.index,
                    broker: broker.node_id(),
                    leader_epoch: l.leader_epoch,
                    agreed_offset: agreed,
                },
                CONTROLLER_CHANGE_TIMEOUT_MS,
            )
            .await;
        match reported {
            Ok(_) => tracing::info!(
                mirror = mirror.name,
                topic = p.topic,
                partition = p.index,
                log_end_offset = p.log().log_end_offset(),
                agreed_offset = agreed,
                "failing back: the partition holds the source's batches below the agreed offset, and mirrors from there"
            ),
            Err(error) => {
                tracing::debug!(mirror = mirror.name, topic = p.topic, partition = p.index, %error, "cannot report where a taken-back partition and the source part; retrying")
            }
        }
    }
}

/// The offset below which `partition`'s log holds the same batches as the
/// source's.
async fn agreed_with_source(
    partition: &Arc<Partition>,
    cluster: &mut Cluster,
) -> Result<u64, String> {
    let leader = cluster
        .leader_of(&partition.topic, partition.index)
        .await
        .map_err(|e| format!("the source's leader: {e}"))?;
    let log = partition.log();
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let mut target = Target {
        topic: partition.topic.clone(),
        topic_id: partition.topic_id,
        partition: partition.index,
        offset: start,
    };
    let mut search = failback::Agreement::new(start, end);
    let mut step = search.start();
    loop {
        step = match step {
            failback::Step::ReadLocal(probe) => {
                let reading = partition.clone();
                let batch = tokio::task::spawn_blocking(move || {
                    let slice = reading
                        .log()
                        .read(probe, 1, u64::MAX)
                        .map_err(|e| e.to_string())?;
                    let bytes = slice.to_bytes().map_err(|e| e.to_string())?;
                    Ok::<_, String>(failback::BatchId::first_of(&bytes))
                })
                .await
                .map_err(|e| e.to_string())??;
                search.local(probe, batch)
            }
            failback::Step::ReadSource(at, ours) => {
                target.offset = at;
                let client = cluster
                    .connection(leader)
                    .await
                    .map_err(|e| e.to_string())?;
                let theirs = source::first_batch(client, &target)
                    .await
                    .map_err(|e| format!("reading the source: {e}"))?;
                search.source(at, ours, theirs)
            }
            failback::Step::Done(offset) => return Ok(offset),
        };
    }
}

/// Records a partition's progress, and publishes its lag.
fn record(
    broker: &Broker,
    mirror: &str,
    partition: &Partition,
    source_end: Option<u64>,
    state: &str,
) {
    let progress = broker.mirror_progress().record(
        mirror,
        (&partition.topic, partition.index),
        source_end,
        partition.log().log_end_offset(),
        state,
        broker.now_ms(),
    );
    let labels = labels(mirror, &partition.topic, partition.index);
    let metrics = &broker.metrics().mirror;
    metrics
        .lag_records
        .get_or_create(&labels)
        .set(progress.lag_records as i64);
    metrics
        .lag_seconds
        .get_or_create(&labels)
        .set(progress.lag_seconds);
}

/// One fetch from each source leader of the partitions in `led`, and the
/// appends; whether every partition was answered without an error.
async fn fetch_round(
    broker: &Broker,
    mirror: &str,
    cluster: &mut Cluster,
    led: &[Led],
    skip_to: &mut HashMap<(String, i32), u64>,
) -> Result<bool, ClientError> {
    let mut by_leader: BTreeMap<i32, Vec<(&Led, Target, u64)>> = BTreeMap::new();
    let mut clean = true;
    for l in led {
        let p = &l.partition;
        if let Some(cut) = l.cut.filter(|cut| p.is_past_mirror_cut(cut)) {
            // The metadata's cut may reach this loop before the replica
            // manager made it: nothing is fetched for the log end before it.
            let partition = p.clone();
            match tokio::task::spawn_blocking(move || partition.apply_mirror_cut(&cut)).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    record(broker, mirror, p, None, &format!("cannot cut: {error}"));
                    clean = false;
                    continue;
                }
                Err(_) => continue,
            }
        }
        let key = (p.topic.clone(), p.index);
        let end = p.log().log_end_offset();
        let offset = skip_to
            .get(&key)
            .copied()
            .filter(|&o| o > end)
            .unwrap_or(end);
        match cluster.leader_of(&p.topic, p.index).await {
            Ok(leader) => by_leader.entry(leader).or_default().push((
                l,
                Target {
                    topic: p.topic.clone(),
                    topic_id: p.topic_id,
                    partition: p.index,
                    offset,
                },
                end,
            )),
            Err(ClientError::Kafka { code, .. })
                if code == ResponseError::UnknownTopicOrPartition.code() =>
            {
                record(broker, mirror, p, None, "source topic not found");
                clean = false;
            }
            Err(ClientError::Kafka { .. }) => {
                record(broker, mirror, p, None, "source partition has no leader");
                clean = false;
            }
            Err(error) => return Err(error),
        }
    }
    // Every source leader at once, each on its own connection: one slow
    // or idle leader (a fetch waits up to FETCH_WAIT_MS there) holds up
    // none of the others.
    let leaders: BTreeSet<i32> = by_leader.keys().copied().collect();
    let mut clients: HashMap<i32, &mut Client> =
        cluster.connections(&leaders).await?.into_iter().collect();
    let rounds =
        futures::future::join_all(by_leader.into_iter().filter_map(|(leader, partitions)| {
            let client = clients.remove(&leader)?;
            Some(fetch_from_leader(broker, mirror, client, partitions))
        }))
        .await;
    let mut stale_leaders = false;
    for round in rounds {
        let round = round?;
        clean &= round.clean;
        stale_leaders |= round.stale_leaders;
        for (key, skip) in round.skips {
            match skip {
                Some(offset) => skip_to.insert(key, offset),
                None => skip_to.remove(&key),
            };
        }
    }
    if stale_leaders {
        cluster.metadata(None).await?;
    }
    Ok(clean)
}

/// What a fetch from one source leader came to.
struct LeaderRound {
    /// Every partition answered without an error.
    clean: bool,
    /// A partition's leader moved there: the metadata is to be read again.
    stale_leaders: bool,
    /// Where partitions fetch next when not at their log end (`None`: at
    /// it again).
    skips: Vec<((String, i32), Option<u64>)>,
}

/// One fetch of `partitions` (with the log end each was fetched for) from
/// their source leader, and the appends.
async fn fetch_from_leader(
    broker: &Broker,
    mirror: &str,
    client: &mut Client,
    partitions: Vec<(&Led, Target, u64)>,
) -> Result<LeaderRound, ClientError> {
    let targets: Vec<Target> = partitions.iter().map(|(_, t, _)| t.clone()).collect();
    let answers = source::fetch(client, &targets).await?;
    let mut round = LeaderRound {
        clean: true,
        stale_leaders: false,
        skips: Vec::new(),
    };
    for ((l, target, fetched_for), answer) in partitions.into_iter().zip(answers) {
        let Some(answer) = answer else {
            round.clean = false;
            continue;
        };
        let p = &l.partition;
        let key = (p.topic.clone(), p.index);
        let source_end = u64::try_from(answer.high_watermark).ok();
        let state = match answer.error {
            None => {
                let records = weir_log::batch::whole_batches(&answer.records);
                if records.is_empty() {
                    "mirroring".to_owned()
                } else {
                    let partition = p.clone();
                    let records = answer.records.slice(..records.len());
                    let epoch = l.leader_epoch;
                    let appended = tokio::task::spawn_blocking(move || {
                        partition.append_mirrored(&records, epoch, fetched_for)
                    })
                    .await;
                    match appended {
                        Ok(Ok(())) => {
                            round.skips.push((key, None));
                            "mirroring".to_owned()
                        }
                        Ok(Err(error)) => {
                            round.clean = false;
                            tracing::debug!(mirror, topic = p.topic, partition = p.index, %error, "cannot append mirrored records");
                            format!("cannot append: {error}")
                        }
                        Err(error) => format!("cannot append: {error}"),
                    }
                }
            }
            Some(ResponseError::OffsetOutOfRange) => {
                let start = u64::try_from(answer.log_start_offset).unwrap_or(0);
                if target.offset < start {
                    tracing::info!(mirror, topic = p.topic, partition = p.index, from = target.offset, to = start, "the source's retention passed the mirror: mirroring on from the source's log start");
                    round.skips.push((key, Some(start)));
                    "mirroring".to_owned()
                } else {
                    round.clean = false;
                    "the mirror is ahead of the source's log end".to_owned()
                }
            }
            Some(
                error @ (ResponseError::NotLeaderOrFollower
                | ResponseError::LeaderNotAvailable
                | ResponseError::FencedLeaderEpoch
                | ResponseError::UnknownLeaderEpoch),
            ) => {
                round.clean = false;
                round.stale_leaders = true;
                format!("source leader moving ({error:?})")
            }
            Some(ResponseError::UnknownTopicOrPartition | ResponseError::UnknownTopicId) => {
                round.clean = false;
                "source topic not found".to_owned()
            }
            Some(error) => {
                round.clean = false;
                format!("source error {error:?}")
            }
        };
        record(broker, mirror, p, source_end, &state);
    }
    Ok(round)
}

/// The copying of committed offsets, on the live broker with the lowest
/// id.
#[derive(Default)]
struct GroupSync {
    last: Option<Instant>,
    /// This cluster, as a client of its inter-broker listener.
    destination: Option<Cluster>,
    /// What was copied last, by (group, topic, partition): copied again
    /// only when it changes.
    copied: HashMap<(String, String, i32), i64>,
}

impl GroupSync {
    async fn sync(
        &mut self,
        broker: &Broker,
        image: &MetadataImage,
        mirror: &Mirror,
        source: &mut Cluster,
    ) -> Result<(), ClientError> {
        let Some(groups) = &mirror.groups else {
            return Ok(());
        };
        let pattern = regex::Regex::new(&format!("^(?:{groups})$"))
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let mirrored: HashSet<&str> = mirror
            .mirror_topics
            .values()
            .filter(|t| t.state == MirrorTopicState::Mirroring)
            .map(|t| t.name.as_str())
            .collect();
        // Every group of the source: each broker lists those it coordinates.
        let brokers = source.metadata(Some(&[])).await?.brokers;
        let mut chosen = Vec::new();
        for b in brokers {
            for group in source.connection(b.node_id).await?.list_groups().await? {
                if pattern.is_match(&group.group_id) {
                    let share = group.group_type.as_deref() == Some("share");
                    chosen.push((group.group_id, share));
                }
            }
        }
        if self.destination.is_none() {
            let me = image.broker(broker.node_id()).ok_or_else(|| {
                ClientError::InvalidArgument("this broker is not registered".into())
            })?;
            let config = weir_client::ClientConfig {
                client_id: format!("weir-mirror-{}-groups", mirror.name),
                ..weir_client::ClientConfig::default()
            };
            self.destination = Some(
                Cluster::connect_with_security(
                    &format!("{}:{}", me.host, me.port),
                    config,
                    broker.inter_broker_security().clone(),
                )
                .await?,
            );
        }
        let destination = self.destination.as_mut().expect("connected above");
        for (group, share) in chosen {
            let coordinator = source.any().find_coordinator(&group).await?;
            let at_source = source.connection(coordinator.node_id).await?;
            // Consumer groups' committed offsets; share groups' start
            // offsets (every record before one is acknowledged or archived).
            let positions: Vec<(String, i32, i64)> = if share {
                match at_source.share_group_offsets(&group).await {
                    Ok(offsets) => offsets
                        .into_iter()
                        .filter_map(|o| Some((o.topic, o.partition, o.start_offset.ok()??)))
                        .collect(),
                    // Gone meanwhile.
                    Err(ClientError::Kafka { .. }) => continue,
                    Err(error) => return Err(error),
                }
            } else {
                at_source
                    .offset_fetch(&group, None)
                    .await?
                    .into_iter()
                    .map(|c| (c.topic, c.partition, c.offset))
                    .collect()
            };
            let mut offsets = Vec::new();
            for (topic, partition, offset) in positions
                .into_iter()
                .filter(|(topic, _, _)| mirrored.contains(topic.as_str()))
            {
                // Never past what consumers here may read.
                let high_watermark = destination.list_offsets(&topic, partition, -1).await?;
                let offset = offset.min(high_watermark);
                let key = (group.clone(), topic.clone(), partition);
                if self.copied.get(&key) != Some(&offset) {
                    offsets.push((topic, partition, offset));
                }
            }
            if offsets.is_empty() {
                continue;
            }
            let here = destination.any().find_coordinator(&group).await?;
            let at_destination = destination.connection(here.node_id).await?;
            let copied = if share {
                at_destination
                    .alter_share_group_offsets(&group, &offsets)
                    .await
            } else {
                at_destination.offset_commit_simple(&group, &offsets).await
            };
            match copied {
                Ok(()) => {
                    tracing::debug!(
                        mirror = mirror.name,
                        group,
                        partitions = offsets.len(),
                        "copied committed offsets"
                    );
                    for (topic, partition, offset) in offsets {
                        self.copied
                            .insert((group.clone(), topic, partition), offset);
                    }
                }
                // Active members here: their own commits rule. (A share
                // group that does not exist here yet is not created: Kafka's
                // AlterShareGroupOffsets answers GROUP_ID_NOT_FOUND.)
                Err(ClientError::Kafka { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

/// The copying of the source's ACLs, on the live broker with the lowest
/// id, for a mirror that syncs them.
#[derive(Default)]
struct AclSync {
    last: Option<Instant>,
    /// The bindings it created here: those the source no longer has are
    /// removed again. (ACLs made here by other means are left alone.)
    copied: HashSet<weir_meta::AclBinding>,
    /// The last round failed, and said why.
    failing: bool,
}

impl AclSync {
    async fn sync(
        &mut self,
        broker: &Broker,
        image: &MetadataImage,
        mirror: &str,
        source: &mut Cluster,
    ) -> Result<(), String> {
        let listed = source
            .any()
            .describe_acls(&weir_client::AclFilter::any())
            .await
            .map_err(|e| format!("listing the source's ACLs: {e}"))?;
        let wanted: HashSet<weir_meta::AclBinding> = listed.iter().map(to_meta_binding).collect();
        let here: HashSet<&weir_meta::AclBinding> = image.acls().collect();
        let missing: Vec<weir_meta::AclBinding> = wanted
            .iter()
            .filter(|b| !here.contains(b))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let outcomes = broker
                .create_acls(missing.clone())
                .await
                .map_err(|e| e.to_string())?;
            for (binding, outcome) in missing.into_iter().zip(outcomes) {
                match outcome {
                    Ok(()) => {
                        self.copied.insert(binding);
                    }
                    Err(error) => {
                        tracing::warn!(mirror, ?binding, %error, "cannot copy an ACL of the source")
                    }
                }
            }
        }
        let gone: Vec<weir_meta::AclBinding> = self
            .copied
            .iter()
            .filter(|b| !wanted.contains(b))
            .cloned()
            .collect();
        if !gone.is_empty() {
            let filters = gone.iter().map(weir_meta::AclBinding::to_filter).collect();
            broker
                .delete_acls(filters)
                .await
                .map_err(|e| e.to_string())?;
            for binding in gone {
                self.copied.remove(&binding);
            }
        }
        Ok(())
    }
}

/// An ACL as the source listed it, as this cluster stores it.
fn to_meta_binding(acl: &weir_client::AclBinding) -> weir_meta::AclBinding {
    weir_meta::AclBinding {
        resource_type: weir_meta::ResourceType::from_code(acl.resource_type),
        resource_name: acl.resource_name.clone(),
        pattern_type: weir_meta::PatternType::from_code(acl.pattern_type),
        principal: acl.principal.clone(),
        host: acl.host.clone(),
        operation: weir_meta::AclOperation::from_code(acl.operation),
        permission: weir_meta::AclPermissionType::from_code(acl.permission_type),
    }
}

/// A source topic's config overrides that mirror topics take.
async fn source_configs(
    cluster: &mut Cluster,
    topic: &str,
) -> Result<BTreeMap<String, String>, ClientError> {
    Ok(cluster
        .any()
        .describe_configs(weir_client::ConfigResource::Topic(topic.to_owned()))
        .await?
        .into_iter()
        .filter(|c| c.source == ConfigSource::DynamicTopic)
        .filter(|c| !LOCAL_TOPIC_CONFIGS.contains(&c.name.as_str()))
        .filter_map(|c| Some((c.name, c.value?)))
        .collect())
}

/// Sets and removes the overrides of the mirrored topics here that the
/// source set or removed since (but [`LOCAL_TOPIC_CONFIGS`]).
async fn sync_configs(
    broker: &Broker,
    image: &MetadataImage,
    mirror: &Mirror,
    cluster: &mut Cluster,
) -> Result<(), String> {
    for (id, mirror_topic) in &mirror.mirror_topics {
        if mirror_topic.state != MirrorTopicState::Mirroring {
            continue;
        }
        let Some(here) = image.topic(&mirror_topic.name).filter(|t| t.id == *id) else {
            continue;
        };
        let wanted = match source_configs(cluster, &here.name).await {
            Ok(configs) => configs,
            // Deleted at the source: its partitions say so.
            Err(ClientError::Kafka { code, .. })
                if code == ResponseError::UnknownTopicOrPartition.code() =>
            {
                continue
            }
            Err(error) => return Err(format!("reading the configs of {}: {error}", here.name)),
        };
        let set: BTreeMap<String, String> = wanted
            .iter()
            .filter(|(key, value)| here.configs.get(*key) != Some(*value))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let delete: Vec<String> = here
            .configs
            .keys()
            .filter(|key| {
                !wanted.contains_key(*key) && !LOCAL_TOPIC_CONFIGS.contains(&key.as_str())
            })
            .cloned()
            .collect();
        if set.is_empty() && delete.is_empty() {
            continue;
        }
        match broker
            .alter_topic_configs(&here.name, set.clone(), delete.clone(), false)
            .await
        {
            Ok(()) => tracing::info!(
                mirror = mirror.name,
                topic = here.name,
                set = ?set.keys().collect::<Vec<_>>(),
                removed = ?delete,
                "took the source's config changes"
            ),
            // One topic's refusal (a value this cluster rejects) stops
            // none of the others.
            Err(error) => tracing::warn!(
                mirror = mirror.name,
                topic = here.name,
                %error,
                "cannot take the source's config changes"
            ),
        }
    }
    Ok(())
}

/// Creates the mirror topics the source has and this cluster lacks, and
/// adds the partitions the source added.
async fn sync_topics(
    broker: &Broker,
    mirror: &Mirror,
    cluster: &mut Cluster,
) -> Result<(), String> {
    let pattern = regex::Regex::new(&format!("^(?:{})$", mirror.topics))
        .map_err(|e| format!("invalid topic regex: {e}"))?;
    let metadata = cluster.metadata(None).await.map_err(|e| e.to_string())?;
    let image = broker.image();
    let mut creations = Vec::new();
    let mut taken_back = Vec::new();
    for topic in metadata
        .topics
        .iter()
        .filter(|t| !t.is_internal && pattern.is_match(&t.name))
    {
        match image.topic(&topic.name) {
            Some(here)
                if mirror
                    .mirror_topics
                    .get(&here.id)
                    .is_some_and(MirrorTopic::feeds) =>
            {
                let total = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                if total > here.partition_count() {
                    broker
                        .create_partitions(
                            &topic.name,
                            total,
                            None,
                            false,
                            CONTROLLER_CHANGE_TIMEOUT_MS,
                        )
                        .await
                        .map_err(|e| format!("adding partitions to {}: {e}", topic.name))?;
                    tracing::info!(
                        mirror = mirror.name,
                        topic = topic.name,
                        partitions = total,
                        "added the partitions the source added"
                    );
                }
            }
            // The source's own topic, once mirrored the other way and
            // failed over (or mirrored from here and failed over there),
            // writable here: taken back.
            Some(here)
                if here.id == topic.topic_id
                    && image.mirror_feeding(here.id).is_none()
                    && !mirror.mirror_topics.contains_key(&here.id) =>
            {
                taken_back.push((here.id, here.name.clone()));
            }
            // A topic of this name that the mirror did not create, or that
            // failed over, is left alone.
            Some(_) => {
                tracing::debug!(
                    mirror = mirror.name,
                    topic = topic.name,
                    "a topic of the source's name exists here; not mirrored"
                );
            }
            None if topic.topic_id.is_nil() => {
                return Err(format!(
                    "the source names no topic id for {} (Metadata before v10)",
                    topic.name
                ));
            }
            None => {
                let configs = source_configs(cluster, &topic.name)
                    .await
                    .map_err(|e| format!("reading the configs of {}: {e}", topic.name))?
                    .into_iter()
                    .collect();
                let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                let creation = broker
                    .topic_creation(
                        &image,
                        NewTopic {
                            name: topic.name.clone(),
                            partitions,
                            replication_factor: None,
                            assignment: None,
                            configs,
                        },
                    )
                    .map_err(|e| format!("placing {}: {e}", topic.name))?;
                creations.push(TopicCreation {
                    id: topic.topic_id,
                    ..creation
                });
            }
        }
    }
    if !taken_back.is_empty() {
        broker
            .submit(
                Command::FailBackMirrorTopics {
                    mirror: mirror.name.clone(),
                    topic_ids: taken_back.iter().map(|(id, _)| *id).collect(),
                },
                CONTROLLER_CHANGE_TIMEOUT_MS,
            )
            .await
            .map_err(|e| format!("taking topics back: {e}"))?;
        for (_, name) in &taken_back {
            tracing::info!(
                mirror = mirror.name,
                topic = name,
                "failing back: the source has this topic (same topic id); it is read-only here from now on, cut where it and the source part, and mirrored from there"
            );
        }
    }
    if creations.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = creations.iter().map(|c| c.name.clone()).collect();
    let applied = broker
        .submit(
            Command::CreateMirrorTopics {
                mirror: mirror.name.clone(),
                topics: creations,
            },
            CONTROLLER_CHANGE_TIMEOUT_MS,
        )
        .await
        .map_err(|e| e.to_string())?;
    if let Applied::TopicsCreated(outcomes) = applied {
        for (name, outcome) in names.iter().zip(outcomes) {
            match outcome {
                Ok(()) => {
                    tracing::info!(mirror = mirror.name, topic = name, "created a mirror topic")
                }
                Err(rejected) => {
                    let error: weir_meta::MetaError = rejected.into();
                    tracing::warn!(mirror = mirror.name, topic = name, %error, "cannot create the mirror topic");
                }
            }
        }
    }
    Ok(())
}

/// Mirror administration, as `weir mirror` and `/v1/mirrors` ask for it.
impl Broker {
    /// Defines a mirror; answered once committed.
    pub async fn create_mirror(&self, mirror: Mirror) -> Result<(), BrokerError> {
        let invalid = |what: &str, error: regex::Error| {
            // The regex crate's message spans lines: one line, for a log
            // line or an HTTP answer.
            let message = error.to_string();
            let reason: Vec<&str> = message.lines().map(str::trim).collect();
            weir_meta::MetaError::InvalidRequest(format!(
                "invalid {what} regex: {}",
                reason.join(" ")
            ))
        };
        regex::Regex::new(&mirror.topics).map_err(|e| invalid("topic", e))?;
        if let Some(groups) = &mirror.groups {
            regex::Regex::new(groups).map_err(|e| invalid("group", e))?;
        }
        source::security(&mirror).map_err(|reason| {
            weir_meta::MetaError::InvalidRequest(format!("invalid source config: {reason}"))
        })?;
        self.submit(
            Command::CreateMirror { mirror },
            CONTROLLER_CHANGE_TIMEOUT_MS,
        )
        .await
        .map(|_| ())
    }

    /// Removes a mirror; its topics stay, writable.
    pub async fn delete_mirror(&self, name: &str) -> Result<(), BrokerError> {
        self.submit(
            Command::DeleteMirror {
                name: name.to_owned(),
            },
            CONTROLLER_CHANGE_TIMEOUT_MS,
        )
        .await
        .map(|_| ())
    }

    /// Starts the failover of `topics` of a mirror (all with none):
    /// answered once committed; each topic takes writes once the leaders
    /// of its partitions reported their cuts.
    pub async fn fail_over_mirror(
        &self,
        name: &str,
        topics: Vec<String>,
    ) -> Result<(), BrokerError> {
        self.submit(
            Command::FailOverMirror {
                mirror: name.to_owned(),
                topics,
            },
            CONTROLLER_CHANGE_TIMEOUT_MS,
        )
        .await
        .map(|_| ())
    }

    /// Pauses or resumes a mirror's fetching.
    pub async fn set_mirror_paused(&self, name: &str, paused: bool) -> Result<(), BrokerError> {
        self.submit(
            Command::SetMirrorPaused {
                name: name.to_owned(),
                paused,
            },
            CONTROLLER_CHANGE_TIMEOUT_MS,
        )
        .await
        .map(|_| ())
    }
}
