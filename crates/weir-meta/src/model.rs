//! The records the metadata image is made of.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A broker as it registered itself.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    /// The broker id (`node.id`), never negative.
    pub id: i32,
    /// The host of the inter-broker listener: other brokers fetch from
    /// this one there.
    pub host: String,
    /// The port of the inter-broker listener.
    pub port: u16,
    /// Every Kafka listener's advertised address, by listener name: a
    /// client is told the addresses of the listener it connected to.
    /// Registrations written before this field existed read as empty (one
    /// listener, at `host` and `port`).
    #[serde(default)]
    pub listeners: Vec<ListenerEndpoint>,
    /// The rack, for rack-aware replica placement.
    pub rack: Option<String>,
    /// A fresh id for every start of the broker process: the controller
    /// tells a restarted broker from the one it replaces by it (heartbeats
    /// of an older incarnation are not accepted). Registrations written
    /// before this field existed read as the nil UUID.
    #[serde(default)]
    pub incarnation: uuid::Uuid,
    /// The incarnation of the broker's previous process when that process
    /// stopped cleanly (it closed and synced every log, then said so in its
    /// data directory); `None` after a crash or on first start. Kafka's
    /// `previousBrokerEpoch` (KIP-966): a restart that cannot prove a clean
    /// stop may have lost unsynced records, so the broker leaves the
    /// eligible leader replicas. Registrations written before this field
    /// existed read as `None`.
    #[serde(default)]
    pub previous_incarnation: Option<uuid::Uuid>,
}

/// Where a broker's listener is reached.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ListenerEndpoint {
    /// The listener name (`PLAINTEXT`, `SASL_SSL`, …).
    pub name: String,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: u16,
}

impl BrokerInfo {
    /// The broker's advertised address on the listener `name`; `None` when
    /// it has no such listener. A registration without listeners has one,
    /// at `host` and `port`, whatever its name.
    pub fn endpoint(&self, name: &str) -> Option<(&str, u16)> {
        if self.listeners.is_empty() {
            return Some((&self.host, self.port));
        }
        self.listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| (l.host.as_str(), l.port))
    }
}

/// One partition of a topic.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition index, from 0.
    pub partition: i32,
    /// The broker id of the leader, or -1 when the partition has none
    /// (offline).
    pub leader: i32,
    /// Bumped on every leader change (to -1 included); 0 at creation.
    pub leader_epoch: i32,
    /// Bumped on every change of the leader or of the ISR, so that a
    /// request to change the partition can be checked against the state
    /// it was based on; 0 at creation.
    #[serde(default)]
    pub partition_epoch: i32,
    /// The assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// During a reassignment: the replicas being added (in `replicas`
    /// already, catching up) and those to drop once every added one is in
    /// the ISR.
    #[serde(default)]
    pub adding: Vec<i32>,
    /// See `adding`.
    #[serde(default)]
    pub removing: Vec<i32>,
    /// The in-sync replicas. Without eligible leader replicas it is never
    /// empty: the last member stays even when its broker is fenced, so
    /// that it can lead again when it returns (a clean election). With
    /// them, the last member leaves like any other and waits in `elr`.
    pub isr: Vec<i32>,
    /// Eligible leader replicas (KIP-966, Kafka's `eligibleLeaderReplicas`):
    /// replicas that left the ISR while it was below the topic's
    /// `min.insync.replicas`. The high watermark cannot advance while the
    /// ISR is that small, so they hold every committed record and may lead
    /// cleanly once the ISR is empty. Ascending, never overlapping `isr`;
    /// empty while the feature `eligible.leader.replicas.version` is 0.
    /// Partitions written before this field existed read as empty.
    #[serde(default)]
    pub elr: Vec<i32>,
    /// The leader the partition had when its ISR became empty (Kafka's
    /// `lastKnownElr`, which holds the last known leader in Kafka 4.x):
    /// when ISR and ELR are both empty, it may lead again once it is back,
    /// at the risk of records it had not synced. Cleared when the
    /// partition has a leader.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
}

/// A topic.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic name.
    pub name: String,
    /// The topic id, fixed at creation and never reused.
    pub id: uuid::Uuid,
    /// The partitions, indexed by partition number.
    pub partitions: Vec<PartitionInfo>,
    /// Topic-level config overrides only; everything else takes its default
    /// from the broker (see [`crate::topic_config`]).
    pub configs: BTreeMap<String, String>,
    /// An internal topic (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
}

impl TopicInfo {
    /// The partition with this index.
    pub fn partition(&self, partition: i32) -> Option<&PartitionInfo> {
        usize::try_from(partition)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }

    /// The number of partitions.
    pub fn partition_count(&self) -> i32 {
        // The image never lets a topic grow past i32::MAX partitions.
        self.partitions.len() as i32
    }

    /// The number of replicas of each partition.
    pub fn replication_factor(&self) -> usize {
        self.partitions.first().map_or(0, |p| p.replicas.len())
    }
}
