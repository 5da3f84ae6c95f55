//! The commands that change the metadata image, and what applying one
//! returns.
//!
//! A command carries everything `apply` needs (ids, assignments, counts),
//! so applying the same sequence of commands to two images always gives
//! the same result: they are the entries of the replicated log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::acl::{AclBinding, AclBindingFilter, AclError};
use crate::client_quota::QuotaAlteration;
use crate::error::MetaError;
use crate::model::BrokerInfo;
use crate::raft::Rejection;
use crate::remote_log::RemoteSegment;
use crate::scram::{ScramError, ScramUpsertion};

/// One change to the metadata image.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Adds a broker, or replaces the registration with the same id, and
    /// unfences it: it rejoins the ISR of its partitions and leads those
    /// that had no leader and can have it (see `DESIGN.md`).
    RegisterBroker(BrokerInfo),
    /// The broker missed its heartbeats: it is fenced, leaves the ISRs
    /// (except as the last member) and its leaderships move to other
    /// in-sync replicas.
    FenceBroker {
        /// The broker id; it must be registered.
        id: i32,
    },
    /// The broker is about to stop cleanly. The same effect as
    /// [`Command::FenceBroker`]: its leaderships move away before it goes.
    ControlledShutdown {
        /// The broker id; it must be registered.
        id: i32,
    },
    /// Replicas of the broker take no writes: their log directory failed
    /// or its volume is full. As for [`Command::FenceBroker`], but only in these
    /// partitions and without fencing the broker, it leaves their ISRs
    /// and its leaderships move to other in-sync replicas. A partition
    /// whose only in-sync replica it is stays as it is (unless the topic
    /// allows unclean election); partitions unknown, or where the broker
    /// holds no replica, are skipped.
    ReplicasOffline {
        /// The broker id; it must be registered.
        broker: i32,
        /// The partitions as (topic, partition).
        partitions: Vec<(String, i32)>,
    },
    /// Moves leadership back to each partition's preferred replica (the
    /// first one) where it is in sync and not fenced, and gives a leader
    /// to leaderless partitions that have an unfenced in-sync replica.
    ElectPreferredLeaders,
    /// Creates a topic with an explicit replica assignment.
    CreateTopic {
        /// The topic name.
        name: String,
        /// The topic id, chosen by the proposer (never nil, never reused).
        id: uuid::Uuid,
        /// The number of partitions; must equal `replicas.len()`.
        partitions: i32,
        /// Per partition, the replica broker ids; the first is the leader.
        replicas: Vec<Vec<i32>>,
        /// Topic-level config overrides.
        configs: BTreeMap<String, String>,
        /// Whether this is an internal topic.
        internal: bool,
    },
    /// Creates topics, each on its own as Kafka's controller creates the
    /// topics of one CreateTopics request: each is checked as
    /// [`Command::CreateTopic`] is, against the image with the topics
    /// before it in the list, and one that fails is left out while the
    /// others are created. Never rejected: each topic's outcome is in
    /// [`Applied::TopicsCreated`]. One entry of the replicated log for
    /// them all, so a proposer bounds its size (see
    /// [`TopicCreation::weight`]).
    CreateTopics {
        /// The topics, in request order.
        topics: Vec<TopicCreation>,
    },
    /// Deletes a topic.
    DeleteTopic {
        /// The topic name.
        name: String,
    },
    /// Adds partitions to a topic.
    CreatePartitions {
        /// The topic name.
        name: String,
        /// One replica list per added partition, in partition order.
        new_replicas: Vec<Vec<i32>>,
    },
    /// Sets and removes topic-level config overrides.
    AlterTopicConfigs {
        /// The topic name.
        name: String,
        /// Overrides to set (replacing any previous value).
        set: BTreeMap<String, String>,
        /// Overrides to remove (back to the broker default).
        delete: Vec<String>,
    },
    /// Sets and removes dynamic broker configs (Kafka's BROKER config
    /// resource): those of one broker, or with `broker: None` the
    /// cluster-wide default that every broker without its own value takes
    /// (Kafka's resource name ""). The broker proposing the change
    /// validates names and values; the image only stores them, so that a
    /// broker of another version can still replay the log.
    AlterBrokerConfigs {
        /// The broker id, or `None` for the cluster-wide default.
        broker: Option<i32>,
        /// Configs to set (replacing any previous value).
        set: BTreeMap<String, String>,
        /// Configs to remove (back to the next level of precedence).
        delete: Vec<String>,
    },
    /// Sets and removes the configs of a group (Kafka's GROUP config
    /// resource, e.g. `consumer.session.timeout.ms`). As for broker
    /// configs, the proposing broker validates names and values.
    AlterGroupConfigs {
        /// The group id.
        group: String,
        /// Configs to set (replacing any previous value).
        set: BTreeMap<String, String>,
        /// Configs to remove (back to the broker's value).
        delete: Vec<String>,
    },
    /// A partition leader changes the ISR (shrinking it when followers lag,
    /// growing it when one has caught up), checked against the leader and
    /// the epochs it computed the change from.
    AlterPartition {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition: i32,
        /// The broker asking: must be the current leader.
        leader: i32,
        /// Its leader epoch: must be the current one.
        leader_epoch: i32,
        /// The partition epoch the change was computed from: must be
        /// the current one.
        partition_epoch: i32,
        /// The new ISR.
        isr: Vec<i32>,
    },
    /// Moves a partition to `replicas` (or, with `None`, cancels its
    /// reassignment): the new replicas are added first and the old ones
    /// dropped once every new one has caught up into the ISR, so the
    /// partition stays available throughout.
    ReassignPartition {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition: i32,
        /// The target replicas, preferred leader first; `None` cancels.
        replicas: Option<Vec<i32>>,
    },
    /// Sets the cluster id, once: the same id again is accepted, another
    /// refused.
    SetClusterId {
        /// The id, Kafka-style (22 characters of URL-safe base64).
        id: String,
    },
    /// Finalizes a feature at a level (Kafka's FeatureLevelRecord, written
    /// by UpdateFeatures and at bootstrap); level 0 turns it off. The
    /// broker proposing it checks the name and the levels it supports.
    /// Taking `eligible.leader.replicas.version` to 1 gives the cluster a
    /// `min.insync.replicas` of its own (1 unless set) and drops the
    /// brokers' own values; taking it to 0 clears every partition's
    /// eligible leader replicas.
    SetFeatureLevel {
        /// The feature name, e.g. `eligible.leader.replicas.version`.
        name: String,
        /// The level, at least 0.
        level: i16,
    },
    /// Hands out the block `[next_producer_id, next_producer_id + count)`.
    AllocateProducerIds {
        /// The block size, at least 1.
        count: i64,
    },
    /// Sets and removes client quotas (Kafka's AlterClientQuotas), all
    /// entities at once. The broker proposing the change checks quota
    /// names and value types; the image checks the entities and that
    /// values are positive.
    AlterClientQuotas {
        /// The changes, at most one per entity.
        alterations: Vec<QuotaAlteration>,
    },
    /// Deletes and sets users' SCRAM credentials (Kafka's
    /// AlterUserScramCredentials). Never rejected: each user's outcome is
    /// in [`Applied::ScramAlterations`], and a user with an error keeps
    /// its credentials as they were.
    AlterUserScramCredentials {
        /// The credentials to delete, as (user, mechanism).
        deletions: Vec<(String, weir_auth::ScramMechanism)>,
        /// The credentials to set.
        upsertions: Vec<ScramUpsertion>,
    },
    /// Creates ACLs (Kafka's CreateAcls). Never rejected: each binding's
    /// outcome is in [`Applied::AclsCreated`]; one that exists already is
    /// a success that changes nothing.
    CreateAcls {
        /// The bindings, in request order.
        bindings: Vec<AclBinding>,
    },
    /// Deletes the ACLs each filter matches (Kafka's DeleteAcls). Never
    /// rejected: each filter's outcome, with the bindings it removed, is in
    /// [`Applied::AclsDeleted`].
    DeleteAcls {
        /// The filters, in request order.
        filters: Vec<AclBindingFilter>,
    },
    /// An ElectLeaders request: a preferred election moves each partition's
    /// leadership to its preferred replica (the first) when that one is in
    /// sync and not fenced; an unclean election gives a leaderless
    /// partition an in-sync replica if one is live, else any live replica,
    /// alone in the ISR. Never rejected: each partition's outcome is in
    /// [`Applied::Elections`].
    ElectLeaders {
        /// Unclean (Kafka's election type 1) rather than preferred (0).
        unclean: bool,
        /// The partitions as (topic, partition), in request order; `None`
        /// for every partition of every topic.
        partitions: Option<Vec<(String, i32)>>,
    },
    /// A partition leader starts copying a segment to remote storage
    /// (KIP-405's COPY_SEGMENT_STARTED); readers ignore it until
    /// [`Command::RemoteSegmentCopyFinished`]. The segment's `broker` and
    /// `leader_epoch` must be the partition's current leader and leader
    /// epoch, its state `CopyStarted`, its id new to the partition, its
    /// offsets and leader epochs in order.
    RemoteSegmentCopyStarted {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The segment being copied.
        segment: RemoteSegment,
    },
    /// The leader that started a copy has finished it
    /// (COPY_SEGMENT_FINISHED): from now on the segment serves reads. The
    /// segment must be in `CopyStarted`, and `broker` and `leader_epoch`
    /// must be both the partition's current leader and epoch and the ones
    /// the copy started under: a new leader never vouches for an upload it
    /// did not make.
    RemoteSegmentCopyFinished {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The segment's id.
        id: uuid::Uuid,
        /// The broker asking: must be the current leader.
        broker: i32,
        /// Its leader epoch: must be the current one.
        leader_epoch: i32,
    },
    /// The leader gives segments up (DELETE_SEGMENT_STARTED), for retention
    /// or DeleteRecords: they stop serving reads while their objects are
    /// removed, and the remote log start offset rises to `log_start_offset`
    /// if that is higher (it never falls). Each id must be in the
    /// partition, in any state (a copy never finished is deleted too, and
    /// asking again is harmless); `ids` may be empty when only the log start
    /// moves (DeleteRecords below the local log start).
    RemoteSegmentsDeleteStarted {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The segments to delete.
        ids: Vec<uuid::Uuid>,
        /// The new remote log start offset, if it moves.
        log_start_offset: Option<u64>,
        /// The broker asking: must be the current leader.
        broker: i32,
        /// Its leader epoch: must be the current one.
        leader_epoch: i32,
    },
    /// A broker removed the segments' objects from the store: their entries
    /// go (DELETE_SEGMENT_FINISHED). Each must be in `DeleteStarted`; ids
    /// the partition does not hold are skipped, so a retry is harmless. Any
    /// broker may send it (one cleaning up after an earlier leader does):
    /// objects already deleted cannot be read again, whoever says so. A
    /// partition left without segments keeps only its log start offset,
    /// and only if it is above 0.
    RemoteSegmentsDeleteFinished {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The segments whose objects are gone.
        ids: Vec<uuid::Uuid>,
    },
    /// A topic deleted while it had remote segments has no objects left in
    /// the store: it leaves [`MetadataImage::purging_topics`]. An id not
    /// there changes nothing, so a retry is harmless.
    ///
    /// [`MetadataImage::purging_topics`]: crate::MetadataImage::purging_topics
    RemoteTopicPurged {
        /// The deleted topic's id.
        topic_id: uuid::Uuid,
    },
    /// Defines a mirror of a source cluster (KIP-1279), with no topics
    /// yet; rejected if the name is taken or invalid.
    CreateMirror {
        /// The mirror, without mirror topics.
        mirror: crate::Mirror,
    },
    /// Removes a mirror: the topics it fed stay, no longer read-only.
    DeleteMirror {
        /// The mirror's name.
        name: String,
    },
    /// Pauses or resumes a mirror's fetching; its topics stay read-only.
    SetMirrorPaused {
        /// The mirror's name.
        name: String,
        /// Paused (true) or running.
        paused: bool,
    },
    /// Starts the failover of a mirror's topics (all of them when `topics`
    /// is empty): fetching stops and each partition's leader reports where
    /// its log is cut ([`Command::MirrorPartitionStopped`]). Rejected for an
    /// unknown mirror, or a topic it does not feed.
    FailOverMirror {
        /// The mirror's name.
        mirror: String,
        /// The topics, by name; none: all that it feeds.
        topics: Vec<String>,
    },
    /// A failing-over mirror partition's leader reports its last stable
    /// offset, where its log is cut, and the largest producer id its
    /// records carry. The last report of a topic makes it writable: each
    /// partition gets a new leader epoch (so that followers drop what lies
    /// past the cut), and producer ids are handed out above those of the
    /// mirrored records. Checked against the partition's current leader
    /// and leader epoch.
    MirrorPartitionStopped {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The leader reporting.
        broker: i32,
        /// Its leader epoch.
        leader_epoch: i32,
        /// Its last stable offset.
        last_mirrored_offset: u64,
        /// The largest producer id of its records; -1: none.
        max_producer_id: i64,
    },
    /// A mirror takes back writable topics here that carry its source
    /// topics' ids (failback): each becomes read-only and its partitions'
    /// leaders report where their logs and the source's part
    /// ([`Command::MirrorPartitionPrepared`]). A topic failed over from
    /// another mirror leaves that one. Rejected for an unknown mirror or
    /// topic, a topic a mirror feeds, or one this mirror failed over.
    FailBackMirrorTopics {
        /// The mirror's name.
        mirror: String,
        /// The topics, by id.
        topic_ids: Vec<uuid::Uuid>,
    },
    /// A taken-back partition's leader reports the offset below which its
    /// log holds the source's batches. The last report of a topic starts
    /// its mirroring: each partition gets a new leader epoch, and every
    /// replica drops what it holds past its offset from an older epoch.
    /// Checked against the partition's current leader and leader epoch.
    MirrorPartitionPrepared {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The leader reporting.
        broker: i32,
        /// Its leader epoch.
        leader_epoch: i32,
        /// Where its log and the source's part.
        agreed_offset: u64,
    },
    /// Creates topics for a mirror, each with its source topic's id, as
    /// [`Command::CreateTopics`] creates them (one failing is left out), and
    /// makes each one created a read-only topic the mirror feeds. Rejected
    /// only if the mirror does not exist.
    CreateMirrorTopics {
        /// The mirror's name.
        mirror: String,
        /// The topics, as the source has them.
        topics: Vec<TopicCreation>,
    },
}

