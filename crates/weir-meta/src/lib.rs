//! `weir-meta`: the cluster metadata of Weir.
//!
//! Brokers, topics, partitions (replicas, ISR, leader epochs), topic config
//! overrides, dynamic broker configs, client quotas, SCRAM credentials,
//! ACLs, the producer id allocator and the segments of tiered storage form
//! one [`MetadataImage`]. It changes only by applying [`Command`]s, and
//! applying is deterministic: no I/O, no clock, no randomness. Anything
//! that varies (topic ids, replica assignments, block sizes) is decided by
//! whoever proposes the command and travels inside it. That is what lets
//! the commands become the entries of a replicated (Raft) log later: every
//! node that applies the same entries holds the same image.
//!
//! ```
//! use std::collections::BTreeMap;
//! use weir_meta::{Applied, BrokerInfo, Command, MetadataImage};
//!
//! let mut image = MetadataImage::default();
//! image.apply(&Command::RegisterBroker(BrokerInfo {
//!     id: 1, host: "localhost".into(), port: 9092, rack: None,
//!     incarnation: uuid::Uuid::from_u128(1), listeners: vec![],
//!     previous_incarnation: None,
//! }))?;
//! image.apply(&Command::CreateTopic {
//!     name: "orders".into(),
//!     id: uuid::Uuid::from_u128(7),
//!     partitions: 2,
//!     replicas: vec![vec![1], vec![1]],
//!     configs: BTreeMap::from([("retention.ms".into(), "3600000".into())]),
//!     internal: false,
//! })?;
//! assert_eq!(image.topic("orders").unwrap().partitions.len(), 2);
//! assert_eq!(
//!     image.apply(&Command::AllocateProducerIds { count: 1000 })?,
//!     Applied::ProducerIds { first: 0, count: 1000 },
//! );
//! assert_eq!(image.applied_index(), 3);
//! # Ok::<(), weir_meta::MetaError>(())
//! ```
//!
//! The modules:
//!
//! - [`MetadataImage`] validates and applies commands, and answers queries;
//! - [`acl`] is Kafka's ACL model (resource types, pattern types,
//!   operations, permissions, bindings and filters) with the checks of its
//!   controller;
//! - [`Authorizer`] decides requests from the ACLs as Kafka's
//!   `StandardAuthorizer` does, without I/O;
//! - [`topic_config`] is the registry of Kafka topic configs (types,
//!   defaults, broker synonyms, validation);
//! - [`topic_name`] holds Kafka's topic naming rules;
//! - [`RemoteLog`] is a partition's segments in remote storage (tiered
//!   storage, KIP-405), each [`RemoteSegment`] moved through its life by
//!   commands its partition leader proposes;
//! - [`Controller`] makes the image the state machine of a Raft quorum of
//!   controllers (openraft, kept inside the crate), with its log, vote and
//!   snapshots on local disk and its RPC over TCP. Any controller takes
//!   commands and broker heartbeats and sends them on to the leader; the
//!   leader fences brokers that stop heartbeating and moves leadership
//!   back to preferred replicas. Brokers that are not controllers hold the
//!   image as Raft learners ([`Controller::start_learner`]): they follow
//!   the committed log without voting;
//! - [`legacy_store`] reads the metadata of a data directory written
//!   before the controller quorum existed, once, to import it.
//!
//! Formats and crash reasoning are specified in `DESIGN.md` next to this
//! crate.
#![deny(missing_docs)]

pub mod acl;
mod authorizer;
mod client_quota;
mod command;
mod dir_lock;
mod disk;
mod error;
mod image;
pub mod legacy_store;
mod log_file;
mod mirror;
mod model;
mod partition_change;
mod placement;
mod raft;
mod remote_log;
mod scram;
pub mod topic_config;
pub mod topic_name;

pub use acl::{
    AclBinding, AclBindingFilter, AclError, AclOperation, AclPermissionType, PatternType,
    ResourceType,
};
pub use authorizer::Authorizer;
pub use client_quota::{ClientQuotas, EntityName, QuotaAlteration, QuotaEntity, QuotaValue};
pub use command::{Applied, Command, Election, ElectionOutcome, TopicCreation, TopicRejected};
pub use dir_lock::{DirLock, DirLockError, LOCK_FILE};
pub use error::MetaError;
pub use image::{MetadataImage, ELR_FEATURE};
pub use mirror::{Mirror, MirrorCut, MirrorTopic, MirrorTopicState};
pub use model::{BrokerInfo, ListenerEndpoint, PartitionInfo, TopicInfo};
pub use raft::{
    Controller, ControllerConfig, ControllerError, ControllerIo, ControllerSasl, ControllerStatus,
    ControllerStream, ControllerTransport, Handshake, HeartbeatReply, PeerAuthorization, Plaintext,
    Role, SubmitError, ANONYMOUS,
};
pub use remote_log::{RemoteLog, RemoteSegment, RemoteSegmentState};
pub use scram::{ScramError, ScramUpsertion};
/// The credential types the image stores, from `weir-auth`.
pub use weir_auth::{ScramCredential, ScramMechanism};
