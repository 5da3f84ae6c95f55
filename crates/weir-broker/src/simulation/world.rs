//! The simulated cluster: three nodes, each with its own in-memory file
//! system; a controller that is the real metadata image; and a network of
//! messages in flight that a seed delivers in any order.
//!
//! Each node drives the broker's own pieces — [`Partition`], its leadership
//! engine, [`OffsetStore`], [`take_leadership`], the follower's divergence
//! check — the way its request handlers and fetchers do, one step at a
//! time. What a handler would wait for (a write's replication) is checked
//! after every step instead.
//!
//! The producers' topic is in tiered storage: its leader copies sealed
//! segments to an object store (a map that no crash touches) through the
//! controller's remote-segment commands, local retention keeps two
//! segments, and a follower behind its leader's local log restarts from the
//! copy below it, as [`remote_restart`] decides.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use weir_log::batch::BatchHeader;
use weir_log::sim::{CrashMode, SimStorage};
use weir_log::testing::BatchBuilder;
use weir_log::{LogConfig, LogError};
use weir_meta::{
    BrokerInfo, Command, MetadataImage, PartitionInfo, RemoteSegment, RemoteSegmentState,
};

use crate::coordinator::ShardContext;
use crate::groups::offsets::{commit_entries, GroupShard, OffsetChange};
use crate::partition::{LogEnv, Partition, ReplicatedWrite};
use crate::remote::aux_state::AuxState;
use crate::replica::manager::take_leadership;
use crate::replica::remote_restart::{self, CopyBelow, RemoteRestart};
use crate::replica::{apply_fetch, divergence_point, Fetched};
use weir_coord::records::offsets::CommittedOffset;

/// The topic producers write to, and the group coordinator's topic.
pub(super) const TOPIC: &str = "t";
pub(super) const OFFSETS: &str = "__consumer_offsets";
pub(super) const TOPICS: [&str; 2] = [TOPIC, OFFSETS];
/// The one group committing offsets (of partition 0 of [`TOPIC`]).
pub(super) const GROUP: &str = "g";
pub(super) const NODES: [i32; 3] = [1, 2, 3];
const MIN_INSYNC_REPLICAS: usize = 2;
/// Kafka's `replica.lag.time.max.ms`.
const LAG_MS: i64 = 30_000;
const FETCH_MAX_BYTES: usize = 4096;
/// The producers' topic keeps two segments locally.
const SEGMENT_BYTES: u64 = 2048;
const LOCAL_RETENTION_BYTES: i64 = 4096;

/// How the nodes make appends durable, chosen per seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Durability {
    /// `flush.messages=1`: every append is synced before it is answered.
    FlushEach,
    /// Kafka's default: appends stay in the page cache; replication is the
    /// defence, so a crash loses a node's unsynced tail.
    PageCache,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Up,
    /// SIGSTOP: memory intact, nothing runs, messages to it wait.
    Paused,
    /// Crashed: only what its storage synced survives a restart.
    Down,
}

/// A batch the producer was told is written (acks=all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AckedBatch {
    pub(super) base_offset: u64,
    pub(super) last_offset: u64,
    pub(super) crc: u32,
}

/// What a client is waiting to hear about.
enum Written {
    Batch(AckedBatch),
    /// An offset commit of this offset.
    Commit(i64),
}

struct PendingWrite {
    node: i32,
    incarnation: u64,
    write: ReplicatedWrite,
    what: Written,
}

/// A partition this node follows, and under which leader epoch.
struct Followed {
    leader: i32,
    epoch: i32,
    /// Whether the divergent suffix check has been done for this epoch.
    truncated: bool,
}

pub(super) struct Node {
    pub(super) id: i32,
    pub(super) status: Status,
    /// Bumped at every restart: messages to an older process are lost.
    pub(super) incarnation: u64,
    storage: SimStorage,
    /// The metadata this node last took.
    image: MetadataImage,
    /// Its replica of partition 0 of each topic; empty while down.
    pub(super) partitions: BTreeMap<&'static str, Arc<Partition>>,
    follows: BTreeMap<&'static str, Followed>,
    pub(super) offsets: GroupShard,
    /// The high watermarks as last checkpointed (a file that survives).
    checkpoint: BTreeMap<&'static str, u64>,
}

impl Node {
    /// A node that has never run: empty storage, nothing open.
    fn new(id: i32) -> Self {
        Self {
            id,
            status: Status::Down,
            incarnation: 0,
            storage: SimStorage::new(),
            image: MetadataImage::new(),
            partitions: BTreeMap::new(),
            follows: BTreeMap::new(),
            offsets: GroupShard::default(),
            checkpoint: BTreeMap::new(),
        }
    }

    pub(super) fn partition(&self, topic: &str) -> Option<&Arc<Partition>> {
        self.partitions.get(topic)
    }

    /// Whether this node's replica believes it leads `topic`.
    pub(super) fn leads(&self, topic: &str) -> bool {
        self.partition(topic)
            .is_some_and(|p| p.replica_state().leader == self.id)
    }
}

