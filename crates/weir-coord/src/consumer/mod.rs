//! Consumer groups, KIP-848 protocol (ConsumerGroupHeartbeat): the sans-IO
//! core of one group.
//!
//! [`ConsumerGroupEngine`] follows Apache Kafka's group coordinator for
//! "consumer" groups: the server computes a target assignment with a
//! server-side assignor whenever the group epoch moves, and each member
//! reconciles towards its part of it through its heartbeats, revoking before
//! anyone else is given what it owned.
//!
//! The coordinator task that owns the sockets, the clock, the timers and the
//! group's `__consumer_offsets` partition drives it:
//!
//! - [`ConsumerGroupEngine::handle`] takes an [`Event`] (a decoded heartbeat,
//!   a fired timer, a metadata change, each with the time) and the cluster's
//!   topics as a [`TopicLookup`], and returns an [`Output`]: the heartbeat
//!   response, the [`Record`]s to append, the timers to arm or disarm.
//!   Records first, response once they are durable.
//! - A new coordinator rebuilds the group with [`ConsumerGroupEngine::replay`]
//!   of its records, then [`ConsumerGroupEngine::on_loaded`] and an
//!   [`Event::MetadataChanged`].
//! - Offset commits and fetches are checked with
//!   [`ConsumerGroupEngine::validate_offset_commit`] and
//!   [`ConsumerGroupEngine::validate_offset_fetch`]; ConsumerGroupDescribe
//!   reads [`ConsumerGroupEngine::describe`].
//!
//! ```
//! use weir_coord::consumer::*;
//! use uuid::Uuid;
//!
//! let mut topics = TopicsImage::new();
//! topics.insert("orders", Uuid::from_u128(1), 3);
//!
//! let mut group = ConsumerGroupEngine::new("g", ConsumerGroupConfig::default());
//! let out = group.handle(
//!     Event::Heartbeat {
//!         now_ms: 0,
//!         request: HeartbeatRequest {
//!             member_id: "m1".into(),
//!             member_epoch: 0,
//!             rebalance_timeout_ms: 30_000,
//!             subscribed_topic_names: Some(vec!["orders".into()]),
//!             owned_partitions: Some(Assignment::new()),
//!             ..HeartbeatRequest::default()
//!         },
//!         fresh_member_id: Uuid::new_v4(),
//!     },
//!     &topics,
//! );
//! // Append out.records, apply out.timers, then answer with out.response.
//! let response = out.response.unwrap().unwrap();
//! assert_eq!(response.member_epoch, 1);
//! assert_eq!(response.assignment.unwrap()[&Uuid::from_u128(1)].len(), 3);
//!
//! // A new coordinator continues from the records.
//! let mut loaded = ConsumerGroupEngine::new("g", ConsumerGroupConfig::default());
//! for record in &out.records {
//!     loaded.replay(record).unwrap();
//! }
//! assert_eq!(loaded.describe(), group.describe());
//! ```
//!
//! Left to the caller: regex validation (INVALID_REGULAR_EXPRESSION) and
//! authorization, the group's existence across group types (a classic group
//! of the same id), topic names in ConsumerGroupDescribe (assignments are by
//! topic id), OffsetCommit's version check, and encoding records and responses.
//!
//! Where this differs from Kafka, on purpose:
//!
//! - Topic changes bump the group epoch when [`Event::MetadataChanged`] is
//!   handled, rather than at the next heartbeat after a metadata refresh
//!   deadline; there is no periodic refresh.
//! - A subscription regex is resolved through the [`TopicLookup`] whenever the
//!   subscription is recomputed, instead of Kafka 4.x's asynchronous resolution
//!   and its ConsumerGroupRegularExpression records.
//! - The `uniform` assignor is its own algorithm with Kafka's guarantees
//!   (balance first, then stickiness; see its module), so its choices can
//!   differ from Kafka's; assignors ignore subscribed topics missing from the
//!   metadata instead of failing.
//! - A member rejoining with epoch 0 under its existing member id is accepted
//!   (KAFKA-19233).
//!
//! Not modelled: members using the classic protocol inside a consumer group
//! (JoinGroup/SyncGroup against it, online upgrade and downgrade), per-group
//! configuration overrides, rack-aware assignment, and group expiration.

mod assignor;
mod classic;
mod command;
mod config;
mod describe;
mod engine;
mod error;
mod event;
mod member;
mod range;
mod reconciliation;
mod record;
mod state;
mod target;
mod topics;
mod uniform;

#[cfg(test)]
mod tests;

pub use assignor::{GroupSpec, MemberSpec, ServerAssignor, TopicSpec};
pub use classic::{
    ClassicGroupImage, ClassicJoin, ClassicJoined, ClassicMemberImage, ClassicSynced,
    CONSUMER_PROTOCOL_TYPE,
};
pub use command::{HeartbeatResponse, Output, TimerCommand, TimerKey};
pub use config::{ConsumerGroupConfig, MigrationPolicy, TimingError};
pub use describe::{ConsumerGroupState, GroupDescription, MemberDescription};
pub use engine::{ConsumerGroupEngine, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
pub use error::ConsumerGroupError;
pub use event::{Event, HeartbeatRequest};
pub use member::{ClassicMetadata, ClassicProtocol, Member, MemberMetadata};
pub use reconciliation::{reconcile, CurrentAssignment, MemberState, Target};
pub use record::Record;
pub use state::ReplayError;
pub use target::{build_target_assignment, TargetAssignment};
pub use topics::{
    assignment_from, contains, is_subset, overlaps, partition_count, Assignment, TopicLookup,
    TopicMetadata, TopicRef, TopicsImage,
};