/// What a successfully applied command produced.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The command changed the image; nothing to report.
    Done,
    /// The producer ids `[first, first + count)` now belong to the caller.
    ProducerIds {
        /// The first id of the block.
        first: i64,
        /// The block size.
        count: i64,
    },
    /// What [`Command::CreateTopics`] did with each topic, in its order:
    /// created, or why not.
    TopicsCreated(Vec<Result<(), TopicRejected>>),
    /// What [`Command::ElectLeaders`] did to each partition: those it
    /// named, in its order, or with `partitions: None` every partition, by
    /// topic name then index.
    Elections(Vec<Election>),
    /// What [`Command::AlterUserScramCredentials`] did for each user named,
    /// in the order users first appear in the command (deletions, then
    /// upsertions).
    ScramAlterations(Vec<(String, Result<(), ScramError>)>),
    /// What [`Command::CreateAcls`] did with each binding, in its order.
    AclsCreated(Vec<Result<(), AclError>>),
    /// What [`Command::DeleteAcls`] did with each filter, in its order: the
    /// bindings it removed, in their sorted order. A binding two filters
    /// match is reported under the first.
    AclsDeleted(Vec<Result<Vec<AclBinding>, AclError>>),
}

/// One topic of [`Command::CreateTopics`]: what [`Command::CreateTopic`]
/// carries.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TopicCreation {
    /// The topic name.
    pub name: String,
    /// The topic id, chosen by the proposer (never nil, never reused).
    pub id: uuid::Uuid,
    /// Per partition, the replica broker ids; the first is the leader.
    pub replicas: Vec<Vec<i32>>,
    /// Topic-level config overrides.
    pub configs: BTreeMap<String, String>,
    /// Whether this is an internal topic.
    pub internal: bool,
}