/// A leader's answer to a follower's Fetch.
enum FetchReply {
    Records {
        bytes: Vec<u8>,
        high_watermark: u64,
    },
    OutOfRange {
        log_start: u64,
        high_watermark: u64,
    },
    /// OFFSET_MOVED_TO_TIERED_STORAGE, with the leader's local log start
    /// (which a fetcher asks with ListOffsets).
    MovedToTieredStorage {
        local_start: u64,
    },
    Refused(i16),
}

/// The objects of one copy in the object store.
pub(super) struct CopyObjects {
    /// (base offset, last offset, CRC) of each batch of its `.log`.
    pub(super) batches: Vec<(u64, u64, u32)>,
    epochs: String,
    producer_snapshot: String,
}

/// A copy whose start is recorded and whose objects are written, not yet
/// finished.
struct CopyUnderway {
    node: i32,
    incarnation: u64,
    leader_epoch: i32,
    id: uuid::Uuid,
    objects: CopyObjects,
}

enum Message {
    Fetched {
        to: i32,
        incarnation: u64,
        topic: &'static str,
        epoch: i32,
        reply: FetchReply,
    },
    /// The leader's OffsetForLeaderEpoch answer for epoch `asked`.
    EpochEnd {
        to: i32,
        incarnation: u64,
        topic: &'static str,
        epoch: i32,
        asked: i32,
        reply: Result<(i32, i64), i16>,
    },
    /// A leader's ISR change, on its way to the controller.
    AlterIsr {
        from: i32,
        incarnation: u64,
        topic: &'static str,
        command: Command,
    },
    /// The controller's answer to it.
    AlterIsrAnswer {
        to: i32,
        incarnation: u64,
        topic: &'static str,
        accepted: bool,
    },
}

impl Message {
    /// The node that must be up for the message to arrive (`None`: the
    /// controller, always up).
    fn recipient(&self) -> Option<i32> {
        match self {
            Message::Fetched { to, .. }
            | Message::EpochEnd { to, .. }
            | Message::AlterIsrAnswer { to, .. } => Some(*to),
            Message::AlterIsr { .. } => None,
        }
    }
}

/// A tiny deterministic generator: the seed decides everything.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(super) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

pub(super) struct World {
    pub(super) rng: Rng,
    pub(super) durability: Durability,
    pub(super) now_ms: i64,
    pub(super) controller: MetadataImage,
    pub(super) nodes: Vec<Node>,
    network: Vec<Message>,
    pending: Vec<PendingWrite>,
    /// Every batch and offset commit a client was told is durable.
    pub(super) acked_batches: Vec<AckedBatch>,
    pub(super) acked_commit: Option<i64>,
    /// The object store of the remote tier, by copy id.
    pub(super) remote_objects: BTreeMap<uuid::Uuid, CopyObjects>,
    copy_underway: Option<CopyUnderway>,
    /// How many times a replica restarted from a copy.
    pub(super) remote_restarts: usize,
    next_value: i64,
    /// What happened, step by step, for the failure report.
    pub(super) trace: Vec<String>,
}

pub(super) fn topic_id(topic: &str) -> uuid::Uuid {
    uuid::Uuid::from_u128(if topic == TOPIC { 1 } else { 2 })
}

fn registration(id: i32, incarnation: u64) -> BrokerInfo {
    BrokerInfo {
        id,
        host: format!("node-{id}"),
        port: 9092,
        rack: None,
        incarnation: uuid::Uuid::from_u128(((id as u128) << 64) | incarnation as u128),
        previous_incarnation: None,
        listeners: Vec::new(),
    }
}