impl TopicCreation {
    /// The most weight one [`Command::CreateTopics`] carries: Kafka's
    /// controller writes at most 10 000 records in one batch
    /// (`QuorumController.MAX_RECORDS_PER_BATCH`).
    pub const BATCH_WEIGHT: usize = 10_000;

    /// How many of Kafka's metadata records the topic's creation takes:
    /// one for the topic, one per partition, one per config override.
    pub fn weight(&self) -> usize {
        1 + self.replicas.len() + self.configs.len()
    }

    /// [`Command::CreateTopics`] commands creating `topics`, in order,
    /// each within [`BATCH_WEIGHT`](Self::BATCH_WEIGHT) (a topic heavier
    /// than that goes alone), so that one log entry stays bounded
    /// whatever a request asks for.
    pub fn batches(topics: Vec<TopicCreation>) -> Vec<Command> {
        let mut batches = Vec::new();
        let mut batch: Vec<TopicCreation> = Vec::new();
        let mut weight = 0;
        for topic in topics {
            if !batch.is_empty() && weight + topic.weight() > Self::BATCH_WEIGHT {
                batches.push(std::mem::take(&mut batch));
                weight = 0;
            }
            weight += topic.weight();
            batch.push(topic);
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
        batches
            .into_iter()
            .map(|topics| Command::CreateTopics { topics })
            .collect()
    }

    /// The same creation as a [`Command::CreateTopic`].
    pub fn into_command(self) -> Command {
        Command::CreateTopic {
            partitions: self.replicas.len() as i32,
            name: self.name,
            id: self.id,
            replicas: self.replicas,
            configs: self.configs,
            internal: self.internal,
        }
    }
}

/// Why [`Command::CreateTopics`] left a topic out: the error
/// [`Command::CreateTopic`] would have been rejected with, in a form that
/// travels in [`Applied`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TopicRejected(Rejection);

impl From<&MetaError> for TopicRejected {
    fn from(error: &MetaError) -> Self {
        Self(Rejection::from(error))
    }
}

impl From<TopicRejected> for MetaError {
    fn from(rejected: TopicRejected) -> Self {
        rejected.0.into()
    }
}

/// One partition's outcome of [`Command::ElectLeaders`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Election {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// What happened.
    pub outcome: ElectionOutcome,
}