impl World {
    pub(super) fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let durability = if rng.below(2) == 0 {
            Durability::FlushEach
        } else {
            Durability::PageCache
        };
        let mut controller = MetadataImage::new();
        for id in NODES {
            controller
                .apply(&Command::RegisterBroker(registration(id, 0)))
                .expect("registration");
        }
        let configs = BTreeMap::from([(
            "min.insync.replicas".to_owned(),
            MIN_INSYNC_REPLICAS.to_string(),
        )]);
        for (topic, replicas) in [(TOPIC, vec![1, 2, 3]), (OFFSETS, vec![2, 3, 1])] {
            controller
                .apply(&Command::CreateTopic {
                    name: topic.to_owned(),
                    id: topic_id(topic),
                    partitions: 1,
                    replicas: vec![replicas],
                    configs: configs.clone(),
                    internal: topic == OFFSETS,
                })
                .expect("topic creation");
        }
        let mut world = Self {
            rng,
            durability,
            now_ms: 1_000_000,
            controller,
            nodes: Vec::new(),
            network: Vec::new(),
            pending: Vec::new(),
            acked_batches: Vec::new(),
            acked_commit: None,
            remote_objects: BTreeMap::new(),
            copy_underway: None,
            remote_restarts: 0,
            next_value: 1,
            trace: vec![format!("seed {seed}: {durability:?}")],
        };
        for id in NODES {
            let mut node = Node::new(id);
            world.open(&mut node);
            world.nodes.push(node);
        }
        for id in NODES {
            world.take_metadata(id);
        }
        world
    }

    pub(super) fn node(&self, id: i32) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    fn node_mut(&mut self, id: i32) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    fn log(&mut self, line: String) {
        self.trace.push(line);
    }

    fn log_config(&self, topic: &str) -> LogConfig {
        let tiered = topic == TOPIC;
        LogConfig {
            segment_bytes: SEGMENT_BYTES,
            flush_messages: match self.durability {
                Durability::FlushEach => 1,
                Durability::PageCache => u64::MAX,
            },
            remote_storage_enable: tiered,
            local_retention_bytes: if tiered { LOCAL_RETENTION_BYTES } else { -2 },
            ..LogConfig::default()
        }
    }

    /// Opens the node's replicas from its storage (at start and restart),
    /// and its view of the group offsets from them.
    fn open(&self, node: &mut Node) {
        let env = LogEnv {
            storage: Arc::new(node.storage.clone()),
            clock: Arc::new(weir_log::SystemClock),
            on_failure: None,
        };
        let dir = PathBuf::from(format!("/weir-simulation/node-{}", node.id));
        for topic in TOPICS {
            let partition = Partition::open_in(
                &env,
                &dir,
                topic,
                topic_id(topic),
                0,
                self.log_config(topic),
                node.checkpoint.get(topic).copied(),
            )
            .expect("recovery of a crashed replica");
            node.partitions.insert(topic, Arc::new(partition));
        }
        node.offsets =
            GroupShard::read(&node.partitions[OFFSETS]).expect("loading the group offsets");
        node.status = Status::Up;
    }

    /// The node takes the controller's metadata, as a broker's replica
    /// manager does: it leads or follows each partition as it says.
    pub(super) fn take_metadata(&mut self, id: i32) {
        let image = self.controller.clone();
        let now = self.now_ms;
        let node = self.node_mut(id);
        if node.status == Status::Down {
            return;
        }
        node.image = image.clone();
        let mut changed = false;
        for topic in TOPICS {
            let p = image
                .topic(topic)
                .and_then(|t| t.partition(0))
                .expect("the topics exist")
                .clone();
            let partition = node.partitions[topic].clone();
            partition
                .remote()
                .set(topic == TOPIC, image.remote_log(topic_id(topic), 0));
            let (before, state) = take_leadership(id, &partition, &p, MIN_INSYNC_REPLICAS, now);
            changed |= before != state;
            if p.leader >= 0 && p.leader != id {
                let same = node
                    .follows
                    .get(topic)
                    .is_some_and(|f| f.leader == p.leader && f.epoch == p.leader_epoch);
                if !same {
                    node.follows.insert(
                        topic,
                        Followed {
                            leader: p.leader,
                            epoch: p.leader_epoch,
                            truncated: false,
                        },
                    );
                }
            } else {
                node.follows.remove(topic);
            }
            if topic == OFFSETS && state.leader == id && before.leader != id {
                node.offsets = GroupShard::read(&partition).expect("reading the group offsets");
            }
        }
        if !changed {
            return;
        }
        let led: Vec<String> = TOPICS
            .iter()
            .filter(|t| self.node(id).leads(t))
            .map(|t| {
                format!(
                    "{t}@{}",
                    self.node(id).partitions[t].replica_state().leader_epoch
                )
            })
            .collect();
        self.log(format!("node {id} takes the metadata, leads {led:?}"));
    }

    fn controller_partition(&self, topic: &str) -> PartitionInfo {
        self.controller
            .topic(topic)
            .and_then(|t| t.partition(0))
            .expect("the topics exist")
            .clone()
    }

    /// The node a client would send to: the leader the controller names,
    /// mostly, or any node (a client with stale metadata).
    fn client_target(&mut self, topic: &str) -> i32 {
        let leader = self.controller_partition(topic).leader;
        if leader > 0 && self.rng.below(4) != 0 {
            leader
        } else {
            self.rng.pick(&NODES)
        }
    }

    /// A producer sends one batch with acks=all.
    pub(super) fn produce(&mut self) {
        let id = self.client_target(TOPIC);
        let node = self.node(id);
        if node.status != Status::Up {
            return;
        }
        let partition = node.partitions[TOPIC].clone();
        let incarnation = node.incarnation;
        let state = partition.replica_state();
        let isr_size = partition.leader_isr().map_or(0, |isr| isr.len());
        if state.leader != id || isr_size < state.min_insync_replicas {
            self.log(format!("produce to node {id}: refused ({state:?})"));
            return;
        }
        let value = self.next_value;
        self.next_value += 1;
        let count = 1 + self.rng.below(3);
        // An idempotent producer per batch: every replica must come to
        // remember each, also one restarted from the remote tier.
        let batch = BatchBuilder::new(count)
            .timestamp(value)
            .producer(value, 0, 0)
            .build();
        let crc = BatchHeader::parse(&batch, 0).expect("a built batch").crc();
        match partition.append_in_place(&batch, state.leader_epoch) {
            Ok(appended) => {
                self.log(format!(
                    "produce to node {id}: offsets {}..={} at epoch {}",
                    appended.base_offset, appended.last_offset, state.leader_epoch
                ));
                self.pending.push(PendingWrite {
                    node: id,
                    incarnation,
                    write: ReplicatedWrite::of(partition, &appended),
                    what: Written::Batch(AckedBatch {
                        base_offset: appended.base_offset,
                        last_offset: appended.last_offset,
                        crc,
                    }),
                });
            }
            Err(error) => self.log(format!("produce to node {id}: {error}")),
        }
    }

    /// A consumer commits the next offset of its partition to the group's
    /// coordinator.
    pub(super) fn commit(&mut self) {
        let id = self.client_target(OFFSETS);
        let now = self.now_ms;
        let offset = self.next_value;
        self.next_value += 1;
        let node = self.node(id);
        if node.status != Status::Up || !node.leads(OFFSETS) {
            return;
        }
        let partition = node.partitions[OFFSETS].clone();
        let incarnation = node.incarnation;
        let change = OffsetChange {
            topic: TOPIC.to_owned(),
            partition: 0,
            value: Some(CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: now,
            }),
        };
        // Written as the coordinator runtime writes an operation's records.
        let context = ShardContext {
            partition: &partition,
            leader_epoch: partition.replica_state().leader_epoch,
        };
        let records = commit_entries(GROUP, &[change]);
        let written = crate::coordinator::append(
            &mut self.node_mut(id).offsets,
            &context,
            &records,
            None,
            now,
        );
        match written {
            Ok(write) => {
                self.log(format!(
                    "commit {offset} to node {id} at offset {}",
                    write.until - 1
                ));
                self.pending.push(PendingWrite {
                    node: id,
                    incarnation,
                    write,
                    what: Written::Commit(offset),
                });
            }
            Err(error) => self.log(format!("commit {offset} to node {id}: {error}")),
        }
    }

    /// Answers every client whose write the in-sync replicas now hold (or
    /// that can no longer succeed), as the waiting handlers would.
    pub(super) fn answer_clients(&mut self) {
        let mut still = Vec::new();
        for pending in std::mem::take(&mut self.pending) {
            let node = self.node(pending.node);
            if node.incarnation != pending.incarnation || node.status == Status::Down {
                continue;
            }
            if node.status == Status::Paused {
                still.push(pending);
                continue;
            }
            // A produce waits as the Produce handler does, a commit as the
            // group coordinator's writes do.
            let outcome = match pending.what {
                Written::Batch(_) => pending
                    .write
                    .partition
                    .replication_outcome(pending.write.until, pending.node)
                    .map(|o| o.map_err(|(error, _)| error)),
                Written::Commit(_) => pending.write.outcome(pending.node),
            };
            match outcome {
                None => still.push(pending),
                Some(Err(_)) => {}
                Some(Ok(())) => match pending.what {
                    Written::Batch(batch) => {
                        self.trace.push(format!(
                            "acked offsets {}..={} by node {}",
                            batch.base_offset, batch.last_offset, pending.node
                        ));
                        self.acked_batches.push(batch);
                    }
                    Written::Commit(offset) => {
                        self.trace
                            .push(format!("acked commit {offset} by node {}", pending.node));
                        self.acked_commit = self.acked_commit.max(Some(offset));
                    }
                },
            }
        }
        self.pending = still;
    }

    /// A follower sends its leader one Fetch (or, first under a new leader
    /// epoch, an OffsetForLeaderEpoch); the leader handles it at once and
    /// its answer goes on the network.
    pub(super) fn fetch(&mut self, id: i32, topic: &'static str) {
        let now = self.now_ms;
        let node = self.node(id);
        let Some(followed) = node.follows.get(topic) else {
            return;
        };
        if node.status != Status::Up {
            return;
        }
        // One request at a time per leader, as a replica fetcher sends them.
        let waiting = self.network.iter().any(|m| match m {
            Message::Fetched { to, topic: t, .. } | Message::EpochEnd { to, topic: t, .. } => {
                *to == id && *t == topic
            }
            _ => false,
        });
        if waiting {
            return;
        }
        let (leader_id, epoch, truncated) = (followed.leader, followed.epoch, followed.truncated);
        let incarnation = node.incarnation;
        let mine = node.partitions[topic].clone();
        let leader = self.node(leader_id);
        if leader.status != Status::Up {
            return;
        }
        let served = leader
            .partitions
            .get(topic)
            .cloned()
            .ok_or(ResponseError::NotLeaderOrFollower.code())
            .and_then(|p| led_at_epoch(leader_id, p, epoch));
        if !truncated {
            let Some(latest) = mine.log().latest_epoch() else {
                self.node_mut(id)
                    .follows
                    .get_mut(topic)
                    .expect("followed")
                    .truncated = true;
                return;
            };
            let reply = served.map(|p| p.log().end_offset_for_epoch(latest.epoch));
            self.network.push(Message::EpochEnd {
                to: id,
                incarnation,
                topic,
                epoch,
                asked: latest.epoch,
                reply,
            });
            return;
        }
        let offset = mine.log().log_end_offset();
        let reply = match served {
            Err(code) => FetchReply::Refused(code),
            Ok(partition) => {
                if let Some(isr) = partition.follower_fetched(id, offset, now) {
                    self.propose_isr(leader_id, topic, isr);
                }
                let high_watermark = partition.high_watermark();
                let end = partition.log().log_end_offset();
                let local_start = partition.log().log_start_offset();
                let in_remote_tier = offset < local_start
                    && partition
                        .remote()
                        .log_start()
                        .is_some_and(|remote_start| offset >= remote_start);
                match partition.log().read(offset, FETCH_MAX_BYTES, end) {
                    _ if in_remote_tier => FetchReply::MovedToTieredStorage { local_start },
                    Ok(slice) => FetchReply::Records {
                        bytes: slice.to_bytes().expect("a read slice").to_vec(),
                        high_watermark,
                    },
                    Err(LogError::OffsetOutOfRange { .. }) => FetchReply::OutOfRange {
                        log_start: partition.log().log_start_offset(),
                        high_watermark,
                    },
                    Err(_) => FetchReply::Refused(ResponseError::KafkaStorageError.code()),
                }
            }
        };
        self.network.push(Message::Fetched {
            to: id,
            incarnation,
            topic,
            epoch,
            reply,
        });
    }

    /// The leader's ISR change goes to the controller, based on the
    /// metadata the leader has, as `Broker::alter_isr` sends it.
    fn propose_isr(&mut self, leader: i32, topic: &'static str, isr: Vec<i32>) {
        let node = self.node(leader);
        let partition = node.partitions[topic].clone();
        let current = node
            .image
            .topic(topic)
            .and_then(|t| t.partition(0))
            .cloned()
            .expect("the topics exist");
        if partition.leader_isr().as_deref() != Some(current.isr.as_slice()) {
            partition.isr_change_failed();
            return;
        }
        let incarnation = node.incarnation;
        self.log(format!("node {leader} proposes ISR {isr:?} for {topic}"));
        self.network.push(Message::AlterIsr {
            from: leader,
            incarnation,
            topic,
            command: Command::AlterPartition {
                topic: topic.to_owned(),
                partition: 0,
                leader,
                leader_epoch: current.leader_epoch,
                partition_epoch: current.partition_epoch,
                isr,
            },
        });
    }

    /// How many messages are in flight to nodes that can take them.
    pub(super) fn deliverable(&self) -> Vec<usize> {
        (0..self.network.len())
            .filter(|i| {
                self.network[*i]
                    .recipient()
                    .is_none_or(|to| self.node(to).status != Status::Paused)
            })
            .collect()
    }

    /// Delivers message `index` of the network.
    pub(super) fn deliver(&mut self, index: usize) {
        match self.network.remove(index) {
            Message::Fetched {
                to,
                incarnation,
                topic,
                epoch,
                reply,
            } => {
                let Some(partition) = self.following(to, incarnation, topic, epoch, true) else {
                    return;
                };
                let fetched = match &reply {
                    FetchReply::Records {
                        bytes,
                        high_watermark,
                    } => Fetched::Records {
                        records: bytes,
                        high_watermark: *high_watermark,
                    },
                    FetchReply::OutOfRange {
                        log_start,
                        high_watermark,
                    } => Fetched::OutOfRange {
                        log_start: *log_start,
                        high_watermark: *high_watermark,
                    },
                    FetchReply::MovedToTieredStorage { local_start } => {
                        match self.remote_restart(to, &partition, *local_start) {
                            Some(restart) => Fetched::MovedToTieredStorage(restart),
                            None => return,
                        }
                    }
                    FetchReply::Refused(code) => {
                        self.log(format!("node {to}: fetch of {topic} refused with {code}"));
                        return;
                    }
                };
                match apply_fetch(&partition, fetched) {
                    Ok(check_again) => {
                        if let (true, Some(f)) =
                            (check_again, self.node_mut(to).follows.get_mut(topic))
                        {
                            f.truncated = false;
                        }
                    }
                    Err(error) => self.log(format!("node {to} cannot apply {topic}: {error}")),
                }
            }
            Message::EpochEnd {
                to,
                incarnation,
                topic,
                epoch,
                asked,
                reply,
            } => {
                let Some(partition) = self.following(to, incarnation, topic, epoch, false) else {
                    return;
                };
                let Ok((leader_epoch, leader_end)) = reply else {
                    return;
                };
                let end = divergence_point(&partition, asked, leader_epoch, leader_end);
                if end < partition.log().log_end_offset() {
                    self.log(format!(
                        "node {to} truncates {topic} from {} to {end}",
                        partition.log().log_end_offset()
                    ));
                    partition.truncate_to(end).expect("truncation");
                }
                if let Some(f) = self.node_mut(to).follows.get_mut(topic) {
                    f.truncated = true;
                }
            }
            Message::AlterIsr {
                from,
                incarnation,
                topic,
                command,
            } => {
                let accepted = self.controller.apply(&command).is_ok();
                self.log(format!(
                    "controller: ISR change of node {from} for {topic}: accepted {accepted}"
                ));
                self.network.push(Message::AlterIsrAnswer {
                    to: from,
                    incarnation,
                    topic,
                    accepted,
                });
            }
            Message::AlterIsrAnswer {
                to,
                incarnation,
                topic,
                accepted,
            } => {
                let node = self.node(to);
                if node.incarnation != incarnation || node.status == Status::Down {
                    return;
                }
                if accepted {
                    // `Broker::submit` brings the replicas in line with
                    // the image its change made.
                    self.take_metadata(to);
                } else {
                    node.partitions[topic].isr_change_failed();
                }
            }
        }
    }

    /// The node's replica of `topic` if the node is still the process, and
    /// still follows under `epoch`, that the message was for.
    fn following(
        &self,
        to: i32,
        incarnation: u64,
        topic: &str,
        epoch: i32,
        truncated: bool,
    ) -> Option<Arc<Partition>> {
        let node = self.node(to);
        if node.status == Status::Down || node.incarnation != incarnation {
            return None;
        }
        let followed = node.follows.get(topic)?;
        (followed.epoch == epoch && followed.truncated == truncated)
            .then(|| node.partitions[topic].clone())
    }

    /// Time passes; each leader drops the followers that lagged too long
    /// from its ISR, and each node checkpoints its high watermarks.
    pub(super) fn tick(&mut self) {
        self.now_ms += 1 + self.rng.below(12_000) as i64;
        let now = self.now_ms;
        for id in NODES {
            if self.node(id).status != Status::Up {
                continue;
            }
            for topic in TOPICS {
                let partition = self.node(id).partitions[topic].clone();
                if let Some(isr) = partition.lagging_isr(now, LAG_MS) {
                    self.propose_isr(id, topic, isr);
                }
                let high_watermark = partition.high_watermark();
                self.node_mut(id).checkpoint.insert(topic, high_watermark);
                match partition.enforce_retention() {
                    Ok(outcome) if outcome.deleted_segments > 0 => self.log(format!(
                        "node {id}: local retention of {topic} moves its log start to {}",
                        outcome.log_start_offset
                    )),
                    Ok(_) => {}
                    Err(error) => self.log(format!("node {id}: retention of {topic}: {error}")),
                }
            }
        }
    }

    /// Where node `to` restarts its replica at its leader's local log
    /// start, with what the copy below it holds; `None` while its metadata
    /// does not show that copy.
    fn remote_restart(
        &mut self,
        to: i32,
        partition: &Partition,
        local_start: u64,
    ) -> Option<RemoteRestart> {
        match remote_restart::copy_below(&self.node(to).image, partition, local_start) {
            CopyBelow::Nothing => Some(RemoteRestart {
                local_start,
                aux: None,
            }),
            CopyBelow::NotYetKnown => {
                self.log(format!(
                    "node {to}: the copy below {local_start} is not in its metadata yet"
                ));
                None
            }
            CopyBelow::Copy(segment) => {
                let objects = &self.remote_objects[&segment.id];
                let aux = AuxState {
                    epochs: weir_log::parse_checkpoint(&objects.epochs).expect("a checkpoint"),
                    producer_snapshot: objects.producer_snapshot.clone().into(),
                };
                self.log(format!(
                    "node {to} restarts {TOPIC} at {local_start} from copy {}..={}",
                    segment.base_offset, segment.end_offset
                ));
                self.remote_restarts += 1;
                Some(remote_restart::with_copy(
                    partition,
                    local_start,
                    &segment,
                    aux,
                ))
            }
        }
    }

    /// The producers' topic's leader takes one step of the tiering task:
    /// it removes copies left unfinished (orphans), or finishes the copy it
    /// has underway, or starts copying its next sealed segment below the
    /// last stable offset. Each is a controller command checked against
    /// the leader and its epoch, as `broker::tiering` submits them.
    pub(super) fn tier(&mut self) {
        let leader = self.controller_partition(TOPIC).leader;
        if leader < 0 || self.node(leader).status != Status::Up {
            return;
        }
        let node = self.node(leader);
        let partition = node.partitions[TOPIC].clone();
        let incarnation = node.incarnation;
        let state = partition.replica_state();
        if state.leader != leader {
            return;
        }
        let epoch = state.leader_epoch;
        if let Some(copy) = self.copy_underway.take() {
            let command = Command::RemoteSegmentCopyFinished {
                topic_id: topic_id(TOPIC),
                partition: 0,
                id: copy.id,
                broker: copy.node,
                leader_epoch: copy.leader_epoch,
            };
            let finished = copy.node == leader
                && copy.incarnation == incarnation
                && self.controller.apply(&command).is_ok();
            self.log(format!(
                "node {} finishes copy {}: {finished}",
                copy.node, copy.id
            ));
            if finished {
                self.remote_objects.insert(copy.id, copy.objects);
                self.take_metadata(leader);
            }
            return;
        }
        let orphans: Vec<uuid::Uuid> = self
            .controller
            .remote_log(topic_id(TOPIC), 0)
            .map(|remote| {
                remote
                    .segments()
                    .filter(|s| s.state != RemoteSegmentState::CopyFinished)
                    .map(|s| s.id)
                    .collect()
            })
            .unwrap_or_default();
        if !orphans.is_empty() {
            let started = self
                .controller
                .apply(&Command::RemoteSegmentsDeleteStarted {
                    topic_id: topic_id(TOPIC),
                    partition: 0,
                    ids: orphans.clone(),
                    log_start_offset: None,
                    broker: leader,
                    leader_epoch: epoch,
                });
            if started.is_ok() {
                self.controller
                    .apply(&Command::RemoteSegmentsDeleteFinished {
                        topic_id: topic_id(TOPIC),
                        partition: 0,
                        ids: orphans.clone(),
                    })
                    .expect("a deletion that started finishes");
                self.log(format!("node {leader} removes orphan copies {orphans:?}"));
            }
            return;
        }
        let from = partition.remote().copied_below();
        let Ok(Some(sealed)) = partition
            .log()
            .sealed_segment_from(from, partition.last_stable_offset())
        else {
            return;
        };
        let producers = partition
            .producer_state_at(sealed.next_offset)
            .expect("the producer state at a sealed segment's end");
        let mut bytes = vec![0; sealed.size as usize];
        sealed
            .log
            .read_exact_at(&mut bytes, 0)
            .expect("a sealed segment reads");
        let mut batches = Vec::new();
        let mut rest = &bytes[..];
        while let Ok(header) = BatchHeader::parse(rest, 0) {
            batches.push((
                header.base_offset() as u64,
                header.last_offset() as u64,
                header.crc(),
            ));
            rest = &rest[header.total_size().min(rest.len())..];
        }
        let id = uuid::Uuid::from_u128(u128::from(self.rng.next()) | 1);
        let segment = RemoteSegment {
            id,
            base_offset: sealed.base_offset,
            end_offset: sealed.next_offset - 1,
            max_timestamp_ms: sealed.max_timestamp,
            size_bytes: sealed.size,
            leader_epochs: sealed.segment_epochs(),
            broker: leader,
            leader_epoch: epoch,
            event_ms: self.now_ms,
            state: RemoteSegmentState::CopyStarted,
        };
        let started = self.controller.apply(&Command::RemoteSegmentCopyStarted {
            topic_id: topic_id(TOPIC),
            partition: 0,
            segment,
        });
        self.log(format!(
            "node {leader} starts copying {}..={} at epoch {epoch}: {}",
            sealed.base_offset,
            sealed.next_offset - 1,
            started.is_ok()
        ));
        if started.is_ok() {
            self.copy_underway = Some(CopyUnderway {
                node: leader,
                incarnation,
                leader_epoch: epoch,
                id,
                objects: CopyObjects {
                    batches,
                    epochs: weir_log::format_checkpoint(&sealed.epochs),
                    producer_snapshot: producers.to_json(),
                },
            });
        }
    }

    /// Whether crashing `id` keeps Kafka's promise in reach: with appends
    /// in the page cache, an acknowledged record survives while one in-sync
    /// replica of its partition stays alive.
    pub(super) fn may_crash(&self, id: i32) -> bool {
        if self.node(id).status == Status::Down {
            return false;
        }
        if self.durability == Durability::FlushEach {
            return true;
        }
        // An ISR change it sent may still shrink the ISR to itself.
        let proposing = self
            .network
            .iter()
            .any(|m| matches!(m, Message::AlterIsr { from, .. } if *from == id));
        !proposing
            && TOPICS.iter().all(|topic| {
                let p = self.controller_partition(topic);
                !p.isr.contains(&id)
                    || p.isr
                        .iter()
                        .any(|m| *m != id && self.node(*m).status != Status::Down)
            })
    }

    /// Whether fencing `id` keeps Kafka's promise in reach: with appends in
    /// the page cache, an in-sync replica that crashed must not be left as
    /// the one to lead (it would come back without its unsynced tail).
    pub(super) fn may_fence(&self, id: i32) -> bool {
        if self.node(id).status == Status::Up || self.controller.is_fenced(id) {
            return false;
        }
        if self.durability == Durability::FlushEach {
            return true;
        }
        TOPICS.iter().all(|topic| {
            let p = self.controller_partition(topic);
            !p.isr.contains(&id)
                || p.isr.len() == 1
                || p.isr
                    .iter()
                    .any(|m| *m != id && self.node(*m).status != Status::Down)
        })
    }

    /// kill -9: unsynced writes may vanish or be torn.
    pub(super) fn crash(&mut self, id: i32) {
        let mode = if self.rng.below(2) == 0 {
            CrashMode::DropUnsynced
        } else {
            CrashMode::Torn {
                seed: self.rng.next(),
            }
        };
        self.log(format!("node {id} crashes ({mode:?})"));
        let node = self.node_mut(id);
        node.status = Status::Down;
        node.partitions.clear();
        node.follows.clear();
        node.offsets = GroupShard::default();
        node.storage.crash(mode);
    }

    /// The crashed node starts again: it recovers its logs and registers
    /// with a new incarnation, as `weir serve` does.
    pub(super) fn restart(&mut self, id: i32) {
        // Taken out while its replicas reopen, the node keeps its storage
        // and its checkpoint file.
        let mut node = std::mem::replace(self.node_mut(id), Node::new(id));
        node.incarnation += 1;
        self.open(&mut node);
        let incarnation = node.incarnation;
        *self.node_mut(id) = node;
        self.log(format!("node {id} restarts (incarnation {incarnation})"));
        self.register(id);
    }

    fn register(&mut self, id: i32) {
        let incarnation = self.node(id).incarnation;
        self.controller
            .apply(&Command::RegisterBroker(registration(id, incarnation)))
            .expect("registration");
        self.take_metadata(id);
    }

    pub(super) fn pause(&mut self, id: i32) {
        self.log(format!("node {id} pauses"));
        self.node_mut(id).status = Status::Paused;
    }

    /// SIGCONT: a node the controller fenced meanwhile registers again.
    pub(super) fn resume(&mut self, id: i32) {
        self.log(format!("node {id} resumes"));
        self.node_mut(id).status = Status::Up;
        if self.controller.is_fenced(id) {
            self.register(id);
        }
    }

    /// The controller stops hearing a node's heartbeats and fences it.
    pub(super) fn fence(&mut self, id: i32) {
        self.log(format!("controller fences node {id}"));
        self.controller
            .apply(&Command::FenceBroker { id })
            .expect("fencing a registered broker");
    }

    /// Brings every node back, as the cluster heals at the end of a run.
    pub(super) fn bring_back(&mut self) {
        for id in NODES {
            match self.node(id).status {
                Status::Down => self.restart(id),
                Status::Paused => self.resume(id),
                Status::Up => {}
            }
        }
    }

    /// One round of replication with nothing else going on: every node
    /// takes the metadata, every follower fetches, every message arrives.
    pub(super) fn replicate(&mut self) {
        for id in NODES {
            self.take_metadata(id);
        }
        for id in NODES {
            for topic in TOPICS {
                self.fetch(id, topic);
            }
        }
        while !self.network.is_empty() {
            self.deliver(0);
        }
        self.answer_clients();
        self.now_ms += 100;
    }

    /// The controller's view and every replica's log end and high
    /// watermark, for a failure report.
    pub(super) fn describe(&self) -> String {
        let mut lines = Vec::new();
        for topic in TOPICS {
            let p = self.controller_partition(topic);
            lines.push(format!(
                "{topic}: leader {} epoch {} isr {:?}, fenced {:?}",
                p.leader,
                p.leader_epoch,
                p.isr,
                self.controller.fenced_brokers().collect::<Vec<_>>()
            ));
            for node in &self.nodes {
                if let Some(partition) = node.partitions.get(topic) {
                    lines.push(format!(
                        "  node {} {:?}: log end {}, high watermark {}, {:?}",
                        node.id,
                        node.status,
                        partition.log().log_end_offset(),
                        partition.high_watermark(),
                        partition.replica_state()
                    ));
                }
            }
        }
        lines.join("\n")
    }

    /// Every partition has a leader, every replica is in its ISR and holds
    /// the leader's whole log, and the high watermark covers it.
    pub(super) fn converged(&self) -> bool {
        TOPICS.iter().all(|topic| {
            let p = self.controller_partition(topic);
            if p.leader < 0 || p.isr.len() != NODES.len() {
                return false;
            }
            let leader = &self.node(p.leader).partitions[topic];
            let end = leader.log().log_end_offset();
            leader.high_watermark() == end
                && NODES
                    .iter()
                    .all(|id| self.node(*id).partitions[topic].log().log_end_offset() == end)
        })
    }
}

/// The leader's checks on a follower's request, as the Fetch and
/// OffsetForLeaderEpoch handlers make them.
fn led_at_epoch(leader: i32, partition: Arc<Partition>, epoch: i32) -> Result<Arc<Partition>, i16> {
    let state = partition.replica_state();
    if state.leader != leader {
        return Err(ResponseError::NotLeaderOrFollower.code());
    }
    match epoch {
        e if e < state.leader_epoch => Err(ResponseError::FencedLeaderEpoch.code()),
        e if e > state.leader_epoch => Err(ResponseError::UnknownLeaderEpoch.code()),
        _ => Ok(partition),
    }
}