/// How a partition's election ended, as Kafka's controller reports it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionOutcome {
    /// A new leader was elected.
    Elected,
    /// The wanted leader leads already (preferred), or the partition has
    /// a leader (unclean).
    NotNeeded,
    /// Preferred: the preferred replica is out of the ISR or fenced, and
    /// no other replica had to take a leaderless partition.
    PreferredLeaderNotAvailable,
    /// Unclean: no replica of the leaderless partition is live.
    EligibleLeadersNotAvailable,
    /// No topic of that name.
    UnknownTopic,
    /// The topic has no partition of that index.
    UnknownPartition,
}

impl ElectionOutcome {
    /// The Kafka error code of the partition's result.
    pub fn kafka_error_code(self) -> i16 {
        match self {
            ElectionOutcome::Elected => 0,
            ElectionOutcome::UnknownTopic | ElectionOutcome::UnknownPartition => 3, // UNKNOWN_TOPIC_OR_PARTITION
            ElectionOutcome::PreferredLeaderNotAvailable => 80, // PREFERRED_LEADER_NOT_AVAILABLE
            ElectionOutcome::EligibleLeadersNotAvailable => 83, // ELIGIBLE_LEADERS_NOT_AVAILABLE
            ElectionOutcome::NotNeeded => 84,                   // ELECTION_NOT_NEEDED
        }
    }
}

impl Election {
    /// The error message of the partition's result in Kafka's words (its
    /// controller sends the error's default message, or names the unknown
    /// topic or partition); `None` for success.
    pub fn message(&self) -> Option<String> {
        let (topic, partition) = (&self.topic, self.partition);
        match self.outcome {
            ElectionOutcome::Elected => None,
            ElectionOutcome::NotNeeded => {
                Some("Leader election not needed for topic partition.".to_owned())
            }
            ElectionOutcome::PreferredLeaderNotAvailable => {
                Some("The preferred leader was not available.".to_owned())
            }
            ElectionOutcome::EligibleLeadersNotAvailable => {
                Some("Eligible topic partition leaders are not available.".to_owned())
            }
            ElectionOutcome::UnknownTopic => Some(format!("No such topic as {topic}")),
            ElectionOutcome::UnknownPartition => {
                Some(format!("No such partition as {topic}-{partition}"))
            }
        }
    }
}
